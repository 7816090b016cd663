#include "frontends/onnx/graph_signature.h"

#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontends/onnx/metadata_props.h"

namespace tcc {

namespace {

constexpr const char* kKindKey = "pkg.torch.export.graph_signature.InputSpec.kind";
constexpr const char* kFoldedFromKey = "pkg.onnxscript.optimizer.folded_from";
constexpr const char* kSignatureKey = "pkg.torch.export.ExportedProgram.graph_signature";

InitializerRole role_of_kind(const std::string& kind) {
  if (kind == "PARAMETER") return InitializerRole::Parameter;
  if (kind == "BUFFER") return InitializerRole::Buffer;
  return InitializerRole::Constant;
}

// The single-quoted names of a Python list's text: "['a', 'b']" -> a, b.
std::vector<std::string> quoted_names(const std::string& text) {
  std::vector<std::string> names;
  for (size_t open = text.find('\''); open != std::string::npos; open = text.find('\'', open)) {
    size_t close = text.find('\'', open + 1);
    if (close == std::string::npos) break;
    names.push_back(text.substr(open + 1, close - open - 1));
    open = close + 1;
  }
  return names;
}

// The kind of each input spec of the signature's text, by target.
std::unordered_map<std::string, std::string> signature_kinds(const onnx::GraphProto& gp) {
  std::unordered_map<std::string, std::string> kinds;
  for (const auto& entry : graph_metadata(gp)) {
    if (entry.first != kSignatureKey) continue;
    std::istringstream lines(entry.second);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("# outputs", 0) == 0) break;
      size_t colon = line.find(": ");
      size_t target = line.find(" target=");
      if (colon == std::string::npos || target == std::string::npos || target < colon) continue;
      std::vector<std::string> names = quoted_names(line.substr(target));
      if (names.size() == 1) kinds[names[0]] = line.substr(colon + 2, target - colon - 2);
    }
  }
  return kinds;
}

}  // namespace

void mark_initializer_roles(const onnx::GraphProto& gp, Graph& g) {
  std::unordered_map<std::string, std::string> kinds, folded_from;
  auto read = [&](const onnx::ValueInfoProto& vi) {
    for (const auto& entry : value_info_metadata(vi)) {
      if (entry.first == kKindKey) kinds[vi.name()] = entry.second;
      if (entry.first == kFoldedFromKey) folded_from[vi.name()] = entry.second;
    }
  };
  for (const auto& vi : gp.input()) read(vi);
  for (const auto& vi : gp.value_info()) read(vi);
  if (kinds.empty()) return;

  const std::unordered_map<std::string, std::string> targets = signature_kinds(gp);
  auto is_parameter = [&](const std::string& name) {
    auto kind = kinds.find(name);
    if (kind != kinds.end()) return kind->second == "PARAMETER";
    auto target = targets.find(name);
    return target != targets.end() && target->second == "PARAMETER";
  };
  for (Value* v : g.initializers()) {
    auto kind = kinds.find(v->name());
    InitializerRole role = InitializerRole::Constant;
    if (kind != kinds.end()) {
      role = role_of_kind(kind->second);
    } else if (is_parameter(v->name())) {
      role = InitializerRole::Parameter;
    } else if (auto folded = folded_from.find(v->name()); folded != folded_from.end()) {
      for (const std::string& source : quoted_names(folded->second))
        if (is_parameter(source)) role = InitializerRole::Parameter;
    }
    v->set_role(role);
  }
}

}  // namespace tcc
