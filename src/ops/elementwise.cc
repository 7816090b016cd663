// Pointwise ops: arithmetic, Neg, Abs, Sign, Relu, comparisons, logic, Cast,
// Where and Clip (the float functions and activations are in unary_float.cc,
// the bitwise ops in bitwise.cc).
// All broadcast multidirectionally (NumPy rules).
//
// Kernels compute floats in double and integers in 64 bits (unsigned types in
// uint64 so that u64 division and comparison stay exact), rounding once to the
// output dtype. For rank-0/1 integer tensors the shape rules also propagate
// symbolic contents, so exporters' shape arithmetic (Div(seq*768, 12),
// Mul(batch, seq), Where(Equal(shape, -1), 1, shape)) stays symbolic.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

const std::vector<DType> kSignedNumeric = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                           DType::I64, DType::I32, DType::I16,  DType::I8};
const std::vector<DType> kAll = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                 DType::I32, DType::I16, DType::I8,   DType::U64, DType::U32,
                                 DType::U16, DType::U8,  DType::Bool};
// Cast and CastLike also convert to and from the 8-bit floats and the 4-bit types.
const std::vector<DType> kCastTypes = {DType::F32,      DType::F16,        DType::BF16,   DType::F64,
                                       DType::I64,      DType::I32,        DType::I16,    DType::I8,
                                       DType::U64,      DType::U32,        DType::U16,    DType::U8,
                                       DType::Bool,     DType::F8E4M3FN,   DType::F8E4M3FNUZ, DType::F8E5M2,
                                       DType::F8E5M2FNUZ, DType::F4E2M1,   DType::I4,     DType::U4};

// How a kernel computes on an element type.
enum class Domain { Float, Signed, Unsigned };

Domain domain_of(DType t) {
  if (is_float(t)) return Domain::Float;
  if (t == DType::Bool || !is_signed(t)) return Domain::Unsigned;
  return Domain::Signed;
}

// ---------------------------------------------------------------------------
// Shape rules

// The output type of a broadcasting op: the broadcast of every present input's shape.
Type broadcast_type(InferContext& ctx, DType dtype) {
  std::vector<Dims> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor() || !t.has_rank()) return Type::tensor_unranked(dtype);
    shapes.push_back(t.shape());
  }
  return Type::tensor(dtype, broadcast_dims(ctx, shapes));
}

// Symbolic contents of input i: what the engine tracked, or the data of a small
// integer or bool constant (bools matter for Where's condition).
const Dims* values_of(InferContext& ctx, size_t i, Dims& storage) {
  if (!ctx.has_input(i)) return nullptr;
  if (const Dims* v = ctx.input_values(i)) return v;
  const Tensor* c = ctx.input_const(i);
  if (!c || c->dtype() != DType::Bool || c->rank() > 1) return nullptr;
  storage.clear();
  for (int64_t k = 0; k < c->numel(); ++k) storage.push_back(Dim(c->get_i64(k)));
  return &storage;
}

// Applies f elementwise to the symbolic contents of all inputs (broadcasting
// length-1 vectors) and records the result as output 0's contents.
void propagate_values(InferContext& ctx, const ValueFn& f) {
  const Type& out = ctx.out_types[0];
  if (!out.is_tensor() || !(is_integer(out.dtype()) || out.dtype() == DType::Bool)) return;
  if (!out.has_rank() || out.rank() > 1) return;
  std::vector<Dims> storage(ctx.num_inputs());
  std::vector<const Dims*> vs;
  size_t n = 1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Dims* v = values_of(ctx, i, storage[i]);
    if (!v) return;
    if (v->size() != 1) {
      if (n != 1 && n != v->size()) return;
      n = v->size();
    }
    vs.push_back(v);
  }
  Dims result;
  for (size_t k = 0; k < n; ++k) {
    std::vector<Dim> args;
    for (const Dims* v : vs) {
      const Dim& d = (*v)[v->size() == 1 ? 0 : k];
      if (d.is_unknown()) return;
      args.push_back(d);
    }
    std::optional<Dim> r = f(args);
    if (!r) return;
    result.push_back(*r);
  }
  ctx.set_output_values(0, std::move(result));
}

// Truncating integer division of shape values (ONNX Div on integers). Sizes
// are non-negative, so where the quotient is not exact a floor division of a
// size by a positive constant is the same thing.
std::optional<Dim> div_values(const Dim& a, const Dim& b) {
  if (b.is_static() && b.value() == 0) return std::nullopt;
  if (a.is_static() && b.is_static()) return Dim(a.value() / b.value());
  if (auto q = a.expr().exact_div(b.expr())) return Dim(*q);
  if (b.is_static() && b.value() > 0 && a.expr().provably_nonnegative()) return Dim(a.expr().floordiv(b.expr()));
  return std::nullopt;
}

