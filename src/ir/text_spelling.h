// The spelling of tcc's textual IR that its printer (text_printer.cc) writes
// and its parser (text_parser.cc) reads: which names print bare, quoting, and
// float text that reads back to the same bits.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace tcc::ir_text {

inline bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
}

// Value and graph names print bare when they can be read back unambiguously:
// a trailing ':' would run into the type annotation, "//" would start a comment.
inline bool is_bare_name(const std::string& s) {
  if (s.empty() || s.back() == ':' || s.find("//") != std::string::npos) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

inline bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
inline bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

inline bool is_ident(const std::string& s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

inline std::string quote(const std::string& s) {
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

inline std::string name_text(const std::string& s) { return is_bare_name(s) ? s : quote(s); }
inline std::string ident_text(const std::string& s) { return is_ident(s) ? s : quote(s); }

// Float text: the shortest %.Ng that reads back to the same bits, always with
// a '.', 'e', "nan" or "inf" so it cannot be mistaken for an int.
template <typename F>
inline std::string float_text(F f) {
  if (std::isnan(f)) return std::signbit(f) ? "-nan" : "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  constexpr bool is_f32 = sizeof(F) == 4;
  char buf[40];
  for (int prec = is_f32 ? 6 : 15; prec <= (is_f32 ? 9 : 17); ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    F back = is_f32 ? static_cast<F>(std::strtof(buf, nullptr)) : static_cast<F>(std::strtod(buf, nullptr));
    if (std::memcmp(&back, &f, sizeof(F)) == 0) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Reads back what float_text wrote (and any strtod-style number).
template <typename F>
inline F float_from_text(const std::string& s) {
  bool neg = !s.empty() && s[0] == '-';
  std::string body = neg ? s.substr(1) : s;
  F v;
  if (body == "nan") v = std::numeric_limits<F>::quiet_NaN();
  else if (body == "inf") v = std::numeric_limits<F>::infinity();
  else return sizeof(F) == 4 ? static_cast<F>(std::strtof(s.c_str(), nullptr)) : static_cast<F>(std::strtod(s.c_str(), nullptr));
  return neg ? -v : v;
}

}  // namespace tcc::ir_text
