// Movement ops that rearrange whole blocks of their input: Tile (repeats it),
// Trilu (keeps one triangle of each matrix), DepthToSpace and SpaceToDepth
// (move blocks of channels into space and back). None has a kernel of its
// own: each decomposes into the movement and pointwise ops that do (Reshape,
// Expand, Transpose, Where), and stays a host step where it cannot.
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// ---- Tile -------------------------------------------------------------------

void infer_tile(InferContext& ctx) {
  require_index_vector(ctx, 1, "repeats");
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  auto reps = input_values(ctx, 1);
  if (!reps) {
    ctx.set_output_type(0, Type::tensor(in.dtype(), Dims(in.rank(), Dim::unknown())));
    return;
  }
  if (reps->size() != in.rank())
    ctx.fail("repeats has " + std::to_string(reps->size()) + " entries for an input of rank " +
             std::to_string(in.rank()));
  Dims out;
  for (size_t k = 0; k < in.rank(); ++k) {
    const Dim& d = in.shape()[k];
    const Dim& r = (*reps)[k];
    out.push_back(d.is_unknown() || r.is_unknown() ? Dim::unknown() : Dim(d.expr() * r.expr()));
  }
  ctx.set_output_type(0, Type::tensor(in.dtype(), out));
}

std::vector<Tensor> eval_tile(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  std::vector<int64_t> reps = ctx.input(1).to_i64_vector();
  if (reps.size() != in.rank()) ctx.fail("repeats must have one entry per input dim");
  std::vector<int64_t> out_shape;
  for (size_t k = 0; k < in.rank(); ++k) {
    if (reps[k] < 0) ctx.fail("repeats must not be negative");
    out_shape.push_back(in.shape()[k] * reps[k]);
  }
  std::vector<int64_t> st = row_major_strides(in.shape());
  return {remap(in, out_shape, [&](const std::vector<int64_t>& idx) {
    int64_t f = 0;
    for (size_t k = 0; k < idx.size(); ++k) f += (idx[k] % in.shape()[k]) * st[k];
    return f;
  })};
}

// ---- Trilu ------------------------------------------------------------------

void infer_trilu(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  if (in.rank() < 2) ctx.fail("input must have rank >= 2, got " + in.str());
  ctx.set_output_type(0, in);
}

std::vector<Tensor> eval_trilu(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.rank() < 2) ctx.fail("input must have rank >= 2");
  int64_t k = ctx.has_input(1) ? ctx.input(1).get_i64(0) : 0;
  bool upper = ctx.node().get_int("upper", 1) != 0;
  Tensor zero(in.dtype(), {});
  size_t r = in.rank();
  std::vector<int64_t> st = row_major_strides(in.shape());
  return {remap(
      in, in.shape(),
      [&](const std::vector<int64_t>& idx) {
        int64_t diag = idx[r - 1] - idx[r - 2];  // column minus row
        bool keep = upper ? diag >= k : diag <= k;
        return keep ? flat_index(idx, st) : int64_t{-1};
      },
      &zero)};
}

// ---- DepthToSpace, SpaceToDepth -----------------------------------------------

int64_t blocksize(const Node& n) {
  int64_t b = n.get_int("blocksize", 0);
  if (b < 1) n.fail("blocksize must be positive, got " + std::to_string(b));
  return b;
}

void infer_depth_to_space(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  if (in.rank() != 4) ctx.fail("input must be 4-D [N, C, H, W], got " + in.str());
  int64_t b = blocksize(ctx.node());
  const Dims& s = in.shape();
  Dim c = Dim::unknown();
  if (!s[1].is_unknown()) {
    auto q = s[1].expr().exact_div(SymExpr::constant(b * b));
    if (!q && s[1].is_static())
      ctx.fail("channels " + s[1].str() + " are not divisible by blocksize^2 = " + std::to_string(b * b));
    c = q ? Dim(*q) : Dim(s[1].expr().floordiv(SymExpr::constant(b * b)));
  }
  auto times = [b](const Dim& d) { return d.is_unknown() ? d : Dim(d.expr() * SymExpr::constant(b)); };
  ctx.set_output_type(0, Type::tensor(in.dtype(), {s[0], c, times(s[2]), times(s[3])}));
}

