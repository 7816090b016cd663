// The fake CUDA driver (fake_cuda.h). Built as libcuda.so.1; each entry point
// below is defined under the name cuda.h declares, whose macros give it the
// ABI symbol the runtime resolves (cuMemAlloc is cuMemAlloc_v2).
#include "tests/fake_cuda/fake_cuda.h"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string_view>

namespace {

using Clock = std::chrono::steady_clock;

// One operation a stream carries: run at once outside a capture, recorded
// into the graph during one, and run again by each replay.
struct Op {
  enum class Kind { Launch, Copy, Set } kind = Kind::Copy;
  tcc::fake_cuda::Launch launch;
  std::function<void()> work;  // the kernel's, from the binder
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
};

struct State {
  std::mutex mu;
  std::map<uintptr_t, size_t> allocations;  // base -> bytes
  std::vector<tcc::fake_cuda::Launch> log;
  size_t copy_batches = 0;
  size_t host_transfers = 0;  // copies between host and device memory
  size_t stream_syncs = 0;
  tcc::fake_cuda::KernelBinder binder;
};

// Never destroyed, as a driver outlives the statics of the programs it serves.
State& state() {
  static auto& s = *new State;
  return s;
}

std::atomic<bool> device_work{true};
thread_local std::vector<CUcontext> context_stack;
thread_local int active_captures = 0;

bool inside_allocation(const State& s, uintptr_t p, size_t bytes) {
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return false;
  --it;
  return p >= it->first && bytes <= it->second && p - it->first <= it->second - bytes;
}

void run(const Op& op, bool from_graph) {
  bool work = device_work.load(std::memory_order_relaxed);
  switch (op.kind) {
    case Op::Kind::Launch: {
      State& s = state();
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.log.push_back(op.launch);
        s.log.back().from_graph = from_graph;
      }
      if (work && op.work) op.work();
      break;
    }
    case Op::Kind::Copy:
      if (work) std::memmove(op.dst, op.src, op.bytes);
      break;
    case Op::Kind::Set:
      if (work) std::memset(op.dst, op.value, op.bytes);
      break;
  }
}

// The image's length: an ELF cubin ends after its last section or header
// table; PTX is a NUL-terminated string.
size_t image_bytes(const unsigned char* image) {
  if (std::memcmp(image, "\x7f" "ELF", 4) != 0 || image[4] != 2)
    return std::strlen(reinterpret_cast<const char*>(image));
  auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, image + at, sizeof v);
    return v;
  };
  auto u16 = [&](size_t at) {
    uint16_t v;
    std::memcpy(&v, image + at, sizeof v);
    return static_cast<uint64_t>(v);
  };
  uint64_t phoff = u64(0x20), shoff = u64(0x28), phentsize = u16(0x36), phnum = u16(0x38), shentsize = u16(0x3a),
           shnum = u16(0x3c);
  uint64_t end = std::max(phoff + phentsize * phnum, shoff + shentsize * shnum);
  constexpr uint32_t kNoBits = 8;
  for (uint64_t i = 0; i < shnum; ++i) {
    uint64_t header = shoff + i * shentsize;
    uint32_t type;
    std::memcpy(&type, image + header + 4, sizeof type);
    if (type != kNoBits) end = std::max(end, u64(header + 0x18) + u64(header + 0x20));
  }
  return end;
}

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

}  // namespace

struct CUctx_st {};
struct CUmod_st {
  std::string image;
};
struct CUfunc_st {
  std::string name;
};
struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;
  std::vector<Op> captured;
};
struct CUevent_st {
  Clock::time_point at;
};
struct CUgraph_st {
  std::vector<Op> ops;
};
struct CUgraphExec_st {
  std::vector<Op> ops;
};

