// tcc's persistent recurrence kernel: the CUDA and host code of a
// Kind::Recurrence kernel (its RecurrenceDesc, codegen/kernel_ir.h), which
// runs RNN, GRU and LSTM over a sequence whose length is read at run time.
//
// The algorithm: a thread block per (direction, batch row) loops over the
// row's steps (its sequence_lens entry, else the sequence's length), keeping
// h (and c), the step's gate sums h R^T + Rb and GRU's r * h in shared
// memory. A step: each thread computes the sums of every block-th row of R
// (a dot product with h), __syncthreads, then each thread the gates of every
// block-th hidden unit (the input projection's gates plus the sums, clipped,
// the activations of the kernel's body, GRU's linear_before_reset both ways,
// LSTM's peepholes and input_forget), writing h (and c) and Y's row,
// __syncthreads. A GRU without linear_before_reset multiplies R_h by r * h in
// a second pass over R. After the last step Y_h and Y_c take the states; Y's
// steps past the row's length are zero. The input projection X W^T + Wb of
// every step is one GEMM before the kernel (src/ops/recurrent.cc).
//
// The hidden size is bounded by shared memory (recurrence_shared_elements,
// src/ops/recurrent.h); R is read from global memory (from L2 after the first
// step) every step, so the kernel suits the small hidden sizes and batches of
// latency-bound inference.
//
// Host: the same steps per (direction, batch row), one thread.
#pragma once

#include "codegen/template_kernel.h"

namespace tcc {

// Kind::Recurrence's hooks (codegen/template_kernel.h):
// - launch: grid [directions * batch] of the config's block;
// - default config: a thread per row of R (gates * hidden), in whole warps, from 32 to 256;
// - refusal: knobs other than block, blocks outside 32..1024 or not of whole warps;
// - configs: blocks of 32 to 512 threads;
// - schedule: "block 128 per direction and row"; precision: the operands' f32 or f64.
extern const TemplateKernel kRecurrenceTemplate;

}  // namespace tcc
