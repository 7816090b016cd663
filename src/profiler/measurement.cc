// Measurement statistics, summaries and their JSON form (measurement.h).
#include "src/profiler/measurement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "src/diag/errors.h"
#include "src/log/log.h"

namespace tcc::profiler {

namespace {

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

KernelSummary summarize_kernel(const KernelSpec& spec, const std::vector<double>& durations_us, int traced_steps,
                               const DeviceProfile& d) {
  KernelSummary k;
  k.spec = &spec;
  k.launches_per_step = static_cast<double>(durations_us.size()) / traced_steps;
  k.time_per_step_us = std::accumulate(durations_us.begin(), durations_us.end(), 0.0) / traced_steps;
  k.median_us = stats_of(durations_us).median;
  double seconds = k.median_us * 1e-6;
  if (seconds > 0) {
    k.achieved_bytes_per_s = static_cast<double>(spec.bytes) / seconds;
    k.achieved_flop_per_s = static_cast<double>(spec.flop) / seconds;
  }
  k.intensity = spec.bytes > 0 ? static_cast<double>(spec.flop) / static_cast<double>(spec.bytes) : 0;
  double memory_s = static_cast<double>(spec.bytes) / d.bytes_per_s;
  double compute_s = static_cast<double>(spec.flop) / (spec.tensor_cores ? d.tensor_flop_per_s : d.fp32_flop_per_s);
  k.compute_bound = compute_s > memory_s;
  k.roofline_fraction = seconds > 0 ? std::max(memory_s, compute_s) / seconds : 0;
  return k;
}

ModeSummary summarize_mode(const ModeMeasurement& m, const DeviceProfile& d, const std::string& model) {
  if (m.latencies_ms.empty())
    throw InputError(model + ": mode '" + m.mode + "' has no timed step (latencies_ms is empty)");
  ModeSummary s;
  s.mode = &m;
  s.latency_ms = stats_of(m.latencies_ms);
  s.enqueue_ms = stats_of(m.enqueue_ms);
  s.gpu_ms = stats_of(m.gpu_ms);
  double batch_ms = m.pipelined_steps > 0 && !m.pipelined_ms.empty() ? stats_of(m.pipelined_ms).median : 0;
  s.pipelined = batch_ms > 0;
  s.steps_per_s = s.pipelined ? m.pipelined_steps * 1e3 / batch_ms
                  : s.latency_ms.median > 0 ? 1e3 / s.latency_ms.median
                                            : 0;
  s.gpu_busy = s.latency_ms.median > 0 ? std::min(1.0, s.gpu_ms.median / s.latency_ms.median) : 0;
  if (!m.step_windows.empty()) {
    std::vector<TimelineSpan> spans = m.spans;
    for (const KernelActivity& a : m.activities)
      spans.push_back({SpanKind::Kernel, a.kernel, a.stream, 0, a.start_ns, a.end_ns});
    s.step_time = account_step_time(m.step_windows, spans);
    if (s.step_time.steps > 0) s.gpu_busy = s.step_time.gpu_busy;
  }
  if (m.traced_steps <= 0) return s;

  std::map<std::string, std::vector<double>> durations;
  for (const KernelActivity& a : m.activities) durations[a.kernel].push_back((a.end_ns - a.start_ns) / 1e3);
  double total = 0;
  for (const KernelSpec& spec : m.kernels) {
    auto it = durations.find(spec.name);
    if (it == durations.end()) continue;
    s.kernels.push_back(summarize_kernel(spec, it->second, m.traced_steps, d));
    total += s.kernels.back().time_per_step_us;
  }
  for (KernelSummary& k : s.kernels) k.share = total > 0 ? k.time_per_step_us / total : 0;
  std::stable_sort(s.kernels.begin(), s.kernels.end(), [](const KernelSummary& a, const KernelSummary& b) {
    return a.time_per_step_us > b.time_per_step_us;
  });
  return s;
}

// What to do about a mode whose steps the host cannot enqueue fast enough.
std::string enqueue_advice(const ModeMeasurement& m) {
  if (m.cuda_graph)
    return ", though a step is one CUDA graph launch already (and the copies of new inputs into its buffers, which "
           "--bound-inputs leaves out): larger steps (a bigger batch) amortize it";
  if (m.note.rfind("skipping cudagraphs", 0) == 0) return "; this mode's CUDA graph was skipped (see its note)";
  return ", CUDA graphs (reduce-overhead) may help";
}

std::string share_of_step(double us, const StepTime& t) {
  return fmt::format("{:.3f} ms of the {:.3f} ms step ({:.0f}%)", us / 1e3, t.step_us / 1e3, 100 * us / t.step_us);
}

// A host step or an idle gap that takes kDominantShare of the step or more.
void add_step_time_warnings(const std::string& mode, const StepTime& t, std::vector<std::string>& warnings) {
  if (t.steps == 0 || t.step_us <= 0) return;
  for (const HostStepTime& h : t.host_steps)
    if (h.us_per_step >= kDominantShare * t.step_us)
      warnings.push_back(mode + ": host step '" + h.node + "' takes " + share_of_step(h.us_per_step, t) +
                         ": it runs on the host between kernels, copying its inputs and outputs and synchronizing "
                         "the stream; a GPU kernel for its op, or computing it once per binding, removes it");
  for (const IdleGap& g : t.gaps)
    if (g.us_per_step >= kDominantShare * t.step_us)
      warnings.push_back(mode + ": the GPU is idle for " + share_of_step(g.us_per_step, t) + " between " + g.after +
                         " and " + g.before + (g.count > t.steps ? " (" + std::to_string(g.count) + " gaps)" : ""));
}

void add_warnings(Summary& s) {
  for (const ModeSummary& m : s.modes) {
    const std::string& name = m.mode->mode;
    if (!m.mode->enqueue_ms.empty() && !m.mode->gpu_ms.empty() && m.enqueue_ms.median >= m.gpu_ms.median)
      s.warnings.push_back(name + ": throughput is bound by host enqueue time (enqueue " +
                           fmt::format("{:.3f}", m.enqueue_ms.median) + " ms >= GPU " +
                           fmt::format("{:.3f}", m.gpu_ms.median) + " ms per step); the GPU is not fully used" +
                           enqueue_advice(*m.mode));
    double ratio = m.latency_ms.median > 0 ? m.latency_ms.p99 / m.latency_ms.median : 0;
    if (m.latency_ms.cv() > kUnstableCv || ratio > kUnstableP99Ratio)
      s.warnings.push_back(name + ": timings are unstable (coefficient of variation " +
                           fmt::format("{:.1f}", 100 * m.latency_ms.cv()) + "%, p99/median " +
                           fmt::format("{:.2f}", ratio) +
                           "); other work on the machine, clock changes or too few iterations");
    add_step_time_warnings(name, m.step_time, s.warnings);
  }
}

// The JSON names of SpanKind's values; a recording's spans hold every kind but kernels.
const char* const kSpanKinds[] = {"kernel", "copy", "host_step", "sync"};

template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw InputError(where + ": missing field '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw InputError(where + "." + key + ": wrong type (" + j.at(key).type_name() + ")");
  }
}

template <typename T>
T optional_field(const nlohmann::json& j, const char* key, const std::string& where, T fallback) {
  return j.contains(key) ? field<T>(j, key, where) : fallback;
}

}  // namespace

