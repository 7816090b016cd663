// report.html: one self-contained page — inline CSS and inline SVG, no script,
// no external resource — so it opens from a file anywhere with no network.
// Four charts: steps/s per mode, time per step by category (step_time.h), GPU
// time per kernel, and the roofline (each kernel's arithmetic intensity
// against its achieved FLOP/s, under the device's bandwidth and compute
// ceilings, on log-log axes).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "src/log/log.h"
#include "src/profiler/report.h"

namespace tcc::profiler {

namespace {

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"};

// Horizontal bars: one row per label, bar length proportional to the value.
std::string bar_chart(const std::string& title, const std::vector<std::pair<std::string, double>>& rows,
                      const std::string& unit, int digits) {
  const int label_w = 260, bar_w = 420, row_h = 26, top = 30;
  int height = top + row_h * static_cast<int>(rows.size()) + 10;
  double max = 0;
  for (const auto& r : rows) max = std::max(max, r.second);
  std::ostringstream os;
  os << "<svg class=\"chart\" width=\"" << label_w + bar_w + 120 << "\" height=\"" << height << "\" role=\"img\">"
     << "<title>" << esc(title) << "</title>"
     << "<text x=\"0\" y=\"18\" class=\"ct\">" << esc(title) << "</text>";
  for (size_t i = 0; i < rows.size(); ++i) {
    int y = top + static_cast<int>(i) * row_h;
    double w = max > 0 ? bar_w * rows[i].second / max : 0;
    os << "<text x=\"" << label_w - 8 << "\" y=\"" << y + 17 << "\" text-anchor=\"end\">" << esc(rows[i].first)
       << "</text><rect x=\"" << label_w << "\" y=\"" << y + 4 << "\" width=\"" << fixed(std::max(w, 1.0), 1)
       << "\" height=\"" << row_h - 8 << "\" fill=\"" << kPalette[i % std::size(kPalette)] << "\"/><text x=\""
       << fixed(label_w + w + 6, 1) << "\" y=\"" << y + 17 << "\">" << fixed(rows[i].second, digits) << " " << unit
       << "</text>";
  }
  os << "</svg>\n";
  return os.str();
}

// Log-log roofline of the kernels that do arithmetic (copies have no FLOP).
std::string roofline_chart(const ModeSummary& m, const DeviceProfile& d) {
  const double w = 640, h = 400, left = 70, right = 20, top = 30, bottom = 50;
  std::vector<const KernelSummary*> points;
  for (const KernelSummary& k : m.kernels)
    if (k.spec->flop > 0 && k.spec->bytes > 0 && k.achieved_flop_per_s > 0) points.push_back(&k);
  double peak = d.tensor_flop_per_s;
  double x_lo = 1.0 / 16, x_hi = 4 * peak / d.bytes_per_s;
  double y_lo = 1e9, y_hi = 2 * peak;
  for (const KernelSummary* k : points) {
    x_lo = std::min(x_lo, k->intensity / 2);
    x_hi = std::max(x_hi, k->intensity * 2);
    y_lo = std::min(y_lo, k->achieved_flop_per_s / 2);
  }
  double lx0 = std::log10(x_lo), lx1 = std::log10(x_hi), ly0 = std::log10(y_lo), ly1 = std::log10(y_hi);
  auto px = [&](double x) { return left + (std::log10(x) - lx0) / (lx1 - lx0) * (w - left - right); };
  auto py = [&](double y) { return h - bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (h - top - bottom); };

  std::ostringstream os;
  std::string title = "Roofline (" + m.mode->mode + "): arithmetic intensity vs achieved FLOP/s";
  os << "<svg class=\"chart\" width=\"" << w << "\" height=\"" << h << "\" role=\"img\"><title>" << esc(title)
     << "</title><text x=\"0\" y=\"18\" class=\"ct\">" << esc(title) << "</text>"
     << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << w - left - right << "\" height=\""
     << h - top - bottom << "\" fill=\"#fafafa\" stroke=\"#999\"/>";
  for (int e = static_cast<int>(std::ceil(lx0)); e <= static_cast<int>(std::floor(lx1)); ++e)
    os << "<text x=\"" << fixed(px(std::pow(10.0, e)), 1) << "\" y=\"" << h - bottom + 16
       << "\" text-anchor=\"middle\" class=\"ax\">1e" << e << "</text>";
  for (int e = static_cast<int>(std::ceil(ly0)); e <= static_cast<int>(std::floor(ly1)); ++e)
    os << "<text x=\"" << left - 6 << "\" y=\"" << fixed(py(std::pow(10.0, e)) + 4, 1)
       << "\" text-anchor=\"end\" class=\"ax\">1e" << e << "</text>";
  os << "<text x=\"" << (w + left) / 2 << "\" y=\"" << h - 12 << "\" text-anchor=\"middle\">FLOP per byte</text>"
     << "<text x=\"14\" y=\"" << (h - bottom + top) / 2 << "\" transform=\"rotate(-90 14 " << (h - bottom + top) / 2
     << ")\" text-anchor=\"middle\">FLOP/s</text>";
  // Ceilings: bandwidth * intensity up to each compute peak, then flat.
  for (double ceiling : {d.fp32_flop_per_s, d.tensor_flop_per_s}) {
    double knee = ceiling / d.bytes_per_s;
    double x0 = std::max(x_lo, y_lo / d.bytes_per_s);
    os << "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"1.5\" points=\"" << fixed(px(x0), 1) << ","
       << fixed(py(x0 * d.bytes_per_s), 1) << " " << fixed(px(knee), 1) << "," << fixed(py(ceiling), 1) << " "
       << fixed(px(x_hi), 1) << "," << fixed(py(ceiling), 1) << "\"/><text x=\"" << fixed(px(x_hi) - 4, 1) << "\" y=\""
       << fixed(py(ceiling) - 4, 1) << "\" text-anchor=\"end\" class=\"ax\">" << fmt::format("{:g}", ceiling / 1e12)
       << " TFLOP/s</text>";
  }
  for (size_t i = 0; i < points.size(); ++i) {
    const KernelSummary& k = *points[i];
    os << "<circle cx=\"" << fixed(px(k.intensity), 1) << "\" cy=\"" << fixed(py(k.achieved_flop_per_s), 1)
       << "\" r=\"5\" fill=\"" << kPalette[i % std::size(kPalette)] << "\"><title>" << esc(k.spec->name) << ": "
       << fixed(100 * k.roofline_fraction, 1) << "% of roofline</title></circle>";
  }
  os << "</svg>\n";
  size_t hidden = m.kernels.size() - points.size();
  if (hidden > 0)
    os << "<p class=\"small\">" << hidden << " kernels with no arithmetic (copies) are not plotted.</p>\n";
  return os.str();
}

std::string kernel_table(const ModeSummary& m) {
  std::ostringstream os;
  os << "<table><tr><th>kernel</th><th>schedule</th><th>source nodes</th><th>launches/step</th><th>us/step</th>"
        "<th>% of total</th>"
        "<th>GB/s</th><th>TFLOP/s</th><th>% of roofline</th><th>bound</th></tr>\n";
  for (size_t i = 0; i < m.kernels.size() && i < kTopKernels; ++i) {
    const KernelSummary& k = m.kernels[i];
    os << "<tr><td><code>" << esc(k.spec->name) << "</code></td><td>"
       << esc(k.spec->schedule.empty() ? "-" : k.spec->schedule) << "</td><td>" << esc(joined(k.spec->nodes)) << "</td><td>"
       << fixed(k.launches_per_step, 0) << "</td><td>" << fixed(k.time_per_step_us, 2) << "</td><td>"
       << fixed(100 * k.share, 1) << "</td><td>" << fixed(k.achieved_bytes_per_s / 1e9, 0) << "</td><td>"
       << fixed(k.achieved_flop_per_s / 1e12, 2) << "</td><td>" << fixed(100 * k.roofline_fraction, 1) << "</td><td>"
       << (k.compute_bound ? "compute" : "memory") << "</td></tr>\n";
  }
  os << "</table>\n";
  return os.str();
}

}  // namespace

std::string report_html(const Summary& s) {
  const Measurement& m = *s.measurement;
  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tcc report: " << esc(m.model)
     << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222;background:#fff}"
        "table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;"
        "font-size:13px;text-align:right}td:nth-child(-n+2),th{text-align:left}.chart{display:block;margin:12px 0}"
        ".chart text{font-size:12px}.chart .ct{font-size:14px;font-weight:bold}.chart .ax{font-size:10px;fill:#555}"
        ".warn{background:#fff3cd;padding:6px 10px;border-left:4px solid #e0a800}.small{font-size:12px;color:#555}"
        "</style></head><body>\n";
  os << "<h1>tcc performance report: " << esc(m.model) << "</h1>\n<p>"
     << esc(m.device_name.empty() ? s.device->description : m.device_name) << " (profile " << esc(s.device->name)
     << ")";
  for (const auto& [name, v] : m.sizes) os << ", " << esc(name) << "=" << v;
  if (!m.commit.empty()) os << ", commit " << esc(m.commit);
  if (!m.date.empty()) os << ", " << esc(m.date);
  os << "</p>\n";
  if (!m.source.empty()) os << "<p class=\"small\">Source: " << esc(m.source) << "</p>\n";

  os << "<h2>Modes</h2>\n<table><tr><th>mode</th><th>steps/s</th><th>speedup over eager</th><th>median ms</th>"
        "<th>p99 ms</th><th>enqueue ms</th><th>GPU ms</th><th>GPU busy</th><th>compile s</th></tr>\n";
  std::vector<std::pair<std::string, double>> steps;
  for (const ModeSummary& x : s.modes) {
    os << "<tr><td>" << esc(x.mode->mode) << "</td><td>" << fixed(x.steps_per_s, 0) << "</td><td>"
       << (x.speedup_over_eager > 0 ? fixed(x.speedup_over_eager, 2) + "x" : "-") << "</td><td>"
       << fixed(x.latency_ms.median, 3) << "</td><td>" << fixed(x.latency_ms.p99, 3) << "</td><td>"
       << fixed(x.enqueue_ms.median, 3) << "</td><td>" << fixed(x.gpu_ms.median, 3) << "</td><td>"
       << fixed(100 * x.gpu_busy, 0) << "%</td><td>" << fixed(x.mode->compile_s, 2) << "</td></tr>\n";
    steps.emplace_back(x.mode->mode, x.steps_per_s);
  }
  os << "</table>\n<p class=\"small\">" << esc(steps_per_s_basis(s)) << "</p>\n";
  for (const ModeSummary& x : s.modes) {
    if (!x.mode->note.empty())
      os << "<p class=\"small\">" << esc(x.mode->mode) << ": " << esc(x.mode->note) << "</p>\n";
    if (x.mode->graphs)
      os << "<p class=\"small\">" << esc(x.mode->mode) << ": " << esc(graphs_text(*x.mode->graphs)) << "</p>\n";
  }
  os << bar_chart("Steps per second by mode", steps, "steps/s", 0);
  for (const std::string& w : s.warnings) os << "<p class=\"warn\">" << esc(w) << "</p>\n";

  for (const ModeSummary& x : s.modes) {
    const StepTime& t = x.step_time;
    if (t.steps == 0) continue;
    os << "<h2>Step time: " << esc(x.mode->mode) << "</h2>\n";
    std::vector<std::pair<std::string, double>> rows;
    for (int c = 0; c < kStepCategories; ++c) rows.emplace_back(step_category_name(c), t.us[c]);
    os << bar_chart("Time per step by category (" + x.mode->mode + "): " + fixed(t.step_us, 1) + " us, GPU busy " +
                        fixed(100 * t.gpu_busy, 0) + "%",
                    rows, "us", 1);
    for (const std::string& note : step_time_notes(t)) os << "<p class=\"small\">" << esc(note) << "</p>\n";
  }

  for (const ModeSummary& x : s.modes) {
    if (x.kernels.empty()) continue;
    os << "<h2>Kernels: " << esc(x.mode->mode) << "</h2>\n";
    std::vector<std::pair<std::string, double>> times;
    for (size_t i = 0; i < x.kernels.size() && i < kTopKernels; ++i)
      times.emplace_back(x.kernels[i].spec->name, x.kernels[i].time_per_step_us);
    os << bar_chart("GPU time per step by kernel (" + x.mode->mode + ")", times, "us", 2);
    os << kernel_table(x);
    os << roofline_chart(x, *s.device);
  }
  os << "</body></html>\n";
  return os.str();
}

}  // namespace tcc::profiler
