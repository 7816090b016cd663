// Attention (opsets 23 and 24; 24 adds nonpad_kv_seqlen; also tcc::Attention,
// the same op at any opset, which passes write): scaled dot-product
// attention over heads, Y = softmax(Q K^T * scale + bias) V, with grouped-query
// heads, a key / value cache (past_key, past_value -> present_key,
// present_value), boolean or additive masks, causal masking, soft-capping and
// the qk_matmul_output of each mode. Opset 25's sliding-window attributes
// (left_window_size, right_window_size) are read where present.
//
// Q, K and V are either [batch, heads, seq, head_size] or [batch, seq,
// heads * head_size] (the head counts then come from q_num_heads and
// kv_num_heads). Query head h reads key / value head h / (q_heads / kv_heads).
//
// The bias of query row i and key column j adds, in this order: the mask
// (bool: 0 where true, -inf where false; float: its value; a mask shorter
// than the keys counts the rest as masked), -inf where causal masking hides j
// (j > i + offset, the offset being the cache length, or nonpad_kv_seqlen[b]
// minus the query length), -inf outside the window, and -inf at padded keys
// (j >= nonpad_kv_seqlen[b]). A row whose bias is -inf everywhere attends to
// nothing: its probabilities, and so its Y, are zero.
//
// qk_matmul_output follows the ONNX reference implementation the node tests
// were generated with: modes 0 and 1 give the (soft-capped) scores, 2 the
// scores plus the bias, 3 the probabilities.
//
// tcc::Attention outputs Y and, where autodiff saves it for the fused
// backward (attention_grad.cc), each query row's log-sum-exp of its logits
// (f32 [batch, heads, q_len], -inf for a row that attends to nothing), never
// the cache or the scores.
#include <algorithm>
#include <cmath>
#include <limits>

#include "src/ops/attention.h"
#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

using namespace attn;

enum : size_t { kY, kPresentKey, kPresentValue, kScores };

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// d / heads, failing where d is static and not a multiple of heads.
Dim per_head(const Node& n, const Dim& d, int64_t heads, const char* what) {
  if (d.is_unknown()) return d;
  if (auto q = d.expr().exact_div(SymExpr::constant(heads))) return Dim(*q);
  if (d.is_static())
    n.fail(std::string(what) + "'s hidden size " + d.str() + " is not a multiple of its " + std::to_string(heads) +
           " heads");
  return Dim::unknown();
}

Dim add_dims(const Dim& a, const Dim& b) {
  return a.is_unknown() || b.is_unknown() ? Dim::unknown() : Dim(a.expr() + b.expr());
}

void require_equal(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static() && a.value() != b.value())
    ctx.fail(what + " differ: " + a.str() + " and " + b.str());
}

// The 4-D view of the operands' sizes, as inference sees them.
struct AttentionDims {
  Dim batch, q_heads, kv_heads, q_len, kv_len, head, v_head, past = Dim(0);
};

AttentionDims attention_dims(InferContext& ctx) {
  const Node& n = ctx.node();
  const Type& q = ctx.ranked_input(kQ);
  const Type& k = ctx.ranked_input(kK);
  const Type& v = ctx.ranked_input(kV);
  if ((q.rank() != 3 && q.rank() != 4) || k.rank() != q.rank() || v.rank() != q.rank())
    ctx.fail("Q, K and V must all be 3-D ([batch, seq, hidden]) or all 4-D ([batch, heads, seq, head_size]), got " +
             q.str() + ", " + k.str() + " and " + v.str());
  AttentionDims d;
  d.batch = q.shape()[0];
  if (q.rank() == 4) {
    d.q_heads = q.shape()[1], d.q_len = q.shape()[2], d.head = q.shape()[3];
    d.kv_heads = k.shape()[1], d.kv_len = k.shape()[2];
    require_equal(ctx, k.shape()[3], d.head, "Q's and K's head sizes");
    require_equal(ctx, v.shape()[1], d.kv_heads, "K's and V's head counts");
    d.v_head = v.shape()[3];
  } else {
    int64_t qh = heads_attr(n, "q_num_heads"), kvh = heads_attr(n, "kv_num_heads");
    d.q_heads = qh, d.kv_heads = kvh, d.q_len = q.shape()[1], d.kv_len = k.shape()[1];
    d.head = per_head(n, q.shape()[2], qh, "Q");
    require_equal(ctx, per_head(n, k.shape()[2], kvh, "K"), d.head, "Q's and K's head sizes");
    d.v_head = per_head(n, v.shape()[2], kvh, "V");
  }
  require_equal(ctx, k.shape()[0], d.batch, "Q's and K's batch sizes");
  require_equal(ctx, v.shape()[0], d.batch, "Q's and V's batch sizes");
  require_equal(ctx, v.shape()[v.rank() == 4 ? 2 : 1], d.kv_len, "K's and V's sequence lengths");
  for (const Dim* h : {&d.q_heads, &d.kv_heads})
    if (h->is_static() && h->value() < 1) ctx.fail("Q, K and V need at least one head, got " + h->str());
  if (d.q_heads.is_static() && d.kv_heads.is_static() && d.q_heads.value() % d.kv_heads.value() != 0)
    ctx.fail("Q's " + d.q_heads.str() + " heads are not a multiple of K's and V's " + d.kv_heads.str());
  if (ctx.has_input(kPastKey) != ctx.has_input(kPastValue)) ctx.fail("past_key and past_value come together");
  if (ctx.has_input(kPastKey)) {
    if (ctx.has_input(kNonpad)) ctx.fail("nonpad_kv_seqlen cannot be combined with past_key and past_value");
    const Type& pk = ctx.ranked_input(kPastKey);
    if (pk.rank() != 4) ctx.fail("past_key must be 4-D [batch, kv_heads, past_seq, head_size], got " + pk.str());
    d.past = pk.shape()[2];
  }
  return d;
}

