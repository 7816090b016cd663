#include "src/ir/sym.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <unordered_map>

#include "src/diag/errors.h"

namespace tcc {

namespace {
bool is_opaque_atom(const std::string& a) { return !a.empty() && a[0] == '('; }

// An opaque atom "(num)//(den)" split into its numerator and denominator
// texts: the numerator ends where the atom's first parenthesis closes, so
// divisions nested inside either part stay whole.
std::pair<std::string, std::string> split_division(const std::string& atom) {
  int depth = 0;
  for (size_t i = 0; i < atom.size(); ++i) {
    if (atom[i] == '(') ++depth;
    else if (atom[i] == ')' && --depth == 0) {
      TCC_CHECK(atom.compare(i, 4, ")//(") == 0 && atom.back() == ')') << "not a division: " << atom;
      return {atom.substr(1, i - 1), atom.substr(i + 4, atom.size() - i - 5)};
    }
  }
  TCC_CHECK(false) << "unbalanced atom " << atom;
  return {};
}

// Floor division that rounds toward negative infinity.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// An opaque division's numerator and denominator, parsed once per process:
// the runtime evaluates the same launch expressions at every new binding.
const std::pair<SymExpr, SymExpr>& division_parts(const std::string& atom) {
  static std::shared_mutex mu;
  static std::unordered_map<std::string, std::pair<SymExpr, SymExpr>> parsed;  // nodes stay put
  {
    std::shared_lock<std::shared_mutex> lock(mu);
    auto it = parsed.find(atom);
    if (it != parsed.end()) return it->second;
  }
  auto [num_text, den_text] = split_division(atom);
  std::optional<SymExpr> num = SymExpr::parse(num_text), den = SymExpr::parse(den_text);
  TCC_CHECK(num && den) << "unparsable division " << atom;
  std::unique_lock<std::shared_mutex> lock(mu);
  return parsed.try_emplace(atom, std::move(*num), std::move(*den)).first->second;
}

}  // namespace

bool is_symbol_name(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

void SymExpr::add_term(const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto [it, inserted] = terms_.emplace(m, c);
  if (!inserted) {
    it->second += c;
    if (it->second == 0) terms_.erase(it);
  }
}

SymExpr SymExpr::constant(int64_t v) {
  SymExpr e;
  e.add_term({}, v);
  return e;
}

SymExpr SymExpr::symbol(const std::string& name) {
  SymExpr e;
  e.add_term({name}, 1);
  return e;
}

bool SymExpr::is_constant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t SymExpr::constant_value() const {
  TCC_CHECK(is_constant()) << str();
  return terms_.empty() ? 0 : terms_.begin()->second;
}

bool SymExpr::is_symbol() const {
  return terms_.size() == 1 && terms_.begin()->first.size() == 1 &&
         terms_.begin()->second == 1 && !is_opaque_atom(terms_.begin()->first[0]);
}

const std::string& SymExpr::symbol_name() const {
  TCC_CHECK(is_symbol()) << str();
  return terms_.begin()->first[0];
}

std::optional<std::pair<std::string, int64_t>> SymExpr::scaled_symbol() const {
  if (terms_.size() != 1 || terms_.begin()->first.size() != 1 || terms_.begin()->second < 1 ||
      is_opaque_atom(terms_.begin()->first[0]))
    return std::nullopt;
  return std::pair{terms_.begin()->first[0], terms_.begin()->second};
}

SymExpr SymExpr::operator+(const SymExpr& o) const {
  SymExpr r = *this;
  for (const auto& [m, c] : o.terms_) r.add_term(m, c);
  return r;
}

SymExpr SymExpr::operator-() const {
  SymExpr r;
  for (const auto& [m, c] : terms_) r.add_term(m, -c);
  return r;
}

SymExpr SymExpr::operator-(const SymExpr& o) const { return *this + (-o); }

SymExpr SymExpr::operator*(const SymExpr& o) const {
  SymExpr r;
  for (const auto& [m1, c1] : terms_)
    for (const auto& [m2, c2] : o.terms_) {
      Monomial m = m1;
      m.insert(m.end(), m2.begin(), m2.end());
      std::sort(m.begin(), m.end());
      r.add_term(m, c1 * c2);
    }
  return r;
}

namespace {

// The graded order on monomials: lower degree first, then sorted atom names.
// Multiplying two monomials by the same atom keeps their order, so the
// leading term of a product is the product of the leading terms.
bool graded_less(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// m / by when every atom of `by` is one of m's (repeats counted).
std::optional<std::vector<std::string>> monomial_quotient(std::vector<std::string> m,
                                                          const std::vector<std::string>& by) {
  for (const std::string& atom : by) {
    auto it = std::find(m.begin(), m.end(), atom);
    if (it == m.end()) return std::nullopt;
    m.erase(it);
  }
  return m;
}

}  // namespace

// Polynomial long division by d's leading term: d divides this exactly iff
// the remainder reaches zero with every step's coefficient an integer (when
// q*d == this, this's leading term is q's times d's). Each step removes the
// remainder's leading term and adds only smaller ones, so it ends.
std::optional<SymExpr> SymExpr::exact_div(const SymExpr& d) const {
  auto leading = [](const SymExpr& e) {
    return *std::max_element(e.terms_.begin(), e.terms_.end(),
                             [](const auto& a, const auto& b) { return graded_less(a.first, b.first); });
  };
  if (d.terms_.empty()) return std::nullopt;
  const auto [dm, dc] = leading(d);
  SymExpr quotient, rest = *this;
  while (!rest.terms_.empty()) {
    const auto [m, c] = leading(rest);
    std::optional<Monomial> qm = monomial_quotient(m, dm);
    if (c % dc != 0 || !qm) return std::nullopt;
    SymExpr step;
    step.add_term(*qm, c / dc);
    quotient = quotient + step;
    rest = rest - step * d;
  }
  return quotient;
}

SymExpr SymExpr::floordiv(const SymExpr& d) const {
  TCC_CHECK(!(d.is_constant() && d.constant_value() == 0)) << "division by zero";
  if (auto q = exact_div(d)) return *q;
  if (is_constant() && d.is_constant()) return constant(floor_div(constant_value(), d.constant_value()));
  // (N//a + R)//b == (N + a*R)//(a*b) for positive constants a and b and an
  // integer R, since N//a + R == (N + a*R)//a: a chain of strided convolutions
  // ((L-10)//5+1-3)//2+1 is L//10-1, as torch writes the same length.
  if (d.is_constant() && d.constant_value() > 0) {
    auto division = std::find_if(terms_.begin(), terms_.end(), [](const auto& t) {
      return t.second == 1 && t.first.size() == 1 && is_opaque_atom(t.first[0]);
    });
    if (division != terms_.end()) {
      const auto& [num, den] = division_parts(division->first[0]);
      if (den.is_constant() && den.constant_value() > 0) {
        SymExpr rest = *this;
        rest.add_term(division->first, -1);
        return (num + rest * den).floordiv(den * d);
      }
    }
  }
  // (q*d + r)//d == q + r//d for an integer q: the terms d divides leave the division, so a strided
  // conv's (32*h-1)//2 is 16*h-1 and a chain of them stays a multiple of h.
  SymExpr quotient, rest;
  for (const auto& [m, c] : terms_) {
    SymExpr term;
    term.add_term(m, c);
    if (auto q = term.exact_div(d)) quotient = quotient + *q;
    else rest = rest + term;
  }
  // A positive constant divisor also takes the multiple of d out of the constant term, leaving it in [0, d):
  // (s-1)//2 is (s+1)//2 - 1, so that equal sizes reached along different paths print alike.
  if (d.is_constant() && d.constant_value() > 0) {
    auto c = rest.terms_.find(Monomial{});
    int64_t q = c == rest.terms_.end() ? 0 : floor_div(c->second, d.constant_value());
    if (q != 0) {
      quotient = quotient + constant(q);
      rest = rest - constant(q * d.constant_value());
    }
  }
  if (quotient != SymExpr()) return quotient + rest.floordiv(d);
  return symbol("(" + str() + ")//(" + d.str() + ")");
}

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr>& env) const {
  SymExpr r;
  for (const auto& [m, c] : terms_) {
    SymExpr term = constant(c);
    for (const auto& atom : m) {
      if (is_opaque_atom(atom)) {
        // Re-derive the opaque division from its parts so substitution can simplify it.
        auto parsed = parse(atom);
        TCC_CHECK(parsed) << "unparsable atom " << atom;
        SymExpr inner;
        inner.add_term({atom}, 1);
        if (*parsed == inner) {
          auto [num_text, den_text] = split_division(atom);
          auto num = parse(num_text);
          auto den = parse(den_text);
          TCC_CHECK(num && den) << atom;
          term = term * num->substitute(env).floordiv(den->substitute(env));
        } else {
          term = term * parsed->substitute(env);
        }
        continue;
      }
      auto it = env.find(atom);
      term = term * (it == env.end() ? symbol(atom) : it->second);
    }
    r = r + term;
  }
  return r;
}

// Term by term on integers, divisions through their parts, building no
// expressions: the runtime evaluates every size of a module at each binding.
std::optional<int64_t> SymExpr::evaluate(const std::map<std::string, int64_t>& env) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t term = c;
    for (const auto& atom : m) {
      if (is_opaque_atom(atom)) {
        const auto& [num, den] = division_parts(atom);
        std::optional<int64_t> n = num.evaluate(env), d = den.evaluate(env);
        if (!n || !d || *d == 0) return std::nullopt;
        term *= floor_div(*n, *d);
        continue;
      }
      auto it = env.find(atom);
      if (it == env.end()) return std::nullopt;
      term *= it->second;
    }
    total += term;
  }
  return total;
}

