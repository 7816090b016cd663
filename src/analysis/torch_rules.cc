#include "src/analysis/torch_rules.h"

#include <map>

#include "src/diag/errors.h"

namespace tcc {

TorchRules torch_rules(const std::string& version) {
  int major = 0, minor = -1;
  size_t dot = version.find('.');
  try {
    size_t used = 0;
    major = std::stoi(version.substr(0, dot), &used);
    if (used != dot || dot == std::string::npos) throw std::invalid_argument("no dot");
    size_t end = version.find('.', dot + 1);
    std::string m = version.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1);
    minor = std::stoi(m, &used);
    if (used != m.size()) throw std::invalid_argument("minor");
  } catch (const std::exception&) {
    throw InputError("--torch-version " + version + ": expected MAJOR.MINOR, e.g. 2.15");
  }
  if (major != 2 || minor < 0 || minor > kNewestTorchMinor)
    throw InputError("--torch-version " + version + ": the rules model PyTorch 2.0 to 2." +
                     std::to_string(kNewestTorchMinor));
  TorchRules r;
  r.minor = minor;
  r.automatic_dynamic = minor >= 1;
  r.recompile_limit = minor >= 2 ? 8 : 64;
  r.recompile_limit_name = minor >= 7 ? "recompile_limit" : "cache_size_limit";
  r.has_mark_static = minor >= 1;
  r.has_mark_unbacked = minor >= 5;
  r.unbacked_zero_breaks = minor >= 5 && minor <= 8;
  r.specialize_float = minor < 6;
  r.has_set_stance = minor >= 6;
  r.dynamic_floats_at_first_compile = minor >= 8;
  r.dynamic_false_keeps_float_guards = minor >= 8;
  r.cache_runs_after_limit = minor >= 6;
  r.legacy_guard_failures = minor < 6;
  r.local_source_names = minor < kPlainSourceMinor;
  return r;
}

std::string torch_break_reason(const std::string& op_type, const TorchRules& r) {
  // The ops whose output shape depends on tensor data, by their aten overload
  // (recorded: nonzero on 2.3 to 2.15, in the old words on 2.3 and 2.6).
  static const std::map<std::string, std::string> kDynamicShapeOps = {{"NonZero", "aten.nonzero.default"}};
  auto it = kDynamicShapeOps.find(op_type);
  if (it == kDynamicShapeOps.end()) return "";
  const std::string config = "torch._dynamo.config.capture_dynamic_output_shape_ops = True";
  if (r.minor < kStructuredBreakMinor) return "dynamic shape operator: " + it->second + "; to enable, set " + config;
  return "Dynamic shape operator\n  Explanation: Operator `" + it->second +
         "`'s output shape depends on input Tensor data.\n  Hint: Enable tracing of dynamic shape operators with `" +
         config + "`";
}

std::string torch_user_break_reason(const TorchRules& r) {
  // Recorded on 2.6: dynamo skips the function, naming the file that defines it.
  if (r.minor < kStructuredBreakMinor) return "'skip function graph_break in file torch/_dynamo/decorators.py'";
  return "Call to `torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break. Message: None\n  Hint: "
         "Remove the `torch._dynamo.graph_break()` call.";
}

}  // namespace tcc
