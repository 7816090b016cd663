// tcc's own ops (domain "tcc", opset 1), introduced by passes:
//   - tcc::Fusion: a group of nodes that becomes one kernel (src/ops/fusion.h);
//     its shape rule and kernel are those of its body, so a fused graph still
//     infers, runs in the interpreter and round-trips as text.
//   - tcc::Reshape, tcc::Expand, tcc::Slice: the movement ops whose target
//     shape an exporter computed at run time (Shape -> Gather -> Concat), with
//     that shape written as SymExpr texts over the symbols the graph inputs
//     bind ("batch", "seq*12"), so no host work computes it
//     (passes/resolve_shapes.cc). tcc::Slice's starts are such texts too
//     ("seq//2"), as are those of the parts of a Split along a symbolic axis
//     (decompose_split in src/ops/movement.cc).
//   - tcc::Range() {start, delta, shape, to}: the integers start, start + delta,
//     ... of the one-dim `shape` (a SymExpr text), in dtype `to`: an integer
//     Range whose length resolved to bound symbols (position ids), reading no
//     tensor, so the limit's Shape chain dies and a kernel computes it.
//   - tcc::ScatterAdd(indices, updates) {axis, shape}: a zero tensor of `shape`
//     (SymExpr texts) with each update added where ScatterElements would put
//     it: ScatterElements(zeros, indices, updates, reduction=add), an embedding
//     lookup's gradient, without a table of zeros to read (passes/decompose.cc).
//   - tcc::Pad(x, <none>, fill) {mode, pads}: Pad with pads computed from the
//     shapes, as SymExpr texts (registered with Pad, in src/ops/movement.cc).
//   - tcc::Size() {dims}: the element count of a tensor of shape `dims` (SymExpr
//     texts), an i64 scalar. Resolved from Size(x) the same way, it reads no
//     tensor, so the value it replaces (a mean's divisor in a gradient) costs
//     neither a host step nor a read of x's data.
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// ---- tcc::Fusion ------------------------------------------------------------

void infer_fusion(InferContext& ctx) {
  std::vector<Type> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input_type(i));
  std::vector<Type> outs = ctx.infer_region(fusion_body(ctx.node()), inputs);
  if (outs.size() != ctx.num_outputs())
    ctx.fail("the body has " + std::to_string(outs.size()) + " outputs for " + std::to_string(ctx.num_outputs()) +
             " node outputs");
  for (size_t i = 0; i < outs.size(); ++i) ctx.set_output_type(i, outs[i]);
}

std::vector<Tensor> eval_fusion(EvalContext& ctx) {
  const Graph& body = fusion_body(ctx.node());
  if (body.inputs().size() != ctx.num_inputs())
    ctx.fail("the body takes " + std::to_string(body.inputs().size()) + " inputs, the node has " +
             std::to_string(ctx.num_inputs()));
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) inputs.push_back(ctx.input(i));
  return ctx.run_region(body, inputs);
}

// ---- symbolic target shapes -------------------------------------------------

void infer_tcc_reshape(InferContext& ctx) {
  Dims out = parse_shape_attr(ctx.node(), "shape");
  const Type& in = ctx.input_type(0);
  if (in.is_tensor() && in.has_rank()) {
    Dim total = dims_product(in.shape()), got = dims_product(out);
    if (!ctx.env().unify(total, got, &ctx.node()))
      ctx.fail("cannot reshape " + in.str() + " (" + total.str() + " elements) into " + dims_str(out));
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), ctx.env().canonical(out)));
}

std::vector<Tensor> eval_tcc_reshape(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  std::vector<int64_t> shape = eval_shape_attr(ctx, "shape");
  if (checked_numel(shape) != data.numel())
    ctx.fail("cannot reshape " + shape_str(data.shape()) + " into " + shape_str(shape));
  return {data.reshaped(shape)};
}

void infer_tcc_expand(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  ctx.set_output_type(0, Type::tensor(in.dtype(), broadcast_dims(ctx, {in.shape(), parse_shape_attr(ctx.node(), "shape")})));
}

