// Optimizer updates appended to a training graph, with PyTorch's semantics
// (torch.optim.SGD, Adam, AdamW with default flags).
//
// The learning rate and the step count are graph inputs, 0-d f32 tensors, so
// an LR schedule changes values, not the graph: nothing is baked in that a
// compiled step would have to guard on. Optimizer state (`<param>.m`,
// `<param>.v`) are graph inputs whose default value is zero, the state before
// the first step; the updated parameters and state are graph outputs named
// `<param>.updated`, `<param>.m.updated`, `<param>.v.updated`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

enum class OptimizerKind { None, Sgd, Momentum, Adam, AdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::None;
  double momentum = 0.9;        // momentum: buf = momentum * buf + grad
  double beta1 = 0.9;           // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  // sgd, momentum, adam: L2 penalty added to the gradient; adamw: decoupled
  // decay of the parameter. Negative means the optimizer's PyTorch default
  // (0, and 0.01 for adamw).
  double weight_decay = -1;
};

// "sgd" -> Sgd, ...; nullopt for an unknown name.
std::optional<OptimizerKind> parse_optimizer(const std::string& name);
const char* optimizer_name(OptimizerKind k);

// The inputs and outputs an optimizer added to the graph.
struct OptimizerIO {
  Value* lr = nullptr;
  Value* step = nullptr;                 // adam and adamw only: 1-based index of this update
  std::vector<std::string> state_inputs;  // `<param>.m`, `<param>.v`
};

// Appends the update of every (param, grad) pair and adds the updated values
// as graph outputs. Params are graph inputs of g.
OptimizerIO append_optimizer_step(Graph& g, const std::vector<Value*>& params, const std::vector<Value*>& grads,
                                  const OptimizerOptions& opts);

}  // namespace tcc