namespace {

// Runs `op` on `stream`, or records it when the stream is capturing.
CUresult submit(CUstream stream, Op op) {
  if (stream && stream->capturing) stream->captured.push_back(std::move(op));
  else run(op, false);
  return CUDA_SUCCESS;
}

CUresult check_device_range(CUdeviceptr p, size_t bytes) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return inside_allocation(s, static_cast<uintptr_t>(p), bytes) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult copy(CUdeviceptr dst_dev, void* dst_host, CUdeviceptr src_dev, const void* src_host, size_t bytes,
              CUstream stream) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst_dev && check_device_range(dst_dev, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  if (src_dev && check_device_range(src_dev, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.dst = dst_dev ? reinterpret_cast<void*>(dst_dev) : dst_host;
  op.src = src_dev ? reinterpret_cast<const void*>(src_dev) : src_host;
  op.bytes = bytes;
  return submit(stream, std::move(op));
}

// Synchronous calls and allocations are what a capture in global or
// thread-local mode forbids.
CUresult capture_forbids() { return active_captures > 0 ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS; }

}  // namespace

namespace tcc::fake_cuda {

std::vector<Launch> launches() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.log;
}

void clear_log() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.log.clear();
  s.copy_batches = 0;
  s.host_transfers = 0;
  s.stream_syncs = 0;
}

size_t host_transfers() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.host_transfers;
}

size_t stream_syncs() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stream_syncs;
}

size_t copy_batches() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.copy_batches;
}

void set_kernel_binder(KernelBinder binder) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.binder = std::move(binder);
}

void set_device_work(bool on) { device_work = on; }

void enqueue(void* stream, const std::string& name, std::function<void()> work) {
  Op op;
  op.kind = Op::Kind::Launch;
  op.launch = {name, {1, 1, 1}, {1, 1, 1}, 0, false};
  op.work = std::move(work);
  submit(static_cast<CUstream>(stream), std::move(op));
}

size_t live_allocations() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.allocations.size();
}

}  // namespace tcc::fake_cuda

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuDriverGetVersion(int* version) {
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  std::string_view text = "tcc fake CUDA device";
  if (len <= 0) return CUDA_ERROR_INVALID_VALUE;
  size_t n = std::min(text.size(), static_cast<size_t>(len - 1));
  std::memcpy(name, text.data(), n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

// An sm_90 device with H100's memory system.
CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 50 << 20; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  static CUctx_st primary;
  *ctx = &primary;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = context_stack.empty() ? nullptr : context_stack.back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  if (context_stack.empty()) context_stack.push_back(ctx);
  else context_stack.back() = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  if (context_stack.empty() || !context_stack.back()) return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  context_stack.push_back(ctx);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* ctx) {
  if (context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx) *ctx = context_stack.back();
  context_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  if (!image) return CUDA_ERROR_INVALID_VALUE;
  const auto* bytes = static_cast<const unsigned char*>(image);
  *module = new CUmod_st{std::string(reinterpret_cast<const char*>(bytes), image_bytes(bytes))};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  delete module;
  return CUDA_SUCCESS;
}

// The name must occur in the image as a whole symbol. The handles live as
// long as the process, as a module's functions live as long as the module.
CUresult CUDAAPI cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (!module || !name || !*name) return CUDA_ERROR_INVALID_VALUE;
  std::string_view image = module->image, wanted = name;
  for (size_t at = image.find(wanted); at != std::string_view::npos; at = image.find(wanted, at + 1)) {
    bool starts = at == 0 || !is_identifier_char(image[at - 1]);
    bool ends = at + wanted.size() == image.size() || !is_identifier_char(image[at + wanted.size()]);
    if (starts && ends) {
      *function = new CUfunc_st{name};
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

// The limits of an sm_90 launch without opting in to more shared memory.
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                unsigned bz, unsigned shared_bytes, CUstream stream, void** params, void** extra) {
  if (!f || (!params && !extra)) return CUDA_ERROR_INVALID_VALUE;
  if (gx == 0 || gy == 0 || gz == 0 || gx > 0x7fffffffu || gy > 65535 || gz > 65535) return CUDA_ERROR_INVALID_VALUE;
  if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 ||
      static_cast<uint64_t>(bx) * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared_bytes > 48 * 1024) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = Op::Kind::Launch;
  op.launch = {f->name, {gx, gy, gz}, {bx, by, bz}, shared_bytes, false};
  tcc::fake_cuda::KernelBinder binder;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    binder = s.binder;
  }
  if (binder) op.work = binder(f->name, params);
  return submit(stream, std::move(op));
}

