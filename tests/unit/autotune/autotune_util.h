// Shared by the autotune tests: a bundled model scheduled as `tcc compile`
// and `tcc autotune` schedule it, so tests tune real kernels.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/schedule.h"
#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/autotune/candidates.h"
#include "src/autotune/signature.h"
#include "src/autotune/tuning_cache.h"
#include "src/shape/shape_inference.h"

namespace tcc {

struct ScheduledModel {
  std::unique_ptr<Model> model;
  Schedule schedule;
};

// `path` relative to the source tree ("tests/fixtures/gpt2_block.onnx", "tests/kernels/softmax.tir"), or absolute.
inline ScheduledModel schedule_model(const std::string& path) {
  ScheduledModel s;
  s.model = load_model((std::filesystem::path(TCC_SOURCE_DIR) / path).string());
  infer_shapes(*s.model->graph);
  std::ostringstream log;
  PassManager(build_pipeline("", Phase::Fuse), PassManagerOptions{}, log).run(*s.model);
  s.schedule = build_schedule(*s.model->graph);
  return s;
}

// The first kernel of `kind`, or null.
inline const kir::Kernel* first_kernel(const Schedule& s, kir::Kind kind) {
  for (const kir::Kernel& k : s.kernels)
    if (k.kind == kind) return &k;
  return nullptr;
}

// A tuning cache's entries for every kernel of `s`, as `device` would have
// measured them at `sizes`: each kernel at the configuration `choose` picks,
// 2 us where its default took 3.
inline std::vector<autotune::CacheEntry> cache_entries(const Schedule& s, const std::map<std::string, int64_t>& sizes,
                                                       const autotune::DeviceKey& device,
                                                       const std::function<KernelConfig(const kir::Kernel&)>& choose) {
  std::vector<autotune::CacheEntry> out;
  for (const kir::Kernel& k : s.kernels) {
    autotune::CacheEntry e;
    e.device = device;
    e.signature = autotune::kernel_signature(k, sizes);
    e.op = autotune::op_summary(k, sizes);
    e.config = choose(k);
    e.time_us = 2;
    e.default_time_us = 3;
    e.candidates = static_cast<int>(autotune::candidates(k).size());
    out.push_back(e);
  }
  return out;
}

}  // namespace tcc
