// The profiler without a GPU: the measurement model, summaries and warnings,
// and every report writer, on the synthetic recorded measurements of
// tests/profiler (kernels from tcc compile, timings from a model; see
// make_recorded.py), through `tcc bench --from-recorded` as users run it.
// Also `tcc run --host --check`, the eager mode, and what bench/profile/run
// say without a GPU. The GpuProfile tests run where a GPU is (scripts/gpu-check).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "frontends/onnx/tensor_io.h"
#include "src/diag/errors.h"
#include "src/profiler/cupti_trace.h"
#include "src/profiler/measurement.h"
#include "src/profiler/report.h"
#include "tcc_runtime.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using profiler::Measurement;
using profiler::Summary;

const std::string kSource = TCC_SOURCE_DIR;

std::string recorded(const std::string& model) { return kSource + "/tests/profiler/" + model + ".measurement.json"; }
std::string fixture(const std::string& name) { return kSource + "/tests/fixtures/" + name; }

class ProfilerTest : public TempDirTest {
 protected:
  // `tcc bench --from-recorded` into dir_/name.
  CliResult replay(const std::string& model, const std::string& name) {
    return run_tcc("bench --from-recorded " + shell_quote(recorded(model)) + " --report " +
                   shell_quote((dir_ / name).string()));
  }
};

const profiler::ModeSummary& mode(const Summary& s, const std::string& name) {
  for (const auto& m : s.modes)
    if (m.mode->mode == name) return m;
  throw std::runtime_error("no mode " + name);
}

// A warning that starts with `prefix` and, when given, says `part` too.
bool has_warning(const Summary& s, const std::string& prefix, const std::string& part = "") {
  for (const std::string& w : s.warnings)
    if (w.rfind(prefix, 0) == 0 && w.find(part) != std::string::npos) return true;
  return false;
}

TEST(ProfilerStats, PercentilesAndSpread) {
  std::vector<double> xs;
  for (int i = 100; i >= 1; --i) xs.push_back(i);
  profiler::Stats s = profiler::stats_of(xs);
  EXPECT_DOUBLE_EQ(s.median, 50.5);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  EXPECT_NEAR(s.stddev, 28.866, 1e-3);
  EXPECT_NEAR(s.cv(), 28.866 / 50.5, 1e-4);
}

TEST(ProfilerSummary, RecordedMeasurementRoundTripsThroughJson) {
  for (const char* model : {"mlp", "gpt2_block", "region_captures"}) {
    Measurement m = profiler::read_measurement(recorded(model));
    json once = profiler::to_json(m);
    json twice = profiler::to_json(profiler::measurement_from_json(once, "again"));
    EXPECT_EQ(once, twice) << model;
    EXPECT_NE(m.source.find("SYNTHETIC"), std::string::npos);
  }
}

TEST(ProfilerSummary, ModesKernelsAndRoofline) {
  Measurement m = profiler::read_measurement(recorded("gpt2_block"));
  Summary s = profiler::summarize(m);
  const auto& eager = mode(s, "eager");
  const auto& fused = mode(s, "default");
  EXPECT_DOUBLE_EQ(eager.speedup_over_eager, 1.0);
  EXPECT_NEAR(fused.speedup_over_eager, fused.steps_per_s / eager.steps_per_s, 1e-12);
  EXPECT_NEAR(fused.steps_per_s, 1e3 / fused.latency_ms.median, 1e-9);
  // Eager launches one kernel per node: more launches per step than the fused module.
  double eager_launches = 0, fused_launches = 0, share = 0;
  for (const auto& k : eager.kernels) eager_launches += k.launches_per_step;
  for (const auto& k : fused.kernels) fused_launches += k.launches_per_step, share += k.share;
  EXPECT_GT(eager_launches, 2 * fused_launches);
  EXPECT_NEAR(share, 1.0, 1e-9);
  for (size_t i = 1; i < fused.kernels.size(); ++i)
    EXPECT_GE(fused.kernels[i - 1].time_per_step_us, fused.kernels[i].time_per_step_us);
  // Roofline: the slower of bytes at peak bandwidth and FLOP at peak compute, over the measured median.
  const DeviceProfile& h100 = find_device("h100");
  for (const auto& k : fused.kernels) {
    double ideal = std::max(k.spec->bytes / h100.bytes_per_s,
                            k.spec->flop / (k.spec->tensor_cores ? h100.tensor_flop_per_s : h100.fp32_flop_per_s));
    EXPECT_NEAR(k.roofline_fraction, ideal / (k.median_us * 1e-6), 1e-9) << k.spec->name;
    EXPECT_GT(k.roofline_fraction, 0);
    EXPECT_LE(k.roofline_fraction, 1);
    EXPECT_FALSE(k.spec->nodes.empty());
  }
  // The graph mode replayed its one capture, untraced.
  const profiler::ModeMeasurement& graphs = *mode(s, "reduce-overhead").mode;
  EXPECT_TRUE(graphs.cuda_graph);
  ASSERT_TRUE(graphs.graphs);
  EXPECT_EQ(graphs.graphs->captures, 1);
  EXPECT_EQ(graphs.graphs->replays, 210);
  EXPECT_EQ(graphs.traced_steps, 0);
  // A model with a host step (a Scan) says why its graph mode did not use graphs.
  Measurement scan = profiler::read_measurement(recorded("region_captures"));
  EXPECT_EQ(mode(profiler::summarize(scan), "reduce-overhead").mode->note,
            "skipping cudagraphs due to host fallback node 'scan' (it synchronizes with the host)");
}

