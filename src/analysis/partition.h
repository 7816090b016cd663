// Graph-break analysis: which nodes tcc cannot compile, and the compiled
// graphs (regions) the rest of the model splits into.
//
// A node breaks the graph when tcc does not know it (unsupported_op), when its
// output shape depends on tensor data (data_dependent_shape), when it branches
// or loops on tensor data (data_dependent_control_flow), or when it reads or
// makes sequences, optionals or strings (non_tensor_value). Values computed
// only from shapes and constants (exporters' Shape -> Gather -> Concat ->
// Reshape chains) are not tensor data: they never cause a break.
//
// Regions are maximal sets of compilable nodes such that the regions and the
// break nodes between them form no cycle: each break node runs eagerly and the
// regions run as compiled graphs in order.
#pragma once

#include <string>
#include <vector>

#include "src/ir/graph.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"

namespace tcc {

struct GraphBreak {
  const Node* node = nullptr;
  std::string reason;   // unsupported_op, data_dependent_shape, data_dependent_control_flow, non_tensor_value
  std::string message;  // one line: what is wrong
  std::string hint;     // one line: what the user can do
  // torch's words for it in the selected release, up to their first blank
  // line (explain_model sets it); empty where tcc does not know them.
  std::string torch_reason;
};

struct CompiledRegion {
  int id = 0;
  std::vector<const Node*> nodes;        // in graph order
  std::vector<const Value*> graph_inputs;  // model inputs the region reads, in model order
  // Results of breaks whose sizes the data sets (NonZero, Unique, Compress)
  // that the region reads: torch's frame resuming after the break takes such a
  // result as an input (`___stack0`) whose size changes from call to call.
  std::vector<const Value*> data_dependent_inputs;
};

struct Partition {
  std::vector<CompiledRegion> regions;
  std::vector<GraphBreak> breaks;  // in graph order
};

// Splits the main graph into compiled regions and break nodes. `info` must come
// from infer_shapes on the same graph; `registry` answers op support (tests pass
// their own, the tool passes OpRegistry::get()).
Partition partition_graph(const Graph& g, const ShapeInfo& info, const OpRegistry& registry);

}  // namespace tcc
