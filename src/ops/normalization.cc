// Normalizations over the channels of an [N, C, spatial...] input:
// BatchNormalization and InstanceNormalization (LayerNormalization, which
// normalizes trailing axes, is in reduction.cc), and LpNormalization, which
// scales each line along one axis to unit L1 or L2 norm. Kernels compute in double.
#include <cmath>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

const std::vector<DType> kFloatTypes = {DType::F32, DType::F16, DType::BF16, DType::F64};

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

// Inference BatchNormalization -> (x - mean) * s + B with s = scale / Sqrt(var + eps),
// folded to a constant when scale and var are constants (decomposition.h).
// Not in training mode or with its running-statistics outputs.
bool decompose_batchnorm(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || n.num_inputs() != 5 || !e.only_first_output_used()) return false;
  if (n.opset() >= 14 ? n.get_int("training_mode", 0) != 0 : n.num_outputs() > 1) return false;
  for (size_t i = 1; i < 5; ++i) {
    const Value* p = n.input(i);
    if (p == nullptr || !p->type().is_tensor() || !p->type().has_rank() || p->type().rank() != 1 ||
        p->type().shape()[0] != x->shape()[1] || p->type().dtype() != x->dtype())
      return false;
  }
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
      target = e.constant("channel_shape", Tensor::from_i64(shape, {static_cast<int64_t>(shape.size())}));
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

}  // namespace

void register_normalization_ops(OpRegistry& r) {
  r.add(OpDef{"", "BatchNormalization", 9, kReduction, infer_batchnorm, eval_batchnorm, kFloatTypes})
      .gradient(batch_norm_rule)
      .decomposition(decompose_batchnorm);
  r.add(OpDef{"", "InstanceNormalization", 6, kReduction, infer_instancenorm, eval_instancenorm, kFloatTypes})
      .gradient(instance_norm_rule);
  r.add(OpDef{"", "LpNormalization", 1, kReduction, infer_lp_normalization, eval_lp_normalization, kFloatTypes})
      .gradient(lp_normalization_rule)
      .decomposition(decompose_lp_normalization);
}

}  // namespace tcc
