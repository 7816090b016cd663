// canonicalize: puts the graph in the one spelling later passes match on, and
// drops ops that do nothing.
//
// Rewrites (a rule table, applied to a fixed point):
//   Add(c, x) -> Add(x, c)            constants of commutative ops go right
//   Identity(x) -> x
//   Dropout(x) -> x                   inference mode, mask unused
//   Cast(x, to=dtype(x)) -> x
//   Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
//   Squeeze(Unsqueeze(x, a), a) -> x, Unsqueeze(Squeeze(x, a), a) -> x
//   Transpose(Transpose(x, p), q) -> Transpose(x, p[q]); Transpose(x, identity) -> x
//   Constant {value_ints = v} -> Constant {value = tensor v}   (value_float(s), value_int(s) alike)
//   SequenceAt(SplitToSequence(x, split), i) -> Slice(x, ...)  (i constant; see read_split_piece)
//   0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> Gelu(x) {approximate = "tanh"}  (see tanh_gelu)
//
// Expects: a verified graph; types make more rules fire (Cast needs x's
// dtype, axes and default perms need ranks) but none is required.
// Leaves alone: main-graph outputs (an Identity that names an output stays),
// rewrites that would change a value's type, Dropout in training mode or
// with its mask read, Reshape chains whose outer shape has a 0 entry (it
// copies a dim of the inner result), and ops in non-default domains.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

#include "passes/rewrite.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

bool is_const(const Value* v) { return constant_value(v).has_value(); }

// Add(c, x) -> Add(x, c). Only ops whose result is bitwise the same either way
// round (Max/Min are not: their NaN handling depends on the operand order).
bool constant_to_right(Node& n, Rewriter& rw) {
  if (n.num_inputs() != 2 || !is_const(n.input(0)) || is_const(n.input(1))) return false;
  Value* c = n.input(0);
  rw.set_input(n, 0, n.input(1));
  rw.set_input(n, 1, c);
  return true;
}

// Identity(x) -> x
bool remove_identity(Node& n, Rewriter& rw) { return rw.replace(n.output(0), n.input(0)); }

// Dropout(x) -> x when it cannot be training: training_mode (opset 12+, the
// only Dropout tcc registers) absent or a constant false, and no mask read.
bool remove_inference_dropout(Node& n, Rewriter& rw) {
  if (n.opset() < 12) return false;
  if (n.has_input(2)) {
    std::optional<double> training = scalar_constant(n.input(2));
    if (!training || *training != 0) return false;
  }
  if (n.num_outputs() > 1 && rw.num_uses(n.output(1)) != 0) return false;
  return rw.replace(n.output(0), n.input(0));
}

// Cast(x, to=dtype(x)) -> x
bool remove_noop_cast(Node& n, Rewriter& rw) {
  const Type& t = n.input(0)->type();
  if (!t.is_tensor() || !n.has_attr("to")) return false;
  std::optional<DType> to = dtype_from_onnx(static_cast<int32_t>(n.get_int("to", 0)));
  return to && *to == t.dtype() && rw.replace(n.output(0), n.input(0));
}

// Reshape(Reshape(x, s1), s2) -> Reshape(x, s2): the result's shape depends on
// s2 and the element count only, unless s2 has a 0 (copy the inner dim) and
// allowzero is off.
bool fold_reshape_chain(Node& n, Rewriter& rw) {
  const Node* inner = n.input(0)->producer();
  if (!inner || inner->op_type() != "Reshape" || !inner->domain().empty()) return false;
  if (n.get_int("allowzero", 0) == 0) {
    std::optional<Tensor> shape = constant_value(n.input(1));
    if (!shape) return false;
    std::vector<int64_t> s = shape->to_i64_vector();
    if (std::find(s.begin(), s.end(), 0) != s.end()) return false;
  }
  rw.set_input(n, 0, inner->input(0));
  return true;
}

// Squeeze/Unsqueeze axes (an attribute before opset 13, input 1 since),
// normalized against `rank`; nullopt when absent or not constant, or when a
// negative axis meets an unknown rank.
std::optional<std::set<int64_t>> axes_of(const Node& n, std::optional<int64_t> rank) {
  std::vector<int64_t> axes;
  if (n.opset() < 13) {
    if (!n.has_attr("axes")) return std::nullopt;
    axes = n.get_ints("axes");
  } else {
    std::optional<Tensor> t = n.has_input(1) ? constant_value(n.input(1)) : std::nullopt;
    if (!t) return std::nullopt;
    axes = t->to_i64_vector();
  }
  std::set<int64_t> out;
  for (int64_t a : axes) {
    if (a < 0 && !rank) return std::nullopt;
    out.insert(a < 0 ? a + *rank : a);
  }
  return out;
}

