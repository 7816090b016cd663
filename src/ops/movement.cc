// Movement ops: ops that only move elements (Transpose, Slice, Split, Concat,
// Expand, Pad; the indexed ones are in gather_scatter.cc, Tile, Trilu,
// DepthToSpace and SpaceToDepth in rearrange.cc).
//
// Shape rules stay symbolic and also carry the contents of 1-D shape tensors
// through Slice, Split and Concat, so Concat(b, s, [-1]) is [batch, seq, -1].
//
// Slice bounds follow one assumption where the answer would hinge on comparing
// a bound with a symbolic size: a bound the exporter wrote as a plain index (not
// the INT_MAX / INT_MIN sentinels that mean "to the end") lies within the dim.
// The exporter traced the model with such sizes, so x[:, :seq] of a [1024, ...]
// buffer has seq rows and x[1:] of [seq] has seq-1. The compiled graph's guards
// check it (`seq >= 1000` for x[:, :1000], `seq - k >= 0` for a bound k computed
// from the shapes), so inputs that break it are refused.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string_view>
#include <unordered_set>

#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

Tensor with_type(const Tensor& t, DType dt) { return t.dtype() == dt ? t : t.cast(dt); }

// ---- Transpose --------------------------------------------------------------

std::vector<int64_t> transpose_perm(const Node& n, size_t rank) {
  std::vector<int64_t> perm = n.get_ints("perm");
  if (perm.empty())
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != rank)
    n.fail("perm has " + std::to_string(perm.size()) + " entries for an input of rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p])
      n.fail("perm is not a permutation of 0.." + std::to_string(rank - 1));
    seen[p] = true;
  }
  return perm;
}

void infer_transpose(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  if (!in.has_rank()) {
    size_t rank = ctx.node().get_ints("perm").size();
    ctx.set_output_type(0, rank ? Type::tensor(in.dtype(), Dims(rank, Dim::unknown())) : Type::tensor_unranked(in.dtype()));
    return;
  }
  std::vector<int64_t> perm = transpose_perm(ctx.node(), in.rank());
  Dims out;
  for (int64_t p : perm) out.push_back(in.shape()[p]);
  ctx.set_output_type(0, Type::tensor(in.dtype(), out));
  if (in.rank() <= 1)
    if (auto v = input_values(ctx, 0)) ctx.set_output_values(0, *v);
}

std::vector<Tensor> eval_transpose(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> perm = transpose_perm(ctx.node(), in.rank());
  std::vector<int64_t> st = row_major_strides(in.shape()), out_shape, out_strides;
  for (int64_t p : perm) {
    out_shape.push_back(in.shape()[p]);
    out_strides.push_back(st[p]);
  }
  return {remap(in, out_shape, [&](const std::vector<int64_t>& idx) { return flat_index(idx, out_strides); })};
}

// ---- Slice ------------------------------------------------------------------

struct SliceRange {
  int64_t start, len;
};

// ONNX Slice on one axis of static size d: negative bounds count from the end,
// then clamp, and the length is ceil(span / |step|).
SliceRange slice_static(int64_t d, int64_t s, int64_t e, int64_t k) {
  if (s < 0) s += d;
  if (e < 0) e += d;
  if (k > 0) {
    s = std::clamp<int64_t>(s, 0, d);
    e = std::clamp<int64_t>(e, 0, d);
    return {s, e > s ? (e - s + k - 1) / k : 0};
  }
  s = std::clamp<int64_t>(s, 0, d - 1);
  e = std::clamp<int64_t>(e, -1, d - 1);
  return {s, s > e ? (s - e - k - 1) / -k : 0};
}

// The same on symbolic sizes and bounds, under the in-range assumption of the
// file comment; the sentinels still clamp to the ends, and so does a symbolic
// bound shown to lie at or past the end (torch.chunk's last piece ends at
// 2*((seq+1)//2), which is seq or seq+1).
std::optional<Dim> slice_len(const Dim& d, const Dim& s, const Dim& e, int64_t k) {
  if (d.is_unknown() || s.is_unknown() || e.is_unknown()) return std::nullopt;
  if (d.is_static() && s.is_static() && e.is_static()) return Dim(slice_static(d.value(), s.value(), e.value(), k).len);
  const SymExpr D = d.expr();
  auto c = [](int64_t v) { return SymExpr::constant(v); };
  auto bound = [&](const Dim& x, bool is_start) {
    if (!x.is_static()) return k > 0 && (x.expr() - D).provably_nonnegative() ? D : x.expr();
    int64_t v = x.value();
    if (v >= kSliceSentinel) return k > 0 ? D : D - c(1);
    if (v <= -kSliceSentinel) return k > 0 || is_start ? c(0) : c(-1);
    return v < 0 ? D + c(v) : c(v);
  };
  SymExpr sb = bound(s, true), eb = bound(e, false);
  int64_t step = k > 0 ? k : -k;
  SymExpr span = k > 0 ? eb - sb : sb - eb;
  SymExpr len = (span + c(step - 1)).floordiv(c(step));
  if (len.is_constant()) return Dim(std::max<int64_t>(len.constant_value(), 0));
  return Dim(len);
}

