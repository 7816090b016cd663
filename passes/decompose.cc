// decompose: each main-graph node whose op has a decomposition (its OpDef's
// `decompose`, src/ops/decomposition.h) is rewritten into the ops it is made
// of, so that fuse can put the pieces into kernels with their neighbours.
// The decompositions themselves live with their ops in src/ops/<family>.cc:
// Softmax, LogSoftmax and LayerNormalization (reduction.cc), inference
// BatchNormalization (normalization.cc), GlobalAveragePool and GlobalMaxPool
// (conv_pool.cc), Split (movement.cc), Gemm with a C cuBLASLt cannot take
// (linalg.cc), Gather of one constant index and ScatterElements adding into
// zeros (gather_scatter.cc).
//
// Expects: a verified graph with shapes inferred. Leaves alone: nodes inside
// regions, and any node its decomposition declines (each says when).
#include <unordered_set>

#include "passes/pass.h"
#include "src/ops/op_registry.h"

namespace tcc {

bool decompose(Graph& g, PassContext& ctx) {
  std::vector<Node*> candidates;
  for (const auto& n : g.nodes()) candidates.push_back(n.get());
  bool changed = false, dead_inputs = false;
  std::unordered_set<const Node*> unused;
  for (Node* n : candidates) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (def == nullptr || !def->decompose) continue;
    const std::string op = n->op_type();
    Expansion e(g, *n);
    if (!def->decompose(e)) continue;
    if (!e.finished()) unused.insert(n);
    dead_inputs |= e.dead_inputs();
    ctx.stats.add("decomposed_" + op);
    changed = true;
  }
  if (!unused.empty()) g.erase_nodes_if([&](const Node& n) { return unused.count(&n) > 0; });
  if (dead_inputs) dce(g, ctx);
  return changed;
}

}  // namespace tcc
