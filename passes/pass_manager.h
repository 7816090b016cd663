// Runs a pipeline of passes over a model, with the instrumentation every pass
// gets for free: the verifier after each pass, IR printing after each pass or
// after each change, per-pass timing and counters, and the `passes` log topic.
#pragma once

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace tcc {

struct PassManagerOptions {
#ifdef NDEBUG
  bool verify = false;  // tests and `tcc opt --verify-each` turn it on
#else
  bool verify = true;
#endif
  bool print_ir_after_all = false;
  bool print_ir_after_change = false;
  bool time_passes = false;
  bool fusion = true;  // PassContext::fusion of every pass
  Precision precision = Precision::FP32;  // PassContext::precision of every pass
  // Called after each pass (and its verification) with the model as the pass
  // left it: tcc compile --print-after's graph passes.
  std::function<void(const PassInfo& pass, const Model& m)> after_pass;
};

// What one pass did, for --time-passes.
struct PassRecord {
  std::string name;
  double wall_ms = 0;
  bool changed = false;
  PassStats stats;
};

// The pass list for `--passes=a,b` (or, when `spec` is empty, every pass),
// without the passes of phases after `stop_after`. An unknown pass or phase
// is an InputError listing the known ones.
std::vector<const PassInfo*> build_pipeline(const std::string& spec, std::optional<Phase> stop_after = {});
// Every pass's name in pipeline order, comma-separated, for help and error messages.
std::string known_passes();
// Parses a --stop-after= value; an unknown phase is an InputError.
Phase parse_phase_or_throw(const std::string& name);

// The --time-passes table of a pipeline's records: pass, wall ms, changed,
// counters, and the total (the kernel-IR passes' too, codegen/kernel_passes.h).
std::string timing_table(const std::vector<PassRecord>& records);

class PassManager {
 public:
  // IR dumps and the timing table go to `report` (stderr in `tcc opt`, so the
  // final IR on stdout stays parseable).
  PassManager(std::vector<const PassInfo*> passes, PassManagerOptions options, std::ostream& report);

  // Runs every pass in order on m.graph; returns whether any changed it. A
  // pass that leaves the IR malformed is an InternalError naming the pass.
  bool run(Model& m);

  const std::vector<PassRecord>& records() const { return records_; }
  // timing_table(records()).
  std::string timing_table() const;

 private:
  std::vector<const PassInfo*> passes_;
  PassManagerOptions options_;
  std::ostream& report_;
  std::vector<PassRecord> records_;
};

}  // namespace tcc
