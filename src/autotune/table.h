// The text `tcc autotune` prints, in the style of Inductor's autotune log: per
// kernel a header with the op and its shapes, then one row per candidate with
// its time and percentage of the best (or "not measured"), and a summary of
// what changed versus the default configurations.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "src/autotune/tune.h"

namespace tcc::autotune {

// `steps[i]`: how many schedule steps run kernel i (regional reuse), for the
// expected gain over the whole model.
std::string tuning_table(const std::vector<kir::Kernel>& kernels, const TuneResult& r, const std::vector<int>& steps);

}  // namespace tcc::autotune
