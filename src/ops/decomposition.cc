#include "src/ops/decomposition.h"

#include <algorithm>

#include "src/interp/interpreter.h"
#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"
#include "src/ir/replace_nodes.h"

namespace tcc {

std::optional<Tensor> constant_value(const Value* v) {
  if (!v) return std::nullopt;
  if (v->is_initializer() && !v->is_graph_input()) return v->initializer();
  const Node* p = v->producer();
  if (!p || p->op_type() != "Constant" || !p->domain().empty()) return std::nullopt;
  // The Constant kernel reads every spelling (value, value_float, value_ints, ...).
  Interpreter interp;
  return interp.eval_node(*p, {}).at(0);
}

std::optional<double> scalar_constant(const Value* v) {
  std::optional<Tensor> t = constant_value(v);
  if (!t || t->numel() != 1 || t->dtype() == DType::String) return std::nullopt;
  return t->get_f64(0);
}

Dims broadcast_of(const std::vector<Value*>& vs) {
  size_t rank = 0;
  for (const Value* v : vs) rank = std::max(rank, v->type().rank());
  Dims out(rank, Dim(1));
  for (const Value* v : vs) {
    const Dims& d = v->type().shape();
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] != Dim(1)) out[rank - d.size() + i] = d[i];
  }
  return out;
}

namespace {

bool reads(const Graph& g, const Value* v) {
  for (const auto& n : g.nodes()) {
    for (const Value* in : n->inputs())
      if (in == v) return true;
    for (const Graph* r : n->regions())
      if (reads(*r, v)) return true;
  }
  for (const Value* out : g.outputs())
    if (out == v) return true;
  return false;
}

}  // namespace

const Type* Expansion::ranked_float_input(size_t i) const {
  const Value* v = n_.input(i);
  if (v == nullptr || !v->type().is_tensor() || !v->type().has_rank() || !v->type().fully_shaped()) return nullptr;
  if (!is_float(v->type().dtype())) return nullptr;
  return &v->type();
}

int64_t Expansion::onnx_opset() const {
  auto it = g_.opsets().find("");
  return it == g_.opsets().end() ? 0 : it->second;
}

bool Expansion::used(const Value* v) const { return reads(g_, v); }

bool Expansion::only_first_output_used() const {
  for (size_t i = 1; i < n_.num_outputs(); ++i)
    if (used(n_.output(i))) return false;
  return true;
}

Type Expansion::kept_type(const Type& x, const std::vector<int64_t>& axes) {
  Dims d = x.shape();
  for (int64_t a : axes) d[a] = Dim(1);
  return Type::tensor(x.dtype(), d);
}

void Expansion::imports(const std::string& domain) {
  if (domain == kTccDomain) g_.set_opset(domain, 1);
}

Value* Expansion::add(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
                      const Type& type, std::map<std::string, Attribute> attrs, const std::string& domain) {
  return add_outputs(piece, op, ins, {type}, std::move(attrs), domain).front();
}

std::vector<Value*> Expansion::add_outputs(const std::string& piece, const std::string& op,
                                           const std::vector<Value*>& ins, const std::vector<Type>& types,
                                           std::map<std::string, Attribute> attrs, const std::string& domain) {
  std::vector<std::string> names;
  for (size_t i = 0; i < types.size(); ++i) names.push_back(g_.fresh_name(prefix_ + "/" + piece));
  imports(domain);
  Node* p = g_.insert_node(&n_, op, ins, names, domain, prefix_ + "/" + piece);
  setup(*p, types, std::move(attrs));
  return p->outputs();
}

Value* Expansion::constant(const std::string& hint, Tensor t) {
  return g_.add_initializer(g_.fresh_name(prefix_ + "/" + hint), std::move(t));
}

Value* Expansion::scalar(const std::string& hint, double v, DType dtype) {
  Tensor t(dtype, {});
  t.set_f64(0, v);
  return constant(hint, std::move(t));
}

