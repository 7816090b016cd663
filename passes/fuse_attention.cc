// fuse_attention: the attention an exporter spells out -- MatMul(Q, K^T), a
// scale, an optional mask, Softmax over the keys, an optional guard that zeroes
// rows the mask hides entirely, MatMul with V -- becomes one tcc::Attention node
// (src/ops/attention.cc), which the fused attention kernel computes without the
// [batch, heads, q_len, kv_len] scores in memory. The nodes that make Q, K and V
// (head splits, rotary embeddings) stay; the new node reads 4-D Q [B, Hq, Sq, D],
// K [B, Hkv, Skv, D] and V [B, Hkv, Skv, Dv].
//
// Recognized, starting from each Softmax over the last axis:
//   - the products as 4-D MatMuls, or as 3-D MatMuls of [B*H, ...] reshapes of
//     4-D values whose result is reshaped back (torch's bmm), the Softmax
//     before or after the reshape of the logits to that view;
//   - a clamp of the logits to f32's lowest finite value (XGLM's Max with
//     finfo.min after its mask), which changes nothing unless the sum overflowed;
//   - K^T as Transpose(K, [0, 1, 3, 2]); as reshape -> Transpose [0, 2, 1] ->
//     reshape of K (dynamo); in the bmm view, as Transpose [0, 2, 1] of K's
//     reshape (DeBERTa); as a Transpose of another value (legacy's
//     Transpose(x, [0, 2, 3, 1])), K then a new Transpose of that value; as
//     anything else, K then a new Transpose of K^T;
//   - scales: Mul or Div by a one-element constant, of Q, of K^T and of the
//     scores, any number of them (torch's SDPA decomposition scales Q and K by
//     sqrt(scale) each); the `scale` attribute is their product. A Mul by a
//     finite constant per head ([H, 1, 1] or [1, H, 1, 1] on 4-D values:
//     SwinV2's logit scale) scales that head's products alike, so it moves
//     onto Q;
//   - soft-capping (Gemma 2): c * Tanh(scores / c) of a positive one-element
//     constant c, the scores scaled inside it, becomes the `softcap` attribute;
//   - masks: Add(scores, M) of a float M (attn_mask = M); Where(c, scores, fill)
//     and Where(c, fill, scores) with a fill of -inf (attn_mask = c, or its
//     negation) or a finite fill <= -1e30 (attn_mask = a new Where(c, 0, fill),
//     which adds what the Where put in place of the score: the same up to
//     rounding, since |score| is below half an ulp of the fill);
//   - a bias added to the products in the bmm view, nothing scaling the sum
//     (DeBERTa's relative-position scores, BLOOM's ALiBi, the same for every
//     query): viewed per head, it is added to the float mask, or is the mask;
//     likewise a float bias onto the 4-D scores added before a float mask
//     (MPNet's relative position bias, then its padding mask);
//     It must be finite wherever the values it is computed from are
//     (finite_from_finite), or the softmax guarded;
//   - a mask provably causal (below) with -inf or a fill <= -1e30 where it
//     hides is dropped and is_causal = 1 set instead;
//   - shifted windows (Swin): scores [B*W, H, S, S] (plus a mask that is the
//     same for every image) viewed as [B, W, H, S, S], masks [1, W, 1|H, S, S]
//     added (the same for every image too; HF's SwinV2 adds its shift mask
//     twice) and viewed back. The new node
//     then computes the windows as heads: Q, K, V and its output viewed as
//     [B, W*H, S, D] (free when they are contiguous), the two masks summed
//     into one [1, W*H, S, S], which depends on no image;
//   - guards: Where(IsNaN(P), 0, P) and Where(no key of the row finite, 0, P)
//     (torch's SDPA decompositions, ONNX and core ATen);
//   - grouped-query heads: K and V each repeated in place, Reshape of
//     Expand or Tile of Unsqueeze (query head h reads kv head h / group, as
//     Attention does), are read before the repeat. Another layout of the
//     repeat (head h reading h % Hkv) stays in place, which is still correct.
// Which masks are causal, and which finite: passes/attention_masks.h. 5-D
// scores (MaxViT) are first viewed as 4-D: passes/attention_views.h.
//
// Attention gives zeros for a row whose bias is -inf everywhere, where Softmax
// gives NaN. So the rewrite needs a guard, a causal mask (each row keeps its
// diagonal), or a float mask proven finite (constants, Where of finite values,
// bools cast, movement of those: HF's finfo.min masks); otherwise the subgraph
// stays. With a guard, the rewrite differs only where Q, K or V hold NaN or
// infinities.
//
// Expects: shapes inferred (every dim of the values involved known, symbolic
// or static), ONNX opset 13 or later (Attention's decomposition needs it).
// Leaves alone: subgraphs whose scores, probabilities or other intermediates
// have readers outside them or are model outputs, nodes inside regions,
// masks that do not broadcast onto the scores or whose last axis is not the
// keys', and operands whose batch or head counts disagree.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/attention_masks.h"
#include "passes/attention_views.h"
#include "passes/pass.h"
#include "passes/rewrite.h"
#include "src/ir/replace_nodes.h"
#include "src/ops/decomposition.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

using namespace attention_masks;  // NOLINT: the pass reads the analyses throughout

