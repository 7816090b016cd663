// What identifies a kernel in the tuning cache: its structure (codegen's
// structural key: domain, buffers' dtypes and shapes, the body with its
// epilogue) plus the sizes its symbolic dims were tuned at. Two kernels with
// the same signature run the same code on the same data sizes, so one
// measurement serves both, in any model.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "codegen/kernel_ir.h"

namespace tcc::autotune {

// structural_key(k), then "at b=8, seq=128" for the size parameters it reads
// (each from `sizes`, 1 when absent, as the compile report does).
std::string kernel_signature(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes);

// One line for the tuning table, in the style of Inductor's autotune log:
// "pointwise(f32[8,768], f32[768]) -> f32[8,768]" at the given sizes.
std::string op_summary(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes);

}  // namespace tcc::autotune
