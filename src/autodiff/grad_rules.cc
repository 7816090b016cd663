// Gradient rules. Each comment states the derivative the rule emits, with
// g the incoming gradient and y the forward output.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "src/autodiff/grad_rules.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

using Attrs = std::map<std::string, Attribute>;

Attrs int_attr(const std::string& k, int64_t v) { return {{k, Attribute::of_int(v)}}; }

Value* mul(GradContext& c, Value* a, Value* b) { return c.e().op("Mul", {a, b}); }
Value* scalar(GradContext& c, double v) { return c.e().scalar(v, c.dtype()); }
// v (a bool, an integer or another float) cast to the node's float type.
Value* as_dtype(GradContext& c, Value* v) {
  return c.e().op("Cast", {v}, int_attr("to", static_cast<int64_t>(c.dtype())));
}

// x, of the given rank, with axes a and b swapped.
Value* swap_axes(GradContext& c, Value* x, size_t rank, size_t a, size_t b) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return c.e().op("Transpose", {x}, {{"perm", Attribute::of_ints(perm)}});
}

// Transpose of the last two axes of a value of the given rank.
Value* transpose_last2(GradContext& c, Value* x, size_t rank) { return swap_axes(c, x, rank, rank - 1, rank - 2); }

// ---- elementwise arithmetic (operands broadcast to the output)

// d(a+b) = g, g
void add_rule(GradContext& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(c.dy(), i));
}

// d(a-b) = g, -g
void sub_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.dy(), 0));
  if (c.wants(1)) c.set(1, c.unbroadcast(c.e().op("Neg", {c.dy()}), 1));
}

// d(a*b) = g*b, g*a
void mul_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(mul(c, c.dy(), c.in(1)), 0));
  if (c.wants(1)) c.set(1, c.unbroadcast(mul(c, c.dy(), c.in(0)), 1));
}

// d(a/b) = g/b, -g*y/b
void div_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.e().op("Div", {c.dy(), c.in(1)}), 0));
  if (c.wants(1)) {
    Value* t = c.e().op("Div", {mul(c, c.dy(), c.out()), c.in(1)});
    c.set(1, c.unbroadcast(c.e().op("Neg", {t}), 1));
  }
}

// Mod, y = a - k b with k = floor(a/b) (fmod 0) or trunc(a/b) (fmod 1), an
// integer that is constant between the jumps at multiples of b: d = g, -g k,
// with k read back from the forward values as round((a - y) / b).
void mod_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.dy(), 0));
  if (c.wants(1)) {
    Value* k = c.e().op("Round", {c.e().op("Div", {c.e().op("Sub", {c.in(0), c.out()}), c.in(1)})});
    c.set(1, c.unbroadcast(c.e().op("Neg", {mul(c, c.dy(), k)}), 1));
  }
}

// d(-x) = -g
void neg_rule(GradContext& c) { c.set(0, c.e().op("Neg", {c.dy()})); }

// d(x^p) = g * p * x^(p-1). The exponent gets no gradient: it is a constant
// or a value that does not depend on a parameter.
void pow_rule(GradContext& c) {
  if (c.wants(1)) c.fail("tcc differentiates Pow only in its base; the exponent depends on a parameter");
  Value* p = c.in(1);
  if (p->type().dtype() != c.dtype())
    p = as_dtype(c, p);
  Value* pm1 = c.e().op("Sub", {p, scalar(c, 1.0)});
  Value* d = mul(c, p, c.e().op("Pow", {c.in(0), pm1}));
  c.set(0, c.unbroadcast(mul(c, c.dy(), d), 0));
}

// ---- unary

// d relu(x) = g where y > 0, else 0. y > 0 exactly where x > 0; reading y
// rather than x lets the backward keep only the output, so the forward's
// producer and the Relu fuse (a Gemm's epilogue) without saving x.
void relu_rule(GradContext& c) {
  Value* zero = scalar(c, 0.0);
  c.set(0, c.e().op("Where", {c.e().op("Greater", {c.out(), zero}), c.dy(), zero}));
}

// d sigmoid = g * y * (1 - y)
void sigmoid_rule(GradContext& c) {
  Value* one_minus = c.e().op("Sub", {scalar(c, 1.0), c.out()});
  c.set(0, mul(c, c.dy(), mul(c, c.out(), one_minus)));
}

// d tanh = g * (1 - y^2)
void tanh_rule(GradContext& c) {
  Value* d = c.e().op("Sub", {scalar(c, 1.0), mul(c, c.out(), c.out())});
  c.set(0, mul(c, c.dy(), d));
}

// d exp = g * y
void exp_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.out())); }

// d log = g / x
void log_rule(GradContext& c) { c.set(0, c.e().op("Div", {c.dy(), c.in(0)})); }

// d sqrt = g / (2y)
void sqrt_rule(GradContext& c) { c.set(0, c.e().op("Div", {c.dy(), mul(c, c.out(), scalar(c, 2.0))})); }

// d erf = g * 2/sqrt(pi) * exp(-x^2)
void erf_rule(GradContext& c) {
  Value* x2 = mul(c, c.in(0), c.in(0));
  Value* e = c.e().op("Exp", {c.e().op("Neg", {x2})});
  c.set(0, mul(c, c.dy(), mul(c, e, scalar(c, 2.0 / std::sqrt(M_PI)))));
}

// Gelu, exact: d = Phi(x) + x * phi(x), Phi(x) = (1 + erf(x/sqrt 2)) / 2,
// phi(x) = exp(-x^2/2) / sqrt(2 pi).
// Gelu, tanh: with u = sqrt(2/pi) (x + 0.044715 x^3), t = tanh(u):
// d = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
void gelu_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  Value* x2 = mul(c, x, x);
  Value* d;
  if (c.node().get_string("approximate", "none") == "tanh") {
    const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    Value* inner = e.op("Add", {scalar(c, 1.0), mul(c, x2, scalar(c, a))});
    Value* t = e.op("Tanh", {mul(c, mul(c, x, inner), scalar(c, k))});
    Value* half_one_plus_t = mul(c, e.op("Add", {scalar(c, 1.0), t}), scalar(c, 0.5));
    Value* sech2 = e.op("Sub", {scalar(c, 1.0), mul(c, t, t)});
    Value* du = e.op("Add", {scalar(c, k), mul(c, x2, scalar(c, 3.0 * a * k))});
    d = e.op("Add", {half_one_plus_t, mul(c, mul(c, x, scalar(c, 0.5)), mul(c, sech2, du))});
  } else {
    Value* cdf = mul(c, e.op("Add", {scalar(c, 1.0), e.op("Erf", {mul(c, x, scalar(c, M_SQRT1_2))})}), scalar(c, 0.5));
    Value* pdf = mul(c, e.op("Exp", {mul(c, x2, scalar(c, -0.5))}), scalar(c, 1.0 / std::sqrt(2.0 * M_PI)));
    d = e.op("Add", {cdf, mul(c, x, pdf)});
  }
  c.set(0, mul(c, c.dy(), d));
}

// Identity, and Dropout in inference mode: g
void identity_rule(GradContext& c) { c.set(0, c.dy()); }

// d |x| = g * sign(x)
void abs_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Sign", {c.in(0)}))); }

// d sin = g cos(x);  d cos = -g sin(x)
void sin_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Cos", {c.in(0)}))); }
void cos_rule(GradContext& c) { c.set(0, c.e().op("Neg", {mul(c, c.dy(), c.e().op("Sin", {c.in(0)}))})); }

// d (1/x) = -g y^2
void reciprocal_rule(GradContext& c) { c.set(0, c.e().op("Neg", {mul(c, c.dy(), mul(c, c.out(), c.out()))})); }

// d softplus = g * sigmoid(x)
void softplus_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Sigmoid", {c.in(0)}))); }

// g where x > 0, else `negative` (as torch: the slope at 0 is the negative side's)
void piecewise(GradContext& c, Value* positive, Value* negative) {
  Value* pos = c.e().op("Greater", {c.in(0), scalar(c, 0.0)});
  c.set(0, c.e().op("Where", {pos, positive, negative}));
}

// LeakyRelu: g, or alpha g below 0
void leaky_relu_rule(GradContext& c) {
  piecewise(c, c.dy(), mul(c, c.dy(), scalar(c, c.node().get_float("alpha", 0.01f))));
}

// Elu: g, or g (y + alpha) below 0
void elu_rule(GradContext& c) {
  Value* slope = c.e().op("Add", {c.out(), scalar(c, c.node().get_float("alpha", 1.0f))});
  piecewise(c, c.dy(), mul(c, c.dy(), slope));
}

// Selu: gamma g, or g (y + alpha gamma) below 0
void selu_rule(GradContext& c) {
  double alpha = c.node().get_float("alpha", 1.67326319217681884765625f);
  double gamma = c.node().get_float("gamma", 1.05070102214813232421875f);
  Value* slope = c.e().op("Add", {c.out(), scalar(c, alpha * gamma)});
  piecewise(c, mul(c, c.dy(), scalar(c, gamma)), mul(c, c.dy(), slope));
}

// g where lo < x < hi (lo <= x <= hi with `closed`), else 0
Value* inside(GradContext& c, Value* x, Value* lo, Value* hi, bool closed) {
  Emitter& e = c.e();
  Value* above = lo ? e.op(closed ? "GreaterOrEqual" : "Greater", {x, lo}) : nullptr;
  Value* below = hi ? e.op(closed ? "LessOrEqual" : "Less", {x, hi}) : nullptr;
  Value* both = above && below ? e.op("And", {above, below}) : above ? above : below;
  return both ? e.op("Where", {both, c.dy(), scalar(c, 0.0)}) : c.dy();
}

// HardSigmoid: alpha g where 0 < alpha x + beta < 1, else 0
void hard_sigmoid_rule(GradContext& c) {
  double alpha = c.node().get_float("alpha", 0.2f), beta = c.node().get_float("beta", 0.5f);
  Value* z = c.e().op("Add", {mul(c, c.in(0), scalar(c, alpha)), scalar(c, beta)});
  c.set(0, mul(c, inside(c, z, scalar(c, 0.0), scalar(c, 1.0), false), scalar(c, alpha)));
}

// HardSwish: g (x / 3 + 1/2) where -3 <= x <= 3, g above, 0 below (torch's hardswish_backward)
void hard_swish_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  Value* slope = e.op("Add", {mul(c, x, scalar(c, 1.0 / 3)), scalar(c, 0.5)});
  Value* upper = e.op("Where", {e.op("Greater", {x, scalar(c, 3.0)}), scalar(c, 1.0), slope});
  Value* d = e.op("Where", {e.op("Less", {x, scalar(c, -3.0)}), scalar(c, 0.0), upper});
  c.set(0, mul(c, c.dy(), d));
}

