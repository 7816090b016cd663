// Gemm and Conv kernels as library calls: cuBLASLt (libcublasLt.so.13) and
// cuDNN (libcudnn.so.9), opened with dlopen on first use; cublasLt.h and
// cudnn.h are included for their types only. Each kernel keeps its descriptors
// and algorithm while its problem stays the same: the heuristic query costs
// more than a small matmul's launch, and a step enqueues the same problems
// every time.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "cuda_driver.h"
#include "cudnn_conv.h"
#include "module.h"

namespace tcc::runtime {

// A Gemm kernel's problem at one binding.
struct GemmProblem {
  int64_t batch = 0, m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldd = 0, stride_a = 0, stride_b = 0, stride_d = 0;
};

GemmProblem gemm_problem(const KernelInfo& k, const Binding& b);

ConvProblem conv_problem(const KernelInfo& k, const Binding& b);

// The library handles, workspace and per-kernel plans of one module (or one
// LibraryRunner) in one CUDA context.
class LibraryCalls {
 public:
  // D = act(alpha * op(A) op(B) + beta * C + bias), row-major. cuBLASLt is
  // column-major, and a row-major matrix is its column-major transpose, so the
  // call computes D^T = op(B)^T op(A)^T: B is passed first. Returns the rank of
  // the algorithm that ran.
  int gemm(const KernelInfo& k, const GemmProblem& p, const std::vector<CUdeviceptr>& buf, CUstream stream);
  // y = act(conv(x, w) + bias + residual), NCHW, by the kernel's cuDNN plan
  // (cudnn_conv.h), built on its first call and again when its problem, the
  // rank asked for or an operand's alignment changes. cuDNN tensors have at
  // least four dims, so a 1-D convolution runs as 2-D with a trailing spatial
  // dim of 1. Where the plan's engine does not fuse the kernel's epilogue,
  // `epilogue` (the module's conv_epilogue_kernel of y's dtype) applies it
  // after. Returns the rank of the engine config that ran.
  int conv(const KernelInfo& k, const ConvProblem& p, const std::vector<CUdeviceptr>& buf, CUstream stream,
           CUfunction epilogue);
  // Frees the handles, workspace and plans; the context they were made in must be current.
  void release();

  // f32 products on tensor cores as TF32 (a module compiled with --precision tf32).
  bool tf32 = false;

 private:
  void ensure_workspace();
  void launch_conv_epilogue(const KernelInfo& k, const ConvProblem& p, const ConvOperands& ops, CUfunction epilogue,
                            CUstream stream);

  cublasLtHandle_t lt_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  CUdeviceptr workspace_ = 0;  // shared by cuBLASLt and cuDNN, which run in stream order
  static constexpr size_t kWorkspaceBytes = 32 << 20;
  // Per Gemm kernel, its cuBLASLt descriptors and algorithm.
  static constexpr size_t kGemmKeySize = 21;
  struct GemmPlan {
    bool built = false;
    std::array<int64_t, kGemmKeySize> key{};  // sizes, strides, epilogue, rank asked for, dtypes, alignments
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    cublasLtMatmulAlgo_t algo{};
    int rank = 0;
    void release();
  };
  std::map<const KernelInfo*, GemmPlan> gemm_plans_;
  std::map<const KernelInfo*, std::unique_ptr<CudnnConvPlan>> conv_plans_;
};

}  // namespace tcc::runtime
