// ATen ops -> tcc IR (ONNX ops at opset 20), one rule per op family.
//
// Rules cover the training IR (torch.export.export: linear, layer_norm,
// scaled_dot_product_attention, conv2d, batch_norm, ...) and core ATen
// (run_decompositions(): addmm, native_layer_norm, convolution, _softmax,
// view/expand/clone chains, ...). Output shapes come from the program's own
// tensor meta, so a view, flatten, squeeze or expand is a Reshape / Expand to
// the shape torch recorded, never a re-derivation of -1s and broadcasting.
// A target with no rule here becomes an opaque node in the importer.
#include <cmath>
#include <cstdint>
#include <limits>
#include <unordered_map>

#include "frontends/pt2/aten_context.h"

namespace tcc {

namespace {

using Rule = std::function<void(AtenNode&)>;

Attribute ints_attr(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }
Attribute int_attr(int64_t v) { return Attribute::of_int(v); }

int64_t norm_axis(AtenNode& n, int64_t d, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (d < -std::max<int64_t>(r, 1) || d >= std::max<int64_t>(r, 1))
    n.fail("dim " + std::to_string(d) + " is out of range for rank " + std::to_string(rank));
  return d < 0 ? d + r : d;
}

// A tensor or Scalar argument as a tensor of dtype `t`.
Value* operand(AtenNode& n, const std::string& arg, DType t) {
  if (n.is_tensor(arg)) return n.cast(n.tensor(arg), t);
  Pt2Scalar s = n.scalar(arg);
  if (s.kind == Pt2Scalar::Kind::Sym) return n.cast(n.sym_scalar(s.sym), t);
  return n.scalar_const(s.value(), t);
}

// The dtype torch computes a comparison in: self's, unless a float meets an
// integer tensor.
DType compare_dtype(AtenNode& n) {
  DType a = n.dtype(n.tensor("self"));
  if (n.is_tensor("other")) {
    DType b = n.dtype(n.tensor("other"));
    if (a == b) return a;
    if (is_float(b) && !is_float(a)) return b;
    return a == DType::Bool ? b : a;
  }
  Pt2Scalar s = n.scalar("other");
  return s.is_float() && !is_float(a) ? DType::F32 : a;
}

Rule binary(const std::string& onnx_op, bool alpha = false, bool reversed = false) {
  return [=](AtenNode& n) {
    DType t = n.out_meta(0).dtype;
    Value* a = operand(n, "self", t);
    Value* b = operand(n, "other", t);
    if (alpha && n.has("alpha") && n.f("alpha") != 1.0) b = n.op("Mul", {b, n.scalar_const(n.f("alpha"), t)});
    if (reversed) std::swap(a, b);
    n.result(onnx_op, {a, b});
  };
}

Rule compare(const std::string& onnx_op, bool negate = false) {
  return [=](AtenNode& n) {
    DType t = compare_dtype(n);
    Value* a = operand(n, "self", t);
    Value* b = operand(n, "other", t);
    if (negate) {
      n.result("Not", {n.typed(n.op("Equal", {a, b}), DType::Bool)});
    } else {
      n.result(onnx_op, {a, b});
    }
  };
}

Rule logical(const std::string& onnx_op) {
  return [=](AtenNode& n) {
    n.result(onnx_op, {n.cast(n.tensor("self"), DType::Bool), n.cast(n.tensor("other"), DType::Bool)});
  };
}

// bitwise_and / __and__ (and or, xor): logical on bools, bitwise on integers.
Rule bitwise(const std::string& logical_op) {
  return [=](AtenNode& n) {
    DType t = n.out_meta(0).dtype;
    Value* a = n.cast(n.tensor("self"), t);
    Value* b = n.cast(n.tensor("other"), t);
    if (t == DType::Bool) n.result(logical_op, {a, b});
    else if (is_integer(t)) n.result("Bitwise" + logical_op, {a, b});
    else n.fail("a bitwise " + logical_op + " of " + std::string(dtype_name(t)) + " tensors");
  };
}

Rule unary(const std::string& onnx_op, std::map<std::string, Attribute> attrs = {}) {
  return [=](AtenNode& n) { n.result(onnx_op, {n.tensor("self")}, attrs); };
}

// Ops that only change how torch stores a tensor (clone, contiguous, detach,
// eval-mode dropout): the output is the input.
void alias(AtenNode& n) {
  Value* x = n.has("self") ? n.tensor("self") : n.tensor("input");
  n.set_out(0, n.cast(x, n.out_meta(0).dtype));
}

void div(AtenNode& n) {
  std::string mode = n.has("rounding_mode") ? n.s("rounding_mode") : "";
  DType out = n.out_meta(0).dtype;
  if (mode.empty()) return binary("Div")(n);
  if (mode != "floor") n.fail("rounding_mode '" + mode + "' is not supported (tcc maps 'floor' and none)");
  DType t = is_float(out) ? out : DType::F64;
  Value* q = n.op("Div", {operand(n, "self", t), operand(n, "other", t)});
  Value* f = n.op("Floor", {q});
  n.set_out(0, n.cast(f, out));
}

void where(AtenNode& n) {
  DType t = n.out_meta(0).dtype;
  n.result("Where", {n.cast(n.tensor("condition"), DType::Bool), operand(n, "self", t), operand(n, "other", t)});
}

void masked_fill(AtenNode& n) {
  DType t = n.out_meta(0).dtype;
  n.result("Where", {n.cast(n.tensor("mask"), DType::Bool), operand(n, "value", t), n.tensor("self")});
}

void silu(AtenNode& n) {
  Value* x = n.tensor("self");
  n.result("Mul", {x, n.op("Sigmoid", {x})});
}

void gelu(AtenNode& n) {
  std::string approx = n.s("approximate", "none");
  if (approx != "none" && approx != "tanh") n.fail("approximate must be 'none' or 'tanh', got '" + approx + "'");
  n.result("Gelu", {n.tensor("self")}, {{"approximate", Attribute::of_string(approx)}});
}

void rsqrt(AtenNode& n) { n.result("Reciprocal", {n.op("Sqrt", {n.tensor("self")})}); }

void hardtanh(AtenNode& n) {
  DType t = n.dtype(n.tensor("self"));
  n.result("Clip", {n.tensor("self"), n.scalar_const(n.f("min_val", -1.0), t), n.scalar_const(n.f("max_val", 1.0), t)});
}

// clamp(self, min=None, max=None): Clip with the bounds given.
void clamp(AtenNode& n) {
  Value* x = n.tensor("self");
  DType t = n.dtype(x);
  std::vector<Value*> in = {x, n.has("min") ? n.scalar_const(n.f("min"), t) : nullptr,
                            n.has("max") ? n.scalar_const(n.f("max"), t) : nullptr};
  while (!in.back()) in.pop_back();
  n.result("Clip", in);
}

void leaky_relu(AtenNode& n) {
  n.result("LeakyRelu", {n.tensor("self")}, {{"alpha", Attribute::of_float(static_cast<float>(n.f("negative_slope", 0.01)))}});
}

void pow(AtenNode& n) {
  DType t = n.out_meta(0).dtype;
  Value* x = n.cast(n.tensor("self"), t);
  n.result("Pow", {x, operand(n, "exponent", t)});
}

void to_dtype(AtenNode& n) { n.set_out(0, n.cast(n.tensor("self"), n.out_meta(0).dtype)); }

// ---- matrix products --------------------------------------------------------

void linear(AtenNode& n) {
  Value* x = n.tensor("input");
  Value* w = n.tensor("weight");
  Value* bias = n.opt_tensor("bias");
  if (n.rank(x) == 2) {
    std::vector<Value*> in = {x, w};
    if (bias) in.push_back(bias);
    n.result("Gemm", in, {{"transB", int_attr(1)}});
    return;
  }
  Value* wt = n.op("Transpose", {w}, {{"perm", ints_attr({1, 0})}});
  if (!bias) return n.result("MatMul", {x, wt});
  n.result("Add", {n.op("MatMul", {x, wt}), bias});
}

void addmm(AtenNode& n) {
  n.result("Gemm", {n.tensor("mat1"), n.tensor("mat2"), n.tensor("self")},
           {{"alpha", Attribute::of_float(static_cast<float>(n.f("alpha", 1.0)))},
            {"beta", Attribute::of_float(static_cast<float>(n.f("beta", 1.0)))}});
}

void matmul(AtenNode& n) {
  Value* b = n.has("mat2") ? n.tensor("mat2") : n.tensor("other");
  n.result("MatMul", {n.tensor("self"), b});
}

// ---- convolution and normalization ------------------------------------------

// The spatial dims of a convolution's or pool's tensor argument: its rank
// past the batch and channel dims (one at least).
size_t spatial_dims(AtenNode& n, const std::string& arg) {
  size_t rank = n.rank(n.tensor(arg));
  if (rank < 3)
    n.fail("argument '" + arg + "' has rank " + std::to_string(rank) + "; expected batch, channels and spatial dims");
  return rank - 2;
}

std::vector<int64_t> per_dim(AtenNode& n, const std::string& arg, size_t k, int64_t def) {
  std::vector<int64_t> v = n.has(arg) ? n.ints(arg) : std::vector<int64_t>{def};
  if (v.size() == 1) v.assign(k, v[0]);
  if (v.size() != k) n.fail("argument '" + arg + "' has " + std::to_string(v.size()) + " values for " + std::to_string(k) + " spatial dims");
  return v;
}

void conv(AtenNode& n) {
  Value* x = n.tensor("input");
  Value* w = n.tensor("weight");
  Value* bias = n.opt_tensor("bias");
  size_t k = spatial_dims(n, "weight");
  std::map<std::string, Attribute> attrs = {{"strides", ints_attr(per_dim(n, "stride", k, 1))},
                                            {"dilations", ints_attr(per_dim(n, "dilation", k, 1))},
                                            {"group", int_attr(n.i("groups", 1))}};
  const Dims* wd = n.dims(w);
  std::vector<int64_t> kernel;
  for (size_t d = 2; d < wd->size(); ++d) {
    if (!(*wd)[d].is_static()) n.fail("the weight's kernel size must be static");
    kernel.push_back((*wd)[d].value());
  }
  attrs["kernel_shape"] = ints_attr(kernel);
  bool string_padding = n.has("padding") && !n.is_tensor("padding") && n.target().find(".padding") != std::string::npos;
  if (string_padding) {
    std::string p = n.s("padding");
    if (p == "same") attrs["auto_pad"] = Attribute::of_string("SAME_UPPER");
    else if (p != "valid") n.fail("padding '" + p + "' is not 'same' or 'valid'");
  } else {
    std::vector<int64_t> pads = per_dim(n, "padding", k, 0);
    pads.insert(pads.end(), pads.begin(), pads.end());
    attrs["pads"] = ints_attr(pads);
  }
  std::vector<Value*> in = {x, w};
  if (bias) in.push_back(bias);
  if (n.has("transposed") && n.b("transposed")) {
    attrs["output_padding"] = ints_attr(per_dim(n, "output_padding", k, 0));
    return n.result("ConvTranspose", in, attrs);
  }
  n.result("Conv", in, attrs);
}

// A weight or bias the call left out: ones or zeros of the normalized shape.
Value* filler(AtenNode& n, Value* given, const std::vector<int64_t>& shape, double v, DType t) {
  if (given) return given;
  Tensor c(t, shape);
  for (int64_t i = 0; i < c.numel(); ++i) c.set_f64(i, v);
  return n.constant(std::move(c));
}

void layer_norm(AtenNode& n) {
  Value* x = n.tensor("input");
  std::vector<int64_t> shape = n.ints("normalized_shape");
  int64_t axis = static_cast<int64_t>(n.rank(x)) - static_cast<int64_t>(shape.size());
  if (axis < 0) n.fail("normalized_shape has more dims than the input");
  DType t = n.dtype(x);
  std::vector<Value*> in = {x, filler(n, n.opt_tensor("weight"), shape, 1.0, t)};
  if (Value* b = n.opt_tensor("bias")) in.push_back(b);
  std::map<std::string, Attribute> attrs = {{"axis", int_attr(axis)},
                                            {"epsilon", Attribute::of_float(static_cast<float>(n.f("eps", 1e-5)))}};
  size_t outs = n.out_used(2) ? 3 : n.out_used(1) ? 2 : 1;
  n.op_n("LayerNormalization", in, std::min(outs, n.num_outputs()), attrs);
}

void batch_norm(AtenNode& n) {
  if (n.has("training") && n.b("training")) n.fail("batch_norm in training mode is not supported (export in eval mode)");
  for (size_t k = 1; k < n.num_outputs(); ++k)
    if (n.out_used(k)) n.fail("output " + std::to_string(k) + " (the saved statistics) is not supported");
  Value* mean = n.tensor("running_mean");
  const Dims* md = n.dims(mean);
  if (!md || md->size() != 1 || !(*md)[0].is_static()) n.fail("running_mean must be a static 1-D tensor");
  std::vector<int64_t> c = {(*md)[0].value()};
  DType t = n.dtype(n.tensor("input"));
  n.result("BatchNormalization",
           {n.tensor("input"), filler(n, n.opt_tensor("weight"), c, 1.0, t), filler(n, n.opt_tensor("bias"), c, 0.0, t),
            mean, n.tensor("running_var")},
           {{"epsilon", Attribute::of_float(static_cast<float>(n.f("eps", 1e-5)))}});
}

Rule softmax(const std::string& onnx_op) {
  return [=](AtenNode& n) {
    Value* x = n.tensor("self");
    int64_t axis = norm_axis(n, n.i("dim"), n.rank(x));
    n.set_out(0, n.cast(n.op(onnx_op, {x}, {{"axis", int_attr(axis)}}, n.out_name(0)), n.out_meta(0).dtype));
  };
}

// ---- pooling and reductions ------------------------------------------------

void max_pool(AtenNode& n) {
  for (size_t k = 1; k < n.num_outputs(); ++k)
    if (n.out_used(k)) n.fail("the indices output is not supported");
  Value* x = n.tensor("self");
  std::vector<int64_t> kernel = n.ints("kernel_size");
  size_t k = spatial_dims(n, "self");
  if (kernel.size() == 1) kernel.assign(k, kernel[0]);
  std::vector<int64_t> stride = n.ints("stride", std::vector<int64_t>{});
  stride = stride.empty() ? kernel : per_dim(n, "stride", k, 1);
  std::vector<int64_t> pads = per_dim(n, "padding", k, 0);
  pads.insert(pads.end(), pads.begin(), pads.end());
  n.result("MaxPool", {x},
           {{"kernel_shape", ints_attr(kernel)}, {"strides", ints_attr(stride)}, {"pads", ints_attr(pads)},
            {"dilations", ints_attr(per_dim(n, "dilation", k, 1))}, {"ceil_mode", int_attr(n.b("ceil_mode", false))}});
}

void avg_pool(AtenNode& n) {
  if (n.has("divisor_override")) n.fail("divisor_override is not supported");
  Value* x = n.tensor("self");
  size_t k = spatial_dims(n, "self");
  std::vector<int64_t> kernel = per_dim(n, "kernel_size", k, 1);
  std::vector<int64_t> stride = n.ints("stride", std::vector<int64_t>{});
  stride = stride.empty() ? kernel : per_dim(n, "stride", k, 1);
  std::vector<int64_t> pads = per_dim(n, "padding", k, 0);
  pads.insert(pads.end(), pads.begin(), pads.end());
  n.result("AveragePool", {x},
           {{"kernel_shape", ints_attr(kernel)}, {"strides", ints_attr(stride)}, {"pads", ints_attr(pads)},
            {"ceil_mode", int_attr(n.b("ceil_mode", false))},
            {"count_include_pad", int_attr(n.b("count_include_pad", true))}});
}

bool adaptive_avg_pool(AtenNode& n) {
  for (int64_t s : n.ints("output_size"))
    if (s != 1) return false;
  n.result("GlobalAveragePool", {n.tensor("self")});
  return true;
}

std::vector<int64_t> reduce_axes(AtenNode& n, Value* x) {
  std::vector<int64_t> axes = n.has("dim") ? n.ints("dim") : std::vector<int64_t>{};
  for (int64_t& a : axes) a = norm_axis(n, a, n.rank(x));
  return axes;
}

Rule reduce(const std::string& onnx_op) {
  return [=](AtenNode& n) {
    Value* x = n.tensor("self");
    DType t = n.out_meta(0).dtype;
    std::vector<int64_t> axes = reduce_axes(n, x);
    std::vector<Value*> in = {n.cast(x, t)};
    if (!axes.empty()) in.push_back(n.ints_const(axes));
    n.result(onnx_op, in, {{"keepdims", int_attr(n.b("keepdim", false))}});
  };
}

// any / all over bools: the max / min of the values as floats.
Rule bool_reduce(const std::string& onnx_op) {
  return [=](AtenNode& n) {
    Value* x = n.tensor("self");
    std::vector<int64_t> axes = reduce_axes(n, x);
    std::vector<Value*> in = {n.cast(n.cast(x, DType::Bool), DType::F32)};
    if (!axes.empty()) in.push_back(n.ints_const(axes));
    Value* r = n.op(onnx_op, in, {{"keepdims", int_attr(n.b("keepdim", false))}});
    n.set_out(0, n.cast(n.typed(r, DType::F32), DType::Bool));
  };
}

// ---- movement ---------------------------------------------------------------

std::vector<SymExpr> out_dims(AtenNode& n, size_t k = 0) {
  std::vector<SymExpr> dims;
  for (const Dim& d : n.out_meta(k).dims) {
    if (d.is_unknown()) n.fail("output " + std::to_string(k) + " has a dim of unknown size");
    dims.push_back(d.expr());
  }
  return dims;
}

void reshape(AtenNode& n) {
  Value* x = n.has("self") ? n.tensor("self") : n.tensor("input");
  std::vector<SymExpr> dims = out_dims(n);
  bool zero = false;
  for (const SymExpr& d : dims) zero = zero || (d.is_constant() && d.constant_value() == 0);
  std::map<std::string, Attribute> attrs;
  if (zero) attrs["allowzero"] = int_attr(1);
  n.result("Reshape", {x, n.shape_tensor(dims)}, attrs);
}

void expand(AtenNode& n) { n.result("Expand", {n.tensor("self"), n.shape_tensor(out_dims(n))}); }

void permute(AtenNode& n) {
  Value* x = n.tensor("self");
  std::vector<int64_t> perm = n.ints("dims");
  for (int64_t& p : perm) p = norm_axis(n, p, n.rank(x));
  n.result("Transpose", {x}, {{"perm", ints_attr(perm)}});
}

void transpose(AtenNode& n) {
  Value* x = n.tensor("self");
  size_t r = n.rank(x);
  std::vector<int64_t> perm;
  for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(i));
  if (n.target() == "aten.t.default" || n.target() == "aten.numpy_T.default") {
    std::reverse(perm.begin(), perm.end());
  } else {
    std::swap(perm[norm_axis(n, n.i("dim0"), r)], perm[norm_axis(n, n.i("dim1"), r)]);
  }
  if (r < 2) return n.set_out(0, x);
  n.result("Transpose", {x}, {{"perm", ints_attr(perm)}});
}

void unsqueeze(AtenNode& n) {
  Value* x = n.tensor("self");
  n.result("Unsqueeze", {x, n.ints_const({norm_axis(n, n.i("dim"), n.rank(x) + 1)})});
}

void slice(AtenNode& n) {
  Value* x = n.tensor("self");
  int64_t axis = norm_axis(n, n.i("dim", 0), n.rank(x));
  SymExpr start = n.has("start") ? n.sym("start") : SymExpr::constant(0);
  SymExpr end = n.has("end") ? n.sym("end") : SymExpr::constant(std::numeric_limits<int64_t>::max());
  n.result("Slice", {x, n.shape_tensor({start}), n.shape_tensor({end}), n.ints_const({axis}),
                     n.ints_const({n.i("step", 1)})});
}

void select(AtenNode& n) {
  Value* x = n.tensor("self");
  int64_t axis = norm_axis(n, n.i("dim"), n.rank(x));
  n.result("Gather", {x, n.sym_scalar(n.sym("index"))}, {{"axis", int_attr(axis)}});
}

// torch.cat skips 1-D tensors of size 0 whatever the others' rank (a key /
// value cache's empty start, as Hugging Face's DynamicCache writes it).
void cat(AtenNode& n) {
  std::vector<Value*> in;
  for (Value* v : n.tensors("tensors")) {
    const Dims& d = *n.dims(v);
    if (!(d.size() == 1 && d[0].is_static() && d[0].value() == 0)) in.push_back(v);
  }
  if (in.empty()) n.fail("cat of no tensors (or only empty ones)");
  DType t = n.out_meta(0).dtype;
  for (Value*& v : in) v = n.cast(v, t);
  if (in.size() == 1) {
    n.set_out(0, in[0]);
    return;
  }
  n.result("Concat", in, {{"axis", int_attr(norm_axis(n, n.i("dim", 0), n.rank(in[0])))}});
}

void split(AtenNode& n) {
  Value* x = n.tensor("self");
  int64_t axis = norm_axis(n, n.i("dim", 0), n.rank(x));
  std::vector<SymExpr> sizes;
  for (size_t k = 0; k < n.num_outputs(); ++k) sizes.push_back(out_dims(n, k).at(axis));
  n.op_n("Split", {x, n.shape_tensor(sizes)}, n.num_outputs(), {{"axis", int_attr(axis)}});
}

// x[i0, i1, ...]: one index tensor is a Gather along its dim; several leading
// ones (no None among them) broadcast together and pick elements by their
// tuples, a GatherND over the tuples stacked along a new last axis. Boolean
// masks (data-dependent sizes) and indices after a None stay unmapped.
bool index_tensor(AtenNode& n) {
  std::vector<Value*> idx = n.opt_tensors("indices");
  std::vector<size_t> present;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k]) present.push_back(k);
  if (present.empty()) return false;
  for (size_t k : present)
    if (n.dtype(idx[k]) == DType::Bool) return false;
  if (present.size() == 1) {
    n.result("Gather", {n.tensor("self"), idx[present[0]]}, {{"axis", int_attr(static_cast<int64_t>(present[0]))}});
    return true;
  }
  if (present.back() + 1 != present.size()) return false;  // only leading indices
  Value* x = n.tensor("self");
  std::vector<SymExpr> out = out_dims(n);
  const size_t rest = n.rank(x) - present.size();
  std::vector<SymExpr> broadcast(out.begin(), out.end() - static_cast<std::ptrdiff_t>(rest));
  Value* shape = n.shape_tensor(broadcast);
  std::vector<Value*> columns;
  for (size_t k : present) {
    Value* full = n.op("Expand", {n.cast(idx[k], DType::I64), shape});
    columns.push_back(n.op("Unsqueeze", {full, n.ints_const({static_cast<int64_t>(broadcast.size())})}));
  }
  Value* tuples = n.op("Concat", columns, {{"axis", int_attr(-1)}});
  n.result("GatherND", {x, tuples});
  return true;
}

