// Normalizations over the channels of an [N, C, spatial...] input:
// BatchNormalization, InstanceNormalization, GroupNormalization and LRN
// (LayerNormalization, which normalizes trailing axes, is in reduction.cc);
// RMSNormalization over trailing axes, MeanVarianceNormalization over any;
// and LpNormalization, which scales each line along one axis to unit L1 or L2
// norm. Kernels compute in double.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// -------------------------------------------------------- Normalization

// Training mode: opset 14 made it an attribute; before, asking for the
// running statistics outputs meant training.
bool batchnorm_training(const Node& n) {
  if (n.opset() >= 14) return n.get_int("training_mode", 0) != 0;
  return n.num_outputs() > 1;
}

void infer_batchnorm(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  ctx.set_output_type(0, x);
  Dim channels = x.is_tensor() && x.has_rank() && x.rank() >= 2 ? x.shape()[1] : ctx.env().fresh("u");
  DType stat = ctx.input_type(3).is_tensor() ? ctx.input_type(3).dtype() : x.dtype();
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_type(i, Type::tensor(stat, {channels}));
}

std::vector<Tensor> eval_batchnorm(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor &scale = ctx.input(1), &bias = ctx.input(2), &mean = ctx.input(3), &var = ctx.input(4);
  const Node& n = ctx.node();
  if (x.rank() < 2) ctx.fail("expected X of rank >= 2 ([N, C, ...]), got shape " + shape_str(x.shape()));
  int64_t nb = x.shape()[0], c = x.shape()[1], vol = product(x.shape(), 2);
  for (const Tensor* t : {&scale, &bias, &mean, &var})
    if (t->numel() != c)
      ctx.fail("expected per-channel inputs of " + std::to_string(c) + " values, got shape " + shape_str(t->shape()));
  double eps = n.get_float("epsilon", 1e-5f), momentum = n.get_float("momentum", 0.9f);
  bool training = batchnorm_training(n);
  Tensor y(x.dtype(), x.shape());
  Tensor run_mean(mean.dtype(), {c}), run_var(var.dtype(), {c}), saved_mean(mean.dtype(), {c}),
      saved_var(var.dtype(), {c});
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu = mean.get_f64(ch), sigma2 = var.get_f64(ch);
    if (training) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t i = 0; i < vol; ++i) sum += x.get_f64((b * c + ch) * vol + i);
      double count = static_cast<double>(nb * vol);
      mu = sum / count;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t i = 0; i < vol; ++i) sq += std::pow(x.get_f64((b * c + ch) * vol + i) - mu, 2);
      sigma2 = sq / count;  // population variance, as the running statistics expect
      run_mean.set_f64(ch, mean.get_f64(ch) * momentum + mu * (1 - momentum));
      run_var.set_f64(ch, var.get_f64(ch) * momentum + sigma2 * (1 - momentum));
      saved_mean.set_f64(ch, mu);
      saved_var.set_f64(ch, sigma2);
    }
    double inv = 1.0 / std::sqrt(sigma2 + eps);
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t i = 0; i < vol; ++i) {
        int64_t at = (b * c + ch) * vol + i;
        y.set_f64(at, scale.get_f64(ch) * (x.get_f64(at) - mu) * inv + bias.get_f64(ch));
      }
  }
  if (!training) return {y};
  std::vector<Tensor> outs = {y, run_mean, run_var, saved_mean, saved_var};
  outs.resize(std::min<size_t>(outs.size(), ctx.num_outputs()));
  return outs;
}

void infer_instancenorm(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_instancenorm(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor &scale = ctx.input(1), &bias = ctx.input(2);
  check_nchw(ctx, x);
  int64_t c = x.shape()[1], vol = product(x.shape(), 2), planes = x.shape()[0] * c;
  if (scale.numel() != c || bias.numel() != c)
    ctx.fail("expected scale and B of " + std::to_string(c) + " values each");
  double eps = ctx.node().get_float("epsilon", 1e-5f);
  Tensor y(x.dtype(), x.shape());
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < vol; ++i) sum += x.get_f64(p * vol + i);
    double mu = sum / static_cast<double>(vol);
    for (int64_t i = 0; i < vol; ++i) sq += std::pow(x.get_f64(p * vol + i) - mu, 2);
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(vol) + eps);
    int64_t ch = p % c;
    for (int64_t i = 0; i < vol; ++i)
      y.set_f64(p * vol + i, scale.get_f64(ch) * (x.get_f64(p * vol + i) - mu) * inv + bias.get_f64(ch));
  }
  return {y};
}

// LpNormalization: y = x / ||x||_p along `axis` (default -1), p 1 or 2. A line
// of zeros (norm 0) gives zeros.
int64_t lp_order(const Node& n) {
  int64_t p = n.get_int("p", 2);
  if (p != 1 && p != 2) n.fail("p must be 1 or 2, got " + std::to_string(p));
  return p;
}

