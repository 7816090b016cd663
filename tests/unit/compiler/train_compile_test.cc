// `tcc compile --train`: the compiled training step is an ordinary module. It
// runs on the host through the runtime and agrees with the reference
// interpreter running the training graph tcc builds from the same flags, for
// one step and over ten steps of training fed back into themselves.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "src/autodiff/autodiff.h"
#include "src/interp/interpreter.h"
#include "tcc_runtime.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/runtime/module_test_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

struct TrainCase {
  const char* name;
  const char* model;  // relative to the source tree
  const char* flags;  // after --train
  LossKind loss;
  const char* loss_on;
  int64_t batch, classes;  // classes: the width of the output the loss reads
  // What `flags` names. Adam divides by sqrt(v), so on the transformer block it
  // magnifies the rounding in gradients that are zero but for it (the key
  // biases, under softmax): that case trains with momentum SGD.
  OptimizerKind optimizer = OptimizerKind::Adam;
  const char* model_loss = "";  // a model output that is the loss (`--loss`), in place of `loss`
};

void PrintTo(const TrainCase& c, std::ostream* os) { *os << c.name; }

// The module's outputs for `inputs` (by name), sized by tcc_module_output_shape.
std::vector<Tensor> run_module_on_host(tcc_module* m, std::map<std::string, Tensor>& inputs) {
  std::vector<tcc_tensor> ins = module_inputs(m, inputs);
  std::vector<Tensor> outs = module_output_tensors(m, ins);
  std::vector<tcc_tensor> c_outs = c_tensors(outs);
  EXPECT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), c_outs.data(), c_outs.size()), TCC_OK) << tcc_last_error();
  return outs;
}

