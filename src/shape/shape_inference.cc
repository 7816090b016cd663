#include "src/shape/shape_inference.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/schema.h>

#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// The newest opset whose schemas the ONNX library tcc links (1.12) holds.
constexpr int64_t kSchemaOpset = 17;

// "ONNX's Slice-13": the op and the version of its schema that messages cite.
std::string schema_name(const Node& n, const ONNX_NAMESPACE::OpSchema& schema) {
  return "ONNX's " + n.op_type() + "-" + std::to_string(schema.SinceVersion());
}

// Checks a default-domain node's inputs and outputs against ONNX's schema of
// its op, so that no shape rule or kernel reads an input a malformed model
// left out: the required inputs must be present (their names non-empty), and
// up to kSchemaOpset, where the library's schema is the node's own, the input
// and output counts must be in range. Newer opsets only add optional inputs
// to ops the library knows, so for them the required ones are still checked,
// a single-output op still has one output, and only the few ops that gained
// inputs may have more than the library's schema takes.
void check_arity(const Node& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return;
  const auto* schema = ONNX_NAMESPACE::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(n.opset()), "");
  if (schema == nullptr) return;
  const std::string op = schema_name(n, *schema);
  auto count = [](int lo, int hi) {
    return lo == hi ? std::to_string(lo) : hi == std::numeric_limits<int>::max() ? "at least " + std::to_string(lo)
                                                                                 : std::to_string(lo) + " to " + std::to_string(hi);
  };
  auto plural_inputs = [](int most) { return most == 1 ? std::string(" input") : std::string(" inputs"); };
  int inputs = static_cast<int>(n.num_inputs()), outputs = static_cast<int>(n.num_outputs());
  // Positions before min_input may be optional (Loop's M and cond): only a
  // formal input of option Single must be there. OptionalHasElement's input
  // became optional at 18 (none has no element), after the library's schema.
  const auto& formals = schema->inputs();
  const bool made_optional = n.opset() >= 18 && n.op_type() == "OptionalHasElement";
  for (int i = 0; i < schema->min_input() && i < static_cast<int>(formals.size()) && !made_optional; ++i)
    if (formals[i].GetOption() == ONNX_NAMESPACE::OpSchema::Single && (i >= inputs || !n.has_input(static_cast<size_t>(i))))
      n.fail(op + " takes " + count(schema->min_input(), schema->max_input()) + plural_inputs(schema->max_input()) +
             (schema->min_input() == schema->max_input()
                  ? ""
                  : ", the first " + std::to_string(schema->min_input()) + " required") +
             "; input " + std::to_string(i) + " is " + (i >= inputs ? "missing" : "none"));
  // A single-output op has had one output in every opset since: beyond
  // kSchemaOpset a node with more (a Tanh with two) is malformed too.
  if (n.opset() > kSchemaOpset && schema->max_output() == 1 && outputs > 1)
    n.fail(op + " has 1 output, the node has " + std::to_string(outputs));
  // Since kSchemaOpset only a few ops have taken more inputs (the reductions'
  // and Pad's axes at 18, DFT's length and axis at 20); any other with more than
  // its library schema takes is malformed too (a Sigmoid with two, whose second
  // would broadcast into its result and meet a gradient rule that never heard of it).
  static const std::set<std::string> gained_inputs = {
      "ReduceL1",  "ReduceL2",  "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
      "ReduceMin", "ReduceProd", "ReduceSumSquare", "Pad", "DFT"};
  if (inputs > schema->max_input() && (n.opset() <= kSchemaOpset || !gained_inputs.count(n.op_type())))
    n.fail(op + " takes " + count(schema->min_input(), schema->max_input()) + plural_inputs(schema->max_input()) +
           ", the node has " + std::to_string(inputs));
  if (n.opset() > kSchemaOpset) return;
  if (outputs < schema->min_output() || outputs > schema->max_output())
    n.fail(op + " has " + count(schema->min_output(), schema->max_output()) + " outputs, the node has " +
           std::to_string(outputs));
}

