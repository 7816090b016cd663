// Resize: nearest, linear and cubic interpolation along any axes, with every
// coordinate_transformation_mode. Shape rules keep a dim symbolic where it is
// scaled by a whole factor (or divided by one); kernels compute in double.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"
#include "src/ops/resize.h"

namespace tcc {
namespace resize {

// ---------------------------------------------------------------- Resize

std::vector<int64_t> resize_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes = n.get_ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (auto& a : axes) a = normalize_axis(n, a, rank);
  return axes;
}

std::optional<std::pair<int64_t, int64_t>> whole_ratio(double scale) {
  double inv = 1.0 / scale;
  if (scale >= 1 && scale == std::floor(scale)) return std::make_pair(static_cast<int64_t>(scale), int64_t{1});
  if (inv == std::floor(inv) && scale * inv == 1.0) return std::make_pair(int64_t{1}, static_cast<int64_t>(inv));
  return std::nullopt;
}

ResizeAttrs resize_attrs(const Node& n) {
  ResizeAttrs at;
  at.mode = n.get_string("mode", "nearest");
  at.coord = n.get_string("coordinate_transformation_mode", "half_pixel");
  at.nearest_mode = n.get_string("nearest_mode", "round_prefer_floor");
  at.cubic_a = n.get_float("cubic_coeff_a", -0.75f);
  at.extrapolation = n.get_float("extrapolation_value", 0.0f);
  at.exclude_outside = n.get_int("exclude_outside", 0) != 0;
  at.antialias = n.get_int("antialias", 0) != 0;
  return at;
}

double source_coordinate(const Node& n, const ResizeAttrs& at, double y, double scale, int64_t in, int64_t out_int,
                         double roi_begin, double roi_end, bool& extrapolated) {
  double out_f = scale * static_cast<double>(in);
  double win = static_cast<double>(in);
  extrapolated = false;
  const std::string& m = at.coord;
  if (m == "half_pixel") return (y + 0.5) / scale - 0.5;
  if (m == "asymmetric") return y / scale;
  if (m == "align_corners") return out_f == 1 ? 0.0 : y * (win - 1) / (out_f - 1);
  if (m == "pytorch_half_pixel") return out_f == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
  if (m == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(out_int) / out_f;
    return win / 2 * (1 - adjustment) + (y + 0.5) / scale - 0.5;
  }
  if (m == "tf_crop_and_resize") {
    double xo = out_f == 1 ? (roi_end - roi_begin) * (win - 1) / 2
                           : y * (roi_end - roi_begin) * (win - 1) / (out_f - 1);
    xo += roi_begin * (win - 1);
    extrapolated = xo < 0 || xo > win - 1;
    return xo;
  }
  n.fail("unsupported coordinate_transformation_mode '" + m + "'");
}

Taps resize_taps(const Node& n, const ResizeAttrs& at, double x, double scale, int64_t in) {
  double base = std::ceil(x) - 1;
  double ratio = x - base;
  Taps t;
  int64_t first = 0;
  std::vector<double>& w = t.weight;
  double s = at.antialias ? std::min(scale, 1.0) : 1.0;
  if (at.mode == "nearest") {
    bool up;  // take base+1 rather than base
    if (ratio == 1 || at.nearest_mode == "ceil") up = true;
    else if (at.nearest_mode == "round_prefer_floor") up = ratio > 0.5;
    else if (at.nearest_mode == "round_prefer_ceil") up = ratio >= 0.5;
    else if (at.nearest_mode == "floor") up = false;
    else n.fail("unsupported nearest_mode '" + at.nearest_mode + "'");
    w = {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
  } else if (at.mode == "linear") {
    // Antialiasing widens the triangle filter by 1/scale when downsampling.
    first = static_cast<int64_t>(std::floor(-1 / s)) + 1;
    for (int64_t i = first; i < 2 - first; ++i) w.push_back(std::clamp(1 - std::fabs((i - ratio) * s), 0.0, 1.0));
  } else if (at.mode == "cubic") {
    first = static_cast<int64_t>(std::floor(-2 / s)) + 1;
    for (int64_t i = first; i < 2 - first; ++i) w.push_back(cubic_convolution((i - ratio) * s, at.cubic_a));
  } else {
    n.fail("expected mode nearest, linear or cubic, got '" + at.mode + "'");
  }
  if (at.antialias && at.mode != "nearest") {
    double sum = 0;
    for (double v : w) sum += v;
    for (double& v : w) v /= sum;
  }
  for (size_t j = 0; j < w.size(); ++j) t.index.push_back(static_cast<int64_t>(base) + first + static_cast<int64_t>(j));
  if (at.exclude_outside) {
    double sum = 0;
    for (size_t j = 0; j < w.size(); ++j) {
      if (t.index[j] < 0 || t.index[j] >= in) w[j] = 0;
      sum += w[j];
    }
    if (sum != 0)
      for (double& v : w) v /= sum;
  }
  // Taps past the edges read the edge value.
  for (auto& i : t.index) i = std::clamp<int64_t>(i, 0, in - 1);
  return t;
}

namespace {

// shape[a], which node n resizes, so it must be known.
int64_t resized_size(const Node& n, const std::vector<int64_t>& shape, int64_t a) {
  if (shape[a] < 0) n.fail("expected a static size along axis " + std::to_string(a) + ", which it resizes");
  return shape[a];
}

}  // namespace

ResizeScales resize_scales(const Node& n, const std::vector<int64_t>& shape, const Tensor* scales,
                           const Tensor* sizes) {
  int64_t r = static_cast<int64_t>(shape.size());
  auto axes = resize_axes(n, r);
  std::string policy = n.get_string("keep_aspect_ratio_policy", "stretch");
  auto known = [&](int64_t a) { return resized_size(n, shape, a); };
  std::vector<double> scale(r, 1.0);
  std::vector<int64_t> out = shape;
  size_t na = axes.size();
  if (sizes) {
    std::vector<int64_t> sz = sizes->to_i64_vector();
    if (sz.size() != na) n.fail("expected sizes to have " + std::to_string(na) + " values");
    for (size_t i = 0; i < na; ++i) scale[axes[i]] = static_cast<double>(sz[i]) / static_cast<double>(known(axes[i]));
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) out[axes[i]] = sz[i];
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = scale[axes[0]];
      for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, scale[a]) : std::max(s, scale[a]);
      for (int64_t a : axes) {
        scale[a] = s;
        out[a] = static_cast<int64_t>(s * static_cast<double>(shape[a]) + 0.5);
      }
    } else {
      n.fail("expected keep_aspect_ratio_policy stretch, not_larger or not_smaller, got '" + policy + "'");
    }
  } else if (scales) {
    if (scales->numel() != static_cast<int64_t>(na)) n.fail("expected scales to have " + std::to_string(na) + " values");
    for (size_t i = 0; i < na; ++i) {
      int64_t a = axes[i];
      scale[a] = scales->get_f64(i);
      if (!(scale[a] > 0)) n.fail("expected positive scales, got " + std::to_string(scale[a]));
      if (scale[a] != 1 || shape[a] >= 0) out[a] = static_cast<int64_t>(std::floor(scale[a] * static_cast<double>(known(a))));
    }
  } else {
    n.fail("expected a scales or a sizes input");
  }
  return {std::move(scale), std::move(out)};
}

