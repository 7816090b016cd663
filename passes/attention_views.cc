#include "passes/attention_views.h"

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "passes/attention_masks.h"
#include "passes/rewrite.h"
#include "src/ir/replace_nodes.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

using attention_masks::dims;
using attention_masks::is_onnx;
using attention_masks::known;
using attention_masks::rank_is;
using attention_masks::Readers;
using attention_masks::sole_reader;

// The product over the last two axes of rank-5 operands a and b: a @ b^T
// when `transposed` (b's Transpose read through) or a @ b, spelled as a
// MatMul or as an Einsum of that meaning: {a, b}.
std::optional<std::pair<Value*, Value*>> batched_product(const Node* n, bool transposed) {
  if (n == nullptr || n->num_inputs() != 2 || !rank_is(n->input(0), 5) || !rank_is(n->input(1), 5)) return std::nullopt;
  if (is_onnx(n, "MatMul")) {
    if (!transposed) return std::pair{n->input(0), n->input(1)};
    const Node* t = n->input(1)->producer();
    if (!is_onnx(t, "Transpose") || t->get_ints("perm") != std::vector<int64_t>{0, 1, 2, 4, 3}) return std::nullopt;
    return std::pair{n->input(0), t->input(0)};
  }
  if (!is_onnx(n, "Einsum")) return std::nullopt;
  std::string eq = n->get_string("equation", "");
  std::erase_if(eq, [](char c) { return c == ' '; });
  // Six distinct letters, "abcxy,abcuv->abcst", besides ',', '-' and '>'.
  if (eq.size() != 18 || eq.find(',') != 5 || eq.find("->") != 11 ||
      std::unordered_set<char>(eq.begin(), eq.end()).size() != 9)
    return std::nullopt;
  const std::string x = eq.substr(0, 5), y = eq.substr(6, 5), z = eq.substr(13, 5);
  if (x.substr(0, 3) != y.substr(0, 3) || x.substr(0, 3) != z.substr(0, 3) || x[3] != z[3]) return std::nullopt;
  const bool matches = transposed ? y[3] == z[4] && x[4] == y[4] : x[4] == y[3] && y[4] == z[4];
  if (!matches) return std::nullopt;
  return std::pair{n->input(0), n->input(1)};
}

// The match: the nodes to replace and what they read.
struct Attention5d {
  Node *qk = nullptr, *add = nullptr, *softmax = nullptr, *pv = nullptr;
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  Dims mask_4d;  // the mask viewed onto [B*G, H, Sq, Skv]
};

std::optional<Attention5d> match(Node& softmax, const Readers& readers) {
  Attention5d m;
  m.softmax = &softmax;
  Value* p = softmax.output(0);
  if (!rank_is(p, 5) || !is_float(p->type().dtype())) return std::nullopt;
  if (int64_t axis = softmax.get_int("axis", -1); axis != -1 && axis != 4) return std::nullopt;
  m.pv = sole_reader(readers, p);
  std::optional<std::pair<Value*, Value*>> values = batched_product(m.pv, false);
  if (!values || values->first != p || !rank_is(m.pv->output(0), 5)) return std::nullopt;
  m.v = values->second;
  Value* logits = softmax.input(0);
  if (sole_reader(readers, logits) != &softmax) return std::nullopt;
  m.qk = logits->producer();
  if (is_onnx(m.qk, "Add")) {
    m.add = m.qk;
    m.qk = nullptr;
    for (size_t i = 0; i < 2 && !m.qk; ++i) {
      Value* products = m.add->input(i);
      if (products->type() == logits->type() && batched_product(products->producer(), true) &&
          sole_reader(readers, products) == m.add) {
        m.qk = products->producer();
        m.mask = m.add->input(1 - i);
      }
    }
  }
  std::optional<std::pair<Value*, Value*>> qk = batched_product(m.qk, true);
  if (!qk || !rank_is(m.qk->output(0), 5)) return std::nullopt;
  m.q = qk->first, m.k = qk->second;
  if (!known(m.q) || !known(m.k) || !known(m.v)) return std::nullopt;
  if (m.mask) {
    const Dims& scores = dims(logits);
    if (!known(m.mask) || m.mask->type().rank() > 5 || m.mask->type().dtype() != logits->type().dtype())
      return std::nullopt;
    Dims padded(5 - m.mask->type().rank(), Dim(1));
    for (const Dim& d : dims(m.mask)) padded.push_back(d);
    for (size_t a = 0; a < 5; ++a)
      if (padded[a] != Dim(1) && (a < 2 || padded[a] != scores[a])) return std::nullopt;
    m.mask_4d = {Dim(1), padded[2], padded[3], padded[4]};
  }
  return m;
}