void infer_lp_normalization(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  lp_order(ctx.node());
  normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), static_cast<int64_t>(x.rank()));
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_lp_normalization(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  int64_t p = lp_order(n);
  size_t axis = static_cast<size_t>(normalize_axis(n, n.get_int("axis", -1), static_cast<int64_t>(x.rank())));
  int64_t len = x.shape()[axis], inner = product(x.shape(), axis + 1);
  int64_t outer = product(std::vector<int64_t>(x.shape().begin(), x.shape().begin() + axis));
  Tensor y(x.dtype(), x.shape());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * len * inner + i;
      double norm = 0;
      for (int64_t k = 0; k < len; ++k) {
        double v = x.get_f64(base + k * inner);
        norm += p == 1 ? std::fabs(v) : v * v;
      }
      if (p == 2) norm = std::sqrt(norm);
      // A line of zeros stays zeros (ONNX's reference from opset 22 divides only where the norm is not 0).
      if (norm == 0) norm = 1;
      for (int64_t k = 0; k < len; ++k) y.set_f64(base + k * inner, x.get_f64(base + k * inner) / norm);
    }
  return {y};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// BatchNormalization in inference form, y = (x - mean) / sqrt(var + eps) * scale + b
// along axis 1: dx = g * scale / sqrt(var + eps), dscale = sum of g (x - mean) /
// sqrt(var + eps), db = sum of g over every axis but 1. The running mean and
// variance are statistics, never selected as parameters (src/autodiff/autodiff.cc).
void batch_norm_rule(GradContext& c) {
  if (c.node().get_int("training_mode", 0) != 0 || c.node().num_outputs() > 1)
    c.fail("tcc differentiates BatchNormalization in inference form (training_mode 0, one output)");
  if (c.wants(3) || c.wants(4)) c.fail("tcc does not differentiate BatchNormalization's running statistics");
  Emitter& e = c.e();
  size_t rank = c.dims(c.in(0)).size();
  std::vector<int64_t> others = {0}, trailing;
  for (size_t i = 2; i < rank; ++i) {
    others.push_back(static_cast<int64_t>(i));
    trailing.push_back(static_cast<int64_t>(i - 1));
  }
  // A per-channel [C] value shaped [C, 1, ...] to broadcast along axis 1.
  auto per_channel = [&](Value* v) { return trailing.empty() ? v : e.unsqueeze(v, trailing); };
  Value* eps = scalar(c, c.node().get_float("epsilon", 1e-5f));
  Value* inv_std = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {c.in(4), eps})})});
  Value* g = c.dy();
  if (c.wants(0)) c.set(0, mul(c, g, per_channel(mul(c, c.in(1), inv_std))));
  if (c.wants(1)) {
    Value* normed = mul(c, e.op("Sub", {c.in(0), per_channel(c.in(3))}), per_channel(inv_std));
    c.set(1, e.reduce("ReduceSum", mul(c, g, normed), others, false));
  }
  if (c.wants(2)) c.set(2, e.reduce("ReduceSum", g, others, false));
}

// InstanceNormalization: LayerNormalization's rule over the spatial axes of
// each (n, c), with scale and bias per channel:
//   dx = r * (h - mean(h) - xhat * mean(h * xhat)), h = g * scale;
//   dscale = sum over n and the spatial axes of g * xhat;  dbias = sum of g.
void instance_norm_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  size_t rank = c.dims(x).size();
  std::vector<int64_t> spatial, others = {0}, channel_axes;
  for (size_t i = 2; i < rank; ++i) {
    spatial.push_back(static_cast<int64_t>(i));
    others.push_back(static_cast<int64_t>(i));
    channel_axes.push_back(static_cast<int64_t>(i - 1));
  }
  Value* mean = e.reduce("ReduceMean", x, spatial, true);
  Value* xc = e.op("Sub", {x, mean});
  Value* var = e.reduce("ReduceMean", mul(c, xc, xc), spatial, true);
  Value* eps = scalar(c, c.node().get_float("epsilon", 1e-5f));
  Value* r = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {var, eps})})});
  Value* xhat = mul(c, xc, r);
  Value* g = c.dy();
  if (c.wants(0)) {
    Value* h = mul(c, g, e.unsqueeze(c.in(1), channel_axes));
    Value* mh = e.reduce("ReduceMean", h, spatial, true);
    Value* mhx = e.reduce("ReduceMean", mul(c, h, xhat), spatial, true);
    c.set(0, mul(c, r, e.op("Sub", {e.op("Sub", {h, mh}), mul(c, xhat, mhx)})));
  }
  if (c.wants(1)) c.set(1, e.reduce("ReduceSum", mul(c, g, xhat), others, false));
  if (c.wants(2)) c.set(2, e.reduce("ReduceSum", g, others, false));
}

// Whether BatchNormalization n's scale, B, mean and var are [C] vectors of x's dtype.
bool per_channel_inputs(const Node& n, const Type& x) {
  if (n.num_inputs() != 5) return false;
  for (size_t i = 1; i < 5; ++i) {
    const Value* p = n.input(i);
    if (p == nullptr || !p->type().is_tensor() || !p->type().has_rank() || p->type().rank() != 1 ||
        p->type().shape()[0] != x.shape()[1] || p->type().dtype() != x.dtype())
      return false;
  }
  return true;
}

