#include "src/analysis/training_frames.h"

#include <algorithm>
#include <unordered_set>

namespace tcc {

namespace {

// The graph's non-weight inputs the nodes read, in graph order.
std::vector<const Value*> inputs_read(const Graph& g, const std::vector<const Node*>& nodes) {
  std::unordered_set<const Value*> read;
  for (const Node* n : nodes)
    for (const Value* v : n->inputs())
      if (v && v->is_graph_input() && !v->is_initializer()) read.insert(v);
  std::vector<const Value*> out;
  for (const Value* v : g.inputs())
    if (read.count(v)) out.push_back(v);
  return out;
}

bool in_forward_frame(const Node& n, const TrainingStepFrames& step) {
  return n.part() == StepPart::Forward && !(step.builtin_loss && n.name().rfind("loss/", 0) == 0);
}

}  // namespace

Partition torch_training_frames(const Partition& whole, const Graph& g, const TrainingStepFrames& step,
                                const TorchRules& rules) {
  Partition out;
  for (const CompiledRegion& r : whole.regions) {
    CompiledRegion frame{static_cast<int>(out.regions.size()), {}, {}, {}};
    for (const Node* n : r.nodes)
      if (in_forward_frame(*n, step)) frame.nodes.push_back(n);
    if (frame.nodes.empty()) continue;
    frame.graph_inputs = inputs_read(g, frame.nodes);
    for (const Value* v : r.data_dependent_inputs)
      if (std::any_of(frame.nodes.begin(), frame.nodes.end(), [&](const Node* n) {
            return std::find(n->inputs().begin(), n->inputs().end(), v) != n->inputs().end();
          }))
        frame.data_dependent_inputs.push_back(v);
    out.regions.push_back(std::move(frame));
  }
  for (const GraphBreak& b : whole.breaks)
    if (in_forward_frame(*b.node, step)) out.breaks.push_back(b);
  std::vector<const Node*> update;
  for (const auto& n : g.nodes())
    if (n->part() == StepPart::Optimizer) update.push_back(n.get());
  if (update.empty()) return out;
  GraphBreak wrapper;
  wrapper.node = update.front();
  wrapper.reason = "optimizer_step";
  wrapper.message = "torch.optim calls torch._dynamo.graph_break() around the step, on purpose "
                    "(pytorch/pytorch#104053): opt.step's wrapper is frame " + std::to_string(out.regions.size()) +
                    " and compiles nothing; the step is the next frame";
  wrapper.hint = "nothing to do: the update still compiles as one graph";
  wrapper.torch_reason = torch_user_break_reason(rules);
  out.breaks.push_back(std::move(wrapper));
  CompiledRegion frame{static_cast<int>(out.regions.size()) + 1, std::move(update), {}, {}};
  frame.graph_inputs = inputs_read(g, frame.nodes);
  out.regions.push_back(std::move(frame));
  return out;
}

}  // namespace tcc
