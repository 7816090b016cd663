// Lowering fusion nodes to kernels: the kernel each fusion pattern becomes,
// checked as the exact text of print_kernel, and checked by meaning: every
// kernel a test lowers is run by a small evaluator of the kernel IR (in double,
// as kernel_ir.h documents each op) and must agree with the reference
// interpreter running the fusion body on random inputs. Fusion nodes are written
// by hand in the text IR, with types on every value, so no pass or shape
// inference runs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codegen/lower.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/ops/fusion.h"

namespace tcc {
namespace {

// A model whose main graph holds one fusion node over `inputs`, producing `outputs`.
std::string model(const std::string& opset, const std::string& inputs, const std::string& fusion,
                  const std::string& outputs) {
  return "graph main opset(ai.onnx: " + opset + ", tcc: 1) {\n" + inputs + fusion + outputs + "}\n";
}

// The sizes symbolic dims take when kernels run.
const std::map<std::string, int64_t> kSizes = {{"b", 2}, {"s", 3}, {"m", 5}, {"n", 7}, {"h", 2}};

int64_t eval(const SymExpr& e) {
  std::optional<int64_t> v = e.evaluate(kSizes);
  EXPECT_TRUE(v.has_value()) << e.str();
  return v.value_or(0);
}

double round_to(DType t, double v) {
  switch (t) {
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    case DType::F64: return v;
    case DType::Bool: return v != 0;
    default: return std::trunc(v);
  }
}

// An integer's bits kept to the width of integer dtype t, as a value of t.
double wrap_to(DType t, int64_t bits) {
  Tensor x(t, {});
  x.set_i64(0, bits);
  return x.get_f64(0);
}

double apply(kir::Op op, DType t, const std::vector<double>& a) {
  using kir::Op;
  auto nan_or = [&](double v) { return std::isnan(a[0]) || std::isnan(a[1]) ? NAN : v; };
  auto bits = [&](size_t i) { return static_cast<int64_t>(a[i]); };
  switch (op) {
    case Op::Neg: return -a[0];
    case Op::Abs: return std::fabs(a[0]);
    case Op::Exp: return std::exp(a[0]);
    case Op::Log: return std::log(a[0]);
    case Op::Sqrt: return std::sqrt(a[0]);
    case Op::Reciprocal: return 1 / a[0];
    case Op::Tanh: return std::tanh(a[0]);
    case Op::Sigmoid: return 1 / (1 + std::exp(-a[0]));
    case Op::Erf: return std::erf(a[0]);
    case Op::Relu: return a[0] < 0 ? 0 : a[0];
    case Op::Sin: return std::sin(a[0]);
    case Op::Cos: return std::cos(a[0]);
    case Op::Tan: return std::tan(a[0]);
    case Op::Asin: return std::asin(a[0]);
    case Op::Acos: return std::acos(a[0]);
    case Op::Atan: return std::atan(a[0]);
    case Op::Sinh: return std::sinh(a[0]);
    case Op::Cosh: return std::cosh(a[0]);
    case Op::Asinh: return std::asinh(a[0]);
    case Op::Acosh: return std::acosh(a[0]);
    case Op::Atanh: return std::atanh(a[0]);
    case Op::Floor: return std::floor(a[0]);
    case Op::Ceil: return std::ceil(a[0]);
    case Op::Round: return std::nearbyint(a[0]);
    case Op::Sign: return a[0] > 0 ? 1 : a[0] < 0 ? -1 : 0;
    case Op::Not: return a[0] == 0;
    case Op::BitNot: return wrap_to(t, ~bits(0));
    case Op::IsNaN: return std::isnan(a[0]);
    case Op::Cast: return round_to(t, a[0]);
    case Op::Add: return a[0] + a[1];
    case Op::Sub: return a[0] - a[1];
    case Op::Mul: return a[0] * a[1];
    case Op::Div: return is_float(t) ? a[0] / a[1] : std::trunc(a[0] / a[1]);
    case Op::Pow: return std::pow(a[0], a[1]);
    case Op::Max: return nan_or(std::max(a[0], a[1]));
    case Op::Min: return nan_or(std::min(a[0], a[1]));
    case Op::Mod: {
      double r = std::fmod(a[0], a[1]);
      return r != 0 && (r < 0) != (a[1] < 0) ? r + a[1] : r;
    }
    case Op::Fmod: return std::fmod(a[0], a[1]);
    case Op::BitAnd: return wrap_to(t, bits(0) & bits(1));
    case Op::BitOr: return wrap_to(t, bits(0) | bits(1));
    case Op::BitXor: return wrap_to(t, bits(0) ^ bits(1));
    case Op::ShiftLeft:
    case Op::ShiftRight: {
      int64_t s = bits(1);
      if (s < 0 || s >= static_cast<int64_t>(dtype_size(t) * 8)) return op == Op::ShiftRight && a[0] < 0 ? -1 : 0;
      return wrap_to(t, op == Op::ShiftLeft ? static_cast<int64_t>(static_cast<uint64_t>(bits(0)) << s) : bits(0) >> s);
    }
    case Op::And: return a[0] != 0 && a[1] != 0;
    case Op::Or: return a[0] != 0 || a[1] != 0;
    case Op::Xor: return (a[0] != 0) != (a[1] != 0);
    case Op::Equal: return a[0] == a[1];
    case Op::Less: return a[0] < a[1];
    case Op::LessOrEqual: return a[0] <= a[1];
    case Op::Greater: return a[0] > a[1];
    case Op::GreaterOrEqual: return a[0] >= a[1];
    case Op::Where: return a[0] != 0 ? a[1] : a[2];
    default: ADD_FAILURE() << "no evaluation for " << kir::op_name(op); return 0;
  }
}

// The convolution of ConvDesc at output point coord, straight from its definition in kernel_ir.h.
double conv_at(const kir::Kernel& k, const std::vector<Tensor>& buffers, const std::vector<int64_t>& coord) {
  const kir::ConvDesc& d = *k.conv;
  int64_t c = eval(d.c), cg = c / d.groups, kg = eval(d.k) / d.groups;
  int64_t taps = 1;
  for (int64_t r : d.kernel) taps *= r;
  double v = 0;
  for (int64_t ci = 0; ci < cg; ++ci)
    for (int64_t t = 0; t < taps; ++t) {
      std::vector<int64_t> r(d.kernel.size());
      int64_t rest = t;
      for (size_t s = r.size(); s-- > 0; rest /= d.kernel[s]) r[s] = rest % d.kernel[s];
      int64_t xi = coord[0] * c + coord[1] / kg * cg + ci, wi = coord[1] * cg + ci;
      bool inside = true;
      for (size_t s = 0; s < r.size(); ++s) {
        int64_t at = coord[2 + s] * d.strides[s] - d.pads[s] + r[s] * d.dilations[s], extent = eval(d.in[s]);
        inside = inside && at >= 0 && at < extent;
        xi = xi * extent + at;
        wi = wi * d.kernel[s] + r[s];
      }
      if (inside) v += buffers[d.x].get_f64(xi) * buffers[d.w].get_f64(wi);
    }
  return v;
}

// Runs a kernel row by row: a row value is one number per row, an element value
// one per point of the row (pointwise and gemm kernels have rows of one point).
void run_kernel(const kir::Kernel& k, std::vector<Tensor>& buffers) {
  std::vector<int64_t> domain;
  for (const SymExpr& d : k.domain) domain.push_back(eval(d));
  size_t outer = domain.size() - static_cast<size_t>(k.reduce_axes);
  int64_t rows = 1, length = 1;
  for (size_t d = 0; d < domain.size(); ++d) (d < outer ? rows : length) *= domain[d];
  // Indices evaluated once: offset then one stride per domain axis.
  std::vector<std::vector<int64_t>> index(k.body.size());
  for (size_t i = 0; i < k.body.size(); ++i) {
    index[i].push_back(eval(k.body[i].index.offset));
    for (const SymExpr& e : k.body[i].index.strides) index[i].push_back(eval(e));
  }
  auto at = [&](size_t i, const std::vector<int64_t>& coord) {
    int64_t flat = index[i][0];
    for (size_t d = 0; d < coord.size(); ++d) flat += coord[d] * index[i][d + 1];
    return flat;
  };
  struct {
    int64_t m = 1, k = 0, lda = 0, ldb = 0, stride_a = 0, stride_b = 0;
  } g;
  if (k.gemm)
    g = {eval(k.gemm->m), eval(k.gemm->k), eval(k.gemm->lda), eval(k.gemm->ldb), eval(k.gemm->stride_a),
         eval(k.gemm->stride_b)};
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<std::vector<double>> vals(k.body.size());
    for (size_t i = 0; i < k.body.size(); ++i) {
      const kir::Instr& in = k.body[i];
      int64_t points = in.row ? 1 : length;
      if (in.op == kir::Op::ReduceSum || in.op == kir::Op::ReduceMax || in.op == kir::Op::ReduceMin ||
          in.op == kir::Op::ReduceProd) {
        const std::vector<double>& x = vals[in.args[0]];
        double acc = in.op == kir::Op::ReduceSum ? 0 : in.op == kir::Op::ReduceProd ? 1 : x[0];
        for (double v : x) {
          if (in.op == kir::Op::ReduceSum) acc += v;
          else if (in.op == kir::Op::ReduceProd) acc *= v;
          else if (in.op == kir::Op::ReduceMax) acc = std::max(acc, v);
          else acc = std::min(acc, v);
        }
        vals[i] = {acc};
        continue;
      }
      for (int64_t p = 0; p < points; ++p) {
        std::vector<int64_t> coord(domain.size());
        int64_t r = row, q = p;
        for (size_t d = domain.size(); d-- > 0;) {
          int64_t& rest = d < outer ? r : q;
          coord[d] = rest % domain[d];
          rest /= domain[d];
        }
        std::vector<double> args;
        for (int a : in.args) args.push_back(vals[a].size() == 1 ? vals[a][0] : vals[a][p]);
        double v = 0;
        switch (in.op) {
          case kir::Op::Load: v = buffers[in.buffer].get_f64(at(i, coord)); break;
          case kir::Op::Store: buffers[in.buffer].set_f64(at(i, coord), args[0]); break;
          case kir::Op::Const: v = in.value; break;
          case kir::Op::SizeValue: v = static_cast<double>(eval(in.size)); break;
          case kir::Op::MatMulAcc: {
            bool ta = k.gemm->trans_a, tb = k.gemm->trans_b;
            int64_t flat = 0;
            for (size_t d = 0; d + 1 < coord.size(); ++d) flat = flat * domain[d] + coord[d];
            int64_t batch = flat / g.m, mi = flat % g.m, ni = coord.back();
            for (int64_t kk = 0; kk < g.k; ++kk) {
              int64_t ai = batch * g.stride_a + (ta ? kk * g.lda + mi : mi * g.lda + kk);
              int64_t bi = batch * g.stride_b + (tb ? ni * g.ldb + kk : kk * g.ldb + ni);
              v += buffers[k.gemm->a].get_f64(ai) * buffers[k.gemm->b].get_f64(bi);
            }
            break;
          }
          case kir::Op::ConvAcc: v = conv_at(k, buffers, coord); break;
          default: v = apply(in.op, in.dtype, args);
        }
        vals[i].push_back(v);
      }
    }
  }
}

// Lowers the fusion node of `text`, runs the kernel and the interpreter on the
// same random inputs and expects the same outputs.
void expect_computes_body(const Model& m, const Node& fusion, const kir::Kernel& k) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::map<std::string, Tensor> inputs;
  std::vector<Tensor> buffers;
  for (const kir::Buffer& b : k.buffers) {
    std::vector<int64_t> shape;
    for (const SymExpr& d : b.shape) shape.push_back(eval(d));
    Tensor t(b.dtype, shape);
    if (!b.output)
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, real(rng));
    buffers.push_back(t);
    if (!b.output) inputs.emplace(b.name, t);
  }
  std::vector<Tensor> want = Interpreter().run(*m.graph, inputs);
  run_kernel(k, buffers);
  for (size_t o = 0; o < fusion.num_outputs(); ++o) {
    const Tensor& got = buffers[fusion.num_inputs() + o];
    ASSERT_EQ(want[o].shape(), got.shape());
    double scale = 1, tol = got.dtype() == DType::F16 ? 2e-3 : 1e-5;
    for (int64_t i = 0; i < got.numel(); ++i) scale = std::max(scale, std::fabs(want[o].get_f64(i)));
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_NEAR(want[o].get_f64(i), got.get_f64(i), tol * scale) << k.name << " output " << o << " element " << i;
  }
}

