// Ops whose output sizes depend on input values: NonZero, Unique, TopK.
//
// A size that depends on tensor data gets a fresh symbol ("u0", "u1", ...),
// like torch's unbacked symbols, so later shapes stay symbolic in it. TopK is
// data-dependent only when its k is not known at compile time; its rule uses
// k's symbolic value when there is one (k = Gather(Shape(x), 1) gives `seq`).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// Three-way comparison of elements a and b of t: strings by text, floats by
// value (NaN above everything, equal to NaN), integers exactly.
int compare_elements(const Tensor& t, int64_t a, int64_t b) {
  if (t.dtype() == DType::String) {
    int c = t.strings()[a].compare(t.strings()[b]);
    return (c > 0) - (c < 0);
  }
  if (is_float(t.dtype())) {
    double x = t.get_f64(a), y = t.get_f64(b);
    bool xn = std::isnan(x), yn = std::isnan(y);
    if (xn || yn) return static_cast<int>(xn) - static_cast<int>(yn);
    return (x > y) - (x < y);
  }
  if (t.dtype() == DType::U64) {
    uint64_t x = static_cast<uint64_t>(t.get_i64(a)), y = static_cast<uint64_t>(t.get_i64(b));
    return (x > y) - (x < y);
  }
  int64_t x = t.get_i64(a), y = t.get_i64(b);
  return (x > y) - (x < y);
}

// ---- NonZero ----------------------------------------------------------------

std::vector<int64_t> nonzero_positions(const Tensor& t) {
  std::vector<int64_t> pos;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.get_f64(i) != 0) pos.push_back(i);
  return pos;
}

void infer_nonzero(InferContext& ctx) {
  const Type& in = ctx.input_type(0);
  const Tensor* c = ctx.input_const(0);
  Dim count = c ? Dim(static_cast<int64_t>(nonzero_positions(*c).size())) : ctx.env().fresh("u");
  Dim rank = in.has_rank() ? Dim(static_cast<int64_t>(in.rank())) : Dim::unknown();
  ctx.set_output_type(0, Type::tensor(DType::I64, {rank, count}));
}

std::vector<Tensor> eval_nonzero(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> pos = nonzero_positions(in);
  int64_t n = static_cast<int64_t>(pos.size()), r = static_cast<int64_t>(in.rank());
  Tensor out(DType::I64, {r, n});
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> idx = unravel_index(pos[j], in.shape());
    for (int64_t k = 0; k < r; ++k) out.set_i64(k * n + j, idx[k]);
  }
  return {out};
}

// ---- Unique -----------------------------------------------------------------

void infer_unique(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  Dim u = ctx.env().fresh("u");
  Dims y, inverse;
  if (ctx.node().has_attr("axis")) {
    if (!inputs_ranked(ctx, {0})) return;
    const Type& t = ctx.input_type(0);
    int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(t.rank()));
    y = t.shape();
    y[axis] = u;
    inverse = {t.shape()[axis]};
  } else {
    y = {u};
    inverse = {x.has_rank() ? dims_product(x.shape()) : Dim::unknown()};
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), y));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::I64, {u}));
  if (ctx.num_outputs() > 2) ctx.set_output_type(2, Type::tensor(DType::I64, inverse));
  if (ctx.num_outputs() > 3) ctx.set_output_type(3, Type::tensor(DType::I64, {u}));
}