std::vector<Tensor> eval_depth_to_space(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.rank() != 4) ctx.fail("input must be 4-D");
  int64_t b = blocksize(ctx.node());
  bool crd = ctx.node().get_string("mode", "DCR") == "CRD";
  const auto& s = in.shape();
  if (s[1] % (b * b) != 0) ctx.fail("channels are not divisible by blocksize^2");
  int64_t c_out = s[1] / (b * b);
  std::vector<int64_t> st = row_major_strides(s);
  return {remap(in, {s[0], c_out, s[2] * b, s[3] * b}, [&](const std::vector<int64_t>& idx) {
    int64_t bi = idx[2] % b, bj = idx[3] % b;
    int64_t ch = crd ? idx[1] * b * b + bi * b + bj : (bi * b + bj) * c_out + idx[1];
    return idx[0] * st[0] + ch * st[1] + (idx[2] / b) * st[2] + (idx[3] / b) * st[3];
  })};
}

void infer_space_to_depth(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  if (in.rank() != 4) ctx.fail("input must be 4-D [N, C, H, W], got " + in.str());
  int64_t b = blocksize(ctx.node());
  const Dims& s = in.shape();
  auto div = [&](const Dim& d) {
    if (d.is_unknown()) return d;
    auto q = d.expr().exact_div(SymExpr::constant(b));
    if (!q && d.is_static()) ctx.fail("spatial size " + d.str() + " is not divisible by blocksize " + std::to_string(b));
    return q ? Dim(*q) : Dim(d.expr().floordiv(SymExpr::constant(b)));
  };
  Dim c = s[1].is_unknown() ? s[1] : Dim(s[1].expr() * SymExpr::constant(b * b));
  ctx.set_output_type(0, Type::tensor(in.dtype(), {s[0], c, div(s[2]), div(s[3])}));
}