// a mod b on shape values, b a positive constant or a size (b = 0 has no
// result): C's remainder (fmod) or Python's, whose sign is b's. Python's is
// a - b*(a//b) for any a: torch pads H up to a multiple of 4 with
// (4 - H % 4) % 4 and rolls back by -2 % H; C's equals it where a >= 0.
std::optional<Dim> mod_values(const Dim& a, const Dim& b, bool fmod) {
  if (b.is_static() && b.value() <= 0) return std::nullopt;
  if (a.is_static() && b.is_static())
    return Dim(fmod ? a.value() % b.value() : ((a.value() % b.value()) + b.value()) % b.value());
  if (!b.expr().provably_nonnegative() || (fmod && !a.expr().provably_nonnegative())) return std::nullopt;
  return Dim(a.expr() - b.expr() * a.expr().floordiv(b.expr()));
}

// Decides a == b on shape values when it can: equal expressions, two different
// constants, or a size against a negative constant.
std::optional<bool> equal_values(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  if (a.is_static() && a.value() < 0 && b.expr().provably_nonnegative()) return false;
  if (b.is_static() && b.value() < 0 && a.expr().provably_nonnegative()) return false;
  return std::nullopt;
}

// Decides a <= b on shape values when it can.
std::optional<bool> less_equal_values(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return a.value() <= b.value();
  if (a.is_static() && a.value() <= 0 && b.expr().provably_nonnegative()) return true;
  if (b.is_static() && b.value() < 0 && a.expr().provably_nonnegative()) return false;
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Kernels

// The broadcast of a kernel's inputs: output shape and one indexer per input.
struct Broadcast {
  std::vector<int64_t> shape;
  std::vector<BroadcastIndexer> index;
};

Broadcast broadcast_of(const Node& n, const std::vector<const Tensor*>& ins) {
  std::vector<std::vector<int64_t>> shapes;
  for (const Tensor* t : ins) shapes.push_back(t->shape());
  Broadcast b{broadcast_shapes(n, shapes), {}};
  for (const Tensor* t : ins) b.index.emplace_back(b.shape, t->shape());
  return b;
}

std::vector<const Tensor*> all_inputs(const EvalContext& ctx) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ins.push_back(&ctx.input(i));
  return ins;
}

// Reads element i in the computation type of a domain.
template <typename T>
T read_as(const Tensor& t, int64_t i) {
  if constexpr (std::is_same_v<T, double>) return t.get_f64(i);
  else return static_cast<T>(t.get_i64(i));
}

template <typename T>
void write_as(Tensor& t, int64_t i, T v) {
  if constexpr (std::is_same_v<T, double>) t.set_f64(i, v);
  else t.set_i64(i, static_cast<int64_t>(v));
}

// Left fold of f over all inputs, elementwise after broadcasting. f is called
// with double, int64_t or uint64_t arguments according to input 0's dtype.
template <typename F>
Tensor fold_numeric(const EvalContext& ctx, DType out_dtype, F f) {
  std::vector<const Tensor*> ins = all_inputs(ctx);
  Broadcast b = broadcast_of(ctx.node(), ins);
  Tensor out(out_dtype, b.shape);
  auto run = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < out.numel(); ++i) {
      T acc = read_as<T>(*ins[0], b.index[0](i));
      for (size_t k = 1; k < ins.size(); ++k) acc = f(acc, read_as<T>(*ins[k], b.index[k](i)));
      write_as<T>(out, i, acc);
    }
  };
  switch (domain_of(ins[0]->dtype())) {
    case Domain::Float: run(0.0); break;
    case Domain::Signed: run(int64_t{0}); break;
    case Domain::Unsigned: run(uint64_t{0}); break;
  }
  return out;
}

// A binary predicate over broadcast inputs; bool output.
template <typename F>
Tensor compare(const EvalContext& ctx, F f) {
  std::vector<const Tensor*> ins = all_inputs(ctx);
  Broadcast b = broadcast_of(ctx.node(), ins);
  Tensor out(DType::Bool, b.shape);
  const Tensor& x = *ins[0];
  const Tensor& y = *ins[1];
  if (x.dtype() != y.dtype()) ctx.fail("inputs must have the same dtype, got " + std::string(dtype_name(x.dtype())) +
                                       " and " + std::string(dtype_name(y.dtype())));
  auto run = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_i64(i, f(read_as<T>(x, b.index[0](i)), read_as<T>(y, b.index[1](i))) ? 1 : 0);
  };
  if (x.dtype() == DType::String) {
    for (int64_t i = 0; i < out.numel(); ++i)
      out.set_i64(i, f(x.strings()[b.index[0](i)], y.strings()[b.index[1](i)]) ? 1 : 0);
    return out;
  }
  switch (domain_of(x.dtype())) {
    case Domain::Float: run(0.0); break;
    case Domain::Signed: run(int64_t{0}); break;
    case Domain::Unsigned: run(uint64_t{0}); break;
  }
  return out;
}

// A unary op on any numeric dtype; f receives double, int64_t or uint64_t.
template <typename F>
Tensor unary_numeric(const EvalContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  Tensor out(x.dtype(), x.shape());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < x.numel(); ++i) write_as<T>(out, i, static_cast<T>(f(read_as<T>(x, i))));
  };
  switch (domain_of(x.dtype())) {
    case Domain::Float: run(0.0); break;
    case Domain::Signed: run(int64_t{0}); break;
    case Domain::Unsigned: run(uint64_t{0}); break;
  }
  return out;
}

