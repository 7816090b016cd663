// fold_transpose_matmul: folds 2-D transposes and scalar scales into Gemm's
// transA / transB / alpha, so one library call does what took two or three
// kernels.
//
// Rewrites (a rule table, applied to a fixed point):
//   MatMul(Transpose(A), B) -> Gemm(A, B, transA=1)
//   MatMul(A, Transpose(B)) -> Gemm(A, B, transB=1)       (both: transA=transB=1)
//   MatMul(A, B) * s, s * MatMul(A, B) -> Gemm(A, B, alpha=s)
//   MatMul(A, B) / s -> Gemm(A, B, alpha=1/s)             s a power of two
//   Gemm(A, B, alpha=a) * s -> Gemm(A, B, alpha=a*s)      Gemm without C
// Only 2-D operands (Gemm's domain); a Transpose counts when it swaps the two
// dims. Gemm computes alpha * (A @ B) with one rounding where MatMul then Mul
// rounds twice, so results agree within float rounding, not bitwise; Div is
// folded only by powers of two, where x / s == x * (1/s) exactly.
//
// Expects: types from shape inference (ranks, dtypes), opset 11+ (Gemm with
// optional C).
// Leaves alone: batched (rank > 2) and 1-D MatMuls, integer MatMuls (Gemm's
// integer semantics differ), a scaled MatMul read by anything but the scale,
// a Gemm with C, scales that are not single-element constants or would
// change the result's type, and main-graph outputs. A Transpose that other
// nodes still read stays for them.
#include <cmath>

#include "passes/rewrite.h"

namespace tcc {

namespace {

bool is_float_matrix(const Value* v) {
  const Type& t = v->type();
  return t.is_tensor() && is_float(t.dtype()) && t.has_rank() && t.rank() == 2;
}

// The input of a Transpose that swaps the two dims of a matrix, else null.
Value* transposed_matrix(const Value* v) {
  const Node* p = v->producer();
  if (!p || p->op_type() != "Transpose" || !p->domain().empty() || !is_float_matrix(p->input(0))) return nullptr;
  std::vector<int64_t> perm = p->get_ints("perm", {1, 0});
  return perm == std::vector<int64_t>{1, 0} ? p->input(0) : nullptr;
}

// A Gemm computing what `replaced` held, inserted before `at`.
Node* make_gemm(Node& at, Value* replaced, Value* a, Value* b, int64_t trans_a, int64_t trans_b, double alpha) {
  Graph& g = *at.graph();
  Node* gemm = g.insert_node(&at, "Gemm", {a, b}, {g.fresh_name(replaced->name())}, "", at.name());
  gemm->set_source(at.source());
  if (trans_a) gemm->set_attr("transA", Attribute::of_int(1));
  if (trans_b) gemm->set_attr("transB", Attribute::of_int(1));
  if (alpha != 1.0) gemm->set_attr("alpha", Attribute::of_float(static_cast<float>(alpha)));
  gemm->output(0)->set_type(replaced->type());
  return gemm;
}

bool gemm_ok(const Node& n) {
  return n.opset() >= 11 && !is_model_output(n.output(0)) && is_float_matrix(n.output(0));
}

// MatMul(Transpose(A), B) -> Gemm(A, B, transA=1), and the transB twin.
bool matmul_to_gemm(Node& n, Rewriter& rw) {
  if (!gemm_ok(n) || !is_float_matrix(n.input(0)) || !is_float_matrix(n.input(1))) return false;
  Value* a = transposed_matrix(n.input(0));
  Value* b = transposed_matrix(n.input(1));
  if (!a && !b) return false;
  Node* gemm = make_gemm(n, n.output(0), a ? a : n.input(0), b ? b : n.input(1), a != nullptr, b != nullptr, 1.0);
  return rw.replace(n.output(0), gemm->output(0));
}

// Scales `product` (a MatMul or C-less Gemm output read only by n) by s.
bool scale_product(Node& n, Rewriter& rw, Value* product, double s) {
  const Node* p = product->producer();
  if (!p || !p->domain().empty() || rw.num_uses(product) != 1) return false;
  if (!is_float_matrix(product) || product->type() != n.output(0)->type()) return false;
  if (!std::isfinite(s) || static_cast<double>(static_cast<float>(s)) != s) return false;
  if (p->op_type() == "MatMul") {
    if (!is_float_matrix(p->input(0)) || !is_float_matrix(p->input(1))) return false;
    Node* gemm = make_gemm(n, n.output(0), p->input(0), p->input(1), 0, 0, s);
    return rw.replace(n.output(0), gemm->output(0));
  }
  if (p->op_type() == "Gemm" && !p->has_input(2)) {
    double alpha = p->get_float("alpha", 1.0f) * s;
    Node* gemm = make_gemm(n, n.output(0), p->input(0), p->input(1), p->get_int("transA", 0), p->get_int("transB", 0),
                           alpha);
    return rw.replace(n.output(0), gemm->output(0));
  }
  return false;
}

// MatMul(A, B) * s -> Gemm(A, B, alpha=s), either operand order.
bool mul_into_alpha(Node& n, Rewriter& rw) {
  if (!gemm_ok(n) || n.num_inputs() != 2) return false;
  for (size_t i = 0; i < 2; ++i)
    if (std::optional<double> s = scalar_constant(n.input(1 - i)))
      if (scale_product(n, rw, n.input(i), *s)) return true;
  return false;
}

// MatMul(A, B) / s -> Gemm(A, B, alpha=1/s) when 1/s is exact: s = ±2^k.
bool div_into_alpha(Node& n, Rewriter& rw) {
  if (!gemm_ok(n) || n.num_inputs() != 2) return false;
  std::optional<double> s = scalar_constant(n.input(1));
  if (!s || *s == 0) return false;
  int exp = 0;
  if (std::fabs(std::frexp(*s, &exp)) != 0.5) return false;
  return scale_product(n, rw, n.input(0), 1.0 / *s);
}

const std::vector<RewriteRule> kRules = {
    {"MatMul", "transposes_folded", matmul_to_gemm},  // MatMul(Transpose(A), B) -> Gemm(A, B, transA=1)
    {"Mul", "scales_folded", mul_into_alpha},         // MatMul(A, B) * s -> Gemm(A, B, alpha=s)
    {"Div", "scales_folded", div_into_alpha},         // MatMul(A, B) / 2^k -> Gemm(A, B, alpha=2^-k)
};

}  // namespace

bool fold_transpose_matmul(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