// Training BatchNormalization -> the batch's statistics over every axis but
// the channels, mean = ReduceMean(x) and var = ReduceMean((x - mean)^2) (the
// population variance), y = (x - mean) / Sqrt(var + eps) * scale + B; the
// running statistics input * momentum + the batch's * (1 - momentum), and
// (before opset 14) the saved mean and var, the batch's.
bool decompose_batchnorm_training(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || !per_channel_inputs(n, *x)) return false;
  const DType dt = x->dtype();
  const Dim& channels = x->shape()[1];
  std::vector<int64_t> others = {0};
  for (size_t k = 2; k < x->rank(); ++k) others.push_back(static_cast<int64_t>(k));
  const Type kept = Expansion::kept_type(*x, others), vector = Type::tensor(dt, {channels});
  Dims channel_dims(x->rank() - 1, Dim(1));
  channel_dims[0] = channels;
  Value* in = n.input(0);
  Value* mean = e.reduce("ReduceMean", "ReduceMean", in, others, kept);
  Value* d = e.add("Sub", "Sub", {in, mean}, *x);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", e.add("Mul", "Mul", {d, d}, *x), others, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), dt);
  Value* sd = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {var, eps}, kept)}, kept);
  Value* normed = e.add("Div", "Div", {d, sd}, *x);
  Value* scaled = e.add("Mul_1", "Mul", {normed, e.reshape("Reshape_scale", n.input(1), channel_dims)}, *x);
  Value* batch_mean = e.reshape("Reshape_mean", mean, {channels});
  Value* batch_var = e.reshape("Reshape_var", var, {channels});
  const double momentum = n.get_float("momentum", 0.9f);
  Value* keep = e.scalar("momentum", momentum, dt);
  Value* take = e.scalar("one_less_momentum", 1 - momentum, dt);
  auto running = [&](size_t i, Value* batch, const std::string& tag) {
    return e.add("Add_" + tag, "Add",
                 {e.add("Mul_" + tag, "Mul", {n.input(i), keep}, vector),
                  e.add("Mul_batch_" + tag, "Mul", {batch, take}, vector)},
                 vector);
  };
  const std::vector<std::pair<size_t, Value*>> stats = {
      {1, running(3, batch_mean, "mean")}, {2, running(4, batch_var, "var")}, {3, batch_mean}, {4, batch_var}};
  for (const auto& [i, v] : stats)
    if (i < n.num_outputs() && n.output(i) != nullptr) e.take_over(i, v);
  e.finish("Add_1", "Add", {scaled, e.reshape("Reshape_bias", n.input(2), channel_dims)});
  return true;
}

// Inference BatchNormalization -> (x - mean) * s + B with s = scale / Sqrt(var + eps),
// folded to a constant when scale and var are constants (decomposition.h).
// In training mode, decompose_batchnorm_training.
bool decompose_batchnorm(Expansion& e) {
  const Node& n = e.node();
  if (batchnorm_training(n)) return decompose_batchnorm_training(e);
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || !e.only_first_output_used() || !per_channel_inputs(n, *x)) return false;
  // Per-channel [C] vectors broadcast against [N, C, ...] as [C, 1, ..., 1].
  Dims channel_dims(x->rank() - 1, Dim(1));
  channel_dims[0] = x->shape()[1];
  Type channel_type = Type::tensor(x->dtype(), channel_dims);
  auto channel_shaped = [&](const Tensor& t) {
    std::vector<int64_t> shape(x->rank() - 1, 1);
    shape[0] = t.numel();
    return t.reshaped(shape);
  };
  double eps = n.get_float("epsilon", 1e-5f);
  Value* target = nullptr;
  auto per_channel = [&](size_t i, const std::string& piece) -> Value* {
    if (auto c = constant_value(n.input(i))) return e.constant(piece, channel_shaped(*c));
    if (!target) {
      std::vector<int64_t> shape(x->rank() - 1, 1);
      shape[0] = -1;
      target = e.i64s("channel_shape", shape);
    }
    return e.add("Reshape_" + piece, "Reshape", {n.input(i), target}, channel_type);
  };
  Value* scale;
  auto scale_c = constant_value(n.input(1));
  auto var_c = constant_value(n.input(4));
  if (scale_c && var_c) {
    Tensor s(x->dtype(), {scale_c->numel()});
    for (int64_t c = 0; c < s.numel(); ++c) s.set_f64(c, scale_c->get_f64(c) / std::sqrt(var_c->get_f64(c) + eps));
    scale = e.constant("scale", channel_shaped(s));
  } else {
    Value* var_eps = e.add("Add", "Add", {per_channel(4, "var"), e.scalar("epsilon", eps, x->dtype())}, channel_type);
    Value* sd = e.add("Sqrt", "Sqrt", {var_eps}, channel_type);
    scale = e.add("Div", "Div", {per_channel(1, "scale"), sd}, channel_type);
  }
  Value* centered = e.add("Sub", "Sub", {n.input(0), per_channel(3, "mean")}, *x);
  Value* scaled = e.add("Mul", "Mul", {centered, scale}, *x);
  e.finish("Add_1", "Add", {scaled, per_channel(2, "bias")});
  return true;
}

// InstanceNormalization -> d = x - ReduceMean(x); d / Sqrt(ReduceMean(d * d) +
// eps) * scale + B, the means over the spatial axes of each sample and channel,
// scale and B viewed as [C, 1, ..., 1]: one reduction kernel.
bool decompose_instance_norm(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 3 || n.num_inputs() != 3) return false;
  for (size_t i = 1; i < 3; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.has_rank() || t.rank() != 1 || t.shape()[0] != x->shape()[1] || t.dtype() != x->dtype())
      return false;
  }
  std::vector<int64_t> spatial;
  for (size_t k = 2; k < x->rank(); ++k) spatial.push_back(static_cast<int64_t>(k));
  Type kept = Expansion::kept_type(*x, spatial);
  Dims channel_dims(x->rank() - 1, Dim(1));
  channel_dims[0] = x->shape()[1];
  Type params = Type::tensor(x->dtype(), channel_dims);
  std::vector<int64_t> channel_shape(x->rank() - 1, 1);
  channel_shape[0] = -1;
  Value* target = e.i64s("channel_shape", channel_shape);
  Value* in = n.input(0);
  Value* mean = e.reduce("ReduceMean", "ReduceMean", in, spatial, kept);
  Value* d = e.add("Sub", "Sub", {in, mean}, *x);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", e.add("Mul", "Mul", {d, d}, *x), spatial, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), x->dtype());
  Value* sd = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {var, eps}, kept)}, kept);
  Value* normed = e.add("Div", "Div", {d, sd}, *x);
  Value* scale = e.add("Reshape_scale", "Reshape", {n.input(1), target}, params);
  Value* bias = e.add("Reshape_bias", "Reshape", {n.input(2), target}, params);
  e.finish("Add_1", "Add", {e.add("Mul_1", "Mul", {normed, scale}, *x), bias});
  return true;
}

