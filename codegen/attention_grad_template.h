// The attention backward's kernels: the CUDA and host code of the Kind::Attention
// kernels whose AttentionDesc pass is Stats, GradQ, GradKV, GradK or GradV
// (tcc::AttentionGrad, src/ops/attention_grad.cc), FlashAttention-2's backward
// split so that no pass needs atomics: Stats puts the log-sum-exp the forward
// saved beside D = dY . Y per query row (no score); GradQ and GradKV (or GradK
// or GradV alone, where only one is wanted) recompute the scores from Q and K
// and the saved log-sum-exp, and the [batch, heads, q_len, kv_len]
// probabilities are never in memory.
//
// CUDA, two layouts (KernelConfig::mma chooses):
//
// - a warp per row of the pass's output (a query row for Stats and GradQ, a
//   key row of a kv head for GradKV, GradK and GradV), block / 32 rows to a
//   block, grid [batch * row heads, ceil(rows / warps)]. The lanes score 32
//   keys (or query rows) at a time, one each, and then take the output's
//   columns lane, lane + 32, ... : each lane's coefficient (P, or dS = P (dY .
//   V - D) * scale, times the soft-cap's derivative where the scores are
//   capped) goes round the warp by shuffles and every lane accumulates its
//   columns of the operand row it weighs (K for dQ, Q for dK, dY for dV), read
//   along the row, coalesced; GradKV accumulates dK and dV from the same
//   scores. Operands are read from global memory (the block's warps share
//   their head's rows through the caches); f32 on the CUDA cores, f16 and bf16
//   read into f32 and the outputs rounded once.
// - tensor cores (the gradient passes over f16 or bf16 heads that are
//   multiples of 16 up to 128, values too, or f32 ones of 8 under --precision
//   tf32: attention_emit.h's mma_refusal), FlashAttention-2's backward: each
//   warp takes 16 output rows, their Q and dY rows (GradQ) or K and V rows
//   (the key-row passes) as mma.sync A fragments in registers, and the other
//   side's rows come 32 at a time through shared memory (transposed too for
//   f16 and bf16, for the products that sum over them). GradQ per key tile:
//   S = Q K^T and dP = dY V^T, then dQ += dS K; the key-row passes per query
//   tile of each head of the group: S^T = K Q^T, then dV += P^T dY and, with
//   dP^T = V dY^T, dK += dS^T Q. P and dS are rounded to the operands' dtype
//   (TF32) as fragments, as the forward's probabilities are; the
//   accumulators are f32. The forward's fragment layouts and helpers.
//
// The key-row passes sum over the query heads of their kv head's group and,
// under causal masking, start at the block's first key row.
//
// Host: the same sums per output row, in double.
//
// Not built: wgmma. Untuned: no GPU has measured it yet.
#pragma once

#include <string>
#include <vector>

#include "codegen/emit.h"
#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"

namespace tcc {

// What kAttentionTemplate's hooks (attention_template.h) hand a backward pass to.
std::string emit_attention_grad_cuda(const kir::Kernel& k, const KernelConfig& c);
std::string emit_attention_grad_host(const kir::Kernel& k);
// Grid [batch * row heads, ceil(rows / rows a block)] of the config's block:
// block / 32 rows a block, 16 times that in the tensor-core layout.
KernelLaunch attention_grad_launch(const kir::Kernel& k, const KernelConfig& c);
// Without tuning: blocks of 128, the tensor-core layout (64 rows) where the
// pass and its heads allow, else a warp per row (four rows).
KernelConfig attention_grad_default_config(const kir::Kernel& k);
// Why the config cannot run k ("" where it can): knobs other than block and
// mma, blocks outside 32..256, the tensor-core layout where mma_refusal says why.
std::string attention_grad_refusal(const kir::Kernel& k, const KernelConfig& c);
// Every config autotuning measures: the tensor-core layout where it may run
// and a warp per row, each at blocks of 64, 128 and 256.
std::vector<KernelConfig> attention_grad_configs(const kir::Kernel& k);
// The pass and its layout in words: "backward grad_k pass, a warp per row, block
// 128", "backward grad_q pass, tensor-core layout (mma.sync m16n8k16), 16 rows a warp, block 128".
std::string attention_grad_schedule(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc
