// Running a module on a CUDA device.
//
// The driver (libcuda.so.1) is opened with dlopen on first use, like the
// libraries Gemm and Conv kernels call (cuda_libraries.h); cuda.h is included
// for its types only, so a program linked with the runtime starts where there
// is no GPU.
//
// Per module, the first run in a context loads the cubin that fits the device
// (PTX when none does), uploads the weights and keeps them; the arena grows to
// the largest binding seen. Kernel steps launch with the manifest's launch
// configuration (split reductions with their own zeroed workspace, kept with
// the module like the arena); Gemm steps are one cuBLASLt matmul; Conv steps are cuDNN
// calls (one fused convolution + bias + residual + Relu where cuDNN has it); fallback steps copy
// their values to the host, run the reference interpreter and copy back.
// What depends only on the input shapes (the binding, every step's size
// arguments, grid and workspace, and the binding constants: masks and
// positions computed on the host and uploaded) is evaluated once per set of
// shapes and kept for the next runs at those shapes, so a steady run only
// resolves pointers and launches.
// A run returns after the stream has finished it, since its arena is reused
// by the next run; enqueue_cuda leaves that wait to tools that order their
// runs on one stream. capture_cuda records one run as a CUDA graph.
#include <algorithm>
#include <fstream>

#include "cuda_driver.h"
#include "cuda_libraries.h"
#include "module.h"

namespace tcc::runtime {

namespace {

// "sm_86" -> 86, "compute_90" -> 90; -1 for arch-specific targets (sm_90a) and anything else.
int arch_number(const std::string& arch) {
  size_t at = arch.find('_');
  std::string digits = arch.substr(at + 1);
  if (digits.empty() || digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoi(digits);
}

// A cubin runs on devices of its major version and at least its minor; PTX
// is compiled by the driver for any newer device. The newest that fits wins.
const CudaBinaryFile& pick_binary(const Module& m, int major, int minor) {
  int cc = major * 10 + minor;
  const CudaBinaryFile* best = nullptr;
  int best_number = -1;
  for (bool ptx : {false, true}) {
    for (const CudaBinaryFile& bin : m.cuda_binaries) {
      if ((bin.arch.rfind("compute_", 0) == 0) != ptx) continue;
      int n = arch_number(bin.arch);
      bool fits = ptx ? (n >= 0 && n <= cc) : (n >= 0 && n / 10 == major && n <= cc);
      if (fits && n > best_number) best = &bin, best_number = n;
    }
    if (best) return *best;
  }
  std::string have;
  for (const CudaBinaryFile& bin : m.cuda_binaries) have += (have.empty() ? "" : ", ") + bin.arch;
  throw CudaError("the module has no binary for sm_" + std::to_string(cc) + " (it has: " +
                  (have.empty() ? "none" : have) + ")");
}

}  // namespace

// The runs at one set of input shapes share their binding and each kernel
// step's launch arguments.
// Device memory freed when its last owner lets go: the arena, a kernel's
// workspace and a binding's constants, which the module replaces as bindings
// grow or change while CUDA graphs captured on them still read them.
using DeviceMemory = std::shared_ptr<const void>;

DeviceMemory device_alloc(const Driver& d, size_t bytes, const char* what) {
  CUdeviceptr p = 0;
  d.check(d.mem_alloc(&p, bytes), what);
  return DeviceMemory(reinterpret_cast<const void*>(p),
                      [](const void* q) { Driver::get().mem_free(reinterpret_cast<CUdeviceptr>(q)); });
}

CUdeviceptr address(const DeviceMemory& m) { return reinterpret_cast<CUdeviceptr>(m.get()); }

struct BoundRun {
  std::vector<int64_t> dims;  // every input's dims in order: what a run is matched by
  bool reusable = false;      // false when sizes depend on data, bound anew each run
  Binding binding;
  // The binding constants on the device (binding.constant_offsets); null when there are none.
  DeviceMemory constants;
  struct Launch {
    // A generated kernel's:
    std::vector<int64_t> sizes;
    unsigned grid[3] = {1, 1, 1};
    int64_t workspace_bytes = 0;  // 0: none
    // A library call's:
    GemmProblem gemm;
    ConvProblem conv;
  };
  std::vector<Launch> launches;  // per schedule step; unused for fallbacks
};

struct CudaState {
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  // Per kernel: a generated kernel's function, a Conv kernel's epilogue's
  // (conv_epilogue_kernel) where it has one, else null.
  std::vector<CUfunction> functions;
  CUdeviceptr weights = 0;
  DeviceMemory arena;
  size_t arena_bytes = 0;
  LibraryCalls libraries;
  // The device copy of the module's random offset and the kernel that
  // advances it, where kernels read it (KernelLaunch::random_offset).
  DeviceMemory random_offset;
  CUfunction advance_random_offset = nullptr;
  // Per kernel, the zeroed workspace of a split reduction (launch.workspace_bytes).
  struct KernelWorkspace {
    DeviceMemory ptr;
    size_t bytes = 0;  // allocated
    size_t used = 0;   // the layout of the last launch
  };
  std::vector<KernelWorkspace> kernel_workspaces;
  // The bindings of the latest distinct input shapes, the most recent first.
  static constexpr size_t kBoundRuns = 8;
  std::vector<BoundRun> bound;
  // Per-run scratch, kept to spare the allocations.
  std::vector<int64_t> dims;
  std::vector<CUdeviceptr> ptr, buf;
  std::vector<void*> params;