struct SliceSpec {
  std::vector<int64_t> axes, steps;
  Dims starts, ends;
};

// Reads starts/ends/axes/steps (inputs 1..4); nullopt when starts or ends have
// no known contents or axes or steps are not compile-time constants (starts
// and ends may be symbolic).
std::optional<SliceSpec> slice_spec(InferContext& ctx, int64_t rank) {
  auto starts = input_values(ctx, 1), ends = input_values(ctx, 2);
  if (!starts || !ends) return std::nullopt;
  if (starts->size() != ends->size())
    ctx.fail("starts " + dims_str(*starts) + " and ends " + dims_str(*ends) + " differ in length");
  SliceSpec sp{{}, {}, *starts, *ends};
  size_t n = starts->size();
  if (ctx.has_input(3)) {
    auto a = static_values(ctx.input_values(3));
    if (!a) return std::nullopt;
    sp.axes = *a;
  } else {
    for (size_t i = 0; i < n; ++i) sp.axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    auto st = static_values(ctx.input_values(4));
    if (!st) return std::nullopt;
    sp.steps = *st;
  } else {
    sp.steps.assign(n, 1);
  }
  if (sp.axes.size() != n || sp.steps.size() != n)
    ctx.fail("starts, ends, axes and steps must have one length, got " + std::to_string(n) + ", " +
             std::to_string(ends->size()) + ", " + std::to_string(sp.axes.size()) + ", " + std::to_string(sp.steps.size()));
  if (rank == 0 && n > 0) ctx.fail("cannot slice a rank-0 tensor: it has no axis");
  std::vector<bool> seen(rank, false);
  for (int64_t& a : sp.axes) {
    a = normalize_axis(ctx.node(), a, rank);
    if (seen[a]) ctx.fail("axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
  }
  for (int64_t k : sp.steps)
    if (k == 0) ctx.fail("steps must not be 0");
  return sp;
}

void infer_slice(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& data = ctx.input_type(0);
  int64_t rank = static_cast<int64_t>(data.rank());
  auto sp = slice_spec(ctx, rank);
  if (!sp) {
    ctx.set_output_type(0, Type::tensor(data.dtype(), Dims(rank, Dim::unknown())));
    return;
  }
  Dims out = data.shape();
  for (size_t i = 0; i < sp->axes.size(); ++i) {
    int64_t a = sp->axes[i];
    auto len = slice_len(data.shape()[a], sp->starts[i], sp->ends[i], sp->steps[i]);
    out[a] = len ? *len : Dim::unknown();
  }
  ctx.set_output_type(0, Type::tensor(data.dtype(), out));
  // Slicing a shape tensor: Shape(x)[1:3] -> [seq, 768].
  auto vals = input_values(ctx, 0);
  if (!vals || rank != 1 || sp->axes.empty() || !sp->starts[0].is_static() || !sp->ends[0].is_static()) return;
  SliceRange r = slice_static(static_cast<int64_t>(vals->size()), sp->starts[0].value(), sp->ends[0].value(),
                              sp->steps[0]);
  Dims picked;
  for (int64_t j = 0; j < r.len; ++j) picked.push_back((*vals)[r.start + j * sp->steps[0]]);
  ctx.set_output_values(0, picked);
}

std::vector<Tensor> eval_slice(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  int64_t rank = static_cast<int64_t>(data.rank());
  std::vector<int64_t> starts = ctx.input(1).to_i64_vector(), ends = ctx.input(2).to_i64_vector();
  size_t n = starts.size();
  std::vector<int64_t> axes, steps(n, 1);
  if (ctx.has_input(3)) axes = ctx.input(3).to_i64_vector();
  else
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i));
  if (ctx.has_input(4)) steps = ctx.input(4).to_i64_vector();
  if (ends.size() != n || axes.size() != n || steps.size() != n)
    ctx.fail("starts, ends, axes and steps must have one length");
  std::vector<int64_t> begin(rank, 0), step(rank, 1), out_shape = data.shape();
  for (size_t i = 0; i < n; ++i) {
    int64_t a = normalize_axis(ctx.node(), axes[i], rank);
    if (steps[i] == 0) ctx.fail("steps must not be 0");
    SliceRange r = slice_static(data.shape()[a], starts[i], ends[i], steps[i]);
    begin[a] = r.start;
    step[a] = steps[i];
    out_shape[a] = r.len;
  }
  std::vector<int64_t> st = row_major_strides(data.shape());
  return {remap(data, out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t f = 0;
    for (int64_t k = 0; k < rank; ++k) f += (begin[k] + idx[k] * step[k]) * st[k];
    return f;
  })};
}

