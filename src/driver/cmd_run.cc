// `tcc run MODEL|MODULE`: runs a model and writes its outputs, on one of three
// targets:
//   (default)    the compiled module on the GPU (a MODEL is compiled first);
//   --host       the compiled module on the CPU through host.so;
//   --reference  the model on the CPU reference interpreter.
// --check compares every output of a module run with the reference
// interpreter's on the same inputs (tolerances per dtype: run_support.h),
// prints the largest absolute and relative error per output and exits 1 on a
// mismatch. --check-steps does so for every value each step writes too (the
// reference computes every value of the model), as polygraphy marks every
// layer an output: the first step that disagrees is where to look.
//
// Inputs are read from --inputs DIR (input_N.pb or <name>.npy; a sequence or
// optional input as a SequenceProto or OptionalProto), or made at random with
// --shapes SYMBOL=SIZE,... Outputs are written as output_N.pb or <name>.npy.
// A module takes and returns a sequence or optional as the tensors its
// manifest's structured_inputs and structured_outputs flatten it into: run
// feeds them and assembles the outputs back (a model is compiled for its
// inputs' structure, src/compiler/structured_io.h). --random-offset K runs as a module's call K (docs/MODULE.md,
// "Random ops"): the random ops draw what they draw in that call, on every
// target, so a run of a training loop's step K can be reproduced and checked.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <tuple>
#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "frontends/onnx/value_io.h"
#include "src/compiler/scratch_dir.h"
#include "src/driver/commands.h"
#include "src/driver/run_support.h"
#include "src/interp/interpreter.h"
#include "src/log/log.h"
#include "src/module/manifest_format.h"
#include "src/module/structured_values.h"
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
  std::string precision = "fp32";  // when the target is a model: what it is compiled at
  std::vector<std::string> specialize;  // likewise: --specialize, which random inputs then hold
  uint64_t random_offset = 0;
  bool reference = false;
  bool host = false;
  bool check = false;
  bool check_steps = false;
};

// A module's JSON file (manifest.json, report.json), or a discarded value where
// it does not parse (load_module says what is wrong with a module when the run starts).
nlohmann::json read_module_json(const std::string& module_dir, const char* file) {
  std::ifstream in(fs::path(module_dir) / file);
  return nlohmann::json::parse(in, nullptr, false);
}

// The first `shown` names, then how many there are in all ("a, b, c, ... (9 nodes)").
std::string abbreviated(const std::vector<std::string>& names, size_t shown, const std::string& noun) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < shown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > shown) s += ", ... (" + std::to_string(names.size()) + noun + ")";
  return s;
}

// Each step's source nodes, by the name of its node, from the module's
// report.json (`steps`); empty where the report is missing or has none.
std::map<std::string, std::vector<std::string>> step_sources(const std::string& module_dir) {
  nlohmann::json j = read_module_json(module_dir, "report.json");
  std::map<std::string, std::vector<std::string>> out;
  if (j.is_discarded() || !j.contains("steps") || !j["steps"].is_array()) return out;
  for (const nlohmann::json& s : j["steps"]) {
    if (!s.is_object() || !s.contains("node") || !s["node"].is_string() || !s.contains("source_nodes")) continue;
    std::vector<std::string>& nodes = out[s["node"].get<std::string>()];
    for (const nlohmann::json& n : s["source_nodes"])
      if (n.is_string()) nodes.push_back(n.get<std::string>());
  }
  return out;
}

// --check-steps: each step's written values against the reference's values of
// the same names (values tcc's passes made have no counterpart and are skipped).
class StepChecker {
 public:
  // `sources`: the source nodes of each step, by its node's name.
  // `precision`: the module's; its low-precision values are compared in the reference's dtype.
  StepChecker(std::map<std::string, Tensor> reference, std::map<std::string, std::vector<std::string>> sources,
              Precision precision)
      : reference_(std::move(reference)), sources_(std::move(sources)), precision_(precision) {}

