// Ops that sample images at computed positions: GridSample and DeformConv,
// with the interpolation and padding rules they share.
//
// Shape rules keep batch and spatial dims symbolic where the op's formula
// allows (a grid's output positions, a deformable conv's sliding window);
// kernels are direct loops computing in double, as the rest of the interpreter.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "src/ops/conv_pool.h"  // spatial_of
#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// ---------------------------------------------------------------- sampling

enum class Interpolation { Nearest, Linear, Cubic };
enum class Padding { Zeros, Border, Reflection };

struct SampleMode {
  Interpolation interpolation = Interpolation::Linear;
  Padding padding = Padding::Zeros;
  bool align_corners = false;
};

// GridSample's attributes. Opset 20 renamed bilinear / bicubic to linear /
// cubic (which then cover any number of spatial dims).
SampleMode grid_sample_mode(const Node& n) {
  bool v20 = n.opset() >= 20;
  std::string linear = v20 ? "linear" : "bilinear", cubic = v20 ? "cubic" : "bicubic";
  std::string mode = n.get_string("mode", linear), padding = n.get_string("padding_mode", "zeros");
  SampleMode m;
  if (mode == "nearest") m.interpolation = Interpolation::Nearest;
  else if (mode == linear) m.interpolation = Interpolation::Linear;
  else if (mode == cubic) m.interpolation = Interpolation::Cubic;
  else n.fail("expected mode " + linear + ", nearest or " + cubic + " at opset " + std::to_string(n.opset()) + ", got '" + mode + "'");
  if (padding == "zeros") m.padding = Padding::Zeros;
  else if (padding == "border") m.padding = Padding::Border;
  else if (padding == "reflection") m.padding = Padding::Reflection;
  else n.fail("expected padding_mode zeros, border or reflection, got '" + padding + "'");
  int64_t align = n.get_int("align_corners", 0);
  if (align != 0 && align != 1) n.fail("expected align_corners 0 or 1, got " + std::to_string(align));
  m.align_corners = align == 1;
  return m;
}

// x reflected back and forth off lo and hi until it lies between them.
double reflect(double x, double lo, double hi) {
  double range = hi - lo;
  if (range <= 0 || std::isinf(x)) return lo;
  if (x >= lo && x <= hi) return x;
  double d = x < lo ? lo - x : x - hi;
  double flips = std::floor(d / range), rest = d - flips * range;
  bool even = std::fmod(flips, 2.0) == 0;
  return (x < lo) == even ? lo + rest : hi - rest;
}

// The taps one sampling position reads along one spatial axis: element
// indices (-1 for the zero padding) and their weights.
struct AxisTaps {
  int64_t index[4] = {0, 0, 0, 0};
  double weight[4] = {0, 0, 0, 0};
  int count = 0;
};

// Taps along an axis of `size` elements at pixel coordinate v. Outside the
// image's extent [lo, hi] (pixel centers with align_corners, pixel edges
// without) border padding clamps v and reflection reflects it; a tap still
// outside reads zero, the nearest border element, or its reflection.
AxisTaps axis_taps(double v, int64_t size, const SampleMode& m) {
  double lo = m.align_corners ? 0.0 : -0.5, hi = m.align_corners ? static_cast<double>(size - 1) : size - 0.5;
  if (m.interpolation == Interpolation::Nearest) v = std::nearbyint(v);  // ties to even, as torch
  if (v < lo || v > hi) {
    if (m.padding == Padding::Border) v = std::clamp(v, 0.0, static_cast<double>(size - 1));
    else if (m.padding == Padding::Reflection) v = reflect(v, lo, hi);
    // Far outside, every tap reads the zero padding; bounded, v's taps fit int64.
    else v = std::clamp(v, -4.0, size + 3.0);
  }
  auto tap = [&](int64_t i) -> int64_t {
    if (i >= 0 && i < size) return i;
    if (m.padding == Padding::Zeros) return -1;
    if (m.padding == Padding::Border) return std::clamp<int64_t>(i, 0, size - 1);
    return std::clamp<int64_t>(static_cast<int64_t>(reflect(static_cast<double>(i), lo, hi)), 0, size - 1);
  };
  AxisTaps t;
  double base = std::floor(v), frac = v - base;
  auto b = static_cast<int64_t>(base);
  switch (m.interpolation) {
    case Interpolation::Nearest:
      t.count = 1;
      t.index[0] = tap(static_cast<int64_t>(v));
      t.weight[0] = 1;
      break;
    case Interpolation::Linear:
      t.count = 2;
      for (int j = 0; j < 2; ++j) t.index[j] = tap(b + j);
      t.weight[0] = 1 - frac;
      t.weight[1] = frac;
      break;
    case Interpolation::Cubic:
      t.count = 4;
      for (int j = 0; j < 4; ++j) {
        t.index[j] = tap(b - 1 + j);
        t.weight[j] = cubic_convolution(frac + 1 - j, -0.75);
      }
      break;
  }
  return t;
}

