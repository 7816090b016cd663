// The subcommands of the `tcc` driver. Each lives in its own cmd_<name>.cc and
// registers itself in commands.cc; main.cc only parses and dispatches.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/module_writer.h"
#include "passes/pass.h"
#include "src/diag/errors.h"

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
CommandRunner setup_kir(CLI::App& cmd);
CommandRunner setup_explain(CLI::App& cmd);
CommandRunner setup_compile(CLI::App& cmd);
CommandRunner setup_bench(CLI::App& cmd);
CommandRunner setup_profile(CLI::App& cmd);
CommandRunner setup_autotune(CLI::App& cmd);
CommandRunner setup_ops(CLI::App& cmd);

// A command's text output: to stdout when `path` is empty or "-", else to the
// file (an InputError naming it when it cannot be written).
void write_output(const std::string& path, const std::string& text);

// --precision on the commands that compile a model (compile, run, bench,
// profile, autotune, opt): fp32 (the default), tf32, fp16 or bf16, checked
// by CLI11 as the flags are parsed.
void add_precision_option(CLI::App& cmd, std::string& precision);
// The Precision of a value add_precision_option accepted.
Precision precision_of(const std::string& name);

// "a,b,,c" -> {"a", "b", "", "c"}.
std::vector<std::string> split(const std::string& s, char sep);

// Sizes of symbolic dims as flags give them (--shape-hint, --shapes):
// "SYMBOL=SIZE[,SYMBOL=SIZE...]" (empty: none); InputError naming `flag` otherwise.
std::map<std::string, int64_t> parse_sizes(const std::string& spec, const std::string& flag);

// --shape-hint of tcc compile (and run, which compiles): sizes of symbols as
// parse_sizes reads them, and the structure of sequence and optional inputs
// (NAME=seq(N), NAME=present, NAME=absent: src/compiler/structured_io.h).
void parse_shape_hints(const std::string& spec, CompileOptions& options);

// --specialize on the commands that compile a model (compile, run, bench,
// profile), once per input: "NAME=V[,V...]" (numbers, row-major; "NAME=" for
// an input of no elements), which parse_specializations reads into
// options.specialize. A command that `takes_inputs` (--inputs) says its
// inputs must hold the values.
void add_specialize_option(CLI::App& cmd, std::vector<std::string>& specs, bool takes_inputs);
void parse_specializations(const std::vector<std::string>& specs, CompileOptions& options);

}  // namespace tcc
