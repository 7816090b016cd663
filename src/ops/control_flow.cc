#include "src/ops/families.h"
#include "src/ops/op_registry.h"

namespace tcc {

void register_control_flow_ops(OpRegistry& r) {}

}  // namespace tcc