void infer_attention(InferContext& ctx) {
  if (!inputs_ranked(ctx, {kQ, kK, kV})) return;
  require_one_dtype(ctx, kQ, {kK, kV, kPastKey, kPastValue});
  AttentionDims d = attention_dims(ctx);
  DType t = input_dtype(ctx, kQ);
  if (!is_float(t)) ctx.fail("Q, K and V must be float tensors, got " + std::string(dtype_name(t)));
  // tcc::Attention also reads an f32 mask on f16 or bf16 operands, as autocast leaves it.
  DType m = input_dtype(ctx, kMask);
  const bool f32_mask = m == DType::F32 && ctx.node().domain() == kTccDomain;
  if (m != DType::Undefined && m != DType::Bool && m != t && !f32_mask)
    ctx.fail("attn_mask must be bool or Q's " + std::string(dtype_name(t)) + ", got " + std::string(dtype_name(m)));
  DType np = input_dtype(ctx, kNonpad);
  if (np != DType::Undefined && np != DType::I64)
    ctx.fail("nonpad_kv_seqlen must be int64, got " + std::string(dtype_name(np)));
  Dim total = add_dims(d.past, d.kv_len);
  if (ctx.input_type(kQ).rank() == 4) {
    ctx.set_output_type(kY, Type::tensor(t, {d.batch, d.q_heads, d.q_len, d.v_head}));
  } else {
    Dim hidden = d.v_head.is_unknown() ? Dim::unknown() : Dim(d.v_head.expr() * d.q_heads.expr());
    ctx.set_output_type(kY, Type::tensor(t, {d.batch, d.q_len, hidden}));
  }
  if (ctx.node().domain() == kTccDomain) {
    if (ctx.num_outputs() > 2) ctx.fail("tcc::Attention outputs Y and at most its rows' log-sum-exp");
    if (ctx.num_outputs() > 1) ctx.set_output_type(1, Type::tensor(DType::F32, {d.batch, d.q_heads, d.q_len}));
    return;
  }
  if (ctx.num_outputs() > kPresentKey) ctx.set_output_type(kPresentKey, Type::tensor(t, {d.batch, d.kv_heads, total, d.head}));
  if (ctx.num_outputs() > kPresentValue)
    ctx.set_output_type(kPresentValue, Type::tensor(t, {d.batch, d.kv_heads, total, d.v_head}));
  if (ctx.num_outputs() > kScores) ctx.set_output_type(kScores, Type::tensor(t, {d.batch, d.q_heads, d.q_len, total}));
}

// past (when given) followed by the new rows: [batch, heads, past + seq, size].
Tensor present(const Tensor* past, const HeadView& now, int64_t batch, int64_t heads, int64_t seq, int64_t size) {
  int64_t p = past ? past->shape()[2] : 0;
  Tensor out(now.t->dtype(), {batch, heads, p + seq, size});
  HeadView pv = past ? view_4d(*past) : HeadView{};
  int64_t o = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < p + seq; ++s)
        for (int64_t e = 0; e < size; ++e) out.set_f64(o++, s < p ? pv.at(b, h, s, e) : now.at(b, h, s - p, e));
  return out;
}