// Clip: g where min <= x <= max (as torch.clamp), else 0. The bounds get no gradient.
void clip_rule(GradContext& c) {
  if (c.wants(1) || c.wants(2)) c.fail("tcc differentiates Clip in its input only; a bound depends on a parameter");
  const Node& n = c.node();
  Value *lo = nullptr, *hi = nullptr;
  if (n.opset() < 11) {
    if (n.has_attr("min")) lo = scalar(c, n.get_float("min", 0));
    if (n.has_attr("max")) hi = scalar(c, n.get_float("max", 0));
  } else {
    lo = n.has_input(1) ? c.in(1) : nullptr;
    hi = n.has_input(2) ? c.in(2) : nullptr;
  }
  c.set(0, inside(c, c.in(0), lo, hi, true));
}

// Floor, Ceil, Round, Sign: piecewise constant, so 0 (as torch)
void zero_rule(GradContext& c) { c.set(0, c.e().zeros_like(c.in(0), c.in(0)->type().dtype())); }

// Dropout at inference (no training_mode, or a constant false one): the identity
void dropout_rule(GradContext& c) {
  const Tensor* training = c.node().num_inputs() > 2 && c.in(2) ? c.constant(2) : nullptr;
  if ((c.node().num_inputs() > 2 && c.in(2) && (!training || training->get_f64(0) != 0)) ||
      c.node().get_int("is_test", 1) == 0)
    c.fail("tcc differentiates Dropout at inference only (training_mode absent or false)");
  c.set(0, c.dy());
}

// ---- variadic

// Sum: g to every operand; Mean: g / n
void sum_rule(GradContext& c) {
  bool mean = c.node().op_type() == "Mean";
  Value* g = mean ? c.e().op("Div", {c.dy(), scalar(c, static_cast<double>(c.node().num_inputs()))}) : c.dy();
  for (size_t i = 0; i < c.node().num_inputs(); ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(g, i));
}

// Max, Min: g to the operands equal to y, split evenly where several are (as torch.maximum)
void extremum_rule(GradContext& c) {
  Emitter& e = c.e();
  size_t n = c.node().num_inputs();
  std::vector<Value*> hit(n);
  Value* count = nullptr;
  for (size_t i = 0; i < n; ++i) {
    hit[i] = e.op("Equal", {c.in(i), c.out()});
    Value* one = as_dtype(c, hit[i]);
    count = count ? e.op("Add", {count, one}) : one;
  }
  Value* share = e.op("Div", {c.dy(), count});
  for (size_t i = 0; i < n; ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(e.op("Where", {hit[i], share, scalar(c, 0.0)}), i));
}


// d cast = g cast back to the input's type; CastLike reads only its second
// input's type, so that input's gradient is 0.
void cast_rule(GradContext& c) {
  c.set(0, c.e().op("Cast", {c.dy()}, int_attr("to", static_cast<int64_t>(c.in(0)->type().dtype()))));
  if (c.wants(1)) c.set(1, c.e().zeros_like(c.in(1), c.in(1)->type().dtype()));
}

// d where(cond, a, b) = where(cond, g, 0), where(cond, 0, g); cond has none.
void where_rule(GradContext& c) {
  Value* zero = scalar(c, 0.0);
  if (c.wants(1)) c.set(1, c.unbroadcast(c.e().op("Where", {c.in(0), c.dy(), zero}), 1));
  if (c.wants(2)) c.set(2, c.unbroadcast(c.e().op("Where", {c.in(0), zero, c.dy()}), 2));
}

// d expand(x) = g summed back to x's shape
void expand_rule(GradContext& c) { c.set(0, c.unbroadcast(c.dy(), 0)); }

// ---- contractions

// MatMul with numpy semantics: rank-1 operands are promoted ([k] -> [1, k] on
// the left, [k, 1] on the right) and batch axes broadcast. dA = g @ B^T,
// dB = A^T @ g, each summed back over the batch axes it was broadcast along.
void matmul_rule(GradContext& c) {
  Emitter& e = c.e();
  Value *a = c.in(0), *b = c.in(1), *g = c.dy();
  Dims ad = c.dims(a), bd = c.dims(b), yd = c.dims(c.out());
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) {
    a = e.unsqueeze(a, {0});
    ad.insert(ad.begin(), Dim(1));
    g = e.unsqueeze(g, {static_cast<int64_t>(yd.size()) - (b_vec ? 0 : 1)});
    yd.insert(yd.end() - (b_vec ? 0 : 1), Dim(1));
  }
  if (b_vec) {
    b = e.unsqueeze(b, {1});
    bd.push_back(Dim(1));
    g = e.unsqueeze(g, {-1});
    yd.push_back(Dim(1));
  }
  Dims batch(yd.begin(), yd.end() - 2);
  if (c.wants(0)) {
    Value* da = e.op("MatMul", {g, transpose_last2(c, b, bd.size())});
    Dims from = batch;
    from.insert(from.end(), ad.end() - 2, ad.end());
    da = e.sum_to(da, from, ad);
    c.set(0, a_vec ? e.squeeze(da, {0}) : da);
  }
  if (c.wants(1) && !a_vec && !b_vec && bd.size() == 2 && ad.size() > 2 && ad.back().is_static() &&
      bd.back().is_static()) {
    // A weight shared across batch axes (x @ W over [batch, seq, K]): one 2-D
    // product over the flattened rows, A^T [K, batch*seq] @ g [batch*seq, N],
    // rather than a batched product summed over the batch afterwards (a
    // [batch, K, N] temporary, and a reduction kernel instead of a GEMM).
    Value* rows_a = e.op("Reshape", {a, e.ints({-1, ad.back().value()})});
    Value* rows_g = e.op("Reshape", {g, e.ints({-1, bd.back().value()})});
    c.set(1, e.op("MatMul", {e.op("Transpose", {rows_a}, {{"perm", Attribute::of_ints({1, 0})}}), rows_g}));
  } else if (c.wants(1)) {
    Value* db = e.op("MatMul", {transpose_last2(c, a, ad.size()), g});
    Dims from = batch;
    from.insert(from.end(), bd.end() - 2, bd.end());
    db = e.sum_to(db, from, bd);
    c.set(1, b_vec ? e.squeeze(db, {1}) : db);
  }
}

// Y = alpha op(A) op(B) + beta C. With dOpA = alpha g op(B)^T and
// dOpB = alpha op(A)^T g, each written as one Gemm:
//   dA = transA ? alpha op(B) g^T : alpha g op(B)^T
//   dB = transB ? alpha g^T op(A) : alpha op(A)^T g
//   dC = beta g summed back to C's shape
void gemm_rule(GradContext& c) {
  const Node& n = c.node();
  int64_t ta = n.get_int("transA", 0), tb = n.get_int("transB", 0);
  float alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
  auto gemm = [&](Value* x, Value* y, int64_t tx, int64_t ty) {
    return c.e().op("Gemm", {x, y}, {{"alpha", Attribute::of_float(alpha)}, {"transA", Attribute::of_int(tx)},
                                     {"transB", Attribute::of_int(ty)}});
  };
  if (c.wants(0)) c.set(0, ta ? gemm(c.in(1), c.dy(), tb, 1) : gemm(c.dy(), c.in(1), 0, 1 - tb));
  if (c.wants(1)) c.set(1, tb ? gemm(c.dy(), c.in(0), 1, ta) : gemm(c.in(0), c.dy(), 1 - ta, 0));
  if (c.wants(2)) {
    Value* g = beta == 1.0f ? c.dy() : mul(c, c.dy(), scalar(c, beta));
    c.set(2, c.unbroadcast(g, 2));
  }
}

// ---- normalizations and reductions

// d softmax = y * (g - sum(g * y, axis))
void softmax_rule(GradContext& c) {
  int64_t axis = c.node().get_int("axis", -1);
  Value* s = c.e().reduce("ReduceSum", mul(c, c.dy(), c.out()), {axis}, true);
  c.set(0, mul(c, c.out(), c.e().op("Sub", {c.dy(), s})));
}

// d log_softmax = g - exp(y) * sum(g, axis)
void log_softmax_rule(GradContext& c) {
  int64_t axis = c.node().get_int("axis", -1);
  Value* s = c.e().reduce("ReduceSum", c.dy(), {axis}, true);
  c.set(0, c.e().op("Sub", {c.dy(), mul(c, c.e().op("Exp", {c.out()}), s)}));
}

