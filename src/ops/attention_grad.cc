// tcc::AttentionGrad: the fused attention backward, as FlashAttention-2
// computes it, from the log-sum-exp the forward saved (tcc::Attention's
// second output) and passes that each recompute the scores from Q and K
// rather than keep the [batch, heads, q_len, kv_len] probabilities:
//
//   wrt="stats": per query row, the saved lse_i beside D_i = dY_i . Y_i, as
//                [batch, heads, q_len, 2] f32 (no score is recomputed);
//   wrt="q":     dQ_i = scale * sum_j dS_ij K_j,
//   wrt="kv":    dK_j = scale * sum_i dS_ij Q_i and dV_j = sum_i P_ij dY_i,
//                both from one pass over each key row (outputs dK, dV);
//   wrt="k", wrt="v": one of the two, where only one is wanted,
//
// with P_ij = exp(s_ij - lse_i), dS_ij = P_ij (dY_i . V_j - D_i) times the
// soft-cap's derivative 1 - tanh^2 where the scores are soft-capped, and for a
// grouped kv head the sums over its query heads. Inputs: Q, K, V and the
// optional mask of the Attention node (slots as there), dY, then Y and the
// saved log-sum-exp (stats) or the statistics (the gradients). Attributes:
// wrt and the Attention node's scale, softcap, is_causal, q_num_heads and
// kv_num_heads. The scores s_ij are the forward kernel's: Q_i . K_j * scale,
// soft-capped (softcap * tanh(s / softcap)) where softcap > 0, plus the
// mask's bias, -inf where causal masking hides j > i; a row hidden everywhere
// has lse -inf and passes no gradient.
#include <cmath>
#include <limits>

#include "src/ops/attention.h"
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"

