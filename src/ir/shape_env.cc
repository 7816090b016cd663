#include "src/ir/shape_env.h"

#include <algorithm>

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
  } else if (!(ea - eb).identically_zero() && !solve_linear(ea - eb)) {
    return false;
  }
  equalities_.push_back({ea, eb, why});
  return true;
}

size_t ShapeEnv::order_of(const std::string& sym) const {
  auto it = index_.find(sym);
  return it == index_.end() ? SIZE_MAX : it->second;
}

// d == 0 where d is k*s + rest, k a constant and rest free of s: binds s to
// -rest / k when that division is exact (b+1 == 24 gives b = 23, 2*b == c*4
// gives b = 2*c), the newest such symbol first. Where s is d's one symbol and
// k does not divide the constant rest (2*b == 23), no integer solves it:
// false. Otherwise (a*b == c*d) the fact stays recorded but is not used to
// rewrite.
bool ShapeEnv::solve_linear(const SymExpr& d) {
  if (d.is_constant()) return d.constant_value() == 0;  // b+1 == b: never
  const std::set<std::string> named = d.symbols();
  std::vector<std::string> syms(named.begin(), named.end());
  std::sort(syms.begin(), syms.end(),
            [&](const std::string& a, const std::string& b) { return order_of(a) > order_of(b); });
  bool integral = true;
  for (const std::string& s : syms) {
    // s inside a division is no linear unknown (and setting it to 0 below
    // could divide by zero): b*s*8 // (256*s) == 2 does not solve for s.
    if (d.mentions_in_division(s)) continue;
    SymExpr rest = d.substitute({{s, SymExpr()}});
    SymExpr k = d.substitute({{s, SymExpr::constant(1)}}) - rest;
    if (!k.is_constant() || k.constant_value() == 0 || rest.symbols().count(s) ||
        rest + k * SymExpr::symbol(s) != d)
      continue;  // not linear in s, or s also inside an opaque atom
    if (std::optional<SymExpr> value = (-rest).exact_div(k)) {
      bind(s, *value);
      return true;
    }
    integral = integral && !rest.is_constant();
  }
  return integral;
}

}  // namespace tcc
