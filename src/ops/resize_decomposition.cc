// Resize's decompositions into ops that have kernels: Gathers of constant tap
// tables where its arguments are constant, of tables tcc::ResizeTable computes
// once per binding along symbolic axes, and of taps computed on kernels from a
// roi read from data.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "src/ops/fusion.h"
#include "src/ops/resize.h"

namespace tcc::resize {
namespace {

// One resized axis as the pieces read it: per tap, a table of indices along
// the axis and one of weights (broadcast along the axes after it), and what
// extrapolated rows add.
struct AxisTables {
  int64_t axis = 0, out = 0;
  std::vector<Tensor> index, weight;
  std::optional<Tensor> extrapolation;
  bool selects = true;  // each row reads one input, weighed 1: Gathers alone
};

AxisTables axis_tables(const AxisResize& ax, double extrapolation, DType dtype, int64_t rank) {
  // Each row's taps, the weights of one index added up and zero weights dropped (nearest's other tap).
  std::vector<std::vector<std::pair<int64_t, double>>> rows(ax.out);
  bool extrapolates = false;
  size_t count = 1;
  for (int64_t y = 0; y < ax.out; ++y) {
    const Taps& t = ax.taps[y];
    extrapolates = extrapolates || t.extrapolated;
    for (size_t j = 0; j < t.index.size() && !t.extrapolated; ++j) {
      if (t.weight[j] == 0) continue;
      auto same = std::find_if(rows[y].begin(), rows[y].end(), [&](const auto& p) { return p.first == t.index[j]; });
      if (same != rows[y].end()) same->second += t.weight[j];
      else rows[y].emplace_back(t.index[j], t.weight[j]);
    }
    count = std::max(count, rows[y].size());
  }
  AxisTables tables{ax.axis, ax.out, {}, {}, std::nullopt, !extrapolates};
  for (const auto& row : rows) tables.selects = tables.selects && row.size() == 1 && row[0].second == 1;
  std::vector<int64_t> column(static_cast<size_t>(rank - ax.axis), 1);
  column[0] = ax.out;
  for (size_t j = 0; j < count; ++j) {
    Tensor index(DType::I64, {ax.out}), weight(dtype, column);
    for (int64_t y = 0; y < ax.out; ++y) {
      bool has = j < rows[y].size();  // a row with fewer taps reads its first again, weighed 0
      index.set_i64(y, rows[y].empty() ? 0 : rows[y][has ? j : 0].first);
      weight.set_f64(y, has ? rows[y][j].second : 0.0);
    }
    tables.index.push_back(std::move(index));
    tables.weight.push_back(std::move(weight));
  }
  if (extrapolates && extrapolation != 0) {
    tables.extrapolation = Tensor(dtype, column);
    for (int64_t y = 0; y < ax.out; ++y) tables.extrapolation->set_f64(y, ax.taps[y].extrapolated ? extrapolation : 0.0);
  }
  return tables;
}

// Sizes computed from shapes (torch's upsample writes Concat(Shape(x)[:2],
// [h, w])) under the stretch policy are the output's dims, which shape
// inference knows: as scales, 1 where an axis keeps its (maybe symbolic) dim
// and out / in where a static one changes, as the reference computes them
// from sizes. Null when the output's dims do not say.
std::optional<Tensor> sizes_as_scales(const Node& n) {
  const Type &x = n.input(0)->type(), &y = n.output(0)->type();
  if (n.get_string("keep_aspect_ratio_policy", "stretch") != "stretch" || !y.is_tensor() || !y.has_rank() ||
      y.rank() != x.rank())
    return std::nullopt;
  std::vector<int64_t> axes = resize_axes(n, static_cast<int64_t>(x.rank()));
  Tensor scales(DType::F64, {static_cast<int64_t>(axes.size())});
  for (size_t i = 0; i < axes.size(); ++i) {
    const Dim &in = x.shape()[axes[i]], &out = y.shape()[axes[i]];
    if (in == out) {
      scales.set_f64(static_cast<int64_t>(i), 1.0);
    } else if (in.is_static() && out.is_static() && in.value() > 0) {
      scales.set_f64(static_cast<int64_t>(i), static_cast<double>(out.value()) / static_cast<double>(in.value()));
    } else {
      return std::nullopt;
    }
  }
  return scales;
}

// One resized axis as the pieces read it: per tap, its index table along the
// axis and, unless every row selects one input weighed 1, its weight table;
// what extrapolated rows add, if anything.
struct AxisPieces {
  int64_t axis = 0;
  Dim out;
  std::vector<Value*> index, weight;
  Value* extrapolation = nullptr;
};

// Each axis in turn the sum over its taps of a Gather along it times the tap's
// weights (a Gather alone where the rows select), plus what extrapolated rows
// add; the last piece takes over the node's output.
void resize_pieces(Expansion& e, const std::vector<AxisPieces>& axes) {
  const Node& n = e.node();
  auto piece = [&](bool last, const std::string& name, const std::string& op, const std::vector<Value*>& ins,
                   const Type& type, std::map<std::string, Attribute> attrs = {}) -> Value* {
    if (!last) return e.add(name, op, ins, type, std::move(attrs));
    e.finish(name, op, ins, std::move(attrs));
    return nullptr;
  };
  Value* y = n.input(0);
  Dims dims = y->type().shape();
  for (size_t k = 0; k < axes.size(); ++k) {
    const AxisPieces& t = axes[k];
    std::string axis = std::to_string(t.axis);
    dims[t.axis] = t.out;
    Type type = Type::tensor(y->type().dtype(), dims);
    bool last = k + 1 == axes.size(), summed_last = last && !t.extrapolation, selects = t.weight.empty();
    Value* sum = nullptr;
    for (size_t j = 0; j < t.index.size(); ++j) {
      std::string tap = axis + "_" + std::to_string(j);
      bool final_tap = summed_last && j + 1 == t.index.size();
      Value* g = piece(final_tap && selects, "Gather_" + tap, "Gather", {y, t.index[j]}, type,
                       {{"axis", Attribute::of_int(t.axis)}});
      if (!selects) g = piece(final_tap && j == 0, "Mul_" + tap, "Mul", {g, t.weight[j]}, type);
      sum = j == 0 ? g : piece(final_tap, "Add_" + tap, "Add", {sum, g}, type);
    }
    if (t.extrapolation) sum = piece(last, "Extrapolate_" + axis, "Add", {sum, t.extrapolation}, type);
    y = sum;
  }
}

// A resized axis's ratio out / in as scale_num / scale_den where it is a whole
// factor or the inverse of one, the same for every binding: from a constant
// scale, or from sizes the shapes computed (the output's dims) when in and out
// are multiples of each other, as the reference's sizes / in then is.
struct AxisRatio {
  int64_t axis = 0, num = 1, den = 1;
};

std::optional<AxisRatio> axis_ratio(int64_t axis, const Dim& in, const Dim& out, const Tensor* scales, size_t i) {
  if (in.is_unknown() || out.is_unknown()) return std::nullopt;
  if (scales) {
    double s = scales->get_f64(static_cast<int64_t>(i));
    std::optional<std::pair<int64_t, int64_t>> whole = s > 0 ? whole_ratio(s) : std::nullopt;
    if (!whole) return std::nullopt;
    AxisRatio r{axis, whole->first, whole->second};
    SymExpr floor_out = (in.expr() * SymExpr::constant(r.num)).floordiv(SymExpr::constant(r.den));
    if (floor_out != out.expr()) return std::nullopt;
    return r;
  }
  if (std::optional<SymExpr> up = out.expr().exact_div(in.expr()); up && up->is_constant() && up->constant_value() >= 1)
    return AxisRatio{axis, up->constant_value(), 1};
  if (std::optional<SymExpr> down = in.expr().exact_div(out.expr());
      down && down->is_constant() && down->constant_value() >= 1)
    return AxisRatio{axis, 1, down->constant_value()};
  return std::nullopt;
}

// Resize along axes whose sizes the binding decides (torch's upsample of an
// image of symbolic height and width), by ratios that do not (axis_ratio): its
// taps depend on the sizes alone, so each tap's index and weight tables are
// tcc::ResizeTable nodes, which a module computes once per binding, and the
// pieces are those of the constant tables. Every tap is kept, as the
// reference weighs them, where the constant tables merge equal indices. Not
// for tf_crop_and_resize (its roi), another aspect-ratio policy, a ratio that
// is no whole factor or its inverse, or an integer tensor that interpolates.
// Autodiff differentiates the pieces: the tables, read off shapes, pass none.
bool decompose_symbolic_resize(Expansion& e, const ResizeAttrs& at, const Tensor* scales, bool sizes_from_shapes) {
  const Node& n = e.node();
  const Type &x = n.input(0)->type(), &out = n.output(0)->type();
  if (at.coord == "tf_crop_and_resize" || !out.is_tensor() || !out.has_rank() || out.rank() != x.rank() ||
      (sizes_from_shapes && n.get_string("keep_aspect_ratio_policy", "stretch") != "stretch") ||
      (at.mode != "nearest" && !is_float(x.dtype())))
    return false;
  std::vector<int64_t> axes = resize_axes(n, static_cast<int64_t>(x.rank()));
  std::vector<std::pair<AxisRatio, size_t>> ratios;  // and the taps of each output coordinate
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<AxisRatio> r = axis_ratio(axes[i], x.shape()[axes[i]], out.shape()[axes[i]], scales, i);
    if (!r) return false;
    if (r->num == r->den) continue;
    double scale = static_cast<double>(r->num) / static_cast<double>(r->den);
    try {  // the modes the tables will compute with
      bool extrapolated = false;
      source_coordinate(n, at, 0.0, scale, r->den, r->num, 0.0, 1.0, extrapolated);
      ratios.emplace_back(*r, at.mode == "nearest" ? 1 : resize_taps(n, at, 0.5, scale, r->den).index.size());
    } catch (const InputError&) {
      return false;
    }
  }
  std::map<std::string, Attribute> carried;
  for (const auto& [name, value] : n.attrs())
    if (name != "axes" && name != "keep_aspect_ratio_policy") carried[name] = value;
  std::vector<AxisPieces> pieces;
  for (const auto& [r, taps] : ratios) {
    AxisPieces p;
    p.axis = r.axis;
    p.out = out.shape()[r.axis];
    auto table = [&](const std::string& kind, size_t j) {
      std::map<std::string, Attribute> attrs = carried;
      attrs["axis"] = Attribute::of_int(r.axis);
      attrs["tap"] = Attribute::of_int(static_cast<int64_t>(j));
      attrs["scale_num"] = Attribute::of_int(r.num);
      attrs["scale_den"] = Attribute::of_int(r.den);
      attrs["table"] = Attribute::of_string(kind);
      Dims dims(kind == "index" ? 1 : x.rank() - static_cast<size_t>(r.axis), Dim(1));
      dims[0] = p.out;
      return e.add(kind + "_" + std::to_string(r.axis) + "_" + std::to_string(j), "ResizeTable", {n.input(0)},
                   Type::tensor(kind == "index" ? DType::I64 : x.dtype(), dims), std::move(attrs),
                   std::string(kTccDomain));
    };
    for (size_t j = 0; j < taps; ++j) {
      p.index.push_back(table("index", j));
      if (at.mode != "nearest") p.weight.push_back(table("weight", j));
    }
    pieces.push_back(std::move(p));
  }
  if (sizes_from_shapes) e.leaves_dead_inputs();
  if (pieces.empty()) e.finish("Identity", "Identity", {n.input(0)});
  else resize_pieces(e, pieces);
  return true;
}

// Resize by tf_crop_and_resize of a roi computed at run time (a crop's box),
// with constant scales or sizes over static sizes (resize_scales, as the
// reference computes them), in linear or nearest mode:
// each resized axis's source coordinates x, computed in f64 from the roi as
// source_coordinate does, give its taps as resize_taps does (base = ceil(x) -
// 1 and base + 1 weighed 1 - ratio and ratio, or the one nearest_mode picks),
// clamped to the axis, and the pieces of resize_pieces gather and weigh them;
// rows whose x falls outside the input weigh every tap 0 and add
// extrapolation_value. An axis of size 1 that stays 1 reads its one input
// wherever the roi points, so it is left alone.
bool decompose_roi_resize(Expansion& e, const ResizeAttrs& at, const Tensor* scales, const Tensor* sizes) {
  const Node& n = e.node();
  const Type &x = n.input(0)->type(), &y = n.output(0)->type(), &roi = n.input(1)->type();
  std::vector<int64_t> axes = resize_axes(n, static_cast<int64_t>(x.rank()));
  const auto na = static_cast<int64_t>(axes.size());
  if ((at.mode != "linear" && at.mode != "nearest") || at.antialias || !is_float(x.dtype()) || !x.fully_static() ||
      !y.is_tensor() || !y.has_rank() || n.get_string("keep_aspect_ratio_policy", "stretch") != "stretch" ||
      !roi.is_tensor() || !is_float(roi.dtype()) || !roi.has_rank() || roi.rank() != 1 || roi.shape()[0] != Dim(2 * na))
    return false;
  static const std::set<std::string> kNearest = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (at.mode == "nearest" && !kNearest.count(at.nearest_mode)) return false;
  std::vector<int64_t> shape;
  for (const Dim& d : x.shape()) shape.push_back(d.value());
  ResizeScales sized;
  try {
    sized = resize_scales(n, shape, scales, sizes);
  } catch (const InputError&) {
    return false;
  }
  Dims out_dims;
  for (int64_t d : sized.out) out_dims.push_back(Dim(d));
  if (y.shape() != out_dims) return false;
  Value* box = e.cast("roi", n.input(1), DType::F64);
  std::vector<AxisPieces> pieces;
  for (int64_t i = 0; i < na; ++i) {
    const int64_t a = axes[static_cast<size_t>(i)], in = shape[a], out = sized.out[a];
    if (in == 1 && out == 1) continue;
    const double out_f = sized.scale[a] * static_cast<double>(in);
    const std::string axis = "_" + std::to_string(a);
    const Type row = Type::tensor(DType::F64, {Dim(1)}), rows = Type::tensor(DType::F64, {Dim(out)}),
               flags = Type::tensor(DType::Bool, {Dim(out)});
    auto piece = [&](const std::string& name, const std::string& op, const std::vector<Value*>& ins, const Type& t) {
      return e.add(name + axis, op, ins, t);
    };
    auto number = [&](const std::string& name, double v) { return e.scalar(name + axis, v, DType::F64); };
    Value* begin = e.slice("begin" + axis, box, 0, Dim(i), {Dim(1)});
    Value* end = e.slice("end" + axis, box, 0, Dim(na + i), {Dim(1)});
    Value* last = number("last", static_cast<double>(in - 1));
    Value* span = piece("span", "Mul", {piece("extent", "Sub", {end, begin}, row), last}, row);
    Value* along;  // (end - begin) (in - 1) y / (out - 1), or half the span for one output
    if (out_f == 1) {
      along = piece("along", "Div", {span, number("two", 2)}, row);
    } else {
      std::vector<double> ys(static_cast<size_t>(out));
      std::iota(ys.begin(), ys.end(), 0.0);
      Value* scaled = piece("scaled", "Mul", {e.numbers("y" + axis, ys, {out}, DType::F64), span}, rows);
      along = piece("along", "Div", {scaled, number("steps", out_f - 1)}, rows);
    }
    Value* xo = piece("x", "Add", {along, piece("from", "Mul", {begin, last}, row)}, rows);
    Value *zero = number("zero", 0), *one = number("one", 1);
    Value* outside = piece("outside", "Or",
                           {piece("before", "Less", {xo, zero}, flags), piece("after", "Greater", {xo, last}, flags)},
                           flags);
    Value* base = piece("base", "Sub", {piece("ceil", "Ceil", {xo}, rows), one}, rows);
    Value* ratio = piece("ratio", "Sub", {xo, base}, rows);
    Value* next = piece("next", "Add", {base, one}, rows);
    std::vector<std::pair<Value*, Value*>> taps;  // each tap's position along the axis and weight
    if (at.mode == "linear") {
      taps = {{base, piece("rest", "Sub", {one, ratio}, rows)}, {next, ratio}};
    } else {
      Value* half = number("half", 0.5);
      Value* up = at.nearest_mode == "round_prefer_floor"  ? piece("up", "Greater", {ratio, half}, flags)
                  : at.nearest_mode == "round_prefer_ceil" ? piece("up", "GreaterOrEqual", {ratio, half}, flags)
                  : at.nearest_mode == "floor"             ? piece("up", "Equal", {ratio, one}, flags)
                                                           : nullptr;  // ceil
      Value* nearest = up ? piece("nearest", "Where", {up, next, base}, rows) : next;
      taps = {{nearest, one}};
    }
    Dims column(x.rank() - static_cast<size_t>(a), Dim(1));
    column[0] = Dim(out);
    auto as_column = [&](const std::string& name, Value* v) {
      return e.reshape(name + axis, e.cast(name + "_cast" + axis, v, x.dtype()), column);
    };
    AxisPieces p;
    p.axis = a;
    p.out = Dim(out);
    for (size_t j = 0; j < taps.size(); ++j) {
      const std::string tap = "_" + std::to_string(j);
      Value* clamped =
          piece("clamped" + tap, "Min", {piece("at_least_0" + tap, "Max", {taps[j].first, zero}, rows), last}, rows);
      p.index.push_back(e.cast("index" + tap + axis, clamped, DType::I64));
      p.weight.push_back(as_column("weight" + tap, piece("inside" + tap, "Where", {outside, zero, taps[j].second}, rows)));
    }
    if (at.extrapolation != 0)
      p.extrapolation = as_column(
          "extrapolation", piece("fill", "Where", {outside, number("value", at.extrapolation), zero}, rows));
    pieces.push_back(std::move(p));
  }
  if (pieces.empty()) e.finish("Identity", "Identity", {n.input(0)});
  else resize_pieces(e, pieces);
  return true;
}

}  // namespace