TEST(ProfilerSummary, WarnsLikeTrtexec) {
  Summary mlp = profiler::summarize(profiler::read_measurement(recorded("mlp")));
  // The recorded mlp eager run has slow outliers; the others are steady.
  EXPECT_TRUE(has_warning(mlp, "eager: timings are unstable"));
  EXPECT_FALSE(has_warning(mlp, "default: timings are unstable"));
  EXPECT_FALSE(has_warning(mlp, "reduce-overhead: timings are unstable"));
  // A tiny MLP on an H100: launching costs more host time than the GPU spends.
  // The advice fits the mode: graphs for one that launches kernels, larger
  // steps for one that replays a graph already, the note for one whose graph
  // was skipped.
  EXPECT_TRUE(has_warning(mlp, "default: throughput is bound by host enqueue time", "CUDA graphs (reduce-overhead) may help"));
  EXPECT_TRUE(has_warning(mlp, "reduce-overhead: throughput is bound by host enqueue time",
                          "a step is one CUDA graph launch already"));
  Summary scan = profiler::summarize(profiler::read_measurement(recorded("region_captures")));
  EXPECT_TRUE(has_warning(scan, "reduce-overhead: throughput is bound by host enqueue time",
                          "this mode's CUDA graph was skipped (see its note)"));
  // Its Scan runs on the host, with copies and waits, for most of each step.
  EXPECT_TRUE(has_warning(scan, "default: host step 'scan' takes 0.038 ms of the 0.054 ms step (70%)"));
  EXPECT_FALSE(has_warning(scan, "default: the GPU is idle"));

  Measurement m = profiler::read_measurement(recorded("mlp"));
  for (auto& x : m.modes) {
    x.enqueue_ms.assign(x.gpu_ms.size(), 0.001);
    for (size_t i = 0; i < x.latencies_ms.size(); ++i) x.latencies_ms[i] = 1.0;
    x.step_windows.clear();  // a 22 us step's launch latency is a fifth of it (the step-time warnings')
  }
  Summary calm = profiler::summarize(m);
  EXPECT_TRUE(calm.warnings.empty()) << calm.warnings.front();
}

// A graph replay's records carry CUPTI's kernel names; they take the names of
// a directly launched step's records by position, where the two line up.
TEST(GraphReplayTrace, RecordsAreNamedByPositionAfterADirectStep) {
  using profiler::KernelActivity;
  const std::set<std::string> module_kernels = {"k0_add", "k2_relu"};
  // The direct step: a generated kernel, two library kernels of step 1 (a gemm), a generated kernel.
  std::vector<KernelActivity> step = {
      {"k2_relu", 0, 40, 45}, {"k0_add", 0, 10, 12}, {"k1_gemm", 0, 20, 25}, {"k1_gemm", 0, 30, 35}};
  std::vector<std::vector<KernelActivity>> replays = {
      {{"sm90_gemm_splitk", 1, 120, 125}, {"k0_add", 1, 100, 101}, {"splitk_reduce", 1, 130, 131},
       {"k2_relu", 1, 140, 142}},
      // Another count (a replay the trace caught half of): library kernels cannot be placed.
      {{"k0_add", 1, 200, 201}, {"sm90_gemm_splitk", 1, 210, 215}}};
  std::vector<KernelActivity> named = profiler::name_graph_replays(step, replays, module_kernels);
  std::vector<std::string> names;
  for (const KernelActivity& a : named) names.push_back(a.kernel);
  EXPECT_EQ(names, (std::vector<std::string>{"k0_add", "k1_gemm", "k1_gemm", "k2_relu", "k0_add"}));
  EXPECT_EQ(named[1].start_ns, 120);
  EXPECT_EQ(named[1].stream, 1);
  // A module kernel out of its place means the replay is not the step's order: no position is trusted.
  replays = {{{"k2_relu", 1, 100, 101}, {"lib", 1, 110, 111}, {"lib", 1, 120, 121}, {"k0_add", 1, 130, 131}}};
  named = profiler::name_graph_replays(step, replays, module_kernels);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].kernel, "k2_relu");
  EXPECT_EQ(named[1].kernel, "k0_add");
}

// steps/s counts the median back-to-back batch where a recording has batches
// (tcc bench measures them since 2026-11-25), and the reports say which.
TEST(ProfilerSummary, StepsPerSecondComeFromBackToBackBatches) {
  Measurement m = profiler::read_measurement(recorded("mlp"));
  Summary old = profiler::summarize(m);
  EXPECT_FALSE(old.modes[0].pipelined);
  EXPECT_NE(profiler::steps_per_s_basis(old).find("one over the median latency"), std::string::npos);
  for (profiler::ModeMeasurement& x : m.modes) {
    x.pipelined_steps = 40;
    x.pipelined_ms = {2.0, 1.0, 4.0};  // median 2 ms for 40 steps
  }
  json once = profiler::to_json(m);
  EXPECT_EQ(once, profiler::to_json(profiler::measurement_from_json(once, "again")));
  Summary s = profiler::summarize(m);
  for (const profiler::ModeSummary& x : s.modes) {
    EXPECT_TRUE(x.pipelined) << x.mode->mode;
    EXPECT_DOUBLE_EQ(x.steps_per_s, 20000) << x.mode->mode;
    double from_events = std::min(1.0, x.gpu_ms.median / x.latency_ms.median);
    EXPECT_NEAR(x.gpu_busy, x.step_time.steps > 0 ? x.step_time.gpu_busy : from_events, 1e-12);
  }
  EXPECT_DOUBLE_EQ(mode(s, "default").speedup_over_eager, 1.0);
  EXPECT_NE(profiler::report_md(s).find("\nsteps/s: steps enqueued back to back (the median batch); latency, "
                                        "enqueue and GPU time: one step at a time, each waited for.\n"),
            std::string::npos);
  json r = profiler::report_json(s);
  EXPECT_EQ(r["modes"][0]["steps_per_s_from"], "back_to_back");
  EXPECT_EQ(r["modes"][0]["pipelined_steps"], 40);
  once["modes"][0]["pipelined_steps"] = -1;
  const std::string what = input_error([&] { profiler::measurement_from_json(once, "rec.json"); });
  EXPECT_NE(what.find("rec.json: modes[0].pipelined_steps: expected a count"), std::string::npos) << what;
}

