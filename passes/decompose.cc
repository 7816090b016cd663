// decompose: composite normalization ops become the reductions and pointwise
// ops they are made of, so fuse can put each into one reduction kernel with
// its neighbours (the pointwise op before a softmax, the residual add before a
// layernorm):
//
//   Softmax(x)            -> m = ReduceMax(x); e = Exp(x - m); e / ReduceSum(e)
//   LogSoftmax(x)         -> d = x - ReduceMax(x); d - Log(ReduceSum(Exp(d)))
//   LayerNormalization    -> d = x - ReduceMean(x); d / Sqrt(ReduceMean(d*d) + eps) * scale + B
//   BatchNormalization    -> (x - mean) * s + B with s = scale / Sqrt(var + eps), folded to a
//     (inference)            constant when scale and var are constants
//   Split(x) -> y0, y1    -> y0 = Slice(x, 0, n0), y1 = Slice(x, n0, n0 + n1), ...: a Slice with
//                            constant arguments is an affine load, so each part fuses into its
//                            consumers' kernels instead of running as a host fallback
//   ScatterElements(zeros, idx, upd, reduction=add) -> tcc::ScatterAdd(idx, upd) {axis, shape}: an
//                            embedding lookup's or a MaxPool's gradient, without zeros to read (a
//                            constant or ConstantOfShape, of any shape; what only sized the zeros
//                            is swept with dce)
//   GlobalAveragePool(x)  -> ReduceMean(x) over the spatial axes, keeping them (GlobalMaxPool: ReduceMax)
//   Gather(x, k) with a constant one-element index k (torch's select: attention's q, k, v out of one
//                         stacked tensor, a class token) -> Slice(x, k, k + 1) along the axis, then Squeeze of
//                         that axis when k is a scalar: a copy or a view where Gather would run on the host
//   Gemm(A, B, C)         -> Gemm(A, B) + C * beta, when C is neither the output's shape (cuBLASLt's
//                            C) nor one value per column with beta 1 (its bias epilogue): a C of
//                            [M, 1] or a scalar is an ordinary broadcast Add
//
// Each piece is named "<original name>/<piece>" ("/h.0/ln_1/LayerNormalization/ReduceMean")
// and keeps the original's source location, so kernels trace back to the model;
// the last piece takes over the original output value (and its name).
// Reductions follow the opset the model imports: axes are an attribute before
// opset 18 (ReduceSum: 13) and a constant input from then on. The pieces get
// their types here, as shape inference would give them.
//
// Expects: a verified graph with shapes inferred.
// Leaves alone: Split whose part sizes are not all static or whose parts are
// graph outputs (their names are the model's signature), Softmax/LogSoftmax
// before opset 13 (they flatten to 2-D),
// LayerNormalization whose mean / inverse-std outputs are used or whose
// stash_type differs from its input's dtype (the decomposition would compute
// in a narrower type), BatchNormalization in training mode or with its
// running-statistics outputs, inputs whose rank is unknown, and nodes inside
// regions.
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "passes/pass.h"
#include "passes/replace_nodes.h"
#include "passes/rewrite.h"
#include "src/ops/fusion.h"

namespace tcc {

namespace {

bool used(const Graph& g, const Value* v) {
  for (const auto& n : g.nodes()) {
    for (const Value* in : n->inputs())
      if (in == v) return true;
    for (const Graph* r : n->regions())
      if (used(*r, v)) return true;
  }
  for (const Value* out : g.outputs())
    if (out == v) return true;
  return false;
}

// Only output 0 is read.
bool only_first_output_used(const Graph& g, const Node& n) {
  for (size_t i = 1; i < n.num_outputs(); ++i)
    if (used(g, n.output(i))) return false;
  return true;
}

const Type* ranked_float_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (v == nullptr || !v->type().is_tensor() || !v->type().has_rank() || !v->type().fully_shaped()) return nullptr;
  if (!is_float(v->type().dtype())) return nullptr;
  return &v->type();
}

// Builds the pieces that replace one node: each inserted before it, named
// "<node>/<piece>", with its type given; finish() makes the last piece take
// over the node's output 0.
class Expansion {
 public:
  Expansion(Graph& g, Node& n)
      : g_(g), n_(n), prefix_(n.name().empty() ? n.op_type() : n.name()), source_(n.source()) {}

