// Choosing a KernelConfig for every kernel of a schedule: measured on the GPU
// when a Measurer is given, else taken from the tuning cache, else the
// emitter's heuristics (default_config). Shared by `tcc autotune` and
// `tcc compile --mode max-autotune`.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/profiles.h"
#include "src/autotune/tuning_cache.h"

namespace tcc::autotune {

// One kernel's buffers on the device, ready to time configurations of it.
class KernelBench {
 public:
  virtual ~KernelBench() = default;
  // Prepares the configs about to be timed (compiling them in parallel).
  virtual void precompile(const std::vector<KernelConfig>& configs) = 0;
  // Median microseconds of one launch with `c`; nullopt with `note` set when
  // the candidate fails to compile or run, or its output differs from the
  // first config timed (the default), which makes it ineligible.
  virtual std::optional<double> time_us(const KernelConfig& c, std::string& note) = 0;
};

// The GPU's side of tuning (src/autotune/kernel_timer.h implements it).
struct Measurer {
  DeviceKey device;
  std::function<std::unique_ptr<KernelBench>(const kir::Kernel&, const std::map<std::string, int64_t>& sizes)> bench;
};

struct CandidateRow {
  KernelConfig config;
  std::optional<double> time_us;  // measured now, or the cache's time for the chosen one
  std::string note;               // why it has no time
};

struct KernelChoice {
  enum class Source {
    Measured,   // benchmarked now
    Cache,      // a cache entry for this device and signature
    Heuristic,  // default_config (a library's first choice): no GPU and no usable entry
  };
  Source source = Source::Heuristic;
  KernelConfig config;
  std::string op;                   // op_summary
  std::string signature;
  std::vector<CandidateRow> rows;   // every candidate, measured or not, the default first
  std::optional<double> default_time_us;  // measured or cached
  std::string note;                 // a cache entry that did not fit, a failed default...
};

// What `--tune-budget` defaults to: seconds of measuring (candidates' NVRTC
// builds and timings) in which a model of the zoo's size tunes its heaviest
// kernels, so a cold max-autotune compile ends within about a minute.
inline constexpr double kDefaultTuneBudgetSeconds = 45;

struct TuneOptions {
  const DeviceProfile* device = &default_device();  // the heuristic's and the grid's default_config
  const std::vector<CacheEntry>* cache = nullptr;  // entries read from --cache (and imports)
  std::string device_name;  // without a GPU: whose cache entries to use (--device-name)
  Measurer* measurer = nullptr;  // null: no GPU
  bool measure_cached = false;   // with a GPU: re-measure kernels the cache already has
  bool refine = true;            // coordinate descent around the best of the grid
  std::function<void(size_t done, size_t total)> progress;
  // Seconds the measuring may take in all (0: no limit). Kernels are measured
  // in order of their estimated share of the step (bytes moved and FLOPs at
  // `sizes`), so a budget buys the heaviest first; a kernel whose signature an
  // earlier one of this run had is tuned once. Once the budget is spent, no
  // further candidate is timed: a kernel being measured keeps its best so far,
  // the rest their cache entry or default (cut_by_budget counts them).
  double budget_s = 0;
  std::function<double()> clock;  // seconds, monotonic; unset: std::chrono::steady_clock
};

struct TuneResult {
  std::vector<KernelConfig> configs;  // one per kernel
  std::vector<KernelChoice> kernels;  // one per kernel
  std::vector<CacheEntry> measured;   // new cache entries (only measured ones)
  std::string device_note;            // one line: whose entries were used, or why none
  int from_cache = 0, by_measurement = 0, by_heuristic = 0;
  int cut_by_budget = 0;   // kernels the budget left unmeasured (counted in from_cache or by_heuristic)
  int shared = 0;          // kernels that took an earlier kernel's measurement (counted in by_measurement)
  double spent_s = 0;      // seconds the tuning took
};

// The note of a candidate or kernel the budget left unmeasured.
std::string budget_note(double budget_s);
// "; 41.2 s of the 45 s budget, 3 kernels left unmeasured" (empty without a budget).
std::string budget_summary(const TuneResult& r, double budget_s);

TuneResult tune_kernels(const std::vector<kir::Kernel>& kernels, const std::map<std::string, int64_t>& sizes,
                        const TuneOptions& options);

const char* source_name(KernelChoice::Source s);

}  // namespace tcc::autotune
