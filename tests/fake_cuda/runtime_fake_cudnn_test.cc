// Conv kernels' cuDNN plans (src/runtime/cudnn_conv.h) on the fake driver and
// the fake cuDNN (fake_cudnn.h), in CI: the graph each kernel builds must run
// the convolution and its epilogue as the module's host run computes them,
// fused into the plan where an engine fuses it and else by the module's conv
// epilogue kernel, one launch after the convolution; a plan is built once per
// kernel and binding and executed once per call, and f32 data never takes a
// TF32 engine.
#include <gtest/gtest.h>

#include <algorithm>
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

// Runs `m` on the fake device (step by step, or through a CUDA graph per
// binding as reduce-overhead does) and on the host, every symbolic dim of its
// f32 inputs at `n`, and expects the same outputs within `tolerance` relative
// to each value's magnitude plus one: the fake cuDNN sums in double, in
// another order than the host kernels.
void expect_device_matches_host(runtime::Module& m, void* stream, int64_t n, unsigned seed, bool graphs,
                                float tolerance) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<int64_t>> in_shapes;
  std::vector<std::vector<float>> in_host;
  std::vector<tcc_tensor> dev_in, host_in;
  for (const TensorSig& sig : m.inputs) {
    ASSERT_EQ(sig.dtype, DType::F32) << sig.name;
    std::vector<int64_t> shape;
    for (const SymExpr& d : sig.shape) shape.push_back(d.is_constant() ? d.constant_value() : n);
    in_shapes.push_back(shape);
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
  runtime::Binding binding = runtime::bind(m, host_in.data(), host_in.size(), nullptr, nullptr);
  std::vector<std::vector<int64_t>> out_shapes;
  for (int id : m.output_values) out_shapes.push_back(binding.shapes[static_cast<size_t>(id)]);
  std::vector<std::vector<float>> device_out, host_out;
  std::vector<tcc_tensor> dev_out, host_outs;
  for (auto& shape : out_shapes) {
    size_t count = static_cast<size_t>(checked_numel(shape));
    device_out.emplace_back(count);
    host_out.emplace_back(count, -1.0f);
    dev_out.push_back({runtime::device::alloc(count * sizeof(float)), TCC_F32, static_cast<int32_t>(shape.size()),
                       shape.data()});
    host_outs.push_back({host_out.back().data(), TCC_F32, static_cast<int32_t>(shape.size()), shape.data()});
  }
  if (graphs)
    runtime::enqueue_cuda_graphs(m, dev_in.data(), dev_in.size(), dev_out.data(), dev_out.size(), stream);
  else
    runtime::run_cuda(m, dev_in.data(), dev_in.size(), dev_out.data(), dev_out.size(), stream);
  runtime::device::sync(stream);
  runtime::run_host(m, host_in.data(), host_in.size(), host_outs.data(), host_outs.size());
  for (size_t i = 0; i < dev_out.size(); ++i) {
    runtime::device::download(device_out[i].data(), dev_out[i].data, device_out[i].size() * sizeof(float));
    for (size_t j = 0; j < device_out[i].size(); ++j)
      ASSERT_NEAR(device_out[i][j], host_out[i][j], tolerance * (1 + std::fabs(host_out[i][j])))
          << "output " << i << " element " << j << " at n = " << n;
  }
  for (auto* set : {&dev_in, &dev_out})
    for (tcc_tensor& t : *set) runtime::device::release(t.data);
}

// A module compiled into module_dir() under the suite's directory, loaded per
// test with the fake driver running its generated kernels as their host kernels.
class FakeDeviceSuite : public TempDirSuite {
 protected:
  static void compile(const fs::path& model, const fs::path& dir) {
    CliResult r = compile_for_fake_device(model, dir);
    ASSERT_EQ(r.code, 0) << r.output;
  }
  virtual fs::path module_dir() const { return suite_dir_ / "module"; }

  void SetUp() override {
    load();
    fake_cudnn::reset_counts();
    fake_cuda::clear_log();
    stream_ = runtime::device::create_stream();
  }

  void TearDown() override {
    runtime::device::destroy_stream(stream_);
    module_.reset();
    fake_cuda::set_kernel_binder(nullptr);
    fake_cudnn::set_fuses_epilogues(false);
    EXPECT_EQ(fake_cudnn::counts().live_descriptors, 0u) << "the module's plans should free every descriptor";
  }

  void load() {
    module_ = runtime::load_module(module_dir().string());
    fake_cuda::set_kernel_binder(host_kernel_binder(*module_));
  }

  // Launches of the f32 conv epilogue since the log was cleared, direct or replayed.
  static size_t epilogue_launches(bool from_graph) {
    size_t n = 0;
    for (const fake_cuda::Launch& l : fake_cuda::launches())
      n += l.kernel == conv_epilogue_kernel(DType::F32) && l.from_graph == from_graph;
    return n;
  }

  size_t conv_kernels() const {
    size_t convs = 0;
    for (const runtime::KernelInfo& k : module_->kernels) convs += k.conv.has_value();
    return convs;
  }

  std::unique_ptr<runtime::Module> module_;
  void* stream_ = nullptr;
};

class FakeCudnn : public FakeDeviceSuite {
 protected:
  static void SetUpTestSuite() {
    TempDirSuite::SetUpTestSuite();
    fs::path model = suite_dir_ / "convs.tir";
    std::ofstream(model) << conv_model();
    compile(model, suite_dir_ / "module");
  }

  void SetUp() override {
    FakeDeviceSuite::SetUp();
    ASSERT_EQ(conv_kernels(), 4u) << "each Conv should be one cuDNN kernel with its epilogue";
  }

