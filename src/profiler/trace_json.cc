// trace.json: the traced kernels in Chrome's trace-event format, which
// Perfetto (ui.perfetto.dev) and chrome://tracing open. One process per mode,
// one thread (track) per CUDA stream, one complete event ("ph": "X") per
// kernel execution named by its kernel, with the nodes it fused in args.
// Times are microseconds from the first traced kernel.
#include <algorithm>
#include <limits>
#include <set>

#include "src/diag/errors.h"
#include "src/profiler/report.h"

namespace tcc::profiler {

nlohmann::json trace_json(const Measurement& m) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const ModeMeasurement& x : m.modes)
    for (const KernelActivity& a : x.activities) origin = std::min(origin, a.start_ns);

  nlohmann::json events = nlohmann::json::array();
  for (size_t i = 0; i < m.modes.size(); ++i) {
    const ModeMeasurement& x = m.modes[i];
    if (x.activities.empty()) continue;
    int pid = static_cast<int>(i) + 1;
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "tcc " + x.mode}}}});
    std::set<int> streams;
    for (const KernelActivity& a : x.activities) streams.insert(a.stream);
    for (int stream : streams)
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", pid},
                        {"tid", stream},
                        {"args", {{"name", "stream " + std::to_string(stream)}}}});
    for (const KernelActivity& a : x.activities) {
      auto spec =
          std::find_if(x.kernels.begin(), x.kernels.end(), [&](const KernelSpec& k) { return k.name == a.kernel; });
      TCC_CHECK(spec != x.kernels.end()) << "an activity of kernel '" << a.kernel << "', which mode " << x.mode
                                         << " does not list";
      events.push_back({{"name", a.kernel},
                        {"cat", spec->kind},
                        {"ph", "X"},
                        {"pid", pid},
                        {"tid", a.stream},
                        {"ts", static_cast<double>(a.start_ns - origin) / 1e3},
                        {"dur", static_cast<double>(a.end_ns - a.start_ns) / 1e3},
                        {"args", {{"nodes", spec->nodes}, {"bytes", spec->bytes}, {"flop", spec->flop}}}});
    }
  }
  return {{"traceEvents", events},
          {"displayTimeUnit", "ns"},
          {"otherData", {{"model", m.model}, {"device", m.device_name.empty() ? m.device : m.device_name}}}};
}

}  // namespace tcc::profiler
