// Lowering: one fusion node (src/ops/fusion.h) to one kernel (codegen/kernel_ir.h).
#pragma once

#include <string>

#include "codegen/kernel_ir.h"
#include "src/ir/graph.h"

namespace tcc {

// Builds the kernel that computes `fusion` (a tcc::Fusion node whose body meets
// the contract of src/ops/fusion.h). Buffers are the fusion node's inputs, then
// its outputs, named after the enclosing graph's values. A body the lowering
// cannot express is an InternalError naming the fusion node and the body node
// (the fusion pass must not have formed it).
kir::Kernel lower_fusion(const Node& fusion, const std::string& kernel_name);

}  // namespace tcc
