// report.md: the mode comparison table (the layout of torch.compile's mode
// tables: steps/s, speedup over eager, compile time), the warnings, per traced
// mode where the step's time went (step_time.h), and per traced mode the
// kernels taking the most GPU time with the nodes they fused and their
// position against the device's roofline. Also the terminal table.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "src/log/log.h"
#include "src/profiler/report.h"

namespace tcc::profiler {

namespace {

std::string sizes_text(const std::map<std::string, int64_t>& sizes) {
  std::string s;
  for (const auto& [name, v] : sizes) s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(v);
  return s.empty() ? "static shapes" : s;
}

std::string speedup(const ModeSummary& m) {
  return m.speedup_over_eager > 0 ? fixed(m.speedup_over_eager, 2) + "x" : "-";
}

double launches_per_step(const ModeSummary& m) {
  double n = 0;
  for (const KernelSummary& k : m.kernels) n += k.launches_per_step;
  return n;
}

}  // namespace

std::string report_md(const Summary& s) {
  const Measurement& m = *s.measurement;
  const DeviceProfile& d = *s.device;
  std::ostringstream os;
  os << "# tcc performance report: " << m.model << "\n\n";
  os << "Device: " << (m.device_name.empty() ? d.description : m.device_name) << " (profile `" << d.name
     << "`: " << fmt::format("{:g}", d.bytes_per_s / 1e12) << " TB/s, "
     << fmt::format("{:g}", d.tensor_flop_per_s / 1e12) << " TFLOP/s tensor core, "
     << fmt::format("{:g}", d.fp32_flop_per_s / 1e12) << " TFLOP/s fp32). Sizes: " << sizes_text(m.sizes) << ".";
  if (!m.commit.empty()) os << " Commit `" << m.commit << "`.";
  if (!m.date.empty()) os << " Date " << m.date << ".";
  os << "\n";
  if (!m.source.empty()) os << "\nSource: " << m.source << "\n";

  os << "\n## Modes\n\n"
     << "| mode | steps/s | speedup over eager | median ms | p90 ms | p99 ms | enqueue ms | GPU ms | GPU busy | "
        "compile s | kernels/step |\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const ModeSummary& x : s.modes) {
    os << "| " << x.mode->mode << " | " << fixed(x.steps_per_s, 0) << " | " << speedup(x) << " | "
       << fixed(x.latency_ms.median, 3) << " | " << fixed(x.latency_ms.p90, 3) << " | " << fixed(x.latency_ms.p99, 3)
       << " | " << fixed(x.enqueue_ms.median, 3) << " | " << fixed(x.gpu_ms.median, 3) << " | "
       << fixed(100 * x.gpu_busy, 0) << "% | " << fixed(x.mode->compile_s, 2) << " | "
       << (x.mode->traced_steps > 0 ? fixed(launches_per_step(x), 0) : "-") << " |\n";
  }
  os << "\n" << steps_per_s_basis(s) << "\n";
  bool any_note = false;
  for (const ModeSummary& x : s.modes) {
    if (!x.mode->note.empty()) {
      os << (any_note ? "" : "\n") << "- " << x.mode->mode << ": " << x.mode->note << "\n";
      any_note = true;
    }
    if (x.mode->graphs) {
      os << (any_note ? "" : "\n") << "- " << x.mode->mode << ": " << graphs_text(*x.mode->graphs) << "\n";
      any_note = true;
    }
  }

  os << "\n## Warnings\n\n";
  if (s.warnings.empty()) os << "None.\n";
  for (const std::string& w : s.warnings) os << "- " << w << "\n";

  for (const ModeSummary& x : s.modes) {
    const StepTime& t = x.step_time;
    if (t.steps == 0) continue;
    os << "\n## Step time: " << x.mode->mode << "\n\n"
       << "Where the " << fixed(t.step_us / 1e3, 3) << " ms of a step went, over " << t.steps
       << " traced steps: each moment counted once, as a kernel's if one runs, else a copy's, else a host step's, "
       << "else synchronization's, else idle. GPU busy (kernels and copies) " << fixed(100 * t.gpu_busy, 0)
       << "%.\n\n| category | ms/step | % of step |\n|---|---:|---:|\n";
    for (int c = 0; c < kStepCategories; ++c)
      os << "| " << step_category_name(c) << " | " << fixed(t.us[c] / 1e3, 3) << " | "
         << fixed(100 * t.us[c] / t.step_us, 1) << " |\n";
    os << "| step | " << fixed(t.step_us / 1e3, 3) << " | 100.0 |\n";
    for (const std::string& note : step_time_notes(t)) os << "\n" << note << "\n";
  }