void rewrite(Graph& g, const Attention5d& m) {
  const std::string name = !m.pv->name().empty() ? m.pv->name() : !m.softmax->name().empty() ? m.softmax->name() : "attention";
  const std::string source = m.softmax->source();
  const DType t = m.softmax->output(0)->type().dtype();
  const Dims& q5 = dims(m.q);
  const Dim batch(q5[0].expr() * q5[1].expr());
  auto add = [&](Node* before, const std::string& op, const std::vector<Value*>& ins, const std::string& piece,
                 Dims shape, std::map<std::string, Attribute> attrs = {}) {
    Node* n = g.insert_node(before, op, ins, {g.fresh_name(name + "/" + piece)}, "", name + "/" + piece);
    n->set_source(source);
    for (auto& [key, a] : attrs) n->set_attr(key, std::move(a));
    n->output(0)->set_type(Type::tensor(t, std::move(shape)));
    return n->output(0);
  };
  auto view = [&](Node* before, Value* v, const Dims& to, const std::string& piece) {
    return insert_view(g, before, v, to, name + "/" + piece, name + "/" + piece, source);
  };
  auto as_4d = [&](Node* before, Value* v, const std::string& piece) {
    const Dims& d = dims(v);
    return view(before, v, {batch, d[2], d[3], d[4]}, piece);
  };
  std::unordered_set<const Node*> body = {m.qk, m.softmax, m.pv};
  if (m.add) body.insert(m.add);
  Value* y5 = m.pv->output(0);
  const Type y_type = y5->type();  // replace_nodes erases y5 before the build runs
  g.set_opset(std::string(kTccDomain), 1);
  replace_nodes(g, body, {y5}, [&](Node* before, const std::vector<std::string>& names) {
    Value* q = as_4d(before, m.q, "Reshape_q");
    Value* k = as_4d(before, m.k, "Reshape_k");
    Value* v = as_4d(before, m.v, "Reshape_v");
    const Dims &kd = dims(k), &vd = dims(v);
    const Dims scores = {batch, q5[2], q5[3], kd[2]};
    Value* kt = add(before, "Transpose", {k}, "Transpose_k", {kd[0], kd[1], kd[3], kd[2]},
                    {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    Value* logits = add(before, "MatMul", {q, kt}, "MatMul_scores", scores);
    if (m.mask) logits = add(before, "Add", {logits, view(before, m.mask, m.mask_4d, "Reshape_mask")}, "Add_mask", scores);
    Value* p = add(before, "Softmax", {logits}, "Softmax", scores, {{"axis", Attribute::of_int(-1)}});
    Value* y = add(before, "MatMul", {p, v}, "MatMul_values", {batch, q5[2], q5[3], vd[3]});
    Node* back = g.insert_node(before, "Reshape", {y}, names, std::string(kTccDomain), name + "/Reshape_y");
    back->set_source(source);
    back->set_attr("shape", shape_attr(y_type.shape()));
    back->output(0)->set_type(y_type);
    return back;
  });
}

}  // namespace

bool view_5d_attention(Graph& g, PassStats& stats) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    const Readers readers(g);
    for (const auto& n : g.nodes()) {
      if (!is_onnx(n.get(), "Softmax")) continue;
      std::optional<Attention5d> m = match(*n, readers);
      if (!m) continue;
      rewrite(g, *m);
      stats.add("viewed_as_4d");
      changed = again = true;
      break;
    }
  }
  return changed;
}

}  // namespace tcc