// LayerNormalization over axes [axis, rank). With xhat = (x - mean) * r,
// r = 1/sqrt(var + eps), h = g * scale and means over the normalized axes:
//   dx = r * (h - mean(h) - xhat * mean(h * xhat))
//   dscale = sum over leading axes of g * xhat;  dbias = sum of g.
// Mean and InvStdDev are recomputed rather than read from the optional
// outputs, so the rule works whether or not the model asked for them.
void layer_norm_rule(GradContext& c) {
  if (c.dy(1) || c.dy(2)) c.fail("tcc differentiates LayerNormalization only through its first output");
  Emitter& e = c.e();
  Value* x = c.in(0);
  size_t rank = c.dims(x).size();
  int64_t axis = c.axis(c.node().get_int("axis", -1), rank);
  double eps = c.node().get_float("epsilon", 1e-5f);
  std::vector<int64_t> norm_axes, lead_axes;
  for (int64_t i = 0; i < static_cast<int64_t>(rank); ++i) (i < axis ? lead_axes : norm_axes).push_back(i);
  Value* mean = e.reduce("ReduceMean", x, norm_axes, true);
  Value* xc = e.op("Sub", {x, mean});
  Value* var = e.reduce("ReduceMean", mul(c, xc, xc), norm_axes, true);
  Value* r = e.op("Reciprocal", {e.op("Sqrt", {e.op("Add", {var, scalar(c, eps)})})});
  Value* xhat = mul(c, xc, r);
  Value* g = c.dy();
  Dims norm_dims(c.dims(x).begin() + axis, c.dims(x).end());
  // Sums g-shaped terms over the leading axes, then down to the operand's shape.
  auto sum_leading = [&](Value* v, size_t input) {
    Value* s = lead_axes.empty() ? v : e.reduce("ReduceSum", v, lead_axes, false);
    return e.sum_to(s, norm_dims, c.dims(c.in(input)));
  };
  if (c.wants(0)) {
    Value* h = mul(c, g, c.in(1));
    Value* mh = e.reduce("ReduceMean", h, norm_axes, true);
    Value* mhx = e.reduce("ReduceMean", mul(c, h, xhat), norm_axes, true);
    Value* inner = e.op("Sub", {e.op("Sub", {h, mh}), mul(c, xhat, mhx)});
    c.set(0, mul(c, r, inner));
  }
  if (c.wants(1)) c.set(1, sum_leading(mul(c, g, xhat), 1));
  if (c.wants(2)) c.set(2, sum_leading(g, 2));
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

// The axes a Reduce* node reduces, normalized; empty when it is a no-op.
std::vector<int64_t> reduced_axes(GradContext& c, size_t rank, bool& noop) {
  const Node& n = c.node();
  bool axes_input = n.opset() >= (n.op_type() == "ReduceSum" ? 13 : 18);
  std::vector<int64_t> axes = axes_input ? (c.in(1) ? c.const_ints(1, "the reduced axes") : std::vector<int64_t>{})
                                         : n.get_ints("axes");
  noop = axes.empty() && n.get_int("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && !noop)
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t& a : axes) a = c.axis(a, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

// g with the reduced axes restored (as size 1) and expanded to x's shape.
Value* expand_reduced(GradContext& c, Value* g) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return g;
  if (!c.node().get_int("keepdims", 1) && !axes.empty()) g = c.e().unsqueeze(g, axes);
  return c.e().op("Expand", {g, c.e().shape_of(c.in(0))});
}

// Whether a Reduce* node reduces nothing (no axes, with noop_with_empty_axes):
// the interpreter then returns x, so dx = g whatever the reduction.
bool reduces_nothing(GradContext& c) {
  bool noop = false;
  reduced_axes(c, c.dims(c.in(0)).size(), noop);
  return noop;
}

// d reduce_sum = g broadcast back over the reduced axes
void reduce_sum_rule(GradContext& c) { c.set(0, expand_reduced(c, c.dy())); }

// g divided by the elements averaged into each output (x's size over y's).
Value* mean_share(GradContext& c) {
  Emitter& e = c.e();
  Value* n = e.op("Div", {as_dtype(c, e.op("Size", {c.in(0)})), as_dtype(c, e.op("Size", {c.out()}))});
  return e.op("Div", {c.dy(), n});
}

// d reduce_mean = g / (elements per output) broadcast back
void reduce_mean_rule(GradContext& c) { c.set(0, expand_reduced(c, mean_share(c))); }

// d global_average_pool = g / (spatial elements) broadcast over the spatial axes
void global_average_pool_rule(GradContext& c) {
  c.set(0, c.e().op("Expand", {mean_share(c), c.e().shape_of(c.in(0))}));
}

// d reduce_sum_square = 2 x g (g broadcast back)
void reduce_sum_square_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  c.set(0, mul(c, expand_reduced(c, c.dy()), mul(c, c.in(0), scalar(c, 2.0))));
}

// d reduce_log_sum_exp = g exp(x - y);  d reduce_log_sum = g exp(-y) (y, g broadcast back)
void reduce_log_sum_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  Emitter& e = c.e();
  Value* y = expand_reduced(c, c.out());
  Value* exponent = c.node().op_type() == "ReduceLogSumExp" ? e.op("Sub", {c.in(0), y}) : e.op("Neg", {y});
  c.set(0, mul(c, expand_reduced(c, c.dy()), e.op("Exp", {exponent})));
}

// d reduce_l1 = g sign(x) (g broadcast back)
void reduce_l1_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  c.set(0, mul(c, expand_reduced(c, c.dy()), c.e().op("Sign", {c.in(0)})));
}

// d reduce_l2 = g x / y (y, g broadcast back); 0 where a group is all zeros
// (y = 0, x = 0: the subgradient PyTorch's norm takes), by dividing by 1 there.
void reduce_l2_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  Emitter& e = c.e();
  Value* y = expand_reduced(c, c.out());
  Value* safe = e.op("Where", {e.op("Equal", {y, scalar(c, 0.0)}), scalar(c, 1.0), y});
  c.set(0, mul(c, expand_reduced(c, c.dy()), e.op("Div", {c.in(0), safe})));
}

// The factors x of products, each with whether it is 0 and `safe`, x with 1 for 0.
struct Factors {
  Value* is_zero;
  Value* safe;
};

Factors factors_of(GradContext& c, Value* x) {
  Value* is_zero = c.e().op("Equal", {x, scalar(c, 0.0)});
  return {is_zero, c.e().op("Where", {is_zero, scalar(c, 1.0), x})};
}

// The derivative of a product by each of its factors f, the product of the
// others: p / x where the product has no zero, p' (the product of its nonzero
// factors) at its only zero, and 0 at every factor of a product with two or
// more. `nonzero_product` (p', the product of the safe factors) and `zeros`
// (how many factors are 0) are those of each factor's product, read at the factor.
Value* product_of_others(GradContext& c, const Factors& f, Value* nonzero_product, Value* zeros) {
  Emitter& e = c.e();
  Value* zero = scalar(c, 0.0);
  Value* only_zero = e.op("And", {f.is_zero, e.op("Equal", {zeros, scalar(c, 1.0)})});
  Value* at_only_zero = e.op("Where", {only_zero, nonzero_product, zero});
  return e.op("Where", {e.op("Equal", {zeros, zero}), e.op("Div", {nonzero_product, f.safe}), at_only_zero});
}

// d reduce_prod / dx_i = the product of the other elements of x_i's group (product_of_others).
void reduce_prod_rule(GradContext& c) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return c.set(0, c.dy());
  Emitter& e = c.e();
  Factors f = factors_of(c, c.in(0));
  auto back = [&](Value* kept) { return e.op("Expand", {kept, e.shape_of(c.in(0))}); };
  Value* nonzero_product = back(e.reduce("ReduceProd", f.safe, axes, true));
  Value* zeros = back(e.reduce("ReduceSum", as_dtype(c, f.is_zero), axes, true));
  c.set(0, mul(c, expand_reduced(c, c.dy()), product_of_others(c, f, nonzero_product, zeros)));
}

// g put into `zeros` at `index` along `axis`, where the index names each
// position at most once (a selection's gradient). With opset 16's reduction
// add, such a scatter into zeros is a generated kernel (tcc::ScatterAdd).
Value* scatter_back(GradContext& c, Value* zeros, Value* index, Value* g, int64_t axis) {
  Attrs scatter{{"axis", Attribute::of_int(axis)}};
  if (c.node().opset() >= 16) scatter["reduction"] = Attribute::of_string("add");
  return c.e().op("ScatterElements", {zeros, index, g}, std::move(scatter));
}

// TopK: the values' gradient put back where they came from (the indices are
// distinct along the axis); every other element gets 0.
void top_k_rule(GradContext& c) {
  int64_t axis = c.axis(c.node().get_int("axis", -1), c.dims(c.in(0)).size());
  c.set(0, scatter_back(c, c.e().zeros_like(c.in(0), c.dtype()), c.out(1), c.dy(), axis));
}

// g to the elements equal to y, split evenly among ties (as torch.amax);
// `reduce` counts the ties with the reduction's axes kept.
void to_extrema(GradContext& c, Value* g, Value* y, const std::function<Value*(Value*)>& reduce) {
  Emitter& e = c.e();
  Value* hit = as_dtype(c, e.op("Equal", {c.in(0), y}));
  c.set(0, e.op("Div", {mul(c, g, hit), reduce(hit)}));
}

// ReduceMax, ReduceMin
void reduce_extremum_rule(GradContext& c) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return c.set(0, c.dy());
  to_extrema(c, expand_reduced(c, c.dy()), expand_reduced(c, c.out()),
             [&](Value* hit) { return c.e().reduce("ReduceSum", hit, axes, true); });
}

// GlobalMaxPool: ReduceMax over the spatial axes, kept
void global_max_pool_rule(GradContext& c) {
  std::vector<int64_t> spatial;
  for (size_t i = 2; i < c.dims(c.in(0)).size(); ++i) spatial.push_back(static_cast<int64_t>(i));
  to_extrema(c, c.dy(), c.out(), [&](Value* hit) { return c.e().reduce("ReduceSum", hit, spatial, true); });
}

// ---- convolution, pooling, normalization

