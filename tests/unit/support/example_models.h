// Models that come with examples (input_N.pb and output_N.pb beside them, as
// the ONNX node tests and tests/zoo, tests/pt2 lay them out): reading the
// examples, compiling a model with no host step (through the compiler library),
// running the module's host build and comparing with the example's outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"
#include "tests/unit/support/compile_util.h"
#include "tests/unit/runtime/module_test_util.h"

namespace tcc {

// input_0.pb, input_1.pb, ... of `dir`, by the names they carry.
inline std::map<std::string, Tensor> read_example_inputs(const std::filesystem::path& dir) {
  std::map<std::string, Tensor> inputs;
  for (int i = 0; std::filesystem::exists(dir / ("input_" + std::to_string(i) + ".pb")); ++i) {
    std::string name;
    Tensor t = read_tensor_pb((dir / ("input_" + std::to_string(i) + ".pb")).string(), &name);
    inputs.emplace(name, t);
  }
  return inputs;
}

// output_0.pb, output_1.pb, ... of `dir`, in order.
inline std::vector<Tensor> read_example_outputs(const std::filesystem::path& dir) {
  std::vector<Tensor> outputs;
  for (int i = 0; std::filesystem::exists(dir / ("output_" + std::to_string(i) + ".pb")); ++i)
    outputs.push_back(read_tensor_pb((dir / ("output_" + std::to_string(i) + ".pb")).string()));
  return outputs;
}

// Relative 1e-4, of at least 1 (`tcc run --check`'s f32 tolerance), against
// what `reference` (ONNX Runtime, torch) computed.
inline void expect_close_to(const Tensor& got, const Tensor& want, const std::string& what,
                            const std::string& reference) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  double worst = 0;
  for (int64_t e = 0; e < want.numel(); ++e)
    worst = std::max(worst, std::fabs(got.get_f64(e) - want.get_f64(e)) / (1 + std::fabs(want.get_f64(e))));
  EXPECT_LE(worst, 1e-4) << what << ": largest |tcc - " << reference << "| / (1 + |" << reference << "|)";
}

// got holds expected's values exactly: the same shape and dtype, and each
// element equal with its sign (0 and -0 differ), a NaN matching any NaN.
inline void expect_same_values(const Tensor& got, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(got.shape(), expected.shape()) << what;
  ASSERT_EQ(got.dtype(), expected.dtype()) << what;
  int64_t differ = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.get_f64(i), b = expected.get_f64(i);
    differ += !(a == b || (std::isnan(a) && std::isnan(b))) || std::signbit(a) != std::signbit(b);
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << got.numel() << " differ";
}

// Fails the test for each host (fallback) step in a compiled module's schedule.
inline void expect_no_host_step(const CompileResult& r) {
  for (const FallbackReason& f : r.fallbacks) ADD_FAILURE() << "a host step: " << f.node << " (" << f.op_type << "): " << f.message;
}

// Compiles MODEL into MODULE for sm_90 without PTX, expecting no host step.
inline void compile_with_no_host_step(const std::filesystem::path& model, const std::filesystem::path& module) {
  expect_no_host_step(compile_model(model, module, quick_compile_options()));
}

// How many of a module directory's kernels are library products of each
// kind and operand dtype: "gemm i8", "gemm f32", "conv f64", ... (the dtype
// of a gemm's A, of a conv's x), read from its manifest.
inline std::map<std::string, int> library_kernels(const std::filesystem::path& module) {
  std::ifstream in(module / "manifest.json");
  nlohmann::json m = nlohmann::json::parse(in);
  std::map<std::string, int> counts;
  for (const nlohmann::json& k : m["kernels"]) {
    std::string kind = k["kind"];
    if (kind != "gemm" && kind != "conv") continue;
    int operand = kind == "gemm" ? k["gemm"]["a"].get<int>() : k["conv"]["x"].get<int>();
    ++counts[kind + " " + k["buffers"][operand]["dtype"].get<std::string>()];
  }
  return counts;
}

// The outputs of a module directory's host build on `inputs` (by name).
inline std::vector<Tensor> run_module_on_host(const std::filesystem::path& module,
                                              std::map<std::string, Tensor>& inputs) {
  tcc_module* m = nullptr;
  if (tcc_module_load(module.c_str(), &m) != TCC_OK) throw std::runtime_error(tcc_last_error());
  std::vector<tcc_tensor> ins = module_inputs(m, inputs);
  std::vector<Tensor> outs = module_output_tensors(m, ins);
  std::vector<tcc_tensor> c_outs = c_tensors(outs);
  tcc_status status = tcc_module_run_host(m, ins.data(), ins.size(), c_outs.data(), c_outs.size());
  std::string error = tcc_last_error();
  tcc_module_free(m);
  if (status != TCC_OK) throw std::runtime_error(error);
  return outs;
}

// Compiles MODEL with no host step, then at each size of its one symbol
// `symbol` runs the module's host build and the reference interpreter on the
// same inputs, which `fill(name, tensor)` writes for each graph input of that
// size, and hands every output to `check(got, expected, what)`.
inline void expect_module_matches_interpreter(
    const std::filesystem::path& model_path, const std::filesystem::path& module, const std::string& symbol,
    const std::vector<int64_t>& sizes, const std::function<void(const std::string&, Tensor&)>& fill,
    const std::function<void(const Tensor&, const Tensor&, const std::string&)>& check) {
  compile_with_no_host_step(model_path, module);
  if (::testing::Test::HasFatalFailure()) return;
  std::unique_ptr<Model> model = load_model(model_path.string());
  infer_shapes(*model->graph);
  for (int64_t size : sizes) {
    std::map<std::string, Tensor> inputs;
    for (const Value* in : model->graph->inputs()) {
      if (in->is_initializer()) continue;
      std::vector<int64_t> shape;
      for (const Dim& d : in->type().shape()) shape.push_back(*d.expr().evaluate({{symbol, size}}));
      Tensor t(in->type().dtype(), shape);
      fill(in->name(), t);
      inputs.emplace(in->name(), std::move(t));
    }
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<Tensor> got = run_module_on_host(module, inputs);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t o = 0; o < got.size(); ++o)
      check(got[o], expected[o], model->graph->outputs()[o]->name() + " at " + symbol + "=" + std::to_string(size));
  }
}

}  // namespace tcc
