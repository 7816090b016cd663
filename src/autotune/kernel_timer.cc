#include "src/autotune/kernel_timer.h"

#include <nvrtc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <random>
#include <thread>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "src/ir/tensor.h"
#include "src/runtime/cuda_driver.h"

namespace tcc::runtime {

namespace {

constexpr int kWarmup = 3;
constexpr int kMinReps = 25;
constexpr double kMinTotalMs = 20;
constexpr int kMaxReps = 10000;  // bounds a candidate's time when one launch takes microseconds
constexpr double kMaxTotalMs = 2000;
// Reduction order differs between block sizes and GEMM algorithms; the
// absolute part is scaled by the output's largest magnitude (at least 1), since
// a dot product's rounding grows with its terms, not with its (maybe cancelled) result.
constexpr double kRelTol = 1e-3, kAbsTol = 1e-5;
// A candidate whose fastest of its first kBoundReps timed launches takes this
// many times the default's median cannot win; it is dropped rather than timed
// for up to kMaxTotalMs. One launch alone is not enough to judge: on the GPU
// machine a single event-timed launch of a microseconds kernel was seen to take
// over 10x its median when the host was late to enqueue it.
constexpr double kTimeBound = 10;
constexpr int kBoundReps = 3;

struct DeviceInfo {
  autotune::DeviceKey key;
  int l2_bytes = 0;
};

DeviceInfo device_info(const Driver& d) {
  current_context(d);
  CUdevice dev;
  d.check(d.ctx_get_device(&dev), "cuCtxGetDevice");
  char name[256] = {};
  d.check(d.device_name(name, sizeof name, dev), "cuDeviceGetName");
  int major = 0, minor = 0, version = 0, l2 = 0;
  d.check(d.device_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "cuDeviceGetAttribute");
  d.check(d.device_attribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev), "cuDeviceGetAttribute");
  d.check(d.driver_version(&version), "cuDriverGetVersion");
  int nvrtc_major = 0, nvrtc_minor = 0;
  nvrtcVersion(&nvrtc_major, &nvrtc_minor);
  DeviceInfo info;
  info.key = {name, "sm_" + std::to_string(major * 10 + minor),
              std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10),
              std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor)};
  info.l2_bytes = l2;
  return info;
}