// A sliding window's attributes with explicit pads, one entry per spatial dim;
// fails naming the node for auto_pad SAME (its pads depend on the input's size)
// and, where `need_static`, for symbolic spatial dims of x.
struct Window {
  std::vector<int64_t> kernel, strides, dilations, begin, end, in, out;  // in / out: x's and y's spatial dims
  int64_t extent(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
};

Window window_of(GradContext& c, const std::vector<int64_t>& kernel) {
  std::string auto_pad = c.node().get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    c.fail("tcc differentiates windows with explicit pads, not auto_pad " + auto_pad);
  size_t ns = kernel.size();
  Window w;
  w.kernel = kernel;
  SlidingWindow sw;
  if (std::string why = sliding_window(c.node(), kernel, std::vector<int64_t>(ns, -1), &sw); !why.empty()) c.fail(why);
  w.strides = std::move(sw.strides);
  w.dilations = std::move(sw.dilations);
  w.begin = std::move(sw.begin);
  w.end = std::move(sw.end);
  const Dims& xd = c.dims(c.in(0));
  const Dims& yd = c.dims(c.out());
  for (size_t i = 0; i < ns; ++i) {
    if (!xd[2 + i].is_static() || !yd[2 + i].is_static())
      c.fail("the gradient of a sliding window needs static spatial dims, not " + c.in(0)->type().str());
    w.in.push_back(xd[2 + i].value());
    w.out.push_back(yd[2 + i].value());
  }
  return w;
}

Attrs window_attrs(const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                   const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  std::vector<int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  return {{"strides", Attribute::of_ints(strides)},
          {"dilations", Attribute::of_ints(dilations)},
          {"pads", Attribute::of_ints(pads)}};
}

// Swaps the batch and channel axes of a value of the given rank.
Value* swap01(GradContext& c, Value* x, size_t rank) { return swap_axes(c, x, rank, 0, 1); }

// The gradient of a convolution's weights W [K, C/G, kernel...] from its
// input `x` [N, C, in...] and the gradient `g` [N, K, out...] of its output
// (`out` the spatial dims of g), with w's strides, dilations and pads:
//   dw[k, c, r] = sum over n, o of x[n, c, o s - p + r d] g[n, k, o].
// Ungrouped: a convolution of x with g, batch and channel axes swapped
// (batch is its symbolic channel axis), stride d and dilation s, cut to the
// window's taps. Grouped, tap by tap: x_r is x (zero-padded) read at o s + r d,
// and dw[g, kg, cg, r] = sum over n, o of g[n, g, kg, o] x_r[n, g, cg, o], one
// batched product over the groups, [G, K/G, N*O] @ [G, N*O, C/G], per tap.
Value* weight_gradient(GradContext& c, Value* x, Value* g, const Window& w, const std::vector<int64_t>& out,
                       int64_t group, int64_t k, int64_t cg) {
  Emitter& e = c.e();
  size_t ns = w.kernel.size(), rank = ns + 2;
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < ns; ++i) spatial.push_back(static_cast<int64_t>(2 + i));
  if (group == 1) {
    Value* dw = e.op("Conv", {swap01(c, x, rank), swap01(c, g, rank)}, window_attrs(w.dilations, w.strides, w.begin, w.end));
    dw = e.op("Slice", {dw, e.ints(std::vector<int64_t>(ns, 0)), e.ints(w.kernel), e.ints(spatial)});
    return swap01(c, dw, rank);
  }
  int64_t kg = k / group;
  // Pads of every axis, begins then ends; the batch and channel axes get none.
  std::vector<int64_t> pads = {0, 0};
  pads.insert(pads.end(), w.begin.begin(), w.begin.end());
  pads.insert(pads.end(), {0, 0});
  pads.insert(pads.end(), w.end.begin(), w.end.end());
  Value* padded = e.op("Pad", {x, e.ints(pads)});
  Value* rows = e.op("Reshape", {g, e.ints({0, group, kg, -1})});
  rows = e.op("Reshape", {e.op("Transpose", {rows}, {{"perm", Attribute::of_ints({1, 2, 0, 3})}}), e.ints({group, kg, -1})});
  std::vector<Value*> taps;
  for (const std::vector<int64_t>& tap : all_indices(w.kernel)) {
    std::vector<int64_t> starts, stops;
    for (size_t i = 0; i < ns; ++i) {
      starts.push_back(tap[i] * w.dilations[i]);
      stops.push_back(starts.back() + (out[i] - 1) * w.strides[i] + 1);
    }
    Value* xr = e.op("Slice", {padded, e.ints(starts), e.ints(stops), e.ints(spatial), e.ints(w.strides)});
    xr = e.op("Reshape", {xr, e.ints({0, group, cg, -1})});
    xr = e.op("Reshape", {e.op("Transpose", {xr}, {{"perm", Attribute::of_ints({1, 0, 3, 2})}}), e.ints({group, -1, cg})});
    taps.push_back(e.unsqueeze(e.op("MatMul", {rows, xr}), {3}));
  }
  Value* all = taps.size() == 1 ? taps.front() : e.op("Concat", taps, int_attr("axis", 3));
  std::vector<int64_t> shape = {k, cg};
  shape.insert(shape.end(), w.kernel.begin(), w.kernel.end());
  return e.op("Reshape", {all, e.ints(shape)});
}

// The static kernel dims of a convolution's W (dims 2...), failing naming the node otherwise.
std::vector<int64_t> kernel_of(GradContext& c, const char* op) {
  const Dims& wd = c.dims(c.in(1));
  std::vector<int64_t> kernel;
  for (size_t i = 0; i < wd.size(); ++i) {
    if (!wd[i].is_static()) c.fail(std::string("the gradient of ") + op + " needs W's shape static");
    if (i >= 2) kernel.push_back(wd[i].value());
  }
  return kernel;
}

// The bias gradient of a convolution: g summed over every axis but the channel.
Value* bias_gradient(GradContext& c, size_t rank) {
  std::vector<int64_t> axes = {0};
  for (size_t i = 2; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  return c.e().reduce("ReduceSum", c.dy(), axes, false);
}

// y = conv(x, w) + b, stride s, dilation d, pads p (begin) and q (end) per spatial dim:
//   db = g summed over every axis but the channel;
//   dx = the transposed convolution of g with w. With stride 1 and pads no larger
//        than the window (d (k-1) >= p, q) that is a convolution of g with w's
//        taps reversed and its two channel axes swapped, pads d (k-1) - p and
//        d (k-1) - q; otherwise ConvTranspose, output_padding filling x's size;
//   dw = weight_gradient(x, g).
void conv_rule(GradContext& c) {
  Emitter& e = c.e();
  const Dims& wd = c.dims(c.in(1));
  std::vector<int64_t> kernel = kernel_of(c, "Conv");
  Window w = window_of(c, kernel);
  size_t ns = kernel.size(), rank = ns + 2;
  int64_t group = c.node().get_int("group", 1);
  Value* g = c.dy();
  if (c.wants(2)) c.set(2, bias_gradient(c, rank));
  if (c.wants(0)) {
    bool as_conv = true;
    std::vector<int64_t> begin, end, reversed_starts, reversed_ends, reversed_steps, spatial;
    for (size_t i = 0; i < ns; ++i) {
      int64_t reach = w.extent(i) - 1;
      as_conv = as_conv && w.strides[i] == 1 && w.begin[i] <= reach && w.end[i] <= reach;
      begin.push_back(reach - w.begin[i]);
      end.push_back(reach - w.end[i]);
      reversed_starts.push_back(-1);
      reversed_ends.push_back(std::numeric_limits<int64_t>::min());
      reversed_steps.push_back(-1);
      spatial.push_back(static_cast<int64_t>(2 + i));
    }
    if (as_conv) {
      // w [K, C/G, taps] -> per group [C/G, K/G, taps reversed] -> [C, K/G, taps].
      int64_t k = wd[0].value(), cg = wd[1].value();
      Value* wt = e.op("Slice", {c.in(1), e.ints(reversed_starts), e.ints(reversed_ends), e.ints(spatial),
                                 e.ints(reversed_steps)});
      std::vector<int64_t> grouped = {group, k / group, cg};
      grouped.insert(grouped.end(), kernel.begin(), kernel.end());
      std::vector<int64_t> perm(rank + 1);
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[1], perm[2]);
      std::vector<int64_t> merged = {group * cg, k / group};
      merged.insert(merged.end(), kernel.begin(), kernel.end());
      wt = e.op("Reshape", {e.op("Transpose", {e.op("Reshape", {wt, e.ints(grouped)})},
                                 {{"perm", Attribute::of_ints(perm)}}),
                            e.ints(merged)});
      Attrs attrs = window_attrs(std::vector<int64_t>(ns, 1), w.dilations, begin, end);
      attrs["group"] = Attribute::of_int(group);
      c.set(0, e.op("Conv", {g, wt}, std::move(attrs)));
    } else {
      std::vector<int64_t> output_padding;
      for (size_t i = 0; i < ns; ++i)
        output_padding.push_back(w.in[i] - ((w.out[i] - 1) * w.strides[i] + w.extent(i) - w.begin[i] - w.end[i]));
      Attrs attrs = window_attrs(w.strides, w.dilations, w.begin, w.end);
      attrs["group"] = Attribute::of_int(group);
      attrs["output_padding"] = Attribute::of_ints(output_padding);
      c.set(0, e.op("ConvTranspose", {g, c.in(1)}, std::move(attrs)));
    }
  }
  if (c.wants(1)) c.set(1, weight_gradient(c, c.in(0), g, w, w.out, group, wd[0].value(), wd[1].value()));
}

// y = conv_transpose(x, w) + b, w [C, K/G, kernel...], explicit pads:
//   dx = the convolution of g with w, same strides, dilations, pads and groups
//        (y's size was chosen so that it comes back to x's);
//   dw = weight_gradient with the roles swapped: g is the input, x the gradient;
//   db = g summed over every axis but the channel.
void conv_transpose_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.has_attr("output_shape")) c.fail("tcc differentiates ConvTranspose with explicit pads, not output_shape");
  const Dims& wd = c.dims(c.in(1));
  std::vector<int64_t> kernel = kernel_of(c, "ConvTranspose");
  Window w = window_of(c, kernel);
  size_t rank = kernel.size() + 2;
  int64_t group = n.get_int("group", 1);
  if (c.wants(2)) c.set(2, bias_gradient(c, rank));
  if (c.wants(0)) {
    Attrs attrs = window_attrs(w.strides, w.dilations, w.begin, w.end);
    attrs["group"] = Attribute::of_int(group);
    c.set(0, c.e().op("Conv", {c.dy(), c.in(1)}, std::move(attrs)));
  }
  if (c.wants(1)) c.set(1, weight_gradient(c, c.dy(), c.in(0), w, w.in, group, wd[0].value(), wd[1].value()));
}

// MaxPool: g goes to the element each window took. The pool runs again with its
// Indices output (flat positions in x) and g is added there, so windows that
// overlap add up where they took the same element.
void max_pool_rule(GradContext& c) {
  if (c.node().opset() < 16) c.fail("the gradient of MaxPool uses ScatterElements' reduction, which needs opset 16");
  Emitter& e = c.e();
  Attrs attrs = c.node().attrs();
  attrs.erase("storage_order");
  std::vector<Value*> yi = e.op_n("MaxPool", {c.in(0)}, 2, std::move(attrs));
  Value* flat = e.ints({-1});
  Value* zeros = e.op("Reshape", {e.zeros_like(c.in(0), c.dtype()), flat});
  Attrs scatter{{"axis", Attribute::of_int(0)}, {"reduction", Attribute::of_string("add")}};
  Value* dx = e.op("ScatterElements", {zeros, e.op("Reshape", {yi[1], flat}), e.op("Reshape", {c.dy(), flat})},
                   std::move(scatter));
  c.set(0, e.op("Reshape", {dx, e.shape_of(c.in(0))}));
}

// Each window's value of v (shaped like the pool's output) added back to every
// tap of the window: a transposed convolution with a kernel of ones per
// channel (group = C).
Value* spread_over_windows(GradContext& c, const Window& w, Value* v) {
  const Dim& channels = c.dims(c.in(0))[1];
  if (!channels.is_static())
    c.fail("the gradient of " + c.node().op_type() + " needs static channels, not " + channels.str());
  Emitter& e = c.e();
  std::vector<int64_t> output_padding, weights = {channels.value(), 1};
  weights.insert(weights.end(), w.kernel.begin(), w.kernel.end());
  for (size_t i = 0; i < w.kernel.size(); ++i)
    output_padding.push_back(w.in[i] - ((w.out[i] - 1) * w.strides[i] + w.extent(i) - w.begin[i] - w.end[i]));
  Attrs attrs = window_attrs(w.strides, w.dilations, w.begin, w.end);
  attrs["group"] = Attribute::of_int(channels.value());
  attrs["output_padding"] = Attribute::of_ints(output_padding);
  return e.op("ConvTranspose", {v, e.op("Expand", {scalar(c, 1.0), e.ints(weights)})}, std::move(attrs));
}

