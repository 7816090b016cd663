// RecompileSimulator: replays a call trace against torch.compile's caching
// rules, per compiled graph, and reports every compile, recompile and eager
// fallback.
//
// Rules (docs/EXPLAIN.md has the user-facing version):
//  0. A call outside the model's declared ranges (a .pt2's range_constraints)
//     is rejected: the exported program raises, nothing compiles or runs.
//  1. The first call compiles variant 0 with every size static, except
//     classes made symbolic by --dynamic true or --mark-dynamic.
//  2. A call that passes some variant's guards reuses it. Otherwise, under
//     --dynamic auto every class whose value differs from what earlier
//     compiles saw becomes symbolic (and stays so); under false the new
//     variant is static.
//  3. Values 0 and 1 are specialized: a symbolic class guards `2 <= s`.
//  4. Float scalars follow the release's rules (TorchRules): guarded by value
//     always (specialize_float), or until their value changes (automatic
//     dynamic), or never under --dynamic true; int scalars behave like sizes.
//  5. At most recompile_limit variants per graph (under the stance
//     eager_on_recompile: one); a call needing another runs eagerly and is
//     counted.
//  6. A graph reading a break result whose size the data sets (nonzero's;
//     CompiledRegion::data_dependent_inputs) sees that size change at the call
//     after its first compile: a recompile that makes it symbolic under
//     automatic dynamic, one per call up to the limit under --dynamic false.
// Checks are memoized per distinct call: once a call passes a variant it
// always will, and once the limit is hit a failing call always fails.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "src/analysis/guards.h"
#include "src/analysis/partition.h"
#include "src/analysis/torch_rules.h"
#include "src/analysis/trace.h"

namespace tcc {

enum class DynamicMode { Auto, True, False };

// torch.compiler.set_stance: fail_on_recompile raises at the first recompile
// (explain reports it as a tripped gate); eager_on_recompile runs such calls eagerly.
enum class Stance { Default, EagerOnRecompile, FailOnRecompile };

struct SimOptions {
  DynamicMode dynamic = DynamicMode::Auto;
  TorchRules rules;
  int recompile_limit = 0;              // 0: the release's default
  Stance stance = Stance::Default;
  std::set<int> mark_dynamic;           // classes symbolic from the first compile
  std::set<int> mark_unbacked;          // classes symbolic from the first compile, 0 and 1 included
  std::set<int> mark_static;            // classes never symbolic
  std::set<int> scalar_as_tensor;       // float scalar inputs passed as 0-d tensors instead
  std::map<int, int64_t> pad_multiple;  // class -> sizes rounded up to a multiple

  int effective_recompile_limit() const { return recompile_limit > 0 ? recompile_limit : rules.recompile_limit; }
};

// What caused a recompile or fallback, for advice.
struct RecompileCause {
  enum Kind { FloatScalar, Size, Other } kind = Other;
  int input = -1;  // FloatScalar
  int cls = -1;    // Size
  bool operator<(const RecompileCause& o) const {
    return std::tie(kind, input, cls) < std::tie(o.kind, o.input, o.cls);
  }
};

// The variants whose failed guards a recompile words, newest first: torch's
// default recompile limit, so a trace simulated with a far higher
// --recompile-limit does not word every earlier variant at every recompile
// (quadratic in the variants).
constexpr size_t kWordedVariants = 8;

struct RecompileEvent {
  size_t call = 0;
  std::string compile_id;            // the new variant, "graph/variant"
  std::vector<std::string> reasons;  // failed guards of the kWordedVariants newest earlier variants, newest first
  size_t unlisted_variants = 0;      // earlier variants past those, whose guards failed too
};

struct GraphSimulation {
  std::vector<GuardSet> variants;
  size_t eager_calls = 0;
  // First call that ran eagerly and why (empty when none did).
  std::optional<RecompileEvent> first_eager;
  // The recompile limit was hit where TorchRules::cache_runs_after_limit is
  // false: every later call runs eagerly.
  bool frame_skipped = false;
};

// A graph break the simulation finds at a call (TorchRules::unbacked_zero_breaks).
struct SimBreak {
  int graph = 0;
  size_t call = 0;
  int input = 0, dim = 0;    // the unbacked dim that is 0
  std::string torch_reason;  // torch's words, up to their first blank line
};

// A call outside the exported program's range_constraints
// (ModelSignature::class_ranges): torch.export's module raises on it before
// anything compiles, so no graph sees it.
struct RejectedCall {
  size_t call = 0;
  std::string reason;  // "ids.size()[1] = 12 is outside the exported range [2, 11] of s1"
};

// The rejected calls a result words: the first of each distinct call, up to this many.
constexpr size_t kListedRejections = 8;

struct SimResult {
  size_t calls = 0;
  size_t rejected_call_count = 0;
  std::vector<RejectedCall> rejected_calls;
  size_t compiles = 0;
  size_t recompile_count = 0;
  size_t eager_fallback_calls = 0;  // calls in which at least one graph ran eagerly
  std::vector<GraphSimulation> graphs;
  std::vector<RecompileEvent> recompiles;  // in call order
  std::vector<SimBreak> breaks;            // distinct by graph and torch_reason, in call order
  std::set<RecompileCause> causes;
};

// Simulates the trace for each region's inputs. With no region (an empty
// model) nothing compiles.
SimResult simulate(const ModelSignature& sig, const std::vector<CompiledRegion>& regions, const Trace& trace,
                   const SimOptions& opts);

// The guard set a graph compiled from the model's declared signature would
// carry (for reports without a trace): declared-symbolic dims are symbolic.
GuardSet declared_guards(const ModelSignature& sig, const std::vector<int>& inputs, int graph);

// Model input indices (in the signature) a region reads.
std::vector<int> region_input_indices(const ModelSignature& sig, const CompiledRegion& r);

}  // namespace tcc