std::vector<Tensor> eval_tcc_expand(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> out_shape = broadcast_shapes(ctx.node(), {in.shape(), eval_shape_attr(ctx, "shape")});
  BroadcastIndexer at(out_shape, in.shape());
  Tensor out(in.dtype(), out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(out, i, in, at(i));
  return {out};
}

// tcc::Slice(x) {axes, starts, steps, shape}: along each listed axis, output
// index i reads input index starts[k] + i * steps[k]; `starts` are SymExpr
// texts already normalized (non-negative: "1", "seq//2"), `shape` is the
// whole output shape.
struct SliceAttrs {
  std::vector<int64_t> axes, steps;
  Dims starts;
};

SliceAttrs slice_attrs(const Node& n, size_t rank) {
  SliceAttrs s{n.get_ints("axes"), n.get_ints("steps"), parse_shape_attr(n, "starts")};
  if (s.starts.size() != s.axes.size() || s.steps.size() != s.axes.size())
    n.fail("axes, starts and steps must have the same length");
  for (size_t k = 0; k < s.axes.size(); ++k) {
    if (s.axes[k] < 0 || s.axes[k] >= static_cast<int64_t>(rank))
      n.fail("axis " + std::to_string(s.axes[k]) + " is out of range for rank " + std::to_string(rank));
    if (s.steps[k] == 0) n.fail("steps must not be 0");
  }
  return s;
}

void infer_tcc_slice(InferContext& ctx) {
  const Type& in = ctx.ranked_input(0);
  Dims out = parse_shape_attr(ctx.node(), "shape");
  if (out.size() != in.rank())
    ctx.fail("shape has " + std::to_string(out.size()) + " dims for an input of rank " + std::to_string(in.rank()));
  slice_attrs(ctx.node(), in.rank());
  ctx.set_output_type(0, Type::tensor(in.dtype(), ctx.env().canonical(out)));
}

std::vector<Tensor> eval_tcc_slice(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> out_shape = eval_shape_attr(ctx, "shape");
  if (out_shape.size() != in.rank()) ctx.fail("shape does not have the input's rank");
  SliceAttrs s = slice_attrs(ctx.node(), in.rank());
  std::vector<int64_t> starts = eval_shape_attr(ctx, "starts");
  std::vector<int64_t> start(in.rank(), 0), step(in.rank(), 1);
  for (size_t k = 0; k < s.axes.size(); ++k) {
    start[s.axes[k]] = starts[k];
    step[s.axes[k]] = s.steps[k];
  }
  for (size_t k = 0; k < in.rank(); ++k) {
    if (out_shape[k] == 0) continue;
    int64_t last = start[k] + (out_shape[k] - 1) * step[k];
    if (start[k] >= in.shape()[k] || last < 0 || last >= in.shape()[k])
      ctx.fail("slicing " + std::to_string(out_shape[k]) + " elements from " + std::to_string(start[k]) +
               " by " + std::to_string(step[k]) + " leaves dim " + std::to_string(k) + " of " +
               shape_str(in.shape()));
  }
  std::vector<int64_t> in_strides = row_major_strides(in.shape());
  Tensor out(in.dtype(), out_shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = unravel_index(i, out_shape);
    int64_t src = 0;
    for (size_t k = 0; k < idx.size(); ++k) src += (start[k] + idx[k] * step[k]) * in_strides[k];
    copy_element(out, i, in, src);
  }
  return {out};
}

void infer_tcc_size(InferContext& ctx) {
  Dim n = dims_product(parse_shape_attr(ctx.node(), "dims"));
  ctx.set_output_type(0, Type::tensor(DType::I64, {}));
  if (n.is_static()) ctx.set_output_const(0, Tensor::scalar_i64(n.value()));
  ctx.set_output_values(0, {n});
}

std::vector<Tensor> eval_tcc_size(EvalContext& ctx) {
  return {Tensor::scalar_i64(checked_numel(eval_shape_attr(ctx, "dims")))};
}

DType range_dtype(const Node& n) {
  int64_t to = n.get_int("to", static_cast<int64_t>(DType::I64));
  auto t = static_cast<DType>(to);
  if (t != DType::I64 && t != DType::I32) n.fail("'to' must be int64 or int32");
  return t;
}

void infer_tcc_range(InferContext& ctx) {
  Dims shape = parse_shape_attr(ctx.node(), "shape");
  if (shape.size() != 1) ctx.fail("shape must have one dim, got " + std::to_string(shape.size()));
  ctx.set_output_type(0, Type::tensor(range_dtype(ctx.node()), shape));
}

std::vector<Tensor> eval_tcc_range(EvalContext& ctx) {
  std::vector<int64_t> shape = eval_shape_attr(ctx, "shape");
  if (shape.size() != 1) ctx.fail("shape must have one dim");
  int64_t start = ctx.node().get_int("start", 0), delta = ctx.node().get_int("delta", 1);
  Tensor out(range_dtype(ctx.node()), shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, start + i * delta);
  return {out};
}

void infer_tcc_scatter_add(InferContext& ctx) {
  const Type& idx = ctx.ranked_input(0);
  const Type& upd = ctx.ranked_input(1);
  Dims shape = parse_shape_attr(ctx.node(), "shape");
  if (idx.rank() != upd.rank() || shape.size() != upd.rank())
    ctx.fail("indices, updates and shape must have one rank, got " + idx.str() + ", " + upd.str() + " and " +
             dims_str(shape));
  if (idx.dtype() != DType::I64 && idx.dtype() != DType::I32) ctx.fail("indices must be int64 or int32");
  ctx.set_output_type(0, Type::tensor(upd.dtype(), shape));
}

std::vector<Tensor> eval_tcc_scatter_add(EvalContext& ctx) {
  const Tensor& upd = ctx.input(1);
  std::vector<int64_t> shape = eval_shape_attr(ctx, "shape");
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(shape.size()));
  for (size_t d = 0; d < shape.size() && d < upd.rank(); ++d)
    if (static_cast<int64_t>(d) != axis && upd.shape()[d] > shape[d])
      ctx.fail("updates are larger than the output along axis " + std::to_string(d));
  return {scatter_elements(ctx.node(), Tensor(upd.dtype(), shape), ctx.input(0), upd, "add")};
}

}  // namespace