namespace tcc {
namespace attn {
namespace {

enum : size_t { kDY = 4, kAux = 5, kLse = 6 };

enum class Wrt { Stats, Q, K, V, KV };

Wrt wrt_of(const Node& n) {
  const std::string w = n.get_string("wrt", "");
  if (w == "stats") return Wrt::Stats;
  if (w == "q") return Wrt::Q;
  if (w == "k") return Wrt::K;
  if (w == "v") return Wrt::V;
  if (w == "kv") return Wrt::KV;
  n.fail("wrt must be stats, q, k, v or kv, got '" + w + "'");
}

// Under autocast, the f32 row statistics a statistics pass computes (each
// output), and what each pass reads in f32: the forward's log-sum-exp or the
// statistics, and the mask, as the forward does (attention.cc).
bool computes_statistics(const Node& n, size_t) { return n.get_string("wrt", "") == "stats"; }
bool reads_f32(const Node& n, size_t i) { return i == kMask || i == (computes_statistics(n, 0) ? kLse : kAux); }

void infer_attention_grad(InferContext& ctx) {
  if (!inputs_ranked(ctx, {kQ, kK, kV})) return;
  const Node& n = ctx.node();
  const Type& q = ctx.ranked_input(kQ);
  if (q.rank() != 3 && q.rank() != 4) ctx.fail("Q must be 3-D or 4-D, got " + q.str());
  switch (wrt_of(n)) {
    case Wrt::Stats: {
      const Dims& s = q.shape();
      Dims stats = q.rank() == 4 ? Dims{s[0], s[1], s[2], Dim(2)}
                                 : Dims{s[0], Dim(heads_attr(n, "q_num_heads")), s[1], Dim(2)};
      ctx.set_output_type(0, Type::tensor(DType::F32, stats));
      return;
    }
    case Wrt::Q: ctx.set_output_type(0, q); return;
    case Wrt::K: ctx.set_output_type(0, ctx.ranked_input(kK)); return;
    case Wrt::V: ctx.set_output_type(0, ctx.ranked_input(kV)); return;
    case Wrt::KV:
      ctx.set_output_type(0, ctx.ranked_input(kK));
      ctx.set_output_type(1, ctx.ranked_input(kV));
      return;
  }
}

// Element (b, h, s, e) of a [batch, heads, seq, size] operand stored 4-D as
// that or 3-D as [batch, seq, heads * size].
int64_t flat(bool four_d, int64_t b, int64_t h, int64_t s, int64_t e, int64_t heads, int64_t seq, int64_t size) {
  return four_d ? ((b * heads + h) * seq + s) * size + e : (b * seq + s) * heads * size + h * size + e;
}

std::vector<Tensor> eval_attention_grad(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Wrt wrt = wrt_of(n);
  const Tensor& q = ctx.input(kQ);
  const Tensor& k = ctx.input(kK);
  const Tensor& v = ctx.input(kV);
  const Tensor& dy = ctx.input(kDY);
  const Tensor& aux = ctx.input(kAux);
  const bool four_d = q.rank() == 4;
  if (k.rank() != q.rank() || v.rank() != q.rank() || dy.rank() != q.rank())
    ctx.fail("Q, K, V and dY must all be 3-D or all 4-D");
  const int64_t batch = q.shape()[0];
  const int64_t qh = four_d ? q.shape()[1] : heads_attr(n, "q_num_heads");
  const int64_t kvh = four_d ? k.shape()[1] : heads_attr(n, "kv_num_heads");
  if (qh % kvh != 0) ctx.fail("Q's heads are not a multiple of K's");
  const int64_t q_len = q.shape()[four_d ? 2 : 1], kv_len = k.shape()[four_d ? 2 : 1];
  const int64_t head = four_d ? q.shape()[3] : q.shape()[2] / qh;
  const int64_t v_head = four_d ? v.shape()[3] : v.shape()[2] / kvh;
  const std::vector<int64_t> y_shape =
      four_d ? std::vector<int64_t>{batch, qh, q_len, v_head} : std::vector<int64_t>{batch, q_len, qh * v_head};
  if (dy.shape() != y_shape) ctx.fail("dY has shape " + shape_str(dy.shape()) + ", expected " + shape_str(y_shape));
  const std::vector<int64_t> stats_shape{batch, qh, q_len, 2};
  if (aux.shape() != (wrt == Wrt::Stats ? y_shape : stats_shape))
    ctx.fail(std::string(wrt == Wrt::Stats ? "Y" : "the statistics") + " have shape " + shape_str(aux.shape()) +
             ", expected " + shape_str(wrt == Wrt::Stats ? y_shape : stats_shape));
  const HeadView qv = four_d ? view_4d(q) : view_3d(q, qh);
  const HeadView kv = four_d ? view_4d(k) : view_3d(k, kvh);
  const HeadView vv = four_d ? view_4d(v) : view_3d(v, kvh);
  const HeadView dyv = four_d ? view_4d(dy) : view_3d(dy, qh);
  const MaskView mask(ctx, ctx.has_input(kMask) ? &ctx.input(kMask) : nullptr, {batch, qh, q_len, kv_len});
  const double scale = n.has_attr("scale") ? n.get_float("scale", 1) : 1 / std::sqrt(static_cast<double>(head));
  const bool causal = n.get_int("is_causal", 0) != 0;
  const double softcap = n.get_float("softcap", 0);
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  // The score of (i, j) and the soft-cap's derivative there (1 where it does not cap).
  struct Score {
    double s, dcap;
  };
  auto score_of = [&](int64_t b, int64_t h, int64_t i, int64_t j) -> Score {
    if (causal && j > i) return {kNegInf, 0};
    double s = 0;
    for (int64_t e = 0; e < head; ++e) s += qv.at(b, h, i, e) * kv.at(b, h / (qh / kvh), j, e);
    s *= scale;
    double dcap = 1;
    if (softcap > 0) {
      const double t = std::tanh(s / softcap);
      s = softcap * t;
      dcap = 1 - t * t;
    }
    return {s + mask.bias(b, h, i, j), dcap};
  };

  if (wrt == Wrt::Stats) {
    if (!ctx.has_input(kLse)) ctx.fail("the statistics pass reads the forward's log-sum-exp (input 6)");
    const Tensor& lse = ctx.input(kLse);
    if (lse.shape() != std::vector<int64_t>{batch, qh, q_len})
      ctx.fail("the log-sum-exp has shape " + shape_str(lse.shape()) + ", expected " +
               shape_str({batch, qh, q_len}));
    const HeadView yv = four_d ? view_4d(aux) : view_3d(aux, qh);
    Tensor stats(DType::F32, stats_shape);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < qh; ++h)
        for (int64_t i = 0; i < q_len; ++i) {
          double d = 0;
          for (int64_t e = 0; e < v_head; ++e) d += dyv.at(b, h, i, e) * yv.at(b, h, i, e);
          const int64_t row = (b * qh + h) * q_len + i;
          stats.set_f64(row * 2, lse.get_f64(row));
          stats.set_f64(row * 2 + 1, d);
        }
    return {std::move(stats)};
  }

