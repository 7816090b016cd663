// `tcc bench` and `tcc profile`: compile a model in each mode, time it on the
// GPU, print the mode table and write the reports (src/profiler/report.h).
//
//   tcc bench MODEL [--modes eager,default,reduce-overhead,max-autotune]
//                   [--inputs DIR | --shapes batch=8,...] [--report DIR]
//                   [--warmup N] [--iterations N | --duration S] [--check]
//   tcc profile MODEL --report DIR ...   bench plus CUPTI kernel tracing
//
// Each mode is compiled in process as `tcc compile --mode` would (eager: one kernel per node)
// and timed by profiler::bench_on_gpu; reduce-overhead and max-autotune replay
// a CUDA graph per binding of the symbolic dims. Without a GPU both commands say so and exit 2, but
// `--from-recorded FILE` (`tcc profile --replay FILE`) writes the reports of
// a recorded measurement, so the whole path from the command line to the
// report files runs anywhere.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "codegen/profiles.h"
#include "frontends/load_model.h"
#include "src/autotune/compile_autotune.h"
#include "src/compiler/scratch_dir.h"
#include "src/driver/commands.h"
#include "src/driver/run_support.h"
#include "src/interp/interpreter.h"
#include "src/log/log.h"
#include "src/profiler/gpu_bench.h"
#include "src/profiler/report.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"

namespace fs = std::filesystem;

