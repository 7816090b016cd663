#include "src/ir/text_cursor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/diag/errors.h"

namespace tcc {

namespace {

// Expression texts longer than this are refused: SymExpr's parser recurses per character.
constexpr size_t kMaxExprText = 256;
// Symbol mentions allowed in one expression text (see symbol_mentions).
constexpr int kMaxExprSymbols = 24;

// SymExpr arithmetic is unchecked int64. Every coefficient it computes is at
// most the product over the text's atoms of max(|atom|, 2) (sums and products
// of such bounds stay within it), so refusing texts where that product
// reaches 2^62 rules out overflow.
bool fits_int64(const std::string& text) {
  double log2_bound = 0;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t s = i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      if (i - s > 18) return false;
      log2_bound += std::log2(std::max(2.0, std::strtod(text.substr(s, i - s).c_str(), nullptr)));
    } else if (is_ident_start(c)) {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_')) ++i;
      log2_bound += 1;
    } else {
      ++i;
    }
  }
  return log2_bound < 62;
}

// Products of sums expand into up to 3^(mentions/3) terms; the cap keeps a
// crafted text from taking seconds to canonicalize.
int symbol_mentions(const std::string& text) {
  int n = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (is_ident_start(text[i]) && (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')))
      ++n;
  return n;
}

}  // namespace

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

// Value and graph names print bare when they can be read back unambiguously:
// a trailing ':' would run into the type annotation, "//" would start a comment.
bool is_bare_name(const std::string& s) {
  if (s.empty() || s.back() == ':' || s.find("//") != std::string::npos) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

bool is_ident(const std::string& s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': r += "\\\""; break;
      case '\\': r += "\\\\"; break;
      case '\n': r += "\\n"; break;
      case '\t': r += "\\t"; break;
      case '\r': r += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          r += buf;
        } else {
          r += c;
        }
    }
  }
  return r + "\"";
}

std::string name_text(const std::string& s) { return is_bare_name(s) ? s : quote(s); }

void TextCursor::fail_at(size_t at, const std::string& msg) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < t_.size(); ++i) {
    if (t_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  throw InputError(file_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
}

std::string TextCursor::got() const {
  if (p_ >= t_.size()) return "end of file";
  char c = t_[p_];
  size_t e = p_;
  if (is_name_char(c) || c == '%') {
    ++e;
    while (e < t_.size() && e - p_ < 32 && is_name_char(t_[e])) ++e;
  } else {
    ++e;
  }
  std::string tok = t_.substr(p_, e - p_);
  for (char ch : tok) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u >= 0x7f) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
      return buf;
    }
  }
  return "'" + tok + "'";
}

void TextCursor::expected(const std::string& what) {
  skip();
  fail_at(p_, "expected " + what + ", got " + got());
}


size_t TextCursor::pos() {
  skip();
  return p_;
}

void TextCursor::skip() {
  while (p_ < t_.size()) {
    char c = t_[p_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++p_;
    } else if (t_.compare(p_, 2, "//") == 0) {
      size_t nl = t_.find('\n', p_);
      p_ = nl == std::string::npos ? t_.size() : nl + 1;
    } else {
      break;
    }
  }
}

char TextCursor::peek() {
  skip();
  return p_ < t_.size() ? t_[p_] : '\0';
}

bool TextCursor::accept(const char* punct) {
  skip();
  size_t n = std::strlen(punct);
  if (t_.compare(p_, n, punct) != 0) return false;
  p_ += n;
  return true;
}

void TextCursor::expect(const char* punct) {
  if (!accept(punct)) expected(std::string("'") + punct + "'");
}

std::string TextCursor::peek_ident() {
  skip();
  if (p_ >= t_.size() || !is_ident_start(t_[p_])) return "";
  size_t e = p_;
  while (e < t_.size() && is_ident_char(t_[e])) ++e;
  return t_.substr(p_, e - p_);
}

std::string TextCursor::ident(const std::string& what) {
  std::string id = peek_ident();
  if (id.empty()) expected(what);
  p_ += id.size();
  return id;
}

bool TextCursor::keyword(const std::string& kw) {
  if (peek_ident() != kw) return false;
  p_ += kw.size();
  return true;
}

