#include "src/ops/gradient.h"

#include <numeric>

namespace tcc {

const Dims& GradContext::dims(const Value* v) const {
  if (!v->type().is_tensor() || !v->type().has_rank())
    fail("the gradient needs the rank of '" + v->name() + "', which shape inference could not find");
  return v->type().shape();
}

const Tensor* GradContext::constant(size_t i) const {
  const Value* v = in(i);
  return v ? constant_of_(v) : nullptr;
}

std::vector<int64_t> GradContext::const_ints(size_t i, const std::string& what) const {
  const Tensor* t = constant(i);
  if (!t) fail("the gradient needs " + what + " (input " + std::to_string(i) + ") to be a constant");
  return t->to_i64_vector();
}

int64_t GradContext::axis(int64_t a, size_t rank) const {
  int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + r : a;
}

Attrs int_attr(const std::string& k, int64_t v) { return {{k, Attribute::of_int(v)}}; }

Value* mul(GradContext& c, Value* a, Value* b) { return c.e().op("Mul", {a, b}); }

Value* scalar(GradContext& c, double v) { return c.e().scalar(v, c.dtype()); }

Value* as_dtype(GradContext& c, Value* v) {
  return c.e().op("Cast", {v}, int_attr("to", static_cast<int64_t>(c.dtype())));
}

Value* swap_axes(GradContext& c, Value* x, size_t rank, size_t a, size_t b) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return c.e().op("Transpose", {x}, {{"perm", Attribute::of_ints(perm)}});
}

Value* transpose_last2(GradContext& c, Value* x, size_t rank) { return swap_axes(c, x, rank, rank - 1, rank - 2); }

Factors factors_of(GradContext& c, Value* x) {
  Value* is_zero = c.e().op("Equal", {x, scalar(c, 0.0)});
  return {is_zero, c.e().op("Where", {is_zero, scalar(c, 1.0), x})};
}

Value* product_of_others(GradContext& c, const Factors& f, Value* nonzero_product, Value* zeros) {
  Emitter& e = c.e();
  Value* zero = scalar(c, 0.0);
  Value* only_zero = e.op("And", {f.is_zero, e.op("Equal", {zeros, scalar(c, 1.0)})});
  Value* at_only_zero = e.op("Where", {only_zero, nonzero_product, zero});
  return e.op("Where", {e.op("Equal", {zeros, zero}), e.op("Div", {nonzero_product, f.safe}), at_only_zero});
}

Value* scatter_back(GradContext& c, Value* zeros, Value* index, Value* g, int64_t axis) {
  Attrs scatter{{"axis", Attribute::of_int(axis)}};
  if (c.node().opset() >= 16) scatter["reduction"] = Attribute::of_string("add");
  return c.e().op("ScatterElements", {zeros, index, g}, std::move(scatter));
}

Value* mean_share(GradContext& c) {
  Emitter& e = c.e();
  Value* n = e.op("Div", {as_dtype(c, e.op("Size", {c.in(0)})), as_dtype(c, e.op("Size", {c.out()}))});
  return e.op("Div", {c.dy(), n});
}

void to_extrema(GradContext& c, Value* g, Value* y, const std::function<Value*(Value*)>& reduce) {
  Emitter& e = c.e();
  Value* hit = as_dtype(c, e.op("Equal", {c.in(0), y}));
  c.set(0, e.op("Div", {mul(c, g, hit), reduce(hit)}));
}

}  // namespace tcc
