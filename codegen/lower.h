// Lowering: one fusion node (src/ops/fusion.h) to one kernel (codegen/kernel_ir.h).
#pragma once

#include <string>

#include "codegen/kernel_ir.h"
#include "passes/pass.h"
#include "src/ir/graph.h"

namespace tcc {

// Builds the kernel that computes `fusion` (a tcc::Fusion node whose body meets
// the contract of src/ops/fusion.h). Buffers are the fusion node's inputs, then
// its outputs, named after the enclosing graph's values. A body the lowering
// cannot express is an InternalError naming the fusion node and the body node
// (the fusion pass must not have formed it). Under Precision::TF32 an
// attention forward over f32 operands is marked AttentionDesc::tf32.
kir::Kernel lower_fusion(const Node& fusion, const std::string& kernel_name,
                         Precision precision = Precision::FP32);

}  // namespace tcc
