// A bundled model scheduled as `tcc compile` and `tcc autotune` schedule it,
// so that tests lower, print and tune real kernels.
#pragma once

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>

#include "codegen/schedule.h"
#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/shape/shape_inference.h"

namespace tcc {

struct ScheduledModel {
  std::unique_ptr<Model> model;
  Schedule schedule;
};

// `path` relative to the source tree ("tests/fixtures/gpt2_block.onnx", "tests/kernels/softmax.tir"), or absolute;
// `precision` as --precision gives it.
inline ScheduledModel schedule_model(const std::string& path, Precision precision = Precision::FP32) {
  ScheduledModel s;
  s.model = load_model((std::filesystem::path(TCC_SOURCE_DIR) / path).string());
  infer_shapes(*s.model->graph);
  std::ostringstream log;
  PassManagerOptions options;
  options.precision = precision;
  PassManager(build_pipeline("", Phase::Fuse), options, log).run(*s.model);
  s.schedule = build_schedule(*s.model->graph, default_device(), {}, precision);
  return s;
}

// The first kernel of `kind`, or null.
inline const kir::Kernel* first_kernel(const Schedule& s, kir::Kind kind) {
  for (const kir::Kernel& k : s.kernels)
    if (k.kind == kind) return &k;
  return nullptr;
}

}  // namespace tcc
