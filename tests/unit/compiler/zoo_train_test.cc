// The zoo's models (tests/zoo) train as a torch user expects: each compiles
// with `--train` and the default parameters (of a dynamo export, the
// parameters of the exporter's graph signature: no buffer, no lifted
// constant) into a step with no host step (issue 24), and three momentum-SGD
// steps of the module's host build, each step's updated tensors fed back,
// agree with the reference interpreter running the same training step and
// lower the loss. Not Adam: it divides by sqrt(v), magnifying the rounding in
// gradients that are zero but for it (an attention's key bias, under softmax)
// into steps of the lr's size.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "src/compiler/train_flags.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kZoo = fs::path(TCC_SOURCE_DIR) / "tests/zoo";
constexpr int kSteps = 3;

struct ZooModel {
  std::string name;
  std::string output;  // the output the mse loss reads
  bool dynamo = false;
};

void PrintTo(const ZooModel& m, std::ostream* os) { *os << m.name; }

// Zoo models whose training step tcc refuses, with the refusal: Pad's gradient
// needs constant pads, which a Swin of symbolic height and width computes
// from the shapes (and next, Slice's needs the size of the strided axis its
// patch merging's x[:, 0::2] reads).
const std::map<std::string, std::string> kTrainingRefused = {
    {"swin_any_size", "the gradient needs Pad's pads (input 1) to be a constant"}};

// The zoo's float models; the quantized one trains no float weight (ZooTrainQuantized).
std::vector<ZooModel> float_models() {
  std::ifstream in(kZoo / "zoo.json");
  json zoo = json::parse(in);
  std::vector<ZooModel> models;
  for (const json& m : zoo["models"]) {
    std::string name = m["name"];
    if (!fs::exists(kZoo / name / "model.onnx") || m["exporter"] == "onnxruntime.quantization" ||
        kTrainingRefused.count(name))
      continue;
    models.push_back({name, m["outputs"][0]["name"], m["exporter"] == "dynamo"});
  }
  return models;
}

TrainFlags mse_momentum(const std::string& output) {
  TrainFlags f;
  f.train = true;
  f.loss_fn = "mse";
  f.loss_on = output;
  f.label = "label";
  f.optimizer = "momentum";
  return f;
}

// A step's inputs: the zoo model's example inputs, a normal label shaped as
// its example output, the defaults (initial weights, zero momentum) and the lr.
std::map<std::string, Tensor> step_inputs(const std::string& name, const Graph& step, const TrainingGraph& tg,
                                          float lr) {
  std::map<std::string, Tensor> inputs = read_example_inputs(kZoo / name);
  Tensor label(DType::F32, read_example_outputs(kZoo / name).at(0).shape());
  std::mt19937 rng(5);
  std::normal_distribution<double> dist(0.0, 1.0);
  for (int64_t i = 0; i < label.numel(); ++i) label.set_f64(i, dist(rng));
  inputs["label"] = label;
  for (const Value* in : step.inputs())
    if (in->is_initializer()) inputs[in->name()] = in->initializer().clone();
  inputs[tg.lr] = Tensor::scalar_f32(lr);
  return inputs;
}

class ZooTrain : public TempDirFixture<::testing::TestWithParam<ZooModel>> {};

TEST_P(ZooTrain, StepsMatchTheInterpreterAndLowerTheLoss) {
  const ZooModel& zm = GetParam();
  const fs::path model = kZoo / zm.name / "model.onnx";
  CompileRequest req;
  req.model = model.string();
  req.output = (dir_ / "module").string();
  req.options = quick_compile_options();
  req.train = mse_momentum(zm.output);
  CompileResult compiled = compile(req);
  ASSERT_TRUE(compiled.training);
  expect_no_host_step(compiled);
  EXPECT_EQ(compiled.training->params_from, zm.dynamo ? "the exporter's graph signature" : "the float initializers");

  std::unique_ptr<Model> forward = load_model(model.string());
  std::unique_ptr<Model> step = load_model(model.string());
  const TrainingGraph tg = *apply_train_flags(req.train, *step);
  EXPECT_EQ(tg.params, compiled.training->params);
  for (const std::string& p : tg.params)
    EXPECT_EQ(forward->graph->find(p)->role(), zm.dynamo ? InitializerRole::Parameter : InitializerRole::Unmarked)
        << p;

  std::map<std::string, Tensor> inputs = step_inputs(zm.name, *step->graph, tg, 0.01f);
  std::map<std::string, Tensor> host = inputs, ref = inputs;
  std::vector<double> host_loss;
  for (int s = 1; s <= kSteps; ++s) {
    std::vector<Tensor> h = run_module_on_host(dir_ / "module", host);
    std::vector<Tensor> r = Interpreter().run(*step->graph, ref);
    ASSERT_EQ(h.size(), r.size());
    double loss = r[0].get_f64(0);
    host_loss.push_back(h[0].get_f64(0));
    EXPECT_NEAR(host_loss.back(), loss, 1e-4 * (1 + std::fabs(loss))) << "step " << s;
    feed_back(*step->graph, h, host);
    feed_back(*step->graph, r, ref);
  }
  EXPECT_LT(host_loss.back(), host_loss.front());
  for (const std::string& p : tg.params) expect_close_to(host.at(p), ref.at(p), p + " after the steps", "the interpreter");
}