// AveragePool: g / divisor spread back over each window. The divisor
// is the window's size with count_include_pad, else the number of its taps
// inside x: a convolution of ones over x's extent.
void average_pool_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.get_int("ceil_mode", 0) != 0) c.fail("tcc differentiates AveragePool without ceil_mode only");
  std::vector<int64_t> kernel = n.get_ints("kernel_shape");
  Window w = window_of(c, kernel);
  Emitter& e = c.e();
  auto ones = [&](std::vector<int64_t> shape) { return e.op("Expand", {scalar(c, 1.0), e.ints(shape)}); };
  std::vector<int64_t> plane = {1, 1}, taps = {1, 1};
  plane.insert(plane.end(), w.in.begin(), w.in.end());
  taps.insert(taps.end(), kernel.begin(), kernel.end());
  Value* divisor;
  if (n.get_int("count_include_pad", 0) != 0) {
    int64_t size = 1;
    for (int64_t k : kernel) size *= k;
    divisor = scalar(c, static_cast<double>(size));
  } else {
    divisor = e.op("Conv", {ones(plane), ones(taps)}, window_attrs(w.strides, w.dilations, w.begin, w.end));
  }
  c.set(0, spread_over_windows(c, w, e.op("Div", {c.dy(), divisor})));
}

// LpPool, y = (sum over the window of |x|^p)^(1/p): dx = |x|^(p-1) sign(x)
// times the windows' g y^(1-p) spread back over them (0 where y is 0).
void lp_pool_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.get_int("ceil_mode", 0) != 0) c.fail("tcc differentiates LpPool without ceil_mode only");
  Window w = window_of(c, n.get_ints("kernel_shape"));
  double p = static_cast<double>(n.get_int("p", 2));
  Emitter& e = c.e();
  Value* zero = scalar(c, 0.0);
  Value* per_window = e.op("Where", {e.op("Equal", {c.out(), zero}), zero,
                                     mul(c, c.dy(), e.op("Pow", {c.out(), scalar(c, 1.0 - p)}))});
  Value* slope = p == 2 ? c.in(0)
                        : mul(c, e.op("Pow", {e.op("Abs", {c.in(0)}), scalar(c, p - 1.0)}), e.op("Sign", {c.in(0)}));
  c.set(0, mul(c, slope, spread_over_windows(c, w, per_window)));
}

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

// ---- movement

// Reshape, Flatten, Squeeze, Unsqueeze: g reshaped to x's shape
void reshape_rule(GradContext& c) { c.set(0, c.e().op("Reshape", {c.dy(), c.e().shape_of(c.in(0))})); }

// d transpose(x, perm) = transpose(g, perm^-1)
void transpose_rule(GradContext& c) {
  size_t rank = c.dims(c.in(0)).size();
  std::vector<int64_t> perm = c.node().get_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  std::vector<int64_t> inv(rank);
  for (size_t i = 0; i < rank; ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  c.set(0, c.e().op("Transpose", {c.dy()}, {{"perm", Attribute::of_ints(inv)}}));
}

// d concat = g split along the axis at the inputs' sizes (read at run time,
// so symbolic sizes work)
void concat_rule(GradContext& c) {
  Emitter& e = c.e();
  size_t rank = c.dims(c.out()).size();
  int64_t axis = c.axis(c.node().get_int("axis", 0), rank);
  std::vector<Value*> sizes;
  for (Value* x : c.node().inputs()) {
    Value* s = e.shape_of(x);
    sizes.push_back(e.op("Slice", {s, e.ints({axis}), e.ints({axis + 1})}));
  }
  Value* split = sizes.size() == 1 ? sizes.front() : e.op("Concat", sizes, int_attr("axis", 0));
  std::vector<Value*> parts = e.op_n("Split", {c.dy(), split}, c.node().num_inputs(), int_attr("axis", axis));
  for (size_t i = 0; i < parts.size(); ++i)
    if (c.wants(i)) c.set(i, parts[i]);
}

// d split = concat of the outputs' gradients (zeros for an unused output)
void split_rule(GradContext& c) {
  Emitter& e = c.e();
  int64_t axis = c.node().get_int("axis", 0);
  std::vector<Value*> parts;
  for (size_t i = 0; i < c.node().num_outputs(); ++i)
    parts.push_back(c.dy(i) ? c.dy(i) : e.zeros_like(c.out(i), c.dtype()));
  c.set(0, e.op("Concat", parts, int_attr("axis", axis)));
}

// d slice = g padded with zeros back to x's shape. Needs constant starts,
// ends and axes, unit steps, and static sizes on the sliced axes (the padding
// is computed here).
void slice_rule(GradContext& c) {
  const Node& n = c.node();
  const Dims& xd = c.dims(c.in(0));
  std::vector<int64_t> starts = c.const_ints(1, "Slice's starts"), ends = c.const_ints(2, "Slice's ends");
  std::vector<int64_t> axes;
  if (n.has_input(3)) {
    axes = c.const_ints(3, "Slice's axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (n.has_input(4))
    for (int64_t s : c.const_ints(4, "Slice's steps"))
      if (s != 1) c.fail("tcc differentiates Slice only with unit steps, got step " + std::to_string(s));
  size_t rank = xd.size();
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = c.axis(axes[i], rank);
    const Dim& d = xd[static_cast<size_t>(a)];
    if (!d.is_static())
      c.fail("the gradient of Slice needs a static size on sliced axis " + std::to_string(a) + ", got " + d.str());
    int64_t size = d.value();
    auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + size : v, int64_t{0}, size); };
    int64_t s = clamp(starts[i]), t = std::max(clamp(ends[i]), s);
    pads[static_cast<size_t>(a)] = s;
    pads[rank + static_cast<size_t>(a)] = size - t;
  }
  c.set(0, c.e().op("Pad", {c.dy(), c.e().ints(pads)}));
}

// d gather(x, idx, axis) = ScatterElements(zeros, idx', g', axis, add), with
// the index axes of g flattened into one (g' has x's rank) and idx' the
// flattened indices broadcast along g'. Adding, rather than assigning, makes
// repeated indices accumulate. Needs opset 16 (Scatter's reduction).
void gather_rule(GradContext& c) {
  if (c.node().opset() < 16) c.fail("the gradient of Gather uses ScatterElements' reduction, which needs opset 16");
  Emitter& e = c.e();
  Value* x = c.in(0);
  size_t rank = c.dims(x).size();
  int64_t axis = c.axis(c.node().get_int("axis", 0), rank);
  Value* xs = e.shape_of(x);
  Value* before = e.op("Slice", {xs, e.ints({0}), e.ints({axis})});
  Value* after = e.op("Slice", {xs, e.ints({axis + 1}), e.ints({static_cast<int64_t>(rank)})});
  Value* g_shape = e.op("Concat", {before, e.ints({-1}), after}, int_attr("axis", 0));
  Value* g = e.op("Reshape", {c.dy(), g_shape});
  Value* idx = e.op("Reshape", {c.in(1), e.ints({-1})});
  std::vector<int64_t> other_axes;
  for (int64_t i = 0; i < static_cast<int64_t>(rank); ++i)
    if (i != axis) other_axes.push_back(i);
  if (!other_axes.empty()) idx = e.unsqueeze(idx, other_axes);
  idx = e.op("Expand", {idx, e.shape_of(g)});
  Attrs attrs{{"axis", Attribute::of_int(axis)}, {"reduction", Attribute::of_string("add")}};
  c.set(0, e.op("ScatterElements", {e.zeros_like(x, c.dtype()), idx, g}, std::move(attrs)));
}

// Pad with a constant: g cut back to x, dropping what the pads added.
void pad_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.get_string("mode", "constant") != "constant")
    c.fail("tcc differentiates constant Pad only, not mode " + n.get_string("mode", ""));
  if (c.wants(2)) c.fail("tcc differentiates Pad in its input only; the pad value depends on a parameter");
  size_t rank = c.dims(c.in(0)).size();
  std::vector<int64_t> pads = n.opset() < 11 ? n.get_ints("pads") : c.const_ints(1, "Pad's pads");
  std::vector<int64_t> axes;
  if (n.opset() >= 18 && n.has_input(3)) {
    for (int64_t a : c.const_ints(3, "Pad's axes")) axes.push_back(c.axis(a, rank));
  } else {
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) c.fail("Pad's pads do not give a begin and an end per axis");
  std::vector<int64_t> starts, ends;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t begin = pads[i], end = pads[axes.size() + i];
    if (begin < 0 || end < 0) c.fail("tcc differentiates Pad with non-negative pads only");
    starts.push_back(begin);
    ends.push_back(end > 0 ? -end : std::numeric_limits<int64_t>::max());
  }
  c.set(0, c.e().op("Slice", {c.dy(), c.e().ints(starts), c.e().ints(ends), c.e().ints(axes)}));
}

// Tile: the copies of g summed, with g seen as [r0, d0, r1, d1, ...]
void tile_rule(GradContext& c) {
  if (c.wants(1)) c.fail("Tile's repeats have no gradient");
  const Dims& xd = c.dims(c.in(0));
  std::vector<int64_t> repeats = c.const_ints(1, "Tile's repeats"), split, copies;
  for (size_t i = 0; i < xd.size(); ++i) {
    if (!xd[i].is_static()) c.fail("the gradient of Tile needs static input dims, got " + c.in(0)->type().str());
    split.push_back(repeats.at(i));
    split.push_back(xd[i].value());
    copies.push_back(static_cast<int64_t>(2 * i));
  }
  Value* parts = c.e().op("Reshape", {c.dy(), c.e().ints(split)});
  c.set(0, c.e().reduce("ReduceSum", parts, copies, false));
}

// CumSum: the cumulative sum of g the other way
void cum_sum_rule(GradContext& c) {
  Attrs attrs{{"reverse", Attribute::of_int(1 - c.node().get_int("reverse", 0))},
              {"exclusive", Attribute::of_int(c.node().get_int("exclusive", 0))}};
  c.set(0, c.e().op("CumSum", {c.dy(), c.in(1)}, std::move(attrs)));
}

// Trilu: g with the same triangle kept
void trilu_rule(GradContext& c) {
  std::vector<Value*> ins = {c.dy()};
  if (c.node().num_inputs() > 1 && c.in(1)) ins.push_back(c.in(1));
  c.set(0, c.e().op("Trilu", ins, int_attr("upper", c.node().get_int("upper", 1))));
}

