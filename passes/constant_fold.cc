// constant_fold: replaces values that shape inference proves constant by
// initializers.
//
// Shape inference (run here afresh, so the pass sees the graph as it is now)
// records in ShapeInfo.consts every value it can compute at compile time
// (nodes whose inputs are all constant, and values fixed by static shapes
// alone, such as an exporter's Shape -> Gather -> Concat chain over an input
// whose dims are static), and in ShapeInfo.values the symbolic contents of
// small integer tensors, which are constants too when every element is static. A node is folded when all its outputs are such
// constants; each output some unfolded node (or a region, or a region output)
// still reads becomes an initializer, and the folded nodes are erased. When a
// dim is symbolic, Shape's result is not constant and the chain stays a
// runtime shape computation. Folding repeats until nothing more folds: a
// value known only by its symbolic contents (Squeeze of a static dim of such a
// Shape) is an initializer after one round, and what reads it (a Cast, a Range)
// folds in the next. An If whose condition has become a constant is replaced
// by the branch it takes (If's decomposition, src/ops/control_flow.cc), whose
// nodes the next round folds in turn: an ONNX function dispatching on a rank
// (the expanded AffineGrid splits `size` inside the 2-D branch) is then as
// constant as the same function written without the If.
//
// Expects: a verified graph. Types are re-inferred, as `tcc opt` does first.
// Leaves alone: nodes inside regions (a region may be inferred more than once
// with different input types, so its constants are not trusted), an If that
// computes a main-graph output (decompose inlines it, keeping the name), Constant
// nodes (already constants; dce drops them once unused), nodes with an
// output of the main graph (an initializer cannot keep the output's name)
// and values over kMaxFoldElements elements, which shape inference does not
// compute (folding would bloat the model).
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/rewrite.h"
#include "src/ops/decomposition.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

// Nodes to fold, with the values of their outputs.
using Folded = std::unordered_map<const Node*, std::vector<Tensor>>;

// v's compile-time value: a constant shape inference folded, or the symbolic
// contents of a small integer tensor when every element is static (Gather of
// a static dim from the Shape of a tensor whose other dims are symbolic).
std::optional<Tensor> known_value(const Value* v, const ShapeInfo& info) {
  if (auto c = info.consts.find(v); c != info.consts.end()) return c->second;
  auto vals = info.values.find(v);
  const Type& t = v->type();
  if (vals == info.values.end() || !t.is_tensor() || !t.fully_static() || t.rank() > 1 || !is_integer(t.dtype()))
    return std::nullopt;
  std::vector<int64_t> shape;
  for (const Dim& d : t.shape()) shape.push_back(d.value());
  Tensor out(t.dtype(), shape);
  if (static_cast<size_t>(out.numel()) != vals->second.size()) return std::nullopt;
  for (size_t i = 0; i < vals->second.size(); ++i) {
    if (!vals->second[i].is_static()) return std::nullopt;
    out.set_i64(static_cast<int64_t>(i), vals->second[i].value());
  }
  return out;
}

// The values of n's outputs when n can be folded.
std::optional<std::vector<Tensor>> fold_node(const Node& n, const ShapeInfo& info) {
  if (n.op_type() == "Constant" || n.num_outputs() == 0 || !n.regions().empty()) return std::nullopt;
  std::vector<Tensor> outs;
  for (const Value* out : n.outputs()) {
    std::optional<Tensor> t = known_value(out, info);
    if (!t || is_model_output(out)) return std::nullopt;
    outs.push_back(*t);
  }
  return outs;
}

// Whether a node outside `folded` (or a region, or a graph output) reads v.
bool read_outside(const Graph& g, const Value* v, const Folded& folded) {
  for (const auto& n : g.nodes()) {
    if (!folded.count(n.get()))
      for (const Value* in : n->inputs())
        if (in == v) return true;
    for (const Graph* r : n->regions())
      if (read_outside(*r, v, Folded{})) return true;
  }
  for (const Value* out : g.outputs())
    if (out == v) return true;
  return false;
}

bool fold_once(Graph& g, PassContext& ctx) {
  ShapeInfo info = infer_shapes(g);
  Folded folded;
  for (const auto& n : g.nodes())
    if (auto outs = fold_node(*n, info)) folded.emplace(n.get(), std::move(*outs));
  if (folded.empty()) return false;
  for (const auto& n : g.nodes()) {
    auto f = folded.find(n.get());
    if (f == folded.end()) continue;
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      Value* out = n->output(i);
      if (!read_outside(g, out, folded)) continue;
      Value* init = g.add_initializer(g.fresh_name(out->name()), f->second[i]);
      g.replace_all_uses(out, init);
      ctx.stats.add("initializers_created");
    }
  }
  g.erase_nodes_if([&](const Node& n) { return folded.count(&n) != 0; });
  ctx.stats.add("nodes_folded", static_cast<int64_t>(folded.size()));
  return true;
}

// Replaces each If of a constant condition by its taken branch; whether any was.
bool inline_constant_ifs(Graph& g, PassContext& ctx) {
  std::vector<Node*> ifs;
  for (const auto& n : g.nodes())
    if (n->op_type() == "If" && n->domain().empty() && scalar_constant(n->input(0)) &&
        std::none_of(n->outputs().begin(), n->outputs().end(), [](const Value* v) { return is_model_output(v); }))
      ifs.push_back(n.get());
  std::unordered_set<const Node*> inlined;
  for (Node* n : ifs) {
    Expansion e(g, *n);
    if (!OpRegistry::get().lookup(*n)->decompose(e)) continue;
    inlined.insert(n);
    ctx.stats.add("ifs_inlined");
  }
  g.erase_nodes_if([&](const Node& n) { return inlined.count(&n) != 0; });
  return !inlined.empty();
}

}  // namespace

bool constant_fold(Graph& g, PassContext& ctx) {
  bool changed = false;
  // Each round erases at least one node.
  while (fold_once(g, ctx) | inline_constant_ifs(g, ctx)) changed = true;
  return changed;
}

}  // namespace tcc
