// Which graph nodes a generated kernel can compute: each op's OpDef states the
// role its nodes take (src/ops/<family>.cc), which the fusion pass (what may
// join a group) and the lowering (what it must handle) share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

enum class KernelRole {
  None,         // not generated: runs as a library call of its own or on the host
  Pointwise,    // elementwise with broadcasting (Add, Exp, Gelu, Cast, Where, Clip, ...), tcc::Size
                // (an element count over the kernel's size parameters), tcc::Range (from the coordinate)
                // and the random generators (Philox draws of the element index, random_stream.h)
  Reduction,    // ReduceSum/Mean/Max/Min/Prod over constant axes, Softmax/LogSoftmax/LayerNorm
                // (decomposed before fusion), ArgMax excluded
  Movement,     // Reshape / tcc::Reshape, Transpose, Unsqueeze, Squeeze, Expand / tcc::Expand,
                // Slice with literal arguments (is_literal) / tcc::Slice, Identity: an affine view of its data input
  Contraction,  // MatMul, Gemm: cuBLASLt on the GPU, a loop on the host
  Convolution,  // Conv (1-D, 2-D, 3-D) that conv_kernel_problem accepts: cuDNN on the GPU, a loop on the host
  Indexed,      // Concat, Gather, GatherElements and GatherND of any dtype, ScatterElements and
                // ScatterND (any dtype without a reduction; with one, atomic_update_dtype),
                // tcc::ScatterAdd (atomic_update_dtype), MaxPool and AveragePool that pool_window
                // accepts: a kernel whose loads are guarded by the coordinate (Concat: the input whose
                // range holds it, alone or in a pointwise kernel of its shape; pools: the window taps
                // inside the input, alone or leading a pointwise epilogue) or indexed by
                // another tensor's values (the rows a Gather index selects, the elements or tuples of
                // the others), or whose stores write, or combine atomically, where an index says
                // (ScatterAdd into an output zeroed first, the others into a copy of their data);
                // CumSum along a literal axis: a reduction kernel of its own whose one reduced axis
                // is scanned (kir::Op::ScanSum)
  Attention,    // Attention / tcc::Attention that attention_kernel_refusal accepts: one kernel of its own
                // (codegen/attention_template.h), the scores never written to memory
  TopK,         // TopK that topk_kernel_refusal accepts: one kernel of its own (codegen/topk_template.h)
  Recurrence,   // tcc::Recurrence (src/ops/recurrent.h), which RNN, GRU and LSTM decompose into: one
                // persistent kernel of its own (codegen/recurrence_template.h)
  Nms,          // tcc::NmsSelect, which NonMaxSuppression decomposes into: one kernel of its own
                // (codegen/nms_template.h)
  RoiAlign,     // tcc::RoiAlign, which RoiAlign decomposes into where its Gather cannot take it (samples
                // counted from the data, too many taps, a symbolic image): one kernel of its own
                // (codegen/roi_align_template.h)
};

// The role of n: its OpDef's `kernel` role, given its attributes, dtypes and
// constant arguments. A node whose input or output types are not fully known
// tensors, or whose op tcc does not know at its opset, is None.
KernelRole kernel_role(const Node& n);

// The activation a library call's epilogue (LibraryEpilogue: cuBLASLt's after
// a GEMM, cuDNN's after a convolution) applies n as, named as the module's
// library calls name it ("relu", "gelu_tanh"), or "" when it applies none:
// its OpDef's library_epilogue.
std::string epilogue_activation(const Node& n, uint32_t library);
// Whether epilogue_activation(n, library) names one.
bool library_epilogue(const Node& n, uint32_t library);
// What n is where its op is an activation the library's epilogue applies
// but not for n ("an erf Gelu; ..."), or "".
std::string epilogue_refusal(const Node& n, uint32_t library);
// The ops whose nodes the library's epilogue may apply, as a message lists
// them ("Gelu, Relu").
std::string epilogue_ops(uint32_t library);

// Whether the GPU updates an element of `dtype` atomically (a combining store:
// atomicAdd, or a compare-and-swap of its 4 or 8 bytes): f32, f64, i32, i64.
bool atomic_update_dtype(DType dtype);

