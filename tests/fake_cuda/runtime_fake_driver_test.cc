// The runtime's device path on the fake driver (fake_cuda.h), in CI: every
// launch the run makes, in schedule order with the manifest's launch shape,
// host fallbacks between kernels with their copies, the arena as bindings
// change, CUDA Graph capture and replay, and tcc bench's measuring loop. The fake runs each launch as the
// module's host kernel, so the device path's outputs must equal the host
// run's bit for bit: a wrong pointer, offset, size argument, copy or replay
// shows up as a wrong value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "module.h"
#include "src/profiler/gpu_bench.h"
#include "src/profiler/report.h"
#include "tests/fake_cuda/fake_cuda.h"
#include "tests/fake_cuda/fake_module.h"
#include "tests/fake_cuda/host_kernel_binder.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

// A kernel, a host fallback (TopK along a symbolic axis has no kernel) and a
// kernel again: the fallback's input goes to the host and its output comes back.
constexpr const char* kFallbackModel = R"(graph fallback_between_kernels opset(ai.onnx: 17) {
  input %x: f32[n, 4]
  const %k: i64[1] = [2]
  %r: f32[n, 4] = Relu(%x) name("relu")
  %c: f32[2, 4], %i: i64[2, 4] = TopK(%r, %k) {axis = 0} name("topk")
  %y: f32[2, 4] = Exp(%c) name("exp")
  output %y
}
)";

// A module compiled by the tcc binary, loaded by the runtime, with the fake
// driver running its launches as its host kernels.
class FakeDevice {
 public:
  FakeDevice(const fs::path& model, const fs::path& dir, const std::string& flags = "") {
    CliResult r = compile_for_fake_device(model, dir, flags);
    EXPECT_EQ(r.code, 0) << r.output;
    module_ = runtime::load_module(dir.string());
    for (const runtime::KernelInfo& k : module_->kernels)
      EXPECT_FALSE(k.library_call) << k.name << ": the cache should have made every GEMM a template";
    fake_cuda::set_kernel_binder(host_kernel_binder(*module_));
    stream_ = runtime::device::create_stream();
  }
  ~FakeDevice() {
    fake_cuda::set_kernel_binder(nullptr);
    runtime::device::destroy_stream(stream_);
  }

  runtime::Module& module() { return *module_; }
  void* stream() const { return stream_; }

  // The outputs of one run on the "device" and one on the host, for inputs of
  // `size` rows drawn from `seed`.
  struct Runs {
    std::vector<std::vector<float>> device, host;
  };
  Runs run_both(int64_t size, unsigned seed) {
    Buffers in = inputs(size, seed);
    Buffers out = outputs(in);
    runtime::run_cuda(*module_, in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(), stream_);
    return {out.download(), run_host(in)};
  }

  // f32 tensors in fake device memory with their host copies.
  struct Buffers {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::vector<float>> host;
    std::vector<tcc_tensor> tensors;
    Buffers() = default;
    Buffers(const Buffers&) = delete;
    Buffers(Buffers&&) = default;
    ~Buffers() {
      for (tcc_tensor& t : tensors) runtime::device::release(t.data);
    }
    void add(std::vector<int64_t> shape, std::vector<float> values) {
      shapes.push_back(std::move(shape));
      host.push_back(std::move(values));
      void* p = runtime::device::alloc(host.back().size() * sizeof(float));
      runtime::device::upload(p, host.back().data(), host.back().size() * sizeof(float));
      tensors.push_back({p, TCC_F32, 0, nullptr});
      for (size_t i = 0; i < tensors.size(); ++i)
        tensors[i] = {tensors[i].data, TCC_F32, static_cast<int32_t>(shapes[i].size()), shapes[i].data()};
    }
    std::vector<std::vector<float>> download() const {
      std::vector<std::vector<float>> values;
      for (size_t i = 0; i < tensors.size(); ++i) {
        values.emplace_back(host[i].size());
        runtime::device::download(values.back().data(), tensors[i].data, values.back().size() * sizeof(float));
      }
      return values;
    }
  };

  Buffers inputs(int64_t size, unsigned seed) const {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    Buffers b;
    for (const TensorSig& sig : module_->inputs) {
      EXPECT_EQ(sig.dtype, DType::F32) << sig.name;
      std::vector<int64_t> shape;
      for (const SymExpr& d : sig.shape) shape.push_back(d.is_constant() ? d.constant_value() : size);
      std::vector<float> values(static_cast<size_t>(checked_numel(shape)));
      for (float& v : values) v = dist(rng);
      // A training step's learning rate, and its step count (Adam's bias correction needs 1 or more).
      if (sig.name == "lr") values.assign(values.size(), 0.01f);
      if (sig.name == "step") values.assign(values.size(), 2.0f);
      b.add(shape, values);
    }
    return b;
  }

