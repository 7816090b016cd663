// TorchRules: the torch.compile caching rules of one PyTorch release, as far
// as they decide graph breaks, guards and recompiles in tcc's simulation.
// `tcc explain --torch-version X.Y` picks one; the default is the newest
// release modelled. docs/EXPLAIN.md tabulates each change with the PyTorch
// pull request that made it.
#pragma once

#include <string>
#include <vector>

namespace tcc {

struct TorchRules {
  int minor = 15;  // PyTorch 2.minor (1.x predates torch.compile)
  // A tensor size that changes becomes symbolic (automatic_dynamic_shapes);
  // before it, every new size compiles a static variant.
  bool automatic_dynamic = true;
  // A Python float is a value-guarded constant (specialize_float=True). Without
  // it, the first compile guards the value and a changed value makes the float
  // a graph input, from then on (automatic dynamic for floats).
  bool specialize_float = false;
  // Under dynamic=True floats are graph inputs from the first compile (without
  // it they became inputs only by automatic dynamic).
  bool dynamic_floats_at_first_compile = true;
  int recompile_limit = 8;
  std::string recompile_limit_name = "recompile_limit";  // the torch._dynamo.config name
  bool has_mark_unbacked = true;
  bool has_set_stance = true;  // torch.compiler.set_stance, with eager_on_recompile / fail_on_recompile

  std::string version() const { return "2." + std::to_string(minor); }
};

// The newest release the rules model.
constexpr int kNewestTorchMinor = 15;

// The rules of release "X.Y" (a patch "X.Y.Z" reads as X.Y); an InputError for
// a release before 2.0 or after the newest modelled.
TorchRules torch_rules(const std::string& version);

// One row of the table in docs/EXPLAIN.md: the release where a rule changed.
struct TorchRuleChange {
  int minor;
  std::string rule;
  std::string change;
  std::string pytorch_pr;
};
const std::vector<TorchRuleChange>& torch_rule_changes();

}  // namespace tcc
