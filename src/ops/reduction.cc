// Ops that walk along an axis: ArgMax/ArgMin, Softmax/LogSoftmax, Hardmax,
// LayerNormalization and CumSum (a scan); the Reduce* ops are in reduce.cc.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <limits>
#include <optional>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// ---------------------------------------------------------------------------
// Axis walking

// A shape split around one axis: outer x axis x inner, row-major.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k) {
    if (k < axis) s.outer *= shape[k];
    else if (k == axis) s.len = shape[k];
    else s.inner *= shape[k];
  }
  return s;
}

// ---------------------------------------------------------------------------
// ArgMax / ArgMin

void infer_arg(InferContext& ctx) {
  const Type* xp = ranked_or_unranked_output(ctx, DType::I64);
  if (!xp) return;
  const Type& x = *xp;
  int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), rank);
  bool keepdims = ctx.node().get_int("keepdims", 1) != 0;
  Dims out;
  for (int64_t k = 0; k < rank; ++k) {
    if (k != axis) out.push_back(x.shape()[k]);
    else if (keepdims) out.push_back(Dim(1));
  }
  ctx.set_output_type(0, Type::tensor(DType::I64, out));
}

Tensor arg_kernel(const EvalContext& ctx, bool is_max) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), rank);
  bool keepdims = n.get_int("keepdims", 1) != 0;
  bool last = n.get_int("select_last_index", 0) != 0;
  AxisSplit s = split_at(x.shape(), axis);
  if (s.len == 0) n.fail("cannot take " + n.op_type() + " along axis " + std::to_string(axis) + " of size 0");
  std::vector<int64_t> out_shape;
  for (int64_t k = 0; k < rank; ++k) {
    if (k != axis) out_shape.push_back(x.shape()[k]);
    else if (keepdims) out_shape.push_back(1);
  }
  Tensor out(DType::I64, out_shape);
  bool exact_int = !is_float(x.dtype());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t best = 0;
      auto at = [&](int64_t j) { return (o * s.len + j) * s.inner + in; };
      for (int64_t j = 1; j < s.len; ++j) {
        // Ties go to the first index unless select_last_index asks for the last.
        bool better, tie;
        if (exact_int) {
          int64_t v = x.get_i64(at(j)), b = x.get_i64(at(best));
          better = is_max ? v > b : v < b;
          tie = v == b;
        } else {
          double v = x.get_f64(at(j)), b = x.get_f64(at(best));
          better = is_max ? v > b : v < b;
          tie = v == b;
        }
        if (better || (tie && last)) best = j;
      }
      out.set_i64(o * s.inner + in, best);
    }
  return out;
}

// ---------------------------------------------------------------------------
// Softmax / LogSoftmax (opset 13: normalizes along one axis)

void infer_same(InferContext& ctx) {
  if (const Type* x = ranked_or_unranked_output(ctx)) ctx.set_output_type(0, *x);
}

Tensor softmax_kernel(const EvalContext& ctx, bool log) {
  const Tensor& x = ctx.input(0);
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), static_cast<int64_t>(x.rank()));
  AxisSplit s = split_at(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return (o * s.len + j) * s.inner + in; };
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < s.len; ++j) mx = std::max(mx, x.get_f64(at(j)));
      double sum = 0;
      for (int64_t j = 0; j < s.len; ++j) sum += std::exp(x.get_f64(at(j)) - mx);
      for (int64_t j = 0; j < s.len; ++j) {
        double d = x.get_f64(at(j)) - mx;
        out.set_f64(at(j), log ? d - std::log(sum) : std::exp(d) / sum);
      }
    }
  return out;
}

// ---------------------------------------------------------------------------
// Hardmax (opset 13: along one axis): 1 at the first maximum of each line, 0 elsewhere.

void infer_hardmax(InferContext& ctx) {
  const Type* x = ranked_or_unranked_output(ctx);
  if (!x) return;
  normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), static_cast<int64_t>(x->rank()));
  ctx.set_output_type(0, *x);
}

Tensor hardmax_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), static_cast<int64_t>(x.rank()));
  AxisSplit s = split_at(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      auto at = [&](int64_t j) { return (o * s.len + j) * s.inner + in; };
      int64_t first = 0;
      for (int64_t j = 1; j < s.len; ++j)
        if (x.get_f64(at(j)) > x.get_f64(at(first))) first = j;
      if (s.len > 0) out.set_f64(at(first), 1);
    }
  return out;
}

// ---------------------------------------------------------------------------
// LayerNormalization: normalizes over axes [axis, rank).

DType stash_dtype(const Node& n) {
  int64_t st = n.get_int("stash_type", 1);
  std::optional<DType> t = dtype_from_onnx(static_cast<int32_t>(st));
  if (!t || !is_float(*t)) n.fail("stash_type must be a float element type, got " + std::to_string(st));
  return *t;
}

void infer_layer_norm(InferContext& ctx) {
  const Type* xp = ranked_or_unranked_output(ctx);
  if (!xp) return;
  const Type& x = *xp;
  int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), rank);
  // Scale and B broadcast onto the normalized dims; learn their equalities.
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor() || !t.has_rank()) continue;
    if (static_cast<int64_t>(t.rank()) > rank - axis)
      ctx.fail(std::string(i == 1 ? "Scale" : "B") + " " + t.str() + " has more axes than the " +
               std::to_string(rank - axis) + " it normalizes over (axis " + std::to_string(axis) + " of " +
               x.str() + ")");
    // Onto, not with: the output has X's shape, so Scale may not widen an axis of 1.
    Dims both = broadcast_dims(ctx, {x.shape(), t.shape()});
    for (int64_t k = 0; k < rank; ++k)
      if (!x.shape()[k].is_unknown() && ctx.env().canonical(both[k]) != ctx.env().canonical(x.shape()[k]))
        ctx.fail(std::string(i == 1 ? "Scale" : "B") + " " + t.str() + " does not broadcast onto X " + x.str() +
                 " (axis " + std::to_string(k) + ")");
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), ctx.env().canonical(x.shape())));
  Dims stats;
  for (int64_t k = 0; k < rank; ++k) stats.push_back(k < axis ? ctx.env().canonical(x.shape()[k]) : Dim(1));
  DType st = stash_dtype(ctx.node());
  for (size_t i = 1; i < ctx.num_outputs() && i < 3; ++i) ctx.set_output_type(i, Type::tensor(st, stats));
}

std::vector<Tensor> layer_norm_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Node& n = ctx.node();
  int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = normalize_axis(n, n.get_int("axis", -1), rank);
  double eps = n.get_float("epsilon", 1e-5f);
  std::vector<int64_t> stats_shape = x.shape();
  int64_t rows = 1, cols = 1;
  for (int64_t k = 0; k < rank; ++k) {
    if (k < axis) rows *= x.shape()[k];
    else {
      cols *= x.shape()[k];
      stats_shape[k] = 1;
    }
  }
  broadcast_shapes(n, {x.shape(), scale.shape()});
  BroadcastIndexer scale_at(x.shape(), scale.shape());
  std::optional<BroadcastIndexer> bias_at;
  if (ctx.has_input(2)) {
    broadcast_shapes(n, {x.shape(), ctx.input(2).shape()});
    bias_at.emplace(x.shape(), ctx.input(2).shape());
  }
  DType st = stash_dtype(n);
  Tensor y(x.dtype(), x.shape());
  Tensor mean_t(st, stats_shape);
  Tensor inv_t(st, stats_shape);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (int64_t c = 0; c < cols; ++c) mean += x.get_f64(r * cols + c);
    mean /= static_cast<double>(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double d = x.get_f64(r * cols + c) - mean;
      var += d * d;
    }
    var /= static_cast<double>(cols);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = r * cols + c;
      double v = (x.get_f64(i) - mean) * inv * scale.get_f64(scale_at(i));
      if (bias_at) v += ctx.input(2).get_f64((*bias_at)(i));
      y.set_f64(i, v);
    }
    mean_t.set_f64(r, mean);
    inv_t.set_f64(r, inv);
  }
  std::vector<Tensor> outs{y, mean_t, inv_t};
  outs.resize(std::min<size_t>(outs.size(), ctx.num_outputs()));
  return outs;
}

// ---------------------------------------------------------------------------
// CumSum(x, axis): running sums along one axis, optionally exclusive/reversed.

Tensor cumsum_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& axis_t = ctx.input(1);
  if (axis_t.numel() != 1) ctx.fail("axis must be a scalar, got shape " + shape_str(axis_t.shape()));
  int64_t axis = normalize_axis(ctx.node(), axis_t.get_i64(0), static_cast<int64_t>(x.rank()));
  bool exclusive = ctx.node().get_int("exclusive", 0) != 0;
  bool reverse = ctx.node().get_int("reverse", 0) != 0;
  AxisSplit s = split_at(x.shape(), axis);
  Tensor out(x.dtype(), x.shape());
  bool exact_int = !is_float(x.dtype());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      double fsum = 0;
      int64_t isum = 0;
      for (int64_t step = 0; step < s.len; ++step) {
        int64_t j = reverse ? s.len - 1 - step : step;
        int64_t i = (o * s.len + j) * s.inner + in;
        if (exact_int) {
          int64_t v = x.get_i64(i);
          if (!exclusive) isum += v;
          out.set_i64(i, isum);
          if (exclusive) isum += v;
        } else {
          double v = x.get_f64(i);
          if (!exclusive) fsum += v;
          out.set_f64(i, fsum);
          if (exclusive) fsum += v;
        }
      }
    }
  return out;
}

// CumSum along a literal axis: a kernel of its own that scans its rows.
bool scans_in_kernel(const Node& n) { return literal_input(n, 1) && single_element(n.input(1)->type()); }

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

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

// CumSum: the cumulative sum of g the other way
void cum_sum_rule(GradContext& c) {
  Attrs attrs{{"reverse", Attribute::of_int(1 - c.node().get_int("reverse", 0))},
              {"exclusive", Attribute::of_int(c.node().get_int("exclusive", 0))}};
  c.set(0, c.e().op("CumSum", {c.dy(), c.in(1)}, std::move(attrs)));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h): each becomes reductions and pointwise ops
// that fuse into one reduction kernel with their neighbours.

// Softmax(x) -> m = ReduceMax(x); e = Exp(x - m); e / ReduceSum(e)
// LogSoftmax(x) -> d = x - ReduceMax(x); d - Log(ReduceSum(Exp(d)))
// Not before opset 13, where they flatten to 2-D.
bool decompose_softmax(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (n.opset() < 13 || x == nullptr || x->rank() == 0) return false;
  auto rank = static_cast<int64_t>(x->rank());
  int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  std::vector<int64_t> axes = {axis < 0 ? axis + rank : axis};
  Type kept = Expansion::kept_type(*x, axes);
  bool log = n.op_type() == "LogSoftmax";
  Value* in = n.input(0);
  Value* m = e.reduce("ReduceMax", "ReduceMax", in, axes, kept);
  Value* d = e.add("Sub", "Sub", {in, m}, *x);
  Value* ex = e.add("Exp", "Exp", {d}, *x);
  Value* s = e.reduce("ReduceSum", "ReduceSum", ex, axes, kept);
  if (log) e.finish("Sub_1", "Sub", {d, e.add("Log", "Log", {s}, kept)});
  else e.finish("Div", "Div", {ex, s});
  return true;
}

