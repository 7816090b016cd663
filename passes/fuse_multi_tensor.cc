// fuse_multi_tensor: horizontal fusion of a training step's optimizer update,
// so the parameters are updated by one kernel per parameter shape instead of
// one kernel per parameter (what torch's foreach / multi_tensor_apply kernels
// do for its optimizers).
//
// Candidates are pointwise tcc::Fusion nodes whose body nodes all belong to an
// optimizer update (src/autodiff names them `optimizer/<param>/...`) and whose
// outputs no node reads: they produce only graph outputs, the updated
// parameters and state. No path can run from one candidate to another, and
// nothing comes after them, so merging any set of them keeps the graph acyclic.
// Candidates whose outputs all have one type (dtype and shape) merge into one
// pointwise fusion: its body holds their bodies side by side, an outside value
// several of them read (lr, the bias corrections) is one body input, and the
// kernel visits the common domain once, updating every parameter at each point.
//
// Why by shape and not over one concatenated domain: a kernel addresses each
// buffer with an affine index over its single domain (codegen/kernel_ir.h), and
// every load is unconditional, so a domain spanning differently-shaped tensors
// would read past the end of all but one of them. Equal shapes are the common
// case that matters (stacks of identical layers: ten Linear(1024, 1024), the
// matrices of every transformer block).
//
// Expects: a graph after fuse. Leaves alone: every other fusion, candidates
// whose type no other candidate shares.
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "src/ir/replace_nodes.h"
#include "src/autodiff/autodiff.h"
#include "src/ops/fusion.h"

namespace tcc {

namespace {

// The common type of a candidate's outputs, as text; empty when n is no candidate.
std::string candidate_key(const Node& n, const std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>>& users) {
  if (!is_fusion(n) || fusion_kind(n) != FusionKind::Pointwise) return "";
  for (const auto& b : fusion_body(n).nodes())
    if (b->part() != StepPart::Optimizer) return "";
  std::string key = n.output(0)->type().str();
  for (const Value* out : n.outputs()) {
    auto it = users.find(out);
    if ((it != users.end() && !it->second.empty()) || out->type().str() != key) return "";
  }
  return key;
}

// Replaces `members` (fusion nodes of g) by one pointwise fusion holding all their bodies.
void merge(Graph& g, const std::vector<Node*>& members) {
  auto body = std::make_shared<Graph>();
  body->set_parent(&g, nullptr);
  std::unordered_map<const Value*, Value*> body_input_of;  // outside value -> body input
  std::vector<Value*> node_inputs, kept, body_outputs;
  for (Node* f : members) {
    const Graph& fb = fusion_body(*f);
    std::unordered_map<const Value*, Value*> copy_of;  // value of fb -> value of the merged body
    for (size_t i = 0; i < f->num_inputs(); ++i) {
      Value* outside = f->input(i);
      auto it = body_input_of.find(outside);
      if (it == body_input_of.end()) {
        it = body_input_of.emplace(outside, body->add_input(g.fresh_name(outside->name()), fb.inputs()[i]->type())).first;
        node_inputs.push_back(outside);
      }
      copy_of[fb.inputs()[i]] = it->second;
    }
    for (const Value* c : fb.initializers()) copy_of[c] = body->add_initializer(g.fresh_name(c->name()), c->initializer());
    for (const auto& n : fb.nodes()) {
      std::vector<Value*> ins;
      for (const Value* v : n->inputs()) ins.push_back(v ? copy_of.at(v) : nullptr);
      std::vector<std::string> names;
      for (const Value* out : n->outputs()) names.push_back(g.fresh_name(out->name()));
      Node* copy = body->add_node(n->op_type(), ins, names, n->domain(), n->name());
      copy->set_source(n->source());
      copy->set_part(n->part());
      for (const auto& [k, a] : n->attrs()) copy->set_attr(k, a);
      for (size_t i = 0; i < n->num_outputs(); ++i) {
        copy->output(i)->set_type(n->output(i)->type());
        copy_of[n->output(i)] = copy->output(i);
      }
    }
    for (size_t j = 0; j < fb.outputs().size(); ++j) {
      body_outputs.push_back(copy_of.at(fb.outputs()[j]));
      kept.push_back(f->output(j));
    }
  }
  body->set_outputs(body_outputs);
  std::vector<Type> types;
  for (const Value* v : kept) types.push_back(v->type());

  // Named after the first member, whose name the merge frees.
  std::string name = "multi_tensor/" + members.front()->name();
  std::unordered_set<const Node*> replaced(members.begin(), members.end());
  // Every input of a member precedes the last member, where the new node sits: no reordering needed.
  replace_nodes(g, replaced, kept, [&](Node* before, const std::vector<std::string>& names) {
    Node* f = g.insert_node(before, std::string(kFusionOp), node_inputs, names, std::string(kTccDomain), name);
    for (size_t i = 0; i < types.size(); ++i) f->output(i)->set_type(types[i]);
    f->set_attr("kind", Attribute::of_string(std::string(fusion_kind_name(FusionKind::Pointwise))));
    body->set_parent(&g, f);
    f->set_attr("body", Attribute::of_graph(body));
    return f;
  });
}

}  // namespace

bool fuse_multi_tensor(Graph& g, PassContext& ctx) {
  auto users = g.compute_users();
  std::vector<std::string> order;  // keys in graph order, so the result does not depend on hashing
  std::map<std::string, std::vector<Node*>> groups;
  for (const auto& n : g.nodes()) {
    std::string key = candidate_key(*n, users);
    if (key.empty()) continue;
    auto& group = groups[key];
    if (group.empty()) order.push_back(key);
    group.push_back(n.get());
  }
  bool changed = false;
  for (const std::string& key : order) {
    const std::vector<Node*>& members = groups.at(key);
    if (members.size() < 2) continue;
    ctx.stats.add("fusions_merged", static_cast<int64_t>(members.size()));
    ctx.stats.add("multi_tensor_fusions");
    merge(g, members);
    changed = true;
  }
  return changed;
}

}  // namespace tcc