std::vector<AxisResize> resize_plan(const Node& n, const ResizeAttrs& at, const std::vector<int64_t>& shape,
                                    const Tensor* roi, const Tensor* scales, const Tensor* sizes) {
  int64_t r = static_cast<int64_t>(shape.size());
  auto axes = resize_axes(n, r);
  size_t na = axes.size();
  auto [scale, out] = resize_scales(n, shape, scales, sizes);
  std::vector<double> roi_begin(r, 0.0), roi_end(r, 1.0);
  if (roi) {
    if (roi->numel() != static_cast<int64_t>(2 * na)) n.fail("expected roi to have " + std::to_string(2 * na) + " values");
    for (size_t i = 0; i < na; ++i) {
      roi_begin[axes[i]] = roi->get_f64(i);
      roi_end[axes[i]] = roi->get_f64(na + i);
    }
  }
  bool crop = at.coord == "tf_crop_and_resize";
  std::vector<AxisResize> plan;
  for (int64_t a : axes) {
    bool trivial_roi = !crop || (roi_begin[a] == 0 && roi_end[a] == 1);
    if (std::fabs(scale[a] - 1) < 1e-9 && out[a] == shape[a] && trivial_roi) continue;
    AxisResize ax{a, resized_size(n, shape, a), out[a], std::vector<Taps>(out[a])};
    for (int64_t y = 0; y < ax.out; ++y) {
      bool extrapolated = false;
      double xo = source_coordinate(n, at, static_cast<double>(y), scale[a], ax.in, ax.out, roi_begin[a], roi_end[a],
                                    extrapolated);
      ax.taps[y] = resize_taps(n, at, xo, scale[a], ax.in);
      ax.taps[y].extrapolated = extrapolated;
    }
    plan.push_back(std::move(ax));
  }
  return plan;
}

}  // namespace resize