// Checks each present tensor input's element type against the types ONNX's
// schema allows for its formal parameter (Slice's starts are integers, Gemm's
// operands floats or integers, ...), up to kSchemaOpset, where the schema is
// the node's own: no rule or kernel then meets a dtype its op never takes.
void check_input_types(const Node& n) {
  if ((!n.domain().empty() && n.domain() != "ai.onnx") || n.opset() > kSchemaOpset) return;
  const auto* schema = ONNX_NAMESPACE::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(n.opset()), "");
  if (schema == nullptr || schema->inputs().empty()) return;
  using ONNX_NAMESPACE::Utils::DataTypeUtils;
  const auto& formals = schema->inputs();
  const std::string op = schema_name(n, *schema);
  std::map<std::string, size_t> first_of_type;  // a type variable ("T") -> the first input bound to it
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    if (!n.has_input(i)) continue;
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || t.dtype() == DType::Undefined) continue;
    const auto& formal = formals[std::min(i, formals.size() - 1)];
    const std::string onnx_type = "tensor(" + DataTypeUtils::ToDataTypeString(static_cast<int32_t>(t.dtype())) + ")";
    if (formal.GetTypes().count(DataTypeUtils::ToType(onnx_type)) != 0) {
      // Inputs of one type variable share their element type (Gemm's A, B and C).
      auto [first, fresh] = first_of_type.emplace(formal.GetTypeStr(), i);
      DType bound = n.input(first->second)->type().dtype();
      if (!fresh && bound != t.dtype())
        n.fail(op + " takes inputs " + std::to_string(first->second) + " and " + std::to_string(i) + " of one type " +
               formal.GetTypeStr() + "; '" + n.input(first->second)->name() + "' is " +
               std::string(dtype_name(bound)) + ", '" + n.input(i)->name() + "' " + std::string(dtype_name(t.dtype())));
      continue;
    }
    std::vector<std::string> allowed;
    for (const auto* a : formal.GetTypes()) allowed.push_back(*a);
    std::sort(allowed.begin(), allowed.end());
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    n.fail(op + " takes input " + std::to_string(i) + " ('" + formal.GetName() + "') of " + list + "; '" +
           n.input(i)->name() + "' is " + onnx_type);
  }
}

// The declared type fills what inference left unknown.
Type merge_declared(const Type& inferred, const Type& declared) {
  if (inferred.is_unknown()) return declared;
  if (!inferred.is_tensor() || !declared.is_tensor()) return inferred;
  if (!inferred.has_rank()) {
    if (declared.has_rank() && declared.dtype() == inferred.dtype()) return declared;
    return inferred;
  }
  if (!declared.has_rank() || declared.rank() != inferred.rank()) return inferred;
  Dims d = inferred.shape();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i].is_unknown()) d[i] = declared.shape()[i];
  return Type::tensor(inferred.dtype(), d);
}

// A static shape with a negative extent (a pool window wider than its padded
// input), or whose element count overflows int64 (an Expand to [4e6, 4e6,
// 4e6]): no buffer holds it and every size computed from it wraps. Negative
// extents are refused in the main graph only: in a region one may belong to
// an If branch that never runs for these shapes (ONNX's expanded AffineGrid
// splits a 3-D grid's sizes in its 2-D branch too).
void check_output_shape(const Node& n, const Value& v) {
  const Type& t = v.type();
  if (!t.is_tensor() || !t.has_rank()) return;
  const bool in_region = n.graph() != nullptr && n.graph()->parent() != nullptr;
  int64_t count = 1;
  for (const Dim& d : t.shape()) {
    if (d.is_static() && d.value() < 0 && !in_region)
      n.fail("output '" + v.name() + "' would have type " + t.str() +
             ", with a negative extent: the node's attributes or inputs do not fit its input's shape");
    if (d.is_static() && __builtin_mul_overflow(count, d.value(), &count))
      n.fail("output '" + v.name() + "' has type " + t.str() + ", whose element count overflows a 64-bit integer");
  }
}

class Engine {
 public:
  explicit Engine(ShapeInfo& info) : info_(info) {}

  void run_graph(Graph& g) {
    for (Value* v : g.initializers()) info_.consts.emplace(v, v->initializer());
    for (const auto& n : g.nodes()) infer_node(*n);
  }

  std::vector<Type> run_region(const Graph& cg, const std::vector<Type>& input_types) {
    Graph& g = const_cast<Graph&>(cg);  // inference annotates the region it walks
    for (size_t i = 0; i < g.inputs().size() && i < input_types.size(); ++i)
      g.inputs()[i]->set_type(merge_declared(input_types[i], g.inputs()[i]->type()));
    run_graph(g);
    std::vector<Type> outs;
    for (Value* v : g.outputs()) outs.push_back(v->type());
    return outs;
  }