Value* Expansion::i64(const std::string& hint, int64_t v) { return constant(hint, Tensor::from_i64({v}, {1})); }

Value* Expansion::i64s(const std::string& hint, const std::vector<int64_t>& values) {
  return constant(hint, Tensor::from_i64(values, {static_cast<int64_t>(values.size())}));
}

Value* Expansion::numbers(const std::string& hint, const std::vector<double>& values, const std::vector<int64_t>& shape,
                          DType dtype) {
  Tensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) t.set_f64(static_cast<int64_t>(i), values[i]);
  return constant(hint, std::move(t));
}

Value* Expansion::reduce(const std::string& piece, const std::string& op, Value* x, const std::vector<int64_t>& axes,
                         const Type& type) {
  auto [ins, attrs] = reduce_spelling(op, x, axes);
  return add(piece, op, ins, type, std::move(attrs));
}

Value* Expansion::reshape(const std::string& piece, Value* x, const Dims& dims) {
  return add(piece, "Reshape", {x}, Type::tensor(x->type().dtype(), dims), {{"shape", shape_attr(dims)}},
             std::string(kTccDomain));
}

Value* Expansion::expand(const std::string& piece, Value* x, const Dims& dims) {
  return add(piece, "Expand", {x}, Type::tensor(x->type().dtype(), dims), {{"shape", shape_attr(dims)}},
             std::string(kTccDomain));
}

Value* Expansion::slice(const std::string& piece, Value* x, int64_t axis, const Dim& start, const Dims& dims) {
  g_.set_opset(std::string(kTccDomain), 1);
  return add(piece, "Slice", {x}, Type::tensor(x->type().dtype(), dims),
             {{"axes", Attribute::of_ints({axis})},
              {"starts", shape_attr({start})},
              {"steps", Attribute::of_ints({1})},
              {"shape", shape_attr(dims)}},
             std::string(kTccDomain));
}

Value* Expansion::cast(const std::string& piece, Value* x, DType to) {
  if (x->type().dtype() == to) return x;
  return add(piece, "Cast", {x}, Type::tensor(to, x->type().shape()),
             {{"to", Attribute::of_int(static_cast<int64_t>(to))}});
}

Value* Expansion::range(const std::string& piece, int64_t start, const Dim& length) {
  return add(piece, "Range", {}, Type::tensor(DType::I64, {length}),
             {{"start", Attribute::of_int(start)}, {"shape", shape_attr({length})}}, std::string(kTccDomain));
}

Value* Expansion::counted_range(const std::string& piece, Value* count, const Dim& length) {
  Value* shape = reshape(piece + "_count", count, {Dim(1)});
  Value* zeros = add(piece + "_size", "ConstantOfShape", {shape}, Type::tensor(DType::I64, {length}),
                     {{"value", Attribute::of_tensor(Tensor(DType::I64, {1}))}});
  return add(piece, "Add", {zeros, range(piece + "_index", 0, length)}, Type::tensor(DType::I64, {length}));
}

bool Expansion::data_dependent(const Dim& d) const {
  return d.is_symbolic() && d.expr().is_symbol() && !g_.bound_symbols().count(d.expr().symbol_name());
}

void Expansion::finish_reshape(const std::string& piece, Value* x) {
  finish(piece, "Reshape", {x}, {{"shape", shape_attr(n_.output(0)->type().shape())}}, std::string(kTccDomain));
}

void Expansion::finish(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
                       std::map<std::string, Attribute> attrs, const std::string& domain) {
  Type type = n_.output(0)->type();
  std::string name = piece.empty() ? name_ : prefix_ + "/" + piece;
  imports(domain);
  replace_nodes(g_, {&n_}, {n_.output(0)}, [&](Node* before, const std::vector<std::string>& names) {
    Node* p = g_.insert_node(before, op, ins, names, domain, name);
    setup(*p, {type}, std::move(attrs));
    return p;
  });
  finished_ = true;
}

