// What `tcc kir` does to kernels, as a function: the kernel-IR tests
// (tests/unit/codegen/kernel_ir_file_test.cc) run it in-process as the graph pass
// tests run the pass manager.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/profiles.h"

namespace tcc::kir {

// `tcc kir`'s flags.
struct KernelToolOptions {
  std::string passes;                   // kernel_pipeline: "a,b", "" for none
  std::string emit = "ir";              // ir, cuda or c
  std::string device = kDefaultDevice;  // find_device: the GPU the schedule passes choose for
  bool print_ir_after_all = false;      // each kernel after every pass, to `report`
  bool print_ir_after_change = false;   // each kernel after each pass that changed it, to `report`
  bool time_passes = false;             // the passes' table of times and counters, to `report`
};

// Runs the passes on every kernel, then returns the kernels printed (emit
// "ir"), as CUDA C++ ("cuda": emit_cuda with each kernel's schedule, or its
// default config where it has none) or as host C++ ("c": emit_host). What the
// printing and timing flags ask for goes to `report`, as `tcc opt` writes its
// own. An unknown pass, device or emit is an InputError.
std::string run_kernel_tool(std::vector<Kernel> kernels, const KernelToolOptions& options, std::ostream& report);

}  // namespace tcc::kir