// Device memory is host memory aligned as cuMemAlloc aligns it.
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  if (CUresult r = capture_forbids()) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* mem = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocations[reinterpret_cast<uintptr_t>(mem)] = bytes;
  *p = reinterpret_cast<CUdeviceptr>(mem);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  if (CUresult r = capture_forbids()) return r;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.allocations.erase(static_cast<uintptr_t>(p)) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void*>(p));
  return CUDA_SUCCESS;
}

static void count_host_transfer() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.host_transfers;
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult r = capture_forbids()) return r;
  count_host_transfer();
  return copy(dst, nullptr, 0, src, bytes, nullptr);
}

CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult r = capture_forbids()) return r;
  count_host_transfer();
  return copy(0, dst, src, nullptr, bytes, nullptr);
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  count_host_transfer();
  return copy(dst, nullptr, 0, src, bytes, stream);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  count_host_transfer();
  return copy(0, dst, src, nullptr, bytes, stream);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return copy(dst, nullptr, src, nullptr, bytes, stream);
}

// Each copy as cuMemcpyDtoDAsync; every source in stream order is the only
// ordering the runtime asks for.
CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                                    CUmemcpyAttributes* attrs, size_t* attrs_idxs, size_t num_attrs, CUstream stream) {
  if (count == 0 || !dsts || !srcs || !sizes || num_attrs != 1 || !attrs || !attrs_idxs || attrs_idxs[0] != 0 ||
      attrs[0].srcAccessOrder != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i)
    if (CUresult r = copy(dsts[i], nullptr, srcs[i], nullptr, sizes[i], stream)) return r;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.copy_batches;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream) {
  if (bytes == 0) return CUDA_SUCCESS;
  if (check_device_range(dst, bytes) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = Op::Kind::Set;
  op.dst = reinterpret_cast<void*>(dst);
  op.bytes = bytes;
  op.value = value;
  return submit(stream, std::move(op));
}

// Synchronizing a capturing stream fails and spoils the capture, as on a device.
CUresult CUDAAPI cuStreamSynchronize(CUstream stream) {
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stream_syncs;
  }
  if (stream && stream->capturing) {
    stream->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return capture_forbids();
}

CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = new CUstream_st;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream stream) {
  delete stream;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
  *event = new CUevent_st;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent event) {
  delete event;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent event, CUstream) {
  event->at = Clock::now();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  *ms = std::chrono::duration<float, std::milli>(end->at - start->at).count();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode mode) {
  if (!stream || stream->capturing) return CUDA_ERROR_INVALID_VALUE;
  stream->capturing = true;
  stream->invalidated = false;
  stream->captured.clear();
  if (mode != CU_STREAM_CAPTURE_MODE_RELAXED) ++active_captures;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (!stream || !stream->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  stream->capturing = false;
  if (active_captures > 0) --active_captures;
  if (stream->invalidated) {
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = new CUgraph_st{std::move(stream->captured)};
  stream->captured.clear();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  *exec = new CUgraphExec_st{graph->ops};
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec exec, CUstream) {
  if (!exec) return CUDA_ERROR_INVALID_VALUE;
  for (const Op& op : exec->ops) run(op, true);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec exec) {
  delete exec;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph graph) {
  delete graph;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_SUCCESS: *text = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *text = "invalid argument (fake driver)"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "out of memory (fake driver)"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *text = "invalid device context (fake driver)"; break;
    case CUDA_ERROR_NOT_FOUND: *text = "named symbol not found (fake driver)"; break;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      *text = "operation not permitted when stream is capturing (fake driver)";
      break;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      *text = "operation failed due to a previous error during capture (fake driver)";
      break;
    default: *text = "unknown error (fake driver)"; break;
  }
  return CUDA_SUCCESS;
}

}  // extern "C"