Dim product(const Dim& a, const Dim& b) { return Dim(a.expr() * b.expr()); }

// ---- operands ------------------------------------------------------------------

// x3 [a*b, m, n] as the reshape of a 4-D [a, b, m, n] (a bmm operand): that value.
Value* unmerged(Value* x3) {
  const Node* p = x3->producer();
  if (!is_op(p, "Reshape") || !rank_is(x3, 3) || !rank_is(p->input(0), 4)) return nullptr;
  const Dims &s = dims(p->input(0)), &t = dims(x3);
  return product(s[0], s[1]) == t[0] && s[2] == t[1] && s[3] == t[2] ? p->input(0) : nullptr;
}

// y4 [a, b, m, n] as the reshape of a 3-D [a*b, m, n] (a bmm result): that value.
Value* merged(Value* y4) {
  const Node* p = y4->producer();
  if (!is_op(p, "Reshape") || !rank_is(y4, 4) || !rank_is(p->input(0), 3)) return nullptr;
  const Dims &s = dims(y4), &t = dims(p->input(0));
  return product(s[0], s[1]) == t[0] && s[2] == t[1] && s[3] == t[2] ? p->input(0) : nullptr;
}

// An Expand or Identity that changes nothing: its input.
Value* through_noop(Value* v) {
  while (const Node* p = v->producer()) {
    if (!(is_op(p, "Expand") || is_onnx(p, "Identity")) || p->input(0)->type() != v->type()) break;
    v = p->input(0);
  }
  return v;
}

// What scales the products: one factor, times a constant per head for each of `per_head`.
struct Scale {
  double factor = 1;
  std::vector<Value*> per_head;

  bool identity() const { return factor == 1 && per_head.empty(); }
};

// c scales each head of v [B, H, M, N] alike: a finite constant [H, 1, 1] or [1, H, 1, 1].
bool per_head_constant(const Value* c, const Value* v) {
  if (!rank_is(v, 4) || !known(c) || c->type().rank() < 3 || c->type().rank() > 4) return false;
  const Dims& d = dims(c);
  const size_t r = d.size();
  if (d[r - 1] != Dim(1) || d[r - 2] != Dim(1) || d[r - 3] != dims(v)[1] || (r == 4 && d[0] != Dim(1))) return false;
  std::optional<Tensor> t = constant_value(c);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (!std::isfinite(t->get_f64(i))) return false;
  return true;
}

// v without its scales (Mul or Div by a one-element constant, Mul by a
// constant per head) and no-op broadcasts, which join `scale`. Nodes stripped
// join `body` when given (the scores' scales, which the new node replaces).
Value* strip_scales(Value* v, Scale& scale, std::unordered_set<const Node*>* body) {
  for (;;) {
    Node* p = v->producer();
    Value* next = nullptr;
    if (is_onnx(p, "Mul") || is_onnx(p, "Div")) {
      for (size_t i = p->op_type() == "Div" ? 1 : 0; i < 2 && !next; ++i) {
        Value* x = p->input(1 - i);
        if (x->type() != v->type()) continue;
        if (std::optional<double> c = scalar_constant(p->input(i)); c && std::isfinite(*c) && *c != 0) {
          scale.factor = p->op_type() == "Div" ? scale.factor / *c : scale.factor * *c;
          next = x;
        } else if (p->op_type() == "Mul" && per_head_constant(p->input(i), v)) {
          scale.per_head.push_back(p->input(i));
          next = x;
        }
      }
    } else if (Value* x = through_noop(v); x != v) {
      next = x;
    }
    if (!next) return v;
    if (body) body->insert(p);
    v = next;
  }
}

// A Q, K or V input of the new node: v, or Transpose(v, perm) when perm is set.
struct Operand {
  Value* v = nullptr;
  std::vector<int64_t> perm;

  Dims shape() const {
    if (perm.empty()) return dims(v);
    Dims out;
    for (int64_t p : perm) out.push_back(dims(v)[static_cast<size_t>(p)]);
    return out;
  }
};

// K from K^T [B, H, D, Skv].
Operand untransposed(Value* kt) {
  const Node* p = kt->producer();
  if (is_onnx(p, "Transpose") && known(p->input(0))) {
    std::vector<int64_t> perm = p->get_ints("perm", {3, 2, 1, 0});
    if (perm.size() == 4) {
      std::swap(perm[2], perm[3]);
      if (perm == std::vector<int64_t>{0, 1, 2, 3}) return {p->input(0), {}};
      return {p->input(0), perm};
    }
  }
  // dynamo: [B*H, S, D] -> Transpose [0, 2, 1] -> [B, H, D, S].
  if (Value* t3 = merged(kt); t3 && is_onnx(t3->producer(), "Transpose") &&
                              t3->producer()->get_ints("perm") == std::vector<int64_t>{0, 2, 1})
    if (Value* k = unmerged(t3->producer()->input(0))) return {k, {}};
  return {kt, {0, 1, 3, 2}};
}