  const bool grad_k = wrt == Wrt::K || wrt == Wrt::KV, grad_v = wrt == Wrt::V || wrt == Wrt::KV;
  std::vector<double> dq(wrt == Wrt::Q ? static_cast<size_t>(q.numel()) : 0);
  std::vector<double> dk(grad_k ? static_cast<size_t>(k.numel()) : 0), dv(grad_v ? static_cast<size_t>(v.numel()) : 0);
  auto at = [&](int64_t b, int64_t h, int64_t s, int64_t e, int64_t heads, int64_t seq, int64_t size) {
    return static_cast<size_t>(flat(four_d, b, h, s, e, heads, seq, size));
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < qh; ++h)
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t row = ((b * qh + h) * q_len + i) * 2;
        const double lse = aux.get_f64(row), d = aux.get_f64(row + 1);
        if (lse == kNegInf) continue;
        const int64_t kh = h / (qh / kvh);
        for (int64_t j = 0; j < kv_len; ++j) {
          const auto [s, dcap] = score_of(b, h, i, j);
          if (s == kNegInf) continue;
          const double p = std::exp(s - lse);
          if (grad_v)
            for (int64_t e = 0; e < v_head; ++e) dv[at(b, kh, j, e, kvh, kv_len, v_head)] += p * dyv.at(b, h, i, e);
          if (wrt == Wrt::V) continue;
          double dp = 0;
          for (int64_t e = 0; e < v_head; ++e) dp += dyv.at(b, h, i, e) * vv.at(b, kh, j, e);
          const double ds = p * (dp - d) * scale * dcap;
          for (int64_t e = 0; e < head; ++e) {
            if (wrt == Wrt::Q) dq[at(b, h, i, e, qh, q_len, head)] += ds * kv.at(b, kh, j, e);
            if (grad_k) dk[at(b, kh, j, e, kvh, kv_len, head)] += ds * qv.at(b, h, i, e);
          }
        }
      }
  auto tensor_of = [](const Tensor& like, const std::vector<double>& acc) {
    Tensor out(like.dtype(), like.shape());
    for (size_t e = 0; e < acc.size(); ++e) out.set_f64(static_cast<int64_t>(e), acc[e]);
    return out;
  };
  std::vector<Tensor> outs;
  if (wrt == Wrt::Q) outs.push_back(tensor_of(q, dq));
  if (grad_k) outs.push_back(tensor_of(k, dk));
  if (grad_v) outs.push_back(tensor_of(v, dv));
  return outs;
}

// Why the fused backward kernels cannot compute n, or "" when they can: the
// forward kernel's operands, dY of the operands' dtype, and Y of it too with
// the f32 log-sum-exp (stats) or f32 statistics; f32 statistics out, or
// gradients of the operands' dtype.
std::string attention_grad_kernel_refusal(const Node& n) {
  if (std::string why = operands_refusal(n); !why.empty()) return why;
  const DType t = n.input(kQ)->type().dtype();
  if (n.input(kDY)->type().dtype() != t) return "dY's dtype is not the operands'";
  const bool stats = wrt_of(n) == Wrt::Stats;
  if (n.input(kAux)->type().dtype() != (stats ? t : DType::F32)) return "Y or the statistics are not of the expected dtype";
  if (stats && (!n.has_input(kLse) || n.input(kLse)->type().dtype() != DType::F32))
    return "it reads no f32 log-sum-exp";
  for (const Value* out : n.outputs())
    if (out->type().dtype() != (stats ? DType::F32 : t)) return "an output is not of the expected dtype";
  return "";
}

}  // namespace