// Device memory freed on destruction.
struct DeviceBuffer {
  const Driver* d = nullptr;
  CUdeviceptr ptr = 0;
  size_t bytes = 0;
  DeviceBuffer(const Driver& drv, size_t n) : d(&drv), bytes(n) {
    if (n) d->check(d->mem_alloc(&ptr, n), "cuMemAlloc (autotune)");
  }
  ~DeviceBuffer() {
    if (ptr) d->mem_free(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

class CudaKernelBench : public autotune::KernelBench {
 public:
  CudaKernelBench(const Driver& d, const DeviceInfo& info, const kir::Kernel& k,
                  const std::map<std::string, int64_t>& sizes)
      : d_(d), arch_(info.key.arch), k_(k), flush_(d, static_cast<size_t>(std::max(info.l2_bytes, 1 << 20)) * 2) {
    for (const std::string& s : k.size_params) {
      auto it = sizes.find(s);
      sizes_[s] = it == sizes.end() ? 1 : it->second;
      size_args_.push_back(sizes_[s]);
    }
    std::mt19937 rng(1234);
    std::uniform_real_distribution<double> uniform(-1, 1);
    for (const kir::Buffer& b : k.buffers) {
      std::vector<int64_t> shape;
      for (const SymExpr& e : b.shape) shape.push_back(at_sizes(e));
      Tensor t(b.dtype, shape);
      bool floating = is_float(b.dtype);
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, floating ? uniform(rng) : std::floor(uniform(rng) * 4 + 4));
      buffers_.push_back(std::make_unique<DeviceBuffer>(d, t.nbytes()));
      if (!b.output && t.nbytes()) d.check(d.copy_htod(buffers_.back()->ptr, t.raw(), t.nbytes()), "cuMemcpyHtoD");
      shapes_.push_back(shape);
    }
    // A kernel that draws reads the random offset, here a module's first call's.
    if (kir::draws_random(k)) {
      random_offset_ = std::make_unique<DeviceBuffer>(d, sizeof(uint64_t));
      const uint64_t first_call = 0;
      d.check(d.copy_htod(random_offset_->ptr, &first_call, sizeof first_call), "cuMemcpyHtoD (random offset)");
    }
  }

  ~CudaKernelBench() override {
    if (epilogue_module_) d_.module_unload(epilogue_module_);
  }

  // NVRTC takes far longer than timing a candidate: compile the ones not yet
  // compiled on all cores at once. Library calls have nothing to compile.
  void precompile(const std::vector<KernelConfig>& configs) override {
    std::vector<KernelConfig> todo;
    for (const KernelConfig& c : configs)
      if (!runs_library(k_, c) && !compiled_.count(c) && config_refusal(k_, c).empty())
        todo.push_back(c);
    size_t jobs = std::max(1u, std::thread::hardware_concurrency());
    for (size_t at = 0; at < todo.size(); at += jobs) {
      std::vector<std::future<Compiled>> running;
      for (size_t i = at; i < std::min(todo.size(), at + jobs); ++i)
        running.push_back(std::async(std::launch::async, [this, c = todo[i]] {
          Compiled out;
          try {
            out.image = compile_cuda(emit_cuda({k_}, {c}), {arch_}, false, 1).front().bytes;
          } catch (const Error& e) {
            out.error = e.what();
          }
          return out;
        }));
      for (size_t i = at; i < std::min(todo.size(), at + jobs); ++i) compiled_[todo[i]] = running[i - at].get();
    }
  }

  std::optional<double> time_us(const KernelConfig& c, std::string& note) override {
    std::string invalid = config_refusal(k_, c);
    if (!invalid.empty()) {
      note = "invalid: " + invalid;
      return std::nullopt;
    }
    if (runs_library(k_, c)) return time_library_call(c, note);
    precompile({c});
    const Compiled& bin = compiled_.at(c);
    if (bin.image.empty()) {
      note = "failed to compile: " + bin.error;
      return std::nullopt;
    }
    CUmodule module = nullptr;
    try {
      d_.check(d_.module_load(&module, bin.image.data()), "cuModuleLoadData");
      CUfunction f = nullptr;
      d_.check(d_.module_function(&f, module, k_.name.c_str()), "cuModuleGetFunction");
      std::optional<double> t = run(
          [&] {
            if (k_.zero_outputs) fill_outputs(0);  // accumulating kernels add into zeros, as the runtime gives them
            launch(f, c);
          },
          note);
      d_.module_unload(module);
      return t;
    } catch (const CudaError& e) {
      if (module) d_.module_unload(module);
      note = std::string("failed to run: ") + e.what();
      return std::nullopt;
    }
  }

 private:
  // A kernel's shapes and grid are expressions over its size parameters, all bound.
  int64_t at_sizes(const SymExpr& e) const {
    std::optional<int64_t> v = e.evaluate(sizes_);
    TCC_CHECK(v.has_value()) << "kernel " << k_.name << ": '" << e.str() << "' does not evaluate at its sizes";
    return *v;
  }

  void launch(CUfunction f, const KernelConfig& c) {
    KernelLaunch l = launch_config(k_, c);
    std::vector<CUdeviceptr> buffers;
    for (const auto& b : buffers_) buffers.push_back(b->ptr);
    CUdeviceptr ws =
        l.workspace_bytes == SymExpr() ? 0 : workspace(static_cast<size_t>(at_sizes(l.workspace_bytes)), c);
    CUdeviceptr random_offset = random_offset_ ? random_offset_->ptr : 0;
    std::vector<void*> params;
    kernel_params(buffers, size_args_, ws, random_offset, params);
    unsigned grid[3];
    for (int i = 0; i < 3; ++i) grid[i] = static_cast<unsigned>(std::max<int64_t>(1, at_sizes(l.grid[i])));
    d_.check(d_.launch(f, grid[0], grid[1], grid[2], l.block[0], l.block[1], l.block[2], l.shared_bytes, nullptr,
                       params.data(), nullptr),
             "cuLaunchKernel");
  }

  // A split reduction's or split-K gemm's workspace (codegen/emit.h's
  // KernelLaunch). Its arrival counters start at zero and every launch leaves
  // them so, but where they lie depends on the candidate (its split, its tile):
  // the memory is cleared whenever another candidate takes it, since two
  // candidates may ask for the same size with their counters in different
  // places, and none may find another's partials as counters.
  CUdeviceptr workspace(size_t bytes, const KernelConfig& c) {
    if (!workspace_ || workspace_->bytes < bytes) workspace_ = std::make_unique<DeviceBuffer>(d_, bytes);
    if (workspace_user_ != c) {
      d_.check(d_.memset_d8_async(workspace_->ptr, 0, bytes, nullptr), "cuMemsetD8Async (split workspace)");
      workspace_user_ = c;
    }
    return workspace_->ptr;
  }

  std::vector<Tensor> outputs() {
    std::vector<Tensor> out;
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (!k_.buffers[b].output) continue;
      Tensor t(k_.buffers[b].dtype, shapes_[b]);
      if (t.nbytes()) d_.check(d_.copy_dtoh(t.raw_mut(), buffers_[b]->ptr, t.nbytes()), "cuMemcpyDtoH");
      out.push_back(std::move(t));
    }
    return out;
  }

  // The first config run (the default) gives the reference output.
  bool matches_reference(std::string& note) {
    std::vector<Tensor> out = outputs();
    if (reference_.empty()) {
      reference_ = std::move(out);
      for (const Tensor& t : reference_) {
        double largest = 1;
        for (int64_t i = 0; i < t.numel(); ++i)
          if (std::isfinite(t.get_f64(i))) largest = std::max(largest, std::abs(t.get_f64(i)));
        reference_scale_.push_back(largest);
      }
      return true;
    }
    for (size_t o = 0; o < out.size(); ++o)
      for (int64_t i = 0; i < out[o].numel(); ++i) {
        double a = out[o].get_f64(i), b = reference_[o].get_f64(i);
        bool same = (std::isnan(a) && std::isnan(b)) ||
                    std::abs(a - b) <= kAbsTol * reference_scale_[o] + kRelTol * std::abs(b);
        if (!same) {
          note = "wrong output: element " + std::to_string(i) + " is " + std::to_string(a) + ", the default gives " +
                 std::to_string(b);
          return false;
        }
      }
    return true;
  }

  // A gemm or conv with the library algorithm of rank c.algo, called as a
  // module calls it. A rank the library does not offer for this problem would
  // run its last one, already timed under that rank: it is dropped. The call
  // is timed as a CUDA graph replay of it where the driver captures it: the
  // library's host work per call (cuDNN's execute took about 35 us on the H100
  // beside 5 us convolutions) would otherwise stand between the timer's events
  // as idle GPU time and decide the choice, and the modes that tune replay
  // graphs, where that host work is gone.
  std::optional<double> time_library_call(const KernelConfig& c, std::string& note) {
    runtime::KernelInfo info;
    info.name = k_.name;
    info.kind = k_.kind;
    info.library_call = true;
    for (const kir::Buffer& b : k_.buffers) {
      info.buffers.push_back({b.dtype, b.shape, b.output});
      info.num_reads += b.output ? 0 : 1;
    }
    if (k_.gemm) info.gemm = runtime::GemmInfo{*k_.gemm, c.algo};
    if (k_.conv) info.conv = runtime::ConvInfo{*k_.conv, c.algo};
    std::vector<CUdeviceptr> ptrs;
    for (const auto& b : buffers_) ptrs.push_back(b->ptr);
    try {
      if (std::string epilogue = info.conv_epilogue(); !epilogue.empty()) load_conv_epilogue(epilogue);
      int ran = library_.run(info, ptrs, sizes_, nullptr, conv_epilogue_);
      if (ran != c.algo) {
        note = "the library offers " + std::to_string(ran + 1) + " algorithms for this problem";
        return std::nullopt;
      }
      std::unique_ptr<CudaGraph> graph = capture_library_call(info, ptrs);
      auto call = [&] { library_.run(info, ptrs, sizes_, nullptr, conv_epilogue_); };
      return run([&] { graph ? graph->launch(nullptr) : call(); }, note);
    } catch (const CudaError& e) {
      note = std::string("failed to run: ") + e.what();
      return std::nullopt;
    }
  }

  // The conv epilogue kernel `name` (src/module/kernel_abi.h), which a Conv
  // kernel launches after a convolution cuDNN does not fuse its epilogue into,
  // as a module holds it: compiled and loaded on first use.
  void load_conv_epilogue(const std::string& name) {
    if (conv_epilogue_) return;
    std::string source = emitc::prelude(emitc::Target::Cuda) + emitc::module_helpers({k_}, emitc::Target::Cuda);
    std::vector<char> image = compile_cuda(source, {arch_}, false, 1).front().bytes;
    d_.check(d_.module_load(&epilogue_module_, image.data()), "cuModuleLoadData (conv epilogue)");
    d_.check(d_.module_function(&conv_epilogue_, epilogue_module_, name.c_str()),
             "cuModuleGetFunction (conv epilogue)");
  }

  // The library call captured on a stream of its own (after one plain call
  // there, for whatever the library keeps per stream), or null where the
  // driver refuses the capture: the call is then timed as it is launched.
  std::unique_ptr<CudaGraph> capture_library_call(const runtime::KernelInfo& info,
                                                  const std::vector<CUdeviceptr>& ptrs) {
    std::unique_ptr<void, void (*)(void*)> stream(device::create_stream(), &device::destroy_stream);
    auto on_stream = [&] { library_.run(info, ptrs, sizes_, static_cast<CUstream>(stream.get()), conv_epilogue_); };
    try {
      on_stream();
      device::sync(stream.get());
      return capture_stream(stream.get(), on_stream);
    } catch (const CudaError&) {
      return nullptr;
    }
  }

  // Sets every byte of the kernel's outputs.
  void fill_outputs(unsigned char byte) {
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (k_.buffers[b].output && buffers_[b]->bytes)
        d_.check(d_.memset_d8_async(buffers_[b]->ptr, byte, buffers_[b]->bytes, nullptr), "cuMemsetD8Async (outputs)");
  }

  std::optional<double> run(const std::function<void()>& launch, std::string& note) {
    // Outputs start as NaN (all bits set), so a candidate that leaves an
    // element unwritten cannot pass on the previous candidate's value.
    fill_outputs(0xFF);
    launch();
    d_.check(d_.stream_sync(nullptr), "cuStreamSynchronize");
    if (!matches_reference(note)) return std::nullopt;
    for (int i = 0; i < kWarmup; ++i) launch();
    std::vector<double> times;
    double total = 0;
    while ((static_cast<int>(times.size()) < kMinReps || total < kMinTotalMs) &&
           static_cast<int>(times.size()) < kMaxReps && total < kMaxTotalMs) {
      // Writing a buffer twice the L2 size evicts the kernel's inputs, so every
      // repetition reads from memory as the first run in a model would.
      d_.check(d_.memset_d8_async(flush_.ptr, 0, flush_.bytes, nullptr), "cuMemsetD8Async (L2 flush)");
      timer_.start(nullptr);
      launch();
      timer_.stop(nullptr);
      double ms = timer_.elapsed_ms();
      times.push_back(ms);
      total += ms;
      if (static_cast<int>(times.size()) == kBoundReps && default_us_) {
        double fastest_us = *std::min_element(times.begin(), times.end()) * 1000.0;
        if (fastest_us > kTimeBound * *default_us_) {
          char text[160];
          std::snprintf(text, sizeof text,
                        "over the time bound: its fastest of %d launches took %.1f us, %gx the default's %.1f us",
                        kBoundReps, fastest_us, kTimeBound, *default_us_);
          note = text;
          return std::nullopt;
        }
      }
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    double median_us = times[times.size() / 2] * 1000.0;
    if (!default_us_) default_us_ = median_us;  // the first config timed is the default
    return median_us;
  }

  struct Compiled {
    std::vector<char> image;  // the cubin; empty when NVRTC failed
    std::string error;
  };

  const Driver& d_;
  std::string arch_;
  std::map<KernelConfig, Compiled> compiled_;
  kir::Kernel k_;
  DeviceBuffer flush_;
  std::map<std::string, int64_t> sizes_;
  std::vector<int64_t> size_args_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::unique_ptr<DeviceBuffer> workspace_;
  std::optional<KernelConfig> workspace_user_;  // the candidate whose counters the workspace holds
  std::unique_ptr<DeviceBuffer> random_offset_;  // a u64 of 0, for kernels that draws_random
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<Tensor> reference_;
  std::vector<double> reference_scale_;  // per output: its largest finite magnitude, at least 1
  std::optional<double> default_us_;
  device::Timer timer_;
  LibraryRunner library_;
  CUmodule epilogue_module_ = nullptr;
  CUfunction conv_epilogue_ = nullptr;
};

}  // namespace

autotune::DeviceKey current_device_key() { return device_info(driver()).key; }

autotune::Measurer cuda_measurer() {
  const Driver& d = driver();
  DeviceInfo info = device_info(d);
  autotune::Measurer m;
  m.device = info.key;
  m.bench = [&d, info](const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
    return std::unique_ptr<autotune::KernelBench>(new CudaKernelBench(d, info, k, sizes));
  };
  return m;
}

}  // namespace tcc::runtime