// x [B, Hkv*g, S, D] as x0 [B, Hkv, S, D] with each head repeated g times in
// place (Reshape of Expand or Tile of [B, Hkv, 1, S, D]): {x0, g}; else {x, 1}.
std::pair<Value*, int64_t> unrepeated(Value* x) {
  const Node* r = x->producer();
  if (!is_op(r, "Reshape") || !rank_is(x, 4) || !rank_is(r->input(0), 5)) return {x, 1};
  Value* e = r->input(0);
  const Dims &xs = dims(x), &es = dims(e);
  const Node* ep = e->producer();
  if (!(is_op(ep, "Expand") || is_onnx(ep, "Tile")) || !es[2].is_static() || es[2].value() < 2) return {x, 1};
  if (xs[0] != es[0] || xs[1] != product(es[1], es[2]) || xs[2] != es[3] || xs[3] != es[4]) return {x, 1};
  Value* u = ep->input(0);
  if (!rank_is(u, 5) || dims(u) != Dims{es[0], es[1], Dim(1), es[3], es[4]}) return {x, 1};
  // Inserting an axis of size 1 moves no data: any Unsqueeze or Reshape to this shape will do.
  const Node* up = u->producer();
  if (!(is_onnx(up, "Unsqueeze") || is_op(up, "Reshape")) || !rank_is(up->input(0), 4)) return {x, 1};
  Value* x0 = up->input(0);
  if (dims(x0) != Dims{es[0], es[1], es[3], es[4]}) return {x, 1};
  return {x0, es[2].value()};
}

// ---- the match -------------------------------------------------------------------

// What the new node reads as attn_mask.
struct Mask {
  enum class Form { None, AsIs, Negated, FromBool } form = Form::None;
  Value* v = nullptr;  // the mask, the bool to negate, or the bool a float mask is built from
  double fill = 0;     // FromBool: the value where v hides
  bool hide_when_true = false;  // FromBool
};

// Shifted windows: the scores' view [batch, count, H, S, S] and the masks added there.
struct Windows {
  std::vector<Value*> masks;
  Dim batch;
  int64_t count = 0;
};

struct Match {
  std::unordered_set<const Node*> body;  // replaced by the new node
  Operand q, k, v;
  Scale scale;
  double softcap = 0;  // none
  Mask mask;
  // A float [B*H | 1, Sq | 1, Skv] added to the products in torch's bmm view,
  // before any mask, viewed per head; or a float that broadcasts onto the 4-D
  // scores, added before a mask. It joins the new node's attn_mask.
  Value* bias = nullptr;
  std::optional<Windows> windows;
  bool causal = false, guarded = false;
  Value* y = nullptr;  // the output the new node takes over
  const Node* last = nullptr;  // the node producing y: the new node's name and source
};

// h = (some element of the row of `logits` is not -inf), keepdims over the
// last axis: core ATen's any(logits != -inf), ReduceMax over a cast.
bool row_has_finite(const Value* h, const Value* logits, std::unordered_set<const Node*>& body) {
  const Node* p = h->producer();
  std::vector<const Node*> seen;
  if (is_onnx(p, "Cast") && h->type().dtype() == DType::Bool) seen.push_back(p), p = p->input(0)->producer();
  if (!is_onnx(p, "ReduceMax") || p->get_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes = p->get_ints("axes");
  if (p->has_input(1)) {
    std::optional<Tensor> t = constant_value(p->input(1));
    if (!t) return false;
    axes.clear();
    for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(t->get_i64(i));
  }
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != 3)) return false;
  seen.push_back(p), p = p->input(0)->producer();
  if (is_onnx(p, "Cast")) seen.push_back(p), p = p->input(0)->producer();
  if (!is_onnx(p, "Not")) return false;
  seen.push_back(p), p = p->input(0)->producer();
  if (!is_onnx(p, "Equal") || p->input(0) != logits || scalar_constant(p->input(1)) != -std::numeric_limits<double>::infinity())
    return false;
  seen.push_back(p);
  body.insert(seen.begin(), seen.end());
  return true;
}

// b broadcasts onto the products s [B*H, Sq, Skv] in the bmm view, all of them
// or each batch-head alike (BLOOM's ALiBi, [B*H, 1, Skv]), keys along its last axis.
bool bias_onto(const Value* b, const Value* s) {
  if (!rank_is(b, 3) || b->type().dtype() != s->type().dtype()) return false;
  for (size_t a = 0; a < 3; ++a)
    if (dims(b)[a] != dims(s)[a] && (a == 2 || dims(b)[a] != Dim(1))) return false;
  return true;
}

