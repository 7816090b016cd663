// Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// and the integer and quantized contractions QLinearMatMul, QLinearConv and
// ConvInteger (MatMulInteger lives with MatMul in linalg.cc).
//
// A quantized value is q = saturate(round_half_even(x / scale) + zero_point),
// x = (q - zero_point) * scale. tcc models the integer targets int8, uint8,
// int16 and uint16, int4 and uint4 (opset 21), and the 8-bit floats (opset 19)
// and float4e2m1 (opset 23), which take x / scale without rounding it to an
// integer. The 8-bit floats' zero point must be zero and is not added;
// float4e2m1 adds its own (a float4e2m1 value), as the formula and ONNX's
// reference do, and DequantizeLinear subtracts it, as the formula says (the
// reference leaves it out there). Saturation is the store
// into the target: Tensor::set_f64 and the kernels' Cast clamp to the dtype's
// range (integers' NaN to 0), except for int4 and uint4, which a cast wraps
// as ONNX's Cast tests expect, so their quantization clamps first;
// `saturate`=0 (8-bit floats only) takes out-of-range values to infinity or NaN
// instead (cast_to_fp8); float4e2m1 has neither, and always saturates. Kernels
// follow the ONNX reference's arithmetic: QuantizeLinear divides in the
// scale's precision, DequantizeLinear multiplies in float32, and the quantized
// contractions accumulate exactly and requantize with the multiplier
// a_scale * b_scale / y_scale computed in the scales' dtype.
// Nothing here is differentiable: quantization is piecewise constant.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/int8_product.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

bool is_ranked(const Type& t) { return t.is_tensor() && t.has_rank(); }

std::string name_of(DType t) { return std::string(dtype_name(t)); }

bool is_quantized_type(DType t) {
  return t == DType::I8 || t == DType::U8 || t == DType::I16 || t == DType::U16 || is_fp8(t) || is_4bit(t);
}

// The range QuantizeLinear clamps a 4-bit integer to.
std::pair<double, double> int4_range(DType t) {
  return t == DType::I4 ? std::pair{-8.0, 7.0} : std::pair{0.0, 15.0};
}

// A float dtype given by an attribute holding an ONNX type number (0: unset).
std::optional<DType> float_attr(const Node& n, const std::string& attr) {
  int64_t v = n.get_int(attr, 0);
  if (v == 0) return std::nullopt;
  std::optional<DType> t = dtype_from_onnx(static_cast<int32_t>(v));
  if (!t || (*t != DType::F32 && *t != DType::F16 && *t != DType::BF16))
    n.fail("expected " + attr + " float, float16 or bfloat16 (ONNX 1, 10, 16), got " + std::to_string(v));
  return t;
}

// QuantizeLinear's output type: output_dtype (opset 21), else the zero
// point's, else uint8; both given, they must agree.
DType quantized_type(const Node& n, DType zero_point) {
  int64_t attr = n.opset() >= 21 ? n.get_int("output_dtype", 0) : 0;
  DType t = zero_point != DType::Undefined ? zero_point : DType::U8;
  if (attr != 0) {
    std::optional<DType> a = dtype_from_onnx(static_cast<int32_t>(attr));
    if (!a || !is_quantized_type(*a))
      n.fail("expected output_dtype int8, uint8, int16, uint16, an 8-bit float, uint4, int4 or float4e2m1 "
             "(ONNX 3, 2, 5, 4, 17-20, 21, 22, 23), got " + std::to_string(attr));
    if (zero_point != DType::Undefined && zero_point != *a)
      n.fail("output_dtype " + name_of(*a) + " disagrees with the zero point's " + name_of(zero_point));
    t = *a;
  }
  if (!is_quantized_type(t))
    n.fail("expected an int8, uint8, int16, uint16, 8-bit float, int4, uint4 or f4e2m1 zero point, got " +
           name_of(t));
  return t;
}

// The dtype QuantizeLinear divides in: precision (opset 23), else the
// scale's (double for an int32 scale, as numpy divides integers).
DType division_type(const Node& n, DType scale) {
  if (n.opset() >= 23)
    if (std::optional<DType> p = float_attr(n, "precision")) return *p;
  return is_float(scale) ? scale : DType::F64;
}

// DequantizeLinear's output type: output_dtype (opset 23), else the scale's.
DType dequantized_type(const Node& n, DType scale) {
  if (n.opset() >= 23)
    if (std::optional<DType> t = float_attr(n, "output_dtype")) return *t;
  return scale;
}

int64_t block_size(const Node& n) {
  int64_t b = n.opset() >= 21 ? n.get_int("block_size", 0) : 0;
  if (b < 0) n.fail("expected a positive block_size (0: not blocked), got " + std::to_string(b));
  return b;
}

// ---------------------------------------------------------------------------
// How the elements of x (QuantizeLinear's and DequantizeLinear's input 0) find
// their scale (input 1) and zero point (input 2, of the scale's shape): one for
// the tensor (a scale of one element), one per index along `axis` (a 1-D
// scale as long as x's dim there), or, with block_size B (opset 21), one per
// block of B along `axis` (the scale has x's shape but ceil(D / B) there).

struct ScaleLayout {
  bool per_tensor = true;
  int64_t axis = 0;
  int64_t block = 0;  // 0: per tensor or per axis
};

// Two dims that cannot be equal: both static and different.
bool differ(const Dim& a, const Dim& b) { return a.is_static() && b.is_static() && a.value() != b.value(); }

// Whether two shapes may be equal: the same rank and no dims that differ.
bool may_equal(const Dims& a, const Dims& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (differ(a[i], b[i])) return false;
  return true;
}

