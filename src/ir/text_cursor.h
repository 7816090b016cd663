// The character-level reading and spelling that tcc's two text formats share:
// the graph IR (src/ir/text.cc, docs/TEXT_IR.md) and the kernel IR
// (codegen/kernel_ir_text.cc, docs/KERNEL_IR.md). Whitespace and `// ...`
// comments between tokens, punctuation, identifiers, quoted strings, numbers,
// bare-or-quoted names and SymExpr texts; every failure is an InputError
// "FILE:LINE:COL: expected X, got Y".
#pragma once

#include <cstdint>
#include <string>

namespace tcc {

// Names print bare when they read back unambiguously: [A-Za-z0-9_.:/-]
// characters, no trailing ':' (it would run into a type annotation) and no
// "//" (a comment); others are quoted.
bool is_name_char(char c);
bool is_bare_name(const std::string& s);
bool is_ident_start(char c);
bool is_ident_char(char c);
bool is_ident(const std::string& s);  // [A-Za-z_][A-Za-z0-9_.]*
// A double-quoted string with C escapes \" \\ \n \t \r \xNN.
std::string quote(const std::string& s);
std::string name_text(const std::string& s);  // bare, or quoted
int hex_digit(char c);  // 0..15, or -1

struct Number {
  std::string text;
  bool is_float = false;
};

class TextCursor {
 public:
  TextCursor(const std::string& text, const std::string& file) : t_(text), file_(file) {}

  // -- Positions and errors --
  [[noreturn]] void fail_at(size_t at, const std::string& msg) const;
  // What the next token looks like, for "got ..." in messages.
  std::string got() const;
  [[noreturn]] void expected(const std::string& what);

  // -- Characters --
  size_t pos();  // the cursor, after whitespace and comments
  void skip();   // whitespace and // comments
  char peek();
  bool accept(const char* punct);
  void expect(const char* punct);
  // An identifier at the cursor, without consuming it ("" if none).
  std::string peek_ident();
  std::string ident(const std::string& what);
  bool keyword(const std::string& kw);  // consumes it if it is the next whole identifier
  void expect_keyword(const std::string& kw);

  // -- Literals --
  std::string string_literal();
  // -?digits[.digits][e[+-]digits] | -?nan | -?inf
  Number number();
  int64_t int_value(const Number& n, size_t at);
  // A bare name (see is_bare_name) or a quoted string.
  std::string name(const std::string& what);
  // The text of a SymExpr: from the cursor up to the first character of
  // `stops` outside parentheses or the end of the line, trailing blanks dropped.
  std::string expr_text(const char* stops);
  // Why SymExpr::parse must not read `text` (" (too long)", " (too large)" or
  // " (too complex)"), or "": it recurses per character, computes in unchecked
  // int64 and expands products of sums.
  static std::string expr_text_problem(const std::string& text);

 protected:
  const std::string& t_;
  std::string file_;
  size_t p_ = 0;
};

}  // namespace tcc
