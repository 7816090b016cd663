// The compile pipeline's tuning step (see compile_autotune.h).
#include "src/autotune/compile_autotune.h"

#include <iostream>

#include "src/autotune/kernel_timer.h"
#include "src/autotune/progress.h"
#include "src/autotune/tuning_cache.h"
#include "src/runtime/module.h"

namespace tcc {

namespace autotune {

std::optional<Measurer> gpu_measurer(std::string& why) {
  try {
    return runtime::cuda_measurer();
  } catch (const runtime::NoDevice& e) {
    why = e.what();
    return std::nullopt;
  }
}

void print_warnings(const std::string& command, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) std::cerr << "tcc " << command << ": warning: " << w << "\n";
}

}  // namespace autotune

bool mode_autotunes(const CompileMode& m) {
  for (const Feature* f : m.features)
    if (f->name == kAutotuneFeature) return true;
  return false;
}

std::vector<KernelConfig> compile_autotune(const std::vector<kir::Kernel>& kernels,
                                           const std::map<std::string, int64_t>& sizes, const DeviceProfile& device,
                                           const std::string& cache_path, const std::string& device_name,
                                           double budget_s, AutotuneSummary& summary) {
  autotune::LoadedCache cache;
  if (!cache_path.empty()) {
    cache = autotune::load_cache(cache_path);
    autotune::print_warnings("compile", cache.warnings);
  }
  std::string no_gpu;
  std::optional<autotune::Measurer> gpu = autotune::gpu_measurer(no_gpu);
  autotune::TuneOptions options;
  options.cache = &cache.entries;
  options.device = &device;
  options.device_name = device_name;
  options.measurer = gpu ? &*gpu : nullptr;
  options.budget_s = budget_s;
  autotune::ProgressBar bar = autotune::ProgressBar::for_stderr("kernels tuned");
  if (gpu) options.progress = [&](size_t done, size_t total) { bar.update(done, total); };
  autotune::TuneResult r = autotune::tune_kernels(kernels, sizes, options);
  bar.finish();
  if (!r.measured.empty() && !cache_path.empty())
    autotune::print_warnings("compile", autotune::add_to_cache(cache_path, r.measured));

  for (const autotune::KernelChoice& k : r.kernels) summary.sources.push_back(autotune::source_name(k.source));
  summary.measured = r.by_measurement;
  summary.from_cache = r.from_cache;
  summary.heuristic = r.by_heuristic;
  summary.budget_cut = r.cut_by_budget;
  if (gpu)
    summary.note = r.device_note + autotune::budget_summary(r, budget_s);
  else if (cache_path.empty())
    summary.note = "no GPU (" + no_gpu + ") and no --cache: heuristic configurations";
  else
    summary.note = "no GPU (" + no_gpu + "): heuristics and " + r.device_note;
  return r.configs;
}

}  // namespace tcc