// LpNormalization, y = x / n with n = ||x||_p along the axis:
//   dx = (g - s * sum(g * y)) / n, s = y for p = 2 (n = sqrt(sum x^2)) and
//   s = sign(x) for p = 1 (n = sum |x|).
void lp_normalization_rule(GradContext& c) {
  Emitter& e = c.e();
  int64_t p = lp_order(c.node());
  int64_t axis = c.axis(c.node().get_int("axis", -1), c.dims(c.in(0)).size());
  Value* norm = e.reduce(p == 1 ? "ReduceL1" : "ReduceL2", c.in(0), {axis}, true);
  Value* dot = e.reduce("ReduceSum", mul(c, c.dy(), c.out()), {axis}, true);
  Value* s = p == 1 ? e.op("Sign", {c.in(0)}) : c.out();
  c.set(0, e.op("Div", {e.op("Sub", {c.dy(), mul(c, s, dot)}), norm}));
}

// LpNormalization -> x / Sqrt(ReduceSum(x * x)) (p 2) or x / ReduceSum(Abs(x))
// (p 1) along the axis, a zero norm taken as 1: one reduction kernel (decomposition.h).
bool decompose_lp_normalization(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() == 0) return false;
  int64_t p = lp_order(n);
  std::vector<int64_t> axes = {normalize_axis(n, n.get_int("axis", -1), static_cast<int64_t>(x->rank()))};
  Type kept = Expansion::kept_type(*x, axes);
  Value* in = n.input(0);
  Value* norm;
  if (p == 2) {
    Value* sum = e.reduce("ReduceSum", "ReduceSum", e.add("Mul", "Mul", {in, in}, *x), axes, kept);
    norm = e.add("Sqrt", "Sqrt", {sum}, kept);
  } else {
    norm = e.reduce("ReduceSum", "ReduceSum", e.add("Abs", "Abs", {in}, *x), axes, kept);
  }
  // A line of zeros divides by 1, not 0.
  Value* zero = e.add("Equal", "Equal", {norm, e.scalar("zero", 0, x->dtype())}, Type::tensor(DType::Bool, kept.shape()));
  Value* safe = e.add("Where", "Where", {zero, e.scalar("one", 1, x->dtype()), norm}, kept);
  e.finish("Div", "Div", {in, safe});
  return true;
}

// ---------------------------------------------------------------------------
// RMSNormalization (opset 23): y = x / Sqrt(mean(x^2) + epsilon) * scale, the
// mean over axes axis .. rank-1; scale broadcasts onto x.

std::vector<int64_t> rms_axes(const Node& n, int64_t rank) {
  int64_t axis = normalize_axis(n, n.get_int("axis", -1), rank);
  std::vector<int64_t> axes(static_cast<size_t>(rank - axis));
  std::iota(axes.begin(), axes.end(), axis);
  return axes;
}

