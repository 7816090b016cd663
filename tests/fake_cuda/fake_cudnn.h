// A stand-in for cuDNN (libcudnn.so.9) beside the fake driver (fake_cuda.h).
//
// It implements what the runtime's Conv kernels call (src/runtime/cudnn_conv.h):
// the graph API's descriptors, checked as cuDNN documents them (attributes of
// the right type and count, set before finalizing, every descriptor an
// operation names finalized, the convolution's output shape), heuristics that
// offer a fixed list of engine configs, and cudnnBackendExecute, which puts
// the operation graph's work on the handle's stream through the fake driver
// (fake_cuda::enqueue: run at once, or captured and run at each replay), on
// the fake's device memory (host memory): cross-correlation with pads,
// strides, dilations and groups, pointwise Add with broadcasting and Relu. A
// program linked against it has it loaded under that soname, so the runtime's
// dlopen("libcudnn.so.9") finds it.
//
// The heuristics rank four engine configs: one on tensor cores (TF32 for f32
// data), one whose plan needs a 64 MiB workspace, a plain one and a plain one cuDNN
// would compile at run time. Unless set_fuses_epilogues(true), an execution
// plan of a graph with pointwise operations fails to finalize, as cuDNN's does
// for f32 data without a fusing engine.
#pragma once

#include <cstddef>

namespace tcc::fake_cudnn {

struct Counts {
  size_t plans = 0;       // execution plans finalized
  size_t executions = 0;  // cudnnBackendExecute calls
  size_t live_descriptors = 0;
};

Counts counts();
void reset_counts();
void set_fuses_epilogues(bool on);
// Of the engine config that ran last, its rank in the heuristics' list.
int last_engine();

}  // namespace tcc::fake_cudnn