// The layout of a scale of shape s over x of shape x (symbolic in shape rules,
// static in kernels); fails naming n when s or the zero point's shape zp
// (null when absent) fits none. A scale of one element is per tensor, blocked
// or not, as in the ONNX reference, with a zero point of one element of any
// rank (ONNX's opset 23 tests give a [1] one beside a scalar scale).
ScaleLayout scale_layout(const Node& n, const Dims& x, const Dims& s, const Dims* zp) {
  auto one_element = [](const Dims& d) {
    return std::all_of(d.begin(), d.end(), [](const Dim& e) { return e.is_static() && e.value() == 1; });
  };
  if (zp && !may_equal(*zp, s) && !(one_element(*zp) && one_element(s)))
    n.fail("expected the zero point to have the scale's shape " + dims_str(s) + ", got " + dims_str(*zp));
  ScaleLayout l;
  l.block = block_size(n);
  if (one_element(s)) return l;
  if (l.block == 0) {
    if (s.size() > 1)
      n.fail("expected a scalar or 1-D scale (per tensor or per axis; blocked needs block_size), got " + dims_str(s));
    l.per_tensor = false;
    l.axis = normalize_axis(n, n.get_int("axis", 1), static_cast<int64_t>(x.size()));
    if (differ(s[0], x[l.axis]))
      n.fail("expected a scale of one element or " + x[l.axis].str() + " (x's dim along axis " +
             std::to_string(l.axis) + "), got " + dims_str(s));
    return l;
  }
  l.per_tensor = false;
  if (s.size() != x.size())
    n.fail("blocked quantization: expected a scale of x's rank " + std::to_string(x.size()) + ", got " + dims_str(s));
  l.axis = normalize_axis(n, n.get_int("axis", 1), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    bool on_axis = static_cast<int64_t>(i) == l.axis;
    if (!on_axis && differ(s[i], x[i]))
      n.fail("blocked quantization: expected the scale " + dims_str(s) + " to match x " + dims_str(x) +
             " but along axis " + std::to_string(l.axis));
    if (on_axis && x[i].is_static() && s[i].is_static() && (x[i].value() + l.block - 1) / l.block != s[i].value())
      n.fail("blocked quantization: " + std::to_string(s[i].value()) + " blocks of " + std::to_string(l.block) +
             " do not cover x's " + std::to_string(x[i].value()) + " elements along axis " + std::to_string(l.axis));
  }
  return l;
}

// Maps a flat index of x to the flat index of its scale and zero point.
class ScaleIndex {
 public:
  ScaleIndex(const ScaleLayout& l, const std::vector<int64_t>& x, const std::vector<int64_t>& s)
      : per_tensor_(l.per_tensor), block_(l.block) {
    if (per_tensor_) return;
    inner_ = product(x, l.axis + 1);
    extent_ = x[l.axis];
    blocks_ = s[l.axis];
  }
  int64_t operator()(int64_t i) const {
    if (per_tensor_) return 0;
    int64_t a = (i / inner_) % extent_;
    if (block_ == 0) return a;
    int64_t outer = i / (inner_ * extent_);
    return (outer * blocks_ + a / block_) * inner_ + i % inner_;
  }

 private:
  bool per_tensor_;
  int64_t block_, inner_ = 1, extent_ = 1, blocks_ = 1;
};

ScaleIndex scale_index(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  Dims zp = ctx.has_input(2) ? dims_of(ctx.input(2).shape()) : Dims{};
  ScaleLayout l = scale_layout(ctx.node(), dims_of(x.shape()), dims_of(s.shape()), ctx.has_input(2) ? &zp : nullptr);
  return ScaleIndex(l, x.shape(), s.shape());
}

// The output of QuantizeLinear or DequantizeLinear: dtype `out`, x's shape,
// once the scale's and zero point's shapes check out against x's.
void infer_quantize_like(InferContext& ctx, DType out) {
  const Type& x = ctx.input_type(0);
  const Type& s = ctx.input_type(1);
  const Type& zp = ctx.input_type(2);
  if (!is_ranked(x)) {
    ctx.set_output_type(0, Type::tensor_unranked(out));
    return;
  }
  if (is_ranked(s) && (!ctx.has_input(2) || is_ranked(zp)))
    scale_layout(ctx.node(), x.shape(), s.shape(), ctx.has_input(2) ? &zp.shape() : nullptr);
  ctx.set_output_type(0, Type::tensor(out, x.shape()));
}

// ---------------------------------------------------------------------------
// QuantizeLinear: y = saturate(round_half_even(x / scale) + zero_point).

void infer_quantize(InferContext& ctx) {
  DType out = quantized_type(ctx.node(), input_dtype(ctx, 2));
  division_type(ctx.node(), input_dtype(ctx, 1));  // refuses a precision that is no float type
  infer_quantize_like(ctx, out);
}

std::vector<Tensor> eval_quantize(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  DType out = quantized_type(ctx.node(), zp ? zp->dtype() : DType::Undefined);
  DType div = division_type(ctx.node(), s.dtype());
  ScaleIndex at = scale_index(ctx);
  Tensor y(out, x.shape());
  const bool saturate = ctx.node().get_int("saturate", 1) != 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = at(i);
    double q = rounded(rounded(x.get_f64(i), div) / rounded(s.get_f64(k), div), div);
    if (is_fp8(out)) {
      y.data_mut<uint8_t>()[i] = float_to_fp8(static_cast<float>(q), out, saturate);
      continue;
    }
    if (out == DType::F4E2M1) {
      // + zero_point in the kernels' accumulator: float64 for a float64 division, else float32.
      if (zp && div == DType::F64) q += zp->get_f64(k);
      else if (zp) q = static_cast<float>(q) + static_cast<float>(zp->get_f64(k));
    } else {
      q = std::nearbyint(q);
      if (zp) q += static_cast<double>(zp->get_i64(k));
      if (out == DType::I4 || out == DType::U4) q = std::clamp(q, int4_range(out).first, int4_range(out).second);
    }
    y.set_f64(i, q);
  }
  return {y};
}