  Value* add(const std::string& piece, const std::string& op, const std::vector<Value*>& ins, const Type& type,
             std::map<std::string, Attribute> attrs = {}) {
    Node* p = g_.insert_node(&n_, op, ins, {g_.fresh_name(prefix_ + "/" + piece)}, "", prefix_ + "/" + piece);
    setup(*p, type, std::move(attrs));
    return p->output(0);
  }

  Value* constant(const std::string& hint, Tensor t) { return g_.add_initializer(g_.fresh_name(prefix_ + "/" + hint), std::move(t)); }

  Value* scalar(const std::string& hint, double v, DType dtype) {
    Tensor t(dtype, {});
    t.set_f64(0, v);
    return constant(hint, std::move(t));
  }

  // A Reduce* op over `axes`, keeping dims, as the imported opset spells it.
  Value* reduce(const std::string& piece, const std::string& op, Value* x, const std::vector<int64_t>& axes,
                const Type& type) {
    auto [ins, attrs] = reduce_spelling(op, x, axes);
    return add(piece, op, ins, type, std::move(attrs));
  }

  void finish(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
              std::map<std::string, Attribute> attrs = {}) {
    Type type = n_.output(0)->type();
    std::string name = prefix_ + "/" + piece;
    replace_nodes(g_, {&n_}, {n_.output(0)}, [&](Node* before, const std::vector<std::string>& names) {
      Node* p = g_.insert_node(before, op, ins, names, "", name);
      setup(*p, type, std::move(attrs));
      return p;
    });
  }

  // finish() with a reduction as the last piece.
  void finish_reduce(const std::string& piece, const std::string& op, Value* x, const std::vector<int64_t>& axes) {
    auto [ins, attrs] = reduce_spelling(op, x, axes);
    finish(piece, op, ins, std::move(attrs));
  }

 private:
  // Axes are an attribute before opset 18 (ReduceSum: 13), a constant input from then on.
  std::pair<std::vector<Value*>, std::map<std::string, Attribute>> reduce_spelling(
      const std::string& op, Value* x, const std::vector<int64_t>& axes) {
    if (n_.opset() >= (op == "ReduceSum" ? 13 : 18)) {
      if (!axes_) axes_ = constant("axes", Tensor::from_i64(axes, {static_cast<int64_t>(axes.size())}));
      return {{x, axes_}, {{"keepdims", Attribute::of_int(1)}}};
    }
    return {{x}, {{"keepdims", Attribute::of_int(1)}, {"axes", Attribute::of_ints(axes)}}};
  }

  void setup(Node& p, const Type& type, std::map<std::string, Attribute> attrs) {
    p.set_source(source_);
    p.output(0)->set_type(type);
    for (auto& [k, a] : attrs) p.set_attr(k, std::move(a));
  }