// The scores' MatMul behind `s` (through scales and torch's bmm reshape):
// fills q, k and the scale.
bool match_scores(Value* s, Match& m) {
  s = strip_scales(s, m.scale, &m.body);
  Node* mm = s->producer();
  bool bmm = false;
  if (Value* s3 = merged(s)) {
    m.body.insert(mm);
    s = strip_scales(s3, m.scale, &m.body);
    mm = s->producer();
    bmm = true;
    // The products plus a bias of their own shape, nothing scaling the sum (DeBERTa's relative-position scores).
    if (is_onnx(mm, "Add") && m.scale.identity() && is_float(s->type().dtype()))
      for (size_t i = 0; i < 2; ++i) {
        Value* products = mm->input(i);
        Value* bias = mm->input(1 - i);
        Scale ignored;
        if (products->type() != s->type() || !bias_onto(bias, s) ||
            !is_onnx(strip_scales(products, ignored, nullptr)->producer(), "MatMul"))
          continue;
        m.body.insert(mm);
        m.bias = bias;
        s = strip_scales(products, m.scale, &m.body);
        mm = s->producer();
        break;
      }
  }
  if (!is_onnx(mm, "MatMul")) return false;
  m.body.insert(mm);
  Value* q = mm->input(0);
  Value* kt = mm->input(1);
  if (bmm) {
    q = unmerged(strip_scales(q, m.scale, nullptr));
    kt = strip_scales(kt, m.scale, nullptr);
    // K^T as Transpose(K3, [0, 2, 1]) of K3 [B*H, Skv, D], the view of K (DeBERTa).
    const Node* t = kt->producer();
    if (is_onnx(t, "Transpose") && t->get_ints("perm") == std::vector<int64_t>{0, 2, 1})
      if (Value* k = unmerged(strip_scales(t->input(0), m.scale, nullptr))) {
        if (!q) return false;
        m.q.v = strip_scales(q, m.scale, nullptr);
        m.k = {k, {}};
        return rank_is(m.q.v, 4) && rank_is(k, 4);
      }
    kt = unmerged(kt);
    if (!q || !kt) return false;
  }
  m.q.v = strip_scales(q, m.scale, nullptr);
  m.k = untransposed(strip_scales(kt, m.scale, nullptr));
  return rank_is(m.q.v, 4) && known(m.k.v);
}

bool match_bias(Value* logits, Match& m);

// s = c * Tanh(x / c) (or Tanh(x * (1 / c))), c a positive one-element
// constant: x, its nodes joining `body` and c `cap`; else null.
Value* uncapped(Value* s, double& cap, std::unordered_set<const Node*>& body) {
  Node* outer = s->producer();
  if (!is_onnx(outer, "Mul")) return nullptr;
  for (size_t i = 0; i < 2; ++i) {
    std::optional<double> c = scalar_constant(outer->input(1 - i));
    Node* tanh = outer->input(i)->producer();
    if (!c || !std::isfinite(*c) || *c <= 0 || !is_onnx(tanh, "Tanh") || tanh->output(0)->type() != s->type()) continue;
    Node* inner = tanh->input(0)->producer();
    if (!is_onnx(inner, "Div") && !is_onnx(inner, "Mul")) continue;
    for (size_t j = inner->op_type() == "Div" ? 1 : 0; j < 2; ++j) {
      std::optional<double> d = scalar_constant(inner->input(j));
      Value* x = inner->input(1 - j);
      if (!d || x->type() != s->type()) continue;
      const double divisor = inner->op_type() == "Div" ? *d : 1 / *d;
      if (std::fabs(divisor - *c) > 1e-6 * *c) continue;
      body.insert({outer, tanh, inner});
      cap = *c;
      return x;
    }
  }
  return nullptr;
}

// The scores behind `s`, through soft-capping when there is one (match_scores).
bool match_capped_scores(Value* s, Match& m) {
  Match attempt = m;
  Value* x = uncapped(s, attempt.softcap, attempt.body);
  if (!x) return match_scores(s, m);
  if (!match_scores(x, attempt)) return false;
  m = std::move(attempt);
  return true;
}

// v broadcasts onto `onto` without varying along its first axis (the same for every image).
bool same_for_every_image(const Value* v, const Dims& onto) {
  if (!known(v) || v->type().rank() > onto.size()) return false;
  const size_t r = v->type().rank(), shift = onto.size() - r;
  for (size_t a = 0; a < r; ++a)
    if (dims(v)[a] != Dim(1) && (a + shift == 0 || dims(v)[a] != onto[a + shift])) return false;
  return true;
}

// x [B, W, H, S, S] = (view of the scores) + masks, added one at a time, each
// the same for every image: matches the scores (plus an optional additive
// mask) behind the view and records the windows, `masks` and `adds` holding
// those found nearer the Softmax.
bool match_window_masks(Value* x, const Value* logits, std::vector<Value*> masks, std::vector<const Node*> adds,
                        Match& m) {
  Node* add = x->producer();
  if (!is_onnx(add, "Add")) return false;
  const Dims& s5 = dims(x);
  adds.push_back(add);
  masks.push_back(nullptr);
  for (size_t i = 0; i < 2; ++i) {
    Value* rest = add->input(i);
    Value* mask = add->input(1 - i);
    if (rest->type() != x->type() || mask->type().dtype() != x->type().dtype() || !same_for_every_image(mask, s5))
      continue;
    masks.back() = mask;
    if (const Node* split = rest->producer(); is_op(split, "Reshape") && split->input(0)->type() == logits->type()) {
      Match attempt = m;
      attempt.body.insert(adds.begin(), adds.end());
      attempt.body.insert(split);
      if (match_bias(split->input(0), attempt) && !attempt.windows &&
          (attempt.mask.form == Mask::Form::None || attempt.mask.form == Mask::Form::AsIs)) {
        attempt.windows = Windows{masks, s5[0], s5[1].value()};
        m = std::move(attempt);
        return true;
      }
    }
    if (match_window_masks(rest, logits, masks, adds, m)) return true;
  }
  return false;
}