kir::Kernel lower_text(const std::string& text) {
  std::unique_ptr<Model> m = parse_model(text);
  for (const auto& n : m->graph->nodes()) {
    if (!is_fusion(*n)) continue;
    kir::Kernel k = lower_fusion(*n, "tcc_k0");
    expect_computes_body(*m, *n, k);
    return k;
  }
  ADD_FAILURE() << "no fusion node";
  return {};
}

std::string lowered(const std::string& text) { return print_kernel(lower_text(text)); }

TEST(Lower, PointwiseBroadcastsBiasAndScalar) {
  EXPECT_EQ(lowered(model("17", R"(  input %x: f32[b, 768]
  input %bias: f32[768]
  input %s: f32[]
)",
                          R"(  %y: f32[b, 768] = tcc::Fusion(%x, %bias, %s) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f32[b, 768]
      input %bias_in: f32[768]
      input %s_in: f32[]
      const %two: f32[] = [2.0]
      %t: f32[b, 768] = Add(%x_in, %bias_in) name("layer0/Add")
      %u: f32[b, 768] = Mul(%t, %two) name("layer0/Mul")
      %v: f32[b, 768] = Sub(%u, %s_in) name("layer0/Sub")
      %y_out: f32[b, 768] = Relu(%v) name("layer0/Relu")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 pointwise domain [b, 768] sizes(b)
  nodes layer0/Add, layer0/Mul, layer0/Sub, layer0/Relu
  buffer x: f32[b, 768] in
  buffer bias: f32[768] in
  buffer s: f32[] in
  buffer y: f32[b, 768] out
  %0: f32 = load x [768, 1]
  %1: f32 = load bias [0, 1]
  %2: f32 = add %0, %1
  %3: f32 = const 2
  %4: f32 = mul %2, %3
  %5: f32 = load s [0, 0]
  %6: f32 = sub %4, %5
  %7: f32 = relu %6
  %8 = store y [768, 1], %7
)");
}

TEST(Lower, TransposedInputLoadsWithPermutedStrides) {
  EXPECT_EQ(lowered(model("17", "  input %x: f32[b, 64, 32]\n  input %y: f32[b, 32, 64]\n",
                          R"(  %z: f32[b, 32, 64] = tcc::Fusion(%x, %y) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f32[b, 64, 32]
      input %y_in: f32[b, 32, 64]
      %xt: f32[b, 32, 64] = Transpose(%x_in) {perm = [0, 2, 1]} name("t")
      %z_out: f32[b, 32, 64] = Add(%xt, %y_in) name("add")
      output %z_out
    }} name("fused_0")
)",
                          "  output %z\n")),
            R"(kernel tcc_k0 pointwise domain [b, 32, 64] sizes(b)
  nodes t, add
  buffer x: f32[b, 64, 32] in
  buffer y: f32[b, 32, 64] in
  buffer z: f32[b, 32, 64] out
  %0: f32 = load x [2048, 1, 32]
  %1: f32 = load y [2048, 64, 1]
  %2: f32 = add %0, %1
  %3 = store z [2048, 64, 1], %2
)");
}