  Graph& g_;
  Node& n_;
  std::string prefix_, source_;  // kept: finish() erases n_ before building the last piece
  Value* axes_ = nullptr;
};

// x's type with the listed axes kept as size 1.
Type kept_type(const Type& x, const std::vector<int64_t>& axes) {
  Dims d = x.shape();
  for (int64_t a : axes) d[a] = Dim(1);
  return Type::tensor(x.dtype(), d);
}

bool decompose_softmax(Graph& g, Node& n) {
  const Type* x = ranked_float_input(n, 0);
  if (n.opset() < 13 || x == nullptr || x->rank() == 0) return false;
  auto rank = static_cast<int64_t>(x->rank());
  int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  std::vector<int64_t> axes = {axis < 0 ? axis + rank : axis};
  Type kept = kept_type(*x, axes);
  bool log = n.op_type() == "LogSoftmax";
  Expansion e(g, n);
  Value* m = e.reduce("ReduceMax", "ReduceMax", n.input(0), axes, kept);
  Value* d = e.add("Sub", "Sub", {n.input(0), m}, *x);
  Value* ex = e.add("Exp", "Exp", {d}, *x);
  Value* s = e.reduce("ReduceSum", "ReduceSum", ex, axes, kept);
  if (log) e.finish("Sub_1", "Sub", {d, e.add("Log", "Log", {s}, kept)});
  else e.finish("Div", "Div", {ex, s});
  return true;
}

bool decompose_layer_norm(Graph& g, Node& n) {
  const Type* x = ranked_float_input(n, 0);
  if (x == nullptr || !n.has_input(1) || !only_first_output_used(g, n)) return false;
  std::optional<DType> stash = dtype_from_onnx(static_cast<int32_t>(n.get_int("stash_type", 1)));
  if (!stash || *stash != x->dtype()) return false;
  auto rank = static_cast<int64_t>(x->rank());
  int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  std::vector<int64_t> axes(rank - (axis < 0 ? axis + rank : axis));
  std::iota(axes.begin(), axes.end(), axis < 0 ? axis + rank : axis);
  Type kept = kept_type(*x, axes);
  Expansion e(g, n);
  Value* mean = e.reduce("ReduceMean", "ReduceMean", n.input(0), axes, kept);
  Value* d = e.add("Sub", "Sub", {n.input(0), mean}, *x);
  Value* sq = e.add("Mul", "Mul", {d, d}, *x);
  Value* var = e.reduce("ReduceMean_1", "ReduceMean", sq, axes, kept);
  Value* eps = e.scalar("epsilon", n.get_float("epsilon", 1e-5f), x->dtype());
  Value* sd = e.add("Sqrt", "Sqrt", {e.add("Add", "Add", {var, eps}, kept)}, kept);
  Value* normed = e.add("Div", "Div", {d, sd}, *x);
  if (!n.has_input(2)) {
    e.finish("Mul_1", "Mul", {normed, n.input(1)});
    return true;
  }
  Value* scaled = e.add("Mul_1", "Mul", {normed, n.input(1)}, *x);
  e.finish("Add_1", "Add", {scaled, n.input(2)});
  return true;
}

bool decompose_global_pool(Graph& g, Node& n) {
  const Type* x = ranked_float_input(n, 0);
  if (x == nullptr || x->rank() < 3) return false;
  std::vector<int64_t> axes(x->rank() - 2);
  std::iota(axes.begin(), axes.end(), 2);
  const char* op = n.op_type() == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax";
  Expansion e(g, n);
  e.finish_reduce(op, op, n.input(0), axes);
  return true;
}

bool decompose_batchnorm(Graph& g, Node& n) {
  const Type* x = ranked_float_input(n, 0);
  if (x == nullptr || x->rank() < 2 || n.num_inputs() != 5 || !only_first_output_used(g, n)) return false;
  if (n.opset() >= 14 ? n.get_int("training_mode", 0) != 0 : n.num_outputs() > 1) return false;
  for (size_t i = 1; i < 5; ++i) {
    const Value* p = n.input(i);
    if (p == nullptr || !p->type().is_tensor() || !p->type().has_rank() || p->type().rank() != 1 ||
        p->type().shape()[0] != x->shape()[1] || p->type().dtype() != x->dtype())
      return false;
  }
  // Per-channel [C] vectors broadcast against [N, C, ...] as [C, 1, ..., 1].
  Dims channel_dims(x->rank() - 1, Dim(1));
  channel_dims[0] = x->shape()[1];
  Type channel_type = Type::tensor(x->dtype(), channel_dims);
  auto channel_shaped = [&](const Tensor& t) {
    std::vector<int64_t> shape(x->rank() - 1, 1);
    shape[0] = t.numel();
    return t.reshaped(shape);
  };
  double eps = n.get_float("epsilon", 1e-5f);
  Expansion e(g, n);
  Value* target = nullptr;
  auto per_channel = [&](size_t i, const std::string& piece) -> Value* {
    if (auto c = constant_value(n.input(i))) return e.constant(piece, channel_shaped(*c));
    if (!target) {
      std::vector<int64_t> shape(x->rank() - 1, 1);
      shape[0] = -1;
      target = e.constant("channel_shape", Tensor::from_i64(shape, {static_cast<int64_t>(shape.size())}));
    }
    return e.add("Reshape_" + piece, "Reshape", {n.input(i), target}, channel_type);
  };
  Value* scale;
  auto scale_c = constant_value(n.input(1));
  auto var_c = constant_value(n.input(4));
  if (scale_c && var_c) {
    Tensor s(x->dtype(), {scale_c->numel()});
    for (int64_t c = 0; c < s.numel(); ++c) s.set_f64(c, scale_c->get_f64(c) / std::sqrt(var_c->get_f64(c) + eps));
    scale = e.constant("scale", channel_shaped(s));
  } else {
    Value* var_eps = e.add("Add", "Add", {per_channel(4, "var"), e.scalar("epsilon", eps, x->dtype())}, channel_type);
    Value* sd = e.add("Sqrt", "Sqrt", {var_eps}, channel_type);
    scale = e.add("Div", "Div", {per_channel(1, "scale"), sd}, channel_type);
  }
  Value* centered = e.add("Sub", "Sub", {n.input(0), per_channel(3, "mean")}, *x);
  Value* scaled = e.add("Mul", "Mul", {centered, scale}, *x);
  e.finish("Add_1", "Add", {scaled, per_channel(2, "bias")});
  return true;
}

// Whether cuBLASLt takes Gemm's C as it is: the output's shape, or (beta 1) a
// bias of one value per column, [N] or [1, N] with N > 1.
bool gemm_takes_c(const Node& n) {
  const Type& c = n.input(2)->type();
  const Type& y = n.output(0)->type();
  if (!c.is_tensor() || !c.has_rank() || !y.is_tensor() || !y.has_rank() || y.rank() != 2) return true;
  if (c.shape() == y.shape()) return true;
  if (n.get_float("beta", 1.0f) != 1.0f || c.rank() == 0 || c.shape().back() != y.shape()[1]) return false;
  if (y.shape()[1].is_static() && y.shape()[1].value() == 1) return false;
  return c.rank() == 1 || c.shape()[0] == Dim(1);
}

bool decompose_gemm(Graph& g, Node& n) {
  if (!n.has_input(2) || gemm_takes_c(n)) return false;
  Expansion e(g, n);
  std::map<std::string, Attribute> attrs;
  for (const char* a : {"alpha", "transA", "transB"})
    if (const Attribute* v = n.attr(a)) attrs[a] = *v;
  Type y = n.output(0)->type();
  Value* product = e.add("Gemm", "Gemm", {n.input(0), n.input(1)}, y, std::move(attrs));
  Value* c = n.input(2);
  double beta = n.get_float("beta", 1.0f);
  if (beta != 1) c = e.add("Mul", "Mul", {c, e.scalar("beta", beta, c->type().dtype())}, c->type());
  e.finish("Add", "Add", {product, c});
  return true;
}

// A constant of zeros, or ConstantOfShape of zero (of any shape, symbolic too), reshaped or not.
bool all_zero(const Value* v) {
  const Node* p = v->producer();
  if (p != nullptr && (p->domain().empty() || p->domain() == kTccDomain) && p->op_type() == "Reshape")
    return all_zero(p->input(0));
  if (p != nullptr && p->domain().empty() && p->op_type() == "ConstantOfShape") {
    const Attribute* value = p->attr("value");
    return value == nullptr ||
           (value->kind == Attribute::Kind::Tensor && value->t.numel() == 1 && value->t.get_f64(0) == 0);
  }
  std::optional<Tensor> t = constant_value(v);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->get_f64(i) != 0) return false;
  return true;
}

