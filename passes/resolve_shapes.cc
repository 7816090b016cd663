// resolve_shapes: movement ops whose target shape is computed at run time
// from other tensors' shapes get that shape written into the op.
//
// Exporters compute a Reshape's target (or an Expand's, or a Slice's bounds)
// with Shape -> Gather -> Unsqueeze -> Concat chains. Shape inference already
// knows the result symbolically ([batch, seq, 4, 16]); when every symbol in it
// is bound by a graph input (it is a whole dim of some input, so the runtime
// reads it from that input's shape), the op becomes tcc::Reshape /
// tcc::Expand / tcc::Slice carrying the dims as SymExpr texts, and the chain
// that fed it is left without users for dce:
//
//   %s = Concat(...Gather(Shape(%x))...)          %y = tcc::Reshape(%x) {shape = ["batch", "seq", "4", "16"]}
//   %y = Reshape(%x, %s)                     ->
//
// An integer Range(start, limit, delta) with constant start and delta whose
// length resolved to bound symbols becomes tcc::Range() {start, delta, shape,
// to}: the Shape chain that computed the limit dies, and a kernel computes the
// values from the coordinate (position ids).
//
// Size(x) of an x whose dims are known and bound becomes tcc::Size() {dims},
// reading no tensor: x's data no longer has to outlive the node, and the
// count is a size parameter of whatever kernel uses it.
//
// A Slice is resolved when its axes and steps are known integers (steps
// positive) and its starts are known dims over bound symbols, constant or
// computed from shapes (x[:, seq // 2 :]); its output shape says where each
// axis ends, and the starts become SymExpr texts as the shape's dims.
//
// A Reshape whose resolved shape is the one its data already has (GPT-NeoX
// views the attention's output to its own shape) is that data: its readers
// read the data, and the node is left for dce.
//
// A Pad (constant, edge, reflect or wrap) whose pads are known dims over bound
// symbols, none negative (torch pads H up to a multiple of a window:
// (4 - H % 4) % 4), becomes tcc::Pad(x, <none>, fill) {mode, pads}, each
// axis's begin and then each axis's end as SymExpr texts.
//
// Expects: a verified graph; types are re-inferred here. Sets the model's
// "tcc" opset import to 1 when it rewrites anything.
// Leaves alone: ops whose shape argument is already constant (nothing to
// gain), ops whose shape argument shape inference cannot follow (read from
// data: the output's dims would be only what the model declares), ops whose
// resolved dims mention a symbol no input binds (e.g. a data-dependent size),
// ops tcc does not support at their opset, and nodes inside regions.
#include <algorithm>
#include <cctype>
#include <set>

#include "passes/pass.h"
#include "src/ir/replace_nodes.h"
#include "passes/rewrite.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

// The output dims as texts when each is known and mentions only bound symbols.
std::optional<std::vector<std::string>> resolved_dims(const Value* v, const std::set<std::string>& bound) {
  const Type& t = v->type();
  if (!t.is_tensor() || !t.fully_shaped()) return std::nullopt;
  std::vector<std::string> dims;
  for (const Dim& d : t.shape()) {
    for (const std::string& s : d.expr().symbols())
      if (!bound.count(s)) return std::nullopt;
    dims.push_back(d.str());
  }
  return dims;
}

bool is_constant_input(const Node& n, size_t i) { return !n.has_input(i) || constant_value(n.input(i)); }

// Whether shape inference knows every entry of input i: a constant, or
// contents it computed from a shape chain. Only then does the node's output
// type follow from it; otherwise its dims may be the model's declared ones,
// which nothing checked (an Expand to a shape read from data).
bool contents_known(const Node& n, size_t i, const ShapeInfo& info) {
  if (is_constant_input(n, i)) return true;
  auto it = info.values.find(n.input(i));
  return it != info.values.end() &&
         std::none_of(it->second.begin(), it->second.end(), [](const Dim& d) { return d.is_unknown(); });
}

// tcc::Range's attributes for an integer Range whose start and delta are
// constants and whose length is symbolic over bound symbols (a static length
// is constant_fold's).
std::optional<std::map<std::string, Attribute>> range_attrs(const Node& n, const std::set<std::string>& bound,
                                                            const ShapeInfo& info) {
  const Type& t = n.output(0)->type();
  if (n.num_inputs() != 3 || !t.is_tensor() || t.fully_static() || (t.dtype() != DType::I64 && t.dtype() != DType::I32))
    return std::nullopt;
  if (!contents_known(n, 1, info)) return std::nullopt;
  std::optional<Tensor> start = constant_value(n.input(0)), delta = constant_value(n.input(2));
  if (!start || !delta || start->numel() != 1 || delta->numel() != 1) return std::nullopt;
  std::optional<std::vector<std::string>> dims = resolved_dims(n.output(0), bound);
  if (!dims) return std::nullopt;
  return std::map<std::string, Attribute>{{"start", Attribute::of_int(start->get_i64(0))},
                                          {"delta", Attribute::of_int(delta->get_i64(0))},
                                          {"shape", Attribute::of_strings(*dims)},
                                          {"to", Attribute::of_int(static_cast<int64_t>(t.dtype()))}};
}

// The integer contents of input i, whether constant or only known to shape inference.
std::optional<std::vector<int64_t>> known_ints(const Node& n, size_t i, const ShapeInfo& info) {
  if (auto c = constant_value(n.input(i))) return c->to_i64_vector();
  auto it = info.values.find(n.input(i));
  if (it == info.values.end()) return std::nullopt;
  return static_values(&it->second);
}

// The contents of input i as dims, whether constant or only known to shape
// inference (symbolic entries included).
std::optional<Dims> known_dims(const Node& n, size_t i, const ShapeInfo& info) {
  if (auto c = constant_value(n.input(i))) return dims_of(c->to_i64_vector());
  auto it = info.values.find(n.input(i));
  if (it == info.values.end()) return std::nullopt;
  return it->second;
}

// tcc::Slice attributes for a Slice whose bounds resolve, or nullopt. A start
// is normalized where it is read: clamped into a static dim, counted from the
// end of a symbolic one when negative, and otherwise, as shape inference takes
// bounds on a symbolic dim, within it (seq//2).
std::optional<std::map<std::string, Attribute>> slice_attrs(const Node& n, const ShapeInfo& info,
                                                            const std::set<std::string>& bound) {
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.fully_shaped()) return std::nullopt;
  auto rank = static_cast<int64_t>(x.rank());
  std::optional<Dims> starts = known_dims(n, 1, info);
  if (!starts) return std::nullopt;
  std::vector<int64_t> axes, steps(starts->size(), 1);
  for (size_t k = 0; k < starts->size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (n.has_input(3)) {
    auto a = known_ints(n, 3, info);
    if (!a) return std::nullopt;
    axes = *a;
  }
  if (n.has_input(4)) {
    auto s = known_ints(n, 4, info);
    if (!s) return std::nullopt;
    steps = *s;
  }
  if (axes.size() != starts->size() || steps.size() != starts->size()) return std::nullopt;
  std::vector<std::string> texts;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (axes[k] < -rank || axes[k] >= rank || steps[k] <= 0) return std::nullopt;
    if (axes[k] < 0) axes[k] += rank;
    const Dim& d = x.shape()[axes[k]];
    Dim s = (*starts)[k];
    if (s.is_static() && d.is_static()) {
      s = Dim(std::clamp<int64_t>(s.value() < 0 ? s.value() + d.value() : s.value(), 0, d.value()));
    } else if (s.is_static() && s.value() < 0) {
      if (s.value() <= -kSliceSentinel) return std::nullopt;
      s = Dim(d.expr() + SymExpr::constant(s.value()));
    } else if (s.is_static() && s.value() >= kSliceSentinel) {
      return std::nullopt;
    }
    for (const std::string& sym : s.expr().symbols())
      if (!bound.count(sym)) return std::nullopt;
    texts.push_back(s.str());
  }
  return std::map<std::string, Attribute>{{"axes", Attribute::of_ints(axes)},
                                          {"starts", Attribute::of_strings(texts)},
                                          {"steps", Attribute::of_ints(steps)}};
}

// tcc::Pad attributes for a Pad whose pads resolve to non-negative dims over
// bound symbols (and whose axes are known), or nullopt.
std::optional<std::map<std::string, Attribute>> pad_attrs(const Node& n, const ShapeInfo& info,
                                                          const std::set<std::string>& bound) {
  const Type& x = n.input(0)->type();
  if (n.opset() < 11 || !x.is_tensor() || !x.has_rank() || is_constant_input(n, 1)) return std::nullopt;
  auto rank = static_cast<int64_t>(x.rank());
  std::optional<Dims> pads = known_dims(n, 1, info);
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  if (n.has_input(3)) {
    auto a = known_ints(n, 3, info);
    if (!a) return std::nullopt;
    axes = *a;
  }
  if (!pads || pads->size() != 2 * axes.size()) return std::nullopt;
  std::vector<std::string> texts(2 * static_cast<size_t>(rank), "0");
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < -rank || axes[i] >= rank) return std::nullopt;
    size_t axis = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    for (size_t side : {size_t{0}, size_t{1}}) {
      const Dim& d = (*pads)[i + side * axes.size()];
      if (d.is_unknown() || !d.expr().provably_nonnegative()) return std::nullopt;
      for (const std::string& sym : d.expr().symbols())
        if (!bound.count(sym)) return std::nullopt;
      texts[axis + side * static_cast<size_t>(rank)] = d.str();
    }
  }
  return std::map<std::string, Attribute>{{"mode", Attribute::of_string(n.get_string("mode", "constant"))},
                                          {"pads", Attribute::of_strings(texts)}};
}

}  // namespace

