// `tcc opt MODEL --passes=a,b`: loads a model (ONNX, .pt2 or text IR), infers
// shapes, runs passes and prints the resulting text IR. The text-in/text-out
// tool that pass tests are written against (tests/passes/, scripts/update-pass-tests).
#include <algorithm>
#include <iostream>

#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/driver/commands.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

struct OptOptions {
  std::string model;
  std::string passes;
  std::string stop_after;
  std::string output;
  bool list_passes = false;
  bool no_shape_inference = false;
  bool verify_each = false;
  std::string precision = "fp32";
  PassManagerOptions pm;
};

void list_passes() {
  size_t width = 0;
  for (const PassInfo& p : all_passes()) width = std::max(width, p.name.size());
  for (const PassInfo& p : all_passes())
    std::cout << p.name << std::string(width - p.name.size() + 2, ' ') << phase_name(p.phase) << "  " << p.summary
              << "\n";
}

ExitCode run_opt(OptOptions o) {
  if (o.list_passes) {
    list_passes();
    return ExitCode::Ok;
  }
  if (o.model.empty()) throw InputError("tcc opt: a MODEL is required (or --list-passes)");
  // Flags are checked before the model is read so a typo fails fast.
  std::optional<Phase> stop;
  if (!o.stop_after.empty()) stop = parse_phase_or_throw(o.stop_after);
  auto passes = build_pipeline(o.passes, stop);
  o.pm.precision = precision_of(o.precision);

  auto model = load_model(o.model);
  if (!o.no_shape_inference) infer_shapes(*model->graph);
  if (o.verify_each) o.pm.verify = true;
  PassManager pm(std::move(passes), o.pm, std::cerr);
  pm.run(*model);

  write_output(o.output, print_model(*model));
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_opt(CLI::App& cmd) {
  auto o = std::make_shared<OptOptions>();
  cmd.add_option("model", o->model, "ONNX model, .pt2 archive or tcc text IR");
  cmd.add_option("--passes", o->passes, "Comma-separated passes to run (default: all, in pipeline order): " +
                                            known_passes());
  cmd.add_option("--stop-after", o->stop_after, "Stop after this phase: import, optimize, fuse, codegen");
  cmd.add_flag("--print-ir-after-all", o->pm.print_ir_after_all, "Print the IR to stderr after every pass");
  cmd.add_flag("--print-ir-after-change", o->pm.print_ir_after_change,
               "Print the IR to stderr after each pass that changed it");
  cmd.add_flag("--time-passes", o->pm.time_passes, "Print a table of pass times and counters to stderr");
  cmd.add_flag("--verify-each", o->verify_each, "Run the IR verifier after every pass (always on in debug builds)");
  cmd.add_flag("--no-shape-inference", o->no_shape_inference, "Keep the types the model declares");
  add_precision_option(cmd, o->precision);
  cmd.add_flag("--list-passes", o->list_passes, "List the passes (name, phase, summary) and exit");
  cmd.add_option("-o,--output", o->output, "Write the IR here instead of stdout");
  return [o]() { return run_opt(*o); };
}

}  // namespace tcc