bool decompose_scatter_add(Graph& g, Node& n) {
  Type y = n.output(0)->type();  // a copy: replace_nodes erases n
  if (n.num_inputs() != 3 || n.get_string("reduction", "none") != "add" || !all_zero(n.input(0)) ||
      !y.is_tensor() || !y.fully_shaped())
    return false;
  std::vector<std::string> shape;
  for (const Dim& d : y.shape()) shape.push_back(d.str());
  Value* idx = n.input(1);
  Value* upd = n.input(2);
  std::string name = n.name(), source = n.source();
  int64_t axis = n.get_int("axis", 0);
  replace_nodes(g, {&n}, {n.output(0)}, [&](Node* before, const std::vector<std::string>& names) {
    Node* s = g.insert_node(before, "ScatterAdd", {idx, upd}, names, std::string(kTccDomain), name);
    s->set_source(source);
    s->output(0)->set_type(y);
    s->set_attr("axis", Attribute::of_int(axis));
    s->set_attr("shape", Attribute::of_strings(shape));
    return s;
  });
  g.set_opset(std::string(kTccDomain), 1);
  return true;
}

// The parts' sizes come from the output types shape inference gave them, so
// every way of spelling the split (a `split` input or attribute, num_outputs,
// equal parts) is covered by one rule. The Split itself, left unused, joins
// `unused` to be erased in one sweep.
bool decompose_split(Graph& g, Node& n, std::unordered_set<const Node*>& unused) {
  const Value* x = n.input(0);
  if (!x->type().is_tensor() || !x->type().has_rank() || x->type().rank() == 0) return false;
  auto rank = static_cast<int64_t>(x->type().rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    const Type& t = n.output(i)->type();
    if (!t.is_tensor() || !t.has_rank() || t.rank() != x->type().rank() || !t.shape()[axis].is_static()) return false;
    for (const Value* out : g.outputs())
      if (out == n.output(i)) return false;
    sizes.push_back(t.shape()[axis].value());
  }
  Expansion e(g, n);
  auto i64 = [&](const std::string& hint, int64_t v) { return e.constant(hint, Tensor::from_i64({v}, {1})); };
  Value* axes = i64("axes", axis);
  int64_t start = 0;
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    std::string part = std::to_string(i);
    Value* y = e.add("Slice_" + part, "Slice",
                     {n.input(0), i64("starts_" + part, start), i64("ends_" + part, start + sizes[i]), axes},
                     n.output(i)->type());
    g.replace_all_uses(n.output(i), y);
    start += sizes[i];
  }
  unused.insert(&n);
  return true;
}

