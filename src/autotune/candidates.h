// The configurations autotuning tries for one kernel, and the coordinate-descent
// refinement around the best of them (Inductor's coordinate_descent_tuning):
// both are pure functions of the kernel, so the GPU only supplies the costs.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/kernel_schedule.h"
#include "codegen/profiles.h"

namespace tcc::autotune {

// The grid to benchmark for a Pointwise or Reduction kernel, default_config(k,
// device) first, the rest in a fixed order without duplicates, all valid for k:
//   pointwise: block 64..1024 x vector width 1 (and 4 where the kernel vectorizes),
//     and 32 x 32 tiles at each block where transpose_axis finds an axis;
//   reduction: block 32..1024 x rows per block 1, 2, 4 (more rows only for many rows),
//     each with and without the row cache that fits it (where the body may keep one),
//     and where rows can split, split factors 1..2x the heuristic's (at least 64) at its block;
//   gemm and conv: the library's algorithms ranked 0 to kLibraryAlgos - 1 (a rank
//   the library does not offer for the problem fails to run and is dropped);
//   gemm with f32 operands: also tcc's tensor-core template at each of kGemmTiles,
//   and at its two-stage tiles of 64 x 64 or less split-K by 2, 4 and 8.
std::vector<KernelConfig> candidates(const kir::Kernel& k, const DeviceProfile& device = default_device());

// "block=256 vec=4" or "block=256 tiled" (pointwise), "block=128 rows=2",
// "block=64 rows=1 cache=8" or "block=256 rows=1 split=16" (reduction), "cublaslt #2" (gemm: cuBLASLt's third-ranked algorithm),
// "tf32x3 64x64x32 2x2 split=4" (gemm: the template, its tile, warps and K slices), "cudnn #0" (conv).
std::string config_text(const kir::Kernel& k, const KernelConfig& c);

// Cost of one config in microseconds; nullopt when it cannot run (failed to
// compile, wrong output), which is never chosen.
using CostFn = std::function<std::optional<double>(const KernelConfig&)>;

struct DescentResult {
  KernelConfig best;
  double cost = 0;
  std::vector<std::pair<KernelConfig, std::optional<double>>> tried;  // every config costed, in order
};

// Starting at `start` (costed first), repeatedly tries each knob one step up
// and down (block x2 and /2, a row cache refitted to the new block; the other
// vector width; rows x2 and /2; split x2 and /2; tiles, columns and the row
// cache on or off; library kernels have no neighbours: their grid is every choice), moving
// to a neighbour only when it is cheaper by more than `threshold` (relative),
// until no neighbour improves or `max_rounds` rounds ran. Each config is costed
// at most once. Returns nullopt when `start` itself cannot run.
std::optional<DescentResult> coordinate_descent(const kir::Kernel& k, const KernelConfig& start, const CostFn& cost,
                                                double threshold = 0.001, int max_rounds = 16);

}  // namespace tcc::autotune
