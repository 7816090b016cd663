// What torch.compile itself logged: the structured logs torch writes when
// TORCH_TRACE=DIR is set (one `*.log` per process, read by tlparse too), for
// `tcc explain --torch-trace DIR`. Each record is a glog-style header line
// ending in one JSON object, followed by its payload, one tab-indented line
// each. tcc reads the torch version, the interned file names, the start of
// each frame's compile, graph-break reasons, the guards of each compile,
// recompile reasons and compilation metrics (with the cudagraph skip reason);
// it skips every other record.
//
// Graph breaks are reported once per source location and reason (torch logs a
// break again each time it recompiles the frame), in the kinds of explain's
// schema; recompiles carry torch's own guard failures ("0/0: lr == 0.1").
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tcc {

struct TorchCompile {
  std::string compile_id;  // "frame/compile", as torch numbers them
  std::string frame;       // the code object's name ("f", "torch_dynamo_resume_in_f_at_4")
  std::string source;      // "file:line" of its first line
  int64_t guards = 0, shape_env_guards = 0, ops = 0;
  double seconds = 0;  // dynamo's whole-frame compile time
  std::string failure;  // fail_type: fail_reason, when the compile failed
  // Why the compiled graph was not CUDA-graphed under mode="reduce-overhead"
  // (or the cudagraphs backend): torch's first line ("skipping cudagraphs due
  // to cpu device (arg0_1)."), and the user's "file:line" its stack names last;
  // empty when it was, or was not asked to be.
  std::string cudagraph_skip, cudagraph_skip_source;
  std::vector<std::string> guard_kinds;  // the guards of its tree ("TENSOR_MATCH", "EQUALS_MATCH", ...)
};

struct TorchGraphBreak {
  std::string kind;     // explain's reasons: unsupported_op, data_dependent_shape, ...
  std::string reason;   // torch's title of the break ("Data-dependent branching")
  std::string explanation, hint;
  std::string source;   // "file:line" of the user's code
  int times = 0;        // how often torch logged it (once per compile of its frame)
};

struct TorchRecompile {
  std::string compile_id;  // of the new compile
  std::string frame;
  std::vector<std::string> reasons;  // torch's guard failures, "F/C: <guard>", comments cut off
};

struct TorchTrace {
  std::string dir;
  std::string torch_version;  // "" when the logs do not say
  std::vector<TorchCompile> compiles;  // in log order
  std::vector<TorchGraphBreak> breaks;
  std::vector<TorchRecompile> recompiles;
};

// Reads every *.log of dir. A missing folder, a folder with no log, or a
// record whose JSON does not parse is an InputError naming the file and line.
TorchTrace read_torch_trace(const std::string& dir);

std::string torch_trace_text(const TorchTrace& t);
// The "torch_trace" object of explain's JSON (docs/explain.schema.json).
nlohmann::json torch_trace_json(const TorchTrace& t);

// The graph breaks and recompiles of t that `baseline` (an explain JSON
// report with a "torch_trace" object) does not have, one line each: a break is
// its source and reason, a recompile its frame and guard failures with numbers
// left out ("tensor 'x' size mismatch at index N. expected N, actual N").
std::vector<std::string> new_since_baseline(const TorchTrace& t, const nlohmann::json& baseline);

}  // namespace tcc