// DepthToSpace (DCR) and SpaceToDepth undo each other.
void depth_to_space_rule(GradContext& c) {
  if (c.node().get_string("mode", "DCR") != "DCR") c.fail("tcc differentiates DepthToSpace in DCR mode only");
  c.set(0, c.e().op("SpaceToDepth", {c.dy()}, int_attr("blocksize", c.node().get_int("blocksize", 1))));
}
void space_to_depth_rule(GradContext& c) {
  Attrs attrs{{"blocksize", Attribute::of_int(c.node().get_int("blocksize", 1))}, {"mode", Attribute::of_string("DCR")}};
  c.set(0, c.e().op("DepthToSpace", {c.dy()}, std::move(attrs)));
}

// GatherElements: g added into zeros where each element came from
// (ScatterElements, reduction add); GatherND (batch_dims 0): the same with ScatterND.
void gather_elements_rule(GradContext& c) {
  if (c.node().opset() < 16)
    c.fail("the gradient of " + c.node().op_type() + " uses a scatter's reduction, which needs opset 16");
  bool nd = c.node().op_type() == "GatherND";
  if (nd && c.node().get_int("batch_dims", 0) != 0) c.fail("tcc differentiates GatherND with batch_dims 0 only");
  Attrs attrs{{"reduction", Attribute::of_string("add")}};
  if (!nd) attrs["axis"] = Attribute::of_int(c.node().get_int("axis", 0));
  Value* zeros = c.e().zeros_like(c.in(0), c.dtype());
  c.set(0, c.e().op(nd ? "ScatterND" : "ScatterElements", {zeros, c.in(1), c.dy()}, std::move(attrs)));
}

// ScatterElements, ScatterND: y is data with each update combined, in turn,
// into the element (or slice) its index names by the reduction. Gathering at
// the indices reads, per update, the value of y (or g) where it landed.
//   none: data's gradient is g where no update landed (a scatter of zeros into
//     g), the updates' g gathered (ONNX leaves repeated indices undefined);
//   add: g, and g gathered;
//   mul: each element of y is the product of data's element and the updates
//     landing there: each factor's gradient is g times the product of the
//     others (product_of_others, exact at zeros), with the nonzero factors'
//     product and the zeros' count per element scattered by mul and add;
//   max, min: g to the factors equal to y, split evenly among those ties (as
//     torch.scatter_reduce's amax and amin, and Max and Min here), the ties
//     per element counted by a scatter add.
void scatter_rule(GradContext& c) {
  std::string reduction = c.node().get_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    c.fail("tcc differentiates " + c.node().op_type() + " with reduction none, add, mul, max or min, not " + reduction);
  bool nd = c.node().op_type() == "ScatterND";
  Emitter& e = c.e();
  Attrs axis;
  if (!nd) axis["axis"] = Attribute::of_int(c.node().get_int("axis", 0));
  auto scatter = [&](Value* into, Value* updates, const std::string& how) {
    Attrs attrs = axis;
    if (how != "none") attrs["reduction"] = Attribute::of_string(how);
    return e.op(nd ? "ScatterND" : "ScatterElements", {into, c.in(1), updates}, std::move(attrs));
  };
  auto gather = [&](Value* v) { return e.op(nd ? "GatherND" : "GatherElements", {v, c.in(1)}, axis); };
  Value* g = c.dy();
  if (reduction == "none" || reduction == "add") {
    if (c.wants(0)) c.set(0, reduction == "add" ? g : scatter(g, e.zeros_like(c.in(2), c.dtype()), "none"));
    if (c.wants(2)) c.set(2, gather(g));
  } else if (reduction == "mul") {
    Factors data = factors_of(c, c.in(0)), updates = factors_of(c, c.in(2));
    Value* nonzero_product = scatter(data.safe, updates.safe, "mul");
    Value* zeros = scatter(as_dtype(c, data.is_zero), as_dtype(c, updates.is_zero), "add");
    if (c.wants(0)) c.set(0, mul(c, g, product_of_others(c, data, nonzero_product, zeros)));
    if (c.wants(2))
      c.set(2, mul(c, gather(g), product_of_others(c, updates, gather(nonzero_product), gather(zeros))));
  } else {
    Value* data_hit = as_dtype(c, e.op("Equal", {c.in(0), c.out()}));
    Value* update_hit = as_dtype(c, e.op("Equal", {c.in(2), gather(c.out())}));
    Value* share = e.op("Div", {g, scatter(data_hit, update_hit, "add")});
    if (c.wants(0)) c.set(0, mul(c, share, data_hit));
    if (c.wants(2)) c.set(2, mul(c, gather(share), update_hit));
  }
}

// Compress: g scattered back to the kept positions, the indices of the
// condition's true entries within x's extent (a longer condition's tail keeps
// nothing); every other element gets 0. Without an axis, over x flattened.
void compress_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  bool along_axis = c.node().has_attr("axis");
  size_t rank = c.dims(x).size();
  int64_t axis = along_axis ? c.axis(c.node().get_int("axis", 0), rank) : 0;
  Value* extent = along_axis ? e.op("Gather", {e.shape_of(x), e.ints({axis})})
                             : e.op("Reshape", {e.op("Size", {x}), e.ints({1})});
  Value* kept = e.op("Slice", {c.in(1), e.ints({0}), extent});
  Value* positions = e.op("Reshape", {e.op("NonZero", {kept}), e.ints({-1})});
  if (!along_axis) {
    Value* flat = e.op("Reshape", {e.zeros_like(x, c.dtype()), e.ints({-1})});
    return c.set(0, e.op("Reshape", {scatter_back(c, flat, positions, c.dy(), 0), e.shape_of(x)}));
  }
  std::vector<int64_t> along(rank, 1);
  along[static_cast<size_t>(axis)] = -1;
  Value* index = e.op("Expand", {e.op("Reshape", {positions, e.ints(along)}), e.shape_of(c.dy())});
  c.set(0, scatter_back(c, e.zeros_like(x, c.dtype()), index, c.dy(), axis));
}

// Writes each "..." of an Einsum's terms and output in letters the equation
// does not use: the output's covers the operands' broadcast dims, right-aligned
// as they are. An operand's dim of static size 1 under "..." that is broadcast
// against a larger one gets a letter of its own, which the einsums of the
// gradient then sum over (its size is 1) as they do over any label of one operand.
void spell_out_ellipses(GradContext& c, std::vector<std::string>& terms, std::string& out) {
  std::string unused;
  for (char l : std::string("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if (out.find(l) == std::string::npos &&
        std::none_of(terms.begin(), terms.end(), [l](const std::string& t) { return t.find(l) != std::string::npos; }))
      unused += l;
  auto take = [&] {
    if (unused.empty()) c.fail("tcc cannot spell out this Einsum's '...' in letters the equation leaves unused");
    char l = unused.back();
    unused.pop_back();
    return l;
  };
  // Where each term's "..." starts and how many dims it covers; the output's covers the most.
  std::vector<size_t> at(terms.size()), covered(terms.size(), 0);
  size_t longest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    at[i] = terms[i].find("...");
    if (at[i] == std::string::npos) continue;
    covered[i] = c.dims(c.in(i)).size() - (terms[i].size() - 3);
    longest = std::max(longest, covered[i]);
  }
  auto is_one = [&](size_t i, size_t k) {
    const Dim& d = c.dims(c.in(i))[at[i] + k];
    return d.is_static() && d.value() == 1;
  };
  // Whether dim j of the output's "..." is broadcast beyond 1 (a symbolic dim is taken as not 1).
  std::vector<bool> wide(longest, false);
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t k = 0; k < covered[i]; ++k)
      if (!is_one(i, k)) wide[longest - covered[i] + k] = true;
  std::string shared;
  for (size_t j = 0; j < longest; ++j) shared += take();
  for (size_t i = 0; i < terms.size(); ++i) {
    if (at[i] == std::string::npos) continue;
    std::string letters;
    for (size_t k = 0; k < covered[i]; ++k) {
      size_t j = longest - covered[i] + k;
      letters += wide[j] && is_one(i, k) ? take() : shared[j];
    }
    terms[i].replace(at[i], 3, letters);
  }
  if (size_t at = out.find("..."); at != std::string::npos) out.replace(at, 3, shared);
}

// d, the gradient of x's diagonal along `term`'s repeated labels (x read with
// each label once, at its first occurrence: "iij" reads x[i, i, j] as d[i, j]),
// put back on that diagonal: d with axes inserted at the repeated occurrences,
// where each repeated occurrence's index equals its first's, 0 elsewhere.
Value* onto_diagonal(GradContext& c, Value* d, const std::string& term, Value* x) {
  Emitter& e = c.e();
  int64_t rank = static_cast<int64_t>(term.size());
  Value* xs = e.shape_of(x);
  // 0, 1, ... along `axis` (of `rank`), as many as x's dim `first`.
  auto along = [&](int64_t axis, int64_t first) {
    Value* count = e.op("Gather", {xs, e.scalar(static_cast<double>(first), DType::I64)});
    Value* range = e.op("Range", {e.scalar(0, DType::I64), count, e.scalar(1, DType::I64)});
    std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
    shape[static_cast<size_t>(axis)] = -1;
    return e.op("Reshape", {range, e.ints(shape)});
  };
  std::vector<int64_t> repeated;
  Value* on = nullptr;
  for (int64_t a = 0; a < rank; ++a) {
    int64_t first = static_cast<int64_t>(term.find(term[static_cast<size_t>(a)]));
    if (first == a) continue;
    repeated.push_back(a);
    Value* same = e.op("Equal", {along(first, first), along(a, first)});
    on = on ? e.op("And", {on, same}) : same;
  }
  return e.op("Where", {on, e.unsqueeze(d, repeated), scalar(c, 0.0)});
}