// The interpolated value of the image whose element (i0, i1, ...) is
// x[base + sum(i_k * strides[k])]: the sum over every combination of taps of
// the product of their weights times the element they read.
double interpolate(const Tensor& x, int64_t base, const std::vector<int64_t>& strides, const std::vector<AxisTaps>& taps) {
  size_t r = taps.size();
  std::vector<int> pick(r, 0);
  double sum = 0;
  while (true) {
    double w = 1;
    int64_t at = base;
    bool zero = false;
    for (size_t k = 0; k < r && !zero; ++k) {
      const AxisTaps& t = taps[k];
      zero = t.index[pick[k]] < 0;
      w *= t.weight[pick[k]];
      at += t.index[pick[k]] * strides[k];
    }
    if (!zero) sum += w * x.get_f64(at);
    size_t k = r;
    while (k > 0 && ++pick[k - 1] == taps[k - 1].count) pick[--k] = 0;
    if (k == 0) return sum;
  }
}

// ---------------------------------------------------------------- GridSample

void infer_grid_sample(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  const Type& grid = ctx.ranked_input(1);
  grid_sample_mode(ctx.node());
  require_numeric(ctx.node(), x.dtype(), "X");
  size_t r = x.rank() - 2;
  if (ctx.opset() < 20 && r != 2) ctx.fail("expected a 4-D X (N, C, H, W) before opset 20, got " + x.str());
  if (grid.rank() != x.rank())
    ctx.fail("expected grid of rank " + std::to_string(x.rank()) + " (N, output positions..., " + std::to_string(r) +
             ") for X " + x.str() + ", got " + grid.str());
  const Dim& last = grid.shape().back();
  if (last.is_static() && last.value() != static_cast<int64_t>(r))
    ctx.fail("expected grid's last dim to be " + std::to_string(r) + " (one coordinate per spatial dim of X " +
             x.str() + "), got " + grid.str());
  if (!ctx.env().unify(x.shape()[0], grid.shape()[0], &ctx.node()))
    ctx.fail("expected X " + x.str() + " and grid " + grid.str() + " to have one batch size");
  Dims out = {x.shape()[0], x.shape()[1]};
  out.insert(out.end(), grid.shape().begin() + 1, grid.shape().end() - 1);
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// Grid coordinates run from -1 to 1 over the image (x first: the last
// spatial dim); the kernel maps them to pixel coordinates.
std::vector<Tensor> eval_grid_sample(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  const Node& n = ctx.node();
  check_nchw(ctx, x);
  require_numeric(n, x.dtype(), "X");
  SampleMode m = grid_sample_mode(n);
  size_t r = x.rank() - 2;
  auto rr = static_cast<int64_t>(r);
  if (grid.rank() != x.rank() || grid.shape()[0] != x.shape()[0] || grid.shape().back() != rr)
    ctx.fail("expected grid of shape (" + std::to_string(x.shape()[0]) + ", output positions..., " + std::to_string(r) +
             ") for X " + shape_str(x.shape()) + ", got " + shape_str(grid.shape()));
  std::vector<int64_t> sizes = spatial_of(x.shape()), strides = row_major_strides(sizes);
  std::vector<int64_t> out_spatial(grid.shape().begin() + 1, grid.shape().end() - 1);
  int64_t batch = x.shape()[0], channels = x.shape()[1], plane = product(sizes), positions = product(out_spatial);
  std::vector<int64_t> yshape = {batch, channels};
  yshape.insert(yshape.end(), out_spatial.begin(), out_spatial.end());
  Tensor y(x.dtype(), yshape);
  std::vector<AxisTaps> taps(r);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < positions; ++p) {
      bool nan = false;
      for (size_t k = 0; k < r; ++k) {
        double g = grid.get_f64((b * positions + p) * rr + (rr - 1 - static_cast<int64_t>(k)));
        auto d = static_cast<double>(sizes[k]);
        double v = m.align_corners ? (g + 1) / 2 * (d - 1) : ((g + 1) * d - 1) / 2;
        nan = nan || std::isnan(v);
        if (!nan) taps[k] = axis_taps(v, sizes[k], m);
      }
      for (int64_t c = 0; c < channels; ++c)
        y.set_f64((b * channels + c) * positions + p,
                  nan ? std::numeric_limits<double>::quiet_NaN() : interpolate(x, (b * channels + c) * plane, strides, taps));
    }
  return {y};
}

// ---------------------------------------------------------------- DeformConv

struct DeformAttrs {
  int64_t group = 1, offset_group = 1;
  std::vector<int64_t> kernel;  // -1 where W's dim is symbolic
  SlidingWindow window;
};

