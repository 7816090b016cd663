#include "src/analysis/torch_rules.h"

#include "src/diag/errors.h"

namespace tcc {

// Where a row names a pull request, its release is read off the merge date
// against the release branch cuts (2.2 Dec 2023, 2.6 Dec 2024, 2.7 Mar 2025,
// 2.8 Jun 2025); docs/EXPLAIN.md says which rows are inferred that way.
const std::vector<TorchRuleChange>& torch_rule_changes() {
  static const std::vector<TorchRuleChange> changes = {
      {1, "automatic dynamic shapes",
       "a size that changes recompiles once as symbolic (before: a static variant per size)",
       "automatic_dynamic_shapes=True by default (2.1 release notes)"},
      {2, "recompile limit", "cache_size_limit default 64 -> 8 per code object (merged Sep 2023)",
       "pytorch/pytorch#108526 (reduce cache size limit to 8)"},
      {5, "mark_unbacked", "torch._dynamo.decorators.mark_unbacked: a dim symbolic without 0/1 specialization",
       "present in 2.5; pull request not pinned"},
      {6, "float specialization",
       "specialize_float default True -> False: a float is guarded by value at the first compile and becomes a "
       "graph input when its value changes (automatic dynamic for floats)",
       "pytorch/pytorch#137782 (turn off specialize float), #140893, #141975"},
      {6, "torch.compiler.set_stance",
       "stances eager_on_recompile (a call needing a new variant runs eagerly) and fail_on_recompile (it raises)",
       "pytorch/pytorch#137504"},
      {7, "recompile limit", "cache_size_limit renamed recompile_limit (the old name stays an alias); default 8",
       "pytorch/pytorch#143709"},
      {8, "float specialization under dynamic=True",
       "dynamic=True makes floats graph inputs at the first compile (before: only after a value change)",
       "pytorch/pytorch#149564 (fix dynamic float when dynamic=True)"},
  };
  return changes;
}

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
  r.has_mark_unbacked = minor >= 5;
  r.specialize_float = minor < 6;
  r.has_set_stance = minor >= 6;
  r.dynamic_floats_at_first_compile = minor >= 8;
  return r;
}

}  // namespace tcc
