// The tuning step of the compile pipeline (src/compiler/compile.h) in a mode
// that autotunes, and what `tcc autotune` shares with it: the GPU's measurer
// when there is one, and how cache warnings are printed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/module_writer.h"
#include "codegen/profiles.h"
#include "src/autotune/tune.h"

namespace tcc {

// Whether the mode turns on kernel autotuning (max-autotune and its variants).
bool mode_autotunes(const CompileMode& m);

// One config per kernel, measured on the GPU when there is one within
// `budget_s` seconds (0: no limit; new measurements go to the cache at
// `cache_path` when given), else from the cache, else default_config for
// `device`; `summary` says which and why.
std::vector<KernelConfig> compile_autotune(const std::vector<kir::Kernel>& kernels,
                                           const std::map<std::string, int64_t>& sizes, const DeviceProfile& device,
                                           const std::string& cache_path, const std::string& device_name,
                                           double budget_s, AutotuneSummary& summary);

namespace autotune {

// The current GPU's measurer, or nullopt with `why` there is none.
std::optional<Measurer> gpu_measurer(std::string& why);

// Each warning on stderr as "tcc COMMAND: warning: ...".
void print_warnings(const std::string& command, const std::vector<std::string>& warnings);

}  // namespace autotune

}  // namespace tcc