DeformAttrs deform_attrs(const Node& n, const std::vector<int64_t>& w_kernel) {
  DeformAttrs a;
  a.group = n.get_int("group", 1);
  a.offset_group = n.get_int("offset_group", 1);
  if (a.group < 1 || a.offset_group < 1)
    n.fail("expected group and offset_group >= 1, got " + std::to_string(a.group) + " and " + std::to_string(a.offset_group));
  a.kernel = n.get_ints("kernel_shape", w_kernel);
  if (a.kernel.size() != w_kernel.size())
    n.fail("expected kernel_shape of " + std::to_string(w_kernel.size()) + " values, got " + shape_str(a.kernel));
  for (size_t i = 0; i < a.kernel.size(); ++i)
    if (w_kernel[i] >= 0 && a.kernel[i] != w_kernel[i])
      n.fail("kernel_shape " + shape_str(a.kernel) + " disagrees with W's kernel " + shape_str(w_kernel));
  if (std::string why = sliding_window(n, a.kernel, std::vector<int64_t>(a.kernel.size(), -1), &a.window); !why.empty())
    n.fail(why);
  return a;
}

void infer_deform_conv(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  const Type& w = ctx.ranked_input(1);
  const Type& offset = ctx.ranked_input(2);
  require_one_dtype(ctx, 0, {1, 2, 3, 4});
  size_t ns = x.rank() - 2;
  if (w.rank() != x.rank() || offset.rank() != x.rank())
    ctx.fail("expected W and offset of rank " + std::to_string(x.rank()) + ", got " + w.str() + " and " + offset.str());
  std::vector<int64_t> wk(ns, -1);
  for (size_t i = 0; i < ns; ++i)
    if (w.shape()[2 + i].is_static()) wk[i] = w.shape()[2 + i].value();
  DeformAttrs a = deform_attrs(ctx.node(), wk);
  const Dim& cin = x.shape()[1];
  const Dim& wc = w.shape()[1];
  if (!cin.is_unknown() && !wc.is_unknown() && !ctx.env().unify(cin, Dim(wc.expr() * C(a.group)), &ctx.node()))
    ctx.fail("expected X's channels (" + cin.str() + ") to equal group (" + std::to_string(a.group) +
             ") times W's input channels (" + wc.str() + ")");
  bool static_kernel = std::none_of(a.kernel.begin(), a.kernel.end(), [](int64_t k) { return k < 0; });
  const Dim& oc = offset.shape()[1];
  if (static_kernel && oc.is_static() && oc.value() != a.offset_group * product(a.kernel) * static_cast<int64_t>(ns))
    ctx.fail("expected offset's dim 1 to be offset_group * kernel size * " + std::to_string(ns) + " = " +
             std::to_string(a.offset_group * product(a.kernel) * static_cast<int64_t>(ns)) + ", got " + offset.str());
  Dims out = {x.shape()[0], w.shape()[0]};
  for (size_t i = 0; i < ns; ++i) {
    const Dim& in = x.shape()[2 + i];
    Dim o = offset.shape()[2 + i];
    if (!in.is_unknown() && a.kernel[i] >= 0) {
      const SlidingWindow& sw = a.window;
      int64_t extent = sw.dilations[i] * (a.kernel[i] - 1) + 1;
      o = Dim((in.expr() + C(sw.begin[i] + sw.end[i] - extent)).floordiv(C(sw.strides[i])) + C(1));
      if (!offset.shape()[2 + i].is_unknown() && !ctx.env().unify(o, offset.shape()[2 + i], &ctx.node()))
        ctx.fail("expected offset's spatial dims to be the convolution's output sizes, got " + offset.str() +
                 " where spatial dim " + std::to_string(i) + " is " + o.str());
    }
    out.push_back(o.is_unknown() ? ctx.env().fresh("u") : o);
  }
  if (!ctx.env().unify(x.shape()[0], offset.shape()[0], &ctx.node()))
    ctx.fail("expected X " + x.str() + " and offset " + offset.str() + " to have one batch size");
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// Each kernel tap reads X by linear interpolation (zero outside) at its
// window position moved by the tap's offset, scaled by the tap's mask; then
// the samples are convolved with W as a grouped convolution would.
std::vector<Tensor> eval_deform_conv(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& offset = ctx.input(2);
  check_nchw(ctx, x);
  size_t ns = x.rank() - 2;
  auto nsi = static_cast<int64_t>(ns);
  if (w.rank() != x.rank() || offset.rank() != x.rank())
    ctx.fail("expected W and offset of rank " + std::to_string(x.rank()) + ", got " + shape_str(w.shape()) + " and " +
             shape_str(offset.shape()));
  std::vector<int64_t> in = spatial_of(x.shape()), wk = spatial_of(w.shape()), out = spatial_of(offset.shape());
  DeformAttrs a = deform_attrs(ctx.node(), wk);
  int64_t batch = x.shape()[0], cin = x.shape()[1], m = w.shape()[0], cg = w.shape()[1];
  if (cin != cg * a.group || m % a.group != 0 || cin % a.offset_group != 0)
    ctx.fail("expected X's channels (" + std::to_string(cin) + ") = group (" + std::to_string(a.group) + ") * W's channels (" +
             std::to_string(cg) + "), divisible by offset_group (" + std::to_string(a.offset_group) +
             "), and W's filters (" + std::to_string(m) + ") divisible by group");
  int64_t kvol = product(wk), out_vol = product(out), in_vol = product(in);
  for (size_t i = 0; i < ns; ++i) {
    const SlidingWindow& sw = a.window;
    int64_t span = in[i] + sw.begin[i] + sw.end[i] - sw.dilations[i] * (wk[i] - 1) - 1;
    if (span < 0 || out[i] != span / sw.strides[i] + 1)
      ctx.fail("offset " + shape_str(offset.shape()) + " does not hold the convolution's output sizes along spatial dim " +
               std::to_string(i));
  }
  if (offset.shape()[0] != batch || offset.shape()[1] != a.offset_group * kvol * nsi)
    ctx.fail("expected offset of shape (" + std::to_string(batch) + ", " + std::to_string(a.offset_group * kvol * nsi) +
             ", output sizes...), got " + shape_str(offset.shape()));
  const Tensor* mask = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  std::vector<int64_t> mshape = {batch, a.offset_group * kvol};
  mshape.insert(mshape.end(), out.begin(), out.end());
  if (mask && mask->shape() != mshape)
    ctx.fail("expected mask of shape " + shape_str(mshape) + ", got " + shape_str(mask->shape()));
  if (ctx.has_input(3) && ctx.input(3).numel() != m)
    ctx.fail("expected B of " + std::to_string(m) + " values, got shape " + shape_str(ctx.input(3).shape()));
  SampleMode linear_zeros{Interpolation::Linear, Padding::Zeros, true};
  std::vector<int64_t> strides = row_major_strides(in);
  auto taps_k = all_indices(wk);
  auto positions = all_indices(out);
  int64_t per_offset_group = cin / a.offset_group, mg = m / a.group;
  std::vector<int64_t> yshape = {batch, m};
  yshape.insert(yshape.end(), out.begin(), out.end());
  Tensor y(x.dtype(), yshape);
  std::vector<AxisTaps> taps(ns);
  std::vector<double> cols(cin * kvol * out_vol);  // the masked samples, [channel, tap, position]
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t og = 0; og < a.offset_group; ++og)
      for (int64_t k = 0; k < kvol; ++k)
        for (int64_t o = 0; o < out_vol; ++o) {
          for (size_t i = 0; i < ns; ++i) {
            int64_t ch = ((og * kvol + k) * nsi + static_cast<int64_t>(i));
            double v = static_cast<double>(positions[o][i] * a.window.strides[i] - a.window.begin[i] +
                                           taps_k[k][i] * a.window.dilations[i]) +
                       offset.get_f64((b * offset.shape()[1] + ch) * out_vol + o);
            taps[i] = axis_taps(v, in[i], linear_zeros);
          }
          double scale = mask ? mask->get_f64((b * mshape[1] + og * kvol + k) * out_vol + o) : 1.0;
          for (int64_t c = og * per_offset_group; c < (og + 1) * per_offset_group; ++c)
            cols[(c * kvol + k) * out_vol + o] = scale * interpolate(x, (b * cin + c) * in_vol, strides, taps);
        }
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t g = oc / mg;
      double bias = ctx.has_input(3) ? ctx.input(3).get_f64(oc) : 0.0;
      for (int64_t o = 0; o < out_vol; ++o) {
        double acc = bias;
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t k = 0; k < kvol; ++k)
            acc += w.get_f64((oc * cg + c) * kvol + k) * cols[((g * cg + c) * kvol + k) * out_vol + o];
        y.set_f64((b * m + oc) * out_vol + o, acc);
      }
    }
  }
  return {y};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// GridSample -> pointwise ops and one GatherElements per tap combination, in
