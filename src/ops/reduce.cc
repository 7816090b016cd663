// The Reduce* ops: ReduceSum, ReduceMean, ReduceMax, ReduceMin and ReduceProd
// have a reduction kernel; ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum
// and ReduceLogSumExp decompose into them and pointwise ops. (The other ops
// that walk an axis are in reduction.cc.)
//
// Kernels accumulate floats in double and integers in int64, so sums and
// products are exact for every integer dtype that fits, and round once to the
// output dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// ---------------------------------------------------------------------------
// Reduce*

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// Which axes a Reduce* node reduces. `known` is false when the axes are a
// runtime input whose value shape inference cannot see.
struct ReduceAxes {
  bool known = true;
  bool noop = false;           // empty axes with noop_with_empty_axes: identity
  std::vector<int64_t> axes;   // empty (and !noop) means every axis
};

// ReduceSum took axes as an input at opset 13, the other Reduce* ops at 18.
bool axes_are_input(const Node& n) { return n.opset() >= (n.op_type() == "ReduceSum" ? 13 : 18); }

ReduceAxes reduce_axes_from(const Node& n, const std::optional<std::vector<int64_t>>& input_axes, bool input_present) {
  ReduceAxes r;
  if (axes_are_input(n) && n.has_attr("axes"))
    n.fail("axes is an input of " + n.op_type() + " from opset " + (n.op_type() == "ReduceSum" ? "13" : "18") +
           ", not an attribute (this model imports opset " + std::to_string(n.opset()) + ")");
  if (!axes_are_input(n)) {
    r.axes = n.get_ints("axes");
    return r;
  }
  if (input_present && !input_axes) {
    r.known = false;
    return r;
  }
  if (input_present) r.axes = *input_axes;
  r.noop = r.axes.empty() && n.get_int("noop_with_empty_axes", 0) != 0;
  return r;
}

// The reduced axes as a sorted set of normalized indices.
std::set<int64_t> normalized_axes(const Node& n, const ReduceAxes& ra, int64_t rank) {
  std::set<int64_t> s;
  if (ra.noop) return s;
  if (ra.axes.empty()) {
    for (int64_t k = 0; k < rank; ++k) s.insert(k);
    return s;
  }
  for (int64_t a : ra.axes)
    if (!s.insert(normalize_axis(n, a, rank)).second) n.fail("axis " + std::to_string(a) + " is repeated in axes");
  return s;
}