  Buffers outputs(const Buffers& in) const {
    runtime::Binding binding = runtime::bind(*module_, in.tensors.data(), in.tensors.size(), nullptr, nullptr);
    Buffers b;
    for (int id : module_->output_values) {
      const std::vector<int64_t>& shape = binding.shapes[id];
      b.add(shape, std::vector<float>(static_cast<size_t>(checked_numel(shape)), -1.0f));
    }
    return b;
  }

  // Copies `fresh` into the input buffers `captured` that `graph` was captured
  // on, as reduce-overhead does, replays it and waits: the launches it made.
  std::vector<fake_cuda::Launch> replay(runtime::CudaGraph& graph, const Buffers& captured, const Buffers& fresh) {
    for (size_t i = 0; i < captured.tensors.size(); ++i)
      runtime::device::upload(captured.tensors[i].data, fresh.host[i].data(), fresh.host[i].size() * sizeof(float));
    fake_cuda::clear_log();
    graph.launch(stream_);
    runtime::device::sync(stream_);
    return fake_cuda::launches();
  }

  std::vector<std::vector<float>> run_host(const Buffers& in) {
    std::vector<tcc_tensor> ins = in.tensors;
    for (size_t i = 0; i < ins.size(); ++i) ins[i].data = const_cast<float*>(in.host[i].data());
    Buffers shapes = outputs(in);
    std::vector<std::vector<float>> values = shapes.host;
    std::vector<tcc_tensor> outs = shapes.tensors;
    for (size_t i = 0; i < outs.size(); ++i) outs[i].data = values[i].data();
    runtime::run_host(*module_, ins.data(), ins.size(), outs.data(), outs.size());
    return values;
  }

 private:
  std::unique_ptr<runtime::Module> module_;
  void* stream_ = nullptr;
};

fs::path write_model(const fs::path& dir, const std::string& text) {
  fs::path p = dir / "model.tir";
  std::ofstream(p) << text;
  return p;
}

class FakeDriver : public TempDirTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(runtime::cuda_available()) << "the fake driver is linked in, so the runtime must find a device";
    fake_cuda::clear_log();
    TempDirTest::SetUp();
  }
};

struct ModelCase {
  const char* name;
  const char* path;  // under the source tree
  bool train;        // the model's training step (MSE on its output, Adam) rather than the model
};

// The training step of `model`, written as ONNX by `tcc compile --train --emit-onnx`.
fs::path training_step(const fs::path& model, const fs::path& dir) {
  fs::path out = dir / "train.onnx";
  fs::path module = dir / "train-module";
  CliResult r = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote(module.string()) +
                            " --arch sm_90 --no-ptx --train --loss-fn mse --loss-on output --label target "
                            "--optimizer adam --emit-onnx " + shell_quote(out.string()),
                        kNoGpuEnv, 300);
  EXPECT_EQ(r.code, 0) << r.output;
  return out;
}

class FakeDriverModel : public FakeDriver, public ::testing::WithParamInterface<ModelCase> {};

TEST_P(FakeDriverModel, LaunchesFollowTheScheduleAndTheManifestsLaunchShapes) {
  fs::path model = fs::path(TCC_SOURCE_DIR) / GetParam().path;
  FakeDevice dev(GetParam().train ? training_step(model, dir_) : model, dir_ / "module");
  const runtime::Module& m = dev.module();
  // Blocks of two dimensions: a training step's bias gradients reduce
  // columns. GPT-2's attention is one attention kernel (a grid of two
  // dimensions), and in its training step the fused backward's passes too.
  auto two_dimensional = [&](kir::Kind kind) {
    return std::any_of(m.kernels.begin(), m.kernels.end(),
                       [&](const runtime::KernelInfo& k) { return k.launch.block[1] > 1 && k.kind == kind; });
  };
  EXPECT_EQ(two_dimensional(kir::Kind::Reduction), GetParam().train);
  const bool attention = std::any_of(m.kernels.begin(), m.kernels.end(), [](const runtime::KernelInfo& k) {
    return k.kind == kir::Kind::Attention;
  });
  EXPECT_EQ(attention, std::string(GetParam().name).rfind("gpt2", 0) == 0);
  for (int64_t size : {8, 37}) {
    fake_cuda::clear_log();
    FakeDevice::Runs runs = dev.run_both(size, static_cast<unsigned>(size));
    EXPECT_EQ(runs.device, runs.host) << "size " << size;

    std::vector<fake_cuda::Launch> log = fake_cuda::launches();
    std::vector<const runtime::StepInfo*> kernel_steps;
    for (const runtime::StepInfo& s : m.steps)
      if (!s.fallback) kernel_steps.push_back(&s);
    ASSERT_EQ(log.size(), kernel_steps.size());
    FakeDevice::Buffers in = dev.inputs(size, 0);
    runtime::Binding b = runtime::bind(m, in.tensors.data(), in.tensors.size(), nullptr, nullptr);
    for (size_t i = 0; i < log.size(); ++i) {
      const runtime::KernelInfo& k = m.kernels[kernel_steps[i]->kernel];
      EXPECT_EQ(log[i].kernel, k.name) << "launch " << i;
      EXPECT_FALSE(log[i].from_graph);
      EXPECT_EQ(log[i].shared_bytes, static_cast<unsigned>(k.launch.shared_bytes)) << k.name;
      for (int d = 0; d < 3; ++d) {
        EXPECT_EQ(log[i].block[d], static_cast<unsigned>(k.launch.block[d])) << k.name;
        EXPECT_EQ(log[i].grid[d], static_cast<unsigned>(std::max<int64_t>(1, runtime::evaluate(k.launch.grid[d], b, "grid"))))
            << k.name << " at size " << size;
      }
    }
  }
}

// chain100: 100 launches of a split-K GEMM template and a pointwise kernel;
// mlp: GEMMs with bias and ReLU epilogues; gpt2_block: two symbolic dims,
// batched GEMMs, layer norms and a masked softmax; their training steps:
// the backward's reductions (bias gradients over columns) and transposed
// GEMMs, Adam's multi-tensor kernels.
INSTANTIATE_TEST_SUITE_P(Models, FakeDriverModel,
                         ::testing::Values(ModelCase{"chain100", "bench/models/chain100.tir", false},
                                           ModelCase{"mlp", "tests/fixtures/mlp.onnx", false},
                                           ModelCase{"gpt2_block", "tests/fixtures/gpt2_block.onnx", false},
                                           ModelCase{"mlp_train", "tests/fixtures/mlp.onnx", true},
                                           ModelCase{"gpt2_block_train", "tests/fixtures/gpt2_block.onnx", true}),
                         [](const ::testing::TestParamInfo<ModelCase>& i) { return std::string(i.param.name); });

TEST_F(FakeDriver, HostFallbackBetweenKernelsCopiesBothWays) {
  FakeDevice dev(write_model(dir_, kFallbackModel), dir_ / "module");
  ASSERT_EQ(runtime::capture_blocker(dev.module()), "host fallback node 'topk' (it synchronizes with the host)");
  for (int64_t n : {2, 5, 300}) {
    FakeDevice::Runs runs = dev.run_both(n, static_cast<unsigned>(n));
    EXPECT_EQ(runs.device, runs.host) << "n=" << n;
  }
}

// A causal mask computed from the sequence length: the first run at each
// binding computes it on the host and uploads it; a run at a binding seen
// before is launches alone (no copy to or from the host, no synchronization),
// so the module captures as a CUDA graph; a binding evicted from the cache
// and seen again is computed again, and the constants go with the module.
TEST_F(FakeDriver, BindingConstantsComputedOncePerBindingNeverPerStep) {
  size_t before = fake_cuda::live_allocations();
  {
    FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/causal_mask.tir", dir_ / "module");
    ASSERT_FALSE(dev.module().binding_steps.empty());
    EXPECT_EQ(runtime::capture_blocker(dev.module()), "");
    for (int64_t s : {5, 9, 5, 2}) {
      FakeDevice::Runs runs = dev.run_both(s, static_cast<unsigned>(s));
      EXPECT_EQ(runs.device, runs.host) << "s=" << s;
    }

    FakeDevice::Buffers in = dev.inputs(9, 3);
    FakeDevice::Buffers out = dev.outputs(in);
    fake_cuda::clear_log();
    runtime::enqueue_cuda(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(),
                          dev.stream());
    EXPECT_EQ(fake_cuda::host_transfers(), 0u);
    EXPECT_EQ(fake_cuda::stream_syncs(), 0u);
    EXPECT_EQ(fake_cuda::launches().size(), dev.module().steps.size());
    runtime::device::sync(dev.stream());
    EXPECT_EQ(out.download(), dev.run_host(in));

    std::unique_ptr<runtime::CudaGraph> graph = runtime::capture_cuda(
        dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(), dev.stream());
    // Nine more bindings evict the captured one; the graph keeps its constants.
    for (int64_t s = 10; s < 19; ++s) dev.run_both(s, 0);
    FakeDevice::Buffers fresh = dev.inputs(9, 4);
    dev.replay(*graph, in, fresh);
    EXPECT_EQ(out.download(), dev.run_host(fresh));
  }
  EXPECT_EQ(fake_cuda::live_allocations(), before);
}

