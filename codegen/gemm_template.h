// tcc's own tensor-core GEMM: a CUDA kernel for a Gemm kernel's GemmDesc, the
// alternative to the cuBLASLt call that autotuning measures beside the
// library's algorithms (KernelConfig::tile names its tile shape).
//
// The operands are f32 and the result must stay f32-accurate, as cuBLASLt's
// CUBLAS_COMPUTE_32F is: the kernel runs on the tensor cores in TF32 with
// three products per step (3xTF32: each operand split into a TF32 "big" part
// and the TF32 rounding of its remainder; big*big + big*small + small*big),
// each step's products summed apart and added to the accumulators with f32
// adds (the tensor cores truncate as they accumulate), which keeps about the
// error of an f32 dot product at any K while using mma.sync (sm_80 and later,
// which every architecture tcc compiles for is).
//
// Shape of the kernel: one block per BM x BN tile of D (grid [ceil(m / BM),
// ceil(n / BN), batch]); its warps (WM x WN) each own a (BM/WM) x (BN/WN) part
// made of 16x8 mma.sync.m16n8k8 fragments. K advances BK at a time through a
// pipeline of two or three shared-memory stages: cp.async copies the next A
// and B tiles into one while the warps multiply another (static shared
// memory: every stage stays under 48 KB, which is why the large tiles take
// BK = 16 and only the smaller ones three stages).
// Loads are guarded, so every m, n and k is valid (out-of-range elements read
// zero); the epilogue applies alpha, beta * C, the bias along N and the
// activation, as GemmDesc describes cuBLASLt's, and stores only D's elements.
// Split-K (KernelConfig::split > 1, for few output tiles and a long K): the
// grid's z holds batch x split slices of K; each slice's partial goes to the
// kernel's workspace and the last slice of a tile sums them in slice order
// (deterministic) and runs the epilogue.
// Copies are 16 bytes where a row-major operand's rows and batch strides keep
// 16-byte alignment and its address is aligned (checked at run time), else 4.
// Not built: wgmma with TMA on sm_90, deeper pipelines in dynamic shared
// memory, ldmatrix, f16/bf16 operands.
#pragma once

#include <array>
#include <string>

#include "codegen/emit.h"
#include "codegen/kernel_ir.h"

namespace tcc {

struct GemmTile {
  int bm, bn, bk;        // block tile
  int warps_m, warps_n;  // warps along M and N
  int stages;            // shared-memory buffers of the K pipeline (2 or 3)
  constexpr int threads() const { return 32 * warps_m * warps_n; }
  // Floats of static shared memory: every stage's padded A and B tiles (at most 48 KB).
  constexpr int shared_floats() const { return stages * (bm * (bk + 4) + bk * (bn + 8)); }
};

// KernelConfig::tile t >= 1 selects kGemmTiles[t - 1]; KernelConfig::split
// from 1 to kMaxGemmSplit cuts K into that many slices. Three stages where
// they fit in static shared memory.
inline constexpr int kMaxGemmSplit = 16;
inline constexpr std::array<GemmTile, 8> kGemmTiles = {{
    {128, 128, 16, 2, 4, 2},
    {128, 64, 16, 2, 2, 2},
    {64, 128, 16, 2, 2, 2},
    {64, 64, 32, 2, 2, 2},
    {32, 64, 32, 1, 2, 2},
    {128, 64, 16, 2, 2, 3},
    {64, 128, 16, 2, 2, 3},
    {32, 64, 32, 1, 2, 3},
}};

// Why kernel k cannot run as the template ("" when it can): it must be a Gemm
// kernel whose buffers are all f32.
std::string gemm_template_refusal(const kir::Kernel& k);

// "tf32x3 128x128x16 2x4", "tf32x3 64x64x32 2x2 split=4": config's tile (>= 1)
// and split, as the manifest and the tables print them.
std::string gemm_template_text(const KernelConfig& config);

// The kernel's CUDA for config.tile and config.split (an `extern "C"
// __global__` function named k.name with emit_cuda's parameter convention,
// the workspace last when split), and the helpers every such kernel calls,
// which a translation unit includes once, followed by kMmaTf32Helper.
std::string emit_gemm_template(const kir::Kernel& k, const KernelConfig& config);
extern const char* const kGemmTemplateHelpers;
// tcc_mma_tf32, mma.sync.m16n8k8 over TF32 operands into f32: the template's
// and the attention's TF32 layout's (attention_tf32), once in a translation
// unit that holds either.
extern const char* const kMmaTf32Helper;

// Grid [ceil(m / BM), ceil(n / BN), batch * split]; with split, a workspace of
// tiles x (split x BM x BN floats + a uint32 counter), zeroed when allocated.
KernelLaunch gemm_template_launch(const kir::Kernel& k, const KernelConfig& config);

}  // namespace tcc
