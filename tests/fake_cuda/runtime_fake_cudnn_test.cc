// Conv kernels' cuDNN plans (src/runtime/cudnn_conv.h) on the fake driver and
// the fake cuDNN (fake_cudnn.h), in CI: the graph each kernel builds must run
// the convolution and its epilogue as the module's host run computes them,
// fused into the plan where an engine fuses it and after it where none does;
// a plan is built once per kernel and binding and executed once per call, and
// f32 data never takes a TF32 engine.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "module.h"
#include "tests/fake_cuda/fake_cuda.h"
#include "tests/fake_cuda/fake_cudnn.h"
#include "tests/fake_cuda/fake_module.h"
#include "tests/fake_cuda/host_kernel_binder.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

// `n` weights drawn from `seed`, as the textual IR writes a constant.
std::string weights(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::string text = "[";
  for (size_t i = 0; i < n; ++i) text += (i ? ", " : "") + std::to_string(dist(rng));
  return text + "]";
}

// Four convolutions that stay cuDNN calls (3x3 or 1-D, not depthwise), with
// each epilogue cuDNN applies: a bias and Relu; a residual and Relu; a bias
// alone on a grouped, strided, dilated convolution; none on a 1-D one.
std::string conv_model() {
  return "graph convs opset(ai.onnx: 17) {\n"
         "  input %x: f32[n, 4, 9, 9]\n"
         "  input %s: f32[n, 4, 12]\n"
         "  const %w1: f32[4, 4, 3, 3] = " + weights(144, 1) + "\n"
         "  const %b1: f32[4] = " + weights(4, 2) + "\n"
         "  const %w2: f32[4, 4, 3, 3] = " + weights(144, 3) + "\n"
         "  const %w3: f32[4, 2, 3, 3] = " + weights(72, 4) + "\n"
         "  const %b3: f32[4] = " + weights(4, 5) + "\n"
         "  const %w4: f32[2, 4, 3] = " + weights(24, 6) + "\n"
         "  %c1 = Conv(%x, %w1, %b1) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} name(\"conv_bias_relu\")\n"
         "  %r1 = Relu(%c1) name(\"relu1\")\n"
         "  %c2 = Conv(%r1, %w2) {kernel_shape = [3, 3], pads = [1, 1, 1, 1]} name(\"conv_residual_relu\")\n"
         "  %a2 = Add(%c2, %x) name(\"residual\")\n"
         "  %r2 = Relu(%a2) name(\"relu2\")\n"
         "  %y = Conv(%r2, %w3, %b3) {kernel_shape = [3, 3], pads = [2, 2, 2, 2], strides = [2, 2], "
         "dilations = [2, 2], group = 2} name(\"conv_grouped\")\n"
         "  %z = Conv(%s, %w4) {kernel_shape = [3]} name(\"conv_1d\")\n"
         "  output %y\n"
         "  output %z\n"
         "}\n";
}

class FakeCudnn : public TempDirSuite {
 protected:
  static void SetUpTestSuite() {
    TempDirSuite::SetUpTestSuite();
    fs::path model = suite_dir_ / "convs.tir";
    std::ofstream(model) << conv_model();
    CliResult r = compile_for_fake_device(model, suite_dir_ / "module");
    ASSERT_EQ(r.code, 0) << r.output;
  }

  void SetUp() override {
    module_ = runtime::load_module((suite_dir_ / "module").string());
    size_t convs = 0;
    for (const runtime::KernelInfo& k : module_->kernels) convs += k.conv.has_value();
    ASSERT_EQ(convs, 4u) << "each Conv should be one cuDNN kernel with its epilogue";
    fake_cuda::set_kernel_binder(host_kernel_binder(*module_));
    fake_cudnn::reset_counts();
    stream_ = runtime::device::create_stream();
  }

  void TearDown() override {
    runtime::device::destroy_stream(stream_);
    module_.reset();
    fake_cuda::set_kernel_binder(nullptr);
    fake_cudnn::set_fuses_epilogues(false);
    EXPECT_EQ(fake_cudnn::counts().live_descriptors, 0u) << "the module's plans should free every descriptor";
  }