namespace tcc {

namespace {

struct BenchOptions {
  bool profile = false;  // tcc profile: trace kernels, --report required
  std::string model;
  std::string modes = "eager,default,reduce-overhead";
  std::string inputs, shapes, report, recorded, device, disabled_passes;
  std::string precision = "fp32";
  std::vector<std::string> specialize;
  int warmup = 10, iterations = 0;
  double duration = 0;
  bool check = false;
  bool bound_inputs = false;
  double tune_budget = autotune::kDefaultTuneBudgetSeconds;
};

// Steps of each traced mode `tcc profile` records with CUPTI.
constexpr int kTracedSteps = 5;

std::vector<const CompileMode*> parse_modes(const std::string& spec) {
  std::vector<const CompileMode*> modes;
  for (const std::string& name : split(spec, ',')) {
    const CompileMode* m = &find_mode(name);
    if (std::find(modes.begin(), modes.end(), m) == modes.end()) modes.push_back(m);
  }
  return modes;
}

bool has_feature(const CompileMode& m, const std::string& feature) {
  return std::any_of(m.features.begin(), m.features.end(), [&](const Feature* f) { return f->name == feature; });
}

// The device profile whose name the driver's device name contains ("NVIDIA H100 80GB HBM3" -> h100).
std::string profile_for(const std::string& device_name) {
  std::string lower;
  for (char c : device_name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const DeviceProfile& d : all_devices())
    if (lower.find(d.name) != std::string::npos) return d.name;
  throw InputError("no device profile matches '" + device_name + "'; name one with --device");
}

// The values of the symbols the model's input dims are, at these inputs.
std::map<std::string, int64_t> symbol_sizes(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, int64_t> sizes;
  for (const Value* in : g.inputs()) {
    auto it = inputs.find(in->name());
    if (it == inputs.end() || !in->type().is_tensor()) continue;
    const Dims& dims = in->type().shape();
    for (size_t d = 0; d < dims.size() && d < it->second.shape().size(); ++d)
      if (dims[d].expr().is_symbol()) sizes.emplace(dims[d].expr().symbol_name(), it->second.shape()[d]);
  }
  return sizes;
}

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

ExitCode report(const BenchOptions& o, const profiler::Measurement& m) {
  std::cout << profiler::mode_table_text(profiler::summarize(m));
  if (!o.report.empty()) {
    profiler::write_reports(o.report, m);
    std::cout << "reports: " << (fs::path(o.report) / "report.md").string()
              << ", report.html, report.json, trace.json\n";
  }
  return ExitCode::Ok;
}

ExitCode run_bench(const BenchOptions& o) {
  const char* cmd = o.profile ? "tcc profile" : "tcc bench";
  if (o.profile && o.report.empty()) throw InputError(std::string(cmd) + ": --report DIR is required");
  if (!o.recorded.empty()) return report(o, profiler::read_measurement(o.recorded));
  if (o.model.empty()) throw InputError(std::string(cmd) + ": a MODEL is required (or a recorded measurement)");
  if (o.iterations > 0 && o.duration > 0)
    throw InputError(std::string(cmd) + ": give --iterations or --duration, not both");
  if (o.warmup < 0 || o.iterations < 0 || o.duration < 0)
    throw InputError(std::string(cmd) + ": --warmup, --iterations and --duration must not be negative");
  std::vector<const CompileMode*> modes = parse_modes(o.modes);
  if (!o.device.empty()) find_device(o.device);
  auto model = load_model(o.model);
  infer_shapes(*model->graph);
  const Graph& g = *model->graph;
  CompileOptions specialized;
  parse_specializations(o.specialize, specialized);
  std::map<std::string, Tensor> inputs =
      o.inputs.empty() ? random_inputs(g, parse_sizes(o.shapes, "--shapes"), 0) : read_inputs(g, o.inputs);
  if (o.inputs.empty()) feed_specializations(specialized.specialize, inputs);
  if (!tcc_cuda_available()) {
    std::cerr << cmd << ": no usable GPU here; " << (o.profile ? "--replay" : "--from-recorded")
              << " FILE writes the reports from a recorded measurement\n";
    return ExitCode::InputError;
  }

  profiler::Measurement m;
  m.model = o.model;
  m.device_name = profiler::gpu_name();
  std::string arch = profiler::gpu_arch();
  m.device = o.device.empty() ? profile_for(m.device_name) : o.device;
  m.date = now_iso8601();
  if (const char* commit = std::getenv("TCC_COMMIT")) m.commit = commit;
  m.source = std::string(cmd) + " on " + m.device_name +
             (o.disabled_passes.empty() ? "" : " without the passes " + o.disabled_passes);
  m.sizes = symbol_sizes(g, inputs);
  std::string hints;
  for (const auto& [name, v] : m.sizes) hints += (hints.empty() ? "" : ",") + name + "=" + std::to_string(v);

  std::vector<Tensor> expected;
  if (o.check) expected = Interpreter().run(g, inputs);
  bool all_match = true;
  ScratchDir scratch_dir("tcc-bench");
  const fs::path& scratch = scratch_dir.path;
  std::vector<profiler::BenchSettings> settings;
  for (const CompileMode* mode : modes) {
    std::string dir = (scratch / mode->name).string();
    CompileRequest req = module_request(o.model, dir, mode->name, hints, arch, m.device);
    req.tune_budget_s = o.tune_budget;
    if (!o.disabled_passes.empty()) req.disabled_passes = split(o.disabled_passes, ',');
    req.options.precision = precision_of(o.precision);
    req.options.specialize = specialized.specialize;
    std::vector<std::string> flags;
    if (mode_autotunes(*mode)) flags = {"--tune-budget", std::to_string(o.tune_budget)};
    if (!o.disabled_passes.empty()) flags.insert(flags.end(), {"--disable-passes", o.disabled_passes});
    if (o.precision != "fp32") flags.insert(flags.end(), {"--precision", o.precision});
    for (const std::string& spec : o.specialize) flags.insert(flags.end(), {"--specialize", spec});
    std::cerr << cmd << ": " << mode->name << ": compiling for this GPU (tcc compile";
    for (const std::string& flag : device_flags(arch, m.device)) std::cerr << " " << flag;
    for (const std::string& flag : flags) std::cerr << " " << flag;
    std::cerr << ")\n";
    double compile_s = compile_module(req);
    profiler::BenchSettings& s = settings.emplace_back();
    s.warmup = o.warmup;
    s.iterations = o.iterations;
    s.duration_s = o.duration;
    s.cuda_graph = has_feature(*mode, "cuda_graphs");
    s.bound_inputs = o.bound_inputs;
    std::cerr << cmd << ": " << mode->name << ": measuring\n";
    std::vector<Tensor> outs;
    m.modes.push_back(profiler::bench_on_gpu(dir, mode->name, inputs, s, o.check ? &outs : nullptr));
    m.modes.back().compile_s = compile_s;
    for (size_t i = 0; o.check && i < expected.size(); ++i) {
      OutputCheck c = i < outs.size() ? check_output(g.outputs()[i]->name(), expected[i], outs[i],
                                                     precision_of(o.precision))
                                      : OutputCheck{g.outputs()[i]->name(), 0, 0, 0, "missing"};
      std::cout << mode->name << ": " << c.name << ": " << (c.ok() ? "ok" : "MISMATCH") << " (max abs err "
                << fmt::format("{:.3g}", c.max_abs) << ", max rel err " << fmt::format("{:.3g}", c.max_rel)
                << (c.problem.empty() ? "" : ", " + c.problem) << ")\n";
      all_match &= c.ok();
    }
  }
  // Tracing comes after every mode is timed: CUPTI stays attached once it has been (trace_on_gpu).
  for (size_t i = 0; o.profile && i < modes.size(); ++i) {
    std::cerr << cmd << ": " << modes[i]->name << ": tracing " << kTracedSteps << " steps with CUPTI\n";
    profiler::trace_on_gpu((scratch / modes[i]->name).string(), inputs, settings[i], kTracedSteps, m.modes[i]);
  }
  report(o, m);
  if (!all_match) {
    std::cout << "outputs DIFFER from the reference interpreter\n";
    return ExitCode::GateTripped;
  }
  return ExitCode::Ok;
}

CommandRunner setup(CLI::App& cmd, bool profile) {
  auto o = std::make_shared<BenchOptions>();
  o->profile = profile;
  std::string modes;
  for (const CompileMode& m : all_modes()) modes += (modes.empty() ? "" : ", ") + m.name;
  cmd.add_option("model", o->model, "ONNX model, .pt2 archive or tcc text IR");
  cmd.add_option("--modes", o->modes, "Comma-separated modes to compare: " + modes)->capture_default_str();
  cmd.add_option("--inputs", o->inputs, "Directory of inputs: input_N.pb or <name>.npy");
  cmd.add_option("--shapes", o->shapes, "Without --inputs: random inputs with these symbolic sizes, e.g. batch=8 (others: 8)");
  cmd.add_option(
      "--report", o->report,
      std::string("Write report.md, report.html, report.json and trace.json here") + (profile ? " (required)" : ""));
  cmd.add_option("--warmup", o->warmup, "Untimed steps first")->capture_default_str();
  cmd.add_option("--iterations", o->iterations, "Timed steps (default: until the median is stable)");
  cmd.add_option("--duration", o->duration, "Time steps for this many seconds instead");
  cmd.add_option("--device", o->device, "Device profile for the roofline (default: from the GPU's name)");
  cmd.add_option("--tune-budget", o->tune_budget,
                 "Seconds of measuring each autotuning mode's compile may take (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--disable-passes", o->disabled_passes,
                 "Compile every mode without these graph passes (tcc compile --disable-passes), e.g. fuse_attention");
  add_precision_option(cmd, o->precision);
  add_specialize_option(cmd, o->specialize, true);
  cmd.add_flag("--check", o->check, "Compare each mode's outputs with the reference interpreter; exit 1 on a mismatch");
  cmd.add_flag("--bound-inputs", o->bound_inputs,
               "CUDA graph modes: time the replay alone, as for a caller that writes its inputs into the graph's "
               "captured buffers (default: each step copies new inputs there first)");
  cmd.add_option(profile ? "--replay" : "--from-recorded", o->recorded,
                 "Write the reports from a recorded measurement.json instead of measuring (no GPU needed)");
  return [o]() { return run_bench(*o); };
}

}  // namespace

CommandRunner setup_bench(CLI::App& cmd) { return setup(cmd, false); }
CommandRunner setup_profile(CLI::App& cmd) { return setup(cmd, true); }

}  // namespace tcc
