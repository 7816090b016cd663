#include "src/ir/replace_nodes.h"

#include <algorithm>
#include <unordered_map>

namespace tcc {

namespace {

// Where a value is read: node inputs (in g and the regions under it, except by
// `skip`) and graph outputs (of g and of those regions).
struct Reads {
  std::vector<std::pair<Node*, size_t>> inputs;
  std::vector<std::pair<Graph*, size_t>> outputs;
};

void collect_outputs(Graph& g, std::unordered_map<const Value*, Reads>& reads) {
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (auto it = reads.find(g.outputs()[i]); it != reads.end()) it->second.outputs.emplace_back(&g, i);
}

void collect_reads(Graph& g, const std::unordered_set<const Node*>& skip,
                   std::unordered_map<const Value*, Reads>& reads) {
  for (const auto& n : g.nodes()) {
    if (skip.count(n.get())) continue;
    for (size_t i = 0; i < n->num_inputs(); ++i)
      if (auto it = reads.find(n->input(i)); it != reads.end()) it->second.inputs.emplace_back(n.get(), i);
    for (Graph* r : n->regions()) {
      collect_reads(*r, skip, reads);
      collect_outputs(*r, reads);
    }
  }
}

}  // namespace

Node* replace_nodes(Graph& g, const std::unordered_set<const Node*>& nodes, const std::vector<Value*>& kept,
                    const std::function<Node*(Node* before, const std::vector<std::string>& names)>& build) {
  std::unordered_map<const Value*, Reads> reads;
  std::vector<std::string> names;
  for (const Value* v : kept) {
    TCC_CHECK(v->producer() && nodes.count(v->producer())) << "kept value '" << v->name() << "' is not replaced";
    reads[v];
    names.push_back(v->name());
  }
  collect_reads(g, nodes, reads);
  collect_outputs(g, reads);

  Node* before = nullptr;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend() && !nodes.count(it->get()); ++it) before = it->get();
  std::vector<Reads> kept_reads;
  for (const Value* v : kept) kept_reads.push_back(std::move(reads[v]));
  StepPart part = StepPart::Forward;
  for (const Node* n : nodes) part = std::max(part, n->part());
  g.erase_nodes_if([&](const Node& n) { return nodes.count(&n) != 0; });
  auto position = [&](const Node* n) {
    auto it = std::find_if(g.nodes().begin(), g.nodes().end(), [&](const auto& p) { return p.get() == n; });
    return static_cast<size_t>(it - g.nodes().begin());
  };
  size_t first_new = position(before);

  Node* node = build(before, names);
  // What the build inserted sits just before `before`; it computes the latest
  // part of the step any replaced node did.
  for (size_t i = first_new, end = position(before); i < end; ++i) g.nodes()[i]->set_part(part);
  TCC_CHECK(node->num_outputs() == kept.size()) << "replacement '" << node->name() << "' has the wrong output count";
  for (size_t k = 0; k < kept_reads.size(); ++k) {
    for (auto [user, i] : kept_reads[k].inputs) user->set_input(i, node->output(k));
    for (auto [graph, i] : kept_reads[k].outputs) {
      std::vector<Value*> outs = graph->outputs();
      outs[i] = node->output(k);
      graph->set_outputs(std::move(outs));
    }
  }
  return node;
}

}  // namespace tcc
