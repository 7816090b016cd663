// Symbolic integer expressions for tensor dimensions.
//
// A SymExpr is a polynomial with integer coefficients over atoms. An atom is a
// named symbol (an ONNX dim_param such as "batch", or a fresh "s3") or an opaque
// floor division that could not be simplified, named by its canonical text
// ("(seq+1)//2"). Polynomials are kept in canonical form, so two expressions are
// equal exactly when their canonical text is equal; this is what lets shape
// inference learn `seq*4 == 4*seq` and resolve exporters' reshape chains.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tcc {

class SymExpr {
 public:
  SymExpr() = default;  // zero
  static SymExpr constant(int64_t v);
  static SymExpr symbol(const std::string& name);

  bool is_constant() const;
  // Constant value; only valid when is_constant().
  int64_t constant_value() const;
  // True when the expression is exactly one symbol with coefficient 1.
  bool is_symbol() const;
  const std::string& symbol_name() const;  // only valid when is_symbol()
  // {name, c} when the expression is c*name for a named symbol and a constant c >= 1 (torch.export's derived
  // dims, 32*h); nullopt otherwise.
  std::optional<std::pair<std::string, int64_t>> scaled_symbol() const;

  SymExpr operator+(const SymExpr& o) const;
  SymExpr operator-(const SymExpr& o) const;
  SymExpr operator*(const SymExpr& o) const;
  SymExpr operator-() const;
  // this / d when d divides it as polynomials over their atoms, with integer
  // coefficients: (batch*seq*4)/4 -> batch*seq, (batch*seq)/seq -> batch, and
  // a view's (64*b*(s-1))/(16*b*(s-1)) -> 4; nullopt otherwise.
  std::optional<SymExpr> exact_div(const SymExpr& d) const;
  // Floor division: exact when possible, integer division for constants,
  // nested divisions by positive constants merged ((L//5-2)//2 -> L//10-1),
  // otherwise an opaque atom. d must not be the constant 0.
  SymExpr floordiv(const SymExpr& d) const;

  // Substitutes symbols by expressions (symbols not in the map stay).
  SymExpr substitute(const std::map<std::string, SymExpr>& env) const;
  // Value under a full assignment of the symbols; nullopt if a symbol is missing
  // or a division's denominator evaluates to 0.
  std::optional<int64_t> evaluate(const std::map<std::string, int64_t>& env) const;
  // True when the expression is >= 0 wherever its symbols are (sizes are
  // never negative), as far as bounding its floor divisions by a positive
  // constant shows, N - d + 1 <= d*(N//d) <= N: "seq+1", "seq-seq//2" and
  // torch.chunk's "2*((seq+1)//2)-seq" are; "seq-1" and "seq//2-seq" are not.
  bool provably_nonnegative() const;
  // True when the expression is 0 wherever its symbols are: (h+1)//2 - h + h//2
  // is. Where every division has a constant positive divisor and a numerator
  // of degree 1, the expression is a polynomial on each residue class of its
  // symbols modulo the divisors, so it is evaluated at enough points of each
  // class to decide. False when unsure (another division, too many points).
  bool identically_zero() const;
  // Named symbols this expression mentions (including inside opaque atoms).
  std::set<std::string> symbols() const;
  // Whether `sym` appears inside one of its opaque divisions ("(b*s)//(4*s)").
  bool mentions_in_division(const std::string& sym) const;

  // Canonical text: "batch*seq*4+1", "-seq+8", "(seq+1)//2".
  std::string str() const;
  // Parses the text form, and sympy's Mod(a, b) as torch writes it into exported
  // models; nullopt on a syntax error.
  static std::optional<SymExpr> parse(const std::string& text);

  bool operator==(const SymExpr& o) const { return terms_ == o.terms_; }
  bool operator!=(const SymExpr& o) const { return !(*this == o); }
  bool operator<(const SymExpr& o) const { return terms_ < o.terms_; }

 private:
  // A monomial: sorted atom names (repeats mean powers) -> coefficient.
  using Monomial = std::vector<std::string>;
  std::map<Monomial, int64_t> terms_;
  void add_term(const Monomial& m, int64_t c);
  // Into `period`, per symbol this mentions, a multiple of the period of the
  // divisions that mention it (1 where none does); false where a division is
  // not of the kind identically_zero() decides.
  bool periods(std::map<std::string, int64_t>& period) const;
};

// True when the text is a valid symbol name ([A-Za-z_][A-Za-z0-9_]*).
bool is_symbol_name(const std::string& s);

}  // namespace tcc
