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
//   Pad(x, pads = 0) -> x                (an ONNX function's pads computed from
//                                        shapes, folded to zeros)
//   x / c -> x * (1 / c)   for float x and a constant c whose every element is
//                          a power of two with a reciprocal its dtype holds
//                          (attention's scores / 8): both round the same real
//                          number x * 2^-k, and a GPU multiplies in one
//                          instruction where an IEEE division takes a sequence
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
#include <algorithm>
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

// The elementwise reciprocal of v's constant data when every element is a
// power of two (negative ones too) whose reciprocal v's dtype represents exactly.
std::optional<Tensor> exact_reciprocal(const Value* v) {
  std::optional<Tensor> t = constant_value(v);
  if (!t || !is_float(t->dtype()) || t->numel() == 0) return std::nullopt;
  Tensor r(t->dtype(), t->shape());
  for (int64_t i = 0; i < t->numel(); ++i) {
    double e = t->get_f64(i);
    int exponent = 0;
    if (!std::isfinite(e) || std::fabs(std::frexp(e, &exponent)) != 0.5) return std::nullopt;
    r.set_f64(i, 1.0 / e);
    if (r.get_f64(i) != 1.0 / e) return std::nullopt;  // out of the dtype's range
  }
  return r;
}

// x / c -> x * (1 / c), c a constant of powers of two.
bool div_by_power_of_two(Node& n, Rewriter& rw) {
  if (n.num_inputs() != 2 || is_model_output(n.output(0))) return false;
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !is_float(x.dtype())) return false;
  std::optional<Tensor> reciprocal = exact_reciprocal(n.input(1));
  if (!reciprocal || reciprocal->dtype() != x.dtype()) return false;
  Graph& g = *n.graph();
  Value* c = g.add_initializer(g.fresh_name(n.input(1)->name() + "_reciprocal"), std::move(*reciprocal));
  Node* mul = g.insert_node(&n, "Mul", {n.input(0), c}, {g.fresh_name(n.output(0)->name())}, "", n.name());
  mul->set_source(n.source());
  mul->output(0)->set_type(n.output(0)->type());
  return rw.replace(n.output(0), mul->output(0));
}

// Pad(x, 0) -> x, in any mode and with any fill: no element is added.
bool pad_nothing(Node& n, Rewriter& rw) {
  if (n.opset() < 11) {
    std::vector<int64_t> pads = n.get_ints("pads");
    return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }) &&
           rw.replace(n.output(0), n.input(0));
  }
  return n.has_input(1) && all_equal(n.input(1), 0.0) && rw.replace(n.output(0), n.input(0));
}

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
    {"Div", "div_by_power_of_two", div_by_power_of_two},  // x / 8 -> x * 0.125
    {"Pow", "pow_one", pow_one},                     // x ** 1 -> x
    {"Neg", "double_negation", cancel_involution},   // Neg(Neg(x)) -> x
    {"Not", "double_negation", cancel_involution},   // Not(Not(x)) -> x
    {"Pad", "pads_of_zero", pad_nothing},            // Pad(x, 0) -> x
};

}  // namespace

bool simplify_algebra(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