void infer_rms_norm(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  auto rank = static_cast<int64_t>(x.rank());
  size_t normalized = rms_axes(ctx.node(), rank).size();
  const Type& s = ctx.input_type(1);
  if (s.is_tensor() && s.has_rank()) {
    if (s.rank() > normalized)
      ctx.fail("scale " + s.str() + " has more axes than the " + std::to_string(normalized) +
               " it normalizes over (X " + x.str() + ")");
    // Onto, not with: the output has X's shape, so scale may not widen an axis of 1.
    Dims both = broadcast_dims(ctx, {x.shape(), s.shape()});
    for (size_t k = 0; k < x.rank(); ++k)
      if (x.shape()[k].is_static() && both[k].is_static() && both[k] != x.shape()[k])
        ctx.fail("scale " + s.str() + " does not broadcast onto X " + x.str() + " (axis " + std::to_string(k) + ")");
  }
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_rms_norm(EvalContext& ctx) {
  const Tensor &x = ctx.input(0), &scale = ctx.input(1);
  const Node& n = ctx.node();
  auto rank = static_cast<int64_t>(x.rank());
  auto axis = static_cast<size_t>(normalize_axis(n, n.get_int("axis", -1), rank));
  if (scale.rank() > x.rank() - axis || broadcast_shapes(n, {x.shape(), scale.shape()}) != x.shape())
    ctx.fail("scale of shape " + shape_str(scale.shape()) + " does not broadcast onto the normalized axes of X " +
             shape_str(x.shape()));
  int64_t inner = product(x.shape(), axis), outer = product(std::vector<int64_t>(x.shape().begin(), x.shape().begin() + axis));
  double eps = n.get_float("epsilon", 1e-5f);
  BroadcastIndexer at_scale(x.shape(), scale.shape());
  Tensor y(x.dtype(), x.shape());
  for (int64_t o = 0; o < outer; ++o) {
    double sq = 0;
    for (int64_t i = 0; i < inner; ++i) sq += x.get_f64(o * inner + i) * x.get_f64(o * inner + i);
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
    for (int64_t i = 0; i < inner; ++i) {
      int64_t at = o * inner + i;
      y.set_f64(at, x.get_f64(at) * inv * scale.get_f64(at_scale(at)));
    }
  }
  return {y};
}

// y = xhat * s, xhat = x * r, r = (mean(x^2) + eps)^-1/2:
//   dx = r * (h - xhat * mean(h * xhat)), h = g * s;
//   dscale = g * xhat summed over the leading axes, then down to scale's shape.
void rms_norm_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  const Dims& xd = c.dims(x);
  std::vector<int64_t> norm_axes = rms_axes(c.node(), static_cast<int64_t>(xd.size())), lead_axes;
  for (int64_t i = 0; i < norm_axes.front(); ++i) lead_axes.push_back(i);
  Value* ms = e.reduce("ReduceMean", mul(c, x, x), norm_axes, true);
  Value* eps = scalar(c, c.node().get_float("epsilon", 1e-5f));
  Value* r = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {ms, eps})})});
  Value* xhat = mul(c, x, r);
  Value* g = c.dy();
  if (c.wants(0)) {
    Value* h = mul(c, g, c.in(1));
    Value* mhx = e.reduce("ReduceMean", mul(c, h, xhat), norm_axes, true);
    c.set(0, mul(c, r, e.op("Sub", {h, mul(c, xhat, mhx)})));
  }
  if (c.wants(1)) {
    Value* gx = mul(c, g, xhat);
    Value* s = lead_axes.empty() ? gx : e.reduce("ReduceSum", gx, lead_axes, false);
    c.set(1, e.sum_to(s, Dims(xd.begin() + norm_axes.front(), xd.end()), c.dims(c.in(1))));
  }
}

// RMSNormalization -> x / Sqrt(ReduceMean(x * x) + eps) * scale: one reduction
// kernel. Not when stash_type differs from X's dtype (the pieces would compute
// in X's type), as LayerNormalization.
bool decompose_rms_norm(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() == 0) return false;
  std::optional<DType> stash = dtype_from_onnx(static_cast<int32_t>(n.get_int("stash_type", 1)));
  if (!stash || *stash != x->dtype()) return false;
  std::vector<int64_t> axes = rms_axes(n, static_cast<int64_t>(x->rank()));
  Type kept = Expansion::kept_type(*x, axes);
  Value* in = n.input(0);
  Value* ms = e.reduce("ReduceMean", "ReduceMean", e.add("Mul", "Mul", {in, in}, *x), axes, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), x->dtype());
  Value* rms = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {ms, eps}, kept)}, kept);
  Value* normed = e.add("Div", "Div", {in, rms}, *x);
  e.finish("Mul_1", "Mul", {normed, n.input(1)});
  return true;
}

// ---------------------------------------------------------------------------
// GroupNormalization: each sample's channels in num_groups groups of C / G,
// each group normalized over its channels and the spatial axes; scale and bias
// per group at opset 18, per channel from opset 21 (which also adds stash_type).

int64_t group_count(const Node& n) {
  if (!n.has_attr("num_groups")) n.fail("num_groups is required");
  int64_t groups = n.get_int("num_groups", 0);
  if (groups <= 0) n.fail("num_groups must be positive, got " + std::to_string(groups));
  return groups;
}

// Fails unless C is a multiple of the groups; returns the channels per group.
int64_t group_size(const Node& n, int64_t channels, int64_t groups) {
  if (channels % groups != 0)
    n.fail("num_groups (" + std::to_string(groups) + ") must divide the " + std::to_string(channels) + " channels");
  return channels / groups;
}

bool per_channel_affine(const Node& n) { return n.opset() >= 21; }

void infer_group_norm(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  const Node& n = ctx.node();
  if (x.rank() < 2) ctx.fail("expected X of rank >= 2 ([N, C, ...]), got " + x.str());
  int64_t groups = group_count(n);
  const Dim& channels = x.shape()[1];
  if (channels.is_static()) group_size(n, channels.value(), groups);
  for (size_t i = 1; i < 3; ++i) {
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor() || !t.has_rank()) continue;
    const char* what = i == 1 ? "scale" : "bias";
    Dim want = per_channel_affine(n) ? channels : Dim(groups);
    if (t.rank() != 1 || (t.shape()[0].is_static() && want.is_static() && t.shape()[0] != want))
      ctx.fail(std::string(what) + " " + t.str() + " must have one value per " +
               (per_channel_affine(n) ? "channel" : "group") + " (" + want.str() + ")");
  }
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_group_norm(EvalContext& ctx) {
  const Tensor &x = ctx.input(0), &scale = ctx.input(1), &bias = ctx.input(2);
  const Node& n = ctx.node();
  if (x.rank() < 2) ctx.fail("expected X of rank >= 2 ([N, C, ...]), got shape " + shape_str(x.shape()));
  int64_t c = x.shape()[1], vol = product(x.shape(), 2), groups = group_count(n);
  int64_t per = group_size(n, c, groups), affine = per_channel_affine(n) ? c : groups;
  if (scale.numel() != affine || bias.numel() != affine)
    ctx.fail("expected scale and bias of " + std::to_string(affine) + " values each, got shapes " +
             shape_str(scale.shape()) + " and " + shape_str(bias.shape()));
  double eps = n.get_float("epsilon", 1e-5f);
  int64_t block = per * vol;  // one group of one sample, contiguous
  Tensor y(x.dtype(), x.shape());
  for (int64_t b = 0; b < x.shape()[0] * groups; ++b) {
    int64_t base = b * block;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < block; ++i) sum += x.get_f64(base + i);
    double mu = sum / static_cast<double>(block);
    for (int64_t i = 0; i < block; ++i) sq += std::pow(x.get_f64(base + i) - mu, 2);
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(block) + eps);
    for (int64_t i = 0; i < block; ++i) {
      int64_t k = per_channel_affine(n) ? (b % groups) * per + i / vol : b % groups;
      y.set_f64(base + i, (x.get_f64(base + i) - mu) * inv * scale.get_f64(k) + bias.get_f64(k));
    }
  }
  return {y};
}

