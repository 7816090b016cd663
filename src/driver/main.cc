// tcc: a graph compiler and profiler. This file only parses the command line,
// sets up logging and maps failures to exit codes:
// 0 success, 1 a CI gate tripped, 2 usage or input error, 3 internal error.
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <iostream>
#include <map>

#include "src/driver/commands.h"
#include "src/log/log.h"

namespace {

void setup_logging(int verbosity) {
  auto logger = spdlog::stderr_color_mt("tcc");
  logger->set_pattern("[%^%l%$] %v");
  spdlog::set_default_logger(logger);
  tcc::set_verbosity(verbosity);
  if (const char* topics = std::getenv("TCC_LOG")) tcc::enable_log_topics(topics);
}

int run(int argc, char** argv) {
  CLI::App app{"tcc: a graph compiler and profiler for ONNX models and training graphs", "tcc"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tcc ") + TCC_VERSION);
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity, "More log output (-v info, -vv debug); TCC_LOG=topic,... selects topics");
  app.footer(
      "Exit codes: 0 success, 1 a CI gate tripped, 2 usage or input error, 3 internal error.\n"
      "TCC_LOG topics: graph_breaks, recompiles, guards, passes, codegen, perf_hints, all.");

  std::map<CLI::App*, tcc::CommandRunner> runners;
  for (const auto& spec : tcc::all_commands()) {
    CLI::App* cmd = app.add_subcommand(spec.name, spec.summary);
    runners[cmd] = spec.setup(*cmd);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : static_cast<int>(tcc::ExitCode::InputError);
  }
  setup_logging(verbosity);
  for (auto& [cmd, runner] : runners)
    if (cmd->parsed()) return static_cast<int>(runner());
  return static_cast<int>(tcc::ExitCode::InputError);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const tcc::Error& e) {
    std::cerr << "tcc: error: " << e.what() << "\n";
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::cerr << "tcc: error: out of memory\n";
    return static_cast<int>(tcc::ExitCode::InputError);
  } catch (const std::exception& e) {
    std::cerr << "tcc: internal error: " << e.what() << "\n";
    return static_cast<int>(tcc::ExitCode::InternalError);
  }
}