// ---------------------------------------------------------------------------
// DequantizeLinear: y = (x - zero_point) * scale, in float32.

void infer_dequantize(InferContext& ctx) {
  DType x = input_dtype(ctx, 0);
  DType zp = input_dtype(ctx, 2);
  if (zp != DType::Undefined && x != DType::Undefined && zp != x)
    ctx.fail("expected a zero point of x's type " + name_of(x) + ", got " + name_of(zp));
  infer_quantize_like(ctx, dequantized_type(ctx.node(), input_dtype(ctx, 1)));
}

std::vector<Tensor> eval_dequantize(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& s = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  ScaleIndex at = scale_index(ctx);
  Tensor y(dequantized_type(ctx.node(), s.dtype()), x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = at(i);
    float d = static_cast<float>(x.get_f64(i)) - (zp ? static_cast<float>(zp->get_f64(k)) : 0.0f);
    y.set_f64(i, d * static_cast<float>(s.get_f64(k)));
  }
  return {y};
}

// ---------------------------------------------------------------------------
// Kernel expressions of QuantizeLinear and DequantizeLinear. A pointwise
// kernel reads each input at the point, broadcasting NumPy-style, so a scale
// and zero point line up with x when they have one element, run along x's
// last axis, or have x's shape (blocks of 1). Other per-axis and blocked
// layouts (opset 21 on) decompose into blocks of 1 (below); before opset 21,
// which has no blocks, a per-axis one along another axis runs on the host.

bool lines_up_pointwise(const Node& n) {
  int64_t block = block_size(n);
  if (block > 1) return false;
  const Type& x = n.input(0)->type();
  int64_t rank = static_cast<int64_t>(x.rank());
  for (size_t i = 1; i < 3; ++i) {
    const Value* v = n.input(i);
    if (v == nullptr) continue;
    if (v->type().rank() > x.rank()) return false;
    if (!single_element(v->type()) && block == 0 && normalize_axis(n, n.get_int("axis", 1), rank) != rank - 1)
      return false;
  }
  return true;
}

// QuantizeLinear or DequantizeLinear whose scale and zero point do not line
// up with x -> the same op over them spread to x's shape, in blocks of 1:
// a per-axis [D] viewed as [D, 1, ...] and expanded, a blocked one's blocks
// gathered along the axis (index k / B at k). Needs opset 21 (blocks), x's
// dims known and the axis's static.
bool decompose_scale_layout(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& s = n.input(1)->type();
  if (n.opset() < 21 || lines_up_pointwise(n) || !is_ranked(x) || !x.fully_shaped() || !is_ranked(s)) return false;
  const Dims zp = n.has_input(2) && is_ranked(n.input(2)->type()) ? n.input(2)->type().shape() : s.shape();
  ScaleLayout l = scale_layout(n, x.shape(), s.shape(), &zp);
  const size_t axis = static_cast<size_t>(l.axis);
  const Dim& extent = x.shape()[axis];
  if (!extent.is_static()) return false;
  auto spread = [&](size_t i, const std::string& tag) -> Value* {
    Value* v = n.input(i);
    if (l.per_tensor) return v;
    if (l.block == 0) {
      Dims along(x.rank() - axis, Dim(1));
      along[0] = extent;
      return e.expand("Expand_" + tag, e.reshape("Reshape_" + tag, v, along), x.shape());
    }
    std::vector<int64_t> block_of(static_cast<size_t>(extent.value()));
    for (size_t k = 0; k < block_of.size(); ++k) block_of[k] = static_cast<int64_t>(k) / l.block;
    return e.add("Gather_" + tag, "Gather", {v, e.i64s("blocks_" + tag, block_of)},
                 Type::tensor(v->type().dtype(), x.shape()), {{"axis", Attribute::of_int(l.axis)}});
  };
  std::vector<Value*> ins = {n.input(0), spread(1, "scale")};
  if (n.has_input(2)) ins.push_back(spread(2, "zero_point"));
  std::map<std::string, Attribute> attrs(n.attrs().begin(), n.attrs().end());
  attrs["block_size"] = Attribute::of_int(1);
  const std::string op = n.op_type();  // finish erases n before building the node
  e.finish("", op, ins, std::move(attrs));
  return true;
}

DType input_type_of(const Node& n, size_t i) { return n.input(i)->type().dtype(); }

int cast(ScalarBuilder& b, int v, DType from, DType to) { return from == to ? v : b.op(ScalarOp::Cast, to, {v}); }

// v (of dtype `from`) rounded to dtype `through`, as a value of dtype `to`.
int round_through(ScalarBuilder& b, int v, DType from, DType through, DType to) {
  return cast(b, cast(b, v, from, through), through, to);
}

// x / scale in the division's dtype, then round_half_even (not for float4e2m1)
// and + zero_point in float32 (float64 for a float64 division), then the saturating cast to the
// target. Kernels keep f16 and bf16 values in float32 between instructions, so
// a float16 division is one in float32 rounded to float16, which is exact
// (float32 holds more than twice float16's digits).
int quantize_expr(const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
  DType div = division_type(n, input_type_of(n, 1));
  DType acc = div == DType::F64 ? DType::F64 : DType::F32;
  int x = round_through(b, in[0], input_type_of(n, 0), div, acc);
  int s = round_through(b, in[1], input_type_of(n, 1), div, acc);
  int q = round_through(b, b.op(ScalarOp::Div, acc, {x, s}), acc, div, acc);
  const DType out = n.output(0)->type().dtype();
  if (is_fp8(out)) return cast_to_fp8(b, q, acc, out, n.get_int("saturate", 1) != 0);
  const bool zero_point = in.size() > 2 && in[2] >= 0;
  if (out != DType::F4E2M1) q = b.op(ScalarOp::Round, acc, {q});
  if (zero_point) q = b.op(ScalarOp::Add, acc, {q, cast(b, in[2], input_type_of(n, 2), acc)});
  if (out == DType::F4E2M1) return cast(b, q, acc, out);
  if (out == DType::I4 || out == DType::U4) {
    const auto [lo, hi] = int4_range(out);
    q = b.op(ScalarOp::Min, acc, {b.op(ScalarOp::Max, acc, {q, b.constant(acc, lo)}), b.constant(acc, hi)});
  }
  return cast(b, q, acc, out);
}