std::vector<Tensor> eval_space_to_depth(EvalContext& ctx) {
  const Tensor& in = ctx.input(0);
  if (in.rank() != 4) ctx.fail("input must be 4-D");
  int64_t b = blocksize(ctx.node());
  const auto& s = in.shape();
  if (s[2] % b != 0 || s[3] % b != 0) ctx.fail("spatial sizes are not divisible by blocksize");
  std::vector<int64_t> st = row_major_strides(s);
  return {remap(in, {s[0], s[1] * b * b, s[2] / b, s[3] / b}, [&](const std::vector<int64_t>& idx) {
    int64_t c = idx[1] % s[1], blk = idx[1] / s[1];
    int64_t bi = blk / b, bj = blk % b;
    return idx[0] * st[0] + c * st[1] + (idx[2] * b + bi) * st[2] + (idx[3] * b + bj) * st[3];
  })};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// Tile: the copies of g summed, with g seen as [r0, d0, r1, d1, ...]. Repeats
// or dims that are not constants (torch's x.repeat(batch, 1, 1)) give that
// view from the repeats and Shape(x), values the shapes determine.
void tile_rule(GradContext& c) {
  if (c.wants(1)) c.fail("Tile's repeats have no gradient");
  const Dims& xd = c.dims(c.in(0));
  const Tensor* repeats = c.constant(1);
  const bool fixed = repeats && std::all_of(xd.begin(), xd.end(), [](const Dim& d) { return d.is_static(); });
  Emitter& e = c.e();
  std::vector<int64_t> split, copies;
  std::vector<Value*> parts;  // [r0], [d0], [r1], ... where the view is computed
  Value* shape = fixed ? nullptr : e.shape_of(c.in(0));
  for (size_t i = 0; i < xd.size(); ++i) {
    const int64_t at = static_cast<int64_t>(i);
    if (fixed) {
      split.push_back(repeats->get_i64(at));
      split.push_back(xd[i].value());
    } else {
      parts.push_back(e.op("Gather", {c.in(1), e.ints({at})}, int_attr("axis", 0)));
      parts.push_back(e.op("Gather", {shape, e.ints({at})}, int_attr("axis", 0)));
    }
    copies.push_back(2 * at);
  }
  Value* view = fixed ? e.ints(split) : e.op("Concat", parts, int_attr("axis", 0));
  c.set(0, e.reduce("ReduceSum", e.op("Reshape", {c.dy(), view}), copies, false));
}

// Trilu: g with the same triangle kept
void trilu_rule(GradContext& c) {
  std::vector<Value*> ins = {c.dy()};
  if (c.node().num_inputs() > 1 && c.in(1)) ins.push_back(c.in(1));
  c.set(0, c.e().op("Trilu", ins, int_attr("upper", c.node().get_int("upper", 1))));
}

// DepthToSpace (DCR) and SpaceToDepth undo each other.
void depth_to_space_rule(GradContext& c) {
  if (c.node().get_string("mode", "DCR") != "DCR") c.fail("tcc differentiates DepthToSpace in DCR mode only");
  c.set(0, c.e().op("SpaceToDepth", {c.dy()}, int_attr("blocksize", c.node().get_int("blocksize", 1))));
}
void space_to_depth_rule(GradContext& c) {
  Attrs attrs{{"blocksize", Attribute::of_int(c.node().get_int("blocksize", 1))}, {"mode", Attribute::of_string("DCR")}};
  c.set(0, c.e().op("DepthToSpace", {c.dy()}, std::move(attrs)));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// Tile(x, repeats) -> x viewed with a 1 before each repeated axis, expanded to
// the repeats there and viewed as the output: [d0, d1] -> [1, d0, 1, d1] ->
// [r0, d0, r1, d1] -> [r0 d0, r1 d1], one movement kernel. Needs constant
// repeats of at least 1, or repeats computed from the shapes that the output's
// dims over the input's give (x.repeat(batch, 1, 1)); the dims may be symbolic.
bool decompose_tile(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  const Type& y = n.output(0)->type();
  if (!x.is_tensor() || !x.has_rank() || !x.fully_shaped()) return false;
  Dims repeats;
  if (std::optional<Tensor> r = constant_value(n.input(1))) {
    if (r->numel() != static_cast<int64_t>(x.rank())) return false;
    for (int64_t k = 0; k < r->numel(); ++k) repeats.push_back(Dim(r->get_i64(k)));
  } else {
    if (!y.is_tensor() || !y.has_rank() || !y.fully_shaped() || y.rank() != x.rank()) return false;
    const std::set<std::string> bound = e.graph().bound_symbols();
    for (size_t k = 0; k < x.rank(); ++k) {
      std::optional<SymExpr> r = y.shape()[k].expr().exact_div(x.shape()[k].expr());
      if (!r) return false;
      for (const std::string& sym : r->symbols())
        if (!bound.count(sym)) return false;  // repeats read from data: the node binds its output's size
      repeats.push_back(Dim(*r));
    }
  }
  Dims viewed, expanded;
  for (size_t k = 0; k < x.rank(); ++k) {
    const Dim& r = repeats[k];
    if (r.is_static() && r.value() < 1) return false;
    if (r != Dim(1)) {
      viewed.push_back(Dim(1));
      expanded.push_back(r);
    }
    viewed.push_back(x.shape()[k]);
    expanded.push_back(x.shape()[k]);
  }
  if (viewed.size() == x.rank()) {
    e.finish("Identity", "Identity", {n.input(0)});
    return true;
  }
  Value* copies = e.expand("Expand", e.reshape("Reshape", n.input(0), viewed), expanded);
  e.finish_reshape("Reshape_1", copies);
  return true;
}

// Trilu(x, k) -> Where(keep, x, 0) with keep = column - row >= k (upper) or
// <= k (lower) over the last two axes, the rows and columns tcc::Ranges: the
// mask is computed in x's kernel, which reads k, a one-element i64 of rank up
// to 2 (constant or from data), where it compares; an absent k is 0. The dims
// may be symbolic.
bool decompose_trilu(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() < 2 || !x.fully_shaped()) return false;
  Value* k = nullptr;
  if (n.num_inputs() > 1 && n.has_input(1)) {
    const Type& kt = n.input(1)->type();
    if (!kt.is_tensor() || !kt.has_rank() || kt.rank() > 2 || !single_element(kt) || kt.dtype() != DType::I64)
      return false;
    k = n.input(1);
  }
  const Dim& rows = x.shape()[x.rank() - 2];
  const Dim& cols = x.shape()[x.rank() - 1];
  Value* row = e.reshape("Reshape", e.range("Range", 0, rows), {rows, Dim(1)});
  Value* diagonal = e.add("Sub", "Sub", {e.range("Range_1", 0, cols), row}, Type::tensor(DType::I64, {rows, cols}));
  std::string compare = n.get_int("upper", 1) != 0 ? "GreaterOrEqual" : "LessOrEqual";
  if (k == nullptr) k = e.constant("k", Tensor::scalar_i64(0));
  Value* keep = e.add(compare, compare, {diagonal, k}, Type::tensor(DType::Bool, {rows, cols}));
  e.finish("Where", "Where", {keep, n.input(0), e.scalar("zero", 0, x.dtype())});
  return true;
}

// DepthToSpace and SpaceToDepth -> Reshape, Transpose, Reshape. DepthToSpace
// reads the channels as [b, b, C / b^2] (DCR) or [C / b^2, b, b] (CRD) and
// moves the two b next to H and W: [N, b, b, C', H, W] -> [N, C', H, b, W, b]
// -> [N, C', H b, W b]. SpaceToDepth undoes DCR: [N, C, H', b, W', b] ->
// [N, b, b, C, H', W'] -> [N, b b C, H', W']. Needs static C, H and W.
bool decompose_block_shuffle(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() != 4) return false;
  const Dims& s = x.shape();
  for (size_t k = 1; k < 4; ++k)
    if (!s[k].is_static()) return false;
  int64_t b = blocksize(n), c = s[1].value(), h = s[2].value(), w = s[3].value();
  Dims viewed;
  std::vector<int64_t> perm;
  if (n.op_type() == "SpaceToDepth") {
    if (h % b != 0 || w % b != 0) return false;
    viewed = {s[0], c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
  } else {
    if (c % (b * b) != 0) return false;
    bool crd = n.get_string("mode", "DCR") == "CRD";
    viewed = crd ? Dims{s[0], c / (b * b), b, b, h, w} : Dims{s[0], b, b, c / (b * b), h, w};
    perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3} : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
  }
  Dims moved;
  for (int64_t p : perm) moved.push_back(viewed[static_cast<size_t>(p)]);
  Value* blocks = e.reshape("Reshape", n.input(0), viewed);
  Value* shuffled = e.add("Transpose", "Transpose", {blocks}, Type::tensor(x.dtype(), moved),
                          {{"perm", Attribute::of_ints(perm)}});
  e.finish_reshape("Reshape_1", shuffled);
  return true;
}

}  // namespace

void register_rearrange_ops(OpRegistry& r) {
  r.add(OpDef{"", "Tile", 6, kMovement | kRearranges, infer_tile, eval_tile, {}})
      .shape_from_inputs({1})
      .gradient(tile_rule)
      .decomposition(decompose_tile);
  r.add(OpDef{"", "Trilu", 14, kMovement, infer_trilu, eval_trilu, {}})
      .gradient(trilu_rule)
      .decomposition(decompose_trilu);
  r.add(OpDef{"", "DepthToSpace", 11, kMovement | kRearranges, infer_depth_to_space, eval_depth_to_space, {}})
      .gradient(depth_to_space_rule)
      .decomposition(decompose_block_shuffle);
  r.add(OpDef{"", "SpaceToDepth", 1, kMovement | kRearranges, infer_space_to_depth, eval_space_to_depth, {}})
      .gradient(space_to_depth_rule)
      .decomposition(decompose_block_shuffle);
}

}  // namespace tcc
