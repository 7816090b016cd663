// host_overhead: the runtime's host time per kernel step, on the fake CUDA
// driver (tests/fake_cuda), so it is measured on any machine. Small models are
// bound by it on a GPU (the H100 profiles show default-mode steps whose
// enqueue time equals their GPU time), and it is what reduce-overhead removes.
//
// Benchmarks, side by side in one process:
//   BM_Enqueue/<model>   runtime::enqueue_cuda of one step at fixed shapes;
//                        counters: kernel steps per run, ns per kernel step
//   BM_EnqueueNewShapes/<model> the same with shapes that change every step
//   BM_DriverLaunch      the fake driver's own cuLaunchKernel, the floor a
//                        launch costs in this process
//   BM_GraphLaunch/<model> one replay of the captured step
// scripts/bench writes the ratio of tcc's ns per kernel step to the driver's.
// Models are compiled at start-up with their GEMMs as tcc's templates (the
// fake cannot run cuBLASLt). The fake only checks and logs copies and memsets
// here: they are the device's work, which a GPU does asynchronously.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "module.h"
#include "tests/fake_cuda/fake_cuda.h"
#include "tests/fake_cuda/fake_module.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc::bench {
namespace {

namespace fs = std::filesystem;

// A compiled module with device buffers for inputs and outputs at the largest
// size, and the tensors of one run at each size.
struct Prepared {
  struct Run {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<tcc_tensor> inputs, outputs;
  };
  std::unique_ptr<runtime::Module> module;
  std::map<int64_t, Run> runs;  // by the size of every symbolic dim
  std::vector<void*> memory;
  void* stream = nullptr;
  size_t kernel_steps = 0;
};

// Sizes 8 to 16: nine sets of shapes, one more than the runtime keeps bindings for.
constexpr int64_t kSizes[] = {8, 9, 10, 11, 12, 13, 14, 15, 16};

Prepared& prepared(const std::string& model) {
  // Never destroyed: the modules would free device memory after the driver's statics are gone.
  static auto& cache = *new std::map<std::string, Prepared>;
  static const fs::path dir = make_temp_dir("tcc_host_overhead");
  auto [it, fresh] = cache.try_emplace(model);
  Prepared& p = it->second;
  if (!fresh) return p;
  fs::path out = dir / fs::path(model).stem();
  CliResult r = compile_for_fake_device(fs::path(TCC_SOURCE_DIR) / model, out);
  if (r.code != 0) throw std::runtime_error("tcc compile " + model + " failed:\n" + r.output);
  p.module = runtime::load_module(out.string());
  fake_cuda::set_device_work(false);  // the host path alone: copies and memsets are the device's work
  for (const runtime::StepInfo& s : p.module->steps) p.kernel_steps += s.fallback ? 0 : 1;
  p.stream = runtime::device::create_stream();
  // Tensors of every size share memory sized for the largest.
  for (auto size = std::rbegin(kSizes); size != std::rend(kSizes); ++size) {
    Prepared::Run& run = p.runs[*size];
    run.shapes.reserve(p.module->inputs.size() + p.module->output_values.size());
    bool largest = p.memory.empty();
    size_t next = 0;
    auto tensor = [&](std::vector<int64_t> shape, DType dtype) {
      const std::vector<int64_t>& s = run.shapes.emplace_back(std::move(shape));
      if (largest) {
        size_t bytes = static_cast<size_t>(std::max<int64_t>(1, checked_numel(s))) * dtype_size(dtype);
        p.memory.push_back(runtime::device::alloc(bytes));
      }
      return tcc_tensor{p.memory[next++], static_cast<tcc_dtype>(dtype), static_cast<int32_t>(s.size()), s.data()};
    };
    for (const TensorSig& sig : p.module->inputs) {
      std::vector<int64_t> shape;
      for (const SymExpr& d : sig.shape) shape.push_back(d.is_constant() ? d.constant_value() : *size);
      run.inputs.push_back(tensor(shape, sig.dtype));
    }
    runtime::Binding b = runtime::bind(*p.module, run.inputs.data(), run.inputs.size(), nullptr, nullptr);
    for (int id : p.module->output_values) run.outputs.push_back(tensor(b.shapes[id], p.module->values[id].sig.dtype));
  }
  return p;
}

void enqueue(Prepared& p, Prepared::Run& run) {
  runtime::enqueue_cuda(*p.module, run.inputs.data(), run.inputs.size(), run.outputs.data(), run.outputs.size(),
                        p.stream);
  fake_cuda::clear_log();
}

void per_kernel_step(benchmark::State& state, size_t kernel_steps) {
  state.counters["kernel_steps"] = static_cast<double>(kernel_steps);
  state.counters["ns_per_kernel_step"] = benchmark::Counter(static_cast<double>(state.iterations() * kernel_steps),
                                                            benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// The same input shapes every step, as a training loop at a fixed size runs.
void BM_Enqueue(benchmark::State& state, const std::string& model) {
  Prepared& p = prepared(model);
  for (auto _ : state) enqueue(p, p.runs.at(kSizes[0]));
  per_kernel_step(state, p.kernel_steps);
}

// New input shapes every step (nine sizes in turn, more than the runtime
// keeps): each run binds its sizes afresh, as padded-to-longest batches do.
void BM_EnqueueNewShapes(benchmark::State& state, const std::string& model) {
  Prepared& p = prepared(model);
  size_t i = 0;
  for (auto _ : state) enqueue(p, p.runs.at(kSizes[i++ % std::size(kSizes)]));
  per_kernel_step(state, p.kernel_steps);
}

void BM_GraphLaunch(benchmark::State& state, const std::string& model) {
  Prepared& p = prepared(model);
  Prepared::Run& run = p.runs.at(kSizes[0]);
  std::unique_ptr<runtime::CudaGraph> graph = runtime::capture_cuda(
      *p.module, run.inputs.data(), run.inputs.size(), run.outputs.data(), run.outputs.size(), p.stream);
  for (auto _ : state) {
    graph->launch(p.stream);
    fake_cuda::clear_log();
  }
}

// The same call the runtime makes, straight to the driver: a one-buffer
// kernel of chain100's module.
void BM_DriverLaunch(benchmark::State& state) {
  Prepared& p = prepared("bench/models/chain100.tir");
  const runtime::KernelInfo& k = p.module->kernels.front();
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  std::string image = "extern \"C\" __global__ void " + k.name + "()";
  cuModuleLoadData(&mod, image.c_str());
  cuModuleGetFunction(&f, mod, k.name.c_str());
  CUdeviceptr arg = reinterpret_cast<CUdeviceptr>(p.memory.front());
  void* params[] = {&arg};
  for (auto _ : state) {
    cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, static_cast<CUstream>(p.stream), params, nullptr);
    fake_cuda::clear_log();
  }
  cuModuleUnload(mod);
  per_kernel_step(state, 1);
}

BENCHMARK_CAPTURE(BM_Enqueue, chain100, std::string("bench/models/chain100.tir"));
BENCHMARK_CAPTURE(BM_Enqueue, gpt2_block, std::string("tests/fixtures/gpt2_block.onnx"));
BENCHMARK_CAPTURE(BM_EnqueueNewShapes, chain100, std::string("bench/models/chain100.tir"));
BENCHMARK_CAPTURE(BM_EnqueueNewShapes, gpt2_block, std::string("tests/fixtures/gpt2_block.onnx"));
BENCHMARK_CAPTURE(BM_GraphLaunch, chain100, std::string("bench/models/chain100.tir"));
BENCHMARK(BM_DriverLaunch);

}  // namespace
}  // namespace tcc::bench

BENCHMARK_MAIN();