// The same on the device: inputs copied to device memory, the module run
// through tcc_module_run_cuda, outputs copied back.
std::vector<Tensor> run_module_on_device(tcc_module* m, std::map<std::string, Tensor>& inputs) {
  std::vector<void*> device;
  auto alloc = [&](size_t nbytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(nbytes, 1)), cudaSuccess);
    device.push_back(p);
    return p;
  };
  std::vector<tcc_tensor> host_ins, ins;
  for (size_t i = 0; i < tcc_module_num_inputs(m); ++i) {
    Tensor& t = inputs.at(tcc_module_input_name(m, i));
    tcc_tensor h = c_tensor(t);
    host_ins.push_back(h);
    h.data = alloc(t.nbytes());
    EXPECT_EQ(cudaMemcpy(h.data, t.raw(), t.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ins.push_back(h);
  }
  std::vector<Tensor> outs = module_output_tensors(m, host_ins);
  std::vector<tcc_tensor> d_outs;
  for (Tensor& t : outs)
    d_outs.push_back({alloc(t.nbytes()), static_cast<tcc_dtype>(t.dtype()), static_cast<int32_t>(t.rank()),
                      t.shape().data()});
  EXPECT_EQ(tcc_module_run_cuda(m, ins.data(), ins.size(), d_outs.data(), d_outs.size(), nullptr), TCC_OK)
      << tcc_last_error();
  for (size_t i = 0; i < outs.size(); ++i)
    EXPECT_EQ(cudaMemcpy(outs[i].raw_mut(), d_outs[i].data, outs[i].nbytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (void* p : device) cudaFree(p);
  return outs;
}

class TrainCompile : public TempDirFixture<::testing::TestWithParam<TrainCase>> {
 protected:
  void SetUp() override {
    TempDirFixture::SetUp();
    const TrainCase& c = GetParam();
    std::string model = std::string(TCC_SOURCE_DIR) + "/" + c.model;
    // sm_90 only (the GPU machines' architecture): the captioning step has over a hundred kernels.
    CliResult r = run_tcc("compile " + shell_quote(model) + " -o " + shell_quote(module_dir().string()) +
                              " --arch sm_90 --no-ptx --train " + c.flags,
                          "", 120);
    ASSERT_EQ(r.code, 0) << r.output;
    summary_ = r.output;
    ASSERT_EQ(tcc_module_load(module_dir().c_str(), &module_), TCC_OK) << tcc_last_error();

    // The reference: the same training graph, built in-process from the same options.
    reference_ = load_model(model);
    TrainOptions opts;
    if (*c.model_loss) opts.loss_output = c.model_loss;
    else opts.builtin_loss = BuiltinLoss{c.loss, c.loss_on, "target"};
    opts.optimizer.kind = c.optimizer;
    tg_ = build_training_graph(*reference_, opts);

    std::mt19937 rng(17);
    std::normal_distribution<double> dist(0.0, 1.0);
    for (const Value* in : reference_->graph->inputs()) {
      if (in->is_initializer()) {
        inputs_[in->name()] = in->initializer().clone();  // parameters and zero optimizer state
        continue;
      }
      std::vector<int64_t> shape;
      for (const Dim& d : in->type().shape()) shape.push_back(d.is_static() ? d.value() : c.batch);
      Tensor t(in->type().dtype(), shape);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set_f64(i, in->type().dtype() == DType::I64 ? static_cast<double>(i * 7 % c.classes) : dist(rng));
      inputs_[in->name()] = t;
    }
    inputs_[tg_.lr] = Tensor::scalar_f32(0.01f);
    if (!tg_.step.empty()) inputs_[tg_.step] = Tensor::scalar_f32(1.0f);  // Adam's bias correction
  }
  void TearDown() override {
    tcc_module_free(module_);
    TempDirFixture::TearDown();
  }
  fs::path module_dir() const { return dir_ / "module"; }

  void ten_steps(const std::function<std::vector<Tensor>(std::map<std::string, Tensor>&)>& run);

  std::string summary_;
  tcc_module* module_ = nullptr;
  std::unique_ptr<Model> reference_;
  TrainingGraph tg_;
  std::map<std::string, Tensor> inputs_;
};

void expect_close(const Tensor& expected, const Tensor& actual, double tol, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.get_f64(i), a = actual.get_f64(i);
    ASSERT_LE(std::fabs(a - e), tol + tol * std::fabs(e)) << what << " element " << i << ": " << a << " vs " << e;
  }
}

TEST_P(TrainCompile, OneStepMatchesTheReferenceInterpreter) {
  const Graph& g = *reference_->graph;
  ASSERT_EQ(tcc_module_num_outputs(module_), g.outputs().size());
  for (size_t i = 0; i < g.outputs().size(); ++i) EXPECT_EQ(tcc_module_output_name(module_, i), g.outputs()[i]->name());
  EXPECT_STREQ(tcc_module_output_name(module_, 0), "loss");
  EXPECT_NE(summary_.find("  training:  loss 'loss'"), std::string::npos) << summary_;
  // No exporter's graph signature in these models: every float initializer is a parameter.
  EXPECT_NE(summary_.find(" parameters from the float initializers, optimizer "), std::string::npos) << summary_;
  EXPECT_NE(summary_.find("  peak memory at batch=1"), std::string::npos) << summary_;
  EXPECT_NE(summary_.find("  compiled:  the "), std::string::npos) << summary_;
  // The mean loss's gradient divides by the batch's element count: a size
  // parameter of a kernel, not a host fallback that would block a CUDA graph.
  EXPECT_NE(summary_.find("  fallbacks: 0 nodes on the host"), std::string::npos) << summary_;
  if (std::string(GetParam().name) == "linear10_mse_adam") {
    EXPECT_NE(summary_.find("optimizer: 10 updates: 10 in 1 multi-tensor kernel steps"), std::string::npos) << summary_;
  }
  if (std::string(GetParam().name) == "attention_momentum") {
    // The forward kernel also writes its rows' log-sum-exp; the backward is
    // three kernels: the statistics (no score recomputed), dQ, and dK with dV.
    const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(module_dir() / "manifest.json"));
    std::vector<std::string> passes;
    for (const auto& k : manifest["kernels"]) {
      if (k["kind"] != "attention") continue;
      const std::string schedule = k["schedule"];
      passes.push_back(schedule.rfind("backward ", 0) == 0 ? schedule.substr(9, schedule.find(" pass") - 9)
                                                            : "forward");
    }
    std::sort(passes.begin(), passes.end());
    EXPECT_EQ(passes, (std::vector<std::string>{"forward", "grad_kv", "grad_q", "stats"}));
  }
  std::vector<Tensor> expected = Interpreter().run(g, inputs_);
  std::vector<Tensor> actual = run_module_on_host(module_, inputs_);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) expect_close(expected[i], actual[i], 1e-4, g.outputs()[i]->name());
}

// Adam under a LinearLR schedule (start factor 1/3 over 5 steps), as in the
// compiled-optimizer documents: the lr and step change every call, the module
// does not. `run` is the host or the device path.
void TrainCompile::ten_steps(const std::function<std::vector<Tensor>(std::map<std::string, Tensor>&)>& run) {
  std::map<std::string, Tensor> host = inputs_, ref = inputs_;
  std::vector<double> host_loss, ref_loss;
  for (int step = 0; step < 10; ++step) {
    float lr = static_cast<float>(0.01 * (1.0 / 3 + (2.0 / 3) * std::min(step, 5) / 5.0));
    for (auto* in : {&host, &ref}) {
      (*in)[tg_.lr] = Tensor::scalar_f32(lr);
      if (!tg_.step.empty()) (*in)[tg_.step] = Tensor::scalar_f32(static_cast<float>(step + 1));
    }
    std::vector<Tensor> h = run(host);
    std::vector<Tensor> r = Interpreter().run(*reference_->graph, ref);
    host_loss.push_back(h[0].get_f64(0));
    ref_loss.push_back(r[0].get_f64(0));
    feed_back(*reference_->graph, h, host);
    feed_back(*reference_->graph, r, ref);
  }
  for (int step = 0; step < 10; ++step)
    EXPECT_NEAR(host_loss[step], ref_loss[step], 1e-4 * (1 + std::fabs(ref_loss[step]))) << "step " << step;
  EXPECT_LT(host_loss.back(), 0.9 * host_loss.front());
  for (const std::string& p : tg_.params) expect_close(ref.at(p), host.at(p), 1e-3, p + " after ten steps");
}

