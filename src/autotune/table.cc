#include "src/autotune/table.h"

#include <algorithm>
#include <cstdio>

#include "src/autotune/candidates.h"

namespace tcc::autotune {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::string tuning_table(const std::vector<kir::Kernel>& kernels, const TuneResult& r, const std::vector<int>& steps) {
  std::string out;
  double default_us = 0, chosen_us = 0;
  int changed = 0;
  for (size_t i = 0; i < kernels.size(); ++i) {
    const kir::Kernel& k = kernels[i];
    const KernelChoice& c = r.kernels[i];
    out += "AUTOTUNE " + k.name + " " + c.op;
    if (steps[i] > 1) out += " (x" + std::to_string(steps[i]) + " steps)";
    out += "\n";
    std::optional<double> best;
    for (const CandidateRow& row : c.rows)
      if (row.time_us && (!best || *row.time_us < *best)) best = row.time_us;
    // Measured rows fastest first, as Inductor lists them; unmeasured ones keep candidate order.
    std::vector<const CandidateRow*> rows;
    for (const CandidateRow& row : c.rows) rows.push_back(&row);
    std::stable_sort(rows.begin(), rows.end(), [](const CandidateRow* a, const CandidateRow* b) {
      if (a->time_us.has_value() != b->time_us.has_value()) return a->time_us.has_value();
      return a->time_us && *a->time_us < *b->time_us;
    });
    // The config column as wide as this kernel's longest (at least 18, a reduction's "block=1024 rows=4").
    size_t width = 18;
    for (const CandidateRow* row : rows) width = std::max(width, config_text(k, row->config).size());
    for (const CandidateRow* row : rows) {
      std::string line = "  " + pad(config_text(k, row->config), width);
      if (row->time_us)
        line += fmt("%9.2f us", *row->time_us) + fmt(" %6.1f%%", 100.0 * *best / *row->time_us);
      else
        line += "  " + row->note;
      if (row->config == c.config) line += "  <- chosen (" + std::string(source_name(c.source)) + ")";
      if (row == &c.rows.front()) line += "  [default]";
      out += line + "\n";
    }
    if (!c.note.empty()) out += "  note: " + c.note + "\n";
    if (c.config != c.rows.front().config) ++changed;
    if (c.default_time_us && best) {
      default_us += *c.default_time_us * steps[i];
      const CandidateRow* chosen = nullptr;
      for (const CandidateRow& row : c.rows)
        if (row.config == c.config) chosen = &row;
      chosen_us += (chosen && chosen->time_us ? *chosen->time_us : *c.default_time_us) * steps[i];
    }
  }
  out += "Summary: " + std::to_string(kernels.size()) + " kernels: " + std::to_string(r.by_measurement) +
         " measured, " + std::to_string(r.from_cache) + " from the cache, " + std::to_string(r.by_heuristic) +
         " by heuristics; " + std::to_string(changed) +
         " differ from the default configuration\n";
  if (default_us > 0)
    out += "Expected gain: " + fmt("%.2f", default_us) + " us -> " + fmt("%.2f", chosen_us) + " us per run (" +
           fmt("%.2fx", default_us / chosen_us) + ") over the measured kernels\n";
  return out;
}

}  // namespace tcc::autotune
