// Pointwise ops: arithmetic, math functions, activations, comparisons, logic,
// Cast, Where and Clip. All broadcast multidirectionally (NumPy rules).
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

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

const std::vector<DType> kFloat = {DType::F32, DType::F16, DType::BF16, DType::F64};
// Predicates read floats and write bools.
const std::vector<DType> kFloatAndBool = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::Bool};
const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                                     DType::I16, DType::I8,  DType::U64,  DType::U32, DType::U16, DType::U8};
const std::vector<DType> kSignedNumeric = {DType::F32, DType::F16, DType::BF16, DType::F64,
                                           DType::I64, DType::I32, DType::I16,  DType::I8};
const std::vector<DType> kAll = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                 DType::I32, DType::I16, DType::I8,   DType::U64, DType::U32,
                                 DType::U16, DType::U8,  DType::Bool};
const std::vector<DType> kInteger = {DType::I64, DType::I32, DType::I16, DType::I8,
                                     DType::U64, DType::U32, DType::U16, DType::U8};

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

// True when e is a product of symbols with a positive coefficient: a size, so
// never negative. Shape values are such products in exporters' chains.
bool known_nonnegative(const SymExpr& e) {
  if (e.is_constant()) return e.constant_value() >= 0;
  if (e.is_symbol()) return true;
  for (const std::string& s : e.symbols()) {
    auto q = e.exact_div(SymExpr::symbol(s));
    if (q) return known_nonnegative(*q);
  }
  return false;
}

using ValueFn = std::function<std::optional<Dim>(const std::vector<Dim>&)>;

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
  if (b.is_static() && b.value() > 0 && known_nonnegative(a.expr())) return Dim(a.expr().floordiv(b.expr()));
  return std::nullopt;
}

// Decides a == b on shape values when it can: equal expressions, two different
// constants, or a size against a negative constant.
std::optional<bool> equal_values(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  if (a.is_static() && a.value() < 0 && known_nonnegative(b.expr())) return false;
  if (b.is_static() && b.value() < 0 && known_nonnegative(a.expr())) return false;
  return std::nullopt;
}

// Decides a <= b on shape values when it can.
std::optional<bool> less_equal_values(const Dim& a, const Dim& b) {
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return a.value() <= b.value();
  if (a.is_static() && a.value() <= 0 && known_nonnegative(b.expr())) return true;
  if (b.is_static() && b.value() < 0 && known_nonnegative(a.expr())) return false;
  return std::nullopt;
}

