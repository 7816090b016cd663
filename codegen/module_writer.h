// Writes the compiled module directory of docs/MODULE.md: the manifest the
// runtime loads, the sources and binaries, the weights, the fallback nodes,
// and the compile report.
//
// Everything except the timing fields (report.json "timings" and the last
// table of report.md) is a function of the model and the options, so the same
// inputs give byte-identical files: lists follow schedule or graph order, JSON
// objects keep a fixed key order, and no path or clock leaks into them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/memory_plan.h"
#include "codegen/profiles.h"
#include "codegen/schedule.h"
#include "codegen/toolchain.h"
#include "src/module/manifest_records.h"
#include "passes/pass_manager.h"
#include "passes/pass.h"
#include "src/analysis/guards.h"
#include "src/module/manifest_format.h"

namespace tcc {

// --shape-hint NAME=seq(N), NAME=present, NAME=absent: what a sequence or
// optional input is compiled for (src/compiler/structured_io.h).
struct StructureHint {
  bool present = true;  // an optional's value is there
  int64_t length = -1;  // a sequence's length (an optional sequence's, when present); -1: not given
};

// The options of `tcc compile` that shape the module.
struct CompileOptions {
  std::string mode = "default";
  std::vector<std::string> archs = {"sm_80", "sm_90"};
  bool ptx = true;
  bool host = true;                           // host.cc / host.so: the kernels' CPU versions (tcc run --host)
  std::string device = kDefaultDevice;         // the schedule's SM count, the report's roofline estimates
  std::map<std::string, int64_t> shape_hints;  // report sizes for symbols; unhinted ones are 1
  std::map<std::string, StructureHint> structure_hints;  // per sequence or optional input
  // --shape-hint xs.0=[2x3]: the static shape of an element of one (the model's element type otherwise)
  std::map<std::string, std::vector<int64_t>> element_shapes;
  // --specialize axes=0,2: inputs compiled for these values (row-major), as constants; the
  // manifest guards each (EQUALS_MATCH with "values", in the input's dtype), so a call with
  // other values is refused.
  std::map<std::string, std::vector<double>> specialize;
  Precision precision = Precision::FP32;       // --precision: the autocast pass, and TF32 for the libraries
};

// Why a node runs on the host instead of in a kernel.
struct FallbackReason {
  std::string node, op_type;
  std::string reason;  // a partition reason (src/analysis/partition.h) or "no_kernel"
  std::string message;
};

// Wall time of each compile stage, in milliseconds. NVRTC and the host
// compiler run at the same time, so the stages add up to more than `total`.
// write_module measures `write` and adds it to `total` in the report.
struct CompileTimings {
  double load = 0, shapes = 0, passes = 0, schedule = 0, memory = 0, emit = 0, nvrtc = 0, host = 0, write = 0,
         total = 0;
};

// What max-autotune chose, for the manifest's features and the report.
struct AutotuneSummary {
  std::vector<std::string> sources;  // per kernel: measured | cache | heuristic
  int measured = 0, from_cache = 0, heuristic = 0;
  int budget_cut = 0;  // of those from the cache or by heuristics, the ones the tuning budget left unmeasured
  std::string note;    // one line: whose measurements were used, or why none were; what the budget cut
};

struct ModuleContents {
  std::string model;  // the model file as named on the command line
  // The file holding the graph the module computes (the model, or with --train
  // the training graph --emit-onnx writes; empty when no file holds it): what
  // `tcc run --check` compares with, recorded relative to the module directory.
  std::string reference;
  CompileOptions options;
  const CompileMode* mode = nullptr;
  const DeviceProfile* device = nullptr;
  const Graph* graph = nullptr;  // the fused graph the schedule was built from
  // The model's sequence and optional inputs and outputs, as the graph's tensors flatten them.
  std::vector<StructuredValue> structured_inputs, structured_outputs;
  const GuardSet* guards = nullptr;
  const Schedule* schedule = nullptr;
  const MemoryPlan* memory = nullptr;
  std::vector<PassRecord> passes;
  std::vector<FallbackReason> fallbacks;  // one per fallback step, in schedule order
  std::vector<KernelConfig> configs;      // per kernel, as emitted; empty: default_config
  std::optional<AutotuneSummary> autotune;  // set when the mode autotunes
  std::string cuda_source;
  std::vector<CudaBinary> binaries;
  std::string host_source;         // with options.host: host.cc
  std::vector<char> host_library;  // with options.host: host.so, built from it
  CompileTimings timings;
};

// The feature whose manifest entry carries the AutotuneSummary.
inline constexpr const char* kAutotuneFeature = "autotune_kernels";

// Writes the module directory `dir` (created; a previous module there is
// replaced, but a non-empty directory that holds no manifest.json is an
// InputError: tcc does not delete what it did not write): manifest.json,
// kernels.cu, the CUDA binaries, host.cc and host.so (with options.host),
// fallback.tir (when there are fallbacks), weights.bin (on its own thread,
// beside the rest), then report.json and report.md, whose timings add the
// write to `m.timings`. Failures are InputErrors naming the file.
void write_module_dir(const std::string& dir, const ModuleContents& m);

// The size a symbol without a hint takes where kernels run: the random inputs
// of `tcc run` / `tcc bench` and the shapes autotuning measures at, so a tuned
// choice is made for the sizes a benchmark then runs (a batch of 1 would not be).
constexpr int64_t kUnhintedRunSize = 8;

// The size of every symbol of g's inputs: the hint, or `unhinted` (the
// report's 1 by default), doubled while it leaves a dim of one of g's values
// negative or breaks a least size of `facts` (the guards a module adds for what
// its ops need), at most kMaxSizeDoublings times: wav2vec2's frame count
// samples//20-1 is -1 at samples=1, and samples=32 is the first power of two it
// takes. A hint for a symbol g lacks is an InputError naming `flag`, the option
// that gave it.
constexpr int kMaxSizeDoublings = 20;
std::map<std::string, int64_t> hinted_sizes(const Graph& g, const std::map<std::string, int64_t>& hints,
                                            int64_t unhinted = 1, const std::string& flag = "--shape-hint",
                                            const std::vector<ShapeFact>& facts = {});

}  // namespace tcc
