#include "passes/pass_manager.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ostream>

#include "src/ir/text.h"
#include "src/ir/verifier.h"
#include "src/log/log.h"

namespace tcc {

std::string known_passes() {
  std::string s;
  for (const PassInfo& p : all_passes()) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

namespace {

std::string counters_text(const PassStats& stats) {
  std::string s;
  for (const auto& [name, n] : stats.counters) s += (s.empty() ? "" : " ") + name + "=" + std::to_string(n);
  return s;
}

}  // namespace

Phase parse_phase_or_throw(const std::string& name) {
  if (auto p = parse_phase(name)) return *p;
  throw InputError("unknown phase '" + name + "'; phases: import, optimize, fuse, codegen");
}

std::vector<const PassInfo*> build_pipeline(const std::string& spec, std::optional<Phase> stop_after) {
  std::vector<const PassInfo*> passes;
  if (spec.empty()) {
    for (const PassInfo& p : all_passes()) passes.push_back(&p);
  } else {
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = std::min(spec.find(',', pos), spec.size());
      std::string name = spec.substr(pos, comma - pos);
      pos = comma + 1;
      const PassInfo* p = find_pass(name);
      if (!p) throw InputError("unknown pass '" + name + "'; known passes: " + known_passes());
      passes.push_back(p);
    }
  }
  if (stop_after)
    std::erase_if(passes, [&](const PassInfo* p) { return p->phase > *stop_after; });
  return passes;
}

PassManager::PassManager(std::vector<const PassInfo*> passes, PassManagerOptions options, std::ostream& report)
    : passes_(std::move(passes)), options_(options), report_(report) {}

bool PassManager::run(Model& m) {
  bool any_changed = false;
  for (const PassInfo* p : passes_) {
    PassContext ctx;
    ctx.fusion = options_.fusion;
    ctx.precision = options_.precision;
    // Comparing printed text (not the pass's own flag) decides "changed" for
    // printing, so a pass that under-reports still shows its effect; only paid
    // for when printing is asked for.
    bool printing = options_.print_ir_after_all || options_.print_ir_after_change;
    std::string before = printing ? print_model(m) : "";
    auto start = std::chrono::steady_clock::now();
    bool changed = p->fn(*m.graph, ctx);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    records_.push_back({std::string(p->name), ms, changed, ctx.stats});
    any_changed |= changed;
    log_topic(LogTopic::Passes, "{}: {} in {:.3f} ms {}", p->name, changed ? "changed" : "unchanged", ms,
              counters_text(ctx.stats));

    if (options_.verify) {
      auto problems = verify(*m.graph);
      if (!problems.empty()) {
        std::string msg = "pass '" + std::string(p->name) + "' left the IR malformed:";
        for (const auto& prob : problems) msg += "\n  " + prob;
        throw InternalError(msg);
      }
    }
    if (printing) {
      std::string after = print_model(m);
      if (options_.print_ir_after_all || after != before)
        report_ << "// ----- IR after " << p->name << (after != before ? "" : " (unchanged)") << " -----\n"
                << after;
    }
    if (options_.after_pass) options_.after_pass(*p, m);
  }
  if (options_.time_passes) report_ << timing_table();
  return any_changed;
}

std::string PassManager::timing_table() const { return tcc::timing_table(records_); }

std::string timing_table(const std::vector<PassRecord>& records) {
  size_t width = 4;
  for (const auto& r : records) width = std::max(width, r.name.size());
  std::string s;
  char line[256];
  std::snprintf(line, sizeof line, "%-*s  %10s  %-7s  %s\n", static_cast<int>(width), "pass", "wall ms", "changed",
                "counters");
  s += line;
  double total = 0;
  for (const auto& r : records) {
    total += r.wall_ms;
    std::snprintf(line, sizeof line, "%-*s  %10.3f  %-7s  ", static_cast<int>(width), r.name.c_str(), r.wall_ms,
                  r.changed ? "yes" : "no");
    s += line + counters_text(r.stats) + "\n";
  }
  std::snprintf(line, sizeof line, "%-*s  %10.3f\n", static_cast<int>(width), "total", total);
  return s + line;
}

}  // namespace tcc