void register_tcc_ops(OpRegistry& r) {
  const std::string d(kTccDomain);
  r.add(OpDef{d, std::string(kFusionOp), 1, 0, infer_fusion, eval_fusion, {}});
  r.add(OpDef{d, "Reshape", 1, kMovement | kRearranges | kReshape, infer_tcc_reshape, eval_tcc_reshape, {}})
      .kernel_role(KernelRole::Movement)
      .gradient(reshape_rule);
  r.add(OpDef{d, "Expand", 1, kMovement | kRearranges, infer_tcc_expand, eval_tcc_expand, {}})
      .kernel_role(KernelRole::Movement)
      .gradient(expand_rule);
  r.add(OpDef{d, "Slice", 1, kMovement | kRearranges, infer_tcc_slice, eval_tcc_slice, {}}).kernel_role(KernelRole::Movement);
  r.add(OpDef{d, "Size", 1, kShapeOnly, infer_tcc_size, eval_tcc_size, {}}).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>&) {
    // The product of its dims attribute.
    SymExpr numel = SymExpr::constant(1);
    const Attribute* dims = n.attr("dims");
    if (dims == nullptr || dims->kind != Attribute::Kind::Strings) n.fail("has no 'dims' attribute");
    for (const std::string& text : dims->strings) {
      std::optional<SymExpr> d = SymExpr::parse(text);
      if (!d) n.fail("has a dim '" + text + "' that is not a symbolic expression");
      numel = numel * *d;
    }
    return b.size(n.output(0)->type().dtype(), numel);
  });
  r.add(OpDef{d, "Range", 1, kShapeOnly, infer_tcc_range, eval_tcc_range, {}}).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>&) {
    // start + coordinate * delta along its one axis.
    int scaled = b.op(ScalarOp::Mul, DType::I64,
                      {b.coordinate(n, 0), b.constant(DType::I64, static_cast<double>(n.get_int("delta", 1)))});
    int value = b.op(ScalarOp::Add, DType::I64, {scaled, b.constant(DType::I64, static_cast<double>(n.get_int("start", 0)))});
    DType dt = n.output(0)->type().dtype();
    return dt == DType::I64 ? value : b.op(ScalarOp::Cast, dt, {value});
  });
  r.add(OpDef{d, "ScatterAdd", 1, kMovement, infer_tcc_scatter_add, eval_tcc_scatter_add, {}}).kernel_role(KernelRole::Indexed, [](const Node& n) {
    // Atomic adds (atomic_update_dtype); indices a buffer, not a literal.
    return atomic_update_dtype(n.output(0)->type().dtype()) && !constant_input(n, 0);
  });
}

}  // namespace tcc
