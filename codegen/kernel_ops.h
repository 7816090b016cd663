// Which graph nodes a generated kernel can compute. The one table the fusion
// pass (what may join a group) and the lowering (what it must handle) share.
#pragma once

#include "src/ir/graph.h"

namespace tcc {

enum class KernelRole {
  None,         // not generated: runs as a library call of its own or on the host
  Pointwise,    // elementwise with broadcasting (Add, Exp, Gelu, Cast, Where, Clip, ...)
  Reduction,    // ReduceSum/Mean/Max/Min/Prod over constant axes, Softmax/LogSoftmax/LayerNorm
                // (decomposed before fusion), ArgMax excluded
  Movement,     // Reshape / tcc::Reshape, Transpose, Unsqueeze, Squeeze, Expand / tcc::Expand,
                // Slice with constant arguments / tcc::Slice, Identity: an affine view of its data input
  Contraction,  // MatMul, Gemm: cuBLASLt on the GPU, a loop on the host
};

// The role of n, given its op, attributes, dtypes and constant arguments. A node
// whose input or output types are not fully known tensors is None.
KernelRole kernel_role(const Node& n);

}  // namespace tcc
