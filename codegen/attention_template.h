// tcc's attention kernel: the CUDA and host code of a Kind::Attention kernel
// (its AttentionDesc, codegen/kernel_ir.h), flash-attention style, so the
// [batch, heads, q_len, kv_len] scores are never written to memory.
//
// CUDA: one block per (batch x head, tile of BM query rows), grid [batch *
// heads, ceil(q_len / BM)]. Keys advance through shared tiles (32 at a time;
// 64 in the f16 / bf16 tensor-core layout);
// the rows' running maxima and sums move on as FlashAttention-2's online
// softmax does; with causal masking, key tiles after the block's last query
// row are skipped; a row hidden everywhere ends with a zero sum and is stored
// as zeros. Where the forward is trained (AttentionDesc::lse), the thread
// that stores a row's end also writes its log-sum-exp, max + log(sum), -inf
// for a hidden row: the statistic the backward reads instead of recomputing
// the scores. The split and warp layouts compute f32 on the CUDA cores, exact
// to f32 rounding: f16 and bf16 operands (--precision fp16 / bf16) are read
// into f32 tiles and the output rounded once to its dtype. Three layouts:
//
// - split (both head sizes up to 64): L neighbouring lanes (2, 4 or 8; 4 by
//   default) share a query row, held in registers with its output row, and
//   each takes every L-th key of the tiles, whose rows it reads as float4s
//   (row pitches chosen so the rows read at once fall in different banks);
//   each lane keeps its own running max and sum, rescaling once per tile, and
//   the partial rows merge by shuffles at the end. A score costs one shared
//   load per four FMAs, so the FMA units, not shared memory, set the pace;
//   BM is block / L (32 by default: 128 threads).
// - warp (any head; the only one above 64, whose rows would not fit in
//   registers): each warp owns R = 4 query rows of the block's query tile in
//   shared memory; lane j scores key j against each row (the key row padded
//   by one float so the 32 rows hit 32 banks), the maxima and sums move by
//   warp shuffles, and lane e accumulates output columns e, e + 32, ...; BM
//   is 4 per warp, with 8 warps for heads up to 128 and 2 above by default,
//   under 48 KB of shared memory.
//
// - mma (f16 and bf16 operands, heads multiples of 16 up to 128; values of
//   8): each warp takes 16 query rows through mma.sync.m16n8k16 with f32
//   accumulation, the scores and the online softmax (base 2) in registers,
//   the probabilities packed as the next mma's operand (FlashAttention-2's
//   register reuse). K and V tiles of 64 keys lie in shared memory as
//   stored, filled by 16-byte cp.async copies where the rows are aligned
//   (else element by element), V's copy overlapping the scores and the next
//   K tile's the product with V; their fragments come by ldmatrix (.trans
//   for V). BM is 16 per warp, 8 warps (128 rows) by default. f32 operands
//   under --precision tf32 (AttentionDesc::tf32; heads multiples of 8 up to
//   128) take it through mma.sync.m16n8k8.tf32 in tiles of 32 keys, Q, K, V
//   and the probabilities rounded to TF32 by cvt.rna.tf32.f32 (10 explicit
//   mantissa bits, so each product's operands within 2^-11 relative),
//   accumulated in f32; K and V lie in shared memory as TF32 bits, 4 warps
//   by default. Under fp32 the mma layout is refused and the kernel stays
//   exact.
//
// The layout, L and the threads per block are KernelConfig knobs
// (lanes_per_row, mma, block) that max-autotune measures.
//
// The backward's passes (AttentionDesc::pass other than Forward) are
// attention_grad_template.h's; the functions below hand them over.
//
// Not built: wgmma, split-KV for long keys with few query tiles.
//
// Host: the same online softmax per query row, in double.
#pragma once

#include "codegen/template_kernel.h"

namespace tcc {

// Kind::Attention's hooks (codegen/template_kernel.h), each handing a backward
// pass to attention_grad_template.h's function:
// - launch: grid [batch * heads, ceil(q_len / BM)] of the config's block;
// - default config: the mma layout in blocks of 256 (f16, bf16) or 128 (f32
//   under tf32) where the dtype and heads allow, else the split layout with four
//   lanes to a row in blocks of 128 where the heads allow, else the warp layout;
// - refusal: knobs other than block, lanes_per_row and mma, blocks outside
//   32..256, the split layout for heads above 64, the warp layout's tiles past
//   48 KB, the mma layout for f32 outside tf32 or heads it does not take;
// - configs: each layout k allows at blocks of 64, 128 and 256;
// - schedule: "split layout, block 128, rows 32, 4 lanes a row",
//   "tensor-core layout (mma.sync m16n8k8 tf32), block 128, rows 64";
// - precision: "tf32" where the config runs the products in TF32
//   (attention_tf32), f16 or bf16 where it runs them on the tensor cores, else
//   "f32" (exact on the CUDA cores, which widen f16 and bf16 operands), so a
//   tuned exact layout reports f32.
extern const TemplateKernel kAttentionTemplate;

// The device functions the mma layouts call (mma.sync for f16 and for bf16;
// the backward's gradient passes' too), once in a CUDA source that holds such a kernel; for f32 operands
// (attention_tf32) it calls kAttentionTf32Helpers' tcc_tf32 (cvt.rna.tf32.f32)
// and gemm_template.h's kMmaTf32Helper instead.
extern const char* const kAttentionMmaHelpers;
extern const char* const kAttentionTf32Helpers;
// Whether config c runs k's products on the tensor cores in TF32: the mma
// layout of a forward or gradient pass over f32 operands (AttentionDesc::tf32).
bool attention_tf32(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc
