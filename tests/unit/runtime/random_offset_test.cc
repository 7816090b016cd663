// The random offset of a compiled module's host build (docs/MODULE.md,
// "Random ops"): call k draws what the interpreter draws at offset k, bit for
// bit, each call then advancing the offset; the C API's getter and setter
// reproduce a call; `tcc run --random-offset K` runs call K; and a training
// step with Dropout draws a fresh mask each step, its backward reading the
// forward's mask of the same step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"
#include "tests/unit/runtime/module_test_util.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

// A loaded module and one call of it on the host.
class HostModule {
 public:
  explicit HostModule(const fs::path& dir) {
    EXPECT_EQ(tcc_module_load(dir.c_str(), &m_), TCC_OK) << tcc_last_error();
  }
  ~HostModule() { tcc_module_free(m_); }
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;

  tcc_module* get() const { return m_; }
  uint64_t offset() const {
    uint64_t k = 0;
    EXPECT_EQ(tcc_module_random_offset(m_, &k), TCC_OK) << tcc_last_error();
    return k;
  }
  std::vector<Tensor> call(std::map<std::string, Tensor>& inputs) {
    std::vector<tcc_tensor> ins = module_inputs(m_, inputs);
    std::vector<Tensor> outs = module_output_tensors(m_, ins);
    std::vector<tcc_tensor> c_outs = c_tensors(outs);
    EXPECT_EQ(tcc_module_run_host(m_, ins.data(), ins.size(), c_outs.data(), c_outs.size()), TCC_OK)
        << tcc_last_error();
    return outs;
  }

 private:
  tcc_module* m_ = nullptr;
};

std::vector<Tensor> reference_at(const Graph& g, const std::map<std::string, Tensor>& inputs, uint64_t offset) {
  Interpreter interp;
  interp.set_random_offset(offset);
  return interp.run(g, inputs);
}

bool all_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].identical(b[i])) return false;
  return true;
}

class RandomOffset : public TempDirTest {};