// The output takes input 0's element type; with `operands_agree` (every op
// but Pow, whose exponent may differ) every input must have it too, as ONNX's
// one type variable T says, or no kernel could be typed.
InferFn infer_same_dtype(ValueFn values = nullptr, bool operands_agree = true) {
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

InferFn infer_bool(ValueFn values = nullptr) {
  return [values](InferContext& ctx) {
    ctx.set_output_type(0, broadcast_type(ctx, DType::Bool));
    if (values) propagate_values(ctx, values);
  };
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

// A unary op on floats, output of the same dtype (or out_dtype when given).
Tensor unary_float(const EvalContext& ctx, const std::function<double(double)>& f,
                   DType out_dtype = DType::Undefined) {
  const Tensor& x = ctx.input(0);
  Tensor out(out_dtype == DType::Undefined ? x.dtype() : out_dtype, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) out.set_f64(i, f(x.get_f64(i)));
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

Tensor bitshift_kernel(const EvalContext& ctx) {
  std::string dir = ctx.node().get_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") ctx.fail("direction must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  Broadcast b = broadcast_of(ctx.node(), {&x, &y});
  Tensor out(x.dtype(), b.shape);
  int64_t width = static_cast<int64_t>(dtype_size(x.dtype()) * 8);
  bool is_signed_type = is_signed(x.dtype());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t v = x.get_i64(b.index[0](i));
    int64_t s = y.get_i64(b.index[1](i));
    // A shift by at least the width, or by a negative amount, shifts everything
    // out (NumPy semantics, which the ONNX tests follow), not masked as in C.
    bool all_out = s < 0 || s >= width;
    int64_t r;
    if (dir == "LEFT") {
      r = all_out ? 0 : static_cast<int64_t>(static_cast<uint64_t>(v) << s);
    } else if (is_signed_type) {
      r = all_out ? (v < 0 ? -1 : 0) : (v >> s);
    } else {
      r = all_out ? 0 : static_cast<int64_t>(static_cast<uint64_t>(v) >> s);
    }
    out.set_i64(i, r);
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

Tensor cast_kernel(const EvalContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::String) ctx.fail("casting from string is not supported by tcc");
  return x.cast(to);
}

// Cast keeps the symbolic contents of integer shape values.
std::optional<Dim> identity_value(const std::vector<Dim>& a) { return a[0]; }

// ---------------------------------------------------------------------------
// Registration helpers

OpDef& add_op(OpRegistry& r, const std::string& name, int64_t since, const std::vector<DType>& dtypes, InferFn infer,
              EvalFn eval) {
  return r.add(OpDef{"", name, since, kPointwise, std::move(infer), std::move(eval), dtypes});
}

OpDef& add_unary_float(OpRegistry& r, const std::string& name, int64_t since,
                       std::function<double(const Node&, double)> f) {
  return add_op(r, name, since, kFloat, infer_same_dtype(), [f](EvalContext& ctx) {
    const Node& n = ctx.node();
    return std::vector<Tensor>{unary_float(ctx, [&](double x) { return f(n, x); })};
  });
}

double attr(const Node& n, const char* name, float def) { return n.get_float(name, def); }

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kPi = 3.14159265358979323846;

// ---------------------------------------------------------------------------
// Kernel expressions (src/ops/pointwise.h)

DType out_dtype(const Node& n) { return n.output(0)->type().dtype(); }

// The op as one scalar instruction over all of its inputs.
PointwiseFn scalar(ScalarOp op) {
  return [op](const Node& n, ScalarBuilder& b, const std::vector<int>& in) { return b.op(op, out_dtype(n), in); };
}

// An expression of input 0 alone, with constants and instructions in the output's dtype.
using Unary = std::function<int(const Node&, ScalarBuilder&, int x, const std::function<int(double)>& k)>;
PointwiseFn unary(Unary f) {
  return [f](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    DType dt = out_dtype(n);
    return f(n, b, in[0], [&](double v) { return b.constant(dt, v); });
  };
}

bool two_inputs(const Node& n) { return n.num_inputs() == 2; }

void register_arithmetic(OpRegistry& r) {
  add_op(r, "Add", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() + a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_add(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Add));
  add_op(r, "Sub", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() - a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_sub(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Sub));
  add_op(r, "Mul", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return Dim(a[0].expr() * a[1].expr()); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return wrap_mul(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Mul));
  add_op(r, "Div", 7, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) { return div_values(a[0], a[1]); }),
         [](EvalContext& ctx) {
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return divide(a, b); })};
         }).pointwise_kernel(scalar(ScalarOp::Div));
  add_op(r, "Mod", 10, kNumeric,
         infer_same_dtype([](const std::vector<Dim>& a) -> std::optional<Dim> {
           if (!a[0].is_static() || !a[1].is_static() || a[1].value() == 0) return std::nullopt;
           return Dim(modulo<int64_t>(a[0].value(), a[1].value(), false));
         }),
         [](EvalContext& ctx) {
           bool fmod = ctx.node().get_int("fmod", 0) != 0;
           return std::vector<Tensor>{
               fold_numeric(ctx, ctx.input(0).dtype(), [fmod](auto a, auto b) { return modulo(a, b, fmod); })};
         }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
        return b.op(n.get_int("fmod", 0) != 0 ? ScalarOp::Fmod : ScalarOp::Mod, out_dtype(n), in);
      });
  add_op(r, "Pow", 7, kNumeric, infer_same_dtype(nullptr, false),
         [](EvalContext& ctx) { return std::vector<Tensor>{pow_kernel(ctx)}; }).pointwise_kernel(scalar(ScalarOp::Pow));
  add_op(r, "BitShift", 11, kInteger, infer_same_dtype(),
         [](EvalContext& ctx) { return std::vector<Tensor>{bitshift_kernel(ctx)}; });

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
  }).pointwise_kernel(scalar(ScalarOp::Max), two_inputs);
  add_op(r, "Min", 8, kNumeric, infer_same_dtype(minmax_value(false)), [](EvalContext& ctx) {
    return std::vector<Tensor>{fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) {
      if constexpr (std::is_same_v<decltype(a), double>)
        if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
      return b < a ? b : a;
    })};
  }).pointwise_kernel(scalar(ScalarOp::Min), two_inputs);
  add_op(r, "Sum", 8, kFloat, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{fold_numeric(ctx, ctx.input(0).dtype(), [](auto a, auto b) { return a + b; })};
  });
  add_op(r, "Mean", 8, kFloat, infer_same_dtype(), [](EvalContext& ctx) {
    Tensor sum = fold_numeric(ctx, DType::F64, [](auto a, auto b) { return a + b; });
    Tensor out(ctx.input(0).dtype(), sum.shape());
    double n = static_cast<double>(ctx.num_inputs());
    for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, sum.get_f64(i) / n);
    return std::vector<Tensor>{out};
  });
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
         }).pointwise_kernel(scalar(ScalarOp::Neg));
  add_op(r, "Abs", 6, kNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) {
      if constexpr (std::is_same_v<decltype(a), uint64_t>) return a;
      else return a < 0 ? wrap_sub(decltype(a){0}, a) : a;
    })};
  }).pointwise_kernel(scalar(ScalarOp::Abs));
  add_op(r, "Sign", 9, kNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) {
      using T = decltype(a);
      if constexpr (std::is_same_v<T, double>)
        if (std::isnan(a)) return a;
      return a > T{0} ? T{1} : a < T{0} ? static_cast<T>(-1) : T{0};
    })};
  }).pointwise_kernel(scalar(ScalarOp::Sign));
  add_op(r, "Relu", 6, kSignedNumeric, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_numeric(ctx, [](auto a) { return a < decltype(a){0} ? decltype(a){0} : a; })};
  }).pointwise_kernel(scalar(ScalarOp::Relu));

  add_unary_float(r, "Sqrt", 6, [](const Node&, double x) { return std::sqrt(x); }).pointwise_kernel(scalar(ScalarOp::Sqrt));
  add_unary_float(r, "Reciprocal", 6, [](const Node&, double x) { return 1.0 / x; }).pointwise_kernel(scalar(ScalarOp::Reciprocal));
  add_unary_float(r, "Exp", 6, [](const Node&, double x) { return std::exp(x); }).pointwise_kernel(scalar(ScalarOp::Exp));
  add_unary_float(r, "Log", 6, [](const Node&, double x) { return std::log(x); }).pointwise_kernel(scalar(ScalarOp::Log));
  add_unary_float(r, "Erf", 9, [](const Node&, double x) { return std::erf(x); }).pointwise_kernel(scalar(ScalarOp::Erf));
  add_unary_float(r, "Tanh", 6, [](const Node&, double x) { return std::tanh(x); }).pointwise_kernel(scalar(ScalarOp::Tanh));
  add_unary_float(r, "Sin", 7, [](const Node&, double x) { return std::sin(x); }).pointwise_kernel(scalar(ScalarOp::Sin));
  add_unary_float(r, "Cos", 7, [](const Node&, double x) { return std::cos(x); }).pointwise_kernel(scalar(ScalarOp::Cos));
  add_unary_float(r, "Floor", 6, [](const Node&, double x) { return std::floor(x); }).pointwise_kernel(scalar(ScalarOp::Floor));
  add_unary_float(r, "Ceil", 6, [](const Node&, double x) { return std::ceil(x); }).pointwise_kernel(scalar(ScalarOp::Ceil));
  // Halves round to even (the default rounding mode), as ONNX Round specifies.
  add_unary_float(r, "Round", 11, [](const Node&, double x) { return std::nearbyint(x); }).pointwise_kernel(scalar(ScalarOp::Round));
  add_unary_float(r, "Sigmoid", 6, [](const Node&, double x) { return 1.0 / (1.0 + std::exp(-x)); }).pointwise_kernel(scalar(ScalarOp::Sigmoid));
  add_unary_float(r, "Softplus", 1, [](const Node&, double x) {
    // log(1 + e^x) without overflow for large x.
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    // max(x, 0) + log(1 + exp(-|x|)): exp never overflows.
    DType dt = out_dtype(n);
    int e = b.op(ScalarOp::Exp, dt, {b.op(ScalarOp::Neg, dt, {b.op(ScalarOp::Abs, dt, {x})})});
    int tail = b.op(ScalarOp::Log, dt, {b.op(ScalarOp::Add, dt, {k(1), e})});
    return b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Max, dt, {x, k(0)}), tail});
  }));
  add_unary_float(r, "HardSigmoid", 6, [](const Node& n, double x) {
    return std::clamp(attr(n, "alpha", 0.2f) * x + attr(n, "beta", 0.5f), 0.0, 1.0);
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int y = b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 0.2f)), x}), k(attr(n, "beta", 0.5f))});
    return b.op(ScalarOp::Min, dt, {b.op(ScalarOp::Max, dt, {y, k(0)}), k(1)});
  }));
  // x * HardSigmoid(x) with alpha 1/6 and beta 1/2 (MobileNetV3's activation).
  add_unary_float(r, "HardSwish", 14, [](const Node&, double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int gate = b.op(ScalarOp::Add, dt, {b.op(ScalarOp::Div, dt, {x, k(6)}), k(0.5)});
    return b.op(ScalarOp::Mul, dt, {x, b.op(ScalarOp::Min, dt, {b.op(ScalarOp::Max, dt, {gate, k(0)}), k(1)})});
  }));
  add_unary_float(r, "LeakyRelu", 6, [](const Node& n, double x) { return x < 0 ? attr(n, "alpha", 0.01f) * x : x; }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int negative = b.op(ScalarOp::Less, DType::Bool, {x, k(0)});
    return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 0.01f)), x}), x});
  }));
  add_unary_float(r, "Elu", 6, [](const Node& n, double x) {
    return x < 0 ? attr(n, "alpha", 1.0f) * std::expm1(x) : x;
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    DType dt = out_dtype(n);
    int negative = b.op(ScalarOp::Less, DType::Bool, {x, k(0)});
    int em1 = b.op(ScalarOp::Sub, dt, {b.op(ScalarOp::Exp, dt, {x}), k(1)});
    return b.op(ScalarOp::Where, dt, {negative, b.op(ScalarOp::Mul, dt, {k(attr(n, "alpha", 1.0f)), em1}), x});
  }));
  add_unary_float(r, "Selu", 6, [](const Node& n, double x) {
    double alpha = attr(n, "alpha", 1.67326319217681884765625f);
    double gamma = attr(n, "gamma", 1.05070102214813232421875f);
    return x > 0 ? gamma * x : gamma * alpha * std::expm1(x);
  });
  add_unary_float(r, "Gelu", 20, [](const Node& n, double x) {
    std::string approx = n.get_string("approximate", "none");
    if (approx == "tanh")
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    if (approx != "none") n.fail("approximate must be \"none\" or \"tanh\", got \"" + approx + "\"");
    return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
  }).pointwise_kernel(unary([](const Node& n, ScalarBuilder& b, int x, const auto& k) {
    // 0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3)) for the erf.
    DType dt = out_dtype(n);
    auto bin = [&](ScalarOp o, int l, int r) { return b.op(o, dt, {l, r}); };
    int inner;
    if (n.get_string("approximate", "none") == "tanh") {
      int x3 = bin(ScalarOp::Mul, bin(ScalarOp::Mul, x, x), x);
      int sum = bin(ScalarOp::Add, x, bin(ScalarOp::Mul, k(0.044715), x3));
      inner = b.op(ScalarOp::Tanh, dt, {bin(ScalarOp::Mul, k(std::sqrt(2.0 / kPi)), sum)});
    } else {
      inner = b.op(ScalarOp::Erf, dt, {bin(ScalarOp::Div, x, k(kSqrt2))});
    }
    int half_x = bin(ScalarOp::Mul, k(0.5), x);
    int one_plus = bin(ScalarOp::Add, k(1), inner);
    return bin(ScalarOp::Mul, half_x, one_plus);
  }));

  add_op(r, "IsNaN", 9, kFloatAndBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{unary_float(ctx, [](double x) { return std::isnan(x) ? 1.0 : 0.0; }, DType::Bool)};
  }).pointwise_kernel(scalar(ScalarOp::IsNaN));
  add_op(r, "IsInf", 10, kFloatAndBool, infer_bool(), [](EvalContext& ctx) {
    bool neg = ctx.node().get_int("detect_negative", 1) != 0;
    bool pos = ctx.node().get_int("detect_positive", 1) != 0;
    return std::vector<Tensor>{unary_float(
        ctx, [&](double x) { return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg)) ? 1.0 : 0.0; },
        DType::Bool)};
  }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    // x == +inf and / or x == -inf, as the attributes ask.
    DType xt = n.input(0)->type().dtype();
    int found = -1;
    for (auto [attr_name, inf] : {std::pair{"detect_positive", INFINITY}, std::pair{"detect_negative", -INFINITY}}) {
      if (n.get_int(attr_name, 1) == 0) continue;
      int is = b.op(ScalarOp::Equal, DType::Bool, {in[0], b.constant(xt, inf)});
      found = found < 0 ? is : b.op(ScalarOp::Or, DType::Bool, {found, is});
    }
    return found >= 0 ? found : b.constant(DType::Bool, 0);
  });
}

