// Sliding-window ops: convolutions (Conv; ConvTranspose in conv_transpose.cc)
// and pools (MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool,
// GlobalLpPool).
//
// Shape rules keep batch and spatial dims symbolic: a window op's output size
// is (in + pads - extent) // stride + 1 as a SymExpr, so `seq` stays `seq`
// under a same-padded conv and becomes `(seq+1)//(2)` under a stride-2 one.
// Kernels are direct loops computing in double, the oracle for fast paths.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "src/ops/conv_pool.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

Window read_window(const Node& n, size_t nspatial, std::vector<int64_t> kernel) {
  Window w;
  w.kernel = n.has_attr("kernel_shape") ? n.get_ints("kernel_shape") : std::move(kernel);
  if (w.kernel.empty() && nspatial > 0) n.fail("attribute kernel_shape is required");
  w.strides = n.get_ints("strides", std::vector<int64_t>(nspatial, 1));
  w.dilations = n.get_ints("dilations", std::vector<int64_t>(nspatial, 1));
  w.pads = n.get_ints("pads", std::vector<int64_t>(2 * nspatial, 0));
  w.auto_pad = n.get_string("auto_pad", "NOTSET");
  w.ceil_mode = n.get_int("ceil_mode", 0) != 0;
  auto expect_len = [&](const char* what, const std::vector<int64_t>& v, size_t len) {
    if (v.size() != len)
      n.fail(std::string("expected ") + what + " to have " + std::to_string(len) + " values (one per spatial dim" +
             (len == 2 * nspatial && len ? ", begins then ends" : "") + "), got " + std::to_string(v.size()));
  };
  expect_len("kernel_shape", w.kernel, nspatial);
  expect_len("strides", w.strides, nspatial);
  expect_len("dilations", w.dilations, nspatial);
  expect_len("pads", w.pads, 2 * nspatial);
  // Positive where they must be, and bounded, so that a window's extent and output sizes never overflow.
  constexpr int64_t kMaxWindow = int64_t{1} << 31;
  auto bounded = [&](const char* what, const std::vector<int64_t>& v, int64_t lo) {
    for (int64_t x : v)
      if (x < lo || x >= kMaxWindow)
        n.fail(std::string("expected ") + what + " values from " + std::to_string(lo) + " to 2^31 - 1, got " +
               std::to_string(x));
  };
  if (n.has_attr("kernel_shape")) bounded("kernel_shape", w.kernel, 1);
  bounded("strides", w.strides, 1);
  bounded("dilations", w.dilations, 1);
  bounded("pads", w.pads, -kMaxWindow + 1);
  if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && !w.same())
    n.fail("expected auto_pad NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + w.auto_pad + "'");
  return w;
}

namespace {

// Output size of a sliding window along spatial dim i. With no ShapeEnv (in
// kernels) every input is static and so is the result.
Dim window_out_dim(const Window& w, size_t i, const Dim& in, ShapeEnv* env) {
  auto unknown = [&] { return env ? env->fresh("u") : Dim(); };
  if (in.is_unknown() || w.kernel[i] < 0) return unknown();
  const SymExpr& x = in.expr();
  int64_t s = w.strides[i], ext = w.extent(i);
  if (w.same()) return Dim((x + C(s - 1)).floordiv(C(s)));
  if (w.auto_pad == "VALID") return Dim((x - C(ext)).floordiv(C(s)) + C(1));
  int64_t pb = w.pads[i], pe = w.pads[w.rank() + i];
  SymExpr span = x + C(pb + pe - ext);
  if (!w.ceil_mode) return Dim(span.floordiv(C(s)) + C(1));
  SymExpr out = (span + C(s - 1)).floordiv(C(s)) + C(1);
  // ceil_mode drops a last window that would start inside the end padding.
  if (out.is_constant() && x.is_constant()) {
    int64_t o = out.constant_value();
    return Dim((o - 1) * s >= x.constant_value() + pb ? o - 1 : o);
  }
  // That cannot happen when the end padding plus one stride fits in the window.
  if (pe + s <= ext) return Dim(out);
  return unknown();
}

// Output sizes of a window over static spatial sizes `in`, at run time: a
// window wider than its padded input (a symbolic kernel size that only now
// turns out too large) is the node's error, not a negative shape.
std::vector<int64_t> window_out_dims(EvalContext& ctx, const Window& w, const std::vector<int64_t>& in) {
  std::vector<int64_t> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    out[i] = window_out_dim(w, i, Dim(in[i]), nullptr).value();
    if (out[i] < 0)
      ctx.fail("the window along spatial dim " + std::to_string(i) + " spans " + std::to_string(w.extent(i)) +
               " elements, more than its padded input of " + std::to_string(in[i]) + " holds");
  }
  return out;
}