// Unique over the slices of x along `axis` (or over all elements): groups
// equal slices, in ascending order when sorted, else by first occurrence.
std::vector<Tensor> eval_unique(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  bool has_axis = ctx.node().has_attr("axis");
  std::vector<int64_t> shape = has_axis ? x.shape() : std::vector<int64_t>{x.numel()};
  int64_t axis = has_axis ? normalize_axis(ctx.node(), ctx.node().get_int("axis", 0), static_cast<int64_t>(x.rank())) : 0;
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
  for (size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  auto at = [&](int64_t slice, int64_t o, int64_t i) { return (o * n + slice) * inner + i; };
  auto cmp_slices = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        if (int c = compare_elements(x, at(a, o, i), at(b, o, i))) return c;
    return 0;
  };
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp_slices(a, b) < 0; });
  // Groups of equal slices; stability puts each group's first occurrence first.
  std::vector<std::vector<int64_t>> groups;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || cmp_slices(order[i - 1], order[i]) != 0) groups.emplace_back();
    groups.back().push_back(order[i]);
  }
  if (ctx.node().get_int("sorted", 1) == 0)
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  int64_t u = static_cast<int64_t>(groups.size());
  std::vector<int64_t> y_shape = shape;
  y_shape[axis] = u;
  Tensor y(x.dtype(), y_shape), indices(DType::I64, {u}), inverse(DType::I64, {n}), counts(DType::I64, {u});
  for (int64_t g = 0; g < u; ++g) {
    int64_t first = groups[g][0];
    indices.set_i64(g, first);
    counts.set_i64(g, static_cast<int64_t>(groups[g].size()));
    for (int64_t member : groups[g]) inverse.set_i64(member, g);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) copy_element(y, (o * u + g) * inner + i, x, at(first, o, i));
  }
  std::vector<Tensor> outs = {y, indices, inverse, counts};
  outs.resize(ctx.num_outputs());
  return outs;
}

// ---- TopK -------------------------------------------------------------------

void infer_topk(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), static_cast<int64_t>(x.rank()));
  const Dims* kv = ctx.input_values(1);
  Dim k = kv && kv->size() == 1 && !(*kv)[0].is_unknown() ? ctx.env().canonical((*kv)[0]) : ctx.env().fresh("u");
  const Dim& d = x.shape()[axis];
  if (k.is_static() && (k.value() < 0 || (d.is_static() && k.value() > d.value())))
    ctx.fail("k = " + k.str() + " is out of range for axis " + std::to_string(axis) + " of " + x.str());
  Dims out = x.shape();
  out[axis] = k;
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
  if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::I64, out));
}

// Per slice along the axis: the k largest (or smallest) elements, ties broken
// by the lower index as ONNX specifies; returned in that sorted order also when
// sorted = 0, which leaves the order to the implementation.
std::vector<Tensor> eval_topk(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& kt = ctx.input(1);
  if (kt.numel() != 1) ctx.fail("K must hold exactly one element, got shape " + shape_str(kt.shape()));
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = normalize_axis(ctx.node(), ctx.node().get_int("axis", -1), r);
  int64_t d = x.shape()[axis], k = kt.get_i64(0);
  if (k < 0 || k > d)
    ctx.fail("k = " + std::to_string(k) + " is out of range for axis " + std::to_string(axis) + " of size " +
             std::to_string(d));
  bool largest = ctx.node().get_int("largest", 1) != 0;
  int64_t outer = 1, inner = 1;
  for (int64_t j = 0; j < axis; ++j) outer *= x.shape()[j];
  for (int64_t j = axis + 1; j < r; ++j) inner *= x.shape()[j];
  std::vector<int64_t> shape = x.shape();
  shape[axis] = k;
  Tensor values(x.dtype(), shape), indices(DType::I64, shape);
  std::vector<int64_t> order(d);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto flat = [&](int64_t j) { return (o * d + j) * inner + i; };
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        int c = compare_elements(x, flat(a), flat(b));
        return largest ? c > 0 : c < 0;
      });
      for (int64_t j = 0; j < k; ++j) {
        int64_t dst = (o * k + j) * inner + i;
        copy_element(values, dst, x, flat(order[j]));
        indices.set_i64(dst, order[j]);
      }
    }
  return {values, indices};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// NonZero(x) of rank r -> kernels around one small host step, the two-phase