std::optional<int64_t> rank_of(const Value* v) {
  if (!v->type().is_tensor() || !v->type().has_rank()) return std::nullopt;
  return static_cast<int64_t>(v->type().rank());
}

// Squeeze(Unsqueeze(x, a), a) -> x and Unsqueeze(Squeeze(x, a), a) -> x: both
// axis lists index the tensor between the two ops.
bool cancel_squeeze_pair(Node& n, Rewriter& rw) {
  const std::string other = n.op_type() == "Squeeze" ? "Unsqueeze" : "Squeeze";
  const Node* inner = n.input(0)->producer();
  if (!inner || inner->op_type() != other || !inner->domain().empty()) return false;
  std::optional<int64_t> mid_rank = rank_of(n.input(0));
  auto a = axes_of(*inner, mid_rank), b = axes_of(n, mid_rank);
  return a && b && *a == *b && rw.replace(n.output(0), inner->input(0));
}

// Transpose(Transpose(x, p), q) -> Transpose(x, p[q]); Transpose(x, identity) -> x.
// Output dim i of the pair is dim q[i] of the inner result, which is dim p[q[i]] of x.
bool simplify_transpose(Node& n, Rewriter& rw) {
  std::optional<std::vector<int64_t>> q = transpose_perm(n);
  if (!q) return false;
  if (is_identity_perm(*q)) return rw.replace(n.output(0), n.input(0));
  const Node* inner = n.input(0)->producer();
  if (!inner || inner->op_type() != "Transpose" || !inner->domain().empty()) return false;
  std::optional<std::vector<int64_t>> p = transpose_perm(*inner);
  if (!p || p->size() != q->size()) return false;
  std::vector<int64_t> composed;
  for (int64_t i : *q) {
    if (i < 0 || i >= static_cast<int64_t>(p->size())) return false;
    composed.push_back((*p)[i]);
  }
  if (is_identity_perm(composed)) return rw.replace(n.output(0), inner->input(0));
  rw.set_input(n, 0, inner->input(0));
  n.set_attr("perm", Attribute::of_ints(composed));
  return true;
}

// Constant {value_ints = [0, 2]} -> Constant {value = i64[2] [0, 2]}: the
// spelling kernels read literals from (constant_of), so a Reduce*'s axes or a
// Slice's bounds from an ONNX function's Constant are kernel arguments.
bool spell_constant_as_tensor(Node& n, Rewriter&) {
  static const char* kNumbers[] = {"value_float", "value_floats", "value_int", "value_ints"};
  const char* spelled = nullptr;
  for (const char* k : kNumbers)
    if (n.has_attr(k)) spelled = k;
  if (spelled == nullptr || n.num_outputs() != 1) return false;
  std::optional<Tensor> t = constant_value(n.output(0));
  if (!t) return false;
  n.remove_attr(spelled);
  n.set_attr("value", Attribute::of_tensor(std::move(*t)));
  return true;
}