// ---- Split ------------------------------------------------------------------

// Sizes of Split's outputs along the axis of size d. Explicit sizes come from the
// `split` input (attribute before 13); otherwise num_outputs (attribute from 18)
// or the output count give chunks of ceil(d / n), the last one smaller.
std::optional<Dims> split_sizes(InferContext& ctx, const Dim& d) {
  size_t n = ctx.num_outputs();
  if (ctx.opset() < 13 && ctx.node().has_attr("split")) return dims_of(ctx.node().get_ints("split"));
  if (ctx.opset() >= 13 && ctx.has_input(1)) return input_values(ctx, 1);
  if (ctx.node().has_attr("num_outputs") && ctx.node().get_int("num_outputs", 0) != static_cast<int64_t>(n))
    ctx.fail("num_outputs is " + std::to_string(ctx.node().get_int("num_outputs", 0)) + " but the node has " +
             std::to_string(n) + " outputs");
  if (d.is_unknown()) return std::nullopt;
  SymExpr N = SymExpr::constant(static_cast<int64_t>(n));
  if (auto q = d.expr().exact_div(N)) return Dims(n, Dim(*q));
  if (d.is_static() && ctx.opset() < 18)
    ctx.fail("cannot split a dim of size " + d.str() + " into " + std::to_string(n) + " equal parts");
  SymExpr chunk = (d.expr() + SymExpr::constant(static_cast<int64_t>(n) - 1)).floordiv(N);
  Dims sizes(n - 1, Dim(chunk));
  sizes.push_back(Dim(d.expr() - chunk * SymExpr::constant(static_cast<int64_t>(n) - 1)));
  return sizes;
}

void infer_split(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& data = ctx.input_type(0);
  if (data.rank() == 0) ctx.fail("cannot split a rank-0 tensor: it has no axis");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
  const Dim& d = data.shape()[axis];
  auto sizes = split_sizes(ctx, d);
  // A negative size, which only an If branch that never runs may hold (an
  // ONNX function's other case), leaves the parts' sizes unknown.
  if (sizes && std::any_of(sizes->begin(), sizes->end(), [](const Dim& s) { return s.is_static() && s.value() < 0; }))
    sizes.reset();
  if (sizes && sizes->size() != ctx.num_outputs())
    ctx.fail("split has " + std::to_string(sizes->size()) + " sizes for " + std::to_string(ctx.num_outputs()) +
             " outputs");
  if (sizes) {
    Dim total(0);
    for (const Dim& s : *sizes) total = total.is_unknown() || s.is_unknown() ? Dim::unknown() : Dim(total.expr() + s.expr());
    if (!ctx.env().unify(total, d, &ctx.node()))
      ctx.fail("split sizes " + dims_str(*sizes) + " do not add up to the dim " + d.str());
  }
  auto vals = input_values(ctx, 0);
  auto static_sizes = static_values(sizes ? &*sizes : nullptr);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Dims out = data.shape();
    out[axis] = sizes ? ctx.env().canonical((*sizes)[i]) : Dim::unknown();
    ctx.set_output_type(i, Type::tensor(data.dtype(), out));
    if (vals && static_sizes && data.rank() == 1 && offset + (*static_sizes)[i] <= static_cast<int64_t>(vals->size())) {
      ctx.set_output_values(i, Dims(vals->begin() + offset, vals->begin() + offset + (*static_sizes)[i]));
      offset += (*static_sizes)[i];
    }
  }
}

