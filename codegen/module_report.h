// The compile report of a module directory: report.json (for tools) and
// report.md (for people): the kernels with their schedules and roofline
// estimates at the hinted sizes, which nodes each step runs, views, binding
// constants, fallbacks, the memory plan, the mode's features, autotuning's
// choices and, last, the compile's timings.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "codegen/module_facts.h"

namespace tcc {

nlohmann::ordered_json report_json(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t);
std::string report_md(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t);

}  // namespace tcc