// Two's complement wrap-around for signed integer arithmetic (no UB on overflow).
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else return a + b;
}
template <typename T>
T wrap_sub(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
  else return a - b;
}
template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_same_v<T, int64_t>) return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// Integer division truncates toward zero (ONNX Div); by zero yields 0 rather
// than trapping, since the result is undefined.
template <typename T>
T divide(T a, T b) {
  if constexpr (std::is_same_v<T, double>) return a / b;
  else if constexpr (std::is_same_v<T, int64_t>) {
    if (b == 0) return 0;
    if (b == -1) return wrap_sub<int64_t>(0, a);
    return a / b;
  } else {
    return b == 0 ? 0 : a / b;
  }
}

// Mod: fmod=1 takes the dividend's sign (C fmod), fmod=0 the divisor's (Python).
template <typename T>
T modulo(T a, T b, bool fmod) {
  if constexpr (std::is_same_v<T, double>) {
    double r = std::fmod(a, b);
    if (fmod) return r;
    if (std::isnan(r)) return r;
    if (r == 0) return std::copysign(0.0, b);
    return (r < 0) != (b < 0) ? r + b : r;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (b == 0) return 0;
    if (b == -1) return 0;
    T r = a % b;
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    return b == 0 ? 0 : a % b;
  }
}

Tensor pow_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  Broadcast b = broadcast_of(ctx.node(), {&x, &y});
  Tensor out(x.dtype(), b.shape);
  bool int_base = !is_float(x.dtype());
  bool int_exp = !is_float(y.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t xi = b.index[0](i), yi = b.index[1](i);
    if (int_base && int_exp) {
      // Exact integer power by squaring; a negative exponent gives 1/base^n truncated.
      int64_t base = x.get_i64(xi), e = y.get_i64(yi);
      int64_t r = 1;
      if (e < 0) {
        r = base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
      } else {
        for (; e > 0; e >>= 1) {
          if (e & 1) r = wrap_mul(r, base);
          base = wrap_mul(base, base);
        }
      }
      out.set_i64(i, r);
    } else {
      out.set_f64(i, std::pow(x.get_f64(xi), y.get_f64(yi)));
    }
  }
  return out;
}

Tensor where_kernel(const EvalContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (x.dtype() != y.dtype()) ctx.fail("X and Y must have the same dtype, got " + std::string(dtype_name(x.dtype())) +
                                       " and " + std::string(dtype_name(y.dtype())));
  Broadcast b = broadcast_of(ctx.node(), {&c, &x, &y});
  Tensor out(x.dtype(), b.shape);
  size_t w = dtype_size(x.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool take_x = c.get_i64(b.index[0](i)) != 0;
    const Tensor& src = take_x ? x : y;
    int64_t si = b.index[take_x ? 1 : 2](i);
    if (x.dtype() == DType::String) out.strings_mut()[i] = src.strings()[si];
    else std::memcpy(out.raw_mut() + i * w, src.raw() + si * w, w);
  }
  return out;
}

// Clip with bounds as optional scalar inputs (opset 11+); an absent bound is
// no bound. min > max yields max everywhere, as NumPy's clip does.
Tensor clip_kernel(const EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  for (size_t i = 1; i < 3; ++i)
    if (ctx.has_input(i) && ctx.input(i).numel() != 1)
      ctx.fail("input " + std::to_string(i) + " (" + (i == 1 ? "min" : "max") +
               ") must be a scalar, got shape " + shape_str(ctx.input(i).shape()));
  Tensor out(x.dtype(), x.shape());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < x.numel(); ++i) {
      T v = read_as<T>(x, i);
      if (ctx.has_input(1)) v = std::max(v, read_as<T>(ctx.input(1), 0));
      if (ctx.has_input(2)) v = std::min(v, read_as<T>(ctx.input(2), 0));
      write_as<T>(out, i, v);
    }
  };
  switch (domain_of(x.dtype())) {
    case Domain::Float: run(0.0); break;
    case Domain::Signed: run(int64_t{0}); break;
    case Domain::Unsigned: run(uint64_t{0}); break;
  }
  return out;
}

DType cast_target(const Node& n) {
  if (!n.has_attr("to")) n.fail("attribute 'to' is required");
  int64_t to = n.get_int("to", 0);
  std::optional<DType> t = dtype_from_onnx(static_cast<int32_t>(to));
  if (!t || *t == DType::String) n.fail("cast to ONNX element type " + std::to_string(to) + " is not supported by tcc");
  return *t;
}