// Einsum: operand i's gradient is the einsum of g with the other operands
// into operand i's labels ("ab,bc->ac": dA = "ac,bc->ab"). Labels only operand
// i has were summed away: the einsum leaves them out and g is broadcast back
// along them. "..." is first written out in letters (spell_out_ellipses). An
// operand with a label repeated reads its diagonal ("ii->i"): the gradient is
// that of the diagonal, each label once, put back on it (onto_diagonal).
void einsum_rule(GradContext& c) {
  std::string eq;
  for (char ch : c.node().get_string("equation", ""))
    if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  bool ellipsis = lhs.find("...") != std::string::npos;
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    // Implicit output: "..." first, then the letters that appear once, sorted.
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char l : t)
        if (l != '.') ++count[l];
    if (ellipsis) out = "...";
    for (auto [l, n] : count)
      if (n == 1) out += l;
  }
  if (ellipsis) spell_out_ellipses(c, terms, out);
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!c.wants(i)) continue;
    std::string others = out, labels, kept;  // labels: operand i's, each once
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) others += terms[j];
    std::vector<int64_t> summed, firsts;  // firsts: where each label first occurs
    for (size_t a = 0; a < terms[i].size(); ++a) {
      char l = terms[i][a];
      if (labels.find(l) != std::string::npos) continue;
      if (others.find(l) == std::string::npos) summed.push_back(static_cast<int64_t>(labels.size()));
      else kept += l;
      labels += l;
      firsts.push_back(static_cast<int64_t>(a));
    }
    bool diagonal = labels.size() < terms[i].size();
    std::vector<Value*> ins = {c.dy()};
    std::string sub = out;
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) {
        ins.push_back(c.in(j));
        sub += "," + terms[j];
      }
    Value* d = c.e().op("Einsum", ins, {{"equation", Attribute::of_string(sub + "->" + kept)}});
    if (!summed.empty()) {
      Value* shape = c.e().shape_of(c.in(i));
      if (diagonal) shape = c.e().op("Gather", {shape, c.e().ints(firsts)});
      d = c.e().op("Expand", {c.e().unsqueeze(d, summed), shape});
    }
    c.set(i, diagonal ? onto_diagonal(c, d, terms[i], c.in(i)) : d);
  }
}

// Where output coordinate y of a resized axis reads the input (src/ops/nn.cc's
// source coordinate for each coordinate_transformation_mode); `outside` is set
// where tf_crop_and_resize extrapolates.
double resize_source(GradContext& c, const std::string& mode, double y, double scale, int64_t in, int64_t out,
                     double roi_begin, double roi_end, bool& outside) {
  double in_f = static_cast<double>(in), out_f = scale * in_f;
  outside = false;
  if (mode == "half_pixel") return (y + 0.5) / scale - 0.5;
  if (mode == "asymmetric") return y / scale;
  if (mode == "align_corners") return out_f == 1 ? 0.0 : y * (in_f - 1) / (out_f - 1);
  if (mode == "pytorch_half_pixel") return out_f == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") return in_f / 2 * (1 - static_cast<double>(out) / out_f) + (y + 0.5) / scale - 0.5;
  if (mode != "tf_crop_and_resize") c.fail("tcc does not differentiate Resize with coordinate_transformation_mode " + mode);
  double x = out_f == 1 ? (roi_end - roi_begin) * (in_f - 1) / 2 : y * (roi_end - roi_begin) * (in_f - 1) / (out_f - 1);
  x += roi_begin * (in_f - 1);
  outside = x < 0 || x > in_f - 1;
  return x;
}

// W^T applied to g along `axis` (of `rank`), W [out, in] given row-major, as a
// constant: g @ W on the last axis, W^T @ g with the axis moved second to last
// on the others (so the two axes of an [N, C, H, W] image move nothing).
Value* transpose_apply(GradContext& c, Value* g, size_t rank, size_t axis, const std::vector<double>& w, int64_t out,
                       int64_t in) {
  bool last = axis + 1 == rank;
  Tensor t(c.dtype(), last ? std::vector<int64_t>{out, in} : std::vector<int64_t>{in, out});
  for (int64_t y = 0; y < out; ++y)
    for (int64_t i = 0; i < in; ++i) t.set_f64(last ? y * in + i : i * out + y, w[static_cast<size_t>(y * in + i)]);
  Value* matrix = c.e().op("Constant", {}, {{"value", Attribute::of_tensor(std::move(t))}});
  if (last) return c.e().op("MatMul", {g, matrix});
  size_t to = rank - 2;
  if (axis == to) return c.e().op("MatMul", {matrix, g});
  return swap_axes(c, c.e().op("MatMul", {matrix, swap_axes(c, g, rank, axis, to)}), rank, axis, to);
}

// Whether W [out, in] copies each input to a block of out / in outputs in
// turn (nearest by a whole factor, in the modes that round o / s down): its
// factor then, else 0.
int64_t block_factor(const std::vector<double>& w, int64_t out, int64_t in) {
  if (out % in != 0) return 0;
  int64_t s = out / in;
  for (int64_t y = 0; y < out; ++y)
    for (int64_t i = 0; i < in; ++i)
      if (w[static_cast<size_t>(y * in + i)] != (i == y / s ? 1.0 : 0.0)) return 0;
  return s;
}

// Resize: separable, one axis after another, each output a weighted sum of
// the inputs along the axis, y = W x with W [out, in] built here as the
// interpreter weighs, around the source coordinate x = base + ratio: nearest
// puts 1 on the tap nearest_mode rounds x to; linear and cubic weigh the
// triangle filter's two taps or the cubic's four, with cubic_coeff_a, and
// antialias widens the filter by 1 / scale when downsampling, over more taps,
// and renormalizes them; exclude_outside drops (and renormalizes) the taps
// past an edge, the others read the edge; an extrapolated output reads
// nothing. So dx is W^T applied to g along each resized axis in turn, a
// constant in a MatMul. Where W copies each input to a block of s outputs
// (nearest by whole factors in the default modes), g is rather summed over its
// blocks, seen as [.., x_i, s_i, ..]: a reduction, not a product with a matrix
// of mostly zeros; that needs static dims after the first such axis.
void resize_rule(GradContext& c) {
  const Node& n = c.node();
  const Dims &xd = c.dims(c.in(0)), &yd = c.dims(c.out());
  size_t rank = xd.size();
  std::string mode = n.get_string("coordinate_transformation_mode", "half_pixel");
  std::string kind = n.get_string("mode", "nearest"), nearest_mode = n.get_string("nearest_mode", "round_prefer_floor");
  if (kind != "nearest" && kind != "linear" && kind != "cubic")
    c.fail("tcc differentiates Resize in nearest, linear and cubic mode, not in mode " + kind);
  bool nearest = kind == "nearest", cubic = kind == "cubic";
  if (nearest && nearest_mode != "round_prefer_floor" && nearest_mode != "round_prefer_ceil" &&
      nearest_mode != "floor" && nearest_mode != "ceil")
    c.fail("tcc does not differentiate Resize with nearest_mode " + nearest_mode);
  bool antialias = n.get_int("antialias", 0) != 0 && !nearest, exclude_outside = n.get_int("exclude_outside", 0) != 0;
  double cubic_a = n.get_float("cubic_coeff_a", -0.75f), reach = nearest ? 0.5 : cubic ? 2 : 1;  // the filter's half-width
  // Tap i's weight (the taps at base + i) for x = base + ratio, with the filter widened by 1 / s.
  auto weight = [&](int64_t i, double ratio, double s) {
    if (nearest) {
      bool up = ratio == 1 || nearest_mode == "ceil" || (nearest_mode == "round_prefer_floor" && ratio > 0.5) ||
                (nearest_mode == "round_prefer_ceil" && ratio >= 0.5);
      return i == (up ? 1 : 0) ? 1.0 : 0.0;
    }
    double d = std::fabs((static_cast<double>(i) - ratio) * s);
    if (!cubic) return std::clamp(1 - d, 0.0, 1.0);
    if (d <= 1) return ((cubic_a + 2) * d - (cubic_a + 3)) * d * d + 1;
    return d < 2 ? ((cubic_a * d - 5 * cubic_a) * d + 8 * cubic_a) * d - 4 * cubic_a : 0.0;
  };
  std::vector<int64_t> axes = n.get_ints("axes");
  if (axes.empty())
    for (size_t a = 0; a < rank; ++a) axes.push_back(static_cast<int64_t>(a));
  for (int64_t& a : axes) a = c.axis(a, rank);
  auto dim = [&](const Dims& d, int64_t a) {
    if (!d[static_cast<size_t>(a)].is_static())
      c.fail("the gradient of Resize needs static resized dims, got " + c.in(0)->type().str() + " to " +
             c.out()->type().str());
    return d[static_cast<size_t>(a)].value();
  };
  // Whether axis a keeps its dim (a symbolic batch, say), which it then need not know.
  auto kept = [&](int64_t a) {
    const Dim &x = xd[static_cast<size_t>(a)], &y = yd[static_cast<size_t>(a)];
    return !x.is_unknown() && !y.is_unknown() && x.expr() == y.expr();
  };
  // Whether optional input i is given: present and not empty (exporters pass empty scales next to sizes).
  auto present = [&](size_t i) {
    if (!n.has_input(i)) return false;
    const Dims& d = c.dims(c.in(i));
    return !(d.size() == 1 && d[0].is_static() && d[0].value() == 0);
  };
  // A given input's value, which must then be a constant.
  auto given = [&](size_t i, const std::string& what) -> const Tensor* {
    if (!present(i)) return nullptr;
    const Tensor* t = c.constant(i);
    if (!t) c.fail("the gradient of Resize needs its " + what + " to be a constant");
    return t->numel() > 0 ? t : nullptr;
  };
  std::vector<double> scale(rank, 1.0), roi_begin(rank, 0.0), roi_end(rank, 1.0);
  std::string policy = n.get_string("keep_aspect_ratio_policy", "stretch");
  if (present(3) && policy == "stretch") {
    // y's dims are the sizes, which need not be a constant then (a symbolic batch's, say).
    for (int64_t a : axes)
      if (!kept(a)) scale[a] = static_cast<double>(dim(yd, a)) / static_cast<double>(dim(xd, a));
  } else if (const Tensor* sizes = given(3, "sizes")) {
    for (size_t i = 0; i < axes.size(); ++i)
      scale[axes[i]] = static_cast<double>(sizes->get_i64(i)) / static_cast<double>(dim(xd, axes[i]));
    double s = scale[axes[0]];
    for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, scale[a]) : std::max(s, scale[a]);
    for (int64_t a : axes) scale[a] = s;
  } else if (const Tensor* scales = given(2, "scales")) {
    for (size_t i = 0; i < axes.size(); ++i) scale[axes[i]] = scales->get_f64(i);
  }
  bool crop = mode == "tf_crop_and_resize";
  if (const Tensor* roi = crop ? given(1, "roi") : nullptr)
    for (size_t i = 0; i < axes.size(); ++i) {
      roi_begin[axes[i]] = roi->get_f64(i);
      roi_end[axes[i]] = roi->get_f64(axes.size() + i);
    }
  std::vector<int64_t> factor(rank, 0);  // per axis, its block_factor
  std::vector<std::pair<int64_t, std::vector<double>>> matrices;  // per resized axis, W
  for (int64_t a : axes) {
    bool whole_roi = roi_begin[a] == 0 && roi_end[a] == 1;
    if (std::fabs(scale[a] - 1) < 1e-9 && kept(a) && whole_roi) continue;  // the interpreter copies such an axis
    int64_t in = dim(xd, a), out = dim(yd, a);
    std::vector<double> weights(static_cast<size_t>(out * in), 0.0);  // [out, in]
    double s = antialias ? std::min(scale[a], 1.0) : 1.0;
    int64_t first = static_cast<int64_t>(std::floor(-reach / s)) + 1;  // the taps are base + first ... base + 1 - first
    for (int64_t y = 0; y < out; ++y) {
      bool outside = false;
      double x = resize_source(c, mode, static_cast<double>(y), scale[a], in, out, roi_begin[a], roi_end[a], outside);
      if (outside) continue;
      double base = std::ceil(x) - 1, ratio = x - base, sum = 0;
      std::vector<double> tap;
      for (int64_t i = first; i < 2 - first; ++i) {
        int64_t at = static_cast<int64_t>(base) + i;
        bool dropped = exclude_outside && (at < 0 || at >= in);
        tap.push_back(dropped ? 0.0 : weight(i, ratio, s));
        sum += tap.back();
      }
      bool normalized = (antialias || exclude_outside) && sum != 0;
      for (int64_t i = first; i < 2 - first; ++i) {
        int64_t at = std::clamp<int64_t>(static_cast<int64_t>(base) + i, 0, in - 1);
        double v = tap[static_cast<size_t>(i - first)];
        weights[static_cast<size_t>(y * in + at)] += normalized ? v / sum : v;
      }
    }
    factor[static_cast<size_t>(a)] = block_factor(weights, out, in);
    matrices.emplace_back(a, std::move(weights));
  }
  // Summing over blocks reshapes g to [.., x_i, s_i, ..]: Reshape's 0 copies g's
  // dims up to the first split, the others must be static.
  auto block = std::find_if(factor.begin(), factor.end(), [](int64_t f) { return f > 0; });
  size_t first_block = static_cast<size_t>(block - factor.begin());
  for (size_t i = first_block + 1; i < rank; ++i)
    if (!xd[i].is_static()) first_block = rank;
  std::vector<int64_t> split, summed;
  for (size_t i = 0; i < rank && first_block < rank; ++i) {
    split.push_back(i < first_block ? 0 : xd[i].value());
    if (factor[i] == 0) continue;
    split.push_back(factor[i]);
    summed.push_back(static_cast<int64_t>(split.size()) - 1);
  }
  Value* g = c.dy();
  for (const auto& [a, w] : matrices)
    if (summed.empty() || factor[static_cast<size_t>(a)] == 0)
      g = transpose_apply(c, g, rank, static_cast<size_t>(a), w, dim(yd, a), dim(xd, a));
  if (!summed.empty()) g = c.e().reduce("ReduceSum", c.e().op("Reshape", {g, c.e().ints(split)}), summed, false);
  c.set(0, g);
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over [N, C, D...]: with
// a = g * weight[label] (0 at ignore_index; divided by the weights' sum for
// reduction mean), the log-probabilities' gradient is -onehot(label) * a, and
// (SoftmaxCrossEntropyLoss) the scores' is that minus softmax * its sum over
// the classes, with log_prob's own gradient added first when it has one.
void class_loss_rule(GradContext& c) {
  const Node& n = c.node();
  if (c.wants(2)) c.fail("tcc does not differentiate a loss's class weights");
  Emitter& e = c.e();
  const Dims& sd = c.dims(c.in(0));
  if (!sd[1].is_static()) c.fail("the gradient of " + n.op_type() + " needs a static class count, not " + sd[1].str());
  size_t rank = sd.size();
  Value* labels = c.in(1);
  Value* weight = n.num_inputs() > 2 && c.in(2) ? c.in(2) : nullptr;
  Value* a = nullptr;  // per [N, D...] element: its weight, 0 where ignored
  if (n.has_attr("ignore_index")) {
    Value* ignore = e.op("Equal", {labels, e.scalar(static_cast<double>(n.get_int("ignore_index", 0)), DType::I64)});
    labels = e.op("Where", {ignore, e.scalar(0, DType::I64), labels});
    a = e.op("Where", {ignore, scalar(c, 0.0), scalar(c, 1.0)});
  }
  if (weight) {
    Value* w = e.op("Gather", {weight, labels}, int_attr("axis", 0));
    a = a ? mul(c, a, w) : w;
  }
  std::string reduction = n.get_string("reduction", "mean");
  Value* g = c.dy();
  if (reduction == "mean") {
    Value* total = a ? e.reduce("ReduceSum", a, {}, false)
                     : as_dtype(c, e.op("Size", {labels}));
    g = e.op("Div", {g, total});
  }
  bool per_element = a != nullptr || reduction == "none";  // else a is a scalar
  a = a ? mul(c, a, g) : g;  // broadcasts a scalar g (sum, mean) over the elements
  std::vector<int64_t> class_shape(rank, 1);
  class_shape[1] = sd[1].value();
  Value* classes = e.op("Reshape", {e.op("Range", {e.scalar(0, DType::I64), e.scalar(static_cast<double>(sd[1].value()), DType::I64),
                                                  e.scalar(1, DType::I64)}),
                                    e.ints(class_shape)});
  Value* onehot = as_dtype(c, e.op("Equal", {e.unsqueeze(labels, {1}), classes}));
  Value* dlogp = e.op("Neg", {mul(c, onehot, per_element ? e.unsqueeze(a, {1}) : a)});
  if (n.op_type() == "NegativeLogLikelihoodLoss") return c.set(0, dlogp);
  if (c.dy(1)) dlogp = e.op("Add", {dlogp, c.dy(1)});
  Value* softmax = e.op("Softmax", {c.in(0)}, int_attr("axis", 1));
  c.set(0, e.op("Sub", {dlogp, mul(c, softmax, e.reduce("ReduceSum", dlogp, {1}, true))}));
}

