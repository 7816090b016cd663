// constant_fold: replaces values that shape inference proves constant by
// initializers.
//
// Shape inference (run here afresh, so the pass sees the graph as it is now)
// records in ShapeInfo.consts every value it can compute at compile time:
// nodes whose inputs are all constant, and values fixed by static shapes
// alone, such as an exporter's Shape -> Gather -> Concat chain over an input
// whose dims are static. A node is folded when all its outputs are such
// constants; each output some unfolded node (or a region, or a region output)
// still reads becomes an initializer, and the folded nodes are erased. When a
// dim is symbolic, Shape's result is not constant and the chain stays a
// runtime shape computation.
//
// Expects: a verified graph. Types are re-inferred, as `tcc opt` does first.
// Leaves alone: nodes inside regions (a region may be inferred more than once
// with different input types, so its constants are not trusted), Constant
// nodes (already constants; dce drops them once unused), nodes with an
// output of the main graph (an initializer cannot keep the output's name)
// and values over kMaxFoldElements elements (folding would bloat the model).
#include <unordered_set>

#include "passes/rewrite.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

constexpr int64_t kMaxFoldElements = 1 << 20;

bool foldable(const Node& n, const ShapeInfo& info) {
  if (n.op_type() == "Constant" || n.num_outputs() == 0 || !n.regions().empty()) return false;
  for (const Value* out : n.outputs()) {
    auto c = info.consts.find(out);
    if (c == info.consts.end() || c->second.numel() > kMaxFoldElements || is_model_output(out)) return false;
  }
  return true;
}

// Whether a node outside `folded` (or a region, or a graph output) reads v.
bool read_outside(const Graph& g, const Value* v, const std::unordered_set<const Node*>& folded) {
  for (const auto& n : g.nodes()) {
    if (!folded.count(n.get()))
      for (const Value* in : n->inputs())
        if (in == v) return true;
    for (const Graph* r : n->regions())
      if (read_outside(*r, v, {})) return true;
  }
  for (const Value* out : g.outputs())
    if (out == v) return true;
  return false;
}

}  // namespace

bool constant_fold(Graph& g, PassContext& ctx) {
  ShapeInfo info = infer_shapes(g);
  std::unordered_set<const Node*> folded;
  for (const auto& n : g.nodes())
    if (foldable(*n, info)) folded.insert(n.get());
  if (folded.empty()) return false;
  for (const auto& n : g.nodes()) {
    if (!folded.count(n.get())) continue;
    for (Value* out : n->outputs()) {
      if (!read_outside(g, out, folded)) continue;
      Value* init = g.add_initializer(g.fresh_name(out->name()), info.consts.at(out));
      g.replace_all_uses(out, init);
      ctx.stats.add("initializers_created");
    }
  }
  g.erase_nodes_if([&](const Node& n) { return folded.count(&n) != 0; });
  ctx.stats.add("nodes_folded", static_cast<int64_t>(folded.size()));
  return true;
}

}  // namespace tcc
