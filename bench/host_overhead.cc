// host_overhead: the runtime's host time per kernel step, on the fake CUDA
// driver (tests/fake_cuda), so it is measured on any machine. Small models are
// bound by it on a GPU (the H100 profiles show default-mode steps whose
// enqueue time equals their GPU time), and it is what reduce-overhead removes.
//
// Benchmarks, side by side in one process:
//   BM_Enqueue/<model>   runtime::enqueue_cuda of one step; counters: kernel
//                        steps per run and ns per kernel step
//   BM_DriverLaunch      the fake driver's own cuLaunchKernel, the floor a
//                        launch costs in this process
//   BM_GraphLaunch/<model> one replay of the captured step
// scripts/bench writes the ratio of tcc's ns per kernel step to the driver's.
// Models are compiled at start-up with their GEMMs as tcc's templates (the
// fake cannot run cuBLASLt).
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
#include "tests/unit/temp_dir.h"

namespace tcc::bench {
namespace {

namespace fs = std::filesystem;

// A compiled module with device inputs and outputs for one binding.
struct Prepared {
  std::unique_ptr<runtime::Module> module;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<tcc_tensor> inputs, outputs;
  void* stream = nullptr;
  size_t kernel_steps = 0;
};

Prepared& prepared(const std::string& model, int64_t size) {
  static std::map<std::string, Prepared> cache;
  static const fs::path dir = make_temp_dir("tcc_host_overhead");
  auto [it, fresh] = cache.try_emplace(model);
  Prepared& p = it->second;
  if (!fresh) return p;
  fs::path out = dir / fs::path(model).stem();
  CliResult r = compile_for_fake_device(fs::path(TCC_SOURCE_DIR) / model, out);
  if (r.code != 0) throw std::runtime_error("tcc compile " + model + " failed:\n" + r.output);
  p.module = runtime::load_module(out.string());
  p.shapes.reserve(p.module->inputs.size() + p.module->output_values.size());
  for (const runtime::TensorSig& sig : p.module->inputs) {
    std::vector<int64_t>& shape = p.shapes.emplace_back();
    for (const SymExpr& d : sig.shape) shape.push_back(d.is_constant() ? d.constant_value() : size);
    size_t bytes = static_cast<size_t>(checked_numel(shape)) * dtype_size(sig.dtype);
    p.inputs.push_back({runtime::device::alloc(bytes), static_cast<tcc_dtype>(sig.dtype),
                        static_cast<int32_t>(shape.size()), shape.data()});
  }
  runtime::Binding b = runtime::bind(*p.module, p.inputs.data(), p.inputs.size(), nullptr, nullptr);
  for (int id : p.module->output_values) {
    std::vector<int64_t>& shape = p.shapes.emplace_back(b.shapes[id]);
    DType dtype = p.module->values[id].sig.dtype;
    size_t bytes = static_cast<size_t>(std::max<int64_t>(1, checked_numel(shape))) * dtype_size(dtype);
    p.outputs.push_back({runtime::device::alloc(bytes), static_cast<tcc_dtype>(dtype),
                         static_cast<int32_t>(shape.size()), shape.data()});
  }
  for (const runtime::StepInfo& s : p.module->steps) p.kernel_steps += s.fallback ? 0 : 1;
  p.stream = runtime::device::create_stream();
  return p;
}

void BM_Enqueue(benchmark::State& state, const std::string& model, int64_t size) {
  Prepared& p = prepared(model, size);
  for (auto _ : state) {
    runtime::enqueue_cuda(*p.module, p.inputs.data(), p.inputs.size(), p.outputs.data(), p.outputs.size(), p.stream);
    fake_cuda::clear_log();
  }
  state.counters["kernel_steps"] = static_cast<double>(p.kernel_steps);
  state.counters["ns_per_kernel_step"] = benchmark::Counter(
      static_cast<double>(state.iterations() * p.kernel_steps), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_GraphLaunch(benchmark::State& state, const std::string& model, int64_t size) {
  Prepared& p = prepared(model, size);
  std::unique_ptr<runtime::CudaGraph> graph =
      runtime::capture_cuda(*p.module, p.inputs.data(), p.inputs.size(), p.outputs.data(), p.outputs.size(), p.stream);
  for (auto _ : state) {
    graph->launch(p.stream);
    fake_cuda::clear_log();
  }
}

// The same call the runtime makes, straight to the driver: a one-buffer
// kernel of chain100's module.
void BM_DriverLaunch(benchmark::State& state) {
  Prepared& p = prepared("bench/models/chain100.tir", 8);
  const runtime::KernelInfo& k = p.module->kernels.front();
  CUmodule mod = nullptr;
  CUfunction f = nullptr;
  std::string image = "extern \"C\" __global__ void " + k.name + "()";
  cuModuleLoadData(&mod, image.c_str());
  cuModuleGetFunction(&f, mod, k.name.c_str());
  CUdeviceptr arg = reinterpret_cast<CUdeviceptr>(p.inputs.front().data);
  void* params[] = {&arg};
  for (auto _ : state) {
    cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, static_cast<CUstream>(p.stream), params, nullptr);
    fake_cuda::clear_log();
  }
  cuModuleUnload(mod);
  state.counters["ns_per_kernel_step"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_Enqueue, chain100, std::string("bench/models/chain100.tir"), 8);
BENCHMARK_CAPTURE(BM_Enqueue, gpt2_block, std::string("tests/fixtures/gpt2_block.onnx"), 8);
BENCHMARK_CAPTURE(BM_GraphLaunch, chain100, std::string("bench/models/chain100.tir"), 8);
BENCHMARK(BM_DriverLaunch);

}  // namespace
}  // namespace tcc::bench

BENCHMARK_MAIN();