TEST(ProfilerSummary, BadRecordingsNameTheField) {
  json j = profiler::to_json(profiler::read_measurement(recorded("mlp")));
  j["modes"][1]["activities"][0]["kernel"] = "tcc_k99_nothing";
  const std::string what = input_error([&] { profiler::measurement_from_json(j, "rec.json"); });
  EXPECT_NE(what.find("rec.json: modes[1].activities[0]: kernel 'tcc_k99_nothing'"),
            std::string::npos) << what;
  j = profiler::to_json(profiler::read_measurement(recorded("mlp")));
  j["modes"][0].erase("latencies_ms");
  EXPECT_THROW(profiler::measurement_from_json(j, "rec.json"), InputError);
  j = profiler::to_json(profiler::read_measurement(recorded("mlp")));
  j["device"] = "v100";
  EXPECT_THROW(profiler::summarize(profiler::measurement_from_json(j, "rec.json")), InputError);
}

TEST_F(ProfilerTest, ReportMarkdownMatchesGolden) {
  for (const char* model : {"mlp", "gpt2_block", "region_captures"}) {
    CliResult r = replay(model, model);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("reduce-overhead"), std::string::npos) << r.output;
    EXPECT_EQ(read_text(dir_ / model / "report.md"), read_text(kSource + "/tests/profiler/" + model + ".report.md"))
        << model << ": regenerate with tests/profiler/update-goldens if the change is intended";
  }
}

TEST_F(ProfilerTest, ReportJsonHasEveryField) {
  ASSERT_EQ(replay("region_captures", "r").code, 0);
  json j = json::parse(read_text(dir_ / "r" / "report.json"));
  EXPECT_EQ(j["format"], "tcc-report");
  EXPECT_EQ(j["device"]["profile"], "h100");
  EXPECT_DOUBLE_EQ(j["device"]["bytes_per_s"].get<double>(), 3.35e12);
  ASSERT_EQ(j["modes"].size(), 3u);
  for (const json& m : j["modes"]) {
    for (const char* k : {"mode", "note", "compile_s", "warmup", "iterations", "latency_ms", "enqueue_ms", "gpu_ms",
                          "steps_per_s", "steps_per_s_from", "pipelined_steps", "speedup_over_eager", "gpu_busy",
                          "gpu_busy_from", "graphs", "traced_steps", "step_time", "kernels"})
      EXPECT_TRUE(m.contains(k)) << k;
    // Every traced step's time is in one category; GPU busy is the kernels' and copies' share of it.
    const json& t = m["step_time"];
    ASSERT_TRUE(t.is_object()) << m["mode"];
    EXPECT_EQ(t["steps"], 5);
    double sum = 0;
    for (const char* c : {"kernels", "copies", "host_steps", "synchronization", "idle"})
      sum += t["us_per_step"][c].get<double>();
    EXPECT_NEAR(sum, t["step_us"].get<double>(), 1e-6);
    EXPECT_NEAR(t["gpu_busy"].get<double>(),
                (t["us_per_step"]["kernels"].get<double>() + t["us_per_step"]["copies"].get<double>()) /
                    t["step_us"].get<double>(),
                1e-12);
    EXPECT_EQ(m["gpu_busy"], t["gpu_busy"]);
    EXPECT_EQ(m["gpu_busy_from"], "step_time");
    ASSERT_EQ(t["host_steps"].size(), 1u);
    EXPECT_EQ(t["host_steps"][0]["node"], "scan");
    for (const char* k : {"median", "p90", "p99", "mean", "min", "max", "stddev", "cv"})
      EXPECT_TRUE(m["latency_ms"][k].is_number()) << k;
    EXPECT_EQ(m["iterations"], 200);
    for (const json& k : m["kernels"]) {
      for (const char* f :
           {"name", "kind", "schedule", "nodes", "launches_per_step", "time_per_step_us", "median_us", "share", "bytes", "flop",
            "achieved_bytes_per_s", "achieved_flop_per_s", "intensity", "roofline_fraction", "bound"})
        EXPECT_TRUE(k.contains(f)) << f;
      EXPECT_FALSE(k["nodes"].empty());
    }
  }
  EXPECT_EQ(j["modes"][0]["mode"], "eager");
  EXPECT_EQ(j["modes"][0]["speedup_over_eager"], 1.0);
  EXPECT_TRUE(j["modes"][0]["graphs"].is_null());
  // reduce-overhead could not capture the Scan (a host step): its graph counts say so, for every step.
  const json& graphs = j["modes"][2]["graphs"];
  EXPECT_EQ(graphs["captures"], 0);
  EXPECT_EQ(graphs["uncaptured_steps"], 210);
  EXPECT_EQ(graphs["not_captured"], "host fallback node 'scan' (it synchronizes with the host)");
  EXPECT_TRUE(j["warnings"].is_array());
  // The recording itself is written next to the reports and replays to the same report.
  CliResult again = run_tcc("bench --from-recorded " + shell_quote((dir_ / "r" / "measurement.json").string()) +
                            " --report " + shell_quote((dir_ / "r2").string()));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(read_text(dir_ / "r2" / "report.json"), read_text(dir_ / "r" / "report.json"));
}

