// `tcc explain MODEL [--trace CALLS.jsonl]`: graph breaks, guard sets and a
// simulation of torch.compile's recompiles over a call trace, with advice
// whose effect is computed, and CI gates (exit 1 when one trips). With
// --train it explains the training step built from the model (src/autodiff).
#include <fstream>
#include <iostream>

#include "frontends/load_model.h"
#include "src/analysis/explain_report.h"
#include "src/autodiff/autodiff.h"
#include "src/driver/commands.h"

namespace tcc {

namespace {

struct ExplainCli {
  std::string model;
  std::string output;
  std::string format = "text";
  std::string dynamic = "auto";
  ExplainOptions opts;
  bool fail_on_recompile = false;
  int max_recompiles = -1;
  int max_graph_breaks = -1;
  bool train = false;
  std::string loss_fn;
  std::string loss_on;
  std::string label;
  std::string optimizer = "none";
  TrainOptions train_opts;
};

// The training step's lr and step are 0-d tensors that a caller fills from
// Python numbers, so a trace that records them as scalars simulates them as
// tensors; --lr-as-scalar keeps the lr a value-guarded scalar, as torch does
// with a float lr. The simulator numbers inputs in signature order: the graph
// inputs without a default value.
void apply_training(ExplainCli& c, Model& model) {
  TrainOptions& t = c.train_opts;
  if (!c.loss_fn.empty() || !c.loss_on.empty() || !c.label.empty()) {
    if (c.loss_fn.empty() || c.loss_on.empty() || c.label.empty())
      throw InputError("--loss-fn, --loss-on and --label go together");
    t.builtin_loss = BuiltinLoss{parse_loss_kind(c.loss_fn), c.loss_on, c.label};
  }
  t.optimizer.kind = *parse_optimizer(c.optimizer);
  TrainingGraph tg = build_training_graph(model, t);
  int index = 0;
  for (const Value* v : model.graph->inputs()) {
    if (v->is_initializer()) continue;
    if (v->name() == tg.step || (v->name() == tg.lr && !t.lr_as_scalar)) c.opts.sim.scalar_as_tensor.insert(index);
    ++index;
  }
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

ExitCode run_explain(ExplainCli& c) {
  c.opts.sim.dynamic = c.dynamic == "true" ? DynamicMode::True
                       : c.dynamic == "false" ? DynamicMode::False
                                              : DynamicMode::Auto;
  auto model = load_model(c.model);
  if (c.train) {
    apply_training(c, *model);
  } else if (!c.train_opts.loss_output.empty() || !c.loss_fn.empty() || !c.loss_on.empty() || !c.label.empty() ||
             !c.train_opts.param_patterns.empty() || c.optimizer != "none" || c.train_opts.lr_as_scalar) {
    throw InputError("--loss, --loss-fn, --loss-on, --label, --params, --optimizer and --lr-as-scalar need --train");
  }
  ExplainReport report = explain_model(*model, c.opts, OpRegistry::get());
  std::string text = c.format == "json" ? render_json(report).dump(2) + "\n" : render_text(report);
  if (c.output.empty()) {
    std::cout << text;
  } else {
    std::ofstream f(c.output);
    if (!f) throw InputError(c.output + ": cannot open for writing");
    f << text;
  }
  std::string gate = tripped_gate(c, report);
  if (gate.empty()) return ExitCode::Ok;
  std::cerr << "tcc explain: gate tripped: " << gate << "\n";
  return ExitCode::GateTripped;
}

}  // namespace

CommandRunner setup_explain(CLI::App& cmd) {
  auto c = std::make_shared<ExplainCli>();
  cmd.add_option("model", c->model, "ONNX model or tcc text IR")->required();
  cmd.add_option("--trace", c->opts.trace_path, "Call trace (JSON Lines) to simulate recompiles over");
  cmd.add_option("--dynamic", c->dynamic, "Dynamic shapes: auto (on size change), true (all), false (never)")
      ->check(CLI::IsMember({"auto", "true", "false"}))
      ->capture_default_str();
  cmd.add_option("--mark-dynamic", c->opts.mark_dynamic, "INPUT:DIM symbolic from the first compile (repeatable)");
  cmd.add_option("--recompile-limit", c->opts.sim.recompile_limit, "Variants per graph before eager fallback")
      ->capture_default_str();
  cmd.add_option("--format", c->format, "Report format")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  cmd.add_option("-o,--output", c->output, "Write the report to FILE instead of stdout");
  cmd.add_flag("--fail-on-recompile", c->fail_on_recompile, "Exit 1 if any call recompiles");
  cmd.add_option("--max-recompiles", c->max_recompiles, "Exit 1 if there are more than N recompiles");
  cmd.add_option("--max-graph-breaks", c->max_graph_breaks, "Exit 1 if there are more than N graph breaks");
  cmd.add_flag("--train", c->train, "Explain the training step (forward, loss, backward, optimizer update)");
  cmd.add_option("--loss", c->train_opts.loss_output, "Model output that is the loss (with --train)");
  cmd.add_option("--loss-fn", c->loss_fn, "Built-in loss on --loss-on against --label")
      ->check(CLI::IsMember({"cross_entropy", "mse"}));
  cmd.add_option("--loss-on", c->loss_on, "Model output the built-in loss reads");
  cmd.add_option("--label", c->label, "Input holding the targets of the built-in loss");
  cmd.add_option("--params", c->train_opts.param_patterns,
                 "Glob over initializer names to train (repeatable; default: every float initializer)");
  cmd.add_option("--optimizer", c->optimizer, "Update appended to the step")
      ->check(CLI::IsMember({"none", "sgd", "momentum", "adam", "adamw"}))
      ->capture_default_str();
  cmd.add_flag("--lr-as-scalar", c->train_opts.lr_as_scalar,
               "Pass the learning rate as a Python float (value-guarded) instead of a 0-d tensor");
  return [c]() { return run_explain(*c); };
}

}  // namespace tcc
