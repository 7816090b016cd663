// The zoo's models (tests/zoo) train as a torch user expects: each compiles
// with `--train` and the default parameters (of a dynamo export, the
// parameters of the exporter's graph signature: no buffer, no lifted
// constant), and three momentum-SGD steps of the module's host build, each
// step's updated tensors fed back, agree with the reference interpreter
// running the same training step and lower the loss. Not Adam: it divides by
// sqrt(v), magnifying the rounding in gradients that are zero but for it (an
// attention's key bias, under softmax) into steps of the lr's size.
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

// The zoo's float models; the quantized one trains no float weight (ZooTrainQuantized).
std::vector<ZooModel> float_models() {
  std::ifstream in(kZoo / "zoo.json");
  json zoo = json::parse(in);
  std::vector<ZooModel> models;
  for (const json& m : zoo["models"]) {
    std::string name = m["name"];
    if (!fs::exists(kZoo / name / "model.onnx") || m["exporter"] == "onnxruntime.quantization") continue;
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

class ZooTrain : public ::testing::TestWithParam<ZooModel> {
 protected:
  void SetUp() override { dir_ = make_temp_dir("tcc_zoo_train"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

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

// ONNX Runtime's QDQ ResNet keeps its weights as int8 initializers that
// DequantizeLinear reads: the exporter's parameters are computed values, no
// float initializer is one, and --train says so.
TEST(ZooTrainQuantized, ResnetQdqHasNoParameterToTrain) {
  CompileRequest req;
  req.model = (kZoo / "resnet_qdq" / "model.onnx").string();
  req.options = quick_compile_options();
  req.train = mse_momentum("logits");
  try {
    compile(req);
    ADD_FAILURE() << "compiled a training step with no parameter";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no parameter of the exporter's graph signature"), std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ZooTrain, ::testing::ValuesIn(float_models()),
                         [](const ::testing::TestParamInfo<ZooModel>& i) { return i.param.name; });

}  // namespace
}  // namespace tcc
