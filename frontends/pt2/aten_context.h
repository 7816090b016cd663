// What the ATen lowering rules (aten_ops.cc) see of one node of a torch.export
// program, and how they add tcc IR for it.
//
// A node of the serialized graph names its op ("torch.ops.aten.linear.default"),
// lists its arguments by schema name (positional or keyword alike), and its
// outputs; every tensor value has a meta entry (dtype and sizes, sizes as
// torch's symbolic expressions) and every symbolic int an expression over the
// input symbols. A rule reads the arguments through the typed accessors (an
// argument of the wrong kind is an InputError naming the node) and emits ONNX
// ops into the graph; the value bound to each ATen output is what later nodes
// read. Symbolic sizes become shape tensors through tcc::Size, so a Reshape's
// target is a Shape-like chain that shape inference follows and resolve_shapes
// folds, exactly as for an exporter's Shape -> Gather -> Concat chain.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

// A tensor's type as the program's tensor_values records it.
struct Pt2TensorMeta {
  DType dtype = DType::Undefined;
  Dims dims;
};

// A Scalar argument: an int, a float, a bool or a symbolic int.
struct Pt2Scalar {
  enum class Kind { Int, Float, Bool, Sym } kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  SymExpr sym;
  bool is_float() const { return kind == Kind::Float; }
  double value() const { return kind == Kind::Float ? f : static_cast<double>(i); }
};

// The state of one import, shared by all nodes.
struct Pt2Program {
  std::string file;
  Graph* graph = nullptr;
  std::map<std::string, Pt2TensorMeta> metas;  // tensor name -> meta
  std::map<std::string, SymExpr> syms;         // sym int name -> expression
  std::map<std::string, Value*> values;        // tensor name -> value bound to it
  std::set<std::string> used;                  // names some node or output reads
  std::map<std::string, size_t> last_reader;   // per name, the last node reading it (past the end: an output)
};

class AtenNode {
 public:
  AtenNode(Pt2Program& p, const nlohmann::json& node, std::string target, std::string name, std::string source);

  const std::string& target() const { return target_; }  // "aten.linear.default"
  const std::string& name() const { return name_; }
  const std::string& source() const { return source_; }

  // ---- arguments, by schema name ----
  bool has(const std::string& arg) const;  // present and not None
  bool is_tensor(const std::string& arg) const;
  Value* tensor(const std::string& arg) const;
  Value* opt_tensor(const std::string& arg) const;  // null when absent or None
  std::vector<Value*> tensors(const std::string& arg) const;
  // Optional-tensor lists (index's indices): null for None entries.
  std::vector<Value*> opt_tensors(const std::string& arg) const;
  int64_t i(const std::string& arg, std::optional<int64_t> def = std::nullopt) const;
  std::vector<int64_t> ints(const std::string& arg, std::optional<std::vector<int64_t>> def = std::nullopt) const;
  double f(const std::string& arg, std::optional<double> def = std::nullopt) const;
  bool b(const std::string& arg, std::optional<bool> def = std::nullopt) const;
  std::string s(const std::string& arg, std::optional<std::string> def = std::nullopt) const;
  Pt2Scalar scalar(const std::string& arg, std::optional<double> def = std::nullopt) const;
  // An int or symbolic int (SymInt).
  SymExpr sym(const std::string& arg, std::optional<int64_t> def = std::nullopt) const;
  // A list of ints and symbolic ints (SymInt[]).
  std::vector<SymExpr> syms(const std::string& arg) const;
  std::optional<DType> dtype_arg(const std::string& arg) const;

  // ---- outputs ----
  size_t num_outputs() const { return outputs_.size(); }
  const Pt2TensorMeta& out_meta(size_t k) const;
  bool out_used(size_t k) const;
  const std::string& out_name(size_t k) const;
  // Binds ATen output k to a value (an alias is fine: later nodes read `v`).
  void set_out(size_t k, Value* v);

  // ---- building IR ----
  // One node with one output, named `out` (fresh from the ATen name if empty).
  Value* op(const std::string& op_type, const std::vector<Value*>& inputs,
            const std::map<std::string, Attribute>& attrs = {}, const std::string& out = "",
            const std::string& domain = "");
  std::vector<Value*> op_n(const std::string& op_type, const std::vector<Value*>& inputs, size_t n_outputs,
                           const std::map<std::string, Attribute>& attrs = {});
  // Emits the op as output 0 of this node (named as the ATen output).
  void result(const std::string& op_type, const std::vector<Value*>& inputs,
              const std::map<std::string, Attribute>& attrs = {});
  Value* constant(Tensor t);
  Value* ints_const(const std::vector<int64_t>& v);  // 1-D i64
  Value* scalar_const(double v, DType dtype);        // 0-D
  // A 0-D i64 tensor holding the expression's value under the run's symbols.
  Value* sym_scalar(const SymExpr& e);
  // A 1-D i64 shape tensor of the dims (constants where static).
  Value* shape_tensor(const std::vector<SymExpr>& dims);
  Value* cast(Value* v, DType to);
  DType dtype(const Value* v) const;
  Value* typed(Value* v, DType t) {
    dtypes_[v] = t;
    return v;
  }
  const Dims* dims(const Value* v) const;  // null when unknown
  // The rank of a tensor argument's value (from its meta); fails if unknown.
  size_t rank(const Value* v) const;

  [[noreturn]] void fail(const std::string& msg) const;

 private:
  const nlohmann::json* arg_json(const std::string& arg) const;
  [[noreturn]] void wrong_kind(const std::string& arg, const std::string& expected) const;
  SymExpr sym_of(const nlohmann::json& a, const std::string& arg) const;
  Value* tensor_named(const nlohmann::json& t, const std::string& arg) const;

  Pt2Program& p_;
  const nlohmann::json& node_;
  std::string target_, name_, source_;
  std::vector<std::string> outputs_;  // ATen output names ("" for non-tensor outputs)
  std::map<const Value*, DType> dtypes_;
  std::map<const Value*, Dims> shapes_;
};

// torch's ScalarType number -> DType; nullopt for types tcc does not model.
std::optional<DType> pt2_dtype(int64_t scalar_type);

// Emits the IR for one node; false when tcc has no rule for its target (the
// importer then adds an opaque node).
bool lower_aten_node(AtenNode& n);
// Targets that produce no IR: symbolic-int arithmetic (whose values the program
// records as expressions) and assertions.
bool is_aten_noop(const std::string& target);

}  // namespace tcc