namespace {

// The named symbols in an opaque atom's text ("(b*s+1)//(4*s)": b, s).
void opaque_atom_symbols(const std::string& atom, std::set<std::string>& out) {
  for (size_t i = 0; i < atom.size();) {
    if (std::isalpha(static_cast<unsigned char>(atom[i])) || atom[i] == '_') {
      size_t j = i;
      while (j < atom.size() && (std::isalnum(static_cast<unsigned char>(atom[j])) || atom[j] == '_')) ++j;
      out.insert(atom.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

}  // namespace

std::set<std::string> SymExpr::symbols() const {
  std::set<std::string> out;
  for (const auto& [m, c] : terms_)
    for (const auto& atom : m) {
      if (is_opaque_atom(atom)) opaque_atom_symbols(atom, out);
      else out.insert(atom);
    }
  return out;
}

bool SymExpr::provably_nonnegative() const {
  // The first division, a*(N//d) alone in its term, leaves for its bound:
  // d*this >= d*rest + a*(N - d + 1) when a > 0, d*rest + a*N when a < 0.
  // this is an integer, so it is >= 0 once d*this >= -(d - 1).
  for (const auto& [m, a] : terms_) {
    if (std::none_of(m.begin(), m.end(), is_opaque_atom)) continue;
    if (m.size() != 1) return false;
    const auto& [num, den] = division_parts(m[0]);
    if (!den.is_constant() || den.constant_value() <= 0) return false;
    int64_t d = den.constant_value();
    SymExpr rest = *this;
    rest.add_term(m, -a);
    SymExpr bound = a > 0 ? num - constant(d - 1) : num;
    return (rest * constant(d) + bound * constant(a) + constant(d - 1)).provably_nonnegative();
  }
  return std::all_of(terms_.begin(), terms_.end(), [](const auto& t) { return t.second >= 0; });
}

namespace {
// Bounds on identically_zero()'s work: a symbol's period, and the points evaluated.
constexpr int64_t kMaxPeriod = 1 << 10;
constexpr int64_t kMaxPoints = 1 << 14;
}  // namespace

bool SymExpr::periods(std::map<std::string, int64_t>& period) const {
  for (const auto& [m, c] : terms_)
    for (const std::string& atom : m) {
      if (!is_opaque_atom(atom)) {
        period.try_emplace(atom, 1);
        continue;
      }
      const auto& [num, den] = division_parts(atom);
      if (!den.is_constant() || den.constant_value() <= 0 || den.constant_value() > kMaxPeriod) return false;
      if (std::any_of(num.terms_.begin(), num.terms_.end(), [](const auto& t) { return t.first.size() > 1; }))
        return false;
      std::map<std::string, int64_t> inner;
      if (!num.periods(inner)) return false;
      for (const auto& [sym, p] : inner) {
        int64_t& q = period.try_emplace(sym, 1).first->second;
        q = std::lcm(q, p * den.constant_value());
        if (q > kMaxPeriod) return false;
      }
    }
  return true;
}

bool SymExpr::identically_zero() const {
  if (is_constant()) return constant_value() == 0;
  std::map<std::string, int64_t> period;
  if (!periods(period)) return false;
  // A division with a numerator of degree 1 is linear in t on the class
  // s = r + period*t, so a term of k factors is of degree <= k in each t; a
  // polynomial of degree <= D in each variable that vanishes on a grid of
  // D + 1 points per variable is 0.
  int64_t degree = 0;
  for (const auto& [m, c] : terms_) degree = std::max<int64_t>(degree, static_cast<int64_t>(m.size()));
  std::vector<std::pair<std::string, int64_t>> axes;  // symbol, points along it: D + 1 per residue class
  int64_t points = 1;
  for (const auto& [sym, p] : period) {
    axes.emplace_back(sym, p * (degree + 1));
    points *= p * (degree + 1);
    if (points > kMaxPoints) return false;
  }
  std::map<std::string, int64_t> env;
  for (int64_t i = 0; i < points; ++i) {
    int64_t rest = i;
    for (const auto& [sym, n] : axes) {
      env[sym] = 1 + rest % n;
      rest /= n;
    }
    if (evaluate(env) != std::optional<int64_t>(0)) return false;
  }
  return true;
}

bool SymExpr::mentions_in_division(const std::string& sym) const {
  std::set<std::string> inside;
  for (const auto& [m, c] : terms_)
    for (const auto& atom : m)
      if (is_opaque_atom(atom)) opaque_atom_symbols(atom, inside);
  return inside.count(sym) > 0;
}

std::string SymExpr::str() const {
  if (terms_.empty()) return "0";
  // Highest degree first, then by atom names; the constant last.
  std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string s;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& [m, c] = order[i];
    int64_t mag = c < 0 ? -c : c;
    if (c < 0) s += "-";
    else if (i > 0) s += "+";
    // An opaque division reads as one factor only at the head of a product
    // with a positive sign: "(a)//(b)*((c)//(d))", "-((a)//(b))", since
    // * and // bind left to right and unary minus before both.
    std::string body;
    for (const auto& atom : m) {
      const bool wrap = is_opaque_atom(atom) && (!body.empty() || c < 0);
      body += (body.empty() ? "" : "*") + (wrap ? "(" + atom + ")" : atom);
    }
    if (body.empty()) body = std::to_string(mag);
    else if (mag != 1) body += "*" + std::to_string(mag);
    s += body;
  }
  return s;
}

namespace {
// Recursive-descent parser for: expr := term (('+'|'-') term)*
// term := unary (('*'|'//') unary)* ; unary := '-' unary | atom
// atom := int | name | '(' expr ')' | 'Mod(' expr ',' expr ')'
// Mod is sympy's, as torch writes sizes into an exported model's value_info
// (`h + Mod(4 - Mod(h, 4), 4)`, H padded up to a multiple of 4): a - b*(a//b).
class ExprParser {
 public:
  explicit ExprParser(const std::string& t) : t_(t) {}
  std::optional<SymExpr> run() {
    auto e = expr();
    skip();
    if (!e || p_ != t_.size()) return std::nullopt;
    return e;
  }

 private:
  const std::string& t_;
  size_t p_ = 0;
  void skip() {
    while (p_ < t_.size() && t_[p_] == ' ') ++p_;
  }
  bool eat(const char* tok) {
    skip();
    size_t n = std::char_traits<char>::length(tok);
    if (t_.compare(p_, n, tok) == 0) {
      p_ += n;
      return true;
    }
    return false;
  }
  std::optional<SymExpr> expr() {
    auto l = term();
    if (!l) return l;
    for (;;) {
      if (eat("+")) {
        auto r = term();
        if (!r) return r;
        *l = *l + *r;
      } else if (eat("-")) {
        auto r = term();
        if (!r) return r;
        *l = *l - *r;
      } else {
        return l;
      }
    }
  }
  std::optional<SymExpr> term() {
    auto l = unary();
    if (!l) return l;
    for (;;) {
      if (eat("//")) {
        auto r = unary();
        if (!r || (r->is_constant() && r->constant_value() == 0)) return std::nullopt;
        *l = l->floordiv(*r);
      } else if (eat("*")) {
        auto r = unary();
        if (!r) return r;
        *l = *l * *r;
      } else {
        return l;
      }
    }
  }
  std::optional<SymExpr> unary() {
    if (eat("-")) {
      auto e = unary();
      if (!e) return e;
      return -*e;
    }
    return atom();
  }
  std::optional<SymExpr> atom() {
    skip();
    if (p_ >= t_.size()) return std::nullopt;
    if (eat("(")) {
      auto e = expr();
      if (!e || !eat(")")) return std::nullopt;
      return e;
    }
    char c = t_[p_];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      int64_t v = 0;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) {
        if (v > (INT64_MAX - 9) / 10) return std::nullopt;
        v = v * 10 + (t_[p_++] - '0');
      }
      return SymExpr::constant(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t s = p_;
      while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_')) ++p_;
      std::string name = t_.substr(s, p_ - s);
      if (name == "Mod" && eat("(")) {
        auto a = expr();
        if (!a || !eat(",")) return std::nullopt;
        auto b = expr();
        if (!b || !eat(")") || (b->is_constant() && b->constant_value() == 0)) return std::nullopt;
        return *a - *b * a->floordiv(*b);
      }
      return SymExpr::symbol(name);
    }
    return std::nullopt;
  }
};
}  // namespace

std::optional<SymExpr> SymExpr::parse(const std::string& text) { return ExprParser(text).run(); }

}  // namespace tcc
