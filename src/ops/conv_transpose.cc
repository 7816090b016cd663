// ConvTranspose: the transposed convolution, each input spread over its window
// of the output, weighed by W [C, M/G, kernel...]. Its shape rule keeps batch
// and spatial dims symbolic; its kernel is a direct loop computing in double.
// On the GPU it is a Conv (decomposition below).
#include <algorithm>
#include <cstddef>
#include <limits>
#include <optional>

#include "src/ops/conv_pool.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Python-style floor division: ConvTranspose splits negative total paddings.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Spatial output sizes given by output_shape (which may also list N and C).
std::vector<int64_t> convtranspose_output_shape(const Node& n, size_t ns) {
  std::vector<int64_t> os = n.get_ints("output_shape");
  if (os.empty()) return os;
  if (os.size() == ns + 2) os.erase(os.begin(), os.begin() + 2);
  if (os.size() != ns)
    n.fail("expected output_shape to have " + std::to_string(ns) + " spatial sizes, got " + std::to_string(os.size()));
  return os;
}

void infer_convtranspose(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  const Type& w = ctx.ranked_input(1);
  if (w.rank() != x.rank()) ctx.fail("expected W of rank " + std::to_string(x.rank()) + ", got " + w.str());
  size_t ns = x.rank() - 2;
  const Node& n = ctx.node();
  int64_t group = n.get_int("group", 1);
  if (group < 1) ctx.fail("expected group >= 1, got " + std::to_string(group));
  std::vector<int64_t> kernel(ns, -1);
  for (size_t i = 0; i < ns; ++i)
    if (w.shape()[2 + i].is_static()) kernel[i] = w.shape()[2 + i].value();
  Window win = read_window(n, ns, kernel);
  std::vector<int64_t> opad = n.get_ints("output_padding", std::vector<int64_t>(ns, 0));
  if (opad.size() != ns) ctx.fail("expected output_padding to have " + std::to_string(ns) + " values");
  if (!x.shape()[1].is_unknown() && !w.shape()[0].is_unknown() &&
      !ctx.env().unify(x.shape()[1], w.shape()[0], &n))
    ctx.fail("expected X's channels (" + x.shape()[1].str() + ") to equal W's first dim (" + w.shape()[0].str() + ")");
  std::vector<int64_t> os = convtranspose_output_shape(n, ns);
  Dims out = {x.shape()[0], w.shape()[1].is_unknown() ? ctx.env().fresh("u") : Dim(w.shape()[1].expr() * C(group))};
  for (size_t i = 0; i < ns; ++i) {
    const Dim& in = x.shape()[2 + i];
    if (!os.empty()) {
      out.push_back(Dim(os[i]));
    } else if (in.is_unknown() || kernel[i] < 0) {
      out.push_back(ctx.env().fresh("u"));
    } else if (win.same()) {
      out.push_back(Dim(in.expr() * C(win.strides[i])));
    } else {
      int64_t pads = win.auto_pad == "VALID" ? 0 : win.pads[i] + win.pads[ns + i];
      out.push_back(Dim((in.expr() - C(1)) * C(win.strides[i]) + C(opad[i] + win.extent(i) - pads)));
    }
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

// Where ConvTranspose's output lies in the full one (each input spreads over
// its window, s (in - 1) + output_padding + the window's extent in all) along
// each spatial dim: its sizes, and the padding cut off before it (negative:
// zeros added). With output_shape or auto_pad SAME the padding is whatever
// makes the full output land on the requested size.
std::pair<std::vector<int64_t>, std::vector<int64_t>> placement(const Node& n, const Window& win,
                                                                const std::vector<int64_t>& in) {
  size_t ns = in.size();
  std::vector<int64_t> opad = n.get_ints("output_padding", std::vector<int64_t>(ns, 0));
  if (opad.size() != ns) n.fail("expected output_padding to have " + std::to_string(ns) + " values");
  std::vector<int64_t> os = convtranspose_output_shape(n, ns);
  std::vector<int64_t> out(ns), pb(ns);
  for (size_t i = 0; i < ns; ++i) {
    int64_t full = win.strides[i] * (in[i] - 1) + opad[i] + win.extent(i);
    if (!os.empty() || win.same()) {
      out[i] = os.empty() ? in[i] * win.strides[i] : os[i];
      int64_t total = full - out[i];
      pb[i] = win.auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    } else {
      pb[i] = win.auto_pad == "VALID" ? 0 : win.pads[i];
      out[i] = full - (win.auto_pad == "VALID" ? 0 : win.pads[i] + win.pads[ns + i]);
    }
    if (out[i] < 0) n.fail("computed a negative output size " + std::to_string(out[i]));
  }
  return {out, pb};
}

std::vector<Tensor> eval_convtranspose(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Node& n = ctx.node();
  check_nchw(ctx, x);
  if (w.rank() != x.rank()) ctx.fail("expected W of rank " + std::to_string(x.rank()) + ", got " + shape_str(w.shape()));
  size_t ns = x.rank() - 2;
  int64_t group = n.get_int("group", 1);
  int64_t n_batch = x.shape()[0], cin = x.shape()[1], mg = w.shape()[1];
  if (group < 1 || w.shape()[0] != cin || cin % group != 0)
    ctx.fail("expected W's first dim (" + std::to_string(w.shape()[0]) + ") to equal X's channels (" +
             std::to_string(cin) + "), divisible by group (" + std::to_string(group) + ")");
  int64_t m = mg * group, cg = cin / group;
  std::vector<int64_t> kshape = spatial_of(w.shape()), in = spatial_of(x.shape());
  Window win = read_window(n, ns, kshape);
  auto [out, pb] = placement(n, win, in);
  std::vector<int64_t> yshape = {n_batch, m};
  yshape.insert(yshape.end(), out.begin(), out.end());
  int64_t in_vol = product(in), kvol = product(kshape), out_vol = product(out);
  std::vector<double> acc(n_batch * m * out_vol, 0.0);
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      double bias = ctx.has_input(2) ? ctx.input(2).get_f64(oc) : 0.0;
      for (int64_t o = 0; o < out_vol; ++o) acc[(b * m + oc) * out_vol + o] = bias;
    }
  auto offsets = all_indices(kshape);
  auto positions = all_indices(in);
  std::vector<int64_t> ostr = row_major_strides(out);
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t c = 0; c < cin; ++c) {
      int64_t g = c / cg;
      for (int64_t p = 0; p < in_vol; ++p) {
        double xv = x.get_f64((b * cin + c) * in_vol + p);
        for (int64_t k = 0; k < kvol; ++k) {
          int64_t yoff = 0;
          bool inside = true;
          for (size_t i = 0; i < ns && inside; ++i) {
            int64_t q = positions[p][i] * win.strides[i] - pb[i] + offsets[k][i] * win.dilations[i];
            inside = q >= 0 && q < out[i];
            yoff += q * ostr[i];
          }
          if (!inside) continue;
          for (int64_t j = 0; j < mg; ++j)
            acc[(b * m + g * mg + j) * out_vol + yoff] += xv * w.get_f64((c * mg + j) * kvol + k);
        }
      }
    }
  Tensor y(x.dtype(), yshape);
  for (size_t i = 0; i < acc.size(); ++i) y.set_f64(static_cast<int64_t>(i), acc[i]);
  return {y};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

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
  ExplicitWindow w = window_of(c, kernel);
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

// ---------------------------------------------------------------------------
// Decomposition (decomposition.h)

// W [C, M/G, kernel...] as the Conv's [M, C/G, kernel...]: per group its two
// channel axes swapped, its taps reversed (filter g M/G + j, channel c of group
// g reads W[g C/G + c, j] at the mirrored tap). A constant W is computed here;
// any other on the device, as W viewed [G, C/G, M/G, taps], transposed to
// [G, M/G, C/G, taps], its taps read backwards (a Slice of step -1) and viewed
// as the Conv's: movement kernels, no host step.
Value* conv_weights(Expansion& e, const std::vector<int64_t>& w_shape, int64_t group) {
  const Node& n = e.node();
  int64_t cin = w_shape[0], mg = w_shape[1], cg = cin / group;
  std::vector<int64_t> kernel = spatial_of(w_shape);
  int64_t taps = product(kernel);
  std::vector<int64_t> flipped_shape = {mg * group, cg};
  flipped_shape.insert(flipped_shape.end(), kernel.begin(), kernel.end());
  if (std::optional<Tensor> w = constant_value(n.input(1))) {
    Tensor flipped(w->dtype(), flipped_shape);
    for (int64_t g = 0; g < group; ++g)
      for (int64_t j = 0; j < mg; ++j)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t t = 0; t < taps; ++t)
            flipped.set_f64(((g * mg + j) * cg + c) * taps + (taps - 1 - t),
                            w->get_f64(((g * cg + c) * mg + j) * taps + t));
    return e.constant("W", std::move(flipped));
  }
  DType dt = n.input(1)->type().dtype();
  Dims swapped = {Dim(group), Dim(mg), Dim(cg), Dim(taps)};
  Value* v = e.reshape("Reshape_W", n.input(1), {Dim(group), Dim(cg), Dim(mg), Dim(taps)});
  v = e.add("Transpose_W", "Transpose", {v}, Type::tensor(dt, swapped), {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  v = e.add("Slice_W", "Slice",
            {v, e.i64s("starts_W", {-1}), e.i64s("ends_W", {-taps - 1}), e.i64s("axes_W", {3}), e.i64s("steps_W", {-1})},
            Type::tensor(dt, swapped));
  Dims dims;
  for (int64_t d : flipped_shape) dims.push_back(Dim(d));
  return e.reshape("Reshape_W_1", v, dims);
}

// ConvTranspose with a W of static shape (the batch and spatial dims may be
// symbolic) as the Conv cuDNN runs: output q reads input p where
// q = p s - pb + t d (tap t, begin padding pb from placement), so with the
// input's elements spread s apart, zeros between, and the taps reversed it is
// a stride-1 convolution of dilation d, padded d (k - 1) - pb before and
// whatever reaches the output size after. The spreading views x as
// [N, C, i, 1, ...], pads each 1 to s with zeros and views it back as
// [N, C, i s, ...]; a negative padding is a Slice, and the part of one side's
// padding the other lacks a Pad, as cuDNN pads both sides alike. W becomes
// the Conv's (conv_weights); B is the Conv's own. Over symbolic spatial dims
// the pads must be explicit (no auto_pad SAME, no output_shape), and then the
// padding after, s (i - 1) + output_padding + extent - pads + pb - i s, is a
// constant. Not for more than 3 spatial dims, or when placement rejects the
// node (it stays a host step and says why).
bool decompose_conv_transpose(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  const Type& wt = n.input(1)->type();
  const Type& yt = n.output(0)->type();
  // cuDNN convolves 1 to 3 spatial dims: a Conv of more would be a host step all the same.
  if (x == nullptr || x->rank() < 3 || x->rank() > 5 || !wt.is_tensor() || !wt.has_rank() || !wt.fully_static() ||
      wt.rank() != x->rank() || !yt.is_tensor() || !yt.has_rank() || yt.rank() != x->rank())
    return false;
  std::vector<int64_t> w_shape;
  for (const Dim& d : wt.shape()) w_shape.push_back(d.value());
  const Dims& xd = x->shape();
  size_t ns = x->rank() - 2, rank = x->rank();
  int64_t group = n.get_int("group", 1), cin = w_shape[0];
  if (group < 1 || cin % group != 0 || !xd[1].is_static() || xd[1].value() != cin) return false;
  std::vector<int64_t> kernel = spatial_of(w_shape), in;
  for (size_t i = 0; i < ns; ++i) {
    if (xd[2 + i].is_unknown() || yt.shape()[2 + i].is_unknown()) return false;
    if (xd[2 + i].is_static()) in.push_back(xd[2 + i].value());
  }
  Window win;
  Dims out(yt.shape().begin() + 2, yt.shape().end());
  std::vector<int64_t> pb(ns, 0);
  try {
    win = read_window(n, ns, kernel);
    if (in.size() == ns) {
      std::vector<int64_t> placed;
      std::tie(placed, pb) = placement(n, win, in);
      out.assign(placed.begin(), placed.end());
    } else if (win.same() || n.has_attr("output_shape")) {
      return false;
    } else if (win.auto_pad == "NOTSET") {
      pb.assign(win.pads.begin(), win.pads.begin() + static_cast<std::ptrdiff_t>(ns));
    }
  } catch (const InputError&) {
    return false;
  }
  if (win.kernel != kernel) return false;
  DType dt = x->dtype();
  Dims dims = xd;
  bool spread = std::any_of(win.strides.begin(), win.strides.end(), [](int64_t s) { return s > 1; });
  if (spread)
    for (size_t i = 0; i < ns; ++i) dims[2 + i] = Dim(xd[2 + i].expr() * C(win.strides[i]));
  // The Conv's padding before and after each spatial dim of the spread input.
  std::vector<int64_t> before(ns), after(ns), starts(ns), ends(ns), axes(ns), conv_pads(2 * ns), extra(2 * rank, 0);
  bool slices = false, pads_more = false;
  Dims cut_dims = dims;
  for (size_t i = 0; i < ns; ++i) {
    const Dim& length = dims[2 + i];
    SymExpr after_i = out[i].expr() + C(pb[i]) - length.expr();
    if (!after_i.is_constant()) return false;
    before[i] = win.extent(i) - 1 - pb[i];
    after[i] = after_i.constant_value();
    int64_t cut = std::max<int64_t>(0, -after[i]);
    starts[i] = std::max<int64_t>(0, -before[i]);
    ends[i] = length.is_static() ? length.value() - cut : cut > 0 ? -cut : std::numeric_limits<int64_t>::max();
    axes[i] = static_cast<int64_t>(2 + i);
    slices = slices || starts[i] > 0 || cut > 0;
    cut_dims[2 + i] = Dim(length.expr() - C(starts[i] + cut));
    int64_t b = std::max<int64_t>(0, before[i]), a = std::max<int64_t>(0, after[i]), both = std::min(a, b);
    conv_pads[i] = conv_pads[ns + i] = both;
    extra[2 + i] = b - both;
    extra[rank + 2 + i] = a - both;
    pads_more = pads_more || b != a;
  }
  Value* v = n.input(0);
  if (spread) {
    Dims split = {xd[0], xd[1]};
    std::vector<int64_t> pads(2 * (2 + 2 * ns), 0);
    for (size_t i = 0; i < ns; ++i) {
      split.push_back(xd[2 + i]);
      split.push_back(Dim(1));
      pads[2 + 2 * ns + 3 + 2 * i] = win.strides[i] - 1;  // after the 1 of spatial dim i
    }
    Dims padded = split;
    for (size_t i = 0; i < ns; ++i) padded[3 + 2 * i] = Dim(win.strides[i]);
    v = e.reshape("Reshape", v, split);
    v = e.add("Pad", "Pad", {v, e.i64s("pads", pads)}, Type::tensor(dt, padded));
    v = e.reshape("Reshape_1", v, dims);
  }
  if (slices)
    v = e.add("Slice", "Slice", {v, e.i64s("starts", starts), e.i64s("ends", ends), e.i64s("axes", axes)},
              Type::tensor(dt, cut_dims));
  if (pads_more) {
    for (size_t i = 0; i < ns; ++i)
      cut_dims[2 + i] = Dim(cut_dims[2 + i].expr() + C(extra[2 + i] + extra[rank + 2 + i]));
    v = e.add("Pad_1", "Pad", {v, e.i64s("pads_1", extra)}, Type::tensor(dt, cut_dims));
  }
  std::vector<Value*> ins = {v, conv_weights(e, w_shape, group)};
  if (n.has_input(2)) ins.push_back(n.input(2));
  e.finish("Conv", "Conv", ins,
           {{"kernel_shape", Attribute::of_ints(kernel)},
            {"dilations", Attribute::of_ints(win.dilations)},
            {"pads", Attribute::of_ints(conv_pads)},
            {"group", Attribute::of_int(group)}});
  return true;
}

}  // namespace

void register_conv_transpose_ops(OpRegistry& r) {
  r.add(OpDef{"", "ConvTranspose", 11, kContraction, infer_convtranspose, eval_convtranspose, kFloatTypes})
      .gradient(conv_transpose_rule)
      .decomposition(decompose_conv_transpose)
      .under_autocast(AutocastClass::Low);
}

}  // namespace tcc
