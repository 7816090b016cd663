// Shape ops: the ops that read a tensor's shape as data (Shape, Size), the ops
// that give the same elements a new shape (Reshape, Squeeze, Unsqueeze,
// Flatten, Identity, Dropout at inference), and the constant producers
// (Constant, ConstantOfShape, Range).
//
// Their rules carry the symbolic CONTENTS of shape tensors: Shape(x) of
// f32[batch, seq, 768] has the values [batch, seq, 768], and Reshape,
// ConstantOfShape and Range read such values back as dims. This is what keeps
// exporters' Shape -> Gather -> Concat -> Reshape chains symbolic.
#include <cmath>
#include <limits>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"
#include "src/ops/random_stream.h"

namespace tcc {

namespace {

const std::vector<DType> kRangeTypes = {DType::F32, DType::F64, DType::I16, DType::I32, DType::I64};

Tensor i64_vector(const std::vector<int64_t>& v) {
  return Tensor::from_i64(v, {static_cast<int64_t>(v.size())});
}

// Length of a 1-D input whose size is known statically.
std::optional<int64_t> static_length(const Type& t) {
  if (!t.is_tensor() || !t.has_rank() || t.rank() != 1 || !t.shape()[0].is_static()) return std::nullopt;
  return t.shape()[0].value();
}

// ---- Shape, Size ------------------------------------------------------------

// [start, end) of the dims Shape reports; start/end are attributes from opset 15
// and clamp like Python slices.
std::pair<int64_t, int64_t> shape_range(const Node& n, int64_t rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t b = clamp(n.get_int("start", 0));
  int64_t e = clamp(n.get_int("end", rank));
  return {b, std::max(b, e)};
}

void infer_shape(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  if (!in.is_tensor() || !in.has_rank()) {
    ctx.set_output_type(0, Type::tensor(DType::I64, {Dim::unknown()}));
    return;
  }
  auto [b, e] = shape_range(ctx.node(), static_cast<int64_t>(in.rank()));
  Dims vals(in.shape().begin() + b, in.shape().begin() + e);
  ctx.set_output_type(0, Type::tensor(DType::I64, {Dim(e - b)}));
  if (auto s = static_values(&vals)) ctx.set_output_const(0, i64_vector(*s));
  ctx.set_output_values(0, std::move(vals));
}

std::vector<Tensor> eval_shape(EvalContext& ctx) {
  const std::vector<int64_t>& s = ctx.input(0).shape();
  auto [b, e] = shape_range(ctx.node(), static_cast<int64_t>(s.size()));
  return {i64_vector(std::vector<int64_t>(s.begin() + b, s.begin() + e))};
}

void infer_size(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(DType::I64, {}));
  const Type& in = ctx.input_type(0);
  if (!in.is_tensor() || !in.has_rank()) return;
  Dim n = dims_product(in.shape());
  if (n.is_unknown()) return;
  if (n.is_static()) ctx.set_output_const(0, Tensor::scalar_i64(n.value()));
  ctx.set_output_values(0, {n});
}

// ---- Reshape ----------------------------------------------------------------

// Output dims of Reshape. A 0 copies the input's dim (unless allowzero), a -1
// takes whatever the element count leaves: product(in) / product(other dims),
// divided exactly and symbolically ([batch, 12, seq, 64] into [batch, seq, -1]
// gives 768). A division that is not exact term by term stays an opaque floor
// division; both sides being static and not dividing is an error.
Dims reshape_dims(const Node& n, const Dims& in, const Dims& target, bool allowzero) {
  Dims out;
  int64_t infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < target.size(); ++i) {
    const Dim& t = target[i];
    if (t.is_static() && t.value() == 0 && !allowzero) {
      if (i >= in.size())
        n.fail("shape[" + std::to_string(i) + "] is 0 (copy the input's dim) but the input " + dims_str(in) +
               " has rank " + std::to_string(in.size()));
      out.push_back(in[i]);
      continue;
    }
    if (t.is_static() && t.value() == -1) {
      if (infer_at >= 0) n.fail("the target shape " + dims_str(target) + " has more than one -1");
      infer_at = static_cast<int64_t>(i);
    } else if (t.is_static() && t.value() < 0) {
      n.fail("the target shape " + dims_str(target) + " has the invalid size " + t.str());
    }
    has_zero |= t.is_static() && t.value() == 0;
    out.push_back(t);
  }
  if (infer_at < 0) return out;
  if (has_zero) n.fail("the target shape " + dims_str(target) + " has both 0 (allowzero) and -1");
  Dims others = out;
  others.erase(others.begin() + infer_at);
  Dim total = dims_product(in), known = dims_product(others);
  out[infer_at] = Dim::unknown();
  if (total.is_unknown() || known.is_unknown()) return out;
  if (known.is_static() && known.value() == 0)
    n.fail("cannot infer the -1 in " + dims_str(target) + ": the other dims hold no elements");
  if (auto q = total.expr().exact_div(known.expr())) {
    out[infer_at] = Dim(*q);
  } else if (total.is_static() && known.is_static()) {
    n.fail("cannot reshape " + dims_str(in) + " (" + total.str() + " elements) into " + dims_str(target));
  } else {
    out[infer_at] = Dim(total.expr().floordiv(known.expr()));
  }
  return out;
}