// The causal mask again, scaled by a learning rate compiled for its value
// (--specialize lr=0.01), whose guard reads the input each call. A run at a
// binding seen before keeps it (its launches and binding constants): the one
// transfer is the guard's read of lr, nothing is uploaded again, and another
// lr is refused by the guard at that binding too.
constexpr const char* kValueGuardedModel = R"(graph value_guarded opset(ai.onnx: 17) {
  input %x: f32[b, s, s]
  input %lr: f32[]
  const %seq_axis: i64[] = [1]
  const %axes0: i64[1] = [0]
  const %one: f32[] = [1.0]
  const %zero: f32[] = [0.0]
  const %neg: f32[] = [-10000.0]
  %shape: i64[3] = Shape(%x) name("shape")
  %len: i64[] = Gather(%shape, %seq_axis) {axis = 0} name("seq_len")
  %len1: i64[1] = Unsqueeze(%len, %axes0) name("unsqueeze")
  %dims: i64[2] = Concat(%len1, %len1) {axis = 0} name("dims")
  %zeros: f32[s, s] = ConstantOfShape(%dims) name("zeros")
  %ones: f32[s, s] = Add(%zeros, %one) name("ones")
  %tri: f32[s, s] = Trilu(%ones) {upper = 0} name("tril")
  %future: bool[s, s] = Equal(%tri, %zero) name("is_future")
  %y: f32[b, s, s] = Where(%future, %neg, %x) name("mask_scores")
  %p: f32[b, s, s] = Softmax(%y) {axis = -1} name("softmax")
  %q: f32[b, s, s] = Mul(%p, %lr) name("scale")
  output %q
}
)";

TEST_F(FakeDriver, ValueGuardedModuleKeepsItsBindingAndChecksTheValuesEachCall) {
  FakeDevice dev(write_model(dir_, kValueGuardedModel), dir_ / "module", "--specialize lr=0.01");
  ASSERT_FALSE(dev.module().binding_steps.empty());
  ASSERT_EQ(runtime::capture_blocker(dev.module()), "guard 'lr == [0.009999999776482582]' reads an input's value on the host");
  for (int64_t s : {5, 9, 5}) {
    FakeDevice::Runs runs = dev.run_both(s, static_cast<unsigned>(s));
    EXPECT_EQ(runs.device, runs.host) << "s=" << s;
  }

  FakeDevice::Buffers in = dev.inputs(9, 3);
  FakeDevice::Buffers out = dev.outputs(in);
  fake_cuda::clear_log();
  runtime::run_cuda(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(),
                    dev.stream());
  EXPECT_EQ(fake_cuda::host_transfers(), 1u) << "the guard's read of lr, and no binding constant uploaded again";
  EXPECT_EQ(out.download(), dev.run_host(in));

  const float other = 0.02f;
  runtime::device::upload(in.tensors[1].data, &other, sizeof other);
  try {
    runtime::run_cuda(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(),
                      dev.stream());
    ADD_FAILURE() << "a call with another lr ran at a kept binding";
  } catch (const std::exception& e) {
    EXPECT_EQ(std::string(e.what()), "inputs fail the module's guard 'lr == [0.009999999776482582]'");
  }
}

// A GPT-style block as torch's legacy exporter writes it (tests/zoo): its
// causal mask comes from Shape -> Gather -> ConstantOfShape -> Trilu, which
// fuse_attention proves causal, so the attention kernel masks it and no
// binding constant is left. The module captures (no host step is left), a
// steady step is launches alone, and the graph replays it at a new batch of
// inputs as the host computes them.
TEST_F(FakeDriver, ExportedGptBlockStepIsLaunchesAloneAndReplays) {
  FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "tests/zoo/gpt_block_legacy/model.onnx", dir_ / "module");
  ASSERT_EQ(runtime::capture_blocker(dev.module()), "");
  EXPECT_TRUE(dev.module().binding_steps.empty());
  EXPECT_TRUE(std::any_of(dev.module().kernels.begin(), dev.module().kernels.end(),
                          [](const runtime::KernelInfo& k) { return k.kind == kir::Kind::Attention; }));
  FakeDevice::Buffers in = dev.inputs(6, 1);
  FakeDevice::Buffers out = dev.outputs(in);
  std::unique_ptr<runtime::CudaGraph> graph = runtime::capture_cuda(
      dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(), dev.stream());
  fake_cuda::clear_log();
  runtime::enqueue_cuda(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(),
                        dev.stream());
  EXPECT_EQ(fake_cuda::host_transfers(), 0u);
  EXPECT_EQ(fake_cuda::stream_syncs(), 0u);
  size_t launches_per_step = fake_cuda::launches().size();
  EXPECT_EQ(launches_per_step, dev.module().steps.size());

  FakeDevice::Buffers fresh = dev.inputs(6, 2);
  std::vector<fake_cuda::Launch> log = dev.replay(*graph, in, fresh);
  EXPECT_EQ(log.size(), launches_per_step);
  for (const fake_cuda::Launch& l : log) EXPECT_TRUE(l.from_graph) << l.kernel;
  EXPECT_EQ(out.download(), dev.run_host(fresh));
}