TEST(Lower, ReshapedInputLoadsRowMajor) {
  EXPECT_EQ(lowered(model("17", "  input %x: f32[b, 12, 64]\n  input %y: f32[b, 768]\n",
                          R"(  %z: f32[b, 768] = tcc::Fusion(%x, %y) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f32[b, 12, 64]
      input %y_in: f32[b, 768]
      const %shape: i64[2] = [0, 768]
      %xr: f32[b, 768] = Reshape(%x_in, %shape) name("r")
      %z_out: f32[b, 768] = Mul(%xr, %y_in) name("mul")
      output %z_out
    }} name("fused_0")
)",
                          "  output %z\n")),
            R"(kernel tcc_k0 pointwise domain [b, 768] sizes(b)
  nodes r, mul
  buffer x: f32[b, 12, 64] in
  buffer y: f32[b, 768] in
  buffer z: f32[b, 768] out
  %0: f32 = load x [768, 1]
  %1: f32 = load y [768, 1]
  %2: f32 = mul %0, %1
  %3 = store z [768, 1], %2
)");
}

TEST(Lower, SlicedInputLoadsWithOffsetAndStep) {
  // Rows 1.. of a symbolic axis (an INT32_MAX end), every other column from 2 to the last.
  EXPECT_EQ(lowered(model("17", "  input %x: f32[s, 10]\n",
                          R"(  %y: f32[s-1, 4] = tcc::Fusion(%x) {kind = "single", body = graph fused_0 {
      input %x_in: f32[s, 10]
      const %starts: i64[2] = [1, 2]
      const %ends: i64[2] = [2147483647, -1]
      const %axes: i64[2] = [0, -1]
      const %steps: i64[2] = [1, 2]
      %y_out: f32[s-1, 4] = Slice(%x_in, %starts, %ends, %axes, %steps) name("slice")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 pointwise domain [s-1, 4] sizes(s)
  nodes slice
  buffer x: f32[s, 10] in
  buffer y: f32[s-1, 4] out
  %0: f32 = load x [10, 2] + 12
  %1 = store y [4, 1], %0
)");
}

// Attention's k: the middle third of [b, s, 36] split into 3 heads of 4 and
// moved ahead of s. The head split keeps the slice's row stride 36 on s and
// steps 4 between heads; the transpose permutes them.
TEST(Lower, MovementChainComposesSliceSplitAndTranspose) {
  kir::Kernel k = lower_text(model("17", "  input %x: f32[b, s, 36]\n",
                          R"(  %y: f32[b, 3, s, 4] = tcc::Fusion(%x) {kind = "single", body = graph fused_0 {
      input %x_in: f32[b, s, 36]
      const %starts: i64[1] = [12]
      const %ends: i64[1] = [24]
      const %axes: i64[1] = [2]
      const %heads: i64[4] = [0, 0, 3, 4]
      %k: f32[b, s, 12] = Slice(%x_in, %starts, %ends, %axes) name("slice")
      %kh: f32[b, s, 3, 4] = Reshape(%k, %heads) name("split")
      %y_out: f32[b, 3, s, 4] = Transpose(%kh) {perm = [0, 2, 1, 3]} name("transpose")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n"));
  EXPECT_EQ(print_kernel(k), R"(kernel tcc_k0 pointwise domain [b, 3, s, 4] sizes(b, s)
  nodes slice, split, transpose
  buffer x: f32[b, s, 36] in
  buffer y: f32[b, 3, s, 4] out
  %0: f32 = load x [s*36, 4, 36, 1] + 12
  %1 = store y [s*12, s*4, 4, 1], %0
)");
  // The load reaches the middle third of x's rows: 12 of 36 floats each, then as many written.
  EXPECT_EQ(kir::bytes_moved(k), *SymExpr::parse("b*s*96"));
}

TEST(Lower, SoftmaxIsMaxSumAndStorePasses) {
  EXPECT_EQ(lowered(model("17", "  input %x: f32[b, s, 64]\n",
                          R"(  %y: f32[b, s, 64] = tcc::Fusion(%x) {kind = "reduction", body = graph fused_0 {
      input %x_in: f32[b, s, 64]
      const %axes: i64[1] = [-1]
      %m: f32[b, s, 1] = ReduceMax(%x_in) {axes = [-1]} name("max")
      %d: f32[b, s, 64] = Sub(%x_in, %m) name("sub")
      %e: f32[b, s, 64] = Exp(%d) name("exp")
      %sum: f32[b, s, 1] = ReduceSum(%e, %axes) name("sum")
      %y_out: f32[b, s, 64] = Div(%e, %sum) name("div")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 reduction domain [b, s | 64] sizes(b, s)
  nodes max, sub, exp, sum, div
  buffer x: f32[b, s, 64] in
  buffer y: f32[b, s, 64] out
  %0: f32 = load x [s*64, 64, 1]
  %1: f32 row = reduce_max %0
  %2: f32 = sub %0, %1
  %3: f32 = exp %2
  %4: f32 row = reduce_sum %3
  %5: f32 = div %3, %4
  %6 = store y [s*64, 64, 1], %5
)");
}

TEST(Lower, LayerNorm) {
  EXPECT_EQ(lowered(model("17", "  input %x: f32[b, s, 768]\n  input %g: f32[768]\n  input %h: f32[768]\n",
                          R"(  %y: f32[b, s, 768] = tcc::Fusion(%x, %g, %h) {kind = "reduction", body = graph fused_0 {
      input %x_in: f32[b, s, 768]
      input %g_in: f32[768]
      input %h_in: f32[768]
      const %eps: f32[] = [1e-05]
      %mean: f32[b, s, 1] = ReduceMean(%x_in) {axes = [2]} name("mean")
      %d: f32[b, s, 768] = Sub(%x_in, %mean) name("center")
      %sq: f32[b, s, 768] = Mul(%d, %d) name("square")
      %var: f32[b, s, 1] = ReduceMean(%sq) {axes = [-1]} name("var")
      %ve: f32[b, s, 1] = Add(%var, %eps) name("add_eps")
      %sd: f32[b, s, 1] = Sqrt(%ve) name("sqrt")
      %n: f32[b, s, 768] = Div(%d, %sd) name("normalize")
      %gn: f32[b, s, 768] = Mul(%n, %g_in) name("scale")
      %y_out: f32[b, s, 768] = Add(%gn, %h_in) name("shift")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 reduction domain [b, s | 768] sizes(b, s)
  nodes mean, center, square, var, add_eps, sqrt, normalize, scale, shift
  buffer x: f32[b, s, 768] in
  buffer g: f32[768] in
  buffer h: f32[768] in
  buffer y: f32[b, s, 768] out
  %0: f32 = load x [s*768, 768, 1]
  %1: f32 row = reduce_sum %0
  %2: f32 row = const 768
  %3: f32 row = div %1, %2
  %4: f32 = sub %0, %3
  %5: f32 = mul %4, %4
  %6: f32 row = reduce_sum %5
  %7: f32 row = div %6, %2
  %8: f32 row = const 9.999999747378752e-06
  %9: f32 row = add %7, %8
  %10: f32 row = sqrt %9
  %11: f32 = div %4, %10
  %12: f32 = load g [0, 0, 1]
  %13: f32 = mul %11, %12
  %14: f32 = load h [0, 0, 1]
  %15: f32 = add %13, %14
  %16 = store y [s*768, 768, 1], %15
)");
}

TEST(Lower, ReduceMeanOverSymbolicAxisDividesBySize) {
  // Opset 18 takes axes as an input; the keepdims=0 max stores over the kept axes only.
  EXPECT_EQ(lowered(model("18", "  input %x: f32[b, s, 16]\n",
                          R"(  %y: f32[b, 1, 16], %z: f32[b, 16] = tcc::Fusion(%x) {kind = "reduction", body = graph fused_0 {
      input %x_in: f32[b, s, 16]
      const %axes: i64[1] = [1]
      %y_out: f32[b, 1, 16] = ReduceMean(%x_in, %axes) {keepdims = 1} name("mean")
      %z_out: f32[b, 16] = ReduceMax(%x_in, %axes) {keepdims = 0} name("max")
      output %y_out
      output %z_out
    }} name("fused_0")
)",
                          "  output %y\n  output %z\n")),
            R"(kernel tcc_k0 reduction domain [b, 16 | s] sizes(b, s)
  nodes mean, max
  buffer x: f32[b, s, 16] in
  buffer y: f32[b, 1, 16] out
  buffer z: f32[b, 16] out
  %0: f32 = load x [s*16, 1, 16]
  %1: f32 row = reduce_sum %0
  %2: f32 row = size s
  %3: f32 row = div %1, %2
  %4 row = store y [16, 1, 0], %3
  %5: f32 row = reduce_max %0
  %6 row = store z [16, 1, 0], %5
)");
}

TEST(Lower, GemmWithBiasAndReluFoldsBatchIntoM) {
  kir::Kernel k = lower_text(model("17", "  input %x: f32[b, s, 768]\n  input %w: f32[768, 3072]\n  input %bias: f32[3072]\n",
                                   R"(  %y: f32[b, s, 3072] = tcc::Fusion(%x, %w, %bias) {kind = "gemm", body = graph fused_0 {
      input %x_in: f32[b, s, 768]
      input %w_in: f32[768, 3072]
      input %bias_in: f32[3072]
      %mm: f32[b, s, 3072] = MatMul(%x_in, %w_in) name("fc")
      %t: f32[b, s, 3072] = Add(%mm, %bias_in) name("fc_bias")
      %y_out: f32[b, s, 3072] = Relu(%t) name("act")
      output %y_out
    }} name("fused_0")
)",
                                   "  output %y\n"));
  EXPECT_EQ(print_kernel(k), R"(kernel tcc_k0 gemm domain [b, s, 3072] sizes(b, s)
  nodes fc, fc_bias, act
  buffer x: f32[b, s, 768] in
  buffer w: f32[768, 3072] in
  buffer bias: f32[3072] in
  buffer y: f32[b, s, 3072] out
  gemm a=x b=w trans_a=0 trans_b=0 batch=1 m=b*s n=3072 k=768 lda=768 ldb=3072 ldd=3072 stride_a=0 stride_b=0 stride_d=0 alpha=1 beta=0 bias=bias residual=-1 activation=relu
  %0: f32 = matmul_acc
  %1: f32 = load bias [0, 0, 1]
  %2: f32 = add %0, %1
  %3: f32 = relu %2
  %4 = store y [s*3072, 3072, 1], %3
)");
  ASSERT_TRUE(k.gemm.has_value());
  const kir::GemmDesc& g = *k.gemm;
  EXPECT_EQ(g.a, 0);
  EXPECT_EQ(g.b, 1);
  EXPECT_EQ(g.bias, 2);
  EXPECT_EQ(g.residual, -1);
  EXPECT_EQ(g.activation, "relu");
  EXPECT_EQ(g.batch.str(), "1");
  EXPECT_EQ(g.m.str(), "b*s");
  EXPECT_EQ(g.n.str(), "3072");
  EXPECT_EQ(g.k.str(), "768");
  EXPECT_EQ(g.lda.str(), "768");
  EXPECT_EQ(g.ldb.str(), "3072");
  EXPECT_EQ(g.ldd.str(), "3072");
  EXPECT_FALSE(g.trans_a);
  EXPECT_FALSE(g.trans_b);
  EXPECT_EQ(g.alpha, 1.0);
  EXPECT_EQ(g.beta, 0.0);
}

TEST(Lower, ConvWithBiasResidualAndRelu) {
  kir::Kernel k = lower_text(model("17", "  input %x: f32[b, 6, 7, 6]\n  input %w: f32[4, 3, 3, 3]\n  input %bias: f32[4]\n"
                                   "  input %r: f32[b, 4, 4, 2]\n",
                                   R"(  %y: f32[b, 4, 4, 2] = tcc::Fusion(%x, %w, %bias, %r) {kind = "conv", body = graph fused_0 {
      input %x_in: f32[b, 6, 7, 6]
      input %w_in: f32[4, 3, 3, 3]
      input %bias_in: f32[4]
      input %r_in: f32[b, 4, 4, 2]
      %c: f32[b, 4, 4, 2] = Conv(%x_in, %w_in, %bias_in) {group = 2, strides = [2, 3], dilations = [1, 2], pads = [1, 1, 1, 1]} name("conv")
      %s: f32[b, 4, 4, 2] = Add(%r_in, %c) name("residual")
      %y_out: f32[b, 4, 4, 2] = Relu(%s) name("relu")
      output %y_out
    }} name("fused_0")
)",
                                   "  output %y\n"));
  EXPECT_EQ(print_kernel(k), R"(kernel tcc_k0 conv domain [b, 4, 4, 2] sizes(b)
  nodes conv, residual, relu
  buffer x: f32[b, 6, 7, 6] in
  buffer w: f32[4, 3, 3, 3] in
  buffer bias: f32[4] in
  buffer r: f32[b, 4, 4, 2] in
  buffer y: f32[b, 4, 4, 2] out
  conv x=x w=w n=b c=6 k=4 in=[7, 6] out=[4, 2] kernel=[3, 3] strides=[2, 3] dilations=[1, 2] pads=[1, 1] groups=2 bias=bias residual=r activation=relu
  %0: f32 = conv_acc
  %1: f32 = load bias [0, 1, 0, 0]
  %2: f32 = add %0, %1
  %3: f32 = load r [32, 8, 2, 1]
  %4: f32 = add %3, %2
  %5: f32 = relu %4
  %6 = store y [32, 8, 2, 1], %5
)");
  // Identical layers share a kernel: names do not enter the key, the window does.
  kir::Kernel renamed = k;
  renamed.buffers[0].name = "other";
  EXPECT_EQ(structural_key(k), structural_key(renamed));
  kir::Kernel strided = k;
  strided.conv->strides[0] = 1;
  EXPECT_NE(structural_key(k), structural_key(strided));
  // 2 flop per tap and input channel of the group (2*9*3), and 3 epilogue ops, at each of b*32 output points.
  EXPECT_EQ(flop_count(k).str(), "b*1824");
}

