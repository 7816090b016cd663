// The module directory's format, one definition for the writer
// (codegen/module_writer) and the loader (src/runtime/module): the manifest's
// name and version, the files it names, how sizes, shapes and dtypes are
// spelled in its JSON, and ManifestField, which reads a field and names it in
// every complaint. docs/MODULE.md describes the fields.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/ir/dtype.h"
#include "src/ir/sym.h"

namespace tcc {

// manifest.json's "format" and "format_version": a loader reads exactly the
// version it was built with; any change a loader of the previous version would
// misread bumps it.
inline constexpr const char* kModuleFormat = "tcc-module";
inline constexpr int64_t kModuleFormatVersion = 2;

// Files inside the module directory.
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kWeightsFile = "weights.bin";
inline constexpr const char* kFallbackFile = "fallback.tir";
inline constexpr const char* kCudaSourceFile = "kernels.cu";
inline constexpr const char* kHostSourceFile = "host.cc";
inline constexpr const char* kHostLibraryFile = "host.so";

// A size: an integer when static, SymExpr text otherwise.
nlohmann::ordered_json size_json(const SymExpr& e);
nlohmann::ordered_json shape_json(const std::vector<SymExpr>& shape);

// A module directory that is missing, truncated or inconsistent.
class BadModule : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A JSON value of the manifest with its path, so that every complaint names
// the field: "manifest.json: kernels[2].launch.grid[0]: expected ...".
class ManifestField {
 public:
  ManifestField(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  [[noreturn]] void fail(const std::string& what) const;
  const std::string& path() const { return path_; }
  const nlohmann::json& raw() const { return j_; }

  bool has(const char* key) const { return j_.is_object() && j_.contains(key); }
  ManifestField operator[](const char* key) const;
  size_t size() const;
  ManifestField operator[](size_t i) const;

  std::string str() const;
  int64_t integer() const;
  int64_t integer(int64_t lo, int64_t hi) const;
  double number() const;
  bool boolean() const;
  // A size as size_json spells it.
  SymExpr expr() const;
  // A tensor's element type by name (dtype_name); never string or undefined.
  DType dtype() const;
  std::vector<SymExpr> shape() const;

 private:
  std::string join(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  const nlohmann::json& j_;
  std::string path_;
};

// Checks "format" and "format_version" of a manifest's root.
void check_module_format(const ManifestField& root);

}  // namespace tcc