// reduce-overhead with a graph per binding: the first run at each binding
// captures, later runs at it replay (launches from the graph, no copy to or
// from the host, no synchronization), a ninth binding evicts the least
// recently used graph, and every run's outputs equal the host run's.
TEST_F(FakeDriver, GraphPerBindingCapturedOnceReplayedAndEvicted) {
  size_t before = fake_cuda::live_allocations();
  {
    FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/causal_mask.tir", dir_ / "module");
    std::vector<fake_cuda::Launch> log;  // what the latest run enqueued
    auto run = [&](int64_t s, unsigned seed) {
      FakeDevice::Buffers in = dev.inputs(s, seed);
      FakeDevice::Buffers out = dev.outputs(in);
      fake_cuda::clear_log();
      runtime::enqueue_cuda_graphs(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(),
                                   out.tensors.size(), dev.stream());
      runtime::device::sync(dev.stream());
      log = fake_cuda::launches();
      EXPECT_EQ(out.download(), dev.run_host(in)) << "s=" << s << " seed " << seed;
    };
    run(5, 1);
    run(9, 2);
    FakeDevice::Buffers in = dev.inputs(5, 3);
    FakeDevice::Buffers out = dev.outputs(in);
    fake_cuda::clear_log();
    runtime::enqueue_cuda_graphs(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(),
                                 out.tensors.size(), dev.stream());
    EXPECT_EQ(fake_cuda::host_transfers(), 0u);
    EXPECT_EQ(fake_cuda::stream_syncs(), 0u);
    runtime::device::sync(dev.stream());
    EXPECT_EQ(out.download(), dev.run_host(in));
    log = fake_cuda::launches();
    EXPECT_EQ(log.size(), dev.module().steps.size());
    for (const fake_cuda::Launch& l : log) EXPECT_TRUE(l.from_graph) << l.kernel;
    runtime::GraphStats stats = runtime::graph_stats(dev.module());
    EXPECT_EQ(stats.captures, 2u);
    EXPECT_EQ(stats.replays, 1u);
    EXPECT_EQ(stats.not_captured, "");

    for (int64_t s = 10; s < 17; ++s) run(s, 4);  // nine bindings in all: 9 goes, the least recent
    run(5, 5);
    run(9, 6);
    stats = runtime::graph_stats(dev.module());
    EXPECT_EQ(stats.captures, 10u);
    EXPECT_EQ(stats.replays, 2u);
    EXPECT_EQ(stats.evictions, 2u);
  }
  EXPECT_EQ(fake_cuda::live_allocations(), before);
}

TEST_F(FakeDriver, GraphPerBindingRunsStepByStepWhatCannotBeCaptured) {
  FakeDevice dev(write_model(dir_, kFallbackModel), dir_ / "module");
  FakeDevice::Buffers in = dev.inputs(4, 1);
  FakeDevice::Buffers out = dev.outputs(in);
  runtime::enqueue_cuda_graphs(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(),
                               out.tensors.size(), dev.stream());
  runtime::device::sync(dev.stream());
  EXPECT_EQ(out.download(), dev.run_host(in));
  runtime::GraphStats stats = runtime::graph_stats(dev.module());
  EXPECT_EQ(stats.captures, 0u);
  EXPECT_EQ(stats.uncaptured_runs, 1u);
  EXPECT_EQ(stats.not_captured, "host fallback node 'topk' (it synchronizes with the host)");
}

