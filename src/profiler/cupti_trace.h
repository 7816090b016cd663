// Kernel tracing with CUPTI's Activity API, for `tcc profile`.
//
// libcupti is opened with dlopen (the library path, then /usr/local/cuda/lib64,
// /usr/local/cuda/lib and /usr/local/cuda/extras/CUPTI/lib64), so tcc starts without it. While a trace is active,
// CONCURRENT_KERNEL records collect every kernel execution with its stream and
// GPU timestamps; the runtime's step observer pushes each step's index as an
// external correlation id, which maps a record back to the manifest kernel
// whose step launched it — cuBLASLt's own kernels included (CUPTI writes those
// ids only next to driver and runtime API records, so those kinds are on too).
// A CUDA graph's replay runs without the observer: its records are named by
// position after those of one step launched directly inside the same trace.
//
// For the step-time accounting (step_time.h) a trace also records MEMCPY and
// MEMSET records (copies on the GPU's timeline), SYNCHRONIZATION records (the
// host's waits in cuStreamSynchronize, cuEventSynchronize, cuCtxSynchronize),
// each host step the module runs, from the step observer's begin to its end,
// and the window of each step run through trace_step, all on CUPTI's clock
// (cuptiGetTimestamp for the host's own stamps).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/profiler/measurement.h"

namespace tcc::runtime {
struct Module;
}

namespace tcc::profiler {

class CuptiTrace {
 public:
  // InputError naming what is missing when CUPTI cannot be loaded or enabled.
  explicit CuptiTrace(runtime::Module& module);
  ~CuptiTrace();
  CuptiTrace(const CuptiTrace&) = delete;
  CuptiTrace& operator=(const CuptiTrace&) = delete;

  // Runs `step`, which enqueues one step and waits for it, as a traced step:
  // its window is from just before the call to just after it.
  void trace_step(const std::function<void()>& step);

  struct Result {
    std::vector<KernelActivity> kernels;
    std::vector<StepWindow> windows;  // one per trace_step
    std::vector<TimelineSpan> spans;  // copies, host steps and synchronizations in those windows
  };
  // Flushes the records. The kernel executions are each named by the manifest
  // kernel of the step that launched it; where the trace holds graph replays,
  // they are the replays' alone (name_graph_replays), the directly launched
  // steps serving only to name them.
  Result finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The kernel executions of CUDA graph replays, named. `step` holds the named
// executions of one step launched directly (each library kernel under the step
// that launched it); each replay holds its raw records (CUPTI's kernel names).
// A replay captured from one stream runs its kernels in launch order, so where
// its count matches the step's and every module kernel stands at its place,
// the i-th execution by start time takes the step's i-th name; otherwise only
// the module's own kernels, named alike, are kept.
std::vector<KernelActivity> name_graph_replays(std::vector<KernelActivity> step,
                                               std::vector<std::vector<KernelActivity>> replays,
                                               const std::set<std::string>& module_kernels);

// Why CUPTI cannot be used here, or "" when it can.
std::string cupti_unavailable();

}  // namespace tcc::profiler
