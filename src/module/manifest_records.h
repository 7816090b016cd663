// The manifest's records that the writer (codegen/module_writer) and the
// loader (src/runtime/module) both handle, each spelled once: *_json writes a
// record, read_* reads it back, checking each field's type and range and
// naming the field in every complaint. What a record must agree with
// elsewhere in the manifest (a symbol some input binds, a buffer's shape
// against a convolution's sizes) is the loader's to check: read_* pass every
// size they read to its SizeCheck.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/ir/dtype.h"
#include "src/ir/sym.h"
#include "src/module/kernel_abi.h"
#include "src/module/manifest_format.h"

namespace tcc {

using SizeCheck = std::function<void(const SymExpr& size, const ManifestField& where)>;

// A tensor the manifest names: an input, an output, a weight, a planned
// buffer, a binding constant. {"name", "dtype", "shape"}.
struct TensorSig {
  std::string name;
  DType dtype = DType::F32;
  std::vector<SymExpr> shape;
};
nlohmann::ordered_json tensor_json(const TensorSig& t);
TensorSig read_tensor(const ManifestField& f, const SizeCheck& check);

// A sequence or optional input or output of the model, as the module
// flattens it into tensors, torch.export's pytree for a list: {"name",
// "kind": "sequence" | "optional", "length", "elements"}, each element the
// name of one of the module's inputs or outputs (a tensor) or such a record
// (an optional sequence). manifest.json's `structured_inputs` and
// `structured_outputs` list them (docs/MODULE.md).
struct StructuredValue {
  enum class Kind { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  std::string name;  // the model's value; for a tensor, the module's input or output
  std::vector<StructuredValue> elements;
};
nlohmann::ordered_json structured_json(const StructuredValue& v);
StructuredValue read_structured(const ManifestField& f);

// A tensor with its place: a weight in weights.bin (static), a buffer in the
// arena. The tensor's fields plus {"offset", "nbytes"}.
struct PlacedTensor {
  TensorSig sig;
  SymExpr offset, nbytes;
};
nlohmann::ordered_json placed_json(const PlacedTensor& t);
PlacedTensor read_placed(const ManifestField& f, const SizeCheck& check);
// A weight: static sizes, nbytes that hold its shape, an offset that is a
// multiple of `alignment`.
PlacedTensor read_weight(const ManifestField& f, int64_t alignment);

// A kernel parameter: kernels[i].buffers[j], {"dtype", "shape", "output"}.
struct KernelParam {
  DType dtype = DType::F32;
  std::vector<SymExpr> shape;
  bool output = false;
};
nlohmann::ordered_json param_json(const KernelParam& p);
KernelParam read_param(const ManifestField& f, const SizeCheck& check);

// A library call with the rank of the library algorithm that runs
// (KernelConfig::algo; absent in modules written before autotuning chose
// one: 0). Buffers are checked against the kernel's `num_buffers` parameters.
nlohmann::ordered_json gemm_json(const GemmDesc& g, int algo);
GemmDesc read_gemm(const ManifestField& f, int num_buffers, const SizeCheck& check);
// A convolution's operands are among the kernel's `num_reads` inputs, and
// the kernel's parameters have the shapes the convolution's sizes give.
nlohmann::ordered_json conv_json(const ConvDesc& c, int algo);
ConvDesc read_conv(const ManifestField& f, const std::vector<KernelParam>& params, int num_reads,
                   const SizeCheck& check);
int read_algo(const ManifestField& call);

// How the runtime launches a generated kernel (kernels[i].launch). Grid
// extents are expressions over the kernel's size parameters; a workspace is
// zeroed device memory passed after the sizes (none: 0); zero_outputs zeroes
// the outputs before each launch (accumulating stores); copy_from (>= 0)
// starts the one output as a copy of that input (scatters); random_offset
// passes the module's random offset's address last (the random ops).
struct KernelLaunch {
  std::array<SymExpr, 3> grid = {SymExpr::constant(1), SymExpr::constant(1), SymExpr::constant(1)};
  std::array<int, 3> block = {1, 1, 1};
  int shared_bytes = 0;
  SymExpr workspace_bytes;
  bool zero_outputs = false;
  int copy_from = -1;
  bool random_offset = false;
};
nlohmann::ordered_json launch_json(const KernelLaunch& l);
// A workspace is for split reductions, split-K gemm templates and NMS kernels only;
// copy_from names an input like the kernel's one output; random_offset is for
// pointwise and reduction kernels only.
KernelLaunch read_launch(const ManifestField& f, KernelKind kind, const std::vector<KernelParam>& params,
                         int num_reads, const SizeCheck& check);

}  // namespace tcc
