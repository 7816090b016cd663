// The kernel IR's verifier: the invariants lowering establishes, every
// kernel-IR pass keeps and the emitters rely on (codegen/kernel_ir.h).
//
// - Domain: a reduction kernel reduces 1..rank trailing axes, no other kind
//   reduces any; a gemm kernel (and only it) has a GemmDesc, a conv kernel
//   (and only it) a ConvDesc.
// - Buffers: inputs first, then at least one output, names unique; every
//   output is written by a store.
// - Sizes: sizes(...) sorted and unique, and naming every symbol that the
//   domain, the indices, size instructions and the descriptors mention (the
//   emitted kernel receives only those).
// - Body (SSA): operands are earlier instructions; each op has its operand
//   count; loads and stores name declared buffers with one stride per domain
//   axis, stores only outputs (accumulating ones f32, f64, i32 or i64 outputs), guards
//   are bool, dynamic indices integer values; coord reads an axis of the domain;
//   random_offset is a u64 of a pointwise or reduction kernel.
// - Dtypes: unary math and arithmetic keep their operands' dtype (pow: its
//   base's), comparisons, is_nan, and/or/xor/not give bool, logic reads bool,
//   where selects by a bool between two values of its dtype, a reduction
//   keeps its operand's dtype.
// - Rows: only reduction kernels have row values; reductions are row values
//   of reduction kernels; a computed row value reads only row values; a scan
//   is an element value of a reduction kernel of one reduced axis and no
//   reductions, and keeps its operand's dtype.
// - Gemm and conv: exactly one matmul_acc (conv_acc), only in its kind of
//   kernel; the descriptor's operands are input buffers, its activation known,
//   a conv's per-spatial-dim lists one entry per spatial axis of the domain.
// - TopK: a TopKDesc in topk kernels only, its x an input buffer; the domain
//   [outer, k, inner] with a static k from 1 to the row's length; no loads;
//   every store plainly writes a topk_value (x's dtype) or topk_index (i64)
//   into a buffer of its dtype.
// - Recurrence: a RecurrenceDesc in recurrence kernels only, over the domain
//   [directions, batch]; xw and r input buffers, b, lens, init_h (and an
//   LSTM's init_c and p) input buffers or absent, every output one of y, y_h
//   (and an LSTM's y_c); one float dtype, f32 or f64, lens i32; states and
//   gate sums within kRecurrenceSharedBytes; a body of scalar instructions
//   and recurrence_arg / recurrence_result, one result per activation.
// - Nms: an NmsDesc in nms kernels only, over the domain [batch, classes],
//   with no body; box_data and scores f32 input buffers, max_output (i64),
//   iou_threshold and score_threshold (f32) input buffers or absent, the
//   outputs selected and count, i64.
// - RoiAlign: a RoiAlignDesc in roi_align kernels only, over the domain
//   [rois, channels, height, width], with no body; x an f32 or f64 input
//   buffer of rank 4, rois of its dtype and batch_indices (i64) input
//   buffers, y the one output, of x's dtype; a sampling_ratio of 0 or more.
// - Initial outputs: zeroed or copied first, not both; a copy is of an input
//   buffer of the one output's dtype and shape.
// - Schedule: one the emitters can print for the kernel (config_refusal,
//   codegen/kernel_schedule.h).
#pragma once

#include <optional>
#include <string>

#include "codegen/kernel_ir.h"

namespace tcc::kir {

struct KernelProblem {
  int instr = -1;  // the body instruction at fault, or -1 for the kernel as a whole
  std::string message;
};

// The first invariant k breaks, or nullopt. Safe on any kernel: it reads
// nothing an earlier check has not validated.
std::optional<KernelProblem> verify_kernel(const Kernel& k);

}  // namespace tcc::kir