void infer_reduce(InferContext& ctx) {
  const Type* xp = ranked_or_unranked_output(ctx);
  if (!xp) return;
  const Type& x = *xp;
  const Node& n = ctx.node();
  bool keepdims = n.get_int("keepdims", 1) != 0;
  bool present = axes_are_input(n) && ctx.has_input(1);
  if (present) require_index_vector(ctx, 1, "axes");
  std::optional<std::vector<int64_t>> in_axes;
  if (present) in_axes = static_values(ctx.input_values(1));
  if (present && !in_axes) {
    if (const Tensor* c = ctx.input_const(1); c && c->numel() == 0) in_axes = std::vector<int64_t>{};
  }
  ReduceAxes ra = reduce_axes_from(n, in_axes, present);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (!ra.known) {
    // The axes are data: each dim is the input's or gone (1 with keepdims) as
    // the data decides, a fresh symbol the host step that reduces binds. The
    // rank survives with keepdims; without, it loses the axes' count where
    // that is static (no axis repeats; none reduces every axis, or none).
    const Type& axes_t = ctx.input_type(1);
    std::optional<int64_t> out_rank;
    if (keepdims) out_rank = rank;
    else if (axes_t.is_tensor() && axes_t.has_rank() && axes_t.rank() == 1 && axes_t.shape()[0].is_static())
      out_rank = axes_t.shape()[0].value() > 0                    ? rank - axes_t.shape()[0].value()
                 : n.get_int("noop_with_empty_axes", 0) != 0 ? rank
                                                             : 0;
    if (!out_rank || *out_rank < 0) {
      ctx.set_output_type(0, Type::tensor_unranked(x.dtype()));
      return;
    }
    Dims out;
    for (int64_t k = 0; k < *out_rank; ++k) out.push_back(ctx.env().fresh("u"));
    ctx.set_output_type(0, Type::tensor(x.dtype(), out));
    return;
  }
  std::set<int64_t> axes = normalized_axes(n, ra, rank);
  Dims out;
  for (int64_t k = 0; k < rank; ++k) {
    if (!axes.count(k)) out.push_back(x.shape()[k]);
    else if (keepdims) out.push_back(Dim(1));
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

std::pair<int64_t, int64_t> int_range(DType t) {
  if (t == DType::Bool) return {0, 1};
  int bits = static_cast<int>(dtype_size(t) * 8);
  if (is_signed(t)) {
    if (bits == 64) return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    return {-(int64_t{1} << (bits - 1)), (int64_t{1} << (bits - 1)) - 1};
  }
  if (bits == 64) return {0, std::numeric_limits<int64_t>::max()};
  return {0, (int64_t{1} << bits) - 1};
}

Tensor reduce_kernel(const EvalContext& ctx, ReduceKind kind) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  bool present = axes_are_input(n) && ctx.has_input(1);
  std::optional<std::vector<int64_t>> in_axes;
  if (present) in_axes = ctx.input(1).to_i64_vector();
  ReduceAxes ra = reduce_axes_from(n, in_axes, present);
  if (ra.noop) return x;
  int64_t rank = static_cast<int64_t>(x.rank());
  std::set<int64_t> axes = normalized_axes(n, ra, rank);
  bool keepdims = n.get_int("keepdims", 1) != 0;

  std::vector<int64_t> kept_shape = x.shape();  // output shape with reduced dims as 1
  std::vector<int64_t> out_shape;
  for (int64_t k = 0; k < rank; ++k) {
    if (axes.count(k)) kept_shape[k] = 1;
    if (!axes.count(k)) out_shape.push_back(x.shape()[k]);
    else if (keepdims) out_shape.push_back(1);
  }
  int64_t out_numel = checked_numel(kept_shape);
  bool exact_int = !is_float(x.dtype()) &&
                   (kind == ReduceKind::Sum || kind == ReduceKind::Prod || kind == ReduceKind::Max ||
                    kind == ReduceKind::Min || kind == ReduceKind::L1 || kind == ReduceKind::SumSquare);

  double inf = std::numeric_limits<double>::infinity();
  auto [imin, imax] = exact_int ? int_range(x.dtype()) : std::pair<int64_t, int64_t>{0, 0};
  std::vector<double> facc(out_numel);
  std::vector<int64_t> iacc(out_numel);
  std::vector<int64_t> count(out_numel, 0);
  for (int64_t o = 0; o < out_numel; ++o) {
    switch (kind) {
      case ReduceKind::Prod: facc[o] = 1; iacc[o] = 1; break;
      case ReduceKind::Max: facc[o] = -inf; iacc[o] = imin; break;
      case ReduceKind::Min: facc[o] = inf; iacc[o] = imax; break;
      default: break;
    }
  }
  // LogSumExp subtracts the per-output maximum first so exp() cannot overflow.
  std::vector<double> shift(out_numel, 0);
  std::vector<int64_t> in_strides = row_major_strides(x.shape());
  std::vector<int64_t> out_strides = row_major_strides(kept_shape);
  auto out_index = [&](int64_t i) {
    int64_t o = 0;
    for (int64_t k = 0; k < rank; ++k) {
      int64_t c = (i / in_strides[k]) % x.shape()[k];
      if (!axes.count(k)) o += c * out_strides[k];
    }
    return o;
  };
  if (kind == ReduceKind::LogSumExp) {
    std::fill(shift.begin(), shift.end(), -inf);
    for (int64_t i = 0; i < x.numel(); ++i) shift[out_index(i)] = std::max(shift[out_index(i)], x.get_f64(i));
    for (double& s : shift)
      if (!std::isfinite(s)) s = 0;
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = out_index(i);
    ++count[o];
    if (exact_int) {
      int64_t v = x.get_i64(i);
      switch (kind) {
        case ReduceKind::Sum: iacc[o] += v; break;
        case ReduceKind::Prod: iacc[o] *= v; break;
        case ReduceKind::Max: iacc[o] = std::max(iacc[o], v); break;
        case ReduceKind::Min: iacc[o] = std::min(iacc[o], v); break;
        case ReduceKind::L1: iacc[o] += v < 0 ? -v : v; break;
        case ReduceKind::SumSquare: iacc[o] += v * v; break;
        default: TCC_CHECK(false) << "reduction kind without an integer path";
      }
      continue;
    }
    double v = x.get_f64(i);
    switch (kind) {
      case ReduceKind::Sum: case ReduceKind::Mean: case ReduceKind::LogSum: facc[o] += v; break;
      case ReduceKind::Prod: facc[o] *= v; break;
      case ReduceKind::Max: facc[o] = std::isnan(v) || std::isnan(facc[o]) ? NAN : std::max(facc[o], v); break;
      case ReduceKind::Min: facc[o] = std::isnan(v) || std::isnan(facc[o]) ? NAN : std::min(facc[o], v); break;
      case ReduceKind::L1: facc[o] += std::fabs(v); break;
      case ReduceKind::L2: case ReduceKind::SumSquare: facc[o] += v * v; break;
      case ReduceKind::LogSumExp: facc[o] += std::exp(v - shift[o]); break;
    }
  }
  Tensor out(x.dtype(), out_shape);
  for (int64_t o = 0; o < out_numel; ++o) {
    if (exact_int) {
      out.set_i64(o, iacc[o]);
      continue;
    }
    double v = facc[o];
    switch (kind) {
      case ReduceKind::Mean: v = v / static_cast<double>(count[o]); break;
      case ReduceKind::L2: v = std::sqrt(v); break;
      case ReduceKind::LogSum: v = std::log(v); break;
      case ReduceKind::LogSumExp: v = std::log(v) + shift[o]; break;
      default: break;
    }
    out.set_f64(o, v);
  }
  return out;
}

// The reductions a generated kernel computes: over literal axes, of any dtype
// but bool (opset 20's ReduceMax / ReduceMin of bool, decomposed over u8).
bool reduces_in_kernel(const Node& n) {
  if (n.input(0)->type().dtype() == DType::Bool) return false;
  return !axes_are_input(n) || !n.has_input(1) || literal_input(n, 1);
}

// The axes input (ReduceSum's from opset 13, the others' from 18) decides which dims the output keeps.
OpDef& add_reduce(OpRegistry& r, const std::string& name, ReduceKind kind, std::vector<DType> dtypes) {
  return r
      .add(OpDef{"", name, 1, kReduction, infer_reduce,
                 [kind](EvalContext& ctx) { return std::vector<Tensor>{reduce_kernel(ctx, kind)}; }, std::move(dtypes)})
      .shape_from_inputs({1});
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// The axes a Reduce* node reduces, normalized; empty when it is a no-op.
std::vector<int64_t> reduced_axes(GradContext& c, size_t rank, bool& noop) {
  const Node& n = c.node();
  bool axes_input = n.opset() >= (n.op_type() == "ReduceSum" ? 13 : 18);
  std::vector<int64_t> axes = axes_input ? (c.in(1) ? c.const_ints(1, "the reduced axes") : std::vector<int64_t>{})
                                         : n.get_ints("axes");
  noop = axes.empty() && n.get_int("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && !noop)
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  for (int64_t& a : axes) a = c.axis(a, rank);
  std::sort(axes.begin(), axes.end());
  return axes;
}

// g with the reduced axes restored (as size 1) and expanded to x's shape.
Value* expand_reduced(GradContext& c, Value* g) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return g;
  if (!c.node().get_int("keepdims", 1) && !axes.empty()) g = c.e().unsqueeze(g, axes);
  return c.e().op("Expand", {g, c.e().shape_of(c.in(0))});
}

// Whether a Reduce* node reduces nothing (no axes, with noop_with_empty_axes):
// the interpreter then returns x, so dx = g whatever the reduction.
bool reduces_nothing(GradContext& c) {
  bool noop = false;
  reduced_axes(c, c.dims(c.in(0)).size(), noop);
  return noop;
}

// d reduce_sum = g broadcast back over the reduced axes
void reduce_sum_rule(GradContext& c) { c.set(0, expand_reduced(c, c.dy())); }

// d reduce_mean = g / (elements per output) broadcast back
void reduce_mean_rule(GradContext& c) { c.set(0, expand_reduced(c, mean_share(c))); }

// d reduce_sum_square = 2 x g (g broadcast back)
void reduce_sum_square_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  c.set(0, mul(c, expand_reduced(c, c.dy()), mul(c, c.in(0), scalar(c, 2.0))));
}

// d reduce_log_sum_exp = g exp(x - y);  d reduce_log_sum = g exp(-y) (y, g broadcast back)
void reduce_log_sum_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  Emitter& e = c.e();
  Value* y = expand_reduced(c, c.out());
  Value* exponent = c.node().op_type() == "ReduceLogSumExp" ? e.op("Sub", {c.in(0), y}) : e.op("Neg", {y});
  c.set(0, mul(c, expand_reduced(c, c.dy()), e.op("Exp", {exponent})));
}