// Fails unless t has the expected shape.
void require_shape(const EvalContext& ctx, const Tensor& t, const std::vector<int64_t>& want, const char* what) {
  if (t.shape() != want)
    ctx.fail(std::string(what) + " has shape " + shape_str(t.shape()) + ", expected " + shape_str(want));
}

std::vector<Tensor> eval_attention(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& q = ctx.input(kQ);
  const Tensor& k = ctx.input(kK);
  const Tensor& v = ctx.input(kV);
  const bool four_d = q.rank() == 4;
  const int64_t batch = q.shape()[0];
  const int64_t qh = four_d ? q.shape()[1] : heads_attr(n, "q_num_heads");
  const int64_t kvh = four_d ? k.shape()[1] : heads_attr(n, "kv_num_heads");
  const int64_t q_len = q.shape()[four_d ? 2 : 1], kv_len = k.shape()[four_d ? 2 : 1];
  const int64_t head = four_d ? q.shape()[3] : q.shape()[2] / qh;
  const int64_t v_head = four_d ? v.shape()[3] : v.shape()[2] / kvh;
  if (four_d) {
    require_shape(ctx, k, {batch, kvh, kv_len, head}, "K");
    require_shape(ctx, v, {batch, kvh, kv_len, v_head}, "V");
  } else {
    require_shape(ctx, q, {batch, q_len, qh * head}, "Q");
    require_shape(ctx, k, {batch, kv_len, kvh * head}, "K");
    require_shape(ctx, v, {batch, kv_len, kvh * v_head}, "V");
  }
  if (qh < 1 || kvh < 1) ctx.fail("Q, K and V need at least one head");
  if (qh % kvh != 0) ctx.fail("Q's " + std::to_string(qh) + " heads are not a multiple of K's " + std::to_string(kvh));
  const Tensor* past_k = ctx.has_input(kPastKey) ? &ctx.input(kPastKey) : nullptr;
  const Tensor* past_v = ctx.has_input(kPastValue) ? &ctx.input(kPastValue) : nullptr;
  const int64_t past = past_k ? past_k->shape().size() == 4 ? past_k->shape()[2] : -1 : 0;
  if (past_k) require_shape(ctx, *past_k, {batch, kvh, past, head}, "past_key");
  if (past_v) require_shape(ctx, *past_v, {batch, kvh, past, v_head}, "past_value");
  const Tensor* nonpad = ctx.has_input(kNonpad) ? &ctx.input(kNonpad) : nullptr;
  if (nonpad && nonpad->numel() != batch) require_shape(ctx, *nonpad, {batch}, "nonpad_kv_seqlen");

  const HeadView qv = four_d ? view_4d(q) : view_3d(q, qh);
  Tensor pk = present(past_k, four_d ? view_4d(k) : view_3d(k, kvh), batch, kvh, kv_len, head);
  Tensor pv = present(past_v, four_d ? view_4d(v) : view_3d(v, kvh), batch, kvh, kv_len, v_head);
  const HeadView kview = view_4d(pk), vview = view_4d(pv);
  const int64_t keys = past + kv_len;
  // f16 and bf16 compute in f32, as the reference's expected values do; outputs round to T.
  const DType dt = q.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const DType softmax_dt = dtype_attr(n, dt, "softmax_precision");

  // As the reference scales: sqrt(scale), rounded to T, multiplies each of Q and K.
  const double scale = n.has_attr("scale") ? n.get_float("scale", 1) : 1 / std::sqrt(static_cast<double>(head));
  const double root = rounded(std::sqrt(scale), dt);
  const double softcap = n.get_float("softcap", 0);
  const bool causal = n.get_int("is_causal", 0) != 0;
  const int64_t left = n.get_int("left_window_size", -1), right = n.get_int("right_window_size", -1);
  const int64_t mode = n.get_int("qk_matmul_output_mode", 0);
  const MaskView mask(ctx, ctx.has_input(kMask) ? &ctx.input(kMask) : nullptr, {batch, qh, q_len, keys});

  const DType out_dt = q.dtype();
  Tensor y = four_d ? Tensor(out_dt, {batch, qh, q_len, v_head}) : Tensor(out_dt, {batch, q_len, qh * v_head});
  Tensor scores_out(out_dt, {batch, qh, q_len, keys});
  Tensor lse(DType::F32, {batch, qh, q_len});
  std::vector<double> score(static_cast<size_t>(keys)), bias(static_cast<size_t>(keys)), prob(static_cast<size_t>(keys));
  const int64_t group = qh / kvh;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t valid = nonpad ? nonpad->get_i64(b) : keys;
    const int64_t offset = past_k ? past : nonpad ? valid - q_len : 0;
    for (int64_t h = 0; h < qh; ++h) {
      const int64_t kh = h / group;
      for (int64_t i = 0; i < q_len; ++i) {
        bool attends = false;  // some key's bias is finite
        double top = kNegInf;  // the row's largest logit (NaN propagates)
        for (int64_t j = 0; j < keys; ++j) {
          double s = 0;
          for (int64_t e = 0; e < head; ++e)
            s += rounded(qv.at(b, h, i, e) * root, dt) * rounded(kview.at(b, kh, j, e) * root, dt);
          s = rounded(s, dt);
          if (softcap > 0) s = rounded(softcap * std::tanh(s / softcap), dt);
          double bj = mask.bias(b, h, i, j);
          const int64_t diff = i + offset - j;
          if ((causal && diff < 0) || (left >= 0 && diff > left) || (right >= 0 && -diff > right) || j >= valid)
            bj = kNegInf;
          score[j] = s;
          bias[j] = rounded(bj, dt);
          attends = attends || bias[j] != kNegInf;
          double logit = rounded(rounded(s + bias[j], dt), softmax_dt);
          top = std::isnan(logit) || std::isnan(top) ? std::nan("") : std::max(top, logit);
        }
        // exp(logit - max), a row of -inf taking 0 as its max and a zero sum as 1.
        const double shift = top == kNegInf ? 0 : top;
        double sum = 0;
        for (int64_t j = 0; j < keys; ++j) sum += prob[j] = std::exp(rounded(rounded(score[j] + bias[j], dt), softmax_dt) - shift);
        lse.set_f64((b * qh + h) * q_len + i, attends ? shift + std::log(sum) : kNegInf);
        if (sum == 0) sum = 1;
        for (int64_t j = 0; j < keys; ++j) prob[j] = attends ? rounded(rounded(prob[j] / sum, softmax_dt), dt) : 0;
        const int64_t row = ((b * qh + h) * q_len + i) * keys;
        for (int64_t j = 0; j < keys; ++j)
          scores_out.set_f64(row + j, mode == 3 ? prob[j] : mode == 2 ? score[j] + bias[j] : score[j]);
        for (int64_t e = 0; e < v_head; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < keys; ++j) acc += prob[j] * vview.at(b, kh, j, e);
          y.set_f64(four_d ? ((b * qh + h) * q_len + i) * v_head + e : (b * q_len + i) * qh * v_head + h * v_head + e,
                    acc);
        }
      }
    }
  }
  if (saves_lse(n)) return {std::move(y), std::move(lse)};
  std::vector<Tensor> outs{std::move(y), std::move(pk), std::move(pv), std::move(scores_out)};
  outs.resize(ctx.num_outputs());
  return outs;
}


