// What an attention mask holds (see attention_masks.h).
#include "passes/attention_masks.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc::attention_masks {

constexpr double kLargeNegative = -1e30;  // a fill at or below this hides a key as -inf does
constexpr int kMaxDepth = 16;             // how far the mask analyses look back

bool is_op(const Node* n, std::string_view op) {
  return n && n->op_type() == op && (n->domain().empty() || n->domain() == kTccDomain);
}

bool is_onnx(const Node* n, std::string_view op) { return n && n->op_type() == op && n->domain().empty(); }

bool known(const Value* v) {
  if (!v || !v->type().is_tensor() || !v->type().has_rank()) return false;
  for (const Dim& d : v->type().shape())
    if (d.is_unknown()) return false;
  return true;
}

namespace {

bool all_elements(const Value* v, bool (*pred)(double)) {
  std::optional<Tensor> t = constant_value(v);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (!pred(t->get_f64(i))) return false;
  return true;
}

// Every element is `pred`: a constant, its broadcast, or a ConstantOfShape's value.
bool filled_with(const Value* v, bool (*pred)(double)) {
  const Node* p = v->producer();
  if (is_op(p, "Expand")) return filled_with(p->input(0), pred);
  if (is_onnx(p, "ConstantOfShape")) {
    const Tensor* value = p->get_tensor("value");
    return pred(value && value->numel() == 1 ? value->get_f64(0) : 0.0);
  }
  return all_elements(v, pred);
}

bool is_zero_value(double x) { return x == 0; }
bool is_nonzero_value(double x) { return x != 0; }
bool is_finite_value(double x) { return std::isfinite(x); }
bool is_nonzeros(const Value* v) { return filled_with(v, is_nonzero_value); }

// Ops that move elements and keep each one's value (their OpDef's kRearranges).
bool is_movement(const Node* n) {
  const OpDef* def = n ? OpRegistry::get().lookup(*n) : nullptr;
  return def != nullptr && def->has(kRearranges);
}

// Whether n keeps the last two axes of its input as they are (a broadcast or
// reshape around them), or keeps their leading part (a slice from 0 by 1).
bool keeps_last_two(const Node* n) {
  const Value* in = n->input(0);
  const Value* out = n->output(0);
  if (!known(in) || !known(out) || in->type().rank() < 2 || out->type().rank() < 2) return false;
  const Dims &a = dims(in), &b = dims(out);
  bool same = a[a.size() - 2] == b[b.size() - 2] && a.back() == b.back();
  if (is_op(n, "Reshape") || is_op(n, "Expand") || is_onnx(n, "Unsqueeze") || is_onnx(n, "Squeeze") ||
      is_onnx(n, "Identity"))
    return same;
  if (!is_op(n, "Slice") || out->type().rank() != in->type().rank()) return false;
  Dims starts;
  std::vector<int64_t> axes, steps;
  if (n->domain() == kTccDomain) {
    starts = parse_shape_attr(*n, "starts"), axes = n->get_ints("axes"), steps = n->get_ints("steps");
  } else {
    std::optional<Tensor> s = constant_value(n->input(1));
    std::optional<Tensor> ax = n->has_input(3) ? constant_value(n->input(3)) : std::nullopt;
    std::optional<Tensor> st = n->has_input(4) ? constant_value(n->input(4)) : std::nullopt;
    if (!s || (n->has_input(3) && !ax) || (n->has_input(4) && !st)) return false;
    for (int64_t i = 0; i < s->numel(); ++i) {
      starts.push_back(Dim(s->get_i64(i)));
      axes.push_back(ax ? ax->get_i64(i) : i);
      steps.push_back(st ? st->get_i64(i) : 1);
    }
  }
  const auto rank = static_cast<int64_t>(a.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis >= rank - 2 && (starts.at(i) != Dim(0) || (i < steps.size() ? steps[i] : 1) != 1)) return false;
  }
  return true;
}

