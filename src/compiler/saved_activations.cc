// Save-all versus min-cut peak memory of a training step (see saved_activations.h).
#include "src/compiler/saved_activations.h"

#include <future>
#include <sstream>

#include "codegen/memory_plan.h"
#include "codegen/module_writer.h"
#include "codegen/schedule.h"
#include "passes/pass_manager.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

constexpr std::string_view kRecomputePass = "recompute_activations";

struct Planned {
  int64_t peak = 0;
  PassStats recompute;  // what recompute_activations counted (empty when it did not run)
};

Planned plan(std::unique_ptr<Model> m, bool min_cut, const std::map<std::string, int64_t>& hints) {
  infer_shapes(*m->graph);
  std::vector<const PassInfo*> pipeline;
  for (const PassInfo* p : build_pipeline("", Phase::Fuse))
    if (min_cut || p->name != kRecomputePass) pipeline.push_back(p);
  std::ostringstream quiet;
  PassManager pm(pipeline, PassManagerOptions{}, quiet);
  pm.run(*m);
  Planned out;
  for (const PassRecord& r : pm.records())
    if (r.name == kRecomputePass) out.recompute = r.stats;
  Schedule schedule = build_schedule(*m->graph);
  MemoryPlan memory = plan_memory(*m->graph, schedule);
  out.peak = evaluate_bytes(memory.arena_bytes, hinted_sizes(*m->graph, hints));
  return out;
}

std::string mib(int64_t bytes) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << bytes / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

}  // namespace

SavedActivations compare_saved_activations(const Model& step, const std::map<std::string, int64_t>& hints) {
  SavedActivations s;
  s.sizes = hinted_sizes(*step.graph, hints);
  // Both copies are made here, before either thread changes its own.
  std::future<Planned> min_cut =
      std::async(std::launch::async, [&, copy = clone_model(step)]() mutable { return plan(std::move(copy), true, hints); });
  Planned all = plan(clone_model(step), false, hints);
  Planned cut = min_cut.get();
  auto counter = [&](const char* name) {
    auto it = cut.recompute.counters.find(name);
    return it == cut.recompute.counters.end() ? int64_t{0} : it->second;
  };
  s.backward_reads = counter("backward_reads");
  s.saved_values = counter("saved_values");
  s.recomputed_nodes = counter("recomputed_nodes");
  s.save_all_peak = all.peak;
  s.min_cut_peak = cut.peak;
  return s;
}

std::string describe_saved_activations(const SavedActivations& s) {
  std::string at;
  for (const auto& [name, v] : s.sizes) at += (at.empty() ? " at " : ", ") + name + "=" + std::to_string(v);
  std::ostringstream out;
  out << "saved activations: the backward reads " << s.backward_reads << " forward values; the min-cut saves "
      << s.saved_values << " and recomputes the rest with " << s.recomputed_nodes << " nodes\n"
      << "peak memory" << at << ": save-all " << mib(s.save_all_peak) << ", min-cut " << mib(s.min_cut_peak) << "\n";
  return out.str();
}

}  // namespace tcc
