// What a compiled module cannot carry (see module_checks.h).
#include "src/compiler/module_checks.h"

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "src/diag/errors.h"

namespace tcc {

namespace {

// Whether `name` is valid UTF-8, which the manifest's JSON needs (nlohmann's
// writer refuses anything else).
bool utf8(const std::string& name) {
  try {
    static_cast<void>(nlohmann::json(name).dump());
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Node and value names of g and its regions that the manifest cannot spell.
void refuse_names_json_cannot_hold(const Graph& g) {
  auto check = [&](const std::string& name, const std::string& what) {
    if (!utf8(name))
      throw InputError(g.file() + ": " + what + " name '" + name +
                       "' is not valid UTF-8; a compiled module's manifest is JSON, which names values in UTF-8");
  };
  for (const Value* v : g.inputs()) check(v->name(), "value");
  for (const Value* v : g.initializers()) check(v->name(), "value");
  for (const auto& n : g.nodes()) {
    check(n->name(), "node");
    for (const Value* v : n->outputs()) check(v->name(), "value");
    for (const Graph* r : n->regions()) refuse_names_json_cannot_hold(*r);
  }
}

}  // namespace

void refuse_what_modules_cannot_carry(const Graph& g) {
  refuse_names_json_cannot_hold(g);
  auto refuse_strings = [](const Value* v, const char* what) {
    if (v->type().is_tensor() && v->type().dtype() == DType::String)
      v->fail(std::string(what) + " '" + v->name() +
              "' is a string tensor; a compiled module takes and returns numeric tensors only");
  };
  for (const Value* v : g.inputs()) refuse_strings(v, "input");
  for (const Value* v : g.outputs()) refuse_strings(v, "output");
}

void refuse_unsized_outputs(const Graph& g) {
  std::set<std::string> bound = g.bound_symbols();
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs())
      if (v && v->type().is_tensor() && v->type().has_rank())
        for (const Dim& d : v->type().shape())
          if (d.is_symbolic() && d.expr().is_symbol()) bound.insert(d.expr().symbol_name());
  for (const Value* v : g.outputs()) {
    if (!v->type().is_tensor() || !v->type().has_rank()) continue;
    auto refuse_size = [&](const std::string& size) {
      v->fail("output '" + v->name() + "' has type " + v->type().str() + ", whose size " + size +
              " neither the inputs' shapes nor a node's output give, so a compiled module cannot size it");
    };
    for (size_t k = 0; k < v->type().shape().size(); ++k) {
      const Dim& d = v->type().shape()[k];
      if (d.is_unknown()) refuse_size("along axis " + std::to_string(k));
      for (const std::string& sym : d.expr().symbols())
        if (!bound.count(sym)) refuse_size("'" + sym + "'");
    }
  }
}

void refuse_unsolved_dims(const ShapeEnv& env) {
  for (const ShapeEnv::Equality& e : env.equalities()) {
    Dim a = env.canonical(Dim(e.lhs)), b = env.canonical(Dim(e.rhs));
    if (a == b || !e.node || (a.expr() - b.expr()).identically_zero()) continue;
    e.node->fail("its dims '" + a.expr().str() + "' and '" + b.expr().str() +
                 "' must be equal, which fixes no symbol: tcc solves an equality for a symbol only where it is linear "
                 "in it (b+1 == 24), and compiles no size that holds for some bindings only; declare the dim as a "
                 "symbol of its own or a static size");
  }
}

}  // namespace tcc