// NonZero's count on the device path: the fallback produces it, the arena
// grows for what follows (keeping what earlier steps wrote), a kernel runs at
// the new size, and the output it decides comes from the output allocator, in
// device memory: the same values as the host run, at two sizes in a row.
TEST_F(FakeDriver, DataDependentSizesBindMidRunAndGrowTheArena) {
  FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/nonzero.tir", dir_ / "module");
  runtime::Module& m = dev.module();
  ASSERT_EQ(m.value_symbols.size(), 1u);
  for (int64_t n : {5, 40}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * 4));
    for (float& v : x) v = dist(rng);
    std::vector<int64_t> x_shape = {n, 4}, r_shape = {n, 4}, e_shape = {2, 0};

    std::vector<std::vector<float>> host_outputs(2);
    host_outputs[1].resize(x.size());
    m.output_allocator = [&](size_t i, const std::vector<int64_t>& shape, size_t bytes) {
      host_outputs[i].resize(bytes / sizeof(float));
      e_shape = shape;
      return static_cast<void*>(host_outputs[i].data());
    };
    tcc_tensor in = {x.data(), TCC_F32, 2, x_shape.data()};
    std::vector<tcc_tensor> outs = {{nullptr, TCC_F32, 2, e_shape.data()},
                                    {host_outputs[1].data(), TCC_F32, 2, r_shape.data()}};
    runtime::run_host(m, &in, 1, outs.data(), outs.size());

    void* d_x = runtime::device::alloc(x.size() * sizeof(float));
    void* d_r = runtime::device::alloc(x.size() * sizeof(float));
    void* d_e = nullptr;
    size_t e_bytes = 0;
    runtime::device::upload(d_x, x.data(), x.size() * sizeof(float));
    m.output_allocator = [&](size_t, const std::vector<int64_t>& shape, size_t bytes) {
      EXPECT_EQ(shape, e_shape);
      e_bytes = bytes;
      return d_e = runtime::device::alloc(bytes);
    };
    tcc_tensor d_in = {d_x, TCC_F32, 2, x_shape.data()};
    std::vector<tcc_tensor> d_outs = {{nullptr, TCC_F32, 2, e_shape.data()}, {d_r, TCC_F32, 2, r_shape.data()}};
    runtime::run_cuda(m, &d_in, 1, d_outs.data(), d_outs.size(), dev.stream());
    std::vector<float> e(e_bytes / sizeof(float)), relu(x.size());
    runtime::device::download(e.data(), d_e, e_bytes);
    runtime::device::download(relu.data(), d_r, relu.size() * sizeof(float));
    EXPECT_EQ(e, host_outputs[0]) << "n=" << n;
    EXPECT_EQ(relu, host_outputs[1]) << "n=" << n;
    for (void* p : {d_x, d_r, d_e}) runtime::device::release(p);
  }
}

TEST_F(FakeDriver, ArenaFollowsTheBindingAndIsFreedWithTheModule) {
  size_t before = fake_cuda::live_allocations();
  {
    FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "bench/models/chain100.tir", dir_ / "module");
    for (int64_t b : {2, 4096, 3}) {
      FakeDevice::Runs runs = dev.run_both(b, static_cast<unsigned>(b));
      EXPECT_EQ(runs.device, runs.host) << "b=" << b;
    }
  }
  EXPECT_EQ(fake_cuda::live_allocations(), before);
}

// Random draws, a dropout of what they shift: f32 in and out, on kernels.
constexpr const char* kRandomModel = R"(graph random_step opset(ai.onnx: 18) {
  input %x: f32[n, 4]
  const %ratio: f32[] = [0.25]
  const %training: bool[] = [true]
  %u: f32[n, 4] = RandomUniformLike(%x) {seed = 1.0} name("uniform_like")
  %s: f32[n, 4] = Add(%u, %x) name("shifted")
  %y: f32[n, 4], %mask: bool[n, 4] = Dropout(%s, %ratio, %training) {seed = 4} name("dropout")
  output %y
}
)";

// A replayed CUDA graph is a call: it draws at the module's random offset,
// which the captured advance kernel moves on the device, so replays draw what
// the host build draws call after call; setting the offset is uploaded
// before the next replay.
TEST_F(FakeDriver, ReplayedGraphDrawsAtTheNextRandomOffset) {
  FakeDevice dev(write_model(dir_, kRandomModel), dir_ / "module");
  runtime::Module& m = dev.module();
  ASSERT_TRUE(m.random);
  FakeDevice::Buffers in = dev.inputs(6, 1);
  FakeDevice::Buffers out = dev.outputs(in);
  std::unique_ptr<runtime::CudaGraph> graph =
      runtime::capture_cuda(m, in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(), dev.stream());
  EXPECT_EQ(m.random_offset, 1u) << "the capture's first run is call 0; the capture itself is no call";
  std::vector<std::vector<std::vector<float>>> calls = {out.download()};
  for (int replay = 0; replay < 2; ++replay) {
    std::vector<fake_cuda::Launch> log = dev.replay(*graph, in, in);
    ASSERT_FALSE(log.empty());
    EXPECT_EQ(log.back().kernel, kRandomOffsetAdvance);
    EXPECT_TRUE(log.back().from_graph);
    calls.push_back(out.download());
  }
  EXPECT_EQ(m.random_offset, 3u);
  EXPECT_NE(calls[0], calls[1]);
  EXPECT_NE(calls[1], calls[2]);
  runtime::set_random_offset(m, 0);
  for (size_t k = 0; k < calls.size(); ++k) EXPECT_EQ(calls[k], dev.run_host(in)) << "call " << k;
  runtime::set_random_offset(m, 1);
  dev.replay(*graph, in, in);
  EXPECT_EQ(out.download(), calls[1]);
  EXPECT_EQ(m.random_offset, 2u);
}

