#include "src/driver/commands.h"

namespace tcc {

CommandRunner setup_compile(CLI::App& cmd) {
  return not_built_yet(cmd, "code generation and module emission have not landed");
}

}  // namespace tcc
