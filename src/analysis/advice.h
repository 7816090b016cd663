// Advice with computed effect: for each cause of recompiles or eager
// fallbacks, the simulation is re-run under the alternative and the advice is
// kept only when it improves the outcome (fewer eager calls, then fewer
// compiles).
#pragma once

#include <string>
#include <vector>

#include "src/analysis/recompile_simulator.h"

namespace tcc {

struct Advice {
  std::string action;  // "hold 'lr' in a tensor input", "mark x:1 dynamic", ...
  std::string flag;    // the tcc explain flag that reproduces it, when there is one
  size_t compiles = 0;
  size_t eager_fallback_calls = 0;
  std::string text;    // "hold 'lr' in a tensor input: 1 compile instead of 6"
};

std::vector<Advice> compute_advice(const ModelSignature& sig, const std::vector<CompiledRegion>& regions,
                                   const Trace& trace, const SimOptions& opts, const SimResult& baseline);

}  // namespace tcc
