#include "src/driver/commands.h"

#include <iostream>

namespace tcc {

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> commands = {
      {"explain", "Report graph breaks, guard sets and recompilations (CI gates)", setup_explain},
      {"compile", "Compile a model into a loadable CUDA module", setup_compile},
      {"opt", "Run optimization passes and print the IR between them", setup_opt},
      {"run", "Execute a model on the GPU (--host: the module on the CPU; --reference: the interpreter)", setup_run},
      {"bench", "Benchmark a model on the GPU across modes", setup_bench},
      {"profile", "Profile a model on the GPU with CUPTI and write a report", setup_profile},
      {"autotune", "Benchmark candidate kernels on the GPU and fill the tuning cache", setup_autotune},
  };
  return commands;
}

CommandRunner not_built_yet(CLI::App& cmd, const std::string& what) {
  cmd.allow_extras();
  std::string name = cmd.get_name();
  return [name, what]() {
    std::cerr << "tcc " << name << ": not built yet: " << what << "\n";
    return ExitCode::InputError;
  };
}

}  // namespace tcc
