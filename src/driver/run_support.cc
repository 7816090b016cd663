// Shared by the commands that run models (run_support.h).
#include "src/driver/run_support.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <regex>

#include "codegen/module_writer.h"
#include "src/driver/commands.h"
#include "frontends/onnx/tensor_io.h"
#include "frontends/onnx/value_io.h"
#include "src/diag/errors.h"
#include "src/ir/sym.h"

namespace fs = std::filesystem;

namespace tcc {

std::string npy_file_name(const std::string& value_name) {
  std::string s = value_name;
  for (char& c : s)
    if (c == '/' || c == '\\' || c == ':') c = '_';
  return s + ".npy";
}

namespace {

// A graph input with a default (an initializer of its name) that nothing else
// gave keeps the default, given explicitly: a module compiled from the graph
// takes it as an input (a training step's parameters).
void add_defaults(const Graph& g, std::map<std::string, Tensor>& inputs) {
  for (const Value* v : g.inputs())
    if (v->is_initializer() && !inputs.count(v->name())) inputs.emplace(v->name(), v->initializer());
}

}  // namespace

std::map<std::string, Tensor> read_inputs(const Graph& g, const std::string& dir) {
  std::map<std::string, Tensor> inputs;
  if (!fs::is_directory(dir)) throw InputError(dir + ": --inputs must be a directory");
  std::vector<const Value*> needed;
  for (const Value* v : g.inputs())
    if (!v->is_initializer()) needed.push_back(v);
  static const std::regex pb_name(R"(input_(\d+)\.pb)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch m;
    std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, pb_name)) continue;
    size_t index = std::stoul(m[1]);
    std::string name;
    if (index < needed.size() && !needed[index]->type().is_tensor()) {  // a SequenceProto or OptionalProto
      inputs[needed[index]->name()] = read_value_pb(entry.path().string(), needed[index]->type());
      continue;
    }
    Tensor t = read_tensor_pb(entry.path().string(), &name);
    if (name.empty() || !g.find_local(name)) {
      if (index >= needed.size())
        throw InputError(entry.path().string() + ": the model has only " + std::to_string(needed.size()) + " inputs");
      name = needed[index]->name();
    }
    inputs[name] = std::move(t);
  }
  for (const Value* v : needed) {
    fs::path npy = fs::path(dir) / npy_file_name(v->name());
    if (!inputs.count(v->name()) && fs::exists(npy)) inputs[v->name()] = read_npy(npy.string());
  }
  add_defaults(g, inputs);
  return inputs;
}

std::map<std::string, Tensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& sizes,
                                            unsigned seed) {
  std::map<std::string, Tensor> inputs;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-1, 1);
  std::uniform_int_distribution<int> small(0, 3);
  const std::map<std::string, int64_t> env = hinted_sizes(g, sizes, kUnhintedRunSize, "--shapes");
  for (const Value* in : g.inputs()) {
    if (in->is_initializer()) continue;
    if (!in->type().is_tensor())
      throw InputError(g.file() + ": input '" + in->name() + "' is not a tensor; give --inputs DIR");
    std::vector<int64_t> shape;
    for (const Dim& d : in->type().shape()) {
      std::optional<int64_t> n = d.expr().evaluate(env);
      if (!n) throw InputError(g.file() + ": input '" + in->name() + "' has a dim tcc cannot size; give --inputs DIR");
      shape.push_back(*n);
    }
    Tensor t(in->type().dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, is_float(t.dtype()) ? real(rng) : small(rng));
    inputs.emplace(in->name(), std::move(t));
  }
  add_defaults(g, inputs);
  return inputs;
}

void feed_specializations(const std::map<std::string, std::vector<double>>& values,
                          std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, given] : values) {
    auto it = inputs.find(name);
    if (it == inputs.end() || it->second.numel() != static_cast<int64_t>(given.size())) continue;
    for (size_t i = 0; i < given.size(); ++i) it->second.set_f64(static_cast<int64_t>(i), given[i]);
  }
}

bool is_module_dir(const std::string& path) { return fs::is_regular_file(fs::path(path) / kManifestFile); }

const std::vector<std::string> kCubinArchs = {"sm_80", "sm_86", "sm_89", "sm_90"};

namespace {

bool has_cubin_target(const std::string& arch) {
  return std::find(kCubinArchs.begin(), kCubinArchs.end(), arch) != kCubinArchs.end();
}

}  // namespace

std::vector<std::string> device_flags(const std::string& device_arch, const std::string& device) {
  std::vector<std::string> flags = {"--no-host"};
  if (has_cubin_target(device_arch)) flags.insert(flags.end(), {"--arch", device_arch, "--no-ptx"});
  if (!device.empty()) flags.insert(flags.end(), {"--device", device});
  return flags;
}

CompileRequest module_request(const std::string& model, const std::string& dir, const std::string& mode,
                              const std::string& shape_hints, const std::string& device_arch,
                              const std::string& device) {
  CompileRequest req;
  req.model = model;
  req.output = dir;
  req.options.mode = mode;
  parse_shape_hints(shape_hints, req.options);
  if (!device_arch.empty()) {
    req.options.host = false;
    if (has_cubin_target(device_arch)) {
      req.options.archs = {device_arch};
      req.options.ptx = false;
    }
    if (!device.empty()) req.options.device = device;
  }
  return req;
}

double compile_module(const CompileRequest& request) {
  auto start = std::chrono::steady_clock::now();
  compile(request);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Tolerance tolerance_for(DType dtype, Precision precision) {
  Tolerance t;
  switch (dtype) {
    case DType::F64: t = {1e-9, 1e-9}; break;
    case DType::F32: t = {1e-4, 1e-4}; break;
    case DType::F16: t = {1e-2, 1e-2}; break;
    case DType::BF16: t = {2e-2, 2e-2}; break;
    // One step of the 8-bit floats' 3 or 2 mantissa bits: a last-bit difference
    // before the rounding may flip it.
    case DType::F8E4M3FN: case DType::F8E4M3FNUZ: t = {0.125, 0.125}; break;
    case DType::F8E5M2: case DType::F8E5M2FNUZ: t = {0.25, 0.25}; break;
    case DType::F4E2M1: t = {0.5, 0.5}; break;  // its one mantissa bit's step
    default: return {0, 0};  // integers and bool: exact
  }
  // tf32 and fp16 keep 10 bits of mantissa in their products, bf16 7.
  double p = precision == Precision::BF16 ? 5e-2 : precision == Precision::FP32 ? 0 : 1e-2;
  return {std::max(t.abs, p), std::max(t.rel, p)};
}

OutputCheck check_output(const std::string& name, const Tensor& expected, const Tensor& actual, Precision precision) {
  OutputCheck c;
  c.name = name;
  if (expected.dtype() != actual.dtype() || expected.shape() != actual.shape()) {
    c.problem = "expected " + std::string(dtype_name(expected.dtype())) + shape_str(expected.shape()) + ", got " +
                std::string(dtype_name(actual.dtype())) + shape_str(actual.shape());
    return c;
  }
  Tolerance tol = tolerance_for(expected.dtype(), precision);
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.get_f64(i), a = actual.get_f64(i);
    if (std::isnan(e) || std::isnan(a)) {
      c.mismatches += std::isnan(e) != std::isnan(a);
      continue;
    }
    double diff = std::fabs(a - e);
    c.max_abs = std::max(c.max_abs, diff);
    if (e != 0) c.max_rel = std::max(c.max_rel, diff / std::fabs(e));
    c.mismatches += diff > tol.abs + tol.rel * std::fabs(e);
  }
  return c;
}

}  // namespace tcc