// SequenceAt(SplitToSequence(x, split), i) -> piece i of x as a Slice along
// the split's axis, for a constant position i: a sequence read at a known place
// is a tensor op, so a model that splits with torch.chunk (which torch writes
// as SplitToSequence where the chunk size is computed from the shapes)
// compiles with no sequence left. Piece i, by split:
//   a scalar k, i >= 0     [i*k, (i+1)*k), computed from k (the last one clamps)
//   constant sizes s       [s0 + ... + s(i-1), s0 + ... + si)
//   none                   [i, i+1), squeezed when keepdims is 0
// The Slice takes the SequenceAt's type; shape inference then refines it. A
// SequenceAt that is a model output stays (its name is the signature).
bool read_split_piece(Node& n, Rewriter& rw) {
  const Node* split = n.input(0)->producer();
  std::optional<double> at = scalar_constant(n.input(1));
  const Type& x = split ? split->input(0)->type() : n.input(0)->type();
  if (!split || split->op_type() != "SplitToSequence" || !split->domain().empty() || !at || !x.is_tensor() ||
      !x.has_rank() || x.rank() == 0 || is_model_output(n.output(0)))
    return false;
  Graph& g = *n.graph();
  const std::string name = n.name().empty() ? n.output(0)->name() : n.name();
  const int64_t rank = static_cast<int64_t>(x.rank());
  int64_t axis = split->get_int("axis", 0);
  if (axis < -rank || axis >= rank) return false;
  if (axis < 0) axis += rank;
  int64_t i = static_cast<int64_t>(*at);
  auto node = [&](const std::string& piece, const std::string& op, const std::vector<Value*>& ins, const Type& t) {
    Node* p = g.insert_node(&n, op, ins, {g.fresh_name(name + "/" + piece)}, "", name + "/" + piece);
    p->set_source(n.source());
    p->output(0)->set_type(t);
    return p;
  };
  Value *start = nullptr, *end = nullptr;
  bool squeeze = false;
  if (!split->has_input(1)) {
    if (i < 0 && x.shape()[static_cast<size_t>(axis)].is_static()) i += x.shape()[static_cast<size_t>(axis)].value();
    if (i < -1) return false;
    start = add_i64_constant(g, name + ".start", {i});
    end = add_i64_constant(g, name + ".end", {i == -1 ? std::numeric_limits<int64_t>::max() : i + 1});
    squeeze = split->get_int("keepdims", 1) == 0;
  } else if (std::optional<Tensor> sizes = constant_value(split->input(1)); sizes && sizes->rank() == 1) {
    std::vector<int64_t> s = sizes->to_i64_vector();
    if (i < 0) i += static_cast<int64_t>(s.size());
    if (i < 0 || i >= static_cast<int64_t>(s.size())) return false;
    int64_t offset = 0;
    for (int64_t k = 0; k < i; ++k) offset += s[static_cast<size_t>(k)];
    start = add_i64_constant(g, name + ".start", {offset});
    end = add_i64_constant(g, name + ".end", {offset + s[static_cast<size_t>(i)]});
  } else {
    const Type& k = split->input(1)->type();
    if (i < 0 || !k.is_tensor() || !k.has_rank() || k.rank() != 0) return false;
    Value* chunk = split->input(1);
    Type i64_1 = Type::tensor(DType::I64, {Dim(1)});
    if (k.dtype() != DType::I64) {
      Node* cast = node("chunk", "Cast", {chunk}, Type::tensor(DType::I64, {}));
      cast->set_attr("to", Attribute::of_int(static_cast<int64_t>(DType::I64)));
      chunk = cast->output(0);
    }
    start = node("start", "Mul", {chunk, add_i64_constant(g, name + ".index", {i})}, i64_1)->output(0);
    end = node("end", "Mul", {chunk, add_i64_constant(g, name + ".next", {i + 1})}, i64_1)->output(0);
  }
  const Type& element = n.output(0)->type();
  Type sliced = element;
  if (squeeze) {
    Dims d = x.shape();
    d[static_cast<size_t>(axis)] = Dim(1);
    sliced = Type::tensor(x.dtype(), d);
  }
  Value* axes = add_i64_constant(g, name + ".axes", {axis});
  Node* piece = node("slice", "Slice", {split->input(0), start, end, axes}, sliced);
  if (squeeze) {
    bool axes_input = n.opset() >= 13;
    piece = node("squeeze", "Squeeze", axes_input ? std::vector<Value*>{piece->output(0), axes} : std::vector<Value*>{piece->output(0)},
                 element);
    if (!axes_input) piece->set_attr("axes", Attribute::of_ints({axis}));
  }
  return rw.replace(n.output(0), piece->output(0));
}

// A polynomial in one value x, of degree 3 at most: the coefficients of x^0 .. x^3.
using Cubic = std::array<double, 4>;

std::optional<Cubic> product(const Cubic& a, const Cubic& b) {
  Cubic r{};
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) {
      if (a[i] == 0 || b[j] == 0) continue;
      if (i + j >= r.size()) return std::nullopt;
      r[i + j] += a[i] * b[j];
    }
  return r;
}