// torch.cumsum: a CumSum in the output's dtype (a bool or integer input sums as int64).
void cumsum(AtenNode& n) {
  Value* x = n.tensor("self");
  n.result("CumSum", {n.cast(x, n.out_meta(0).dtype), n.ints_const({norm_axis(n, n.i("dim"), n.rank(x))})});
}

// torch.diff: prepend and append joined along dim, then n times x[1:] - x[:-1] along it.
void diff(AtenNode& n) {
  Value* x = n.tensor("self");
  const int64_t axis = norm_axis(n, n.i("dim", -1), n.rank(x));
  std::vector<Value*> parts;
  if (Value* pre = n.opt_tensor("prepend")) parts.push_back(pre);
  parts.push_back(x);
  if (Value* post = n.opt_tensor("append")) parts.push_back(post);
  DType t = n.out_meta(0).dtype;
  for (Value*& v : parts) v = n.cast(v, t);
  Value* v = parts.size() == 1 ? parts[0] : n.op("Concat", parts, {{"axis", int_attr(axis)}});
  const int64_t times = n.i("n", 1);
  if (times < 1) n.fail("diff of order " + std::to_string(times));
  Value* ax = n.ints_const({axis});
  for (int64_t k = 0; k < times; ++k) {
    Value* hi = n.op("Slice", {v, n.ints_const({1}), n.ints_const({INT64_MAX}), ax});
    Value* lo = n.op("Slice", {v, n.ints_const({0}), n.ints_const({-1}), ax});
    if (k + 1 == times) n.result(t == DType::Bool ? "Xor" : "Sub", {hi, lo});
    else v = n.op(t == DType::Bool ? "Xor" : "Sub", {hi, lo});
  }
}

