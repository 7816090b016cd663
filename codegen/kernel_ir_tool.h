// What `tcc kir` does to kernels, as a function: the kernel-IR tests
// (tests/unit/codegen/kernel_ir_file_test.cc) run it in-process as the graph pass
// tests run the pass manager.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/profiles.h"

namespace tcc::kir {

// Runs the kernel-IR passes `passes` names (kernel_pipeline: "a,b", "" for
// none) on every kernel for the device `device` names (find_device: the
// schedule passes choose for it), then returns them printed (emit "ir"), as
// CUDA C++ ("cuda": emit_cuda with each kernel's schedule, or its default
// config where it has none) or as host C++ ("c": emit_host). An unknown pass,
// device or emit is an InputError.
std::string run_kernel_tool(std::vector<Kernel> kernels, const std::string& passes, const std::string& emit,
                            const std::string& device = kDefaultDevice);

}  // namespace tcc::kir
