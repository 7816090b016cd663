// What `tcc bench` and `tcc profile` measure, and what the reports derive from it.
//
// A Measurement is the raw record of one benchmark session: per mode, the
// latency of every timed step, the host enqueue time, the GPU time, the
// kernels of the module that ran (name, source nodes, bytes and FLOP at the
// benchmark's sizes, from the manifest) and, when traced, the CUPTI kernel
// activity of a few steps. It is written as JSON (`measurement.json` next to
// the reports) and read back by `tcc bench --from-recorded`, so every report
// can be regenerated from a recording without a GPU. A trace also records
// each traced step's window and the copies, host steps and synchronizations
// in it, from which the step-time accounting (step_time.h) follows.
//
// summarize() turns it into what the reports print: latency percentiles,
// steps/s and speedup over eager per mode, per-kernel GPU time and its share
// of the device's roofline, where each traced step's time went, and
// trtexec-style warnings.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/profiles.h"
#include "src/profiler/step_time.h"

namespace tcc::profiler {

// One kernel of a mode's module, as the manifest describes it.
struct KernelSpec {
  std::string name;                // tcc_k3_gemm
  std::string kind;                // pointwise, reduction, gemm, copy, ...
  std::vector<std::string> nodes;  // the source nodes it computes
  std::string schedule;            // how it runs ("block 64, rows 1, row cache 8"); empty in older recordings
  int64_t bytes = 0;               // bytes moved per launch at the benchmark's sizes
  int64_t flop = 0;                // per launch
  bool tensor_cores = false;       // f16/bf16 GEMM or attention: compared with the tensor-core peak, else fp32
};

// One kernel execution from CUPTI's concurrent-kernel activity records.
struct KernelActivity {
  std::string
      kernel;  // the manifest name; library kernels (cuBLASLt's) are mapped to the tcc kernel that launched them
  int stream = 0;
  int64_t start_ns = 0, end_ns = 0;
};

// reduce-overhead's CUDA graphs over a mode's whole run (runtime::GraphStats):
// a graph per binding of the symbolic dims, captured when first seen.
struct GraphCounts {
  int64_t captures = 0, replays = 0, evictions = 0;
  int64_t uncaptured_steps = 0;  // steps run kernel by kernel, because of not_captured
  std::string not_captured;      // why the module cannot be captured; empty when it can
};

struct ModeMeasurement {
  std::string mode;      // eager, default, reduce-overhead, max-autotune
  std::string note;      // e.g. "skipping cudagraphs due to ..."; empty when the mode ran as asked
  bool cuda_graph = false;  // each step replayed a captured CUDA graph (false in older recordings)
  double compile_s = 0;  // wall time of `tcc compile` for this mode
  int warmup = 0;
  std::vector<double> latencies_ms;  // host wall time of each timed step, inputs ready to outputs ready
  std::vector<double> enqueue_ms;    // host time to enqueue each timed step
  std::vector<double> gpu_ms;        // GPU time of each timed step (events around it)
  // Throughput: batches of pipelined_steps steps enqueued back to back, the
  // host wall time of each batch from its first enqueue to its last step's
  // completion. Empty in recordings made before it was measured.
  int pipelined_steps = 0;
  std::vector<double> pipelined_ms;
  std::vector<KernelSpec> kernels;
  std::optional<GraphCounts> graphs;  // CUDA graph modes; absent in others and in older recordings
  int traced_steps = 0;  // steps the activities cover (0: not traced)
  std::vector<KernelActivity> activities;
  // Each traced step's window, and the copies, host steps and synchronizations
  // of the trace (spans of every kind but Kernel). Empty in older recordings.
  std::vector<StepWindow> step_windows;
  std::vector<TimelineSpan> spans;
};

struct Measurement {
  std::string model;
  std::string device;       // a device profile name (profiles/devices): h100
  std::string device_name;  // as the driver reports it
  std::string date;         // ISO 8601
  std::string commit;
  std::string source;                    // how it was obtained: "tcc bench on ...", or why the data is synthetic
  std::map<std::string, int64_t> sizes;  // the symbols' values
  std::vector<ModeMeasurement> modes;
};

// Percentiles and spread of a series, in its unit.
struct Stats {
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0, stddev = 0;
  double cv() const { return mean > 0 ? stddev / mean : 0; }
};
Stats stats_of(std::vector<double> xs);

struct KernelSummary {
  const KernelSpec* spec = nullptr;
  double launches_per_step = 0;
  double time_per_step_us = 0;  // GPU time of all its launches in one step
  double median_us = 0;         // one launch
  double share = 0;             // of the mode's traced kernel time
  double achieved_bytes_per_s = 0, achieved_flop_per_s = 0;
  double intensity = 0;          // FLOP per byte
  double roofline_fraction = 0;  // roofline time / measured time: 1 is the device's peak
  bool compute_bound = false;    // by the roofline, at its intensity
};

struct ModeSummary {
  const ModeMeasurement* mode = nullptr;
  Stats latency_ms, enqueue_ms, gpu_ms;
  // Steps per second back to back (the median batch of pipelined_ms), or, in
  // a recording without batches, one over the median latency.
  double steps_per_s = 0;
  bool pipelined = false;  // steps_per_s is from back-to-back batches
  double speedup_over_eager = 0;       // 0 when eager was not measured
  // Kernels and copies over the traced steps' time (step_time), or, in a mode
  // with no step windows, GPU time over wall time per step (CUDA events).
  double gpu_busy = 0;
  StepTime step_time;  // steps 0: no step windows
  std::vector<KernelSummary> kernels;  // by time per step, largest first
};

// trtexec's warnings: a mode whose throughput is bound by host enqueue time
// (enqueue >= GPU time per step), or whose timings are unstable.
constexpr double kUnstableCv = 0.10;       // coefficient of variation of the latency
constexpr double kUnstableP99Ratio = 1.5;  // p99 over median latency
// And, from the step-time accounting, a host step or an idle gap that takes
// at least this share of the step.
constexpr double kDominantShare = 0.20;

struct Summary {
  const Measurement* measurement = nullptr;
  const DeviceProfile* device = nullptr;
  std::vector<ModeSummary> modes;
  std::vector<std::string> warnings;
};

// InputError when the device is unknown or a mode has no timed step.
Summary summarize(const Measurement& m);

// The kernels of a compiled module (its manifest.json) with bytes and FLOP per
// launch evaluated at `sizes`. InputError naming the file and field.
std::vector<KernelSpec> module_kernel_specs(const std::string& module_dir, const std::map<std::string, int64_t>& sizes);

// JSON in the layout docs/PROFILING.md describes; from_json names the file and field it finds wrong.
nlohmann::json to_json(const Measurement& m);
nlohmann::json to_json(const GraphCounts& g);  // as measurement.json and report.json hold it
Measurement measurement_from_json(const nlohmann::json& j, const std::string& file);
Measurement read_measurement(const std::string& path);
void write_measurement(const std::string& path, const Measurement& m);

}  // namespace tcc::profiler