std::vector<Tensor> eval_split(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  int64_t rank = static_cast<int64_t>(data.rank());
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), rank);
  int64_t d = data.shape()[axis];
  int64_t n = static_cast<int64_t>(ctx.num_outputs());
  std::vector<int64_t> sizes;
  if (ctx.opset() < 13 && ctx.node().has_attr("split")) sizes = ctx.node().get_ints("split");
  else if (ctx.opset() >= 13 && ctx.has_input(1)) sizes = ctx.input(1).to_i64_vector();
  else {
    int64_t chunk = (d + n - 1) / n;
    if (ctx.opset() < 18 && d % n != 0)
      ctx.fail("cannot split a dim of size " + std::to_string(d) + " into " + std::to_string(n) + " equal parts");
    for (int64_t i = 0; i < n; ++i) sizes.push_back(std::clamp<int64_t>(d - chunk * i, 0, chunk));
  }
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) ctx.fail("split sizes must not be negative");
    total += s;
  }
  if (static_cast<int64_t>(sizes.size()) != n || total != d)
    ctx.fail("split sizes " + shape_str(sizes) + " do not split a dim of size " + std::to_string(d) + " into " +
             std::to_string(n) + " outputs");
  std::vector<int64_t> st = row_major_strides(data.shape());
  std::vector<Tensor> outs;
  int64_t offset = 0;
  for (int64_t s : sizes) {
    std::vector<int64_t> shape = data.shape();
    shape[axis] = s;
    outs.push_back(remap(data, shape, [&](const std::vector<int64_t>& idx) {
      return flat_index(idx, st) + offset * st[axis];
    }));
    offset += s;
  }
  return outs;
}

// ---- Concat -----------------------------------------------------------------

void infer_concat(InferContext& ctx) {
  if (ctx.num_inputs() == 0) ctx.fail("needs at least one input");
  std::vector<size_t> others;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) others.push_back(i);
  require_one_dtype(ctx, 0, others);
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!inputs_ranked(ctx, {i})) return;
  const Type& first = ctx.input_type(0);
  int64_t rank = static_cast<int64_t>(first.rank());
  if (rank == 0) ctx.fail("cannot concatenate rank-0 tensors: they have no axis (Unsqueeze them first)");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), rank);
  Dims out = first.shape();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Type& t = ctx.input_type(i);
    if (static_cast<int64_t>(t.rank()) != rank)
      ctx.fail("input " + std::to_string(i) + " " + t.str() + " has rank " + std::to_string(t.rank()) +
               " where input 0 " + first.str() + " has rank " + std::to_string(rank));
    for (int64_t k = 0; k < rank; ++k) {
      const Dim& d = t.shape()[k];
      if (k == axis) {
        out[k] = out[k].is_unknown() || d.is_unknown() ? Dim::unknown() : Dim(out[k].expr() + d.expr());
      } else if (out[k].is_unknown()) {
        out[k] = d;
      } else if (!ctx.env().unify(out[k], d, &ctx.node())) {
        ctx.fail("input " + std::to_string(i) + " " + t.str() + " has size " + d.str() + " at dim " +
                 std::to_string(k) + " where input 0 has " + out[k].str());
      }
    }
  }
  ctx.set_output_type(0, Type::tensor(first.dtype(), ctx.env().canonical(out)));
  if (rank != 1) return;
  Dims vals;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    auto v = input_values(ctx, i);
    if (!v) return;
    vals.insert(vals.end(), v->begin(), v->end());
  }
  ctx.set_output_values(0, vals);
}

std::vector<Tensor> eval_concat(EvalContext& ctx) {
  const Tensor& first = ctx.input(0);
  int64_t rank = static_cast<int64_t>(first.rank());
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), rank);
  std::vector<int64_t> shape = first.shape();
  shape[axis] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    if (t.dtype() != first.dtype() || static_cast<int64_t>(t.rank()) != rank)
      ctx.fail("input " + std::to_string(i) + " does not match input 0's dtype and rank");
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && t.shape()[k] != first.shape()[k])
        ctx.fail("input " + std::to_string(i) + " has shape " + shape_str(t.shape()) + ", input 0 has " +
                 shape_str(first.shape()) + " (they may differ only at axis " + std::to_string(axis) + ")");
    shape[axis] += t.shape()[axis];
  }
  Tensor out(first.dtype(), shape);
  // Each input fills a contiguous run of `outer` blocks.
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
  for (int64_t k = axis + 1; k < rank; ++k) inner *= shape[k];
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    int64_t block = t.shape()[axis] * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < block; ++j) copy_element(out, o * shape[axis] * inner + offset + j, t, o * block + j);
    offset += block;
  }
  return {out};
}

// ---- Expand -----------------------------------------------------------------

void infer_expand(InferContext& ctx) {
  require_index_vector(ctx, 1, "shape");
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  auto shape = input_values(ctx, 1);
  if (!shape) {
    // A shape of known length still fixes the rank.
    const Type& st = ctx.input_type(1);
    if (st.has_rank() && st.rank() == 1 && st.shape()[0].is_static())
      ctx.set_output_type(0, Type::tensor(in.dtype(), Dims(std::max<size_t>(in.rank(), st.shape()[0].value()),
                                                           Dim::unknown())));
    else
      ctx.set_output_type(0, Type::tensor_unranked(in.dtype()));
    return;
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), broadcast_dims(ctx, {in.shape(), *shape})));
}

