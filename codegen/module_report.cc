// report.json and report.md (see module_report.h).
#include "codegen/module_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "codegen/emit.h"

namespace tcc {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string bytes_text(std::optional<int64_t> b) {
  if (!b) return "?";
  if (*b < 1024) return std::to_string(*b) + " B";
  if (*b < 1024 * 1024) return fmt("%.1f KiB", *b / 1024.0);
  return fmt("%.1f MiB", *b / (1024.0 * 1024.0));
}

std::string sizes_text(const std::map<std::string, int64_t>& sizes) {
  std::vector<std::string> parts;
  for (const auto& [s, v] : sizes) parts.push_back(s + "=" + std::to_string(v));
  return parts.empty() ? "static shapes" : join(parts, ", ");
}

double total_estimate_us(const ModuleContents& m, const ModuleFacts& f) {
  double us = 0;
  for (const KernelEstimate& e : f.kernels) us += e.seconds * 1e6 * e.steps;
  return us;
}

// A kernel's sources for the Markdown table: the first few, then how many more.
constexpr size_t kSourcesShown = 3;
std::string sources_text(const std::vector<std::string>& sources) {
  std::vector<std::string> shown(sources.begin(), sources.begin() + std::min(sources.size(), kSourcesShown));
  std::string s = join(shown, "; ");
  if (sources.size() > shown.size()) s += " (+" + std::to_string(sources.size() - shown.size()) + " more)";
  return s;
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

ojson report_json(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t) {
  const DeviceProfile& d = *m.device;
  ojson j;
  j["model"] = fs::path(m.model).filename().string();
  j["mode"] = m.mode->name;
  j["precision"] = precision_name(m.options.precision);
  j["device"] = {{"name", d.name},
                 {"description", d.description},
                 {"bytes_per_s", d.bytes_per_s},
                 {"tensor_flop_per_s", d.tensor_flop_per_s},
                 {"fp32_flop_per_s", d.fp32_flop_per_s}};
  j["sizes"] = f.sizes;
  size_t kernel_steps = 0;
  for (const KernelEstimate& e : f.kernels) kernel_steps += e.steps;
  j["summary"] = {{"kernels", m.schedule->kernels.size()},
                  {"kernel_steps", kernel_steps},
                  {"fallback_steps", m.fallbacks.size()},
                  {"binding_steps", m.schedule->binding_steps.size()},
                  {"fallback_copies", m.schedule->fallback_copies},
                  {"views", m.schedule->views.size()},
                  {"estimated_us", std::round(total_estimate_us(m, f) * 1000) / 1000}};
  ojson kernels = ojson::array();
  for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
    const kir::Kernel& k = m.schedule->kernels[i];
    const KernelEstimate& e = f.kernels[i];
    kernels.push_back({{"name", k.name},
                       {"kind", kir::kind_name(k.kind)},
                       {"precision", e.precision},
                       {"steps", e.steps},
                       {"nodes", k.nodes},
                       {"sources", f.kernel_sources[i]},
                       {"bytes_moved", size_json(kir::bytes_moved(k))},
                       {"flop", size_json(kir::flop_count(k))},
                       {"bytes_at_sizes", e.bytes ? ojson(*e.bytes) : ojson(nullptr)},
                       {"flop_at_sizes", e.flop ? ojson(*e.flop) : ojson(nullptr)},
                       {"estimated_us", std::round(e.seconds * 1e9) / 1000},
                       {"bound", e.compute_bound ? "compute" : "memory"}});
  }
  j["kernels"] = kernels;
  ojson steps = ojson::array();
  for (size_t i = 0; i < m.schedule->steps.size(); ++i) {
    const Step& s = m.schedule->steps[i];
    ojson e = {{"node", s.node}};
    if (s.kind == Step::Kind::Kernel)
      e["kernel"] = m.schedule->kernels[s.kernel].name;
    else
      e["fallback"] = true;
    e["source_nodes"] = f.step_nodes[i];
    steps.push_back(e);
  }
  j["steps"] = steps;
  ojson views = ojson::array();
  for (const ViewAlias& v : m.schedule->views)
    views.push_back({{"node", v.node}, {"value", v.value}, {"source", v.source}});
  j["views"] = views;
  ojson fallbacks = ojson::array();
  for (const FallbackReason& r : m.fallbacks)
    fallbacks.push_back({{"node", r.node}, {"op_type", r.op_type}, {"reason", r.reason}, {"message", r.message}});
  j["fallbacks"] = fallbacks;
  auto at_sizes = [&](const SymExpr& e) {
    std::optional<int64_t> v = e.evaluate(f.sizes);
    return v ? ojson(*v) : ojson(nullptr);
  };
  j["memory"] = {{"arena_bytes", size_json(m.memory->arena_bytes)},
                 {"unplanned_bytes", size_json(m.memory->unplanned_bytes)},
                 {"arena_bytes_at_sizes", at_sizes(m.memory->arena_bytes)},
                 {"unplanned_bytes_at_sizes", at_sizes(m.memory->unplanned_bytes)},
                 {"buffers", m.memory->buffers.size()},
                 {"weights_bytes", f.weights_bytes}};
  ojson passes = ojson::array();
  for (const PassRecord& p : m.passes) passes.push_back({{"name", p.name}, {"changed", p.changed},
                                                         {"counters", p.stats.counters}});
  j["passes"] = passes;

  ojson pass_ms = ojson::array();
  for (const PassRecord& p : m.passes) pass_ms.push_back({{"name", p.name}, {"ms", p.wall_ms}});
  j["timings"] = {{"load_ms", t.load},     {"shapes_ms", t.shapes}, {"passes_ms", t.passes},
                  {"schedule_ms", t.schedule}, {"memory_ms", t.memory}, {"emit_ms", t.emit},
                  {"nvrtc_ms", t.nvrtc},   {"host_compile_ms", t.host}, {"write_ms", t.write}, {"total_ms", t.total},
                  {"passes", pass_ms}};
  return j;
}

std::string report_md(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t) {
  const DeviceProfile& d = *m.device;
  std::ostringstream os;
  os << "# tcc compile report: " << fs::path(m.model).filename().string() << "\n\n";
  os << "Mode `" << m.mode->name << "`. Estimates for " << d.description << " (" << fmt("%g", d.bytes_per_s / 1e12)
     << " TB/s, " << fmt("%g", d.tensor_flop_per_s / 1e12) << " TFLOP/s f16 tensor core, "
     << fmt("%g", d.fp32_flop_per_s / 1e12) << " TFLOP/s f32) at " << sizes_text(f.sizes)
     << "; each kernel takes the longer of its bytes at peak bandwidth and its FLOP at peak rate.\n\n";

  size_t kernel_steps = 0;
  for (const KernelEstimate& e : f.kernels) kernel_steps += e.steps;
  auto at_sizes = [&](const SymExpr& e) { return bytes_text(e.evaluate(f.sizes)); };
  os << "## Summary\n\n| | |\n|---|---|\n";
  os << "| precision | " << precision_name(m.options.precision) << " |\n";
  os << "| kernels | " << m.schedule->kernels.size() << " compiled, run by " << kernel_steps << " steps |\n";
  os << "| fallbacks | " << m.fallbacks.size() << " nodes on the host, " << m.schedule->fallback_copies
     << " tensor copies |\n";
  os << "| views | " << m.schedule->views.size() << " (reshapes that share their input's buffer: no kernel) |\n";
  os << "| binding constants | " << m.schedule->binding_steps.size()
     << " nodes computed once per binding of the symbols, kept on the device |\n";
  os << "| peak memory | " << at_sizes(m.memory->arena_bytes) << " planned (`" << m.memory->arena_bytes.str()
     << "`), " << at_sizes(m.memory->unplanned_bytes) << " unplanned (`" << m.memory->unplanned_bytes.str()
     << "`) |\n";
  os << "| weights | " << bytes_text(f.weights_bytes) << " in " << f.weights.size() << " tensors |\n";
  os << "| estimated time | " << fmt("%.2f", total_estimate_us(m, f)) << " us |\n\n";

  os << "## Kernels\n\n| kernel | kind | precision | schedule | steps | bytes | FLOP | est. us | bound | nodes | source |\n"
        "|---|---|---|---|---:|---:|---:|---:|---|---|---|\n";
  for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
    const kir::Kernel& k = m.schedule->kernels[i];
    const KernelEstimate& e = f.kernels[i];
    os << "| " << k.name << " | " << kir::kind_name(k.kind) << " | " << e.precision << " | "
       << schedule_text(k, config_of(m.schedule->kernels, m.configs, i)) << " | " << e.steps << " | "
       << bytes_text(e.bytes) << " | " << (e.flop ? std::to_string(*e.flop) : "?") << " | "
       << fmt("%.2f", e.seconds * 1e6) << " | " << (e.compute_bound ? "compute" : "memory") << " | "
       << md_escape(join(k.nodes, ", ")) << " | " << md_escape(sources_text(f.kernel_sources[i])) << " |\n";
  }
  os << "\n## Nodes -> kernels\n\n| step | kernel | source nodes |\n|---:|---|---|\n";
  for (size_t i = 0; i < m.schedule->steps.size(); ++i) {
    const Step& s = m.schedule->steps[i];
    os << "| " << i << " | "
       << (s.kind == Step::Kind::Kernel ? m.schedule->kernels[s.kernel].name : std::string("fallback (host)")) << " | "
       << md_escape(join(f.step_nodes[i], ", ")) << " |\n";
  }
  if (!m.schedule->views.empty()) {
    os << "\n## Views (no kernel)\n\n| node | value | shares the buffer of |\n|---|---|---|\n";
    for (const ViewAlias& v : m.schedule->views)
      os << "| " << md_escape(v.node) << " | " << md_escape(v.value) << " | " << md_escape(v.source) << " |\n";
  }
  if (!m.schedule->binding_steps.empty()) {
    os << "\n## Binding constants\n\nComputed on the host when a run first sees a binding of the symbols, then read "
          "by kernels as weights are.\n\n| node | op | writes |\n|---|---|---|\n";
    for (const Step& s : m.schedule->binding_steps) {
      const Node* n = m.graph->find(s.writes.front())->producer();
      os << "| " << md_escape(s.node) << " | " << n->op_type() << " | " << md_escape(join(s.writes, ", ")) << " |\n";
    }
  }
  if (!m.fallbacks.empty()) {
    os << "\n## Fallbacks\n\n| node | op | reason | why |\n|---|---|---|---|\n";
    for (const FallbackReason& r : m.fallbacks)
      os << "| " << md_escape(r.node) << " | " << r.op_type << " | " << r.reason << " | " << md_escape(r.message)
         << " |\n";
  }
  os << "\n## Memory plan\n\n| buffer | dtype | shape | offset | bytes | steps |\n|---|---|---|---|---|---|\n";
  for (const PlannedBuffer& b : m.memory->buffers) {
    std::vector<std::string> dims;
    for (const SymExpr& e : b.shape) dims.push_back(e.str());
    os << "| " << md_escape(b.value) << " | " << dtype_name(b.dtype) << " | [" << join(dims, ", ") << "] | `"
       << b.offset.str() << "` | `" << b.nbytes.str() << "` | " << b.first_step << "-" << b.last_step << " |\n";
  }
  os << "\n## Mode features\n\n| feature | status | |\n|---|---|---|\n";
  for (const Feature* feat : m.mode->features)
    os << "| " << feat->name << " | " << (feat->built ? "built" : "unbuilt") << " | "
       << (feat->built ? feat->description : feat->why) << " |\n";
  if (m.autotune) {
    const AutotuneSummary& a = *m.autotune;
    os << "\n## Autotuning\n\n" << a.measured << " kernels measured, " << a.from_cache << " from the tuning cache, "
       << a.heuristic << " by heuristics: " << md_escape(a.note)
       << ".\n\n| kernel | config | source |\n|---|---|---|\n";
    for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
      const kir::Kernel& k = m.schedule->kernels[i];
      os << "| " << k.name << " | " << schedule_text(k, config_of(m.schedule->kernels, m.configs, i)) << " | "
         << a.sources.at(i) << " |\n";
    }
  }

  // Timings last: the only part of the module that differs between two compiles.
  os << "\n## Compile time\n\n| stage | ms |\n|---|---:|\n";
  const std::pair<const char*, double> stages[] = {
      {"load", t.load},       {"shape inference", t.shapes}, {"passes", t.passes},
      {"lowering (schedule)", t.schedule}, {"memory planning", t.memory}, {"emit CUDA + host", t.emit},
      {"NVRTC", t.nvrtc},     {"host compiler", t.host},     {"write module", t.write}, {"total", t.total}};
  for (const auto& [name, ms] : stages) os << "| " << name << " | " << fmt("%.1f", ms) << " |\n";
  os << "\n| pass | ms | changed |\n|---|---:|---|\n";
  for (const PassRecord& p : m.passes)
    os << "| " << p.name << " | " << fmt("%.2f", p.wall_ms) << " | " << (p.changed ? "yes" : "no") << " |\n";
  return os.str();
}

}  // namespace tcc
