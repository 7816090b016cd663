#include "frontends/pt2/sym_text.h"

#include <cctype>
#include <vector>

namespace tcc {

namespace {

// Nesting and length bounds keep hostile text cheap to reject.
constexpr size_t kMaxSymText = 4096;
constexpr int kMaxDepth = 32;
constexpr int64_t kMaxPower = 8;

// Recursive descent over srepr: CALL := NAME '(' [ARG {',' ARG}] ')';
// ARG := CALL | 'quoted' | NAME '=' VALUE | INTEGER.
class SreprParser {
 public:
  explicit SreprParser(const std::string& t) : t_(t) {}

  std::optional<SymExpr> parse() {
    auto e = expr(0);
    skip();
    if (!e || pos_ != t_.size()) return std::nullopt;
    return e;
  }

 private:
  void skip() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < t_.size() && t_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string name() {
    skip();
    size_t b = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
    return t_.substr(b, pos_ - b);
  }
  std::optional<std::string> quoted() {
    skip();
    if (pos_ >= t_.size() || (t_[pos_] != '\'' && t_[pos_] != '"')) return std::nullopt;
    char q = t_[pos_++];
    size_t e = t_.find(q, pos_);
    if (e == std::string::npos) return std::nullopt;
    std::string s = t_.substr(pos_, e - pos_);
    pos_ = e + 1;
    return s;
  }
  std::optional<int64_t> integer() {
    skip();
    size_t b = pos_;
    if (pos_ < t_.size() && t_[pos_] == '-') ++pos_;
    size_t digits = pos_;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    if (pos_ == digits || pos_ - digits > 18) return std::nullopt;
    return std::stoll(t_.substr(b, pos_ - b));
  }
  // Skips "key=Value" keyword arguments (Symbol's assumptions).
  bool keyword() {
    size_t save = pos_;
    std::string key = name();
    if (key.empty() || !eat('=')) {
      pos_ = save;
      return false;
    }
    name();
    return true;
  }

  std::optional<SymExpr> expr(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    std::string fn = name();
    if (fn.empty() || !eat('(')) return std::nullopt;
    if (fn == "Symbol") {
      auto s = quoted();
      if (!s || !is_symbol_name(*s)) return std::nullopt;
      while (eat(','))
        if (!keyword()) return std::nullopt;
      if (!eat(')')) return std::nullopt;
      return SymExpr::symbol(*s);
    }
    if (fn == "Integer") {
      auto v = integer();
      if (!v || !eat(')')) return std::nullopt;
      return SymExpr::constant(*v);
    }
    std::vector<SymExpr> args;
    if (!eat(')')) {
      do {
        auto a = expr(depth + 1);
        if (!a) return std::nullopt;
        args.push_back(std::move(*a));
      } while (eat(','));
      if (!eat(')')) return std::nullopt;
    }
    if (args.empty()) return std::nullopt;
    if (fn == "Add" || fn == "Mul") {
      SymExpr r = args[0];
      for (size_t i = 1; i < args.size(); ++i) r = fn == "Add" ? r + args[i] : r * args[i];
      return r;
    }
    if (args.size() != 2) return std::nullopt;
    if (fn == "Pow") {
      if (!args[1].is_constant() || args[1].constant_value() < 0 || args[1].constant_value() > kMaxPower)
        return std::nullopt;
      SymExpr r = SymExpr::constant(1);
      for (int64_t i = 0; i < args[1].constant_value(); ++i) r = r * args[0];
      return r;
    }
    if (args[1].is_constant() && args[1].constant_value() == 0) return std::nullopt;
    if (fn == "FloorDiv") return args[0].floordiv(args[1]);
    if (fn == "CleanDiv") return args[0].exact_div(args[1]);
    return std::nullopt;
  }

  const std::string& t_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<SymExpr> parse_torch_sym(const std::string& text) {
  if (text.empty() || text.size() > kMaxSymText) return std::nullopt;
  if (text.find('(') != std::string::npos && std::isalpha(static_cast<unsigned char>(text[0])) &&
      text.find_first_of("(") < text.find_first_of("+-*/ "))
    return SreprParser(text).parse();
  return SymExpr::parse(text);
}

}  // namespace tcc
