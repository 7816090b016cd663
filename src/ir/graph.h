// The graph IR: Model > Graph > Node / Value, with nested graphs (regions) for
// the bodies of If / Loop / Scan.
//
// Values are SSA: each is defined once, by a graph input, an initializer or a
// node output, and has a name unique within its graph and the graphs enclosing
// it. A region may read values of the enclosing graphs. Nodes are kept in
// topological order (the verifier checks it). The graph owns its nodes and
// values; pointers stay valid until the graph erases them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/diag/errors.h"
#include "src/ir/tensor.h"
#include "src/ir/type.h"

namespace tcc {

// The newest default-domain opset tcc reads (ONNX 1.18's); a model importing
// a newer one is refused by both readers, ONNX and text IR.
inline constexpr int64_t kMaxOpset = 23;

class Graph;
class Node;

// What the exporter says an initializer holds, where it says so (torch's graph
// signature, as a .pt2 and the dynamo exporter's ONNX metadata carry it): a
// parameter the model trains, a buffer (BatchNorm's running statistics, RoPE's
// frequencies) or a constant. Unmarked where the exporter says nothing.
enum class InitializerRole { Unmarked, Parameter, Buffer, Constant };

class Value {
 public:
  const std::string& name() const { return name_; }
  const Type& type() const { return type_; }
  void set_type(Type t) { type_ = std::move(t); }
  Node* producer() const { return producer_; }        // null for inputs and initializers
  int producer_index() const { return producer_index_; }
  Graph* graph() const { return graph_; }
  bool is_graph_input() const { return is_input_; }
  // Initializer data (weights, constants stored with the model).
  bool is_initializer() const { return init_.has_value(); }
  const Tensor& initializer() const { return *init_; }
  void set_initializer(Tensor t) { init_ = std::move(t); }
  InitializerRole role() const { return role_; }
  void set_role(InitializerRole r) { role_ = r; }
  // A diagnostic about this value: names the node that computes it (the model
  // file alone for an input or initializer).
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  friend class Graph;
  std::string name_;
  Type type_;
  Node* producer_ = nullptr;
  int producer_index_ = -1;
  Graph* graph_ = nullptr;
  bool is_input_ = false;
  std::optional<Tensor> init_;
  InitializerRole role_ = InitializerRole::Unmarked;
};

struct Attribute {
  enum class Kind { Int, Float, String, Ints, Floats, Strings, Tensor, Graph, Type };
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  Tensor t;
  std::shared_ptr<Graph> g;
  Type type;  // a TypeProto attribute (Optional's `type`)

  static Attribute of_int(int64_t v);
  static Attribute of_float(float v);
  static Attribute of_string(std::string v);
  static Attribute of_ints(std::vector<int64_t> v);
  static Attribute of_floats(std::vector<float> v);
  static Attribute of_strings(std::vector<std::string> v);
  static Attribute of_tensor(Tensor v);
  static Attribute of_graph(std::shared_ptr<Graph> v);
  static Attribute of_type(Type v);
};

// The part of a training step a node computes. Autodiff and the optimizer
// mark the nodes they add; a pass that rewrites a node gives what replaces it
// the node's part (Graph::insert_node, replace_nodes). A model's own graph is
// all Forward.
enum class StepPart { Forward, Backward, Optimizer };
constexpr StepPart kStepParts[] = {StepPart::Forward, StepPart::Backward, StepPart::Optimizer};
const char* step_part_name(StepPart p);  // "forward", "backward", "optimizer"

class Node {
 public:
  const std::string& op_type() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the ONNX default domain
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  // Where the exporter says the node came from ("model.py:12"), or empty.
  const std::string& source() const { return source_; }
  void set_source(std::string s) { source_ = std::move(s); }
  Graph* graph() const { return graph_; }
  StepPart part() const { return part_; }
  void set_part(StepPart p) { part_ = p; }
  // Opset version of this node's domain, from the model's imports.
  int64_t opset() const;

  // Inputs; an omitted optional input is nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  size_t num_inputs() const { return inputs_.size(); }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  bool has_input(size_t i) const { return input(i) != nullptr; }
  void set_input(size_t i, Value* v);
  const std::vector<Value*>& outputs() const { return outputs_; }
  size_t num_outputs() const { return outputs_.size(); }
  Value* output(size_t i) const { return outputs_.at(i); }