// Begin and end paddings actually applied, given the output sizes.
void resolve_pads(const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                  std::vector<int64_t>& begin, std::vector<int64_t>& end) {
  size_t r = w.rank();
  begin.assign(r, 0);
  end.assign(r, 0);
  for (size_t i = 0; i < r; ++i) {
    if (w.same()) {
      int64_t total = std::max<int64_t>(0, (out[i] - 1) * w.strides[i] + w.extent(i) - in[i]);
      begin[i] = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end[i] = total - begin[i];
    } else if (w.auto_pad == "NOTSET") {
      begin[i] = w.pads[i];
      end[i] = w.pads[r + i];
    }
  }
}

}  // namespace

std::vector<int64_t> spatial_of(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

// ---------------------------------------------------------------- Conv

Dims conv_dims(InferContext& ctx, size_t xi, size_t wi) {
  const Type& x = ranked_nchw(ctx, xi);
  const Type& w = ctx.ranked_input(wi);
  if (w.rank() != x.rank()) ctx.fail("expected W of rank " + std::to_string(x.rank()) + ", got " + w.str());
  size_t ns = x.rank() - 2;
  int64_t group = ctx.node().get_int("group", 1);
  if (group < 1) ctx.fail("expected group >= 1, got " + std::to_string(group));
  std::vector<int64_t> kernel(ns, -1);
  for (size_t i = 0; i < ns; ++i)
    if (w.shape()[2 + i].is_static()) kernel[i] = w.shape()[2 + i].value();
  Window win = read_window(ctx.node(), ns, kernel);
  const Dim& cin = x.shape()[1];
  const Dim& wc = w.shape()[1];
  if (!cin.is_unknown() && !wc.is_unknown() &&
      !ctx.env().unify(cin, Dim(wc.expr() * C(group)), &ctx.node()))
    ctx.fail("expected X's channels (" + cin.str() + ") to equal group (" + std::to_string(group) +
             ") times W's input channels (" + wc.str() + ")");
  Dims out = {x.shape()[0], w.shape()[0]};
  for (size_t i = 0; i < ns; ++i) out.push_back(window_out_dim(win, i, x.shape()[2 + i], &ctx.env()));
  return out;
}

Tensor conv_compute(EvalContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias, DType out_dtype) {
  check_nchw(ctx, x);
  if (w.rank() != x.rank()) ctx.fail("expected W of rank " + std::to_string(x.rank()) + ", got " + shape_str(w.shape()));
  size_t ns = x.rank() - 2;
  int64_t group = ctx.node().get_int("group", 1);
  int64_t n_batch = x.shape()[0], cin = x.shape()[1], m = w.shape()[0], cg = w.shape()[1];
  if (group < 1 || cin != cg * group || m % group != 0)
    ctx.fail("expected X's channels (" + std::to_string(cin) + ") = group (" + std::to_string(group) +
             ") * W's channels (" + std::to_string(cg) + ") and W's filters (" + std::to_string(m) +
             ") divisible by group");
  if (bias && bias->numel() != m)
    ctx.fail("expected B of " + std::to_string(m) + " values, got shape " + shape_str(bias->shape()));
  std::vector<int64_t> kshape = spatial_of(w.shape()), in = spatial_of(x.shape());
  Window win = read_window(ctx.node(), ns, kshape);
  if (win.kernel != kshape) ctx.fail("kernel_shape " + shape_str(win.kernel) + " disagrees with W " + shape_str(w.shape()));
  std::vector<int64_t> out = window_out_dims(ctx, win, in), pb, pe;
  resolve_pads(win, in, out, pb, pe);
  std::vector<int64_t> yshape = {n_batch, m};
  yshape.insert(yshape.end(), out.begin(), out.end());
  Tensor y(out_dtype, yshape);
  auto offsets = all_indices(kshape);
  auto positions = all_indices(out);
  std::vector<int64_t> xstr = row_major_strides(in);
  int64_t in_vol = product(in), kvol = product(kshape), out_vol = product(out), mg = m / group;
  std::vector<int64_t> pos(ns);
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t g = oc / mg;
      double start = bias ? bias->get_f64(oc) : 0.0;
      for (int64_t o = 0; o < out_vol; ++o) {
        double acc = start;
        for (int64_t k = 0; k < kvol; ++k) {
          int64_t xoff = 0;
          bool inside = true;
          for (size_t i = 0; i < ns && inside; ++i) {
            int64_t p = positions[o][i] * win.strides[i] - pb[i] + offsets[k][i] * win.dilations[i];
            inside = p >= 0 && p < in[i];
            xoff += p * xstr[i];
          }
          if (!inside) continue;
          for (int64_t c = 0; c < cg; ++c)
            acc += x.get_f64((b * cin + g * cg + c) * in_vol + xoff) * w.get_f64((oc * cg + c) * kvol + k);
        }
        y.set_f64((b * m + oc) * out_vol + o, acc);
      }
    }
  return y;
}