  // Runs the module on the fake device and on the host at batch `n` and
  // expects the same outputs; f32 sums in another order, so within 1e-5.
  void expect_device_matches_host(int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<std::vector<int64_t>> in_shapes = {{n, 4, 9, 9}, {n, 4, 12}};
    std::vector<std::vector<int64_t>> out_shapes = {{n, 4, 5, 5}, {n, 2, 10}};
    std::vector<std::vector<float>> in_host, device_out, host_out;
    std::vector<tcc_tensor> dev_in, dev_out, host_in, host_outs;
    for (auto& shape : in_shapes) {
      in_host.emplace_back(static_cast<size_t>(checked_numel(shape)));
      for (float& v : in_host.back()) v = dist(rng);
    }
    for (size_t i = 0; i < in_shapes.size(); ++i) {
      size_t bytes = in_host[i].size() * sizeof(float);
      void* p = runtime::device::alloc(bytes);
      runtime::device::upload(p, in_host[i].data(), bytes);
      dev_in.push_back({p, TCC_F32, static_cast<int32_t>(in_shapes[i].size()), in_shapes[i].data()});
      host_in.push_back({in_host[i].data(), TCC_F32, static_cast<int32_t>(in_shapes[i].size()), in_shapes[i].data()});
    }
    for (auto& shape : out_shapes) {
      size_t count = static_cast<size_t>(checked_numel(shape));
      device_out.emplace_back(count);
      host_out.emplace_back(count, -1.0f);
      dev_out.push_back({runtime::device::alloc(count * sizeof(float)), TCC_F32, static_cast<int32_t>(shape.size()),
                         shape.data()});
      host_outs.push_back({host_out.back().data(), TCC_F32, static_cast<int32_t>(shape.size()), shape.data()});
    }
    runtime::run_cuda(*module_, dev_in.data(), dev_in.size(), dev_out.data(), dev_out.size(), stream_);
    runtime::device::sync(stream_);
    runtime::run_host(*module_, host_in.data(), host_in.size(), host_outs.data(), host_outs.size());
    for (size_t i = 0; i < dev_out.size(); ++i) {
      runtime::device::download(device_out[i].data(), dev_out[i].data, device_out[i].size() * sizeof(float));
      for (size_t j = 0; j < device_out[i].size(); ++j)
        ASSERT_NEAR(device_out[i][j], host_out[i][j], 1e-5f * (1 + std::fabs(host_out[i][j])))
            << "output " << i << " element " << j << " at n = " << n;
    }
    for (auto* set : {&dev_in, &dev_out})
      for (tcc_tensor& t : *set) runtime::device::release(t.data);
  }

  std::unique_ptr<runtime::Module> module_;
  void* stream_ = nullptr;
};

TEST_F(FakeCudnn, FusedEpiloguesRunInTheirPlans) {
  fake_cudnn::set_fuses_epilogues(true);
  expect_device_matches_host(2, 1);
  fake_cudnn::Counts c = fake_cudnn::counts();
  EXPECT_EQ(c.plans, 4u);
  EXPECT_EQ(c.executions, 4u);
  EXPECT_EQ(c.legacy_calls, 0u);
  // The TF32 engine and the one over the 32 MiB workspace are passed over.
  EXPECT_EQ(fake_cudnn::last_engine(), 2);
}

TEST_F(FakeCudnn, WithoutAFusingEngineTheEpilogueFollowsTheConvolution) {
  expect_device_matches_host(2, 2);
  fake_cudnn::Counts c = fake_cudnn::counts();
  EXPECT_EQ(c.plans, 4u) << "one conv-only plan per kernel; the fused graphs find no engine";
  EXPECT_EQ(c.executions, 4u);
  // Bias and Relu, residual and Relu, bias: five calls after the convolutions.
  EXPECT_EQ(c.legacy_calls, 5u);
}

TEST_F(FakeCudnn, PlansAreBuiltOncePerBindingAndExecutedEveryCall) {
  fake_cudnn::set_fuses_epilogues(true);
  for (unsigned step = 0; step < 3; ++step) expect_device_matches_host(2, 10 + step);
  EXPECT_EQ(fake_cudnn::counts().plans, 4u);
  EXPECT_EQ(fake_cudnn::counts().executions, 12u);
  expect_device_matches_host(3, 20);
  EXPECT_EQ(fake_cudnn::counts().plans, 8u) << "a new batch size is a new problem for every convolution";
  EXPECT_EQ(fake_cudnn::counts().executions, 16u);
}

}  // namespace
}  // namespace tcc
