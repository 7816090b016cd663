// The CUDA driver API, opened with dlopen on first use (cuda.h is included for
// its types only), shared by the module runtime (cuda_run.cc), its device
// helpers for measurement, and the kernel timer of autotuning (src/autotune/kernel_timer.cc).
#pragma once

#include <dlfcn.h>

#include <cuda.h>

#include <map>
#include <string>
#include <vector>

#include "module.h"
#include "src/module/entry_points.h"

namespace tcc::runtime {

// The driver entry points the runtime uses (src/module/entry_points.h). Streams,
// events and CUDA graphs serve measurement (src/profiler, src/autotune/kernel_timer.cc)
// and reduce-overhead; cuMemsetD8Async zeroes split-reduction workspaces and
// accumulated outputs and flushes L2.
#define TCC_CUDA_DRIVER_ENTRIES(X) \
  X(init, cuInit, "cuInit") \
  X(device_count, cuDeviceGetCount, "cuDeviceGetCount") \
  X(device_get, cuDeviceGet, "cuDeviceGet") \
  X(device_attribute, cuDeviceGetAttribute, "cuDeviceGetAttribute") \
  X(primary_ctx_retain, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") \
  X(ctx_get_current, cuCtxGetCurrent, "cuCtxGetCurrent") \
  X(ctx_set_current, cuCtxSetCurrent, "cuCtxSetCurrent") \
  X(ctx_get_device, cuCtxGetDevice, "cuCtxGetDevice") \
  X(ctx_push, cuCtxPushCurrent, "cuCtxPushCurrent_v2") \
  X(ctx_pop, cuCtxPopCurrent, "cuCtxPopCurrent_v2") \
  X(module_load, cuModuleLoadData, "cuModuleLoadData") \
  X(module_unload, cuModuleUnload, "cuModuleUnload") \
  X(module_function, cuModuleGetFunction, "cuModuleGetFunction") \
  X(launch, cuLaunchKernel, "cuLaunchKernel") \
  X(mem_alloc, cuMemAlloc, "cuMemAlloc_v2") \
  X(mem_free, cuMemFree, "cuMemFree_v2") \
  X(copy_htod, cuMemcpyHtoD, "cuMemcpyHtoD_v2") \
  X(copy_dtoh, cuMemcpyDtoH, "cuMemcpyDtoH_v2") \
  X(copy_htod_async, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2") \
  X(copy_dtoh_async, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2") \
  X(copy_dtod_async, cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2") \
  X(stream_sync, cuStreamSynchronize, "cuStreamSynchronize") \
  X(error_string, cuGetErrorString, "cuGetErrorString") \
  X(memset_d8_async, cuMemsetD8Async, "cuMemsetD8Async") \
  X(driver_version, cuDriverGetVersion, "cuDriverGetVersion") \
  X(device_name, cuDeviceGetName, "cuDeviceGetName") \
  X(stream_create, cuStreamCreate, "cuStreamCreate") \
  X(stream_destroy, cuStreamDestroy, "cuStreamDestroy_v2") \
  X(event_create, cuEventCreate, "cuEventCreate") \
  X(event_destroy, cuEventDestroy, "cuEventDestroy_v2") \
  X(event_record, cuEventRecord, "cuEventRecord") \
  X(event_sync, cuEventSynchronize, "cuEventSynchronize") \
  X(event_elapsed, cuEventElapsedTime, "cuEventElapsedTime_v2") \
  X(begin_capture, cuStreamBeginCapture, "cuStreamBeginCapture_v2") \
  X(end_capture, cuStreamEndCapture, "cuStreamEndCapture") \
  X(graph_instantiate, cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags") \
  X(graph_launch, cuGraphLaunch, "cuGraphLaunch") \
  X(graph_exec_destroy, cuGraphExecDestroy, "cuGraphExecDestroy") \
  X(graph_destroy, cuGraphDestroy, "cuGraphDestroy")

struct Driver {
  TCC_CUDA_DRIVER_ENTRIES(TCC_ENTRY_MEMBER)
  // Several device copies in one call (CUDA 12.8 on); null on older drivers,
  // which copy one by one.
  decltype(&::cuMemcpyBatchAsync) copy_batch_async = nullptr;
  std::string unavailable;  // why there is no usable device, or empty

  static const Driver& get() {
    static const Driver d = open();
    return d;
  }

  void check(CUresult r, const char* what) const {
    if (r == CUDA_SUCCESS) return;
    const char* text = nullptr;
    error_string(r, &text);
    throw CudaError(std::string(what) + " failed: " + (text ? text : "error " + std::to_string(r)));
  }

 private:
  static Driver open() {
    Driver d{};
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      d.unavailable = "no CUDA driver (libcuda.so.1 cannot be loaded)";
      return d;
    }
    bool ok = TCC_RESOLVE_ENTRIES(TCC_CUDA_DRIVER_ENTRIES, lib, d);
    resolve_entry(lib, "cuMemcpyBatchAsync_v2", d.copy_batch_async);
    int count = 0;
    if (!ok) d.unavailable = "the CUDA driver lacks entry points the runtime needs (too old)";
    else if (d.init(0) != CUDA_SUCCESS) d.unavailable = "the CUDA driver failed to initialize (cuInit)";
    else if (d.device_count(&count) != CUDA_SUCCESS || count == 0) d.unavailable = "no CUDA device";
    return d;
  }
};

// The driver, or NoDevice saying why there is none.
inline const Driver& driver() {
  const Driver& d = Driver::get();
  if (!d.unavailable.empty()) throw NoDevice(d.unavailable);
  return d;
}

// cuLaunchKernel's parameter list for a generated kernel, written into
// `params`, in the order codegen/emit_cuda.cc declares the parameters: each
// buffer's device pointer, each size parameter as an int64, then the workspace
// of a split reduction when `workspace` is not 0, then the random offset's
// device address for a kernel that reads it when `random_offset` is not 0.
// The list points into the arguments, which must outlive the launch; the
// driver only reads through it.
inline void kernel_params(const std::vector<CUdeviceptr>& buffers, const std::vector<int64_t>& sizes,
                          const CUdeviceptr& workspace, const CUdeviceptr& random_offset,
                          std::vector<void*>& params) {
  params.clear();
  for (const CUdeviceptr& p : buffers) params.push_back(const_cast<CUdeviceptr*>(&p));
  for (const int64_t& s : sizes) params.push_back(const_cast<int64_t*>(&s));
  if (workspace) params.push_back(const_cast<CUdeviceptr*>(&workspace));
  if (random_offset) params.push_back(const_cast<CUdeviceptr*>(&random_offset));
}

// The calling thread's context, or device 0's primary context made current.
inline CUcontext current_context(const Driver& d) {
  CUcontext ctx = nullptr;
  d.check(d.ctx_get_current(&ctx), "cuCtxGetCurrent");
  if (!ctx) {
    CUdevice dev;
    d.check(d.device_get(&dev, 0), "cuDeviceGet");
    d.check(d.primary_ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    d.check(d.ctx_set_current(ctx), "cuCtxSetCurrent");
  }
  return ctx;
}

// Runs Gemm and Conv kernels (the library calls) outside a module, on the
// current context, exactly as a module runs them: what autotuning times. The
// library handles and workspace live as long as the runner. Returns the rank
// of the algorithm that ran (KernelConfig::algo, or the last the library offers).
// A Conv kernel with an epilogue takes its conv_epilogue_kernel's function.
class LibraryRunner {
 public:
  LibraryRunner();
  int run(const KernelInfo& k, const std::vector<CUdeviceptr>& buffers, const std::map<std::string, int64_t>& sizes,
          CUstream stream, CUfunction conv_epilogue);

 private:
  std::unique_ptr<CudaState, CudaStateDeleter> state_;
};

}  // namespace tcc::runtime