// Hardmax -> Cast(Equal(i, ReduceMin(Where(Equal(x, ReduceMax(x)), i, L)))),
// i each element's index along the axis (a constant) and L its length: the
// smallest index of a maximum, so that of ties the first wins. Two reduction
// kernels. Needs a static length along the axis.
bool decompose_hardmax(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() == 0) return false;
  auto rank = static_cast<int64_t>(x->rank());
  int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  const Dim& len = x->shape()[static_cast<size_t>(axis)];
  if (!len.is_static()) return false;
  std::vector<int64_t> axes = {axis};
  Type kept = Expansion::kept_type(*x, axes);
  Type index_type = Type::tensor(DType::I32, x->shape()), kept_index = Type::tensor(DType::I32, kept.shape());
  // [L, 1, ..., 1]: broadcasts along the axis.
  std::vector<int64_t> index_shape(static_cast<size_t>(rank - axis), 1);
  index_shape[0] = len.value();
  Tensor index(DType::I32, index_shape);
  for (int64_t j = 0; j < len.value(); ++j) index.set_i64(j, j);
  Value* i = e.constant("index", std::move(index));
  Value* in = n.input(0);
  Value* top = e.reduce("ReduceMax", "ReduceMax", in, axes, kept);
  Value* is_top = e.add("Equal", "Equal", {in, top}, Type::tensor(DType::Bool, x->shape()));
  Value* none = e.scalar("length", static_cast<double>(len.value()), DType::I32);
  Value* at = e.add("Where", "Where", {is_top, i, none}, index_type);
  Value* first = e.reduce("ReduceMin", "ReduceMin", at, axes, kept_index);
  Value* hit = e.add("Equal_1", "Equal", {i, first}, Type::tensor(DType::Bool, x->shape()));
  e.finish("Cast", "Cast", {hit}, {{"to", Attribute::of_int(static_cast<int64_t>(x->dtype()))}});
  return true;
}

// LayerNormalization -> d = x - ReduceMean(x); d / Sqrt(ReduceMean(d*d) + eps) * scale + B,
// its Mean output the ReduceMean and its InvStdDev output the Reciprocal of the Sqrt.
// The pieces compute in stash_type: an f16 or bf16 model's (f32 by default, as
// torch's half-precision layer_norm accumulates) reads x, scale and B cast up
// and casts its result back down. Not when stash_type is narrower than the
// input's dtype (f32 for an f64 input).
bool decompose_layer_norm(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || !n.has_input(1)) return false;
  std::optional<DType> stash = dtype_from_onnx(static_cast<int32_t>(n.get_int("stash_type", 1)));
  if (!stash || !is_float(*stash) || dtype_size(*stash) < dtype_size(x->dtype())) return false;
  auto rank = static_cast<int64_t>(x->rank());
  int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  std::vector<int64_t> axes(rank - (axis < 0 ? axis + rank : axis));
  std::iota(axes.begin(), axes.end(), axis < 0 ? axis + rank : axis);
  const Type work = Type::tensor(*stash, x->shape());
  const Type kept = Expansion::kept_type(work, axes);
  Value* in = e.cast("Cast", n.input(0), *stash);
  Value* scale = e.cast("Cast_scale", n.input(1), *stash);
  Value* bias = n.has_input(2) ? e.cast("Cast_bias", n.input(2), *stash) : nullptr;
  Value* mean = e.reduce("ReduceMean", "ReduceMean", in, axes, kept);
  Value* d = e.add("Sub", "Sub", {in, mean}, work);
  Value* sq = e.add("Mul", "Mul", {d, d}, work);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", sq, axes, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), *stash);
  Value* sd = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {var, eps}, kept)}, kept);
  if (n.num_outputs() > 1 && e.used(n.output(1))) e.take_over(1, mean);
  if (n.num_outputs() > 2 && e.used(n.output(2))) e.take_over(2, e.add("Reciprocal", "Reciprocal", {sd}, kept));
  Value* normed = e.add("Div", "Div", {d, sd}, work);
  const bool narrow = *stash != x->dtype();
  if (bias == nullptr && !narrow) {
    e.finish("Mul_1", "Mul", {normed, scale});
    return true;
  }
  Value* y = e.add("Mul_1", "Mul", {normed, scale}, work);
  if (bias != nullptr && !narrow) {
    e.finish("Add_1", "Add", {y, bias});
    return true;
  }
  if (bias != nullptr) y = e.add("Add_1", "Add", {y, bias}, work);
  e.finish("Cast_y", "Cast", {y}, {{"to", Attribute::of_int(static_cast<int64_t>(x->dtype()))}});
  return true;
}

