#include "passes/binding_constants.h"

#include <algorithm>

#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// Whether v's type is a tensor whose every dim is known and mentions only
// symbols that graph inputs bind.
bool bound_shape(const Value* v, const std::set<std::string>& bound) {
  const Type& t = v->type();
  if (!t.is_tensor() || !t.fully_shaped()) return false;
  for (const Dim& d : t.shape())
    for (const std::string& s : d.expr().symbols())
      if (!bound.count(s)) return false;
  return true;
}

}  // namespace

ConstantAnalysis analyze_constants(const Graph& g) {
  ConstantAnalysis a;
  for (const Value* v : g.initializers())
    if (!v->is_graph_input()) a.constants.insert(v);
  const std::set<std::string> bound = g.bound_symbols();
  std::unordered_set<const Value*> determined_values;
  for (const auto& n : g.nodes()) {
    if (is_fusion(*n) || !n->regions().empty()) continue;
    bool constant_op = n->op_type() == "Constant" && n->domain().empty();
    bool all_constant = n->num_inputs() > 0 || constant_op;
    for (const Value* v : n->inputs()) all_constant = all_constant && (!v || a.constants.count(v));
    // A Slice of a constant up to a symbolic length computes from constants,
    // but its size is the binding's.
    for (const Value* v : n->outputs()) all_constant = all_constant && v->type().fully_static();
    if (all_constant) {
      a.constant_nodes.insert(n.get());
      for (const Value* v : n->outputs()) a.constants.insert(v);
      continue;
    }
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (!def || !def->eval || def->has(kRandom) || def->has(kDataDependentShape)) continue;
    bool ok = std::all_of(n->outputs().begin(), n->outputs().end(),
                          [&](const Value* v) { return bound_shape(v, bound); });
    for (const Value* v : n->inputs()) {
      if (!ok || !v || a.constants.count(v) || determined_values.count(v)) continue;
      ok = def->has(kShapeOnly) && bound_shape(v, bound);
    }
    if (!ok) continue;
    a.determined.insert(n.get());
    for (const Value* v : n->outputs()) determined_values.insert(v);
  }
  // Last to first, so every reader of a node is decided before the node.
  auto users = g.compute_users();
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const Node* n = it->get();
    if (!a.determined.count(n)) continue;
    bool read_on_host = false;
    for (const Value* v : n->outputs()) {
      auto u = users.find(v);
      if (u == users.end()) continue;
      for (const auto& [user, index] : u->second)
        read_on_host = read_on_host || a.per_binding.count(user) || is_fusion(*user) ||
                       kernel_role(*user) == KernelRole::None;
    }
    if (read_on_host || kernel_role(*n) == KernelRole::None) a.per_binding.insert(n);
  }
  return a;
}

}  // namespace tcc
