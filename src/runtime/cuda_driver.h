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

namespace tcc::runtime {

template <typename F>
inline bool resolve(void* lib, const char* name, F*& fn) {
  fn = reinterpret_cast<F*>(dlsym(lib, name));
  return fn != nullptr;
}

// The driver entry points the runtime uses. The names are the ABI symbols,
// which cuda.h spells through macros (cuMemAlloc is cuMemAlloc_v2).
struct Driver {
  decltype(&::cuInit) init;
  decltype(&::cuDeviceGetCount) device_count;
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDeviceGetAttribute) device_attribute;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain;
  decltype(&::cuCtxGetCurrent) ctx_get_current;
  decltype(&::cuCtxSetCurrent) ctx_set_current;
  decltype(&::cuCtxGetDevice) ctx_get_device;
  decltype(&::cuCtxPushCurrent) ctx_push;
  decltype(&::cuCtxPopCurrent) ctx_pop;
  decltype(&::cuModuleLoadData) module_load;
  decltype(&::cuModuleUnload) module_unload;
  decltype(&::cuModuleGetFunction) module_function;
  decltype(&::cuLaunchKernel) launch;
  decltype(&::cuMemAlloc) mem_alloc;
  decltype(&::cuMemFree) mem_free;
  decltype(&::cuMemcpyHtoD) copy_htod;
  decltype(&::cuMemcpyDtoH) copy_dtoh;
  decltype(&::cuMemcpyHtoDAsync) copy_htod_async;
  decltype(&::cuMemcpyDtoHAsync) copy_dtoh_async;
  decltype(&::cuMemcpyDtoDAsync) copy_dtod_async;
  decltype(&::cuStreamSynchronize) stream_sync;
  decltype(&::cuGetErrorString) error_string;
  decltype(&::cuMemsetD8Async) memset_d8_async;  // zeroing split-reduction workspaces and accumulated outputs, flushing L2
  decltype(&::cuDriverGetVersion) driver_version;
  decltype(&::cuDeviceGetName) device_name;
  // Streams, events and CUDA graphs: measurement (src/profiler, src/autotune/kernel_timer.cc) and reduce-overhead.
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamDestroy) stream_destroy;
  decltype(&::cuEventCreate) event_create;
  decltype(&::cuEventDestroy) event_destroy;
  decltype(&::cuEventRecord) event_record;
  decltype(&::cuEventSynchronize) event_sync;
  decltype(&::cuEventElapsedTime) event_elapsed;
  decltype(&::cuStreamBeginCapture) begin_capture;
  decltype(&::cuStreamEndCapture) end_capture;
  decltype(&::cuGraphInstantiateWithFlags) graph_instantiate;
  decltype(&::cuGraphLaunch) graph_launch;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy;
  decltype(&::cuGraphDestroy) graph_destroy;
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
    bool ok = resolve(lib, "cuInit", d.init) && resolve(lib, "cuDeviceGetCount", d.device_count) &&
              resolve(lib, "cuDeviceGet", d.device_get) &&
              resolve(lib, "cuDeviceGetAttribute", d.device_attribute) &&
              resolve(lib, "cuDevicePrimaryCtxRetain", d.primary_ctx_retain) &&
              resolve(lib, "cuCtxGetCurrent", d.ctx_get_current) && resolve(lib, "cuCtxSetCurrent", d.ctx_set_current) &&
              resolve(lib, "cuCtxGetDevice", d.ctx_get_device) && resolve(lib, "cuCtxPushCurrent_v2", d.ctx_push) &&
              resolve(lib, "cuCtxPopCurrent_v2", d.ctx_pop) && resolve(lib, "cuModuleLoadData", d.module_load) &&
              resolve(lib, "cuModuleUnload", d.module_unload) &&
              resolve(lib, "cuModuleGetFunction", d.module_function) && resolve(lib, "cuLaunchKernel", d.launch) &&
              resolve(lib, "cuMemAlloc_v2", d.mem_alloc) && resolve(lib, "cuMemFree_v2", d.mem_free) &&
              resolve(lib, "cuMemcpyHtoD_v2", d.copy_htod) && resolve(lib, "cuMemcpyDtoH_v2", d.copy_dtoh) &&
              resolve(lib, "cuMemcpyHtoDAsync_v2", d.copy_htod_async) &&
              resolve(lib, "cuMemcpyDtoHAsync_v2", d.copy_dtoh_async) &&
              resolve(lib, "cuMemcpyDtoDAsync_v2", d.copy_dtod_async) &&
              resolve(lib, "cuStreamSynchronize", d.stream_sync) && resolve(lib, "cuGetErrorString", d.error_string) &&
              resolve(lib, "cuMemsetD8Async", d.memset_d8_async) &&
              resolve(lib, "cuDriverGetVersion", d.driver_version) && resolve(lib, "cuDeviceGetName", d.device_name) &&
              resolve(lib, "cuStreamCreate", d.stream_create) && resolve(lib, "cuStreamDestroy_v2", d.stream_destroy) &&
              resolve(lib, "cuEventCreate", d.event_create) && resolve(lib, "cuEventDestroy_v2", d.event_destroy) &&
              resolve(lib, "cuEventRecord", d.event_record) && resolve(lib, "cuEventSynchronize", d.event_sync) &&
              resolve(lib, "cuEventElapsedTime_v2", d.event_elapsed) &&
              resolve(lib, "cuStreamBeginCapture_v2", d.begin_capture) &&
              resolve(lib, "cuStreamEndCapture", d.end_capture) &&
              resolve(lib, "cuGraphInstantiateWithFlags", d.graph_instantiate) &&
              resolve(lib, "cuGraphLaunch", d.graph_launch) && resolve(lib, "cuGraphExecDestroy", d.graph_exec_destroy) &&
              resolve(lib, "cuGraphDestroy", d.graph_destroy);
    if (!resolve(lib, "cuMemcpyBatchAsync_v2", d.copy_batch_async)) d.copy_batch_async = nullptr;
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
// of a split reduction when `workspace` is not 0. The list points into the
// arguments, which must outlive the launch; the driver only reads through it.
inline void kernel_params(const std::vector<CUdeviceptr>& buffers, const std::vector<int64_t>& sizes,
                          const CUdeviceptr& workspace, std::vector<void*>& params) {
  params.clear();
  for (const CUdeviceptr& p : buffers) params.push_back(const_cast<CUdeviceptr*>(&p));
  for (const int64_t& s : sizes) params.push_back(const_cast<int64_t*>(&s));
  if (workspace) params.push_back(const_cast<CUdeviceptr*>(&workspace));
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
class LibraryRunner {
 public:
  LibraryRunner();
  int run(const KernelInfo& k, const std::vector<CUdeviceptr>& buffers, const std::map<std::string, int64_t>& sizes,
           CUstream stream);

 private:
  std::unique_ptr<CudaState, CudaStateDeleter> state_;
};

}  // namespace tcc::runtime