// Gather(x, k) of a constant one-element index along an axis whose extent is
// static (a negative k counts from its end): the Slice of that one position,
// squeezed away when k is a scalar, as torch's select is.
bool decompose_select(Graph& g, Node& n) {
  std::optional<Tensor> index = constant_value(n.input(1));
  const Type& x = n.input(0)->type();
  if (!index || index->numel() != 1 || index->rank() > 1 || !x.is_tensor() || !x.has_rank()) return false;
  auto rank = static_cast<int64_t>(x.rank());
  int64_t axis = n.get_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || !x.shape()[axis].is_static()) return false;
  int64_t extent = x.shape()[axis].value(), k = index->get_i64(0);
  if (k < 0) k += extent;
  if (k < 0 || k >= extent) return false;
  Expansion e(g, n);
  auto i64 = [&](const std::string& hint, int64_t v) { return e.constant(hint, Tensor::from_i64({v}, {1})); };
  std::vector<Value*> slice = {n.input(0), i64("starts", k), i64("ends", k + 1), i64("axes", axis)};
  if (index->rank() == 1) {
    e.finish("Slice", "Slice", slice);
    return true;
  }
  Dims kept = x.shape();
  kept[axis] = Dim(1);
  Value* one = e.add("Slice", "Slice", slice, Type::tensor(x.dtype(), kept));
  if (n.opset() >= 13) e.finish("Squeeze", "Squeeze", {one, i64("squeeze_axes", axis)});
  else e.finish("Squeeze", "Squeeze", {one}, {{"axes", Attribute::of_ints({axis})}});
  return true;
}

}  // namespace

bool decompose(Graph& g, PassContext& ctx) {
  std::vector<Node*> candidates;
  for (const auto& n : g.nodes())
    if (n->domain().empty()) candidates.push_back(n.get());
  bool changed = false, scattered = false;
  std::unordered_set<const Node*> unused;
  for (Node* n : candidates) {
    const std::string op = n->op_type();
    bool done = false;
    if (op == "Softmax" || op == "LogSoftmax") done = decompose_softmax(g, *n);
    else if (op == "LayerNormalization") done = decompose_layer_norm(g, *n);
    else if (op == "BatchNormalization") done = decompose_batchnorm(g, *n);
    else if (op == "GlobalAveragePool" || op == "GlobalMaxPool") done = decompose_global_pool(g, *n);
    else if (op == "Split") done = decompose_split(g, *n, unused);
    else if (op == "Gemm") done = decompose_gemm(g, *n);
    else if (op == "Gather") done = decompose_select(g, *n);
    else if (op == "ScatterElements") scattered |= done = decompose_scatter_add(g, *n);
    if (done) ctx.stats.add("decomposed_" + op);
    changed |= done;
  }
  if (!unused.empty()) g.erase_nodes_if([&](const Node& n) { return unused.count(&n) > 0; });
  // The zeros a scatter no longer reads, and the shape chain that sized them.
  if (scattered) dce(g, ctx);
  return changed;
}

}  // namespace tcc
