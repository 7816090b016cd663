#include "src/analysis/recompile_simulator.h"

#include <algorithm>

namespace tcc {

namespace {

constexpr int64_t kUnset = -2;

class GraphSimulator {
 public:
  GraphSimulator(const ModelSignature& sig, std::vector<int> inputs, int graph, bool data_dependent,
                 const SimOptions& opts, size_t distinct)
      : sig_(sig), inputs_(std::move(inputs)), graph_(graph), data_dependent_(data_dependent), opts_(opts),
        first_value_(sig.num_classes(), kUnset), dynamic_(sig.num_classes(), false),
        first_float_(sig.inputs.size()), float_dynamic_(sig.inputs.size(), false), memo_(distinct, kUnknown) {
    for (int i : inputs_) {
      for (int c : sig.inputs[i].dim_class)
        if (c >= 0) class_order_.push_back(c);
      if (sig.inputs[i].scalar_class >= 0) class_order_.push_back(sig.inputs[i].scalar_class);
    }
  }

  // Returns false when this call ran eagerly for this graph.
  bool call(size_t index, uint32_t id, const CallRecord& rec, const int64_t* values, SimResult& out) {
    if (sim_.frame_skipped) {
      ++sim_.eager_calls;
      return false;
    }
    uint8_t& m = memo_[id];
    // A break result's data-dependent size (the graph's ___stack0) changes at
    // the next call: no variant compiled while it was static passes it.
    const bool size_changed = data_dependent_ && !sim_.variants.empty() && !data_dependent_symbolic_;
    if (m == kServed && !size_changed) return true;
    if (m == kEager) {
      ++sim_.eager_calls;
      return false;
    }
    if (!size_changed)
      for (size_t v = sim_.variants.size(); v-- > 0;)
        if (sim_.variants[v].check(rec, values)) {
          m = kServed;
          return true;
        }
    const bool over_limit = static_cast<int>(sim_.variants.size()) >= opts_.effective_recompile_limit();
    const bool at_limit = over_limit || (opts_.stance == Stance::EagerOnRecompile && !sim_.variants.empty());
    // Reasons are worded only for recompiles and the first eager call: a
    // trace of a million new float values must not build a million messages.
    RecompileEvent ev;
    ev.call = index;
    if (!at_limit || !sim_.first_eager) {
      const size_t n = sim_.variants.size();
      for (size_t v = n; v-- > 0;) {
        if (n - v <= kWordedVariants) {
          for (std::string& r : sim_.variants[v].failures(rec, values)) ev.reasons.push_back(std::move(r));
          // torch's data-dependent results (nonzero's, unique's) carry that size first.
          if (size_changed)
            ev.reasons.push_back(sim_.variants[v].compile_id() + ": tensor '" +
                                 (opts_.rules.local_source_names ? "L['___stack0']" : "___stack0") +
                                 "' size mismatch at index 0 (data-dependent)");
        }
        note_causes(sim_.variants[v], rec, values, out.causes);
      }
      ev.unlisted_variants = n > kWordedVariants ? n - kWordedVariants : 0;
    }
    if (at_limit) {
      m = kEager;
      sim_.frame_skipped = over_limit && !opts_.rules.cache_runs_after_limit;
      ++sim_.eager_calls;
      if (!sim_.first_eager) sim_.first_eager = std::move(ev);
      return false;
    }
    if (std::optional<SimBreak> b = unbacked_zero_break(index, values)) {
      m = kEager;
      ++sim_.eager_calls;
      auto same = [&](const SimBreak& o) { return o.graph == b->graph && o.torch_reason == b->torch_reason; };
      if (std::none_of(out.breaks.begin(), out.breaks.end(), same)) out.breaks.push_back(std::move(*b));
      return false;
    }
    sim_.variants.push_back(compile(rec, values));
    // Automatic dynamic makes the size symbolic at its first change, --dynamic true at the first compile.
    data_dependent_symbolic_ =
        opts_.dynamic == DynamicMode::True ||
        (opts_.dynamic == DynamicMode::Auto && opts_.rules.automatic_dynamic && sim_.variants.size() > 1);
    TCC_CHECK(sim_.variants.back().check(rec, values)) << "variant " << sim_.variants.back().compile_id()
                                                       << " rejects the call it was compiled for";
    ++out.compiles;
    m = kServed;
    if (sim_.variants.size() > 1) {
      ev.compile_id = sim_.variants.back().compile_id();
      out.recompiles.push_back(std::move(ev));
      ++out.recompile_count;
    }
    return true;
  }

