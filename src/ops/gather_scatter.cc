// Indexed movement ops: Gather, GatherElements, GatherND, ScatterElements,
// ScatterND, Compress and ReverseSequence, which move elements where index
// (or condition, or length) tensors say.
//
// Gather's shape rule also carries the contents of 1-D shape tensors, so
// Gather(Shape(x), 1) is `seq`.
#include <algorithm>
#include <cmath>
#include <utility>

#include "src/ops/families.h"
#include "src/ops/fusion.h"  // kTccDomain
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// An index into a dim of size `size`, negative counting from the end.
int64_t wrap_index(const Node& n, int64_t i, int64_t size) {
  if (i < -size || i >= size)
    n.fail("index " + std::to_string(i) + " is out of bounds for a dim of size " + std::to_string(size));
  return i < 0 ? i + size : i;
}

// ---- Gather, GatherElements, GatherND ------------------------------------------

void infer_gather(InferContext& ctx) {
  const Type& data = ctx.input_type(0);
  const Type& ind = ctx.input_type(1);
  if (!data.has_rank() || !ind.has_rank()) {
    ctx.set_output_type(0, Type::tensor_unranked(data.dtype()));
    return;
  }
  if (data.rank() == 0) ctx.fail("data must have rank >= 1");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
  Dims out(data.shape().begin(), data.shape().begin() + axis);
  out.insert(out.end(), ind.shape().begin(), ind.shape().end());
  out.insert(out.end(), data.shape().begin() + axis + 1, data.shape().end());
  ctx.set_output_type(0, Type::tensor(data.dtype(), out));
  // Gather(Shape(x), 1) -> seq: picks from the symbolic contents.
  auto vals = input_values(ctx, 0);
  auto idx = static_values(ctx.input_values(1));
  if (!vals || !idx || data.rank() != 1 || ind.rank() > 1) return;
  Dims picked;
  for (int64_t i : *idx) picked.push_back((*vals)[wrap_index(ctx.node(), i, static_cast<int64_t>(vals->size()))]);
  ctx.set_output_values(0, picked);
}

std::vector<Tensor> eval_gather(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  int64_t r = static_cast<int64_t>(data.rank());
  if (r == 0) ctx.fail("data must have rank >= 1");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), r);
  int64_t q = static_cast<int64_t>(ind.rank());
  std::vector<int64_t> out_shape(data.shape().begin(), data.shape().begin() + axis);
  out_shape.insert(out_shape.end(), ind.shape().begin(), ind.shape().end());
  out_shape.insert(out_shape.end(), data.shape().begin() + axis + 1, data.shape().end());
  std::vector<int64_t> ist = row_major_strides(ind.shape()), dst = row_major_strides(data.shape());
  return {remap(data, out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t f = 0;
    for (int64_t k = 0; k < axis; ++k) f += idx[k] * dst[k];
    int64_t at = 0;
    for (int64_t k = 0; k < q; ++k) at += idx[axis + k] * ist[k];
    f += wrap_index(ctx.node(), ind.get_i64(at), data.shape()[axis]) * dst[axis];
    for (int64_t k = axis + 1; k < r; ++k) f += idx[k + q - 1] * dst[k];
    return f;
  })};
}

void infer_gather_elements(InferContext& ctx) {
  const Type& data = ctx.input_type(0);
  const Type& ind = ctx.input_type(1);
  if (!data.has_rank() || !ind.has_rank()) {
    ctx.set_output_type(0, ind.has_rank() ? Type::tensor(data.dtype(), ind.shape()) : Type::tensor_unranked(data.dtype()));
    return;
  }
  if (data.rank() != ind.rank())
    ctx.fail("data " + data.str() + " and indices " + ind.str() + " must have the same rank");
  normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
  ctx.set_output_type(0, Type::tensor(data.dtype(), ind.shape()));
}

std::vector<Tensor> eval_gather_elements(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (data.rank() != ind.rank()) ctx.fail("data and indices must have the same rank");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
  std::vector<int64_t> dst = row_major_strides(data.shape());
  int64_t i = 0;
  return {remap(data, ind.shape(), [&](std::vector<int64_t> idx) {
    idx[axis] = wrap_index(ctx.node(), ind.get_i64(i++), data.shape()[axis]);
    return flat_index(idx, dst);
  })};
}

struct GatherNdDims {
  int64_t batch, depth;  // batch_dims, and how many leading data dims an index tuple names
};