// d reduce_l1 = g sign(x) (g broadcast back)
void reduce_l1_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  c.set(0, mul(c, expand_reduced(c, c.dy()), c.e().op("Sign", {c.in(0)})));
}

// d reduce_l2 = g x / y (y, g broadcast back); 0 where a group is all zeros
// (y = 0, x = 0: the subgradient PyTorch's norm takes), by dividing by 1 there.
void reduce_l2_rule(GradContext& c) {
  if (reduces_nothing(c)) return c.set(0, c.dy());
  Emitter& e = c.e();
  Value* y = expand_reduced(c, c.out());
  Value* safe = e.op("Where", {e.op("Equal", {y, scalar(c, 0.0)}), scalar(c, 1.0), y});
  c.set(0, mul(c, expand_reduced(c, c.dy()), e.op("Div", {c.in(0), safe})));
}

// d reduce_prod / dx_i = the product of the other elements of x_i's group (product_of_others).
void reduce_prod_rule(GradContext& c) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return c.set(0, c.dy());
  Emitter& e = c.e();
  Factors f = factors_of(c, c.in(0));
  auto back = [&](Value* kept) { return e.op("Expand", {kept, e.shape_of(c.in(0))}); };
  Value* nonzero_product = back(e.reduce("ReduceProd", f.safe, axes, true));
  Value* zeros = back(e.reduce("ReduceSum", as_dtype(c, f.is_zero), axes, true));
  c.set(0, mul(c, expand_reduced(c, c.dy()), product_of_others(c, f, nonzero_product, zeros)));
}