namespace {

void infer_conv(InferContext& ctx) {
  Dims out = conv_dims(ctx, 0, 1);
  ctx.set_output_type(0, Type::tensor(ctx.input_type(0).dtype(), out));
}

std::vector<Tensor> eval_conv(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  return {conv_compute(ctx, x, ctx.input(1), ctx.has_input(2) ? &ctx.input(2) : nullptr, x.dtype())};
}

// ---------------------------------------------------------------- Pools

enum class PoolKind { Max, Average, Lp };

void infer_pool(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  size_t ns = x.rank() - 2;
  Window win = read_window(ctx.node(), ns, {});
  Dims out = {x.shape()[0], x.shape()[1]};
  for (size_t i = 0; i < ns; ++i) out.push_back(window_out_dim(win, i, x.shape()[2 + i], &ctx.env()));
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::I64, out));
}

std::vector<Tensor> eval_pool(EvalContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  check_nchw(ctx, x);
  size_t ns = x.rank() - 2;
  Window win = read_window(n, ns, {});
  bool count_pad = n.get_int("count_include_pad", 0) != 0;
  double p_norm = static_cast<double>(n.get_int("p", 2));
  bool column_major = n.get_int("storage_order", 0) != 0;
  std::vector<int64_t> in = spatial_of(x.shape()), pb, pe;
  std::vector<int64_t> out = window_out_dims(ctx, win, in);
  resolve_pads(win, in, out, pb, pe);
  int64_t planes = x.shape()[0] * x.shape()[1], in_vol = product(in), out_vol = product(out);
  std::vector<int64_t> yshape = {x.shape()[0], x.shape()[1]};
  yshape.insert(yshape.end(), out.begin(), out.end());
  Tensor y(x.dtype(), yshape);
  Tensor indices(DType::I64, yshape);
  // Indices count in row-major or (storage_order=1) column-major spatial order.
  std::vector<int64_t> xstr = row_major_strides(in), istr(ns, 1);
  for (size_t i = 0; i < ns; ++i) istr[i] = column_major ? product(std::vector<int64_t>(in.begin(), in.begin() + i)) : xstr[i];
  auto offsets = all_indices(win.kernel);
  auto positions = all_indices(out);
  bool exact_int = is_integer(x.dtype());
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t o = 0; o < out_vol; ++o) {
      double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t best = -1, best_int = 0, real = 0, padded = 0;
      for (const auto& off : offsets) {
        int64_t xoff = 0, ioff = 0;
        bool inside = true, in_padding = true;
        for (size_t i = 0; i < ns; ++i) {
          int64_t p = positions[o][i] * win.strides[i] - pb[i] + off[i] * win.dilations[i];
          inside = inside && p >= 0 && p < in[i];
          // ceil_mode windows may run past the end padding; those cells never count.
          in_padding = in_padding && p < in[i] + pe[i];
          xoff += p * xstr[i];
          ioff += p * istr[i];
        }
        if (in_padding) ++padded;
        if (!inside) continue;
        ++real;
        double v = x.get_f64(plane * in_vol + xoff);
        if (kind == PoolKind::Max) {
          // Integers compare exactly (i64 beyond 2^53 does not survive double).
          int64_t vi = exact_int ? x.get_i64(plane * in_vol + xoff) : 0;
          if (best < 0 || (exact_int ? vi > best_int : (v > acc || std::isnan(v)))) {
            acc = v;
            best_int = vi;
            best = plane * in_vol + ioff;
          }
        } else if (kind == PoolKind::Average) {
          acc += v;
        } else {
          acc += std::pow(std::fabs(v), p_norm);
        }
      }
      int64_t at = plane * out_vol + o;
      if (kind == PoolKind::Average) acc /= static_cast<double>(count_pad ? padded : real);
      if (kind == PoolKind::Lp) acc = std::pow(acc, 1.0 / p_norm);
      if (exact_int && kind == PoolKind::Max)
        y.set_i64(at, best_int);
      else
        y.set_f64(at, acc);
      indices.set_i64(at, best);
    }
  if (kind == PoolKind::Max && ctx.num_outputs() > 1) return {y, indices};
  return {y};
}