GatherNdDims gather_nd_dims(const Node& n, size_t data_rank, size_t ind_rank, const Dim& last) {
  int64_t b = n.get_int("batch_dims", 0);
  if (ind_rank < 1 || b < 0 || b >= static_cast<int64_t>(std::min(data_rank, ind_rank)))
    n.fail("batch_dims " + std::to_string(b) + " must be below the ranks of data and indices");
  if (!last.is_static()) n.fail("the last dim of indices must be static, got " + last.str());
  int64_t m = last.value();
  if (m < 1 || b + m > static_cast<int64_t>(data_rank))
    n.fail("index tuples of length " + std::to_string(m) + " do not fit data of rank " + std::to_string(data_rank));
  return {b, m};
}

void infer_gather_nd(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0, 1})) return;
  const Type& data = ctx.input_type(0);
  const Type& ind = ctx.input_type(1);
  if (ind.rank() == 0) ctx.fail("indices must have rank >= 1");
  auto [b, m] = gather_nd_dims(ctx.node(), data.rank(), ind.rank(), ind.shape().back());
  for (int64_t k = 0; k < b; ++k)
    if (!ctx.env().unify(data.shape()[k], ind.shape()[k], &ctx.node()))
      ctx.fail("batch dim " + std::to_string(k) + " differs: data " + data.str() + ", indices " + ind.str());
  Dims out(ind.shape().begin(), ind.shape().end() - 1);
  out.insert(out.end(), data.shape().begin() + b + m, data.shape().end());
  ctx.set_output_type(0, Type::tensor(data.dtype(), ctx.env().canonical(out)));
}

std::vector<Tensor> eval_gather_nd(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  if (ind.rank() == 0) ctx.fail("indices must have rank >= 1");
  auto [b, m] = gather_nd_dims(ctx.node(), data.rank(), ind.rank(), Dim(ind.shape().back()));
  int64_t q = static_cast<int64_t>(ind.rank());
  std::vector<int64_t> out_shape(ind.shape().begin(), ind.shape().end() - 1);
  out_shape.insert(out_shape.end(), data.shape().begin() + b + m, data.shape().end());
  std::vector<int64_t> dst = row_major_strides(data.shape()), ist = row_major_strides(ind.shape());
  return {remap(data, out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t tuple = 0;  // flat index of the tuple's first element in indices
    for (int64_t k = 0; k < q - 1; ++k) tuple += idx[k] * ist[k];
    int64_t f = 0;
    for (int64_t k = 0; k < b; ++k) f += idx[k] * dst[k];
    for (int64_t j = 0; j < m; ++j) f += wrap_index(ctx.node(), ind.get_i64(tuple + j), data.shape()[b + j]) * dst[b + j];
    for (size_t k = b + m; k < data.rank(); ++k) f += idx[q - 1 + (k - b - m)] * dst[k];
    return f;
  })};
}

// ---- ScatterElements, ScatterND ---------------------------------------------------

// Writes update element ui into out[oi] under Scatter's `reduction` attribute;
// max and min of a NaN are NaN, as Max's and Min's are (and the kernels').
void scatter_into(Tensor& out, int64_t oi, const Tensor& upd, int64_t ui, const std::string& red) {
  if (red == "none") {
    copy_element(out, oi, upd, ui);
    return;
  }
  if (is_float(out.dtype())) {
    double a = out.get_f64(oi), b = upd.get_f64(ui);
    double r = red == "add" ? a + b
               : red == "mul" ? a * b
               : std::isnan(a) || std::isnan(b) ? a + b
               : red == "max" ? std::max(a, b) : std::min(a, b);
    out.set_f64(oi, r);
  } else {
    int64_t a = out.get_i64(oi), b = upd.get_i64(ui);
    int64_t r = red == "add" ? a + b : red == "mul" ? a * b : red == "max" ? std::max(a, b) : std::min(a, b);
    out.set_i64(oi, r);
  }
}