int dequantize_expr(const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
  int d = cast(b, in[0], input_type_of(n, 0), DType::F32);
  if (in.size() > 2 && in[2] >= 0)
    d = b.op(ScalarOp::Sub, DType::F32, {d, cast(b, in[2], input_type_of(n, 2), DType::F32)});
  int y = b.op(ScalarOp::Mul, DType::F32, {d, cast(b, in[1], input_type_of(n, 1), DType::F32)});
  return cast(b, y, DType::F32, n.output(0)->type().dtype());
}

// ---------------------------------------------------------------------------
// DynamicQuantizeLinear: uint8 quantization with the scale and zero point
// that map [min(x, 0), max(x, 0)] onto [0, 255], in float32. An all-zero x
// takes the scale 1 / 255, as the ONNX reference does.

void infer_dynamic_quantize(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  ctx.set_output_type(0, is_ranked(x) ? Type::tensor(DType::U8, x.shape()) : Type::tensor_unranked(DType::U8));
  ctx.set_output_type(1, Type::tensor(DType::F32, {}));
  ctx.set_output_type(2, Type::tensor(DType::U8, {}));
}

std::vector<Tensor> eval_dynamic_quantize(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  float mx = 0, mn = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = static_cast<float>(x.get_f64(i));
    mx = std::fmax(mx, v);
    mn = std::fmin(mn, v);
  }
  float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
  float zp = std::nearbyint(std::fmin(std::fmax(-mn / scale, 0.0f), 255.0f));
  Tensor y(DType::U8, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    y.set_f64(i, std::nearbyint(static_cast<float>(x.get_f64(i)) / scale) + zp);
  Tensor s(DType::F32, {}), z(DType::U8, {});
  s.set_f64(0, scale);
  z.set_f64(0, zp);
  return {y, s, z};
}

// ---------------------------------------------------------------------------
// Quantized contractions. An exact integer accumulator acc becomes
// saturate(round_half_even(acc * multiplier) + y_zero_point), saturated where
// it is stored.

// Input i as one value per index 0..extent-1 (or one value for all); fails
// naming the node on another length.
void require_length(const EvalContext& ctx, size_t i, int64_t extent, const std::string& what) {
  int64_t len = ctx.input(i).numel();
  if (len != 1 && len != extent)
    ctx.fail("expected " + what + " of one element or " + std::to_string(extent) + ", got shape " +
             shape_str(ctx.input(i).shape()));
}

double requantize(double acc, double multiplier, double zero_point) {
  return std::nearbyint(acc * multiplier) + zero_point;
}