Stats stats_of(std::vector<double> xs) {
  Stats s;
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  double n = static_cast<double>(xs.size());
  s.mean = std::accumulate(xs.begin(), xs.end(), 0.0) / n;
  s.median = xs.size() % 2 ? xs[xs.size() / 2] : (xs[xs.size() / 2 - 1] + xs[xs.size() / 2]) / 2;
  s.p90 = percentile(xs, 0.90);
  s.p99 = percentile(xs, 0.99);
  s.min = xs.front();
  s.max = xs.back();
  double var = 0;
  for (double x : xs) var += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(var / n);
  return s;
}

Summary summarize(const Measurement& m) {
  Summary s;
  s.measurement = &m;
  s.device = &find_device(m.device);
  for (const ModeMeasurement& mode : m.modes) s.modes.push_back(summarize_mode(mode, *s.device, m.model));
  auto eager =
      std::find_if(s.modes.begin(), s.modes.end(), [](const ModeSummary& x) { return x.mode->mode == "eager"; });
  if (eager != s.modes.end())
    for (ModeSummary& x : s.modes)
      x.speedup_over_eager = eager->steps_per_s > 0 ? x.steps_per_s / eager->steps_per_s : 0;
  add_warnings(s);
  return s;
}

nlohmann::json to_json(const GraphCounts& g) {
  return {{"captures", g.captures},
          {"replays", g.replays},
          {"evictions", g.evictions},
          {"uncaptured_steps", g.uncaptured_steps},
          {"not_captured", g.not_captured}};
}

