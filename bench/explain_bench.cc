// tcc_explain_bench: `tcc explain`'s performance targets (issue 3), each under
// 2 s on the 2-core build machine.
//
// Benchmarks:
//   BM_ExplainAnalyze   explain_model on a generated 100,000-node transformer
//                       stack with symbolic batch and seq: shape inference,
//                       partition, signature and guard sets
//   BM_ExplainCommand   what `tcc explain STACK.onnx --format json` does: load the
//                       ONNX file, analyze, render the JSON text
//   BM_Trace/<case>     read_trace + simulate + compute_advice over 1,000,000 calls:
//     captions          the caption example's 1,000 batches repeated 1,000 times
//                       (--dynamic false: 8 compiles, then eager calls)
//     new_lr            the worst case, a float LR with a new value on every call
//     stack             the 100,000-node stack fed batches whose seq follows the
//                       caption distribution (90% short, 9% medium, 1% long)
// Each reports `peak_rss_mb` (getrusage's high-water mark of the whole process,
// so bench/explain_bench.sh runs each benchmark in its own process).
// TCC_BENCH_NODES overrides the stack's node count (callgrind runs use a
// smaller one).
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "bench/transformer_graph.h"
#include "frontends/onnx/onnx_exporter.h"
#include "frontends/load_model.h"
#include "src/analysis/explain_report.h"

namespace tcc::bench {
namespace {

constexpr size_t kCalls = 1000000;

StackShape stack_shape() {
  StackShape s;
  if (const char* n = std::getenv("TCC_BENCH_NODES")) s.min_nodes = std::atoll(n);
  return s;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tcc_explain_bench_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// Files written once per process and removed at exit.
class TempFiles {
 public:
  ~TempFiles() {
    for (const auto& p : paths_) std::filesystem::remove(p);
  }
  const std::string& add(std::string path) { return paths_.emplace_back(std::move(path)); }

 private:
  std::vector<std::string> paths_;
};
TempFiles& temp_files() {
  static TempFiles files;
  return files;
}

const std::string& stack_onnx() {
  static const std::string path = [] {
    std::string p = temp_files().add(temp_path("stack.onnx"));
    export_onnx_file(*build_transformer_stack(stack_shape()), p);
    return p;
  }();
  return path;
}

void report_rss(benchmark::State& state) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_mb"] = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
}

void BM_ExplainAnalyze(benchmark::State& state) {
  std::unique_ptr<Model> m;
  ExplainReport r;
  for (auto _ : state) {
    state.PauseTiming();
    r = ExplainReport();
    m.reset();  // one graph alive at a time, as in a real run
    m = build_transformer_stack(stack_shape());  // a graph no shape inference has annotated yet
    state.ResumeTiming();
    r = explain_model(*m, {}, OpRegistry::get());
  }
  if (r.partition.regions.size() != 1 || !r.partition.breaks.empty())
    state.SkipWithError("the stack should be one compiled graph without breaks");
  state.counters["nodes"] = static_cast<double>(m->graph->nodes().size());
  report_rss(state);
}

void BM_ExplainCommand(benchmark::State& state) {
  const std::string& path = stack_onnx();
  size_t bytes = 0;
  for (auto _ : state) {
    std::unique_ptr<Model> m = load_model(path);
    ExplainReport r = explain_model(*m, {}, OpRegistry::get());
    std::string json = render_json(r).dump(2);
    bytes = json.size();
  }
  state.counters["json_bytes"] = static_cast<double>(bytes);
  report_rss(state);
}

// One trace case: the model, a trace file of kCalls lines, the explain flags.
struct TraceCase {
  std::string model;
  std::string trace;
  ExplainOptions opts;
};

std::string source_path(const std::string& rel) { return std::string(TCC_SOURCE_DIR) + "/" + rel; }

TraceCase captions_case() {
  TraceCase c{source_path("examples/caption_padding/model.tir"), temp_files().add(temp_path("captions.jsonl")), {}};
  std::ifstream in(source_path("examples/caption_padding/longest.jsonl"));
  std::string batches((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t lines = static_cast<size_t>(std::count(batches.begin(), batches.end(), '\n'));
  std::ofstream out(c.trace);
  for (size_t written = 0; written < kCalls; written += lines) out << batches;
  c.opts.sim.dynamic = DynamicMode::False;
  return c;
}

TraceCase new_lr_case() {
  TraceCase c{source_path("examples/adam_lr_schedule/model.tir"), temp_files().add(temp_path("lr.jsonl")), {}};
  std::FILE* f = std::fopen(c.trace.c_str(), "w");
  for (size_t i = 0; i < kCalls; ++i)
    std::fprintf(f,
                 "{\"param\": {\"shape\": [1024], \"dtype\": \"float32\"}, \"grad\": {\"shape\": [1024], "
                 "\"dtype\": \"float32\"}, \"exp_avg\": {\"shape\": [1024], \"dtype\": \"float32\"}, "
                 "\"exp_avg_sq\": {\"shape\": [1024], \"dtype\": \"float32\"}, \"step\": {\"shape\": [], "
                 "\"dtype\": \"float32\"}, \"lr\": {\"scalar\": %.17g}}\n",
                 0.01 + static_cast<double>(i) * 1e-9);
  std::fclose(f);
  return c;
}

TraceCase stack_case() {
  TraceCase c{stack_onnx(), temp_files().add(temp_path("stack.jsonl")), {}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::FILE* f = std::fopen(c.trace.c_str(), "w");
  for (size_t i = 0; i < kCalls; ++i) {
    double p = u(rng);
    int lo = p < 0.90 ? 8 : p < 0.99 ? 65 : 257, hi = p < 0.90 ? 64 : p < 0.99 ? 256 : 512;
    int seq = lo + static_cast<int>(u(rng) * (hi - lo + 1));
    std::fprintf(f, "{\"input\": {\"shape\": [32, %d, 16], \"dtype\": \"float32\"}}\n", seq);
  }
  std::fclose(f);
  return c;
}

void BM_Trace(benchmark::State& state, TraceCase (*make)()) {
  const TraceCase c = make();
  std::unique_ptr<Model> m = load_model(c.model);
  ExplainOptions opts = c.opts;
  ExplainReport base = explain_model(*m, opts, OpRegistry::get());
  SimResult sim;
  size_t advice = 0;
  for (auto _ : state) {
    Trace trace = read_trace(c.trace, base.signature);
    sim = simulate(base.signature, base.partition.regions, trace, opts.sim);
    advice = compute_advice(base.signature, base.partition.regions, trace, opts.sim, sim).size();
  }
  if (sim.calls != kCalls) state.SkipWithError("the trace has the wrong number of calls");
  state.counters["calls"] = static_cast<double>(sim.calls);
  state.counters["compiles"] = static_cast<double>(sim.compiles);
  state.counters["eager_fallback_calls"] = static_cast<double>(sim.eager_fallback_calls);
  state.counters["advice"] = static_cast<double>(advice);
  report_rss(state);
}

BENCHMARK(BM_ExplainAnalyze)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_ExplainCommand)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Trace, captions, captions_case)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Trace, new_lr, new_lr_case)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Trace, stack, stack_case)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace tcc::bench

BENCHMARK_MAIN();
