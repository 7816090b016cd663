// `tcc run MODEL|MODULE`: runs a model and writes its outputs, on one of three
// targets:
//   (default)    the compiled module on the GPU (a MODEL is compiled first);
//   --host       the compiled module on the CPU through host.so;
//   --reference  the model on the CPU reference interpreter.
// --check compares every output of a module run with the reference
// interpreter's on the same inputs (tolerances per dtype: run_support.h),
// prints the largest absolute and relative error per output and exits 1 on a
// mismatch.
//
// Inputs are read from --inputs DIR (input_N.pb or <name>.npy), or made at
// random with --shapes SYMBOL=SIZE,... Outputs are written as output_N.pb or
// <name>.npy.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "src/driver/commands.h"
#include "src/driver/run_support.h"
#include "src/interp/interpreter.h"
#include "src/profiler/gpu_bench.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"

namespace fs = std::filesystem;

namespace tcc {

namespace {

struct RunOptions {
  std::string target;  // a model file or a module directory
  std::string model;   // the reference model of a module (default: the one its manifest names)
  std::string inputs;
  std::string shapes;
  std::string out_dir;
  std::string format = "pb";
  bool reference = false;
  bool host = false;
  bool check = false;
};

// The model a module was compiled from: --model, else the manifest's `model`
// as given to `tcc compile` (relative to the working directory, or to the module).
std::string reference_model(const RunOptions& o) {
  if (!is_module_dir(o.target)) return o.target;
  if (!o.model.empty()) return o.model;
  std::ifstream in(fs::path(o.target) / "manifest.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  std::string named =
      !j.is_discarded() && j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  for (const fs::path& p : {fs::path(named), fs::path(o.target) / named})
    if (!named.empty() && fs::is_regular_file(p)) return p.string();
  throw InputError(o.target + "/manifest.json: the model it was compiled from ('" + named +
                   "') is not found; give it with --model FILE");
}

void write_outputs(const RunOptions& o, const Graph& g, const std::vector<Tensor>& outs) {
  std::string dir = o.out_dir.empty() ? "tcc-outputs" : o.out_dir;
  fs::create_directories(dir);
  const auto& outputs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = outputs[i]->name();
    fs::path path = fs::path(dir) / (o.format == "npy" ? npy_file_name(name) : "output_" + std::to_string(i) + ".pb");
    if (o.format == "npy")
      write_npy(path.string(), outs[i]);
    else
      write_tensor_pb(path.string(), outs[i], name);
    std::cout << name << ": " << dtype_name(outs[i].dtype()) << shape_str(outs[i].shape()) << " -> " << path.string()
              << "\n";
  }
}

// A temporary module directory, removed when the run ends.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "tcc-run-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw InputError("cannot create a temporary directory in " + pattern);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

ExitCode run(const RunOptions& o) {
  if (o.reference + o.host > 1) throw InputError("tcc run: choose one of --reference and --host");
  if (o.reference && o.check) throw InputError("tcc run: --check compares a module run with --reference's outputs");
  if (!o.reference && !o.host && !tcc_cuda_available()) {
    std::cerr << "tcc run: no usable GPU here; --host runs the module on the CPU, --reference runs the reference "
                 "interpreter\n";
    return ExitCode::InputError;
  }
  auto model = load_model(reference_model(o));
  infer_shapes(*model->graph);
  const Graph& g = *model->graph;
  std::map<std::string, Tensor> inputs =
      o.inputs.empty() ? random_inputs(g, parse_sizes(o.shapes, "--shapes"), 0) : read_inputs(g, o.inputs);

  std::vector<Tensor> outs;
  if (o.reference) {
    outs = Interpreter().run(g, inputs);
  } else {
    std::unique_ptr<ScratchDir> scratch;
    std::string module = o.target;
    if (!is_module_dir(o.target)) {
      scratch = std::make_unique<ScratchDir>();
      module = (scratch->path / "module").string();
      compile_module(o.target, module, "default", o.shapes, o.host ? "" : profiler::gpu_arch());
    }
    outs = o.host ? profiler::run_on_host(module, inputs) : profiler::run_on_gpu(module, inputs);
  }
  if (!o.check) {
    write_outputs(o, g, outs);
    return ExitCode::Ok;
  }

  std::vector<Tensor> expected = Interpreter().run(g, inputs);
  bool ok = expected.size() == outs.size();
  for (size_t i = 0; i < expected.size() && i < outs.size(); ++i) {
    OutputCheck c = check_output(g.outputs()[i]->name(), expected[i], outs[i]);
    Tolerance tol = tolerance_for(expected[i].dtype());
    if (!c.problem.empty())
      std::cout << c.name << ": MISMATCH " << c.problem << "\n";
    else
      std::cout << c.name << ": " << (c.ok() ? "ok" : "MISMATCH") << "  max abs err "
                << fmt::format("{:.3g}", c.max_abs) << ", max rel err " << fmt::format("{:.3g}", c.max_rel) << "  ("
                << dtype_name(expected[i].dtype()) << " tolerance " << fmt::format("{:g}", tol.abs) << " + "
                << fmt::format("{:g}", tol.rel) << "*|ref|"
                << (c.ok() ? "" : "; " + std::to_string(c.mismatches) + " elements outside") << ")\n";
    ok &= c.ok();
  }
  std::cout << (ok ? "outputs match the reference interpreter\n" : "outputs DIFFER from the reference interpreter\n");
  return ok ? ExitCode::Ok : ExitCode::GateTripped;
}

}  // namespace

CommandRunner setup_run(CLI::App& cmd) {
  auto o = std::make_shared<RunOptions>();
  cmd.add_option("model", o->target, "ONNX model, tcc text IR, or a module directory from tcc compile")->required();
  cmd.add_option("--inputs", o->inputs, "Directory of inputs: input_N.pb (ONNX test layout) or <name>.npy");
  cmd.add_option("--shapes", o->shapes, "Without --inputs: random inputs with these symbolic sizes, e.g. batch=8 (others: 8)");
  cmd.add_option("--model", o->model, "The reference model of a module directory (default: the one it names)");
  cmd.add_flag("--reference", o->reference, "Run the model on the CPU reference interpreter");
  cmd.add_flag("--host", o->host, "Run the compiled module on the CPU (host.so) instead of the GPU");
  cmd.add_flag("--check", o->check, "Compare every output with the reference interpreter; exit 1 on a mismatch");
  cmd.add_option("-o,--output-dir", o->out_dir, "Where outputs are written (default tcc-outputs; not with --check)");
  cmd.add_option("--format", o->format, "Output file format")
      ->check(CLI::IsMember({"pb", "npy"}))
      ->capture_default_str();
  return [o]() { return run(*o); };
}

}  // namespace tcc
