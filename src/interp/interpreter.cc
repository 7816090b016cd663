#include "src/interp/interpreter.h"

#include "src/ops/op_registry.h"

namespace tcc {

std::string mismatch_with_type(const Tensor& t, const Type& type) {
  if (type.is_unknown()) return "";
  if (type.kind() == Type::Kind::Sequence || type.kind() == Type::Kind::Optional) {
    bool sequence = type.kind() == Type::Kind::Sequence;
    if (sequence ? !t.is_sequence() : !t.is_optional())
      return std::string(t.is_sequence() ? "a sequence" : t.is_optional() ? "an optional" : "a tensor") + " where " +
             type.str() + " was expected";
    for (const Tensor& e : t.elements()) {
      std::string why = mismatch_with_type(e, type.elem());
      if (!why.empty()) return "an element with " + why;
    }
    return "";
  }
  if (t.kind() != Tensor::Kind::Tensor)
    return std::string(t.is_sequence() ? "a sequence" : "an optional") + " where " + type.str() + " was expected";
  if (type.dtype() != DType::Undefined && t.dtype() != type.dtype())
    return "dtype " + std::string(dtype_name(t.dtype())) + " where " + std::string(dtype_name(type.dtype())) +
           " was expected";
  if (!type.has_rank()) return "";
  if (t.rank() != type.rank())
    return "rank " + std::to_string(t.rank()) + " (shape " + shape_str(t.shape()) + ") where " + type.str() +
           " was expected";
  for (size_t i = 0; i < t.rank(); ++i) {
    const Dim& d = type.shape()[i];
    if (d.is_static() && d.value() != t.shape()[i])
      return "size " + std::to_string(t.shape()[i]) + " at dim " + std::to_string(i) + " where " + type.str() +
             " was expected";
  }
  return "";
}

const Tensor* Interpreter::lookup(const Value* v) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = (*it)->find(v);
    if (f != (*it)->end()) return &f->second;
  }
  return nullptr;
}

std::vector<Tensor> Interpreter::eval_node(const Node& n, const std::vector<const Tensor*>& inputs) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (!def || !def->eval) n.fail(OpRegistry::get().why_unsupported(n) + "; the reference interpreter cannot run it");
  EvalContext ctx(n, inputs, *this);
  std::vector<Tensor> outs = def->eval(ctx);
  TCC_CHECK(outs.size() <= n.num_outputs())
      << n.op_type() << " kernel returned " << outs.size() << " outputs for " << n.num_outputs();
  return outs;
}

std::vector<Tensor> Interpreter::eval_node(const Node& n, const std::vector<const Tensor*>& inputs,
                                           std::unordered_map<const Value*, Tensor> captured) {
  Entered entered(scopes_, captured);
  return eval_node(n, inputs);
}

std::vector<Tensor> Interpreter::run_scope(const Graph& g, Scope& scope) {
  Entered entered(scopes_, scope);
  for (Value* v : g.initializers()) scope.emplace(v, v->initializer());
  for (const auto& n : g.nodes()) {
    std::vector<const Tensor*> ins;
    for (Value* v : n->inputs()) {
      if (!v) {
        ins.push_back(nullptr);
        continue;
      }
      const Tensor* t = lookup(v);
      TCC_CHECK(t) << "value '" << v->name() << "' read before it is computed (node '" << n->name() << "')";
      ins.push_back(t);
    }
    std::vector<Tensor> outs = eval_node(*n, ins);
    for (size_t i = 0; i < outs.size(); ++i) scope[n->output(i)] = std::move(outs[i]);
  }
  std::vector<Tensor> results;
  for (Value* v : g.outputs()) {
    const Tensor* t = lookup(v);
    if (!t) throw InputError(DiagLocation::in_file(g.file()), "graph output '" + v->name() + "' is never computed");
    results.push_back(*t);
  }
  return results;
}

void Interpreter::bind_symbols(const Graph& g, const Value& in, const Tensor& t) {
  const Type& type = in.type();
  if (!type.is_tensor() || !type.has_rank() || type.rank() != t.rank()) return;
  for (size_t k = 0; k < t.rank(); ++k) {
    const Dim& d = type.shape()[k];
    // A symbol, or one scaled by a constant (torch.export's derived dims, 4*h).
    std::optional<std::pair<std::string, int64_t>> scaled = d.is_unknown() ? std::nullopt : d.expr().scaled_symbol();
    if (!scaled) continue;
    const auto& [sym, factor] = *scaled;
    std::string source = "input '" + in.name() + "' dim " + std::to_string(k);
    if (t.shape()[k] % factor != 0)
      throw InputError(DiagLocation::in_file(g.file()), source + " is " + std::to_string(t.shape()[k]) +
                                                            ", not a multiple of " + std::to_string(factor) + " (" +
                                                            d.str() + ")");
    int64_t value = t.shape()[k] / factor;
    auto [it, fresh] = symbols_.emplace(sym, value);
    if (fresh) {
      symbol_sources_[sym] = source;
    } else if (it->second != value) {
      throw InputError(DiagLocation::in_file(g.file()), "symbol '" + sym + "' is " + std::to_string(it->second) + " by " +
                                                   symbol_sources_[sym] + " but " + std::to_string(value) +
                                                   " by " + source);
    }
  }
}

std::vector<Tensor> Interpreter::run(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  return run(g, inputs, nullptr);
}

std::vector<Tensor> Interpreter::run(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                     std::map<std::string, Tensor>* computed) {
  Scope scope;
  symbols_.clear();
  symbol_sources_.clear();
  for (Value* in : g.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end()) {
      if (in->is_initializer()) {  // an input with a default value
        bind_symbols(g, *in, in->initializer());
        scope[in] = in->initializer();
        continue;
      }
      throw InputError(DiagLocation::in_file(g.file()), "no value given for graph input '" + in->name() + "' (" +
                                                   in->type().str() + ")");
    }
    std::string why = mismatch_with_type(it->second, in->type());
    if (!why.empty()) throw InputError(DiagLocation::in_file(g.file()), "input '" + in->name() + "' has " + why);
    bind_symbols(g, *in, it->second);
    scope[in] = it->second;
  }
  for (const auto& [name, t] : inputs)
    if (!g.find_local(name) || !g.find_local(name)->is_graph_input())
      throw InputError(DiagLocation::in_file(g.file()), "'" + name + "' is not an input of the graph");
  std::vector<Tensor> outputs = run_scope(g, scope);
  if (computed)
    for (const auto& n : g.nodes())
      for (Value* v : n->outputs())
        if (auto it = scope.find(v); v && it != scope.end()) (*computed)[v->name()] = std::move(it->second);
  return outputs;
}

std::vector<Tensor> Interpreter::run_region(const Graph& g, const std::vector<Tensor>& inputs) {
  TCC_CHECK(inputs.size() == g.inputs().size())
      << "region '" << g.name() << "' takes " << g.inputs().size() << " inputs, got " << inputs.size();
  Scope scope;
  for (size_t i = 0; i < inputs.size(); ++i) scope[g.inputs()[i]] = inputs[i];
  return run_scope(g, scope);
}

}  // namespace tcc
