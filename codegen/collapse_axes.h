// A kernel-IR pass: merge neighbouring domain axes that every access steps
// through as one.
//
// Each coordinate an emitted kernel computes costs a division and a modulo
// per element (64-bit where the extent is symbolic), so [b, s, 768] copied in
// order should be one axis of b*s*768 elements, and a bias gradient summed over
// [b, s] one reduced axis of b*s. Axes d and d + 1 merge when every load's and
// store's stride along d is its stride along d + 1 times the extent of d + 1
// (both zero for a broadcast): the flat index is then the same affine function
// of the merged coordinate. Axes on the two sides of a reduction's outer /
// reduced boundary stay apart, as do axes a Coord instruction reads; gemm and
// conv kernels, whose axes have roles (GemmDesc, ConvDesc), are left alone.
#pragma once

#include "codegen/kernel_ir.h"

namespace tcc::kir {

Kernel collapse_axes(Kernel k);

}  // namespace tcc::kir