TEST_F(ProfilerTest, TraceIsChromeTraceEvents) {
  ASSERT_EQ(replay("region_captures", "r").code, 0);
  Measurement m = profiler::read_measurement(recorded("region_captures"));
  json t = json::parse(read_text(dir_ / "r" / "trace.json"));
  ASSERT_TRUE(t["traceEvents"].is_array());
  std::map<int, std::string> processes;
  std::set<std::pair<int, int>> named_tracks, used_tracks;
  std::map<std::string, size_t> slices;  // by category: kernels by their kind, then copy, host_step, sync, step
  for (const json& e : t["traceEvents"]) {
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
      if (e["name"] == "thread_name") named_tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    std::string cat = e["cat"];
    bool kernel = cat != "copy" && cat != "host_step" && cat != "sync" && cat != "step";
    ++slices[kernel ? "kernel" : cat];
    EXPECT_GE(e["ts"].get<double>(), 0);
    EXPECT_GT(e["dur"].get<double>(), 0);
    if (kernel) {
      EXPECT_EQ(e["name"].get<std::string>().rfind("tcc_k", 0), 0u);
      EXPECT_FALSE(e["args"]["nodes"].empty());
    }
    if (cat == "copy") {
      EXPECT_EQ(e["name"].get<std::string>().rfind("copy ", 0), 0u) << e.dump();
    }
    if (cat == "host_step") {
      EXPECT_EQ(e["name"].get<std::string>().rfind("host step '", 0), 0u) << e.dump();
    }
    used_tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
  }
  std::map<std::string, size_t> recorded_spans;
  for (const auto& x : m.modes) {
    recorded_spans["kernel"] += x.activities.size();
    recorded_spans["step"] += x.step_windows.size();
    for (const profiler::TimelineSpan& span : x.spans)
      ++recorded_spans[span.kind == profiler::SpanKind::Copy       ? "copy"
                       : span.kind == profiler::SpanKind::HostStep ? "host_step"
                                                                   : "sync"];
  }
  EXPECT_EQ(slices, recorded_spans);
  EXPECT_EQ(slices["step"], 15u);  // five per traced mode
  EXPECT_EQ(slices["host_step"], 15u);  // the Scan, in each
  EXPECT_EQ(used_tracks, named_tracks);  // every stream is a named track
  // Every mode was traced: reduce-overhead could not capture a graph (the Scan's host step) and ran as default.
  EXPECT_EQ(processes.size(), 3u);
  EXPECT_EQ(processes.begin()->second, "tcc eager");
}

TEST_F(ProfilerTest, HtmlIsSelfContainedWithAChartEach) {
  ASSERT_EQ(replay("gpt2_block", "r").code, 0);
  std::string html = read_text(dir_ / "r" / "report.html");
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = html.find(what); at != std::string::npos; at = html.find(what, at + 1)) ++n;
    return n;
  };
  // Mode bars, then per traced mode (eager and default; reduce-overhead replayed a graph, untraced) step time
  // by category, kernel time bars and the roofline.
  EXPECT_EQ(count("<svg"), 7u);
  EXPECT_EQ(count("</svg>"), 7u);
  EXPECT_EQ(count("<title>Time per step by category"), 2u);
  EXPECT_EQ(count("<title>Roofline"), 2u);
  EXPECT_EQ(count("<title>Steps per second by mode"), 1u);
  EXPECT_EQ(count("<title>GPU time per step by kernel"), 2u);
  EXPECT_NE(html.find("/h.0/mlp/c_fc/MatMul, /h.0/mlp/c_fc/Add"), std::string::npos);  // kernels name their nodes
  EXPECT_NE(html.find("reduce-overhead: CUDA graphs: 1 captured, 210 replayed, 0 evicted"), std::string::npos);
  // The Scan's report: all three modes traced, its host step named.
  ASSERT_EQ(replay("region_captures", "m").code, 0);
  html = read_text(dir_ / "m" / "report.html");
  EXPECT_EQ(count("<title>Roofline"), 3u);
  EXPECT_EQ(count("<title>Time per step by category"), 3u);
  EXPECT_NE(html.find("Host steps, begin to end with their copies and waits: 'scan'"), std::string::npos);
  for (const char* banned : {"http://", "https://", "<script", "<link", "@import", "src="})
    EXPECT_EQ(count(banned), 0u) << banned;
}

TEST_F(ProfilerTest, BenchAndProfileNeedAGpuOrARecording) {
  if (tcc_cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  CliResult r = run_tcc("bench " + shell_quote(fixture("mlp.onnx")));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.output,
            "tcc bench: no usable GPU here; --from-recorded FILE writes the reports from a recorded "
            "measurement\n");
  r = run_tcc("profile " + shell_quote(fixture("mlp.onnx")) + " --report " + shell_quote((dir_ / "p").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.output,
            "tcc profile: no usable GPU here; --replay FILE writes the reports from a recorded measurement\n");
  r = run_tcc("run " + shell_quote(fixture("mlp.onnx")) + " --check");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.output.find("tcc run: no usable GPU here"), 0u) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1);
}

