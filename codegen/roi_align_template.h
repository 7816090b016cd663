// tcc's RoiAlign kernel: the CUDA and host code of a Kind::RoiAlign kernel
// (its RoiAlignDesc, codegen/kernel_ir.h), which runs tcc::RoiAlign, the
// RoiAlign whose samples per bin the decomposition cannot gather (an adaptive
// sampling_ratio of 0, too many taps, or a symbolic image).
//
// A thread per output element (roi, channel, ph, pw), in f64 with
// eval_roi_align's expressions and order: the region's scaled box (less half
// a pixel in half_pixel mode; at least one pixel a side in output_half_pixel
// mode), its bin size, the samples a side (sampling_ratio, or ceil(bin size)
// up to 10000 where it is 0), then each sample's four bilinear taps as
// roi_point places them (a point more than a pixel outside reads nothing,
// one nearer is moved onto the edge), summed and divided by the sample count
// (avg) or their largest weighted tap (max), in sample order. Products go
// through __dmul_rn on CUDA, so no fused multiply-add moves a sample. A batch
// index outside X, which the interpreter refuses, gives 0: the kernel cannot
// fail.
//
// CUDA: a block of threads over consecutive elements, the grid covering the
// domain. Host: one loop over the elements, the same lines.
#pragma once

#include "codegen/template_kernel.h"

namespace tcc {

// Kind::RoiAlign's hooks (codegen/template_kernel.h):
// - launch: blocks of the config's threads covering the domain;
// - default config: a block of 256 threads;
// - refusal: knobs other than block, blocks outside 32..1024 or not of whole warps;
// - configs: blocks of 64 to 512;
// - schedule: "block 256 an element"; precision: f64.
extern const TemplateKernel kRoiAlignTemplate;

}  // namespace tcc
