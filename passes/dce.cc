// dce: dead-code elimination.
//
// Removes every node none of whose outputs reaches a graph output (directly,
// through other live nodes, or through values a live node's regions read),
// then the initializers nothing reads any more. Regions of live nodes are
// cleaned the same way against their own outputs. tcc models no
// side-effecting ops, so any node that feeds nothing is removable.
//
// Expects: a verified graph (nodes in topological order).
// Leaves alone: graph inputs (of the main graph and of regions; their
// positions are the graph's signature), graph outputs, and the order of the
// nodes it keeps.
#include <unordered_set>

#include "passes/pass.h"

namespace tcc {

namespace {

// Cleans `g` and adds to `live` every value `g` reads, including values of
// enclosing graphs, so the caller keeps their producers.
bool dce_graph(Graph& g, std::unordered_set<const Value*>& live, PassStats& stats) {
  live.insert(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const Node*> dead;
  bool changed = false;
  // Reverse order: every user of a node is decided before the node itself.
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    Node& n = **it;
    bool used = false;
    for (const Value* out : n.outputs()) used |= live.count(out) != 0;
    if (!used) {
      dead.insert(&n);
      continue;
    }
    for (Graph* r : n.regions()) changed |= dce_graph(*r, live, stats);
    live.insert(n.inputs().begin(), n.inputs().end());
  }
  if (!dead.empty()) {
    g.erase_nodes_if([&](const Node& n) { return dead.count(&n) != 0; });
    stats.add("nodes_removed", static_cast<int64_t>(dead.size()));
    changed = true;
  }
  size_t before = g.initializers().size();
  g.remove_unused_initializers();
  if (size_t removed = before - g.initializers().size()) {
    stats.add("initializers_removed", static_cast<int64_t>(removed));
    changed = true;
  }
  return changed;
}

}  // namespace

bool dce(Graph& g, PassContext& ctx) {
  std::unordered_set<const Value*> live;
  return dce_graph(g, live, ctx.stats);
}

}  // namespace tcc