TEST(ZooTrainRefused, NamesTheNodeAndWhatItNeeds) {
  for (const auto& [name, why] : kTrainingRefused) {
    CompileRequest req;
    req.model = (kZoo / name / "model.onnx").string();
    req.options = quick_compile_options();
    req.train = mse_momentum("logits");
    const std::string what = input_error([&] { compile(req); });
    EXPECT_NE(what.find(req.model + ": node '"), std::string::npos) << what;
    EXPECT_NE(what.find(why), std::string::npos) << what;
  }
}

// --train --precision bf16 trains as torch.autocast(bf16) with f32 master
// weights: the step's products read bf16 copies of the weights, but the
// parameters and the optimizer's state stay f32 tensors, updated in f32. One
// momentum step of updates (lr * g) far below a bf16 weight's spacing moves
// each parameter as the f32 interpreter's step does, to bf16's tolerance
// (`tcc run --check`'s): a bf16 weight, or a bf16 update, would not move.
TEST(ZooTrainBf16, Gpt2KeepsF32MasterWeightsAndOptimizerState) {
  constexpr double kBf16Tolerance = 5e-2;
  fs::path dir = make_temp_dir("tcc_zoo_train_bf16");
  CompileRequest req;
  req.model = (kZoo / "gpt2" / "model.onnx").string();
  req.output = (dir / "module").string();
  req.options = quick_compile_options();
  req.options.precision = Precision::BF16;
  req.train = mse_momentum("last_hidden_state");
  CompileResult compiled = compile(req);
  bool any_bf16 = false;
  for (const auto& n : compiled.model->graph->nodes())
    for (const Value* v : n->outputs()) any_bf16 |= v->type().is_tensor() && v->type().dtype() == DType::BF16;
  EXPECT_TRUE(any_bf16) << "autocast left no bf16 value";
  for (const Value* v : compiled.model->graph->inputs()) {
    if (v->is_initializer()) {
      EXPECT_EQ(v->type().dtype(), DType::F32) << v->name();
    }
  }
  for (const Value* v : compiled.model->graph->outputs()) EXPECT_EQ(v->type().dtype(), DType::F32) << v->name();

  std::unique_ptr<Model> step = load_model(req.model);
  const TrainingGraph tg = *apply_train_flags(req.train, *step);
  std::map<std::string, Tensor> inputs = step_inputs("gpt2", *step->graph, tg, 1e-3f);
  std::map<std::string, Tensor> host = inputs, ref = inputs;
  std::vector<Tensor> h = run_module_on_host(dir / "module", host);
  std::vector<Tensor> r = Interpreter().run(*step->graph, ref);
  ASSERT_EQ(h.size(), r.size());
  EXPECT_NEAR(h[0].get_f64(0), r[0].get_f64(0), kBf16Tolerance * (1 + std::fabs(r[0].get_f64(0))));
  feed_back(*step->graph, h, host);
  feed_back(*step->graph, r, ref);
  for (const std::string& p : tg.params) {
    const Tensor& before = inputs.at(p);
    double diff = 0, norm = 0;
    for (int64_t e = 0; e < before.numel(); ++e) {
      double want = ref.at(p).get_f64(e) - before.get_f64(e), got = host.at(p).get_f64(e) - before.get_f64(e);
      diff += (got - want) * (got - want);
      norm += want * want;
    }
    EXPECT_GT(norm, 0) << p;
    EXPECT_LE(std::sqrt(diff), kBf16Tolerance * std::sqrt(norm)) << p << "'s update";
  }
  fs::remove_all(dir);
}

// ONNX Runtime's QDQ ResNet keeps its weights as int8 initializers that
// DequantizeLinear reads: the exporter's parameters are computed values, no
// float initializer is one, and --train says so.
TEST(ZooTrainQuantized, ResnetQdqHasNoParameterToTrain) {
  CompileRequest req;
  req.model = (kZoo / "resnet_qdq" / "model.onnx").string();
  req.options = quick_compile_options();
  req.train = mse_momentum("logits");
  const std::string what = input_error([&] { compile(req); });
  EXPECT_NE(what.find("no parameter of the exporter's graph signature"), std::string::npos) << what;
}

INSTANTIATE_TEST_SUITE_P(Models, ZooTrain, ::testing::ValuesIn(float_models()),
                         [](const ::testing::TestParamInfo<ZooModel>& i) { return i.param.name; });

}  // namespace
}  // namespace tcc