TEST(Lower, Conv1dTakesABiasAddPerChannel) {
  lower_text(model("17", "  input %x: f32[2, 3, 9]\n  input %w: f32[5, 3, 2]\n  input %cb: f32[1, 5, 1]\n",
                   R"(  %y: f32[2, 5, 8] = tcc::Fusion(%x, %w, %cb) {kind = "conv", body = graph fused_0 {
      input %x_in: f32[2, 3, 9]
      input %w_in: f32[5, 3, 2]
      input %cb_in: f32[1, 5, 1]
      %c: f32[2, 5, 8] = Conv(%x_in, %w_in) name("conv")
      %y_out: f32[2, 5, 8] = Add(%c, %cb_in) name("bias")
      output %y_out
    }} name("fused_0")
)",
                   "  output %y\n"));
}

TEST(Lower, BatchedMatMulBroadcastsTheSharedOperand) {
  // A has no batch dims: it is shared by every batch of B (stride 0); the residual is C.
  EXPECT_EQ(lowered(model("17", "  input %a: f32[s, 64]\n  input %w: f32[b, 64, 32]\n  input %r: f32[b, s, 32]\n",
                          R"(  %y: f32[b, s, 32] = tcc::Fusion(%a, %w, %r) {kind = "gemm", body = graph fused_0 {
      input %a_in: f32[s, 64]
      input %w_in: f32[b, 64, 32]
      input %r_in: f32[b, s, 32]
      %mm: f32[b, s, 32] = MatMul(%a_in, %w_in) name("mm")
      %y_out: f32[b, s, 32] = Add(%r_in, %mm) name("residual")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 gemm domain [b, s, 32] sizes(b, s)
  nodes mm, residual
  buffer a: f32[s, 64] in
  buffer w: f32[b, 64, 32] in
  buffer r: f32[b, s, 32] in
  buffer y: f32[b, s, 32] out
  gemm a=a b=w trans_a=0 trans_b=0 batch=b m=s n=32 k=64 lda=64 ldb=32 ldd=32 stride_a=0 stride_b=2048 stride_d=s*32 alpha=1 beta=1 bias=-1 residual=r activation=none
  %0: f32 = matmul_acc
  %1: f32 = load r [s*32, 32, 1]
  %2: f32 = add %1, %0
  %3 = store y [s*32, 32, 1], %2
)");
}

TEST(Lower, GemmTransposedWithScaledResidual) {
  EXPECT_EQ(lowered(model("17", "  input %a: f32[64, m]\n  input %w: f32[32, 64]\n  input %c: f32[m, 32]\n",
                          R"(  %y: f32[m, 32] = tcc::Fusion(%a, %w, %c) {kind = "gemm", body = graph fused_0 {
      input %a_in: f32[64, m]
      input %w_in: f32[32, 64]
      input %c_in: f32[m, 32]
      %y_out: f32[m, 32] = Gemm(%a_in, %w_in, %c_in) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1} name("gemm")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 gemm domain [m, 32] sizes(m)
  nodes gemm
  buffer a: f32[64, m] in
  buffer w: f32[32, 64] in
  buffer c: f32[m, 32] in
  buffer y: f32[m, 32] out
  gemm a=a b=w trans_a=1 trans_b=1 batch=1 m=m n=32 k=64 lda=m ldb=64 ldd=32 stride_a=0 stride_b=0 stride_d=0 alpha=0.5 beta=2 bias=-1 residual=c activation=none
  %0: f32 = matmul_acc
  %1: f32 = const 0.5
  %2: f32 = mul %0, %1
  %3: f32 = load c [32, 1]
  %4: f32 = const 2
  %5: f32 = mul %3, %4
  %6: f32 = add %2, %5
  %7 = store y [32, 1], %6
)");
}

TEST(Lower, HalfCastsAndErfGelu) {
  EXPECT_EQ(lowered(model("20", "  input %x: f16[n]\n",
                          R"(  %y: f16[n] = tcc::Fusion(%x) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f16[n]
      %xf: f32[n] = Cast(%x_in) {to = 1} name("up")
      %g: f32[n] = Gelu(%xf) name("gelu")
      %y_out: f16[n] = Cast(%g) {to = 10} name("down")
      output %y_out
    }} name("fused_0")
)",
                          "  output %y\n")),
            R"(kernel tcc_k0 pointwise domain [n] sizes(n)
  nodes up, gelu, down
  buffer x: f16[n] in
  buffer y: f16[n] out
  %0: f16 = load x [1]
  %1: f32 = cast %0
  %2: f32 = const 1.4142135623730951
  %3: f32 = div %1, %2
  %4: f32 = erf %3
  %5: f32 = const 0.5
  %6: f32 = mul %5, %1
  %7: f32 = const 1
  %8: f32 = add %7, %4
  %9: f32 = mul %6, %8
  %10: f16 = cast %9
  %11 = store y [1], %10
)");
}

