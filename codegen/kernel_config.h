// How one generated CUDA kernel is emitted and launched: the knobs autotuning
// (src/autotune) turns. It lives in codegen because it is the emitter's input;
// codegen/emit_cuda.cc's default_config() gives today's fixed choices, so a
// module compiled without tuning is unchanged.
#pragma once

namespace tcc {

struct KernelConfig {
  int block = 256;          // threads per block (a multiple of 32, at most 1024)
  int vector_width = 1;     // pointwise: f32 elements per access, 1 or 4 (4 only where the kernel vectorizes)
  int rows_per_block = 1;   // reduction: rows each block takes in turn (the grid has rows / this blocks)

  bool operator==(const KernelConfig&) const = default;
};

}  // namespace tcc
