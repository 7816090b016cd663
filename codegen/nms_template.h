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

#include <string>
#include <vector>

#include "codegen/emit.h"
#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"

namespace tcc {

// The config's CUDA function (`extern "C" __global__` named k.name with
// emit_cuda's parameter convention, the workspace last); the config must pass
// nms_refusal.
std::string emit_nms_cuda(const kir::Kernel& k, const KernelConfig& c);
// The kernel's host function, with emit_host's convention.
std::string emit_nms_host(const kir::Kernel& k);
// Grid [batch * classes] of the config's block, and the workspace.
KernelLaunch nms_launch(const kir::Kernel& k, const KernelConfig& c);

// Without tuning: a block of 256 threads.
KernelConfig nms_default_config(const kir::Kernel& k);
// Why the config cannot run k ("" where it can): knobs other than block,
// blocks outside 32..1024 or not of whole warps.
std::string nms_refusal(const kir::Kernel& k, const KernelConfig& c);
// Every config autotuning measures: blocks of 64 to 512.
std::vector<KernelConfig> nms_configs(const kir::Kernel& k);
// The layout in words, for the manifest and reports: "block 256 a class".
std::string nms_schedule(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc
