// Float functions and activations: math functions of one input (Sqrt,
// Reciprocal, Exp, Log, Erf, Tanh, Floor, Ceil, Round, the trigonometric and
// hyperbolic functions and their inverses), activations (Sigmoid, Softplus,
// HardSigmoid, HardSwish, LeakyRelu, Elu, Selu, Gelu, Celu, Mish, Softsign,
// ThresholdedRelu; Shrink, which takes integers too; PRelu, whose slope
// broadcasts to X, on floats and integers), IsNaN and IsInf.
// Kernels compute in double and round once to the output dtype (integer
// PRelu multiplies in 64 bits).
#include <algorithm>
#include <cmath>
#include <functional>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"

namespace tcc {

namespace {

// Predicates read floats and write bools.
const std::vector<DType> kFloatAndBool = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::Bool};
// Shrink's and PRelu's element types (opset 16's PRelu takes no 8- or 16-bit integers).
const std::vector<DType> kShrinkTypes = {DType::F32, DType::F16, DType::F64, DType::I64, DType::I32, DType::I16,
                                         DType::I8,  DType::U64, DType::U32, DType::U16, DType::U8};
const std::vector<DType> kPReluTypes = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                        DType::I64, DType::I32, DType::U64,  DType::U32};

// A unary op on floats, output of the same dtype (or out_dtype when given).
Tensor unary_float(const EvalContext& ctx, const std::function<double(double)>& f,
                   DType out_dtype = DType::Undefined) {
  const Tensor& x = ctx.input(0);
  Tensor out(out_dtype == DType::Undefined ? x.dtype() : out_dtype, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.set_f64(i, f(x.get_f64(i)));
  return out;
}

OpDef& add_unary_float(OpRegistry& r, const std::string& name, int64_t since,
                       std::function<double(const Node&, double)> f) {
  return add_op(r, name, since, kFloatTypes, infer_same_dtype(), [f](EvalContext& ctx) {
    const Node& n = ctx.node();
    return std::vector<Tensor>{unary_float(ctx, [&](double x) { return f(n, x); })};
  });
}

double attr(const Node& n, const char* name, float def) { return n.get_float(name, def); }

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kPi = 3.14159265358979323846;

// ---------------------------------------------------------------------------
// Kernel expressions (src/ops/pointwise.h)

// An expression of input 0 alone, with constants and instructions in the output's dtype.
using Unary = std::function<int(const Node&, ScalarBuilder&, int x, const std::function<int(double)>& k)>;
PointwiseFn unary(Unary f) {
  return [f](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    DType dt = out_dtype(n);
    return f(n, b, in[0], [&](double v) { return b.constant(dt, v); });
  };
}

// log(1 + e^x) without overflow for large x.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

// The same in a kernel: max(x, 0) + log(1 + exp(-|x|)), whose exp never overflows.
int softplus(ScalarBuilder& b, DType dt, int x) {
  int e = b.op(ScalarOp::Exp, dt, {b.op(ScalarOp::Neg, dt, {b.op(ScalarOp::Abs, dt, {x})})});
  int tail = b.op(ScalarOp::Log, dt, {b.op(ScalarOp::Add, dt, {b.constant(dt, 1), e})});
  return b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Max, dt, {x, b.constant(dt, 0)}), tail});
}

// Celu's alpha, which divides x.
double celu_alpha(const Node& n) {
  double alpha = attr(n, "alpha", 1.0f);
  if (alpha == 0) n.fail("alpha must not be 0");
  return alpha;
}

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
double shrink(const Node& n, double x) {
  double bias = attr(n, "bias", 0.0f), lambd = attr(n, "lambd", 0.5f);
  return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0;
}

// PRelu: x, or slope * x below 0, the slope broadcast to X's shape (never
// the other way). Integers multiply with wrap-around, as Mul.
Tensor prelu_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  if (broadcast_shapes(ctx.node(), {x.shape(), slope.shape()}) != x.shape())
    ctx.fail("slope of shape " + shape_str(slope.shape()) + " must broadcast to X's shape " + shape_str(x.shape()));
  BroadcastIndexer at(x.shape(), slope.shape());
  Tensor out(x.dtype(), x.shape());
  bool flt = is_float(x.dtype()), sgn = is_signed(x.dtype());
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (flt) {
      double v = x.get_f64(i);
      out.set_f64(i, v < 0 ? v * slope.get_f64(at(i)) : v);
    } else {
      int64_t v = x.get_i64(i);
      bool negative = sgn && v < 0;
      out.set_i64(i, negative ? static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(slope.get_i64(at(i)))) : v);
    }
  }
  return out;
}

// X's type; slope must broadcast to X's shape (unidirectional broadcasting).
void infer_prelu(InferContext& ctx) {
  require_one_dtype(ctx, 0, {1});
  if (!inputs_ranked(ctx, {0, 1})) return;
  const Type& x = ctx.input_type(0);
  const Type& slope = ctx.input_type(1);
  std::string wrong = "slope " + slope.str() + " must broadcast to X's shape " + x.str();
  if (slope.rank() > x.rank()) ctx.fail(wrong);
  Dims both = broadcast_dims(ctx, {x.shape(), slope.shape()});
  for (size_t d = 0; d < x.rank(); ++d)
    if (x.shape()[d].is_static() && both[d] != x.shape()[d]) ctx.fail(wrong);
  ctx.set_output_type(0, x);
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

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

// d sin = g cos(x);  d cos = -g sin(x)
void sin_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Cos", {c.in(0)}))); }
void cos_rule(GradContext& c) { c.set(0, c.e().op("Neg", {mul(c, c.dy(), c.e().op("Sin", {c.in(0)}))})); }

// d tan = g (1 + y^2)
void tan_rule(GradContext& c) {
  c.set(0, mul(c, c.dy(), c.e().op("Add", {scalar(c, 1.0), mul(c, c.out(), c.out())})));
}

// d asin = g / sqrt(1 - x^2);  d acos = -g / sqrt(1 - x^2)
Value* asin_grad(GradContext& c) {
  Value* root = c.e().op("Sqrt", {c.e().op("Sub", {scalar(c, 1.0), mul(c, c.in(0), c.in(0))})});
  return c.e().op("Div", {c.dy(), root});
}
void asin_rule(GradContext& c) { c.set(0, asin_grad(c)); }
void acos_rule(GradContext& c) { c.set(0, c.e().op("Neg", {asin_grad(c)})); }

// d atan = g / (1 + x^2)
void atan_rule(GradContext& c) {
  c.set(0, c.e().op("Div", {c.dy(), c.e().op("Add", {scalar(c, 1.0), mul(c, c.in(0), c.in(0))})}));
}

// d sinh = g cosh(x);  d cosh = g sinh(x)
void sinh_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Cosh", {c.in(0)}))); }
void cosh_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Sinh", {c.in(0)}))); }

// d asinh = g / sqrt(x^2 + 1);  d acosh = g / sqrt(x^2 - 1)
void asinh_rule(GradContext& c) {
  Value* root = c.e().op("Sqrt", {c.e().op("Add", {mul(c, c.in(0), c.in(0)), scalar(c, 1.0)})});
  c.set(0, c.e().op("Div", {c.dy(), root}));
}
void acosh_rule(GradContext& c) {
  Value* root = c.e().op("Sqrt", {c.e().op("Sub", {mul(c, c.in(0), c.in(0)), scalar(c, 1.0)})});
  c.set(0, c.e().op("Div", {c.dy(), root}));
}

// d atanh = g / (1 - x^2)
void atanh_rule(GradContext& c) {
  c.set(0, c.e().op("Div", {c.dy(), c.e().op("Sub", {scalar(c, 1.0), mul(c, c.in(0), c.in(0))})}));
}

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

// Celu: g, or g exp(x / alpha) below 0
void celu_rule(GradContext& c) {
  Value* e = c.e().op("Exp", {c.e().op("Div", {c.in(0), scalar(c, celu_alpha(c.node()))})});
  piecewise(c, c.dy(), mul(c, c.dy(), e));
}

// Mish, y = x t with t = tanh(softplus(x)): d = g (t + x sigmoid(x) (1 - t^2))
void mish_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  Value* t = e.op("Tanh", {e.op("Softplus", {x})});
  Value* sech2 = e.op("Sub", {scalar(c, 1.0), mul(c, t, t)});
  Value* d = e.op("Add", {t, mul(c, mul(c, x, e.op("Sigmoid", {x})), sech2)});
  c.set(0, mul(c, c.dy(), d));
}

// Softsign: g / (1 + |x|)^2
void softsign_rule(GradContext& c) {
  Value* denom = c.e().op("Add", {scalar(c, 1.0), c.e().op("Abs", {c.in(0)})});
  c.set(0, c.e().op("Div", {c.dy(), mul(c, denom, denom)}));
}

// ThresholdedRelu: g where x > alpha, else 0
void thresholded_relu_rule(GradContext& c) {
  c.set(0, inside(c, c.in(0), scalar(c, c.node().get_float("alpha", 1.0f)), nullptr, false));
}

// Shrink: g where |x| > lambd (x < -lambd or x > lambd), else 0
void shrink_rule(GradContext& c) {
  Emitter& e = c.e();
  double lambd = c.node().get_float("lambd", 0.5f);
  Value* outside = e.op("Or", {e.op("Less", {c.in(0), scalar(c, -lambd)}), e.op("Greater", {c.in(0), scalar(c, lambd)})});
  c.set(0, e.op("Where", {outside, c.dy(), scalar(c, 0.0)}));
}

// PRelu: dX = g, or g slope below 0 (at 0 the slope's side, as torch);
// dslope = g x below 0, else 0, summed to the slope's shape
void prelu_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* positive = e.op("Greater", {c.in(0), scalar(c, 0.0)});
  if (c.wants(0)) c.set(0, e.op("Where", {positive, c.dy(), mul(c, c.dy(), c.in(1))}));
  if (c.wants(1)) c.set(1, c.unbroadcast(e.op("Where", {positive, scalar(c, 0.0), mul(c, c.dy(), c.in(0))}), 1));
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

}  // namespace

void register_unary_float_ops(OpRegistry& r) {
  add_unary_float(r, "Sqrt", 6, [](const Node&, double x) { return std::sqrt(x); }).pointwise_kernel(scalar(ScalarOp::Sqrt)).gradient(sqrt_rule);
  add_unary_float(r, "Reciprocal", 6, [](const Node&, double x) { return 1.0 / x; }).pointwise_kernel(scalar(ScalarOp::Reciprocal)).gradient(reciprocal_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Exp", 6, [](const Node&, double x) { return std::exp(x); }).pointwise_kernel(scalar(ScalarOp::Exp)).gradient(exp_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Log", 6, [](const Node&, double x) { return std::log(x); }).pointwise_kernel(scalar(ScalarOp::Log)).gradient(log_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Erf", 9, [](const Node&, double x) { return std::erf(x); }).pointwise_kernel(scalar(ScalarOp::Erf)).gradient(erf_rule);
  add_unary_float(r, "Tanh", 6, [](const Node&, double x) { return std::tanh(x); }).pointwise_kernel(scalar(ScalarOp::Tanh)).gradient(tanh_rule);
  add_unary_float(r, "Sin", 7, [](const Node&, double x) { return std::sin(x); }).pointwise_kernel(scalar(ScalarOp::Sin)).gradient(sin_rule);
  add_unary_float(r, "Cos", 7, [](const Node&, double x) { return std::cos(x); }).pointwise_kernel(scalar(ScalarOp::Cos)).gradient(cos_rule);
  add_unary_float(r, "Tan", 7, [](const Node&, double x) { return std::tan(x); }).pointwise_kernel(scalar(ScalarOp::Tan)).gradient(tan_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Asin", 7, [](const Node&, double x) { return std::asin(x); }).pointwise_kernel(scalar(ScalarOp::Asin)).gradient(asin_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Acos", 7, [](const Node&, double x) { return std::acos(x); }).pointwise_kernel(scalar(ScalarOp::Acos)).gradient(acos_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Atan", 7, [](const Node&, double x) { return std::atan(x); }).pointwise_kernel(scalar(ScalarOp::Atan)).gradient(atan_rule);
  add_unary_float(r, "Sinh", 9, [](const Node&, double x) { return std::sinh(x); }).pointwise_kernel(scalar(ScalarOp::Sinh)).gradient(sinh_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Cosh", 9, [](const Node&, double x) { return std::cosh(x); }).pointwise_kernel(scalar(ScalarOp::Cosh)).gradient(cosh_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "Asinh", 9, [](const Node&, double x) { return std::asinh(x); }).pointwise_kernel(scalar(ScalarOp::Asinh)).gradient(asinh_rule);
  add_unary_float(r, "Acosh", 9, [](const Node&, double x) { return std::acosh(x); }).pointwise_kernel(scalar(ScalarOp::Acosh)).gradient(acosh_rule);
  add_unary_float(r, "Atanh", 9, [](const Node&, double x) { return std::atanh(x); }).pointwise_kernel(scalar(ScalarOp::Atanh)).gradient(atanh_rule);
  add_unary_float(r, "Floor", 6, [](const Node&, double x) { return std::floor(x); }).pointwise_kernel(scalar(ScalarOp::Floor)).gradient(zero_rule);
  add_unary_float(r, "Ceil", 6, [](const Node&, double x) { return std::ceil(x); }).pointwise_kernel(scalar(ScalarOp::Ceil)).gradient(zero_rule);
  // Halves round to even (the default rounding mode), as ONNX Round specifies.
  add_unary_float(r, "Round", 11, [](const Node&, double x) { return std::nearbyint(x); }).pointwise_kernel(scalar(ScalarOp::Round)).gradient(zero_rule);
  add_unary_float(r, "Sigmoid", 6, [](const Node&, double x) { return 1.0 / (1.0 + std::exp(-x)); }).pointwise_kernel(scalar(ScalarOp::Sigmoid)).gradient(sigmoid_rule);
  add_unary_float(r, "Softplus", 1, [](const Node&, double x) { return softplus(x); }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    return softplus(b, out_dtype(n), in[0]);
  }).gradient(softplus_rule).under_autocast(AutocastClass::F32);
  add_unary_float(r, "HardSigmoid", 6, [](const Node& n, double x) {
    return std::clamp(attr(n, "alpha", 0.2f) * x + attr(n, "beta", 0.5f), 0.0, 1.0);
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int y = b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 0.2f)), x}), k(attr(n, "beta", 0.5f))});
    return b.op(ScalarOp::Min, dt, {b.op(ScalarOp::Max, dt, {y, k(0)}), k(1)});
  })).gradient(hard_sigmoid_rule);
  // x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (MobileNetV3's activation).
  add_unary_float(r, "HardSwish", 14, [](const Node&, double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int gate = b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Div, dt, {x, k(6)}), k(0.5)});
    return b.op(ScalarOp::Mul, dt, {x, b.op(ScalarOp::Min, dt, {b.op(ScalarOp::Max, dt, {gate, k(0)}), k(1)})});
  })).gradient(hard_swish_rule);
  add_unary_float(r, "LeakyRelu", 6, [](const Node& n, double x) { return x < 0 ? attr(n, "alpha", 0.01f) * x : x; }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int negative = b.op(ScalarOp::Less, DType::Bool, {x, k(0)});
    return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 0.01f)), x}), x});
  })).gradient(leaky_relu_rule);
  add_unary_float(r, "Elu", 6, [](const Node& n, double x) {
    return x < 0 ? attr(n, "alpha", 1.0f) * std::expm1(x) : x;
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int negative = b.op(ScalarOp::Less, DType::Bool, {x, k(0)});
    int em1 = b.op(ScalarOp::Sub, dt, {b.op(ScalarOp::Exp, dt, {x}), k(1)});
    return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 1.0f)), em1}), x});
  })).gradient(elu_rule);
  add_unary_float(r, "Selu", 6, [](const Node& n, double x) {
    double alpha = attr(n, "alpha", 1.67326319217681884765625f);
    double gamma = attr(n, "gamma", 1.05070102214813232421875f);
    return x > 0 ? gamma * x : gamma * alpha * std::expm1(x);
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    double alpha = attr(n, "alpha", 1.67326319217681884765625f);
    double gamma = attr(n, "gamma", 1.05070102214813232421875f);
    int positive = b.op(ScalarOp::Greater, DType::Bool, {x, k(0)});
    int em1 = b.op(ScalarOp::Sub, dt, {b.op(ScalarOp::Exp, dt, {x}), k(1)});
    int below = b.op(ScalarOp::Mul, dt, {k(gamma * alpha), em1});
    return b.op(ScalarOp::Where, dt, {positive, b.op(ScalarOp::Mul, dt, {k(gamma), x}), below});
  })).gradient(selu_rule);
  add_unary_float(r, "Gelu", 20, [](const Node& n, double x) {
    std::string approx = n.get_string("approximate", "none");
    if (approx == "tanh")
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    if (approx != "none") n.fail("approximate must be \"none\" or \"tanh\", got \"" + approx + "\"");
    return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    // 0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3)) for the erf.
    DType dt = out_dtype(n);
    auto bin = [&](ScalarOp o, int l, int r) { return b.op(o, dt, {l, r}); };
    int inner;
    if (n.get_string("approximate", "none") == "tanh") {
      int x3 = bin(ScalarOp::Mul, bin(ScalarOp::Mul, x, x), x);
      int sum = bin(ScalarOp::Add, x, bin(ScalarOp::Mul, k(0.044715), x3));
      inner = b.op(ScalarOp::Tanh, dt, {bin(ScalarOp::Mul, k(std::sqrt(2.0 / kPi)), sum)});
    } else {
      inner = b.op(ScalarOp::Erf, dt, {bin(ScalarOp::Div, x, k(kSqrt2))});
    }
    int half_x = bin(ScalarOp::Mul, k(0.5), x);
    int one_plus = bin(ScalarOp::Add, k(1), inner);
    return bin(ScalarOp::Mul, half_x, one_plus);
  }))
      .gradient(gelu_rule)
      .library_epilogue(kGemmEpilogue, "gelu_tanh", [](const Node& n) -> std::string {
        if (n.get_string("approximate", "none") == "tanh") return "";
        return "an erf Gelu; cuBLASLt's Gelu epilogue is the tanh approximation";
      });
  // max(0, x) + min(0, alpha (exp(x / alpha) - 1)): x, or the Elu of x / alpha scaled by alpha below 0.
  add_unary_float(r, "Celu", 12, [](const Node& n, double x) {
    double alpha = celu_alpha(n);
    return x < 0 ? alpha * std::expm1(x / alpha) : x;
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    double alpha = celu_alpha(n);
    int negative = b.op(ScalarOp::Less, DType::Bool, {x, k(0)});
    int em1 = b.op(ScalarOp::Sub, dt, {b.op(ScalarOp::Exp, dt, {b.op(ScalarOp::Div, dt, {x, k(alpha)})}), k(1)});
    return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {k(alpha), em1}), x});
  })).gradient(celu_rule);
  add_unary_float(r, "Mish", 18, [](const Node&, double x) { return x * std::tanh(softplus(x)); }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    DType dt = out_dtype(n);
    return b.op(ScalarOp::Mul, dt, {in[0], b.op(ScalarOp::Tanh, dt, {softplus(b, dt, in[0])})});
  }).gradient(mish_rule);
  add_unary_float(r, "Softsign", 1, [](const Node&, double x) { return x / (1 + std::fabs(x)); }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    return b.op(ScalarOp::Div, dt, {x, b.op(ScalarOp::Add, dt, {k(1), b.op(ScalarOp::Abs, dt, {x})})});
  })).gradient(softsign_rule);
  add_unary_float(r, "ThresholdedRelu", 10, [](const Node& n, double x) { return x > attr(n, "alpha", 1.0f) ? x : 0.0; }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    int above = b.op(ScalarOp::Greater, DType::Bool, {x, k(attr(n, "alpha", 1.0f))});
    return b.op(ScalarOp::Where, out_dtype(n), {above, x, k(0)});
  })).gradient(thresholded_relu_rule);
  // Integers compute in double (exact below 2^53) and convert back as Cast does.
  add_op(r, "Shrink", 9, kShrinkTypes, infer_same_dtype(), [](EvalContext& ctx) {
    const Node& n = ctx.node();
    return std::vector<Tensor>{unary_float(ctx, [&](double x) { return shrink(n, x); })};
  }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    DType dt = out_dtype(n), ct = is_float(dt) ? dt : DType::F64;
    double bias = attr(n, "bias", 0.0f), lambd = attr(n, "lambd", 0.5f);
    int x = is_float(dt) ? in[0] : b.op(ScalarOp::Cast, ct, {in[0]});
    int below = b.op(ScalarOp::Less, DType::Bool, {x, b.constant(ct, -lambd)});
    int above = b.op(ScalarOp::Greater, DType::Bool, {x, b.constant(ct, lambd)});
    int upper = b.op(ScalarOp::Where, ct, {above, b.op(ScalarOp::Sub, ct, {x, b.constant(ct, bias)}), b.constant(ct, 0)});
    int y = b.op(ScalarOp::Where, ct, {below, b.op(ScalarOp::Add, ct, {x, b.constant(ct, bias)}), upper});
    return is_float(dt) ? y : b.op(ScalarOp::Cast, dt, {y});
  }).gradient(shrink_rule);
  add_op(r, "PRelu", 7, kPReluTypes, infer_prelu, [](EvalContext& ctx) { return std::vector<Tensor>{prelu_kernel(ctx)}; })
      .pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
        DType dt = out_dtype(n);
        if (!is_signed(dt)) return in[0];  // an unsigned X is never below 0
        int negative = b.op(ScalarOp::Less, DType::Bool, {in[0], b.constant(dt, 0)});
        return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {in[1], in[0]}), in[0]});
      })
      .gradient(prelu_rule);

  add_op(r, "IsNaN", 9, kFloatAndBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_float(ctx, [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, DType::Bool)};
  }).pointwise_kernel(scalar(ScalarOp::IsNaN));
  add_op(r, "IsInf", 10, kFloatAndBool, infer_bool(), [](EvalContext& ctx) {
    bool neg = ctx.node().get_int("detect_negative", 1) != 0;
    bool pos = ctx.node().get_int("detect_positive", 1) != 0;
    return std::vector<Tensor>{unary_float(
        ctx, [&](double x) { return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg)) ? 1.0 : 0.0; },
        DType::Bool)};
  }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    // x == +inf and / or x == -inf, as the attributes ask.
    DType xt = n.input(0)->type().dtype();
    int found = -1;
    for (auto [attr_name, inf] : {std::pair{"detect_positive", INFINITY}, std::pair{"detect_negative", -INFINITY}}) {
      if (n.get_int(attr_name, 1) == 0) continue;
      int is = b.op(ScalarOp::Equal, DType::Bool, {in[0], b.constant(xt, inf)});
      found = found < 0 ? is : b.op(ScalarOp::Or, DType::Bool, {found, is});
    }
    return found >= 0 ? found : b.constant(DType::Bool, 0);
  });
}

}  // namespace tcc