// Requires the zero point at input zi to have the type of the tensor at xi.
void require_zero_point_type(InferContext& ctx, size_t xi, size_t zi) {
  DType x = input_dtype(ctx, xi), zp = input_dtype(ctx, zi);
  if (x != DType::Undefined && zp != DType::Undefined && x != zp)
    ctx.fail("expected input " + std::to_string(zi) + " (a zero point) of input " + std::to_string(xi) + "'s type " +
             name_of(x) + ", got " + name_of(zp));
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
// y_zero_point): a's scale and zero point are per tensor or per row, b's per
// tensor or per column, y's per tensor.
void infer_qlinear_matmul(InferContext& ctx) {
  require_zero_point_type(ctx, 0, 2);
  require_zero_point_type(ctx, 3, 5);
  require_one_dtype(ctx, 1, {4, 6});
  DType out = input_dtype(ctx, 7);
  if (!is_ranked(ctx.input_type(0)) || !is_ranked(ctx.input_type(3))) ctx.set_output_type(0, Type::tensor_unranked(out));
  else ctx.set_output_type(0, Type::tensor(out, matmul_dims(ctx, 0, 3)));
}

std::vector<Tensor> eval_qlinear_matmul(EvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  int64_t ra = row_axis(a), cb = column_axis(b);
  int64_t rows = ra >= 0 ? a.shape()[ra] : 1, cols = cb >= 0 ? b.shape()[cb] : 1;
  require_length(ctx, 1, rows, "a_scale (per row)");
  require_length(ctx, 4, cols, "b_scale (per column)");
  require_length(ctx, 6, 1, "y_scale");
  require_length(ctx, 7, 1, "y_zero_point");
  Tensor acc = matmul_compute(ctx.node(), subtract_zero_point(ctx, 0, 2, ra), subtract_zero_point(ctx, 3, 5, cb),
                              DType::I64);
  const Tensor &as = ctx.input(1), &bs = ctx.input(4), &ys = ctx.input(6), &yz = ctx.input(7);
  DType st = as.dtype();
  Tensor y(yz.dtype(), acc.shape());
  for (int64_t o = 0; o < acc.numel(); ++o) {
    int64_t j = o % cols, i = (o / cols) % rows;
    double m = rounded(rounded(as.get_f64(as.numel() == 1 ? 0 : i) * bs.get_f64(bs.numel() == 1 ? 0 : j), st) /
                           ys.get_f64(0), st);
    y.set_f64(o, requantize(acc.get_f64(o), m, yz.get_f64(0)));
  }
  return {y};
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B): w's scale and zero point are per tensor or per output
// channel, the others per tensor; B is int32 at scale x_scale * w_scale.
void infer_qlinear_conv(InferContext& ctx) {
  require_zero_point_type(ctx, 0, 2);
  require_zero_point_type(ctx, 3, 5);
  ctx.set_output_type(0, Type::tensor(input_dtype(ctx, 7), conv_dims(ctx, 0, 3)));
}

std::vector<Tensor> eval_qlinear_conv(EvalContext& ctx) {
  int64_t m = ctx.input(3).rank() ? ctx.input(3).shape()[0] : 1;
  for (size_t i : {1, 2, 6, 7}) require_length(ctx, i, 1, "input " + std::to_string(i));
  require_length(ctx, 4, m, "w_scale (per output channel)");
  Tensor acc = conv_compute(ctx, subtract_zero_point(ctx, 0, 2, -1), subtract_zero_point(ctx, 3, 5, 0),
                            ctx.has_input(8) ? &ctx.input(8) : nullptr, DType::I64);
  const Tensor &xs = ctx.input(1), &ws = ctx.input(4), &ys = ctx.input(6), &yz = ctx.input(7);
  int64_t plane = product(acc.shape(), 2);
  Tensor y(yz.dtype(), acc.shape());
  for (int64_t o = 0; o < acc.numel(); ++o) {
    int64_t c = (o / plane) % m;
    double mult = rounded(rounded(xs.get_f64(0) * ws.get_f64(ws.numel() == 1 ? 0 : c), DType::F32) / ys.get_f64(0),
                          DType::F32);
    y.set_f64(o, requantize(acc.get_f64(o), mult, yz.get_f64(0)));
  }
  return {y};
}

// ConvInteger(x, w, x_zero_point, w_zero_point): an int32 convolution of
// x - x_zero_point (per tensor) with w - w_zero_point (per tensor or per
// output channel).
void infer_conv_integer(InferContext& ctx) {
  require_zero_point_type(ctx, 0, 2);
  require_zero_point_type(ctx, 1, 3);
  ctx.set_output_type(0, Type::tensor(DType::I32, conv_dims(ctx, 0, 1)));
}

std::vector<Tensor> eval_conv_integer(EvalContext& ctx) {
  return {conv_compute(ctx, subtract_zero_point(ctx, 0, 2, -1), subtract_zero_point(ctx, 1, 3, 0), nullptr,
                       DType::I32)};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h): the reference's arithmetic, op for op, on
// kernels and the libraries. The integer accumulators are int8 products with
// int32 accumulation (int8_product.h; convolutions through im2col); where
// those decline (grouped convolutions, a runtime zero point of a convolution's
// x, symbolic channels, spatial dims or K, batch dims no strided-batched call
// expresses, graphs below opset 11) they
// are f64 products of the operands less their zero points
// (zero_point_shifted), which f64 holds exactly. The requantization
// multiplies, rounds and adds in f64 as `requantize` does, its multiplier
// computed in f32 as the reference rounds it.

// The exact int32 accumulator of node n's convolution of input xi (zero
// point input xzi: absent or one constant) with input wi (zero point wzi: per
// tensor or per output channel), plus an int32 bias when given, as y's dims
// [N, M, out...]: im2col into the int8 product (int8_product.h). x becomes
// int8, padded with the int8 value its correction maps to 0 (its zero point
// less the shift), its spatial dims flattened and gathered by a constant
// table of each tap's position for each output position into rows of
// [N * out, C * taps], which multiply W as [C * taps, M] (a constant W laid
// out at compile time). im2col rather than a generated convolution kernel:
// the product is then cuBLASLt's int8 tensor-core GEMM, at the cost of one
// int8 copy of x per tap. Declines groups other than 1, channels, spatial
// dims or W not static (the batch may be symbolic), a zero point of x that is
// not one constant, and windows sliding_window refuses (the caller keeps the
// f64 convolution).
Value* conv_int8_accumulator(Expansion& e, size_t xi, size_t xzi, size_t wi, size_t wzi, Value* bias) {
  const Node& n = e.node();
  const Type& xt = n.input(xi)->type();
  const Type& wt = n.input(wi)->type();
  const Type& yt = n.output(0)->type();
  if (!xt.is_tensor() || !wt.is_tensor() || !yt.is_tensor() || !xt.fully_shaped() || !wt.fully_static() ||
      !yt.fully_shaped() || xt.rank() < 3 || wt.rank() != xt.rank() || yt.rank() != xt.rank() ||
      n.get_int("group", 1) != 1 || e.onnx_opset() < 11)
    return nullptr;
  // The batch may be symbolic; the channels, the spatial dims and the window are static.
  for (const Type* t : {&xt, &yt})
    for (size_t d = 1; d < t->rank(); ++d)
      if (!t->shape()[d].is_static()) return nullptr;
  std::optional<Tensor> xz = n.has_input(xzi) ? constant_value(n.input(xzi)) : std::nullopt;
  if (n.has_input(xzi) && (!xz || xz->numel() != 1)) return nullptr;
  if (!zero_point_fits(n, wi, wzi, 0)) return nullptr;
  // Static extents (the symbolic batch's is not read).
  auto sizes = [](const Type& t) {
    std::vector<int64_t> v;
    for (const Dim& d : t.shape()) v.push_back(d.is_static() ? d.value() : 0);
    return v;
  };
  const std::vector<int64_t> xs = sizes(xt), ws = sizes(wt), ys = sizes(yt);
  const size_t spatial = xs.size() - 2;
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  SlidingWindow sw;
  if (!sliding_window(n, kernel, {xs.begin() + 2, xs.end()}, &sw).empty() || ws[1] != xs[1]) return nullptr;
  const Dim& batch = xt.shape()[0];
  const int64_t channels = xs[1], filters = ws[0];
  const int64_t taps = product(kernel, 0), outs = product(ys, 2);
  // Padded extents and each padded spatial dim's stride in the flattened plane.
  std::vector<int64_t> padded(spatial), pitch(spatial, 1);
  for (size_t d = 0; d < spatial; ++d) padded[d] = xs[d + 2] + sw.begin[d] + sw.end[d];
  for (size_t d = spatial; d-- > 1;) pitch[d - 1] = pitch[d] * padded[d];
  const int64_t plane = pitch[0] * padded[0];
  Value* x8 = as_int8(e, "x", n.input(xi));
  const int64_t fill = (xz ? xz->get_i64(0) : 0) - (xt.dtype() == DType::U8 ? 128 : 0);
  if (std::any_of(sw.begin.begin(), sw.begin.end(), [](int64_t p) { return p != 0; }) ||
      std::any_of(sw.end.begin(), sw.end.end(), [](int64_t p) { return p != 0; })) {
    std::vector<int64_t> pads(2 * xs.size(), 0);
    Dims dims = {batch, Dim(channels)};
    for (size_t d = 0; d < spatial; ++d) {
      pads[d + 2] = sw.begin[d];
      pads[xs.size() + d + 2] = sw.end[d];
      dims.push_back(Dim(padded[d]));
    }
    x8 = e.add("Pad", "Pad", {x8, e.i64s("pads", pads), e.scalar("fill", static_cast<double>(fill), DType::I8)},
               Type::tensor(DType::I8, dims));
  }
  Value* flat = e.reshape("Reshape_x", x8, {batch, Dim(channels), Dim(plane)});
  // table[t][q]: the flattened padded position tap t of output position q reads.
  std::vector<int64_t> table(static_cast<size_t>(taps * outs));
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t q = 0; q < outs; ++q) {
      int64_t pos = 0, tr = t, qr = q;
      for (size_t d = spatial; d-- > 0;) {
        int64_t r = tr % kernel[d], o = qr % ys[d + 2];
        tr /= kernel[d];
        qr /= ys[d + 2];
        pos += (o * sw.strides[d] + r * sw.dilations[d]) * pitch[d];
      }
      table[static_cast<size_t>(t * outs + q)] = pos;
    }
  Value* gathered = e.add("Gather", "Gather", {flat, e.constant("taps", Tensor::from_i64(table, {taps, outs}))},
                          Type::tensor(DType::I8, {batch, Dim(channels), Dim(taps), Dim(outs)}),
                          {{"axis", Attribute::of_int(2)}});
  Value* by_output = e.add("Transpose_rows", "Transpose", {gathered},
                           Type::tensor(DType::I8, {batch, Dim(outs), Dim(channels), Dim(taps)}),
                           {{"perm", Attribute::of_ints({0, 3, 1, 2})}});
  const int64_t depth = channels * taps;
  const Dim positions = dims_product({batch, Dim(outs)});
  Value* rows = e.reshape("Reshape_rows", by_output, {positions, Dim(depth)});
  Value* weights = nullptr;
  if (std::optional<Tensor> w = constant_value(n.input(wi))) {
    Tensor columns(w->dtype(), {depth, filters});
    for (int64_t m = 0; m < filters; ++m)
      for (int64_t i = 0; i < depth; ++i) columns.set_i64(i * filters + m, w->get_i64(m * depth + i));
    weights = e.constant("w_columns", std::move(columns));
  } else {
    Value* w2 = e.reshape("Reshape_w", n.input(wi), {Dim(filters), Dim(depth)});
    weights = e.add("Transpose_w", "Transpose", {w2}, Type::tensor(wt.dtype(), {Dim(depth), Dim(filters)}),
                    {{"perm", Attribute::of_ints({1, 0})}});
  }
  Value* acc = int8_accumulator(e, {rows, n.has_input(xzi) ? n.input(xzi) : nullptr, xt.dtype() == DType::U8},
                                {weights, n.has_input(wzi) ? n.input(wzi) : nullptr},
                                {positions, Dim(filters)});
  TCC_CHECK(acc != nullptr) << "the int8 product declined im2col's static matrices";
  const Type flat_acc = Type::tensor(DType::I32, {positions, Dim(filters)});
  if (bias != nullptr) acc = e.add("Add_bias", "Add", {acc, bias}, flat_acc);
  Value* split = e.reshape("Reshape_acc", acc, {batch, Dim(outs), Dim(filters)});
  Value* channels_first = e.add("Transpose_acc", "Transpose", {split},
                                Type::tensor(DType::I32, {batch, Dim(filters), Dim(outs)}),
                                {{"perm", Attribute::of_ints({0, 2, 1})}});
  return e.reshape("Reshape_y", channels_first, yt.shape());
}

