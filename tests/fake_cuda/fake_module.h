// Compiling a model for the fake driver (fake_cuda.h): shared by its tests
// and bench/host_overhead.cc.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "codegen/emit.h"
#include "codegen/module_writer.h"
#include "tests/unit/autotune/autotune_util.h"
#include "tests/unit/support/cli_util.h"

namespace tcc {

constexpr const char* kFakeDeviceName = "tcc fake CUDA device";

// A tuning cache, as the fake device would have measured it, that makes each
// GEMM of `model` tcc's template split along K (a generated kernel with a
// workspace, which the fake can run; cuBLASLt needs a real device), each
// reduction over columns its last column configuration (split into slices
// where it can: two-dimensional blocks and a workspace) and leaves every other
// kernel at its default.
inline void write_template_cache(const std::filesystem::path& model, const std::filesystem::path& cache) {
  ScheduledModel s = schedule_model(std::filesystem::relative(model, TCC_SOURCE_DIR).string());
  std::map<std::string, int64_t> sizes;  // every symbol at kUnhintedRunSize, as an unhinted compile tunes
  for (const Value* in : s.model->graph->inputs())
    for (const Dim& d : in->type().shape())
      if (!d.is_static()) sizes[d.str()] = kUnhintedRunSize;
  std::vector<autotune::CacheEntry> entries =
      cache_entries(s.schedule, sizes, {kFakeDeviceName, "sm_90", "13.0", "13.0"}, [](const kir::Kernel& k) {
        std::vector<KernelConfig> grid = autotune::candidates(k);
        return k.kind == kir::Kind::Gemm || reduces_columns(k) ? grid.back() : grid.front();
      });
  autotune::write_cache(cache.string(), entries);
}

// `tcc compile` of `model` into `dir` with `flags` added, its GEMMs
// templates through write_template_cache, as a process without a GPU runs it.
inline CliResult compile_for_fake_device(const std::filesystem::path& model, const std::filesystem::path& dir,
                                         const std::string& flags = "") {
  std::filesystem::path cache = dir.string() + ".tuning.json";
  write_template_cache(model, cache);
  return run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote(dir.string()) +
                     " --arch sm_90 --no-ptx --mode max-autotune --cache " + shell_quote(cache.string()) +
                     " --device-name " + shell_quote(kFakeDeviceName) + " " + flags,
                 kNoGpuEnv, 300);
}

}  // namespace tcc