  void operator()(const std::string& kernel, const std::string& node, const std::map<std::string, Tensor>& written) {
    Row row{rows_.size(), kernel.empty() ? "host: " + node : kernel, {}, {}};
    for (const auto& [name, t] : written) {
      auto it = reference_.find(name);
      if (it == reference_.end()) continue;
      const Tensor& expected = it->second;
      OutputCheck c = check_output(name, expected, t.dtype() == expected.dtype() ? t : t.cast(expected.dtype()),
                                   precision_);
      row.compared.push_back(c);
      if (!c.ok() && !first_bad_) first_bad_ = rows_.size();
    }
    auto n = sources_.find(node);
    row.nodes = n != sources_.end() ? n->second : std::vector<std::string>{node};
    rows_.push_back(std::move(row));
  }

  // The table, then the first step that disagrees; false when one does.
  bool report(std::ostream& os) const {
    os << "step  " << fmt::format("{:<24}", "kernel") << " values  max abs err  max rel err  result    nodes\n";
    size_t skipped = 0;
    for (const Row& r : rows_) {
      if (r.compared.empty()) {
        ++skipped;
        continue;
      }
      double abs = 0, rel = 0;
      bool ok = true;
      for (const OutputCheck& c : r.compared) {
        abs = std::max(abs, c.max_abs);
        rel = std::max(rel, c.max_rel);
        ok &= c.ok();
      }
      os << fmt::format("{:>4}  {:<24} {:>6}  {:>11.3g}  {:>11.3g}  {:<8}  ", r.index, r.label, r.compared.size(), abs,
                        rel, ok ? "ok" : "MISMATCH")
         << node_list(r.nodes) << "\n";
    }
    if (skipped > 0)
      os << skipped << " step(s) wrote only values tcc's passes made, with no counterpart in the model\n";
    if (!first_bad_) {
      os << "every step matches the reference interpreter\n";
      return true;
    }
    const Row& r = rows_[*first_bad_];
    os << "first mismatch: step " << r.index << " (" << r.label << "), which computes " << node_list(r.nodes) << "\n";
    for (const OutputCheck& c : r.compared)
      if (!c.ok())
        os << "  " << c.name << ": "
           << (c.problem.empty() ? fmt::format("max abs err {:.3g}, max rel err {:.3g}, {} elements outside tolerance",
                                               c.max_abs, c.max_rel, c.mismatches)
                                 : c.problem)
           << "\n";
    return false;
  }

 private:
  struct Row {
    size_t index;
    std::string label;
    std::vector<std::string> nodes;
    std::vector<OutputCheck> compared;
  };
  static std::string node_list(const std::vector<std::string>& nodes) { return abbreviated(nodes, 3, " nodes"); }
  std::map<std::string, Tensor> reference_;
  std::map<std::string, std::vector<std::string>> sources_;
  Precision precision_;
  std::vector<Row> rows_;
  std::optional<size_t> first_bad_;
};

// The names of a manifest's `inputs` or `outputs`, as far as they are well formed.
std::vector<std::string> signature_names(const nlohmann::json& manifest, const char* key) {
  std::vector<std::string> names;
  if (manifest.is_discarded() || !manifest.contains(key) || !manifest[key].is_array()) return names;
  for (const nlohmann::json& v : manifest[key])
    if (v.is_object() && v.contains("name") && v["name"].is_string()) names.push_back(v["name"].get<std::string>());
  return names;
}

// The inputs a module run takes, from the reference's: the same, and any
// module input the reference model holds as a constant (a --train step takes
// its parameters as inputs; the training graph --emit-onnx writes holds them
// as initializers) gets that constant. A module that does not compute the
// reference's outputs is refused, naming both.
// The tensors of structured value s, in order.
void leaf_names(const StructuredValue& s, std::vector<std::string>& out) {
  if (s.kind == StructuredValue::Kind::Tensor) out.push_back(s.name);
  for (const StructuredValue& e : s.elements) leaf_names(e, out);
}

const StructuredValue* structure_of(const std::vector<StructuredValue>& list, const std::string& name) {
  auto it = std::find_if(list.begin(), list.end(), [&](const StructuredValue& v) { return v.name == name; });
  return it == list.end() ? nullptr : &*it;
}