// An integer grid a * row + b * col + c over the last two axes.
struct Linear {
  int64_t a = 0, b = 0, c = 0;
};

// v as a Linear: a one-element constant, a Range (start, step 1) along the
// row or column axis (where its one dim that is not 1 sits), sums and
// differences of those.
std::optional<Linear> linear_index(const Value* v, int depth = 0) {
  if (depth > kMaxDepth || !known(v) || is_float(v->type().dtype())) return std::nullopt;
  if (std::optional<double> c = scalar_constant(v)) return Linear{0, 0, static_cast<int64_t>(*c)};
  const Node* p = v->producer();
  if (is_onnx(p, "Add") || is_onnx(p, "Sub")) {
    std::optional<Linear> x = linear_index(p->input(0), depth + 1), y = linear_index(p->input(1), depth + 1);
    if (!x || !y) return std::nullopt;
    int64_t sign = p->op_type() == "Sub" ? -1 : 1;
    return Linear{x->a + sign * y->a, x->b + sign * y->b, x->c + sign * y->c};
  }
  // Which axis holds the range: the one dim that is not 1.
  const Dims& s = dims(v);
  int64_t axis = -1;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != Dim(1)) {
      if (axis >= 0) return std::nullopt;
      axis = static_cast<int64_t>(i);
    }
  if (axis < 0) return std::nullopt;
  const auto rank = static_cast<int64_t>(s.size());
  if (axis != rank - 1 && axis != rank - 2) return std::nullopt;
  while (p && (is_onnx(p, "Unsqueeze") || is_op(p, "Reshape"))) p = p->input(0)->producer();
  std::optional<int64_t> start;
  if (is_op(p, "Range") && p->domain() == kTccDomain && p->get_int("delta", 0) == 1) start = p->get_int("start", 0);
  if (is_onnx(p, "Range") && scalar_constant(p->input(2)) == 1.0)
    if (std::optional<double> s0 = scalar_constant(p->input(0))) start = static_cast<int64_t>(*s0);
  if (!start) return std::nullopt;
  return axis == rank - 1 ? Linear{0, 1, *start} : Linear{1, 0, *start};
}

// The largest |element| v holds whatever the inputs are (NaN aside):
// constants, Sigmoid and Tanh (1), elements moved from a bounded value,
// Where of two, sums, differences and products of bounded values (SwinV2's
// 16 * sigmoid(relative position bias)); nullopt where not known.
std::optional<double> magnitude_bound(const Value* v, int depth = 0) {
  if (depth > kMaxDepth) return std::nullopt;
  const Node* p = v->producer();
  if (is_onnx(p, "Sigmoid") || is_onnx(p, "Tanh")) return 1.0;
  if (is_onnx(p, "Add") || is_onnx(p, "Sub") || is_onnx(p, "Mul")) {
    std::optional<double> a = magnitude_bound(p->input(0), depth + 1), b = magnitude_bound(p->input(1), depth + 1);
    if (!a || !b) return std::nullopt;
    return p->op_type() == "Mul" ? *a * *b : *a + *b;
  }
  if (is_onnx(p, "Where")) {
    std::optional<double> a = magnitude_bound(p->input(1), depth + 1), b = magnitude_bound(p->input(2), depth + 1);
    if (!a || !b) return std::nullopt;
    return std::max(*a, *b);
  }
  if (is_movement(p)) return magnitude_bound(p->input(0), depth + 1);
  std::optional<Tensor> t = constant_value(v);
  if (!t) return std::nullopt;
  double most = 0;
  for (int64_t i = 0; i < t->numel(); ++i) {
    const double x = std::fabs(t->get_f64(i));
    if (!std::isfinite(x)) return std::nullopt;
    most = std::max(most, x);
  }
  return most;
}

