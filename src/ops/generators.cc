// Ops that generate tensors rather than compute from their inputs' values:
// OneHot, EyeLike, and the random generators RandomNormal, RandomUniform,
// RandomNormalLike, RandomUniformLike, Bernoulli and Multinomial.
//
// EyeLike's kernel expression is built from the point's coordinates alone.
// The random ops (kRandom: never folded or merged) draw from the stream their
// `seed` attribute keys (random_stream.h), seed 0's without one, as
// training-mode Dropout's (shape.cc): element i's draw depends on the key, i
// and the call's random offset alone, so the interpreter and a generated
// kernel (an expression of the point's element index and the offset;
// Multinomial decomposes onto kernels) draw the same bits. The streams are
// tcc's own: ONNX leaves the generator to the implementation.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"
#include "src/ops/random_stream.h"

namespace tcc {

namespace {

// A `dtype` attribute (dtype_attr) that must be numeric or bool.
DType numeric_dtype_attr(const Node& n, DType fallback) {
  DType d = dtype_attr(n, fallback);
  if (d == DType::String) n.fail("dtype must be numeric or bool, not a string");
  return d;
}

// An integer read from a scalar or one-element tensor of any numeric dtype
// (floats truncate toward zero, as ONNX's cast to int64).
int64_t integer_at(const Tensor& t, int64_t i) {
  return is_float(t.dtype()) ? static_cast<int64_t>(std::trunc(t.get_f64(i))) : t.get_i64(i);
}

// ---- OneHot -------------------------------------------------------------------

// OneHot(indices, depth, values): values[1] where the index along `axis`
// equals indices (negative ones count from depth, from opset 11), values[0]
// elsewhere; indices outside [-depth, depth) give a row of values[0].
void infer_one_hot(InferContext& ctx) {
  const Type& values = ctx.input_type(2);
  if (values.is_tensor() && values.has_rank() && (values.rank() != 1 || values.shape()[0] != Dim(2)))
    ctx.fail("values must be a 1-D tensor of 2 elements [off, on], got " + values.str());
  const Type& depth = ctx.input_type(1);
  if (depth.is_tensor() && depth.has_rank() && dims_product(depth.shape()) != Dim(1))
    ctx.fail("depth must be a scalar or a tensor of one element, got " + depth.str());
  DType dt = values.is_tensor() ? values.dtype() : DType::Undefined;
  const Type& indices = ctx.input_type(0);
  if (!indices.is_tensor() || !indices.has_rank()) {
    ctx.set_output_type(0, Type::tensor_unranked(dt));
    return;
  }
  Dim d = ctx.env().fresh("u");  // read from data at run time
  if (const Tensor* c = ctx.input_const(1)) {
    int64_t v = integer_at(*c, 0);
    if (v < 1) ctx.fail("depth must be positive, got " + std::to_string(v));
    d = Dim(v);
  }
  int64_t rank = static_cast<int64_t>(indices.rank()) + 1;
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), rank);
  Dims out = indices.shape();
  out.insert(out.begin() + axis, d);
  ctx.set_output_type(0, Type::tensor(dt, out));
}

