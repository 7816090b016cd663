// Decompositions: a composite op rewritten, before fusion, into the ops it is
// made of, so that fuse can put each piece into a kernel with its neighbours
// (the pointwise op before a softmax, the residual add before a layernorm).
// An op's decomposition lives with the rest of its definition (its OpDef in
// src/ops/<family>.cc, `.decomposition(fn)`); passes/decompose.cc applies
// them to the nodes of the main graph.
//
// A decomposition looks at its node through an Expansion and either leaves it
// alone (returns false, having changed nothing) or builds the pieces that
// replace it and returns true. Each piece is inserted before the node, named
// "<node name>/<piece>" ("/h.0/ln_1/LayerNormalization/ReduceMean"), keeps the
// node's source location (kernels trace back to the model) and gets its type
// as shape inference would give it. The last piece takes over the node's output
// value and its name (finish), or each output's readers move to a piece
// (take_over) and the pass erases the node.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

// The data of v when the model fixes it without running anything: an
// initializer that is not also a graph input (an input's initializer is only a
// default the caller may override), or the output of a Constant node.
std::optional<Tensor> constant_value(const Value* v);

// The one element of a constant with a single element, as double.
std::optional<double> scalar_constant(const Value* v);

// The broadcast shape of values whose dims are 1 wherever another's is not.
Dims broadcast_of(const std::vector<Value*>& vs);

class Expansion {
 public:
  Expansion(Graph& g, Node& n)
      : g_(g), n_(n), prefix_(n.name().empty() ? n.op_type() : n.name()), name_(n.name()), source_(n.source()) {}

  Graph& graph() { return g_; }
  const Node& node() const { return n_; }
  // Autodiff's expansions (src/autodiff): every piece must be one it
  // differentiates, so a decomposition with a choice takes those pieces.
  void for_autodiff() { for_autodiff_ = true; }
  bool differentiates() const { return for_autodiff_; }

  // The graph's default-domain opset: how the ONNX pieces are spelled (a tcc-domain node's own opset is tcc's).
  int64_t onnx_opset() const;
  // Input i when it is a float tensor whose shape is fully known, else null.
  const Type* ranked_float_input(size_t i) const;
  // Whether anything reads v: a node of the graph or of a region, or a graph output.
  bool used(const Value* v) const;
  // Whether only the node's output 0 is read.
  bool only_first_output_used() const;
  // x's type with the listed axes kept as size 1 (a keepdims reduction's).
  static Type kept_type(const Type& x, const std::vector<int64_t>& axes);

  // A piece computing `op` (of `domain`) of `ins`, of the given type.
  Value* add(const std::string& piece, const std::string& op, const std::vector<Value*>& ins, const Type& type,
             std::map<std::string, Attribute> attrs = {}, const std::string& domain = "");
  // A piece of several outputs, one of each type.
  std::vector<Value*> add_outputs(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
                                  const std::vector<Type>& types, std::map<std::string, Attribute> attrs = {},
                                  const std::string& domain = "");
  Value* constant(const std::string& hint, Tensor t);
  Value* scalar(const std::string& hint, double v, DType dtype);
  Value* i64(const std::string& hint, int64_t v);  // a one-element 1-D i64 constant
  Value* i64s(const std::string& hint, const std::vector<int64_t>& values);  // a 1-D i64 constant
  // A constant of `dtype` and `shape` holding `values` in row-major order.
  Value* numbers(const std::string& hint, const std::vector<double>& values, const std::vector<int64_t>& shape,
                 DType dtype);
  // A Reduce* op over `axes`, keeping dims, as the imported opset spells it.
  Value* reduce(const std::string& piece, const std::string& op, Value* x, const std::vector<int64_t>& axes,
                const Type& type);
  // x's elements in row-major order as `dims`, which may be symbolic: a
  // tcc::Reshape, a view of x's buffer.
  Value* reshape(const std::string& piece, Value* x, const Dims& dims);
  // x broadcast to `dims` (symbolic or not): a tcc::Expand.
  Value* expand(const std::string& piece, Value* x, const Dims& dims);
  // x from `start` along `axis` (a SymExpr, non-negative) by step 1, of
  // `dims` (symbolic or not): a tcc::Slice, a view of x.
  Value* slice(const std::string& piece, Value* x, int64_t axis, const Dim& start, const Dims& dims);
  // x as dtype `to`: a Cast of the same shape, or x itself when it already is.
  Value* cast(const std::string& piece, Value* x, DType to);
  // The i64s start, start + 1, ... of a symbolic `length`: a tcc::Range, which reads no tensor.
  Value* range(const std::string& piece, int64_t start, const Dim& length);
  // The i64s 0, 1, ..., length - 1 where the data decides `length`, a symbol
  // no input shape binds: `count`, a one-element i64 computed on kernels, is
  // read back by a ConstantOfShape, the one host step, which binds the symbol
  // so the runtime sizes what follows (the two-phase call, docs/MODULE.md);
  // a tcc::Range added to its zeros counts.
  Value* counted_range(const std::string& piece, Value* count, const Dim& length);
  // Whether d is one symbol that no input shape binds: a size the data decides.
  bool data_dependent(const Dim& d) const;