// |x| <= bound holds for finite values of dtype t only: the bound rounds to a finite t.
bool finite_in(DType t, double bound) {
  Tensor rounded(t, {});
  rounded.set_f64(0, bound);
  return std::isfinite(rounded.get_f64(0));
}

}  // namespace

Readers::Readers(const Graph& g) : users_(g.compute_users()) {
  for (const auto& n : g.nodes())
    for (const Value* v : n->captures()) ++extra_[v];
  for (const Value* v : g.outputs()) ++extra_[v];
}

const std::vector<std::pair<Node*, size_t>>* Readers::nodes_only(const Value* v) const {
  if (extra_.count(v)) return nullptr;
  auto it = users_.find(v);
  return it == users_.end() ? &none_ : &it->second;
}

size_t Readers::count(const Value* v) const {
  auto it = users_.find(v);
  auto e = extra_.find(v);
  return (it == users_.end() ? 0 : it->second.size()) + (e == extra_.end() ? 0 : e->second);
}

Node* sole_reader(const Readers& r, const Value* v) {
  const auto* users = r.nodes_only(v);
  return users && users->size() == 1 ? users->front().first : nullptr;
}

bool hides(double x) { return x <= kLargeNegative; }
bool is_zeros(const Value* v) { return filled_with(v, is_zero_value); }

bool finite_mask(const Value* v, int depth) {
  if (depth > kMaxDepth) return false;
  const Node* p = v->producer();
  if (!p) return all_elements(v, is_finite_value);
  if (is_onnx(p, "Where")) return finite_mask(p->input(1), depth + 1) && finite_mask(p->input(2), depth + 1);
  if (is_onnx(p, "Cast")) {  // to a type whose range holds every value of the source's
    DType from = p->input(0)->type().dtype(), to = v->type().dtype();
    bool wider = to == DType::F64 || (to == DType::F32 && from != DType::F64) || to == from;
    if (is_float(from)) return wider && finite_mask(p->input(0), depth + 1);
    return from == DType::Bool || to == DType::F32 || to == DType::F64;
  }
  if (is_movement(p)) return finite_mask(p->input(0), depth + 1);
  if (filled_with(v, is_finite_value)) return true;
  std::optional<double> bound = magnitude_bound(v, depth);
  return bound && finite_in(v->type().dtype(), *bound);
}

bool finite_from_finite(const Value* v, int depth) {
  if (depth > kMaxDepth) return false;
  const Node* p = v->producer();
  if (is_onnx(p, "MatMul")) return true;
  if (is_onnx(p, "Add") || is_onnx(p, "Sub") || is_onnx(p, "Mul"))
    return finite_from_finite(p->input(0), depth + 1) && finite_from_finite(p->input(1), depth + 1);
  if (is_onnx(p, "Div")) {
    std::optional<double> c = scalar_constant(p->input(1));
    return c && std::isfinite(*c) && *c != 0 && finite_from_finite(p->input(0), depth + 1);
  }
  if (is_movement(p) || is_onnx(p, "Gather") || is_onnx(p, "GatherElements") || is_onnx(p, "CumSum"))
    return finite_from_finite(p->input(0), depth + 1);
  return finite_mask(v, depth);
}