// x converted to `to` as Cast node n does: its saturate (opset 19) only
// concerns 8-bit float targets, and Tensor::cast saturates.
Tensor cast_tensor(const Node& n, const Tensor& x, DType to) {
  if (x.dtype() == DType::String) n.fail("casting from string is not supported by tcc");
  if (!is_fp8(to) || x.dtype() == to || n.get_int("saturate", 1) != 0) return x.cast(to);
  Tensor y(to, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data_mut<uint8_t>()[i] = float_to_fp8(static_cast<float>(x.get_f64(i)), to, false);
  return y;
}

// Cast keeps the symbolic contents of integer shape values.
std::optional<Dim> identity_value(const std::vector<Dim>& a) { return a[0]; }

// ---------------------------------------------------------------------------
// Kernel expressions (src/ops/pointwise.h)

bool two_inputs(const Node& n) { return n.num_inputs() == 2; }

int cast_expr(const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
  const DType to = out_dtype(n), from = n.input(0)->type().dtype();
  if (is_fp8(to) && from != to) return cast_to_fp8(b, in[0], from, to, n.get_int("saturate", 1) != 0);
  return b.op(ScalarOp::Cast, to, {in[0]});
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// d(a+b) = g, g
void add_rule(GradContext& c) {
  for (size_t i = 0; i < 2; ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(c.dy(), i));
}

// d(a-b) = g, -g
void sub_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.dy(), 0));
  if (c.wants(1)) c.set(1, c.unbroadcast(c.e().op("Neg", {c.dy()}), 1));
}

// d(a*b) = g*b, g*a
void mul_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(mul(c, c.dy(), c.in(1)), 0));
  if (c.wants(1)) c.set(1, c.unbroadcast(mul(c, c.dy(), c.in(0)), 1));
}

// d(a/b) = g/b, -g*y/b
void div_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.e().op("Div", {c.dy(), c.in(1)}), 0));
  if (c.wants(1)) {
    Value* t = c.e().op("Div", {mul(c, c.dy(), c.out()), c.in(1)});
    c.set(1, c.unbroadcast(c.e().op("Neg", {t}), 1));
  }
}

// Mod, y = a - k b with k = floor(a/b) (fmod 0) or trunc(a/b) (fmod 1), an
// integer that is constant between the jumps at multiples of b: d = g, -g k,
// with k read back from the forward values as round((a - y) / b).
void mod_rule(GradContext& c) {
  if (c.wants(0)) c.set(0, c.unbroadcast(c.dy(), 0));
  if (c.wants(1)) {
    Value* k = c.e().op("Round", {c.e().op("Div", {c.e().op("Sub", {c.in(0), c.out()}), c.in(1)})});
    c.set(1, c.unbroadcast(c.e().op("Neg", {mul(c, c.dy(), k)}), 1));
  }
}

// d(-x) = -g
void neg_rule(GradContext& c) { c.set(0, c.e().op("Neg", {c.dy()})); }

// d(x^p) = g * p * x^(p-1). The exponent gets no gradient: it is a constant
// or a value that does not depend on a parameter.
void pow_rule(GradContext& c) {
  if (c.wants(1)) c.fail("tcc differentiates Pow only in its base; the exponent depends on a parameter");
  Value* p = c.in(1);
  if (p->type().dtype() != c.dtype())
    p = as_dtype(c, p);
  Value* pm1 = c.e().op("Sub", {p, scalar(c, 1.0)});
  Value* d = mul(c, p, c.e().op("Pow", {c.in(0), pm1}));
  c.set(0, c.unbroadcast(mul(c, c.dy(), d), 0));
}

// d relu(x) = g where y > 0, else 0. y > 0 exactly where x > 0; reading y
// rather than x lets the backward keep only the output, so the forward's
// producer and the Relu fuse (a Gemm's epilogue) without saving x.
void relu_rule(GradContext& c) {
  Value* zero = scalar(c, 0.0);
  c.set(0, c.e().op("Where", {c.e().op("Greater", {c.out(), zero}), c.dy(), zero}));
}

// d |x| = g * sign(x)
void abs_rule(GradContext& c) { c.set(0, mul(c, c.dy(), c.e().op("Sign", {c.in(0)}))); }

// Clip: g where min <= x <= max (as torch.clamp), else 0. The bounds get no gradient.
void clip_rule(GradContext& c) {
  if (c.wants(1) || c.wants(2)) c.fail("tcc differentiates Clip in its input only; a bound depends on a parameter");
  const Node& n = c.node();
  Value *lo = nullptr, *hi = nullptr;
  if (n.opset() < 11) {
    if (n.has_attr("min")) lo = scalar(c, n.get_float("min", 0));
    if (n.has_attr("max")) hi = scalar(c, n.get_float("max", 0));
  } else {
    lo = n.has_input(1) ? c.in(1) : nullptr;
    hi = n.has_input(2) ? c.in(2) : nullptr;
  }
  c.set(0, inside(c, c.in(0), lo, hi, true));
}

// Sum: g to every operand; Mean: g / n
void sum_rule(GradContext& c) {
  bool mean = c.node().op_type() == "Mean";
  Value* g = mean ? c.e().op("Div", {c.dy(), scalar(c, static_cast<double>(c.node().num_inputs()))}) : c.dy();
  for (size_t i = 0; i < c.node().num_inputs(); ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(g, i));
}