std::vector<Tensor> eval_one_hot(EvalContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& depth_t = ctx.input(1);
  const Tensor& values = ctx.input(2);
  if (depth_t.numel() != 1) ctx.fail("depth must have one element, got shape " + shape_str(depth_t.shape()));
  if (values.numel() != 2) ctx.fail("values must have 2 elements [off, on], got shape " + shape_str(values.shape()));
  int64_t depth = integer_at(depth_t, 0);
  if (depth < 1) ctx.fail("depth must be positive, got " + std::to_string(depth));
  int64_t rank = static_cast<int64_t>(indices.rank()) + 1;
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), rank);
  std::vector<int64_t> shape = indices.shape();
  shape.insert(shape.begin() + axis, depth);
  Tensor out(values.dtype(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(out, i, values, 0);
  // Index j of indices is (outer, inner) around the axis; its hot element is
  // (outer, index, inner) of the output.
  int64_t inner = product(indices.shape(), static_cast<size_t>(axis));
  for (int64_t j = 0; j < indices.numel(); ++j) {
    int64_t v = integer_at(indices, j);
    if (v < 0 && ctx.opset() >= 11) v += depth;
    if (v < 0 || v >= depth) continue;
    copy_element(out, (j / inner * depth + v) * inner + j % inner, values, 1);
  }
  return {out};
}

// ---- EyeLike ------------------------------------------------------------------

// EyeLike(x): x's 2-D shape, ones on the diagonal k places right of the main
// one (left for negative k), zeros elsewhere; in `dtype`, else x's dtype.
void infer_eye_like(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) {
    ctx.set_output_type(0, Type::tensor_unranked(numeric_dtype_attr(ctx.node(), input_dtype(ctx, 0))));
    return;
  }
  const Type& x = ctx.input_type(0);
  if (x.rank() != 2) ctx.fail("expected a 2-D input, got " + x.str());
  ctx.set_output_type(0, Type::tensor(numeric_dtype_attr(ctx.node(), x.dtype()), x.shape()));
}

std::vector<Tensor> eval_eye_like(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail("expected a 2-D input, got shape " + shape_str(x.shape()));
  int64_t k = ctx.node().get_int("k", 0);
  int64_t rows = x.shape()[0], cols = x.shape()[1];
  Tensor out(numeric_dtype_attr(ctx.node(), x.dtype()), x.shape());
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols) out.set_i64(i * cols + i + k, 1);
  return {out};
}

// out[i, j] = (j == i + k), in the output's dtype.
int eye_like_expression(const Node& n, ScalarBuilder& b, const std::vector<int>&) {
  int shifted = b.op(ScalarOp::Add, DType::I64,
                     {b.coordinate(n, 0), b.constant(DType::I64, static_cast<double>(n.get_int("k", 0)))});
  int diagonal = b.op(ScalarOp::Equal, DType::Bool, {b.coordinate(n, 1), shifted});
  DType dt = n.output(0)->type().dtype();
  return dt == DType::Bool ? diagonal : b.op(ScalarOp::Cast, dt, {diagonal});
}

// ---- random generators ----------------------------------------------------------

// Fails unless dt is a float type the random generators produce at n's opset
// (bfloat16 from opset 22).
void require_random_float(const Node& n, DType dt) {
  bool ok = dt == DType::F16 || dt == DType::F32 || dt == DType::F64 || (dt == DType::BF16 && n.opset() >= 22);
  if (!ok)
    n.fail("generates float16, float or double" + std::string(n.opset() >= 22 ? " or bfloat16" : "") + ", not " +
           std::string(dtype_name(dt)));
}

// The output dtype of RandomNormal / RandomUniform (their `dtype`, float by default).
DType random_dtype(const Node& n) {
  DType dt = dtype_attr(n, DType::F32);
  require_random_float(n, dt);
  return dt;
}

// The output dtype of the *Like ops: their `dtype`, else the input's, which
// must then be a float type.
DType random_like_dtype(const Node& n, DType input) {
  DType dt = dtype_attr(n, input);
  if (dt != DType::Undefined) require_random_float(n, dt);
  return dt;
}

std::vector<int64_t> shape_attr(const Node& n) {
  if (!n.has_attr("shape")) n.fail("needs a 'shape' attribute");
  std::vector<int64_t> shape = n.get_ints("shape");
  for (int64_t d : shape)
    if (d < 0) n.fail("shape " + shape_str(shape) + " has a negative dim");
  return shape;
}

// RandomUniform's bounds: low < high.
std::pair<double, double> uniform_bounds(const Node& n) {
  double low = n.get_float("low", 0.0f), high = n.get_float("high", 1.0f);
  if (!(low < high)) n.fail("needs low < high, got low " + std::to_string(low) + " and high " + std::to_string(high));
  return {low, high};
}