std::vector<Tensor> eval_expand(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> out_shape = broadcast_shapes(ctx.node(), {in.shape(), ctx.input(1).to_i64_vector()});
  BroadcastIndexer at(out_shape, in.shape());
  Tensor out(in.dtype(), out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(out, i, in, at(i));
  return {out};
}

// ---- Pad --------------------------------------------------------------------

// Pads per axis as (begin, end); `pads` lists all begins then all ends, over the
// `axes` input (opset 18) or every axis.
template <typename T>
std::vector<std::pair<T, T>> pads_per_axis(const Node& n, const std::vector<T>& pads,
                                           const std::vector<int64_t>& axes, int64_t rank, T zero) {
  std::vector<std::pair<T, T>> out(rank, {zero, zero});
  if (pads.size() != 2 * axes.size())
    n.fail("pads has " + std::to_string(pads.size()) + " entries, expected " + std::to_string(2 * axes.size()) +
           " (begin and end for each of " + std::to_string(axes.size()) + " axes)");
  for (size_t i = 0; i < axes.size(); ++i) out[normalize_axis(n, axes[i], rank)] = {pads[i], pads[i + axes.size()]};
  return out;
}

std::vector<int64_t> all_axes(int64_t rank) {
  std::vector<int64_t> a;
  for (int64_t i = 0; i < rank; ++i) a.push_back(i);
  return a;
}

std::string pad_mode(const Node& n) {
  std::string mode = n.get_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    n.fail("mode must be constant, reflect, edge or wrap, got '" + mode + "'");
  return mode;
}

void infer_pad(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  int64_t rank = static_cast<int64_t>(in.rank());
  pad_mode(ctx.node());
  auto pads = input_values(ctx, 1);
  std::optional<std::vector<int64_t>> axes = all_axes(rank);
  if (ctx.has_input(3)) axes = static_values(ctx.input_values(3));
  // A dim the data decides (pads or axes read from data) is a fresh symbol,
  // which the host step that pads binds.
  if (!pads || !axes) {
    Dims out;
    for (int64_t k = 0; k < rank; ++k) out.push_back(ctx.env().fresh("u"));
    ctx.set_output_type(0, Type::tensor(in.dtype(), out));
    return;
  }
  auto per_axis = pads_per_axis<Dim>(ctx.node(), *pads, *axes, rank, Dim(0));
  Dims out;
  for (int64_t k = 0; k < rank; ++k) {
    const Dim& d = in.shape()[k];
    auto [b, e] = per_axis[k];
    out.push_back(d.is_unknown() || b.is_unknown() || e.is_unknown() ? ctx.env().fresh("u")
                                                                     : Dim(d.expr() + b.expr() + e.expr()));
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), out));
}

// Source coordinate of padded coordinate c on an axis of size d, or -1 for the
// constant fill.
int64_t pad_source(int64_t c, int64_t d, const std::string& mode) {
  if (c >= 0 && c < d) return c;
  if (mode == "constant") return -1;
  if (mode == "edge") return std::clamp<int64_t>(c, 0, d - 1);
  if (mode == "wrap") return ((c % d) + d) % d;
  if (d == 1) return 0;
  int64_t period = 2 * (d - 1);  // reflect without repeating the edge
  int64_t m = ((c % period) + period) % period;
  return m < d ? m : period - m;
}

// Input 0 padded by (begin, end) per axis, in the node's mode, with the fill of input 2.
std::vector<Tensor> pad_by(EvalContext& ctx, const std::vector<std::pair<int64_t, int64_t>>& per_axis) {
  const Tensor& in = ctx.input(0);
  int64_t rank = static_cast<int64_t>(in.rank());
  std::string mode = pad_mode(ctx.node());
  std::vector<int64_t> out_shape;
  for (int64_t k = 0; k < rank; ++k) {
    int64_t d = in.shape()[k] + per_axis[k].first + per_axis[k].second;
    if (d < 0) ctx.fail("pads shrink dim " + std::to_string(k) + " below zero");
    if (mode != "constant" && in.shape()[k] == 0 && d > 0)
      ctx.fail("cannot " + mode + "-pad the empty dim " + std::to_string(k));
    out_shape.push_back(d);
  }
  Tensor fill(in.dtype(), {});
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) fill = with_type(ctx.input(2), in.dtype()).reshaped({});
  std::vector<int64_t> st = row_major_strides(in.shape());
  return {remap(
      in, out_shape,
      [&](const std::vector<int64_t>& idx) {
        int64_t f = 0;
        for (int64_t k = 0; k < rank; ++k) {
          int64_t s = pad_source(idx[k] - per_axis[k].first, in.shape()[k], mode);
          if (s < 0) return int64_t{-1};
          f += s * st[k];
        }
        return f;
      },
      &fill)};
}