void infer_reshape(InferContext& ctx) {
  require_index_vector(ctx, 1, "shape");
  const Type& data = ctx.input_type(0);
  bool allowzero = ctx.node().get_int("allowzero", 0) != 0;
  std::optional<Dims> target = input_values(ctx, 1);
  if (!target) {
    // Unknown contents but a known length still fixes the rank.
    if (auto len = static_length(ctx.input_type(1)))
      ctx.set_output_type(0, Type::tensor(data.dtype(), Dims(*len, Dim::unknown())));
    else
      ctx.set_output_type(0, Type::tensor_unranked(data.dtype()));
    return;
  }
  if (!data.is_tensor() || !data.has_rank()) {
    // Without the input's dims only the explicit sizes are known.
    Dims out;
    for (const Dim& t : *target)
      out.push_back(t.is_static() && (t.value() == -1 || (t.value() == 0 && !allowzero)) ? Dim::unknown() : t);
    ctx.set_output_type(0, Type::tensor(data.dtype(), out));
    return;
  }
  // A single unknown entry is recovered from the element count, like a -1.
  size_t unknowns = 0;
  for (const Dim& t : *target) unknowns += t.is_unknown();
  bool has_minus_one = false;
  for (const Dim& t : *target) has_minus_one |= t.is_static() && t.value() == -1;
  if (unknowns == 1 && !has_minus_one)
    for (Dim& t : *target)
      if (t.is_unknown()) t = Dim(-1);
  Dims out = reshape_dims(ctx.node(), data.shape(), *target, allowzero);
  Dim total = dims_product(data.shape()), got = dims_product(out);
  if (!ctx.env().unify(total, got, &ctx.node()))
    ctx.fail("cannot reshape " + data.str() + " (" + total.str() + " elements) into " + dims_str(out) + " (" +
             got.str() + " elements)");
  ctx.set_output_type(0, Type::tensor(data.dtype(), ctx.env().canonical(out)));
  // Reshaping a shape tensor (e.g. to [-1] or to a scalar) keeps its contents.
  if (out.size() <= 1)
    if (auto vals = input_values(ctx, 0)) ctx.set_output_values(0, *vals);
}

std::vector<int64_t> to_static(const Node& n, const Dims& d) {
  auto v = static_values(&d);
  TCC_CHECK(v) << n.op_type() << " produced a non-static shape " << dims_str(d) << " at run time";
  return *v;
}

std::vector<Tensor> eval_reshape(EvalContext& ctx) {
  const Tensor& data = ctx.input(0);
  Dims target = dims_of(ctx.input(1).to_i64_vector());
  Dims in = dims_of(data.shape());
  Dims out = reshape_dims(ctx.node(), in, target, ctx.node().get_int("allowzero", 0) != 0);
  std::vector<int64_t> shape = to_static(ctx.node(), out);
  if (checked_numel(shape) != data.numel())
    ctx.fail("cannot reshape " + shape_str(data.shape()) + " (" + std::to_string(data.numel()) +
             " elements) into " + shape_str(shape));
  return {data.reshaped(shape)};
}

// ---- Squeeze, Unsqueeze, Flatten ----------------------------------------------

// The axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from 13.
// nullopt when absent; fails when given but not known at compile time.
std::optional<std::vector<int64_t>> axes_of(InferContext& ctx, bool* known) {
  *known = true;
  if (ctx.opset() < 13) {
    if (!ctx.node().has_attr("axes")) return std::nullopt;
    return ctx.node().get_ints("axes");
  }
  if (!ctx.has_input(1)) return std::nullopt;
  auto v = static_values(ctx.input_values(1));
  if (!v) *known = false;
  return v;
}