// InstanceNormalization's rule per group, in x viewed as [N, G, C/G, S]:
//   dx = r * (h - mean(h) - xhat * mean(h * xhat)), h = g * scale, the means over
//   each group (axes 2 and 3); dscale = the sum of g * xhat and dbias the sum of g
//   over N and S, and at opset 18 over the group's channels too.
void group_norm_rule(GradContext& c) {
  Emitter& e = c.e();
  const Node& n = c.node();
  const Dims& xd = c.dims(c.in(0));
  if (xd.size() < 2 || !xd[1].is_static()) c.fail("tcc differentiates GroupNormalization with a static channel count");
  int64_t groups = group_count(n), per = group_size(n, xd[1].value(), groups);
  Value* grouped = e.ints({0, groups, per, -1});
  auto view = [&](Value* v) { return e.op("Reshape", {v, grouped}); };
  // Per-channel parameters as [G, C/G, 1], per-group ones as [G, 1, 1].
  Value* affine_shape = e.ints({groups, per_channel_affine(n) ? per : 1, 1});
  Value* x = view(c.in(0));
  Value* xc = e.op("Sub", {x, e.reduce("ReduceMean", x, {2, 3}, true)});
  Value* var = e.reduce("ReduceMean", mul(c, xc, xc), {2, 3}, true);
  Value* r = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {var, scalar(c, n.get_float("epsilon", 1e-5f))})})});
  Value* xhat = mul(c, xc, r);
  Value* g = view(c.dy());
  if (c.wants(0)) {
    Value* h = mul(c, g, e.op("Reshape", {c.in(1), affine_shape}));
    Value* mh = e.reduce("ReduceMean", h, {2, 3}, true);
    Value* mhx = e.reduce("ReduceMean", mul(c, h, xhat), {2, 3}, true);
    Value* dx = mul(c, r, e.op("Sub", {e.op("Sub", {h, mh}), mul(c, xhat, mhx)}));
    c.set(0, e.op("Reshape", {dx, e.shape_of(c.in(0))}));
  }
  std::vector<int64_t> summed = per_channel_affine(n) ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{0, 2, 3};
  Value* flat = e.ints({-1});
  if (c.wants(1)) c.set(1, e.op("Reshape", {e.reduce("ReduceSum", mul(c, g, xhat), summed, false), flat}));
  if (c.wants(2)) c.set(2, e.op("Reshape", {e.reduce("ReduceSum", g, summed, false), flat}));
}

// GroupNormalization -> x viewed as [N, G, C/G, S]; d = x - ReduceMean(x);
// d / Sqrt(ReduceMean(d * d) + eps) * scale + bias (scale and bias viewed as
// [G, C/G, 1], or [G, 1, 1] per group); viewed back as x: one reduction kernel.
// Needs a static channel count; not when stash_type differs from X's dtype.
bool decompose_group_norm(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || !x->shape()[1].is_static() || n.num_inputs() != 3) return false;
  std::optional<DType> stash = dtype_from_onnx(static_cast<int32_t>(n.get_int("stash_type", 1)));
  if (per_channel_affine(n) && (!stash || *stash != x->dtype())) return false;
  int64_t groups = group_count(n), per = group_size(n, x->shape()[1].value(), groups);
  int64_t affine = per_channel_affine(n) ? per : 1;
  for (size_t i = 1; i < 3; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.has_rank() || t.rank() != 1 || t.shape()[0] != Dim(groups * affine) ||
        t.dtype() != x->dtype())
      return false;
  }
  const Dims& xd = x->shape();
  Type grouped = Type::tensor(x->dtype(), {xd[0], groups, per, dims_product(Dims(xd.begin() + 2, xd.end()))});
  Type kept = Expansion::kept_type(grouped, {2, 3});
  Type params = Type::tensor(x->dtype(), {groups, affine, 1});
  Value* target = e.i64s("affine_shape", {groups, affine, 1});
  Value* xg = e.reshape("Reshape", n.input(0), grouped.shape());
  Value* mean = e.reduce("ReduceMean", "ReduceMean", xg, {2, 3}, kept);
  Value* d = e.add("Sub", "Sub", {xg, mean}, grouped);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", e.add("Mul", "Mul", {d, d}, grouped), {2, 3}, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), x->dtype());
  Value* sd = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {var, eps}, kept)}, kept);
  Value* normed = e.add("Div", "Div", {d, sd}, grouped);
  Value* scale = e.add("Reshape_scale", "Reshape", {n.input(1), target}, params);
  Value* bias = e.add("Reshape_bias", "Reshape", {n.input(2), target}, params);
  Value* y = e.add("Add_1", "Add", {e.add("Mul_1", "Mul", {normed, scale}, grouped), bias}, grouped);
  e.finish_reshape("Reshape_1", y);
  return true;
}