// What ops' kernel roles read of their arguments.
// Whether input i is absent or a compile-time constant (an initializer or a Constant node's value).
bool constant_input(const Node& n, size_t i);
// Inputs the op needs at compile time: absent, or a constant the body takes as a literal.
bool literal_input(const Node& n, size_t i);
// Whether every dim of t is a static 1.
bool single_element(const Type& t);
// Why a Reshape or Expand gets no kernel, or "": its target shape must be a
// literal. One computed at run time that shape inference could follow became
// tcc::Reshape / Expand (resolve_shapes); any other is read from data and
// leaves the output's dims at what the model declares, which nothing checked:
// the host runs the node, reading its arguments. (Slice's bounds, movement.cc,
// and cuBLASLt's float operands, linalg.cc, are refused alike.)
std::string computed_shape_refusal(const Node& n);
// Whether one strided-batched call computes MatMul n: each operand's batch
// dims (those before its last two, aligned right, 1 where it has fewer) are
// all 1, or match the output's wherever the output's is not 1. A
// [3, 1, m, k] @ [1, 2, k, n] broadcasts each operand along a different axis,
// which no single batch stride expresses: the host runs it.
bool strided_batches(const Node& n);

// Whether a constant of this type is a literal of a kernel's body (passes/fuse
// copies it in; the lowering reads its value): one element (a Clip bound, a
// Pad fill), or a few integers (axes, starts, pads). Other constants, weights
// among them, are body inputs, read from buffers. An argument an op needs at
// compile time (Slice's starts, Pad's pads) must be a literal for the op to
// have a role.
constexpr int64_t kMaxLiteralElements = 64;
bool is_literal(DType dtype, int64_t rank, int64_t numel);

// A Transpose (default domain) of a float or int8 tensor of rank 2 or more that swaps the last two axes
// and keeps the others: a MatMul (or MatMulInteger's int8 form, int8_product.h) reads its input as that
// operand, transposed, instead of a copy (passes/fuse.cc takes it into the
// GEMM's fusion, codegen/lower.cc sets the operand's trans flag). A weight's
// transpose read by a batched MatMul (a backward's dY @ W^T) is the common case;
// 2-D MatMuls have usually become Gemms already (fold_transpose_matmul).
bool swaps_last_two_axes(const Node& n);

// Whether movement node n only gives its data a new shape (its op's
// kReshape trait: Reshape of either domain, Flatten, Squeeze, Unsqueeze): the
// same row-major elements.
bool is_reshape(const Node& n);

// Whether a reshape from `in` to `out` only splits axes: every input axis of
// extent other than 1 becomes a run of output axes whose extents provably
// multiply to it, and axes of extent 1 come and go. Returns, per output axis,
// the input axis it was cut from (-1 for an axis of extent 1); nullopt when an
// output axis would span several input axes (a merge, which needs them
// contiguous) or the extents do not line up. A split composes with any strides,
// so a reshape that splits may follow a Slice or Transpose in one kernel.
std::optional<std::vector<int>> split_axes(const std::vector<SymExpr>& in, const std::vector<SymExpr>& out);

// The sliding window of a Conv node, resolved: one entry per spatial dim, the
// padding applied at both ends (cuDNN's convolution descriptor has one pad per dim).
struct ConvWindow {
  std::vector<int64_t> kernel, strides, dilations, pads;
  int64_t groups = 1;
};

// Resolves the window of a Conv node into *w and returns "", or returns why the
// node gets no conv kernel: what cuDNN's convolution descriptor cannot express
// (asymmetric padding, more than 3 spatial dims, non-float dtypes) or what the
// kernel needs static (W's shape; the input's spatial dims under SAME padding).
std::string conv_window(const Node& n, ConvWindow* w);

// The window of a MaxPool or AveragePool node, resolved: one entry per spatial
// dim; the padding at the begin and at the end may differ.
struct PoolWindow {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  bool count_include_pad = false;  // AveragePool: padding taps count in the divisor
};

// A pool kernel unrolls its window: one guarded load per tap.
constexpr int64_t kMaxPoolTaps = 64;

// Resolves the window of a MaxPool or AveragePool node into *w and returns "",
// or returns why the node gets no pool kernel: dtypes other than float ones (and
// int8 and uint8 for MaxPool), a window of more than kMaxPoolTaps taps, SAME
// padding of a symbolic dim.
std::string pool_window(const Node& n, PoolWindow* w);

// Resolves the window of a depthwise Conv (one filter per input channel: W
// [C, 1, k...] with group C) into *w and returns "", or returns why the node
// is not one a generated kernel computes: what conv_window refuses, another
// grouping, or a window of more than kMaxPoolTaps taps. Such a Conv is a pool
// that weighs its taps: a generated kernel of its own (role Indexed) rather than
// a cuDNN call, whose host time per call is many launches'.
std::string depthwise_window(const Node& n, PoolWindow* w);

// Why TopK node n gets no kernel, or "" when it gets one: k must be a
// constant of at least 1 (so the outputs' shape is static along the axis) and
// the axis static, the row the kernel walks.
std::string topk_kernel_refusal(const Node& n);

// Why a node whose op a generated kernel can compute got none ("" when there is
// no more to say than that it is not supported): its OpDef's refusal.
std::string kernel_refusal(const Node& n);

}  // namespace tcc
