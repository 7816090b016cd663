#include "src/autotune/tune.h"

#include <algorithm>

#include "codegen/emit.h"
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

void measure(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes, const TuneOptions& o,
             KernelChoice& choice, TuneResult& result) {
  std::unique_ptr<KernelBench> bench = o.measurer->bench(k, sizes);
  std::vector<KernelConfig> grid = candidates(k, *o.device);
  bench->precompile(grid);
  for (const KernelConfig& c : grid) {
    CandidateRow row{c, std::nullopt, ""};
    row.time_us = bench->time_us(c, row.note);
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
  if (o.refine) {
    // Descent reuses the grid's times and measures only configs off the grid.
    CostFn cost = [&](const KernelConfig& c) -> std::optional<double> {
      for (const CandidateRow& r : choice.rows)
        if (r.config == c) return r.time_us;
      CandidateRow row{c, std::nullopt, ""};
      row.time_us = bench->time_us(c, row.note);
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

TuneResult tune_kernels(const std::vector<kir::Kernel>& kernels, const std::map<std::string, int64_t>& sizes,
                        const TuneOptions& o) {
  TuneResult result;
  std::string name;
  if (o.measurer)
    result.device_note = "measured on " + o.measurer->device.name + " (" + o.measurer->device.arch + ", driver " +
                         o.measurer->device.driver + ", CUDA " + o.measurer->device.cuda + ")";
  else
    name = device_without_gpu(o, result.device_note);

  for (size_t i = 0; i < kernels.size(); ++i) {
    const kir::Kernel& k = kernels[i];
    KernelChoice choice;
    choice.op = op_summary(k, sizes);
    choice.signature = kernel_signature(k, sizes);
    choice.config = default_config(k, *o.device);
    const CacheEntry* entry = nullptr;
    if (o.cache && o.measurer) entry = find_entry(*o.cache, o.measurer->device, choice.signature);
    else if (o.cache && !name.empty()) entry = find_entry_by_name(*o.cache, name, choice.signature);
    std::string why_not;
    if (entry) why_not = invalid_reason(k, entry->config);
    if (entry && !why_not.empty()) {
      choice.note = "cache entry ignored: " + why_not;
      entry = nullptr;
    }
    if (o.measurer && (!entry || o.measure_cached)) {
      measure(k, sizes, o, choice, result);
    } else if (entry) {
      choice.source = KernelChoice::Source::Cache;
      choice.config = entry->config;
      choice.default_time_us = entry->default_time_us;
      ++result.from_cache;
    } else {
      ++result.by_heuristic;
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
    result.configs.push_back(choice.config);
    result.kernels.push_back(std::move(choice));
    if (o.progress) o.progress(i + 1, kernels.size());
  }
  return result;
}

}  // namespace tcc::autotune
