#include "src/ir/verifier.h"

#include <unordered_set>

namespace tcc {

namespace {

void check_type(const Value& v, std::vector<std::string>& problems) {
  const Type& t = v.type();
  if (!t.is_tensor() || !t.has_rank()) return;
  std::vector<int64_t> static_dims;
  for (const auto& d : t.shape()) {
    if (!d.is_static()) continue;
    if (d.value() < 0) problems.push_back("value '" + v.name() + "' has a negative dimension in " + t.str());
    static_dims.push_back(d.value());
  }
  if (checked_numel(static_dims) < 0 && problems.empty())
    problems.push_back("value '" + v.name() + "' has type " + t.str() +
                       " whose element count overflows a 64-bit integer");
}

// `visible` holds the values defined so far in this graph and its enclosing graphs.
void verify_graph(const Graph& g, std::unordered_set<const Value*>& visible, std::vector<std::string>& problems) {
  std::vector<const Value*> defined_here;
  auto define = [&](const Value* v, const std::string& what) {
    if (!visible.insert(v).second) problems.push_back(what + " '" + v->name() + "' is defined twice");
    else defined_here.push_back(v);
    check_type(*v, problems);
  };
  for (const Value* v : g.inputs()) define(v, "input");
  for (const Value* v : g.initializers())
    if (!v->is_graph_input()) define(v, "initializer");
  for (const auto& n : g.nodes()) {
    std::string who = "node '" + n->name() + "' (" + n->op_type() + ")";
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* in = n->input(i);
      if (in && !visible.count(in)) {
        bool later = in->producer() && in->producer()->graph() == &g;
        problems.push_back(who + " reads '" + in->name() + "' " +
                           (later ? "before the node that computes it (the graph is not in topological order or "
                                    "has a cycle)"
                                  : "which is never defined"));
      }
    }
    for (const Graph* r : n->regions()) {
      if (r->parent() != &g || r->parent_node() != n.get())
        problems.push_back(who + " has region '" + r->name() + "' whose parent link is wrong");
      verify_graph(*r, visible, problems);
    }
    for (const Value* out : n->outputs()) {
      if (out->producer() != n.get()) problems.push_back(who + " output '" + out->name() + "' has a wrong producer");
      define(out, "value");
    }
  }
  for (const Value* out : g.outputs())
    if (!visible.count(out)) problems.push_back("graph output '" + out->name() + "' is never defined");
  for (const Value* v : defined_here) visible.erase(v);
}

}  // namespace

std::vector<std::string> verify(const Graph& g) {
  std::vector<std::string> problems;
  std::unordered_set<const Value*> visible;
  verify_graph(g, visible, problems);
  return problems;
}

void verify_or_throw(const Graph& g) {
  auto problems = verify(g);
  if (problems.empty()) return;
  std::string msg = "the graph is malformed:";
  size_t shown = 0;
  for (const auto& p : problems) {
    if (++shown > 20) {
      msg += "\n  ... and " + std::to_string(problems.size() - 20) + " more";
      break;
    }
    msg += "\n  " + p;
  }
  throw InputError(DiagLocation::in_file(g.file()), msg);
}

}  // namespace tcc