std::optional<std::vector<int64_t>> axes_of(EvalContext& ctx) {
  if (ctx.opset() < 13) {
    if (!ctx.node().has_attr("axes")) return std::nullopt;
    return ctx.node().get_ints("axes");
  }
  if (!ctx.has_input(1)) return std::nullopt;
  return ctx.input(1).to_i64_vector();
}

// Squeeze's output dims. Without axes every dim of size 1 goes; a symbolic dim
// is taken as not 1 (torch specializes sizes 0 and 1, so its symbols are >= 2;
// a module guards it: squeeze_facts in src/analysis/trace.cc).
// With axes, each named dim must be 1, which a symbolic dim is unified with.
Dims squeeze_dims(const Node& n, const Dims& in, const std::optional<std::vector<int64_t>>& axes, ShapeEnv* env) {
  int64_t rank = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (!axes) {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i].is_static() && in[i].value() == 1;
  } else {
    if (rank == 0 && !axes->empty()) n.fail("cannot squeeze a rank-0 tensor: it has no axis");
    for (int64_t a : *axes) {
      int64_t k = normalize_axis(n, a, rank);
      const Dim& d = in[k];
      if (d.is_static() && d.value() != 1)
        n.fail("cannot squeeze axis " + std::to_string(a) + " of " + dims_str(in) + ": its size is " + d.str() +
               ", not 1");
      if (env && !d.is_static()) env->unify(d, Dim(1), &n);
      drop[k] = true;
    }
  }
  Dims out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

void infer_squeeze(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  bool known = true;
  auto axes = axes_of(ctx, &known);
  if (!in.is_tensor() || !in.has_rank() || !known) {
    ctx.set_output_type(0, Type::tensor_unranked(in.dtype()));
    return;
  }
  if (!axes)
    for (const Dim& d : in.shape())
      if (d.is_unknown()) {
        ctx.set_output_type(0, Type::tensor_unranked(in.dtype()));
        return;
      }
  Dims out = squeeze_dims(ctx.node(), in.shape(), axes, &ctx.env());
  ctx.set_output_type(0, Type::tensor(in.dtype(), out));
  if (out.empty())
    if (auto vals = input_values(ctx, 0)) ctx.set_output_values(0, *vals);
}

std::vector<Tensor> eval_squeeze(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  Dims out = squeeze_dims(ctx.node(), dims_of(in.shape()), axes_of(ctx), nullptr);
  return {in.reshaped(to_static(ctx.node(), out))};
}

Dims unsqueeze_dims(const Node& n, const Dims& in, const std::vector<int64_t>& axes) {
  int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> is_new(rank, false);
  for (int64_t a : axes) {
    int64_t k = normalize_axis(n, a, rank);
    if (is_new[k]) n.fail("axis " + std::to_string(a) + " appears twice in the axes");
    is_new[k] = true;
  }
  Dims out;
  size_t next = 0;
  for (int64_t k = 0; k < rank; ++k) out.push_back(is_new[k] ? Dim(1) : in[next++]);
  return out;
}

void infer_unsqueeze(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  bool known = true;
  auto axes = axes_of(ctx, &known);
  if (known && !axes) ctx.fail("needs axes (" + std::string(ctx.opset() < 13 ? "attribute" : "input 1") + ")");
  if (!in.is_tensor() || !in.has_rank() || !known) {
    ctx.set_output_type(0, Type::tensor_unranked(in.dtype()));
    return;
  }
  Dims out = unsqueeze_dims(ctx.node(), in.shape(), *axes);
  ctx.set_output_type(0, Type::tensor(in.dtype(), out));
  if (out.size() == 1)
    if (auto vals = input_values(ctx, 0)) ctx.set_output_values(0, *vals);
}

std::vector<Tensor> eval_unsqueeze(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  auto axes = axes_of(ctx);
  if (!axes) ctx.fail("needs axes");
  return {in.reshaped(to_static(ctx.node(), unsqueeze_dims(ctx.node(), dims_of(in.shape()), *axes)))};
}

Dims flatten_dims(const Node& n, const Dims& in) {
  int64_t rank = static_cast<int64_t>(in.size());
  int64_t axis = n.get_int("axis", 1);
  if (axis < -rank || axis > rank)
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  return {dims_product(Dims(in.begin(), in.begin() + axis)), dims_product(Dims(in.begin() + axis, in.end()))};
}