  // The last piece, which takes over output 0 (value and name). An empty
  // `piece` keeps the node's own name; `domain` is the piece's op domain.
  void finish(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
              std::map<std::string, Attribute> attrs = {}, const std::string& domain = "");
  // finish() with reshape() to the node's output shape as the last piece.
  void finish_reshape(const std::string& piece, Value* x);
  // finish() with a reduction as the last piece.
  void finish_reduce(const std::string& piece, const std::string& op, Value* x, const std::vector<int64_t>& axes);
  // Output i's readers read v instead; the pass erases the node afterwards.
  // An output of the main graph keeps its name, the model's signature: once
  // the node is gone the pass gives the name to an Identity of v (moved_outputs).
  void take_over(size_t i, Value* v);
  // The node's inputs may be left without readers (the zeros a scatter no
  // longer reads, and what only sized them): the pass sweeps dead code.
  void leaves_dead_inputs() { dead_inputs_ = true; }

  bool finished() const { return finished_; }
  bool dead_inputs() const { return dead_inputs_; }
  // The main-graph outputs take_over moved to a piece: each one's position in
  // the graph's outputs and the name it had.
  const std::vector<std::pair<size_t, std::string>>& moved_outputs() const { return moved_outputs_; }

 private:
  // The graph imports a piece's domain: tcc's own ops are tcc opset 1.
  void imports(const std::string& domain);
  // Axes are an attribute before opset 18 (ReduceSum: 13), a constant input from then on.
  std::pair<std::vector<Value*>, std::map<std::string, Attribute>> reduce_spelling(const std::string& op, Value* x,
                                                                                   const std::vector<int64_t>& axes);
  void setup(Node& p, const std::vector<Type>& types, std::map<std::string, Attribute> attrs);

  Graph& g_;
  Node& n_;
  std::string prefix_, name_, source_;  // kept: finish() erases n_ before building the last piece
  std::map<std::vector<int64_t>, Value*> axes_;  // one constant per distinct axes list
  bool finished_ = false, dead_inputs_ = false, for_autodiff_ = false;
  std::vector<std::pair<size_t, std::string>> moved_outputs_;
};

// Whether every dim of t is static or a symbol an input shape binds, so that
// copies of the region value it types can be planned once per iteration. A
// sequence is: its elements' types are fixed where the sequence ops resolve
// into tensor ops (src/ops/sequence.cc), and decompose infers them again.
bool plannable(const Expansion& e, const Type& t);

// The elements of sequence v where its structure is known: a SequenceConstruct
// (its inputs) or a SequenceEmpty (none) produces it; nullopt otherwise.
std::optional<std::vector<Value*>> known_sequence(const Value* v);

// Whether `body` can be copied into the main graph: no nested regions, every
// value it reads its own or the main graph's, and, where it is copied once per
// iteration (`repeated`), no op whose output size the data decides (its copies
// would share one symbol) and every value's type plannable, unless the copies
// run `over_known_sequences`: their sequence ops resolve into the elements,
// whose types decompose infers again.
bool inlinable(Expansion& e, const Graph& body, bool repeated, bool over_known_sequences = false);

// Copies `body`'s nodes before the node, as pieces "<tag>/<node name>": a value
// of the region is read as `env` maps it (the region's inputs, which the caller
// sets, then each copy's outputs), a region initializer as a constant, a
// main-graph value as itself. Returns the copies of the region's outputs.
std::vector<Value*> inline_region(Expansion& e, const Graph& body, std::map<const Value*, Value*> env,
                                  const std::string& tag);

// An op's decomposition: true when it replaced the node (see above).
using DecomposeFn = std::function<bool(Expansion&)>;

}  // namespace tcc