TEST_F(ProfilerTest, ProfileReplaysARecording) {
  CliResult r =
      run_tcc("profile --replay " + shell_quote(recorded("mlp")) + " --report " + shell_quote((dir_ / "p").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f : {"report.md", "report.html", "report.json", "trace.json", "measurement.json"})
    EXPECT_TRUE(fs::is_regular_file(dir_ / "p" / f)) << f;
}

TEST_F(ProfilerTest, BadFlagsAndRecordingsExitTwo) {
  EXPECT_EQ(run_tcc("profile --replay " + shell_quote(recorded("mlp"))).code, 2);  // no --report
  EXPECT_EQ(run_tcc("bench " + shell_quote(fixture("mlp.onnx")) + " --modes default,fastest").code, 2);
  EXPECT_EQ(run_tcc("bench " + shell_quote(fixture("mlp.onnx")) + " --iterations 5 --duration 2").code, 2);
  EXPECT_EQ(run_tcc("bench " + shell_quote(fixture("mlp.onnx")) + " --shapes batch").code, 2);
  std::ofstream(dir_ / "broken.json") << "{\"format\": \"tcc-measurement\", ";
  CliResult r = run_tcc("bench --from-recorded " + shell_quote((dir_ / "broken.json").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("broken.json: not valid JSON"), std::string::npos) << r.output;
  r = run_tcc("bench --from-recorded " + shell_quote((dir_ / "missing.json").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("missing.json: cannot read"), std::string::npos) << r.output;
}

// `tcc run --host --check`: the compiled module on the CPU against the reference interpreter.
TEST_F(ProfilerTest, RunHostCheckAgreesWithTheReference) {
  for (const char* model : {"mlp", "gpt2_block", "resnet_small"}) {
    CliResult r = run_tcc("run " + shell_quote(fixture(std::string(model) + ".onnx")) + " --inputs " +
                          shell_quote(fixture(model)) + " --host --check");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("output: ok  max abs err "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("outputs match the reference interpreter"), std::string::npos) << r.output;
  }
  // Random inputs at other sizes.
  CliResult r = run_tcc("run " + shell_quote(fixture("gpt2_block.onnx")) + " --shapes batch=3,seq=7 --host --check");
  EXPECT_EQ(r.code, 0) << r.output;
}

// A graph input with a default value is a module input like any other; run
// gives it the default when neither --inputs nor --shapes does.
TEST_F(ProfilerTest, RunGivesDefaultedInputsTheirDefault) {
  fs::path model = dir_ / "defaulted.tir";
  std::ofstream(model) << "graph main opset(ai.onnx: 17) {\n"
                          "  input %x: f32[n]\n"
                          "  input %s: f32[] = [2.0]\n"
                          "  %y: f32[n] = Mul(%x, %s) name(\"scale\")\n"
                          "  output %y\n"
                          "}\n";
  CliResult r = run_tcc("run " + shell_quote(model.string()) + " --shapes n=5 --host --check");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("y: ok  max abs err 0,"), std::string::npos) << r.output;
  fs::path inputs = dir_ / "inputs";
  fs::create_directories(inputs);
  write_npy((inputs / "x.npy").string(), Tensor::from_f32({1, 2, 3}, {3}));
  r = run_tcc("run " + shell_quote(model.string()) + " --inputs " + shell_quote(inputs.string()) + " --host -o " +
              shell_quote((dir_ / "out").string()) + " --format npy");
  EXPECT_EQ(r.code, 0) << r.output;
  Tensor y = read_npy((dir_ / "out" / "y.npy").string());
  ASSERT_EQ(y.numel(), 3);
  EXPECT_EQ(y.get_f64(2), 6.0);
}

TEST_F(ProfilerTest, RunCheckCatchesAWrongModule) {
  fs::path module = dir_ / "m";
  ASSERT_EQ(run_tcc("compile " + shell_quote(fixture("mlp.onnx")) + " -o " + shell_quote(module.string())).code, 0);
  {
    std::fstream w(module / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    std::vector<char> bytes(256, 0x3f);  // overwrite the start of the first weight
    w.write(bytes.data(), bytes.size());
  }
  CliResult r = run_tcc("run " + shell_quote(module.string()) + " --model " + shell_quote(fixture("mlp.onnx")) +
                        " --inputs " + shell_quote(fixture("mlp")) + " --host --check");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("output: MISMATCH"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("outputs DIFFER from the reference interpreter; --check-steps names the first step"),
            std::string::npos)
      << r.output;
  // Without --model, the model the manifest points to (relative to the module)...
  r = run_tcc("run " + shell_quote(module.string()) + " --inputs " + shell_quote(fixture("mlp")) + " --host --check");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("output: MISMATCH"), std::string::npos) << r.output;
  // ... and when that file is gone, --model is needed.
  fs::copy_file(fixture("mlp.onnx"), dir_ / "gone.onnx");
  ASSERT_EQ(run_tcc("compile " + shell_quote((dir_ / "gone.onnx").string()) + " -o " +
                    shell_quote((dir_ / "m2").string()))
                .code,
            0);
  fs::remove(dir_ / "gone.onnx");
  r = run_tcc("run " + shell_quote((dir_ / "m2").string()) + " --host --check");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("the graph it computes ('../gone.onnx') is not found; give it with --model FILE"),
            std::string::npos)
      << r.output;
}

// `tcc run --check-steps`: every value each step writes against the
// reference's value of the same name. A module whose second weight was
// overwritten agrees on the first step and shows the second as the first
// mismatch, naming the node it computes.
TEST_F(ProfilerTest, RunCheckStepsNamesTheFirstStepThatDisagrees) {
  fs::path module = dir_ / "m";
  ASSERT_EQ(run_tcc("compile " + shell_quote(fixture("mlp.onnx")) + " -o " + shell_quote(module.string())).code, 0);
  std::string run = "run " + shell_quote(module.string()) + " --model " + shell_quote(fixture("mlp.onnx")) +
                    " --inputs " + shell_quote(fixture("mlp")) + " --host --check-steps";
  CliResult r = run_tcc(run);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("every step matches the reference interpreter"), std::string::npos) << r.output;

  json weights = json::parse(read_text(module / "manifest.json"))["weights"]["tensors"];
  ASSERT_EQ(weights[2]["name"], "fc2.weight");
  {
    std::fstream w(module / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    w.seekp(weights[2]["offset"].get<int64_t>());
    std::vector<char> bytes(64, 0x3f);
    w.write(bytes.data(), bytes.size());
  }
  r = run_tcc(run);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("   0  tcc_k0_gemm                   1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok        /fc1/Gemm, /relu/Relu\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("MISMATCH  /fc2/Gemm\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("first mismatch: step 1 (tcc_k1_gemm), which computes /fc2/Gemm\n  output: max abs err"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("outputs DIFFER"), std::string::npos) << r.output;

  r = run_tcc("run " + shell_quote(fixture("mlp.onnx")) + " --reference --check-steps");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--check and --check-steps compare a module run with --reference's outputs"),
            std::string::npos)
      << r.output;

  // A kernel that serves two steps shows each step's own nodes.
  r = run_tcc("run " + shell_quote(fixture("gpt2_block.onnx")) + " --shapes batch=2,seq=5 --host --check-steps");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("tcc_k0_reduction              1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok        /h.0/ln_1/LayerNormalization/ReduceMean,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ok        /h.0/ln_2/LayerNormalization/ReduceMean,"), std::string::npos) << r.output;
}

