// tcc_bench: how long loading, verifying and symbolically shaping a
// 100,000-node transformer-like graph takes (issue 2 asks for under 2 s in all
// on the 2-core build machine), and the process's peak memory.
//
// Benchmarks:
//   BM_ImportOnnx    ONNX file -> IR (import_onnx_file)
//   BM_Verify        the verifier on the imported graph
//   BM_InferShapes   symbolic shape inference on the imported graph
//   BM_Total         load_model (import + verify) + infer_shapes, as `tcc explain` does
// Each reports `nodes` and `peak_rss_mb` (getrusage's high-water mark of the
// whole process, so scripts/bench runs each benchmark in its own process).
// TCC_BENCH_NODES overrides the node count; `tcc_bench --write-model PATH`
// only writes the generated graph to PATH.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/transformer_graph.h"
#include "frontends/onnx/onnx_exporter.h"
#include "frontends/load_model.h"
#include "frontends/onnx/onnx_importer.h"
#include "src/ir/verifier.h"
#include "src/shape/shape_inference.h"

namespace tcc::bench {
namespace {

StackShape stack_shape() {
  StackShape s;
  if (const char* n = std::getenv("TCC_BENCH_NODES")) s.min_nodes = std::atoll(n);
  return s;
}

// The ONNX file of the generated stack: TCC_BENCH_MODEL when set (written
// beforehand by `tcc_bench --write-model PATH`, so that building the graph
// does not count in this process's peak memory), else written once here.
const std::string& onnx_path() {
  static const std::string path = [] {
    if (const char* given = std::getenv("TCC_BENCH_MODEL")) return std::string(given);
    std::string p = (std::filesystem::temp_directory_path() /
                     ("tcc_bench_" + std::to_string(getpid()) + ".onnx")).string();
    export_onnx_file(*build_transformer_stack(stack_shape()), p);
    std::atexit([] { std::filesystem::remove(onnx_path()); });
    return p;
  }();
  return path;
}

void report(benchmark::State& state, const Graph& g) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  state.counters["nodes"] = static_cast<double>(g.nodes().size());
  state.counters["peak_rss_mb"] = static_cast<double>(ru.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
}

void BM_ImportOnnx(benchmark::State& state) {
  const std::string& path = onnx_path();
  std::unique_ptr<Model> m;
  for (auto _ : state) {
    state.PauseTiming();
    m.reset();  // freeing the previous graph is not part of importing
    state.ResumeTiming();
    m = import_onnx_file(path);
  }
  report(state, *m->graph);
}

void BM_Verify(benchmark::State& state) {
  std::unique_ptr<Model> m = import_onnx_file(onnx_path());
  for (auto _ : state) {
    std::vector<std::string> problems = verify(*m->graph);
    if (!problems.empty()) state.SkipWithError(problems.front().c_str());
    benchmark::DoNotOptimize(problems);
  }
  report(state, *m->graph);
}

void BM_InferShapes(benchmark::State& state) {
  std::unique_ptr<Model> m;
  for (auto _ : state) {
    state.PauseTiming();
    m.reset();  // one graph alive at a time, as in a real run
    m = import_onnx_file(onnx_path());  // shape a graph that has not been shaped before
    state.ResumeTiming();
    ShapeInfo info = infer_shapes(*m->graph);
    benchmark::DoNotOptimize(info);
  }
  if (!m->graph->outputs()[0]->type().fully_shaped())
    state.SkipWithError(("output not fully shaped: " + m->graph->outputs()[0]->type().str()).c_str());
  report(state, *m->graph);
}

void BM_Total(benchmark::State& state) {
  const std::string& path = onnx_path();
  std::unique_ptr<Model> m;
  for (auto _ : state) {
    state.PauseTiming();
    m.reset();
    state.ResumeTiming();
    m = load_model(path);
    ShapeInfo info = infer_shapes(*m->graph);
    benchmark::DoNotOptimize(info);
  }
  report(state, *m->graph);
}

BENCHMARK(BM_ImportOnnx)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Verify)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_InferShapes)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Total)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace tcc::bench

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-model") {
    auto m = tcc::bench::build_transformer_stack(tcc::bench::stack_shape());
    tcc::export_onnx_file(*m, argv[2]);
    std::printf("%s: %zu nodes\n", argv[2], m->graph->nodes().size());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
