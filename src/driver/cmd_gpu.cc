// GPU measurement commands. They need the CUDA runtime and CUPTI profiler,
// which are tracked by the issue "max-autotune and tcc autotune".
#include "src/driver/commands.h"

namespace tcc {

CommandRunner setup_autotune(CLI::App& cmd) {
  return not_built_yet(cmd, "autotuning needs the GPU runtime, which has not landed");
}

}  // namespace tcc