// ---- the fused kernel ------------------------------------------------------------

// How an Attention node's Q, K and V split into heads, from their types: the
// head counts (attributes for 3-D operands) and each head's size (unknown
// where a dim is); nullopt where the counts are not static and positive with
// the query heads a multiple of the kv heads.
struct HeadLayout {
  bool four_d;
  int64_t heads, kv_heads;
  Dim head, v_head;
};

std::optional<HeadLayout> head_layout(const Node& n) {
  const Dims& q = n.input(kQ)->type().shape();
  const Dims& k = n.input(kK)->type().shape();
  const Dims& v = n.input(kV)->type().shape();
  const bool four_d = q.size() == 4;
  Dim heads = four_d ? q[1] : Dim(n.get_int("q_num_heads", 0));
  Dim kv_heads = four_d ? k[1] : Dim(n.get_int("kv_num_heads", 0));
  if (!heads.is_static() || !kv_heads.is_static() || heads.value() < 1 || kv_heads.value() < 1 ||
      heads.value() % kv_heads.value() != 0)
    return std::nullopt;
  return HeadLayout{four_d, heads.value(), kv_heads.value(),
                    four_d ? q[3] : per_head(n, q[2], heads.value(), "Q"),
                    four_d ? v[3] : per_head(n, v[2], kv_heads.value(), "V")};
}

// The largest head sizes the fused kernel keeps (codegen/attention_template.h).
constexpr int64_t kMaxKernelHeadSize = 256;

// ---- decomposition ------------------------------------------------------------

// The pieces of one Attention node (decompose_attention below).
class AttentionExpansion {
 public:
  AttentionExpansion(Expansion& e, DType t) : e_(e), t_(t) {}