void infer_flatten(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  if (!in.is_tensor() || !in.has_rank()) {
    ctx.set_output_type(0, Type::tensor(in.dtype(), {Dim::unknown(), Dim::unknown()}));
    return;
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), flatten_dims(ctx.node(), in.shape())));
}

std::vector<Tensor> eval_flatten(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  return {in.reshaped(to_static(ctx.node(), flatten_dims(ctx.node(), dims_of(in.shape()))))};
}

// ---- Identity, Dropout ------------------------------------------------------

void infer_identity(InferContext& ctx) {
  ctx.set_output_type(0, ctx.input_type(0));
  if (auto vals = input_values(ctx, 0)) ctx.set_output_values(0, *vals);
}

// ONNX asks for a ratio in [0, 1): a constant ratio outside it is refused
// here, so both the interpreter and a compiled module refuse the model.
void infer_dropout(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  if (const Tensor* ratio = ctx.num_inputs() > 1 && ctx.has_input(1) ? ctx.input_const(1) : nullptr)
    if (ratio->numel() == 1 && !(ratio->get_f64(0) >= 0 && ratio->get_f64(0) < 1))
      ctx.fail("ratio must be in [0, 1), got " + std::to_string(ratio->get_f64(0)));
  ctx.set_output_type(0, in);
  if (ctx.num_outputs() > 1)
    ctx.set_output_type(1, in.has_rank() ? Type::tensor(DType::Bool, in.shape()) : Type::tensor_unranked(DType::Bool));
  if (auto vals = input_values(ctx, 0)) ctx.set_output_values(0, *vals);
}

// Inference (and training with ratio 0) is the identity with an all-true mask;
// the ratio is read in training only. Training with a ratio keeps element i
// where uniform_draw of the stream the `seed` attribute keys (random_stream.h;
// seed 0's when absent), at the run's random offset, is at least the ratio,
// and scales it by 1 / (1 - ratio) in double: a run is reproducible but will
// not match other runtimes' random streams. A ratio from data outside [0, 1),
// which the shape rule cannot see, is defined as the kernels compute it: at
// or below 0 the identity, at or above 1 (or NaN) every element dropped.
std::vector<Tensor> eval_dropout(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  double ratio = ctx.has_input(1) ? ctx.input(1).get_f64(0) : 0.5;
  bool training = ctx.has_input(2) && ctx.input(2).get_i64(0) != 0;
  Tensor mask(DType::Bool, x.shape());
  std::vector<Tensor> outs;
  if (!training || ratio <= 0) {
    for (int64_t i = 0; i < mask.numel(); ++i) mask.set_i64(i, 1);
    outs = {x, mask};
  } else {
    PhiloxKey key = random_key(ctx.node());
    Tensor y(x.dtype(), x.shape());
    double scale = 1.0 / (1.0 - ratio);
    for (int64_t i = 0; i < x.numel(); ++i) {
      bool keep = uniform_draw(key, i, ctx.random_offset()) >= ratio;
      mask.set_i64(i, keep);
      y.set_f64(i, keep ? x.get_f64(i) * scale : 0.0);
    }
    outs = {y, mask};
  }
  outs.resize(ctx.num_outputs());
  return outs;
}

// ---- Constant, ConstantOfShape, Range -------------------------------------------