std::vector<Tensor> eval_pad(EvalContext& ctx) {
  int64_t rank = static_cast<int64_t>(ctx.input(0).rank());
  std::vector<int64_t> axes = ctx.has_input(3) ? ctx.input(3).to_i64_vector() : all_axes(rank);
  return pad_by(ctx, pads_per_axis<int64_t>(ctx.node(), ctx.input(1).to_i64_vector(), axes, rank, 0));
}

// tcc::Pad(x, <none>, fill) {mode, pads}: Pad whose pads an exporter computed
// from the shapes (torch pads H up to a multiple of a window, (4 - H % 4) % 4),
// written as SymExpr texts over the symbols the graph inputs bind, each axis's
// begin and then each axis's end (passes/resolve_shapes.cc; read by tcc_pads).
// Its inputs keep Pad's positions, the pads and axes absent, so the kernel
// reads the fill as Pad's.
void infer_tcc_pad(InferContext& ctx) {
  const Type& in = ctx.ranked_input(0);
  pad_mode(ctx.node());
  if (ctx.has_input(1) || ctx.has_input(3)) ctx.fail("takes its pads as an attribute, not inputs 1 and 3");
  std::vector<std::pair<Dim, Dim>> pads = tcc_pads(ctx.node(), in.rank());
  Dims out;
  for (size_t k = 0; k < pads.size(); ++k) {
    const Dim& d = in.shape()[k];
    out.push_back(d.is_unknown() ? ctx.env().fresh("u")
                                 : Dim(d.expr() + pads[k].first.expr() + pads[k].second.expr()));
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), ctx.env().canonical(out)));
}

std::vector<Tensor> eval_tcc_pad(EvalContext& ctx) {
  size_t rank = ctx.input(0).rank();
  tcc_pads(ctx.node(), rank);
  std::vector<int64_t> pads = eval_shape_attr(ctx, "pads");
  std::vector<std::pair<int64_t, int64_t>> per_axis;
  for (size_t k = 0; k < rank; ++k) per_axis.emplace_back(pads[k], pads[rank + k]);
  return pad_by(ctx, per_axis);
}

// ---------------------------------------------------------------------------
// Kernel roles (kernel_roles.h)

// Of any dtype (the integer ones that build shapes from shapes alone run once
// per binding, passes/binding_constants.h); a one-element constant input would
// be copied into the body as a literal, not a buffer.
KernelRole concat_role(const Node& n) {
  if (!n.has_attr("axis")) return KernelRole::None;
  for (size_t i = 0; i < n.num_inputs(); ++i)
    if (!n.has_input(i) || (constant_input(n, i) && single_element(n.input(i)->type()))) return KernelRole::None;
  return KernelRole::Indexed;
}

