// Where the time of a traced step goes: the step-time accounting of `tcc
// profile`, a pure function of the timeline (docs/PROFILING.md, "Step time").
//
// Each traced step has a window on the clock CUPTI stamps every record with,
// from the host's first enqueue of the step to the return of its wait for it.
// Every nanosecond of a window goes to exactly one category: the first of
// these that is active then: a kernel runs; a copy or memset runs; the host
// runs a host step (a fallback node, its copies and synchronizations of the
// stream included); the host waits in a synchronization; else the GPU is idle
// (the host is enqueueing, or returning from its wait). So the categories sum
// to the step, and GPU busy is the kernels' and copies' share of it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tcc::profiler {

// In the order of precedence; idle, which no span marks, comes after them.
enum class SpanKind { Kernel, Copy, HostStep, Sync };
constexpr int kStepCategories = 5;
constexpr int kIdle = 4;
// "kernels", "copies", "host steps", "synchronization", "idle".
const char* step_category_name(int category);

// One interval of a traced step's timeline.
struct TimelineSpan {
  SpanKind kind = SpanKind::Kernel;
  // kernel: its manifest name; copy: h2d, d2h, d2d, memset (or another of
  // CUPTI's copy kinds); host step: the node; sync: stream, event or context.
  std::string name;
  int stream = 0;     // kernels, copies, stream synchronizations
  int64_t bytes = 0;  // copies
  int64_t start_ns = 0, end_ns = 0;
};

// One traced step, enqueue to completion.
struct StepWindow {
  int64_t start_ns = 0, end_ns = 0;
};

// Idle time between two neighbours on the timeline, summed over the steps.
struct IdleGap {
  std::string after, before;  // labels (span_label) of what ran before and after it; "step start", "step end"
  double us_per_step = 0;
  int count = 0;  // gaps between these two in all steps together
};

// A host step's spans, begin to end (its copies and waits included).
struct HostStepTime {
  std::string node;
  double us_per_step = 0;
};

struct StepTime {
  int steps = 0;        // windows accounted; 0 where the trace has none
  double step_us = 0;   // the mean window
  std::array<double, kStepCategories> us{};  // mean per step by category; they sum to step_us
  double gpu_busy = 0;  // (kernels + copies) / step: the time either runs
  std::vector<HostStepTime> host_steps;  // largest first
  std::vector<IdleGap> gaps;             // largest first
};

// How reports name a span: the kernel, "copy d2h", "host step '/Shape'", "synchronization".
std::string span_label(const TimelineSpan& s);

// Spans are clipped to each window; those outside every window count for nothing.
StepTime account_step_time(const std::vector<StepWindow>& windows, const std::vector<TimelineSpan>& spans);

}  // namespace tcc::profiler