// Uniform values in [low, high): low + (high - low) u in double, rounded to
// out's dtype; one that rounds onto high is low instead.
void fill_uniform(const Node& n, uint64_t offset, Tensor& out) {
  auto [low, high] = uniform_bounds(n);
  PhiloxKey key = random_key(n);
  for (int64_t i = 0; i < out.numel(); ++i) {
    out.set_f64(i, low + (high - low) * uniform_draw(key, i, offset));
    if (!(out.get_f64(i) < high)) out.set_f64(i, low);
  }
}

// Normal values of `mean` and standard deviation `scale`: mean + scale z in double.
void fill_normal(const Node& n, uint64_t offset, Tensor& out) {
  double mean = n.get_float("mean", 0.0f), scale = n.get_float("scale", 1.0f);
  PhiloxKey key = random_key(n);
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, mean + scale * normal_draw(key, i, offset));
}

// fill_uniform's value at the point, as an expression.
int uniform_expression(const Node& n, ScalarBuilder& b, const std::vector<int>&) {
  auto [low, high] = uniform_bounds(n);
  DType dt = n.output(0)->type().dtype();
  int scaled = b.op(ScalarOp::Mul, DType::F64, {b.constant(DType::F64, high - low), uniform_draw(n, b)});
  int value = b.op(ScalarOp::Cast, dt, {b.op(ScalarOp::Add, DType::F64, {b.constant(DType::F64, low), scaled})});
  int below = b.op(ScalarOp::Less, DType::Bool,
                   {b.op(ScalarOp::Cast, DType::F64, {value}), b.constant(DType::F64, high)});
  return b.op(ScalarOp::Where, dt, {below, value, b.constant(dt, low)});
}

// fill_normal's value at the point, as an expression.
int normal_expression(const Node& n, ScalarBuilder& b, const std::vector<int>&) {
  double mean = n.get_float("mean", 0.0f), scale = n.get_float("scale", 1.0f);
  int scaled = b.op(ScalarOp::Mul, DType::F64, {b.constant(DType::F64, scale), normal_draw(n, b)});
  return b.op(ScalarOp::Cast, n.output(0)->type().dtype(),
              {b.op(ScalarOp::Add, DType::F64, {b.constant(DType::F64, mean), scaled})});
}

void infer_random(InferContext& ctx) {
  ctx.set_output_type(0, Type::tensor(random_dtype(ctx.node()), dims_of(shape_attr(ctx.node()))));
}

void infer_random_like(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  DType dt = random_like_dtype(ctx.node(), input_dtype(ctx, 0));
  ctx.set_output_type(0, x.is_tensor() && x.has_rank() ? Type::tensor(dt, x.shape()) : Type::tensor_unranked(dt));
}

template <void (*fill)(const Node&, uint64_t, Tensor&)>
std::vector<Tensor> eval_random(EvalContext& ctx) {
  Tensor out(random_dtype(ctx.node()), shape_attr(ctx.node()));
  fill(ctx.node(), ctx.random_offset(), out);
  return {out};
}

template <void (*fill)(const Node&, uint64_t, Tensor&)>
std::vector<Tensor> eval_random_like(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(random_like_dtype(ctx.node(), x.dtype()), x.shape());
  fill(ctx.node(), ctx.random_offset(), out);
  return {out};
}

