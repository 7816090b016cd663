// What a training step's backward keeps from its forward, and what that costs:
// the peak of the memory plan when the backward saves every forward value it
// reads (save-all) against the plan after passes/recompute_activations' min-cut
// choice, both at the given sizes of the symbolic dims.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc {

struct SavedActivations {
  int64_t backward_reads = 0;    // forward values the backward reads (all saved by save-all)
  int64_t saved_values = 0;      // of those, the ones the min-cut saves; the rest are recomputed
  int64_t recomputed_nodes = 0;  // forward nodes copied into the backward
  int64_t save_all_peak = 0;     // arena bytes of the memory plan (codegen/memory_plan.h)
  int64_t min_cut_peak = 0;
  std::map<std::string, int64_t> sizes;  // what the symbols were evaluated at
};

// `step` is the training graph as src/autodiff built it, before any pass;
// each choice takes its own copy of it (clone_model) through the compile
// pipeline up to fusion, the schedule and the memory planner, on a thread of
// its own. `step` is only read. `hints` sizes the symbols (1 when absent).
SavedActivations compare_saved_activations(const Model& step, const std::map<std::string, int64_t>& hints);

// Two lines for explain's and compile's reports.
std::string describe_saved_activations(const SavedActivations& s);

}  // namespace tcc