// Resize with constant roi, scales and sizes whose resized axes have static
// sizes (a symbolic batch is copied) follows resize_plan, the reference's own
// taps: each resized axis in turn is the sum over taps of a Gather along it
// with a constant index table, times the tap's weights; nearest is one Gather
// per axis and no product. Rows tf_crop_and_resize extrapolates weigh every
// tap 0 and add extrapolation_value. An integer tensor takes Gathers alone
// (the reference rounds its double sum once, the pieces would round each
// product). Sizes from shapes count as constant where sizes_as_scales reads
// them off the output. Resized axes of symbolic sizes take
// decompose_symbolic_resize; a roi computed at run time, decompose_roi_resize
// (other modes ignore it). Not when another argument is not a constant, or
// when none applies: it stays a host step, which says why when it runs.
bool decompose_resize(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank()) return false;
  std::vector<std::optional<Tensor>> args(4);
  bool sizes_from_output = false, sizes_from_shapes = false, roi_from_data = false;
  for (size_t i = 1; i < 4; ++i) {
    if (!n.has_input(i)) continue;
    args[i] = constant_value(n.input(i));
    if (args[i]) continue;
    if (i == 1) {
      roi_from_data = true;
      continue;
    }
    if (i != 3) return false;
    sizes_from_shapes = true;
    sizes_from_output = static_cast<bool>(args[2] = sizes_as_scales(n));
  }
  auto given = [&](size_t i) { return args[i] && args[i]->numel() > 0 ? &*args[i] : nullptr; };
  std::vector<int64_t> shape;
  for (const Dim& d : x.shape()) shape.push_back(d.is_static() ? d.value() : -1);
  ResizeAttrs at;
  try {
    at = resize_attrs(n);
  } catch (const InputError&) {
    return false;
  }
  if (roi_from_data) {  // only tf_crop_and_resize reads the roi
    if (at.coord == "tf_crop_and_resize")
      return !sizes_from_shapes && decompose_roi_resize(e, at, given(2), given(3));
    e.leaves_dead_inputs();
  }
  if (sizes_from_shapes && !sizes_from_output) return decompose_symbolic_resize(e, at, nullptr, true);
  std::vector<AxisResize> plan;
  try {
    plan = resize_plan(n, at, shape, given(1), given(2), given(3));
  } catch (const InputError&) {  // a resized axis of symbolic size, or arguments the reference refuses
    return !given(3) && decompose_symbolic_resize(e, at, sizes_from_output ? nullptr : given(2), sizes_from_output);
  }
  auto rank = static_cast<int64_t>(x.rank());
  std::vector<AxisTables> tables;
  for (const AxisResize& ax : plan) {
    const Dim& y = n.output(0)->type().shape()[ax.axis];
    if (sizes_from_output && !(y.is_static() && y.value() == ax.out)) return false;  // floor(in * out / in) != out
    tables.push_back(axis_tables(ax, at.extrapolation, x.dtype(), rank));
    if (!tables.back().selects && !is_float(x.dtype())) return false;
  }
  if (sizes_from_output) e.leaves_dead_inputs();  // the shape arithmetic that made the sizes
  if (tables.empty()) {
    e.finish("Identity", "Identity", {n.input(0)});
    return true;
  }
  std::vector<AxisPieces> pieces;
  for (const AxisTables& t : tables) {
    AxisPieces p;
    p.axis = t.axis;
    p.out = Dim(t.out);
    for (size_t j = 0; j < t.index.size(); ++j) {
      std::string tap = std::to_string(t.axis) + "_" + std::to_string(j);
      p.index.push_back(e.constant("index_" + tap, t.index[j]));
      if (!t.selects) p.weight.push_back(e.constant("weight_" + tap, t.weight[j]));
    }
    if (t.extrapolation) p.extrapolation = e.constant("extrapolation_" + std::to_string(t.axis), *t.extrapolation);
    pieces.push_back(std::move(p));
  }
  resize_pieces(e, pieces);
  return true;
}


}  // namespace tcc::resize