// Constant pads and axes of a float or integer tensor (im2col pads int8
// data): a guarded copy (constant mode) or a gather from computed
// coordinates (edge, reflect, wrap).
KernelRole pad_role(const Node& n) {
  static const std::unordered_set<std::string_view> modes = {"constant", "edge", "reflect", "wrap"};
  DType dt = n.output(0)->type().dtype();
  if ((!is_float(dt) && !is_integer(dt)) || !modes.count(n.get_string("mode", "constant"))) return KernelRole::None;
  // The pads and axes index the kernel; a fill computed at run time is read
  // from its one-element buffer.
  for (size_t i : {size_t{1}, size_t{3}})
    if (n.has_input(i) && !literal_input(n, i)) return KernelRole::None;
  if (n.has_input(2) && !literal_input(n, 2) && !single_element(n.input(2)->type())) return KernelRole::None;
  return n.has_input(1) || n.domain() == kTccDomain ? KernelRole::Indexed : KernelRole::None;
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

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

// g of dims gd, [.., m, ..] along axis a, spread to every k-th place,
// [.., (m-1)*k+1, ..] with zeros between: each element gets k-1 zeros after
// it (Unsqueeze, Pad, Reshape), and the zeros after the last are cut. gd[a]
// becomes the new size.
Value* spread(GradContext& c, Value* g, Dims& gd, int64_t a, int64_t k) {
  const auto axis = static_cast<size_t>(a);
  if (!gd[axis].is_static()) c.fail("the gradient of a strided Slice needs a static size on axis " + std::to_string(a));
  const int64_t m = gd[axis].value();
  std::vector<int64_t> pads(2 * (gd.size() + 1), 0), target(gd.size(), 0);
  pads[gd.size() + 1 + axis + 1] = k - 1;
  target[axis] = m * k;
  for (size_t i = axis + 1; i < gd.size(); ++i) {
    if (!gd[i].is_static()) c.fail("the gradient of a strided Slice needs static sizes after axis " + std::to_string(a));
    target[i] = gd[i].value();
  }
  Emitter& e = c.e();
  Value* padded = e.op("Pad", {e.unsqueeze(g, {a + 1}), e.ints(pads)});
  Value* flat = e.op("Reshape", {padded, e.ints(target)});
  gd[axis] = Dim((m - 1) * k + 1);
  return e.op("Slice", {flat, e.ints({0}), e.ints({(m - 1) * k + 1}), e.ints({a})});
}

// d slice along one axis by step 1, where that axis's size is symbolic or
// the bounds are computed at run time (x[:, seq // 2 :]): g between zeros
// cut from zeros like x by the slice's own bounds, [0, start) before it and
// what follows g's length from start after it (not [end, size), which
// overlaps [0, start) when the slice is empty with end before start).
// Whether it applies: one constant axis, step 1.
bool concat_between_zeros(GradContext& c) {
  const Node& n = c.node();
  if (n.opset() < 10 || !n.has_input(3) || !c.constant(3) || c.constant(3)->numel() != 1) return false;
  if (n.has_input(4) && (!c.constant(4) || c.const_ints(4, "Slice's steps") != std::vector<int64_t>{1})) return false;
  const Dims& xd = c.dims(c.in(0));
  int64_t a = c.axis(c.const_ints(3, "Slice's axes")[0], xd.size());
  if (xd[static_cast<size_t>(a)].is_static() && c.constant(1) && c.constant(2)) return false;
  Emitter& e = c.e();
  Value* zeros = e.zeros_like(c.in(0), c.dtype());
  Value* axes = e.ints({a});
  Value* before = e.op("Slice", {zeros, e.ints({0}), c.in(1), axes});
  Value* to_end = e.ints({std::numeric_limits<int64_t>::max()});
  Value* from_start = e.op("Slice", {zeros, c.in(1), to_end, axes});
  Value* g_len = e.op("Slice", {e.shape_of(c.dy()), axes, e.ints({a + 1})});
  Value* after = e.op("Slice", {from_start, g_len, to_end, axes});
  c.set(0, e.op("Concat", {before, c.dy(), after}, int_attr("axis", a)));
  return true;
}

// d slice = g padded with zeros back to x's shape, spread along the axes a
// step above 1 skips. Needs constant starts, ends, axes and steps, positive
// steps, and static sizes on the sliced axes (the padding is computed here),
// except where concat_between_zeros applies.
void slice_rule(GradContext& c) {
  if (concat_between_zeros(c)) return;
  const Node& n = c.node();
  const Dims& xd = c.dims(c.in(0));
  std::vector<int64_t> starts = c.const_ints(1, "Slice's starts"), ends = c.const_ints(2, "Slice's ends");
  std::vector<int64_t> axes;
  if (n.has_input(3)) {
    axes = c.const_ints(3, "Slice's axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> steps(axes.size(), 1);
  if (n.has_input(4)) steps = c.const_ints(4, "Slice's steps");
  if (steps.size() != axes.size()) c.fail("Slice's steps do not give one step per axis");
  size_t rank = xd.size();
  std::vector<int64_t> pads(2 * rank, 0);
  Value* g = c.dy();
  Dims gd = c.dims(c.out());  // g's, as the strided axes spread
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = c.axis(axes[i], rank);
    const Dim& d = xd[static_cast<size_t>(a)];
    if (!d.is_static())
      c.fail("the gradient of Slice needs a static size on sliced axis " + std::to_string(a) + ", got " + d.str());
    if (steps[i] < 1) c.fail("tcc differentiates Slice only with positive steps, got step " + std::to_string(steps[i]));
    int64_t size = d.value();
    auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + size : v, int64_t{0}, size); };
    int64_t s = clamp(starts[i]), t = std::max(clamp(ends[i]), s);
    if (steps[i] > 1 && t > s) {
      g = spread(c, g, gd, a, steps[i]);
      t = s + gd[static_cast<size_t>(a)].value();
    }
    pads[static_cast<size_t>(a)] = s;
    pads[rank + static_cast<size_t>(a)] = size - t;
  }
  c.set(0, c.e().op("Pad", {g, c.e().ints(pads)}));
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

// d expand(x) = g summed back to x's shape

// Split(x) -> y0, y1 as y0 = Slice(x, 0, n0), y1 = Slice(x, n0, n0 + n1), ...
// (decomposition.h): a Slice with constant arguments is an affine load, so each
// part fuses into its consumers' kernels. The parts' sizes come from the output
// types shape inference gave them, so every way of spelling the split (a
// `split` input or attribute, num_outputs, equal parts) is covered by one rule.
// A part's size may be symbolic over symbols the inputs bind (seq // 2 and
// seq - seq // 2): the parts are then tcc::Slice, whose starts and shapes are
// SymExpr texts the kernels read as sizes. Not when the data decides a size.
bool decompose_split(Expansion& e) {
  const Node& n = e.node();
  const Value* x = n.input(0);
  if (!x->type().is_tensor() || !x->type().has_rank() || x->type().rank() == 0) return false;
  auto rank = static_cast<int64_t>(x->type().rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  bool symbolic = false;
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    const Type& t = n.output(i)->type();
    if (!t.is_tensor() || !t.has_rank() || t.rank() != x->type().rank() || t.shape()[axis].is_unknown()) return false;
    symbolic |= !t.shape()[axis].is_static();
  }
  if (symbolic) {
    const std::set<std::string> bound = e.graph().bound_symbols();
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      const Type& t = n.output(i)->type();
      if (!t.fully_shaped()) return false;
      for (const Dim& d : t.shape())
        for (const std::string& s : d.expr().symbols())
          if (!bound.count(s)) return false;
    }
    e.leaves_dead_inputs();  // sizes computed from the input's shape, which no kernel needs now
  }
  Value* axes = symbolic ? nullptr : e.i64("axes", axis);
  SymExpr start = SymExpr::constant(0);
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    std::string part = std::to_string(i);
    const Type& t = n.output(i)->type();
    SymExpr end = start + t.shape()[axis].expr();
    Value* v = symbolic ? e.slice("Slice_" + part, n.input(0), axis, Dim(start), t.shape())
                        : e.add("Slice_" + part, "Slice",
                                {n.input(0), e.i64("starts_" + part, start.constant_value()),
                                 e.i64("ends_" + part, end.constant_value()), axes},
                                t);
    e.take_over(i, v);
    start = end;
  }
  return true;
}