void index_select(AtenNode& n) {
  Value* x = n.tensor("self");
  n.result("Gather", {x, n.tensor("index")}, {{"axis", int_attr(norm_axis(n, n.i("dim"), n.rank(x)))}});
}

void gather(AtenNode& n) {
  Value* x = n.tensor("self");
  n.result("GatherElements", {x, n.tensor("index")}, {{"axis", int_attr(norm_axis(n, n.i("dim"), n.rank(x)))}});
}

void embedding(AtenNode& n) { n.result("Gather", {n.tensor("weight"), n.tensor("indices")}, {{"axis", int_attr(0)}}); }

void tril(AtenNode& n, bool upper) {
  Value* x = n.tensor("self");
  n.result("Trilu", {x, n.scalar_const(static_cast<double>(n.i("diagonal", 0)), DType::I64)},
           {{"upper", int_attr(upper ? 1 : 0)}});
}

// ---- creation -----------------------------------------------------------------

// full, zeros, ones, *_like, new_*, scalar_tensor: the fill value broadcast
// to the recorded output shape.
Rule fill(std::optional<double> value) {
  return [=](AtenNode& n) {
    DType t = n.out_meta(0).dtype;
    double v = value ? *value : n.has("fill_value") ? n.f("fill_value") : n.f("s");
    Value* c = n.scalar_const(v, t);
    std::vector<SymExpr> dims = out_dims(n);
    if (dims.empty()) return n.set_out(0, c);
    n.result("Expand", {c, n.shape_tensor(dims)});
  };
}

