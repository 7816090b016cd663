// GPU measurement commands. They need the CUDA runtime and CUPTI profiler,
// which are tracked by the issue "GPU runtime, CUPTI profiler and performance
// report".
#include "src/driver/commands.h"

namespace tcc {

CommandRunner setup_bench(CLI::App& cmd) {
  return not_built_yet(cmd, "the GPU runtime and CUPTI profiler have not landed");
}

CommandRunner setup_profile(CLI::App& cmd) {
  return not_built_yet(cmd, "the GPU runtime and CUPTI profiler have not landed");
}

}  // namespace tcc