void TextCursor::expect_keyword(const std::string& kw) {
  if (!keyword(kw)) expected("'" + kw + "'");
}


std::string TextCursor::string_literal() {
  skip();
  if (p_ >= t_.size() || t_[p_] != '"') expected("a string");
  size_t start = p_++;
  std::string s;
  for (;;) {
    if (p_ >= t_.size() || t_[p_] == '\n') fail_at(start, "unterminated string");
    char c = t_[p_++];
    if (c == '"') return s;
    if (c != '\\') {
      s += c;
      continue;
    }
    if (p_ >= t_.size()) fail_at(start, "unterminated string");
    char e = t_[p_++];
    switch (e) {
      case 'n': s += '\n'; break;
      case 't': s += '\t'; break;
      case 'r': s += '\r'; break;
      case '"': s += '"'; break;
      case '\\': s += '\\'; break;
      case 'x': {
        int v = 0;
        for (int k = 0; k < 2; ++k) {
          int d = p_ < t_.size() ? hex_digit(t_[p_]) : -1;
          if (d < 0) fail_at(p_, "expected two hex digits after \\x");
          v = v * 16 + d;
          ++p_;
        }
        s += static_cast<char>(v);
        break;
      }
      default:
        fail_at(p_ - 2, std::string("unknown escape '\\") + (std::isprint(static_cast<unsigned char>(e)) ? std::string(1, e) : "?") + "'");
    }
  }
}

Number TextCursor::number() {
  skip();
  size_t s = p_, e = p_;
  if (e < t_.size() && t_[e] == '-') ++e;
  Number n;
  if (t_.compare(e, 3, "nan") == 0 || t_.compare(e, 3, "inf") == 0) {
    e += 3;
    n.is_float = true;
  } else {
    size_t digits = e;
    while (e < t_.size() && std::isdigit(static_cast<unsigned char>(t_[e]))) ++e;
    if (e == digits) expected("a number");
    if (e < t_.size() && t_[e] == '.') {
      n.is_float = true;
      ++e;
      while (e < t_.size() && std::isdigit(static_cast<unsigned char>(t_[e]))) ++e;
    }
    if (e < t_.size() && (t_[e] == 'e' || t_[e] == 'E')) {
      n.is_float = true;
      ++e;
      if (e < t_.size() && (t_[e] == '+' || t_[e] == '-')) ++e;
      size_t exp = e;
      while (e < t_.size() && std::isdigit(static_cast<unsigned char>(t_[e]))) ++e;
      if (e == exp) {
        p_ = e;
        expected("exponent digits");
      }
    }
  }
  if (e < t_.size() && is_ident_char(t_[e])) {
    p_ = e;
    expected("',' or a closing bracket after the number");
  }
  n.text = t_.substr(s, e - s);
  p_ = e;
  return n;
}

int64_t TextCursor::int_value(const Number& n, size_t at) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
  if (n.is_float || ec != std::errc() || ptr != n.text.data() + n.text.size())
    fail_at(at, "expected a 64-bit integer, got '" + n.text + "'");
  return v;
}

std::string TextCursor::name(const std::string& what) {
  skip();
  if (peek() == '"') return string_literal();
  size_t s = p_;
  while (p_ < t_.size() && is_name_char(t_[p_]) && t_.compare(p_, 2, "//") != 0) ++p_;
  while (p_ > s && t_[p_ - 1] == ':') --p_;
  if (p_ == s) expected(what);
  return t_.substr(s, p_ - s);
}

std::string TextCursor::expr_text(const char* stops) {
  size_t at = pos();
  int parens = 0;
  size_t e = p_;
  while (e < t_.size()) {
    char c = t_[e];
    if (c == '\n' || (std::strchr(stops, c) != nullptr && parens == 0)) break;
    if (c == '(') ++parens;
    if (c == ')') --parens;
    ++e;
  }
  std::string text = t_.substr(at, e - at);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.pop_back();
  p_ = e;
  return text;
}

std::string TextCursor::expr_text_problem(const std::string& text) {
  if (text.size() > kMaxExprText) return " (too long)";
  if (!fits_int64(text)) return " (too large)";
  if (symbol_mentions(text) > kMaxExprSymbols) return " (too complex)";
  return "";
}

}  // namespace tcc