// f64 as the reference computes: per spatial axis, the grid coordinate
// mapped to a pixel coordinate (Slice of the grid, the reference's formula),
// rounded for nearest, clipped (border) or reflected (Floor, Mod, Where)
// outside the image, and its taps (Floor and the fraction; cubic's weights
// are Keys' polynomials in it), a zero-padding tap weighing 0, a reflection
// tap reading its mirror, every index clipped into the image. Each
// combination of one tap per axis gathers x at its flat index, times the
// product of its weights; their sum is y. Declines dims that are not static.
bool decompose_grid_sample(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& grid = n.input(1)->type();
  const Type& y = n.output(0)->type();
  if (!x.is_tensor() || !x.fully_shaped() || !grid.is_tensor() || !grid.fully_shaped() || !y.is_tensor() ||
      !y.fully_shaped() || !is_float(x.dtype()) || !is_float(grid.dtype()) || x.rank() < 3)
    return false;
  const SampleMode m = grid_sample_mode(n);
  const size_t r = x.rank() - 2;
  std::vector<int64_t> sizes;
  for (size_t k = 0; k < r; ++k) {
    if (!x.shape()[2 + k].is_static()) return false;
    sizes.push_back(x.shape()[2 + k].value());
  }
  const Dim batch = x.shape()[0], channels = x.shape()[1];
  const Dims out_spatial(grid.shape().begin() + 1, grid.shape().end() - 1);
  const Dim positions = dims_product(out_spatial);
  const Dims np = {batch, positions};
  auto f64 = [](const Dims& d) { return Type::tensor(DType::F64, d); };
  auto op = [&](const std::string& piece, const std::string& name, const std::vector<Value*>& ins,
                DType t = DType::F64) { return e.add(piece, name, ins, Type::tensor(t, np)); };
  auto number = [&](const std::string& hint, double v) { return e.scalar(hint, v, DType::F64); };
  Value* zero = number("zero", 0);
  Value* one = number("one", 1);
  Value* two = number("two", 2);
  Value* g = e.reshape("Reshape_grid", e.cast("Cast_grid", n.input(1), DType::F64),
                       {batch, positions, Dim(static_cast<int64_t>(r))});

  struct Tap {
    Value* index;   // f64, within the image
    Value* weight;  // f64, 0 for the zero padding
  };
  std::vector<std::vector<Tap>> taps(r);
  for (size_t k = 0; k < r; ++k) {
    const std::string a = std::to_string(k);
    const double d = static_cast<double>(sizes[k]);
    const double lo = m.align_corners ? 0.0 : -0.5, hi = m.align_corners ? d - 1 : d - 0.5;
    // The grid's coordinates run x first: spatial axis k is coordinate r - 1 - k.
    const auto c = static_cast<int64_t>(r - 1 - k);
    Value* gk = e.reshape("Reshape_coordinate" + a,
                          e.add("Slice_coordinate" + a, "Slice",
                                {g, e.i64("starts" + a, c), e.i64("ends" + a, c + 1), e.i64("axes" + a, 2)},
                                f64({batch, positions, Dim(1)})),
                          np);
    Value* shifted = op("Add_one" + a, "Add", {gk, one});
    Value* v = m.align_corners
                   ? op("Mul_extent" + a, "Mul", {op("Div_half" + a, "Div", {shifted, two}), number("span" + a, d - 1)})
                   : op("Div_half" + a, "Div",
                        {op("Sub_half" + a, "Sub",
                            {op("Mul_extent" + a, "Mul", {shifted, number("span" + a, d)}), one}),
                         two});
    const bool nearest = m.interpolation == Interpolation::Nearest;
    if (nearest) v = op("Round" + a, "Round", {v});
    Value* last = number("last" + a, d - 1);
    const bool reflects = m.padding == Padding::Reflection;
    Value* low = reflects ? number("lo" + a, lo) : nullptr;
    Value* high = reflects ? number("hi" + a, hi) : nullptr;
    // u reflected back and forth off lo and hi until it lies between them (`reflect`).
    auto reflect_value = [&](const std::string& t, Value* u) {
      if (hi - lo <= 0) return op("Add_lo" + t, "Add", {op("Mul_flat" + t, "Mul", {u, zero}), low});
      Value* below = op("Less_lo" + t, "Less", {u, low}, DType::Bool);
      Value* above = op("Greater_hi" + t, "Greater", {u, high}, DType::Bool);
      Value* past = op("Where_past" + t, "Where",
                       {below, op("Sub_lo" + t, "Sub", {low, u}), op("Sub_hi" + t, "Sub", {u, high})});
      Value* range = number("range" + t, hi - lo);
      Value* flips = op("Floor_flips" + t, "Floor", {op("Div_flips" + t, "Div", {past, range})});
      Value* rest = op("Sub_rest" + t, "Sub", {past, op("Mul_flips" + t, "Mul", {flips, range})});
      Value* even = op("Equal_even" + t, "Equal",
                       {e.add("Mod_flips" + t, "Mod", {flips, two}, f64(np), {{"fmod", Attribute::of_int(1)}}), zero},
                       DType::Bool);
      Value* mirrored = op("Where_mirror" + t, "Where",
                           {op("Equal_side" + t, "Equal", {below, even}, DType::Bool),
                            op("Add_rest" + t, "Add", {low, rest}), op("Sub_rest_hi" + t, "Sub", {high, rest})});
      return op("Where_reflect" + t, "Where", {op("Or_outside" + t, "Or", {below, above}, DType::Bool), mirrored, u});
    };
    if (m.padding == Padding::Border) v = op("Clip" + a, "Clip", {v, zero, last});
    if (reflects) v = reflect_value(a, v);
    auto tap = [&](const std::string& t, Value* i, Value* weight) {
      if (m.padding == Padding::Zeros) {
        Value* inside = op("And_inside" + t, "And",
                           {op("GreaterOrEqual_first" + t, "GreaterOrEqual", {i, zero}, DType::Bool),
                            op("LessOrEqual_last" + t, "LessOrEqual", {i, last}, DType::Bool)},
                           DType::Bool);
        Value* keep = e.cast("Cast_inside" + t, inside, DType::F64);
        weight = weight ? op("Mul_inside" + t, "Mul", {weight, keep}) : keep;
      }
      // A reflected integer index stays an integer: the reference's truncation is exact.
      if (reflects) i = reflect_value(t + "_index", i);
      taps[k].push_back({op("Clip_index" + t, "Clip", {i, zero, last}), weight});
    };
    if (nearest) {
      tap(a, v, nullptr);
      continue;
    }
    Value* base = op("Floor" + a, "Floor", {v});
    Value* frac = op("Sub_frac" + a, "Sub", {v, base});
    auto neighbour = [&](int offset) {
      if (offset == 0) return base;
      const std::string t = a + "_" + std::to_string(offset + 1);
      return op("Add_tap" + t, "Add", {base, number("offset" + t, offset)});
    };
    if (m.interpolation == Interpolation::Linear) {
      tap(a + "_0", base, op("Sub_weight" + a, "Sub", {one, frac}));
      tap(a + "_1", neighbour(1), frac);
      continue;
    }
    // Cubic: taps base - 1 .. base + 2 at distances frac + 1, frac, 1 - frac,
    // 2 - frac, weighed by cubic_convolution's two polynomials (a = -0.75).
    const double ka = -0.75;
    auto distance = [&](int j) -> Value* {
      if (j == 1) return frac;
      Value* c = number("distance" + a + "_" + std::to_string(j), j == 0 ? 1 : j - 1);
      const std::string t = a + "_" + std::to_string(j);
      return j == 0 ? op("Add_distance" + t, "Add", {frac, c}) : op("Sub_distance" + t, "Sub", {c, frac});
    };
    for (int j = 0; j < 4; ++j) {
      const std::string t = a + "_" + std::to_string(j);
      Value* dj = distance(j);
      Value* w;
      if (j == 1 || j == 2) {  // ((a + 2) d - (a + 3)) d d + 1
        Value* inner = op("Sub_inner" + t, "Sub",
                          {op("Mul_inner" + t, "Mul", {number("a2" + t, ka + 2), dj}), number("a3" + t, ka + 3)});
        Value* squared = op("Mul_inner_dd" + t, "Mul", {op("Mul_inner_d" + t, "Mul", {inner, dj}), dj});
        w = op("Add_inner" + t, "Add", {squared, one});
      } else {  // ((a d - 5 a) d + 8 a) d - 4 a
        Value* p = op("Sub_outer" + t, "Sub",
                      {op("Mul_outer" + t, "Mul", {number("a" + t, ka), dj}), number("a5" + t, 5 * ka)});
        p = op("Add_outer" + t, "Add", {op("Mul_outer_d" + t, "Mul", {p, dj}), number("a8" + t, 8 * ka)});
        w = op("Sub_outer_4a" + t, "Sub", {op("Mul_outer_dd" + t, "Mul", {p, dj}), number("a4" + t, 4 * ka)});
      }
      tap(t, neighbour(j - 1), w);
    }
  }

  Value* flat_x = e.reshape("Reshape_x", e.cast("Cast_x", n.input(0), DType::F64),
                            {batch, channels, Dim(product(sizes))});
  const std::vector<int64_t> strides = row_major_strides(sizes);
  const Dims ncp = {batch, channels, positions};
  Value* sum = nullptr;
  std::vector<size_t> pick(r, 0);
  for (int combination = 0;; ++combination) {
    const std::string t = std::to_string(combination);
    Value* index = nullptr;
    Value* weight = nullptr;
    for (size_t k = 0; k < r; ++k) {
      const Tap& tp = taps[k][pick[k]];
      Value* term = strides[k] == 1 ? tp.index
                                    : op("Mul_stride" + t + "_" + std::to_string(k), "Mul",
                                         {tp.index, number("stride" + t + "_" + std::to_string(k), strides[k])});
      index = index ? op("Add_index" + t + "_" + std::to_string(k), "Add", {index, term}) : term;
      if (tp.weight)
        weight = weight ? op("Mul_weight" + t + "_" + std::to_string(k), "Mul", {weight, tp.weight}) : tp.weight;
    }
    Value* flat = e.cast("Cast_index" + t, index, DType::I64);
    Value* at = e.expand("Expand_index" + t, e.reshape("Reshape_index" + t, flat, {batch, Dim(1), positions}), ncp);
    Value* read =
        e.add("GatherElements" + t, "GatherElements", {flat_x, at}, f64(ncp), {{"axis", Attribute::of_int(2)}});
    if (weight) {
      Value* spread = e.reshape("Reshape_weight" + t, weight, {batch, Dim(1), positions});
      read = e.add("Mul_read" + t, "Mul", {read, spread}, f64(ncp));
    }
    sum = sum ? e.add("Add_taps" + t, "Add", {sum, read}, f64(ncp)) : read;
    size_t k = r;
    while (k > 0 && ++pick[k - 1] == taps[k - 1].size()) pick[--k] = 0;
    if (k == 0) break;
  }
  if (x.dtype() == DType::F64) {
    e.finish_reshape("Reshape_y", sum);
    return true;
  }
  e.finish("Cast_y", "Cast", {e.reshape("Reshape_y", sum, y.shape())},
           {{"to", Attribute::of_int(static_cast<int64_t>(x.dtype()))}});
  return true;
}

