// Running a compiled module from a tool: the measuring loop of `tcc bench` and
// `tcc profile` on the GPU, and the single runs of `tcc run` (GPU or host).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/ir/tensor.h"
#include "src/profiler/measurement.h"

namespace tcc::profiler {

struct BenchSettings {
  int warmup = 10;
  int iterations = 0;       // 0: until the median is stable (or duration_s, when set)
  double duration_s = 0;    // time steps for this long instead of a fixed count
  bool cuda_graph = false;  // reduce-overhead: a CUDA graph per binding, captured once and replayed
  bool bound_inputs = false;  // with cuda_graph: the caller writes its inputs into the captured buffers itself
};

// "until stable": batches of this many steps until the median of a batch is
// within kStableTolerance of the previous batch's, at most kMaxSteps steps.
constexpr int kStableBatch = 50;
constexpr double kStableTolerance = 0.02;
constexpr int kMaxSteps = 5000;
// Throughput: kPipelinedBatches batches of as many steps as were timed one by
// one, within [kMinPipelinedSteps, kMaxPipelinedSteps], enqueued back to back.
constexpr int kPipelinedBatches = 3;
constexpr int kMinPipelinedSteps = 10;
constexpr int kMaxPipelinedSteps = 1000;

// Runs the module on the GPU on a stream of its own: warm-up, timed steps
// (host wall time, host enqueue time and GPU time of each, each step waited
// for), batches of steps enqueued back to back (throughput: one step's
// enqueue overlaps the GPU's work on the steps before it). Inputs are
// uploaded once. With cuda_graph, each step runs through the runtime's CUDA
// graph per binding (runtime::enqueue_cuda_graphs), which copies the inputs
// into the graph's static buffers (in one batched driver call), replays it
// and copies the outputs out, as a caller with new inputs would; with
// bound_inputs the caller binds those buffers itself, so the step is one
// graph's launch alone (noted in the mode's note). The mode's `graphs` count
// the captures, replays and evictions; when the module cannot be captured, the
// mode's note says "skipping cudagraphs due to <reason>" and it runs as default.
// `outputs` receives the outputs of the last step. NoDevice without a GPU.
ModeMeasurement bench_on_gpu(const std::string& module_dir, const std::string& mode,
                             const std::map<std::string, Tensor>& inputs, const BenchSettings& settings,
                             std::vector<Tensor>* outputs);

// `steps` steps of the module set up as bench_on_gpu sets it up, after one
// untraced step, traced with CUPTI (CuptiTrace), each step waited for: fills
// the mode's traced_steps, activities, step_windows and spans. CUPTI, once
// attached, stays in the process's driver calls until it is torn down
// (cuptiFinalize, which tcc does not call), so a tool times every mode before
// it traces any.
void trace_on_gpu(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                  const BenchSettings& settings, int steps, ModeMeasurement& mode);

// Called after each step of a single run with the values it wrote, by name
// (runtime::Module::step_inspector): `tcc run --check-steps`.
using StepInspector =
    std::function<void(const std::string& kernel, const std::string& node, const std::map<std::string, Tensor>& written)>;

// One run of the module on the host (host.so and the reference implementation
// for fallbacks), as its call `random_offset` (docs/MODULE.md, "Random ops").
std::vector<Tensor> run_on_host(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                                uint64_t random_offset = 0, const StepInspector& inspect = {});

// One run of the module on the GPU, inputs uploaded and outputs downloaded, as
// its call `random_offset`.
std::vector<Tensor> run_on_gpu(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                               uint64_t random_offset = 0, const StepInspector& inspect = {});

// The device's name as the driver reports it ("NVIDIA H100 80GB HBM3").
std::string gpu_name();

// The device's cubin architecture, from its compute capability ("sm_90").
std::string gpu_arch();

}  // namespace tcc::profiler
