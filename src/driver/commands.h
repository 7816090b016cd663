// The subcommands of the `tcc` driver. Each lives in its own cmd_<name>.cc and
// registers itself in commands.cc; main.cc only parses and dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "src/diag/errors.h"

namespace tcc {

struct AutotuneSummary;
struct CompileMode;

using CommandRunner = std::function<ExitCode()>;

struct CommandSpec {
  const char* name;
  const char* summary;
  // Declares the subcommand's options on `cmd` and returns what runs it.
  std::function<CommandRunner(CLI::App& cmd)> setup;
};

const std::vector<CommandSpec>& all_commands();

// Setup functions, one per command file.
CommandRunner setup_run(CLI::App& cmd);
CommandRunner setup_opt(CLI::App& cmd);
CommandRunner setup_kir(CLI::App& cmd);
CommandRunner setup_explain(CLI::App& cmd);
CommandRunner setup_compile(CLI::App& cmd);
CommandRunner setup_bench(CLI::App& cmd);
CommandRunner setup_profile(CLI::App& cmd);
CommandRunner setup_autotune(CLI::App& cmd);

// "a,b,,c" -> {"a", "b", "", "c"}.
std::vector<std::string> split(const std::string& s, char sep);

// Sizes of symbolic dims as flags give them (--shape-hint, --shapes):
// "SYMBOL=SIZE[,SYMBOL=SIZE...]" (empty: none); InputError naming `flag` otherwise.
std::map<std::string, int64_t> parse_sizes(const std::string& spec, const std::string& flag);

// Whether the mode turns on kernel autotuning (max-autotune and its variants).
bool mode_autotunes(const CompileMode& m);

// The tuning step of `tcc compile` in a mode that autotunes (cmd_autotune.cc):
// one config per kernel, measured on the GPU when there is one (new
// measurements go to the cache at `cache_path` when given), else from the
// cache, else default_config; `summary` says which and why.
std::vector<KernelConfig> compile_autotune(const std::vector<kir::Kernel>& kernels,
                                           const std::map<std::string, int64_t>& sizes, const std::string& cache_path,
                                           const std::string& device_name, AutotuneSummary& summary);


}  // namespace tcc
