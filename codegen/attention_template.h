// tcc's attention kernel: the CUDA and host code of a Kind::Attention kernel
// (its AttentionDesc, codegen/kernel_ir.h), flash-attention style, so the
// [batch, heads, q_len, kv_len] scores are never written to memory.
//
// CUDA: one block per (batch x head, tile of BM query rows), grid [batch *
// heads, ceil(q_len / BM)]. Each warp owns R = 4 query rows; the block's query
// tile sits in shared memory. Keys advance 32 at a time through one shared
// tile, which holds the keys, then the values: lane j scores key j against
// each of its warp's rows (the query row read by all lanes at once, the key row
// padded by one float so the 32 rows hit 32 banks), the rows' running maxima
// and sums move on by warp shuffles (online softmax, as FlashAttention-2), and
// each lane accumulates its columns of the output rows from the value tile
// (lane e holds columns e, e + 32, ...). With causal masking, key tiles after
// the block's last query row are skipped. A row hidden everywhere ends with a
// zero sum and is stored as zeros. Head sizes up to 256, static; BM is 32 for
// head sizes up to 128 (8 warps) and 8 above (2 warps), keeping the static
// shared memory under 48 KB. f32 on the CUDA cores, exact to f32 rounding.
// Not built: tensor cores (mma.sync, wgmma), f16 / bf16, the backward pass,
// split-KV for long keys with few query tiles.
//
// Host: the same online softmax per query row, in double.
#pragma once

#include <string>

#include "codegen/emit.h"
#include "codegen/kernel_ir.h"

namespace tcc {

// The kernel's CUDA function: `extern "C" __global__` named k.name with
// emit_cuda's parameter convention.
std::string emit_attention_cuda(const kir::Kernel& k);
// The kernel's host function, with emit_host's convention.
std::string emit_attention_host(const kir::Kernel& k);
// Grid [batch * heads, ceil(q_len / BM)] of the kernel's block.
LaunchConfig attention_launch(const kir::Kernel& k);

}  // namespace tcc