  void expect_device_matches_host(int64_t n, unsigned seed, bool graphs = false) {
    tcc::expect_device_matches_host(*module_, stream_, n, seed, graphs, 1e-5f);
  }
};

TEST_F(FakeCudnn, FusedEpiloguesRunInTheirPlans) {
  fake_cudnn::set_fuses_epilogues(true);
  expect_device_matches_host(2, 1);
  fake_cudnn::Counts c = fake_cudnn::counts();
  // Two plans per kernel: the TF32 engine is passed over by its notes, the
  // one over the 32 MiB workspace once its plan says so, and the third runs.
  EXPECT_EQ(c.plans, 8u);
  EXPECT_EQ(c.executions, 4u);
  EXPECT_EQ(epilogue_launches(false), 0u);
  EXPECT_EQ(fake_cudnn::last_engine(), 2);
}

TEST_F(FakeCudnn, WithoutAFusingEngineTheEpilogueFollowsTheConvolution) {
  expect_device_matches_host(2, 2);
  fake_cudnn::Counts c = fake_cudnn::counts();
  EXPECT_EQ(c.plans, 8u) << "two conv-only plans per kernel (one over the workspace); the fused graphs find no engine";
  EXPECT_EQ(c.executions, 4u);
  // Bias and Relu, residual and Relu, bias: one launch after each of those
  // convolutions, none after the 1-D one, which has no epilogue.
  EXPECT_EQ(epilogue_launches(false), 3u);
  // The first, over batch 2 x 4 channels of 9 x 9: a block row per plane, 96 threads covering its 81 elements.
  std::vector<fake_cuda::Launch> log = fake_cuda::launches();
  auto first = std::find_if(log.begin(), log.end(),
                            [](const fake_cuda::Launch& l) { return l.kernel == conv_epilogue_kernel(DType::F32); });
  ASSERT_NE(first, log.end());
  EXPECT_EQ(std::vector<unsigned>(first->grid, first->grid + 3), (std::vector<unsigned>{8, 1, 1}));
  EXPECT_EQ(std::vector<unsigned>(first->block, first->block + 3), (std::vector<unsigned>{96, 1, 1}));
}

TEST_F(FakeCudnn, PlansAreBuiltOncePerBindingAndExecutedEveryCall) {
  fake_cudnn::set_fuses_epilogues(true);
  for (unsigned step = 0; step < 3; ++step) expect_device_matches_host(2, 10 + step);
  EXPECT_EQ(fake_cudnn::counts().plans, 8u);
  EXPECT_EQ(fake_cudnn::counts().executions, 12u);
  expect_device_matches_host(3, 20);
  EXPECT_EQ(fake_cudnn::counts().plans, 16u) << "a new batch size is a new problem for every convolution";
  EXPECT_EQ(fake_cudnn::counts().executions, 16u);
}

// reduce-overhead: the run before the capture builds the plans, the capture
// records each plan's execution (and the unfused epilogues' launches), and the
// replays run what it recorded on new inputs without calling cuDNN again.
TEST_F(FakeCudnn, CapturedExecutionsReplayOnNewInputs) {
  for (bool fuses : {true, false}) {
    SCOPED_TRACE(fuses ? "fused" : "unfused");
    load();
    fake_cudnn::set_fuses_epilogues(fuses);
    fake_cudnn::reset_counts();
    fake_cuda::clear_log();
    for (unsigned step = 0; step < 4; ++step) expect_device_matches_host(2, 40 + step, true);
    runtime::GraphStats stats = runtime::graph_stats(*module_);
    EXPECT_EQ(stats.captures, 1u);
    EXPECT_EQ(stats.replays, 3u);
    EXPECT_EQ(fake_cudnn::counts().executions, 8u) << "four in the plain run, four captured";
    EXPECT_EQ(epilogue_launches(false), fuses ? 0u : 3u) << "three in the plain run; the capture only records";
    EXPECT_EQ(epilogue_launches(true), fuses ? 0u : 9u) << "three in each of three replays";
  }
}

// The zoo's CNNs as torch's dynamo exporter wrote them (tests/zoo), at batch
// 2: every convolution left to cuDNN (ResNet's 3x3 and strided ones,
// MobileNetV3's stem, EfficientNet's and ConvNeXt's), step by step and
// replayed, fused and not.
class FakeCudnnZoo : public FakeDeviceSuite, public ::testing::WithParamInterface<const char*> {
 protected:
  fs::path module_dir() const override { return suite_dir_ / GetParam(); }
  void SetUp() override {
    compile(fs::path(TCC_SOURCE_DIR) / "tests/zoo" / GetParam() / "model.onnx", module_dir());
    FakeDeviceSuite::SetUp();
  }
};

TEST_P(FakeCudnnZoo, ConvolutionsMatchTheHostRunStepByStepAndReplayed) {
  ASSERT_GT(conv_kernels(), 0u);
  for (bool fuses : {true, false}) {
    SCOPED_TRACE(fuses ? "fused" : "unfused");
    load();
    fake_cudnn::set_fuses_epilogues(fuses);
    expect_device_matches_host(*module_, stream_, 2, 1, false, 1e-4f);
    for (unsigned step = 0; step < 2; ++step) expect_device_matches_host(*module_, stream_, 2, 2 + step, true, 1e-4f);
    EXPECT_EQ(runtime::graph_stats(*module_).replays, 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, FakeCudnnZoo, ::testing::Values("resnet", "mobilenetv3", "efficientnet", "convnext"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
}  // namespace tcc