// The values of `named` as the module takes or returns them: each one the
// manifest's structure lists flattened into its tensors.
std::map<std::string, Tensor> flattened(const std::map<std::string, Tensor>& named,
                                        const std::vector<StructuredValue>& structure) {
  std::map<std::string, Tensor> flat;
  for (const auto& [name, t] : named) {
    if (const StructuredValue* s = structure_of(structure, name)) flatten_structured(*s, t, flat);
    else flat[name] = t;
  }
  return flat;
}

std::map<std::string, Tensor> module_inputs(const std::string& module_dir, const std::string& model_path,
                                            const Graph& g, const std::map<std::string, Tensor>& inputs) {
  nlohmann::json manifest = read_module_json(module_dir, kManifestFile);
  std::vector<StructuredValue> structured = read_structured_list(manifest, "structured_outputs");
  std::vector<std::string> outputs = signature_names(manifest, "outputs"), expected;
  for (const Value* v : g.outputs()) {
    if (const StructuredValue* s = structure_of(structured, v->name())) leaf_names(*s, expected);
    else expected.push_back(v->name());
  }
  if (!outputs.empty() && outputs != expected)
    throw InputError(module_dir + ": the module computes " + abbreviated(outputs, 4, "") + ", the reference model " +
                     model_path + " computes " + abbreviated(expected, 4, "") +
                     "; a module compiled with --train computes the training step: give the graph that "
                     "`tcc compile --train --emit-onnx FILE` wrote with --model FILE");
  std::map<std::string, Tensor> given = flattened(inputs, read_structured_list(manifest, "structured_inputs"));
  for (const std::string& name : signature_names(manifest, "inputs")) {
    const Value* v = g.find_local(name);
    if (!given.count(name) && v && v->is_initializer()) given.emplace(name, v->initializer());
  }
  return given;
}

// The --precision a module was compiled at (fp32 where its manifest predates
// the field or does not parse: load_module reports a broken manifest).
Precision module_precision(const std::string& module_dir) {
  nlohmann::json j = read_module_json(module_dir, kManifestFile);
  if (j.is_discarded() || !j.contains("precision") || !j["precision"].is_string()) return Precision::FP32;
  return parse_precision(j["precision"].get<std::string>()).value_or(Precision::FP32);
}

// The graph a module computes: --model, else the manifest's `model_path`
// (the file compile read, or with --train the training graph --emit-onnx
// wrote, relative to the module), else its `model` name in the working
// directory or the module.
std::string reference_model(const RunOptions& o) {
  if (!is_module_dir(o.target)) return o.target;
  if (!o.model.empty()) return o.model;
  nlohmann::json j = read_module_json(o.target, kManifestFile);
  auto field = [&](const char* key) {
    return !j.is_discarded() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
  };
  std::string path = field("model_path"), named = field("model");
  if (!path.empty() && fs::is_regular_file(fs::path(o.target) / path)) return (fs::path(o.target) / path).string();
  for (const fs::path& p : {fs::path(named), fs::path(o.target) / named})
    if (!named.empty() && fs::is_regular_file(p)) return p.string();
  throw InputError(o.target + "/manifest.json: the graph it computes ('" + (path.empty() ? named : path) +
                   "') is not found; give it with --model FILE");
}

// A sequence's or optional's structure in words: what --check compares first.
std::string describe_value(const Tensor& t) {
  if (t.kind() == Tensor::Kind::Tensor) return "a tensor";
  std::string s = t.is_sequence() ? "a sequence of " + std::to_string(t.elements().size()) + " (" : "an optional (";
  for (size_t i = 0; i < t.elements().size(); ++i) s += (i ? ", " : "") + describe_value(t.elements()[i]);
  return s + ")";
}

// The element tensors of expected and actual values of one structure, named
// as the module names them.
void add_elements(const std::string& name, const Tensor& expected, const Tensor& actual,
                  std::vector<std::tuple<std::string, Tensor, Tensor>>& out) {
  if (expected.kind() == Tensor::Kind::Tensor) {
    out.emplace_back(name, expected, actual);
    return;
  }
  for (size_t i = 0; i < expected.elements().size(); ++i)
    add_elements(name + "." + std::to_string(i), expected.elements()[i], actual.elements()[i], out);
}

