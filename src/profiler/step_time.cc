// The step-time accounting (step_time.h): a sweep over each window's span edges.
#include "src/profiler/step_time.h"

#include <algorithm>
#include <map>
#include <set>

namespace tcc::profiler {

const char* step_category_name(int category) {
  static const char* const kNames[kStepCategories] = {"kernels", "copies", "host steps", "synchronization", "idle"};
  return kNames[category];
}

std::string span_label(const TimelineSpan& s) {
  switch (s.kind) {
    case SpanKind::Kernel: return s.name;
    case SpanKind::Copy: return "copy " + s.name;
    case SpanKind::HostStep: return "host step '" + s.name + "'";
    case SpanKind::Sync: return "synchronization";
  }
  return s.name;
}

StepTime account_step_time(const std::vector<StepWindow>& windows, const std::vector<TimelineSpan>& spans) {
  StepTime t;
  std::array<double, kStepCategories> ns{};
  std::map<std::string, double> host_ns;
  std::map<std::pair<std::string, std::string>, IdleGap> gaps;
  double window_ns = 0;
  auto add_gap = [&](const std::string& after, const std::string& before, int64_t length) {
    IdleGap& g = gaps[{after, before}];
    g.after = after;
    g.before = before;
    g.us_per_step += static_cast<double>(length);
    ++g.count;
  };
  for (const StepWindow& w : windows) {
    if (w.end_ns <= w.start_ns) continue;
    ++t.steps;
    window_ns += static_cast<double>(w.end_ns - w.start_ns);
    struct Edge {
      int64_t at;
      bool opens;
      size_t span;
    };
    std::vector<Edge> edges;
    for (size_t i = 0; i < spans.size(); ++i) {
      int64_t lo = std::max(spans[i].start_ns, w.start_ns), hi = std::min(spans[i].end_ns, w.end_ns);
      if (lo >= hi) continue;
      edges.push_back({lo, true, i});
      edges.push_back({hi, false, i});
      if (spans[i].kind == SpanKind::HostStep) host_ns[spans[i].name] += static_cast<double>(hi - lo);
    }
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    std::array<std::set<size_t>, kIdle> open;  // the spans of each kind running now
    std::string last = "step start";
    int64_t idle_from = -1;
    size_t e = 0;
    for (int64_t at = w.start_ns; at < w.end_ns;) {
      for (; e < edges.size() && edges[e].at <= at; ++e) {
        std::set<size_t>& of_kind = open[static_cast<int>(spans[edges[e].span].kind)];
        if (edges[e].opens)
          of_kind.insert(edges[e].span);
        else
          of_kind.erase(edges[e].span);
      }
      int64_t next = e < edges.size() ? edges[e].at : w.end_ns;
      int category = 0;
      while (category < kIdle && open[category].empty()) ++category;
      ns[category] += static_cast<double>(next - at);
      if (category == kIdle) {
        if (idle_from < 0) idle_from = at;
      } else {
        std::string label = span_label(spans[*open[category].rbegin()]);
        if (idle_from >= 0) add_gap(last, label, at - idle_from);
        idle_from = -1;
        last = std::move(label);
      }
      at = next;
    }
    if (idle_from >= 0) add_gap(last, "step end", w.end_ns - idle_from);
  }
  if (t.steps == 0) return t;
  double per_step_us = 1e3 * t.steps;
  t.step_us = window_ns / per_step_us;
  for (int c = 0; c < kStepCategories; ++c) t.us[c] = ns[c] / per_step_us;
  t.gpu_busy = window_ns > 0 ? (ns[0] + ns[1]) / window_ns : 0;
  for (const auto& [node, total] : host_ns) t.host_steps.push_back({node, total / per_step_us});
  for (auto& [key, g] : gaps) {
    g.us_per_step /= per_step_us;
    t.gaps.push_back(std::move(g));
  }
  std::stable_sort(t.host_steps.begin(), t.host_steps.end(),
                   [](const HostStepTime& a, const HostStepTime& b) { return a.us_per_step > b.us_per_step; });
  std::stable_sort(t.gaps.begin(), t.gaps.end(),
                   [](const IdleGap& a, const IdleGap& b) { return a.us_per_step > b.us_per_step; });
  return t;
}

}  // namespace tcc::profiler
