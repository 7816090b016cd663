// ShapeEnv: the symbols of one graph and the equalities learned between them.
//
// Shape inference creates symbols (for graph inputs' named dims, for unknown
// dims, and for data-dependent sizes such as NonZero's count) and learns facts
// from ops: broadcasting `seq` against `n` means seq == n, a reshape of
// [b, s, 768] into [b*s, 768] followed by one back teaches nothing new but
// checks out. Facts are kept as substitutions symbol -> expression, applied by
// canonical(); the first-created symbol of an equal pair survives, so names the
// user wrote (dim_params) win over fresh ones.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/ir/type.h"

namespace tcc {

class Node;

class ShapeEnv {
 public:
  // A learned fact, kept for guards and diagnostics.
  struct Equality {
    SymExpr lhs, rhs;
    const Node* node = nullptr;  // the node that taught it (null for the model's own declarations)
  };

  // Declares a named symbol (an ONNX dim_param); idempotent.
  void declare(const std::string& name);
  // A new symbol "<prefix><n>" not used before.
  Dim fresh(const std::string& prefix = "s");
  // Records a == b, binding a symbol where the equality determines it (a
  // symbol, or an expression linear in one: b+1 == 24 binds b to 23). Returns
  // false if they are provably different (two distinct constants after
  // substitution, or 2*b == 23); nothing is recorded then.
  bool unify(const Dim& a, const Dim& b, const Node* why = nullptr);
  // Applies the learned substitutions.
  Dim canonical(const Dim& d) const;
  Dims canonical(const Dims& d) const;
  Type canonical(const Type& t) const;

  // Whether `name` was declared (a graph input's dim) or made by fresh().
  bool declared(const std::string& name) const { return index_.count(name) > 0; }
  const std::vector<Equality>& equalities() const { return equalities_; }
  // Symbols in creation order.
  const std::vector<std::string>& symbols() const { return order_; }

 private:
  void bind(const std::string& sym, const SymExpr& e);
  // Creation order of a symbol (SIZE_MAX for one never declared).
  size_t order_of(const std::string& sym) const;
  // Binds a symbol that d == 0 determines (shape_env.cc); false when d == 0
  // has no integer solution.
  bool solve_linear(const SymExpr& d);
  std::map<std::string, size_t> index_;  // symbol -> creation order
  std::vector<std::string> order_;
  std::map<std::string, SymExpr> subst_;
  std::vector<Equality> equalities_;
  size_t fresh_counter_ = 0;
};

}  // namespace tcc