// call a size the data decides needs: the flags x != 0 (Not(Equal), or x
// itself for bools), their running count (CumSum) and total (ReduceSum),
// [r, total] (Mul, Add), and ConstantOfShape of it -- the host step, which
// reads two integers back and binds the output's count symbol, so the
// runtime sizes what follows. Each flagged element then scatters its
// coordinates (broadcast ranges, one per axis) to column count - 1 of a zero
// matrix with one more column, where unflagged elements land
// (ScatterElements), and a Slice drops that column. Declines for rank 0 and
// unknown dims.
bool decompose_nonzero(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& y = n.output(0)->type();
  if (!x.is_tensor() || !x.fully_shaped() || x.rank() == 0 || !y.is_tensor() || !y.fully_shaped()) return false;
  const Dims& dims = x.shape();
  const auto r = static_cast<int64_t>(dims.size());
  const Dim count = y.shape()[1], total = dims_product(dims);
  auto tensor = [](DType t, Dims shape) { return Type::tensor(t, std::move(shape)); };
  Value* flags = n.input(0);
  if (x.dtype() != DType::Bool) {
    Value* equal = e.add("Equal", "Equal", {flags, e.scalar("zero", 0, x.dtype())}, tensor(DType::Bool, dims));
    flags = e.add("Not", "Not", {equal}, tensor(DType::Bool, dims));
  }
  Value* flat = e.reshape("Reshape_flags", flags, {total});
  Value* ones = e.cast("Cast", flat, DType::I64);
  Value* running = e.add("CumSum", "CumSum", {ones, e.i64("axis", 0)}, tensor(DType::I64, {total}));
  Value* found = e.reduce("ReduceSum", "ReduceSum", ones, {0}, tensor(DType::I64, {1}));
  // [r, total] as r * (1, 0) + total * (0, 1), on a kernel.
  Tensor unit(DType::I64, {2}), rank_row(DType::I64, {2});
  unit.set_i64(1, 1);
  rank_row.set_i64(0, r);
  Value* placed = e.add("Mul_shape", "Mul", {found, e.constant("unit", unit)}, tensor(DType::I64, {2}));
  Value* shape = e.add("Add_shape", "Add", {placed, e.constant("rank", rank_row)}, tensor(DType::I64, {2}));
  Tensor zero(DType::I64, {1});
  Value* zeros = e.add("ConstantOfShape", "ConstantOfShape", {shape}, tensor(DType::I64, {Dim(r), count}),
                       {{"value", Attribute::of_tensor(zero)}});
  const Dim wider(count.expr() + SymExpr::constant(1));
  // Expanded from a scalar, not a constant: the Concat kernel reads no single-element constant (rank 1).
  Value* spare = e.expand("Expand_spare", e.scalar("spare", 0, DType::I64), {Dim(r), Dim(1)});
  Value* data = e.add("Concat_spare", "Concat", {zeros, spare}, tensor(DType::I64, {Dim(r), wider}),
                      {{"axis", Attribute::of_int(1)}});
  Value* last = e.add("Sub", "Sub", {running, e.scalar("one", 1, DType::I64)}, tensor(DType::I64, {total}));
  Value* column = e.add("Where", "Where", {flat, last, found}, tensor(DType::I64, {total}));
  Value* columns = e.expand("Expand_columns", e.reshape("Reshape_columns", column, {Dim(1), total}), {Dim(r), total});
  std::vector<Value*> coordinates;
  for (int64_t a = 0; a < r; ++a) {
    Dims along(dims.size(), Dim(1));
    along[static_cast<size_t>(a)] = dims[static_cast<size_t>(a)];
    const std::string axis = std::to_string(a);
    Value* index =
        e.reshape("Reshape_axis" + axis, e.range("Range_axis" + axis, 0, dims[static_cast<size_t>(a)]), along);
    coordinates.push_back(e.reshape("Reshape_coordinates" + axis, e.expand("Expand_axis" + axis, index, dims),
                                    {Dim(1), total}));
  }
  Value* updates = r == 1 ? coordinates.front()
                          : e.add("Concat_coordinates", "Concat", coordinates, tensor(DType::I64, {Dim(r), total}),
                                  {{"axis", Attribute::of_int(0)}});
  Value* scattered = e.add("ScatterElements", "ScatterElements", {data, columns, updates},
                           tensor(DType::I64, {Dim(r), wider}), {{"axis", Attribute::of_int(1)}});
  e.finish("Slice", "Slice", {scattered, e.i64("starts", 0), e.i64("ends", -1), e.i64("axes", 1)});
  return true;
}