namespace {

using namespace resize;  // this file's half of what resize.h shares

// An optional input that is really present (exporters pass empty scales next to sizes).
bool nonempty_input(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return false;
  const Type& t = ctx.input_type(i);
  return !(t.is_tensor() && t.has_rank() && t.rank() == 1 && t.shape()[0].is_static() && t.shape()[0].value() == 0);
}

Dim scaled_dim(InferContext& ctx, const Dim& in, double scale) {
  if (in.is_static()) return Dim(static_cast<int64_t>(std::floor(scale * static_cast<double>(in.value()))));
  if (std::optional<std::pair<int64_t, int64_t>> r = whole_ratio(scale); r && !in.is_unknown())
    return Dim((in.expr() * SymExpr::constant(r->first)).floordiv(SymExpr::constant(r->second)));
  return ctx.env().fresh("u");
}

void infer_resize(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor() || !x.has_rank()) {
    ctx.set_output_type(0, x);
    return;
  }
  const Node& n = ctx.node();
  auto axes = resize_axes(n, static_cast<int64_t>(x.rank()));
  Dims out = x.shape();
  std::string policy = n.get_string("keep_aspect_ratio_policy", "stretch");
  if (nonempty_input(ctx, 3)) {
    const Dims* sizes = ctx.input_values(3);
    if (sizes && sizes->size() != axes.size())
      ctx.fail("expected sizes to have " + std::to_string(axes.size()) + " values, got " + std::to_string(sizes->size()));
    bool static_aspect = sizes && policy != "stretch";
    for (size_t i = 0; i < axes.size(); ++i)
      static_aspect = static_aspect && (*sizes)[i].is_static() && x.shape()[axes[i]].is_static();
    if (static_aspect) {
      // Both dims must be known to pick the common scale.
      double s = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        double r = static_cast<double>((*sizes)[i].value()) / static_cast<double>(x.shape()[axes[i]].value());
        s = policy == "not_larger" ? std::min(s, r) : std::max(s, r);
      }
      for (int64_t a : axes) out[a] = Dim(static_cast<int64_t>(s * static_cast<double>(x.shape()[a].value()) + 0.5));
    } else {
      for (size_t i = 0; i < axes.size(); ++i)
        out[axes[i]] = sizes && policy == "stretch" ? (*sizes)[i] : ctx.env().fresh("u");
    }
  } else if (nonempty_input(ctx, 2)) {
    const Tensor* scales = ctx.input_const(2);
    if (scales && scales->numel() != static_cast<int64_t>(axes.size()))
      ctx.fail("expected scales to have " + std::to_string(axes.size()) + " values, got " +
               std::to_string(scales->numel()));
    for (size_t i = 0; i < axes.size(); ++i)
      out[axes[i]] = scales ? scaled_dim(ctx, x.shape()[axes[i]], scales->get_f64(i)) : ctx.env().fresh("u");
  } else {
    ctx.fail("expected a scales or a sizes input");
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

std::vector<Tensor> eval_resize(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto given = [&](size_t i) { return ctx.has_input(i) && ctx.input(i).numel() > 0 ? &ctx.input(i) : nullptr; };
  ResizeAttrs at = resize_attrs(ctx.node());
  std::vector<AxisResize> plan = resize_plan(ctx.node(), at, x.shape(), given(1), given(2), given(3));
  // One axis at a time, in double.
  std::vector<int64_t> shape = x.shape();
  std::vector<double> data(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) data[i] = x.get_f64(i);
  for (const AxisResize& ax : plan) {
    int64_t a = ax.axis;
    int64_t outer = product(std::vector<int64_t>(shape.begin(), shape.begin() + a));
    int64_t inner = product(shape, a + 1);
    std::vector<double> next(outer * ax.out * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t y = 0; y < ax.out; ++y)
        for (int64_t i = 0; i < inner; ++i) {
          const Taps& t = ax.taps[y];
          double v = 0;
          if (t.extrapolated) {
            v = at.extrapolation;
          } else {
            for (size_t j = 0; j < t.index.size(); ++j) v += t.weight[j] * data[(o * ax.in + t.index[j]) * inner + i];
          }
          next[(o * ax.out + y) * inner + i] = v;
        }
    data = std::move(next);
    shape[a] = ax.out;
  }
  Tensor result(x.dtype(), shape);
  for (int64_t i = 0; i < result.numel(); ++i) result.set_f64(i, data[i]);
  return {result};
}

// ---------------------------------------------------------------- tcc::ResizeTable

// One tap's table along one axis of a Resize by the ratio scale_num /
// scale_den, for the input x it reads the shape of: `table` "index", the i64
// index of the tap along the axis for each of the out = floor(in * scale)
// output coordinates (in nearest mode the one tap the rounding picks), or
// "weight", its weight [out, 1, ...] in x's dtype broadcast along the axes after
// it. It carries the Resize's attributes and computes with resize_taps, so its
// tables are the reference's taps; it reads shapes only, so a module computes
// it once per binding of the symbols (a binding constant).
struct TableAttrs {
  int64_t axis = 0, tap = 0, num = 1, den = 1;
  bool weight = false;
};

TableAttrs table_attrs(const Node& n) {
  TableAttrs t{n.get_int("axis", 0), n.get_int("tap", 0), n.get_int("scale_num", 1), n.get_int("scale_den", 1),
               n.get_string("table", "index") == "weight"};
  if (t.num < 1 || t.den < 1 || t.tap < 0) n.fail("expected a positive scale_num and scale_den and a tap >= 0");
  return t;
}

void infer_resize_table(InferContext& ctx) {
  const Type& x = ctx.ranked_input(0);
  TableAttrs t = table_attrs(ctx.node());
  int64_t axis = normalize_axis(ctx.node(), t.axis, static_cast<int64_t>(x.rank()));
  const Dim& in = x.shape()[axis];
  Dim out = in.is_static() ? Dim(in.value() * t.num / t.den)
                           : Dim((in.expr() * SymExpr::constant(t.num)).floordiv(SymExpr::constant(t.den)));
  if (!t.weight) {
    ctx.set_output_type(0, Type::tensor(DType::I64, {out}));
    return;
  }
  Dims column(x.rank() - static_cast<size_t>(axis), Dim(1));
  column[0] = out;
  ctx.set_output_type(0, Type::tensor(x.dtype(), column));
}

std::vector<Tensor> eval_resize_table(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  TableAttrs t = table_attrs(n);
  auto rank = static_cast<int64_t>(x.shape().size());
  int64_t axis = normalize_axis(n, t.axis, rank), in = x.shape()[axis], out = in * t.num / t.den;
  ResizeAttrs at = resize_attrs(n);
  double scale = static_cast<double>(t.num) / static_cast<double>(t.den);
  std::vector<int64_t> column(static_cast<size_t>(rank - axis), 1);
  column[0] = out;
  Tensor table = t.weight ? Tensor(x.dtype(), column) : Tensor(DType::I64, {out});
  for (int64_t y = 0; y < out; ++y) {
    bool extrapolated = false;
    double xo = source_coordinate(n, at, static_cast<double>(y), scale, in, out, 0.0, 1.0, extrapolated);
    Taps taps = resize_taps(n, at, xo, scale, in);
    size_t j = at.mode == "nearest" ? (taps.weight[0] == 1 ? 0 : 1) : static_cast<size_t>(t.tap);
    if (j >= taps.index.size()) n.fail("has tap " + std::to_string(t.tap) + " of " + std::to_string(taps.index.size()));
    if (t.weight) table.set_f64(y, taps.weight[j]);
    else table.set_i64(y, taps.index[j]);
  }
  return {table};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// Where output coordinate y of a resized axis reads the input (source_coordinate's
// value for each coordinate_transformation_mode); `outside` is set
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

// The rule builds its matrices from static sizes: where a resized axis changes
// a symbolic size, autodiff differentiates the decomposition instead (Gathers
// of tables each binding computes).
bool resize_rule_applies(const Node& n, const std::vector<bool>&) {
  const Type &x = n.input(0)->type(), &y = n.output(0)->type();
  if (!x.is_tensor() || !x.has_rank() || !y.is_tensor() || !y.has_rank() || x.rank() != y.rank()) return true;
  for (int64_t a : resize_axes(n, static_cast<int64_t>(x.rank()))) {
    const Dim &in = x.shape()[a], &out = y.shape()[a];
    bool kept = !in.is_unknown() && !out.is_unknown() && in.expr() == out.expr();
    if (!kept && !(in.is_static() && out.is_static())) return false;
  }
  return true;
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add(OpDef{"", "Resize", 11, 0, infer_resize, eval_resize,
              {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64}})
      .shape_from_inputs({2, 3})
      .configured_by({1, 2, 3})
      .keeps_under_autocast([](const Node&, size_t i) { return i == 1 || i == 2; }, nullptr)
      .gradient(resize_rule, resize_rule_applies)
      .decomposition(resize::decompose_resize);
  r.add(OpDef{std::string(kTccDomain), "ResizeTable", 1, kShapeOnly, infer_resize_table, eval_resize_table, {}});
}

}  // namespace tcc