  ~CudaState() {
    const Driver& d = Driver::get();
    if (d.ctx_push(ctx) != CUDA_SUCCESS) return;
    // What no CUDA graph still holds is freed here, in the module's context.
    bound.clear();
    arena.reset();
    random_offset.reset();
    kernel_workspaces.clear();
    if (weights) d.mem_free(weights);
    libraries.release();
    if (module) d.module_unload(module);
    CUcontext popped;
    d.ctx_pop(&popped);
  }
};

void CudaStateDeleter::operator()(CudaState* s) const { delete s; }

namespace {

std::vector<char> read_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadModule(path + ": cannot read");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.push_back('\0');  // PTX is loaded as a NUL-terminated string; cubins ignore the extra byte
  return bytes;
}

CudaState& device_state(Module& m, const Driver& d, CUcontext ctx, CUstream stream) {
  if (m.cuda) {
    if (m.cuda->ctx != ctx) throw CudaError("the module was first run in another CUDA context");
    return *m.cuda;
  }
  auto s = std::unique_ptr<CudaState, CudaStateDeleter>(new CudaState);
  s->ctx = ctx;
  s->libraries.tf32 = m.tf32;
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  d.check(d.device_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  // The cubin's function of each kernel that launches one.
  auto function_of = [](const KernelInfo& k) { return k.library_call ? k.conv_epilogue() : k.name; };
  if (std::any_of(m.kernels.begin(), m.kernels.end(), [&](const KernelInfo& k) { return !function_of(k).empty(); })) {
    std::vector<char> image = read_binary(pick_binary(m, major, minor).path);
    d.check(d.module_load(&s->module, image.data()), "cuModuleLoadData");
  }
  s->kernel_workspaces.resize(m.kernels.size());
  for (const KernelInfo& k : m.kernels) {
    CUfunction f = nullptr;
    if (std::string name = function_of(k); !name.empty())
      d.check(d.module_function(&f, s->module, name.c_str()), name.c_str());
    s->functions.push_back(f);
  }
  if (std::any_of(m.kernels.begin(), m.kernels.end(), [](const KernelInfo& k) { return k.launch.random_offset; })) {
    d.check(d.module_function(&s->advance_random_offset, s->module, kRandomOffsetAdvance), kRandomOffsetAdvance);
    s->random_offset = device_alloc(d, sizeof(uint64_t), "cuMemAlloc (random offset)");
    m.random_offset_on_device = false;
  }
  if (m.weight_data.size() > 0) {
    // A cuMemcpyHtoD from pageable memory may return before its DMA lands and
    // is not ordered with non-blocking streams: copy on the run's stream and wait.
    d.check(d.mem_alloc(&s->weights, m.weight_data.size()), "cuMemAlloc (weights)");
    d.check(d.copy_htod_async(s->weights, m.weight_data.data(), m.weight_data.size(), stream),
            "cuMemcpyHtoDAsync (weights)");
    d.check(d.stream_sync(stream), "cuStreamSynchronize");
  }
  m.cuda = std::move(s);
  return *m.cuda;
}

// Makes the device copy of the random offset the module's, where it may
// differ, before a call's work on `stream` reads it: from pageable memory, on
// the stream, waited for (as the weights).
void upload_random_offset(Module& m, CUstream stream) {
  const CudaState& s = *m.cuda;
  if (!s.random_offset || m.random_offset_on_device) return;
  const Driver& d = driver();
  d.check(d.copy_htod_async(address(s.random_offset), &m.random_offset, sizeof m.random_offset, stream),
          "cuMemcpyHtoDAsync (random offset)");
  d.check(d.stream_sync(stream), "cuStreamSynchronize");
  m.random_offset_on_device = true;
}

// `stream` is the run's: the caller may still be writing the input on it, and
// a copy on the legacy stream would not wait for a non-blocking stream's work.
std::vector<std::byte> read_device_values(const tcc_tensor& t, size_t bytes, void* stream) {
  std::vector<std::byte> out(bytes);
  if (bytes == 0) return out;
  const Driver& d = Driver::get();
  d.check(d.copy_dtoh_async(out.data(), reinterpret_cast<CUdeviceptr>(t.data), bytes, static_cast<CUstream>(stream)),
          "cuMemcpyDtoHAsync (guarded input)");
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
  return out;
}

// A split reduction's workspace (docs/MODULE.md), grown to this binding's size.
// Its arrival counters must start at zero, and the kernel leaves them at zero,
// so the memory is cleared only when its layout changes: where the counters lie
// depends on the row count, and a binding with fewer rows would find them in
// the partials of a larger one. The clearing goes on the launch's stream, which
// orders it before the kernel whatever kind of stream it is.
CUdeviceptr kernel_workspace(CudaState& s, const Driver& d, int kernel, int64_t want, CUstream stream) {
  CudaState::KernelWorkspace& w = s.kernel_workspaces[kernel];
  if (w.bytes < static_cast<size_t>(want)) {
    if (w.ptr) {
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      w = {};
    }
    w.ptr = device_alloc(d, static_cast<size_t>(want), "cuMemAlloc (kernel workspace)");
    w.bytes = static_cast<size_t>(want);
  }
  if (w.used != static_cast<size_t>(want)) {
    d.check(d.memset_d8_async(address(w.ptr), 0, static_cast<size_t>(want), stream),
            "cuMemsetD8Async (kernel workspace)");
    w.used = static_cast<size_t>(want);
  }
  return address(w.ptr);
}

// A kernel step's launch arguments at binding `b`; BadModule or CudaError
// naming the kernel when the manifest's expressions do not fit the device.
BoundRun::Launch launch_arguments(const KernelInfo& k, const Binding& b) {
  BoundRun::Launch l;
  for (const SymExpr& e : k.sizes) l.sizes.push_back(evaluate(e, b, k, "sizes"));
  static constexpr int64_t kGridLimit[3] = {INT32_MAX, 65535, 65535};
  for (int i = 0; i < 3; ++i) {
    int64_t g = std::max<int64_t>(1, evaluate(k.launch.grid[i], b, k, "launch.grid"));
    if (g > kGridLimit[i])
      throw CudaError("kernel '" + k.name + "': grid extent " + std::to_string(g) + " exceeds the device limit");
    l.grid[i] = static_cast<unsigned>(g);
  }
  if (k.launch.workspace_bytes != SymExpr()) {
    l.workspace_bytes = evaluate(k.launch.workspace_bytes, b, k, "launch.workspace_bytes");
    if (l.workspace_bytes <= 0)
      throw BadModule("manifest.json: kernel '" + k.name + "' launch.workspace_bytes: evaluates to " +
                      std::to_string(l.workspace_bytes) + " bytes");
  }
  return l;
}

// The binding for these inputs, and each kernel step's launch arguments under
// it: found among the latest runs' when the input dims match one (the checks
// bind makes held for it then, unless guards read input values), else
// evaluated now and kept, moved to the front.
// Computes the binding constants on the host and copies them to new device
// memory, freed when the binding and every graph captured at it are gone.
DeviceMemory upload_binding_constants(const Module& m, const Binding& b, CUstream stream) {
  if (m.binding_steps.empty() || b.constant_bytes == 0) return nullptr;
  const Driver& d = driver();
  AlignedBytes host = compute_binding_constants(m, b);
  DeviceMemory block = device_alloc(d, host.size(), "cuMemAlloc (binding constants)");
  // From pageable memory: on the run's stream, waited for before `host` goes.
  d.check(d.copy_htod_async(address(block), host.data(), host.size(), stream),
          "cuMemcpyHtoDAsync (binding constants)");
  d.check(d.stream_sync(stream), "cuStreamSynchronize");
  return block;
}

// A kernel step's launch at binding b (a library call's problem for Gemm and Conv kernels).
BoundRun::Launch step_launch(const Module& m, const StepInfo& step, const Binding& b) {
  check_kernel_buffers(m, step, b);
  const KernelInfo& k = m.kernels[step.kernel];
  BoundRun::Launch l;
  if (!k.library_call) l = launch_arguments(k, b);
  else if (k.kind == KernelKind::Gemm) l.gemm = gemm_problem(k, b);
  else l.conv = conv_problem(k, b);
  return l;
}

// The binding and launches for these inputs: kept for the latest input shapes
// unless sizes depend on data (whose launches are made as the run binds them).
// A kept binding's guards on input values are checked again each call.
const BoundRun& bound_run(CudaState& s, const Module& m, const tcc_tensor* inputs, size_t num_inputs, CUstream stream) {
  bool reusable = num_inputs == m.inputs.size() && (num_inputs == 0 || inputs) && m.value_symbols.empty();
  s.dims.clear();
  for (size_t i = 0; reusable && i < num_inputs; ++i) {
    const tcc_tensor& t = inputs[i];
    const TensorSig& sig = m.inputs[i];
    reusable = static_cast<DType>(t.dtype) == sig.dtype && t.rank >= 0 &&
               static_cast<size_t>(t.rank) == sig.shape.size() && (t.rank == 0 || t.shape);
    if (reusable) s.dims.insert(s.dims.end(), t.shape, t.shape + t.rank);
  }
  if (reusable) {
    auto hit = std::find_if(s.bound.begin(), s.bound.end(),
                            [&](const BoundRun& r) { return r.reusable && r.dims == s.dims; });
    if (hit != s.bound.end()) {
      runtime::check_value_guards(m, inputs, read_device_values, stream);
      std::rotate(s.bound.begin(), hit, hit + 1);
      return s.bound.front();
    }
  }
  BoundRun r;
  r.binding = runtime::bind(m, inputs, num_inputs, read_device_values, stream);
  r.launches.resize(m.steps.size());
  for (size_t i = 0; i < m.steps.size() && r.binding.complete; ++i)
    if (!m.steps[i].fallback) r.launches[i] = step_launch(m, m.steps[i], r.binding);
  r.dims = s.dims;
  r.reusable = reusable;
  r.constants = upload_binding_constants(m, r.binding, stream);
  if (s.bound.size() == CudaState::kBoundRuns) {
    // Work already on the stream may still read the constants it lets go.
    if (s.bound.back().constants) driver().check(driver().stream_sync(stream), "cuStreamSynchronize");
    s.bound.pop_back();
  }
  s.bound.insert(s.bound.begin(), std::move(r));
  return s.bound.front();
}

}  // namespace

bool cuda_available() { return Driver::get().unavailable.empty(); }

void enqueue_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
                  void* stream_handle) {
  const Driver& d = driver();
  auto stream = static_cast<CUstream>(stream_handle);
  CudaState& s = device_state(m, d, current_context(d), stream);

  upload_random_offset(m, stream);
  const BoundRun& run = bound_run(s, m, inputs, num_inputs, stream);
  // Sizes that depend on data are bound as the fallbacks producing them run:
  // into this run's own copy of the binding.
  std::optional<Binding> growing;
  if (!run.binding.complete) growing = run.binding;
  const Binding& b = growing ? *growing : run.binding;
  check_outputs(m, b, outputs, num_outputs);
  // The arena grows to `bytes`, keeping the first `keep` bytes that steps wrote.
  auto grow_arena = [&](size_t bytes, size_t keep) {
    if (s.arena_bytes >= bytes) return;
    DeviceMemory grown = device_alloc(d, bytes, "cuMemAlloc (arena)");
    if (keep > 0)
      d.check(d.copy_dtod_async(address(grown), address(s.arena), keep, stream), "cuMemcpyDtoDAsync (arena)");
    if (s.arena) d.check(d.stream_sync(stream), "cuStreamSynchronize");
    s.arena = std::move(grown);
    s.arena_bytes = bytes;
  };
  grow_arena(static_cast<size_t>(b.arena_bytes), 0);

  std::vector<CUdeviceptr>& ptr = s.ptr;
  ptr.resize(m.values.size());
  std::vector<void*> allocated(m.outputs.size(), nullptr);  // outputs the output allocator provided
  auto place = [&] {
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueInfo& info = m.values[v];
      switch (info.where) {
        case ValueInfo::Where::Input: ptr[v] = reinterpret_cast<CUdeviceptr>(inputs[info.index].data); break;
        case ValueInfo::Where::Output: {
          void* data = outputs[info.index].data;
          ptr[v] = reinterpret_cast<CUdeviceptr>(data ? data : allocated[info.index]);
          break;
        }
        case ValueInfo::Where::Weight: ptr[v] = s.weights + m.weight_ranges[info.index].offset; break;
        case ValueInfo::Where::Buffer: {
          int64_t offset = b.buffer_offsets[info.index];
          ptr[v] = offset < 0 ? 0 : address(s.arena) + offset;
          break;
        }
        case ValueInfo::Where::BindingConstant:
          ptr[v] = address(run.constants) + b.constant_offsets[info.index];
          break;
      }
    }
  };
  place();
  // A data-dependent size, once a fallback produced it (the stream is idle then).
  auto sized = [&](int id, const std::vector<int64_t>& shape) {
    size_t used = static_cast<size_t>(growing->arena_bytes);
    bind_value_symbols(m, *growing, id, shape);
    grow_arena(static_cast<size_t>(growing->arena_bytes), used);
    allocate_sized_outputs(m, *growing, outputs, allocated);
    place();
  };

