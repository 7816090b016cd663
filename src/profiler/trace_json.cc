// trace.json: a trace's timeline in Chrome's trace-event format, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per mode;
// one thread (track) per CUDA stream, with a complete event ("ph": "X") per
// kernel execution named by its kernel, the nodes it fused in args, and per
// copy or memset ("copy h2d", its bytes in args); and a host track (the tid
// after the streams') with each traced step ("step N") and the host steps and
// synchronizations in it. Times are microseconds from the first traced record.
#include <algorithm>
#include <limits>
#include <set>

#include "src/diag/errors.h"
#include "src/profiler/report.h"

namespace tcc::profiler {

nlohmann::json trace_json(const Measurement& m) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const ModeMeasurement& x : m.modes) {
    for (const KernelActivity& a : x.activities) origin = std::min(origin, a.start_ns);
    for (const TimelineSpan& t : x.spans) origin = std::min(origin, t.start_ns);
    for (const StepWindow& w : x.step_windows) origin = std::min(origin, w.start_ns);
  }
  auto slice = [&](const std::string& name, const char* cat, int pid, int tid, int64_t start, int64_t end,
                   nlohmann::json args) {
    return nlohmann::json{{"name", name},
                          {"cat", cat},
                          {"ph", "X"},
                          {"pid", pid},
                          {"tid", tid},
                          {"ts", static_cast<double>(start - origin) / 1e3},
                          {"dur", static_cast<double>(end - start) / 1e3},
                          {"args", std::move(args)}};
  };

  nlohmann::json events = nlohmann::json::array();
  for (size_t i = 0; i < m.modes.size(); ++i) {
    const ModeMeasurement& x = m.modes[i];
    if (x.activities.empty() && x.spans.empty() && x.step_windows.empty()) continue;
    int pid = static_cast<int>(i) + 1;
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "tcc " + x.mode}}}});
    std::set<int> streams;
    for (const KernelActivity& a : x.activities) streams.insert(a.stream);
    for (const TimelineSpan& t : x.spans)
      if (t.kind == SpanKind::Copy) streams.insert(t.stream);
    for (int stream : streams)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", stream},
                        {"args", {{"name", "stream " + std::to_string(stream)}}}});
    const int host = streams.empty() ? 1 : *streams.rbegin() + 1;
    bool on_host = !x.step_windows.empty() || std::any_of(x.spans.begin(), x.spans.end(), [](const TimelineSpan& t) {
      return t.kind != SpanKind::Copy;
    });
    if (on_host)
      events.push_back(
          {{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", host}, {"args", {{"name", "host"}}}});
    for (const KernelActivity& a : x.activities) {
      auto spec =
          std::find_if(x.kernels.begin(), x.kernels.end(), [&](const KernelSpec& k) { return k.name == a.kernel; });
      TCC_CHECK(spec != x.kernels.end()) << "an activity of kernel '" << a.kernel << "', which mode " << x.mode
                                         << " does not list";
      events.push_back(slice(a.kernel, spec->kind.c_str(), pid, a.stream, a.start_ns, a.end_ns,
                             {{"nodes", spec->nodes}, {"bytes", spec->bytes}, {"flop", spec->flop}}));
    }
    for (size_t w = 0; w < x.step_windows.size(); ++w)
      events.push_back(slice("step " + std::to_string(w), "step", pid, host, x.step_windows[w].start_ns,
                             x.step_windows[w].end_ns, nlohmann::json::object()));
    for (const TimelineSpan& t : x.spans) {
      if (t.kind == SpanKind::Copy)
        events.push_back(slice(span_label(t), "copy", pid, t.stream, t.start_ns, t.end_ns, {{"bytes", t.bytes}}));
      else
        events.push_back(slice(span_label(t), t.kind == SpanKind::HostStep ? "host_step" : "sync", pid, host,
                               t.start_ns, t.end_ns, nlohmann::json::object()));
    }
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ns"},
          {"otherData", {{"model", m.model}, {"device", m.device_name.empty() ? m.device : m.device_name}}}};
}

}  // namespace tcc::profiler