TEST(Lower, CompositeOpsAndViewsComputeWhatTheInterpreterDoes) {
  kir::Kernel k = lower_text(model("20", "  input %x: f32[n, 4]\n  input %v: f32[4]\n  input %w: f32[n, 1]\n",
                                   R"(  %y: f32[n, 4], %z: f32[n, 4] = tcc::Fusion(%x, %v, %w) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f32[n, 4]
      input %v_in: f32[4]
      input %w_in: f32[n, 1]
      const %lo: f32[] = [-0.5]
      const %hi: f32[] = [0.8]
      const %zero: f32[] = [0.0]
      const %ax: i64[1] = [0]
      const %shape: i64[2] = [1, 4]
      %vu: f32[1, 4] = Unsqueeze(%v_in, %ax) name("unsqueeze")
      %we: f32[n, 4] = Expand(%w_in, %shape) name("expand")
      %a: f32[n, 4] = Softplus(%x_in) name("softplus")
      %b: f32[n, 4] = HardSigmoid(%x_in) {alpha = 0.3, beta = 0.4} name("hardsigmoid")
      %c: f32[n, 4] = LeakyRelu(%x_in) {alpha = 0.1} name("leakyrelu")
      %d: f32[n, 4] = Elu(%x_in) {alpha = 0.7} name("elu")
      %e: f32[n, 4] = Clip(%x_in, %lo, %hi) name("clip")
      %f: f32[n, 4] = Gelu(%x_in) {approximate = "tanh"} name("gelu")
      %g: f32[n, 4] = Mod(%x_in, %vu) {fmod = 1} name("fmod")
      %p: bool[n, 4] = Greater(%we, %zero) name("positive")
      %q: f32[n, 4] = Where(%p, %a, %b) name("where")
      %r: f32[n, 4] = Add(%c, %d) name("add0")
      %t: f32[n, 4] = Sub(%e, %f) name("sub")
      %u: f32[n, 4] = Mul(%r, %t) name("mul")
      %y_out: f32[n, 4] = Sigmoid(%q) name("sigmoid")
      %z_out: f32[n, 4] = Add(%u, %g) name("add1")
      output %y_out
      output %z_out
    }} name("fused_0")
)",
                                   "  output %y\n  output %z\n"));
  EXPECT_EQ(k.buffers.size(), 5u);
}