// Unique compares its slices pairwise on kernels: at most kUniquePairElements
// element comparisons ([n, n, slice]), of slices of at most
// kUniqueSliceElements elements, whose comparisons weigh as bits of an i64.
constexpr int64_t kUniquePairElements = int64_t{1} << 24;
constexpr int64_t kUniqueSliceElements = 62;

// Unique(x) -> kernels around one small host step, as NonZero: the n slices
// along the axis (or the elements) compared pairwise, S[a, b] the sign of
// slice a against slice b (each element's Greater minus Less, NaN above
// every number and equal to NaN, weighted by 2^(L-1-l) and summed, so the
// first difference decides). A slice is a first occurrence where no earlier
// one equals it; its group's size is how many equal it. The inverse index is
// the number of first occurrences below a's slice (sorted) or before its
// group's first occurrence (the least equal index; sorted = 0). Their count
// is read back by a ConstantOfShape of [2, count], the host step that binds
// the output's size; each first occurrence scatters its index and its
// group's size to its group's place (the rest to a spare column, sliced off),
// and Y gathers the first occurrences' slices. Declines strings, bools,
// unknown or symbolic dims, slices or comparisons past the limits above, and
// autodiff (Unique has no gradient).
bool decompose_unique(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& y = n.output(0)->type();
  if (e.differentiates() || !x.is_tensor() || !x.fully_shaped() || x.rank() == 0 || !y.is_tensor() ||
      !y.fully_shaped() || x.dtype() == DType::String || x.dtype() == DType::Bool)
    return false;
  std::vector<int64_t> shape;
  for (const Dim& d : x.shape()) {
    if (!d.is_static()) return false;
    shape.push_back(d.value());
  }
  const bool has_axis = n.has_attr("axis");
  const int64_t axis = has_axis ? normalize_axis(n, n.get_int("axis", 0), static_cast<int64_t>(x.rank())) : 0;
  if (!has_axis) shape = {product(shape)};
  int64_t outer = 1, inner = 1;
  const int64_t count = shape[axis];
  for (int64_t k = 0; k < axis; ++k) outer *= shape[k];
  for (size_t k = axis + 1; k < shape.size(); ++k) inner *= shape[k];
  const int64_t slice = outer * inner;
  const Dim u = y.shape()[has_axis ? axis : 0];
  if (!e.data_dependent(u) || slice > kUniqueSliceElements || count * count * slice > kUniquePairElements) return false;
  auto tensor = [](DType t, Dims d) { return Type::tensor(t, std::move(d)); };
  const Dim c(count), l(slice), one(1);
  // The slices as rows [n, L], in f64 when floats (exact for each float dtype).
  Value* rows = e.cast("Cast_x", n.input(0), is_float(x.dtype()) ? DType::F64 : x.dtype());
  const DType dt = rows->type().dtype();
  if (outer > 1) {
    rows = e.reshape("Reshape_slices", rows, {Dim(outer), c, Dim(inner)});
    rows = e.add("Transpose_slices", "Transpose", {rows}, tensor(dt, {c, Dim(outer), Dim(inner)}),
                 {{"perm", Attribute::of_ints({1, 0, 2})}});
  }
  Value* left = e.reshape("Reshape_left", rows, {c, one, l});
  Value* right = e.reshape("Reshape_right", rows, {one, c, l});
  const Dims pairs = {c, c, l};
  Value* above = e.add("Greater", "Greater", {left, right}, tensor(DType::Bool, pairs));
  Value* below = e.add("Less", "Less", {left, right}, tensor(DType::Bool, pairs));
  if (is_float(x.dtype())) {
    Value* nan_left = e.add("IsNaN_left", "IsNaN", {left}, tensor(DType::Bool, {c, one, l}));
    Value* nan_right = e.add("IsNaN_right", "IsNaN", {right}, tensor(DType::Bool, {one, c, l}));
    auto only = [&](const std::string& piece, Value* a, Value* b) {
      Value* not_b = e.add("Not_" + piece, "Not", {b}, b->type());
      return e.add("And_" + piece, "And", {a, not_b}, tensor(DType::Bool, pairs));
    };
    above = e.add("Or_above", "Or", {above, only("nan_left", nan_left, nan_right)}, tensor(DType::Bool, pairs));
    below = e.add("Or_below", "Or", {below, only("nan_right", nan_right, nan_left)}, tensor(DType::Bool, pairs));
  }
  Value* sign = e.add("Sub_sign", "Sub",
                      {e.cast("Cast_above", above, DType::I64), e.cast("Cast_below", below, DType::I64)},
                      tensor(DType::I64, pairs));
  if (slice > 1) {
    std::vector<double> bits;
    for (int64_t k = 0; k < slice; ++k) bits.push_back(static_cast<double>(int64_t{1} << (slice - 1 - k)));
    sign = e.add("Mul_bits", "Mul", {sign, e.numbers("bits", bits, {slice}, DType::I64)}, tensor(DType::I64, pairs));
    sign = e.reduce("ReduceSum_sign", "ReduceSum", sign, {2}, tensor(DType::I64, {c, c, one}));
  }
  Value* order = e.reshape("Reshape_order", sign, {c, c});
  Value* zero = e.scalar("zero", 0, DType::I64);
  Value* equal = e.add("Equal", "Equal", {order, zero}, tensor(DType::Bool, {c, c}));
  Value* equal_count = e.cast("Cast_equal", equal, DType::I64);
  // earlier[a, b]: b < a.
  Value* index_row = e.reshape("Reshape_index_row", e.range("Range", 0, c), {one, c});
  Value* index_column = e.reshape("Reshape_index_column", index_row, {c, one});
  Value* earlier = e.add("Less_earlier", "Less", {index_row, index_column}, tensor(DType::Bool, {c, c}));
  Value* repeated = e.add("And_repeats", "And", {equal, earlier}, tensor(DType::Bool, {c, c}));
  Value* repeats = e.reduce("ReduceSum_repeats", "ReduceSum", e.cast("Cast_repeats", repeated, DType::I64), {1},
                            tensor(DType::I64, {c, one}));
  Value* first = e.add("Equal_first", "Equal", {repeats, zero}, tensor(DType::Bool, {c, one}));
  Value* firsts = e.cast("Cast_first", first, DType::I64);
  Value* group_size = e.reduce("ReduceSum_size", "ReduceSum", equal_count, {1}, tensor(DType::I64, {c, one}));
  // precedes[b, a]: first occurrence b comes before a's group.
  Value* precedes;
  if (n.get_int("sorted", 1) != 0) {
    precedes = e.add("Less_sorted", "Less", {order, zero}, tensor(DType::Bool, {c, c}));
  } else {
    Value* past = e.scalar("past", static_cast<double>(count), DType::I64);
    Value* where = e.add("Where_least", "Where", {equal, index_row, past}, tensor(DType::I64, {c, c}));
    Value* least = e.reduce("ReduceMin_least", "ReduceMin", where, {1}, tensor(DType::I64, {c, one}));
    precedes = e.add("Less_first", "Less", {index_column, e.reshape("Reshape_least", least, {one, c})},
                     tensor(DType::Bool, {c, c}));
  }
  Value* before = e.add("Mul_before", "Mul", {e.cast("Cast_precedes", precedes, DType::I64), firsts},
                        tensor(DType::I64, {c, c}));
  Value* place = e.reshape(
      "Reshape_place", e.reduce("ReduceSum_place", "ReduceSum", before, {0}, tensor(DType::I64, {one, c})), {c});
  Value* found = e.reduce("ReduceSum_found", "ReduceSum", e.reshape("Reshape_firsts", firsts, {c}), {0},
                          tensor(DType::I64, {one}));
  // [2, u] as 2 * (1, 0) + u * (0, 1), on a kernel; its zeros, and a spare column.
  Value* shape_row = e.add("Add_shape", "Add",
                           {e.add("Mul_shape", "Mul", {found, e.i64s("unit", {0, 1})}, tensor(DType::I64, {Dim(2)})),
                            e.i64s("rows", {2, 0})},
                           tensor(DType::I64, {Dim(2)}));
  Value* zeros = e.add("ConstantOfShape", "ConstantOfShape", {shape_row}, tensor(DType::I64, {Dim(2), u}),
                       {{"value", Attribute::of_tensor(Tensor(DType::I64, {1}))}});
  const Dim wider(u.expr() + SymExpr::constant(1));
  Value* spare = e.expand("Expand_spare", e.scalar("spare", 0, DType::I64), {Dim(2), one});
  Value* data = e.add("Concat_spare", "Concat", {zeros, spare}, tensor(DType::I64, {Dim(2), wider}),
                      {{"axis", Attribute::of_int(1)}});
  Value* column = e.add("Where_column", "Where", {e.reshape("Reshape_first", first, {c}), place, found},
                        tensor(DType::I64, {c}));
  Value* columns = e.expand("Expand_columns", e.reshape("Reshape_columns", column, {one, c}), {Dim(2), c});
  Value* updates = e.add("Concat_updates", "Concat", {index_row, e.reshape("Reshape_size", group_size, {one, c})},
                         tensor(DType::I64, {Dim(2), c}), {{"axis", Attribute::of_int(0)}});
  Value* scattered = e.add("ScatterElements", "ScatterElements", {data, columns, updates},
                           tensor(DType::I64, {Dim(2), wider}), {{"axis", Attribute::of_int(1)}});
  auto row = [&](const std::string& piece, int64_t r) {
    Value* one_row = e.add("Slice_" + piece, "Slice",
                           {scattered, e.i64s(piece + "_starts", {r, 0}), e.i64s(piece + "_ends", {r + 1, -1}),
                            e.i64s(piece + "_axes", {0, 1})},
                           tensor(DType::I64, {one, u}));
    return e.reshape("Reshape_" + piece, one_row, {u});
  };
  Value* indices = row("indices", 0);
  if (n.num_outputs() > 1) e.take_over(1, indices);
  if (n.num_outputs() > 2) e.take_over(2, place);
  if (n.num_outputs() > 3) e.take_over(3, row("counts", 1));
  Value* source = has_axis ? n.input(0) : e.reshape("Reshape_data", n.input(0), {c});
  e.finish("Gather", "Gather", {source, indices}, {{"axis", Attribute::of_int(axis)}});
  return true;
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// TopK: the values' gradient put back where they came from (the indices are
// distinct along the axis); every other element gets 0.
void top_k_rule(GradContext& c) {
  int64_t axis = c.axis(c.node().get_int("axis", -1), c.dims(c.in(0)).size());
  c.set(0, scatter_back(c, c.e().zeros_like(c.in(0), c.dtype()), c.out(1), c.dy(), axis));
}

}  // namespace

void register_data_dependent_ops(OpRegistry& r) {
  std::vector<DType> nonzero_types = kNumeric;
  nonzero_types.push_back(DType::Bool);
  r.add(OpDef{"", "NonZero", 9, kDataDependentShape, infer_nonzero, eval_nonzero, nonzero_types})
      .hint_at_break(kSelectInPlace)
      .decomposition(decompose_nonzero);
  r.add(OpDef{"", "Unique", 11, kDataDependentShape, infer_unique, eval_unique, {}}).decomposition(decompose_unique);
  // Not marked data-dependent: with k known (static or symbolic) its shape is
  // not; the rule gives a fresh symbol when k is unknown, which explain reports.
  // With a constant k over a static axis it is a kernel of its own (codegen/topk_template.h).
  r.add(OpDef{"", "TopK", 11, kReduction, infer_topk, eval_topk, kNumeric})
      .shape_from_inputs({1})
      .kernel_unless(KernelRole::TopK, topk_kernel_refusal)
      .gradient(top_k_rule);
}

}  // namespace tcc