nlohmann::json to_json(const Measurement& m) {
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeMeasurement& x : m.modes) {
    nlohmann::json kernels = nlohmann::json::array(), activities = nlohmann::json::array();
    for (const KernelSpec& k : x.kernels)
      kernels.push_back({{"name", k.name},
                         {"kind", k.kind},
                         {"nodes", k.nodes},
                         {"schedule", k.schedule},
                         {"bytes", k.bytes},
                         {"flop", k.flop},
                         {"tensor_cores", k.tensor_cores}});
    for (const KernelActivity& a : x.activities)
      activities.push_back(
          {{"kernel", a.kernel}, {"stream", a.stream}, {"start_ns", a.start_ns}, {"end_ns", a.end_ns}});
    nlohmann::json windows = nlohmann::json::array(), spans = nlohmann::json::array();
    for (const StepWindow& w : x.step_windows) windows.push_back({{"start_ns", w.start_ns}, {"end_ns", w.end_ns}});
    for (const TimelineSpan& t : x.spans)
      spans.push_back({{"kind", kSpanKinds[static_cast<int>(t.kind)]},
                       {"name", t.name},
                       {"stream", t.stream},
                       {"bytes", t.bytes},
                       {"start_ns", t.start_ns},
                       {"end_ns", t.end_ns}});
    modes.push_back({{"mode", x.mode},
                     {"note", x.note},
                     {"cuda_graph", x.cuda_graph},
                     {"compile_s", x.compile_s},
                     {"warmup", x.warmup},
                     {"latencies_ms", x.latencies_ms},
                     {"enqueue_ms", x.enqueue_ms},
                     {"gpu_ms", x.gpu_ms},
                     {"pipelined_steps", x.pipelined_steps},
                     {"pipelined_ms", x.pipelined_ms},
                     {"kernels", kernels},
                     {"traced_steps", x.traced_steps},
                     {"activities", activities},
                     {"step_windows", windows},
                     {"spans", spans}});
    if (x.graphs) modes.back()["graphs"] = to_json(*x.graphs);
  }
  return {{"format", "tcc-measurement"},
          {"format_version", 1},
          {"source", m.source},
          {"model", m.model},
          {"device", m.device},
          {"device_name", m.device_name},
          {"date", m.date},
          {"commit", m.commit},
          {"sizes", m.sizes},
          {"modes", modes}};
}

