// What a compiled module computes without running a step: constants, and the
// values a binding of the graph's symbols determines.
//
// Exporters compute masks and positions from shapes (Shape -> Gather ->
// ConstantOfShape -> Trilu for a causal mask, Range over the sequence length
// for position ids). Such values depend on the input shapes only, never on the
// data: the runtime computes them with the reference implementation when it
// first sees a binding of the symbols, keeps them on the device keyed by that
// binding, and kernels read them as they read weights (docs/MODULE.md,
// "binding_constants"), so a step does no host work and no synchronization
// for them, and a CUDA graph can capture it.
#pragma once

#include <unordered_set>

#include "src/ir/graph.h"

namespace tcc {

struct ConstantAnalysis {
  // Values the module carries, computed at compile time: initializers that are
  // no graph input, and the static-shaped outputs of Constant nodes and of
  // nodes that compute only from such values (left by constant folding
  // because their results are large).
  std::unordered_set<const Value*> constants;
  std::unordered_set<const Node*> constant_nodes;
  // Nodes that run once per binding: deterministic ops with no regions whose
  // inputs are constants, other such nodes' outputs, or (for ops that read
  // only shapes: Shape, Size) any value, and whose outputs have shapes the
  // input dims bind. A node a generated kernel could compute stays in its
  // kernel (a Range feeding an Add, computed from the coordinate) unless a
  // node that no kernel computes reads it.
  std::unordered_set<const Node*> per_binding;
};

ConstantAnalysis analyze_constants(const Graph& g);

}  // namespace tcc