// A --train module takes its parameters as inputs; its reference is the
// training graph --emit-onnx wrote, which holds them as initializers: run gives
// the module those values, and each step matches. The forward model is refused
// as the reference, saying why.
TEST_F(ProfilerTest, RunChecksATrainingModuleAgainstItsEmittedGraph) {
  fs::path module = dir_ / "train", graph = dir_ / "train.onnx";
  CliResult r = run_tcc("compile " + shell_quote(fixture("mlp.onnx")) + " -o " + shell_quote(module.string()) +
                        " --train --loss-fn mse --loss-on output --label target --optimizer adam --emit-onnx " +
                        shell_quote(graph.string()));
  ASSERT_EQ(r.code, 0) << r.output;
  // The manifest points to that graph: no --model needed.
  EXPECT_EQ(json::parse(read_text(module / "manifest.json"))["model_path"], "../train.onnx");
  r = run_tcc("run " + shell_quote(module.string()) + " --shapes batch=3 --host --check-steps");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("every step matches the reference interpreter"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fc1.weight.updated: ok"), std::string::npos) << r.output;
  r = run_tcc("run " + shell_quote(module.string()) + " --model " + shell_quote(fixture("mlp.onnx")) +
              " --shapes batch=3 --host --check");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("the module computes loss, fc1.weight.updated,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("computes output; a module compiled with --train computes the training step: give the "
                          "graph that `tcc compile --train --emit-onnx FILE` wrote with --model FILE"),
            std::string::npos)
      << r.output;
}

// The eager mode: one kernel per node, and still the reference's results.
TEST_F(ProfilerTest, EagerModeIsOneKernelPerNode) {
  for (const char* model : {"mlp", "gpt2_block"}) {
    fs::path eager = dir_ / (std::string(model) + "_eager"), fused = dir_ / (std::string(model) + "_default");
    std::string m = shell_quote(fixture(std::string(model) + ".onnx"));
    ASSERT_EQ(run_tcc("compile " + m + " -o " + shell_quote(eager.string()) + " --mode eager").code, 0);
    ASSERT_EQ(run_tcc("compile " + m + " -o " + shell_quote(fused.string())).code, 0);
    json e = json::parse(read_text(eager / "manifest.json")), f = json::parse(read_text(fused / "manifest.json"));
    EXPECT_EQ(e["mode"], "eager");
    for (const json& k : e["kernels"]) EXPECT_EQ(k["nodes"].size(), 1u) << k.dump();
    EXPECT_GT(e["schedule"].size(), f["schedule"].size()) << model;
    CliResult r = run_tcc("run " + shell_quote(eager.string()) + " --model " + m + " --inputs " +
                          shell_quote(fixture(model)) + " --host --check");
    EXPECT_EQ(r.code, 0) << r.output;
  }
}

