// Symbolic shape inference over a whole graph.
//
// Walks the graph in order and applies each op's shape rule (src/ops/),
// threading three kinds of knowledge from node to node: value types, the
// contents of small integer tensors (symbolic, so exporters' shape chains such
// as Shape -> Gather -> Unsqueeze -> Concat -> Reshape resolve to `[batch,
// seq*12, 64]`), and compile-time constants (folded by running the reference
// kernel on constant inputs). Graph inputs' unknown dims get fresh symbols.
// Ops tcc does not know keep the types the model declared for their outputs.
#pragma once

#include <unordered_map>
#include <vector>

#include "src/ir/graph.h"
#include "src/ir/shape_env.h"

namespace tcc {

struct ShapeInfo {
  ShapeEnv env;
  std::unordered_map<const Value*, Tensor> consts;  // compile-time constant values, up to kMaxFoldElements each
  std::unordered_map<const Value*, Dims> values;    // symbolic contents of small int tensors
  std::vector<const Node*> unsupported;             // nodes with no shape rule
};

// Infers and stores the type of every value in g and its regions. Throws an
// InputError naming the node when a rule finds the model inconsistent.
ShapeInfo infer_shapes(Graph& g);

}  // namespace tcc
