// The report writers of `tcc bench --report DIR` and `tcc profile`, one file
// each, all derived from one Summary (measurement.h) so they never disagree:
//   report.json  everything, for tools (fields in docs/PROFILING.md)
//   report.md    the mode comparison table, warnings and the top kernels
//   report.html  one self-contained page with inline SVG charts (no network)
//   trace.json   Chrome trace events of the traced kernels, for Perfetto
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/profiler/measurement.h"

namespace tcc::profiler {

// Kernel rows report.md and report.html list per mode.
constexpr size_t kTopKernels = 10;

nlohmann::json report_json(const Summary& s);
std::string report_md(const Summary& s);
std::string report_html(const Summary& s);
nlohmann::json trace_json(const Measurement& m);

// Writes the four reports and the measurement itself (measurement.json) into
// dir, creating it. InputError when dir cannot be written.
void write_reports(const std::string& dir, const Measurement& m);

// Formatting the writers share: v with `digits` decimals; names joined by ", ".
std::string fixed(double v, int digits);
std::string joined(const std::vector<std::string>& items);
// One sentence on what the steps/s column counts: steps enqueued back to back,
// or, in a recording without such batches, one over the median latency.
std::string steps_per_s_basis(const Summary& s);

// reduce-overhead's CUDA graph counts in one sentence: "CUDA graphs: 1
// captured, 269 replayed, 0 evicted", and why steps ran uncaptured, if any did.
std::string graphs_text(const GraphCounts& g);

// Idle gaps report.md and report.html list per traced mode.
constexpr size_t kTopGaps = 5;
// The step-time accounting's host steps and largest idle gaps, a sentence
// each (none where the step has neither).
std::vector<std::string> step_time_notes(const StepTime& t);

// The mode table and warnings as the terminal shows them after a run.
std::string mode_table_text(const Summary& s);

}  // namespace tcc::profiler