void arange(AtenNode& n) {
  DType t = n.out_meta(0).dtype;
  bool has_start = n.has("start");
  Pt2Scalar start = has_start ? n.scalar("start") : Pt2Scalar{};
  Pt2Scalar end = n.scalar("end");
  Pt2Scalar step = n.has("step") ? n.scalar("step") : Pt2Scalar{};
  if (!n.has("step")) step.i = 1;
  bool floats = start.is_float() || end.is_float() || step.is_float();
  DType rt = floats ? DType::F32 : DType::I64;
  auto scalar = [&](const Pt2Scalar& s) {
    return s.kind == Pt2Scalar::Kind::Sym ? n.cast(n.sym_scalar(s.sym), rt) : n.scalar_const(s.value(), rt);
  };
  Value* r = n.op("Range", {scalar(start), scalar(end), scalar(step)});
  n.set_out(0, n.cast(n.typed(r, rt), t));
}

// ---- attention -----------------------------------------------------------------

// softmax(q k^T * scale + mask) v, torch's math reference. Operands of rank 4
// are one tcc::Attention (src/ops/attention.cc), grouped-query heads included
// (enable_gqa: query head h reads kv head h / (Hq / Hkv), as ONNX's Attention),
// a row the mask hides everywhere zero as torch's safe softmax makes it; other
// ranks are spelled out.
bool sdpa(AtenNode& n) {
  if (n.f("dropout_p", 0.0) != 0.0) return false;
  Value* q = n.tensor("query");
  Value* k = n.tensor("key");
  Value* v = n.tensor("value");
  size_t r = n.rank(q);
  Value* mask = n.opt_tensor("attn_mask");
  const bool causal = n.b("is_causal", false);
  if (r == 4 && n.rank(k) == 4 && n.rank(v) == 4 && !(mask && causal)) {
    std::map<std::string, Attribute> attrs = {{"is_causal", int_attr(causal)}};
    if (n.has("scale")) attrs["scale"] = Attribute::of_float(static_cast<float>(n.f("scale")));
    std::vector<Value*> ins = {q, k, v};
    if (mask) ins.push_back(n.dtype(mask) == DType::Bool ? mask : n.cast(mask, n.dtype(q)));
    n.set_out(0, n.op("Attention", ins, attrs, n.out_name(0), "tcc"));
    return true;
  }
  if (n.b("enable_gqa", false) || r < 2 || n.rank(k) != r) return false;
  const Dims& qd = *n.dims(q);
  const Dims& kd = *n.dims(k);
  DType t = n.dtype(q);
  double scale;
  if (n.has("scale")) {
    scale = n.f("scale");
  } else {
    if (!qd[r - 1].is_static()) return false;
    scale = 1.0 / std::sqrt(static_cast<double>(qd[r - 1].value()));
  }
  std::vector<int64_t> perm;
  for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(i));
  std::swap(perm[r - 1], perm[r - 2]);
  Value* s = n.op("MatMul", {q, n.op("Transpose", {k}, {{"perm", ints_attr(perm)}})});
  s = n.op("Mul", {s, n.scalar_const(scale, t)});
  Value* neg_inf = n.scalar_const(-std::numeric_limits<double>::infinity(), t);
  if (mask) s = n.dtype(mask) == DType::Bool ? n.op("Where", {mask, s, neg_inf}) : n.op("Add", {s, n.cast(mask, t)});
  if (causal) {
    Value* ones = n.op("Expand", {n.scalar_const(1, DType::Bool), n.shape_tensor({qd[r - 2].expr(), kd[r - 2].expr()})});
    Value* causal = n.op("Trilu", {n.typed(ones, DType::Bool)}, {{"upper", int_attr(0)}});
    s = n.op("Where", {n.typed(causal, DType::Bool), s, neg_inf});
  }
  Value* p = n.op("Softmax", {s}, {{"axis", int_attr(-1)}});
  n.result("MatMul", {p, v});
  return true;
}

