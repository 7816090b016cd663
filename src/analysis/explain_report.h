// `tcc explain`'s analysis and its two renderings: text in the spirit of
// torch._dynamo.explain and TORCH_LOGS, and JSON whose schema docs/EXPLAIN.md
// documents (CI scripts rely on its top-level keys).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "src/analysis/advice.h"
#include "src/analysis/partition.h"
#include "src/analysis/recompile_simulator.h"
#include "src/analysis/training_frames.h"

namespace tcc {

struct ExplainOptions {
  std::string trace_path;           // empty: no simulation
  std::vector<std::string> mark_dynamic;  // "INPUT:DIM"
  std::vector<std::string> mark_unbacked;  // "INPUT:DIM"
  std::vector<std::string> mark_static;    // "INPUT:DIM"
  // A training step (explain --train): its graphs are torch's frames for it (training_frames.h).
  std::optional<TrainingStepFrames> training;
  SimOptions sim;
};

struct ExplainReport {
  std::string model_path;
  std::string trace_path;  // empty without a trace
  Partition partition;
  ModelSignature signature;
  std::vector<std::vector<GuardSet>> guards;  // per graph: its variants (or its declared guards)
  std::optional<SimResult> sim;               // with a trace
  std::vector<Advice> advice;
  SimOptions options;
};

// Analyzes a loaded model (runs shape inference on it). Bad --mark-dynamic
// specs and traces are InputErrors.
ExplainReport explain_model(Model& model, const ExplainOptions& opts, const OpRegistry& registry);

std::string render_text(const ExplainReport& r);
nlohmann::json render_json(const ExplainReport& r);

}  // namespace tcc