 private:
  void infer_node(Node& n) {
    check_arity(n);
    check_input_types(n);
    const OpDef* def = OpRegistry::get().lookup(n);
    if (!def || !def->infer) {
      info_.unsupported.push_back(&n);
      return;
    }
    std::vector<Type> types;
    std::vector<const Tensor*> consts;
    std::vector<const Dims*> values;
    for (Value* in : n.inputs()) {
      types.push_back(in ? info_.env.canonical(in->type()) : Type());
      auto c = in ? info_.consts.find(in) : info_.consts.end();
      consts.push_back(c == info_.consts.end() ? nullptr : &c->second);
      auto v = in ? info_.values.find(in) : info_.values.end();
      values.push_back(v == info_.values.end() ? nullptr : &v->second);
    }
    InferContext ctx(n, info_.env, types, consts, values,
                     [this](const Graph& g, const std::vector<Type>& ts) { return run_region(g, ts); });
    def->infer(ctx);
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      Value* out = n.output(i);
      learn_declared_symbols(ctx.out_types[i], out->type());
      out->set_type(info_.env.canonical(merge_declared(ctx.out_types[i], out->type())));
      check_output_shape(n, *out);
      if (ctx.out_values[i]) info_.values[out] = std::move(*ctx.out_values[i]);
      if (ctx.out_consts[i]) info_.consts[out] = std::move(*ctx.out_consts[i]);
    }
    try_fold(n, *def, consts);
  }

  // A symbol the model's declared types name a computed size with (torch's
  // s39 for a convolution's output height), not one of the graph inputs',
  // stands for what inference computed there: it is bound at first sight, so
  // the sizes declared later in terms of it (s39 + Mod(4 - Mod(s39, 4), 4))
  // read in the inputs' symbols.
  void learn_declared_symbols(const Type& inferred, const Type& declared) {
    if (!inferred.is_tensor() || !declared.is_tensor() || !inferred.has_rank() || !declared.has_rank() ||
        inferred.rank() != declared.rank())
      return;
    for (size_t k = 0; k < inferred.rank(); ++k) {
      const Dim& got = inferred.shape()[k];
      Dim named = info_.env.canonical(declared.shape()[k]);
      if (got.is_unknown() || !named.is_symbolic() || !named.expr().is_symbol() ||
          info_.env.declared(named.expr().symbol_name()))
        continue;
      info_.env.unify(got, named);
    }
  }

  // Folds a node whose inputs are all constants by running its reference kernel.
  // A shape-only op without inputs (tcc::Size) reads the run's symbols instead:
  // its shape rule already recorded what is known of it.
  void try_fold(const Node& n, const OpDef& def, const std::vector<const Tensor*>& consts) {
    if (!def.eval || def.has(kRandom) || def.has(kControlFlow) || !n.regions().empty()) return;
    if (def.has(kShapeOnly) && n.num_inputs() == 0) return;
    for (size_t i = 0; i < n.num_inputs(); ++i)
      if (n.has_input(i) && !consts[i]) return;
    for (Value* out : n.outputs()) {
      if (info_.consts.count(out)) return;
      const Type& t = out->type();
      if (!t.fully_static()) return;
      int64_t numel = 1;
      for (const auto& d : t.shape()) numel *= d.value();
      if (numel > kMaxFoldElements) return;
    }
    Interpreter interp;
    std::vector<Tensor> outs = interp.eval_node(n, consts);
    for (size_t i = 0; i < outs.size() && i < n.num_outputs(); ++i)
      info_.consts[n.output(i)] = std::move(outs[i]);
  }

  ShapeInfo& info_;
};

}  // namespace

ShapeInfo infer_shapes(Graph& g) {
  ShapeInfo info;
  // Named dims first, so they win over fresh symbols when unified.
  for (Value* in : g.inputs())
    if (in->type().is_tensor() && in->type().has_rank())
      for (const auto& d : in->type().shape())
        if (d.is_symbolic())
          for (const auto& s : d.expr().symbols()) info.env.declare(s);
  for (Value* in : g.inputs()) {
    const Type& t = in->type();
    if (!t.is_tensor() || !t.has_rank() || t.fully_shaped()) continue;
    Dims d = t.shape();
    for (auto& dim : d)
      if (dim.is_unknown()) dim = info.env.fresh("unk");
    in->set_type(Type::tensor(t.dtype(), d));
  }
  Engine(info).run_graph(g);
  // Facts learned late (a broadcast near the output) apply to every value.
  std::function<void(Graph&)> canon = [&](Graph& gr) {
    for (Value* v : gr.inputs()) v->set_type(info.env.canonical(v->type()));
    for (const auto& n : gr.nodes()) {
      for (Value* v : n->outputs()) v->set_type(info.env.canonical(v->type()));
      for (Graph* r : n->regions()) canon(*r);
    }
  };
  canon(g);
  for (auto& [v, dims] : info.values) dims = info.env.canonical(dims);
  return info;
}

}  // namespace tcc