TEST(Lower, StructuralKeyIgnoresNames) {
  auto text = [](const std::string& x, const std::string& node) {
    return model("17", "  input %" + x + ": f32[b, 8]\n",
                 "  %" + x + "_y: f32[b, 8] = tcc::Fusion(%" + x + ") {kind = \"pointwise\", body = graph f {\n"
                 "      input %" + x + "_in: f32[b, 8]\n"
                 "      %" + x + "_out: f32[b, 8] = Exp(%" + x + "_in) name(\"" + node + "\")\n"
                 "      output %" + x + "_out\n"
                 "    }} name(\"" + node + "_fusion\")\n",
                 "  output %" + x + "_y\n");
  };
  kir::Kernel a = lower_text(text("p", "layer0")), b = lower_text(text("q", "layer1"));
  b.name = "other";
  EXPECT_NE(print_kernel(a), print_kernel(b));
  EXPECT_EQ(structural_key(a), structural_key(b));
}

TEST(Lower, SizesAndCosts) {
  kir::Kernel k = lower_text(model("17", "  input %x: f32[b, s, 64]\n",
                                   R"(  %y: f32[b, s, 1] = tcc::Fusion(%x) {kind = "reduction", body = graph fused_0 {
      input %x_in: f32[b, s, 64]
      %e: f32[b, s, 64] = Exp(%x_in) name("exp")
      %y_out: f32[b, s, 1] = ReduceMean(%e) {axes = [-1]} name("mean")
      output %y_out
    }} name("fused_0")
)",
                                   "  output %y\n"));
  EXPECT_EQ(kir::domain_size(k).str(), "b*s*64");
  EXPECT_EQ(kir::row_count(k).str(), "b*s");
  EXPECT_EQ(kir::row_length(k).str(), "64");
  EXPECT_EQ(kir::bytes_moved(k).str(), "b*s*260");
  // exp and the sum per element, the division per row.
  EXPECT_EQ(kir::flop_count(k).str(), "b*s*129");
}