void infer_global_pool(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  Dims out = {x.shape()[0], x.shape()[1]};
  out.resize(x.rank(), Dim(1));
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

std::vector<Tensor> eval_global_pool(EvalContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  check_nchw(ctx, x);
  std::vector<int64_t> yshape = {x.shape()[0], x.shape()[1]};
  yshape.resize(x.rank(), 1);
  Tensor y(x.dtype(), yshape);
  int64_t vol = product(x.shape(), 2);
  double p_norm = static_cast<double>(ctx.node().get_int("p", 2));
  for (int64_t plane = 0; plane < product(yshape); ++plane) {
    double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < vol; ++i) {
      double v = x.get_f64(plane * vol + i);
      if (kind == PoolKind::Max) acc = std::max(acc, v);
      else if (kind == PoolKind::Average) acc += v;
      else acc += std::pow(std::fabs(v), p_norm);
    }
    if (kind == PoolKind::Average) acc /= static_cast<double>(vol);
    if (kind == PoolKind::Lp) acc = std::pow(acc, 1.0 / p_norm);
    y.set_f64(plane, acc);
  }
  return {y};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

}  // namespace

ExplicitWindow window_of(GradContext& c, const std::vector<int64_t>& kernel) {
  std::string auto_pad = c.node().get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    c.fail("tcc differentiates windows with explicit pads, not auto_pad " + auto_pad);
  size_t ns = kernel.size();
  ExplicitWindow w;
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
    if (xd[2 + i].is_unknown() || yd[2 + i].is_unknown())
      c.fail("the gradient of a sliding window needs known spatial dims, not " + c.in(0)->type().str() + " -> " +
             c.out()->type().str());
    w.in.push_back(xd[2 + i]);
    w.out.push_back(yd[2 + i]);
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

namespace {

// Swaps the batch and channel axes of a value of the given rank.
Value* swap01(GradContext& c, Value* x, size_t rank) { return swap_axes(c, x, rank, 0, 1); }

}  // namespace

// The gradient of a convolution's weights W [K, C/G, kernel...] from its
// input `x` [N, C, in...] and the gradient `g` [N, K, out...] of its output
// (`out` the spatial dims of g), with w's strides, dilations and pads:
//   dw[k, c, r] = sum over n, o of x[n, c, o s - p + r d] g[n, k, o].
// Ungrouped over static `out`: a convolution of x with g, batch and channel
// axes swapped (batch is its symbolic channel axis), stride d and dilation s,
// cut to the window's taps. Grouped, or over symbolic `out` (g as that
// convolution's kernel would have a symbolic size), tap by tap: x_r is x
// (zero-padded) read at o s + r d, and dw[g, kg, cg, r] = sum over n, o of
// g[n, g, kg, o] x_r[n, g, cg, o], one batched product over the groups,
// [G, K/G, N*O] @ [G, N*O, C/G], per tap. Over a symbolic `out`, x_r ends
// where the later taps' reach (k - 1 - r) d before the padded end, which
// leaves out elements without knowing out.
Value* weight_gradient(GradContext& c, Value* x, Value* g, const ExplicitWindow& w, const Dims& out, int64_t group,
                       int64_t k, int64_t cg) {
  Emitter& e = c.e();
  size_t ns = w.kernel.size(), rank = ns + 2;
  std::vector<int64_t> spatial;
  for (size_t i = 0; i < ns; ++i) spatial.push_back(static_cast<int64_t>(2 + i));
  bool static_out = std::all_of(out.begin(), out.end(), [](const Dim& d) { return d.is_static(); });
  if (group == 1 && static_out) {
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
      int64_t reach = (w.kernel[i] - 1 - tap[i]) * w.dilations[i];
      if (static_out) stops.push_back(starts.back() + (out[i].value() - 1) * w.strides[i] + 1);
      else stops.push_back(reach > 0 ? -reach : std::numeric_limits<int64_t>::max());
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

std::vector<int64_t> kernel_of(GradContext& c, const char* op) {
  const Dims& wd = c.dims(c.in(1));
  std::vector<int64_t> kernel;
  for (size_t i = 0; i < wd.size(); ++i) {
    if (!wd[i].is_static()) c.fail(std::string("the gradient of ") + op + " needs W's shape static");
    if (i >= 2) kernel.push_back(wd[i].value());
  }
  return kernel;
}

Value* bias_gradient(GradContext& c, size_t rank) {
  std::vector<int64_t> axes = {0};
  for (size_t i = 2; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  return c.e().reduce("ReduceSum", c.dy(), axes, false);
}

namespace {

// The spatial sizes of the node's input x, Shape(x)[2:]: symbolic ones too.
Value* spatial_sizes(GradContext& c) {
  Emitter& e = c.e();
  return e.op("Slice", {e.shape_of(c.in(0)), e.ints({2}), e.ints({std::numeric_limits<int64_t>::max()})});
}

// v, shaped like the window's output, spread back onto x by the transposed
// convolution with weights `wt`: ConvTranspose with the window's strides,
// dilations, pads and groups, its output padding filling x's size, the
// remainder in - ((out - 1) s + extent - pads) per spatial dim. Where
// symbolic sizes leave that remainder open ((in + pads - extent) mod s, of
// x's size), the padding is s - 1, the most it can be, and the result is cut
// to x's spatial dims.
Value* transposed_window(GradContext& c, const ExplicitWindow& w, Value* v, Value* wt, int64_t group) {
  Emitter& e = c.e();
  size_t ns = w.kernel.size();
  std::vector<int64_t> output_padding, spatial;
  bool cut = false;
  for (size_t i = 0; i < ns; ++i) {
    SymExpr rest = w.in[i].expr() - ((w.out[i].expr() - C(1)) * C(w.strides[i]) +
                                      C(w.extent(i) - w.begin[i] - w.end[i]));
    cut = cut || !rest.is_constant();
    output_padding.push_back(rest.is_constant() ? rest.constant_value() : w.strides[i] - 1);
    spatial.push_back(static_cast<int64_t>(2 + i));
  }
  Attrs attrs = window_attrs(w.strides, w.dilations, w.begin, w.end);
  attrs["group"] = Attribute::of_int(group);
  attrs["output_padding"] = Attribute::of_ints(output_padding);
  Value* dx = e.op("ConvTranspose", {v, wt}, std::move(attrs));
  if (!cut) return dx;
  return e.op("Slice", {dx, e.ints(std::vector<int64_t>(ns, 0)), spatial_sizes(c), e.ints(spatial)});
}

// y = conv(x, w) + b, stride s, dilation d, pads p (begin) and q (end) per spatial dim:
//   db = g summed over every axis but the channel;
//   dx = the transposed convolution of g with w. With stride 1 and pads no larger
//        than the window (d (k-1) >= p, q) that is a convolution of g with w's
//        taps reversed and its two channel axes swapped, pads d (k-1) - p and
//        d (k-1) - q; otherwise ConvTranspose (transposed_window);
//   dw = weight_gradient(x, g).
void conv_rule(GradContext& c) {
  Emitter& e = c.e();
  const Dims& wd = c.dims(c.in(1));
  std::vector<int64_t> kernel = kernel_of(c, "Conv");
  ExplicitWindow w = window_of(c, kernel);
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
      c.set(0, transposed_window(c, w, g, c.in(1), group));
    }
  }
  if (c.wants(1)) c.set(1, weight_gradient(c, c.in(0), g, w, w.out, group, wd[0].value(), wd[1].value()));
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
Value* spread_over_windows(GradContext& c, const ExplicitWindow& w, Value* v) {
  const Dim& channels = c.dims(c.in(0))[1];
  if (!channels.is_static())
    c.fail("the gradient of " + c.node().op_type() + " needs static channels, not " + channels.str());
  std::vector<int64_t> weights = {channels.value(), 1};
  weights.insert(weights.end(), w.kernel.begin(), w.kernel.end());
  return transposed_window(c, w, v, c.e().op("Expand", {scalar(c, 1.0), c.e().ints(weights)}), channels.value());
}

// AveragePool: g / divisor spread back over each window. The divisor
// is the window's size with count_include_pad, else the number of its taps
// inside x: a convolution of ones over x's extent, [1, 1, in...] (symbolic
// sizes read from x's shape).
void average_pool_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.get_int("ceil_mode", 0) != 0) c.fail("tcc differentiates AveragePool without ceil_mode only");
  std::vector<int64_t> kernel = n.get_ints("kernel_shape");
  ExplicitWindow w = window_of(c, kernel);
  Emitter& e = c.e();
  auto ones = [&](Value* shape) { return e.op("Expand", {scalar(c, 1.0), shape}); };
  std::vector<int64_t> plane = {1, 1}, taps = {1, 1};
  for (const Dim& d : w.in)
    if (d.is_static()) plane.push_back(d.value());
  taps.insert(taps.end(), kernel.begin(), kernel.end());
  Value* divisor;
  if (n.get_int("count_include_pad", 0) != 0) {
    int64_t size = 1;
    for (int64_t k : kernel) size *= k;
    divisor = scalar(c, static_cast<double>(size));
  } else {
    Value* plane_shape = plane.size() == taps.size()
                             ? e.ints(plane)
                             : e.op("Concat", {e.ints({1, 1}), spatial_sizes(c)}, int_attr("axis", 0));
    divisor = e.op("Conv", {ones(plane_shape), ones(e.ints(taps))},
                   window_attrs(w.strides, w.dilations, w.begin, w.end));
  }
  c.set(0, spread_over_windows(c, w, e.op("Div", {c.dy(), divisor})));
}

// The two factors of d (sum |x|^p)^(1/p) / dx = |x|^(p-1) sign(x) * y^(1-p):
// per output, g y^(1-p) (0 where y is 0), and per input, |x|^(p-1) sign(x).
Value* lp_share(GradContext& c, double p) {
  Emitter& e = c.e();
  Value* zero = scalar(c, 0.0);
  Value* share = mul(c, c.dy(), e.op("Pow", {c.out(), scalar(c, 1.0 - p)}));
  return e.op("Where", {e.op("Equal", {c.out(), zero}), zero, share});
}
Value* lp_slope(GradContext& c, double p) {
  Emitter& e = c.e();
  if (p == 2) return c.in(0);
  return mul(c, e.op("Pow", {e.op("Abs", {c.in(0)}), scalar(c, p - 1.0)}), e.op("Sign", {c.in(0)}));
}

// LpPool, y = (sum over the window of |x|^p)^(1/p): dx = |x|^(p-1) sign(x)
// times the windows' g y^(1-p) spread back over them (0 where y is 0).
void lp_pool_rule(GradContext& c) {
  const Node& n = c.node();
  if (n.get_int("ceil_mode", 0) != 0) c.fail("tcc differentiates LpPool without ceil_mode only");
  ExplicitWindow w = window_of(c, n.get_ints("kernel_shape"));
  double p = static_cast<double>(n.get_int("p", 2));
  c.set(0, mul(c, lp_slope(c, p), spread_over_windows(c, w, lp_share(c, p))));
}

// GlobalLpPool, LpPool over all spatial axes: dx = |x|^(p-1) sign(x) g y^(1-p),
// y broadcast over the spatial axes.
void global_lp_pool_rule(GradContext& c) {
  double p = static_cast<double>(c.node().get_int("p", 2));
  c.set(0, mul(c, lp_slope(c, p), lp_share(c, p)));
}

// d global_average_pool = g / (spatial elements) broadcast over the spatial axes
void global_average_pool_rule(GradContext& c) {
  c.set(0, c.e().op("Expand", {mean_share(c), c.e().shape_of(c.in(0))}));
}

// GlobalMaxPool: ReduceMax over the spatial axes, kept
void global_max_pool_rule(GradContext& c) {
  std::vector<int64_t> spatial;
  for (size_t i = 2; i < c.dims(c.in(0)).size(); ++i) spatial.push_back(static_cast<int64_t>(i));
  to_extrema(c, c.dy(), c.out(), [&](Value* hit) { return c.e().reduce("ReduceSum", hit, spatial, true); });
}

// GlobalAveragePool(x) -> ReduceMean(x) over the spatial axes, keeping them
// (GlobalMaxPool: ReduceMax): a reduction kernel (decomposition.h).
bool decompose_global_pool(Expansion& e) {
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 3) return false;
  std::vector<int64_t> axes(x->rank() - 2);
  std::iota(axes.begin(), axes.end(), 2);
  const char* op = e.node().op_type() == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax";
  e.finish_reduce(op, op, e.node().input(0), axes);
  return true;
}

// GlobalLpPool(x) -> Sqrt(ReduceSum(x * x)) over the spatial axes for p 2,
// Pow(ReduceSum(Pow(Abs(x), p)), 1 / p) otherwise, keeping them (decomposition.h).
bool decompose_global_lp_pool(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 3) return false;
  std::vector<int64_t> axes(x->rank() - 2);
  std::iota(axes.begin(), axes.end(), 2);
  Type kept = Expansion::kept_type(*x, axes);
  Value* in = n.input(0);
  auto p = static_cast<double>(n.get_int("p", 2));
  if (p == 2) {
    Value* sum = e.reduce("ReduceSum", "ReduceSum", e.add("Mul", "Mul", {in, in}, *x), axes, kept);
    e.finish("Sqrt", "Sqrt", {sum});
    return true;
  }
  Value* abs = e.add("Abs", "Abs", {in}, *x);
  Value* powered = e.add("Pow", "Pow", {abs, e.scalar("p", p, x->dtype())}, *x);
  Value* sum = e.reduce("ReduceSum", "ReduceSum", powered, axes, kept);
  e.finish("Pow_1", "Pow", {sum, e.scalar("inverse_p", 1 / p, x->dtype())});
  return true;
}

