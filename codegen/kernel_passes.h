// The kernel-IR passes: one list, from which build_schedule's pipeline after
// lowering (codegen/schedule.h) and `tcc kir --passes=` are built, as
// passes/pass_registry.cc lists the graph passes. Adding a pass: write
// codegen/<name>.{h,cc} (a function from kernel to kernel) and add one line to
// all_kernel_passes, where it should run.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace tcc::kir {

struct KernelPassInfo {
  std::string name;
  std::string summary;
  Kernel (*run)(Kernel);
};

const std::vector<KernelPassInfo>& all_kernel_passes();

// Every pass, in list order: what build_schedule runs.
std::vector<const KernelPassInfo*> default_kernel_pipeline();
// The passes "a,b" names, in that order ("": none). An unknown name is an
// InputError listing the known ones.
std::vector<const KernelPassInfo*> kernel_pipeline(const std::string& names);

// k through `passes`, verified (codegen/kernel_ir_verify.h) before the first
// and after each: a kernel that breaks an invariant is an InternalError
// naming the kernel and the step that produced it (lowering or a pass).
Kernel run_kernel_passes(Kernel k, const std::vector<const KernelPassInfo*>& passes);

}  // namespace tcc::kir
