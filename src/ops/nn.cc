// Neural-network ops: convolutions, pools, normalizations, Resize and the
// training losses.
//
// Shape rules keep batch and spatial dims symbolic: a window op's output size
// is (in + pads - extent) // stride + 1 as a SymExpr, so `seq` stays `seq`
// under a same-padded conv and becomes `(seq+1)//(2)` under a stride-2 one.
// Kernels are direct loops computing in double, the oracle for fast paths.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

const std::vector<DType> kFloatTypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
// Float scores and weights with integer targets.
const std::vector<DType> kLossTypes = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64};

SymExpr C(int64_t v) { return SymExpr::constant(v); }

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// Python-style floor division: ConvTranspose splits negative total paddings.
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Sliding-window attributes of Conv, ConvTranspose and the pools, defaults filled in.
struct Window {
  std::vector<int64_t> kernel;  // -1 where the kernel size is not known statically
  std::vector<int64_t> strides, dilations;
  std::vector<int64_t> pads;  // all begins, then all ends
  std::string auto_pad;
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  int64_t extent(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
  bool same() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
};

// `kernel` is the fallback when the node has no kernel_shape (Conv reads W's dims).
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

std::vector<int64_t> spatial_of(const std::vector<int64_t>& shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

const Type& ranked_nchw(InferContext& ctx, size_t i) {
  const Type& t = ctx.ranked_input(i);
  if (t.rank() < 3)
    ctx.fail("expected input " + std::to_string(i) + " of rank >= 3 ([N, C, spatial...]), got " + t.str());
  return t;
}

void check_nchw(const EvalContext& ctx, const Tensor& x) {
  if (x.rank() < 3) ctx.fail("expected an input of rank >= 3 ([N, C, spatial...]), got shape " + shape_str(x.shape()));
}

// ---------------------------------------------------------------- Conv

void infer_conv(InferContext& ctx) {
  const Type& x = ranked_nchw(ctx, 0);
  const Type& w = ctx.ranked_input(1);
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
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

std::vector<Tensor> eval_conv(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  check_nchw(ctx, x);
  if (w.rank() != x.rank()) ctx.fail("expected W of rank " + std::to_string(x.rank()) + ", got " + shape_str(w.shape()));
  size_t ns = x.rank() - 2;
  int64_t group = ctx.node().get_int("group", 1);
  int64_t n_batch = x.shape()[0], cin = x.shape()[1], m = w.shape()[0], cg = w.shape()[1];
  if (group < 1 || cin != cg * group || m % group != 0)
    ctx.fail("expected X's channels (" + std::to_string(cin) + ") = group (" + std::to_string(group) +
             ") * W's channels (" + std::to_string(cg) + ") and W's filters (" + std::to_string(m) +
             ") divisible by group");
  if (ctx.has_input(2) && ctx.input(2).numel() != m)
    ctx.fail("expected B of " + std::to_string(m) + " values, got shape " + shape_str(ctx.input(2).shape()));
  std::vector<int64_t> kshape = spatial_of(w.shape()), in = spatial_of(x.shape());
  Window win = read_window(ctx.node(), ns, kshape);
  if (win.kernel != kshape) ctx.fail("kernel_shape " + shape_str(win.kernel) + " disagrees with W " + shape_str(w.shape()));
  std::vector<int64_t> out = window_out_dims(ctx, win, in), pb, pe;
  resolve_pads(win, in, out, pb, pe);
  std::vector<int64_t> yshape = {n_batch, m};
  yshape.insert(yshape.end(), out.begin(), out.end());
  Tensor y(x.dtype(), yshape);
  auto offsets = all_indices(kshape);
  auto positions = all_indices(out);
  std::vector<int64_t> xstr = row_major_strides(in);
  int64_t in_vol = product(in), kvol = product(kshape), out_vol = product(out), mg = m / group;
  std::vector<int64_t> pos(ns);
  for (int64_t b = 0; b < n_batch; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t g = oc / mg;
      double bias = ctx.has_input(2) ? ctx.input(2).get_f64(oc) : 0.0;
      for (int64_t o = 0; o < out_vol; ++o) {
        double acc = bias;
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
  return {y};
}

// ------------------------------------------------------- ConvTranspose

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
  std::vector<int64_t> opad = n.get_ints("output_padding", std::vector<int64_t>(ns, 0));
  if (opad.size() != ns) ctx.fail("expected output_padding to have " + std::to_string(ns) + " values");
  std::vector<int64_t> os = convtranspose_output_shape(n, ns);
  std::vector<int64_t> out(ns), pb(ns);
  for (size_t i = 0; i < ns; ++i) {
    int64_t full = win.strides[i] * (in[i] - 1) + opad[i] + win.extent(i);
    if (!os.empty() || win.same()) {
      // Padding is whatever makes the full output land on the requested size.
      out[i] = os.empty() ? in[i] * win.strides[i] : os[i];
      int64_t total = full - out[i];
      pb[i] = win.auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    } else {
      pb[i] = win.auto_pad == "VALID" ? 0 : win.pads[i];
      out[i] = full - (win.auto_pad == "VALID" ? 0 : win.pads[i] + win.pads[ns + i]);
    }
    if (out[i] < 0) ctx.fail("computed a negative output size " + std::to_string(out[i]));
  }
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
  for (int64_t plane = 0; plane < product(yshape); ++plane) {
    double acc = kind == PoolKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < vol; ++i) {
      double v = x.get_f64(plane * vol + i);
      acc = kind == PoolKind::Max ? std::max(acc, v) : acc + v;
    }
    y.set_f64(plane, kind == PoolKind::Max ? acc : acc / static_cast<double>(vol));
  }
  return {y};
}

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

// ---------------------------------------------------------------- Resize

// The axes Resize acts on (opset 18 `axes`, default all), normalized.
std::vector<int64_t> resize_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes = n.get_ints("axes");
  if (axes.empty())
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  for (auto& a : axes) a = normalize_axis(n, a, rank);
  return axes;
}

// An optional input that is really present (exporters pass empty scales next to sizes).
bool nonempty_input(const InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return false;
  const Type& t = ctx.input_type(i);
  return !(t.is_tensor() && t.has_rank() && t.rank() == 1 && t.shape()[0].is_static() && t.shape()[0].value() == 0);
}

// floor(in * scale) symbolically: exact for integer scales and their inverses.
Dim scaled_dim(InferContext& ctx, const Dim& in, double scale) {
  if (in.is_static()) return Dim(static_cast<int64_t>(std::floor(scale * static_cast<double>(in.value()))));
  if (!in.is_unknown()) {
    double inv = 1.0 / scale;
    if (scale >= 1 && scale == std::floor(scale)) return Dim(in.expr() * C(static_cast<int64_t>(scale)));
    if (inv == std::floor(inv) && scale * inv == 1.0) return Dim(in.expr().floordiv(C(static_cast<int64_t>(inv))));
  }
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

// One output coordinate's taps along one axis.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool extrapolated = false;
};

struct ResizeAttrs {
  std::string mode, coord, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

// Source coordinate of output coordinate y (the ONNX coordinate transforms).
double source_coordinate(const EvalContext& ctx, const ResizeAttrs& at, double y, double scale, int64_t in,
                         int64_t out_int, double roi_begin, double roi_end, bool& extrapolated) {
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
  ctx.fail("unsupported coordinate_transformation_mode '" + m + "'");
}

// Taps of one output coordinate: x = base + ratio with ratio in (0, 1]; tap j
// sits at base + first + j.
Taps resize_taps(const EvalContext& ctx, const ResizeAttrs& at, double x, double scale, int64_t in) {
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
    else ctx.fail("unsupported nearest_mode '" + at.nearest_mode + "'");
    w = {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
  } else if (at.mode == "linear") {
    // Antialiasing widens the triangle filter by 1/scale when downsampling.
    first = static_cast<int64_t>(std::floor(-1 / s)) + 1;
    for (int64_t i = first; i < 2 - first; ++i) w.push_back(std::clamp(1 - std::fabs((i - ratio) * s), 0.0, 1.0));
  } else if (at.mode == "cubic") {
    double a = at.cubic_a;
    auto kernel = [a](double d) {
      d = std::fabs(d);
      if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
      if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
      return 0.0;
    };
    first = static_cast<int64_t>(std::floor(-2 / s)) + 1;
    for (int64_t i = first; i < 2 - first; ++i) w.push_back(kernel((i - ratio) * s));
  } else {
    ctx.fail("expected mode nearest, linear or cubic, got '" + at.mode + "'");
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

std::vector<Tensor> eval_resize(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  int64_t r = static_cast<int64_t>(x.rank());
  auto axes = resize_axes(n, r);
  ResizeAttrs at;
  at.mode = n.get_string("mode", "nearest");
  at.coord = n.get_string("coordinate_transformation_mode", "half_pixel");
  at.nearest_mode = n.get_string("nearest_mode", "round_prefer_floor");
  at.cubic_a = n.get_float("cubic_coeff_a", -0.75f);
  at.extrapolation = n.get_float("extrapolation_value", 0.0f);
  at.exclude_outside = n.get_int("exclude_outside", 0) != 0;
  at.antialias = n.get_int("antialias", 0) != 0;
  std::string policy = n.get_string("keep_aspect_ratio_policy", "stretch");
  std::vector<double> scale(r, 1.0);
  std::vector<int64_t> out = x.shape();
  auto present = [&](size_t i) { return ctx.has_input(i) && ctx.input(i).numel() > 0; };
  size_t na = axes.size();
  if (present(3)) {
    std::vector<int64_t> sizes = ctx.input(3).to_i64_vector();
    if (sizes.size() != na) ctx.fail("expected sizes to have " + std::to_string(na) + " values");
    for (size_t i = 0; i < na; ++i)
      scale[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(x.shape()[axes[i]]);
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) out[axes[i]] = sizes[i];
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = scale[axes[0]];
      for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, scale[a]) : std::max(s, scale[a]);
      for (int64_t a : axes) {
        scale[a] = s;
        out[a] = static_cast<int64_t>(s * static_cast<double>(x.shape()[a]) + 0.5);
      }
    } else {
      ctx.fail("expected keep_aspect_ratio_policy stretch, not_larger or not_smaller, got '" + policy + "'");
    }
  } else if (present(2)) {
    const Tensor& sc = ctx.input(2);
    if (sc.numel() != static_cast<int64_t>(na)) ctx.fail("expected scales to have " + std::to_string(na) + " values");
    for (size_t i = 0; i < na; ++i) {
      scale[axes[i]] = sc.get_f64(i);
      if (!(scale[axes[i]] > 0)) ctx.fail("expected positive scales, got " + std::to_string(scale[axes[i]]));
      out[axes[i]] = static_cast<int64_t>(std::floor(scale[axes[i]] * static_cast<double>(x.shape()[axes[i]])));
    }
  } else {
    ctx.fail("expected a scales or a sizes input");
  }
  std::vector<double> roi_begin(r, 0.0), roi_end(r, 1.0);
  if (present(1)) {
    const Tensor& roi = ctx.input(1);
    if (roi.numel() != static_cast<int64_t>(2 * na)) ctx.fail("expected roi to have " + std::to_string(2 * na) + " values");
    for (size_t i = 0; i < na; ++i) {
      roi_begin[axes[i]] = roi.get_f64(i);
      roi_end[axes[i]] = roi.get_f64(na + i);
    }
  }
  bool crop = at.coord == "tf_crop_and_resize";
  // Interpolation is separable: resize one axis at a time, in double.
  std::vector<int64_t> shape = x.shape();
  std::vector<double> data(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) data[i] = x.get_f64(i);
  for (int64_t a : axes) {
    bool trivial_roi = !crop || (roi_begin[a] == 0 && roi_end[a] == 1);
    if (std::fabs(scale[a] - 1) < 1e-9 && out[a] == shape[a] && trivial_roi) continue;
    int64_t in = shape[a];
    std::vector<Taps> taps(out[a]);
    for (int64_t y = 0; y < out[a]; ++y) {
      bool extrapolated = false;
      double xo = source_coordinate(ctx, at, static_cast<double>(y), scale[a], in, out[a], roi_begin[a], roi_end[a],
                                    extrapolated);
      taps[y] = resize_taps(ctx, at, xo, scale[a], in);
      taps[y].extrapolated = extrapolated;
    }
    int64_t outer = product(std::vector<int64_t>(shape.begin(), shape.begin() + a));
    int64_t inner = product(shape, a + 1);
    std::vector<double> next(outer * out[a] * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t y = 0; y < out[a]; ++y)
        for (int64_t i = 0; i < inner; ++i) {
          double v = 0;
          if (taps[y].extrapolated) {
            v = at.extrapolation;
          } else {
            for (size_t j = 0; j < taps[y].index.size(); ++j)
              v += taps[y].weight[j] * data[(o * in + taps[y].index[j]) * inner + i];
          }
          next[(o * out[a] + y) * inner + i] = v;
        }
    data = std::move(next);
    shape[a] = out[a];
  }
  Tensor result(x.dtype(), shape);
  for (int64_t i = 0; i < result.numel(); ++i) result.set_f64(i, data[i]);
  return {result};
}

// ---------------------------------------------------------------- Losses

void infer_loss(InferContext& ctx, bool with_log_prob) {
  const Type& scores = ctx.ranked_input(0);
  if (scores.rank() < 2) ctx.fail("expected scores of rank >= 2 ([N, C, ...]), got " + scores.str());
  const Type& target = ctx.input_type(1);
  Dims expect = {scores.shape()[0]};
  expect.insert(expect.end(), scores.shape().begin() + 2, scores.shape().end());
  if (target.is_tensor() && target.has_rank()) {
    if (target.rank() != expect.size())
      ctx.fail("expected target of rank " + std::to_string(expect.size()) + " (scores without C), got " + target.str());
    for (size_t i = 0; i < expect.size(); ++i) {
      const Dim& d = target.shape()[i];
      if (d.is_unknown() || expect[i].is_unknown()) continue;
      if (!ctx.env().unify(expect[i], d, &ctx.node()))
        ctx.fail("target dim " + std::to_string(i) + " (" + d.str() + ") disagrees with scores " + scores.str());
    }
  }
  std::string reduction = ctx.node().get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("expected reduction none, sum or mean, got '" + reduction + "'");
  ctx.set_output_type(0, Type::tensor(scores.dtype(), reduction == "none" ? expect : Dims{}));
  if (with_log_prob && ctx.num_outputs() > 1) ctx.set_output_type(1, scores);
}

// Negative log likelihood of `logp` ([N, C, D...] as doubles) at the targets.
Tensor nll(const EvalContext& ctx, const std::vector<double>& logp, const std::vector<int64_t>& scores_shape,
           const Tensor& target, DType out_dtype) {
  const Node& n = ctx.node();
  std::string reduction = n.get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("expected reduction none, sum or mean, got '" + reduction + "'");
  int64_t nb = scores_shape[0], c = scores_shape[1], d = product(scores_shape, 2);
  if (target.numel() != nb * d || target.rank() + 1 != scores_shape.size())
    ctx.fail("expected target of shape [N, D...] matching scores " + shape_str(scores_shape) + ", got " +
             shape_str(target.shape()));
  bool has_ignore = n.has_attr("ignore_index");
  int64_t ignore = n.get_int("ignore_index", 0);
  const Tensor* weight = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (weight && weight->numel() != c) ctx.fail("expected weight of " + std::to_string(c) + " values");
  Tensor loss(out_dtype, target.shape());
  double total = 0, wsum = 0;
  for (int64_t i = 0; i < target.numel(); ++i) {
    int64_t cls = target.get_i64(i);
    if (has_ignore && cls == ignore) continue;  // loss 0, weight 0
    if (cls < 0 || cls >= c)
      ctx.fail("target class " + std::to_string(cls) + " is out of range [0, " + std::to_string(c) + ")");
    double w = weight ? weight->get_f64(cls) : 1.0;
    double l = -logp[((i / d) * c + cls) * d + i % d] * w;
    loss.set_f64(i, l);
    total += l;
    wsum += w;
  }
  if (reduction == "none") return loss;
  Tensor out(out_dtype, {});
  out.set_f64(0, reduction == "sum" ? total : total / wsum);
  return out;
}

std::vector<Tensor> eval_nll(EvalContext& ctx) {
  const Tensor& input = ctx.input(0);
  if (input.rank() < 2) ctx.fail("expected input of rank >= 2 ([N, C, ...]), got shape " + shape_str(input.shape()));
  std::vector<double> logp(input.numel());
  for (int64_t i = 0; i < input.numel(); ++i) logp[i] = input.get_f64(i);
  return {nll(ctx, logp, input.shape(), ctx.input(1), input.dtype())};
}

std::vector<Tensor> eval_sce(EvalContext& ctx) {
  const Tensor& scores = ctx.input(0);
  if (scores.rank() < 2) ctx.fail("expected scores of rank >= 2 ([N, C, ...]), got shape " + shape_str(scores.shape()));
  int64_t nb = scores.shape()[0], c = scores.shape()[1], d = product(scores.shape(), 2);
  std::vector<double> logp(scores.numel());
  // Log-softmax over the class axis, shifted by the max for stability.
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t k = 0; k < d; ++k) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, scores.get_f64((b * c + j) * d + k));
      for (int64_t j = 0; j < c; ++j) sum += std::exp(scores.get_f64((b * c + j) * d + k) - mx);
      for (int64_t j = 0; j < c; ++j)
        logp[(b * c + j) * d + k] = scores.get_f64((b * c + j) * d + k) - mx - std::log(sum);
    }
  Tensor loss = nll(ctx, logp, scores.shape(), ctx.input(1), scores.dtype());
  if (ctx.num_outputs() < 2) return {loss};
  Tensor lp(scores.dtype(), scores.shape());
  for (int64_t i = 0; i < lp.numel(); ++i) lp.set_f64(i, logp[i]);
  return {loss, lp};
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  r.add(OpDef{"", "Conv", 11, kContraction, infer_conv, eval_conv, kFloatTypes}).kernel_role(KernelRole::Convolution, [](const Node& n) { return conv_window(n, nullptr).empty(); });
  r.add(OpDef{"", "ConvTranspose", 11, kContraction, infer_convtranspose, eval_convtranspose, kFloatTypes});
  r.add(OpDef{"", "MaxPool", 12, kReduction, infer_pool,
              [](EvalContext& c) { return eval_pool(c, PoolKind::Max); },
              {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I64}}).kernel_role(KernelRole::Indexed, [](const Node& n) { return pool_window(n, nullptr).empty(); });
  r.add(OpDef{"", "AveragePool", 11, kReduction, infer_pool,
              [](EvalContext& c) { return eval_pool(c, PoolKind::Average); }, kFloatTypes}).kernel_role(KernelRole::Indexed, [](const Node& n) { return pool_window(n, nullptr).empty(); });
  r.add(OpDef{"", "LpPool", 11, kReduction, infer_pool, [](EvalContext& c) { return eval_pool(c, PoolKind::Lp); },
              kFloatTypes});
  r.add(OpDef{"", "GlobalAveragePool", 1, kReduction, infer_global_pool,
              [](EvalContext& c) { return eval_global_pool(c, PoolKind::Average); }, kFloatTypes});
  r.add(OpDef{"", "GlobalMaxPool", 1, kReduction, infer_global_pool,
              [](EvalContext& c) { return eval_global_pool(c, PoolKind::Max); }, kFloatTypes});
  r.add(OpDef{"", "BatchNormalization", 9, kReduction, infer_batchnorm, eval_batchnorm, kFloatTypes});
  r.add(OpDef{"", "InstanceNormalization", 6, kReduction, infer_instancenorm, eval_instancenorm, kFloatTypes});
  r.add(OpDef{"", "Resize", 11, 0, infer_resize, eval_resize,
              {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64}});
  r.add(OpDef{"", "NegativeLogLikelihoodLoss", 12, kReduction, [](InferContext& c) { infer_loss(c, false); },
              eval_nll, kLossTypes});
  r.add(OpDef{"", "SoftmaxCrossEntropyLoss", 12, kReduction, [](InferContext& c) { infer_loss(c, true); }, eval_sce,
              kLossTypes});
}

}  // namespace tcc
