#include "src/module/manifest_format.h"

#include <climits>
#include <optional>

namespace tcc {

nlohmann::ordered_json size_json(const SymExpr& e) {
  if (e.is_constant()) return e.constant_value();
  return e.str();
}

nlohmann::ordered_json shape_json(const std::vector<SymExpr>& shape) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const SymExpr& d : shape) a.push_back(size_json(d));
  return a;
}

void ManifestField::fail(const std::string& what) const {
  throw BadModule(std::string(kManifestFile) + ": " + (path_.empty() ? std::string("top level") : path_) + ": " +
                  what);
}

ManifestField ManifestField::operator[](const char* key) const {
  if (!j_.is_object()) fail("expected an object");
  auto it = j_.find(key);
  if (it == j_.end()) ManifestField(j_, join(key)).fail("missing");
  return ManifestField(*it, join(key));
}

size_t ManifestField::size() const {
  if (!j_.is_array()) fail("expected an array");
  return j_.size();
}

ManifestField ManifestField::operator[](size_t i) const {
  return ManifestField(j_.at(i), path_ + "[" + std::to_string(i) + "]");
}

std::string ManifestField::str() const {
  if (!j_.is_string()) fail("expected a string");
  return j_.get<std::string>();
}

int64_t ManifestField::integer() const {
  if (j_.is_number_unsigned() && j_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail("out of range");
  if (!j_.is_number_integer()) fail("expected an integer");
  return j_.get<int64_t>();
}

int64_t ManifestField::integer(int64_t lo, int64_t hi) const {
  int64_t v = integer();
  if (v < lo || v > hi)
    fail("expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

double ManifestField::number() const {
  if (!j_.is_number()) fail("expected a number");
  return j_.get<double>();
}

bool ManifestField::boolean() const {
  if (!j_.is_boolean()) fail("expected true or false");
  return j_.get<bool>();
}

SymExpr ManifestField::expr() const {
  if (j_.is_number_integer()) return SymExpr::constant(integer());
  if (!j_.is_string()) fail("expected an integer or a size expression");
  std::optional<SymExpr> e = SymExpr::parse(j_.get<std::string>());
  if (!e) fail("'" + j_.get<std::string>() + "' is not a size expression");
  return *e;
}

DType ManifestField::dtype() const {
  std::optional<DType> t = parse_dtype(str());
  if (!t || *t == DType::String || *t == DType::Undefined) fail("unknown dtype '" + str() + "'");
  return *t;
}

std::vector<SymExpr> ManifestField::shape() const {
  std::vector<SymExpr> dims;
  for (size_t i = 0; i < size(); ++i) dims.push_back((*this)[i].expr());
  return dims;
}

void check_module_format(const ManifestField& root) {
  if (!root.raw().is_object()) root.fail("expected a JSON object");
  if (root["format"].str() != kModuleFormat) root["format"].fail("not a tcc module ('" + root["format"].str() + "')");
  int64_t version = root["format_version"].integer();
  if (version != kModuleFormatVersion)
    root["format_version"].fail("version " + std::to_string(version) + " is not supported (this runtime reads " +
                                std::to_string(kModuleFormatVersion) + ")");
}

}  // namespace tcc
