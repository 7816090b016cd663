// simplify_algebra: removes arithmetic that gives back its operand.
//
// Rewrites (a rule table, applied to a fixed point):
//   x * 1 -> x, 1 * x -> x
//   x + (-0.0) -> x, (-0.0) + x -> x     (x + 0 -> x for integers)
//   x - 0.0 -> x                        (not x - (-0.0))
//   x / 1 -> x
//   x ** 1 -> x
//   Neg(Neg(x)) -> x
//   Not(Not(x)) -> x
// Every rewrite is exact for every input, NaN and infinities included, so the
// reference interpreter stays a bitwise oracle for the optimized graph. That is
// why float x + 0.0 is left alone: IEEE gives -0.0 + 0.0 = +0.0, not x. torch
// Inductor treats -0.0 == 0.0 and folds it; exporters hardly ever emit x + 0,
// so tcc keeps exactness instead. Likewise x - 0.0 is exact (it is x + (-0.0))
// but x - (-0.0) is not.
// Sqrt(x) * Sqrt(x) -> x and the like are left alone: wrong for x < 0 and
// not exact after rounding.
//
// Expects: a verified graph with types (shape inference run): a rewrite only
// fires when the result's type equals x's, so broadcasting against the
// constant (x: [4] * ones[2, 4]) never changes a shape.
// Leaves alone: main-graph outputs, constants with any element other than
// the identity, and operands whose constant-ness needs folding first.
#include <cmath>

#include "passes/rewrite.h"

namespace tcc {

namespace {

// Every element of v's constant data equals `identity`, float zeros with the
// same sign: -0.0 is Add's identity, +0.0 Sub's (x - (-0.0) = x + 0.0).
bool all_equal(const Value* v, double identity) {
  std::optional<Tensor> t = constant_value(v);
  if (!t || t->dtype() == DType::String || t->numel() == 0) return false;
  for (int64_t i = 0; i < t->numel(); ++i) {
    double e = t->get_f64(i);
    if (e != identity || (is_float(t->dtype()) && std::signbit(e) != std::signbit(identity))) return false;
  }
  return true;
}

// op(x, identity) -> x, and op(identity, x) -> x when `commutes`.
bool drop_identity_operand(Node& n, Rewriter& rw, double identity, bool commutes) {
  if (n.num_inputs() != 2) return false;
  if (all_equal(n.input(1), identity) && rw.replace(n.output(0), n.input(0))) return true;
  return commutes && all_equal(n.input(0), identity) && rw.replace(n.output(0), n.input(1));
}

// Integer zeros have no sign, so -0.0 matches them too.
bool add_zero(Node& n, Rewriter& rw) { return drop_identity_operand(n, rw, -0.0, true); }
bool sub_zero(Node& n, Rewriter& rw) { return drop_identity_operand(n, rw, 0.0, false); }
bool mul_one(Node& n, Rewriter& rw) { return drop_identity_operand(n, rw, 1.0, true); }
bool div_one(Node& n, Rewriter& rw) { return drop_identity_operand(n, rw, 1.0, false); }
bool pow_one(Node& n, Rewriter& rw) { return drop_identity_operand(n, rw, 1.0, false); }

// f(f(x)) -> x for an involution f.
bool cancel_involution(Node& n, Rewriter& rw) {
  const Node* inner = n.input(0)->producer();
  if (!inner || inner->op_type() != n.op_type() || !inner->domain().empty()) return false;
  return rw.replace(n.output(0), inner->input(0));
}

const std::vector<RewriteRule> kRules = {
    {"Mul", "mul_by_one", mul_one},                  // x * 1 -> x, 1 * x -> x
    {"Add", "add_zero", add_zero},                   // x + (-0.0) -> x, (-0.0) + x -> x
    {"Sub", "sub_zero", sub_zero},                   // x - 0.0 -> x
    {"Div", "div_by_one", div_one},                  // x / 1 -> x
    {"Pow", "pow_one", pow_one},                     // x ** 1 -> x
    {"Neg", "double_negation", cancel_involution},   // Neg(Neg(x)) -> x
    {"Not", "double_negation", cancel_involution},   // Not(Not(x)) -> x
};

}  // namespace

bool simplify_algebra(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
