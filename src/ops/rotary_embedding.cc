// RotaryEmbedding (opset 23): rotates pairs of each head's first
// rotary_embedding_dim features by the angle of the token's position, whose
// cosine and sine the caches hold. The input is [batch, heads, seq, head_size],
// or [batch, seq, hidden] with num_heads heads. A pair is (i, i + R/2) of the
// R rotated features, or (2i, 2i + 1) when interleaved:
//   (x1, x2) -> (cos * x1 - sin * x2, sin * x1 + cos * x2).
// The caches are [batch, seq, R/2], or [max_position, R/2] read at
// position_ids [batch, seq]. Kernels compute in double.
#include <string>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

enum Input : size_t { kX = 0, kCos = 1, kSin = 2, kPositions = 3 };

// The heads of a rank-3 input: num_heads, which must divide the hidden size.
int64_t heads_of(const Node& n, int64_t hidden) {
  int64_t heads = n.get_int("num_heads", 0);
  if (heads <= 0) n.fail("a rank-3 input ([batch, seq, hidden]) needs num_heads, got " + std::to_string(heads));
  if (hidden >= 0 && hidden % heads != 0)
    n.fail("num_heads (" + std::to_string(heads) + ") must divide the hidden size " + std::to_string(hidden));
  return heads;
}

// The rotated features of a head: rotary_embedding_dim, or all of them (0, the
// default); even and at most head_size.
int64_t rotated_of(const Node& n, int64_t head_size) {
  int64_t r = n.get_int("rotary_embedding_dim", 0);
  if (r == 0) r = head_size;
  if (r < 0 || r % 2 != 0 || r > head_size)
    n.fail("rotary_embedding_dim must be even and at most the head size " + std::to_string(head_size) + ", got " +
           std::to_string(r));
  return r;
}

bool interleaved(const Node& n) { return n.get_int("interleaved", 0) != 0; }

void infer_rotary_embedding(InferContext& ctx) {
  if (!inputs_ranked(ctx, {kX})) return;
  const Node& n = ctx.node();
  const Type& x = ctx.input_type(kX);
  if (x.rank() != 3 && x.rank() != 4)
    ctx.fail("expected input of rank 4 ([batch, heads, seq, head_size]) or 3 ([batch, seq, hidden]), got " + x.str());
  if (!is_float(x.dtype())) ctx.fail("expected a float input, got " + x.str());
  const Dim& last = x.shape().back();
  int64_t head_size = -1;
  if (x.rank() == 3) {
    int64_t heads = heads_of(n, last.is_static() ? last.value() : -1);
    if (last.is_static()) head_size = last.value() / heads;
  } else if (last.is_static()) {
    head_size = last.value();
  }
  int64_t rotated = head_size >= 0 ? rotated_of(n, head_size) : -1;
  size_t cache_rank = ctx.has_input(kPositions) ? 2 : 3;
  for (size_t i : {kCos, kSin}) {
    const Type& t = ctx.input_type(i);
    if (!t.is_tensor() || !t.has_rank()) continue;
    const char* what = i == kCos ? "cos_cache" : "sin_cache";
    if (t.rank() != cache_rank || t.dtype() != x.dtype())
      ctx.fail(std::string(what) + " " + t.str() + " must be a " + std::string(dtype_name(x.dtype())) + " tensor of rank " +
               std::to_string(cache_rank) + (cache_rank == 2 ? " ([max_position, R/2], read at position_ids)"
                                                             : " ([batch, seq, R/2], without position_ids)"));
    const Dim& half = t.shape().back();
    if (rotated >= 0 && half.is_static() && half.value() * 2 != rotated)
      ctx.fail(std::string(what) + " " + t.str() + " must hold " + std::to_string(rotated / 2) +
               " values per position (half of the " + std::to_string(rotated) + " rotated features)");
  }
  if (ctx.has_input(kPositions)) {
    const Type& p = ctx.input_type(kPositions);
    if (p.is_tensor() && (p.dtype() != DType::I64 || (p.has_rank() && p.rank() != 2)))
      ctx.fail("position_ids " + p.str() + " must be an i64 tensor [batch, seq]");
  }
  ctx.set_output_type(0, x);
}