// LpPool(x) -> (sum over each window of |x|^p)^(1/p), the sum an AveragePool
// with count_include_pad (the same window) times the kernel's volume: |x| for
// p 1, x * x then Sqrt for p 2, Pow(Abs(x), p) then Pow(1 / p) otherwise; one
// pool kernel with its pointwise neighbours. Padding adds 0 to the sum as it
// does to the average. Not for p < 1, nor in ceil_mode, where a window running
// past the end padding averages over fewer cells than the kernel's volume, nor
// for a window the pool kernel refuses (decomposition.h).
bool decompose_lp_pool(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  auto p = static_cast<double>(n.get_int("p", 2));
  if (x == nullptr || p < 1 || n.get_int("ceil_mode", 0) != 0 || !pool_window(n, nullptr).empty()) return false;
  Value* in = n.input(0);
  Value* powered = p == 1   ? e.add("Abs", "Abs", {in}, *x)
                   : p == 2 ? e.add("Mul", "Mul", {in, in}, *x)
                            : e.add("Pow", "Pow", {e.add("Abs", "Abs", {in}, *x), e.scalar("p", p, x->dtype())}, *x);
  std::map<std::string, Attribute> window{{"count_include_pad", Attribute::of_int(1)}};
  for (const char* name : {"auto_pad", "kernel_shape", "strides", "pads", "dilations"})
    if (n.has_attr(name)) window.emplace(name, *n.attr(name));
  const Type& y = n.output(0)->type();
  Value* mean = e.add("AveragePool", "AveragePool", {powered}, y, std::move(window));
  int64_t volume = 1;
  for (int64_t k : n.get_ints("kernel_shape")) volume *= k;
  Value* volume_v = e.scalar("volume", static_cast<double>(volume), x->dtype());
  if (p == 1) {
    e.finish("Mul_1", "Mul", {mean, volume_v});
    return true;
  }
  Value* sum = e.add("Mul_1", "Mul", {mean, volume_v}, y);
  if (p == 2)
    e.finish("Sqrt", "Sqrt", {sum});
  else
    e.finish("Pow_1", "Pow", {sum, e.scalar("inverse_p", 1 / p, x->dtype())});
  return true;
}