// logits = view back of x [B, W, H, S, S] (see match_window_masks).
bool match_windows(Value* logits, Match& m) {
  Node* merge = logits->producer();
  if (!is_op(merge, "Reshape") || !rank_is(logits, 4) || !rank_is(merge->input(0), 5)) return false;
  Value* sum = merge->input(0);
  const Dims &s4 = dims(logits), &s5 = dims(sum);
  if (sum->type().dtype() != logits->type().dtype() || !s5[1].is_static() || product(s5[0], s5[1]) != s4[0] ||
      s5[2] != s4[1] || s5[3] != s4[2] || s5[4] != s4[3])
    return false;
  Match attempt = m;
  attempt.body.insert(merge);
  if (!match_window_masks(sum, logits, {}, {}, attempt)) return false;
  m = std::move(attempt);
  return true;
}

// The bias between the scores and the Softmax's input `logits`, then the scores.
bool match_bias(Value* logits, Match& m) {
  Node* p = logits->producer();
  if (match_windows(logits, m)) return true;
  if (is_onnx(p, "Add") && is_float(logits->type().dtype())) {
    for (size_t i = 0; i < 2; ++i) {
      Match attempt = m;
      attempt.body.insert(p);
      if (p->input(i)->type() != logits->type() || !match_capped_scores(p->input(i), attempt)) continue;
      Value* mask = p->input(1 - i);
      if (mask->type().dtype() != logits->type().dtype()) return false;
      attempt.mask = {Mask::Form::AsIs, mask};
      m = std::move(attempt);
      return true;
    }
    // (scores + bias) + mask, both float and broadcasting onto the scores (MPNet's relative position bias).
    for (size_t i = 0; i < 2; ++i) {
      Node* inner = p->input(i)->producer();
      Value* mask = p->input(1 - i);
      if (!is_onnx(inner, "Add") || p->input(i)->type() != logits->type() || mask->type().dtype() != logits->type().dtype())
        continue;
      for (size_t j = 0; j < 2; ++j) {
        Value* bias = inner->input(1 - j);
        Match attempt = m;
        attempt.body.insert({p, inner});
        if (inner->input(j)->type() != logits->type() || bias->type().dtype() != logits->type().dtype() ||
            !rank_is(bias, 4) || !broadcasts_onto(bias, dims(logits)) || !match_capped_scores(inner->input(j), attempt) ||
            attempt.bias)
          continue;
        attempt.bias = bias;
        attempt.mask = {Mask::Form::AsIs, mask};
        m = std::move(attempt);
        return true;
      }
    }
    return false;
  }
  if (is_onnx(p, "Where")) {
    for (size_t i = 1; i < 3; ++i) {
      std::optional<double> fill = scalar_constant(p->input(i));
      if (!fill) continue;
      Match attempt = m;
      attempt.body.insert(p);
      if (p->input(3 - i)->type() != logits->type() || !match_capped_scores(p->input(3 - i), attempt)) continue;
      attempt.mask = {Mask::Form::FromBool, p->input(0), *fill, i == 1};
      m = std::move(attempt);
      return true;
    }
    return false;
  }
  return match_capped_scores(logits, m);
}

// Decides how the mask goes in (or that the subgraph stays): see the header.
bool settle_mask(Match& m, const Dims& scores) {
  Mask& mask = m.mask;
  const Dim &rows = scores[2], &cols = scores[3];
  if (m.windows) {  // both masks are summed as they are: finite, the same for every image, static
    std::vector<const Value*> masks(m.windows->masks.begin(), m.windows->masks.end());
    masks.push_back(mask.v);
    for (const Value* v : masks)
      if (v && !(known(v) && v->type().fully_static() && (m.guarded || finite_mask(v)))) return false;
    return scores[1].is_static() && rows.is_static() && cols.is_static() &&
           (!mask.v || same_for_every_image(mask.v, scores));
  }
  if (mask.form == Mask::Form::None) return true;
  if (!broadcasts_onto(mask.v, scores)) return false;
  if (mask.form == Mask::Form::AsIs) {
    if (causal_additive(mask.v, rows, cols)) {
      m.causal = true, mask = {};
      return true;
    }
    return m.guarded || finite_mask(mask.v);
  }
  if (!hides(mask.fill)) return false;
  if (grid_is(mask.v, rows, cols) && causal_pattern(mask.v) == (mask.hide_when_true ? -1 : 1)) {
    m.causal = true, mask = {};
    return true;
  }
  if (std::isfinite(mask.fill)) return true;  // a float mask, built from the bool
  if (!m.guarded) return false;
  if (!mask.hide_when_true) {
    mask = {Mask::Form::AsIs, mask.v};
  } else if (is_onnx(mask.v->producer(), "Not")) {
    mask = {Mask::Form::AsIs, mask.v->producer()->input(0)};
  } else {
    mask.form = Mask::Form::Negated;
  }
  return true;
}

// The bias joins the mask by addition: a float mask, or none (see the header).
bool settle_bias(const Match& m) {
  if (!m.bias) return true;
  if (m.windows || !(m.guarded || finite_from_finite(m.bias))) return false;
  const Mask& mask = m.mask;
  return mask.form == Mask::Form::None || mask.form == Mask::Form::FromBool ||
         (mask.form == Mask::Form::AsIs && is_float(mask.v->type().dtype()));
}

