// Kernel tracing with CUPTI's Activity API, for `tcc profile`.
//
// libcupti is opened with dlopen (the library path, then /usr/local/cuda/lib64,
// /usr/local/cuda/lib and /usr/local/cuda/extras/CUPTI/lib64), so tcc starts without it. While a trace is active,
// CONCURRENT_KERNEL records collect every kernel execution with its stream and
// GPU timestamps; the runtime's step observer pushes each step's index as an
// external correlation id, which maps a record back to the manifest kernel
// whose step launched it — cuBLASLt's own kernels included (CUPTI writes those
// ids only next to driver and runtime API records, so those kinds are on too).
#pragma once

#include <memory>
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

  // Flushes the records and returns the kernel executions of the traced steps,
  // each named by the manifest kernel of the step that launched it.
  std::vector<KernelActivity> finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Why CUPTI cannot be used here, or "" when it can.
std::string cupti_unavailable();

}  // namespace tcc::profiler
