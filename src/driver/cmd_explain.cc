#include "src/driver/commands.h"

namespace tcc {

CommandRunner setup_explain(CLI::App& cmd) {
  return not_built_yet(cmd, "graph-break and recompile analysis have not landed");
}

}  // namespace tcc
