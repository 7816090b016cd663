// How a pointwise op computes one element inside a generated kernel: its
// OpDef's `pointwise` function builds the op's scalar expression from the
// values of its inputs at the point, with the instructions of scalar_ops.def.
// The lowering (codegen/lower.cc) implements the builder over the kernel IR,
// so an op's kernel expression lives beside its shape rule and reference kernel.
#pragma once

#include <functional>
#include <vector>

#include "src/ir/dtype.h"
#include "src/ir/sym.h"

namespace tcc {

class Node;

enum class ScalarOp {
#define TCC_SCALAR_OP(name, text) name,
#include "src/ops/scalar_ops.def"
#undef TCC_SCALAR_OP
};

// Builds a pointwise kernel's body; every method returns the new value's id.
class ScalarBuilder {
 public:
  virtual ~ScalarBuilder() = default;
  virtual int op(ScalarOp op, DType dtype, std::vector<int> args) = 0;
  virtual int constant(DType dtype, double value) = 0;
  // The point's coordinate along axis `axis` of n's output 0, as an i64 (0
  // where the kernel's domain broadcasts that axis).
  virtual int coordinate(const Node& n, int axis) = 0;
  // A size over the kernel's symbols, as `dtype`.
  virtual int size(DType dtype, const SymExpr& size) = 0;
  // The module's random offset, the index of the call (docs/MODULE.md,
  // "Random ops"), as a u64.
  virtual int random_offset() = 0;
};

// The op's value at the point, from its inputs' values there (-1 for an
// absent optional input), in the dtype of its output 0.
using PointwiseFn = std::function<int(const Node& n, ScalarBuilder& b, const std::vector<int>& in)>;

}  // namespace tcc
