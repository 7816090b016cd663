// Small graphs for op unit tests: build with the Graph API, infer shapes, run
// the reference interpreter, and print types and symbolic values as text.
#pragma once

#include <map>
#include <random>
#include <string>
#include <vector>

#include "src/diag/errors.h"
#include "src/interp/interpreter.h"
#include "src/ir/graph.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/input_error.h"

namespace tcc::testing {

// The message shape inference rejects g with; "(no error)" when it accepts g.
inline std::string shape_error(Graph& g) {
  return input_error([&] { infer_shapes(g); });
}

// A tensor type from dim texts: f32t({"batch", "seq", "768"}) is f32[batch, seq, 768].
inline Type tensor_type(DType dt, const std::vector<std::string>& dims) {
  Dims d;
  for (const auto& s : dims) d.push_back(Dim(*SymExpr::parse(s)));
  return Type::tensor(dt, d);
}

class OpGraph {
 public:
  explicit OpGraph(int64_t opset = 17) { g.set_opset("", opset); }

  Value* input(const std::string& name, Type t) { return g.add_input(name, std::move(t)); }
  Value* scalar(int64_t v) { return g.add_initializer(g.fresh_name("c"), Tensor::from_i64({v}, {})); }
  Value* ints1(const std::vector<int64_t>& v) {
    return g.add_initializer(g.fresh_name("c"), Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
  }
  // A node with `outputs` outputs; attributes set by name.
  Node* node(const std::string& op, const std::vector<Value*>& ins, size_t outputs = 1,
             const std::map<std::string, Attribute>& attrs = {}) {
    std::vector<std::string> names;
    for (size_t i = 0; i < outputs; ++i) names.push_back(g.fresh_name(op));
    Node* n = g.add_node(op, ins, names, "", g.fresh_name(op + "_node"));
    for (const auto& [k, a] : attrs) n->set_attr(k, a);
    return n;
  }
  Value* op(const std::string& op, const std::vector<Value*>& ins, const std::map<std::string, Attribute>& attrs = {}) {
    return node(op, ins, 1, attrs)->output(0);
  }

  ShapeInfo& infer() {
    info = infer_shapes(g);
    return info;
  }
  // "[batch, seq]" or "none".
  std::string values(const Value* v) const {
    auto it = info.values.find(v);
    return it == info.values.end() ? "none" : dims_str(it->second);
  }
  std::vector<Tensor> run(const std::vector<Value*>& outs, const std::map<std::string, Tensor>& inputs) {
    g.set_outputs(outs);
    return Interpreter().run(g, inputs);
  }

  Graph g;
  ShapeInfo info;
};

inline Tensor f32(const std::vector<float>& v, std::vector<int64_t> shape) { return Tensor::from_f32(v, shape); }
inline Tensor i64(const std::vector<int64_t>& v, std::vector<int64_t> shape) { return Tensor::from_i64(v, shape); }
// Sequential values 0, 1, 2, ... of a shape.
inline Tensor iota_f32(std::vector<int64_t> shape) {
  Tensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(i));
  return t;
}
inline std::vector<double> floats(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}
// Inputs of g's types with its symbols at `sizes`: floats standard normal,
// bools true three times in four.
inline std::map<std::string, Tensor> random_normal_inputs(const Graph& g, const std::map<std::string, int64_t>& sizes,
                                                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::map<std::string, Tensor> in;
  for (const Value* v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : v->type().shape()) shape.push_back(*d.expr().evaluate(sizes));
    Tensor t(v->type().dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, v->type().dtype() == DType::Bool ? (rng() % 4 != 0) : normal(rng));
    in.emplace(v->name(), std::move(t));
  }
  return in;
}
// A tensor of any dtype from values in row-major order.
inline Tensor tensor_of(DType dt, const std::vector<double>& v, std::vector<int64_t> shape) {
  Tensor t(dt, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), v[i]);
  return t;
}

// One node over graph inputs in0, in1, ...; its output is the graph output.
struct OneOp {
  explicit OneOp(const std::string& op, const std::vector<Type>& ins,
                 const std::map<std::string, Attribute>& attrs = {}, int64_t opset = 17) {
    g.set_opset("", opset);
    std::vector<Value*> vs;
    for (size_t i = 0; i < ins.size(); ++i) vs.push_back(g.add_input("in" + std::to_string(i), ins[i]));
    node = g.add_node(op, vs, {"out"}, "", op + "_0");
    for (const auto& [k, a] : attrs) node->set_attr(k, a);
    g.add_output(node->output(0));
  }
  // The output's inferred type.
  std::string type() {
    infer_shapes(g);
    return node->output(0)->type().str();
  }
  // Input i's type, after inference has unified it with the other inputs.
  std::string input_type(size_t i) const { return g.inputs()[i]->type().str(); }
  Tensor run(const std::vector<Tensor>& ins) {
    std::map<std::string, Tensor> m;
    for (size_t i = 0; i < ins.size(); ++i) m["in" + std::to_string(i)] = ins[i];
    return Interpreter().run(g, m).at(0);
  }
  // The message shape inference rejects the node with.
  std::string error() { return shape_error(g); }
  Graph g;
  Node* node = nullptr;
};

}  // namespace tcc::testing