  Value* op(const std::string& piece, const std::string& op, const std::vector<Value*>& ins, Dims shape,
            std::map<std::string, Attribute> attrs = {}, DType dtype = DType::Undefined) {
    return e_.add(piece, op, ins, Type::tensor(dtype == DType::Undefined ? t_ : dtype, std::move(shape)),
                  std::move(attrs));
  }
  Value* transpose(const std::string& piece, Value* x, std::vector<int64_t> perm) {
    Dims in = x->type().shape(), out;
    for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
    return op(piece, "Transpose", {x}, out, {{"perm", Attribute::of_ints(std::move(perm))}}, x->type().dtype());
  }
  // [batch, seq, heads * size] -> [batch, heads, seq, size].
  Value* split_heads(const std::string& name, Value* x, const Dim& heads, const Dim& size) {
    const Dims& s = x->type().shape();
    Value* r = e_.reshape("Reshape_" + name, x, {s[0], s[1], heads, size});
    return transpose("Transpose_" + name, r, {0, 2, 1, 3});
  }
  // [batch, kv_heads, seq, size] -> [batch, kv_heads * group, seq, size], each head repeated group times in place.
  Value* repeat_heads(const std::string& name, Value* x, int64_t group) {
    if (group == 1) return x;
    Dims s = x->type().shape();
    Value* u = op("Unsqueeze_" + name, "Unsqueeze", {x, e_.i64("axis_" + name, 2)}, {s[0], s[1], 1, s[2], s[3]});
    Value* x5 = e_.expand("Expand_" + name, u, {s[0], s[1], group, s[2], s[3]});
    return e_.reshape("Reshape_" + name, x5, {s[0], Dim(s[1].expr() * SymExpr::constant(group)), s[2], s[3]});
  }

 private:
  Expansion& e_;
  DType t_;
};

bool known_dims(const Value* v) {
  if (v == nullptr || !v->type().is_tensor() || !v->type().has_rank()) return false;
  for (const Dim& d : v->type().shape())
    if (d.is_unknown()) return false;
  return true;
}