Tensor string_tensor(const std::vector<std::string>& v, std::vector<int64_t> shape) {
  Tensor t(DType::String, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.strings_mut()[i] = v[i];
  return t;
}

// The value of a Constant node: exactly one of its value attributes.
Tensor constant_value(const Node& n) {
  static const char* kNames[] = {"value",        "value_float",  "value_floats", "value_int",
                                 "value_ints",   "value_string", "value_strings", "sparse_value"};
  const char* which = nullptr;
  for (const char* k : kNames)
    if (n.has_attr(k)) {
      if (which) n.fail(std::string("has both '") + which + "' and '" + k + "'; a Constant takes exactly one");
      which = k;
    }
  if (!which) n.fail("has no value attribute (value, value_float(s), value_int(s) or value_string(s))");
  std::string k = which;
  const Attribute& a = *n.attr(k);
  if (k == "value") {
    const Tensor* t = n.get_tensor("value");
    if (!t || !t->defined()) n.fail("attribute 'value' must be a tensor");
    return *t;
  }
  if (k == "value_float") return Tensor::scalar_f32(n.get_float(k, 0));
  if (k == "value_floats") {
    auto v = n.get_floats(k);
    return Tensor::from_f32(v, {static_cast<int64_t>(v.size())});
  }
  if (k == "value_int") return Tensor::scalar_i64(n.get_int(k, 0));
  if (k == "value_ints") return i64_vector(n.get_ints(k));
  if (k == "value_string") return string_tensor({n.get_string(k, "")}, {});
  if (k == "value_strings") return string_tensor(a.strings, {static_cast<int64_t>(a.strings.size())});
  n.fail("sparse_value constants are not supported");
}

void infer_constant(InferContext& ctx) {
  Tensor t = constant_value(ctx.node());
  ctx.set_output_type(0, Type::tensor(t.dtype(), dims_of(t.shape())));
  ctx.set_output_const(0, std::move(t));
}

std::vector<Tensor> eval_constant(EvalContext& ctx) { return {constant_value(ctx.node())}; }

// ConstantOfShape's fill value: a one-element tensor, f32 0 by default.
Tensor fill_value(const Node& n) {
  const Tensor* v = n.get_tensor("value");
  if (!v) return Tensor::scalar_f32(0);
  if (v->numel() != 1) n.fail("attribute 'value' must hold exactly one element, got shape " + shape_str(v->shape()));
  return *v;
}

void infer_constant_of_shape(InferContext& ctx) {
  DType dt = fill_value(ctx.node()).dtype();
  if (auto vals = input_values(ctx, 0)) {
    for (const Dim& d : *vals)
      if (d.is_static() && d.value() < 0) ctx.fail("shape " + dims_str(*vals) + " has a negative size");
    ctx.set_output_type(0, Type::tensor(dt, *vals));
  } else if (auto len = static_length(ctx.input_type(0))) {
    ctx.set_output_type(0, Type::tensor(dt, Dims(*len, Dim::unknown())));
  } else {
    ctx.set_output_type(0, Type::tensor_unranked(dt));
  }
}

std::vector<Tensor> eval_constant_of_shape(EvalContext& ctx) {
  Tensor v = fill_value(ctx.node());
  std::vector<int64_t> shape = ctx.input(0).to_i64_vector();
  if (checked_numel(shape) < 0) ctx.fail("invalid shape " + shape_str(shape));
  Tensor out(v.dtype(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(out, i, v, 0);
  return {out};
}

// Number of elements of Range(start, limit, delta): max(ceil((limit - start) /
// delta), 0). Symbolic when delta is a static integer: ceil(x / d) is
// floordiv(x + d - 1, d), exact for the common Range(0, seq, 1) -> seq. A
// symbolic length is assumed non-negative (the limit lies beyond the start).
std::optional<Dim> range_length(const Dim& start, const Dim& limit, const Dim& delta) {
  if (start.is_unknown() || limit.is_unknown() || !delta.is_static() || delta.value() == 0) return std::nullopt;
  int64_t d = delta.value();
  SymExpr span = d > 0 ? limit.expr() - start.expr() : start.expr() - limit.expr();
  int64_t step = d > 0 ? d : -d;
  SymExpr len = (span + SymExpr::constant(step - 1)).floordiv(SymExpr::constant(step));
  if (len.is_constant()) return Dim(std::max<int64_t>(len.constant_value(), 0));
  return Dim(len);
}

double range_scalar(const Node& n, const Tensor& t, const char* what) {
  if (t.numel() != 1) n.fail(std::string(what) + " must be a scalar, got shape " + shape_str(t.shape()));
  return t.get_f64(0);
}

void infer_range(InferContext& ctx) {
  DType dt = ctx.input_type(0).dtype();
  for (size_t i = 0; i < 3; ++i)
    if (ctx.input_type(i).is_tensor() && ctx.input_type(i).dtype() != dt)
      ctx.fail("start, limit and delta must have one dtype, got " + ctx.input_type(0).str() + ", " +
               ctx.input_type(1).str() + ", " + ctx.input_type(2).str());
  std::optional<Dim> len;
  if (ctx.input_const(0) && ctx.input_const(1) && ctx.input_const(2) && is_float(dt)) {
    double s = range_scalar(ctx.node(), *ctx.input_const(0), "start");
    double l = range_scalar(ctx.node(), *ctx.input_const(1), "limit");
    double d = range_scalar(ctx.node(), *ctx.input_const(2), "delta");
    if (d == 0) ctx.fail("delta must not be 0");
    double count = std::ceil((l - s) / d);
    if (!std::isfinite(count) || count > static_cast<double>(std::numeric_limits<int64_t>::max() / 8))
      ctx.fail("start " + std::to_string(s) + ", limit " + std::to_string(l) + " and delta " + std::to_string(d) +
               " give no countable number of elements");
    len = Dim(std::max<int64_t>(static_cast<int64_t>(count), 0));
  } else {
    auto s = input_values(ctx, 0), l = input_values(ctx, 1), d = input_values(ctx, 2);
    if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1) {
      if ((*d)[0].is_static() && (*d)[0].value() == 0) ctx.fail("delta must not be 0");
      len = range_length((*s)[0], (*l)[0], (*d)[0]);
      // Short ranges of known integers are shape values themselves.
      if (len && len->is_static() && len->value() <= 64 && !(*s)[0].is_unknown()) {
        Dims vals;
        for (int64_t i = 0; i < len->value(); ++i) vals.push_back(Dim((*s)[0].expr() + (*d)[0].expr() * SymExpr::constant(i)));
        ctx.set_output_values(0, vals);
      }
    }
  }
  // A length that depends on runtime data is a fresh symbol, like torch's unbacked sizes.
  ctx.set_output_type(0, Type::tensor(dt, {len ? *len : ctx.env().fresh("u")}));
}

std::vector<Tensor> eval_range(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor &ts = ctx.input(0), &tl = ctx.input(1), &td = ctx.input(2);
  double s = range_scalar(n, ts, "start"), l = range_scalar(n, tl, "limit"), d = range_scalar(n, td, "delta");
  if (d == 0) ctx.fail("delta must not be 0");
  if (is_float(ts.dtype())) {
    Tensor out(ts.dtype(), {std::max<int64_t>(static_cast<int64_t>(std::ceil((l - s) / d)), 0)});
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, s + static_cast<double>(i) * d);
    return {out};
  }
  // Integers exactly, without the detour through double.
  int64_t is = ts.get_i64(0), id = td.get_i64(0);
  Tensor out(ts.dtype(), {range_length(Dim(is), Dim(tl.get_i64(0)), Dim(id))->value()});
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, is + i * id);
  return {out};
}