// Max, Min: g to the operands equal to y, split evenly where several are (as torch.maximum)
void extremum_rule(GradContext& c) {
  Emitter& e = c.e();
  size_t n = c.node().num_inputs();
  std::vector<Value*> hit(n);
  Value* count = nullptr;
  for (size_t i = 0; i < n; ++i) {
    hit[i] = e.op("Equal", {c.in(i), c.out()});
    Value* one = as_dtype(c, hit[i]);
    count = count ? e.op("Add", {count, one}) : one;
  }
  Value* share = e.op("Div", {c.dy(), count});
  for (size_t i = 0; i < n; ++i)
    if (c.wants(i)) c.set(i, c.unbroadcast(e.op("Where", {hit[i], share, scalar(c, 0.0)}), i));
}

// d cast = g cast back to the input's type; CastLike reads only its second
// input's type, so that input's gradient is 0.
void cast_rule(GradContext& c) {
  c.set(0, c.e().op("Cast", {c.dy()}, int_attr("to", static_cast<int64_t>(c.in(0)->type().dtype()))));
  if (c.wants(1)) c.set(1, c.e().zeros_like(c.in(1), c.in(1)->type().dtype()));
}

// d where(cond, a, b) = where(cond, g, 0), where(cond, 0, g); cond has none.
void where_rule(GradContext& c) {
  Value* zero = scalar(c, 0.0);
  if (c.wants(1)) c.set(1, c.unbroadcast(c.e().op("Where", {c.in(0), c.dy(), zero}), 1));
  if (c.wants(2)) c.set(2, c.unbroadcast(c.e().op("Where", {c.in(0), zero, c.dy()}), 2));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// The variadic ops as a chain of their binary op, Sum(a, b, c) -> Add(Add(a,
// b), c), whose pieces fuse into one kernel; Mean divides the sum by the count.
// Max and Min with two operands are a kernel already. A partial result has the
// rank of the widest operand it read, and along each axis the output's dim
// unless every operand it read has 1 there (or lacks the axis): broadcasting
// makes every dim that is not 1 equal to the output's. Needs ranked operands.
bool decompose_variadic(Expansion& e) {
  const Node& n = e.node();
  const std::string& op = n.op_type();
  bool extremum = op == "Max" || op == "Min";
  if (extremum && n.num_inputs() == 2) return false;
  const Type& out = n.output(0)->type();
  if (!out.is_tensor() || !out.has_rank()) return false;
  for (const Value* in : n.inputs())
    if (in == nullptr || !in->type().is_tensor() || !in->type().has_rank() || in->type().rank() > out.rank())
      return false;
  if (n.num_inputs() == 1) {
    e.finish("Identity", "Identity", {n.input(0)});
    return true;
  }
  // Whether every operand read so far has 1 at each of the output's axes.
  std::vector<bool> ones(out.rank(), true);
  size_t rank = 0;
  auto read = [&](const Value* v) {
    const Dims& d = v->type().shape();
    size_t skip = out.rank() - d.size();
    for (size_t k = 0; k < d.size(); ++k)
      if (d[k] != Dim(1)) ones[skip + k] = false;
    rank = std::max(rank, d.size());
  };
  auto partial_type = [&] {
    Dims d;
    for (size_t k = out.rank() - rank; k < out.rank(); ++k) d.push_back(ones[k] ? Dim(1) : out.shape()[k]);
    return Type::tensor(out.dtype(), d);
  };
  std::string binary = extremum ? op : "Add";
  read(n.input(0));
  Value* acc = n.input(0);
  for (size_t i = 1; i < n.num_inputs(); ++i) {
    read(n.input(i));
    std::string piece = binary + (i == 1 ? "" : "_" + std::to_string(i - 1));
    if (i + 1 == n.num_inputs() && op != "Mean") {
      e.finish(piece, binary, {acc, n.input(i)});
      return true;
    }
    acc = e.add(piece, binary, {acc, n.input(i)}, partial_type());
  }
  e.finish("Div", "Div", {acc, e.scalar("count", static_cast<double>(n.num_inputs()), out.dtype())});
  return true;
}

// CastLike(x, like) -> Cast(x) to like's element type.
bool decompose_cast_like(Expansion& e) {
  const Node& n = e.node();
  Value* like = n.input(1);
  if (!like->type().is_tensor() || like->type().dtype() == DType::Undefined) return false;
  std::map<std::string, Attribute> attrs = {{"to", Attribute::of_int(static_cast<int64_t>(like->type().dtype()))}};
  if (n.has_attr("saturate")) attrs["saturate"] = Attribute::of_int(n.get_int("saturate", 1));
  e.finish("Cast", "Cast", {n.input(0)}, attrs);
  return true;
}

void register_arithmetic(OpRegistry& r) {
  add_op(r, "Add", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() + a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_add(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Add)).gradient(add_rule).commutes();
  add_op(r, "Sub", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() - a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_sub(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Sub)).gradient(sub_rule);
  add_op(r, "Mul", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() * a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_mul(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Mul)).gradient(mul_rule).commutes();
  add_op(r, "Div", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return div_values(a[0], a[1]); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return divide(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Div)).gradient(div_rule);
  add_op(r, "Mod", 10, kNumeric,
         [](InferContext& ctx) {
           bool fmod = ctx.node().get_int("fmod", 0) != 0;
           infer_same_dtype([fmod](const std::vector<Dim>& a) { return mod_values(a[0], a[1], fmod); })(ctx);
         },
         [](EvalContext& ctx) {
           bool fmod = ctx.node().get_int("fmod", 0) != 0;
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [fmod](auto a, auto b) { return modulo(a, b, fmod); })};
         }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
        return b.op(n.get_int("fmod", 0) != 0 ? ScalarOp::Fmod : ScalarOp::Mod, out_dtype(n), in);
      }).gradient(mod_rule);
  add_op(r, "Pow", 7, kNumeric, infer_same_dtype(nullptr, false),
         [](EvalContext& ctx) { return std::vector<Tensor>{pow_kernel(ctx)}; }).pointwise_kernel(scalar(ScalarOp::Pow)).gradient(pow_rule).under_autocast(AutocastClass::F32);

  // Variadic.
  auto minmax_value = [](bool is_max) {
    return [is_max](const std::vector<Dim>& a) -> std::optional<Dim> {
      Dim acc = a[0];
      for (size_t k = 1; k < a.size(); ++k) {
        // Either order proven settles it (max(seq, 0) is seq because seq >= 0).
        if (less_equal_values(acc, a[k]) == std::optional<bool>(true)) {
          if (is_max) acc = a[k];
        } else if (less_equal_values(a[k], acc) == std::optional<bool>(true)) {
          if (!is_max) acc = a[k];
        } else {
          return std::nullopt;
        }
      }
      return acc;
    };
  };
  add_op(r, "Max", 8, kNumeric, infer_same_dtype(minmax_value(true)), [](EvalContext& ctx) {
    return std::vector<Tensor>{fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) {
      if constexpr (std::is_same_v<decltype(a), double>)
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return a < b ? b : a;
    })};
  }).pointwise_kernel(scalar(ScalarOp::Max), two_inputs).gradient(extremum_rule).decomposition(decompose_variadic);
  add_op(r, "Min", 8, kNumeric, infer_same_dtype(minmax_value(false)), [](EvalContext& ctx) {
    return std::vector<Tensor>{fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) {
      if constexpr (std::is_same_v<decltype(a), double>)
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return b < a ? b : a;
    })};
  }).pointwise_kernel(scalar(ScalarOp::Min), two_inputs).gradient(extremum_rule).decomposition(decompose_variadic);
  add_op(r, "Sum", 8, kFloatTypes, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return a + b; })};
  }).gradient(sum_rule).decomposition(decompose_variadic);
  add_op(r, "Mean", 8, kFloatTypes, infer_same_dtype(), [](EvalContext& ctx) {
    Tensor sum = fold_numeric(ctx, DType::F64, [](auto a, auto b) { return a + b; });
    Tensor out(ctx.input(0).dtype(), sum.shape());
    double n = static_cast<double>(ctx.num_inputs());
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, sum.get_f64(i) / n);
    return std::vector<Tensor>{out};
  }).gradient(sum_rule).decomposition(decompose_variadic);
}

