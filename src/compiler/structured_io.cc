#include "src/compiler/structured_io.h"

#include <algorithm>
#include <set>

#include "src/diag/errors.h"

namespace tcc {

namespace {

using Kind = StructuredValue::Kind;

std::string kind_word(const Type& t) { return t.kind() == Type::Kind::Sequence ? "sequence" : "optional"; }

// Value `name` of type t built from new inputs named after it, before `first`
// (the graph's first node); returns the value the model's readers read.
Value* assemble(Graph& g, Node* first, const std::string& name, const Type& t, const StructureHint& hint,
                const CompileOptions& options, std::set<std::string>& shaped, StructuredValue& out) {
  out.name = name;
  if (t.is_tensor() || t.is_unknown()) {
    out.kind = Kind::Tensor;
    auto shape = options.element_shapes.find(name);
    if (shape != options.element_shapes.end() && t.is_tensor()) {
      shaped.insert(name);
      return g.add_input(name, Type::tensor(t.dtype(), Dims(shape->second.begin(), shape->second.end())));
    }
    if (!t.is_tensor() || !t.has_rank())
      throw InputError("the model gives the elements of '" + name.substr(0, name.find('.')) + "' no " +
                       (t.is_tensor() ? "rank" : "type") + ": give element '" + name +
                       "' its shape, e.g. --shape-hint " + name + "=[2x3] ([] for a scalar)");
    return g.add_input(name, t);
  }
  if (t.kind() == Type::Kind::Optional) {
    out.kind = Kind::Optional;
    std::vector<Value*> value;
    if (hint.present) {
      out.elements.emplace_back();
      value.push_back(assemble(g, first, name + ".0", t.elem(), hint, options, shaped, out.elements.back()));
    }
    Node* n = g.insert_node(first, "Optional", value, {g.fresh_name(name + "/optional")}, "", name + "/Optional");
    n->output(0)->set_type(t);
    return n->output(0);
  }
  out.kind = Kind::Sequence;
  std::vector<Value*> elems;
  for (int64_t i = 0; i < hint.length; ++i) {
    out.elements.emplace_back();
    elems.push_back(
        assemble(g, first, name + "." + std::to_string(i), t.elem(), hint, options, shaped, out.elements.back()));
  }
  Node* n = elems.empty()
                ? g.insert_node(first, "SequenceEmpty", {}, {g.fresh_name(name + "/sequence")}, "", name + "/SequenceEmpty")
                : g.insert_node(first, "SequenceConstruct", elems, {g.fresh_name(name + "/sequence")}, "",
                                name + "/SequenceConstruct");
  if (elems.empty() && t.elem().is_tensor())
    n->set_attr("dtype", Attribute::of_int(static_cast<int64_t>(t.elem().dtype())));
  n->output(0)->set_type(t);
  return n->output(0);
}

bool needs_length(const Type& t) {
  return t.kind() == Type::Kind::Sequence || (t.kind() == Type::Kind::Optional && needs_length(t.elem()));
}

}  // namespace

bool parse_structure_hint(const std::string& name, const std::string& value, CompileOptions& options) {
  auto number = [&](const std::string& n, const std::string& expected) {
    if (n.empty() || n.size() > 9 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw InputError("--shape-hint " + name + "=" + value + ": expected " + expected);
    return static_cast<int64_t>(std::stoll(n));
  };
  if (value == "present" || value == "absent") {
    options.structure_hints[name] = {value == "present", -1};
  } else if (value.size() >= 5 && value.rfind("seq(", 0) == 0 && value.back() == ')') {
    options.structure_hints[name] = {true, number(value.substr(4, value.size() - 5), "seq(N) with N a length")};
  } else if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
    std::vector<int64_t>& dims = options.element_shapes[name];
    std::string inner = value.substr(1, value.size() - 2);
    for (size_t at = 0; !inner.empty();) {
      size_t x = inner.find('x', at);
      dims.push_back(number(inner.substr(at, x == std::string::npos ? std::string::npos : x - at),
                            "a shape such as [2x3] ([] for a scalar)"));
      if (x == std::string::npos) break;
      at = x + 1;
    }
  } else {
    return false;
  }
  return true;
}

std::vector<StructuredValue> flatten_structured_inputs(Graph& g, const CompileOptions& options) {
  const std::map<std::string, StructureHint>& hints = options.structure_hints;
  std::set<std::string> shaped;  // the elements options.element_shapes shaped
  std::vector<StructuredValue> out;
  std::vector<Value*> structured;
  for (Value* v : g.inputs())
    if (v->type().kind() == Type::Kind::Sequence || v->type().kind() == Type::Kind::Optional) structured.push_back(v);
  for (const auto& [name, hint] : hints) {
    if (std::none_of(structured.begin(), structured.end(), [&](const Value* v) { return v->name() == name; }))
      throw InputError("--shape-hint " + name + "=...: the model has no sequence or optional input '" + name + "'");
  }
  Node* first = g.nodes().empty() ? nullptr : g.nodes().front().get();
  for (Value* v : structured) {
    const Type& t = v->type();
    auto it = hints.find(v->name());
    bool sequence = t.kind() == Type::Kind::Sequence;
    if (it == hints.end() || (it->second.present && needs_length(t) && it->second.length < 0)) {
      const std::string& n = v->name();
      std::string what = sequence ? "its length, e.g. --shape-hint " + n + "=seq(2)"
                         : needs_length(t) ? "its value's length, e.g. --shape-hint " + n + "=seq(2), or " + n + "=absent"
                                           : "--shape-hint " + n + "=present or " + n + "=absent";
      v->fail("input '" + n + "' is " + (sequence ? "a " : "an ") + kind_word(t) + " (" + t.str() +
              "); a compiled module's inputs are tensors, so tcc compiles it for a structure fixed now: give " + what);
    }
    if (sequence && !it->second.present) v->fail("input '" + v->name() + "' is a sequence: it cannot be absent");
    out.emplace_back();
    size_t before = g.inputs().size();
    Value* assembled = assemble(g, first, v->name(), t, it->second, options, shaped, out.back());
    g.replace_all_uses(v, assembled);
    g.replace_input(v, {g.inputs().begin() + static_cast<std::ptrdiff_t>(before), g.inputs().end()});
  }
  for (const auto& [name, dims] : options.element_shapes)
    if (!shaped.count(name))
      throw InputError("--shape-hint " + name + "=[...]: no element of a sequence or optional input is named '" +
                       name + "' (elements: NAME.0, NAME.1, ... as NAME=seq(N) or NAME=present gives them)");
  return out;
}

StructuredValue structured_output(const std::string& name, const Type& type, const std::vector<std::string>& outputs) {
  auto has = [&](const std::string& n) { return std::find(outputs.begin(), outputs.end(), n) != outputs.end(); };
  auto has_prefix = [&](const std::string& p) {
    return std::any_of(outputs.begin(), outputs.end(), [&](const std::string& o) { return o.rfind(p, 0) == 0; });
  };
  StructuredValue v;
  v.name = name;
  if (type.kind() != Type::Kind::Sequence && type.kind() != Type::Kind::Optional) return v;
  v.kind = type.kind() == Type::Kind::Sequence ? Kind::Sequence : Kind::Optional;
  const Type& elem = type.elem();
  bool nested = elem.kind() == Type::Kind::Sequence || elem.kind() == Type::Kind::Optional;
  for (size_t i = 0;; ++i) {
    std::string e = name + "." + std::to_string(i);
    if (nested ? !has_prefix(e + ".") : !has(e)) break;
    v.elements.push_back(structured_output(e, elem, outputs));
    if (v.kind == Kind::Optional) break;
  }
  return v;
}

}  // namespace tcc
