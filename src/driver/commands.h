// The subcommands of the `tcc` driver. Each lives in its own cmd_<name>.cc and
// registers itself in commands.cc; main.cc only parses and dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "src/diag/diagnostics.h"

namespace tcc {

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
CommandRunner setup_explain(CLI::App& cmd);
CommandRunner setup_compile(CLI::App& cmd);
CommandRunner setup_bench(CLI::App& cmd);
CommandRunner setup_profile(CLI::App& cmd);
CommandRunner setup_autotune(CLI::App& cmd);

// For commands whose implementation has not landed: accepts any arguments,
// says so plainly and exits 2.
CommandRunner not_built_yet(CLI::App& cmd, const std::string& what);

}  // namespace tcc