void write_outputs(const RunOptions& o, const Graph& g, const std::vector<Tensor>& outs) {
  std::string dir = o.out_dir.empty() ? "tcc-outputs" : o.out_dir;
  fs::create_directories(dir);
  const auto& outputs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = outputs[i]->name();
    fs::path path = fs::path(dir) / (o.format == "npy" ? npy_file_name(name) : "output_" + std::to_string(i) + ".pb");
    if (o.format == "npy" && outs[i].kind() != Tensor::Kind::Tensor)
      throw InputError("output '" + name + "' is a sequence or optional, which .npy cannot hold: write .pb files");
    if (o.format == "npy")
      write_npy(path.string(), outs[i]);
    else
      write_value_pb(path.string(), outs[i], name);
    std::cout << name << ": " << (outs[i].is_sequence()   ? "sequence of " + std::to_string(outs[i].elements().size())
                                  : outs[i].is_optional() ? std::string(outs[i].elements().empty() ? "absent optional"
                                                                                                   : "optional")
                                                          : std::string(dtype_name(outs[i].dtype())) + shape_str(outs[i].shape()))
              << " -> " << path.string() << "\n";
  }
}

ExitCode run(const RunOptions& o) {
  if (o.reference + o.host > 1) throw InputError("tcc run: choose one of --reference and --host");
  if (o.reference && (o.check || o.check_steps))
    throw InputError("tcc run: --check and --check-steps compare a module run with --reference's outputs");
  bool check = o.check || o.check_steps;
  if (!o.reference && !o.host && !tcc_cuda_available()) {
    std::cerr << "tcc run: no usable GPU here; --host runs the module on the CPU, --reference runs the reference "
                 "interpreter\n";
    return ExitCode::InputError;
  }
  const std::string model_path = reference_model(o);
  auto model = load_model(model_path);
  infer_shapes(*model->graph);
  const Graph& g = *model->graph;
  CompileOptions specialized;
  parse_specializations(o.specialize, specialized);
  std::map<std::string, Tensor> inputs =
      o.inputs.empty() ? random_inputs(g, parse_sizes(o.shapes, "--shapes"), 0) : read_inputs(g, o.inputs);
  if (o.inputs.empty()) feed_specializations(specialized.specialize, inputs);

  Interpreter reference;
  reference.set_random_offset(o.random_offset);
  std::vector<Tensor> outs, expected;
  std::optional<StepChecker> steps;
  Precision precision = Precision::FP32;
  if (o.reference) {
    outs = reference.run(g, inputs);
  } else {
    std::unique_ptr<ScratchDir> scratch;
    std::string module = o.target;
    if (!is_module_dir(o.target)) {
      scratch = std::make_unique<ScratchDir>("tcc-run");
      module = (scratch->path / "module").string();
      std::string hints = structure_hints(inputs);
      std::string shape_hints = o.shapes.empty() ? hints : hints.empty() ? o.shapes : o.shapes + "," + hints;
      CompileRequest req = module_request(o.target, module, "default", shape_hints, o.host ? "" : profiler::gpu_arch());
      req.options.precision = precision_of(o.precision);
      req.options.specialize = specialized.specialize;
      compile_module(req);
    }
    precision = module_precision(module);
    profiler::StepInspector inspect;
    if (o.check_steps) {
      std::map<std::string, Tensor> values;
      expected = reference.run(g, inputs, &values);
      steps.emplace(std::move(values), step_sources(module), precision);
      inspect = std::ref(*steps);
    }
    std::map<std::string, Tensor> given = module_inputs(module, model_path, g, inputs);
    std::vector<Tensor> flat = o.host ? profiler::run_on_host(module, given, o.random_offset, inspect)
                                      : profiler::run_on_gpu(module, given, o.random_offset, inspect);
    // The model's outputs, each structured one assembled from the module's tensors.
    nlohmann::json manifest = read_module_json(module, kManifestFile);
    std::vector<std::string> names = signature_names(manifest, "outputs");
    std::map<std::string, Tensor> by_name;
    for (size_t i = 0; i < flat.size() && i < names.size(); ++i) by_name[names[i]] = flat[i];
    std::vector<StructuredValue> structured = read_structured_list(manifest, "structured_outputs");
    for (const Value* v : g.outputs()) {
      const StructuredValue* s = structure_of(structured, v->name());
      outs.push_back(s ? assemble_structured(*s, by_name) : by_name.count(v->name()) ? by_name.at(v->name()) : Tensor());
    }
  }
  if (!check) {
    write_outputs(o, g, outs);
    return ExitCode::Ok;
  }

  if (!steps) expected = reference.run(g, inputs);
  bool steps_ok = !steps || steps->report(std::cout);
  // Sequences and optionals compare element by element, `ys.0`, `ys.1`, ...
  std::vector<std::tuple<std::string, Tensor, Tensor>> compared;
  bool ok = expected.size() == outs.size();
  for (size_t i = 0; i < expected.size() && i < outs.size(); ++i) {
    const std::string& name = g.outputs()[i]->name();
    if (expected[i].kind() == Tensor::Kind::Tensor) {
      compared.emplace_back(name, expected[i], outs[i]);
      continue;
    }
    std::string want = describe_value(expected[i]), got = describe_value(outs[i]);
    if (want != got) {
      std::cout << name << ": MISMATCH " << got << ", the reference gives " << want << "\n";
      ok = false;
      continue;
    }
    add_elements(name, expected[i], outs[i], compared);
  }
  for (const auto& [name, want, got] : compared) {
    OutputCheck c = check_output(name, want, got, precision);
    Tolerance tol = tolerance_for(want.dtype(), precision);
    if (!c.problem.empty())
      std::cout << c.name << ": MISMATCH " << c.problem << "\n";
    else
      std::cout << c.name << ": " << (c.ok() ? "ok" : "MISMATCH") << "  max abs err "
                << fmt::format("{:.3g}", c.max_abs) << ", max rel err " << fmt::format("{:.3g}", c.max_rel) << "  ("
                << dtype_name(want.dtype()) << (precision == Precision::FP32 ? "" : " at " + std::string(precision_name(precision)))
                << " tolerance " << fmt::format("{:g}", tol.abs) << " + "
                << fmt::format("{:g}", tol.rel) << "*|ref|"
                << (c.ok() ? "" : "; " + std::to_string(c.mismatches) + " elements outside") << ")\n";
    ok &= c.ok();
  }
  std::cout << (ok ? "outputs match the reference interpreter\n"
                  : steps ? "outputs DIFFER from the reference interpreter\n"
                          : "outputs DIFFER from the reference interpreter; --check-steps names the first step "
                            "that disagrees\n");
  return ok && steps_ok ? ExitCode::Ok : ExitCode::GateTripped;
}

}  // namespace

