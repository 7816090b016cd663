// TorchRules: the torch.compile caching rules of one PyTorch release, as far
// as they decide graph breaks, guards and recompiles in tcc's simulation.
// `tcc explain --torch-version X.Y` picks one; the default is the newest
// release modelled. docs/EXPLAIN.md tabulates each change with the PyTorch
// pull request that made it.
#pragma once

#include <string>

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
  // Under dynamic=False floats keep their value guards; before, a changed value
  // made them graph inputs as under automatic dynamic (recorded: 2.7; 2.8 keeps them).
  bool dynamic_false_keeps_float_guards = true;
  int recompile_limit = 8;
  std::string recompile_limit_name = "recompile_limit";  // the torch._dynamo.config name
  bool has_mark_static = true;
  bool has_mark_unbacked = true;
  // A recompile for a 0 in an unbacked innermost dim (its outer stride's guard
  // failed) traces the dim still unbacked with the outer stride no longer u0;
  // computing an elementwise op's output strides then compares u0 with the
  // outer size, which torch cannot guard: the graph breaks there, nothing is
  // compiled, and the call runs eagerly (recorded: 2.6 to 2.8; 2.10 compiles a
  // variant static in the dim).
  bool unbacked_zero_breaks = false;
  bool has_set_stance = true;  // torch.compiler.set_stance, with eager_on_recompile / fail_on_recompile
  // Past the recompile limit a call still runs a variant compiled before whose
  // guards it passes; before it, hitting the limit skipped the frame, and every
  // later call ran eagerly.
  bool cache_runs_after_limit = true;
  // Guard-failure wording. Before 2.6 a tensor's strides are checked before its
  // sizes (a changed inner size reads "stride mismatch at index 0"), and the
  // grad-mode guard is ___check_global_state() (recorded: 2.3; 2.6 words them as
  // 2.15 does). 2.3's reasons also lack the "G/V: " compile id, which tcc keeps.
  bool legacy_guard_failures = false;
  // Before kPlainSourceMinor, reasons spell inputs as the frame's locals:
  // tensor 'L['x']', L['lr'] == 0.1 (recorded on 2.3 and 2.6; 2.7 writes x, lr).
  bool local_source_names = false;

  std::string version() const { return "2." + std::to_string(minor); }
};

// The newest release the rules model.
constexpr int kNewestTorchMinor = 15;
// The first release whose guard failures spell inputs plainly (x, not L['x']).
constexpr int kPlainSourceMinor = 7;

// torch's reason for a graph break at an op of `op_type` that tcc breaks at,
// in release r's words up to their first blank line (after it torch adds a
// developer context, the user's stack with file paths, and links); empty where
// tcc does not know torch's words for that op.
std::string torch_break_reason(const std::string& op_type, const TorchRules& r);

// torch's words for a torch._dynamo.graph_break() call (torch.optim makes one
// around every step), up to their first blank line; before the release that
// words breaks as a title, an explanation and a hint, dynamo's skip of the
// function (recorded on 2.6).
std::string torch_user_break_reason(const TorchRules& r);

// The first release wording graph breaks as a title, an explanation and a hint
// (recorded: 2.6 writes one line, 2.7 the three).
constexpr int kStructuredBreakMinor = 7;

// The rules of release "X.Y" (a patch "X.Y.Z" reads as X.Y); an InputError for
// a release before 2.0 or after the newest modelled.
TorchRules torch_rules(const std::string& version);

}  // namespace tcc
