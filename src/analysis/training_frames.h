// torch's frames for a training step (`tcc explain --train`): what torch.compile
// does when a user compiles the model (torch.compile(model)), runs a builtin
// loss and the backward eagerly, and compiles the optimizer's step
// (torch.compile(opt.step), torch's compiled-optimizer tutorial):
//  - the forward: the model's graphs, breaks splitting it as they split an
//    inference model; frame ids 0, 1, ... in order;
//  - the backward: AOTAutograd compiles one backward graph per forward graph
//    at the first backward, lazily and without guards of its own: no frame;
//  - the optimizer step: opt.step's profiling wrapper is a frame that compiles
//    nothing, because torch.optim breaks the graph on purpose around the step
//    (torch._dynamo.graph_break() in _use_grad_for_differentiable, so that
//    AOTAutograd sees an inference graph, pytorch/pytorch#104053); the step
//    itself (Adam.step, ...) is the next frame, one graph guarded on the lr (a
//    float by value, as the release's float rules say; a 0-d tensor by
//    TENSOR_MATCH) and the step counts (0-d tensors).
// Recorded with real torch: tests/fidelity/<release>/example_train_*.
#pragma once

#include <string>

#include "src/analysis/partition.h"
#include "src/analysis/torch_rules.h"

namespace tcc {

struct TrainingStepFrames {
  std::string lr;             // the training graph's lr input ("" without an optimizer)
  bool builtin_loss = false;  // the loss is tcc's (--loss-fn): it runs eagerly, outside the compiled model
};

// How torch's optimizer-step guards name the lr.
inline constexpr const char* kLrSource = "self.param_groups[0]['lr']";

// The compiled graphs and breaks of torch's frames, from the partition of the
// whole training graph g: the forward nodes' graphs (a builtin loss's nodes,
// named loss/..., left out), then, with an optimizer, one graph of its nodes
// with the frame id after its wrapper's, and torch.optim's break, attached to
// the first optimizer node, in the release's words.
Partition torch_training_frames(const Partition& whole, const Graph& g, const TrainingStepFrames& step,
                                const TorchRules& rules);

}  // namespace tcc