bool resolve_shapes(Graph& g, PassContext& ctx) {
  ShapeInfo info = infer_shapes(g);
  std::set<std::string> bound = g.bound_symbols();
  struct Rewrite {
    Node* node;
    std::map<std::string, Attribute> attrs;
    // The node's inputs the tcc op reads, at their positions (-1: an absent
    // one): a movement op's data, none for Size and Range. Read when the node
    // is replaced, not before: an earlier rewrite may have replaced the node
    // that computes one (a Reshape of a Reshape).
    std::vector<int> reads;
  };
  std::vector<Rewrite> rewrites;
  std::vector<Node*> unchanged;  // views to the shape their data has
  for (const auto& up : g.nodes()) {
    Node& n = *up;
    if (!n.domain().empty() || n.num_outputs() != 1 || !n.has_input(0)) continue;
    // An op tcc does not support at the node's opset (Expand at opset 7) had no
    // rule check its types: it stays as it is, for compile to refuse by name.
    if (OpRegistry::get().lookup(n) == nullptr) continue;
    if (n.op_type() == "Size") {
      if (auto dims = resolved_dims(n.input(0), bound); dims && !n.input(0)->type().fully_static())
        rewrites.push_back({&n, {{"dims", Attribute::of_strings(*dims)}}, {}});
      continue;
    }
    if (n.op_type() == "Range") {
      if (auto attrs = range_attrs(n, bound, info)) rewrites.push_back({&n, std::move(*attrs), {}});
      continue;
    }
    if (n.op_type() == "Pad") {
      if (auto attrs = pad_attrs(n, info, bound); attrs && resolved_dims(n.output(0), bound))
        rewrites.push_back({&n, std::move(*attrs), n.has_input(2) ? std::vector<int>{0, -1, 2} : std::vector<int>{0}});
      continue;
    }
    bool reshape_like = n.op_type() == "Reshape" || n.op_type() == "Expand";
    if (!reshape_like && n.op_type() != "Slice") continue;
    bool runtime_argument = false, known = true;
    for (size_t i = 1; i < n.num_inputs(); ++i) {
      runtime_argument |= !is_constant_input(n, i);
      known &= contents_known(n, i, info);
    }
    if (!runtime_argument || !known) continue;
    std::optional<std::vector<std::string>> dims = resolved_dims(n.output(0), bound);
    if (!dims) continue;
    if (n.op_type() == "Reshape" && n.output(0)->type() == n.input(0)->type() && !is_model_output(n.output(0))) {
      unchanged.push_back(&n);
      continue;
    }
    std::map<std::string, Attribute> attrs;
    if (!reshape_like) {
      auto s = slice_attrs(n, info, bound);
      if (!s) continue;
      attrs = std::move(*s);
    }
    attrs["shape"] = Attribute::of_strings(*dims);
    rewrites.push_back({&n, std::move(attrs), {0}});
  }
  for (Node* n : unchanged) {
    g.replace_all_uses(n->output(0), n->input(0));
    ctx.stats.add("views_of_own_shape_removed");
  }
  if (rewrites.empty()) return !unchanged.empty();
  for (Rewrite& r : rewrites) {
    Node& old = *r.node;
    std::string op = old.op_type(), name = old.name(), source = old.source();
    Type type = old.output(0)->type();
    std::vector<Value*> inputs;
    for (int i : r.reads) inputs.push_back(i < 0 ? nullptr : old.input(static_cast<size_t>(i)));
    replace_nodes(g, {&old}, {old.output(0)}, [&](Node* before, const std::vector<std::string>& names) {
      Node* n = g.insert_node(before, op, inputs, names, std::string(kTccDomain), name);
      n->set_source(source);
      n->output(0)->set_type(type);
      for (auto& [k, a] : r.attrs) n->set_attr(k, std::move(a));
      return n;
    });
    std::string counter = op + "s_resolved";  // "slices_resolved", "sizes_resolved", ...
    counter[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(counter[0])));
    ctx.stats.add(counter);
  }
  g.set_opset(std::string(kTccDomain), 1);
  return true;
}

}  // namespace tcc