// Each kernel's schedule goes from the manifest into the recording and the
// reports' kernel rows (a recording made before it shows "-").
TEST_F(ProfilerTest, KernelsCarryTheirScheduleFromTheManifest) {
  fs::path module = dir_ / "gpt2";
  ASSERT_EQ(run_tcc("compile " + shell_quote(fixture("gpt2_block.onnx")) + " -o " + shell_quote(module.string()) +
                    " --no-host --arch sm_90 --no-ptx")
                .code,
            0);
  std::vector<profiler::KernelSpec> specs = profiler::module_kernel_specs(module.string(), {{"batch", 8}, {"seq", 8}});
  std::map<std::string, std::string> schedule;
  for (const profiler::KernelSpec& k : specs) schedule[k.kind] += k.schedule + ";";
  EXPECT_NE(schedule["gemm"].find("cuBLASLt algorithm #0;"), std::string::npos) << schedule["gemm"];
  EXPECT_NE(schedule["pointwise"].find("block 256, vector 4;"), std::string::npos) << schedule["pointwise"];
  EXPECT_NE(schedule["attention"].find("split layout, block 128, rows 32, 4 lanes a row;"), std::string::npos) << schedule["attention"];
  EXPECT_NE(schedule["reduction"].find(", row cache "), std::string::npos) << schedule["reduction"];

  json recording = profiler::to_json(profiler::read_measurement(recorded("gpt2_block")));
  for (json& x : recording["modes"])
    for (json& k : x["kernels"]) k.erase("schedule");
  Measurement m = profiler::measurement_from_json(recording, "old.json");
  Summary old = profiler::summarize(m);
  EXPECT_NE(profiler::report_md(old).find("| `tcc_k2_pointwise` | - | /h.0/ln_1/LayerNormalization/Mul |"),
            std::string::npos);
  for (profiler::ModeMeasurement& x : m.modes)
    for (profiler::KernelSpec& k : x.kernels) k.schedule = "block 32, vector 1";
  json once = profiler::to_json(m);
  EXPECT_EQ(once, profiler::to_json(profiler::measurement_from_json(once, "again")));
  Summary s = profiler::summarize(m);
  EXPECT_NE(
      profiler::report_md(s).find("| `tcc_k2_pointwise` | block 32, vector 1 | /h.0/ln_1/LayerNormalization/Mul |"),
      std::string::npos);
  EXPECT_EQ(profiler::report_json(s)["modes"][1]["kernels"][0]["schedule"], "block 32, vector 1");
  EXPECT_NE(profiler::report_html(s).find("<td>block 32, vector 1</td>"), std::string::npos);
}

// ---- On a GPU (skipped elsewhere; scripts/gpu-check runs every test named *Gpu*) ----

class GpuProfile : public ProfilerTest {
 protected:
  void SetUp() override {
    if (!tcc_cuda_available()) GTEST_SKIP() << "no CUDA device";
    ProfilerTest::SetUp();
  }
};

// Every step of every fixture too (--check-steps): a kernel whose error stays
// inside the outputs' tolerance only by luck shows here.
TEST_F(GpuProfile, RunCheckOnEveryFixture) {
  for (const char* model : {"mlp", "gpt2_block", "resnet_small"}) {
    CliResult r = run_tcc("run " + shell_quote(fixture(std::string(model) + ".onnx")) + " --inputs " +
                          shell_quote(fixture(model)) + " --check-steps");
    EXPECT_EQ(r.code, 0) << model << "\n" << r.output;
    EXPECT_NE(r.output.find("every step matches the reference interpreter"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("outputs match the reference interpreter"), std::string::npos) << r.output;
  }
}

// A module for the GPU here alone (its cubin, no PTX, no host.so) runs and matches the reference.
TEST_F(GpuProfile, NativeArchModuleRunsOnThisGpu) {
  fs::path module = dir_ / "native";
  CliResult c = run_tcc("compile " + shell_quote(fixture("gpt2_block.onnx")) + " -o " + shell_quote(module.string()) +
                        " --arch native --no-ptx --no-host");
  ASSERT_EQ(c.code, 0) << c.output;
  json m = json::parse(read_text(module / "manifest.json"));
  ASSERT_EQ(m["cuda"]["binaries"].size(), 1u) << m["cuda"].dump();
  EXPECT_EQ(m["options"]["arch"], json::array({m["cuda"]["binaries"][0]["arch"]}));
  CliResult r = run_tcc("run " + shell_quote(module.string()) + " --model " + shell_quote(fixture("gpt2_block.onnx")) +
                        " --inputs " + shell_quote(fixture("gpt2_block")) + " --check");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("outputs match the reference interpreter"), std::string::npos) << r.output;
}

