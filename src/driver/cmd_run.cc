// `tcc run MODEL --inputs DIR --reference`: executes a model on the CPU
// reference interpreter and writes its outputs, so users can compare tcc with
// ONNX Runtime or any other backend themselves.
//
// Inputs are read from DIR: ONNX test-case files (input_0.pb, input_1.pb, ...,
// matched by the tensor name they carry, else by position) or NumPy files named
// after the input (<name>.npy). Outputs are written as output_N.pb or
// <name>.npy.
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "src/driver/commands.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"

namespace fs = std::filesystem;

namespace tcc {

namespace {

struct RunOptions {
  std::string model;
  std::string inputs;
  std::string out_dir = "tcc-outputs";
  std::string format = "pb";
  bool reference = false;
};

std::string npy_file_name(const std::string& value_name) {
  std::string s = value_name;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':') c = '_';
  return s + ".npy";
}

std::map<std::string, Tensor> read_inputs(const Graph& g, const std::string& dir) {
  std::map<std::string, Tensor> inputs;
  if (!fs::is_directory(dir)) throw InputError(dir + ": --inputs must be a directory");
  std::vector<const Value*> needed;
  for (const Value* v : g.inputs())
    if (!v->is_initializer()) needed.push_back(v);
  // ONNX test-case layout: input_<i>.pb.
  static const std::regex pb_name(R"(input_(\d+)\.pb)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, pb_name)) continue;
    size_t index = std::stoul(m[1]);
    std::string name;
    Tensor t = read_tensor_pb(entry.path().string(), &name);
    if (name.empty() || !g.find_local(name)) {
      if (index >= needed.size())
        throw InputError(entry.path().string() + ": the model has only " + std::to_string(needed.size()) +
                         " inputs");
      name = needed[index]->name();
    }
    inputs[name] = std::move(t);
  }
  for (const Value* v : needed) {
    fs::path npy = fs::path(dir) / npy_file_name(v->name());
    if (!inputs.count(v->name()) && fs::exists(npy)) inputs[v->name()] = read_npy(npy.string());
  }
  return inputs;
}

ExitCode run_reference(const RunOptions& o) {
  auto model = load_model(o.model);
  infer_shapes(*model->graph);
  std::map<std::string, Tensor> inputs =
      o.inputs.empty() ? std::map<std::string, Tensor>{} : read_inputs(*model->graph, o.inputs);
  Interpreter interp;
  std::vector<Tensor> outs = interp.run(*model->graph, inputs);
  fs::create_directories(o.out_dir);
  const auto& outputs = model->graph->outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = outputs[i]->name();
    fs::path path = fs::path(o.out_dir) /
                    (o.format == "npy" ? npy_file_name(name) : "output_" + std::to_string(i) + ".pb");
    if (o.format == "npy") write_npy(path.string(), outs[i]);
    else write_tensor_pb(path.string(), outs[i], name);
    std::cout << name << ": " << dtype_name(outs[i].dtype()) << shape_str(outs[i].shape()) << " -> "
              << path.string() << "\n";
  }
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_run(CLI::App& cmd) {
  auto o = std::make_shared<RunOptions>();
  cmd.add_option("model", o->model, "ONNX model or tcc text IR")->required();
  cmd.add_option("--inputs", o->inputs, "Directory of inputs: input_N.pb (ONNX test layout) or <name>.npy");
  cmd.add_flag("--reference", o->reference, "Run on the CPU reference interpreter");
  cmd.add_option("-o,--output-dir", o->out_dir, "Where outputs are written")->capture_default_str();
  cmd.add_option("--format", o->format, "Output file format")
      ->check(CLI::IsMember({"pb", "npy"}))
      ->capture_default_str();
  return [o]() -> ExitCode {
    if (!o->reference) {
      std::cerr << "tcc run: running on the GPU is not built yet (the GPU runtime has not landed); "
                   "use --reference to run on the CPU\n";
      return ExitCode::InputError;
    }
    return run_reference(*o);
  };
}

}  // namespace tcc
