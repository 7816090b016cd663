// `tcc explain MODEL [--trace CALLS.jsonl]`: graph breaks, guard sets and a
// simulation of torch.compile's recompiles over a call trace, with advice
// whose effect is computed, and CI gates (exit 1 when one trips). With
// --train it explains the training step built from the model (src/autodiff).
// `--torch-trace DIR` reports what torch.compile itself logged (TORCH_TRACE),
// beside the prediction when a MODEL is given too; the gates and --baseline
// then apply to torch's numbers.
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "frontends/load_model.h"
#include "src/analysis/explain_report.h"
#include "src/analysis/torch_trace.h"
#include "src/compiler/saved_activations.h"
#include "src/driver/commands.h"
#include "src/driver/train_flags.h"

namespace tcc {

namespace {

struct ExplainCli {
  std::string model;
  std::string output;
  std::string format = "text";
  std::string dynamic = "auto";
  std::string torch_version = "2." + std::to_string(kNewestTorchMinor);
  std::string stance = "default";
  int recompile_limit = -1;  // -1: the release's default
  bool specialize_float = false;
  ExplainOptions opts;
  bool fail_on_recompile = false;
  int max_recompiles = -1;
  int max_graph_breaks = -1;
  std::string shape_hints;
  std::string torch_trace;  // TORCH_TRACE folder
  std::string baseline;     // explain JSON report to compare torch's run with
  TrainFlags train;
};

// The training step's lr and step are 0-d tensors that a caller fills from
// Python numbers, so a trace that records them as scalars simulates them as
// tensors; --lr-as-scalar keeps the lr a value-guarded scalar, as torch does
// with a float lr. The simulator numbers inputs in signature order: the graph
// inputs without a default value.
void simulate_training_inputs(ExplainCli& c, const TrainingGraph& tg, const Model& model) {
  int index = 0;
  for (const Value* v : model.graph->inputs()) {
    if (v->is_initializer()) continue;
    if (v->name() == tg.step || (v->name() == tg.lr && !c.train.opts.lr_as_scalar))
      c.opts.sim.scalar_as_tensor.insert(index);
    ++index;
  }
}

// The training step's side of the report: torch's frames for it
// (src/analysis/training_frames.h: each compiled graph, forward or optimizer
// step, with its nodes; the backward graphs AOTAutograd compiles, one per
// forward graph), and what the backward saves at the --shape-hint sizes.
nlohmann::json training_json(const TrainingGraph& tg, const TrainFlags& f, const ExplainReport& r,
                             const SavedActivations& saved) {
  nlohmann::json graphs = nlohmann::json::array();
  int forward_graphs = 0;
  for (const CompiledRegion& region : r.partition.regions) {
    StepPart part = region.nodes.front()->part();
    forward_graphs += part == StepPart::Forward;
    graphs.push_back({{"graph", region.id}, {"part", step_part_name(part)}, {"nodes", region.nodes.size()}});
  }
  nlohmann::json breaks = nlohmann::json::array();
  for (const GraphBreak& b : r.partition.breaks)
    breaks.push_back({{"node", b.node->name()}, {"part", step_part_name(b.node->part())}});
  nlohmann::json sizes = nlohmann::json::object();
  for (const auto& [name, v] : saved.sizes) sizes[name] = v;
  return {{"loss", tg.loss},
          {"params", tg.params},
          {"params_from", tg.params_from},
          {"optimizer", f.optimizer},
          {"loss_compiled", f.loss_fn.empty()},
          {"graphs", graphs},
          {"backward_graphs", forward_graphs},
          {"breaks", breaks},
          {"saved_activations",
           {{"backward_reads", saved.backward_reads},
            {"saved_values", saved.saved_values},
            {"recomputed_nodes", saved.recomputed_nodes},
            {"save_all_peak_bytes", saved.save_all_peak},
            {"min_cut_peak_bytes", saved.min_cut_peak},
            {"sizes", sizes}}}};
}

std::string training_text(const nlohmann::json& t, const SavedActivations& saved) {
  std::ostringstream out;
  out << "\nTraining step: loss '" << t["loss"].get<std::string>() << "', " << t["params"].size()
      << " parameters from " << t["params_from"].get<std::string>() << ", optimizer "
      << t["optimizer"].get<std::string>() << "\n";
  out << "  torch's frames: torch.compile(model) (the loss " << (t["loss_compiled"].get<bool>() ? "in it" : "eager")
      << "), the backward" << (t["optimizer"] == "none" ? "" : ", a compiled opt.step()") << "\n";
  for (const auto& g : t["graphs"]) {
    bool step = g["part"] == "optimizer";
    int id = g["graph"].get<int>();
    out << "  graph " << id << ": " << (step ? "the optimizer step, " : "forward, ") << g["nodes"].get<int>()
        << " nodes";
    if (step) out << " (frame " << id - 1 << ", opt.step's wrapper, breaks on purpose and compiles nothing)";
    out << "\n";
  }
  const int backward = t["backward_graphs"].get<int>();
  out << "  backward: AOTAutograd compiles " << backward << " graph" << (backward == 1 ? "" : "s")
      << ", one per forward graph, at the first backward, with no guards of its own\n";
  for (const auto& b : t["breaks"])
    out << "  break " << b["node"].get<std::string>() << " is in the " << b["part"].get<std::string>() << "\n";
  std::istringstream lines(describe_saved_activations(saved));
  for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  return out.str();
}

// The first gate that trips, as a one-line reason; empty when none does.
std::string tripped_gate(const ExplainCli& c, const ExplainReport& r) {
  size_t breaks = r.partition.breaks.size();
  if (c.max_graph_breaks >= 0 && breaks > static_cast<size_t>(c.max_graph_breaks)) {
    const GraphBreak& b = r.partition.breaks.front();
    return "--max-graph-breaks " + std::to_string(c.max_graph_breaks) + " exceeded: " + std::to_string(breaks) +
           " graph breaks (first: " + b.node->name() + " (" + b.node->op_type() + ") [" + b.reason + "] " +
           b.message + ")";
  }
  if (!r.sim) return "";
  if (!r.sim->rejected_calls.empty()) {
    const RejectedCall& first = r.sim->rejected_calls.front();
    return "the exported program raises at call " + std::to_string(first.call) + ": " + first.reason + " (" +
           std::to_string(r.sim->rejected_call_count) + " call" + (r.sim->rejected_call_count == 1 ? "" : "s") +
           " outside its range_constraints)";
  }
  if (c.stance == "fail_on_recompile" && !r.sim->recompiles.empty()) {
    const RecompileEvent& e = r.sim->recompiles.front();
    return "set_stance('fail_on_recompile'): torch raises at call " + std::to_string(e.call) + " [" + e.compile_id +
           "]: " + (e.reasons.empty() ? std::string("no reason recorded") : e.reasons.front());
  }
  if (c.fail_on_recompile && !r.sim->recompiles.empty()) {
    const RecompileEvent& e = r.sim->recompiles.front();
    return "--fail-on-recompile: call " + std::to_string(e.call) + " recompiles [" + e.compile_id + "]: " +
           (e.reasons.empty() ? std::string("no reason recorded") : e.reasons.front());
  }
  if (c.max_recompiles >= 0 && r.sim->recompile_count > static_cast<size_t>(c.max_recompiles)) {
    const RecompileEvent& e = r.sim->recompiles[c.max_recompiles];
    return "--max-recompiles " + std::to_string(c.max_recompiles) + " exceeded: " +
           std::to_string(r.sim->recompile_count) + " recompiles (recompile " + std::to_string(c.max_recompiles + 1) +
           " at call " + std::to_string(e.call) + " [" + e.compile_id + "]: " +
           (e.reasons.empty() ? std::string("no reason recorded") : e.reasons.front()) + ")";
  }
  return "";
}

// The first of torch's own numbers that trips a gate, or what a --baseline run lacks; empty when none.
std::string tripped_torch_gate(const ExplainCli& c, const TorchTrace& t, const nlohmann::json* baseline) {
  if (c.max_graph_breaks >= 0 && t.breaks.size() > static_cast<size_t>(c.max_graph_breaks))
    return "--max-graph-breaks " + std::to_string(c.max_graph_breaks) + " exceeded: torch logged " +
           std::to_string(t.breaks.size()) + " graph breaks (first: " + t.breaks.front().source + ": " +
           t.breaks.front().reason + ")";
  if ((c.fail_on_recompile && !t.recompiles.empty()) ||
      (c.max_recompiles >= 0 && t.recompiles.size() > static_cast<size_t>(c.max_recompiles))) {
    const TorchRecompile& r = t.recompiles[c.fail_on_recompile ? 0 : c.max_recompiles];
    return (c.fail_on_recompile ? std::string("--fail-on-recompile") : "--max-recompiles " + std::to_string(c.max_recompiles)) +
           ": torch recompiled " + std::to_string(t.recompiles.size()) + " times ([" + r.compile_id + "] " + r.frame +
           ": " + (r.reasons.empty() ? std::string("no reason logged") : r.reasons.front()) + ")";
  }
  if (baseline == nullptr) return "";
  std::vector<std::string> fresh = new_since_baseline(t, *baseline);
  if (fresh.empty()) return "";
  std::string what = "--baseline " + c.baseline + ": " + std::to_string(fresh.size()) + " new:";
  for (const std::string& f : fresh) what += "\n  " + f;
  return what;
}

nlohmann::json read_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open the --baseline report");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw InputError(path + ": expected tcc explain's JSON report");
  return j;
}

// The model's side of the report (text or JSON) and the first gate it trips.
std::pair<nlohmann::json, std::string> explain_model_cli(ExplainCli& c, std::string& text) {
  c.opts.sim.dynamic = c.dynamic == "true" ? DynamicMode::True
                       : c.dynamic == "false" ? DynamicMode::False
                                              : DynamicMode::Auto;
  c.opts.sim.rules = torch_rules(c.torch_version);
  if (c.specialize_float) c.opts.sim.rules.specialize_float = true;
  if (c.recompile_limit != -1) {
    if (c.recompile_limit < 1) throw InputError("--recompile-limit must be at least 1");
    c.opts.sim.recompile_limit = c.recompile_limit;
  }
  c.opts.sim.stance = c.stance == "eager_on_recompile"  ? Stance::EagerOnRecompile
                      : c.stance == "fail_on_recompile" ? Stance::FailOnRecompile
                                                        : Stance::Default;
  std::map<std::string, int64_t> hints = parse_sizes(c.shape_hints, "--shape-hint");
  auto model = load_model(c.model);
  std::optional<TrainingGraph> tg = apply_train_flags(c.train, *model);
  std::future<void> emitted = emit_onnx(c.train, *model);
  std::optional<SavedActivations> saved;
  if (tg) {
    simulate_training_inputs(c, *tg, *model);
    c.opts.training = TrainingStepFrames{tg->lr, !c.train.loss_fn.empty()};
    saved = compare_saved_activations(*model, hints);
  } else if (!hints.empty()) {
    throw InputError("--shape-hint needs --train (it sizes the training step's memory comparison)");
  }
  ExplainReport report = explain_model(*model, c.opts, OpRegistry::get());
  emitted.get();
  nlohmann::json j;
  if (c.format == "json") {
    j = render_json(report);
    if (tg) j["training"] = training_json(*tg, c.train, report, *saved);
  } else {
    text = render_text(report);
    if (tg) text += training_text(training_json(*tg, c.train, report, *saved), *saved);
  }
  return {j, tripped_gate(c, report)};
}

ExitCode run_explain(ExplainCli& c) {
  if (c.model.empty() && c.torch_trace.empty())
    throw InputError("tcc explain: give a MODEL, or --torch-trace DIR (what torch.compile logged), or both");
  if (!c.baseline.empty() && c.torch_trace.empty())
    throw InputError("--baseline compares torch.compile runs: give --torch-trace DIR too");
  std::optional<nlohmann::json> baseline;
  if (!c.baseline.empty()) baseline = read_baseline(c.baseline);
  std::optional<TorchTrace> torch;
  if (!c.torch_trace.empty()) torch = read_torch_trace(c.torch_trace);

  std::string text, gate;
  nlohmann::json j = nlohmann::json::object();
  if (!c.model.empty()) std::tie(j, gate) = explain_model_cli(c, text);
  if (torch) {
    if (c.format == "json") j["torch_trace"] = torch_trace_json(*torch);
    else text += (text.empty() ? "" : "\n") + torch_trace_text(*torch);
    if (gate.empty()) gate = tripped_torch_gate(c, *torch, baseline ? &*baseline : nullptr);
  }
  if (c.format == "json") text = j.dump(2) + "\n";
  if (c.output.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(c.output);
    if (!f) throw InputError(c.output + ": cannot open for writing");
    f << text;
  }
  if (gate.empty()) return ExitCode::Ok;
  std::cerr << "tcc explain: gate tripped: " << gate << "\n";
  return ExitCode::GateTripped;
}

}  // namespace