  const std::map<std::string, Attribute>& attrs() const { return attrs_; }
  bool has_attr(const std::string& n) const { return attrs_.count(n) != 0; }
  const Attribute* attr(const std::string& n) const;
  void set_attr(const std::string& n, Attribute a) { attrs_[n] = std::move(a); }
  void remove_attr(const std::string& n) { attrs_.erase(n); }
  // Typed attribute readers. A present attribute of the wrong kind is an InputError
  // naming the node; a missing one returns the default.
  int64_t get_int(const std::string& n, int64_t def) const;
  float get_float(const std::string& n, float def) const;
  std::string get_string(const std::string& n, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> get_floats(const std::string& n, std::vector<float> def = {}) const;
  const Tensor* get_tensor(const std::string& n) const;
  // A type attribute (ONNX's TypeProto); null when absent.
  const Type* get_type(const std::string& n) const;
  // A region (subgraph attribute); null when absent.
  Graph* get_graph(const std::string& n) const;
  // Regions in attribute-name order.
  std::vector<Graph*> regions() const;
  // Values of this node's graph that its regions read (nested regions
  // included, a region output that is an outer value too), each once, in the
  // order the regions first read them.
  std::vector<const Value*> captures() const;

  // Location for diagnostics about this node (file comes from the model).
  DiagLocation loc() const;
  // Throws an InputError naming this node.
  [[noreturn]] void fail(const std::string& msg) const;

 private:
  friend class Graph;
  std::string op_type_, domain_, name_, source_;
  StepPart part_ = StepPart::Forward;
  Graph* graph_ = nullptr;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::map<std::string, Attribute> attrs_;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  Graph* parent() const { return parent_; }
  // The node whose attribute holds this region (null for the main graph).
  Node* parent_node() const { return parent_node_; }
  void set_parent(Graph* g, Node* n) { parent_ = g; parent_node_ = n; }
  const Graph& root() const;

  // Model-wide facts, kept on the root graph.
  const std::map<std::string, int64_t>& opsets() const { return root().opsets_; }
  void set_opset(const std::string& domain, int64_t version) { opsets_[domain] = version; }
  const std::string& file() const { return root().file_; }  // for diagnostics
  void set_file(std::string f) { file_ = std::move(f); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  size_t num_values() const { return values_.size(); }

  // Creation. Names must be unique in this graph and its enclosing graphs;
  // a duplicate is an InputError naming it.
  Value* add_input(const std::string& name, Type type);
  Value* add_initializer(const std::string& name, Tensor data);
  void add_output(Value* v) { outputs_.push_back(v); }
  // Input v, which nothing may read any more, gives its place among the
  // inputs to `by`, inputs added since (compile's flattening of a sequence
  // input into tensors: src/compiler/structured_io.h).
  void replace_input(Value* v, const std::vector<Value*>& by);
  void set_outputs(std::vector<Value*> vs) { outputs_ = std::move(vs); }
  // Appends a node, of part Forward; creates one output value per name.
  Node* add_node(const std::string& op_type, const std::vector<Value*>& inputs,
                 const std::vector<std::string>& output_names, const std::string& domain = "",
                 const std::string& name = "");
  // Inserts a node just before `before`, of before's part (appends a Forward
  // node when null).
  Node* insert_node(Node* before, const std::string& op_type, const std::vector<Value*>& inputs,
                    const std::vector<std::string>& output_names, const std::string& domain = "",
                    const std::string& name = "");
  // A name not used in this graph or its enclosing graphs, derived from `hint`.
  std::string fresh_name(const std::string& hint);

  // Looks a value up in this graph, then in the enclosing graphs.
  Value* find(const std::string& name) const;
  Value* find_local(const std::string& name) const;

  // Replaces every use of `from` (node inputs, graph outputs, region reads) with `to`.
  void replace_all_uses(Value* from, Value* to);
  // Erases nodes for which pred is true; their outputs must be unused.
  template <typename Pred>
  void erase_nodes_if(Pred pred);
  // Removes initializers that no node or output reads.
  void remove_unused_initializers();
  // Reorders nodes topologically (stable); false if there is a cycle.
  bool topo_sort();

  // Symbols a run can read off its inputs' shapes: those that are a whole dim
  // of a graph input of this (main) graph, or a whole dim divided by a
  // constant (torch.export's derived dims: an input dim 32*h binds h).
  std::set<std::string> bound_symbols() const;

  // Users of every value: (node, input index). Graph outputs are not listed.
  std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>> compute_users() const;

  // A copy of this main graph (regions included) that can be changed apart
  // from it. Tensors share their storage, which nothing writes in place, so
  // the copy costs the nodes and values, never the weights.
  std::unique_ptr<Graph> clone() const;

 private:
  // Fills the empty `dst` with this graph; `map` takes every value of this
  // graph to its copy and already holds those of the enclosing graphs.
  void clone_into(Graph& dst, std::unordered_map<const Value*, Value*>& map) const;
  Value* new_value(const std::string& name);
  std::unique_ptr<Node> make_node(const std::string& op_type, const std::vector<Value*>& inputs,
                                  const std::vector<std::string>& output_names,
                                  const std::string& domain, const std::string& name);
  void forget_value(Value* v);

  std::string name_;
  Graph* parent_ = nullptr;
  Node* parent_node_ = nullptr;
  std::map<std::string, int64_t> opsets_;
  std::string file_;
  std::vector<Value*> inputs_, outputs_, initializers_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::unordered_map<const Value*, std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value*> by_name_;
  uint64_t fresh_counter_ = 0;
};

// A loaded model: the main graph plus what the file said about itself.
struct Model {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::string path;           // file it was read from
  std::string producer;       // e.g. "pytorch 2.11"
  int64_t ir_version = 0;
  std::map<std::string, std::string> metadata;
};

// A copy of the model whose graph can be changed apart from the original's.
std::unique_ptr<Model> clone_model(const Model& m);

template <typename Pred>
void Graph::erase_nodes_if(Pred pred) {
  std::vector<std::unique_ptr<Node>> kept;
  kept.reserve(nodes_.size());
  for (auto& n : nodes_) {
    if (pred(*n)) {
      for (Value* v : n->outputs_) forget_value(v);
    } else {
      kept.push_back(std::move(n));
    }
  }
  nodes_ = std::move(kept);
}

}  // namespace tcc
