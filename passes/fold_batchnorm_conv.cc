// fold_batchnorm_conv: folds an inference BatchNormalization into the Conv
// that feeds it.
//
// Rewrite:
//   BatchNormalization(Conv(X, W, B), scale, bias, mean, var)
//     -> Conv(X, W', B')   with, per output channel m and k = scale[m] / sqrt(var[m] + epsilon),
//        W'[m, ...] = W[m, ...] * k,   B'[m] = (B[m] - mean[m]) * k + bias[m]   (B = 0 when absent)
// W' and B' are new initializers computed in double and rounded once to the
// weights' dtype; W and B stay for any other reader (dce drops them
// otherwise). The Conv node is kept, rewired, so its output keeps its name.
//
// Expects: a verified graph; W, B and the four statistics constant.
// Leaves alone: BatchNormalization in training mode (training_mode=1 from
// opset 14, more than one output before), a Conv output something else also
// reads, BN outputs of the main graph, statistics whose length is not the
// Conv's output channel count, and ops in other domains.
#include <cmath>

#include "passes/rewrite.h"

namespace tcc {

namespace {

bool is_training(const Node& bn) {
  if (bn.opset() >= 14) return bn.get_int("training_mode", 0) != 0;
  return bn.num_outputs() > 1;
}

// BatchNormalization(Conv(X, W, B), ...) -> Conv(X, W', B')
bool fold_into_conv(Node& bn, Rewriter& rw) {
  if (is_training(bn) || bn.num_inputs() != 5 || is_model_output(bn.output(0))) return false;
  Value* conv_out = bn.input(0);
  Node* conv = conv_out->producer();
  if (!conv || conv->op_type() != "Conv" || !conv->domain().empty() || rw.num_uses(conv_out) != 1) return false;
  if (conv_out->type() != bn.output(0)->type()) return false;
  std::optional<Tensor> w = constant_value(conv->input(1));
  std::optional<Tensor> b = conv->has_input(2) ? constant_value(conv->input(2)) : std::nullopt;
  if (!w || !is_float(w->dtype()) || w->rank() < 2 || (conv->has_input(2) && !b)) return false;
  const int64_t channels = w->shape()[0];
  std::vector<Tensor> stats;
  for (size_t i = 1; i < 5; ++i) {
    std::optional<Tensor> t = constant_value(bn.input(i));
    if (!t || t->numel() != channels || t->dtype() == DType::String) return false;
    stats.push_back(*t);
  }
  if (b && b->numel() != channels) return false;
  const Tensor &scale = stats[0], &bias = stats[1], &mean = stats[2], &var = stats[3];
  const double eps = bn.get_float("epsilon", 1e-5f);

  Tensor new_w(w->dtype(), w->shape());
  Tensor new_b(w->dtype(), {channels});
  const int64_t per_channel = w->numel() / channels;
  for (int64_t m = 0; m < channels; ++m) {
    double k = scale.get_f64(m) / std::sqrt(var.get_f64(m) + eps);
    for (int64_t i = 0; i < per_channel; ++i) new_w.set_f64(m * per_channel + i, w->get_f64(m * per_channel + i) * k);
    double conv_bias = b ? b->get_f64(m) : 0.0;
    new_b.set_f64(m, (conv_bias - mean.get_f64(m)) * k + bias.get_f64(m));
  }
  Graph& g = *conv->graph();
  rw.set_input(*conv, 1, g.add_initializer(g.fresh_name(conv->input(1)->name()), new_w));
  const std::string b_hint = conv->has_input(2) ? conv->input(2)->name() : conv_out->name() + ".bias";
  rw.set_input(*conv, 2, g.add_initializer(g.fresh_name(b_hint), new_b));
  TCC_CHECK(rw.replace(bn.output(0), conv_out)) << "BatchNormalization output and Conv output types differ";
  return true;
}

const std::vector<RewriteRule> kRules = {
    // BatchNormalization(Conv(X, W, B), s, b, mean, var) -> Conv(X, W', B')
    {"BatchNormalization", "batchnorms_folded", fold_into_conv},
};

}  // namespace

bool fold_batchnorm_conv(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