void register_unary(OpRegistry& r) {
  add_op(r, "Neg", 6, kSignedNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(-a[0].expr()); }),
         [](EvalContext& ctx) {
           // -a, not 0 - a: IEEE negation flips the sign of zero (Neg(+0.0) is -0.0).
           return std::vector<Tensor>{unary_numeric(ctx, [](auto a) {
             if constexpr (std::is_floating_point_v<decltype(a)>) return -a;
             else return wrap_sub(decltype(a){0}, a);
           })};
         }).pointwise_kernel(scalar(ScalarOp::Neg)).gradient(neg_rule);
  add_op(r, "Abs", 6, kNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) {
      if constexpr (std::is_same_v<decltype(a), uint64_t>) return a;
      else return a < 0 ? wrap_sub(decltype(a){0}, a) : a;
    })};
  }).pointwise_kernel(scalar(ScalarOp::Abs)).gradient(abs_rule);
  add_op(r, "Sign", 9, kNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) {
      using T = decltype(a);
      if constexpr (std::is_same_v<T, double>)
        if (std::isnan(a)) return a;
      return a > T{0} ? T{1} : a < T{0} ? static_cast<T>(-1) : T{0};
    })};
  }).pointwise_kernel(scalar(ScalarOp::Sign)).gradient(zero_rule);
  add_op(r, "Relu", 6, kSignedNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) { return a < decltype(a){0} ? decltype(a){0} : a; })};
  })
      .pointwise_kernel(scalar(ScalarOp::Relu))
      .gradient(relu_rule)
      .library_epilogue(kGemmEpilogue | kConvEpilogue, "relu")
      .with_trait(kZeroFloor);
}