  GraphSimulation take() { return std::move(sim_); }

 private:
  static constexpr uint8_t kUnknown = 0, kServed = 1, kEager = 2;

  void note_causes(const GuardSet& g, const CallRecord& rec, const int64_t* values,
                   std::set<RecompileCause>& causes) const {
    const GuardSet& gs = g;
    for (int i : inputs_)
      if (gs.float_guarded()[i] && rec.floats[i] != gs.float_values()[i])
        causes.insert({RecompileCause::FloatScalar, i, -1});
    for (int c : class_order_) {
      const auto& cg = gs.classes()[c];
      if ((cg.kind == GuardSet::ClassGuard::Static && values[c] != cg.value) ||
          (cg.kind == GuardSet::ClassGuard::Symbolic && !cg.unbacked && values[c] < 2) ||
          (cg.kind == GuardSet::ClassGuard::Symbolic && values[c] == 0))
        causes.insert({RecompileCause::Size, -1, c});
    }
  }

  // Classes of the AtLeast facts these values break (a Slice bound past a
  // shorter dim): the variant keeps them static, where shape inference sees
  // the real size instead of assuming the bound lies within it.
  std::set<int> pinned_classes(const int64_t* values) const {
    std::map<std::string, int64_t> symbols = sig_.symbol_values(values);
    std::set<int> out;
    for (const ShapeFact& f : sig_.facts) {
      if (f.kind != ShapeFact::Kind::AtLeast || !f.broken_at(symbols)) continue;
      for (int c = 0; c < sig_.num_classes(); ++c)
        if (f.expr.symbols().count(sig_.class_symbol[c])) out.insert(c);
    }
    return out;
  }

  // Whether a float scalar input is guarded by value in the variant compiled
  // now (TorchRules): always with specialize_float; otherwise until its value
  // changes under automatic dynamic (under --dynamic false too before 2.8), and
  // never under --dynamic true from 2.8.
  bool float_guarded(int i, double value) {
    const TorchRules& rules = opts_.rules;
    if (rules.specialize_float) return true;
    if (opts_.dynamic == DynamicMode::True && rules.dynamic_floats_at_first_compile) return false;
    if (!first_float_[i]) first_float_[i] = value;
    else if ((opts_.dynamic != DynamicMode::False || !rules.dynamic_false_keeps_float_guards) &&
             rules.automatic_dynamic && value != *first_float_[i])
      float_dynamic_[i] = true;
    return !float_dynamic_[i];
  }

  bool zero_in_innermost_dim(int c) const {
    for (auto [i, d] : sig_.class_sources[c])
      if (d > 0 && d + 1 == static_cast<int>(sig_.inputs[i].dim_class.size()) &&
          std::find(inputs_.begin(), inputs_.end(), i) != inputs_.end())
        return true;
    return false;
  }

  // Under TorchRules::unbacked_zero_breaks, the break a recompile for a 0 in
  // an unbacked innermost dim meets: torch compares the unbacked size with the
  // size of the dim outside it (the strides of both being 1) and cannot guard it.
  std::optional<SimBreak> unbacked_zero_break(size_t call, const int64_t* values) const {
    if (!opts_.rules.unbacked_zero_breaks || sim_.variants.empty()) return std::nullopt;
    int unbacked_seen = 0;
    for (int c : class_order_) {
      if (!opts_.mark_unbacked.count(c)) continue;
      int symbol = unbacked_seen++;
      if (values[c] != 0 || !zero_in_innermost_dim(c)) continue;
      for (auto [i, d] : sig_.class_sources[c]) {
        if (d <= 0 || std::find(inputs_.begin(), inputs_.end(), i) == inputs_.end()) continue;
        int outer = sig_.inputs[i].dim_class[d - 1];
        std::string size = outer >= 0 ? std::to_string(values[outer]) : std::to_string(*sig_.inputs[i].fixed[d - 1]);
        std::string u = "u" + std::to_string(symbol), expr = u + " > " + size;
        return SimBreak{graph_, call, i, d,
                        "Could not guard on data-dependent expression " + expr + " (unhinted: " + expr +
                            ").  (Size-like symbols: " + u + ")"};
      }
    }
    return std::nullopt;
  }

  GuardSet compile(const CallRecord& rec, const int64_t* values) {
    GuardSet g(sig_, std::to_string(graph_) + "/" + std::to_string(sim_.variants.size()));
    g.set_rules(opts_.rules);
    size_t n = sig_.inputs.size();
    g.inputs() = inputs_;
    g.classes().resize(sig_.num_classes());
    g.dtypes().assign(n, DType::Undefined);
    g.float_guarded().assign(n, false);
    g.float_values().assign(n, 0.0);
    g.layouts().assign(n, std::nullopt);
    g.grad_mode() = rec.grad_mode;
    for (int i : inputs_) {
      EntryKind k = rec.kinds[i];
      if (k == EntryKind::Tensor) {
        g.dtypes()[i] = rec.dtypes[i];
        g.layouts()[i] = rec.layout(i);
      }
      if (opts_.scalar_as_tensor.count(i)) continue;
      if (k == EntryKind::BoolScalar || (k == EntryKind::FloatScalar && float_guarded(i, rec.floats[i]))) {
        g.float_guarded()[i] = true;
        g.float_values()[i] = rec.floats[i];
      }
    }
    int next_symbol = 0;
    std::map<int64_t, int> symbolic_by_value;  // for duck sizing
    std::set<int> pinned = pinned_classes(values);
    for (int c : class_order_) {
      auto& cg = g.classes()[c];
      if (cg.kind != GuardSet::ClassGuard::Unguarded || values[c] < 0) continue;
      if (first_value_[c] == kUnset) first_value_[c] = values[c];
      else if (opts_.dynamic == DynamicMode::Auto && opts_.rules.automatic_dynamic && values[c] != first_value_[c])
        dynamic_[c] = true;
      // Int scalars made symbolic are not 0/1-specialized (torch 2.15 compiles
      // once more for k = 2, 3, 4, 1, 5: tests/fidelity/2.15/int_scalar).
      bool int_scalar = sig_.class_sources[c].front().second < 0;
      bool unbacked = opts_.mark_unbacked.count(c) > 0;
      bool symbolic = (opts_.mark_dynamic.count(c) || unbacked || opts_.dynamic == DynamicMode::True || dynamic_[c]) &&
                      !pinned.count(c) && !opts_.mark_static.count(c);
      // A 0 in an innermost dim breaks the outer stride's guard even unbacked, so it compiles static.
      bool zero_in_inner_dim = values[c] == 0 && zero_in_innermost_dim(c);
      if (symbolic && (unbacked || int_scalar || values[c] >= 2) && !zero_in_inner_dim) {
        cg.kind = GuardSet::ClassGuard::Symbolic;
        cg.symbol = next_symbol++;
        cg.unbacked = unbacked || int_scalar;
        // Duck sizing: symbols made at a first compile (--dynamic true,
        // --mark-dynamic) that are equal share one, guarded `s1 == s0`; torch
        // 2.15 adds no such guard for sizes made symbolic by automatic dynamic
        // (tests/fidelity/2.15/duck_sizing), nor for unbacked ones.
        if (unbacked || !(opts_.dynamic == DynamicMode::True || opts_.mark_dynamic.count(c))) continue;
        auto [it, fresh] = symbolic_by_value.emplace(values[c], c);
        if (!fresh) g.relations().push_back({it->second, c});
      } else {
        cg.kind = GuardSet::ClassGuard::Static;
        cg.value = values[c];
      }
    }
    return g;
  }