  // What a step wrote, copied back once the stream has run it.
  auto inspect = [&](const StepInfo& step) {
    if (!m.step_inspector) return;
    std::vector<std::vector<std::byte>> bytes;
    for (int id : step.writes) {
      bytes.emplace_back(static_cast<size_t>(b.nbytes[id]));
      if (!bytes.back().empty())
        d.check(d.copy_dtoh_async(bytes.back().data(), ptr[id], bytes.back().size(), stream),
                "cuMemcpyDtoHAsync (step values)");
    }
    d.check(d.stream_sync(stream), "cuStreamSynchronize");
    std::vector<std::pair<int, Tensor>> written;
    for (size_t w = 0; w < step.writes.size(); ++w) {
      int id = step.writes[w];
      written.emplace_back(id, Tensor::from_bytes(m.values[id].sig.dtype, b.shapes[id], std::move(bytes[w])));
    }
    m.step_inspector(step, written);
  };
  std::vector<CUdeviceptr>& buf = s.buf;
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const StepInfo& step = m.steps[i];
    if (m.step_observer) m.step_observer(step, true);
    if (step.fallback) {
      std::map<int, std::vector<std::byte>> staged;
      for (int id : step.reads) {
        std::vector<std::byte>& host = staged[id];
        host.resize(b.nbytes[id]);
        if (!host.empty()) d.check(d.copy_dtoh_async(host.data(), ptr[id], host.size(), stream), "cuMemcpyDtoHAsync");
      }
      for (int id : step.writes) staged[id].resize(std::max<int64_t>(b.nbytes[id], 0));
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      run_fallback(
          m, step, b,
          [&](int id) {
            staged[id].resize(b.nbytes[id]);
            return HostSpan{staged[id].data(), b.nbytes[id]};
          },
          growing ? SizedValue(sized) : nullptr);
      for (int id : step.writes)
        if (b.nbytes[id] > 0)
          d.check(d.copy_htod_async(ptr[id], staged[id].data(), b.nbytes[id], stream), "cuMemcpyHtoDAsync");
      d.check(d.stream_sync(stream), "cuStreamSynchronize");
      if (m.step_observer) m.step_observer(step, false);
      inspect(step);
      continue;
    }
    buf.clear();
    for (int id : step.reads) buf.push_back(ptr[id]);
    for (int id : step.writes) buf.push_back(ptr[id]);
    const KernelInfo& k = m.kernels[step.kernel];
    if (k.launch.zero_outputs)
      for (int id : step.writes)
        if (b.nbytes[id] > 0) d.check(d.memset_d8_async(ptr[id], 0, b.nbytes[id], stream), "cuMemsetD8Async (outputs)");
    if (k.launch.copy_from >= 0) {
      int from = step.reads[static_cast<size_t>(k.launch.copy_from)], to = step.writes.front();
      if (b.nbytes[to] > 0)
        d.check(d.copy_dtod_async(ptr[to], ptr[from], b.nbytes[to], stream), "cuMemcpyDtoDAsync (outputs)");
    }
    BoundRun::Launch made;
    if (growing) made = step_launch(m, step, b);
    const BoundRun::Launch& l = growing ? made : run.launches[i];
    if (k.library_call && k.kind == KernelKind::Gemm) {
      s.libraries.gemm(k, l.gemm, buf, stream);
    } else if (k.library_call) {
      s.libraries.conv(k, l.conv, buf, stream, s.functions[step.kernel]);
    } else {
      CUdeviceptr workspace =
          l.workspace_bytes > 0 ? kernel_workspace(s, d, step.kernel, l.workspace_bytes, stream) : 0;
      CUdeviceptr random_offset = k.launch.random_offset ? address(s.random_offset) : 0;
      kernel_params(buf, l.sizes, workspace, random_offset, s.params);
      CUresult r = d.launch(s.functions[step.kernel], l.grid[0], l.grid[1], l.grid[2], k.launch.block[0], k.launch.block[1],
                            k.launch.block[2], k.launch.shared_bytes, stream, s.params.data(), nullptr);
      if (r != CUDA_SUCCESS) d.check(r, ("cuLaunchKernel " + k.name).c_str());
    }
    if (m.step_observer) m.step_observer(step, false);
    inspect(step);
  }

  if (!b.complete) throw BadModule("manifest.json: a data-dependent size was never produced by its fallback step");
  // The call's last kernel advances the device copy of the random offset, so
  // a graph that captured the call advances it at every replay.
  if (s.advance_random_offset) {
    CUdeviceptr offset = address(s.random_offset);
    void* params[] = {&offset};
    d.check(d.launch(s.advance_random_offset, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr),
            "cuLaunchKernel (random offset)");
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    int id = m.output_values[i];
    if (m.values[id].where != ValueInfo::Where::Output && b.nbytes[id] > 0)
      d.check(d.copy_dtod_async(reinterpret_cast<CUdeviceptr>(outputs[i].data), ptr[id], b.nbytes[id], stream),
              "cuMemcpyDtoDAsync");
  }
  if (m.random) ++m.random_offset;
}

