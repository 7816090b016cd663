#include "src/module/structured_values.h"

#include "src/diag/errors.h"

namespace tcc {

namespace {

using Kind = StructuredValue::Kind;

std::string describe(const StructuredValue& s) {
  if (s.kind == Kind::Tensor) return "a tensor";
  if (s.kind == Kind::Optional) return s.elements.empty() ? "an absent optional" : "an optional with a value";
  return "a sequence of " + std::to_string(s.elements.size());
}

// Hints for value t named `name`; an element's (a name with a dot) gives its shape.
void add_hints(const std::string& name, const Tensor& t, std::vector<std::string>& hints) {
  const bool optional_sequence = t.is_optional() && !t.elements().empty() && t.elements().front().is_sequence();
  if (t.is_sequence() || optional_sequence) {
    const Tensor& seq = t.is_sequence() ? t : t.elements().front();
    const std::string prefix = t.is_sequence() ? name : name + ".0";
    hints.push_back(name + "=seq(" + std::to_string(seq.elements().size()) + ")");
    for (size_t i = 0; i < seq.elements().size(); ++i) add_hints(prefix + "." + std::to_string(i), seq.elements()[i], hints);
  } else if (t.is_optional()) {
    hints.push_back(name + (t.elements().empty() ? "=absent" : "=present"));
    if (!t.elements().empty()) add_hints(name + ".0", t.elements().front(), hints);
  } else if (name.find('.') != std::string::npos) {
    std::string dims;
    for (int64_t d : t.shape()) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    hints.push_back(name + "=[" + dims + "]");
  }
}

}  // namespace

void flatten_structured(const StructuredValue& s, const Tensor& t, std::map<std::string, Tensor>& out) {
  if (s.kind == Kind::Tensor && t.kind() == Tensor::Kind::Tensor) {
    out[s.name] = t;
    return;
  }
  bool same_kind = (s.kind == Kind::Sequence && t.is_sequence()) || (s.kind == Kind::Optional && t.is_optional());
  if (!same_kind || t.elements().size() != s.elements.size())
    throw InputError("'" + s.name + "': the module was compiled for " + describe(s) + " here (--shape-hint); compile it "
                     "again for this value's structure");
  for (size_t i = 0; i < s.elements.size(); ++i) flatten_structured(s.elements[i], t.elements()[i], out);
}

Tensor assemble_structured(const StructuredValue& s, const std::map<std::string, Tensor>& tensors) {
  if (s.kind == Kind::Tensor) {
    auto it = tensors.find(s.name);
    if (it == tensors.end()) throw InputError("the module has no tensor '" + s.name + "'");
    return it->second;
  }
  std::vector<Tensor> elems;
  for (const StructuredValue& e : s.elements) elems.push_back(assemble_structured(e, tensors));
  DType dtype = elems.empty() ? DType::Undefined : elems.front().dtype();
  return s.kind == Kind::Sequence ? Tensor::sequence(dtype, std::move(elems)) : Tensor::optional(dtype, std::move(elems));
}

std::string structure_hints(const std::map<std::string, Tensor>& values) {
  std::vector<std::string> hints;
  for (const auto& [name, t] : values)
    if (t.kind() != Tensor::Kind::Tensor) add_hints(name, t, hints);
  std::string joined;
  for (const std::string& h : hints) joined += (joined.empty() ? "" : ",") + h;
  return joined;
}

std::vector<StructuredValue> read_structured_list(const nlohmann::json& manifest, const char* key) {
  std::vector<StructuredValue> out;
  if (!manifest.is_object() || !manifest.contains(key)) return out;
  ManifestField list(manifest[key], key);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(read_structured(list[i]));
  return out;
}

}  // namespace tcc