// l = Max(x, c) of a one-element constant c at or below f32's lowest finite
// value (XGLM clamps its masked logits to finfo.min): x, the Max joining
// `body`; else null. The clamp changes only a logit that overflowed to -inf,
// which a mask's fill does not do to scores below half its ulp (see the header).
Value* unclamped(Value* l, std::unordered_set<const Node*>& body) {
  Node* max = l->producer();
  if (!is_onnx(max, "Max") || max->num_inputs() != 2) return nullptr;
  for (size_t i = 0; i < 2; ++i) {
    std::optional<double> c = scalar_constant(max->input(1 - i));
    if (!c || *c > -static_cast<double>(std::numeric_limits<float>::max()) || max->input(i)->type() != l->type()) continue;
    body.insert(max);
    return max->input(i);
  }
  return nullptr;
}

// The attention around `softmax`, or nothing.
std::optional<Match> match_attention(Node& softmax, const Readers& readers, int64_t onnx_opset) {
  Value* logits = softmax.input(0);
  Value* p = softmax.output(0);
  if (onnx_opset < 13 || !is_float(p->type().dtype())) return std::nullopt;
  Match m;
  m.body.insert(&softmax);
  // The Softmax over torch's bmm view [B*H, Sq, Skv] of the 4-D logits (XGLM): P is in that view already.
  bool bmm = false;
  if (rank_is(p, 3)) {
    Value* logits4 = unmerged(logits);
    if (!logits4) return std::nullopt;
    m.body.insert(logits->producer());
    logits = logits4;
    bmm = true;
  } else if (!rank_is(p, 4)) {
    return std::nullopt;
  }
  if (int64_t axis = softmax.get_int("axis", -1); axis != -1 && axis != (bmm ? 2 : 3)) return std::nullopt;
  const Dims scores = dims(logits);

  // After the Softmax: an optional guard, then MatMul with V (maybe as bmm).
  Node* next = sole_reader(readers, p);
  const auto* p_users = readers.nodes_only(p);
  if (!next && p_users && p_users->size() == 2) {
    Node* a = (*p_users)[0].first;
    Node* b = (*p_users)[1].first;
    if (is_onnx(b, "IsNaN")) std::swap(a, b);
    if (is_onnx(a, "IsNaN") && is_onnx(b, "Where") && b->input(0) == a->output(0) && b->input(2) == p &&
        is_zeros(b->input(1)) && b->output(0)->type() == p->type()) {
      m.body.insert({a, b});
      m.guarded = true;
      next = sole_reader(readers, b->output(0));
      p = b->output(0);
    }
  } else if (is_onnx(next, "Where") && next->input(2) == p && is_zeros(next->input(1)) &&
             next->output(0)->type() == p->type() && is_onnx(next->input(0)->producer(), "Not") &&
             row_has_finite(next->input(0)->producer()->input(0), logits, m.body)) {
    m.body.insert({next, next->input(0)->producer()});
    m.guarded = true;
    p = next->output(0);
    next = sole_reader(readers, p);
  }
  if (next && (is_op(next, "Expand") || is_op(next, "Reshape")) && next->output(0)->type() == p->type()) {
    m.body.insert(next);
    p = next->output(0);
    next = sole_reader(readers, p);
  }
  if (!bmm && next && is_op(next, "Reshape") && unmerged(next->output(0)) == p) {
    m.body.insert(next);
    p = next->output(0);
    next = sole_reader(readers, p);
    bmm = true;
  }
  if (!is_onnx(next, "MatMul") || next->input(0) != p) return std::nullopt;
  m.body.insert(next);
  m.y = next->output(0);
  Value* v = next->input(1);
  if (bmm) {
    Node* split = sole_reader(readers, m.y);
    if (!split || !is_op(split, "Reshape") || merged(split->output(0)) != m.y) return std::nullopt;
    m.body.insert(split);
    m.y = split->output(0);
    v = unmerged(through_noop(v));
    if (!v) return std::nullopt;
  }
  m.v.v = through_noop(v);
  m.last = m.y->producer();

  // Before the Softmax: a clamp, the bias, the scale, the scores' MatMul.
  if (Value* l = unclamped(logits, m.body)) logits = l;
  if (!match_bias(logits, m) || !settle_mask(m, scores) || !settle_bias(m)) return std::nullopt;

  // Grouped-query heads: both K and V read before the same repeat, or neither.
  if (m.k.perm.empty()) {
    auto [k0, gk] = unrepeated(m.k.v);
    auto [v0, gv] = unrepeated(m.v.v);
    if (gk > 1 && gk == gv) m.k.v = k0, m.v.v = v0;
  }

  // The operands agree with the scores and the output.
  if (!known(m.q.v) || !known(m.k.v) || !rank_is(m.v.v, 4) || !rank_is(m.y, 4)) return std::nullopt;
  const Dims q = dims(m.q.v), k = m.k.shape(), vs = dims(m.v.v), y = dims(m.y);
  if (k.size() != 4 || q[0] != scores[0] || q[1] != scores[1] || q[2] != scores[2] || k[0] != q[0] || k[2] != scores[3] ||
      k[3] != q[3] || vs[0] != q[0] || vs[1] != k[1] || vs[2] != k[2] || y != Dims{q[0], q[1], q[2], vs[3]})
    return std::nullopt;
  if (!k[1].is_static() || !q[1].is_static() || k[1].value() < 1 || q[1].value() % k[1].value() != 0) return std::nullopt;
  const DType t = m.q.v->type().dtype();
  if (m.k.v->type().dtype() != t || m.v.v->type().dtype() != t || m.y->type().dtype() != t) return std::nullopt;

  // Every intermediate is read only inside the subgraph, and none is an operand.
  std::vector<const Value*> operands = {m.q.v, m.k.v, m.v.v, m.mask.v, m.bias};
  if (m.windows) operands.insert(operands.end(), m.windows->masks.begin(), m.windows->masks.end());
  for (const Value* in : operands)
    if (in && m.body.count(in->producer())) return std::nullopt;
  for (const Node* n : m.body)
    for (const Value* out : n->outputs()) {
      if (out == m.y) continue;
      const auto* users = readers.nodes_only(out);
      if (!users) return std::nullopt;
      for (const auto& [user, index] : *users)
        if (!m.body.count(user)) return std::nullopt;
    }
  return m;
}