void run_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs,
              void* stream) {
  enqueue_cuda(m, inputs, num_inputs, outputs, num_outputs, stream);
  const Driver& d = driver();
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

LibraryRunner::LibraryRunner() : state_(new CudaState) { state_->ctx = current_context(driver()); }

int LibraryRunner::run(const KernelInfo& k, const std::vector<CUdeviceptr>& buffers,
                       const std::map<std::string, int64_t>& sizes, CUstream stream, CUfunction conv_epilogue) {
  Binding b;
  b.symbols = sizes;
  if (k.library_call && k.kind == KernelKind::Gemm) return state_->libraries.gemm(k, gemm_problem(k, b), buffers, stream);
  if (k.library_call) return state_->libraries.conv(k, conv_problem(k, b), buffers, stream, conv_epilogue);
  throw CudaError("kernel '" + k.name + "' is generated code, not a library call");
}

std::string capture_blocker(const Module& m) {
  for (const StepInfo& step : m.steps)
    if (step.fallback) return "host fallback node '" + step.node + "' (it synchronizes with the host)";
  for (const Guard& g : m.guards)
    if (g.kind == Guard::Kind::ValuesEqual) return "guard '" + g.text + "' reads an input's value on the host";
  return "";
}

CudaGraph::~CudaGraph() {
  const Driver& d = Driver::get();
  if (exec_) d.graph_exec_destroy(static_cast<CUgraphExec>(exec_));
}

void CudaGraph::launch(void* stream) {
  const Driver& d = driver();
  if (random_) upload_random_offset(*random_, static_cast<CUstream>(stream));
  d.check(d.graph_launch(static_cast<CUgraphExec>(exec_), static_cast<CUstream>(stream)), "cuGraphLaunch");
  if (random_) ++random_->random_offset;
}

std::unique_ptr<CudaGraph> capture_cuda(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                                        size_t num_outputs, void* stream_handle) {
  std::string blocker = capture_blocker(m);
  if (!blocker.empty()) throw InvalidArgument("cannot capture a CUDA graph: " + blocker);
  if (!stream_handle) throw InvalidArgument("cannot capture a CUDA graph on the legacy default stream");
  // One plain run first: loading the module, the arena, cuBLASLt's handle and
  // workspace allocate, which a capture does not allow.
  run_cuda(m, inputs, num_inputs, outputs, num_outputs, stream_handle);
  // The capture records a call but runs none: the random offset stays.
  uint64_t offset = m.random_offset;
  std::unique_ptr<CudaGraph> graph = capture_stream(stream_handle, [&] {
    enqueue_cuda(m, inputs, num_inputs, outputs, num_outputs, stream_handle);
    m.random_offset = offset;
  });
  if (m.random) graph->random_ = &m;
  // What the captured launches read that the module may replace later.
  const CudaState& s = *m.cuda;
  graph->memory_ = {s.arena, s.bound.front().constants, s.random_offset};
  for (const CudaState::KernelWorkspace& w : s.kernel_workspaces) graph->memory_.push_back(w.ptr);
  return graph;
}

std::unique_ptr<CudaGraph> capture_stream(void* stream_handle, const std::function<void()>& enqueue) {
  const Driver& d = driver();
  auto stream = static_cast<CUstream>(stream_handle);
  d.check(d.begin_capture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  CUgraph graph = nullptr;
  try {
    enqueue();
  } catch (...) {
    if (d.end_capture(stream, &graph) == CUDA_SUCCESS && graph) d.graph_destroy(graph);
    throw;
  }
  d.check(d.end_capture(stream, &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  CUresult r = d.graph_instantiate(&exec, graph, 0);
  d.graph_destroy(graph);
  d.check(r, "cuGraphInstantiate");
  auto g = std::make_unique<CudaGraph>();
  g->exec_ = exec;
  return g;
}

namespace device {

std::string name() {
  const Driver& d = driver();
  current_context(d);
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  char text[256] = {};
  d.check(d.device_name(text, sizeof text - 1, dev), "cuDeviceGetName");
  return text;
}

std::pair<int, int> compute_capability() {
  const Driver& d = driver();
  current_context(d);
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  int major = 0, minor = 0;
  d.check(d.device_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  return {major, minor};
}

void* alloc(size_t nbytes) {
  const Driver& d = driver();
  current_context(d);
  CUdeviceptr p = 0;
  d.check(d.mem_alloc(&p, std::max<size_t>(nbytes, 1)), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

void release(void* p) {
  if (p) Driver::get().mem_free(reinterpret_cast<CUdeviceptr>(p));
}

// Complete on return, so that work on any stream sees the data: a cuMemcpyHtoD
// from pageable memory may return before its DMA lands, and non-blocking
// streams do not wait for the legacy stream it runs on.
void upload(void* dst, const void* src, size_t nbytes) {
  const Driver& d = driver();
  if (!nbytes) return;
  d.check(d.copy_htod_async(reinterpret_cast<CUdeviceptr>(dst), src, nbytes, nullptr), "cuMemcpyHtoDAsync");
  d.check(d.stream_sync(nullptr), "cuStreamSynchronize");
}

void download(void* dst, const void* src, size_t nbytes) {
  const Driver& d = driver();
  if (nbytes) d.check(d.copy_dtoh(dst, reinterpret_cast<CUdeviceptr>(src), nbytes), "cuMemcpyDtoH");
}

void copy_async(void* dst, const void* src, size_t nbytes, void* stream) {
  const Driver& d = driver();
  if (nbytes)
    d.check(d.copy_dtod_async(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), nbytes,
                              static_cast<CUstream>(stream)),
            "cuMemcpyDtoDAsync");
}

void copy_batch_async(const std::vector<void*>& dsts, const std::vector<const void*>& srcs,
                      const std::vector<size_t>& nbytes, void* stream) {
  const Driver& d = driver();
  if (dsts.size() != srcs.size() || dsts.size() != nbytes.size())
    throw InvalidArgument("copy_batch_async: " + std::to_string(dsts.size()) + " destinations, " +
                          std::to_string(srcs.size()) + " sources and " + std::to_string(nbytes.size()) + " sizes");
  if (d.copy_batch_async) {
    std::vector<CUdeviceptr> to, from;
    std::vector<size_t> sizes;
    for (size_t i = 0; i < dsts.size(); ++i) {
      if (nbytes[i] == 0) continue;
      to.push_back(reinterpret_cast<CUdeviceptr>(dsts[i]));
      from.push_back(reinterpret_cast<CUdeviceptr>(srcs[i]));
      sizes.push_back(nbytes[i]);
    }
    // Every source is read in stream order: the stream's earlier work may write it.
    CUmemcpyAttributes order{};
    order.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first = 0;
    if (sizes.size() > 1 && d.copy_batch_async(to.data(), from.data(), sizes.data(), sizes.size(), &order, &first, 1,
                                               static_cast<CUstream>(stream)) == CUDA_SUCCESS)
      return;
  }
  for (size_t i = 0; i < dsts.size(); ++i) copy_async(dsts[i], srcs[i], nbytes[i], stream);
}

void* create_stream() {
  const Driver& d = driver();
  current_context(d);
  CUstream s = nullptr;
  d.check(d.stream_create(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return s;
}

void destroy_stream(void* stream) {
  if (stream) Driver::get().stream_destroy(static_cast<CUstream>(stream));
}

void sync(void* stream) {
  const Driver& d = driver();
  d.check(d.stream_sync(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

Timer::Timer() {
  const Driver& d = driver();
  current_context(d);
  CUevent a = nullptr, b = nullptr;
  d.check(d.event_create(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  begin_ = a;
  d.check(d.event_create(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  end_ = b;
}

Timer::~Timer() {
  const Driver& d = Driver::get();
  for (void* e : {begin_, end_})
    if (e) d.event_destroy(static_cast<CUevent>(e));
}

void Timer::start(void* stream) {
  const Driver& d = driver();
  d.check(d.event_record(static_cast<CUevent>(begin_), static_cast<CUstream>(stream)), "cuEventRecord");
}

void Timer::stop(void* stream) {
  const Driver& d = driver();
  d.check(d.event_record(static_cast<CUevent>(end_), static_cast<CUstream>(stream)), "cuEventRecord");
}

double Timer::elapsed_ms() {
  const Driver& d = driver();
  d.check(d.event_sync(static_cast<CUevent>(end_)), "cuEventSynchronize");
  float ms = 0;
  d.check(d.event_elapsed(&ms, static_cast<CUevent>(begin_), static_cast<CUevent>(end_)), "cuEventElapsedTime");
  return ms;
}

}  // namespace device

}  // namespace tcc::runtime