// ArgMax(x) -> ReduceMin(Where(Equal(x, ReduceMax(x)), i, L)) along the axis,
// as an i64: i each element's index (L - 1 - index with select_last_index,
// the answer then L - 1 minus the minimum) and L the axis's length, so that of
// ties the first (or last) wins. ArgMin: ReduceMin in place of ReduceMax. As
// the reference, which compares with > (<), a float x skips NaNs, except that
// a NaN first element is the answer: ReduceMax reads NaNs as -inf (ReduceMin:
// +inf), which no NaN equals, and a Where picks 0 where x's first element is
// NaN. Two reduction kernels. Needs a static length along the axis; not for
// u64, which the reference compares as i64 (values from 2^63 read negative).
bool decompose_arg(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() == 0 || !x.fully_shaped() || x.dtype() == DType::U64) return false;
  auto rank = static_cast<int64_t>(x.rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  const Dim& len = x.shape()[static_cast<size_t>(axis)];
  if (!len.is_static() || len.value() < 1) return false;
  bool is_max = n.op_type() == "ArgMax", last = n.get_int("select_last_index", 0) != 0, floats = is_float(x.dtype());
  int64_t l = len.value();
  std::vector<int64_t> axes = {axis};
  Type kept = Expansion::kept_type(x, axes), kept_index = Type::tensor(DType::I32, kept.shape());
  // [L, 1, ..., 1]: broadcasts along the axis.
  std::vector<int64_t> index_shape(static_cast<size_t>(rank - axis), 1);
  index_shape[0] = l;
  Tensor index(DType::I32, index_shape);
  for (int64_t j = 0; j < l; ++j) index.set_i64(j, last ? l - 1 - j : j);
  Value* in = n.input(0);
  Type mask = Type::tensor(DType::Bool, x.shape());
  Value* read = in;
  if (floats) {
    double skip = is_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    Value* nan = e.add("IsNaN", "IsNaN", {in}, mask);
    read = e.add("Where", "Where", {nan, e.scalar("skip", skip, x.dtype()), in}, x);
  }
  const char* extreme = is_max ? "ReduceMax" : "ReduceMin";
  Value* top = e.reduce(extreme, extreme, read, axes, kept);
  Value* is_top = e.add("Equal", "Equal", {in, top}, mask);
  Value* none = e.scalar("length", static_cast<double>(l), DType::I32);
  Value* at = e.add("Where_1", "Where", {is_top, e.constant("index", std::move(index)), none},
                    Type::tensor(DType::I32, x.shape()));
  Value* answer = e.reduce("ReduceMin", "ReduceMin", at, axes, kept_index);
  if (last)
    answer = e.add("Sub", "Sub", {e.scalar("last", static_cast<double>(l - 1), DType::I32), answer}, kept_index);
  if (floats) {
    Value* first = e.add("Gather", "Gather", {in, e.i64("first", 0)}, kept, {{"axis", Attribute::of_int(axis)}});
    Value* nan_first = e.add("IsNaN_1", "IsNaN", {first}, Type::tensor(DType::Bool, kept.shape()));
    answer = e.add("Where_2", "Where", {nan_first, e.scalar("zero", 0, DType::I32), answer}, kept_index);
  }
  if (n.get_int("keepdims", 1) != 0) {
    e.finish("Cast", "Cast", {answer}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::I64))}});
    return true;
  }
  e.finish_reshape("Reshape", e.cast("Cast", answer, DType::I64));
  return true;
}

