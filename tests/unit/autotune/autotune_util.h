// Shared by the autotune tests: tuning caches for the kernels of a bundled
// model scheduled as `tcc compile` schedules it (schedule_util.h), so tests
// tune real kernels.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "src/autotune/candidates.h"
#include "src/autotune/signature.h"
#include "src/autotune/tuning_cache.h"
#include "tests/unit/codegen/schedule_util.h"

namespace tcc {

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