int causal_pattern(const Value* v, int depth) {
  if (depth > kMaxDepth || !known(v) || v->type().rank() < 2) return 0;
  const Node* p = v->producer();
  if (std::optional<Tensor> t = constant_value(v)) {
    const int64_t cols = t->shape().back(), rows = t->shape()[t->shape().size() - 2];
    bool lower = true, upper = true;
    for (int64_t e = 0; e < t->numel(); ++e) {
      const int64_t j = e % cols, i = (e / cols) % rows;
      const bool set = t->get_f64(e) != 0;
      lower = lower && set == (j <= i);
      upper = upper && set == (j > i);
    }
    return lower ? 1 : upper ? -1 : 0;
  }
  if (!p) return 0;
  if (is_onnx(p, "Not")) return -causal_pattern(p->input(0), depth + 1);
  if (is_onnx(p, "Equal")) {  // x == 0 negates x
    for (size_t i = 0; i < 2; ++i)
      if (scalar_constant(p->input(i)) == 0.0) return -causal_pattern(p->input(1 - i), depth + 1);
    return 0;
  }
  if (is_onnx(p, "Cast")) {
    DType from = p->input(0)->type().dtype(), to = v->type().dtype();
    bool keeps_nonzero = to == DType::Bool || from == DType::Bool || (!is_float(from) && is_float(to));
    return keeps_nonzero ? causal_pattern(p->input(0), depth + 1) : 0;
  }
  if (is_onnx(p, "And")) {
    for (size_t i = 0; i < 2; ++i)
      if (is_nonzeros(p->input(i))) return causal_pattern(p->input(1 - i), depth + 1);
    return 0;
  }
  if (is_onnx(p, "Where") && is_nonzeros(p->input(1)) && is_zeros(p->input(2))) return causal_pattern(p->input(0), depth + 1);
  if (is_onnx(p, "Where") && is_zeros(p->input(1)) && is_nonzeros(p->input(2))) return -causal_pattern(p->input(0), depth + 1);
  if (is_onnx(p, "Trilu") && is_nonzeros(p->input(0))) {
    std::optional<double> k = p->has_input(1) ? scalar_constant(p->input(1)) : std::optional<double>(0.0);
    bool upper = p->get_int("upper", 1) != 0;
    if (k == 0.0 && !upper) return 1;
    if (k == 1.0 && upper) return -1;
    return 0;
  }
  for (const char* op : {"LessOrEqual", "Less", "GreaterOrEqual", "Greater"}) {
    if (!is_onnx(p, op)) continue;
    std::optional<Linear> x = linear_index(p->input(0)), y = linear_index(p->input(1));
    if (!x || !y) return 0;
    // Each comparison as e <= t over integers, e = +-(x - y).
    const bool flip = p->op_type()[0] == 'G', strict = p->op_type().back() != 'l';
    const int64_t sign = flip ? -1 : 1;
    const int64_t a = sign * (x->a - y->a), b = sign * (x->b - y->b), t = (strict ? -1 : 0) - sign * (x->c - y->c);
    if (a == -1 && b == 1 && t == 0) return 1;    // j - i <= 0
    if (a == 1 && b == -1 && t == -1) return -1;  // i - j <= -1
    return 0;
  }
  if (is_movement(p) && keeps_last_two(p)) return causal_pattern(p->input(0), depth + 1);
  return 0;
}

bool grid_is(const Value* v, const Dim& rows, const Dim& cols) {
  return known(v) && v->type().rank() >= 2 && dims(v)[v->type().rank() - 2] == rows && dims(v).back() == cols;
}

bool causal_additive(const Value* m, const Dim& rows, const Dim& cols, int depth) {
  if (depth > kMaxDepth || !grid_is(m, rows, cols)) return false;
  const Node* p = m->producer();
  if (is_movement(p) && keeps_last_two(p)) return causal_additive(p->input(0), rows, cols, depth + 1);
  if (!is_onnx(p, "Where") || !grid_is(p->input(0), rows, cols)) return false;
  if (is_zeros(p->input(1)) && filled_with(p->input(2), hides)) return causal_pattern(p->input(0)) == 1;
  if (filled_with(p->input(1), hides) && is_zeros(p->input(2))) return causal_pattern(p->input(0)) == -1;
  return false;
}

bool broadcasts_onto(const Value* m, const Dims& scores) {
  if (!known(m) || m->type().rank() < 1 || m->type().rank() > 4 || dims(m).back() != scores[3]) return false;
  const size_t r = m->type().rank();
  for (size_t a = 0; a + 1 < r; ++a)
    if (dims(m)[a] != Dim(1) && dims(m)[a] != scores[4 - r + a]) return false;
  return true;
}

}  // namespace tcc::attention_masks