Measurement measurement_from_json(const nlohmann::json& j, const std::string& file) {
  if (field<std::string>(j, "format", file) != "tcc-measurement" || field<int>(j, "format_version", file) != 1)
    throw InputError(file + ": expected format 'tcc-measurement' version 1");
  Measurement m;
  m.source = optional_field<std::string>(j, "source", file, "");
  m.model = field<std::string>(j, "model", file);
  m.device = field<std::string>(j, "device", file);
  m.device_name = optional_field<std::string>(j, "device_name", file, "");
  m.date = optional_field<std::string>(j, "date", file, "");
  m.commit = optional_field<std::string>(j, "commit", file, "");
  m.sizes = optional_field<std::map<std::string, int64_t>>(j, "sizes", file, {});
  const auto& modes = field<nlohmann::json>(j, "modes", file);
  if (!modes.is_array() || modes.empty()) throw InputError(file + ": modes: expected a non-empty array");
  for (size_t i = 0; i < modes.size(); ++i) {
    const std::string at = file + ": modes[" + std::to_string(i) + "]";
    const nlohmann::json& x = modes[i];
    ModeMeasurement mode;
    mode.mode = field<std::string>(x, "mode", at);
    mode.note = optional_field<std::string>(x, "note", at, "");
    mode.cuda_graph = optional_field<bool>(x, "cuda_graph", at, false);
    mode.compile_s = optional_field<double>(x, "compile_s", at, 0);
    mode.warmup = optional_field<int>(x, "warmup", at, 0);
    mode.latencies_ms = field<std::vector<double>>(x, "latencies_ms", at);
    mode.enqueue_ms = optional_field<std::vector<double>>(x, "enqueue_ms", at, {});
    mode.gpu_ms = optional_field<std::vector<double>>(x, "gpu_ms", at, {});
    mode.pipelined_steps = optional_field<int>(x, "pipelined_steps", at, 0);
    mode.pipelined_ms = optional_field<std::vector<double>>(x, "pipelined_ms", at, {});
    if (mode.pipelined_steps < 0) throw InputError(at + ".pipelined_steps: expected a count, not a negative number");
    mode.traced_steps = optional_field<int>(x, "traced_steps", at, 0);
    const auto kernels = optional_field<nlohmann::json>(x, "kernels", at, nlohmann::json::array());
    for (size_t k = 0; k < kernels.size(); ++k) {
      const std::string kat = at + ".kernels[" + std::to_string(k) + "]";
      mode.kernels.push_back({field<std::string>(kernels[k], "name", kat), field<std::string>(kernels[k], "kind", kat),
                              field<std::vector<std::string>>(kernels[k], "nodes", kat),
                              optional_field<std::string>(kernels[k], "schedule", kat, ""),
                              field<int64_t>(kernels[k], "bytes", kat), field<int64_t>(kernels[k], "flop", kat),
                              optional_field<bool>(kernels[k], "tensor_cores", kat, false)});
    }
    const auto activities = optional_field<nlohmann::json>(x, "activities", at, nlohmann::json::array());
    for (size_t a = 0; a < activities.size(); ++a) {
      const std::string aat = at + ".activities[" + std::to_string(a) + "]";
      KernelActivity act{field<std::string>(activities[a], "kernel", aat), field<int>(activities[a], "stream", aat),
                         field<int64_t>(activities[a], "start_ns", aat), field<int64_t>(activities[a], "end_ns", aat)};
      if (act.end_ns < act.start_ns) throw InputError(aat + ": end_ns is before start_ns");
      bool known = std::any_of(mode.kernels.begin(), mode.kernels.end(),
                               [&](const KernelSpec& k) { return k.name == act.kernel; });
      if (!known) throw InputError(aat + ": kernel '" + act.kernel + "' is not in this mode's kernels");
      mode.activities.push_back(std::move(act));
    }
    if (!mode.activities.empty() && mode.traced_steps <= 0) throw InputError(at + ": activities without traced_steps");
    const auto windows = optional_field<nlohmann::json>(x, "step_windows", at, nlohmann::json::array());
    for (size_t w = 0; w < windows.size(); ++w) {
      const std::string wat = at + ".step_windows[" + std::to_string(w) + "]";
      StepWindow window{field<int64_t>(windows[w], "start_ns", wat), field<int64_t>(windows[w], "end_ns", wat)};
      if (window.end_ns < window.start_ns) throw InputError(wat + ": end_ns is before start_ns");
      mode.step_windows.push_back(window);
    }
    const auto spans = optional_field<nlohmann::json>(x, "spans", at, nlohmann::json::array());
    for (size_t i = 0; i < spans.size(); ++i) {
      const std::string sat = at + ".spans[" + std::to_string(i) + "]";
      std::string kind = field<std::string>(spans[i], "kind", sat);
      auto known = std::find(std::begin(kSpanKinds) + 1, std::end(kSpanKinds), kind);
      if (known == std::end(kSpanKinds))
        throw InputError(sat + ".kind: expected copy, host_step or sync, got '" + kind + "'");
      TimelineSpan span{static_cast<SpanKind>(known - std::begin(kSpanKinds)),
                        field<std::string>(spans[i], "name", sat),
                        optional_field<int>(spans[i], "stream", sat, 0),
                        optional_field<int64_t>(spans[i], "bytes", sat, 0),
                        field<int64_t>(spans[i], "start_ns", sat),
                        field<int64_t>(spans[i], "end_ns", sat)};
      if (span.end_ns < span.start_ns) throw InputError(sat + ": end_ns is before start_ns");
      mode.spans.push_back(std::move(span));
    }
    if (x.contains("graphs")) {
      const std::string gat = at + ".graphs";
      const nlohmann::json& g = x.at("graphs");
      mode.graphs = GraphCounts{field<int64_t>(g, "captures", gat), field<int64_t>(g, "replays", gat),
                                field<int64_t>(g, "evictions", gat), field<int64_t>(g, "uncaptured_steps", gat),
                                optional_field<std::string>(g, "not_captured", gat, "")};
    }
    m.modes.push_back(std::move(mode));
  }
  return m;
}

Measurement read_measurement(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the recorded measurement");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw InputError(path + ": not valid JSON");
  return measurement_from_json(j, path);
}

void write_measurement(const std::string& path, const Measurement& m) {
  std::ofstream out(path);
  if (!out) throw InputError(path + ": cannot write");
  out << to_json(m).dump(1) << "\n";
}

}  // namespace tcc::profiler
