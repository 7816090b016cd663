#include "src/shape/shape_env.h"

#include "src/ir/graph.h"

namespace tcc {

void ShapeEnv::declare(const std::string& name) {
  if (index_.emplace(name, order_.size()).second) order_.push_back(name);
}

Dim ShapeEnv::fresh(const std::string& prefix) {
  for (;;) {
    std::string n = prefix + std::to_string(fresh_counter_++);
    if (!index_.count(n)) {
      declare(n);
      return Dim::symbol(n);
    }
  }
}

Dim ShapeEnv::canonical(const Dim& d) const {
  if (d.is_unknown() || subst_.empty()) return d;
  return Dim(d.expr().substitute(subst_));
}

Dims ShapeEnv::canonical(const Dims& ds) const {
  Dims out;
  out.reserve(ds.size());
  for (const auto& d : ds) out.push_back(canonical(d));
  return out;
}

Type ShapeEnv::canonical(const Type& t) const {
  switch (t.kind()) {
    case Type::Kind::Tensor:
      return t.has_rank() ? Type::tensor(t.dtype(), canonical(t.shape())) : t;
    case Type::Kind::Sequence:
      return Type::sequence(canonical(t.elem()));
    case Type::Kind::Optional:
      return Type::optional(canonical(t.elem()));
    case Type::Kind::Unknown:
      return t;
  }
  return t;
}

void ShapeEnv::bind(const std::string& sym, const SymExpr& e) {
  std::map<std::string, SymExpr> one{{sym, e}};
  for (auto& [k, v] : subst_) v = v.substitute(one);
  subst_[sym] = e;
}

bool ShapeEnv::unify(const Dim& a0, const Dim& b0, const Node* why) {
  if (a0.is_unknown() || b0.is_unknown()) return true;
  Dim a = canonical(a0), b = canonical(b0);
  if (a == b) return true;
  if (a.is_static() && b.is_static()) return false;
  std::string node = why ? why->name() : "";
  equalities_.push_back({a.expr(), b.expr(), node});
  auto order_of = [&](const std::string& s) {
    auto it = index_.find(s);
    return it == index_.end() ? SIZE_MAX : it->second;
  };
  const SymExpr& ea = a.expr();
  const SymExpr& eb = b.expr();
  // Bind the newer symbol to the other side; a symbol is never bound to an
  // expression that mentions it.
  if (ea.is_symbol() && eb.is_symbol()) {
    if (order_of(ea.symbol_name()) < order_of(eb.symbol_name())) bind(eb.symbol_name(), ea);
    else bind(ea.symbol_name(), eb);
  } else if (ea.is_symbol() && !eb.symbols().count(ea.symbol_name())) {
    bind(ea.symbol_name(), eb);
  } else if (eb.is_symbol() && !ea.symbols().count(eb.symbol_name())) {
    bind(eb.symbol_name(), ea);
  }
  // Otherwise (e.g. a*b == c*d) the fact stays recorded but is not used to rewrite.
  return true;
}

}  // namespace tcc