std::vector<Tensor> eval_rotary_embedding(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor &x = ctx.input(kX), &cos = ctx.input(kCos), &sin = ctx.input(kSin);
  const Tensor* positions = ctx.has_input(kPositions) ? &ctx.input(kPositions) : nullptr;
  if (x.rank() != 3 && x.rank() != 4) ctx.fail("expected input of rank 3 or 4, got shape " + shape_str(x.shape()));
  const std::vector<int64_t>& s = x.shape();
  bool four_d = x.rank() == 4;
  int64_t batch = s[0], seq = four_d ? s[2] : s[1];
  int64_t heads = four_d ? s[1] : heads_of(n, s[2]);
  int64_t head_size = four_d ? s[3] : s[2] / heads;
  int64_t rotated = rotated_of(n, head_size), half = rotated / 2;
  std::vector<int64_t> cache_shape = positions ? std::vector<int64_t>{-1, half} : std::vector<int64_t>{batch, seq, half};
  for (const Tensor* c : {&cos, &sin}) {
    bool fits = c->rank() == cache_shape.size() && c->shape().back() == half;
    for (size_t k = 0; fits && !positions && k < cache_shape.size(); ++k) fits = c->shape()[k] == cache_shape[k];
    if (!fits)
      ctx.fail("expected caches of shape " + (positions ? "[max_position, " + std::to_string(half) + "]"
                                                        : shape_str(cache_shape)) +
               ", got " + shape_str(c->shape()));
  }
  if (positions && positions->shape() != std::vector<int64_t>{batch, seq})
    ctx.fail("expected position_ids of shape " + shape_str({batch, seq}) + ", got " + shape_str(positions->shape()));
  bool pairs_adjacent = interleaved(n);
  Tensor y(x.dtype(), s);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      int64_t row = b * seq + t;  // the caches' row: [batch, seq] or the position's
      if (positions) {
        row = positions->get_i64(b * seq + t);
        if (row < 0 || row >= cos.shape()[0] || row >= sin.shape()[0])
          ctx.fail("position_ids holds " + std::to_string(row) + ", outside the caches' " +
                   std::to_string(std::min(cos.shape()[0], sin.shape()[0])) + " positions");
      }
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = four_d ? ((b * heads + h) * seq + t) * head_size : ((b * seq + t) * heads + h) * head_size;
        for (int64_t d = 0; d < head_size; ++d) {
          if (d >= rotated) {
            y.set_f64(base + d, x.get_f64(base + d));
            continue;
          }
          int64_t k = pairs_adjacent ? d / 2 : d % half;
          int64_t first = pairs_adjacent ? 2 * k : k, second = pairs_adjacent ? 2 * k + 1 : k + half;
          double c = cos.get_f64(row * half + k), sn = sin.get_f64(row * half + k);
          double x1 = x.get_f64(base + first), x2 = x.get_f64(base + second);
          y.set_f64(base + d, d == first ? c * x1 - sn * x2 : sn * x1 + c * x2);
        }
      }
    }
  return {y};
}

// The rotation is orthogonal: dx rotates g back, by the same op with the sine negated.
void rotary_embedding_rule(GradContext& c) {
  if (c.wants(kCos) || c.wants(kSin)) c.fail("tcc does not differentiate RotaryEmbedding's cos and sin caches");
  Emitter& e = c.e();
  std::vector<Value*> ins = {c.dy(), c.in(kCos), e.op("Neg", {c.in(kSin)})};
  if (c.node().has_input(kPositions)) ins.push_back(c.in(kPositions));
  c.set(kX, e.op("RotaryEmbedding", ins, c.node().attrs()));
}

