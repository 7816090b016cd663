// tcc's NonMaxSuppression kernel: the CUDA and host code of a Kind::Nms
// kernel (its NmsDesc, codegen/kernel_ir.h), which runs tcc::NmsSelect.
//
// The algorithm, per (batch, class), in f64 as the interpreter's eval_nms:
// 1. order: each box above score_threshold (NaN scores as -inf) finds its
//    rank among those boxes, how many come before it (a higher score, or an
//    equal one at a lower index), and writes its index there: the m boxes
//    sorted with no sort, a pass over the row per box;
// 2. mask: row i of the suppression bitmask, 64-bit words over the sorted
//    boxes after i, bit j set where box i, kept, would suppress box j (both
//    have area, their union is positive and IoU exceeds iou_threshold), every
//    (row, word) computed independently;
// 3. scan: the greedy selection over the rows in order, the removed boxes a
//    bitmask of words: box i is selected unless its bit is set, then its row
//    is or-ed in, until max_output_boxes_per_class are selected. The selected
//    boxes go to their places, -1 after the count, and the count.
//
// CUDA: a block per (batch, class), its threads taking boxes (1) and
// (row, word) pairs (2) in turn, __syncthreads between the phases; one warp
// scans (3), each lane holding every 32nd word of the removed mask and the
// word of box i shuffled from its lane. The sorted indices and the mask live
// in the launch's workspace, N + N * W + W words a block for N boxes and
// W = ceil(N / 64) words a row, each written before it is read. Products go
// through __dmul_rn, so no fused multiply-add changes a decision.
//
// Host: the same phases per (batch, class), one thread, the workspace
// allocated per call.
#pragma once

#include "codegen/template_kernel.h"

namespace tcc {

// Kind::Nms's hooks (codegen/template_kernel.h):
// - launch: grid [batch * classes] of the config's block, and the workspace
//   (the CUDA function's last parameter);
// - default config: a block of 256 threads;
// - refusal: knobs other than block, blocks outside 32..1024 or not of whole warps;
// - configs: blocks of 64 to 512;
// - schedule: "block 256 a class"; precision: f64.
extern const TemplateKernel kNmsTemplate;

}  // namespace tcc