bool fused_backward_applies(const Node& n, const std::vector<bool>& wants) {
  return attention_kernel_refusal(n).empty() && !(n.has_input(kMask) && kMask < wants.size() && wants[kMask]);
}

void attention_gradient(GradContext& c) {
  const Node& n = c.node();
  std::vector<bool> wants;
  for (size_t i = 0; i < n.num_inputs(); ++i) wants.push_back(c.wants(i));
  if (!fused_backward_applies(n, wants)) {
    std::string why = attention_kernel_refusal(n);
    if (why.empty()) why = "its float mask is trained";
    c.fail("tcc differentiates this Attention neither through the fused backward (" + why +
           ") nor through its decomposition, which declined it");
  }
  std::map<std::string, Attribute> attrs;
  for (const char* a : {"scale", "softcap", "is_causal", "q_num_heads", "kv_num_heads"})
    if (const Attribute* v = n.attr(a)) attrs[a] = *v;
  TCC_CHECK(saves_lse(n)) << n.name() << ": autodiff differentiates an Attention once it saves its log-sum-exp";
  Emitter& e = c.e();
  e.graph().set_opset(std::string(kTccDomain), 1);
  auto pass = [&](const char* wrt, std::vector<Value*> aux, size_t outputs) {
    attrs["wrt"] = Attribute::of_string(wrt);
    std::vector<Value*> ins = {c.in(kQ), c.in(kK), c.in(kV), n.has_input(kMask) ? n.input(kMask) : nullptr, c.dy()};
    ins.insert(ins.end(), aux.begin(), aux.end());
    return e.op_n("AttentionGrad", ins, outputs, attrs, std::string(kTccDomain));
  };
  Value* stats = pass("stats", {c.out(0), c.out(1)}, 1).front();
  if (c.wants(kQ)) c.set(kQ, pass("q", {stats}, 1).front());
  if (c.wants(kK) && c.wants(kV)) {
    const std::vector<Value*> dkv = pass("kv", {stats}, 2);
    c.set(kK, dkv[0]);
    c.set(kV, dkv[1]);
  } else if (c.wants(kK)) {
    c.set(kK, pass("k", {stats}, 1).front());
  } else if (c.wants(kV)) {
    c.set(kV, pass("v", {stats}, 1).front());
  }
}

void save_log_sum_exp(Graph& g, Node& n) {
  if (saves_lse(n)) return;
  g.set_opset(std::string(kTccDomain), 1);
  // Twice, so that Y keeps its name: a stand-in takes over n's Y, then the
  // node that outputs the log-sum-exp takes it over under Y's name.
  auto with_lse = [&](Node& from, const std::string& y) {
    Node* t = g.insert_node(&from, "Attention", from.inputs(), {y, g.fresh_name(y + "/lse")},
                            std::string(kTccDomain), from.name());
    for (const auto& [name, a] : from.attrs()) t->set_attr(name, a);
    t->set_source(from.source());
    t->output(0)->set_type(from.output(0)->type());
    g.replace_all_uses(from.output(0), t->output(0));
    g.erase_nodes_if([&](const Node& x) { return &x == &from; });
    return t;
  };
  const std::string y = n.output(0)->name();
  with_lse(*with_lse(n, g.fresh_name(y)), y);
}

}  // namespace attn

void register_attention_grad_ops(OpRegistry& r) {
  r.add(OpDef{std::string(kTccDomain), "AttentionGrad", 1, 0, attn::infer_attention_grad, attn::eval_attention_grad, {}})
      .kernel_role(KernelRole::Attention,
                   [](const Node& n) { return attn::attention_grad_kernel_refusal(n).empty(); })
      .under_autocast(AutocastClass::Low)
      .keeps_under_autocast(attn::reads_f32, attn::computes_statistics);
}

}  // namespace tcc
