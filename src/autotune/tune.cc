#include "src/autotune/tune.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <numeric>
#include <sstream>

#include "codegen/emit.h"
#include "codegen/memory_plan.h"
#include "src/autotune/candidates.h"
#include "src/autotune/signature.h"

namespace tcc::autotune {

namespace {

// Whose entries a machine without a GPU uses: the named device, or the only
// device the cache holds.
std::string device_without_gpu(const TuneOptions& o, std::string& note) {
  if (!o.cache || o.cache->empty()) {
    note = "no tuning cache entries";
    return "";
  }
  std::vector<std::string> names = device_names(*o.cache);
  if (!o.device_name.empty()) {
    if (std::find(names.begin(), names.end(), o.device_name) == names.end()) {
      std::string have;
      for (const std::string& n : names) have += (have.empty() ? "" : ", ") + n;
      note = "the cache has no entries for device '" + o.device_name + "' (it has: " + have + ")";
      return "";
    }
    note = "cache entries of " + o.device_name;
    return o.device_name;
  }
  if (names.size() == 1) {
    note = "cache entries of " + names.front() + ", the only device in the cache";
    return names.front();
  }
  std::string have;
  for (const std::string& n : names) have += (have.empty() ? "" : ", ") + n;
  note = "the cache holds several devices (" + have + "); choose one with --device-name";
  return "";
}

// The tuning clock and its budget.
class Budget {
 public:
  explicit Budget(const TuneOptions& o) : limit_(o.budget_s), clock_(o.clock ? o.clock : steady_seconds), start_(clock_()) {}
  bool spent() const { return limit_ > 0 && elapsed() >= limit_; }
  double elapsed() const { return clock_() - start_; }
  double limit() const { return limit_; }