const std::unordered_map<std::string, std::function<bool(AtenNode&)>>& rules() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, std::function<bool(AtenNode&)>>;
    auto add = [&](std::initializer_list<const char*> names, Rule r) {
      for (const char* name : names) (*t)[name] = [r](AtenNode& n) { r(n); return true; };
    };
    auto add_maybe = [&](std::initializer_list<const char*> names, std::function<bool(AtenNode&)> r) {
      for (const char* name : names) (*t)[name] = r;
    };
    // pointwise
    add({"aten.add.Tensor", "aten.add.Scalar", "aten.add_.Tensor"}, binary("Add", true));
    add({"aten.sub.Tensor", "aten.sub.Scalar"}, binary("Sub", true));
    add({"aten.rsub.Scalar", "aten.rsub.Tensor"}, binary("Sub", true, true));
    add({"aten.mul.Tensor", "aten.mul.Scalar"}, binary("Mul"));
    add({"aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode"}, div);
    add({"aten.maximum.default"}, binary("Max"));
    add({"aten.minimum.default"}, binary("Min"));
    add({"aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor"}, pow);
    add({"aten.eq.Tensor", "aten.eq.Scalar"}, compare("Equal"));
    add({"aten.ne.Tensor", "aten.ne.Scalar"}, compare("Equal", true));
    add({"aten.lt.Tensor", "aten.lt.Scalar"}, compare("Less"));
    add({"aten.le.Tensor", "aten.le.Scalar"}, compare("LessOrEqual"));
    add({"aten.gt.Tensor", "aten.gt.Scalar"}, compare("Greater"));
    add({"aten.ge.Tensor", "aten.ge.Scalar"}, compare("GreaterOrEqual"));
    add({"aten.logical_and.default"}, logical("And"));
    add({"aten.logical_or.default"}, logical("Or"));
    add({"aten.logical_xor.default"}, logical("Xor"));
    add({"aten.bitwise_and.Tensor", "aten.__and__.Tensor"}, bitwise("And"));
    add({"aten.bitwise_or.Tensor", "aten.__or__.Tensor"}, bitwise("Or"));
    add({"aten.bitwise_xor.Tensor", "aten.__xor__.Tensor"}, bitwise("Xor"));
    add({"aten.cumsum.default"}, cumsum);
    add({"aten.diff.default"}, diff);
    add({"aten.logical_not.default"}, [](AtenNode& n) { n.result("Not", {n.cast(n.tensor("self"), DType::Bool)}); });
    add({"aten.bitwise_not.default"}, [](AtenNode& n) {
      if (n.dtype(n.tensor("self")) != DType::Bool) n.fail("bitwise_not of a non-bool tensor is not supported");
      n.result("Not", {n.tensor("self")});
    });
    add({"aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar"}, where);
    add({"aten.masked_fill.Scalar", "aten.masked_fill.Tensor"}, masked_fill);
    // An in-place op (relu_) maps as its functional form: the importer lets it
    // only where nothing reads the operand it writes afterwards.
    add({"aten.relu.default", "aten.relu_.default"}, unary("Relu"));
    add({"aten.hardswish.default", "aten.hardswish_.default"}, unary("HardSwish"));
    // torch's hardsigmoid: relu6(x + 3) / 6.
    add({"aten.hardsigmoid.default", "aten.hardsigmoid_.default"},
        unary("HardSigmoid", {{"alpha", Attribute::of_float(1.0f / 6)}, {"beta", Attribute::of_float(0.5f)}}));
    add({"aten.clamp.default", "aten.clamp_.default"}, clamp);
    add({"aten.sigmoid.default"}, unary("Sigmoid"));
    add({"aten.tanh.default"}, unary("Tanh"));
    add({"aten.exp.default"}, unary("Exp"));
    add({"aten.log.default"}, unary("Log"));
    add({"aten.sqrt.default"}, unary("Sqrt"));
    add({"aten.neg.default"}, unary("Neg"));
    add({"aten.abs.default"}, unary("Abs"));
    add({"aten.erf.default"}, unary("Erf"));
    add({"aten.sin.default"}, unary("Sin"));
    add({"aten.cos.default"}, unary("Cos"));
    add({"aten.reciprocal.default"}, unary("Reciprocal"));
    add({"aten.rsqrt.default"}, rsqrt);
    add({"aten.silu.default"}, silu);
    add({"aten.gelu.default"}, gelu);
    add({"aten.hardtanh.default"}, hardtanh);
    add({"aten.leaky_relu.default"}, leaky_relu);
    add({"aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default", "aten.detach_.default",
         "aten.lift_fresh_copy.default", "aten.dropout.default", "aten.dropout_.default", "aten.feature_dropout.default"},
        alias);
    add({"aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device", "aten.type_as.default"},
        to_dtype);
    // products
    add({"aten.linear.default"}, linear);
    add({"aten.addmm.default"}, addmm);
    add({"aten.mm.default", "aten.bmm.default", "aten.matmul.default"}, matmul);
    add({"aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
         "aten.conv2d.padding", "aten.conv3d.padding", "aten.convolution.default"},
        conv);
    add_maybe({"aten.scaled_dot_product_attention.default"}, sdpa);
    // normalization
    add({"aten.layer_norm.default", "aten.native_layer_norm.default"}, layer_norm);
    add({"aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default"}, batch_norm);
    add({"aten.softmax.int", "aten._softmax.default"}, softmax("Softmax"));
    add({"aten.log_softmax.int", "aten._log_softmax.default"}, softmax("LogSoftmax"));
    // pooling and reductions
    add({"aten.max_pool2d.default", "aten.max_pool2d_with_indices.default", "aten.max_pool1d.default"}, max_pool);
    add({"aten.avg_pool2d.default", "aten.avg_pool1d.default"}, avg_pool);
    add_maybe({"aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default"}, adaptive_avg_pool);
    add({"aten.mean.dim", "aten.mean.default"}, reduce("ReduceMean"));
    add({"aten.sum.dim_IntList", "aten.sum.default"}, reduce("ReduceSum"));
    add({"aten.amax.default"}, reduce("ReduceMax"));
    add({"aten.amin.default"}, reduce("ReduceMin"));
    add({"aten.any.dim", "aten.any.dims", "aten.any.default"}, bool_reduce("ReduceMax"));
    add({"aten.all.dim", "aten.all.dims", "aten.all.default"}, bool_reduce("ReduceMin"));
    // movement
    add({"aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.flatten.using_ints",
         "aten.unflatten.int", "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.view_as.default",
         "aten.reshape_as.default"},
        reshape);
    add({"aten.expand.default", "aten.expand_as.default"}, expand);
    add({"aten.permute.default"}, permute);
    add({"aten.transpose.int", "aten.t.default", "aten.numpy_T.default"}, transpose);
    add({"aten.unsqueeze.default"}, unsqueeze);
    add({"aten.slice.Tensor"}, slice);
    add({"aten.select.int"}, select);
    add({"aten.cat.default", "aten.concat.default"}, cat);
    add({"aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default"}, split);
    add_maybe({"aten.index.Tensor"}, index_tensor);
    add({"aten.index_select.default"}, index_select);
    add({"aten.gather.default"}, gather);
    add({"aten.embedding.default"}, embedding);
    add({"aten.tril.default"}, [](AtenNode& n) { tril(n, false); });
    add({"aten.triu.default"}, [](AtenNode& n) { tril(n, true); });
    // creation
    add({"aten.full.default", "aten.full_like.default", "aten.new_full.default", "aten.scalar_tensor.default"},
        fill(std::nullopt));
    add({"aten.zeros.default", "aten.zeros_like.default", "aten.new_zeros.default", "aten.empty.memory_format",
         "aten.empty_like.default"},
        fill(0.0));
    add({"aten.ones.default", "aten.ones_like.default", "aten.new_ones.default"}, fill(1.0));
    add({"aten.arange.default", "aten.arange.start", "aten.arange.start_step"}, arange);
    return t;
  }();
  return *table;
}

}  // namespace

bool lower_aten_node(AtenNode& n) {
  auto it = rules().find(n.target());
  return it != rules().end() && it->second(n);
}

bool is_aten_noop(const std::string& target) {
  static const std::set<std::string> noops = {
      "aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int", "aten.sym_storage_offset.default",
      "_operator.mul", "_operator.add", "_operator.sub", "_operator.floordiv", "_operator.neg",
      "aten._assert_scalar.default", "aten._assert_tensor_metadata.default", "aten._assert_async.msg",
      "aten.sym_constrain_range.default", "aten.sym_constrain_range_for_size.default"};
  return noops.count(target) != 0;
}

}  // namespace tcc