// ReduceMax, ReduceMin
void reduce_extremum_rule(GradContext& c) {
  bool noop = false;
  std::vector<int64_t> axes = reduced_axes(c, c.dims(c.in(0)).size(), noop);
  if (noop) return c.set(0, c.dy());
  to_extrema(c, expand_reduced(c, c.dy()), expand_reduced(c, c.out()),
             [&](Value* hit) { return c.e().reduce("ReduceSum", hit, axes, true); });
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// A Reduce* of constant empty axes with noop_with_empty_axes is its input, of
// any dtype: an Identity, since no reduction kernel reduces no axis.
bool decompose_noop_reduce(Expansion& e) {
  std::optional<std::vector<int64_t>> axes = reduction_axes(e.node());
  if (!axes || !axes->empty()) return false;
  e.finish("Identity", "Identity", {e.node().input(0)});
  return true;
}

// ReduceMax / ReduceMin of bool (opset 20) -> the reduction of x as u8, cast
// back: Max is any, Min is all, and over an empty set u8's 0 and 255 give
// False and True, the identities ONNX names. No axes with
// noop_with_empty_axes is the identity (decompose_noop_reduce).
bool decompose_extremum(Expansion& e) {
  if (decompose_noop_reduce(e)) return true;
  const Node& n = e.node();
  if (n.input(0)->type().dtype() != DType::Bool) return false;
  const Type& out = n.output(0)->type();
  if (!out.is_tensor() || !out.has_rank()) return false;
  std::vector<Value*> ins = n.inputs();
  ins[0] = e.cast("Cast", n.input(0), DType::U8);
  Value* bytes = e.add(n.op_type(), n.op_type(), ins, Type::tensor(DType::U8, out.shape()), n.attrs());
  e.finish("Cast.1", "Cast", {bytes}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::Bool))}});
  return true;
}

