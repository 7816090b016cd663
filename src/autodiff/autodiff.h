// Training graphs: tcc's own reverse-mode autodiff over the graph IR.
//
// build_training_graph turns a forward model into one training step: the
// forward nodes, a loss, the backward nodes and optionally an optimizer
// update, all in the main graph, so everything downstream (explain, passes,
// codegen) sees an ordinary graph.
//
// What the rewritten graph looks like:
//  - The attention the model spells out (MatMul, Softmax, MatMul) is one
//    tcc::Attention (passes/fuse_attention.cc) before anything is
//    differentiated, so that its gradient is the fused backward's; an
//    attention that is differentiated also outputs each query row's
//    log-sum-exp (OpDef::save_for_gradient), which that backward reads.
//  - Parameters (float initializers matching the patterns; of a model whose
//    exporter marks its initializers' roles (Value::role: a .pt2, the dynamo
//    exporter's ONNX), only its parameters) become graph inputs
//    whose default value is their initial data (`input %w: f32[..] = ...` in
//    the text IR, an initializer listed among the inputs in ONNX). They change
//    every step, so they are inputs; the defaults keep the initial weights, and
//    explain treats them as it treats weights (no guards on their values).
//  - Outputs: the loss first, then either `grad_<param>` for every parameter
//    (no optimizer) or the optimizer's updated parameters and state. The
//    forward model's other outputs are dropped, with the nodes only they used.
//  - Backward nodes are of part Backward (Node::part) and named
//    `grad/<forward node name>/<Op>.<n>`; loss nodes are Forward, named
//    `loss/<Op>.<n>`; optimizer nodes are of part Optimizer, named
//    `optimizer/<param>/<Op>.<n>`.
//
// Gradients are accumulated in reverse topological order, summed where a value
// has several users, and summed back to an operand's shape where it was
// broadcast (ReduceSum over the broadcast axes, Squeeze of added leading axes),
// using the symbolic shapes of shape inference, so `batch` and `seq` stay
// symbolic. An op with no gradient rule on a path from a parameter to the loss
// is an InputError naming the node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/autodiff/optimizer.h"
#include "src/ir/graph.h"

namespace tcc {

enum class LossKind { CrossEntropy, Mse };

// A loss tcc builds on a model output:
//  - cross_entropy: `output` holds logits [..., classes]; `label` is an i64
//    input of class indices [...]; the loss is the mean negative log-likelihood
//    (torch.nn.functional.cross_entropy).
//  - mse: `label` has the output's type; the loss is mean((output - label)^2).
// The label becomes a graph input unless the model already has an input of that name.
struct BuiltinLoss {
  LossKind kind = LossKind::Mse;
  std::string output;
  std::string label;
};

struct TrainOptions {
  std::string loss_output;                 // a model output that is the loss, or
  std::optional<BuiltinLoss> builtin_loss;  // a loss tcc builds (exactly one of the two)
  // Globs (`*`, `?`) over initializer names; empty means every float
  // initializer (every parameter where the exporter marks initializers' roles).
  std::vector<std::string> param_patterns;
  OptimizerOptions optimizer;
  // The learning rate arrives as a Python float would (a value-guarded scalar)
  // instead of a 0-d tensor. The graph is the same; what differs is how a
  // caller feeds it, which is what explain's recompile simulation shows.
  bool lr_as_scalar = false;
};

struct TrainingGraph {
  std::string loss;                 // the loss output's name
  std::vector<std::string> params;  // trained parameters, in graph-input order
  // Where the parameter set came from: "the exporter's graph signature", "the
  // float initializers", "--params" or "the exporter's graph signature, chosen
  // by --params" (the summaries' "12 parameters from ...").
  std::string params_from;
  std::vector<std::string> frozen;  // matching parameters the loss does not depend on (inputs, no update)
  std::string lr, step;             // optimizer inputs (empty when there are none)
};

// Rewrites model's main graph into a training step (see above). Errors in the
// options (unknown output, no matching parameter, non-scalar loss) and models
// the autodiff cannot handle are InputErrors.
TrainingGraph build_training_graph(Model& model, const TrainOptions& opts);

// Shell-style glob: `*` any run of characters, `?` any one character.
bool glob_match(const std::string& pattern, const std::string& name);

LossKind parse_loss_kind(const std::string& name);  // "cross_entropy" | "mse"; InputError otherwise

// Throws an InputError about the model as a whole (not one node).
[[noreturn]] void model_error(const Graph& g, const std::string& msg);

}  // namespace tcc
