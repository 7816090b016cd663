#include "src/ir/graph.h"

#include <algorithm>
#include <functional>
#include <unordered_set>

namespace tcc {

// ---- Attribute -------------------------------------------------------------

Attribute Attribute::of_int(int64_t v) { Attribute a; a.kind = Kind::Int; a.i = v; return a; }
Attribute Attribute::of_float(float v) { Attribute a; a.kind = Kind::Float; a.f = v; return a; }
Attribute Attribute::of_string(std::string v) { Attribute a; a.kind = Kind::String; a.s = std::move(v); return a; }
Attribute Attribute::of_ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::Ints; a.ints = std::move(v); return a; }
Attribute Attribute::of_floats(std::vector<float> v) { Attribute a; a.kind = Kind::Floats; a.floats = std::move(v); return a; }
Attribute Attribute::of_strings(std::vector<std::string> v) { Attribute a; a.kind = Kind::Strings; a.strings = std::move(v); return a; }
Attribute Attribute::of_tensor(Tensor v) { Attribute a; a.kind = Kind::Tensor; a.t = std::move(v); return a; }
Attribute Attribute::of_graph(std::shared_ptr<Graph> v) { Attribute a; a.kind = Kind::Graph; a.g = std::move(v); return a; }
Attribute Attribute::of_type(Type v) { Attribute a; a.kind = Kind::Type; a.type = std::move(v); return a; }

// ---- Node ------------------------------------------------------------------

const char* step_part_name(StepPart p) {
  switch (p) {
    case StepPart::Forward: return "forward";
    case StepPart::Backward: return "backward";
    case StepPart::Optimizer: return "optimizer";
  }
  return "forward";
}

int64_t Node::opset() const {
  const auto& ops = graph_->opsets();
  auto it = ops.find(domain_ == "ai.onnx" ? "" : domain_);
  return it == ops.end() ? 0 : it->second;
}

void Node::set_input(size_t i, Value* v) {
  if (i >= inputs_.size()) inputs_.resize(i + 1, nullptr);
  inputs_[i] = v;
}

const Attribute* Node::attr(const std::string& n) const {
  auto it = attrs_.find(n);
  return it == attrs_.end() ? nullptr : &it->second;
}

namespace {
const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Strings: return "strings";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Graph: return "graph";
    case Attribute::Kind::Type: return "type";
  }
  return "?";
}
}  // namespace

#define TCC_ATTR_READ(KIND, FIELD)                                                          \
  const Attribute* a = attr(n);                                                           \
  if (!a) return def;                                                                     \
  if (a->kind != Attribute::Kind::KIND)                                                   \
    fail("attribute '" + n + "' should be " + kind_name(Attribute::Kind::KIND) + ", got " + \
         kind_name(a->kind));                                                             \
  return a->FIELD;

int64_t Node::get_int(const std::string& n, int64_t def) const { TCC_ATTR_READ(Int, i) }
std::string Node::get_string(const std::string& n, const std::string& def) const { TCC_ATTR_READ(String, s) }
std::vector<int64_t> Node::get_ints(const std::string& n, std::vector<int64_t> def) const { TCC_ATTR_READ(Ints, ints) }
std::vector<float> Node::get_floats(const std::string& n, std::vector<float> def) const { TCC_ATTR_READ(Floats, floats) }
#undef TCC_ATTR_READ

float Node::get_float(const std::string& n, float def) const {
  const Attribute* a = attr(n);
  if (!a) return def;
  if (a->kind == Attribute::Kind::Int) return static_cast<float>(a->i);  // exporters sometimes write 1 for 1.0
  if (a->kind != Attribute::Kind::Float)
    fail("attribute '" + n + "' should be float, got " + kind_name(a->kind));
  return a->f;
}

const Tensor* Node::get_tensor(const std::string& n) const {
  const Attribute* a = attr(n);
  if (!a) return nullptr;
  if (a->kind != Attribute::Kind::Tensor) fail("attribute '" + n + "' should be tensor, got " + kind_name(a->kind));
  return &a->t;
}

const Type* Node::get_type(const std::string& n) const {
  const Attribute* a = attr(n);
  if (!a) return nullptr;
  if (a->kind != Attribute::Kind::Type) fail("attribute '" + n + "' should be type, got " + kind_name(a->kind));
  return &a->type;
}

Graph* Node::get_graph(const std::string& n) const {
  const Attribute* a = attr(n);
  if (!a) return nullptr;
  if (a->kind != Attribute::Kind::Graph) fail("attribute '" + n + "' should be graph, got " + kind_name(a->kind));
  return a->g.get();
}

std::vector<Graph*> Node::regions() const {
  std::vector<Graph*> r;
  for (const auto& [k, a] : attrs_)
    if (a.kind == Attribute::Kind::Graph) r.push_back(a.g.get());
  return r;
}