CommandRunner setup_explain(CLI::App& cmd) {
  auto c = std::make_shared<ExplainCli>();
  cmd.add_option("model", c->model, "ONNX model, .pt2 archive or tcc text IR");
  cmd.add_option("--trace", c->opts.trace_path, "Call trace (JSON Lines) to simulate recompiles over");
  cmd.add_option("--torch-trace", c->torch_trace,
                 "Folder of torch's TORCH_TRACE logs: report what torch.compile did (breaks, recompiles, guards)");
  cmd.add_option("--baseline", c->baseline,
                 "With --torch-trace: an earlier explain JSON report; exit 1 on breaks or recompiles it lacks");
  cmd.add_option("--dynamic", c->dynamic, "Dynamic shapes: auto (on size change), true (all), false (never)")
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->capture_default_str();
  cmd.add_option("--mark-dynamic", c->opts.mark_dynamic, "INPUT:DIM symbolic from the first compile (repeatable)");
  cmd.add_option("--mark-unbacked", c->opts.mark_unbacked,
                 "INPUT:DIM symbolic from the first compile, 0 and 1 included (repeatable; torch >= 2.5)");
  cmd.add_option("--mark-static", c->opts.mark_static, "INPUT:DIM never symbolic (repeatable)");
  cmd.add_option("--recompile-limit", c->recompile_limit,
                 "Variants per graph before eager fallback (default: the release's, 8 since 2.2)");
  cmd.add_flag("--specialize-float", c->specialize_float,
               "torch._dynamo.config.specialize_float=True: every float guarded by value (the default before 2.6)");
  cmd.add_option("--torch-version", c->torch_version,
                 "PyTorch release X.Y whose rules the simulation follows (2.0 to the default, the newest modelled)")
      ->capture_default_str();
  cmd.add_option("--stance", c->stance, "torch.compiler.set_stance during the trace (torch >= 2.6)")
      ->check(CLI::IsMember({"default", "eager_on_recompile", "fail_on_recompile"}))
      ->capture_default_str();
  cmd.add_option("--format", c->format, "Report format")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd.add_option("-o,--output", c->output, "Write the report to FILE instead of stdout");
  cmd.add_flag("--fail-on-recompile", c->fail_on_recompile, "Exit 1 if any call recompiles");
  cmd.add_option("--max-recompiles", c->max_recompiles, "Exit 1 if there are more than N recompiles");
  cmd.add_option("--max-graph-breaks", c->max_graph_breaks, "Exit 1 if there are more than N graph breaks");
  add_train_flags(cmd, c->train);
  cmd.add_option("--shape-hint", c->shape_hints,
                 "With --train: sizes of symbolic dims for the memory comparison, e.g. batch=8,seq=128 (default 1)");
  return [c]() { return run_explain(*c); };
}

}  // namespace tcc