// Attention -> ops that have kernels (decomposition.h): 3-D operands split
// into heads (tcc::Reshape, Transpose), the cache concatenated in front of K
// and V, grouped kv heads repeated (Unsqueeze, tcc::Expand, tcc::Reshape),
// MatMul(Q, K^T) * scale, soft-capping (Div, Tanh, Mul), the bias added (the
// mask, and causal masking from two tcc::Range), Softmax, rows a mask may hide
// entirely set to zero (Where on ReduceMax of the bias), MatMul with V, and
// 3-D heads merged back. A mask shorter than the keys by a static count is
// padded with -inf (Pad): the keys past its end are hidden. Declines (the
// node stays a host step) before ONNX opset 13 (Unsqueeze's axes input,
// Softmax along one axis), where its dims are unknown, for nonpad_kv_seqlen
// and the window attributes, for a mask shorter than the keys by a symbolic
// count, for a softmax_precision other than T or the f32 that f16 and bf16
// compute in, and where it saves its log-sum-exp. The present
// outputs (a decoder's KV cache) are the K and V pieces, past included;
// qk_matmul_output is the scores piece (modes 0 and 1), it plus the bias
// before hidden rows' zeroing (2) or the probabilities (3), in T.
// passes/decompose leaves the nodes the fused kernel computes whole
// (attention_kernel_refusal); autodiff differentiates any Attention through
// these pieces.
bool decompose_attention(Expansion& e) {
  const Node& n = e.node();
  if (e.onnx_opset() < 13 || saves_lse(n) || n.has_input(kNonpad) || n.has_attr("left_window_size") ||
      n.has_attr("right_window_size"))
    return false;
  Value* q = n.input(kQ);
  Value* k = n.input(kK);
  Value* v = n.input(kV);
  const bool past = n.has_input(kPastKey);
  if (!known_dims(q) || !known_dims(k) || !known_dims(v) || (past && (!known_dims(n.input(kPastKey)) || !known_dims(n.input(kPastValue)))))
    return false;
  const DType t = q->type().dtype();
  // f16 and bf16 compute in f32, as the op's reference does; Y rounds to T at the end.
  const DType work = t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
  if (DType p = dtype_attr(n, t, "softmax_precision"); p != t && p != work) return false;
  AttentionExpansion x(e, work);
  auto to_work = [&](const std::string& name, Value* in) {
    if (in->type().dtype() != t || t == work) return in;
    return e.cast("Cast_" + name, in, work);
  };
  std::optional<HeadLayout> layout = head_layout(n);
  if (!layout || layout->head.is_unknown() || layout->v_head.is_unknown()) return false;
  const Dims qs = q->type().shape();
  const bool four_d = layout->four_d;
  const Dim heads(layout->heads), kv_heads(layout->kv_heads);
  q = to_work("q", q), k = to_work("k", k), v = to_work("v", v);
  if (!four_d) {
    q = x.split_heads("q", q, heads, layout->head);
    k = x.split_heads("k", k, kv_heads, layout->head);
    v = x.split_heads("v", v, kv_heads, layout->v_head);
  }
  const Dim batch = qs[0], q_len = q->type().shape()[2], head = q->type().shape()[3];
  if (past) {
    auto concat = [&](const std::string& name, Value* cache, Value* now) {
      Dims s = now->type().shape();
      s[2] = add_dims(cache->type().shape()[2], s[2]);
      return x.op("Concat_" + name, "Concat", {cache, now}, s, {{"axis", Attribute::of_int(2)}});
    };
    k = concat("present_key", to_work("past_key", n.input(kPastKey)), k);
    v = concat("present_value", to_work("past_value", n.input(kPastValue)), v);
  }
  const Dim keys = k->type().shape()[2];
  const Dim offset = past ? n.input(kPastKey)->type().shape()[2] : Dim(0);
  const bool causal = n.get_int("is_causal", 0) != 0;
  if (causal && !offset.is_static()) return false;
  Value* mask = n.has_input(kMask) ? n.input(kMask) : nullptr;
  if (mask && (!known_dims(mask) || mask->type().rank() == 0)) return false;
  // A mask shorter than the keys hides the keys past its end: it is padded with -inf, by a static count.
  const Dim padding = mask ? Dim(keys.expr() - mask->type().shape().back().expr()) : Dim(0);
  if (!padding.is_static() || padding.value() < 0) return false;
  // The cache the next step reads, in T.
  auto present = [&](size_t out, const std::string& name, Value* cache) {
    if (n.num_outputs() <= out || !e.used(n.output(out))) return;
    e.take_over(out, e.cast("Cast_" + name, cache, t));
  };
  present(kPresentKey, "present_key", k);
  present(kPresentValue, "present_value", v);

  const int64_t group = heads.value() / kv_heads.value();
  k = x.repeat_heads("k", k, group);
  v = x.repeat_heads("v", v, group);
  const Dims scores_shape = {batch, heads, q_len, keys};
  Value* kt = x.transpose("Transpose_k", k, {0, 1, 3, 2});
  Value* s = x.op("MatMul_scores", "MatMul", {q, kt}, scores_shape);
  if (!n.has_attr("scale") && !head.is_static()) return false;
  const double scale = n.has_attr("scale") ? n.get_float("scale", 1) : 1 / std::sqrt(static_cast<double>(head.value()));
  s = x.op("Mul_scale", "Mul", {s, e.scalar("scale", scale, work)}, scores_shape);
  if (double cap = n.get_float("softcap", 0); cap > 0) {
    Value* c = e.scalar("softcap", cap, work);
    Value* th = x.op("Tanh_softcap", "Tanh", {x.op("Div_softcap", "Div", {s, c}, scores_shape)}, scores_shape);
    s = x.op("Mul_softcap", "Mul", {th, c}, scores_shape);
  }

  // The bias: the mask, then -inf where causal masking hides a key.
  Value* zero = nullptr;
  Value* neg_inf = nullptr;
  if (mask || causal) {
    zero = e.scalar("zero", 0, work);
    neg_inf = e.scalar("neg_inf", kNegInf, work);
  }
  Value* bias = nullptr;
  Dims bias_shape;
  if (mask) {
    bias_shape = mask->type().shape();
    bias = mask->type().dtype() == DType::Bool ? x.op("Where_mask", "Where", {mask, zero, neg_inf}, bias_shape)
                                               : to_work("mask", mask);
    if (padding.value() > 0) {
      std::vector<int64_t> pads(2 * bias_shape.size(), 0);
      pads.back() = padding.value();
      bias_shape.back() = keys;
      bias = x.op("Pad_mask", "Pad", {bias, e.i64s("pads_mask", pads), neg_inf}, bias_shape);
    }
  }
  if (causal) {
    Value* rows = x.op("Unsqueeze_rows", "Unsqueeze", {e.range("Range_rows", offset.value(), q_len), e.i64("axis_rows", 1)},
                       {q_len, 1}, {}, DType::I64);
    Value* allowed = x.op("LessOrEqual_causal", "LessOrEqual", {e.range("Range_keys", 0, keys), rows}, {q_len, keys}, {},
                          DType::Bool);
    Dims shape = {q_len, keys};
    if (bias) {
      shape = bias_shape.size() >= 2 ? bias_shape : Dims{q_len, keys};
      if (bias_shape.size() >= 2) shape[shape.size() - 2] = q_len;
    }
    bias = x.op("Where_causal", "Where", {allowed, bias ? bias : zero, neg_inf}, shape);
    bias_shape = shape;
  }
  Value* full_bias = bias;
  // A row the bias hides entirely attends to nothing: its bias becomes 0, so
  // that Softmax, and its gradient, stay finite, and its probabilities 0.
  Value* hidden = nullptr;
  if (mask) {
    int64_t last = static_cast<int64_t>(bias_shape.size()) - 1;
    Type kept = Expansion::kept_type(Type::tensor(work, bias_shape), {last});
    Value* top = e.reduce("ReduceMax_bias", "ReduceMax", bias, {last}, kept);
    hidden = x.op("Equal_hidden", "Equal", {top, neg_inf}, kept.shape(), {}, DType::Bool);
    bias = x.op("Where_hidden_bias", "Where", {hidden, zero, bias}, bias_shape);
  }
  Value* logits = bias ? x.op("Add_bias", "Add", {s, bias}, scores_shape) : s;
  Value* p = x.op("Softmax", "Softmax", {logits}, scores_shape, {{"axis", Attribute::of_int(-1)}});
  if (hidden) p = x.op("Where_hidden", "Where", {hidden, zero, p}, scores_shape);
  if (n.num_outputs() > kScores && e.used(n.output(kScores))) {
    const int64_t mode = n.get_int("qk_matmul_output_mode", 0);
    Value* out = mode == 3                ? p
                 : mode == 2 && full_bias ? x.op("Add_qk_bias", "Add", {s, full_bias}, scores_shape)
                                          : s;
    e.take_over(kScores, e.cast("Cast_qk_matmul_output", out, t));
  }
  const Dim v_head = v->type().shape()[3];
  if (four_d && work == t) {
    e.finish("MatMul_values", "MatMul", {p, v});
    return true;
  }
  Value* y = x.op("MatMul_values", "MatMul", {p, v}, {batch, heads, q_len, v_head});
  if (!four_d) {
    Value* yt = x.transpose("Transpose_y", y, {0, 2, 1, 3});
    const Dims merged = n.output(kY)->type().shape();
    if (work == t) {
      e.finish_reshape("Reshape_y", yt);
      return true;
    }
    y = e.reshape("Reshape_y", yt, merged);
  }
  e.finish("Cast_y", "Cast", {y}, {{"to", Attribute::of_int(static_cast<int64_t>(t))}});
  return true;
}

}  // namespace

