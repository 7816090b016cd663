// The step-time accounting of `tcc profile` (src/profiler/step_time.h) on
// hand-made timelines: every nanosecond of a step in one category, idle gaps
// with their neighbours, GPU busy from the timeline, and the warnings a host
// step or gap that dominates the step gives; and the recorded form of the
// timeline (measurement.json), old recordings without it included.
#include <gtest/gtest.h>

#include <numeric>

#include "src/diag/errors.h"
#include "src/profiler/measurement.h"
#include "src/profiler/step_time.h"
#include "tests/unit/support/input_error.h"

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

// A recorded mode of one 1 ms step whose timeline the test writes.
profiler::Measurement one_step(std::vector<TimelineSpan> spans, const std::vector<profiler::KernelActivity>& kernels) {
  profiler::Measurement m;
  m.model = "block.onnx";
  m.device = "h100";
  profiler::ModeMeasurement& x = m.modes.emplace_back();
  x.mode = "default";
  x.latencies_ms = {1.0, 1.0, 1.0};
  x.enqueue_ms = {0.01, 0.01, 0.01};
  x.gpu_ms = {1.0, 1.0, 1.0};  // events around the step: the GPU looks busy all along
  for (const char* k : {"k0", "k1"}) x.kernels.push_back({k, "pointwise", {std::string("/") + k}, "", 1024, 256});
  x.traced_steps = 1;
  x.activities = kernels;
  x.step_windows = {window(0, 1000)};
  x.spans = std::move(spans);
  return m;
}

bool has_warning(const profiler::Summary& s, const std::string& text) {
  return std::any_of(s.warnings.begin(), s.warnings.end(),
                     [&](const std::string& w) { return w.rfind(text, 0) == 0; });
}

TEST(StepTime, AHostStepThatDominatesTheStepIsNamed) {
  // k0, then the host step /Shape copying its input out and its output back, then k1 and the wait for it.
  profiler::Measurement m = one_step(
      {span(SpanKind::HostStep, "/Shape", 100, 700), span(SpanKind::Copy, "d2h", 120, 140),
       span(SpanKind::Sync, "stream", 140, 200), span(SpanKind::Copy, "h2d", 600, 620),
       span(SpanKind::Sync, "stream", 620, 700), span(SpanKind::Sync, "stream", 710, 1000)},
      {{"k0", 1, 0, 100'000}, {"k1", 1, 700'000, 800'000}});
  profiler::Summary s = profiler::summarize(m);
  const StepTime& t = s.modes[0].step_time;
  EXPECT_DOUBLE_EQ(t.us[kKernels], 200);
  EXPECT_DOUBLE_EQ(t.us[kCopies], 40);
  EXPECT_DOUBLE_EQ(t.us[kHostSteps], 560);
  EXPECT_DOUBLE_EQ(t.us[kSync], 200);
  EXPECT_DOUBLE_EQ(t.us[kIdle], 0);
  EXPECT_DOUBLE_EQ(total(t), 1000);
  // GPU busy comes from the timeline, not from the events around the step.
  EXPECT_DOUBLE_EQ(s.modes[0].gpu_busy, 0.24);
  EXPECT_TRUE(has_warning(s, "default: host step '/Shape' takes 0.600 ms of the 1.000 ms step (60%)"))
      << s.warnings.front();
  EXPECT_FALSE(has_warning(s, "default: the GPU is idle"));
}

TEST(StepTime, AnIdleGapThatDominatesTheStepIsNamed) {
  profiler::Summary s = profiler::summarize(one_step({}, {{"k0", 1, 0, 100'000}, {"k1", 1, 800'000, 900'000}}));
  EXPECT_TRUE(has_warning(s, "default: the GPU is idle for 0.700 ms of the 1.000 ms step (70%) between k0 and k1"));
  EXPECT_FALSE(has_warning(s, "default: the GPU is idle for 0.100 ms"));  // k1 to the step's end: under 20%
  EXPECT_FALSE(has_warning(s, "default: host step"));
}

TEST(StepTime, RecordedTimelinesRoundTripAndOldRecordingsLoad) {
  profiler::Measurement m = one_step({span(SpanKind::HostStep, "/Shape", 100, 700),
                                      span(SpanKind::Copy, "d2h", 120, 140), span(SpanKind::Sync, "event", 140, 200)},
                                     {{"k0", 1, 0, 100'000}});
  m.modes[0].graphs = profiler::GraphCounts{0, 0, 0, 263, "host fallback node '/Shape'"};
  nlohmann::json once = profiler::to_json(m);
  EXPECT_EQ(once["modes"][0]["spans"][0]["kind"], "host_step");
  EXPECT_EQ(once["modes"][0]["spans"][1]["name"], "d2h");
  EXPECT_EQ(once["modes"][0]["graphs"]["uncaptured_steps"], 263);
  profiler::Measurement again = profiler::measurement_from_json(once, "rec.json");
  EXPECT_EQ(profiler::to_json(again), once);
  ASSERT_TRUE(again.modes[0].graphs);
  EXPECT_EQ(again.modes[0].graphs->not_captured, "host fallback node '/Shape'");

  // A recording made before the timeline was: no step time, GPU busy from the events.
  nlohmann::json old = once;
  for (const char* field : {"step_windows", "spans", "graphs"}) old["modes"][0].erase(field);
  profiler::Measurement loaded = profiler::measurement_from_json(old, "old.json");
  EXPECT_FALSE(loaded.modes[0].graphs);
  profiler::Summary s = profiler::summarize(loaded);
  EXPECT_EQ(s.modes[0].step_time.steps, 0);
  EXPECT_DOUBLE_EQ(s.modes[0].gpu_busy, 1.0);

  nlohmann::json bad = once;
  bad["modes"][0]["spans"][0]["kind"] = "kernel";
  const std::string what = input_error([&] { profiler::measurement_from_json(bad, "rec.json"); });
  EXPECT_NE(what.find("rec.json: modes[0].spans[0].kind: expected copy, host_step or sync"),
            std::string::npos) << what;
  bad = once;
  bad["modes"][0]["step_windows"][0]["end_ns"] = -1;
  EXPECT_THROW(profiler::measurement_from_json(bad, "rec.json"), InputError);
}

}  // namespace
}  // namespace tcc
