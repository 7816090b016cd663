// The kernel-IR passes: one list, from which build_schedule's pipeline after
// lowering (codegen/schedule.h) and `tcc kir --passes=` are built, as
// passes/pass_registry.cc lists the graph passes. Adding a pass: write a
// function from kernel to kernel (its own codegen/<name>.{h,cc}, or beside
// the schedule's heuristics in codegen/kernel_schedule.cc for a schedule
// decision) and add one line to all_kernel_passes, where it should run.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/profiles.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"

namespace tcc::kir {

// What a pass reads besides the kernel, and what it counts.
struct KernelPassContext {
  const DeviceProfile& device;  // the GPU the schedule passes choose for
  PassStats stats;              // counters, summed over the kernels a pipeline runs on
};

struct KernelPassInfo {
  std::string name;
  std::string summary;
  Kernel (*run)(Kernel, KernelPassContext&);
};

const std::vector<KernelPassInfo>& all_kernel_passes();
// Null when no pass has this name.
const KernelPassInfo* find_kernel_pass(std::string_view name);
// Every pass's name in list order, comma-separated, for help and error messages.
std::string known_kernel_passes();

// Every pass, in list order: what build_schedule runs.
std::vector<const KernelPassInfo*> default_kernel_pipeline();
// The passes "a,b" names, in that order ("": none). An unknown name is an
// InputError listing the known ones.
std::vector<const KernelPassInfo*> kernel_pipeline(const std::string& names);

// Called after each pass on each kernel, with whether the pass counted a
// change in that kernel: what `tcc kir --print-ir-after-all` prints from.
using AfterKernelPass = std::function<void(const KernelPassInfo& pass, const Kernel& k, bool changed)>;

// Runs `passes` on kernels for one device, verifying (codegen/kernel_ir_verify.h)
// each kernel before the first pass and after each: a kernel that breaks an
// invariant is an InternalError naming the kernel and the step that produced
// it (lowering or a pass). records() holds one PassRecord per pass of the
// pipeline: its wall time and counters summed over every kernel run, changed
// when it counted anything (each pass counts what it changes).
class KernelPassRunner {
 public:
  KernelPassRunner(std::vector<const KernelPassInfo*> passes, const DeviceProfile& device,
                   AfterKernelPass after = {});

  Kernel run(Kernel k);

  const std::vector<PassRecord>& records() const { return records_; }

 private:
  std::vector<const KernelPassInfo*> passes_;
  const DeviceProfile& device_;
  AfterKernelPass after_;
  std::vector<PassRecord> records_;
};

}  // namespace tcc::kir
