// report.json: the summary of a measurement for tools, and write_reports, which
// writes every report of a run into one directory.
#include <filesystem>
#include <fstream>

#include "src/diag/errors.h"
#include "src/profiler/report.h"

namespace fs = std::filesystem;

namespace tcc::profiler {

namespace {

nlohmann::json stats_json(const Stats& s) {
  return {{"median", s.median}, {"p90", s.p90}, {"p99", s.p99},       {"mean", s.mean},
          {"min", s.min},       {"max", s.max}, {"stddev", s.stddev}, {"cv", s.cv()}};
}

nlohmann::json kernel_json(const KernelSummary& k) {
  return {{"name", k.spec->name},
          {"kind", k.spec->kind},
          {"schedule", k.spec->schedule},
          {"nodes", k.spec->nodes},
          {"launches_per_step", k.launches_per_step},
          {"time_per_step_us", k.time_per_step_us},
          {"median_us", k.median_us},
          {"share", k.share},
          {"bytes", k.spec->bytes},
          {"flop", k.spec->flop},
          {"achieved_bytes_per_s", k.achieved_bytes_per_s},
          {"achieved_flop_per_s", k.achieved_flop_per_s},
          {"intensity", k.intensity},
          {"roofline_fraction", k.roofline_fraction},
          {"bound", k.compute_bound ? "compute" : "memory"}};
}

nlohmann::json step_time_json(const StepTime& t) {
  if (t.steps == 0) return nullptr;
  nlohmann::json categories = nlohmann::json::object(), host_steps = nlohmann::json::array(),
                 gaps = nlohmann::json::array();
  // The categories of step_category_name, as identifiers.
  static const char* const kKeys[kStepCategories] = {"kernels", "copies", "host_steps", "synchronization", "idle"};
  for (int c = 0; c < kStepCategories; ++c) categories[kKeys[c]] = t.us[c];
  for (const HostStepTime& h : t.host_steps) host_steps.push_back({{"node", h.node}, {"us_per_step", h.us_per_step}});
  for (const IdleGap& g : t.gaps)
    gaps.push_back({{"after", g.after}, {"before", g.before}, {"us_per_step", g.us_per_step}, {"count", g.count}});
  return {{"steps", t.steps},       {"step_us", t.step_us},       {"us_per_step", categories},
          {"gpu_busy", t.gpu_busy}, {"host_steps", host_steps}, {"gaps", gaps}};
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  if (!(out << text)) throw InputError(path.string() + ": cannot write");
}

}  // namespace

nlohmann::json report_json(const Summary& s) {
  const Measurement& m = *s.measurement;
  const DeviceProfile& d = *s.device;
  nlohmann::json modes = nlohmann::json::array();
  for (const ModeSummary& x : s.modes) {
    nlohmann::json kernels = nlohmann::json::array();
    for (const KernelSummary& k : x.kernels) kernels.push_back(kernel_json(k));
    modes.push_back({{"mode", x.mode->mode},
                     {"note", x.mode->note},
                     {"cuda_graph", x.mode->cuda_graph},
                     {"compile_s", x.mode->compile_s},
                     {"warmup", x.mode->warmup},
                     {"iterations", x.mode->latencies_ms.size()},
                     {"latency_ms", stats_json(x.latency_ms)},
                     {"enqueue_ms", stats_json(x.enqueue_ms)},
                     {"gpu_ms", stats_json(x.gpu_ms)},
                     {"steps_per_s", x.steps_per_s},
                     {"steps_per_s_from", x.pipelined ? "back_to_back" : "median_latency"},
                     {"pipelined_steps", x.mode->pipelined_steps},
                     {"speedup_over_eager", x.speedup_over_eager > 0 ? nlohmann::json(x.speedup_over_eager) : nullptr},
                     {"gpu_busy", x.gpu_busy},
                     {"gpu_busy_from", x.step_time.steps > 0 ? "step_time" : "events"},
                     {"graphs", x.mode->graphs ? to_json(*x.mode->graphs) : nlohmann::json(nullptr)},
                     {"traced_steps", x.mode->traced_steps},
                     {"step_time", step_time_json(x.step_time)},
                     {"kernels", kernels}});
  }
  return {{"format", "tcc-report"},
          {"format_version", 1},
          {"model", m.model},
          {"source", m.source},
          {"date", m.date},
          {"commit", m.commit},
          {"sizes", m.sizes},
          {"device",
           {{"profile", d.name},
            {"name", m.device_name},
            {"description", d.description},
            {"bytes_per_s", d.bytes_per_s},
            {"tensor_flop_per_s", d.tensor_flop_per_s},
            {"fp32_flop_per_s", d.fp32_flop_per_s}}},
          {"modes", modes},
          {"warnings", s.warnings}};
}

void write_reports(const std::string& dir, const Measurement& m) {
  Summary s = summarize(m);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError(dir + ": cannot create the report directory (" + ec.message() + ")");
  write_measurement((fs::path(dir) / "measurement.json").string(), m);
  write_file(fs::path(dir) / "report.json", report_json(s).dump(1) + "\n");
  write_file(fs::path(dir) / "report.md", report_md(s));
  write_file(fs::path(dir) / "report.html", report_html(s));
  write_file(fs::path(dir) / "trace.json", trace_json(m).dump() + "\n");
}

}  // namespace tcc::profiler