TEST_F(FakeDriver, GraphReplaysTheCapturedRunOnNewInputs) {
  FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "bench/models/chain100.tir", dir_ / "module");
  FakeDevice::Buffers in = dev.inputs(16, 1);
  FakeDevice::Buffers out = dev.outputs(in);
  std::unique_ptr<runtime::CudaGraph> graph = runtime::capture_cuda(
      dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(), dev.stream());
  size_t launches_per_run = fake_cuda::launches().size();
  ASSERT_GT(launches_per_run, 0u);

  FakeDevice::Buffers fresh = dev.inputs(16, 2);
  std::vector<fake_cuda::Launch> log = dev.replay(*graph, in, fresh);
  EXPECT_EQ(log.size(), launches_per_run);
  for (const fake_cuda::Launch& l : log) EXPECT_TRUE(l.from_graph) << l.kernel;
  EXPECT_EQ(out.download(), dev.run_host(fresh));
}

// The step inspector (tcc run --check-steps) sees, after each step of a CUDA
// run, what the step wrote, copied back from the device: the same values, by
// the same ids, as after that step of the host run.
TEST_F(FakeDriver, StepInspectorReadsBackWhatEachStepWrote) {
  FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "bench/models/chain100.tir", dir_ / "module");
  FakeDevice::Buffers in = dev.inputs(16, 5);
  std::vector<std::vector<std::pair<int, Tensor>>> device, host;
  auto record = [](std::vector<std::vector<std::pair<int, Tensor>>>& into) {
    return [&into](const runtime::StepInfo&, const std::vector<std::pair<int, Tensor>>& written) {
      into.push_back(written);
    };
  };
  dev.module().step_inspector = record(device);
  FakeDevice::Buffers out = dev.outputs(in);
  runtime::run_cuda(dev.module(), in.tensors.data(), in.tensors.size(), out.tensors.data(), out.tensors.size(),
                    dev.stream());
  dev.module().step_inspector = record(host);
  dev.run_host(in);
  ASSERT_EQ(device.size(), dev.module().steps.size());
  ASSERT_EQ(host.size(), device.size());
  for (size_t i = 0; i < device.size(); ++i) {
    ASSERT_EQ(device[i].size(), dev.module().steps[i].writes.size()) << "step " << i;
    ASSERT_EQ(host[i].size(), device[i].size()) << "step " << i;
    for (size_t w = 0; w < device[i].size(); ++w) {
      EXPECT_EQ(device[i][w].first, host[i][w].first);
      const Tensor &d = device[i][w].second, &h = host[i][w].second;
      ASSERT_EQ(d.shape(), h.shape()) << "step " << i;
      EXPECT_EQ(std::memcmp(d.raw(), h.raw(), d.nbytes()), 0) << "step " << i;
    }
  }
  // The last step's value is the output the run returned.
  std::vector<std::vector<float>> got = out.download();
  const Tensor& last = device.back().back().second;
  ASSERT_EQ(static_cast<size_t>(last.numel()), got.back().size());
  EXPECT_EQ(std::memcmp(last.raw(), got.back().data(), last.nbytes()), 0);
}