// Range whose bounds come from tensor data (its length a symbol no input
// shape binds; constant ranges fold, shape-derived ones become tcc::Range or
// are computed once per binding) -> kernels around one host step: the length
// max(ceil((limit - start) / delta), 0) as the reference computes it, in f64
// for float ranges and exactly for integer ones (the span in delta's direction
// plus |delta| - 1, at least 0, over |delta| by a truncating Div; |delta| is
// taken at least 1, so a delta of 0, which the reference refuses, divides by
// nothing), read back to bind the symbol (Expansion::counted_range), then
// start + i * delta over its indices i, in f64 rounded to a float dtype, in
// i64 narrowed to an integer one.
bool decompose_range(Expansion& e) {
  const Node& n = e.node();
  const Type& y = n.output(0)->type();
  if (!y.is_tensor() || !y.has_rank() || y.rank() != 1 || !e.data_dependent(y.shape()[0])) return false;
  for (size_t i = 0; i < 3; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.fully_static() || dims_product(t.shape()) != Dim(1)) return false;
  }
  const Dim length = y.shape()[0];
  const DType dt = y.dtype(), wide = is_float(dt) ? DType::F64 : DType::I64;
  const Type scalar = Type::tensor(wide, {}), line = Type::tensor(wide, {length});
  auto operand = [&](size_t i, const std::string& name) {
    Value* v = e.cast("Cast_" + name, n.input(i), wide);
    return v->type().rank() == 0 ? v : e.reshape("Reshape_" + name, v, {});
  };
  Value *start = operand(0, "start"), *limit = operand(1, "limit"), *delta = operand(2, "delta");
  Value* zero = e.scalar("zero", 0, wide);
  Value* count = nullptr;
  if (is_float(dt)) {
    Value* span = e.add("Sub_span", "Sub", {limit, start}, scalar);
    Value* steps = e.add("Ceil", "Ceil", {e.add("Div_steps", "Div", {span, delta}, scalar)}, scalar);
    count = e.cast("Cast_count", e.add("Max_count", "Max", {steps, zero}, scalar), DType::I64);
  } else {
    Value* backwards = e.add("Less", "Less", {delta, zero}, Type::tensor(DType::Bool, {}));
    Value* span = e.add("Where_span", "Where",
                        {backwards, e.add("Sub_down", "Sub", {start, limit}, scalar),
                         e.add("Sub_up", "Sub", {limit, start}, scalar)},
                        scalar);
    Value* one = e.scalar("one", 1, wide);
    Value* step = e.add("Max_step", "Max", {e.add("Abs", "Abs", {delta}, scalar), one}, scalar);
    Value* rounded = e.add("Sub_round", "Sub", {e.add("Add_round", "Add", {span, step}, scalar), one}, scalar);
    count = e.add("Div_count", "Div", {e.add("Max_count", "Max", {rounded, zero}, scalar), step}, scalar);
  }
  Value* index = e.cast("Cast_index", e.counted_range("Index", count, length), wide);
  Value* offset = e.add("Mul", "Mul", {index, delta}, line);
  if (wide == dt) {
    e.finish("Add", "Add", {start, offset});
  } else {
    Value* values = e.add("Add", "Add", {start, offset}, line);
    e.finish("Cast", "Cast", {values}, {{"to", Attribute::of_int(static_cast<int64_t>(dt))}});
  }
  return true;
}

