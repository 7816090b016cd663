#include "codegen/kernel_passes.h"

#include <algorithm>
#include <chrono>

#include "codegen/collapse_axes.h"
#include "codegen/kernel_ir_verify.h"
#include "codegen/kernel_schedule.h"
#include "src/diag/errors.h"

namespace tcc::kir {

namespace {

void verify_after(const Kernel& k, const std::string& step) {
  if (std::optional<KernelProblem> p = verify_kernel(k))
    throw InternalError("kernel " + k.name + " after " + step + ": " +
                        (p->instr >= 0 ? "%" + std::to_string(p->instr) + ": " : "") + p->message + "\n" +
                        print_kernel(k));
}

// collapse_axes, counting the axes it merges away.
Kernel collapse_axes_pass(Kernel k, KernelPassContext& ctx) {
  size_t axes = k.domain.size();
  k = collapse_axes(std::move(k));
  if (k.domain.size() < axes) ctx.stats.add("axes merged", static_cast<int64_t>(axes - k.domain.size()));
  return k;
}

}  // namespace

const std::vector<KernelPassInfo>& all_kernel_passes() {
  static const std::vector<KernelPassInfo> passes = {
      {"collapse_axes", "Merge neighbouring domain axes that every load and store steps through as one",
       collapse_axes_pass},
      {"vectorize", "Move four f32 elements per access (float4) in pointwise kernels that allow it",
       vectorize_pass},
      {"split_reductions",
       "Share the rows of a reduction with too few rows for the device among blocks, or take them in columns",
       split_reductions_pass},
      {"choose_schedule",
       "Choose each kernel's block size, tiles, row cache and template layout for the device",
       choose_schedule_pass},
  };
  return passes;
}

const KernelPassInfo* find_kernel_pass(std::string_view name) {
  for (const KernelPassInfo& p : all_kernel_passes())
    if (p.name == name) return &p;
  return nullptr;
}

std::string known_kernel_passes() {
  std::string known;
  for (const KernelPassInfo& p : all_kernel_passes()) known += (known.empty() ? "" : ", ") + p.name;
  return known;
}

std::vector<const KernelPassInfo*> default_kernel_pipeline() {
  std::vector<const KernelPassInfo*> pipeline;
  for (const KernelPassInfo& p : all_kernel_passes()) pipeline.push_back(&p);
  return pipeline;
}

std::vector<const KernelPassInfo*> kernel_pipeline(const std::string& names) {
  std::vector<const KernelPassInfo*> pipeline;
  if (names.empty()) return pipeline;
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = std::min(names.find(',', start), names.size());
    std::string name = names.substr(start, end - start);
    const KernelPassInfo* found = find_kernel_pass(name);
    if (found == nullptr)
      throw InputError("unknown kernel-IR pass '" + name + "' (known: " + known_kernel_passes() + ")");
    pipeline.push_back(found);
    start = end + 1;
  }
  return pipeline;
}

KernelPassRunner::KernelPassRunner(std::vector<const KernelPassInfo*> passes, const DeviceProfile& device,
                                   AfterKernelPass after)
    : passes_(std::move(passes)), device_(device), after_(std::move(after)) {
  for (const KernelPassInfo* p : passes_) records_.push_back(PassRecord{p->name, 0, false, {}});
}

Kernel KernelPassRunner::run(Kernel k) {
  verify_after(k, "lowering");
  for (size_t i = 0; i < passes_.size(); ++i) {
    KernelPassContext ctx{device_, {}};
    auto start = std::chrono::steady_clock::now();
    k = passes_[i]->run(std::move(k), ctx);
    PassRecord& r = records_[i];
    r.wall_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& [name, n] : ctx.stats.counters) r.stats.add(name, n);
    r.changed = r.changed || !ctx.stats.counters.empty();
    verify_after(k, passes_[i]->name);
    if (after_) after_(*passes_[i], k, !ctx.stats.counters.empty());
  }
  return k;
}

}  // namespace tcc::kir
