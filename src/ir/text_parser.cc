// The parser of tcc's textual IR (grammar: docs/TEXT_IR.md): a hand-written
// recursive descent over characters (dims are SymExpr texts, not tokens);
// every way it can fail is an InputError with FILE:LINE:COL, because the fuzzer
// feeds it arbitrary bytes. Recursion (regions, nested types) is capped at
// kMaxDepth.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "src/ir/text.h"
#include "src/ir/text_spelling.h"

namespace tcc {

namespace {

using namespace ir_text;

constexpr int kMaxDepth = 64;
// Dims longer than this are refused: SymExpr's parser recurses per character.
constexpr size_t kMaxDimText = 256;
// Symbol mentions allowed in one dim (see symbol_mentions).
constexpr int kMaxDimSymbols = 24;

struct Number {
  std::string text;
  bool is_float = false;
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& file) : t_(text), file_(file) {}

  std::unique_ptr<Model> model() {
    auto m = std::make_unique<Model>();
    m->graph->set_file(file_);
    skip();
    expect_keyword("graph");
    m->graph->set_name(graph_name());
    if (keyword("opset")) opsets(*m->graph);
    if (keyword("ir_version")) {
      expect("(");
      size_t at = pos();
      m->ir_version = int_value(number(), at);
      expect(")");
    }
    if (keyword("producer")) {
      expect("(");
      m->producer = string_literal();
      expect(")");
    }
    body(*m->graph);
    if (pos() < t_.size()) expected("end of file");
    return m;
  }

 private:
  const std::string& t_;
  std::string file_;
  size_t p_ = 0;
  int depth_ = 0;

  // -- Positions and errors --

