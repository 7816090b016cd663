// The compiler as a library: from a model file to a module in memory (the
// CompileResult: what the module directory of docs/MODULE.md holds), on a
// machine with or without a GPU, as straight-line stages (compile.cc), each
// named in kCompileStages:
//
//   load       the model, and with --train its training step
//   shapes     shape inference; explain's analysis: why nodes break the graph,
//              and what the module assumes about its inputs (guards)
//   passes     optimization, then fusion into tcc::Fusion nodes
//   schedule   one kernel per fusion (shared by identical layers), host
//              fallbacks for the rest
//   memory     one arena for the values between steps
//   autotune   a configuration per kernel (only in modes that autotune)
//   emit       CUDA C++ and host C++
//   build      NVRTC || the host compiler, at the same time
//   write      the module directory: manifest, binaries, weights, reports
//              (write_module; only when the request names an output)
//
// `tcc compile` is its flags, this, and a summary printed from the result;
// `tcc run`, `bench` and `profile` call it too (src/driver/run_support.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/memory_plan.h"
#include "codegen/module_writer.h"
#include "codegen/profiles.h"
#include "codegen/schedule.h"
#include "passes/pass_manager.h"
#include "src/autotune/tune.h"
#include "src/compiler/saved_activations.h"
#include "src/compiler/train_flags.h"

namespace tcc {

inline constexpr std::array<const char*, 9> kCompileStages = {
    "load", "shapes", "passes", "schedule", "memory", "autotune", "emit", "build", "write"};

struct CompileResult;

struct CompileRequest {
  std::string model;   // the model file: ONNX, .pt2 or tcc text IR
  // The module directory the write stage writes (write_module); empty: the
  // module stays in memory, and nothing is written.
  std::string output;
  CompileOptions options;
  TrainFlags train;
  int jobs = 0;              // threads for NVRTC and the host compiler; 0: one per hardware thread
  bool time_passes = false;  // the tables of the graph and kernel-IR passes' times and counters, on stderr
  std::string cache;         // tuning cache (modes that autotune)
  std::string device_name;   // whose cache entries to use without a GPU (modes that autotune)
  double tune_budget_s = autotune::kDefaultTuneBudgetSeconds;  // seconds of measuring (0: no limit)
  // Passes left out of the pipeline, to measure what one buys (fuse_attention,
  // say); decompose and fuse cannot be: the later stages read their output.
  std::vector<std::string> disabled_passes;
  // Called after each stage that runs, with its name (kCompileStages) and the
  // result as far as it is built: the main graph as that stage left it
  // (`model`), from `schedule` on the kernels (in kernel IR, after the
  // kernel-IR passes), from `memory` on the memory plan.
  std::function<void(const std::string& stage, const CompileResult& so_far)> print_after;
  // Called after each graph pass the passes stage runs, with the model as the
  // pass left it, and after each kernel-IR pass the schedule stage runs, with
  // each kernel as the pass left it (named after its fusion node).
  std::function<void(const PassInfo& pass, const Model& model)> after_graph_pass;
  kir::AfterKernelPass after_kernel_pass;
};

// The compiled module, and what the compile learned on the way.
struct CompileResult {
  std::string model_file;  // the request's model
  // The file holding the graph the module computes: the model, or with
  // --train the training graph --emit-onnx writes (empty when none does).
  std::string reference;
  CompileOptions options;
  const CompileMode* mode = nullptr;
  const DeviceProfile* device = nullptr;
  std::unique_ptr<Model> model;  // after the passes: the fused graph the module computes
  // The model's sequence and optional inputs and outputs, as the module's tensors flatten them.
  std::vector<StructuredValue> structured_inputs, structured_outputs;
  std::unique_ptr<ModelSignature> signature;  // the model's inputs as written, which the guards point at
  std::optional<GuardSet> guards;             // what the module assumes about its inputs
  Schedule schedule;
  MemoryPlan memory;
  std::vector<FallbackReason> fallbacks;  // one per fallback step, in schedule order
  int graph_breaks = 0;                   // of the fallbacks, those explain reports as graph breaks
  std::vector<KernelConfig> configs;       // per kernel, as emitted
  std::optional<AutotuneSummary> autotune;  // set when the mode autotunes
  std::string cuda_source;                  // kernels.cu
  std::vector<CudaBinary> binaries;         // per arch: a cubin, or the newest arch's PTX
  std::string host_source;                  // with options.host: host.cc, the kernels' CPU versions
  std::vector<char> host_library;           // with options.host: host.so, built from host_source
  std::optional<TrainingGraph> training;           // with --train
  std::optional<SavedActivations> activations;     // with --train: both choices' peaks
  bool save_all = false;  // with --train: the module keeps every activation (no recompute_activations)
  std::vector<PassRecord> passes;
  std::map<std::string, int64_t> sizes;  // each symbol at its --shape-hint, else 1
  // Per stage; `write` is writing the module directory (0 until written),
  // `total` everything up to that, without the wait for --emit-onnx's file
  // (`emit_onnx_wait`).
  CompileTimings timings;
  double emit_onnx_wait = 0;
};

// Compiles `request.model` into a module, written to `request.output` when
// one is named. The mode, device and tuning flags are checked before the model
// is read. Errors in the model or the request are InputErrors.
CompileResult compile(const CompileRequest& request);

// The write stage: the module directory `dir` of docs/MODULE.md from a
// compile's result (created; a previous module there is replaced; a non-empty
// directory that is not a module is an InputError). Sets the result's
// `write` time and adds it to `total`, as the reports record them.
void write_module(CompileResult& result, const std::string& dir);

}  // namespace tcc