// ---------------------------------------------------------------------------
// MeanVarianceNormalization: y = (x - mean) / (Sqrt(variance) + 1e-9) over
// `axes` (default [0, 2, 3]), the epsilon added to the standard deviation as
// ONNX's function body does. The variance is the mean of squared deviations
// (ONNX's E[x^2] - E[x]^2, which rounding can make negative).

constexpr double kMvnEpsilon = 1e-9;

std::vector<int64_t> mvn_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t a : n.get_ints("axes", {0, 2, 3})) axes.push_back(normalize_axis(n, a, rank));
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) n.fail("axes must not repeat an axis");
  return axes;
}

void infer_mvn(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  mvn_axes(ctx.node(), static_cast<int64_t>(ctx.input_type(0).rank()));
  ctx.set_output_type(0, ctx.input_type(0));
}

std::vector<Tensor> eval_mvn(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> stats_shape = x.shape();
  for (int64_t a : mvn_axes(ctx.node(), static_cast<int64_t>(x.rank()))) stats_shape[static_cast<size_t>(a)] = 1;
  BroadcastIndexer stat_of(x.shape(), stats_shape);
  int64_t stats = product(stats_shape);
  double count = stats == 0 ? 0 : static_cast<double>(x.numel() / stats);
  std::vector<double> mean(static_cast<size_t>(stats)), var(static_cast<size_t>(stats));
  for (int64_t i = 0; i < x.numel(); ++i) mean[static_cast<size_t>(stat_of(i))] += x.get_f64(i) / count;
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto s = static_cast<size_t>(stat_of(i));
    var[s] += std::pow(x.get_f64(i) - mean[s], 2) / count;
  }
  Tensor y(x.dtype(), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto s = static_cast<size_t>(stat_of(i));
    y.set_f64(i, (x.get_f64(i) - mean[s]) / (std::sqrt(var[s]) + kMvnEpsilon));
  }
  return {y};
}

// y = d / s, d = x - mean(x), s = sigma + eps, sigma = Sqrt(mean(d^2)):
//   dx = (g - mean(g)) / s - d * mean(g * d) / (s^2 * sigma).
void mvn_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  std::vector<int64_t> axes = mvn_axes(c.node(), static_cast<int64_t>(c.dims(x).size()));
  Value* d = e.op("Sub", {x, e.reduce("ReduceMean", x, axes, true)});
  Value* sigma = e.op("Sqrt", {e.reduce("ReduceMean", mul(c, d, d), axes, true)});
  Value* s = e.op("Add", {sigma, scalar(c, kMvnEpsilon)});
  Value* g = c.dy();
  Value* centered = e.op("Div", {e.op("Sub", {g, e.reduce("ReduceMean", g, axes, true)}), s});
  Value* along = e.op("Div", {e.reduce("ReduceMean", mul(c, g, d), axes, true), mul(c, mul(c, s, s), sigma)});
  c.set(0, e.op("Sub", {centered, mul(c, d, along)}));
}

// MeanVarianceNormalization -> d = x - ReduceMean(x); d / (Sqrt(ReduceMean(d * d)) + 1e-9).
bool decompose_mvn(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr) return false;
  std::vector<int64_t> axes = mvn_axes(n, static_cast<int64_t>(x->rank()));
  Type kept = Expansion::kept_type(*x, axes);
  Value* in = n.input(0);
  Value* mean = e.reduce("ReduceMean", "ReduceMean", in, axes, kept);
  Value* d = e.add("Sub", "Sub", {in, mean}, *x);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", e.add("Mul", "Mul", {d, d}, *x), axes, kept);
  Value* sd = e.add("Sqrt", "Sqrt", {var}, kept);
  Value* s = e.add("Add", "Add", {sd, e.scalar("epsilon", kMvnEpsilon, x->dtype())}, kept);
  e.finish("Div", "Div", {d, s});
  return true;
}

// ---------------------------------------------------------------------------
// LRN: y = x / (bias + alpha / size * sum)^beta, the sum of x^2 over the
// channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2) that exist.

struct LrnWindow {
  int64_t size, before, after;
  double alpha, beta, bias;
};

LrnWindow lrn_window(const Node& n) {
  if (!n.has_attr("size")) n.fail("size is required");
  int64_t size = n.get_int("size", 0);
  if (size <= 0) n.fail("size must be positive, got " + std::to_string(size));
  return {size, (size - 1) / 2, size - 1 - (size - 1) / 2, n.get_float("alpha", 1e-4f), n.get_float("beta", 0.75f),
          n.get_float("bias", 1.0f)};
}

void infer_lrn(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  if (ctx.input_type(0).rank() < 2) ctx.fail("expected X of rank >= 2 ([N, C, ...]), got " + ctx.input_type(0).str());
  lrn_window(ctx.node());
  ctx.set_output_type(0, ctx.input_type(0));
}