// v as a polynomial in x, when v is computed from x and scalar constants by
// Add, Sub, Mul, Neg, a Div by a constant and a Pow to a constant 0 .. 3;
// each node it passes is added to `seen`.
std::optional<Cubic> cubic_in(const Value* v, const Value* x, std::set<const Node*>& seen, int depth = 0) {
  if (v == x) return Cubic{0, 1, 0, 0};
  if (std::optional<double> c = scalar_constant(v)) return Cubic{*c, 0, 0, 0};
  const Node* n = v->producer();
  constexpr int kMaxDepth = 16;
  if (n == nullptr || !n->domain().empty() || n->num_inputs() == 0 || depth > kMaxDepth) return std::nullopt;
  seen.insert(n);
  const std::string& op = n->op_type();
  std::optional<Cubic> a = cubic_in(n->input(0), x, seen, depth + 1);
  if (!a) return std::nullopt;
  if (op == "Neg") {
    for (double& c : *a) c = -c;
    return a;
  }
  if (n->num_inputs() != 2) return std::nullopt;
  if (op == "Div" || op == "Pow") {
    const std::optional<double> k = scalar_constant(n->input(1));
    if (!k) return std::nullopt;
    if (op == "Div") {
      if (*k == 0) return std::nullopt;
      for (double& c : *a) c /= *k;
      return a;
    }
    if (*k != std::floor(*k) || *k < 0 || *k >= static_cast<double>(a->size())) return std::nullopt;
    Cubic power{1, 0, 0, 0};
    for (int i = 0; i < static_cast<int>(*k); ++i) {
      const std::optional<Cubic> next = product(power, *a);
      if (!next) return std::nullopt;
      power = *next;
    }
    return power;
  }
  std::optional<Cubic> b = cubic_in(n->input(1), x, seen, depth + 1);
  if (!b) return std::nullopt;
  if (op == "Mul") return product(*a, *b);
  if (op != "Add" && op != "Sub") return std::nullopt;
  for (size_t i = 0; i < a->size(); ++i) (*a)[i] += op == "Add" ? (*b)[i] : -(*b)[i];
  return a;
}

// The factors of a tree of Muls rooted at v: scalar constants multiplied into
// `scale`, the others listed; each Mul passed is added to `seen`.
void mul_factors(Value* v, double& scale, std::vector<Value*>& others, std::set<const Node*>& seen, int depth = 0) {
  constexpr int kMaxDepth = 8;
  if (std::optional<double> c = scalar_constant(v)) {
    scale *= *c;
    return;
  }
  const Node* n = v->producer();
  if (n != nullptr && n->op_type() == "Mul" && n->domain().empty() && n->num_inputs() == 2 && depth < kMaxDepth) {
    seen.insert(n);
    mul_factors(n->input(0), scale, others, seen, depth + 1);
    mul_factors(n->input(1), scale, others, seen, depth + 1);
    return;
  }
  others.push_back(v);
}

// Whether a is b to within `rel` of b.
bool near(double a, double b, double rel) { return std::abs(a - b) <= rel * std::abs(b); }

// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> Gelu(x) {approximate
// = "tanh"}: the tanh GELU as Hugging Face's NewGELU (GPT-2, Phi) and Bloom
// write it out, one op that a product's epilogue applies (cuBLASLt's GELU).
// Matched at the outer Mul in any order of its factors: scalar constants
// whose product is 0.5, x, and 1 + tanh(t), where t, read as a polynomial in
// x (cubic_in: x * x * x and Pow(x, 3) alike), is c * x + c * 0.044715 * x^3
// with c = sqrt(2/pi) (to f32's rounding of the exporters' literals). Where x
// is a reshape that only the pattern reads (GPT-2 views its projection's rows
// as [batch, seq, n]), the Gelu reads the reshape's data and the reshape reads
// the Gelu, so the Gelu follows the product. Needs opset 20 (Gelu's first) and
// the Mul's type to be x's.
bool tanh_gelu(Node& n, Rewriter& rw) {
  if (n.opset() < 20 || n.num_inputs() != 2 || is_model_output(n.output(0))) return false;
  std::set<const Node*> seen = {&n};
  double scale = 1;
  std::vector<Value*> others;
  mul_factors(n.input(0), scale, others, seen);
  mul_factors(n.input(1), scale, others, seen);
  constexpr double kRel = 1e-5;  // f32 literals of sqrt(2/pi) and 0.044715, rounded
  if (others.size() != 2 || !near(scale, 0.5, kRel)) return false;
  for (size_t k = 0; k < 2; ++k) {
    Value* x = others[k];
    const Node* add = others[1 - k]->producer();
    if (x->type() != n.output(0)->type() || !is_float(x->type().dtype()) || add == nullptr ||
        add->op_type() != "Add" || !add->domain().empty() || add->num_inputs() != 2)
      continue;
    const size_t t = add->input(0)->producer() != nullptr && add->input(0)->producer()->op_type() == "Tanh" ? 0 : 1;
    const Node* tanh = add->input(t)->producer();
    const std::optional<double> one = scalar_constant(add->input(1 - t));
    if (tanh == nullptr || tanh->op_type() != "Tanh" || !tanh->domain().empty() || !one || *one != 1) continue;
    std::set<const Node*> pattern = seen;
    pattern.insert({add, tanh});
    const std::optional<Cubic> p = cubic_in(tanh->input(0), x, pattern);
    const double c = std::sqrt(2 / std::numbers::pi);
    if (!p || (*p)[0] != 0 || (*p)[2] != 0 || !near((*p)[1], c, kRel) || !near((*p)[3] / (*p)[1], 0.044715, kRel))
      continue;
    Graph& g = *n.graph();
    Node* view = x->producer();
    size_t pattern_reads = 0;
    for (const Node* m : pattern)
      for (const Value* in : m->inputs()) pattern_reads += in == x;
    const bool hoist = view != nullptr && view->graph() == &g && is_reshape(*view) &&
                       is_float(view->input(0)->type().dtype()) && rw.num_uses(x) == pattern_reads;
    Value* data = hoist ? view->input(0) : x;
    const std::string name = n.name().empty() ? n.output(0)->name() : n.name();
    Node* gelu = g.insert_node(hoist ? view : &n, "Gelu", {data}, {g.fresh_name(name + "/gelu")}, "", name + "/gelu");
    gelu->set_source(n.source());
    gelu->set_attr("approximate", Attribute::of_string("tanh"));
    gelu->output(0)->set_type(data->type());
    if (!hoist) return rw.replace(n.output(0), gelu->output(0));
    rw.set_input(*view, 0, gelu->output(0));
    return rw.replace(n.output(0), x);
  }
  return false;
}

// Add(c, x) -> Add(x, c) for every op its OpDef calls commutative (Add, Mul,
// Equal, And, Or, Xor, the bitwise ones), then the other rules.
const std::vector<RewriteRule>& rules() {
  static const std::vector<RewriteRule> table = [] {
    std::vector<RewriteRule> r;
    for (const OpDef* def : OpRegistry::get().all())
      if (def->commutative && def->domain.empty()) r.push_back({def->op_type, "constants_moved_right", constant_to_right});
    std::sort(r.begin(), r.end(), [](const RewriteRule& a, const RewriteRule& b) { return a.op_type < b.op_type; });
    r.insert(r.end(), {
        {"Identity", "identities_removed", remove_identity},          // Identity(x) -> x
        {"Dropout", "dropouts_removed", remove_inference_dropout},    // Dropout(x) -> x (inference)
        {"Cast", "casts_removed", remove_noop_cast},                  // Cast(x: T, to=T) -> x
        {"Reshape", "reshapes_folded", fold_reshape_chain},           // Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
        {"Squeeze", "squeeze_pairs_removed", cancel_squeeze_pair},    // Squeeze(Unsqueeze(x, a), a) -> x
        {"Unsqueeze", "squeeze_pairs_removed", cancel_squeeze_pair},  // Unsqueeze(Squeeze(x, a), a) -> x
        {"Transpose", "transposes_simplified", simplify_transpose},   // Transpose(Transpose(x, p), q) -> Transpose(x, p[q])
        {"Constant", "constants_spelled_as_tensors", spell_constant_as_tensor},  // {value_ints = v} -> {value = v}
        {"SequenceAt", "split_pieces_read", read_split_piece},        // SplitToSequence(x)[i] -> Slice(x)
        {"Mul", "tanh_gelus_recognized", tanh_gelu},                  // 0.5 * x * (1 + tanh(...)) -> Gelu(x)
    });
    return r;
  }();
  return table;
}

}  // namespace

bool canonicalize(Graph& g, PassContext& ctx) { return apply_rewrites(g, rules(), ctx.stats); }

}  // namespace tcc