TEST_F(GpuProfile, CudaGraphReplayMatchesHostRun) {
  fs::path module = dir_ / "m";
  ASSERT_EQ(run_tcc("compile " + shell_quote(fixture("mlp.onnx")) + " -o " + shell_quote(module.string())).code, 0);
  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load(module.c_str(), &m), TCC_OK) << tcc_last_error();
  int64_t in_shape[2] = {5, 0}, out_shape[2] = {5, 0};
  tcc_dtype dtype;
  int32_t rank = 0;
  ASSERT_EQ(tcc_module_tensor_info(m, 0, 0, &dtype, &rank, in_shape, 2), TCC_OK) << tcc_last_error();
  in_shape[0] = 5;
  std::vector<float> x(static_cast<size_t>(in_shape[0] * in_shape[1]));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i));
  tcc_tensor in = {x.data(), TCC_F32, 2, in_shape};
  ASSERT_EQ(tcc_module_output_shape(m, &in, 1, 0, out_shape, 2, &rank), TCC_OK) << tcc_last_error();
  std::vector<float> host(static_cast<size_t>(out_shape[0] * out_shape[1])), device(host.size());
  tcc_tensor out = {host.data(), TCC_F32, 2, out_shape};
  ASSERT_EQ(tcc_module_run_host(m, &in, 1, &out, 1), TCC_OK) << tcc_last_error();

  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  void *d_in = nullptr, *d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, host.size() * 4), cudaSuccess);
  std::vector<float> zeros(x.size(), 0.f);
  ASSERT_EQ(cudaMemcpy(d_in, zeros.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  tcc_tensor d_in_t = {d_in, TCC_F32, 2, in_shape}, d_out_t = {d_out, TCC_F32, 2, out_shape};
  tcc_cuda_graph* graph = nullptr;
  ASSERT_EQ(tcc_module_capture_cuda(m, &d_in_t, 1, &d_out_t, 1, stream, &graph), TCC_OK) << tcc_last_error();
  // New inputs go into the captured (static) input buffer; the replay computes with them.
  ASSERT_EQ(cudaMemcpyAsync(d_in, x.data(), x.size() * 4, cudaMemcpyHostToDevice, stream), cudaSuccess);
  ASSERT_EQ(tcc_cuda_graph_launch(graph, stream), TCC_OK) << tcc_last_error();
  ASSERT_EQ(cudaMemcpyAsync(device.data(), d_out, device.size() * 4, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (size_t i = 0; i < host.size(); ++i) ASSERT_NEAR(device[i], host[i], 1e-4 + 1e-4 * std::fabs(host[i])) << i;
  tcc_cuda_graph_free(graph);
  cudaFree(d_in);
  cudaFree(d_out);
  cudaStreamDestroy(stream);
  tcc_module_free(m);
}

TEST_F(GpuProfile, ProfileTracesEveryKernelAndReplaysConvGraphs) {
  CliResult r = run_tcc("profile " + shell_quote(fixture("resnet_small.onnx")) +
                        " --modes eager,default,reduce-overhead --iterations 20 --check --report " +
                        shell_quote((dir_ / "p").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  json j = json::parse(read_text(dir_ / "p" / "report.json"));
  ASSERT_EQ(j["modes"].size(), 3u);
  for (const json& m : j["modes"]) {
    EXPECT_EQ(m["iterations"], 20);
    EXPECT_GT(m["latency_ms"]["median"].get<double>(), 0);
    EXPECT_GT(m["gpu_ms"]["median"].get<double>(), 0);
    EXPECT_FALSE(m["kernels"].empty()) << m["mode"];
  }
  // resnet_small has no host step (its MaxPool is a pool kernel): the graph mode
  // captures cuDNN's convolutions with the generated kernels. Its conv kernels
  // are traced to their steps through CUPTI's external correlation records.
  EXPECT_EQ(j["modes"][2]["note"], "") << r.output;
  // Every kernel of the default module ran in each traced step, and in each
  // traced graph replay (its records named after a step launched directly).
  json manifest = json::parse(read_text(dir_ / "p" / "measurement.json"));
  for (int mode : {1, 2}) {
    EXPECT_EQ(j["modes"][mode]["kernels"].size(), manifest["modes"][mode]["kernels"].size());
    std::set<std::string> traced;
    for (const json& a : manifest["modes"][mode]["activities"]) traced.insert(a["kernel"].get<std::string>());
    for (const json& k : manifest["modes"][mode]["kernels"])
      EXPECT_EQ(traced.count(k["name"].get<std::string>()), 1u)
          << manifest["modes"][mode]["mode"] << ": " << k["name"] << " has no activity record";
  }
  // Each traced step's time, category by category, from CUPTI's kernel, copy and synchronization records.
  for (const json& m : j["modes"]) {
    const json& t = m["step_time"];
    ASSERT_TRUE(t.is_object()) << m["mode"];
    EXPECT_EQ(t["steps"], 5);
    double sum = 0;
    for (const auto& [category, us] : t["us_per_step"].items()) sum += us.get<double>();
    EXPECT_NEAR(sum, t["step_us"].get<double>(), 1e-3 * t["step_us"].get<double>());
    EXPECT_GT(t["us_per_step"]["kernels"].get<double>(), 0);
    EXPECT_TRUE(t["host_steps"].empty());
  }
  // A graph step copies its inputs into its binding's buffers and its outputs out.
  EXPECT_GT(j["modes"][2]["step_time"]["us_per_step"]["copies"].get<double>(), 0);
  EXPECT_EQ(j["modes"][2]["graphs"]["captures"], 1);
  json trace = json::parse(read_text(dir_ / "p" / "trace.json"));
  size_t slices = 0;
  for (const json& e : trace["traceEvents"]) slices += e["ph"] == "X";
  EXPECT_GT(slices, 0u);
}

TEST_F(GpuProfile, BenchReplaysCudaGraphs) {
  CliResult r = run_tcc("bench " + shell_quote(fixture("mlp.onnx")) +
                        " --modes default,reduce-overhead --iterations 50 --check --report " +
                        shell_quote((dir_ / "b").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("skipping cudagraphs"), std::string::npos) << r.output;
  // Like a JIT, bench compiles for the device it runs on.
  EXPECT_NE(r.output.find("default: compiling for this GPU (tcc compile --no-host"), std::string::npos) << r.output;
  json j = json::parse(read_text(dir_ / "b" / "report.json"));
  EXPECT_EQ(j["modes"][1]["note"], "");
  // One capture; the warm-up, the timed steps and three back-to-back batches of 50 replay it.
  EXPECT_EQ(j["modes"][1]["graphs"]["captures"], 1);
  EXPECT_EQ(j["modes"][1]["graphs"]["replays"], 10 + 50 + 3 * 50);
  EXPECT_NE(r.output.find("reduce-overhead: CUDA graphs: 1 captured, 210 replayed, 0 evicted"), std::string::npos)
      << r.output;
  // One graph launch: the host enqueues a step faster than launching each kernel.
  EXPECT_LT(j["modes"][1]["enqueue_ms"]["median"].get<double>(), j["modes"][0]["enqueue_ms"]["median"].get<double>());
  // With the inputs bound to the captured buffers a step is the launch alone, and the outputs still match.
  r = run_tcc("bench " + shell_quote(fixture("mlp.onnx")) + " --modes reduce-overhead --bound-inputs --iterations 50 " +
              "--check --report " + shell_quote((dir_ / "bound").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  json bound = json::parse(read_text(dir_ / "bound" / "report.json"));
  EXPECT_EQ(bound["modes"][0]["note"], "inputs bound to the graph's captured buffers: no copy per step");
}

}  // namespace
}  // namespace tcc
