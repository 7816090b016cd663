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

#include <string>
#include <vector>

#include "codegen/emit.h"
#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"

namespace tcc {

// The config's CUDA function (`extern "C" __global__` named k.name with
// emit_cuda's parameter convention); the config must pass roi_align_refusal.
std::string emit_roi_align_cuda(const kir::Kernel& k, const KernelConfig& c);
// The kernel's host function, with emit_host's convention.
std::string emit_roi_align_host(const kir::Kernel& k);
// Blocks of the config's threads covering the domain.
KernelLaunch roi_align_launch(const kir::Kernel& k, const KernelConfig& c);

// Without tuning: a block of 256 threads.
KernelConfig roi_align_default_config(const kir::Kernel& k);
// Why the config cannot run k ("" where it can): knobs other than block,
// blocks outside 32..1024 or not of whole warps.
std::string roi_align_refusal(const kir::Kernel& k, const KernelConfig& c);
// Every config autotuning measures: blocks of 64 to 512.
std::vector<KernelConfig> roi_align_configs(const kir::Kernel& k);
// The layout in words, for the manifest and reports: "block 256 an element".
std::string roi_align_schedule(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc
