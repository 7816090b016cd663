// Views that bring attention spelled over other ranks into the 4-D form
// fuse_attention matches (passes/fuse_attention.cc).
#pragma once

#include "passes/pass.h"
#include "src/ir/graph.h"

namespace tcc {

// Each Softmax over the last axis of 5-D scores [B, G, H, Sq, Skv] (MaxViT's
// windows and grids, G, as a second batch axis) between the products of Q
// and K and the product with V -- MatMuls, K^T a Transpose of K, or the
// Einsums torchvision writes ("BGHID,BGHJD->BGHIJ", "BGHIJ,BGHJD->BGHID") --
// with at most a float mask added that is the same for every B and G, is
// rewritten as the same computation over [B*G, H, ...] views (tcc::Reshape)
// of Q, K, V and the mask, its output viewed back to 5-D. The products and
// Softmax read and write the same elements in the same order. Returns
// whether anything changed; counts `viewed_as_4d`.
bool view_5d_attention(Graph& g, PassStats& stats);

}  // namespace tcc
