// What the attention ops share (src/ops/attention.cc: Attention and
// tcc::Attention; src/ops/attention_grad.cc: tcc::AttentionGrad, the fused
// backward): their operand slots, the reference kernels' views of Q, K, V and
// the mask, and which nodes the fused kernels compute.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/ops/op_registry.h"

namespace tcc::attn {

// Input slots: Attention's, and tcc::AttentionGrad's first four.
enum : size_t { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpad };

// A head count attribute of 3-D inputs; fails naming it when it is missing or not positive.
int64_t heads_attr(const Node& n, const char* attr);

// A 4-D [batch, heads, seq, size] reading of a 3-D or 4-D operand.
struct HeadView {
  const Tensor* t = nullptr;
  int64_t batch = 0, head = 0, row = 0;  // element strides
  double at(int64_t b, int64_t h, int64_t s, int64_t e) const { return t->get_f64(b * batch + h * head + s * row + e); }
};
HeadView view_4d(const Tensor& t);
HeadView view_3d(const Tensor& t, int64_t heads);

// The mask broadcast (right-aligned) onto [batch, q_heads, q_len, keys]; a
// column past its last one is masked.
class MaskView {
 public:
  MaskView(const EvalContext& ctx, const Tensor* m, const std::vector<int64_t>& target);
  // The bias the mask adds at (b, h, i, j): 0 or -inf for a bool mask, its value for a float one.
  double bias(int64_t b, int64_t h, int64_t i, int64_t j) const;

 private:
  const Tensor* m_;
  int64_t cols_ = 0;
  int64_t strides_[4] = {0, 0, 0, 0};
};

// Why the fused kernels cannot read n's Q, K, V and mask (slots kQ .. kMask),
// or "" when they can: one dtype, f32, f16 or bf16 (the kernels compute in
// f32), static head counts and head sizes up to 256 (symbolic batch and
// sequences), a softmax_precision of f32 or T if any, and a bool or T mask
// whose last axis is the keys' and whose others broadcast onto [batch, heads,
// q_len].
std::string operands_refusal(const Node& n);

// Whether n is a tcc::Attention that also outputs each query row's
// log-sum-exp of its scores (output 1, f32 [batch, heads, q_len], -inf for a
// row hidden everywhere), which the fused backward reads instead of
// recomputing the scores; autodiff adds that output (save_log_sum_exp).
bool saves_lse(const Node& n);

// Why the fused attention kernel cannot compute Attention node n, or "" when
// it can (its kernel role is then Attention, and decompose leaves it whole):
// operands_refusal's, only Y (and the log-sum-exp) read, no cache, no
// nonpad_kv_seqlen, no window.
std::string attention_kernel_refusal(const Node& n);

// The Attention nodes the fused backward (tcc::AttentionGrad) differentiates:
// those the fused kernel computes whose mask, if float, needs no gradient. Elsewhere autodiff differentiates the
// decomposition's pieces.
bool fused_backward_applies(const Node& n, const std::vector<bool>& wants);
// Attention's gradient rule (attention_grad.cc), for a node that saves its
// log-sum-exp: the row statistics (that log-sum-exp beside dY . Y per query
// row), then dQ and, from one pass over the key rows, dK and dV, each pass
// one tcc::AttentionGrad node.
void attention_gradient(GradContext& c);
// Replaces Attention node n, which autodiff differentiates through
// attention_gradient, by a tcc::Attention that also outputs the log-sum-exp
// (saves_lse) its forward kernel computes along the way.
void save_log_sum_exp(Graph& g, Node& n);

}  // namespace tcc::attn