// ReduceL1 -> ReduceSum(Abs(x)); ReduceSumSquare -> ReduceSum(x * x); ReduceL2
// -> Sqrt of that; ReduceLogSum -> Log(ReduceSum(x)); ReduceLogSumExp -> s +
// Log(ReduceSum(Exp(x - s))) with s = ReduceMax(x), taken as 0 where it is not
// finite, as the reference kernel shifts. One reduction kernel each (two for
// LogSumExp), reducing with kept dims; without keepdims a view drops them. No
// axes with noop_with_empty_axes is the identity (decompose_noop_reduce).
// Needs literal axes and a float x (the integer paths of L1 and SumSquare
// accumulate exactly).
bool decompose_reduce(Expansion& e) {
  if (decompose_noop_reduce(e)) return true;
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr) return false;
  bool present = axes_are_input(n) && n.has_input(1);
  std::optional<std::vector<int64_t>> literal;
  if (present) {
    std::optional<Tensor> c = constant_value(n.input(1));
    if (!c) return false;
    literal = c->to_i64_vector();
  }
  ReduceAxes ra = reduce_axes_from(n, literal, present);
  std::set<int64_t> reduced = normalized_axes(n, ra, static_cast<int64_t>(x->rank()));
  std::vector<int64_t> axes(reduced.begin(), reduced.end());
  Type kept = Expansion::kept_type(*x, axes);
  bool keepdims = n.get_int("keepdims", 1) != 0;
  // The last piece, at the kept type: the node's output, or viewed as it.
  auto last = [&](const std::string& piece, const std::string& op, const std::vector<Value*>& ins) {
    if (keepdims) e.finish(piece, op, ins);
    else e.finish_reshape("Reshape", e.add(piece, op, ins, kept));
  };
  auto sum = [&](Value* v) { return e.reduce("ReduceSum", "ReduceSum", v, axes, kept); };
  const std::string& op = n.op_type();
  Value* in = n.input(0);
  if (op == "ReduceL1" || op == "ReduceSumSquare") {
    Value* terms = op == "ReduceL1" ? e.add("Abs", "Abs", {in}, *x) : e.add("Mul", "Mul", {in, in}, *x);
    if (keepdims) e.finish_reduce("ReduceSum", "ReduceSum", terms, axes);
    else e.finish_reshape("Reshape", sum(terms));
  } else if (op == "ReduceL2") {
    last("Sqrt", "Sqrt", {sum(e.add("Mul", "Mul", {in, in}, *x))});
  } else if (op == "ReduceLogSum") {
    last("Log", "Log", {sum(in)});
  } else {
    Value* top = e.reduce("ReduceMax", "ReduceMax", in, axes, kept);
    Value* inf = e.scalar("inf", std::numeric_limits<double>::infinity(), x->dtype());
    Value* finite = e.add("Less", "Less", {e.add("Abs", "Abs", {top}, kept), inf}, Type::tensor(DType::Bool, kept.shape()));
    Value* shift = e.add("Where", "Where", {finite, top, e.scalar("zero", 0, x->dtype())}, kept);
    Value* exps = e.add("Exp", "Exp", {e.add("Sub", "Sub", {in, shift}, *x)}, *x);
    last("Add", "Add", {e.add("Log", "Log", {sum(exps)}, kept), shift});
  }
  return true;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  add_reduce(r, "ReduceSum", ReduceKind::Sum, kNumeric)
      .kernel_role(KernelRole::Reduction, reduces_in_kernel)
      .decomposition(decompose_noop_reduce)
      .gradient(reduce_sum_rule)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceMean", ReduceKind::Mean, kNumeric)
      .kernel_role(KernelRole::Reduction, reduces_in_kernel)
      .decomposition(decompose_noop_reduce)
      .gradient(reduce_mean_rule);
  std::vector<DType> with_bool = kNumeric;
  with_bool.push_back(DType::Bool);
  add_reduce(r, "ReduceMax", ReduceKind::Max, with_bool)
      .kernel_role(KernelRole::Reduction, reduces_in_kernel)
      .decomposition(decompose_extremum)
      .gradient(reduce_extremum_rule);
  add_reduce(r, "ReduceMin", ReduceKind::Min, with_bool)
      .kernel_role(KernelRole::Reduction, reduces_in_kernel)
      .decomposition(decompose_extremum)
      .gradient(reduce_extremum_rule);
  add_reduce(r, "ReduceProd", ReduceKind::Prod, kNumeric)
      .kernel_role(KernelRole::Reduction, reduces_in_kernel)
      .decomposition(decompose_noop_reduce)
      .gradient(reduce_prod_rule)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceL1", ReduceKind::L1, kNumeric)
      .gradient(reduce_l1_rule)
      .decomposition(decompose_reduce)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceL2", ReduceKind::L2, kNumeric)
      .gradient(reduce_l2_rule)
      .decomposition(decompose_reduce)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceSumSquare", ReduceKind::SumSquare, kNumeric)
      .gradient(reduce_sum_square_rule)
      .decomposition(decompose_reduce)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceLogSum", ReduceKind::LogSum, kNumeric)
      .gradient(reduce_log_sum_rule)
      .decomposition(decompose_reduce)
      .under_autocast(AutocastClass::F32);
  add_reduce(r, "ReduceLogSumExp", ReduceKind::LogSumExp, kNumeric)
      .gradient(reduce_log_sum_rule)
      .decomposition(decompose_reduce)
      .under_autocast(AutocastClass::F32);

}

}  // namespace tcc
