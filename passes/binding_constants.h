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
  // Nodes a binding determines: deterministic ops with no regions whose
  // inputs are constants, other such nodes' outputs, or (for ops that read
  // only shapes: Shape, Size) any value, and whose outputs have shapes the
  // input dims bind.
  std::unordered_set<const Node*> determined;
  // The determined nodes that run once per binding: those no generated kernel
  // computes, and those read by one that runs once per binding, by a fusion
  // node (so outside any kernel) or by a node no kernel computes. Any other
  // stays for fuse to decide: in a kernel with nodes that read data (a Range
  // feeding an Add, computed from the coordinate), or, where its kernel would
  // compute from the binding alone, once per binding (fuse leaves such a group
  // unfused, and on the fused graph fusion nodes read it).
  std::unordered_set<const Node*> per_binding;
};

ConstantAnalysis analyze_constants(const Graph& g);

}  // namespace tcc
