// Memory planning: liveness-based reuse of device buffers for the values that
// flow between schedule steps.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "codegen/schedule.h"

namespace tcc {

struct PlannedBuffer {
  std::string value;            // the graph value
  DType dtype = DType::F32;
  std::vector<SymExpr> shape;
  SymExpr nbytes;               // 256-byte aligned
  SymExpr offset;               // in the arena
  int first_step = 0, last_step = 0;  // live range over Schedule::steps (a view's: its source's)
};

struct MemoryPlan {
  // Intermediates only (inputs, outputs and weights have their own memory): the
  // values steps write, in first-write order, then the views at their sources' offsets.
  std::vector<PlannedBuffer> buffers;
  SymExpr arena_bytes;                 // what the plan allocates
  SymExpr unplanned_bytes;             // one buffer per value, for comparison
};

// Plans intermediates of `s` over graph g. A freed slot is reused when its size
// is provably at least the new value's (equal expressions, or both static).
MemoryPlan plan_memory(const Graph& g, const Schedule& s);

// Bytes `e` counts when its symbols take the given sizes (for the report); a
// symbol `sizes` lacks, a data-dependent size such as NonZero's u0 that no
// input dim gives, counts as 1, as an unhinted input symbol does.
int64_t evaluate_bytes(const SymExpr& e, const std::map<std::string, int64_t>& sizes);

}  // namespace tcc