namespace attn {

int64_t heads_attr(const Node& n, const char* attr) {
  int64_t h = n.get_int(attr, 0);
  if (h <= 0)
    n.fail(std::string("3-D Q, K and V need a positive ") + attr + " attribute, got " +
           (n.has_attr(attr) ? std::to_string(h) : "none"));
  return h;
}

HeadView view_4d(const Tensor& t) {
  const auto& s = t.shape();
  return {&t, s[1] * s[2] * s[3], s[2] * s[3], s[3]};
}

HeadView view_3d(const Tensor& t, int64_t heads) {
  const auto& s = t.shape();
  return {&t, s[1] * s[2], s[2] / heads, s[2]};
}

MaskView::MaskView(const EvalContext& ctx, const Tensor* m, const std::vector<int64_t>& target) : m_(m) {
  if (!m_) return;
  const auto& s = m_->shape();
  if (s.empty() || s.size() > 4 || s.back() > target[3])
    ctx.fail("attn_mask " + shape_str(s) + " does not broadcast onto the scores " + shape_str(target) +
             " (its last axis may be shorter than the keys)");
  cols_ = s.back();
  int64_t stride = 1;
  for (size_t k = s.size(); k-- > 0;) {
    size_t axis = 4 - s.size() + k;
    if (k + 1 != s.size() && s[k] != 1 && s[k] != target[axis])
      ctx.fail("attn_mask " + shape_str(s) + " does not broadcast onto the scores " + shape_str(target));
    strides_[axis] = s[k] == 1 && k + 1 != s.size() ? 0 : stride;
    stride *= s[k];
  }
}

double MaskView::bias(int64_t b, int64_t h, int64_t i, int64_t j) const {
  if (!m_) return 0;
  if (j >= cols_) return kNegInf;
  double v = m_->get_f64(b * strides_[0] + h * strides_[1] + i * strides_[2] + j * strides_[3]);
  if (m_->dtype() == DType::Bool) return v != 0 ? 0 : kNegInf;
  return v;
}

std::string operands_refusal(const Node& n) {
  const Type& q = n.input(kQ)->type();
  const Type& k = n.input(kK)->type();
  const Type& v = n.input(kV)->type();
  const DType t = q.dtype();
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16) return "its operands are not f32, f16 or bf16";
  if (k.dtype() != t || v.dtype() != t) return "its operands' dtypes differ";
  if (DType p = dtype_attr(n, t, "softmax_precision"); p != DType::F32 && p != t)
    return "its softmax_precision is neither f32 nor its operands'";
  std::optional<HeadLayout> h = head_layout(n);
  if (!h) return "its head counts are not static";
  if (!h->head.is_static() || !h->v_head.is_static() || h->head.value() > kMaxKernelHeadSize ||
      h->v_head.value() > kMaxKernelHeadSize)
    return "its head sizes are not static or exceed " + std::to_string(kMaxKernelHeadSize);
  if (!n.has_input(kMask)) return "";
  const Type& m = n.input(kMask)->type();
  if (m.dtype() != DType::Bool && m.dtype() != DType::F32 && m.dtype() != t)
    return "its mask is neither bool, f32 nor of its operands' dtype";
  const Dims target = {q.shape()[0], h->heads, q.shape()[h->four_d ? 2 : 1], k.shape()[h->four_d ? 2 : 1]};
  if (m.rank() < 1 || m.rank() > 4 || m.shape().back() != target[3]) return "its mask's last axis is not the keys'";
  for (size_t a = 0; a + 1 < m.rank(); ++a) {
    const Dim& d = m.shape()[a];
    if (d != Dim(1) && d != target[4 - m.rank() + a]) return "its mask does not broadcast onto the scores";
  }
  return "";
}