 private:
  static double steady_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  double limit_;
  std::function<double()> clock_;
  double start_;
};

// A ranking weight of kernel k's time at `sizes`: bytes moved plus FLOPs over
// 16, about an H100's f32 CUDA-core FLOPs per byte of memory bandwidth. Only
// the order it gives matters.
double weight(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
  return static_cast<double>(evaluate_bytes(bytes_moved(k), sizes)) +
         static_cast<double>(evaluate_bytes(flop_count(k), sizes)) / 16.0;
}

void measure(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes, const TuneOptions& o,
             const Budget& budget, KernelChoice& choice, TuneResult& result) {
  std::unique_ptr<KernelBench> bench = o.measurer->bench(k, sizes);
  std::vector<KernelConfig> grid = candidates(k, *o.device);
  bench->precompile(grid);
  for (const KernelConfig& c : grid) {
    CandidateRow row{c, std::nullopt, ""};
    // The default is always timed: it is what every other candidate is checked against.
    if (!choice.rows.empty() && budget.spent()) row.note = budget_note(budget.limit());
    else row.time_us = bench->time_us(c, row.note);
    choice.rows.push_back(row);
  }
  choice.default_time_us = choice.rows.front().time_us;
  if (!choice.default_time_us) {
    choice.note = "the default configuration failed (" + choice.rows.front().note + "); kept it";
    return;
  }
  const CandidateRow* best = &choice.rows.front();
  for (const CandidateRow& r : choice.rows)
    if (r.time_us && *r.time_us < *best->time_us) best = &r;
  KernelConfig chosen = best->config;
  double chosen_us = *best->time_us;
  if (o.refine && !budget.spent()) {
    // Descent reuses the grid's times and measures only configs off the grid, while the budget lasts.
    CostFn cost = [&](const KernelConfig& c) -> std::optional<double> {
      for (const CandidateRow& r : choice.rows)
        if (r.config == c) return r.time_us;
      CandidateRow row{c, std::nullopt, ""};
      if (budget.spent()) row.note = budget_note(budget.limit());
      else row.time_us = bench->time_us(c, row.note);
      choice.rows.push_back(row);
      return row.time_us;
    };
    if (std::optional<DescentResult> d = coordinate_descent(k, chosen, cost)) {
      chosen = d->best;
      chosen_us = d->cost;
    }
  }
  choice.source = KernelChoice::Source::Measured;
  choice.config = chosen;
  ++result.by_measurement;
  int measured = 0;
  for (const CandidateRow& r : choice.rows) measured += r.time_us.has_value();
  result.measured.push_back(
      {o.measurer->device, choice.signature, choice.op, chosen, chosen_us, *choice.default_time_us, measured});
}

}  // namespace

const char* source_name(KernelChoice::Source s) {
  switch (s) {
    case KernelChoice::Source::Measured: return "measured";
    case KernelChoice::Source::Cache: return "cache";
    case KernelChoice::Source::Heuristic: return "heuristic";
  }
  return "?";
}

std::string budget_note(double budget_s) {
  std::ostringstream s;
  s << "not measured: the tuning budget of " << budget_s << " s was spent";
  return s.str();
}

std::string budget_summary(const TuneResult& r, double budget_s) {
  if (budget_s <= 0) return "";
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << "; " << r.spent_s << " s of the " << std::defaultfloat << budget_s
    << " s budget";
  if (r.cut_by_budget > 0) s << ", " << r.cut_by_budget << " kernel" << (r.cut_by_budget == 1 ? "" : "s") << " left unmeasured";
  return s.str();
}

TuneResult tune_kernels(const std::vector<kir::Kernel>& kernels, const std::map<std::string, int64_t>& sizes,
                        const TuneOptions& o) {
  TuneResult result;
  std::string name;
  if (o.measurer)
    result.device_note = "measured on " + o.measurer->device.name + " (" + o.measurer->device.arch + ", driver " +
                         o.measurer->device.driver + ", CUDA " + o.measurer->device.cuda + ")";
  else
    name = device_without_gpu(o, result.device_note);

  const Budget budget(o);
  std::vector<size_t> order(kernels.size());
  std::iota(order.begin(), order.end(), 0);
  if (o.measurer) {
    std::vector<double> weights;
    for (const kir::Kernel& k : kernels) weights.push_back(weight(k, sizes));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  }
  result.configs.resize(kernels.size());
  result.kernels.resize(kernels.size());
  std::map<std::string, size_t> measured_by_signature;  // kernels measured in this run
  std::vector<size_t> measured_kernel;                   // the kernel of each entry of result.measured
  size_t done = 0;
  for (size_t i : order) {
    const kir::Kernel& k = kernels[i];
    KernelChoice choice;
    choice.op = op_summary(k, sizes);
    choice.signature = kernel_signature(k, sizes);
    choice.config = default_config(k, *o.device);
    const CacheEntry* entry = nullptr;
    if (o.cache && o.measurer) entry = find_entry(*o.cache, o.measurer->device, choice.signature);
    else if (o.cache && !name.empty()) entry = find_entry_by_name(*o.cache, name, choice.signature);
    std::string why_not;
    if (entry) why_not = config_refusal(k, entry->config);
    if (entry && !why_not.empty()) {
      choice.note = "cache entry ignored: " + why_not;
      entry = nullptr;
    }
    auto same = measured_by_signature.find(choice.signature);
    const bool wants_measuring = o.measurer && (!entry || o.measure_cached);
    if (wants_measuring && same != measured_by_signature.end()) {
      const KernelChoice& first = result.kernels[same->second];
      choice.source = first.source;
      choice.config = first.config;
      choice.rows = first.rows;
      choice.default_time_us = first.default_time_us;
      choice.note = "tuned once with " + kernels[same->second].name + " (the same signature)";
      ++result.by_measurement;
      ++result.shared;
    } else if (wants_measuring && !budget.spent()) {
      measure(k, sizes, o, budget, choice, result);
      measured_kernel.resize(result.measured.size(), i);
      if (choice.source == KernelChoice::Source::Measured) measured_by_signature.emplace(choice.signature, i);
    } else {
      if (wants_measuring) {
        choice.note = budget_note(budget.limit());
        ++result.cut_by_budget;
      }
      if (entry) {
        choice.source = KernelChoice::Source::Cache;
        choice.config = entry->config;
        choice.default_time_us = entry->default_time_us;
        ++result.from_cache;
      } else {
        ++result.by_heuristic;
      }
    }
    if (choice.rows.empty())
      for (const KernelConfig& c : candidates(k, *o.device)) {
        CandidateRow row{c, std::nullopt, "not measured"};
        if (entry && c == entry->config) row = {c, entry->time_us, ""};
        choice.rows.push_back(row);
      }
    if (entry && std::none_of(choice.rows.begin(), choice.rows.end(),
                              [&](const CandidateRow& r) { return r.config == entry->config; }))
      choice.rows.push_back({entry->config, entry->time_us, ""});
    result.configs[i] = choice.config;
    result.kernels[i] = std::move(choice);
    if (o.progress) o.progress(++done, kernels.size());
  }
  // New cache entries in kernel order, as the schedule lists them.
  std::vector<size_t> by_kernel(result.measured.size());
  std::iota(by_kernel.begin(), by_kernel.end(), 0);
  std::stable_sort(by_kernel.begin(), by_kernel.end(),
                   [&](size_t a, size_t b) { return measured_kernel[a] < measured_kernel[b]; });
  std::vector<CacheEntry> measured;
  for (size_t e : by_kernel) measured.push_back(std::move(result.measured[e]));
  result.measured = std::move(measured);
  result.spent_s = budget.elapsed();
  return result;
}

}  // namespace tcc::autotune
