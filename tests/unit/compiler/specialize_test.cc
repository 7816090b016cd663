// --specialize: an input that decides shapes (a Reduce's axes, a Reshape's
// target, a Resize's scales) compiled for given values. Its readers see a
// constant, so what was a host step with an unknown output shape becomes
// kernels; the module still takes the input and its guard refuses other values.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "frontends/load_model.h"
#include "src/diag/errors.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

// A sum over the axes input and a reshape to the shape input.
constexpr const char* kModel = R"(graph specialized opset(ai.onnx: 18) {
  input %x: f32[2, 3, 4]
  input %axes: i64[2]
  input %shape: i64[2]
  %sum = ReduceSum(%x, %axes) {keepdims = 1} name("sum")
  %y = Reshape(%sum, %shape) name("reshape")
  output %y
}
)";

// A Resize by the scales input, f32 values that decide the output's shape.
constexpr const char* kScalesModel = R"(graph specialized_scales opset(ai.onnx: 19) {
  input %x: f32[1, 1, 4, 4]
  input %scales: f32[4]
  %y = Resize(%x, none, %scales) {mode = "linear"} name("resize")
  output %y
}
)";

Tensor i64_tensor(std::vector<int64_t> values) {
  Tensor t(DType::I64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(values[i]));
  return t;
}

class Specialize : public TempDirFixture<> {
 protected:
  void SetUp() override {
    TempDirFixture::SetUp();
    model_ = dir_ / "model.tir";
    std::ofstream(model_) << kModel;
  }

  CompileResult compile_specialized(std::map<std::string, std::vector<double>> values, const fs::path& model = {}) {
    CompileOptions o = quick_compile_options();
    o.specialize = std::move(values);
    return compile_model(model.empty() ? model_ : model, dir_ / "module", o);
  }

  // The interpreter's outputs of `model` (default: the fixture's) on `inputs`.
  std::vector<Tensor> interpreted(const std::map<std::string, Tensor>& inputs, const fs::path& model = {}) {
    std::unique_ptr<Model> m = load_model((model.empty() ? model_ : model).string());
    infer_shapes(*m->graph);
    return Interpreter().run(*m->graph, inputs);
  }

  // The message the compiled module's host run on `inputs` fails with.
  std::string refusal_of_run(std::map<std::string, Tensor> inputs) {
    try {
      run_module_on_host(dir_ / "module", inputs);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "(ran)";
  }

  fs::path model_;
};

TEST_F(Specialize, InputsThatDecideShapesBecomeConstantsAndKernels) {
  CompileResult r = compile_specialized({{"axes", {0, 2}}, {"shape", {3, 1}}});
  expect_no_host_step(r);
  std::map<std::string, Tensor> inputs = {{"axes", i64_tensor({0, 2})}, {"shape", i64_tensor({3, 1})}};
  Tensor x(DType::F32, {2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(i % 7) - 3);
  inputs["x"] = x;
  std::vector<Tensor> want = interpreted(inputs);
  std::vector<Tensor> got = run_module_on_host(dir_ / "module", inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{3, 1}));
  expect_same_values(got[0], want[0], "y");
}

TEST_F(Specialize, TheModuleRefusesOtherValues) {
  compile_specialized({{"axes", {0, 2}}, {"shape", {3, 1}}});
  std::map<std::string, Tensor> inputs = {
      {"x", Tensor(DType::F32, {2, 3, 4})}, {"axes", i64_tensor({2, 0})}, {"shape", i64_tensor({3, 1})}};
  EXPECT_EQ(refusal_of_run(inputs), "inputs fail the module's guard 'axes == [0, 2]'");
}

TEST_F(Specialize, BadFlagsNameTheInputAndWhatWasExpected) {
  auto refusal = [&](std::map<std::string, std::vector<double>> values) {
    try {
      compile_specialized(std::move(values));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(compiled)");
  };
  const std::string file = model_.string() + ": --specialize ";
  EXPECT_EQ(refusal({{"size", {1}}}), file + "size: the model has no input 'size'");
  EXPECT_EQ(refusal({{"axes", {0.5, 1}}}),
            file + "axes: input 'axes' is i64[2], but value 0 (0.5) is not an integer it holds exactly");
  EXPECT_EQ(refusal({{"axes", {1}}}), file + "axes: input 'axes' is i64[2], 2 values, but the flag gives 1");
}

// A float that decides a shape, as torch specializes one that reaches a size:
// the module computes the interpreter's Resize at these scales, its guard holds them
// as the input's f32 does (0.6 as the f32 nearest it), and other scales are refused.
TEST_F(Specialize, FloatScalesAreGuardedAsTheInputsDtypeHoldsThem) {
  fs::path model = dir_ / "scales.tir";
  std::ofstream(model) << kScalesModel;
  expect_no_host_step(compile_specialized({{"scales", {1, 1, 0.6, 2}}}, model));
  Tensor x(DType::F32, {1, 1, 4, 4}), scales(DType::F32, {4});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(i * i % 11));
  for (int64_t i = 0; i < 4; ++i) scales.set_f64(i, std::vector<double>{1, 1, 0.6, 2}[static_cast<size_t>(i)]);
  std::map<std::string, Tensor> inputs = {{"x", x}, {"scales", scales}};
  std::vector<Tensor> want = interpreted(inputs, model);
  std::vector<Tensor> got = run_module_on_host(dir_ / "module", inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{1, 1, 2, 8}));
  // The interpreter weighs in f64 and rounds once, the kernels round each f32 product.
  expect_close_to(got[0], want[0], "y", "the interpreter");

  scales.set_f64(2, 0.5);
  inputs["scales"] = scales;
  EXPECT_EQ(refusal_of_run(inputs), "inputs fail the module's guard 'scales == [1.0, 1.0, 0.6000000238418579, 2.0]'");
}

// tcc run compiles a model as tcc compile does, --specialize included, and its
// random inputs hold the specialized values, which the guard requires.
TEST_F(Specialize, RunCompilesForTheValuesAndItsRandomInputsHoldThem) {
  CliResult r = run_tcc("run " + shell_quote(model_.string()) +
                        " --host --check --specialize axes=0,2 --specialize shape=3,1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("outputs match the reference interpreter"), std::string::npos) << r.output;
}

TEST(SpecializeCli, ParsesOneInputPerFlag) {
  CliResult bad = run_tcc("compile model.onnx -o out --specialize axes=1,x");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("--specialize: expected INPUT=VALUE[,VALUE...] (numbers), got 'axes=1,x'"),
            std::string::npos)
      << bad.output;
  CliResult twice = run_tcc("compile model.onnx -o out --specialize axes=1 --specialize axes=2");
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.output.find("--specialize: input 'axes' is given twice"), std::string::npos) << twice.output;
}

}  // namespace
}  // namespace tcc