// Bernoulli(p): 1 with probability p, else 0, in `dtype` (p's by default).
// ONNX asks for p in [0, 1]: a constant p outside it is refused here, so both
// the interpreter and a compiled module refuse the model; p from data is not
// checked on either path, and `u < p` makes a p at or below 0 (or NaN) give
// 0 and one at or above 1 give 1.
void infer_bernoulli(InferContext& ctx) {
  const Type& p = ctx.input_type(0);
  if (p.is_tensor()) require_random_float(ctx.node(), p.dtype());
  if (const Tensor* c = ctx.input_const(0))
    for (int64_t i = 0; i < c->numel(); ++i)
      if (!(c->get_f64(i) >= 0 && c->get_f64(i) <= 1))
        ctx.fail("probability " + std::to_string(c->get_f64(i)) + " is outside [0, 1]");
  DType dt = numeric_dtype_attr(ctx.node(), input_dtype(ctx, 0));
  ctx.set_output_type(0, p.is_tensor() && p.has_rank() ? Type::tensor(dt, p.shape()) : Type::tensor_unranked(dt));
}

std::vector<Tensor> eval_bernoulli(EvalContext& ctx) {
  const Tensor& p = ctx.input(0);
  Tensor out(numeric_dtype_attr(ctx.node(), p.dtype()), p.shape());
  PhiloxKey key = random_key(ctx.node());
  for (int64_t i = 0; i < p.numel(); ++i)
    out.set_i64(i, uniform_draw(key, i, ctx.random_offset()) < p.get_f64(i) ? 1 : 0);
  return {out};
}

// 1 where the point's uniform draw is below p there, as the reference.
int bernoulli_expression(const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
  int hit = b.op(ScalarOp::Less, DType::Bool, {uniform_draw(n, b), b.op(ScalarOp::Cast, DType::F64, {in[0]})});
  DType dt = n.output(0)->type().dtype();
  return dt == DType::Bool ? hit : b.op(ScalarOp::Cast, dt, {hit});
}

// Multinomial(x [batch, classes] of unnormalized log-probabilities):
// sample_size class indices per row, drawn with probabilities softmax(x).
DType multinomial_dtype(const Node& n) {
  DType dt = dtype_attr(n, DType::I32);
  if (dt != DType::I32 && dt != DType::I64) n.fail("generates int32 or int64, not " + std::string(dtype_name(dt)));
  return dt;
}

int64_t sample_size(const Node& n) {
  int64_t s = n.get_int("sample_size", 1);
  if (s < 1) n.fail("sample_size must be positive, got " + std::to_string(s));
  return s;
}

void infer_multinomial(InferContext& ctx) {
  DType dt = multinomial_dtype(ctx.node());
  Dim samples(sample_size(ctx.node()));
  if (!inputs_ranked(ctx, {0})) {
    ctx.set_output_type(0, Type::tensor(dt, {Dim::unknown(), samples}));
    return;
  }
  const Type& x = ctx.input_type(0);
  if (x.rank() != 2) ctx.fail("expected a 2-D input [batch, classes], got " + x.str());
  ctx.set_output_type(0, Type::tensor(dt, {x.shape()[0], samples}));
}

std::vector<Tensor> eval_multinomial(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) ctx.fail("expected a 2-D input [batch, classes], got shape " + shape_str(x.shape()));
  int64_t batch = x.shape()[0], classes = x.shape()[1], samples = sample_size(ctx.node());
  if (classes == 0) ctx.fail("cannot sample from zero classes");
  Tensor out(multinomial_dtype(ctx.node()), {batch, samples});
  PhiloxKey key = random_key(ctx.node());
  std::vector<double> cumulative(static_cast<size_t>(classes));
  for (int64_t b = 0; b < batch; ++b) {
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) top = std::max(top, x.get_f64(b * classes + c));
    if (!std::isfinite(top)) ctx.fail("row " + std::to_string(b) + " has no finite log-probability");
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) cumulative[c] = sum += std::exp(x.get_f64(b * classes + c) - top);
    for (int64_t s = 0; s < samples; ++s) {
      double u = uniform_draw(key, b * samples + s, ctx.random_offset()) * sum;
      int64_t c = 0;
      while (c < classes - 1 && cumulative[c] <= u) ++c;
      out.set_i64(b * samples + s, c);
    }
  }
  return {out};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// OneHot(indices, depth, values) -> Where(Equal(index, iota), on, off), one