TEST_P(TrainCompile, TenStepsLowerTheLossAsTheReferenceDoes) {
  ten_steps([&](std::map<std::string, Tensor>& in) { return run_module_on_host(module_, in); });
}

// The GPU check: skipped where there is no device (CI); scripts/gpu-check runs
// it on the GPU machine, as every test with Gpu or Cuda in its name.
TEST_P(TrainCompile, TenStepsOnTheGpuLowerTheLossAsTheReferenceDoes) {
  if (!tcc_cuda_available()) GTEST_SKIP() << "no CUDA device";
  ten_steps([&](std::map<std::string, Tensor>& in) { return run_module_on_device(module_, in); });
}

INSTANTIATE_TEST_SUITE_P(
    Models, TrainCompile,
    ::testing::Values(
        TrainCase{"linear10_mse_adam", "examples/train_linear10/model.tir",
                  "--loss-fn mse --loss-on y --label target --optimizer adam", LossKind::Mse, "y", 8, 32},
        TrainCase{"mlp_mse_adam", "tests/fixtures/mlp.onnx",
                  "--loss-fn mse --loss-on output --label target --optimizer adam", LossKind::Mse, "output", 4, 10},
        TrainCase{"mlp_cross_entropy_adam", "tests/fixtures/mlp.onnx",
                  "--loss-fn cross_entropy --loss-on output --label target --optimizer adam", LossKind::CrossEntropy,
                  "output", 4, 10},
        // Conv weight gradients are convolutions over the batch, MaxPool's a scatter-add at its Indices.
        TrainCase{"resnet_mse_adam", "tests/fixtures/resnet_small.onnx",
                  "--loss-fn mse --loss-on output --label target --optimizer adam", LossKind::Mse, "output", 2, 10},
        TrainCase{"gpt2_block_mse_momentum", "tests/fixtures/gpt2_block.onnx",
                  "--loss-fn mse --loss-on output --label target --optimizer momentum", LossKind::Mse, "output", 2,
                  10, OptimizerKind::Momentum},
        // Token ids below the 64-word vocabulary; its embeddings' gradients are atomic scatter-adds.
        TrainCase{"captioning_momentum", "examples/train_captioning/model.onnx", "--loss loss --optimizer momentum",
                  LossKind::Mse, "", 2, 64, OptimizerKind::Momentum, "loss"},
        // Attention's gradients are the fused backward's passes (tcc::AttentionGrad), kernels of their own,
        // from the log-sum-exp the forward kernel saves.
        TrainCase{"attention_momentum", "tests/train/attention_layer.tir",
                  "--loss-fn mse --loss-on y --label target --optimizer momentum", LossKind::Mse, "y", 3, 16,
                  OptimizerKind::Momentum},
        // The seed of a summed loss's backward is a small constant the gradient kernel expands.
        TrainCase{"summed_loss_sgd", "tests/train/summed_loss.tir", "--loss loss --optimizer sgd", LossKind::Mse, "", 3, 4,
                  OptimizerKind::Sgd, "loss"},
        // The forward's TopK is a kernel; its backward scatters into zeros at the Indices that kernel wrote.
        TrainCase{"topk_sgd", "tests/train/topk_loss.tir", "--loss loss --optimizer sgd", LossKind::Mse, "", 3, 4,
                  OptimizerKind::Sgd, "loss"},
        // Convolutions, a pool and a ConvTranspose over an image of symbolic size (batch and s both 5 here).
        TrainCase{"symbolic_image_momentum", "tests/train/symbolic_image.tir", "--loss loss --optimizer momentum",
                  LossKind::Mse, "", 5, 4, OptimizerKind::Momentum, "loss"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TrainCompileCli, TrainingFlagsNeedTrain) {
  std::string model = shell_quote(std::string(TCC_SOURCE_DIR) + "/tests/fixtures/mlp.onnx");
  CliResult r = run_tcc("compile " + model + " -o /tmp/tcc_train_flags_unused --optimizer adam");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("need --train"), std::string::npos) << r.output;
  r = run_tcc("compile " + model + " -o /tmp/tcc_train_flags_unused --train --loss-fn mse --loss-on output");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--loss-fn, --loss-on and --label go together"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tcc