// A Conv whose pads differ at the two ends of a spatial dim (TensorFlow's
// SAME padding with an even window or a stride, as tf2onnx and Hugging Face's
// ports of TensorFlow models write it), which cuDNN's convolution descriptor
// cannot express -> a Pad of zeros by the excess at each end, then the Conv
// with the pads both ends share (decomposition.h): the same sums, the same
// order. Needs W's spatial dims static and a window sliding_window resolves.
bool decompose_asymmetric_conv(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 3 || n.num_inputs() < 2 || n.input(1) == nullptr) return false;
  const Type& w = n.input(1)->type();
  if (!w.is_tensor() || !w.has_rank() || w.rank() != x->rank()) return false;
  const size_t rank = x->rank(), ns = rank - 2;
  std::vector<int64_t> kernel, in;
  for (size_t d = 0; d < ns; ++d) {
    if (!w.shape()[2 + d].is_static()) return false;
    kernel.push_back(w.shape()[2 + d].value());
    in.push_back(x->shape()[2 + d].is_static() ? x->shape()[2 + d].value() : -1);
  }
  SlidingWindow sw;
  if (!sliding_window(n, kernel, in, &sw).empty() || sw.begin == sw.end) return false;
  std::vector<int64_t> excess(2 * rank, 0), shared(2 * ns);
  Dims padded = x->shape();
  for (size_t d = 0; d < ns; ++d) {
    const int64_t both = std::min(sw.begin[d], sw.end[d]);
    shared[d] = shared[ns + d] = both;
    excess[2 + d] = sw.begin[d] - both;
    excess[rank + 2 + d] = sw.end[d] - both;
    padded[2 + d] = Dim(padded[2 + d].expr() + SymExpr::constant(excess[2 + d] + excess[rank + 2 + d]));
  }
  Value* xp = e.onnx_opset() < 11
                  ? e.add("Pad", "Pad", {n.input(0)}, Type::tensor(x->dtype(), padded),
                          {{"pads", Attribute::of_ints(excess)}})
                  : e.add("Pad", "Pad", {n.input(0), e.i64s("pads", excess)}, Type::tensor(x->dtype(), padded));
  std::map<std::string, Attribute> attrs = n.attrs();
  attrs.erase("auto_pad");
  attrs["pads"] = Attribute::of_ints(std::move(shared));
  std::vector<Value*> ins = n.inputs();
  ins[0] = xp;
  e.finish("", "Conv", ins, std::move(attrs));
  return true;
}