bool saves_lse(const Node& n) {
  return n.op_type() == "Attention" && n.domain() == kTccDomain && n.num_outputs() == 2;
}

std::string attention_kernel_refusal(const Node& n) {
  if (n.num_outputs() != 1 && !saves_lse(n)) return "it has present or qk_matmul_output outputs";
  if (n.has_input(kPastKey) || n.has_input(kPastValue) || n.has_input(kNonpad)) return "it has a cache or nonpad_kv_seqlen";
  if (n.has_attr("left_window_size") || n.has_attr("right_window_size")) return "it has a sliding window";
  return operands_refusal(n);
}

}  // namespace attn

void register_attention_ops(OpRegistry& r) {
  // Any element types: Q, K and V are float (infer_attention checks), attn_mask bool or float, nonpad_kv_seqlen i64.
  auto role = [](const Node& n) { return attn::attention_kernel_refusal(n).empty(); };
  // The log-sum-exp a tcc::Attention saves for its backward stays f32 under autocast, and so does its float
  // attn_mask: the fill (HF's finfo(float32).min) lies beyond f16's and bf16's range, where it would become -inf
  // and hide whole rows that the f32 mask leaves uniform (DeBERTa's padded queries). ONNX's Attention takes a
  // mask of Q's dtype.
  auto lse_output = [](const Node& n, size_t out) { return attn::saves_lse(n) && out == 1; };
  auto mask_input = [](const Node& n, size_t in) { return in == attn::kMask && n.domain() == kTccDomain; };
  r.add(OpDef{"", "Attention", 23, 0, infer_attention, eval_attention, {}})
      .kernel_role(KernelRole::Attention, role)
      .gradient(attn::attention_gradient, attn::fused_backward_applies, attn::save_log_sum_exp)
      .decomposition(decompose_attention)
      .under_autocast(AutocastClass::Low)
      .keeps_under_autocast(mask_input, lse_output);
  // The same op at any opset: what passes/fuse_attention writes for the attention an exporter spelled out.
  r.add(OpDef{std::string(kTccDomain), "Attention", 1, 0, infer_attention, eval_attention, {}})
      .kernel_role(KernelRole::Attention, role)
      .gradient(attn::attention_gradient, attn::fused_backward_applies, attn::save_log_sum_exp)
      .decomposition(decompose_attention)
      .under_autocast(AutocastClass::Low)
      .keeps_under_autocast(mask_input, lse_output);
}

}  // namespace tcc