void register_compare_and_logic(OpRegistry& r) {
  add_op(r, "Equal", 7, {},
         infer_bool([](const std::vector<Dim>& a) -> std::optional<Dim> {
           std::optional<bool> eq = equal_values(a[0], a[1]);
           if (!eq) return std::nullopt;
           return Dim(*eq ? 1 : 0);
         }),
         [](EvalContext& ctx) { return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return a == b; })}; }).pointwise_kernel(scalar(ScalarOp::Equal)).commutes();
  auto ordered = [&r](const std::string& name, auto pred,
                      std::function<std::optional<bool>(const Dim&, const Dim&)> sym) -> OpDef& {
    return add_op(r, name, name.find("OrEqual") == std::string::npos ? 9 : 12, kAll,
           infer_bool([sym](const std::vector<Dim>& a) -> std::optional<Dim> {
             std::optional<bool> v = sym(a[0], a[1]);
             if (!v) return std::nullopt;
             return Dim(*v ? 1 : 0);
           }),
           [pred](EvalContext& ctx) { return std::vector<Tensor>{compare(ctx, pred)}; });
  };
  auto negate = [](std::optional<bool> b) { return b ? std::optional<bool>(!*b) : std::nullopt; };
  ordered("Less", [](auto a, auto b) { return a < b; },
          [negate](const Dim& a, const Dim& b) { return negate(less_equal_values(b, a)); }).pointwise_kernel(scalar(ScalarOp::Less));
  ordered("LessOrEqual", [](auto a, auto b) { return a <= b; },
          [](const Dim& a, const Dim& b) { return less_equal_values(a, b); }).pointwise_kernel(scalar(ScalarOp::LessOrEqual));
  ordered("Greater", [](auto a, auto b) { return a > b; },
          [negate](const Dim& a, const Dim& b) { return negate(less_equal_values(a, b)); }).pointwise_kernel(scalar(ScalarOp::Greater));
  ordered("GreaterOrEqual", [](auto a, auto b) { return a >= b; },
          [](const Dim& a, const Dim& b) { return less_equal_values(b, a); }).pointwise_kernel(scalar(ScalarOp::GreaterOrEqual));

  const std::vector<DType> kBool = {DType::Bool};
  add_op(r, "Not", 1, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](uint64_t a) { return a == 0 ? uint64_t{1} : uint64_t{0}; })};
  }).pointwise_kernel(scalar(ScalarOp::Not));
  add_op(r, "And", 7, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return a != decltype(a){} && b != decltype(b){}; })};
  }).pointwise_kernel(scalar(ScalarOp::And)).commutes();
  add_op(r, "Or", 7, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return a != decltype(a){} || b != decltype(b){}; })};
  }).pointwise_kernel(scalar(ScalarOp::Or)).commutes();
  add_op(r, "Xor", 7, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return (a != decltype(a){}) != (b != decltype(b){}); })};
  }).pointwise_kernel(scalar(ScalarOp::Xor)).commutes();
}

void register_select_and_cast(OpRegistry& r) {
  add_op(r, "Where", 9, {},
         [](InferContext& ctx) {
           ctx.set_output_type(0, broadcast_type(ctx, input_dtype(ctx, 1)));
           propagate_values(ctx, [](const std::vector<Dim>& a) -> std::optional<Dim> {
             if (!a[0].is_static()) return std::nullopt;
             return a[0].value() != 0 ? a[1] : a[2];
           });
         },
         [](EvalContext& ctx) { return std::vector<Tensor>{where_kernel(ctx)}; }).pointwise_kernel(scalar(ScalarOp::Where)).gradient(where_rule);

  auto infer_cast = [](InferContext& ctx, DType to) {
    const Type& in = ctx.input_type(0);
    ctx.set_output_type(0, in.is_tensor() && in.has_rank() ? Type::tensor(to, in.shape()) : Type::tensor_unranked(to));
    // A cast to i4 or u4 wraps its value, so it keeps no symbolic content.
    if (is_integer(to) && !is_4bit(to) && is_integer(input_dtype(ctx, 0))) propagate_values(ctx, identity_value);
  };
  add_op(r, "Cast", 6, kCastTypes, [infer_cast](InferContext& ctx) { infer_cast(ctx, cast_target(ctx.node())); },
         [](EvalContext& ctx) { return std::vector<Tensor>{cast_tensor(ctx.node(), ctx.input(0), cast_target(ctx.node()))}; })
      .with_trait(kTargetDType)
      .pointwise_kernel(cast_expr)
      .gradient(cast_rule);
  add_op(r, "CastLike", 15, kCastTypes,
         [infer_cast](InferContext& ctx) {
           DType to = input_dtype(ctx, 1);
           if (to == DType::Undefined) ctx.fail("the dtype of input 1 (target_type) must be known");
           infer_cast(ctx, to);
           // Only target_type's dtype matters, so a constant x folds whatever computes target_type.
           const Tensor* x = ctx.input_const(0);
           if (x != nullptr && x->numel() <= kMaxFoldElements) ctx.set_output_const(0, cast_tensor(ctx.node(), *x, to));
         },
         [](EvalContext& ctx) {
           return std::vector<Tensor>{cast_tensor(ctx.node(), ctx.input(0), ctx.input(1).dtype())};
         })
      .with_trait(kTargetDType)
      .gradient(cast_rule)
      .decomposition(decompose_cast_like);

  add_op(r, "Clip", 11, kNumeric,
         [](InferContext& ctx) {
           const Type& in = ctx.input_type(0);
           DType dt = input_dtype(ctx, 0);
           // min and max (opset 11 on) are scalars of the input's type.
           for (size_t i = 1; i < ctx.num_inputs(); ++i) {
             const Type& bound = ctx.input_type(i);
             if (!ctx.has_input(i) || !bound.is_tensor()) continue;
             if (bound.has_rank() && bound.rank() != 0)
               ctx.fail(std::string(i == 1 ? "min" : "max") + " must be a scalar, got " + bound.str());
             if (dt != DType::Undefined && bound.dtype() != DType::Undefined && bound.dtype() != dt)
               ctx.fail(std::string(i == 1 ? "min" : "max") + " must have the input's element type " +
                        std::string(dtype_name(dt)) + ", got " + bound.str());
           }
           ctx.set_output_type(0, in.is_tensor() && in.has_rank() ? Type::tensor(dt, in.shape())
                                                                  : Type::tensor_unranked(dt));
         },
         [](EvalContext& ctx) { return std::vector<Tensor>{clip_kernel(ctx)}; })
      // max(x, min), then min(that, max): max everywhere when min > max, as
      // the reference. A bound is a literal or a scalar the kernel loads.
      .pointwise_kernel(
          [](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
            int x = in[0];
            if (in.size() > 1 && in[1] >= 0) x = b.op(ScalarOp::Max, out_dtype(n), {x, in[1]});
            if (in.size() > 2 && in[2] >= 0) x = b.op(ScalarOp::Min, out_dtype(n), {x, in[2]});
            return x;
          })
      .gradient(clip_rule);
}

}  // namespace