std::vector<Tensor> eval_identity(EvalContext& ctx) { return {ctx.input(0)}; }

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// Dropout at inference (no training_mode, or a constant false one): the identity
void dropout_rule(GradContext& c) { c.set(0, c.dy()); }

// Where dropout_rule covers a Dropout: at inference. A training one is
// differentiated through its decomposition (g kept where the mask is, times
// 1 / (1 - ratio)), so the backward reads the mask the forward drew in the
// same call.
bool dropout_infers(const Node& n, const std::vector<bool>&) {
  if (n.get_int("is_test", 1) == 0) return false;
  if (n.num_inputs() <= 2 || !n.has_input(2)) return true;
  std::optional<double> training = scalar_constant(n.input(2));
  return training && *training == 0;
}

// Dropout whose training_mode may be true -> the reference's steps in double:
// the mask GreaterOrEqual(RandomUniformLike(x) in f64 with the node's seed as
// a float, ratio), y Where(mask, x * (1 / (1 - ratio)), 0) cast back to x's
// dtype; a constant ratio's threshold and scale are literals. A training_mode
// computed at run time (`training`, else null) ORs its negation into the mask
// and makes the scale 1 when false, which gives x itself as the reference
// does. A computed ratio's scale is 1 / (1 - max(ratio, 0)), so that one
// outside [0, 1) gives the reference's defined result (eval_dropout); the
// shape rule refuses a constant one.
bool decompose_training_dropout(Expansion& e, Value* training) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || !is_float(x.dtype())) return false;
  std::optional<double> ratio = n.has_input(1) ? scalar_constant(n.input(1)) : 0.5;
  Type doubles = Type::tensor(DType::F64, x.shape());
  Type bools = Type::tensor(DType::Bool, x.shape());
  Value* threshold = ratio ? e.scalar("ratio", *ratio, DType::F64) : e.cast("Cast", n.input(1), DType::F64);
  std::map<std::string, Attribute> attrs = {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::F64))}};
  if (n.has_attr("seed")) attrs["seed"] = Attribute::of_float(static_cast<float>(n.get_int("seed", 0)));
  Value* draws = e.add("RandomUniformLike", "RandomUniformLike", {n.input(0)}, doubles, attrs);
  Value* keep = e.add("GreaterOrEqual", "GreaterOrEqual", {draws, threshold}, bools);
  Value* scale = nullptr;
  if (ratio) {
    scale = e.scalar("scale", 1.0 / (1.0 - *ratio), DType::F64);
  } else {
    Value* one = e.scalar("one", 1.0, DType::F64);
    Value* dropped = e.add("Max", "Max", {threshold, e.scalar("zero_ratio", 0.0, DType::F64)}, threshold->type());
    scale = e.add("Div", "Div", {one, e.add("Sub", "Sub", {one, dropped}, threshold->type())}, threshold->type());
  }
  if (training) {
    Value* on = e.cast("Cast_3", training, DType::Bool);
    keep = e.add("Or", "Or", {e.add("Not", "Not", {on}, on->type()), keep}, bools);
    scale = e.add("Where_1", "Where", {on, scale, e.scalar("unscaled", 1.0, DType::F64)}, scale->type());
  }
  Value* scaled = e.add("Mul", "Mul", {e.cast("Cast_1", n.input(0), DType::F64), scale}, doubles);
  Value* kept = e.add("Where", "Where", {keep, scaled, e.scalar("zero", 0.0, DType::F64)}, doubles);
  if (n.num_outputs() > 1 && e.used(n.output(1))) e.take_over(1, keep);
  e.finish("Cast_2", "Cast", {kept}, {{"to", Attribute::of_int(static_cast<int64_t>(x.dtype()))}});
  return true;
}

