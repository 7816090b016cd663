// What a compiled module and the runtime that loads it agree on beyond the
// manifest's JSON (docs/MODULE.md): kernel kinds, the library calls a Gemm or
// Conv kernel makes, and the host library's kernel signature. Written by
// codegen, read by src/runtime; it depends on the IR's dtypes and sizes only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/ir/dtype.h"
#include "src/ir/sym.h"

namespace tcc {

// How many of a library's ranked algorithms a gemm or conv kernel may choose
// from (its manifest's "algo", the rank the runtime asks the library for).
inline constexpr int kLibraryAlgos = 8;

enum class KernelKind { Pointwise, Reduction, Gemm, Conv, Attention, TopK, Recurrence, Nms, RoiAlign };
// "pointwise", "reduction", "gemm", "conv", "attention", "topk", "recurrence", "nms", "roi_align"
const char* kernel_kind_name(KernelKind kind);
std::optional<KernelKind> parse_kernel_kind(std::string_view name);

// How the runtime calls cuBLASLt for a Gemm kernel: D = act(alpha * op(A) op(B) + beta * C + bias).
// Row-major: A is stored m x k with row stride lda (k x m when trans_a), B k x n
// with row stride ldb (n x k when trans_b), D m x n with row stride ldd.
// All strides in elements; batch strides 0 broadcast an operand over the batch.
struct GemmDesc {
  int a = -1, b = -1;          // buffers
  bool trans_a = false, trans_b = false;
  SymExpr batch = SymExpr::constant(1), m, n, k;
  SymExpr lda, ldb, ldd, stride_a, stride_b, stride_d;
  double alpha = 1, beta = 0;
  int bias = -1;               // a buffer of N elements, or -1
  int residual = -1;           // C (same layout as D), or -1
  std::string activation = "none";  // none | relu | gelu_tanh
};

// How the runtime calls cuDNN for a Conv kernel: y = act(conv(x, w) + bias + residual),
// channels first, row-major and contiguous: x [n, c, in...], w [k, c / groups,
// kernel...], y [n, k, out...]. Output channel q reads input channels of group
// q / (k / groups); the input position of output o and tap r along a spatial dim
// is o * stride - pad + r * dilation, and taps outside the input read zero.
struct ConvDesc {
  int x = -1, w = -1;          // buffers
  int bias = -1;               // a buffer of k elements, or -1
  int residual = -1;           // y's shape, or -1
  std::string activation = "none";  // none | relu
  SymExpr n, c, k;
  std::vector<SymExpr> in, out;                                  // spatial dims of x and y
  std::vector<int64_t> kernel, strides, dilations, pads;         // per spatial dim; pads at both ends
  int64_t groups = 1;

  // Whether anything follows the convolution: a bias, a residual or Relu.
  bool has_epilogue() const { return bias >= 0 || residual >= 0 || activation != "none"; }
};

// The kernel that applies a Conv kernel's epilogue after cuDNN, where no
// precompiled engine fuses it into the convolution:
// y = act(y + bias[channel] + residual) in place, in y's compute type (f32 for
// f16 and bf16), bias and residual null where absent, relu 0 or 1. A module's
// kernels.cu and host.so hold one per dtype of its Conv kernels with an
// epilogue, named conv_epilogue_kernel(dtype): "tcc_conv_epilogue_f32". CUDA:
// `NAME(T* y, const T* bias, const T* residual, int64_t planes, int64_t plane,
// int64_t channels, int64_t relu)` over y's planes = n * channels rows of
// `plane` elements, a block row per plane (grid x) and grid y blocks striding
// along it; host: a HostKernelFn with buffers {y, bias, residual} and sizes
// {planes, plane, channels, relu}.
std::string conv_epilogue_kernel(DType y);

// A host-library kernel: `extern "C" void NAME(void* const* buffers, const int64_t* sizes)`,
// buffers and sizes in the kernel's parameter order (a kernel that reads the
// random offset finds its pointer after the buffers).
using HostKernelFn = void (*)(void* const* buffers, const int64_t* sizes);

// The kernel that kernels.cu and host.so hold besides the module's own when
// some of those read the random offset (docs/MODULE.md, "Random ops"): one
// thread adding 1 to the u64 offset, launched after each call's steps so that
// a captured CUDA graph advances it at every replay. CUDA:
// `NAME(uint64_t* ro)`, one block of one thread; host: a HostKernelFn with the
// offset's address as buffers[0].
inline constexpr const char* kRandomOffsetAdvance = "tcc_advance_random_offset";

}  // namespace tcc
