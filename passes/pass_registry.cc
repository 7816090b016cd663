// The list of passes. Adding a pass: write passes/<name>.cc, declare its
// function in pass.h and add one line here, in the phase where it runs.
// Within a phase, passes run in the order listed.
#include <array>

#include "passes/pass.h"

namespace tcc {

namespace {
constexpr std::array<std::string_view, 4> kPhaseNames = {"import", "optimize", "fuse", "codegen"};
}  // namespace

std::string_view phase_name(Phase p) { return kPhaseNames[static_cast<size_t>(p)]; }

std::optional<Phase> parse_phase(std::string_view name) {
  for (size_t i = 0; i < kPhaseNames.size(); ++i)
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  return std::nullopt;
}

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = {
      // Canonical spellings first, so the passes after match one form.
      {"canonicalize", "Constants of commutative ops to the right; drop Identity, inference Dropout, no-op "
                       "Cast; merge Reshape, Squeeze/Unsqueeze and Transpose pairs; a SplitToSequence's piece read at a "
                       "constant position becomes a Slice; the tanh GELU written out becomes Gelu",
       Phase::Optimize, canonicalize},
      // Before constant_fold, which would dequantize the weights into f32 initializers.
      {"fuse_qdq", "QuantizeLinear(Conv / MatMul / Gemm of DequantizeLinear'd operands) becomes QLinearConv / "
                   "QLinearMatMul, as ONNX Runtime executes the QDQ form", Phase::Optimize, fuse_qdq},
      {"constant_fold", "Replace values shape inference proves constant (static shape chains included) by "
                        "initializers", Phase::Optimize, constant_fold},
      // After folding: what is still a runtime shape chain is either data-dependent or symbolic.
      {"resolve_shapes", "Reshape/Expand/Slice whose runtime shape argument resolves to dims over input symbols "
                         "become tcc::Reshape/Expand/Slice, leaving the shape chain dead (a Reshape to its data's "
                         "own shape is its data); Size and integer Range become tcc::Size and tcc::Range", Phase::Optimize,
       resolve_shapes},
      {"simplify_algebra", "Remove exact no-op arithmetic: x*1, x+(-0.0), x-0, x/1, x**1, Neg(Neg(x)), Pad(x, 0)",
       Phase::Optimize, simplify_algebra},
      // After folding and simplification, more nodes have identical inputs.
      {"cse", "Merge nodes with the same op, inputs and attributes", Phase::Optimize, cse},
      // After the cleanups, so an exporter's attention reads as one pattern (constants folded, shape chains
      // resolved, duplicates merged); before decompose, which expands what the fused kernel cannot take.
      {"fuse_attention", "MatMul(Q, K^T), scale, mask, Softmax, MatMul with V become one tcc::Attention (grouped-query "
                         "repeats, K^T spellings, causal masks recognized)", Phase::Optimize, fuse_attention},
      {"fold_transpose_matmul", "2-D MatMul of a Transpose, or scaled by a constant, becomes Gemm (transA/transB/alpha)",
       Phase::Optimize, fold_transpose_matmul},
      {"fold_batchnorm_conv", "Fold inference BatchNormalization into the Conv before it", Phase::Optimize,
       fold_batchnorm_conv},
      // After the batch-norm fold, so the Conv it becomes a product of carries the folded bias.
      {"conv1x1_matmul", "1x1 Conv (stride 1, no padding, one group) becomes a MatMul of its weights by the "
                         "input's channels: cuBLASLt rather than cuDNN, whose calls cost more host time",
       Phase::Optimize, conv1x1_matmul},
      // After the folds, so weights are converted once in their final form, and after fuse_attention, so the
      // fused attention is cast as one op.
      {"autocast", "--precision fp16/bf16: matrix products, convolutions and attention read low-precision operands "
                   "(weights converted once); softmax, norms and sums read f32, as torch.autocast",
       Phase::Optimize, autocast},
      // Last: sweeps what the passes above left unused.
      {"dce", "Remove nodes and initializers that no graph output depends on", Phase::Optimize, dce},
      // First in its phase: after cse, which would merge recomputed copies back into their originals, and
      // before decompose, so a LayerNorm or Softmax counts as one node that is not recomputed.
      {"recompute_activations", "Training graphs: a min-cut choice of the forward values the backward saves; the "
                                "rest are recomputed before their backward readers", Phase::Fuse,
       recompute_activations},
      // Composite ops become primitives first, so fuse can group them with their neighbours.
      {"decompose", "Ops with an OpDef decomposition into ops that have kernels (Softmax, the norms, global pools, "
                    "Split, recurrent cells, DFT, the quantized contractions, ...)",
       Phase::Fuse, decompose},
      // After decompose, which leaves the sequence ops over known structure as SequenceConstructs.
      {"flatten_outputs", "Sequence and optional outputs of known structure become their element tensors, "
                          "<name>.0, <name>.1, ...; one whose structure depends on the data is refused",
       Phase::Fuse, flatten_outputs},
      // After fuse_attention, whose patterns read the exporters' own spellings; before fuse, which reads the
      // folded views through strides.
      {"fold_views", "A chain of reshapes and transposes that merges axes and splits them back becomes a reshape "
                     "that splits and one Transpose (torch's MultiheadAttention heads), which kernels read in place",
       Phase::Fuse, fold_views},
      {"fuse", "Group nodes into tcc::Fusion kernels: pointwise chains, reductions with prologues and epilogues, "
               "MatMul/Gemm with cuBLASLt epilogues, lone movement ops", Phase::Fuse, fuse},
      // After fuse: it merges the pointwise fusions fuse made of each parameter's update.
      {"fuse_multi_tensor", "Merge the optimizer update fusions of same-shaped parameters into one multi-tensor "
                            "kernel", Phase::Fuse, fuse_multi_tensor},
  };
  return passes;
}

const PassInfo* find_pass(std::string_view name) {
  for (const PassInfo& p : all_passes())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace tcc