// round_half_even(acc * multiplier) + zero_point, cast to the zero point's type.
void finish_requantize(Expansion& e, Value* acc, Value* multiplier, Value* zero_point) {
  const Type& t = acc->type();
  Value* scaled = e.add("Mul_requantize", "Mul", {acc, e.cast("Cast_multiplier", multiplier, DType::F64)}, t);
  Value* rounded_acc = e.add("Round", "Round", {scaled}, t);
  Value* offset = e.cast("Cast_zero_point_y", zero_point, DType::F64);
  Value* shifted = e.add("Add_zero_point", "Add", {rounded_acc, offset}, t);
  e.finish("Cast", "Cast", {shifted}, {{"to", Attribute::of_int(static_cast<int64_t>(zero_point->type().dtype()))}});
}

// A scale of one element, or one per index along `axis` of a tensor of
// `rank` (reshaped to run along it); null when it is neither.
Value* scale_along(Expansion& e, const std::string& piece, Value* scale, const Dim& extent, size_t axis, size_t rank) {
  const Type& t = scale->type();
  if (!t.is_tensor() || !t.has_rank()) return nullptr;
  if (single_element(t)) return scale;
  if (t.rank() != 1 || t.shape()[0] != extent) return nullptr;
  if (axis + 1 == rank) return scale;
  Dims along(rank - axis, Dim(1));
  along[0] = extent;
  return e.reshape(piece, scale, along);
}

