// A Conv kernel's cuDNN execution plan, built with cuDNN 9's graph API.
//
// The problem becomes an operation graph: the convolution and, where one of
// cuDNN's precompiled engines fuses them, its bias, residual and Relu as
// pointwise nodes. cuDNN's heuristics rank the engine configs; in that order,
// those that suit the dtype (no TF32 or down-converted inputs for f32 unless
// --precision tf32, no reduced-precision sums) are finalized into plans, a
// plan that needs more than the workspace is passed over, and the kernel's
// config picks one of the rest by rank. A call is then one
// cudnnBackendExecute of the plan with a variant pack of its pointers, made
// again only when they change. The descriptor API this replaces
// (cudnnConvolutionForward) cost a CNN's step about 40 us of host time per call
// on the H200 (2026-11-27), where a kernel launch costs a few.
//
// When no precompiled engine fuses the epilogue (cuDNN's precompiled engines
// are single-operation ones but for a few specialized fusions), the graph is
// the convolution alone, and the module's conv epilogue kernel
// (src/module/kernel_abi.h) applies bias, residual and Relu after it in one
// pass: what the descriptor API's cudnnAddTensor and cudnnActivationForward
// took a call and a pass each for.
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_driver.h"

namespace tcc::runtime {

// A Conv kernel's problem at one binding in cuDNN's int dims (a 1-D
// convolution as a 2-D one of height 1).
struct ConvProblem {
  std::vector<int> xdims, ydims, wdims, pads, strides, dilations;
  bool operator==(const ConvProblem&) const = default;
};

// What a plan is built for besides the problem: the epilogue, the dtype, the
// rank asked for and each operand's pointer alignment (which cuDNN's engines
// assume of every later call). Fixed-size, so a call checks it without allocating.
struct ConvConfig {
  bool bias = false, residual = false, relu = false;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  bool tf32 = false;
  int rank = 0;
  std::array<int64_t, 5> alignments{};  // x, w, y, bias, residual (0 for an absent one)
  bool operator==(const ConvConfig&) const = default;
  // What the plan fuses when an engine can, as ConvDesc::has_epilogue says of its kernel.
  bool has_epilogue() const { return bias || residual || relu; }
};

// The operands of one call, in device memory.
struct ConvOperands {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
  void* bias = nullptr;      // k elements, or null
  void* residual = nullptr;  // y's shape, or null
  void* workspace = nullptr;
};

// Backend descriptors destroyed together: a plan's, which its execution plan
// refers to, freed also when building it throws.
class BackendDescriptors {
 public:
  BackendDescriptors() = default;
  ~BackendDescriptors() { clear(); }
  BackendDescriptors(const BackendDescriptors&) = delete;
  BackendDescriptors& operator=(const BackendDescriptors&) = delete;
  cudnnBackendDescriptor_t make(cudnnBackendDescriptorType_t type, const std::string& what);
  void clear();

 private:
  std::vector<cudnnBackendDescriptor_t> all_;
};

class CudnnConvPlan {
 public:
  // Builds the plan of `problem` and `config` on `handle`, or throws a
  // CudaError naming `what` when cuDNN has no usable engine for it.
  CudnnConvPlan(cudnnHandle_t handle, const ConvProblem& problem, const ConvConfig& config, int64_t workspace_bytes,
                const std::string& what);

  // Whether this plan is the one for `problem` and `config`.
  bool serves(const ConvProblem& problem, const ConvConfig& config) const {
    return config == config_ && problem == problem_;
  }
  // The rank of the engine config that runs: the one asked for, or the last
  // usable one when cuDNN offers fewer.
  int rank() const { return rank_; }
  // Whether the engine applies the epilogue too; else y is conv(x, w) alone.
  bool fused() const { return fused_; }

  // y = act(conv(x, w) + bias + residual), or conv(x, w) where not fused(), on
  // the stream the handle is set to.
  void run(cudnnHandle_t handle, const ConvOperands& ops);

 private:
  bool build_graph(cudnnHandle_t handle, bool fuse_epilogue, int64_t workspace_bytes);

  ConvProblem problem_;
  ConvConfig config_;
  std::string what_;
  BackendDescriptors graph_;  // every descriptor the plan refers to
  cudnnBackendDescriptor_t plan_ = nullptr;
  BackendDescriptors pack_owner_;
  cudnnBackendDescriptor_t pack_ = nullptr;  // the variant pack of pack_pointers_
  std::vector<int64_t> uids_;
  // The pack's pointers in uids_' order, then the workspace: at most five operands and it.
  std::array<void*, 6> pack_pointers_{};
  int rank_ = 0;
  bool fused_ = false;
};

// cudnnCreate, cudnnSetStream and cudnnDestroy through the library opened on
// first use (libcudnn.so.9); a CudaError when it cannot be loaded.
cudnnHandle_t cudnn_create();
void cudnn_set_stream(cudnnHandle_t handle, CUstream stream);
void cudnn_destroy(cudnnHandle_t handle);

}  // namespace tcc::runtime