// DeformConv -> a deformable im2col, then one batched MatMul per group and
// the bias Add. The im2col samples x as the reference does, in f64: per
// spatial axis each tap's position in its window (a constant [taps,
// positions] table) plus the tap's offset, its two linear taps (Floor and the
// fraction), a tap outside the image weighing 0 and its index clipped into
// it; each combination of one tap per axis gathers x at its flat index, once
// per channel of the offset group (GatherElements), times the product of its
// weights, and their sum times the mask is the column. The columns, as the
// gemm's x dtype, are laid out [group, channels * taps, batch * positions], so
// each group's W is one matrix the whole batch shares. Declines dims that are
// not static, batch aside, and autodiff (DeformConv has no gradient).
bool decompose_deform_conv(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& w = n.input(1)->type();
  const Type& offset = n.input(2)->type();
  const Type& y = n.output(0)->type();
  auto static_after_batch = [](const Type& t) {
    return t.is_tensor() && t.fully_shaped() && t.rank() >= 3 &&
           std::all_of(t.shape().begin() + 1, t.shape().end(), [](const Dim& d) { return d.is_static(); });
  };
  if (e.differentiates() || !static_after_batch(x) || !static_after_batch(offset) || !static_after_batch(y) ||
      !w.is_tensor() || !w.fully_shaped() || !is_float(x.dtype()) ||
      std::any_of(w.shape().begin(), w.shape().end(), [](const Dim& d) { return !d.is_static(); }))
    return false;
  const size_t r = x.rank() - 2;
  auto rr = static_cast<int64_t>(r);
  std::vector<int64_t> in, out, wk;
  for (size_t i = 0; i < r; ++i) {
    in.push_back(x.shape()[2 + i].value());
    out.push_back(offset.shape()[2 + i].value());
    wk.push_back(w.shape()[2 + i].value());
  }
  const DeformAttrs a = deform_attrs(n, wk);
  const int64_t cin = x.shape()[1].value(), m = w.shape()[0].value(), cg = w.shape()[1].value();
  if (cin != cg * a.group || m % a.group != 0 || cin % a.offset_group != 0) return false;
  const int64_t kvol = product(wk), positions = product(out), per_offset_group = cin / a.offset_group;
  const int64_t og = a.offset_group, g = a.group, mg = m / g, columns = kvol * positions;
  const Dim batch = x.shape()[0];
  const Dims samples = {batch, Dim(og), Dim(kvol), Dim(positions)};
  auto f64 = [](const Dims& d) { return Type::tensor(DType::F64, d); };
  auto op = [&](const std::string& piece, const std::string& name, const std::vector<Value*>& ins,
                DType t = DType::F64) { return e.add(piece, name, ins, Type::tensor(t, samples)); };
  auto number = [&](const std::string& hint, double v) { return e.scalar(hint, v, DType::F64); };
  Value* zero = number("zero", 0);
  Value* one = number("one", 1);
  Value* offsets = e.reshape("Reshape_offset", e.cast("Cast_offset", n.input(2), DType::F64),
                             {batch, Dim(og), Dim(kvol), Dim(rr), Dim(positions)});
  const auto taps_k = all_indices(wk);
  const auto places = all_indices(out);
  struct Tap {
    Value* index;   // f64, within the image
    Value* weight;  // f64, 0 outside it
  };
  std::vector<std::array<Tap, 2>> taps(r);
  for (size_t i = 0; i < r; ++i) {
    const std::string s = std::to_string(i);
    std::vector<double> window;
    for (int64_t k = 0; k < kvol; ++k)
      for (int64_t o = 0; o < positions; ++o)
        window.push_back(static_cast<double>(places[o][i] * a.window.strides[i] - a.window.begin[i] +
                                             taps_k[k][i] * a.window.dilations[i]));
    Value* along = e.reshape(
        "Reshape_offset" + s,
        e.add("Slice_offset" + s, "Slice",
              {offsets, e.i64("starts" + s, static_cast<int64_t>(i)),
               e.i64("ends" + s, static_cast<int64_t>(i) + 1), e.i64("axes" + s, 3)},
              f64({batch, Dim(og), Dim(kvol), Dim(1), Dim(positions)})),
        samples);
    Value* v = op("Add_window" + s, "Add", {along, e.numbers("window" + s, window, {kvol, positions}, DType::F64)});
    Value* base = op("Floor" + s, "Floor", {v});
    Value* frac = op("Sub_frac" + s, "Sub", {v, base});
    Value* last = number("last" + s, static_cast<double>(in[i] - 1));
    auto tap = [&](const std::string& t, Value* index, Value* weight) {
      Value* inside = op("And_inside" + t, "And",
                         {op("GreaterOrEqual_first" + t, "GreaterOrEqual", {index, zero}, DType::Bool),
                          op("LessOrEqual_last" + t, "LessOrEqual", {index, last}, DType::Bool)},
                         DType::Bool);
      return Tap{op("Clip_index" + t, "Clip", {index, zero, last}),
                 op("Mul_inside" + t, "Mul", {weight, e.cast("Cast_inside" + t, inside, DType::F64)})};
    };
    taps[i][0] = tap(s + "_0", base, op("Sub_weight" + s, "Sub", {one, frac}));
    taps[i][1] = tap(s + "_1", op("Add_next" + s, "Add", {base, one}), frac);
  }

  const Dims spread = {batch, Dim(og), Dim(1), Dim(columns)};
  const Dims gathered = {batch, Dim(og), Dim(per_offset_group), Dim(columns)};
  Value* flat_x = e.reshape("Reshape_x", e.cast("Cast_x", n.input(0), DType::F64),
                            {batch, Dim(og), Dim(per_offset_group), Dim(product(in))});
  const std::vector<int64_t> strides = row_major_strides(in);
  Value* sum = nullptr;
  for (size_t combination = 0; combination < (size_t{1} << r); ++combination) {
    const std::string t = std::to_string(combination);
    Value* index = nullptr;
    Value* weight = nullptr;
    for (size_t i = 0; i < r; ++i) {
      const Tap& tp = taps[i][(combination >> (r - 1 - i)) & 1];
      const std::string ti = t + "_" + std::to_string(i);
      Value* term = strides[i] == 1 ? tp.index
                                    : op("Mul_stride" + ti, "Mul", {tp.index, number("stride" + ti, strides[i])});
      index = index ? op("Add_index" + ti, "Add", {index, term}) : term;
      weight = weight ? op("Mul_weight" + ti, "Mul", {weight, tp.weight}) : tp.weight;
    }
    Value* at = e.expand("Expand_index" + t,
                         e.reshape("Reshape_index" + t, e.cast("Cast_index" + t, index, DType::I64), spread), gathered);
    Value* read = e.add("GatherElements" + t, "GatherElements", {flat_x, at}, f64(gathered),
                        {{"axis", Attribute::of_int(3)}});
    read = e.add("Mul_read" + t, "Mul", {read, e.reshape("Reshape_weight" + t, weight, spread)}, f64(gathered));
    sum = sum ? e.add("Add_taps" + t, "Add", {sum, read}, f64(gathered)) : read;
  }
  if (n.has_input(4))
    sum = e.add("Mul_mask", "Mul",
                {sum, e.reshape("Reshape_mask", e.cast("Cast_mask", n.input(4), DType::F64), spread)}, f64(gathered));
  const DType dt = x.dtype();
  const Dims grouped = {batch, Dim(g), Dim(cg * kvol), Dim(positions)};
  Value* cols = e.reshape("Reshape_cols", e.cast("Cast_cols", sum, dt), grouped);
  cols = e.add("Transpose_cols", "Transpose", {cols}, Type::tensor(dt, {Dim(g), Dim(cg * kvol), batch, Dim(positions)}),
               {{"perm", Attribute::of_ints({1, 2, 0, 3})}});
  const Dim batch_positions(batch.expr() * C(positions));
  cols = e.reshape("Reshape_columns", cols, {Dim(g), Dim(cg * kvol), batch_positions});
  Value* filters = e.reshape("Reshape_w", n.input(1), {Dim(g), Dim(mg), Dim(cg * kvol)});
  Value* gemm = e.add("MatMul", "MatMul", {filters, cols}, Type::tensor(dt, {Dim(g), Dim(mg), batch_positions}));
  gemm = e.reshape("Reshape_product", gemm, {Dim(g), Dim(mg), batch, Dim(positions)});
  Value* result = e.add("Transpose_y", "Transpose", {gemm}, Type::tensor(dt, {batch, Dim(g), Dim(mg), Dim(positions)}),
                        {{"perm", Attribute::of_ints({2, 0, 1, 3})}});
  if (!n.has_input(3)) {
    e.finish_reshape("Reshape_y", result);
    return true;
  }
  Value* bias = e.reshape("Reshape_b", n.input(3), {Dim(g), Dim(mg), Dim(1)});
  e.finish_reshape("Reshape_y", e.add("Add_bias", "Add", {result, bias}, result->type()));
  return true;
}

}  // namespace

void register_sampling_ops(OpRegistry& r) {
  r.add(OpDef{"", "GridSample", 16, 0, infer_grid_sample, eval_grid_sample, kNumeric}).decomposition(decompose_grid_sample);
  r.add(OpDef{"", "DeformConv", 19, kContraction, infer_deform_conv, eval_deform_conv, kFloatTypes})
      .decomposition(decompose_deform_conv);
}

}  // namespace tcc
