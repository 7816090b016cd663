// Replacing a set of nodes by one new node that takes over the names of some
// of their outputs.
//
// Passes that swap nodes for a different op (resolve_shapes, fuse) must keep
// the names of the values they replace: a main-graph output's name is the
// model's signature, and keeping every other name keeps the IR readable. A
// value's name is fixed when it is created, so the old nodes are erased first
// and the new node is created with the freed names; every read of a kept value
// outside the replaced nodes (node inputs, reads inside regions, graph
// outputs) is then pointed at the new node's output.
#pragma once

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

// Erases `nodes` (nodes of g) and calls `build(before, names)`, which must
// insert one node into g before `before` (g.insert_node) whose output i is
// named names[i] = kept[i]->name(), reading no output of `nodes`. Output i of
// the new node then replaces kept[i] everywhere outside `nodes`. `before` is
// the first node after the last of `nodes` (null at the end of the graph), so
// the new node sits where the last replaced node was; callers that replace
// non-contiguous nodes restore topological order with g.topo_sort(). What
// the build inserts computes the latest part of the step (StepPart) that any
// of `nodes` did.
Node* replace_nodes(Graph& g, const std::unordered_set<const Node*>& nodes, const std::vector<Value*>& kept,
                    const std::function<Node*(Node* before, const std::vector<std::string>& names)>& build);

}  // namespace tcc