// A MaxPool (its Indices unread) or AveragePool whose window has more taps
// than the pool kernel unrolls (kMaxPoolTaps) -> one pool along each spatial
// dim in turn, its kernel, stride, dilation and pads, 1 and 0 elsewhere: the
// window is a box, so its maximum, its sum and its count of inside (or padded)
// taps are products of per-dim ones, and each pool is a kernel of few taps.
// Needs float x of two or more spatial dims, each dim's window within
// kMaxPoolTaps, and known output dims.
bool decompose_separable_pool(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  const Type& y = n.output(0)->type();
  if (x == nullptr || x->rank() < 4 || !y.is_tensor() || !y.has_rank() || !y.fully_shaped() ||
      (n.num_outputs() > 1 && e.used(n.output(1))))
    return false;
  const size_t ns = x->rank() - 2;
  std::vector<int64_t> kernel = n.get_ints("kernel_shape"), in;
  if (kernel.size() != ns || product(kernel) <= kMaxPoolTaps ||
      std::any_of(kernel.begin(), kernel.end(), [](int64_t k) { return k < 1 || k > kMaxPoolTaps; }))
    return false;
  for (size_t d = 0; d < ns; ++d) in.push_back(x->shape()[2 + d].is_static() ? x->shape()[2 + d].value() : -1);
  SlidingWindow sw;
  if (!sliding_window(n, kernel, in, &sw).empty()) return false;
  const std::string op = n.op_type();
  Value* v = n.input(0);
  Dims dims = x->shape();
  for (size_t d = 0; d < ns; ++d) {
    auto along = [&](int64_t value, int64_t elsewhere) {
      std::vector<int64_t> list(ns, elsewhere);
      list[d] = value;
      return Attribute::of_ints(std::move(list));
    };
    std::vector<int64_t> pads(2 * ns, 0);
    pads[d] = sw.begin[d];
    pads[ns + d] = sw.end[d];
    std::map<std::string, Attribute> attrs = {{"kernel_shape", along(kernel[d], 1)},
                                              {"strides", along(sw.strides[d], 1)},
                                              {"dilations", along(sw.dilations[d], 1)},
                                              {"pads", Attribute::of_ints(std::move(pads))},
                                              {"ceil_mode", Attribute::of_int(n.get_int("ceil_mode", 0))}};
    if (op == "AveragePool") attrs["count_include_pad"] = Attribute::of_int(n.get_int("count_include_pad", 0));
    dims[2 + d] = y.shape()[2 + d];
    v = e.add(op + "_" + std::to_string(d), op, {v}, Type::tensor(x->dtype(), dims), std::move(attrs));
  }
  e.take_over(0, v);
  return true;
}

}  // namespace