  [[noreturn]] void fail_at(size_t at, const std::string& msg) const {
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

  // What the next token looks like, for "got ..." in messages.
  std::string got() const {
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

  [[noreturn]] void expected(const std::string& what) {
    skip();
    fail_at(p_, "expected " + what + ", got " + got());
  }

  // -- Characters --

  size_t pos() {
    skip();
    return p_;
  }

  // Whitespace and // comments.
  void skip() {
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

  char peek() {
    skip();
    return p_ < t_.size() ? t_[p_] : '\0';
  }

  bool accept(const char* punct) {
    skip();
    size_t n = std::strlen(punct);
    if (t_.compare(p_, n, punct) != 0) return false;
    p_ += n;
    return true;
  }

  void expect(const char* punct) {
    if (!accept(punct)) expected(std::string("'") + punct + "'");
  }

  // An identifier ([A-Za-z_][A-Za-z0-9_.]*) at the cursor, without consuming it.
  std::string peek_ident() {
    skip();
    if (p_ >= t_.size() || !is_ident_start(t_[p_])) return "";
    size_t e = p_;
    while (e < t_.size() && is_ident_char(t_[e])) ++e;
    return t_.substr(p_, e - p_);
  }

  std::string ident(const std::string& what) {
    std::string id = peek_ident();
    if (id.empty()) expected(what);
    p_ += id.size();
    return id;
  }

  // Consumes the keyword if it is next (as a whole identifier).
  bool keyword(const std::string& kw) {
    if (peek_ident() != kw) return false;
    p_ += kw.size();
    return true;
  }

  void expect_keyword(const std::string& kw) {
    if (!keyword(kw)) expected("'" + kw + "'");
  }

  // -- Literals --

  std::string string_literal() {
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

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // -?digits[.digits][e[+-]digits] | -?nan | -?inf
  Number number() {
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

  int64_t int_value(const Number& n, size_t at) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
    if (n.is_float || ec != std::errc() || ptr != n.text.data() + n.text.size())
      fail_at(at, "expected a 64-bit integer, got '" + n.text + "'");
    return v;
  }

  // -- Names --

  // `%name` or `%"quoted"`; returns the name and where it started.
  std::pair<std::string, size_t> value_name() {
    skip();
    size_t at = p_;
    if (p_ >= t_.size() || t_[p_] != '%') expected("a value name ('%name')");
    ++p_;
    if (p_ < t_.size() && t_[p_] == '"') return {string_literal(), at};
    size_t s = p_;
    while (p_ < t_.size() && is_name_char(t_[p_]) && t_.compare(p_, 2, "//") != 0) ++p_;
    while (p_ > s && t_[p_ - 1] == ':') --p_;  // `%x: f32` — the colon starts the type
    if (p_ == s) expected("a value name after '%'");
    return {t_.substr(s, p_ - s), at};
  }

  std::string graph_name() {
    skip();
    if (peek() == '"') return string_literal();
    size_t s = p_;
    while (p_ < t_.size() && is_name_char(t_[p_]) && t_.compare(p_, 2, "//") != 0) ++p_;
    while (p_ > s && t_[p_ - 1] == ':') --p_;
    if (p_ == s) expected("a graph name");
    return t_.substr(s, p_ - s);
  }

  // An identifier or a quoted string (for op types, domains, attribute names).
  std::string ident_or_string(const std::string& what) {
    if (peek() == '"') return string_literal();
    return ident(what);
  }

  Value* use(Graph& g) {
    auto [name, at] = value_name();
    Value* v = g.find(name);
    if (!v) fail_at(at, "undefined value '%" + name + "' (values must be defined before they are used)");
    return v;
  }

  void check_new_name(Graph& g, const std::string& name, size_t at) {
    if (g.find(name)) fail_at(at, "value '%" + name + "' is already defined");
  }

  // -- Types --

  Type type() {
    size_t at = pos();
    if (accept("?")) return Type();
    std::string id = ident("a type (f32[...], seq<...>, opt<...> or ?)");
    if (id == "seq" || id == "opt") {
      if (++depth_ > kMaxDepth) fail_at(at, "types nested deeper than " + std::to_string(kMaxDepth));
      expect("<");
      Type elem = type();
      expect(">");
      --depth_;
      return id == "seq" ? Type::sequence(std::move(elem)) : Type::optional(std::move(elem));
    }
    auto dt = parse_dtype(id);
    if (!dt) fail_at(at, "expected a dtype (f32 f16 bf16 f64 i64 i32 i16 i8 u8 u16 u32 u64 bool str), got '" + id + "'");
    expect("[");
    if (accept("*")) {
      expect("]");
      return Type::tensor_unranked(*dt);
    }
    Dims dims;
    if (!accept("]")) {
      do dims.push_back(dim());
      while (accept(","));
      expect("]");
    }
    return Type::tensor(*dt, std::move(dims));
  }

  // A dim is the text up to ',' or ']' outside parentheses, read by SymExpr.
  Dim dim() {
    size_t at = pos();
    int parens = 0;
    size_t e = p_;
    while (e < t_.size()) {
      char c = t_[e];
      if (c == '\n' || ((c == ',' || c == ']') && parens == 0)) break;
      if (c == '(') ++parens;
      if (c == ')') --parens;
      ++e;
    }
    std::string text = t_.substr(at, e - at);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.pop_back();
    if (text.empty()) expected("a dimension");
    p_ = e;
    if (text == "?") return Dim::unknown();
    auto bad = [&](const std::string& why) -> Dim {
      fail_at(at, "expected a dimension (integer, symbolic expression or ?), got '" + text.substr(0, 40) + "'" + why);
    };
    if (text.size() > kMaxDimText) bad(" (too long)");
    if (!dim_fits_int64(text)) bad(" (too large)");
    if (symbol_mentions(text) > kMaxDimSymbols) bad(" (too complex)");
    auto expr = SymExpr::parse(text);
    if (!expr) bad("");
    if (expr->is_constant() && expr->constant_value() < 0) bad(" (negative)");
    return Dim(*expr);
  }

  // SymExpr arithmetic is unchecked int64. Every coefficient it computes is at
  // most the product over the text's atoms of max(|atom|, 2) (sums and products
  // of such bounds stay within it), so refusing texts where that product
  // reaches 2^62 rules out overflow.
  static bool dim_fits_int64(const std::string& text) {
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
  // crafted dim from taking seconds to canonicalize.
  static int symbol_mentions(const std::string& text) {
    int n = 0;
    for (size_t i = 0; i < text.size(); ++i)
      if (is_ident_start(text[i]) && (i == 0 || !(std::isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_')))
        ++n;
    return n;
  }

  // A tensor type whose dims are all static, for consts and tensor attributes.
  std::pair<DType, std::vector<int64_t>> static_tensor_type(size_t at, const Type& ty) {
    if (!ty.is_tensor() || !ty.fully_static())
      fail_at(at, "expected a tensor type with static dims for a constant, got '" + ty.str() + "'");
    std::vector<int64_t> shape;
    for (const auto& d : ty.shape()) shape.push_back(d.value());
    return {ty.dtype(), shape};
  }

  // -- Tensor literals --

  Tensor tensor_literal(DType dt, const std::vector<int64_t>& shape) {
    size_t at = pos();
    int64_t numel = checked_numel(shape);
    if (numel < 0) fail_at(at, "tensor of shape " + shape_str(shape) + " is too large");
    if (keyword("hex")) return hex_literal(dt, shape, numel, at);
    expect("[");
    std::vector<std::pair<Number, size_t>> nums;
    std::vector<std::string> strs;
    if (!accept("]")) {
      do {
        size_t el = pos();
        if (dt == DType::String) {
          strs.push_back(string_literal());
        } else if (dt == DType::Bool) {
          std::string b = peek_ident();
          if (b != "true" && b != "false") expected("true or false");
          p_ += b.size();
          nums.push_back({Number{b == "true" ? "1" : "0", false}, el});
        } else {
          nums.push_back({number(), el});
        }
      } while (accept(","));
      expect("]");
    }
    int64_t count = static_cast<int64_t>(dt == DType::String ? strs.size() : nums.size());
    if (count != numel)
      fail_at(at, "expected " + std::to_string(numel) + " elements for " + std::string(dtype_name(dt)) +
                      shape_str(shape) + ", got " + std::to_string(count));
    Tensor t(dt, shape);
    if (dt == DType::String) {
      t.strings_mut() = std::move(strs);
      return t;
    }
    for (int64_t i = 0; i < numel; ++i) store_element(t, i, nums[i].first, nums[i].second);
    return t;
  }

  Tensor hex_literal(DType dt, const std::vector<int64_t>& shape, int64_t numel, size_t at) {
    if (dt == DType::String) fail_at(at, "expected a list of strings for a str tensor, got hex");
    if (p_ >= t_.size() || t_[p_] != '"') expected("'\"' right after hex");
    size_t start = p_;
    std::string s = string_literal();
    size_t size = dtype_size(dt);
    if (s.size() % 2 != 0 || s.size() / 2 / size != static_cast<uint64_t>(numel) || (s.size() / 2) % size != 0)
      fail_at(start, "expected " + std::to_string(numel) + " elements of " + std::string(dtype_name(dt)) +
                         " in hex, got " + std::to_string(s.size()) + " hex digits");
    std::vector<std::byte> bytes(s.size() / 2);
    for (size_t i = 0; i < bytes.size(); ++i) {
      int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
      if (hi < 0 || lo < 0) fail_at(start, "expected only hex digits in hex\"...\"");
      bytes[i] = static_cast<std::byte>(hi * 16 + lo);
    }
    return Tensor::from_bytes(dt, shape, std::move(bytes));
  }

  void store_element(Tensor& t, int64_t i, const Number& n, size_t at) {
    DType dt = t.dtype();
    std::byte* p = t.raw_mut() + i * dtype_size(dt);
    if (is_float(dt)) {
      if (dt == DType::F64) {
        double v = float_from_text<double>(n.text);
        std::memcpy(p, &v, 8);
        return;
      }
      float v = float_from_text<float>(n.text);
      if (dt == DType::F32) {
        std::memcpy(p, &v, 4);
        return;
      }
      uint16_t h = dt == DType::F16 ? float_to_half(v) : float_to_bf16(v);
      std::memcpy(p, &h, 2);
      return;
    }
    // Integers and bool: range-check, then store the low bytes (little-endian).
    uint64_t bits;
    std::string range;
    if (dt == DType::U64) {
      uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
      if (n.is_float || ec != std::errc() || ptr != n.text.data() + n.text.size())
        fail_at(at, "expected a value of type u64, got '" + n.text + "'");
      bits = v;
    } else {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(n.text.data(), n.text.data() + n.text.size(), v);
      bool ok = !n.is_float && ec == std::errc() && ptr == n.text.data() + n.text.size();
      if (ok && dt != DType::I64) {
        int bitsz = static_cast<int>(dtype_size(dt) * 8);
        int64_t lo = is_signed(dt) ? -(int64_t{1} << (bitsz - 1)) : 0;
        int64_t hi = is_signed(dt) ? (int64_t{1} << (bitsz - 1)) - 1 : (int64_t{1} << bitsz) - 1;
        if (dt == DType::Bool) hi = 1;
        ok = v >= lo && v <= hi;
      }
      if (!ok) fail_at(at, "expected a value of type " + std::string(dtype_name(dt)) + ", got '" + n.text + "'");
      bits = static_cast<uint64_t>(v);
    }
    std::memcpy(p, &bits, dtype_size(dt));
  }

  // -- Graphs --

  void opsets(Graph& g) {
    expect("(");
    if (!accept(")")) {
      do {
        size_t at = pos();
        std::string domain = ident_or_string("a domain");
        if (domain == "ai.onnx") domain = "";
        expect(":");
        size_t vat = pos();
        int64_t version = int_value(number(), vat);
        if (g.opsets().count(domain)) fail_at(at, "opset for domain '" + domain + "' given twice");
        if (domain.empty() && version > kMaxOpset)
          fail_at(vat, "default-domain opset " + std::to_string(version) + " is from the future: tcc reads up to " +
                           std::to_string(kMaxOpset));
        g.set_opset(domain, version);
      } while (accept(","));
      expect(")");
    }
  }

  void body(Graph& g) {
    expect("{");
    for (;;) {
      skip();
      if (accept("}")) return;
      if (p_ >= t_.size()) expected("a statement or '}'");
      std::string kw = peek_ident();
      // A keyword is a statement unless '(' or '::' follows: then it names an op.
      size_t save = p_;
      if (kw == "input" || kw == "const" || kw == "output") {
        p_ += kw.size();
        if (peek() != '(' && !accept("::")) {
          if (kw == "input") input_stmt(g);
          else if (kw == "const") const_stmt(g);
          else g.add_output(use(g));
          continue;
        }
        p_ = save;
      }
      node_stmt(g);
    }
  }

  void input_stmt(Graph& g) {
    auto [name, at] = value_name();
    check_new_name(g, name, at);
    Type ty;
    size_t tat = pos();
    if (accept(":")) {
      tat = pos();
      ty = type();
    }
    std::optional<Tensor> init;
    if (accept("=")) {
      auto [dt, shape] = static_tensor_type(tat, ty);
      init = tensor_literal(dt, shape);
    }
    Value* v = g.add_input(name, std::move(ty));
    if (init) v->set_initializer(std::move(*init));
  }

  void const_stmt(Graph& g) {
    auto [name, at] = value_name();
    check_new_name(g, name, at);
    expect(":");
    size_t tat = pos();
    auto [dt, shape] = static_tensor_type(tat, type());
    expect("=");
    g.add_initializer(name, tensor_literal(dt, shape));
  }

  void node_stmt(Graph& g) {
    std::vector<std::string> names;
    std::vector<Type> types;
    if (peek() == '%') {
      std::set<std::string> seen;
      do {
        auto [name, at] = value_name();
        check_new_name(g, name, at);
        if (!seen.insert(name).second) fail_at(at, "value '%" + name + "' is already defined");
        names.push_back(name);
        types.push_back(accept(":") ? type() : Type());
      } while (accept(","));
      expect("=");
    }
    std::string domain, op = ident_or_string("an op name");
    if (accept("::")) {
      domain = op;
      op = ident_or_string("an op name after '::'");
    }
    expect("(");
    std::vector<Value*> inputs;
    if (!accept(")")) {
      do inputs.push_back(keyword("none") ? nullptr : use(g));
      while (accept(","));
      expect(")");
    }
    std::map<std::string, Attribute> attrs;
    if (accept("{")) {
      do {
        size_t at = pos();
        std::string name = ident_or_string("an attribute name");
        if (attrs.count(name)) fail_at(at, "attribute '" + name + "' given twice");
        expect("=");
        attrs[name] = attribute(g);
      } while (accept(","));
      expect("}");
    }
    std::string node_name = metadata("name"), source = metadata("loc");
    Node* n = g.add_node(op, inputs, names, domain, node_name);
    n->set_source(source);
    for (size_t i = 0; i < names.size(); ++i) n->output(i)->set_type(types[i]);
    for (auto& [name, a] : attrs) {
      if (a.g) a.g->set_parent(&g, n);
      n->set_attr(name, std::move(a));
    }
  }

  // `name("...")` / `loc("...")`; a word followed by '(' '%' would be the next node.
  std::string metadata(const char* kw) {
    size_t save = p_;
    if (!keyword(kw)) return "";
    if (accept("(") && peek() == '"') {
      std::string s = string_literal();
      expect(")");
      return s;
    }
    p_ = save;
    return "";
  }

  Attribute attribute(Graph& g) {
    size_t at = pos();
    char c = peek();
    if (c == '"') return Attribute::of_string(string_literal());
    if (c == '[') return list_attribute();
    std::string kw = peek_ident();
    if (kw == "ints" || kw == "floats" || kw == "strings") {
      p_ += kw.size();
      expect("[");
      expect("]");
      if (kw == "ints") return Attribute::of_ints({});
      if (kw == "floats") return Attribute::of_floats({});
      return Attribute::of_strings({});
    }
    if (kw == "tensor") {
      p_ += kw.size();
      expect("<");
      size_t tat = pos();
      auto [dt, shape] = static_tensor_type(tat, type());
      expect(">");
      return Attribute::of_tensor(tensor_literal(dt, shape));
    }
    if (kw == "graph") {
      p_ += kw.size();
      if (depth_ + 1 > kMaxDepth) fail_at(at, "regions nested deeper than " + std::to_string(kMaxDepth));
      auto region = std::make_shared<Graph>();
      region->set_parent(&g, nullptr);  // the node is created once its attributes are read
      region->set_name(graph_name());
      ++depth_;
      body(*region);
      --depth_;
      return Attribute::of_graph(std::move(region));
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c)) || kw == "nan" || kw == "inf") {
      Number n = number();
      if (n.is_float) return Attribute::of_float(float_from_text<float>(n.text));
      return Attribute::of_int(int_value(n, at));
    }
    expected("an attribute value");
  }

  // [1, 2] ints, [1.0, 2] floats (one float makes the list floats), ["a"] strings.
  Attribute list_attribute() {
    expect("[");
    if (peek() == ']') expected("a list element (write ints[], floats[] or strings[] for an empty list)");
    if (peek() == '"') {
      std::vector<std::string> v;
      do v.push_back(string_literal());
      while (accept(","));
      expect("]");
      return Attribute::of_strings(std::move(v));
    }
    std::vector<std::pair<Number, size_t>> nums;
    bool any_float = false;
    do {
      size_t at = pos();
      nums.push_back({number(), at});
      any_float |= nums.back().first.is_float;
    } while (accept(","));
    expect("]");
    if (any_float) {
      std::vector<float> v;
      for (const auto& [n, at] : nums) v.push_back(float_from_text<float>(n.text));
      return Attribute::of_floats(std::move(v));
    }
    std::vector<int64_t> v;
    for (const auto& [n, at] : nums) v.push_back(int_value(n, at));
    return Attribute::of_ints(std::move(v));
  }
};

}  // namespace

std::unique_ptr<Model> parse_model(const std::string& text, const std::string& file) {
  return Parser(text, file).model();
}

}  // namespace tcc
