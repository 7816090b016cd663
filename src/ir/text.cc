// Printer and parser of tcc's textual IR. The grammar is in docs/TEXT_IR.md.
//
// The printer picks one spelling for everything (sorted attributes, shortest
// exact floats, hex for large or half-precision tensors) so that
// print(parse(print(x))) == print(x). The parser is a hand-written recursive
// descent over characters (dims are SymExpr texts, not tokens); every way it
// can fail is an InputError with FILE:LINE:COL, because the fuzzer feeds it
// arbitrary bytes. Recursion (regions, nested types) is capped at kMaxDepth.
#include "src/ir/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "src/ir/text_cursor.h"

namespace tcc {

namespace {

constexpr int kMaxDepth = 64;
// Tensors with more elements are printed as hex bytes.
constexpr int64_t kMaxListElements = 64;

std::string ident_text(const std::string& s) { return is_ident(s) ? s : quote(s); }
std::string value_ref(const Value* v) { return v ? "%" + name_text(v->name()) : "none"; }

// Float text: the shortest %.Ng that reads back to the same bits, always with
// a '.', 'e', "nan" or "inf" so it cannot be mistaken for an int.
template <typename F>
std::string float_text(F f) {
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
F float_from_text(const std::string& s) {
  bool neg = !s.empty() && s[0] == '-';
  std::string body = neg ? s.substr(1) : s;
  F v;
  if (body == "nan") v = std::numeric_limits<F>::quiet_NaN();
  else if (body == "inf") v = std::numeric_limits<F>::infinity();
  else return sizeof(F) == 4 ? static_cast<F>(std::strtof(s.c_str(), nullptr)) : static_cast<F>(std::strtod(s.c_str(), nullptr));
  return neg ? -v : v;
}

// ---- Printer -----------------------------------------------------------------

std::string tensor_type_text(const Tensor& t) {
  return Type::tensor(t.dtype(), Dims(t.shape().begin(), t.shape().end())).str();
}

// Integers are stored little-endian; sign-extend signed types.
std::string int_element_text(const Tensor& t, int64_t i) {
  size_t size = dtype_size(t.dtype());
  uint64_t bits = 0;
  std::memcpy(&bits, t.raw() + i * size, size);
  if (t.dtype() == DType::Bool) return bits ? "true" : "false";
  if (!is_signed(t.dtype())) return std::to_string(bits);
  if (size < 8 && (bits >> (size * 8 - 1)) & 1) bits |= ~uint64_t{0} << (size * 8);
  return std::to_string(static_cast<int64_t>(bits));
}

// The flat list form, or nullopt when it would not read back bit-exactly
// (NaNs with payloads).
std::optional<std::string> tensor_list_text(const Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) s += ", ";
    if (t.dtype() == DType::String) {
      s += quote(t.strings()[i]);
    } else if (t.dtype() == DType::F32 || t.dtype() == DType::F64) {
      bool f32 = t.dtype() == DType::F32;
      std::string e;
      bool exact;
      if (f32) {
        float v = t.data<float>()[i];
        e = float_text(v);
        float back = float_from_text<float>(e);
        exact = std::memcmp(&back, &v, 4) == 0;
      } else {
        double v = t.data<double>()[i];
        e = float_text(v);
        double back = float_from_text<double>(e);
        exact = std::memcmp(&back, &v, 8) == 0;
      }
      if (!exact) return std::nullopt;
      s += e;
    } else {
      s += int_element_text(t, i);
    }
  }
  return s + "]";
}

std::string tensor_literal(const Tensor& t) {
  bool narrow_float = t.dtype() == DType::F16 || t.dtype() == DType::BF16 || is_fp8(t.dtype()) ||
                      t.dtype() == DType::F4E2M1;
  if (t.dtype() == DType::String || (!narrow_float && t.numel() <= kMaxListElements))
    if (auto list = tensor_list_text(t)) return *list;
  static const char* kDigits = "0123456789abcdef";
  std::string s = "hex\"";
  s.reserve(t.nbytes() * 2 + 5);
  for (size_t i = 0; i < t.nbytes(); ++i) {
    auto b = static_cast<unsigned char>(t.raw()[i]);
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s + "\"";
}

class Printer {
 public:
  std::string out;

  void graph(const Graph& g, const Model* m) {
    out += "graph " + name_text(g.name());
    if (!g.parent()) {
      const auto& opsets = g.opsets();
      if (!opsets.empty()) {
        out += " opset(";
        bool first = true;
        for (const auto& [domain, version] : opsets) {
          out += (first ? "" : ", ") + ident_text(domain.empty() ? "ai.onnx" : domain) + ": " +
                 std::to_string(version);
          first = false;
        }
        out += ")";
      }
      if (m && m->ir_version != 0) out += " ir_version(" + std::to_string(m->ir_version) + ")";
      if (m && !m->producer.empty()) out += " producer(" + quote(m->producer) + ")";
    }
    out += " {\n";
    body(g, 2);
    out += "}\n";
  }

 private:
  void body(const Graph& g, int indent) {
    std::string pad(indent, ' ');
    for (const Value* v : g.inputs()) {
      out += pad + "input " + value_ref(v);
      if (!v->type().is_unknown()) out += ": " + v->type().str();
      if (v->is_initializer()) out += " = " + tensor_literal(v->initializer());
      out += "\n";
    }
    for (const Value* v : g.initializers()) {
      if (v->is_graph_input()) continue;  // printed with its input
      out += pad + "const " + value_ref(v) + ": " + tensor_type_text(v->initializer()) + " = " +
             tensor_literal(v->initializer()) + "\n";
    }
    for (const auto& n : g.nodes()) node(*n, indent);
    for (const Value* v : g.outputs()) out += pad + "output " + value_ref(v) + "\n";
  }

  void node(const Node& n, int indent) {
    out += std::string(indent, ' ');
    for (size_t i = 0; i < n.num_outputs(); ++i) {
      const Value* v = n.output(i);
      out += (i ? ", " : "") + value_ref(v);
      if (!v->type().is_unknown()) out += ": " + v->type().str();
    }
    if (n.num_outputs()) out += " = ";
    if (!n.domain().empty()) out += ident_text(n.domain()) + "::";
    out += ident_text(n.op_type()) + "(";
    for (size_t i = 0; i < n.num_inputs(); ++i) out += (i ? ", " : "") + value_ref(n.input(i));
    out += ")";
    if (!n.attrs().empty()) {
      out += " {";
      bool first = true;
      for (const auto& [name, a] : n.attrs()) {
        out += (first ? "" : ", ") + ident_text(name) + " = ";
        attribute(a, indent);
        first = false;
      }
      out += "}";
    }
    if (!n.name().empty()) out += " name(" + quote(n.name()) + ")";
    if (!n.source().empty()) out += " loc(" + quote(n.source()) + ")";
    if (n.part() != StepPart::Forward) out += " part(" + quote(step_part_name(n.part())) + ")";
    out += "\n";
  }

  template <typename T, typename F>
  void list(const std::vector<T>& xs, const char* empty, F elem) {
    if (xs.empty()) {
      out += empty;
      return;
    }
    out += "[";
    for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + elem(xs[i]);
    out += "]";
  }

  void attribute(const Attribute& a, int indent) {
    switch (a.kind) {
      case Attribute::Kind::Int: out += std::to_string(a.i); break;
      case Attribute::Kind::Float: out += float_text(a.f); break;
      case Attribute::Kind::String: out += quote(a.s); break;
      case Attribute::Kind::Ints:
        list(a.ints, "ints[]", [](int64_t v) { return std::to_string(v); });
        break;
      case Attribute::Kind::Floats:
        list(a.floats, "floats[]", [](float v) { return float_text(v); });
        break;
      case Attribute::Kind::Strings:
        list(a.strings, "strings[]", [](const std::string& v) { return quote(v); });
        break;
      case Attribute::Kind::Tensor:
        TCC_CHECK(a.t.defined()) << "tensor attribute without a tensor";
        out += "tensor<" + tensor_type_text(a.t) + "> " + tensor_literal(a.t);
        break;
      case Attribute::Kind::Graph:
        TCC_CHECK(a.g) << "graph attribute without a graph";
        out += "graph " + name_text(a.g->name()) + " {\n";
        body(*a.g, indent + 4);
        out += std::string(indent + 2, ' ') + "}";
        break;
      case Attribute::Kind::Type: out += "type<" + a.type.str() + ">"; break;
    }
  }
};

// ---- Parser ------------------------------------------------------------------

class Parser : TextCursor {
 public:
  Parser(const std::string& text, const std::string& file) : TextCursor(text, file) {}

  std::unique_ptr<Model> model() {
    auto m = std::make_unique<Model>();
    m->graph->set_file(file_);
    skip();
    expect_keyword("graph");
    m->graph->set_name(name("a graph name"));
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
  int depth_ = 0;

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
    if (!dt) fail_at(at, "expected a dtype (f32 f16 bf16 f64 f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f4e2m1 i64 i32 i16 i8 i4 u8 u16 u32 u64 u4 bool str), got '" + id + "'");
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
    std::string text = expr_text(",]");
    if (text.empty()) expected("a dimension");
    if (text == "?") return Dim::unknown();
    auto bad = [&](const std::string& why) -> Dim {
      fail_at(at, "expected a dimension (integer, symbolic expression or ?), got '" + text.substr(0, 40) + "'" + why);
    };
    if (std::string why = expr_text_problem(text); !why.empty()) bad(why);
    auto expr = SymExpr::parse(text);
    if (!expr) bad("");
    if (expr->is_constant() && expr->constant_value() < 0) bad(" (negative)");
    return Dim(*expr);
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
      const int byte = hi * 16 + lo;
      bytes[i] = static_cast<std::byte>(byte);
      // A 4-bit element takes a byte: its value (i4 sign-extended) or code.
      const int element = dt == DType::I4 ? static_cast<int8_t>(byte) : byte;
      if (is_4bit(dt) && wrap_int4(byte, dt) != element)
        fail_at(start, "expected each byte to hold one " + std::string(dtype_name(dt)) + " element, got " +
                           s.substr(2 * i, 2) + " at element " + std::to_string(i));
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
      if (is_fp8(dt)) {
        *p = static_cast<std::byte>(float_to_fp8(v, dt));
        return;
      }
      if (dt == DType::F4E2M1) {
        *p = static_cast<std::byte>(float_to_f4e2m1(v));
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
        int bitsz = dt == DType::I4 || dt == DType::U4 ? 4 : static_cast<int>(dtype_size(dt) * 8);
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
    size_t part_at = pos();
    std::string part = metadata("part");
    Node* n = g.add_node(op, inputs, names, domain, node_name);
    n->set_source(source);
    if (!part.empty()) {
      auto named = std::find_if(std::begin(kStepParts), std::end(kStepParts),
                                [&](StepPart p) { return part == step_part_name(p); });
      if (named == std::end(kStepParts))
        fail_at(part_at, "expected part \"forward\", \"backward\" or \"optimizer\", got \"" + part + "\"");
      n->set_part(*named);
    }
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
    if (kw == "type") {
      p_ += kw.size();
      expect("<");
      Type t = type();
      expect(">");
      return Attribute::of_type(std::move(t));
    }
    if (kw == "graph") {
      p_ += kw.size();
      if (depth_ + 1 > kMaxDepth) fail_at(at, "regions nested deeper than " + std::to_string(kMaxDepth));
      auto region = std::make_shared<Graph>();
      region->set_parent(&g, nullptr);  // the node is created once its attributes are read
      region->set_name(name("a graph name"));
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

std::string print_model(const Model& m) {
  Printer p;
  p.graph(*m.graph, &m);
  return p.out;
}

std::string print_graph(const Graph& g) {
  Printer p;
  p.graph(g, nullptr);
  return p.out;
}

std::unique_ptr<Model> parse_model(const std::string& text, const std::string& file) {
  return Parser(text, file).model();
}

}  // namespace tcc
