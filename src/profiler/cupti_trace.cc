// CUPTI Activity API tracing (cupti_trace.h). CUPTI hands records over in
// buffers through C callbacks without a user pointer, so the records of the
// one active trace are collected in a process-wide store.
#include "src/profiler/cupti_trace.h"

#include <cupti.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "src/diag/errors.h"
#include "src/module/entry_points.h"
#include "src/runtime/cuda_driver.h"
#include "src/runtime/module.h"

namespace tcc::profiler {

namespace {

#define TCC_CUPTI_ENTRIES(X) \
  X(enable, cuptiActivityEnable, "cuptiActivityEnable") \
  X(disable, cuptiActivityDisable, "cuptiActivityDisable") \
  X(register_callbacks, cuptiActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks") \
  X(flush_all, cuptiActivityFlushAll, "cuptiActivityFlushAll") \
  X(next_record, cuptiActivityGetNextRecord, "cuptiActivityGetNextRecord") \
  X(push_id, cuptiActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId") \
  X(pop_id, cuptiActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId") \
  X(result_string, cuptiGetResultString, "cuptiGetResultString") \
  X(timestamp, cuptiGetTimestamp, "cuptiGetTimestamp")

struct Cupti {
  TCC_CUPTI_ENTRIES(TCC_ENTRY_MEMBER)
  std::string unavailable;

  int64_t now() const {
    uint64_t t = 0;
    check(timestamp(&t), "cuptiGetTimestamp");
    return static_cast<int64_t>(t);
  }

  static const Cupti& get() {
    static const Cupti c = open();
    return c;
  }

  void check(CUptiResult r, const char* what) const {
    if (r == CUPTI_SUCCESS) return;
    const char* text = nullptr;
    result_string(r, &text);
    throw InputError(std::string("CUPTI: ") + what + " failed: " + (text ? text : std::to_string(r)));
  }

 private:
  static Cupti open() {
    Cupti c{};
    void* lib = nullptr;
    // The toolkit installs CUPTI under extras/CUPTI/lib64, outside the library path.
    for (const char* name : {"libcupti.so.13", "libcupti.so", "/usr/local/cuda/lib64/libcupti.so.13",
                             "/usr/local/cuda/lib/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      c.unavailable =
          "CUPTI (libcupti.so.13) cannot be loaded from the library path, /usr/local/cuda/lib64 or "
          "/usr/local/cuda/extras/CUPTI/lib64";
      return c;
    }
    bool ok = TCC_RESOLVE_ENTRIES(TCC_CUPTI_ENTRIES, lib, c);
    if (!ok) c.unavailable = "libcupti lacks Activity API entry points tcc needs (too old)";
    return c;
  }
};

struct KernelRecord {
  std::string name;
  uint32_t stream = 0, correlation = 0;
  uint32_t graph = 0;  // the CUDA graph a replay ran it from (0: launched directly)
  uint64_t start = 0, end = 0;
};

struct Store {
  std::mutex mu;
  std::vector<KernelRecord> kernels;
  std::vector<TimelineSpan> spans;  // copies and synchronizations; the observer adds host steps
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id -> external id (step kernel + 1)
};

Store& store() {
  static Store s;
  return s;
}

constexpr size_t kBufferBytes = 8 << 20;

// CUPTI writes an external correlation record only ahead of an API record, so
// the driver and runtime API kinds are on too, though their records are
// dropped: without them the kernels cuBLASLt and cuDNN launch, named unlike
// any manifest kernel, could not be traced back to their steps. Copies,
// memsets and the host's waits are the step-time accounting's.
constexpr std::pair<CUpti_ActivityKind, const char*> kTracedKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "enabling CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "enabling EXTERNAL_CORRELATION"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "enabling DRIVER"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "enabling RUNTIME"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "enabling MEMCPY"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "enabling MEMSET"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "enabling SYNCHRONIZATION"}};

const char* copy_kind(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "h2d";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "d2h";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "d2d";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "h2h";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "p2p";
    default: return "other";  // to or from CUDA arrays, which tcc does not use
  }
}

// The host's waits; a stream waiting on an event (STREAM_WAIT_EVENT) blocks no host thread.
const char* sync_kind(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "stream";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "event";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "context";
    default: return nullptr;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  const Cupti& c = Cupti::get();
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  CUpti_Activity* record = nullptr;
  while (c.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      s.kernels.push_back({k->name ? k->name : "", k->streamId, k->correlationId, k->graphId, k->start, k->end});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      s.spans.push_back({SpanKind::Copy, copy_kind(m->copyKind), static_cast<int>(m->streamId),
                         static_cast<int64_t>(m->bytes), static_cast<int64_t>(m->start), static_cast<int64_t>(m->end)});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      s.spans.push_back({SpanKind::Copy, "memset", static_cast<int>(m->streamId), static_cast<int64_t>(m->bytes),
                         static_cast<int64_t>(m->start), static_cast<int64_t>(m->end)});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
      const auto* y = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
      if (const char* what = sync_kind(y->type))
        s.spans.push_back({SpanKind::Sync, what, static_cast<int>(y->streamId), 0, static_cast<int64_t>(y->start),
                           static_cast<int64_t>(y->end)});
    } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      s.external[e->correlationId] = e->externalId;
    }
  }
  std::free(buffer);
}

}  // namespace