std::vector<Tensor> eval_lrn(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) ctx.fail("expected X of rank >= 2 ([N, C, ...]), got shape " + shape_str(x.shape()));
  LrnWindow w = lrn_window(ctx.node());
  int64_t c = x.shape()[1], vol = product(x.shape(), 2);
  Tensor y(x.dtype(), x.shape());
  for (int64_t b = 0; b < x.shape()[0]; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < vol; ++i) {
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, ch - w.before); k <= std::min(c - 1, ch + w.after); ++k)
          sum += std::pow(x.get_f64((b * c + k) * vol + i), 2);
        int64_t at = (b * c + ch) * vol + i;
        y.set_f64(at, x.get_f64(at) / std::pow(w.bias + w.alpha / static_cast<double>(w.size) * sum, w.beta));
      }
  return {y};
}

// v ([N, C, ...]) summed over the channel window [c - before, c + after] and
// divided by size: an AveragePool of v viewed as [N, 1, C, S], padding counted.
Value* channel_window_mean(GradContext& c, Value* v, int64_t channels, int64_t size, int64_t before, int64_t after) {
  Emitter& e = c.e();
  Value* pooled = e.op("AveragePool", {e.op("Reshape", {v, e.ints({0, 1, channels, -1})})},
                       {{"kernel_shape", Attribute::of_ints({size, 1})},
                        {"pads", Attribute::of_ints({before, 0, after, 0})},
                        {"count_include_pad", Attribute::of_int(1)}});
  return e.op("Reshape", {pooled, e.shape_of(v)});
}

// y = x * D^-beta, D = bias + alpha * mean of x^2 over the window of each channel:
//   dx = g * D^-beta - 2 * alpha * beta * x * mean'(g * x * D^(-beta - 1)), mean'
//   over the channels whose windows hold c: the window mirrored (before and after swapped).
void lrn_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  const Dims& xd = c.dims(x);
  if (xd.size() < 2 || !xd[1].is_static()) c.fail("tcc differentiates LRN with a static channel count");
  LrnWindow w = lrn_window(c.node());
  int64_t channels = xd[1].value();
  Value* mean = channel_window_mean(c, mul(c, x, x), channels, w.size, w.before, w.after);
  Value* d = e.op("Add", {mul(c, mean, scalar(c, w.alpha)), scalar(c, w.bias)});
  Value* g = c.dy();
  Value* direct = mul(c, g, e.op("Pow", {d, scalar(c, -w.beta)}));
  Value* through = mul(c, mul(c, g, x), e.op("Pow", {d, scalar(c, -w.beta - 1)}));
  Value* spread = channel_window_mean(c, through, channels, w.size, w.after, w.before);
  c.set(0, e.op("Sub", {direct, mul(c, mul(c, x, spread), scalar(c, 2 * w.alpha * w.beta))}));
}

// LRN -> x / Pow(ReduceMean'(x * x) * alpha + bias, beta), the windowed mean an
// AveragePool (a pool kernel) of x^2 viewed as [N, 1, C, S], padding counted
// so that it divides by size. Needs a static channel count.
bool decompose_lrn(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || !x->shape()[1].is_static()) return false;
  LrnWindow w = lrn_window(n);
  const Dims& xd = x->shape();
  Dims viewed = {xd[0], 1, xd[1], dims_product(Dims(xd.begin() + 2, xd.end()))};
  Type pooled_type = Type::tensor(x->dtype(), viewed);
  Value* in = n.input(0);
  Value* sq = e.reshape("Reshape", e.add("Mul", "Mul", {in, in}, *x), viewed);
  Value* pooled = e.add("AveragePool", "AveragePool", {sq}, pooled_type,
                        {{"kernel_shape", Attribute::of_ints({w.size, 1})},
                         {"pads", Attribute::of_ints({w.before, 0, w.after, 0})},
                         {"count_include_pad", Attribute::of_int(1)}});
  Value* mean = e.reshape("Reshape_1", pooled, xd);
  Value* scaled = e.add("Mul_1", "Mul", {mean, e.scalar("alpha", w.alpha, x->dtype())}, *x);
  Value* base = e.add("Add", "Add", {scaled, e.scalar("bias", w.bias, x->dtype())}, *x);
  Value* den = e.add("Pow", "Pow", {base, e.scalar("beta", w.beta, x->dtype())}, *x);
  e.finish("Div", "Div", {in, den});
  return true;
}

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  r.add(OpDef{"", "BatchNormalization", 9, kReduction, infer_batchnorm, eval_batchnorm, kFloatTypes})
      .configured_by({3, 4})
      .gradient(batch_norm_rule)
      .decomposition(decompose_batchnorm)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "InstanceNormalization", 6, kReduction, infer_instancenorm, eval_instancenorm, kFloatTypes})
      .gradient(instance_norm_rule)
      .decomposition(decompose_instance_norm)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "LpNormalization", 1, kReduction, infer_lp_normalization, eval_lp_normalization, kFloatTypes})
      .gradient(lp_normalization_rule)
      .decomposition(decompose_lp_normalization)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "RMSNormalization", 23, kReduction, infer_rms_norm, eval_rms_norm, kFloatTypes})
      .gradient(rms_norm_rule)
      .decomposition(decompose_rms_norm)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "GroupNormalization", 18, kReduction, infer_group_norm, eval_group_norm, kFloatTypes})
      .gradient(group_norm_rule)
      .decomposition(decompose_group_norm)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "MeanVarianceNormalization", 9, kReduction, infer_mvn, eval_mvn, kFloatTypes})
      .gradient(mvn_rule)
      .decomposition(decompose_mvn)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "LRN", 1, kReduction, infer_lrn, eval_lrn, kFloatTypes})
      .gradient(lrn_rule)
      .decomposition(decompose_lrn)
      .under_autocast(AutocastClass::F32);
}

}  // namespace tcc