// ---- the rewrite -------------------------------------------------------------------

Value* add_node(Graph& g, Node* before, const std::string& op, const std::vector<Value*>& ins, const std::string& name,
                Type type, std::map<std::string, Attribute> attrs = {}) {
  Node* n = g.insert_node(before, op, ins, {g.fresh_name(name)}, "", name);
  n->output(0)->set_type(std::move(type));
  for (auto& [k, a] : attrs) n->set_attr(k, std::move(a));
  return n->output(0);
}

Value* scalar(Graph& g, const std::string& name, double x, DType t) {
  Tensor c(t, {});
  c.set_f64(0, x);
  return g.add_initializer(g.fresh_name(name), std::move(c));
}

// Erases what no longer has readers, starting from `seeds`.
void erase_dead(Graph& g, std::vector<Node*> seeds) {
  Readers readers(g);
  std::unordered_map<const Value*, size_t> uses;
  std::unordered_set<const Node*> dead;
  auto uses_of = [&](const Value* v) -> size_t& {
    auto it = uses.find(v);
    return it != uses.end() ? it->second : uses.emplace(v, readers.count(v)).first->second;
  };
  while (!seeds.empty()) {
    Node* n = seeds.back();
    seeds.pop_back();
    if (dead.count(n) || !n->regions().empty()) continue;
    bool unused = true;
    for (const Value* out : n->outputs()) unused = unused && uses_of(out) == 0;
    if (!unused) continue;
    dead.insert(n);
    for (Value* in : n->inputs()) {
      if (!in) continue;
      --uses_of(in);
      if (in->producer()) seeds.push_back(in->producer());
    }
  }
  if (!dead.empty()) g.erase_nodes_if([&](const Node& n) { return dead.count(&n) > 0; });
}

// Shifted windows as heads: [B*W, H, S, D] viewed as [B, W*H, S, D].
Type windows_as_heads(const Type& t, const Windows& w) {
  const Dims& d = t.shape();
  return Type::tensor(t.dtype(), {w.batch, Dim(w.count * d[1].value()), d[2], d[3]});
}

// The mask of the windows as heads, [1, W*H, S, S]: the windows' masks [.., W, 1|H, S, S]
// plus the scores' mask [.., 1|H, S, S] (given the window axis), broadcast and viewed.
Value* windows_mask(Graph& g, Node* before, const Match& m, const Dims& scores, const std::string& name) {
  const Windows& w = *m.windows;
  const DType t = w.masks[0]->type().dtype();
  const int64_t heads = scores[1].value(), rows = scores[2].value(), cols = scores[3].value();
  const std::vector<int64_t> full = {1, w.count, heads, rows, cols};
  Value* sum = w.masks[0];
  for (size_t i = 1; i < w.masks.size(); ++i)
    sum = add_node(g, before, "Add", {sum, w.masks[i]}, name + "/Add_window_masks",
                   Type::tensor(t, broadcast_of({sum, w.masks[i]})));
  if (Value* bias = m.mask.v) {
    // Both right-aligned onto [B, W, H, S, S]: the bias (its image axis, if any, is 1) leaves out the window axis.
    auto padded = [](const Value* v) {
      std::vector<int64_t> out(5 - v->type().rank(), 1);
      for (const Dim& d : dims(v)) out.push_back(d.value());
      return out;
    };
    std::vector<int64_t> broadcast = padded(sum), b = padded(bias);
    for (size_t a = 0; a < 5; ++a) broadcast[a] = std::max(broadcast[a], b[a]);
    sum = add_node(g, before, "Add", {sum, bias}, name + "/Add_masks",
                   Type::tensor(t, Dims(broadcast.begin(), broadcast.end())));
  }
  Value* all = sum;
  if (dims(sum).size() != full.size() || dims(sum) != Dims(full.begin(), full.end()))
    all = add_node(g, before, "Expand", {sum, add_i64_constant(g, name + "/mask_shape", full)}, name + "/Expand_mask",
                   Type::tensor(t, Dims(full.begin(), full.end())));
  return add_node(g, before, "Reshape", {all, add_i64_constant(g, name + "/heads_shape", {1, w.count * heads, rows, cols})},
                  name + "/Reshape_mask", Type::tensor(t, {Dim(1), Dim(w.count * heads), Dim(rows), Dim(cols)}));
}