// RotaryEmbedding -> x * cos + partner * sin * (-1 at a pair's first feature,
// 1 at its second), one pointwise kernel: the R rotated features viewed with
// their pairs along an axis of 2 ([..., 2, R/2], interleaved [..., R/2, 2]),
// partner that view reversed along the pair axis (a Slice of step -1), and the
// caches broadcast along the heads and the pair axis. position_ids' rows of
// the caches are Gathers; the features past R are a Slice, Concat after the
// rotated ones. A rank-3 input is viewed as [batch, seq, heads, head_size].
// Needs a static head size.
bool decompose_rotary_embedding(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(kX);
  if (x == nullptr || (x->rank() != 3 && x->rank() != 4) || !x->shape().back().is_static()) return false;
  if (!e.ranked_float_input(kCos) || !e.ranked_float_input(kSin)) return false;
  bool has_positions = n.has_input(kPositions);
  if (has_positions && !n.input(kPositions)->type().fully_shaped()) return false;
  const Dims& xd = x->shape();
  bool four_d = x->rank() == 4, adjacent = interleaved(n);
  int64_t heads = four_d ? 0 : heads_of(n, xd[2].value());
  int64_t head_size = four_d ? xd[3].value() : xd[2].value() / heads;
  int64_t rotated = rotated_of(n, head_size), half = rotated / 2;
  DType t = x->dtype();
  // [batch, heads, seq, head_size] or [batch, seq, heads, head_size].
  Dims viewed = four_d ? xd : Dims{xd[0], xd[1], heads, head_size};
  auto with_last = [&](Dims d, std::initializer_list<Dim> last) {
    d.pop_back();
    d.insert(d.end(), last);
    return d;
  };
  int64_t pair_axis = adjacent ? 4 : 3;
  auto paired = [&](const Dims& d) { return adjacent ? with_last(d, {half, 2}) : with_last(d, {2, half}); };
  Value* in = four_d ? n.input(kX) : e.reshape("Reshape", n.input(kX), viewed);
  Value* x_rot = in;
  if (rotated < head_size)
    x_rot = e.add("Slice", "Slice", {in, e.i64("zero", 0), e.i64("rotated", rotated), e.i64("last_axis", 3)},
                  Type::tensor(t, with_last(viewed, {rotated})));
  Dims pairs_dims = paired(viewed);
  Type pairs = Type::tensor(t, pairs_dims);
  Value* x5 = e.reshape("Reshape_pairs", x_rot, pairs_dims);
  Value* partner = e.add("Slice_partner", "Slice",
                         {x5, e.i64("partner_start", -1), e.i64("partner_end", -kSliceSentinel),
                          e.i64("pair_axis", pair_axis), e.i64("partner_step", -1)},
                         pairs);
  // A cache at the input's positions, [batch, seq, R/2], with axes of 1 for the heads and the pair.
  Value* cache_axes = e.i64s("cache_axes", {four_d ? 1 : 2, pair_axis});
  auto cache = [&](size_t i, const std::string& name) {
    Value* c = n.input(i);
    if (has_positions) {
      Dims rows = n.input(kPositions)->type().shape();
      rows.push_back(half);
      c = e.add("Gather_" + name, "Gather", {c, n.input(kPositions)}, Type::tensor(t, rows),
                {{"axis", Attribute::of_int(0)}});
    }
    Dims d = c->type().shape();
    d.insert(d.begin() + (four_d ? 1 : 2), Dim(1));
    d.insert(d.begin() + pair_axis, Dim(1));
    return e.add("Unsqueeze_" + name, "Unsqueeze", {c, cache_axes}, Type::tensor(t, d));
  };
  Value* cos = cache(kCos, "cos");
  Value* sin = cache(kSin, "sin");
  // -1 for each pair's first feature, 1 for its second, along the pair axis.
  Tensor signs(t, adjacent ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 1});
  signs.set_f64(0, -1);
  signs.set_f64(1, 1);
  Dims signed_dims = sin->type().shape();
  signed_dims[static_cast<size_t>(pair_axis)] = 2;
  Value* signed_sin =
      e.add("Mul_signs", "Mul", {sin, e.constant("signs", std::move(signs))}, Type::tensor(t, signed_dims));
  Value* y5 = e.add("Add", "Add",
                    {e.add("Mul", "Mul", {x5, cos}, pairs), e.add("Mul_1", "Mul", {partner, signed_sin}, pairs)},
                    pairs);
  if (rotated == head_size) {
    e.finish_reshape("Reshape_1", y5);
    return true;
  }
  std::vector<Value*> parts = {e.reshape("Reshape_rotated", y5, with_last(viewed, {rotated})),
                               e.add("Slice_kept", "Slice",
                                     {in, e.i64("kept_start", rotated), e.i64("kept_end", head_size), e.i64("kept_axis", 3)},
                                     Type::tensor(t, with_last(viewed, {head_size - rotated})))};
  std::map<std::string, Attribute> axis = {{"axis", Attribute::of_int(3)}};
  if (four_d) {
    e.finish("Concat", "Concat", parts, axis);
    return true;
  }
  e.finish_reshape("Reshape_1", e.add("Concat", "Concat", parts, Type::tensor(t, viewed), axis));
  return true;
}

}  // namespace

void register_rotary_embedding_ops(OpRegistry& r) {
  // Any element types: the input and caches are float (infer_rotary_embedding checks), position_ids i64.
  r.add(OpDef{"", "RotaryEmbedding", 23, 0, infer_rotary_embedding, eval_rotary_embedding, {}})
      .gradient(rotary_embedding_rule)
      .decomposition(decompose_rotary_embedding);
}

}  // namespace tcc