std::string cupti_unavailable() { return Cupti::get().unavailable; }

struct CuptiTrace::Impl {
  runtime::Module& module;
  bool active = false;
  std::vector<StepWindow> windows;
  int64_t host_step_start = 0;  // of the host step running now

  void stop() {
    if (!active) return;
    const Cupti& c = Cupti::get();
    c.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (const auto& [kind, what] : kTracedKinds) c.disable(kind);
    module.step_observer = nullptr;
    active = false;
  }
};

CuptiTrace::CuptiTrace(runtime::Module& module) : impl_(new Impl{module, false, {}, 0}) {
  const Cupti& c = Cupti::get();
  if (!c.unavailable.empty()) throw InputError("tcc profile: " + c.unavailable);
  static std::once_flag registered;
  std::call_once(registered, [&] { c.check(c.register_callbacks(buffer_requested, buffer_completed), "register"); });
  {
    std::lock_guard<std::mutex> lock(store().mu);
    store().kernels.clear();
    store().spans.clear();
    store().external.clear();
  }
  for (const auto& [kind, what] : kTracedKinds) c.check(c.enable(kind), what);
  impl_->active = true;
  module.step_observer = [&c, impl = impl_.get()](const runtime::StepInfo& step, bool begin) {
    uint64_t last = 0;
    if (begin)
      c.push_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(step.kernel + 1));
    else
      c.pop_id(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    if (!step.fallback) return;
    if (begin) {
      impl->host_step_start = c.now();
      return;
    }
    int64_t end = c.now();
    std::lock_guard<std::mutex> lock(store().mu);
    store().spans.push_back({SpanKind::HostStep, step.node, 0, 0, impl->host_step_start, end});
  };
}

CuptiTrace::~CuptiTrace() { impl_->stop(); }

void CuptiTrace::trace_step(const std::function<void()>& step) {
  const Cupti& c = Cupti::get();
  StepWindow w;
  w.start_ns = c.now();
  step();
  w.end_ns = c.now();
  impl_->windows.push_back(w);
}

CuptiTrace::Result CuptiTrace::finish() {
  impl_->stop();
  Result result;
  result.windows = impl_->windows;
  const runtime::Module& m = impl_->module;
  std::set<std::string> module_kernels;
  for (const runtime::KernelInfo& info : m.kernels) module_kernels.insert(info.name);
  Store& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  std::vector<KernelActivity> steps;
  std::map<uint32_t, std::vector<KernelActivity>> replays;  // by the correlation id of their graph launch
  for (const KernelRecord& k : s.kernels) {
    // The random offset's advance is the module's bookkeeping, no step of it.
    if (k.name == kRandomOffsetAdvance) continue;
    KernelActivity a{k.name, static_cast<int>(k.stream), static_cast<int64_t>(k.start), static_cast<int64_t>(k.end)};
    if (k.graph != 0) {
      replays[k.correlation].push_back(std::move(a));
      continue;
    }
    auto ext = s.external.find(k.correlation);
    if (ext != s.external.end() && ext->second >= 1 && ext->second <= m.kernels.size())
      a.kernel = m.kernels[ext->second - 1].name;
    else if (!module_kernels.count(k.name))
      continue;  // not launched by the module (another library's work on the device)
    steps.push_back(std::move(a));
  }
  for (TimelineSpan& span : s.spans)
    if (std::any_of(result.windows.begin(), result.windows.end(),
                    [&](const StepWindow& w) { return span.start_ns < w.end_ns && w.start_ns < span.end_ns; }))
      result.spans.push_back(std::move(span));
  if (replays.empty()) {
    result.kernels = std::move(steps);
    return result;
  }
  std::vector<std::vector<KernelActivity>> groups;
  for (auto& [launch, records] : replays) groups.push_back(std::move(records));
  result.kernels = name_graph_replays(std::move(steps), std::move(groups), module_kernels);
  return result;
}

namespace {

void sort_by_start(std::vector<KernelActivity>& v) {
  std::stable_sort(v.begin(), v.end(),
                   [](const KernelActivity& a, const KernelActivity& b) { return a.start_ns < b.start_ns; });
}

}  // namespace

std::vector<KernelActivity> name_graph_replays(std::vector<KernelActivity> step,
                                               std::vector<std::vector<KernelActivity>> replays,
                                               const std::set<std::string>& module_kernels) {
  sort_by_start(step);
  std::vector<KernelActivity> out;
  for (std::vector<KernelActivity>& replay : replays) {
    sort_by_start(replay);
    bool aligned = replay.size() == step.size();
    for (size_t i = 0; aligned && i < replay.size(); ++i)
      aligned = !module_kernels.count(replay[i].kernel) || replay[i].kernel == step[i].kernel;
    for (size_t i = 0; i < replay.size(); ++i) {
      if (aligned)
        replay[i].kernel = step[i].kernel;
      else if (!module_kernels.count(replay[i].kernel))
        continue;  // a library kernel that no position names
      out.push_back(std::move(replay[i]));
    }
  }
  return out;
}

}  // namespace tcc::profiler
