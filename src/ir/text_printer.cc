// The printer of tcc's textual IR (grammar: docs/TEXT_IR.md). It picks one
// spelling for everything (sorted attributes, shortest exact floats, hex for
// large or half-precision tensors) so that print(parse(print(x))) == print(x).
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

#include "src/ir/text.h"
#include "src/ir/text_spelling.h"

namespace tcc {

namespace {

using namespace ir_text;

// Tensors with more elements are printed as hex bytes.
constexpr int64_t kMaxListElements = 64;

std::string value_ref(const Value* v) { return v ? "%" + name_text(v->name()) : "none"; }

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
  bool half = t.dtype() == DType::F16 || t.dtype() == DType::BF16;
  if (t.dtype() == DType::String || (!half && t.numel() <= kMaxListElements))
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
    }
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

}  // namespace tcc