void rewrite(Graph& g, const Match& m, PassStats& stats) {
  const std::string name = m.last->name().empty() ? "attention" : m.last->name();
  const std::string source = m.last->source();
  const Type type = m.y->type();
  const DType t = type.dtype();
  std::vector<Node*> seeds;
  for (const Node* n : m.body)
    for (Value* in : n->inputs())
      if (in && in->producer() && !m.body.count(in->producer())) seeds.push_back(in->producer());
  g.set_opset(std::string(kTccDomain), 1);
  replace_nodes(g, m.body, {m.y}, [&](Node* before, const std::vector<std::string>& names) {
    auto operand = [&](const Operand& o, const char* what) {
      if (o.perm.empty()) return o.v;
      return add_node(g, before, "Transpose", {o.v}, name + "/" + what, Type::tensor(t, o.shape()),
                      {{"perm", Attribute::of_ints(o.perm)}});
    };
    std::vector<Value*> ins = {operand(m.q, "Transpose_q"), operand(m.k, "Transpose_k"), operand(m.v, "Transpose_v")};
    for (Value* c : m.scale.per_head)
      ins[0] = add_node(g, before, "Mul", {ins[0], c}, name + "/Mul_head_scale", ins[0]->type());
    if (m.windows) {
      const Dims scores = {type.shape()[0], type.shape()[1], type.shape()[2], m.k.shape()[2]};
      for (Value*& x : ins) {
        const int64_t heads = dims(x)[1].value();
        x = insert_reshape(g, before, x, {-1, m.windows->count * heads, 0, 0}, windows_as_heads(x->type(), *m.windows),
                           name, source);
      }
      ins.push_back(windows_mask(g, before, m, scores, name));
    }
    const Mask& mask = m.mask;
    const Type mask_type = mask.v ? mask.v->type() : Type();
    if (mask.form == Mask::Form::AsIs && !m.windows) ins.push_back(mask.v);
    if (mask.form == Mask::Form::Negated) ins.push_back(add_node(g, before, "Not", {mask.v}, name + "/Not_mask", mask_type));
    if (mask.form == Mask::Form::FromBool) {
      Value* zero = scalar(g, name + "/zero", 0, t);
      Value* fill = scalar(g, name + "/fill", mask.fill, t);
      ins.push_back(add_node(g, before, "Where", {mask.v, mask.hide_when_true ? fill : zero, mask.hide_when_true ? zero : fill},
                             name + "/Where_mask", Type::tensor(t, mask_type.shape())));
    }
    if (m.bias) {
      Value* bias = m.bias;
      if (rank_is(bias, 3)) {  // the bmm view's, per head
        const Dims& b = dims(bias);
        const bool per_head = b[0] != Dim(1);
        const Dims viewed = {per_head ? type.shape()[0] : Dim(1), per_head ? type.shape()[1] : Dim(1), b[1], b[2]};
        bias = insert_view(g, before, bias, viewed, name + "/bias", name + "/Reshape_bias", source);
      }
      if (ins.size() == 3) {
        ins.push_back(bias);
      } else {  // both broadcast onto the scores
        ins.back() = add_node(g, before, "Add", {ins.back(), bias}, name + "/Add_bias",
                              Type::tensor(t, broadcast_of({ins.back(), bias})));
      }
    }
    Node* att = g.insert_node(before, "Attention", ins, m.windows ? std::vector{g.fresh_name(name)} : names,
                              std::string(kTccDomain), name);
    att->set_source(source);
    att->output(0)->set_type(m.windows ? windows_as_heads(type, *m.windows) : type);
    att->set_attr("scale", Attribute::of_float(static_cast<float>(m.scale.factor)));
    if (m.causal) att->set_attr("is_causal", Attribute::of_int(1));
    if (m.softcap > 0) att->set_attr("softcap", Attribute::of_float(static_cast<float>(m.softcap)));
    if (!m.windows) return att;
    Node* back = g.insert_node(before, "Reshape",
                               {att->output(0), add_i64_constant(g, name + "/shape", {-1, type.shape()[1].value(), 0, 0})},
                               names, "", name);
    back->set_source(source);
    back->output(0)->set_type(type);
    return back;
  });
  erase_dead(g, std::move(seeds));
  stats.add("attention_fused");
  if (m.causal) stats.add("causal_masks");
  if (m.guarded) stats.add("guards_dropped");
  if (m.windows) stats.add("windows_as_heads");
}

}  // namespace

bool fuse_attention(Graph& g, PassContext& ctx) {
  auto opset = g.opsets().find("");
  const int64_t onnx_opset = opset == g.opsets().end() ? 0 : opset->second;
  std::unordered_set<const Node*> declined;
  bool changed = view_5d_attention(g, ctx.stats);
  for (bool again = true; again;) {
    again = false;
    Readers readers(g);
    for (const auto& n : g.nodes()) {
      if (!is_onnx(n.get(), "Softmax") || declined.count(n.get())) continue;
      std::optional<Match> m = match_attention(*n, readers, onnx_opset);
      if (!m) {
        declined.insert(n.get());
        continue;
      }
      rewrite(g, *m, ctx.stats);
      changed = again = true;
      break;
    }
  }
  return changed;
}

}  // namespace tcc
