// What the pointwise families share: elementwise.cc (arithmetic, Neg, Abs,
// Sign, Relu, comparisons, logic, Cast, Where, Clip) defines it;
// unary_float.cc (float functions and activations) and bitwise.cc use it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

// The symbolic contents of a rank-0/1 integer output, from those of the inputs.
using ValueFn = std::function<std::optional<Dim>(const std::vector<Dim>&)>;

// The output takes input 0's element type; with `operands_agree` (every op
// but Pow, whose exponent may differ) every input must have it too, as ONNX's
// one type variable T says, or no kernel could be typed.
InferFn infer_same_dtype(ValueFn values = nullptr, bool operands_agree = true);
// A bool output of the inputs' broadcast shape.
InferFn infer_bool(ValueFn values = nullptr);

// Registers a pointwise op of the default domain.
OpDef& add_op(OpRegistry& r, const std::string& name, int64_t since, const std::vector<DType>& dtypes, InferFn infer,
              EvalFn eval);

DType out_dtype(const Node& n);
// The op as one scalar instruction over all of its inputs.
PointwiseFn scalar(ScalarOp op);
// x (of dtype `from`) converted to the 8-bit float `to`: the kernels' Cast,
// which saturates, or without `saturate` (Cast's and QuantizeLinear's
// saturate=0) one that takes values beyond the range, infinities included, to
// infinity (f8e5m2) or NaN.
int cast_to_fp8(ScalarBuilder& b, int x, DType from, DType to, bool saturate);

// g where lo < x < hi (lo <= x <= hi with `closed`), else 0
Value* inside(GradContext& c, Value* x, Value* lo, Value* hi, bool closed);
// Floor, Ceil, Round, Sign: piecewise constant, so 0 (as torch)
void zero_rule(GradContext& c);

}  // namespace tcc
