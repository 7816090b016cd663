// cse: common-subexpression elimination.
//
// Two nodes with the same op, domain, inputs (the same values, in order),
// attributes and output count compute the same thing; the later one's outputs
// are replaced by the earlier one's and it is erased. Nodes are visited in
// order and merges apply at once, so chains of duplicates collapse in one
// walk. Each region is handled on its own, against its own nodes only.
//
// Expects: a verified graph (topological order).
// Leaves alone: nodes with regions (If/Loop/Scan bodies are not compared),
// random ops (two draws differ), ops the registry does not know (tcc cannot
// tell whether they have effects), nodes with no outputs, and a duplicate
// whose output is a main-graph output or whose types differ from the
// original's.
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "passes/rewrite.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

bool same_floats(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_attr(const Attribute& a, const Attribute& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Attribute::Kind::Int: return a.i == b.i;
    case Attribute::Kind::Float: return same_floats(a.f, b.f);
    case Attribute::Kind::String: return a.s == b.s;
    case Attribute::Kind::Ints: return a.ints == b.ints;
    case Attribute::Kind::Floats:
      if (a.floats.size() != b.floats.size()) return false;
      for (size_t i = 0; i < a.floats.size(); ++i)
        if (!same_floats(a.floats[i], b.floats[i])) return false;
      return true;
    case Attribute::Kind::Strings: return a.strings == b.strings;
    case Attribute::Kind::Tensor: return a.t.identical(b.t);
    case Attribute::Kind::Graph: return false;
    case Attribute::Kind::Type: return a.type == b.type;
  }
  return false;
}

bool same_node(const Node& a, const Node& b) {
  if (a.op_type() != b.op_type() || a.domain() != b.domain() || a.inputs() != b.inputs() ||
      a.num_outputs() != b.num_outputs() || a.attrs().size() != b.attrs().size())
    return false;
  for (auto ia = a.attrs().begin(), ib = b.attrs().begin(); ia != a.attrs().end(); ++ia, ++ib)
    if (ia->first != ib->first || !same_attr(ia->second, ib->second)) return false;
  return true;
}

bool mergeable(const Node& n) {
  if (n.num_outputs() == 0 || !n.regions().empty()) return false;
  const OpDef* def = OpRegistry::get().lookup(n);
  return def && !def->has(kRandom) && !def->has(kControlFlow);
}

// Op, domain and input identities: nodes with equal keys are compared in full.
std::string bucket_key(const Node& n) {
  std::string k = n.domain() + "::" + n.op_type();
  for (const Value* in : n.inputs()) k += "," + std::to_string(reinterpret_cast<uintptr_t>(in));
  return k;
}

bool cse_graph(Graph& g, PassStats& stats) {
  bool changed = false;
  std::unordered_map<std::string, std::vector<Node*>> seen;
  std::unordered_set<const Node*> merged;
  for (const auto& up : g.nodes()) {
    Node& n = *up;
    for (Graph* r : n.regions()) changed |= cse_graph(*r, stats);
    if (!mergeable(n)) continue;
    std::vector<Node*>& bucket = seen[bucket_key(n)];
    Node* original = nullptr;
    for (Node* m : bucket)
      if (same_node(*m, n)) original = m;
    bool can_merge = original != nullptr;
    for (size_t i = 0; can_merge && i < n.num_outputs(); ++i)
      can_merge = !is_model_output(n.output(i)) && n.output(i)->type() == original->output(i)->type();
    if (!can_merge) {
      bucket.push_back(&n);
      continue;
    }
    for (size_t i = 0; i < n.num_outputs(); ++i) g.replace_all_uses(n.output(i), original->output(i));
    merged.insert(&n);
  }
  if (!merged.empty()) {
    g.erase_nodes_if([&](const Node& n) { return merged.count(&n) != 0; });
    stats.add("nodes_merged", static_cast<int64_t>(merged.size()));
    changed = true;
  }
  return changed;
}

}  // namespace

bool cse(Graph& g, PassContext& ctx) { return cse_graph(g, ctx.stats); }

}  // namespace tcc