  const ModelSignature& sig_;
  std::vector<int> inputs_;
  int graph_;
  bool data_dependent_;                  // reads a break result whose size the data sets
  bool data_dependent_symbolic_ = false;  // that size is symbolic in the newest variant
  const SimOptions& opts_;
  std::vector<int> class_order_;
  std::vector<int64_t> first_value_;
  std::vector<bool> dynamic_;
  std::vector<std::optional<double>> first_float_;  // per input: the float value the first compile saw
  std::vector<bool> float_dynamic_;                 // per input: a graph input from now on
  std::vector<uint8_t> memo_;
  GraphSimulation sim_;
};

// Why the exported program refuses a call with these class values (the first
// declared range one breaks); "" when it accepts it.
std::string range_violation(const ModelSignature& sig, const int64_t* values) {
  for (const auto& [c, range] : sig.class_ranges) {
    if (values[c] < 0 || range.admits(values[c])) continue;
    auto [input, dim] = sig.class_sources[c].front();
    return sig.source_str(input, dim) + " = " + std::to_string(values[c]) + " is outside the exported range " +
           range.str() + " of " + sig.class_symbol[c];
  }
  return "";
}

}  // namespace

std::vector<int> region_input_indices(const ModelSignature& sig, const CompiledRegion& r) {
  std::vector<int> out;
  for (const Value* v : r.graph_inputs) {
    int i = sig.find_input(v->name());
    TCC_CHECK(i >= 0) << "region input '" << v->name() << "' is not in the signature";
    out.push_back(i);
  }
  return out;
}

SimResult simulate(const ModelSignature& sig, const std::vector<CompiledRegion>& regions, const Trace& trace,
                   const SimOptions& opts) {
  SimResult out;
  out.calls = trace.calls.size();
  std::vector<GraphSimulator> graphs;
  for (const CompiledRegion& r : regions)
    graphs.emplace_back(sig, region_input_indices(sig, r), r.id, !r.data_dependent_inputs.empty(), opts,
                        trace.distinct_count);
  // Padding is applied once per distinct call, in a copy of the class values.
  std::vector<int64_t> padded;
  if (!opts.pad_multiple.empty()) {
    padded = trace.class_values;
    for (size_t row = 0; row < trace.distinct_count; ++row)
      for (auto [c, m] : opts.pad_multiple) {
        int64_t& v = padded[row * trace.num_classes + c];
        if (v > 0) v = (v + m - 1) / m * m;
      }
  }
  // Per distinct call: 0 not yet checked against the declared ranges, 1 accepted, 2 rejected.
  std::vector<uint8_t> admitted(trace.distinct_count, 0);
  for (size_t i = 0; i < trace.calls.size(); ++i) {
    uint32_t id = trace.calls[i];
    CallRecord rec = trace.distinct(id);
    const int64_t* values = padded.empty() ? rec.class_values : padded.data() + id * trace.num_classes;
    if (admitted[id] == 0) {
      std::string why = range_violation(sig, values);
      admitted[id] = why.empty() ? 1 : 2;
      if (!why.empty() && out.rejected_calls.size() < kListedRejections) out.rejected_calls.push_back({i, why});
    }
    if (admitted[id] == 2) {
      ++out.rejected_call_count;
      continue;
    }
    bool eager = false;
    for (GraphSimulator& g : graphs) eager |= !g.call(i, id, rec, values, out);
    if (eager) ++out.eager_fallback_calls;
  }
  for (GraphSimulator& g : graphs) out.graphs.push_back(g.take());
  return out;
}

GuardSet declared_guards(const ModelSignature& sig, const std::vector<int>& inputs, int graph) {
  GuardSet g(sig, std::to_string(graph) + "/0");
  size_t n = sig.inputs.size();
  g.inputs() = inputs;
  g.classes().resize(sig.num_classes());
  g.dtypes().assign(n, DType::Undefined);
  g.float_guarded().assign(n, false);
  g.float_values().assign(n, 0.0);
  int next_symbol = 0;
  for (int i : inputs) {
    const InputSignature& in = sig.inputs[i];
    if (in.scalar_class < 0) g.dtypes()[i] = in.dtype;
    std::vector<int> cls = in.dim_class;
    cls.push_back(in.scalar_class);
    for (int c : cls)
      if (c >= 0 && g.classes()[c].kind == GuardSet::ClassGuard::Unguarded) {
        g.classes()[c].kind = GuardSet::ClassGuard::Symbolic;
        g.classes()[c].symbol = next_symbol++;
      }
  }
  return g;
}

}  // namespace tcc