CommandRunner setup_run(CLI::App& cmd) {
  auto o = std::make_shared<RunOptions>();
  cmd.add_option("model", o->target, "ONNX model, .pt2 archive, tcc text IR, or a module directory from tcc compile")->required();
  cmd.add_option("--inputs", o->inputs, "Directory of inputs: input_N.pb (ONNX test layout) or <name>.npy");
  cmd.add_option("--shapes", o->shapes, "Without --inputs: random inputs with these symbolic sizes, e.g. batch=8 (others: 8)");
  cmd.add_option("--model", o->model, "The reference model of a module directory (default: the one it names)");
  cmd.add_flag("--reference", o->reference, "Run the model on the CPU reference interpreter");
  add_precision_option(cmd, o->precision);
  add_specialize_option(cmd, o->specialize, true);
  cmd.add_flag("--host", o->host, "Run the compiled module on the CPU (host.so) instead of the GPU");
  cmd.add_option("--random-offset", o->random_offset,
                 "Run as the module's call K: the random ops draw what that call draws (default 0, the first)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--check", o->check, "Compare every output with the reference interpreter; exit 1 on a mismatch");
  cmd.add_flag("--check-steps", o->check_steps,
               "--check, and every value each kernel step writes too: shows the first step that disagrees");
  cmd.add_option("-o,--output-dir", o->out_dir, "Where outputs are written (default tcc-outputs; not with --check)");
  cmd.add_option("--format", o->format, "Output file format")
      ->check(CLI::IsMember({"pb", "npy"}))
      ->capture_default_str();
  return [o]() { return run(*o); };
}

}  // namespace tcc