// tcc bench's measuring loop (profiler::bench_on_gpu): the warm-up and the
// steps timed one by one, then the batches enqueued back to back, each step
// the module's whole run, launched directly, or in reduce-overhead through
// the runtime's graph per binding (captured once, replayed by every step, the
// counts in the mode's `graphs`), or with --bound-inputs one graph's launch
// alone; the last step's outputs are the host run's.
TEST_F(FakeDriver, BenchTimesStepsOneByOneThenBackToBack) {
  FakeDevice dev(fs::path(TCC_SOURCE_DIR) / "bench/models/chain100.tir", dir_ / "module");
  FakeDevice::Buffers in = dev.inputs(16, 3);
  std::map<std::string, Tensor> inputs;
  for (size_t i = 0; i < in.host.size(); ++i) {
    Tensor t(DType::F32, in.shapes[i]);
    std::memcpy(t.raw_mut(), in.host[i].data(), in.host[i].size() * sizeof(float));
    inputs.emplace(dev.module().inputs[i].name, std::move(t));
  }
  std::vector<std::vector<float>> want = dev.run_host(in);
  fake_cuda::clear_log();
  dev.run_both(16, 3);
  const size_t per_step = fake_cuda::launches().size();
  ASSERT_GT(per_step, 0u);

  profiler::BenchSettings settings;
  settings.warmup = 2;
  settings.iterations = 7;
  const size_t steps = 2 + 7 + profiler::kPipelinedBatches * profiler::kMinPipelinedSteps;
  for (int variant = 0; variant < 3; ++variant) {
    const bool graph = variant > 0, bound = variant == 2;
    SCOPED_TRACE(!graph ? "default" : bound ? "reduce-overhead --bound-inputs" : "reduce-overhead");
    settings.cuda_graph = graph;
    settings.bound_inputs = bound;
    fake_cuda::clear_log();
    std::vector<Tensor> outputs;
    profiler::ModeMeasurement r = profiler::bench_on_gpu((dir_ / "module").string(), graph ? "reduce-overhead" : "default",
                                                         inputs, settings, &outputs);
    EXPECT_EQ(r.note, bound ? "inputs bound to the graph's captured buffers: no copy per step" : "");
    EXPECT_EQ(r.cuda_graph, graph);
    ASSERT_EQ(r.graphs.has_value(), graph);
    if (graph) {
      EXPECT_EQ(r.graphs->captures, 1);
      EXPECT_EQ(r.graphs->replays, static_cast<int64_t>(steps));
      EXPECT_EQ(r.graphs->evictions, 0);
      EXPECT_EQ(r.graphs->uncaptured_steps, 0);
      EXPECT_EQ(r.graphs->not_captured, "");
    }
    EXPECT_EQ(r.latencies_ms.size(), 7u);
    EXPECT_EQ(r.enqueue_ms.size(), 7u);
    EXPECT_EQ(r.gpu_ms.size(), 7u);
    EXPECT_EQ(r.pipelined_steps, profiler::kMinPipelinedSteps);
    ASSERT_EQ(r.pipelined_ms.size(), static_cast<size_t>(profiler::kPipelinedBatches));
    for (double ms : r.pipelined_ms) EXPECT_GT(ms, 0);
    std::vector<fake_cuda::Launch> log = fake_cuda::launches();
    size_t replayed = static_cast<size_t>(
        std::count_if(log.begin(), log.end(), [](const fake_cuda::Launch& l) { return l.from_graph; }));
    // A graph mode also launches the step once as it captures it.
    EXPECT_EQ(log.size(), per_step * (steps + (graph ? 1 : 0)));
    EXPECT_EQ(replayed, graph ? per_step * steps : 0u);
    // A graph step copies its inputs (x and w) into its binding's buffers in one driver call; a bound one copies none.
    EXPECT_EQ(fake_cuda::copy_batches(), graph && !bound ? steps : 0u);
    ASSERT_EQ(outputs.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(static_cast<size_t>(outputs[i].numel()), want[i].size());
      EXPECT_EQ(std::memcmp(outputs[i].raw(), want[i].data(), want[i].size() * sizeof(float)), 0) << "output " << i;
    }
  }
}

// reduce-overhead on a module with a host step: every step runs kernel by
// kernel through the graph API, and the mode's note and graph counts say why.
TEST_F(FakeDriver, BenchCountsTheStepsReduceOverheadCouldNotCapture) {
  FakeDevice dev(write_model(dir_, kFallbackModel), dir_ / "module");
  Tensor x(DType::F32, {4, 4});
  std::vector<float> values(16, 0.5f);
  std::memcpy(x.raw_mut(), values.data(), x.nbytes());
  profiler::BenchSettings settings;
  settings.warmup = 1;
  settings.iterations = 3;
  settings.cuda_graph = true;
  profiler::ModeMeasurement r =
      profiler::bench_on_gpu((dir_ / "module").string(), "reduce-overhead", {{"x", x}}, settings, nullptr);
  const std::string why = "host fallback node 'topk' (it synchronizes with the host)";
  EXPECT_EQ(r.note, "skipping cudagraphs due to " + why);
  EXPECT_FALSE(r.cuda_graph);
  ASSERT_TRUE(r.graphs);
  EXPECT_EQ(r.graphs->captures, 0);
  EXPECT_EQ(r.graphs->replays, 0);
  EXPECT_EQ(r.graphs->uncaptured_steps, 1 + 3 + profiler::kPipelinedBatches * profiler::kMinPipelinedSteps);
  EXPECT_EQ(r.graphs->not_captured, why);
  EXPECT_EQ(profiler::graphs_text(*r.graphs),
            "CUDA graphs: 0 captured, 0 replayed, 0 evicted; 34 steps not captured: " + why);
}

}  // namespace
}  // namespace tcc