bool single_f32(const Value* v) {
  return v->type().is_tensor() && v->type().has_rank() && single_element(v->type()) && v->type().dtype() == DType::F32;
}

// DynamicQuantizeLinear -> ReduceMax and ReduceMin (with 0), the scale
// (max - min, or 1 when they meet, / 255), the zero point
// round(clip(-min / scale, 0, 255)) and x / scale rounded plus it, all in
// f32 as the reference computes them.
bool decompose_dynamic_quantize(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.fully_shaped() || x.dtype() != DType::F32) return false;
  std::vector<int64_t> axes(x.rank());
  for (size_t a = 0; a < axes.size(); ++a) axes[a] = static_cast<int64_t>(a);
  const Type scalar = Type::tensor(DType::F32, {}), kept = Expansion::kept_type(x, axes);
  Value* zero = e.scalar("zero", 0, DType::F32);
  auto extreme = [&](const std::string& reduce, const std::string& with) {
    Value* r = e.reshape("Reshape_" + reduce, e.reduce(reduce, reduce, n.input(0), axes, kept), {});
    return e.add(with, with, {r, zero}, scalar);
  };
  Value* hi = extreme("ReduceMax", "Max");
  Value* lo = extreme("ReduceMin", "Min");
  Value* span = e.add("Where_span", "Where",
                      {e.add("Equal", "Equal", {hi, lo}, Type::tensor(DType::Bool, {})), e.scalar("one", 1, DType::F32),
                       e.add("Sub", "Sub", {hi, lo}, scalar)},
                      scalar);
  Value* scale = e.add("Div_scale", "Div", {span, e.scalar("levels", 255, DType::F32)}, scalar);
  Value* offset = e.add("Div_offset", "Div", {e.add("Neg", "Neg", {lo}, scalar), scale}, scalar);
  Value* clipped = e.add("Clip", "Clip", {offset, zero, e.scalar("top", 255, DType::F32)}, scalar);
  Value* zero_point = e.add("Round_zero_point", "Round", {clipped}, scalar);
  if (n.num_outputs() > 1) e.take_over(1, scale);
  if (n.num_outputs() > 2) e.take_over(2, e.cast("Cast_zero_point", zero_point, DType::U8));
  const Type xt = Type::tensor(DType::F32, x.shape());
  Value* q = e.add("Round", "Round", {e.add("Div", "Div", {n.input(0), scale}, xt)}, xt);
  e.finish("Cast", "Cast", {e.add("Add", "Add", {q, zero_point}, xt)},
           {{"to", Attribute::of_int(static_cast<int64_t>(DType::U8))}});
  return true;
}

// QLinearMatMul -> MatMulInteger's product (int8, else f64), requantized by
// a_scale * b_scale / y_scale (scales per tensor, per row of a, per column of
// b) computed in f32 and rounded to the scales' dtype after each step, as the
// reference rounds them: f32 holds a product of two f16 or bf16 scales exactly
// and rounds their quotient to the nearest f32, which then rounds to the
// nearest f16 or bf16 as the exact quotient would (24 bits are at least twice
// their 11 or 8, plus 2). Declines 1-D operands, unknown dims.
bool decompose_qlinear_matmul(Expansion& e) {
  const Node& n = e.node();
  const Type& a = n.input(0)->type();
  const Type& b = n.input(3)->type();
  const Type& y = n.output(0)->type();
  if (!y.is_tensor() || !y.fully_shaped() || !a.has_rank() || !b.has_rank() || a.rank() < 2 || b.rank() < 2)
    return false;
  const size_t rows = a.rank() - 2, columns = b.rank() - 1;
  if (!zero_point_fits(n, 0, 2, static_cast<int64_t>(rows)) || !zero_point_fits(n, 3, 5, static_cast<int64_t>(columns)))
    return false;
  const DType st = n.input(1)->type().dtype();
  const Type& ys = n.input(6)->type();
  if (!is_float(st) || st == DType::F64 || n.input(4)->type().dtype() != st || ys.dtype() != st || !ys.has_rank() ||
      !single_element(ys) || !n.input(7)->type().has_rank() || !single_element(n.input(7)->type()))
    return false;
  const Type& as = n.input(1)->type();
  const Type& bs = n.input(4)->type();
  const bool per_row = as.has_rank() && !single_element(as), per_column = bs.has_rank() && !single_element(bs);
  if ((per_row && (as.rank() != 1 || as.shape()[0] != a.shape()[rows])) ||
      (per_column && (bs.rank() != 1 || bs.shape()[0] != b.shape()[columns])))
    return false;
  Value* acc = int8_accumulator(e, {n.input(0), n.input(2)}, {n.input(3), n.input(5)}, y.shape());
  acc = acc ? e.cast("Cast_accumulator", acc, DType::F64)
            : e.add("MatMul", "MatMul",
                    {zero_point_shifted(e, 0, 2, static_cast<int64_t>(rows)),
                     zero_point_shifted(e, 3, 5, static_cast<int64_t>(columns))},
                    Type::tensor(DType::F64, y.shape()));
  Value* row_scale = per_row ? e.reshape("Reshape_a_scale", n.input(1), {a.shape()[rows], Dim(1)}) : n.input(1);
  Value* a_scale = e.cast("Cast_a_scale", row_scale, DType::F32);
  Value* b_scale = e.cast("Cast_b_scale", n.input(4), DType::F32);
  Value* y_scale = e.cast("Cast_y_scale", n.input(6), DType::F32);
  Value* product =
      e.add("Mul_scales", "Mul", {a_scale, b_scale}, Type::tensor(DType::F32, broadcast_of({a_scale, b_scale})));
  product = e.cast("Cast_product_f32", e.cast("Cast_product", product, st), DType::F32);
  Value* multiplier =
      e.add("Div_scales", "Div", {product, y_scale}, Type::tensor(DType::F32, broadcast_of({product, y_scale})));
  finish_requantize(e, acc, e.cast("Cast_multiplier_scale", multiplier, st), n.input(7));
  return true;
}