// CumSum with its axis read from data -> a CumSum along each literal axis,
// the one the axis names picked per element by Wheres (axis k or k - rank):
// one scan kernel per axis, the choice on the device (a 1-D x has one axis to
// scan). An axis out of range, which the reference refuses, picks the last
// axis. Needs x's rank and an axis of one element.
bool decompose_cumsum(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& a = n.input(1)->type();
  if (scans_in_kernel(n) || !x.is_tensor() || !x.has_rank() || x.rank() == 0 || !a.is_tensor() || !a.has_rank() ||
      a.rank() > 1 || !single_element(a))
    return false;
  const auto rank = static_cast<int64_t>(x.rank());
  Value* axis = rank > 1 ? e.reshape("Reshape_axis", n.input(1), {}) : nullptr;
  std::map<std::string, Attribute> attrs(n.attrs().begin(), n.attrs().end());
  Value* result = nullptr;
  const Type flag = Type::tensor(DType::Bool, {});
  for (int64_t k = rank - 1; k >= 0; --k) {
    std::string tag = std::to_string(k);
    Value* along = e.scalar("axis_" + tag, static_cast<double>(k), a.dtype());
    Value* scan = e.add("CumSum_" + tag, "CumSum", {n.input(0), along}, x, attrs);
    if (result == nullptr) {
      result = scan;
      continue;
    }
    Value* from_end = e.scalar("axis_from_end_" + tag, static_cast<double>(k - rank), a.dtype());
    Value* named = e.add("Or_" + tag, "Or",
                         {e.add("Equal_" + tag, "Equal", {axis, along}, flag),
                          e.add("Equal_from_end_" + tag, "Equal", {axis, from_end}, flag)},
                         flag);
    result = e.add("Where_" + tag, "Where", {named, scan, result}, x);
  }
  e.take_over(0, result);
  return true;
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  r.add(OpDef{"", "ArgMax", 12, kReduction, infer_arg,
              [](EvalContext& ctx) { return std::vector<Tensor>{arg_kernel(ctx, true)}; }, kNumeric})
      .decomposition(decompose_arg);
  r.add(OpDef{"", "ArgMin", 12, kReduction, infer_arg,
              [](EvalContext& ctx) { return std::vector<Tensor>{arg_kernel(ctx, false)}; }, kNumeric})
      .decomposition(decompose_arg);
  r.add(OpDef{"", "Softmax", 13, kReduction, infer_same,
              [](EvalContext& ctx) { return std::vector<Tensor>{softmax_kernel(ctx, false)}; }, kFloatTypes})
      .gradient(softmax_rule)
      .decomposition(decompose_softmax)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "LogSoftmax", 13, kReduction, infer_same,
              [](EvalContext& ctx) { return std::vector<Tensor>{softmax_kernel(ctx, true)}; }, kFloatTypes})
      .gradient(log_softmax_rule)
      .decomposition(decompose_softmax)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "Hardmax", 13, kReduction, infer_hardmax,
              [](EvalContext& ctx) { return std::vector<Tensor>{hardmax_kernel(ctx)}; }, kFloatTypes})
      .gradient(zero_rule)
      .decomposition(decompose_hardmax);
  r.add(OpDef{"", "LayerNormalization", 17, kReduction, infer_layer_norm, layer_norm_kernel, kFloatTypes})
      .gradient(layer_norm_rule)
      .decomposition(decompose_layer_norm)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "CumSum", 11, kReduction, infer_same,
              [](EvalContext& ctx) { return std::vector<Tensor>{cumsum_kernel(ctx)}; }, kNumeric})
      .kernel_role(KernelRole::Indexed, scans_in_kernel)
      .literals_at({1})
      .gradient(cum_sum_rule)
      .decomposition(decompose_cumsum)
      .under_autocast(AutocastClass::F32);
}

}  // namespace tcc