namespace {

void collect_captures(const Graph& region, const Graph& outer, std::vector<const Value*>& out) {
  auto add = [&](const Value* v) {
    if (v != nullptr && v->graph() == &outer && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const auto& n : region.nodes()) {
    for (const Value* v : n->inputs()) add(v);
    for (const Graph* r : n->regions()) collect_captures(*r, outer, out);
  }
  for (const Value* v : region.outputs()) add(v);
}

}  // namespace

std::vector<const Value*> Node::captures() const {
  std::vector<const Value*> out;
  for (const Graph* r : regions()) collect_captures(*r, *graph_, out);
  return out;
}

DiagLocation Node::loc() const {
  return DiagLocation{graph_ ? graph_->file() : "", name_, op_type_, source_};
}

void Node::fail(const std::string& msg) const { throw InputError(loc(), msg); }

void Value::fail(const std::string& msg) const {
  if (producer_) producer_->fail(msg);
  throw InputError(DiagLocation::in_file(graph_ ? graph_->file() : ""), msg);
}

// ---- Graph -----------------------------------------------------------------

const Graph& Graph::root() const {
  const Graph* g = this;
  while (g->parent_) g = g->parent_;
  return *g;
}

Value* Graph::new_value(const std::string& name) {
  if (find(name))
    throw InputError(DiagLocation::in_file(file()), "value name '" + name + "' is defined more than once");
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->graph_ = this;
  Value* raw = v.get();
  values_.emplace(raw, std::move(v));
  by_name_.emplace(name, raw);
  return raw;
}

void Graph::forget_value(Value* v) {
  by_name_.erase(v->name_);
  values_.erase(v);
}

Value* Graph::add_input(const std::string& name, Type type) {
  Value* v = new_value(name);
  v->type_ = std::move(type);
  v->is_input_ = true;
  inputs_.push_back(v);
  return v;
}

void Graph::replace_input(Value* v, const std::vector<Value*>& by) {
  auto at = std::find(inputs_.begin(), inputs_.end(), v);
  TCC_CHECK(at != inputs_.end()) << "replace_input: '" << v->name_ << "' is not an input";
  std::vector<Value*> inputs;
  for (Value* in : inputs_) {
    if (in == v) inputs.insert(inputs.end(), by.begin(), by.end());
    else if (std::find(by.begin(), by.end(), in) == by.end()) inputs.push_back(in);
  }
  inputs_ = std::move(inputs);
  forget_value(v);
}

Value* Graph::add_initializer(const std::string& name, Tensor data) {
  Value* v = new_value(name);
  v->type_ = Type::tensor(data.dtype(), Dims(data.shape().begin(), data.shape().end()));
  v->init_ = std::move(data);
  initializers_.push_back(v);
  return v;
}

std::unique_ptr<Node> Graph::make_node(const std::string& op_type, const std::vector<Value*>& inputs,
                                       const std::vector<std::string>& output_names,
                                       const std::string& domain, const std::string& name) {
  auto n = std::make_unique<Node>();
  n->op_type_ = op_type;
  n->domain_ = domain == "ai.onnx" ? "" : domain;
  n->name_ = name;
  n->graph_ = this;
  n->inputs_ = inputs;
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* v = new_value(output_names[i]);
    v->producer_ = n.get();
    v->producer_index_ = static_cast<int>(i);
    n->outputs_.push_back(v);
  }
  return n;
}

Node* Graph::add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::vector<std::string>& output_names, const std::string& domain,
                      const std::string& name) {
  nodes_.push_back(make_node(op_type, inputs, output_names, domain, name));
  return nodes_.back().get();
}

Node* Graph::insert_node(Node* before, const std::string& op_type, const std::vector<Value*>& inputs,
                         const std::vector<std::string>& output_names, const std::string& domain,
                         const std::string& name) {
  auto n = make_node(op_type, inputs, output_names, domain, name);
  if (before) n->part_ = before->part_;
  auto it = std::find_if(nodes_.begin(), nodes_.end(), [&](const auto& p) { return p.get() == before; });
  return nodes_.insert(it, std::move(n))->get();
}

std::string Graph::fresh_name(const std::string& hint) {
  for (;;) {
    std::string n = hint + "." + std::to_string(fresh_counter_++);
    if (!find(n)) return n;
  }
}

