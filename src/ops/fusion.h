// Fusion groups in the graph IR.
//
// The fusion pass (passes/fuse.cc) replaces each group of nodes that will
// become one kernel by a single node `tcc::Fusion` whose `body` attribute is a
// region holding the original nodes, unchanged (names, attributes, source
// locations), so every kernel can be traced back to the nodes it fused:
//
//   %y: f32[b, 768] = tcc::Fusion(%x, %bias) {kind = "pointwise", body = graph fused_0 {
//       input %x_in: f32[b, 768]
//       input %bias_in: f32[768]
//       %t: f32[b, 768] = Add(%x_in, %bias_in) name("layer0/Add")
//       %y_out: f32[b, 768] = Relu(%t) name("layer0/Relu")
//       output %y_out
//     }} name("fused_0")
//
// Contract (checked by verify_fusion, relied on by codegen/lower.cc):
// - The body is closed: it reads only its own inputs and constants, never the
//   enclosing graph. Node input i is body input i; body output j is node output j.
// - `kind` says how the group lowers (FusionKind below).
// - Movement nodes (Reshape, Transpose, Unsqueeze, Squeeze, Expand, Slice with
//   constant arguments) appear in a body only directly on a body input, so every
//   load stays an affine index into a contiguous buffer; in a single body, a
//   chain of them, each reading the one before (a Slice, a reshape that splits
//   axes, then a Transpose: still one affine index).
// - A reduction body reduces one tensor shape over one set of axes (every
//   reduction in it has the same input shape and axes); a gemm body starts at one
//   MatMul/Gemm whose epilogue is what cuBLASLt can apply (bias along N, Relu,
//   tanh-Gelu, a residual added as C); a conv body starts at one Conv whose
//   epilogue is what cuDNN applies (a bias per channel, a residual, Relu).
// The interpreter runs a Fusion node by running its body, so a fused graph is
// still an executable model and the oracle for its own kernels.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

inline constexpr std::string_view kTccDomain = "tcc";
inline constexpr std::string_view kFusionOp = "Fusion";

enum class FusionKind {
  Pointwise,  // elementwise ops with broadcasting, leaf movement ops
  Reduction,  // pointwise prologue, reductions over one set of axes, pointwise epilogue
  Gemm,       // one MatMul / Gemm with a library-supported epilogue
  Conv,       // one Conv with bias / activation epilogue
  Single,     // a node codegen handles alone (a Concat, a Gather, a pool, an attention, whose Q, K and V may be
              // views, movement chains on body inputs, and whose output it may write through a Transpose and
              // reshapes), or a chain of movement ops that needs a copy kernel of its own
};

std::string_view fusion_kind_name(FusionKind k);
std::optional<FusionKind> parse_fusion_kind(std::string_view name);

inline bool is_fusion(const Node& n) { return n.domain() == kTccDomain && n.op_type() == kFusionOp; }
// The kind of a fusion node; fails naming the node when the attribute is missing or unknown.
FusionKind fusion_kind(const Node& n);
// The body region of a fusion node; fails naming the node when absent.
Graph& fusion_body(const Node& n);

// The axes a Reduce* node reduces, normalized and sorted (every axis when it
// lists none, none for noop_with_empty_axes); nullopt when they are not
// compile-time constants or the input rank is unknown.
std::optional<std::vector<int64_t>> reduction_axes(const Node& n);

// The constant data of a body value, when it has one (a body initializer or a
// Constant node's output); null otherwise, and for an absent value.
const Tensor* constant_of(const Value* v);

// Checks the contract above; returns an empty string when it holds, otherwise
// what is wrong (naming the fusion node and the offending body node).
std::string verify_fusion(const Node& n);

}  // namespace tcc