std::string scatter_reduction(const Node& n) {
  std::string red = n.get_string("reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    n.fail("reduction must be none, add, mul, max or min, got '" + red + "'");
  return red;
}

void infer_same_as_data(InferContext& ctx) {
  ctx.set_output_type(0, ctx.input_type(0));
  scatter_reduction(ctx.node());
}

// ScatterElements: indices and updates of one shape, with the data's rank, and
// an axis of it.
void infer_scatter_elements(InferContext& ctx) {
  infer_same_as_data(ctx);
  if (!inputs_ranked(ctx, {0, 1, 2})) return;
  const Type &data = ctx.input_type(0), &idx = ctx.input_type(1), &upd = ctx.input_type(2);
  if (idx.rank() != data.rank() || upd.rank() != data.rank())
    ctx.fail("data, indices and updates must have one rank, got " + data.str() + ", " + idx.str() + ", " + upd.str());
  for (size_t d = 0; d < idx.rank(); ++d)
    if (idx.shape()[d].is_static() && upd.shape()[d].is_static() && idx.shape()[d].value() != upd.shape()[d].value())
      ctx.fail("indices " + idx.str() + " and updates " + upd.str() + " must have one shape");
  if (data.rank() == 0) ctx.fail("cannot scatter into a rank-0 tensor: it has no axis");
  normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
}

std::vector<Tensor> eval_scatter_elements(EvalContext& ctx) {
  return {scatter_elements(ctx.node(), ctx.input(0).clone(), ctx.input(1), ctx.input(2), scatter_reduction(ctx.node()))};
}

std::vector<Tensor> eval_scatter_nd(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  std::string red = scatter_reduction(ctx.node());
  if (ind.rank() == 0) ctx.fail("indices must have rank >= 1");
  int64_t m = ind.shape().back();
  if (m < 1 || m > static_cast<int64_t>(data.rank()))
    ctx.fail("index tuples of length " + std::to_string(m) + " do not fit data of rank " + std::to_string(data.rank()));
  std::vector<int64_t> want(ind.shape().begin(), ind.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + m, data.shape().end());
  if (upd.shape() != want) ctx.fail("updates must have shape " + shape_str(want) + ", got " + shape_str(upd.shape()));
  Tensor out = data.clone();
  std::vector<int64_t> dst = row_major_strides(data.shape());
  int64_t slice = checked_numel(std::vector<int64_t>(data.shape().begin() + m, data.shape().end()));
  int64_t tuples = ind.numel() / m;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = 0;
    for (int64_t j = 0; j < m; ++j) base += wrap_index(ctx.node(), ind.get_i64(t * m + j), data.shape()[j]) * dst[j];
    for (int64_t e = 0; e < slice; ++e) scatter_into(out, base + e, upd, t * slice + e, red);
  }
  return {out};
}

// ---- Compress ---------------------------------------------------------------

// Kept positions of Compress: condition[i] true, and i within the dim (a
// shorter condition leaves the rest out).
std::vector<int64_t> kept_positions(const Tensor& cond, int64_t d) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < std::min(cond.numel(), d); ++i)
    if (cond.get_i64(i) != 0) kept.push_back(i);
  return kept;
}

void infer_compress(InferContext& ctx) {
  const Type& data = ctx.input_type(0);
  bool has_axis = ctx.node().has_attr("axis");
  Dim count = Dim::unknown();
  Dims out;
  if (has_axis) {
    if (!inputs_ranked(ctx, {0})) return;
    const Type& t = ctx.input_type(0);
    int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(t.rank()));
    out = t.shape();
    const Dim& d = t.shape()[axis];
    if (ctx.input_const(1) && d.is_static()) count = Dim(static_cast<int64_t>(kept_positions(*ctx.input_const(1), d.value()).size()));
    out[axis] = count.is_unknown() ? ctx.env().fresh("u") : count;
  } else {
    Dim n = data.has_rank() ? dims_product(data.shape()) : Dim::unknown();
    if (ctx.input_const(1) && n.is_static()) count = Dim(static_cast<int64_t>(kept_positions(*ctx.input_const(1), n.value()).size()));
    out = {count.is_unknown() ? ctx.env().fresh("u") : count};
  }
  ctx.set_output_type(0, Type::tensor(data.dtype(), out));
}

std::vector<Tensor> eval_compress(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (cond.rank() != 1) ctx.fail("condition must be 1-D, got shape " + shape_str(cond.shape()));
  if (!ctx.node().has_attr("axis")) {
    std::vector<int64_t> kept = kept_positions(cond, data.numel());
    Tensor out(data.dtype(), {static_cast<int64_t>(kept.size())});
    for (size_t i = 0; i < kept.size(); ++i) copy_element(out, static_cast<int64_t>(i), data, kept[i]);
    return {out};
  }
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(data.rank()));
  std::vector<int64_t> kept = kept_positions(cond, data.shape()[axis]);
  std::vector<int64_t> shape = data.shape();
  shape[axis] = static_cast<int64_t>(kept.size());
  std::vector<int64_t> st = row_major_strides(data.shape());
  return {remap(data, shape, [&](std::vector<int64_t> idx) {
    idx[axis] = kept[idx[axis]];
    return flat_index(idx, st);
  })};
}

