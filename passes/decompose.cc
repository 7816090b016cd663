// decompose: each main-graph node whose op has a decomposition (its OpDef's
// `decompose`, src/ops/decomposition.h) is rewritten into the ops it is made
// of, so that fuse can put the pieces into kernels with their neighbours. The
// decompositions themselves live with their ops in src/ops/<family>.cc
// (`tcc ops` lists them). A piece may decompose in turn (Attention's Softmax):
// the pass repeats until no node changes.
//
// A main-graph output a piece took over (Expansion::take_over) keeps its name
// through an Identity of that piece, made once the node is gone. A node the
// module computes once per binding of the symbols (a causal mask's Trilu over
// a ConstantOfShape: binding_constants.h) stays whole: its pieces would be
// kernels that run every step.
//
// A sequence op resolved over known structure (src/ops/sequence.cc) leaves
// its readers typed as the sequence's element type said, with the dims the
// elements do not share unknown: the pass then infers the graph's shapes
// again, from the elements themselves.
//
// Expects: a verified graph with shapes inferred. Leaves alone: nodes inside
// regions, and any node its decomposition declines (each says when).
#include <unordered_set>

#include "passes/binding_constants.h"
#include "passes/pass.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"

namespace tcc {

bool decompose(Graph& g, PassContext& ctx) {
  bool changed = false, dead_inputs = false, structure_resolved = false;
  // Declined nodes stay in the graph until the pass ends, so their addresses are not reused.
  std::unordered_set<const Node*> declined;
  const ConstantAnalysis shape_determined = analyze_constants(g);
  for (bool again = true; again;) {
    again = false;
    std::vector<Node*> candidates;
    for (const auto& n : g.nodes())
      if (!declined.count(n.get())) candidates.push_back(n.get());
    std::unordered_set<const Node*> unused;
    std::vector<std::pair<size_t, std::string>> moved;
    for (Node* n : candidates) {
      const OpDef* def = OpRegistry::get().lookup(*n);
      // A node one kernel computes whole (an attention) keeps its form: its
      // decomposition is for the nodes that kernel refuses, and for the backward.
      if (def == nullptr || !def->decompose || kernel_role(*n) == KernelRole::Attention ||
          shape_determined.per_binding.count(n) || shape_determined.constant_nodes.count(n))
        continue;
      const std::string op = n->op_type();
      Expansion e(g, *n);
      if (!def->decompose(e)) {
        declined.insert(n);
        continue;
      }
      if (!e.finished()) unused.insert(n);
      moved.insert(moved.end(), e.moved_outputs().begin(), e.moved_outputs().end());
      dead_inputs |= e.dead_inputs();
      structure_resolved |= def->has(kNonTensor);
      ctx.stats.add("decomposed_" + op);
      changed = again = true;
    }
    if (!unused.empty()) g.erase_nodes_if([&](const Node& n) { return unused.count(&n) > 0; });
    // A sequence op or a Loop declined for want of known structure may find
    // it now that another resolved (a ConcatFromSequence after the Loop that
    // builds its sequence unrolls): they are tried again in the next round.
    if (again)
      std::erase_if(declined, [](const Node* n) {
        const OpDef* def = OpRegistry::get().lookup(*n);
        return def->has(kNonTensor) || def->has(kControlFlow);
      });
    std::vector<Value*> outputs = g.outputs();
    for (const auto& [position, name] : moved) {
      Value* piece = outputs[position];
      Node* id = g.add_node("Identity", {piece}, {name}, "", name);
      id->output(0)->set_type(piece->type());
      if (piece->producer()) {
        id->set_source(piece->producer()->source());
        id->set_part(piece->producer()->part());
      }
      outputs[position] = id->output(0);
    }
    g.set_outputs(std::move(outputs));
  }
  if (dead_inputs || structure_resolved) dce(g, ctx);  // a resolved sequence's SequenceConstruct may be unread
  if (structure_resolved) infer_shapes(g);
  return changed;
}

}  // namespace tcc