const std::unordered_map<std::string, GradRule>& rules() {
  static const std::unordered_map<std::string, GradRule> table = {
      {"Add", add_rule},
      {"Sub", sub_rule},
      {"Mul", mul_rule},
      {"Div", div_rule},
      {"Mod", mod_rule},
      {"Neg", neg_rule},
      {"Pow", pow_rule},
      {"Relu", relu_rule},
      {"Sigmoid", sigmoid_rule},
      {"Tanh", tanh_rule},
      {"Exp", exp_rule},
      {"Log", log_rule},
      {"Sqrt", sqrt_rule},
      {"Erf", erf_rule},
      {"Gelu", gelu_rule},
      {"Identity", identity_rule},
      {"Cast", cast_rule},
      {"CastLike", cast_rule},
      {"Where", where_rule},
      {"Expand", expand_rule},
      {"MatMul", matmul_rule},
      {"Gemm", gemm_rule},
      {"Softmax", softmax_rule},
      {"LogSoftmax", log_softmax_rule},
      {"LayerNormalization", layer_norm_rule},
      {"ReduceSum", reduce_sum_rule},
      {"ReduceMean", reduce_mean_rule},
      {"GlobalAveragePool", global_average_pool_rule},
      {"Conv", conv_rule},
      {"ConvTranspose", conv_transpose_rule},
      {"InstanceNormalization", instance_norm_rule},
      {"GatherElements", gather_elements_rule},
      {"GatherND", gather_elements_rule},
      {"Einsum", einsum_rule},
      {"Resize", resize_rule},
      {"NegativeLogLikelihoodLoss", class_loss_rule},
      {"SoftmaxCrossEntropyLoss", class_loss_rule},
      {"MaxPool", max_pool_rule},
      {"AveragePool", average_pool_rule},
      {"BatchNormalization", batch_norm_rule},
      {"Reshape", reshape_rule},
      {"Flatten", reshape_rule},
      {"Squeeze", reshape_rule},
      {"Unsqueeze", reshape_rule},
      {"Transpose", transpose_rule},
      {"Concat", concat_rule},
      {"Split", split_rule},
      {"Slice", slice_rule},
      {"Gather", gather_rule},
      {"Abs", abs_rule},
      {"Sin", sin_rule},
      {"Cos", cos_rule},
      {"Reciprocal", reciprocal_rule},
      {"Softplus", softplus_rule},
      {"LeakyRelu", leaky_relu_rule},
      {"Elu", elu_rule},
      {"Selu", selu_rule},
      {"HardSigmoid", hard_sigmoid_rule},
      {"HardSwish", hard_swish_rule},
      {"Clip", clip_rule},
      {"Floor", zero_rule},
      {"Ceil", zero_rule},
      {"Round", zero_rule},
      {"Sign", zero_rule},
      {"Dropout", dropout_rule},
      {"Sum", sum_rule},
      {"Mean", sum_rule},
      {"Max", extremum_rule},
      {"Min", extremum_rule},
      {"ReduceSumSquare", reduce_sum_square_rule},
      {"ReduceProd", reduce_prod_rule},
      {"TopK", top_k_rule},
      {"ScatterElements", scatter_rule},
      {"ScatterND", scatter_rule},
      {"Compress", compress_rule},
      {"LpPool", lp_pool_rule},
      {"ReduceLogSum", reduce_log_sum_rule},
      {"ReduceLogSumExp", reduce_log_sum_rule},
      {"ReduceL1", reduce_l1_rule},
      {"ReduceL2", reduce_l2_rule},
      {"ReduceMax", reduce_extremum_rule},
      {"ReduceMin", reduce_extremum_rule},
      {"GlobalMaxPool", global_max_pool_rule},
      {"Pad", pad_rule},
      {"Tile", tile_rule},
      {"CumSum", cum_sum_rule},
      {"Trilu", trilu_rule},
      {"DepthToSpace", depth_to_space_rule},
      {"SpaceToDepth", space_to_depth_rule},
  };
  return table;
}

}  // namespace

// An op tcc does not support at the node's opset (Gelu before 20) has no
// shape rule, so its output types are only what the model declares: the rule
// of the op that shares its name would differentiate something else.
const GradRule* find_grad_rule(const Node& n) {
  if (!OpRegistry::get().lookup(n.domain(), n.op_type(), n.opset())) return nullptr;
  auto it = rules().find(n.op_type());
  return it == rules().end() ? nullptr : &it->second;
}

std::vector<std::string> grad_rule_ops() {
  std::vector<std::string> ops;
  for (const auto& [op, rule] : rules()) ops.push_back(op);
  return ops;
}

std::string no_grad_rule_reason(const Node& n) {
  if (!OpRegistry::get().lookup(n.domain(), n.op_type(), n.opset())) return OpRegistry::get().why_unsupported(n);
  if (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan")
    return "tcc does not differentiate through control flow";
  return "";
}

}  // namespace tcc