// pointwise kernel: the indices as i64 (a Cast truncates float ones, as the
// reference does), negative ones wrapped by adding depth (from opset 11),
// viewed with a 1 at `axis` and compared with a tcc::Range of depth viewed as
// [depth, 1, ...] across the axes after it. An index outside [0, depth) after
// wrapping matches nothing: a row of off. off and on are scalar constants, or
// Gathers of a computed `values`. Needs a constant depth; the indices' dims
// may be symbolic.
bool decompose_one_hot(Expansion& e) {
  const Node& n = e.node();
  const Type& indices = n.input(0)->type();
  const Type& out = n.output(0)->type();
  std::optional<Tensor> depth_t = constant_value(n.input(1));
  if (!depth_t || depth_t->numel() != 1 || !indices.is_tensor() || !indices.has_rank() || !indices.fully_shaped() ||
      !out.is_tensor() || !out.has_rank() || out.dtype() == DType::String)
    return false;
  int64_t depth = integer_at(*depth_t, 0);
  size_t axis = static_cast<size_t>(normalize_axis(n, n.get_int("axis", -1), static_cast<int64_t>(out.rank())));
  Type index_type = Type::tensor(DType::I64, indices.shape());
  Value* index = e.cast("Cast", n.input(0), DType::I64);
  if (e.onnx_opset() >= 11) {
    Value* negative = e.add("Less", "Less", {index, e.constant("zero", Tensor::scalar_i64(0))},
                            Type::tensor(DType::Bool, indices.shape()));
    Value* wrapped = e.add("Add", "Add", {index, e.constant("depth", Tensor::scalar_i64(depth))}, index_type);
    index = e.add("Where", "Where", {negative, wrapped, index}, index_type);
  }
  Dims viewed = indices.shape();
  viewed.insert(viewed.begin() + static_cast<std::ptrdiff_t>(axis), Dim(1));
  Dims iota_dims(out.rank() - axis, Dim(1));
  iota_dims[0] = Dim(depth);
  Value* iota = e.range("Range", 0, Dim(depth));
  if (iota_dims.size() > 1) iota = e.reshape("Reshape_1", iota, iota_dims);
  Value* hot =
      e.add("Equal", "Equal", {e.reshape("Reshape", index, viewed), iota}, Type::tensor(DType::Bool, out.shape()));
  Value* off = nullptr;
  Value* on = nullptr;
  if (std::optional<Tensor> values = constant_value(n.input(2))) {
    Tensor off_t(values->dtype(), {}), on_t(values->dtype(), {});
    copy_element(off_t, 0, *values, 0);
    copy_element(on_t, 0, *values, 1);
    off = e.constant("off", std::move(off_t));
    on = e.constant("on", std::move(on_t));
  } else {
    Type element = Type::tensor(out.dtype(), {});
    off = e.add("Gather", "Gather", {n.input(2), e.constant("first", Tensor::scalar_i64(0))}, element);
    on = e.add("Gather_1", "Gather", {n.input(2), e.constant("second", Tensor::scalar_i64(1))}, element);
  }
  e.finish("Where_1", "Where", {hot, on, off});
  return true;
}

