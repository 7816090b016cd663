// The step-time accounting of `tcc profile` (src/profiler/step_time.h) on
// hand-made timelines: every nanosecond of a step in one category, idle gaps
// with their neighbours, and GPU busy from the timeline.
#include <gtest/gtest.h>

#include <numeric>

#include "src/profiler/step_time.h"

namespace tcc {
namespace {

using profiler::SpanKind;
using profiler::StepTime;
using profiler::StepWindow;
using profiler::TimelineSpan;

constexpr int kKernels = 0, kCopies = 1, kHostSteps = 2, kSync = 3, kIdle = profiler::kIdle;

// Spans in microseconds, for readable cases.
TimelineSpan span(SpanKind kind, const std::string& name, int64_t start_us, int64_t end_us, int stream = 1) {
  return {kind, name, stream, 0, start_us * 1000, end_us * 1000};
}
StepWindow window(int64_t start_us, int64_t end_us) { return {start_us * 1000, end_us * 1000}; }

double total(const StepTime& t) { return std::accumulate(t.us.begin(), t.us.end(), 0.0); }

TEST(StepTime, OverlapsGoToTheFirstCategoryInOrder) {
  // A wait that spans the step, a kernel, and a copy that overlaps the kernel's end.
  StepTime t = profiler::account_step_time(
      {window(0, 50)}, {span(SpanKind::Sync, "stream", 0, 50), span(SpanKind::Kernel, "k0", 10, 30),
                        span(SpanKind::Copy, "d2h", 20, 40)});
  EXPECT_EQ(t.steps, 1);
  EXPECT_DOUBLE_EQ(t.step_us, 50);
  EXPECT_DOUBLE_EQ(t.us[kKernels], 20);
  EXPECT_DOUBLE_EQ(t.us[kCopies], 10);
  EXPECT_DOUBLE_EQ(t.us[kSync], 20);
  EXPECT_DOUBLE_EQ(t.us[kHostSteps], 0);
  EXPECT_DOUBLE_EQ(t.us[kIdle], 0);
  EXPECT_DOUBLE_EQ(t.gpu_busy, 30.0 / 50);
  EXPECT_TRUE(t.gaps.empty());
}

TEST(StepTime, GapsAtTheStartBetweenKernelsAndAtTheEnd) {
  StepTime t = profiler::account_step_time(
      {window(0, 100)}, {span(SpanKind::Kernel, "k0", 10, 40), span(SpanKind::Kernel, "k1", 60, 80)});
  EXPECT_DOUBLE_EQ(t.us[kKernels], 50);
  EXPECT_DOUBLE_EQ(t.us[kIdle], 50);
  EXPECT_DOUBLE_EQ(total(t), t.step_us);
  EXPECT_DOUBLE_EQ(t.gpu_busy, 0.5);
  ASSERT_EQ(t.gaps.size(), 3u);
  EXPECT_EQ(t.gaps[0].after, "k0");
  EXPECT_EQ(t.gaps[0].before, "k1");
  EXPECT_DOUBLE_EQ(t.gaps[0].us_per_step, 20);
  EXPECT_EQ(t.gaps[1].after, "k1");
  EXPECT_EQ(t.gaps[1].before, "step end");
  EXPECT_DOUBLE_EQ(t.gaps[1].us_per_step, 20);
  EXPECT_EQ(t.gaps[2].after, "step start");
  EXPECT_EQ(t.gaps[2].before, "k0");
  EXPECT_DOUBLE_EQ(t.gaps[2].us_per_step, 10);
}

TEST(StepTime, ConcurrentCopiesAndKernelsCountOnce) {
  // A kernel on stream 1 while stream 2 copies: busy is their union, not their sum.
  StepTime t = profiler::account_step_time(
      {window(0, 100)}, {span(SpanKind::Kernel, "k0", 0, 50, 1), span(SpanKind::Copy, "h2d", 25, 75, 2),
                         span(SpanKind::Copy, "memset", 30, 60, 3)});
  EXPECT_DOUBLE_EQ(t.us[kKernels], 50);
  EXPECT_DOUBLE_EQ(t.us[kCopies], 25);
  EXPECT_DOUBLE_EQ(t.us[kIdle], 25);
  EXPECT_DOUBLE_EQ(t.gpu_busy, 0.75);
  ASSERT_EQ(t.gaps.size(), 1u);
  EXPECT_EQ(t.gaps[0].after, "copy h2d");
  EXPECT_EQ(t.gaps[0].before, "step end");
}

TEST(StepTime, StepsAreAveragedAndSpansOutsideThemIgnored) {
  // Two steps of 100 and 300 us; a kernel between them and one before both count for nothing.
  StepTime t = profiler::account_step_time(
      {window(0, 100), window(200, 500)},
      {span(SpanKind::Kernel, "early", -50, -10), span(SpanKind::Kernel, "k0", 0, 100),
       span(SpanKind::Kernel, "between", 120, 180), span(SpanKind::Kernel, "k0", 250, 350),
       span(SpanKind::HostStep, "/Shape", 90, 260)});
  EXPECT_EQ(t.steps, 2);
  EXPECT_DOUBLE_EQ(t.step_us, 200);
  EXPECT_DOUBLE_EQ(t.us[kKernels], 100);   // (100 + 100) / 2
  EXPECT_DOUBLE_EQ(t.us[kHostSteps], 25);  // 200..250 of the host step, outside k0
  EXPECT_DOUBLE_EQ(t.us[kIdle], 75);       // 350..500
  ASSERT_EQ(t.host_steps.size(), 1u);
  EXPECT_DOUBLE_EQ(t.host_steps[0].us_per_step, 35);  // 90..100 and 200..260, begin to end
  ASSERT_EQ(t.gaps.size(), 1u);
  EXPECT_EQ(t.gaps[0].count, 1);
  EXPECT_TRUE(profiler::account_step_time({}, {span(SpanKind::Kernel, "k0", 0, 1)}).steps == 0);
}

}  // namespace
}  // namespace tcc