// tests/fixtures/random_ops.tir (every random op on kernels): consecutive
// calls draw at offsets 0, 1, 2, each the interpreter's bits there and no
// two alike; setting the offset back repeats a call.
TEST_F(RandomOffset, EachCallDrawsTheInterpretersBitsAtTheNextOffset) {
  const std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/random_ops.tir";
  compile_with_no_host_step(model_path, dir_ / "module");
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::ifstream manifest(dir_ / "module" / "manifest.json");
  EXPECT_EQ(nlohmann::json::parse(manifest)["random"], true);
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  std::map<std::string, Tensor> inputs = random_inputs(*model->graph, 5, 3);
  inputs["train"] = Tensor(DType::Bool, {});
  inputs["train"].set_i64(0, 1);
  inputs["ratio_in"] = Tensor::scalar_f32(0.3f);

  HostModule m(dir_ / "module");
  EXPECT_EQ(m.offset(), 0u);
  std::vector<std::vector<Tensor>> calls;
  for (uint64_t k = 0; k < 3; ++k) {
    calls.push_back(m.call(inputs));
    EXPECT_EQ(m.offset(), k + 1);
    std::vector<Tensor> expected = reference_at(*model->graph, inputs, k);
    ASSERT_EQ(calls[k].size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_TRUE(calls[k][i].identical(expected[i])) << model->graph->outputs()[i]->name() << " at call " << k;
    for (uint64_t j = 0; j < k; ++j)
      for (size_t i = 0; i < expected.size(); ++i)
        EXPECT_FALSE(calls[k][i].identical(calls[j][i]))
            << model->graph->outputs()[i]->name() << ": calls " << j << " and " << k << " drew the same";
  }
  ASSERT_EQ(tcc_module_set_random_offset(m.get(), 1), TCC_OK);
  EXPECT_TRUE(all_identical(m.call(inputs), calls[1]));
  EXPECT_EQ(m.offset(), 2u);
  EXPECT_EQ(tcc_module_set_random_offset(nullptr, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tcc_module_random_offset(m.get(), nullptr), TCC_ERROR_INVALID_ARGUMENT);

  // `tcc run --random-offset K` runs call K, on the module and the reference alike.
  CliResult r = run_tcc("run " + shell_quote((dir_ / "module").string()) + " --host --check --random-offset 7 --shapes b=4",
                        kNoGpuEnv, 120);
  EXPECT_EQ(r.code, 0) << r.output;
  // A negative call is refused, not wrapped around to 2^64 - 1.
  CliResult negative = run_tcc("run " + shell_quote((dir_ / "module").string()) + " --host --random-offset -1");
  EXPECT_EQ(negative.code, 2) << negative.output;
  EXPECT_NE(negative.output.find("--random-offset"), std::string::npos) << negative.output;
}

// A module that draws nothing keeps its offset at 0.
TEST_F(RandomOffset, ModuleWithoutRandomOpsKeepsItsOffset) {
  const std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/control_flow.tir";
  compile_with_no_host_step(model_path, dir_ / "module");
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  std::map<std::string, Tensor> inputs = random_inputs(*model->graph, 3, 7);
  HostModule m(dir_ / "module");
  m.call(inputs);
  m.call(inputs);
  EXPECT_EQ(m.offset(), 0u);
}

// A training step whose forward drops elements of x * w: the step's loss
// and update are the interpreter's at offsets 0 and 1, which draw different
// masks; were the backward's mask not the forward's of the same step, the
// update would not be the reference's, whose backward reads that mask.
TEST_F(RandomOffset, TrainingStepDrawsAFreshDropoutMaskEachStep) {
  const fs::path model = dir_ / "dropout.tir";
  std::ofstream(model) << R"(graph main opset(ai.onnx: 18) {
  input %x: f32[b, 8]
  const %w: f32[8] = [0.5, -1.0, 1.5, 2.0, -0.5, 1.0, 0.25, -2.0]
  const %ratio: f32[] = [0.5]
  const %training: bool[] = [true]
  %h: f32[b, 8] = Mul(%x, %w) name("scale")
  %d: f32[b, 8], %mask: bool[b, 8] = Dropout(%h, %ratio, %training) {seed = 11} name("dropout")
  %sq: f32[b, 8] = Mul(%d, %d) name("square")
  %loss: f32[] = ReduceSum(%sq) {keepdims = 0} name("sum")
  output %loss
}
)";
  const fs::path step = dir_ / "train.onnx";
  CliResult r = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote((dir_ / "module").string()) +
                            " --arch sm_90 --no-ptx --train --loss loss --optimizer sgd --emit-onnx " +
                            shell_quote(step.string()),
                        kNoGpuEnv, 300);
  ASSERT_EQ(r.code, 0) << r.output;
  std::unique_ptr<Model> train = load_model(step.string());
  infer_shapes(*train->graph);
  std::map<std::string, Tensor> inputs = random_inputs(*train->graph, 16, 5);
  HostModule m(dir_ / "module");
  std::map<std::string, Tensor> module_inputs = inputs;  // the parameters, initializers of the graph, as inputs
  for (size_t i = 0; i < tcc_module_num_inputs(m.get()); ++i) {
    std::string name = tcc_module_input_name(m.get(), i);
    if (!module_inputs.count(name)) module_inputs.emplace(name, train->graph->find_local(name)->initializer());
  }
  std::vector<std::vector<Tensor>> steps;
  for (uint64_t k = 0; k < 2; ++k) {
    steps.push_back(m.call(module_inputs));
    std::vector<Tensor> expected = reference_at(*train->graph, inputs, k);
    ASSERT_EQ(steps[k].size(), expected.size());
    for (size_t o = 0; o < expected.size(); ++o)
      for (int64_t i = 0; i < expected[o].numel(); ++i)
        EXPECT_NEAR(steps[k][o].get_f64(i), expected[o].get_f64(i), 1e-5 + 1e-5 * std::fabs(expected[o].get_f64(i)))
            << train->graph->outputs()[o]->name() << " element " << i << " at step " << k;
  }
  for (size_t o = 0; o < steps[0].size(); ++o)
    EXPECT_FALSE(steps[0][o].identical(steps[1][o])) << train->graph->outputs()[o]->name() << " is the same at both steps";
}

}  // namespace
}  // namespace tcc