// Multinomial(x) -> Min(count, classes - 1) of each draw, in f64 as the
// reference computes it: weights Exp(x - ReduceMax(x)), their CumSum along the
// classes, each draw's point RandomUniformLike (the node's seed, one draw per
// output element) times the row's total (the cumulative's last column), and
// count the number of cumulative weights at or below the point: the first
// class whose cumulative weight passes it. Needs a static class count (the
// last column's place) and opset 12 (CumSum, LessOrEqual); the reference's checks of x (a row of no finite
// log-probability) are not made.
bool decompose_multinomial(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& out = n.output(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() != 2 || x.shape()[0].is_unknown() || !x.shape()[1].is_static() ||
      x.shape()[1].value() < 1 || !out.is_tensor() || e.onnx_opset() < 12)
    return false;
  Dim batch = x.shape()[0];
  int64_t classes = x.shape()[1].value(), samples = sample_size(n);
  Type rows = Type::tensor(DType::F64, {batch, Dim(classes)});
  Type draws_type = Type::tensor(DType::F64, {batch, Dim(samples)});
  Value* logits = e.cast("Cast", n.input(0), DType::F64);
  Value* top = e.reduce("ReduceMax", "ReduceMax", logits, {1}, Expansion::kept_type(rows, {1}));
  Value* weights = e.add("Exp", "Exp", {e.add("Sub", "Sub", {logits, top}, rows)}, rows);
  Value* cumulative = e.add("CumSum", "CumSum", {weights, e.constant("axis", Tensor::scalar_i64(1))}, rows);
  Value* total = e.add("Gather", "Gather", {cumulative, e.i64("last", classes - 1)},
                       Type::tensor(DType::F64, {batch, Dim(1)}), {{"axis", Attribute::of_int(1)}});
  std::map<std::string, Attribute> seed;
  if (const Attribute* a = n.attr("seed")) seed["seed"] = *a;
  Value* draws = e.add("RandomUniformLike", "RandomUniformLike", {e.expand("Expand", total, draws_type.shape())},
                       draws_type, seed);
  Value* points = e.add("Mul", "Mul", {draws, total}, draws_type);
  Value* at_or_below = e.add("LessOrEqual", "LessOrEqual",
                             {e.reshape("Reshape", cumulative, {batch, Dim(1), Dim(classes)}),
                              e.reshape("Reshape_1", points, {batch, Dim(samples), Dim(1)})},
                             Type::tensor(DType::Bool, {batch, Dim(samples), Dim(classes)}));
  Value* count = e.reduce("ReduceSum", "ReduceSum", e.cast("Cast_1", at_or_below, DType::I64), {2},
                          Expansion::kept_type(Type::tensor(DType::I64, at_or_below->type().shape()), {2}));
  Value* index = e.add("Min", "Min", {count, e.constant("last_class", Tensor::scalar_i64(classes - 1))},
                       count->type());
  e.finish_reshape("Reshape_2", e.cast("Cast_2", index, multinomial_dtype(n)));
  return true;
}

}  // namespace

void register_generator_ops(OpRegistry& r) {
  r.add(OpDef{"", "OneHot", 9, 0, infer_one_hot, eval_one_hot, {}}).shape_from_inputs({1}).decomposition(decompose_one_hot);
  r.add(OpDef{"", "EyeLike", 9, kShapeOnly, infer_eye_like, eval_eye_like, {}}).pointwise_kernel(eye_like_expression);
  r.add(OpDef{"", "RandomNormal", 1, kRandom | kConstant, infer_random, eval_random<fill_normal>, {}})
      .pointwise_kernel(normal_expression);
  r.add(OpDef{"", "RandomUniform", 1, kRandom | kConstant, infer_random, eval_random<fill_uniform>, {}})
      .pointwise_kernel(uniform_expression);
  r.add(OpDef{"", "RandomNormalLike", 1, kRandom, infer_random_like, eval_random_like<fill_normal>, {}})
      .pointwise_kernel(normal_expression);
  r.add(OpDef{"", "RandomUniformLike", 1, kRandom, infer_random_like, eval_random_like<fill_uniform>, {}})
      .pointwise_kernel(uniform_expression);
  r.add(OpDef{"", "Bernoulli", 15, kRandom, infer_bernoulli, eval_bernoulli, {}})
      .pointwise_kernel(bernoulli_expression);
  r.add(OpDef{"", "Multinomial", 7, kRandom, infer_multinomial, eval_multinomial, {}})
      .decomposition(decompose_multinomial);
}

}  // namespace tcc
