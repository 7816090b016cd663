#include "passes/rewrite.h"

#include <map>

#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"

namespace tcc {

namespace {

// Rules only ever shrink or locally reshape the graph, so a fixed point comes
// within a few sweeps; the cap guards against two rules undoing each other.
constexpr int kMaxSweeps = 16;

size_t count_uses(const Graph& g, const Value* v) {
  size_t n = 0;
  for (const auto& node : g.nodes()) {
    for (const Value* in : node->inputs()) n += in == v;
    for (const Graph* r : node->regions()) n += count_uses(*r, v);
  }
  for (const Value* out : g.outputs()) n += out == v;
  return n;
}

void collect_graphs(Graph& g, std::vector<Graph*>& out) {
  out.push_back(&g);
  for (const auto& n : g.nodes())
    for (Graph* r : n->regions()) collect_graphs(*r, out);
}

// Erases the nodes rewrites left without users, then the producers that only
// they used. Returns how many went.
int64_t erase_dead(Rewriter& rw) {
  int64_t erased = 0;
  while (!rw.maybe_dead.empty()) {
    Node* n = *rw.maybe_dead.begin();
    rw.maybe_dead.erase(rw.maybe_dead.begin());
    bool used = false;
    for (const Value* out : n->outputs()) used |= rw.num_uses(out) != 0;
    if (used) continue;
    for (const Value* in : n->inputs())
      if (in && in->producer()) rw.maybe_dead.insert(in->producer());
    for (const Value* out : n->outputs()) rw.replaced.erase(out);
    n->graph()->erase_nodes_if([&](const Node& m) { return &m == n; });
    ++erased;
  }
  return erased;
}

}  // namespace

bool is_model_output(const Value* v) {
  const Graph& root = v->graph()->root();
  if (v->graph() != &root) return false;
  for (const Value* out : root.outputs())
    if (out == v) return true;
  return false;
}

std::optional<std::vector<int64_t>> transpose_perm(const Node& n) {
  if (n.has_attr("perm")) return n.get_ints("perm");
  const Type& t = n.input(0)->type();
  if (!t.is_tensor() || !t.has_rank()) return std::nullopt;
  const auto rank = static_cast<int64_t>(t.rank());
  std::vector<int64_t> p(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) p[static_cast<size_t>(i)] = rank - 1 - i;
  return p;
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Value* add_i64_constant(Graph& g, const std::string& name, const std::vector<int64_t>& values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set_i64(static_cast<int64_t>(i), values[i]);
  return g.add_initializer(g.fresh_name(name), std::move(t));
}

Value* insert_reshape(Graph& g, Node* before, Value* v, const std::vector<int64_t>& target, const Type& t,
                      const std::string& name, const std::string& source) {
  if (v->type() == t) return v;
  Value* s = add_i64_constant(g, v->name() + ".shape", target);
  Node* r = g.insert_node(before, "Reshape", {v, s}, {g.fresh_name(v->name() + ".view")}, "", name);
  r->set_source(source);
  r->output(0)->set_type(t);
  return r->output(0);
}

Value* insert_view(Graph& g, Node* before, Value* v, const Dims& dims, const std::string& value_name,
                   const std::string& node_name, const std::string& source) {
  if (v->type().shape() == dims) return v;
  Node* r = g.insert_node(before, "Reshape", {v}, {g.fresh_name(value_name)}, std::string(kTccDomain), node_name);
  r->set_source(source);
  r->set_attr("shape", shape_attr(dims));
  r->output(0)->set_type(Type::tensor(v->type().dtype(), dims));
  return r->output(0);
}

bool Rewriter::replace(Value* from, Value* to) {
  if (is_model_output(from) || from->type() != to->type()) return false;
  from->graph()->replace_all_uses(from, to);
  replaced.insert(from);
  if (from->producer()) maybe_dead.insert(from->producer());
  return true;
}

void Rewriter::set_input(Node& n, size_t i, Value* v) {
  if (Value* old = n.input(i); old && old->producer()) maybe_dead.insert(old->producer());
  n.set_input(i, v);
}

size_t Rewriter::num_uses(const Value* v) const { return count_uses(*v->graph(), v); }

bool apply_rewrites(Graph& g, const std::vector<RewriteRule>& rules, PassStats& stats) {
  std::multimap<std::string_view, const RewriteRule*> by_op;
  for (const RewriteRule& r : rules) by_op.emplace(r.op_type, &r);
  Rewriter rw(stats);
  bool changed = false;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool fired = false;
    std::vector<Graph*> graphs;
    collect_graphs(g, graphs);
    for (Graph* gr : graphs) {
      // A snapshot: rules insert nodes, which must wait for the next sweep.
      std::vector<Node*> nodes;
      for (const auto& n : gr->nodes()) nodes.push_back(n.get());
      for (Node* n : nodes) {
        bool live = n->num_outputs() == 0;
        for (const Value* out : n->outputs()) live |= rw.replaced.count(out) == 0;
        if (!live || !n->domain().empty()) continue;
        auto [lo, hi] = by_op.equal_range(n->op_type());
        for (auto it = lo; it != hi; ++it) {
          if (it->second->apply(*n, rw)) {
            rw.count(it->second->counter);
            fired = true;
            break;
          }
        }
      }
    }
    if (int64_t erased = erase_dead(rw)) stats.add("nodes_erased", erased);
    if (!fired) break;
    changed = true;
  }
  return changed;
}

}  // namespace tcc