Value* Graph::find_local(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Value* Graph::find(const std::string& name) const {
  for (const Graph* g = this; g; g = g->parent_)
    if (Value* v = g->find_local(name)) return v;
  return nullptr;
}

void Graph::replace_all_uses(Value* from, Value* to) {
  for (auto& n : nodes_) {
    for (auto& in : n->inputs_)
      if (in == from) in = to;
    for (Graph* r : n->regions()) r->replace_all_uses(from, to);
  }
  for (auto& o : outputs_)
    if (o == from) o = to;
}

void Graph::remove_unused_initializers() {
  std::unordered_set<const Value*> used(outputs_.begin(), outputs_.end());
  std::function<void(const Graph&)> mark = [&](const Graph& g) {
    for (const auto& n : g.nodes_) {
      used.insert(n->inputs_.begin(), n->inputs_.end());
      for (Graph* r : n->regions()) mark(*r);
    }
    used.insert(g.outputs_.begin(), g.outputs_.end());
  };
  mark(*this);
  std::vector<Value*> kept;
  for (Value* v : initializers_) {
    if (used.count(v)) kept.push_back(v);
    else forget_value(v);
  }
  initializers_ = std::move(kept);
}

bool Graph::topo_sort() {
  // Kahn's algorithm, taking ready nodes in their current order so a sorted
  // graph stays as it is.
  std::unordered_map<const Node*, size_t> index, pending;
  std::unordered_map<const Node*, std::vector<Node*>> consumers;
  for (size_t i = 0; i < nodes_.size(); ++i) index[nodes_[i].get()] = i;
  for (auto& up : nodes_) {
    Node* n = up.get();
    std::unordered_set<const Node*> deps;
    std::function<void(const Node&)> collect = [&](const Node& m) {
      for (Value* v : m.inputs_)
        if (v && v->producer_ && v->producer_->graph_ == this) deps.insert(v->producer_);
      for (Graph* r : m.regions())
        for (const auto& rn : r->nodes_) collect(*rn);
    };
    collect(*n);
    deps.erase(n);
    pending[n] = deps.size();
    for (const Node* d : deps) consumers[d].push_back(n);
  }
  auto cmp = [&](const Node* a, const Node* b) { return index[a] > index[b]; };
  std::vector<Node*> heap;
  for (auto& up : nodes_)
    if (pending[up.get()] == 0) heap.push_back(up.get());
  std::make_heap(heap.begin(), heap.end(), cmp);
  std::vector<Node*> order;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    Node* n = heap.back();
    heap.pop_back();
    order.push_back(n);
    for (Node* c : consumers[n])
      if (--pending[c] == 0) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
  }
  if (order.size() != nodes_.size()) return false;
  std::unordered_map<const Node*, std::unique_ptr<Node>> owned;
  for (auto& up : nodes_) owned[up.get()] = std::move(up);
  for (size_t i = 0; i < order.size(); ++i) nodes_[i] = std::move(owned[order[i]]);
  return true;
}

std::set<std::string> Graph::bound_symbols() const {
  std::set<std::string> bound;
  for (const Value* in : inputs_) {
    const Type& t = in->type();
    if (!t.is_tensor() || !t.has_rank()) continue;
    for (const Dim& d : t.shape())
      if (auto scaled = d.expr().scaled_symbol()) bound.insert(scaled->first);
  }
  return bound;
}

std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>> Graph::compute_users() const {
  std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>> users;
  for (const auto& n : nodes_)
    for (size_t i = 0; i < n->inputs_.size(); ++i)
      if (n->inputs_[i]) users[n->inputs_[i]].emplace_back(n.get(), i);
  return users;
}

std::unique_ptr<Graph> Graph::clone() const {
  TCC_CHECK(!parent_) << "clone() copies a main graph; regions are copied with the node that holds them";
  auto dst = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> map;
  clone_into(*dst, map);
  return dst;
}

void Graph::clone_into(Graph& dst, std::unordered_map<const Value*, Value*>& map) const {
  dst.name_ = name_;
  dst.opsets_ = opsets_;
  dst.file_ = file_;
  dst.fresh_counter_ = fresh_counter_;
  auto copy_value = [&](const Value* from, Value* to) {
    to->type_ = from->type_;
    to->init_ = from->init_;
    to->role_ = from->role_;
    map[from] = to;
  };
  for (const Value* v : inputs_) copy_value(v, dst.add_input(v->name_, v->type_));
  for (const Value* v : initializers_) copy_value(v, dst.add_initializer(v->name_, *v->init_));
  // Every node and its outputs first, so regions find all of this graph's values.
  for (const auto& n : nodes_) {
    std::vector<std::string> outs;
    for (const Value* v : n->outputs_) outs.push_back(v->name_);
    Node* copy = dst.add_node(n->op_type_, {}, outs, n->domain_, n->name_);
    copy->source_ = n->source_;
    copy->part_ = n->part_;
    for (size_t i = 0; i < outs.size(); ++i) copy_value(n->outputs_[i], copy->outputs_[i]);
  }
  auto mapped = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    TCC_CHECK(it != map.end()) << "value '" << v->name_ << "' is read but defined nowhere the copy can see";
    return it->second;
  };
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = *nodes_[k];
    Node& copy = *dst.nodes_[k];
    for (const Value* in : n.inputs_) copy.inputs_.push_back(mapped(in));
    for (const auto& [key, a] : n.attrs_) {
      Attribute attr = a;
      if (a.kind == Attribute::Kind::Graph) {
        attr.g = std::make_shared<Graph>();
        attr.g->set_parent(&dst, &copy);
        a.g->clone_into(*attr.g, map);
      }
      copy.attrs_.emplace(key, std::move(attr));
    }
  }
  for (const Value* v : outputs_) dst.outputs_.push_back(mapped(v));
}

std::unique_ptr<Model> clone_model(const Model& m) {
  auto copy = std::make_unique<Model>();
  copy->graph = m.graph->clone();
  copy->path = m.path;
  copy->producer = m.producer;
  copy->ir_version = m.ir_version;
  copy->metadata = m.metadata;
  return copy;
}

}  // namespace tcc