void register_conv_pool_ops(OpRegistry& r) {
  r.add(OpDef{"", "Conv", 11, kContraction | kWindow, infer_conv, eval_conv, kFloatTypes})
      .kernel_unless(KernelRole::Convolution, [](const Node& n) { return conv_window(n, nullptr); },
                     [](const Node& n) {
                       return depthwise_window(n, nullptr).empty() ? KernelRole::Indexed : KernelRole::Convolution;
                     })
      .gradient(conv_rule)
      .decomposition(decompose_asymmetric_conv)
      .under_autocast(AutocastClass::Low);
  r.add(OpDef{"", "MaxPool", 12, kReduction | kWindow, infer_pool,
              [](EvalContext& c) { return eval_pool(c, PoolKind::Max); },
              {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I64}})
      .kernel_unless(KernelRole::Indexed, [](const Node& n) { return pool_window(n, nullptr); })
      .gradient(max_pool_rule)
      .decomposition(decompose_separable_pool);
  r.add(OpDef{"", "AveragePool", 11, kReduction | kWindow, infer_pool,
              [](EvalContext& c) { return eval_pool(c, PoolKind::Average); }, kFloatTypes})
      .kernel_unless(KernelRole::Indexed, [](const Node& n) { return pool_window(n, nullptr); })
      .gradient(average_pool_rule)
      .decomposition(decompose_separable_pool);
  r.add(OpDef{"", "LpPool", 11, kReduction, infer_pool, [](EvalContext& c) { return eval_pool(c, PoolKind::Lp); },
              kFloatTypes})
      .gradient(lp_pool_rule)
      .decomposition(decompose_lp_pool);
  r.add(OpDef{"", "GlobalAveragePool", 1, kReduction, infer_global_pool,
              [](EvalContext& c) { return eval_global_pool(c, PoolKind::Average); }, kFloatTypes})
      .gradient(global_average_pool_rule)
      .decomposition(decompose_global_pool);
  r.add(OpDef{"", "GlobalMaxPool", 1, kReduction, infer_global_pool,
              [](EvalContext& c) { return eval_global_pool(c, PoolKind::Max); }, kFloatTypes})
      .gradient(global_max_pool_rule)
      .decomposition(decompose_global_pool);
  r.add(OpDef{"", "GlobalLpPool", 2, kReduction, infer_global_pool,
              [](EvalContext& c) { return eval_global_pool(c, PoolKind::Lp); }, kFloatTypes})
      .gradient(global_lp_pool_rule)
      .decomposition(decompose_global_lp_pool);
}

}  // namespace tcc