// ---------------------------------------------------------------------------
// Kernel roles (kernel_roles.h)

// Gathers of any dtype (the integer ones that pick shape values from shapes
// alone run once per binding; masks are bool), whose indices are a buffer the
// kernel reads, constant ones too (Resize's tables; one constant index is a
// Slice, passes/decompose.cc); a one-element constant table is left to the
// host; GatherND's index tuples have a static length.
KernelRole gather_role(const Node& n) {
  if (constant_input(n, 0) && single_element(n.input(0)->type())) return KernelRole::None;
  DType index = n.input(1)->type().dtype();
  if (index != DType::I64 && index != DType::I32) return KernelRole::None;
  const Dims& idx = n.input(1)->type().shape();
  if (n.op_type() == "GatherND" && (idx.empty() || !idx.back().is_static())) return KernelRole::None;
  return KernelRole::Indexed;
}

// ---- ReverseSequence ---------------------------------------------------------------

// The batch and time axes of a ReverseSequence: 0 and 1, one each.
std::pair<int64_t, int64_t> batch_time_axes(const Node& n) {
  int64_t batch = n.get_int("batch_axis", 1), time = n.get_int("time_axis", 0);
  if (!((batch == 0 && time == 1) || (batch == 1 && time == 0)))
    n.fail("batch_axis and time_axis must be 0 and 1 in either order, got " + std::to_string(batch) + " and " +
           std::to_string(time));
  return {batch, time};
}

// ReverseSequence(x, sequence_lens): x with the first sequence_lens[b] steps
// along the time axis of each batch entry b reversed; the rest stay.
void infer_reverse_sequence(InferContext& ctx) {
  int64_t batch = batch_time_axes(ctx.node()).first;
  require_index_vector(ctx, 1, "sequence_lens");
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  if (x.rank() < 2) ctx.fail("expected an input of rank 2 or more, got " + x.str());
  const Type& lens = ctx.input_type(1);
  if (lens.is_tensor() && lens.has_rank() && !ctx.env().unify(lens.shape()[0], x.shape()[batch], &ctx.node()))
    ctx.fail("sequence_lens " + lens.str() + " must have one length per batch entry of " + x.str());
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_reverse_sequence(EvalContext& ctx) {
  auto [batch, time] = batch_time_axes(ctx.node());
  const Tensor& x = ctx.input(0);
  const Tensor& lens = ctx.input(1);
  if (x.rank() < 2) ctx.fail("expected an input of rank 2 or more, got shape " + shape_str(x.shape()));
  if (lens.rank() != 1 || lens.shape()[0] != x.shape()[batch])
    ctx.fail("sequence_lens of shape " + shape_str(lens.shape()) + " must have one length per batch entry of " +
             shape_str(x.shape()));
  int64_t steps = x.shape()[time];
  for (int64_t b = 0; b < lens.numel(); ++b)
    if (lens.get_i64(b) < 0 || lens.get_i64(b) > steps)
      ctx.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(lens.get_i64(b)) + ", outside [0, " +
               std::to_string(steps) + "]");
  std::vector<int64_t> strides = row_major_strides(x.shape());
  return {remap(x, x.shape(), [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> from = idx;
    int64_t len = lens.get_i64(idx[batch]);
    if (idx[time] < len) from[time] = len - 1 - idx[time];
    return flat_index(from, strides);
  })};
}