// Bodies the fusion pass must not form: the lowering says which node is wrong.
void expect_rejected(const std::string& text, const std::string& why) {
  try {
    lower_text(text);
    ADD_FAILURE() << "lowered a body it should reject (" << why << ")";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

TEST(Lower, RejectsWhatKernelsCannotExpress) {
  expect_rejected(model("17", "  input %x: f32[4]\n",
                        R"(  %y: f32[4] = tcc::Fusion(%x) {kind = "pointwise", body = graph fused_0 {
      input %x_in: f32[4]
      const %w: f32[4] = [1.0, 2.0, 3.0, 4.0]
      %y_out: f32[4] = Mul(%x_in, %w) name("mul")
      output %y_out
    }} name("fused_0")
)",
                        "  output %y\n"),
                  "constant 'w' is not one repeated value");
  expect_rejected(model("17", "  input %x: f32[8, 16]\n  input %w: f32[16, 4]\n  input %r: f32[8, 4]\n",
                        R"(  %y: f32[8, 4] = tcc::Fusion(%x, %w, %r) {kind = "gemm", body = graph fused_0 {
      input %x_in: f32[8, 16]
      input %w_in: f32[16, 4]
      input %r_in: f32[8, 4]
      %mm: f32[8, 4] = MatMul(%x_in, %w_in) name("mm")
      %a: f32[8, 4] = Relu(%mm) name("relu")
      %y_out: f32[8, 4] = Add(%a, %r_in) name("residual")
      output %y_out
    }} name("fused_0")
)",
                        "  output %y\n"),
                  "body node 'residual' (Add): adds after the activation");
  expect_rejected(model("17", "  input %x: f32[b, h, 8, 16]\n  input %w: f32[h, 16, 4]\n",
                        R"(  %y: f32[b, h, 8, 4] = tcc::Fusion(%x, %w) {kind = "gemm", body = graph fused_0 {
      input %x_in: f32[b, h, 8, 16]
      input %w_in: f32[h, 16, 4]
      %y_out: f32[b, h, 8, 4] = MatMul(%x_in, %w_in) name("mm")
      output %y_out
    }} name("fused_0")
)",
                        "  output %y\n"),
                  "body node 'mm' (MatMul) is not an op generated kernels compute");  // kernel_role: strided_batches
  expect_rejected(model("17", "  input %x: f32[8, 16]\n  input %w: f32[16, 4]\n  input %c: f32[1]\n",
                        R"(  %y: f32[8, 4] = tcc::Fusion(%x, %w, %c) {kind = "gemm", body = graph fused_0 {
      input %x_in: f32[8, 16]
      input %w_in: f32[16, 4]
      input %c_in: f32[1]
      %y_out: f32[8, 4] = Gemm(%x_in, %w_in, %c_in) name("gemm")
      output %y_out
    }} name("fused_0")
)",
                        "  output %y\n"),
                  "body node 'gemm' (Gemm): adds 'c_in', which is broadcast along N");
}

}  // namespace
}  // namespace tcc