// Why Slice node n gets no kernel: its bounds must be literals (as a
// Reshape's target shape, computed_shape_refusal).
std::string computed_bounds_refusal(const Node& n) {
  for (size_t i = 1; i < n.num_inputs(); ++i)
    if (!literal_input(n, i)) return "its bounds are computed at run time from values shape inference cannot follow";
  return "";
}

}  // namespace

void expand_rule(GradContext& c) { c.set(0, c.unbroadcast(c.dy(), 0)); }

void register_movement_ops(OpRegistry& r) {
  r.add(OpDef{"", "Transpose", 1, kMovement | kRearranges, infer_transpose, eval_transpose, {}})
      .kernel_role(KernelRole::Movement)
      .gradient(transpose_rule);
  r.add(OpDef{"", "Slice", 10, kMovement | kRearranges, infer_slice, eval_slice, {}})
      .shape_from_inputs({1, 2, 3, 4})
      .kernel_unless(KernelRole::Movement, computed_bounds_refusal)
      .gradient(slice_rule);
  r.add(OpDef{"", "Split", 1, kMovement | kRearranges, infer_split, eval_split, {}}).gradient(split_rule).decomposition(decompose_split);
  r.add(OpDef{"", "Concat", 4, kMovement, infer_concat, eval_concat, {}}).kernel_role(KernelRole::Indexed, concat_role).gradient(concat_rule);
  r.add(OpDef{"", "Expand", 8, kMovement | kRearranges, infer_expand, eval_expand, {}})
      .shape_from_inputs({1})
      .kernel_unless(KernelRole::Movement, computed_shape_refusal)
      .gradient(expand_rule);
  r.add(OpDef{"", "Pad", 11, kMovement, infer_pad, eval_pad, {}})
      .shape_from_inputs({1})
      .kernel_role(KernelRole::Indexed, pad_role)
      .literals_at({1, 2, 3})
      .gradient(pad_rule);
  r.add(OpDef{std::string(kTccDomain), "Pad", 1, kMovement, infer_tcc_pad, eval_tcc_pad, {}})
      .kernel_role(KernelRole::Indexed, pad_role)
      .literals_at({2});
}

}  // namespace tcc