void register_compare_and_logic(OpRegistry& r) {
  add_op(r, "Equal", 7, {},
         infer_bool([](const std::vector<Dim>& a) -> std::optional<Dim> {
           std::optional<bool> eq = equal_values(a[0], a[1]);
           if (!eq) return std::nullopt;
           return Dim(*eq ? 1 : 0);
         }),
         [](EvalContext& ctx) { return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return a == b; })}; }).pointwise_kernel(scalar(ScalarOp::Equal));
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
  }).pointwise_kernel(scalar(ScalarOp::And));
  add_op(r, "Or", 7, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return a != decltype(a){} || b != decltype(b){}; })};
  }).pointwise_kernel(scalar(ScalarOp::Or));
  add_op(r, "Xor", 7, kBool, infer_bool(), [](EvalContext& ctx) {
    return std::vector<Tensor>{compare(ctx, [](auto a, auto b) { return (a != decltype(a){}) != (b != decltype(b){}); })};
  }).pointwise_kernel(scalar(ScalarOp::Xor));
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
         [](EvalContext& ctx) { return std::vector<Tensor>{where_kernel(ctx)}; }).pointwise_kernel(scalar(ScalarOp::Where));

  auto infer_cast = [](InferContext& ctx, DType to) {
    const Type& in = ctx.input_type(0);
    ctx.set_output_type(0, in.is_tensor() && in.has_rank() ? Type::tensor(to, in.shape()) : Type::tensor_unranked(to));
    if (is_integer(to) && is_integer(input_dtype(ctx, 0))) propagate_values(ctx, identity_value);
  };
  add_op(r, "Cast", 6, kAll, [infer_cast](InferContext& ctx) { infer_cast(ctx, cast_target(ctx.node())); },
         [](EvalContext& ctx) { return std::vector<Tensor>{cast_kernel(ctx, cast_target(ctx.node()))}; }).pointwise_kernel(scalar(ScalarOp::Cast));
  add_op(r, "CastLike", 15, kAll,
         [infer_cast](InferContext& ctx) {
           DType to = input_dtype(ctx, 1);
           if (to == DType::Undefined) ctx.fail("the dtype of input 1 (target_type) must be known");
           infer_cast(ctx, to);
         },
         [](EvalContext& ctx) { return std::vector<Tensor>{cast_kernel(ctx, ctx.input(1).dtype())}; });

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
      .pointwise_kernel(
          [](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
            int x = in[0];
            if (in.size() > 1 && in[1] >= 0) x = b.op(ScalarOp::Max, out_dtype(n), {x, in[1]});
            if (in.size() > 2 && in[2] >= 0) x = b.op(ScalarOp::Min, out_dtype(n), {x, in[2]});
            return x;
          },
          [](const Node& n) {
            for (size_t i = 1; i < n.num_inputs(); ++i)
              if (!literal_input(n, i)) return false;
            return true;
          });
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  register_arithmetic(r);
  register_unary(r);
  register_compare_and_logic(r);
  register_select_and_cast(r);
}

}  // namespace tcc