void Expansion::finish_reduce(const std::string& piece, const std::string& op, Value* x,
                              const std::vector<int64_t>& axes) {
  auto [ins, attrs] = reduce_spelling(op, x, axes);
  finish(piece, op, ins, std::move(attrs));
}

void Expansion::take_over(size_t i, Value* v) {
  const std::vector<Value*>& outs = g_.outputs();
  for (size_t p = 0; p < outs.size(); ++p)
    if (outs[p] == n_.output(i)) moved_outputs_.emplace_back(p, n_.output(i)->name());
  g_.replace_all_uses(n_.output(i), v);
}

std::pair<std::vector<Value*>, std::map<std::string, Attribute>> Expansion::reduce_spelling(
    const std::string& op, Value* x, const std::vector<int64_t>& axes) {
  if (onnx_opset() >= (op == "ReduceSum" ? 13 : 18)) {
    Value*& given = axes_[axes];
    if (!given) given = i64s("axes", axes);
    return {{x, given}, {{"keepdims", Attribute::of_int(1)}}};
  }
  return {{x}, {{"keepdims", Attribute::of_int(1)}, {"axes", Attribute::of_ints(axes)}}};
}

void Expansion::setup(Node& p, const std::vector<Type>& types, std::map<std::string, Attribute> attrs) {
  p.set_source(source_);
  for (size_t i = 0; i < types.size(); ++i) p.output(i)->set_type(types[i]);
  for (auto& [k, a] : attrs) p.set_attr(k, std::move(a));
}

bool plannable(const Expansion& e, const Type& t) {
  if (t.kind() == Type::Kind::Sequence) return true;
  if (!t.is_tensor() || !t.fully_shaped()) return false;
  return std::none_of(t.shape().begin(), t.shape().end(), [&](const Dim& d) { return e.data_dependent(d); });
}

std::optional<std::vector<Value*>> known_sequence(const Value* v) {
  const Node* p = v ? v->producer() : nullptr;
  if (!p || !p->domain().empty() || v->type().kind() != Type::Kind::Sequence) return std::nullopt;
  if (p->op_type() == "SequenceEmpty") return std::vector<Value*>{};
  if (p->op_type() == "SequenceConstruct") return p->inputs();
  return std::nullopt;
}

bool inlinable(Expansion& e, const Graph& body, bool repeated, bool over_known_sequences) {
  for (const auto& n : body.nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (!def || !n->regions().empty() || (repeated && def->has(kDataDependentShape))) return false;
    for (const Value* v : n->inputs())
      if (v && v->graph() != &body && v->graph() != &e.graph()) return false;
    for (const Value* v : n->outputs())
      if (repeated && !over_known_sequences && !plannable(e, v->type())) return false;
  }
  for (const Value* v : body.outputs())
    if (v->graph() != &body && v->graph() != &e.graph()) return false;
  return true;
}

std::vector<Value*> inline_region(Expansion& e, const Graph& body, std::map<const Value*, Value*> env,
                                  const std::string& tag) {
  auto read = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    if (auto it = env.find(v); it != env.end()) return it->second;
    if (v->graph() != &body) return const_cast<Value*>(v);
    return env[v] = e.constant(tag + "/" + v->name(), v->initializer());
  };
  for (const auto& n : body.nodes()) {
    std::vector<Value*> ins;
    for (const Value* v : n->inputs()) ins.push_back(read(v));
    std::vector<Type> types;
    for (const Value* v : n->outputs()) types.push_back(v->type());
    std::string name = tag + "/" + (n->name().empty() ? n->op_type() : n->name());
    std::vector<Value*> outs = e.add_outputs(name, n->op_type(), ins, types, n->attrs(), n->domain());
    for (size_t i = 0; i < outs.size(); ++i) env[n->output(i)] = outs[i];
  }
  std::vector<Value*> results;
  for (const Value* v : body.outputs()) results.push_back(read(v));
  return results;
}

}  // namespace tcc
