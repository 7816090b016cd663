// tcc's TopK kernel: the CUDA and host code of a Kind::TopK kernel (its
// TopKDesc, codegen/kernel_ir.h).
//
// The algorithm: k passes of an arg-reduction over the row, pass s selecting
// the first element, in TopK's order on (value, index), strictly after the
// one pass s - 1 selected. That order is total (indices differ), so each pass
// finds exactly the s-th element: the output is sorted by construction, ties
// go to the lower index, and nothing but the previous selection is kept
// between passes (no workspace, no shared row, rows of any length). A pass
// reads the row again (from cache after the first), so the work is
// k x length per row: the right trade for the small k of detection heads and
// sampling; a sort would pay off for k near the row's length.
//
// CUDA: a team of threads per row, `block / rows_per_block` of them (a warp
// for short rows, the whole block for long ones), grid [ceil(rows /
// rows_per_block)]. Each lane scans every team-th element, the lanes' bests
// meet by warp shuffles and, in teams of several warps, through shared
// memory; lane 0 stores the selection. Values are copied as stored (NaN
// payloads included), compared in float (f32, f16, bf16), double or 64-bit
// integers, exactly.
//
// Host: the same passes per row, one thread.
#pragma once

#include <cstdint>

#include "codegen/template_kernel.h"

namespace tcc {

// Kind::TopK's hooks (codegen/template_kernel.h):
// - launch: grid [ceil(rows / rows_per_block)] of the config's block;
// - default config: a warp per row for rows up to kTopKWarpRow elements (four
//   rows to a block of 128), else a block of 256 per row;
// - refusal: knobs other than block and rows_per_block, blocks outside
//   32..1024 or not of whole warps, teams (block / rows_per_block) that are
//   not whole warps;
// - configs: blocks of 64 to 512 with teams of a warp up to the whole block
//   (at most 8 rows a block);
// - schedule: "block 128, 4 rows, a warp a row"; precision: the input's dtype.
inline constexpr int64_t kTopKWarpRow = 512;
extern const TemplateKernel kTopKTemplate;

}  // namespace tcc