// Dropout at inference (training_mode absent or a constant false; ratio is
// then not read, nor range-checked as the reference does) -> Identity(x), and
// the mask, where read, an all-true Expand (decomposition.h); otherwise
// decompose_training_dropout.
bool decompose_dropout(Expansion& e) {
  const Node& n = e.node();
  if (n.num_inputs() > 2 && n.has_input(2)) {
    std::optional<double> training = scalar_constant(n.input(2));
    if (!training) return decompose_training_dropout(e, n.input(2));
    if (*training != 0) return decompose_training_dropout(e, nullptr);
  }
  if (n.num_outputs() > 1 && e.used(n.output(1))) {
    const Type& x = n.input(0)->type();
    if (!x.is_tensor() || !x.has_rank()) return false;
    Tensor all_true(DType::Bool, {});
    all_true.set_i64(0, 1);
    e.take_over(1, e.expand("Expand", e.constant("true", std::move(all_true)), x.shape()));
  }
  e.finish("Identity", "Identity", {n.input(0)});
  return true;
}

// Identity: g
void identity_rule(GradContext& c) { c.set(0, c.dy()); }

// Reshape, Flatten, Squeeze, Unsqueeze: g reshaped to x's shape
}  // namespace

void reshape_rule(GradContext& c) { c.set(0, c.e().op("Reshape", {c.dy(), c.e().shape_of(c.in(0))})); }

void register_shape_ops(OpRegistry& r) {
  r.add(OpDef{"", "Shape", 1, kShapeOnly, infer_shape, eval_shape, {}});
  r.add(OpDef{"", "Size", 1, kShapeOnly, infer_size,
              [](EvalContext& ctx) { return std::vector<Tensor>{Tensor::scalar_i64(ctx.input(0).numel())}; }, {}});
  r.add(OpDef{"", "Reshape", 5, kMovement | kRearranges | kReshape, infer_reshape, eval_reshape, {}})
      .shape_from_inputs({1})
      .kernel_unless(KernelRole::Movement, computed_shape_refusal)
      .gradient(reshape_rule);
  r.add(OpDef{"", "Squeeze", 1, kMovement | kRearranges | kReshape, infer_squeeze, eval_squeeze, {}})
      .shape_from_inputs({1})
      .kernel_role(KernelRole::Movement, [](const Node& n) { return !n.has_input(1) || literal_input(n, 1); })
      .gradient(reshape_rule);
  r.add(OpDef{"", "Unsqueeze", 1, kMovement | kRearranges | kReshape, infer_unsqueeze, eval_unsqueeze, {}})
      .shape_from_inputs({1})
      .kernel_role(KernelRole::Movement, [](const Node& n) { return !n.has_input(1) || literal_input(n, 1); })
      .gradient(reshape_rule);
  r.add(OpDef{"", "Flatten", 1, kMovement | kRearranges | kReshape, infer_flatten, eval_flatten, {}}).kernel_role(KernelRole::Movement).gradient(reshape_rule);
  r.add(OpDef{"", "Identity", 1, kMovement | kRearranges, infer_identity, eval_identity, {}}).kernel_role(KernelRole::Movement).gradient(identity_rule);
  // Random only in training mode; the trait is per op, so it is set for every
  // Dropout, which keeps constant folding from fixing a random mask.
  r.add(OpDef{"", "Dropout", 12, kRandom, infer_dropout, eval_dropout, {}})
      .configured_by({1})
      .gradient(dropout_rule, dropout_infers)
      .decomposition(decompose_dropout);
  r.add(OpDef{"", "Constant", 1, kConstant, infer_constant, eval_constant, {}});
  r.add(OpDef{"", "ConstantOfShape", 9, kConstant, infer_constant_of_shape, eval_constant_of_shape, {}})
      .shape_from_inputs({0});
  r.add(OpDef{"", "Range", 11, 0, infer_range, eval_range, kRangeTypes})
      .shape_from_inputs({0, 1, 2})
      .configured_by({0, 1, 2})
      .decomposition(decompose_range);
}

}  // namespace tcc