// QLinearConv -> ConvInteger's convolution (im2col into the int8 product, else
// in f64) with the int32 bias, requantized by x_scale * w_scale / y_scale in
// f32 (w's per output channel).
bool decompose_qlinear_conv(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& w = n.input(3)->type();
  const Type& y = n.output(0)->type();
  if (!y.is_tensor() || !y.fully_shaped() || !w.has_rank() || w.rank() < 3 || !zero_point_fits(n, 0, 2, -1) ||
      !zero_point_fits(n, 3, 5, 0) || !single_f32(n.input(1)) || !single_f32(n.input(6)) ||
      !n.input(7)->type().has_rank() || !single_element(n.input(7)->type()) || !x.has_rank() ||
      n.input(4)->type().dtype() != DType::F32)
    return false;
  Value* w_scale = scale_along(e, "Reshape_w_scale", n.input(4), w.shape()[0], 1, y.rank());
  if (w_scale == nullptr) return false;
  Value* acc = conv_int8_accumulator(e, 0, 2, 3, 5, n.has_input(8) ? n.input(8) : nullptr);
  if (acc != nullptr) {
    acc = e.cast("Cast_accumulator", acc, DType::F64);
  } else {
    std::vector<Value*> operands = {zero_point_shifted(e, 0, 2, -1), zero_point_shifted(e, 3, 5, 0)};
    if (n.has_input(8)) operands.push_back(e.cast("Cast_bias", n.input(8), DType::F64));
    std::map<std::string, Attribute> window(n.attrs().begin(), n.attrs().end());
    acc = e.add("Conv", "Conv", operands, Type::tensor(DType::F64, y.shape()), window);
  }
  Value* product =
      e.add("Mul_scales", "Mul", {n.input(1), w_scale}, Type::tensor(DType::F32, broadcast_of({n.input(1), w_scale})));
  Value* multiplier =
      e.add("Div_scales", "Div", {product, n.input(6)}, Type::tensor(DType::F32, broadcast_of({product, n.input(6)})));
  finish_requantize(e, acc, multiplier, n.input(7));
  return true;
}

// ConvInteger -> im2col into the int8 product, or, where that declines, Conv
// of the operands less their zero points (x's per tensor, w's per output
// channel) in f64, exact, cast to int32.
bool decompose_conv_integer(Expansion& e) {
  const Node& n = e.node();
  const Type& w = n.input(1)->type();
  const Type& y = n.output(0)->type();
  if (!y.is_tensor() || !y.fully_shaped() || !w.has_rank() || w.rank() < 3 || !zero_point_fits(n, 0, 2, -1) ||
      !zero_point_fits(n, 1, 3, 0))
    return false;
  if (Value* acc = conv_int8_accumulator(e, 0, 2, 1, 3, nullptr)) {
    e.take_over(0, acc);
    return true;
  }
  std::map<std::string, Attribute> window(n.attrs().begin(), n.attrs().end());
  Value* acc = e.add("Conv", "Conv", {zero_point_shifted(e, 0, 2, -1), zero_point_shifted(e, 1, 3, 0)},
                     Type::tensor(DType::F64, y.shape()), window);
  e.finish("Cast", "Cast", {acc}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::I32))}});
  return true;
}

}  // namespace

void register_quantization_ops(OpRegistry& r) {
  const std::vector<DType> linear = {DType::F32,    DType::F16,        DType::BF16,     DType::I32,
                                     DType::I8,     DType::U8,         DType::I16,      DType::U16,
                                     DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ,
                                     DType::I4,     DType::U4,         DType::F4E2M1};
  r.add(OpDef{"", "QuantizeLinear", 13, kPointwise, infer_quantize, eval_quantize, linear})
      .pointwise_kernel(quantize_expr, lines_up_pointwise)
      .decomposition(decompose_scale_layout);
  r.add(OpDef{"", "DequantizeLinear", 13, kPointwise, infer_dequantize, eval_dequantize, linear})
      .pointwise_kernel(dequantize_expr, lines_up_pointwise)
      .decomposition(decompose_scale_layout);
  r.add(OpDef{"", "DynamicQuantizeLinear", 11, kReduction, infer_dynamic_quantize, eval_dynamic_quantize,
              {DType::F32, DType::U8}})
      .decomposition(decompose_dynamic_quantize);
  r.add(OpDef{"", "QLinearMatMul", 10, kContraction, infer_qlinear_matmul, eval_qlinear_matmul,
              {DType::I8, DType::U8, DType::F32, DType::F16, DType::BF16}})
      .decomposition(decompose_qlinear_matmul);
  r.add(OpDef{"", "QLinearConv", 10, kContraction, infer_qlinear_conv, eval_qlinear_conv,
              {DType::I8, DType::U8, DType::F32, DType::I32}})
      .decomposition(decompose_qlinear_conv);
  r.add(OpDef{"", "ConvInteger", 10, kContraction, infer_conv_integer, eval_conv_integer,
              {DType::I8, DType::U8, DType::I32}})
      .decomposition(decompose_conv_integer);
}

}  // namespace tcc