InferFn infer_same_dtype(ValueFn values, bool operands_agree) {
  return [values, operands_agree](InferContext& ctx) {
    DType dt = input_dtype(ctx, 0);
    if (operands_agree) {
      std::vector<size_t> others;
      for (size_t i = 1; i < ctx.num_inputs(); ++i) others.push_back(i);
      require_one_dtype(ctx, 0, others);
    }
    ctx.set_output_type(0, broadcast_type(ctx, dt));
    if (values) propagate_values(ctx, values);
  };
}

InferFn infer_bool(ValueFn values) {
  return [values](InferContext& ctx) {
    ctx.set_output_type(0, broadcast_type(ctx, DType::Bool));
    if (values) propagate_values(ctx, values);
  };
}

OpDef& add_op(OpRegistry& r, const std::string& name, int64_t since, const std::vector<DType>& dtypes, InferFn infer,
              EvalFn eval) {
  return r.add(OpDef{"", name, since, kPointwise, std::move(infer), std::move(eval), dtypes});
}

DType out_dtype(const Node& n) { return n.output(0)->type().dtype(); }

PointwiseFn scalar(ScalarOp op) {
  return [op](const Node& n, ScalarBuilder& b, const std::vector<int>& in) { return b.op(op, out_dtype(n), in); };
}

int cast_to_fp8(ScalarBuilder& b, int x, DType from, DType to, bool saturate) {
  const int q = b.op(ScalarOp::Cast, to, {x});
  if (saturate) return q;
  // The conversion rounds x as a float: past the tie between the largest
  // finite value and the next step it overflows, at the tie too where the
  // largest code is odd (rounding to even leaves the range).
  const Fp8Format f = fp8_format(to);
  const double max = fp8_to_float(static_cast<uint8_t>(f.max_code), to);
  const double tie = max + (max - fp8_to_float(static_cast<uint8_t>(f.max_code - 1), to)) / 2;
  const int xf = from == DType::F32 ? x : b.op(ScalarOp::Cast, DType::F32, {x});
  const int over = b.op((f.max_code & 1u) ? ScalarOp::GreaterOrEqual : ScalarOp::Greater, DType::Bool,
                        {b.op(ScalarOp::Abs, DType::F32, {xf}), b.constant(DType::F32, tie)});
  const double inf = std::numeric_limits<double>::infinity();
  const int special = f.inf ? b.op(ScalarOp::Where, to,
                                   {b.op(ScalarOp::Less, DType::Bool, {xf, b.constant(DType::F32, 0)}),
                                    b.constant(to, -inf), b.constant(to, inf)})
                            : b.constant(to, std::numeric_limits<double>::quiet_NaN());
  return b.op(ScalarOp::Where, to, {over, special, q});
}

Value* inside(GradContext& c, Value* x, Value* lo, Value* hi, bool closed) {
  Emitter& e = c.e();
  Value* above = lo ? e.op(closed ? "GreaterOrEqual" : "Greater", {x, lo}) : nullptr;
  Value* below = hi ? e.op(closed ? "LessOrEqual" : "Less", {x, hi}) : nullptr;
  Value* both = above && below ? e.op("And", {above, below}) : above ? above : below;
  return both ? e.op("Where", {both, c.dy(), scalar(c, 0.0)}) : c.dy();
}

void zero_rule(GradContext& c) { c.set(0, c.e().zeros_like(c.in(0), c.in(0)->type().dtype())); }

void register_elementwise_ops(OpRegistry& r) {
  register_arithmetic(r);
  register_unary(r);
  register_compare_and_logic(r);
  register_select_and_cast(r);
}

}  // namespace tcc
