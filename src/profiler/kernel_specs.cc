// module_kernel_specs: what the reports need from a module's manifest.json —
// each kernel's name, kind, schedule, source nodes, and bytes and FLOP at given sizes.
#include <fstream>

#include "src/diag/errors.h"
#include "src/ir/sym.h"
#include "src/profiler/measurement.h"

namespace tcc::profiler {

namespace {

// A manifest count: an integer, or SymExpr text over the module's symbols.
int64_t count_at(const nlohmann::json& v, const std::map<std::string, int64_t>& sizes, const std::string& where) {
  if (v.is_number_integer()) return v.get<int64_t>();
  std::optional<SymExpr> e = v.is_string() ? SymExpr::parse(v.get<std::string>()) : std::nullopt;
  std::optional<int64_t> n = e ? e->evaluate(sizes) : std::nullopt;
  if (!n) throw InputError(where + ": expected an integer or a size expression over the given sizes, got " + v.dump());
  return *n;
}

}  // namespace

std::vector<KernelSpec> module_kernel_specs(const std::string& module_dir,
                                            const std::map<std::string, int64_t>& sizes) {
  const std::string file = module_dir + "/manifest.json";
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot read");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("kernels") || !j["kernels"].is_array())
    throw InputError(file + ": expected a tcc module manifest with a kernels array");
  std::vector<KernelSpec> specs;
  for (size_t i = 0; i < j["kernels"].size(); ++i) {
    const nlohmann::json& k = j["kernels"][i];
    const std::string at = file + ": kernels[" + std::to_string(i) + "]";
    try {
      KernelSpec s;
      s.name = k.at("name").get<std::string>();
      s.kind = k.at("kind").get<std::string>();
      s.nodes = k.at("nodes").get<std::vector<std::string>>();
      s.schedule = k.value("schedule", "");
      s.bytes = count_at(k.at("bytes_moved"), sizes, at + ".bytes_moved");
      s.flop = count_at(k.at("flop"), sizes, at + ".flop");
      const nlohmann::json& buffers = k.at("buffers");
      std::string dtype = buffers.empty() ? "" : buffers.at(0).at("dtype").get<std::string>();
      s.tensor_cores = (s.kind == "gemm" || s.kind == "attention") && (dtype == "f16" || dtype == "bf16");
      specs.push_back(std::move(s));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(at + ": " + e.what());
    }
  }
  return specs;
}

}  // namespace tcc::profiler
