#include "src/analysis/explain_report.h"

#include <algorithm>
#include <sstream>

namespace tcc {

namespace {

// "x:1" -> the class of dim 1 of input x; `flag` names the option in errors.
int parse_mark(const ModelSignature& sig, const std::string& spec, const std::string& flag = "--mark-dynamic") {
  size_t colon = spec.rfind(':');
  std::string name = colon == std::string::npos ? spec : spec.substr(0, colon);
  int input = sig.find_input(name);
  if (input < 0) throw InputError(flag + " " + spec + ": the model has no input '" + name + "'");
  const InputSignature& in = sig.inputs[input];
  if (colon == std::string::npos) {
    if (in.scalar_class < 0)
      throw InputError(flag + " " + spec + ": give a dim, INPUT:DIM ('" + name + "' is a tensor)");
    return in.scalar_class;
  }
  int dim = -1;
  try {
    dim = std::stoi(spec.substr(colon + 1));
  } catch (const std::exception&) {
    throw InputError(flag + " " + spec + ": expected INPUT:DIM with an integer DIM");
  }
  if (dim < 0 || dim >= static_cast<int>(in.fixed.size()))
    throw InputError(flag + " " + spec + ": '" + name + "' has rank " + std::to_string(in.fixed.size()));
  if (in.fixed[dim])
    throw InputError(flag + " " + spec + ": the model fixes this dim to " + std::to_string(*in.fixed[dim]));
  return in.dim_class[dim];
}

std::string node_label(const Node& n) {
  return (n.name().empty() ? "<unnamed>" : n.name()) + " (" + n.op_type() + ")";
}

// A break the simulation found, at the first node of its graph that reads the input.
GraphBreak simulated_break(const ExplainReport& r, const SimBreak& sb) {
  const std::string& input = r.signature.inputs[sb.input].name;
  GraphBreak b;
  auto region = std::find_if(r.partition.regions.begin(), r.partition.regions.end(),
                             [&](const CompiledRegion& c) { return c.id == sb.graph; });
  for (const Node* n : region->nodes)
    if (std::any_of(n->inputs().begin(), n->inputs().end(), [&](const Value* v) { return v && v->name() == input; })) {
      b.node = n;
      break;
    }
  TCC_CHECK(b.node) << "graph " << sb.graph << " does not read '" << input << "'";
  b.reason = "data_dependent_shape";
  b.message = "torch " + r.options.rules.version() + " recompiles call " + std::to_string(sb.call) + " (a 0 in '" +
              input + "' dim " + std::to_string(sb.dim) +
              ", unbacked) with the dim still unbacked and cannot decide the output's strides: the call runs eagerly";
  b.hint = "mark the dim dynamic rather than unbacked, or use torch 2.10 or later (a variant static in it compiles)";
  b.torch_reason = sb.torch_reason;
  return b;
}

}  // namespace

ExplainReport explain_model(Model& model, const ExplainOptions& opts, const OpRegistry& registry) {
  ExplainReport r;
  r.model_path = model.path;
  ShapeInfo info = infer_shapes(*model.graph);
  r.partition = partition_graph(*model.graph, info, registry);
  r.signature = build_signature(*model.graph, info, kTorchLeastSymbolicSize);
  read_size_ranges(r.signature, model.metadata, model.path);
  r.options = opts.sim;
  for (const std::string& spec : opts.mark_dynamic) r.options.mark_dynamic.insert(parse_mark(r.signature, spec));
  for (const std::string& spec : opts.mark_static)
    r.options.mark_static.insert(parse_mark(r.signature, spec, "--mark-static"));
  for (const std::string& spec : opts.mark_unbacked)
    r.options.mark_unbacked.insert(parse_mark(r.signature, spec, "--mark-unbacked"));
  const TorchRules& rules = r.options.rules;
  for (GraphBreak& b : r.partition.breaks) b.torch_reason = torch_break_reason(b.node->op_type(), rules);
  if (opts.training) {
    r.partition = torch_training_frames(r.partition, *model.graph, *opts.training, rules);
    if (int lr = r.signature.find_input(opts.training->lr); lr >= 0) r.signature.inputs[lr].source = kLrSource;
  }
  if (!opts.mark_static.empty() && !rules.has_mark_static)
    throw InputError("--mark-static: torch " + rules.version() + " has no mark_static (new in 2.1)");
  if (!opts.mark_unbacked.empty() && !rules.has_mark_unbacked)
    throw InputError("--mark-unbacked: torch " + rules.version() + " has no mark_unbacked (new in 2.5)");
  if (r.options.stance != Stance::Default && !rules.has_set_stance)
    throw InputError("--stance: torch " + rules.version() + " has no torch.compiler.set_stance (new in 2.6)");
  if (r.options.recompile_limit < 0) throw InputError("--recompile-limit must be at least 1");
  if (opts.trace_path.empty()) {
    for (const CompiledRegion& reg : r.partition.regions)
      r.guards.push_back({declared_guards(r.signature, region_input_indices(r.signature, reg), reg.id)});
    return r;
  }
  r.trace_path = opts.trace_path;
  Trace trace = read_trace(opts.trace_path, r.signature);
  r.sim = simulate(r.signature, r.partition.regions, trace, r.options);
  for (const SimBreak& sb : r.sim->breaks) r.partition.breaks.push_back(simulated_break(r, sb));
  for (GraphSimulation& g : r.sim->graphs) r.guards.push_back(g.variants);
  r.advice = compute_advice(r.signature, r.partition.regions, trace, r.options, *r.sim);
  return r;
}

std::string render_text(const ExplainReport& r) {
  std::ostringstream os;
  const Partition& p = r.partition;
  size_t op_count = 0;
  for (const auto& g : p.regions) op_count += g.nodes.size();
  os << "Graph Count: " << p.regions.size() << "\n";
  os << "Graph Break Count: " << p.breaks.size() << "\n";
  os << "Op Count: " << op_count << "\n";
  if (!p.breaks.empty()) {
    os << "Break Reasons:\n";
    for (size_t i = 0; i < p.breaks.size(); ++i) {
      const GraphBreak& b = p.breaks[i];
      os << "  Break Reason " << i + 1 << ": [" << b.reason << "] " << node_label(*b.node);
      if (!b.node->source().empty()) os << " at " << b.node->source();
      os << "\n    " << b.message << "\n    hint: " << b.hint << "\n";
      if (!b.torch_reason.empty()) {
        os << "    torch " << r.options.rules.version() << ": ";
        for (char c : b.torch_reason) os << c << (c == '\n' ? "    " : "");  // its explanation and hint under the title
        os << "\n";
      }
    }
  }
  os << "Ops per Graph:\n";
  for (const auto& g : p.regions) {
    os << "  Graph " << g.id << " (" << g.nodes.size() << " ops):";
    // Runs of one op type print once with a count, so a 100,000-node graph stays readable.
    for (size_t i = 0; i < g.nodes.size();) {
      size_t j = i;
      while (j < g.nodes.size() && g.nodes[j]->op_type() == g.nodes[i]->op_type()) ++j;
      os << " " << g.nodes[i]->op_type();
      if (j - i > 1) os << " x" << j - i;
      i = j;
    }
    os << "\n";
  }
  os << "Guards:\n";
  for (const auto& variants : r.guards)
    for (const GuardSet& g : variants) {
      os << "  [" << g.compile_id() << "]\n  +- RootGuardManager\n";
      for (const std::string& line : g.tree_lines()) os << "  | +- " << line << "\n";
    }
  if (!r.sim) {
    os << "Recompiles: no trace given (--trace CALLS.jsonl simulates one)\n";
    return os.str();
  }
  const SimResult& s = *r.sim;
  os << "Torch rules: " << r.options.rules.version() << " (" << r.options.rules.recompile_limit_name << " "
     << r.options.effective_recompile_limit() << ", specialize_float "
     << (r.options.rules.specialize_float ? "True" : "False") << ")\n";
  os << "Calls: " << s.calls << "\n";
  if (s.rejected_call_count > 0) {
    os << "Rejected Calls: " << s.rejected_call_count
       << " (outside the exported program's range_constraints: torch.export's module raises on them)\n";
    for (const RejectedCall& c : s.rejected_calls) os << "  call " << c.call << ": " << c.reason << "\n";
  }
  os << "Compiles: " << s.compiles << "\n";
  os << "Recompiles: " << s.recompile_count << "\n";
  for (const RecompileEvent& e : s.recompiles) {
    os << "  call " << e.call << ": Recompiling [" << e.compile_id << "]"
       << " triggered by the following guard failure(s):\n";
    for (const std::string& reason : e.reasons) os << "    - " << reason << "\n";
    if (e.unlisted_variants > 0)
      os << "    - and the guards of " << e.unlisted_variants << " earlier variant(s)\n";
  }
  os << "Eager Fallback Calls: " << s.eager_fallback_calls << "\n";
  for (size_t g = 0; g < s.graphs.size(); ++g) {
    const auto& fe = s.graphs[g].first_eager;
    if (!fe) continue;
    os << "  graph " << p.regions[g].id << ": ";
    if (r.options.stance == Stance::EagerOnRecompile && s.graphs[g].variants.size() < static_cast<size_t>(r.options.effective_recompile_limit()))
      os << "stance eager_on_recompile";
    else
      os << r.options.rules.recompile_limit_name << " (" << r.options.effective_recompile_limit() << ") reached";
    os << " at call " << fe->call << "; " << s.graphs[g].eager_calls << " calls ran eagerly. First failure(s):\n";
    for (const std::string& reason : fe->reasons) os << "    - " << reason << "\n";
  }
  if (!r.advice.empty()) {
    os << "Advice:\n";
    for (const Advice& a : r.advice) os << "  " << a.text << "\n";
  }
  return os.str();
}

nlohmann::json render_json(const ExplainReport& r) {
  using nlohmann::json;
  json j;
  const Partition& p = r.partition;
  j["model"] = r.model_path;
  j["torch_version"] = r.options.rules.version();
  j["recompile_limit"] = r.options.effective_recompile_limit();
  j["graph_count"] = p.regions.size();
  j["graph_break_count"] = p.breaks.size();
  json breaks = json::array();
  for (const GraphBreak& b : p.breaks)
    breaks.push_back({{"node", b.node->name()}, {"op_type", b.node->op_type()}, {"reason", b.reason},
                      {"message", b.message}, {"hint", b.hint}, {"source", b.node->source()},
                      {"torch_reason", b.torch_reason}});
  j["graph_breaks"] = breaks;
  size_t op_count = 0;
  json graphs = json::array();
  for (size_t g = 0; g < p.regions.size(); ++g) {
    const CompiledRegion& reg = p.regions[g];
    json ops = json::array(), inputs = json::array(), guards = json::array();
    for (const Node* n : reg.nodes) ops.push_back(n->op_type());
    for (const Value* v : reg.graph_inputs) inputs.push_back(v->name());
    for (const GuardSet& gs : r.guards[g]) guards.push_back({{"compile_id", gs.compile_id()}, {"guards", gs.to_json()}});
    op_count += reg.nodes.size();
    graphs.push_back({{"id", reg.id}, {"op_count", reg.nodes.size()}, {"ops", ops}, {"inputs", inputs},
                      {"guards", guards}});
  }
  j["op_count"] = op_count;
  j["graphs"] = graphs;
  if (!r.sim) {
    j["calls"] = 0;
    j["rejected_call_count"] = 0;
    j["rejected_calls"] = json::array();
    j["compiles"] = 0;
    j["recompile_count"] = 0;
    j["recompiles"] = json::array();
    j["eager_fallback_calls"] = 0;
    j["advice"] = json::array();
    j["trace"] = nullptr;
    return j;
  }
  const SimResult& s = *r.sim;
  j["trace"] = r.trace_path;
  j["calls"] = s.calls;
  j["rejected_call_count"] = s.rejected_call_count;
  json rejected = json::array();
  for (const RejectedCall& c : s.rejected_calls) rejected.push_back({{"call", c.call}, {"reason", c.reason}});
  j["rejected_calls"] = rejected;
  j["compiles"] = s.compiles;
  j["recompile_count"] = s.recompile_count;
  json recs = json::array();
  for (const RecompileEvent& e : s.recompiles)
    recs.push_back({{"call", e.call},
                    {"compile_id", e.compile_id},
                    {"reasons", e.reasons},
                    {"unlisted_variants", e.unlisted_variants}});
  j["recompiles"] = recs;
  j["eager_fallback_calls"] = s.eager_fallback_calls;
  json advice = json::array();
  for (const Advice& a : r.advice)
    advice.push_back({{"action", a.action}, {"flag", a.flag}, {"compiles", a.compiles},
                      {"eager_fallback_calls", a.eager_fallback_calls}, {"text", a.text}});
  j["advice"] = advice;
  return j;
}

}  // namespace tcc
