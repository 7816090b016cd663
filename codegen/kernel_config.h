// How one kernel is emitted and launched: the knobs autotuning (src/autotune)
// turns. It lives in codegen because it is the emitter's input (and, for the
// library calls, the manifest's); the schedule passes of
// codegen/kernel_schedule.h make the choices without tuning, into each
// kernel's Kernel::schedule (the kernel IR's `schedule` line).
#pragma once

#include <cstdint>

#include "src/module/kernel_abi.h"

namespace tcc {

// Threads per block (KernelConfig::block): a multiple of 32 from kMinBlock to kMaxBlock.
inline constexpr int kMinBlock = 32;
inline constexpr int kMaxBlock = 1024;
// The most rows one reduction block takes in turn (KernelConfig::rows_per_block, a power of two).
inline constexpr int kMaxRowsPerBlock = 8;
// The most blocks that may share one reduction row.
inline constexpr int kMaxSplit = 1024;
// The most row elements one thread of a reduction keeps in registers (KernelConfig::row_cache).
inline constexpr int kMaxRowCache = 16;

// The rows a column-reduction block takes side by side: a warp's worth.
constexpr int kColumnRows = 32;
// The f32 elements a vectorized access moves (a float4).
inline constexpr int kVectorWidth = 4;
// The fewest elements one block of a split row reduces (a slice), so that a
// block's start-up and its partial's round trip stay small beside its work; a
// row of symbolic length is cut into slices of this many at run time.
// kColumnMinSlice: the same for column reductions (32 per thread along y).
inline constexpr int64_t kSplitMinSlice = 4096;
inline constexpr int64_t kColumnMinSlice = 256;

struct KernelConfig {
  int block = 256;          // threads per block (a multiple of 32, at most 1024)
  int vector_width = 1;     // pointwise: f32 elements per access, 1 or 4 (4 only where the kernel vectorizes)
  int rows_per_block = 1;   // reduction: rows each block takes in turn (the grid has rows / this blocks)
  // Reduction: blocks sharing each row (grid [rows, split]), each reducing a
  // slice; the last to finish combines the partials. More than 1 only where
  // splits_rows(k) and with one row per block. Gemm template (tile >= 1): the
  // number of slices K is cut into (split-K), combined the same way.
  int split = 1;
  // Reduction: where reduces_columns(k), a block takes kColumnRows neighbouring
  // rows side by side (threadIdx.x) and shares each row's elements among
  // block / kColumnRows threads (threadIdx.y); one row per block otherwise.
  bool columns = false;
  // Reduction with passes after the first (softmax, layer norm): each thread
  // keeps what later passes need of its first row_cache elements in registers
  // (row_cache_refusal says where it may), so the row is read from memory
  // once; 0 re-reads it in every pass. A row longer than row_cache * block
  // (a symbolic length at run time) takes the re-reading path.
  int row_cache = 0;
  // Pointwise, where transpose_axis(k) finds one: the kernel runs over 32 x 32
  // tiles of (that axis, the last), reading its transposed loads along the
  // first into shared memory and writing along the last (emit_cuda.cc).
  bool tiled = false;
  // Gemm and conv (library calls): which algorithm of the library's ranked list
  // for the problem runs, 0 being its first choice: cuBLASLt's heuristic
  // results, cuDNN's forward algorithms that fit the workspace.
  int algo = 0;
  // Gemm: 0 runs the cuBLASLt call (algorithm `algo`); t >= 1 runs tcc's own
  // tensor-core kernel with tile shape kGemmTiles[t - 1] (codegen/gemm_template.h).
  int tile = 0;
  // Attention: 0 takes the warp layout (a lane to a key); 2, 4 or 8 the split
  // layout's lanes to a query row, each taking every that-many-th key (heads up
  // to 64; codegen/attention_template.h). `block` is its threads per block.
  int lanes_per_row = 0;
  // Attention over f16 or bf16: the tensor-core layout (mma.sync, 16 query
  // rows a warp; lanes_per_row 0).
  bool mma = false;

  // Every knob compared, in declaration order: configs key maps (the timer's compiled candidates).
  auto operator<=>(const KernelConfig&) const = default;
};

}  // namespace tcc