  for (const ModeSummary& x : s.modes) {
    if (x.kernels.empty()) continue;
    os << "\n## Top kernels: " << x.mode->mode << "\n\n"
       << "GPU time per step from " << x.mode->traced_steps << " traced steps; roofline: the kernel's bytes at "
       << fmt::format("{:g}", d.bytes_per_s / 1e12) << " TB/s or its FLOP at the compute peak, whichever is slower, "
       << "over its measured time.\n\n"
       << "| kernel | schedule | source nodes | launches/step | us/step | % of total | median us | GB/s | TFLOP/s | "
          "% of roofline | bound |\n"
       << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
    for (size_t i = 0; i < x.kernels.size() && i < kTopKernels; ++i) {
      const KernelSummary& k = x.kernels[i];
      os << "| `" << k.spec->name << "` | " << (k.spec->schedule.empty() ? "-" : k.spec->schedule) << " | "
         << joined(k.spec->nodes) << " | " << fixed(k.launches_per_step, 0) << " | "
         << fixed(k.time_per_step_us, 2) << " | " << fixed(100 * k.share, 1) << " | " << fixed(k.median_us, 2) << " | "
         << fixed(k.achieved_bytes_per_s / 1e9, 0) << " | " << fixed(k.achieved_flop_per_s / 1e12, 2) << " | "
         << fixed(100 * k.roofline_fraction, 1) << " | " << (k.compute_bound ? "compute" : "memory") << " |\n";
    }
    if (x.kernels.size() > kTopKernels)
      os << "\n" << x.kernels.size() - kTopKernels << " more kernels in report.json.\n";
  }
  return os.str();
}

std::string fixed(double v, int digits) { return fmt::format("{:.{}f}", v, digits); }

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string steps_per_s_basis(const Summary& s) {
  bool all = std::all_of(s.modes.begin(), s.modes.end(), [](const ModeSummary& x) { return x.pipelined; });
  if (all)
    return "steps/s: steps enqueued back to back (the median batch); latency, enqueue and GPU time: one step "
           "at a time, each waited for.";
  return "steps/s: one over the median latency where a mode has no back-to-back batches (recorded before "
         "tcc measured them); latency, enqueue and GPU time: one step at a time, each waited for.";
}

std::string graphs_text(const GraphCounts& g) {
  std::string text = fmt::format("CUDA graphs: {} captured, {} replayed, {} evicted", g.captures, g.replays,
                                 g.evictions);
  if (g.uncaptured_steps > 0)
    text += fmt::format("; {} steps not captured: {}", g.uncaptured_steps,
                        g.not_captured.empty() ? "reason not recorded" : g.not_captured);
  return text;
}

std::vector<std::string> step_time_notes(const StepTime& t) {
  std::vector<std::string> notes;
  auto share = [&](double us) {
    return fixed(us / 1e3, 3) + " ms (" + fixed(100 * us / t.step_us, 1) + "%)";
  };
  if (!t.host_steps.empty()) {
    std::string text = "Host steps, begin to end with their copies and waits:";
    for (size_t i = 0; i < t.host_steps.size(); ++i)
      text += std::string(i ? "," : "") + " '" + t.host_steps[i].node + "' " + share(t.host_steps[i].us_per_step);
    notes.push_back(text + ".");
  }
  if (!t.gaps.empty()) {
    std::string text = "Largest idle gaps per step:";
    for (size_t i = 0; i < t.gaps.size() && i < kTopGaps; ++i) {
      const IdleGap& g = t.gaps[i];
      text += std::string(i ? ";" : "") + " between " + g.after + " and " + g.before + ", " + share(g.us_per_step) +
              (g.count > t.steps ? " in " + std::to_string(g.count) + " gaps" : "");
    }
    notes.push_back(text + ".");
  }
  return notes;
}

std::string mode_table_text(const Summary& s) {
  std::ostringstream os;
  os << fmt::format("{:<16} {:>10} {:>8} {:>10} {:>10} {:>10} {:>11} {:>9} {:>9}\n", "mode", "steps/s", "speedup",
                    "median ms", "p99 ms", "GPU ms", "enqueue ms", "GPU busy", "compile s");
  for (const ModeSummary& x : s.modes)
    os << fmt::format("{:<16} {:>10.0f} {:>8} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.3f} {:>8.0f}% {:>9.2f}\n",
                      x.mode->mode, x.steps_per_s, speedup(x), x.latency_ms.median, x.latency_ms.p99, x.gpu_ms.median,
                      x.enqueue_ms.median, 100 * x.gpu_busy, x.mode->compile_s);
  for (const ModeSummary& x : s.modes) {
    if (!x.mode->note.empty()) os << x.mode->mode << ": " << x.mode->note << "\n";
    if (x.mode->graphs) os << x.mode->mode << ": " << graphs_text(*x.mode->graphs) << "\n";
    const StepTime& t = x.step_time;
    if (t.steps == 0) continue;
    os << x.mode->mode << ": a traced step's " << fixed(t.step_us / 1e3, 3) << " ms:";
    for (int c = 0; c < kStepCategories; ++c)
      os << (c ? "," : "") << " " << step_category_name(c) << " " << fixed(t.us[c] / 1e3, 3);
    os << " (GPU busy " << fixed(100 * t.gpu_busy, 0) << "%)\n";
  }
  os << steps_per_s_basis(s) << "\n";
  for (const std::string& w : s.warnings) os << "warning: " << w << "\n";
  return os.str();
}

}  // namespace tcc::profiler