// Scatters whose indices are int64 or int32 (ScatterND's tuples of a static
// length, at most the data's rank): a kernel over the updates whose output
// starts as a copy of the data. Reductions other than none update elements
// atomically on the GPU, which it does for f32, f64, i32 and i64 only.
KernelRole scatter_role(const Node& n) {
  DType index = n.input(1)->type().dtype();
  if (index != DType::I64 && index != DType::I32) return KernelRole::None;
  if (n.get_string("reduction", "none") != "none" && !atomic_update_dtype(n.output(0)->type().dtype()))
    return KernelRole::None;
  if (n.op_type() == "ScatterND") {
    const Dims& idx = n.input(1)->type().shape();
    if (idx.empty() || !idx.back().is_static() || idx.back().value() < 1 ||
        idx.back().value() > static_cast<int64_t>(n.input(0)->type().rank()))
      return KernelRole::None;
  }
  return KernelRole::Indexed;
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// d gather(x, idx, axis) = ScatterElements(zeros, idx', g', axis, add), with
// the index axes of g flattened into one (g' has x's rank) and idx' the
// flattened indices broadcast along g'. Adding, rather than assigning, makes
// repeated indices accumulate. Needs opset 16 (Scatter's reduction).
void gather_rule(GradContext& c) {
  if (c.node().opset() < 16) c.fail("the gradient of Gather uses ScatterElements' reduction, which needs opset 16");
  Emitter& e = c.e();
  Value* x = c.in(0);
  size_t rank = c.dims(x).size();
  int64_t axis = c.axis(c.node().get_int("axis", 0), rank);
  Value* xs = e.shape_of(x);
  Value* before = e.op("Slice", {xs, e.ints({0}), e.ints({axis})});
  Value* after = e.op("Slice", {xs, e.ints({axis + 1}), e.ints({static_cast<int64_t>(rank)})});
  Value* g_shape = e.op("Concat", {before, e.ints({-1}), after}, int_attr("axis", 0));
  Value* g = e.op("Reshape", {c.dy(), g_shape});
  Value* idx = e.op("Reshape", {c.in(1), e.ints({-1})});
  std::vector<int64_t> other_axes;
  for (int64_t i = 0; i < static_cast<int64_t>(rank); ++i)
    if (i != axis) other_axes.push_back(i);
  if (!other_axes.empty()) idx = e.unsqueeze(idx, other_axes);
  idx = e.op("Expand", {idx, e.shape_of(g)});
  Attrs attrs{{"axis", Attribute::of_int(axis)}, {"reduction", Attribute::of_string("add")}};
  c.set(0, e.op("ScatterElements", {e.zeros_like(x, c.dtype()), idx, g}, std::move(attrs)));
}

// GatherElements: g added into zeros where each element came from
// (ScatterElements, reduction add); GatherND (batch_dims 0): the same with ScatterND.
void gather_elements_rule(GradContext& c) {
  if (c.node().opset() < 16)
    c.fail("the gradient of " + c.node().op_type() + " uses a scatter's reduction, which needs opset 16");
  bool nd = c.node().op_type() == "GatherND";
  if (nd && c.node().get_int("batch_dims", 0) != 0) c.fail("tcc differentiates GatherND with batch_dims 0 only");
  Attrs attrs{{"reduction", Attribute::of_string("add")}};
  if (!nd) attrs["axis"] = Attribute::of_int(c.node().get_int("axis", 0));
  Value* zeros = c.e().zeros_like(c.in(0), c.dtype());
  c.set(0, c.e().op(nd ? "ScatterND" : "ScatterElements", {zeros, c.in(1), c.dy()}, std::move(attrs)));
}

// ScatterElements, ScatterND: y is data with each update combined, in turn,
// into the element (or slice) its index names by the reduction. Gathering at
// the indices reads, per update, the value of y (or g) where it landed.
//   none: data's gradient is g where no update landed (a scatter of zeros into
//     g), the updates' g gathered (ONNX leaves repeated indices undefined);
//   add: g, and g gathered;
//   mul: each element of y is the product of data's element and the updates
//     landing there: each factor's gradient is g times the product of the
//     others (product_of_others, exact at zeros), with the nonzero factors'
//     product and the zeros' count per element scattered by mul and add;
//   max, min: g to the factors equal to y, split evenly among those ties (as
//     torch.scatter_reduce's amax and amin, and Max and Min here), the ties
//     per element counted by a scatter add.
void scatter_rule(GradContext& c) {
  std::string reduction = c.node().get_string("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    c.fail("tcc differentiates " + c.node().op_type() + " with reduction none, add, mul, max or min, not " + reduction);
  bool nd = c.node().op_type() == "ScatterND";
  Emitter& e = c.e();
  Attrs axis;
  if (!nd) axis["axis"] = Attribute::of_int(c.node().get_int("axis", 0));
  auto scatter = [&](Value* into, Value* updates, const std::string& how) {
    Attrs attrs = axis;
    if (how != "none") attrs["reduction"] = Attribute::of_string(how);
    return e.op(nd ? "ScatterND" : "ScatterElements", {into, c.in(1), updates}, std::move(attrs));
  };
  auto gather = [&](Value* v) { return e.op(nd ? "GatherND" : "GatherElements", {v, c.in(1)}, axis); };
  Value* g = c.dy();
  if (reduction == "none" || reduction == "add") {
    if (c.wants(0)) c.set(0, reduction == "add" ? g : scatter(g, e.zeros_like(c.in(2), c.dtype()), "none"));
    if (c.wants(2)) c.set(2, gather(g));
  } else if (reduction == "mul") {
    Factors data = factors_of(c, c.in(0)), updates = factors_of(c, c.in(2));
    Value* nonzero_product = scatter(data.safe, updates.safe, "mul");
    Value* zeros = scatter(as_dtype(c, data.is_zero), as_dtype(c, updates.is_zero), "add");
    if (c.wants(0)) c.set(0, mul(c, g, product_of_others(c, data, nonzero_product, zeros)));
    if (c.wants(2))
      c.set(2, mul(c, gather(g), product_of_others(c, updates, gather(nonzero_product), gather(zeros))));
  } else {
    Value* data_hit = as_dtype(c, e.op("Equal", {c.in(0), c.out()}));
    Value* update_hit = as_dtype(c, e.op("Equal", {c.in(2), gather(c.out())}));
    Value* share = e.op("Div", {g, scatter(data_hit, update_hit, "add")});
    if (c.wants(0)) c.set(0, mul(c, share, data_hit));
    if (c.wants(2)) c.set(2, mul(c, gather(share), update_hit));
  }
}

// Compress: g scattered back to the kept positions, the indices of the
// condition's true entries within x's extent (a longer condition's tail keeps
// nothing); every other element gets 0. Without an axis, over x flattened.
void compress_rule(GradContext& c) {
  Emitter& e = c.e();
  Value* x = c.in(0);
  bool along_axis = c.node().has_attr("axis");
  size_t rank = c.dims(x).size();
  int64_t axis = along_axis ? c.axis(c.node().get_int("axis", 0), rank) : 0;
  Value* extent = along_axis ? e.op("Gather", {e.shape_of(x), e.ints({axis})})
                             : e.op("Reshape", {e.op("Size", {x}), e.ints({1})});
  Value* kept = e.op("Slice", {c.in(1), e.ints({0}), extent});
  Value* positions = e.op("Reshape", {e.op("NonZero", {kept}), e.ints({-1})});
  if (!along_axis) {
    Value* flat = e.op("Reshape", {e.zeros_like(x, c.dtype()), e.ints({-1})});
    return c.set(0, e.op("Reshape", {scatter_back(c, flat, positions, c.dy(), 0), e.shape_of(x)}));
  }
  std::vector<int64_t> along(rank, 1);
  along[static_cast<size_t>(axis)] = -1;
  Value* index = e.op("Expand", {e.op("Reshape", {positions, e.ints(along)}), e.shape_of(c.dy())});
  c.set(0, scatter_back(c, e.zeros_like(x, c.dtype()), index, c.dy(), axis));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// A constant of zeros, or ConstantOfShape of zero (of any shape, symbolic too), reshaped or not.
bool all_zero(const Value* v) {
  const Node* p = v->producer();
  if (p != nullptr && (p->domain().empty() || p->domain() == kTccDomain) && p->op_type() == "Reshape")
    return all_zero(p->input(0));
  if (p != nullptr && p->domain().empty() && p->op_type() == "ConstantOfShape") {
    const Attribute* value = p->attr("value");
    return value == nullptr ||
           (value->kind == Attribute::Kind::Tensor && value->t.numel() == 1 && value->t.get_f64(0) == 0);
  }
  std::optional<Tensor> t = constant_value(v);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->get_f64(i) != 0) return false;
  return true;
}

// ScatterElements(zeros, idx, upd, reduction=add) -> tcc::ScatterAdd(idx, upd) {axis, shape}:
// an embedding lookup's or a MaxPool's gradient, without zeros to read (a
// constant or ConstantOfShape, of any shape; what only sized the zeros is swept).
bool decompose_scatter_add(Expansion& e) {
  const Node& n = e.node();
  const Type& y = n.output(0)->type();
  if (n.num_inputs() != 3 || n.get_string("reduction", "none") != "add" || !all_zero(n.input(0)) ||
      !y.is_tensor() || !y.fully_shaped())
    return false;
  e.finish("", "ScatterAdd", {n.input(1), n.input(2)},
           {{"axis", Attribute::of_int(n.get_int("axis", 0))}, {"shape", shape_attr(y.shape())}},
           std::string(kTccDomain));
  e.leaves_dead_inputs();
  return true;
}

// The position a one-element constant `index` picks along axis `axis` (in
// range) of x: a negative index counts from the axis's end. Null where the
// axis's extent is not static or the position falls outside it.
std::optional<int64_t> one_position(const Tensor& index, const Type& x, int64_t axis) {
  const Dim& extent = x.shape()[static_cast<size_t>(axis)];
  if (index.numel() != 1 || !extent.is_static()) return std::nullopt;
  int64_t k = index.get_i64(0);
  if (k < 0) k += extent.value();
  if (k < 0 || k >= extent.value()) return std::nullopt;
  return k;
}

// Gather(x, k) of a constant one-element index along an axis whose extent is
// static (a negative k counts from its end), torch's select (attention's q, k,
// v out of one stacked tensor, a class token): the Slice of that one position,
// squeezed away when k is a scalar, a copy or a view where a Gather would read
// an index tensor.
bool decompose_select(Expansion& e) {
  const Node& n = e.node();
  std::optional<Tensor> index = constant_value(n.input(1));
  const Type& x = n.input(0)->type();
  if (!index || index->rank() > 1 || !x.is_tensor() || !x.has_rank()) return false;
  auto rank = static_cast<int64_t>(x.rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  std::optional<int64_t> k = one_position(*index, x, axis);
  if (!k) return false;
  std::vector<Value*> slice = {n.input(0), e.i64("starts", *k), e.i64("ends", *k + 1), e.i64("axes", axis)};
  if (index->rank() == 1) {
    e.finish("Slice", "Slice", slice);
    return true;
  }
  Dims kept = x.shape();
  kept[axis] = Dim(1);
  Value* one = e.add("Slice", "Slice", slice, Type::tensor(x.dtype(), kept));
  if (n.opset() >= 13) e.finish("Squeeze", "Squeeze", {one, e.i64("squeeze_axes", axis)});
  else e.finish("Squeeze", "Squeeze", {one}, {{"axes", Attribute::of_ints({axis})}});
  return true;
}

// GatherND(x, [[k]]) with batch_dims 0, one constant index tuple of one
// index along an axis whose extent is static (a negative k counts from its
// end): the Slice x[k:k+1], of the same shape (Falcon's multi-query K and V,
// fused_qkv[..., [-2], :] after a transpose), a view where a GatherND would
// read an index tensor.
bool decompose_gather_one(Expansion& e) {
  const Node& n = e.node();
  std::optional<Tensor> index = constant_value(n.input(1));
  const Type& x = n.input(0)->type();
  if (n.get_int("batch_dims", 0) != 0 || !index || index->rank() != 2 || !x.is_tensor() || !x.has_rank() ||
      x.rank() == 0)
    return false;
  std::optional<int64_t> k = one_position(*index, x, 0);
  if (!k) return false;
  e.finish("Slice", "Slice", {n.input(0), e.i64("starts", *k), e.i64("ends", *k + 1), e.i64("axes", 0)});
  return true;
}

// ReverseSequence(x, lens) -> GatherElements(x, from, axis = time) with from =
// Where(t < lens[b], lens[b] - 1 - t, t) over a tcc::Range t along the time
// axis and lens viewed along the batch axis, expanded to x's shape. Needs x's
// dims known (symbolic too); lens may be data. Unlike the reference kernel, it
// does not check that each length lies in [0, T].
bool decompose_reverse_sequence(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() < 2 || !x.fully_shaped()) return false;
  auto [batch, time] = batch_time_axes(n);
  Dims along_time(x.rank(), Dim(1)), along_batch(x.rank(), Dim(1)), both(x.rank(), Dim(1));
  along_time[time] = both[time] = x.shape()[time];
  along_batch[batch] = both[batch] = x.shape()[batch];
  Type batch_type = Type::tensor(DType::I64, along_batch), index_type = Type::tensor(DType::I64, both);
  Value* t = e.reshape("Reshape", e.range("Range", 0, x.shape()[time]), along_time);
  Value* len = e.reshape("Reshape_1", n.input(1), along_batch);
  Value* last = e.add("Sub", "Sub", {len, e.scalar("one", 1, DType::I64)}, batch_type);
  Value* reversed = e.add("Sub_1", "Sub", {last, t}, index_type);
  Value* inside = e.add("Less", "Less", {t, len}, Type::tensor(DType::Bool, both));
  Value* from = e.add("Where", "Where", {inside, reversed, t}, index_type);
  e.finish("GatherElements", "GatherElements", {n.input(0), e.expand("Expand", from, x.shape())},
           {{"axis", Attribute::of_int(time)}});
  return true;
}

// Compress(x, condition) -> Gather of the positions NonZero finds in the
// condition (which decomposes into kernels around the one host step that binds
// the count), along the axis, or over x flattened when there is none. A
// condition longer than the dim is sliced to it; one shorter leaves the rest
// out by itself. Needs the condition's length and the dim both static, or
// equal, and the output's count a size the data decides.
bool decompose_compress(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& cond = n.input(1)->type();
  const Type& y = n.output(0)->type();
  if (!x.is_tensor() || !x.fully_shaped() || !cond.is_tensor() || !cond.has_rank() || cond.rank() != 1 ||
      !y.is_tensor() || !y.fully_shaped())
    return false;
  bool has_axis = n.has_attr("axis");
  int64_t axis = has_axis ? normalize_axis(n, n.get_int("axis", 0), static_cast<int64_t>(x.rank())) : 0;
  const Dim d = has_axis ? x.shape()[axis] : dims_product(x.shape()), c = cond.shape()[0];
  const Dim count = y.shape()[has_axis ? axis : 0];
  if (!e.data_dependent(count) || (c != d && !(c.is_static() && d.is_static()))) return false;
  Value* flags = n.input(1);
  if (c.is_static() && c.value() > d.value())
    flags = e.add("Slice", "Slice", {flags, e.i64("starts", 0), e.i64("ends", d.value()), e.i64("axes", 0)},
                  Type::tensor(cond.dtype(), {d}));
  Value* found = e.add("NonZero", "NonZero", {flags}, Type::tensor(DType::I64, {Dim(1), count}));
  Value* data = has_axis ? n.input(0) : e.reshape("Reshape_data", n.input(0), {d});
  e.finish("Gather", "Gather", {data, e.reshape("Reshape_positions", found, {count})},
           {{"axis", Attribute::of_int(axis)}});
  return true;
}

}  // namespace

Tensor scatter_elements(const Node& n, Tensor out, const Tensor& ind, const Tensor& upd, const std::string& reduction) {
  if (ind.rank() != out.rank() || ind.shape() != upd.shape())
    n.fail("indices " + shape_str(ind.shape()) + " and updates " + shape_str(upd.shape()) +
           " must have one shape, of the rank of data " + shape_str(out.shape()));
  int64_t axis = normalize_axis(n, n.get_int("axis", 0), static_cast<int64_t>(out.rank()));
  std::vector<int64_t> dst = row_major_strides(out.shape());
  std::vector<int64_t> idx(ind.rank(), 0);
  for (int64_t i = 0; i < ind.numel(); ++i) {
    std::vector<int64_t> at = idx;
    at[axis] = wrap_index(n, ind.get_i64(i), out.shape()[axis]);
    scatter_into(out, flat_index(at, dst), upd, i, reduction);
    advance(idx, ind.shape());
  }
  return out;
}

void register_gather_scatter_ops(OpRegistry& r) {
  r.add(OpDef{"", "Gather", 1, kMovement | kRearranges, infer_gather, eval_gather, {}}).kernel_role(KernelRole::Indexed, gather_role).gradient(gather_rule).decomposition(decompose_select);
  r.add(OpDef{"", "GatherElements", 11, kMovement | kRearranges, infer_gather_elements, eval_gather_elements, {}})
      .kernel_role(KernelRole::Indexed, gather_role)
      .gradient(gather_elements_rule);
  r.add(OpDef{"", "GatherND", 12, kMovement | kRearranges, infer_gather_nd, eval_gather_nd, {}})
      .kernel_role(KernelRole::Indexed, gather_role)
      .gradient(gather_elements_rule)
      .decomposition(decompose_gather_one);
  r.add(OpDef{"", "ScatterElements", 11, kMovement, infer_scatter_elements, eval_scatter_elements, {}})
      .kernel_role(KernelRole::Indexed, scatter_role)
      .gradient(scatter_rule)
      .decomposition(decompose_scatter_add);
  r.add(OpDef{"", "ScatterND", 11, kMovement, infer_same_as_data, eval_scatter_nd, {}})
      .kernel_role(KernelRole::Indexed, scatter_role)
      .gradient(scatter_rule);
  r.add(OpDef{"", "Compress", 11, kMovement | kRearranges | kDataDependentShape, infer_compress, eval_compress, {}})
      .hint_at_break(kSelectInPlace)
      .gradient(compress_rule)
      .decomposition(decompose_compress);
  r.add(OpDef{"", "ReverseSequence", 10, kMovement | kRearranges, infer_reverse_sequence, eval_reverse_sequence, {}})
      .decomposition(decompose_reverse_sequence);
}

}  // namespace tcc
