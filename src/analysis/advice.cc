#include "src/analysis/advice.h"

namespace tcc {

namespace {

std::string plural(size_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::string outcome(size_t compiles, size_t eager, bool mention_no_eager) {
  std::string s = plural(compiles, "compile");
  if (eager) s += " and " + plural(eager, "eager call");
  else if (mention_no_eager) s += ", no eager calls";
  return s;
}

bool improves(const SimResult& alt, const SimResult& base) {
  // Padding past a declared range makes the program refuse calls: never advice.
  if (alt.rejected_call_count > base.rejected_call_count) return false;
  if (alt.eager_fallback_calls != base.eager_fallback_calls)
    return alt.eager_fallback_calls < base.eager_fallback_calls;
  return alt.compiles < base.compiles;
}

}  // namespace

std::vector<Advice> compute_advice(const ModelSignature& sig, const std::vector<CompiledRegion>& regions,
                                   const Trace& trace, const SimOptions& opts, const SimResult& baseline) {
  std::vector<Advice> out;
  auto add = [&](const std::string& action, const std::string& flag, const SimResult& alt) {
    if (!improves(alt, baseline)) return;
    Advice a{action, flag, alt.compiles, alt.eager_fallback_calls, ""};
    a.text = action + ": " + outcome(alt.compiles, alt.eager_fallback_calls, baseline.eager_fallback_calls > 0) +
             " instead of " + outcome(baseline.compiles, baseline.eager_fallback_calls, false);
    out.push_back(std::move(a));
  };
  for (const RecompileCause& cause : baseline.causes) {
    if (cause.kind == RecompileCause::FloatScalar) {
      SimOptions o = opts;
      o.scalar_as_tensor.insert(cause.input);
      add("hold '" + sig.inputs[cause.input].name + "' in a tensor input", "", simulate(sig, regions, trace, o));
      continue;
    }
    if (cause.kind != RecompileCause::Size) continue;
    auto [input, dim] = sig.class_sources[cause.cls].front();
    if (dim < 0) continue;  // int scalars: --dynamic true below covers them
    std::string where = sig.inputs[input].name + ":" + std::to_string(dim);
    if (!opts.mark_dynamic.count(cause.cls)) {
      SimOptions o = opts;
      o.mark_dynamic.insert(cause.cls);
      add("mark " + where + " dynamic", "--mark-dynamic " + where, simulate(sig, regions, trace, o));
    }
    // Padding: the multiple that does best (the smaller one on a tie, as it wastes less).
    std::optional<SimResult> best;
    int64_t best_multiple = 0;
    for (int64_t m : {8, 32}) {
      SimOptions o = opts;
      o.pad_multiple[cause.cls] = m;
      SimResult r = simulate(sig, regions, trace, o);
      if (!best || improves(r, *best)) {
        best = std::move(r);
        best_multiple = m;
      }
    }
    add("pad " + where + " to a multiple of " + std::to_string(best_multiple), "", *best);
  }
  if (opts.dynamic != DynamicMode::True && (baseline.recompile_count || baseline.eager_fallback_calls)) {
    SimOptions o = opts;
    o.dynamic = DynamicMode::True;
    add("compile with --dynamic true", "--dynamic true", simulate(sig, regions, trace, o));
  }
  return out;
}

}  // namespace tcc
