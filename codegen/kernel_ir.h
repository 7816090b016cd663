// The loop-level kernel IR: what one generated kernel computes, independent of
// the language it is emitted in.
//
// codegen/lower.cc builds one Kernel per fusion node; codegen/emit_cuda.cc and
// codegen/emit_host.cc print the same Kernel as CUDA C++ (NVRTC) and as host
// C++ (the system compiler), so the host build checks the numerics of exactly
// the computation the GPU runs.
//
// A kernel iterates a domain: a list of axis extents (static or symbolic). Every
// value in the body is computed at one point of the domain; loads and stores
// address their buffers with affine indices over the domain coordinates, which
// is how broadcasting (stride 0), transposes (permuted strides) and slices
// (offset and strides) fuse into a kernel without copies.
//
// Reduction kernels split the domain into outer axes (one "row" per point) and
// the trailing `reduce_axes` axes, which are reduced. Body values are either
// per element (computed at every point) or per row (`row` set: computed once per
// row, after the reductions they depend on). Emitters evaluate a reduction body
// in passes over the row: pass k accumulates reduction k from the element values
// it needs (recomputing them, never storing them), and a last pass stores the
// element outputs. Softmax is three passes (max, sum, store), layer norm three
// (mean, variance, store).
//
// Gemm kernels compute a MatMul at every point of the output domain
// [batch..., M, N] (Op::MatMulAcc), followed by an epilogue of ordinary body
// instructions; a 1-D operand's missing M or N is a domain axis of extent 1. On
// the GPU the runtime runs them through cuBLASLt as described by GemmDesc, or,
// where autotuning chose it, as tcc's own tensor-core kernel for the same
// GemmDesc (codegen/gemm_template.h); the host emitter writes the dot product as a loop.
//
// Conv kernels are the same shape for a convolution: Op::ConvAcc at every point
// [n, k, spatial...] of the output, then the epilogue (bias per channel,
// residual, Relu) as body instructions. ConvDesc is how the runtime calls cuDNN
// for them; the host emitter writes the direct convolution as loops.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "src/ir/dtype.h"
#include "src/ir/sym.h"
#include "src/module/kernel_abi.h"
#include "src/ops/pointwise.h"
#include "src/ops/recurrent.h"

namespace tcc::kir {

// offset + sum over domain axes d of coord[d] * strides[d], in elements.
struct Index {
  std::vector<SymExpr> strides;  // one per domain axis; 0 where the buffer is broadcast
  SymExpr offset;
};

enum class Op {
  // Memory and constants.
  Load,   // buffer[index + value(dynamic) * dynamic_stride] (the term only where `dynamic` names an
          // integer instruction: Gather's rows); converts the stored dtype to the compute type. With an
          // argument (a bool): only where it is true, 0 elsewhere, where the address is not read
  Store,  // buffer[index (+ the dynamic term, as Load)] = args[0]; converts to the stored dtype. With
          // `accumulate`: combines args[0] with the element (adds, multiplies, takes the max or the
          // min), atomically on the GPU; with args[1] (a bool): only where it is true
  Const,  // `value` in `dtype`
  SizeValue,  // `size` (a SymExpr over the size parameters) converted to `dtype`
  Coord,      // the point's coordinate along domain axis `axis`, converted to `dtype`
  RandomOffset,  // u64: the module's random offset, the index of the call (docs/MODULE.md, "Random ops"),
                 // read through the kernel's random-offset argument (draws_random)
  // The pointwise instructions of src/ops/scalar_ops.def (Neg ... Where), in its order.
#define TCC_SCALAR_OP(name, text) name,
#include "src/ops/scalar_ops.def"
#undef TCC_SCALAR_OP
  // Reductions over the kernel's reduced axes of an element value args[0]; the
  // result is a row value.
  ReduceSum, ReduceMax, ReduceMin, ReduceProd,
  // Reduction kernels of one reduced axis and no reductions only: the running
  // sum of element value args[0] along the row, up to and including this
  // element (CumSum), in the reduction's accumulator type. An element value.
  ScanSum,
  // Gemm kernels only: the dot product of row `coord[M]` of A and column
  // `coord[N]` of B for the batch coordinates (see GemmDesc). The row-major flat
  // index of coord[0..M] is GemmDesc's batch index * m + row: batch dims that
  // only A has fold into m (B is broadcast over them).
  MatMulAcc,
  // Conv kernels only: the convolution ConvDesc describes at output point
  // (coord[0] = n, coord[1] = k, coord[2..] = spatial), without bias.
  ConvAcc,
  // Attention kernels only: element coord[3] of the attention output row of
  // query coord[2] in head coord[1] of batch coord[0] (see AttentionDesc).
  AttentionAcc,
  // TopK kernels only: the value and the (i64) index along the axis of the
  // coord[1]-th element, in TopK's order, of the row at (coord[0], coord[2])
  // (see TopKDesc).
  TopKValue,
  TopKIndex,
  // Recurrence kernels only: the (clipped) argument of activation `axis` of
  // the RecurrenceDesc (direction axis / functions, function axis %
  // functions), and, its one argument, that activation's value there. The
  // instructions between them compute the function (scalar instructions).
  RecurrenceArg,
  RecurrenceResult,
};

// How a store combines its value with the element it writes: replaces it, or
// adds, multiplies, takes the max or the min (NaN-propagating, as Op::Max and
// Op::Min). A combining store is an atomic read-modify-write on the GPU, so
// several points may write one element (scatters with repeated indices).
enum class Accumulate { None, Add, Mul, Max, Min };
const char* accumulate_name(Accumulate a);  // "", "add", "mul", "max", "min"

const char* op_name(Op op);
// "rnn", "gru", "lstm": the text form's names of a recurrence's cell.
const char* recurrent_cell_name(RecurrentCell c);
// The kernel instruction of a pointwise op's scalar instruction.
constexpr Op kernel_op(ScalarOp op) { return static_cast<Op>(static_cast<int>(Op::Neg) + static_cast<int>(op)); }
static_assert(kernel_op(ScalarOp::Where) == Op::Where, "kir::Op holds scalar_ops.def in its order");

struct Instr {
  Op op = Op::Const;
  DType dtype = DType::F32;  // the value's logical dtype (what the interpreter would produce)
  std::vector<int> args;     // indices of earlier instructions
  int buffer = -1;           // Load / Store: index into Kernel::buffers
  Index index;               // Load / Store
  double value = 0;          // Const
  SymExpr size;              // SizeValue
  int axis = -1;             // Coord; RecurrenceArg and RecurrenceResult: the activation
  int dynamic = -1;          // Load, Store: an earlier i64 instruction whose value scales dynamic_stride
  SymExpr dynamic_stride;
  Accumulate accumulate = Accumulate::None;  // Store
  bool row = false;          // reduction kernels: one value per row
};

struct Buffer {
  std::string name;            // the graph value it holds
  DType dtype = DType::F32;
  std::vector<SymExpr> shape;  // row-major, contiguous
  bool output = false;         // written by this kernel
};

// The module ABI's kernel kinds and library-call descriptors (src/module/kernel_abi.h).
using Kind = KernelKind;
using GemmDesc = tcc::GemmDesc;
using ConvDesc = tcc::ConvDesc;
inline const char* kind_name(Kind kind) { return kernel_kind_name(kind); }

// An attention kernel (Kind::Attention) computes, for each batch b, query head
// h and query row i, softmax_j(s_ij) . V[b, h / (heads / kv_heads), j] with
// s_ij = Q[b, h, i] . K[b, h / (heads / kv_heads), j] * scale, soft-capped
// (softcap * tanh(s / softcap)) where softcap > 0, plus the mask's bias (bool:
// 0 where true, -inf where false; float: its value) and -inf where causal
// masking hides j > i; a row hidden everywhere is zero (tcc::Attention's
// semantics, src/ops/attention.cc). Q, K and V are read as [batch, heads, seq,
// size] views from an element offset through element strides per batch, head
// and row (their last axis is contiguous: a 3-D operand's heads lie side by
// side along it; a slice of a fused QKV projection starts past its first element), the
// mask through strides per batch, head, query row and key (0 where it is
// broadcast). The domain is the output's view [batch, heads, q_len,
// v_head_size]; one store writes Y there. Where the forward is trained, its
// online softmax's log-sum-exp of each query row (-inf for a row hidden
// everywhere) goes to the output buffer `lse` too, f32 [batch, heads, q_len].
//
// The backward (tcc::AttentionGrad, src/ops/attention_grad.cc) takes the same
// description with a pass other than Forward, dY (read as Y is written) and an
// auxiliary operand: Y for Stats, which reads the forward's `lse` and whose
// domain is [batch, heads, q_len, 2], its store writing (lse, dY . Y) per
// query row in f32 (no score is recomputed, so it takes no Q, K, V or mask:
// those are -1, their sizes and strides the node's operands'); the statistics
// ([batch, heads, q_len, 2] f32) for GradQ, GradK, GradV and GradKV, whose
// domains are dQ's [batch, heads, q_len, head_size], dK's [batch, kv_heads,
// kv_len, head_size] (GradK, GradKV) and dV's [batch, kv_heads, kv_len,
// v_head_size] views, stored in Q's, K's and V's layouts. GradKV, one pass
// over each key row, writes dV too: to the output buffer `dv` through
// `dv_strides`.
enum class AttentionPass { Forward, Stats, GradQ, GradK, GradV, GradKV };

// "forward", "stats", "grad_q", "grad_k", "grad_v", "grad_kv": the text form's names.
const char* attention_pass_name(AttentionPass p);

struct AttentionDesc {
  int q = -1, k = -1, v = -1;  // buffers; -1 in the Stats pass
  int mask = -1;               // a buffer of bool or the compute dtype, or -1 (always in the Stats pass)
  AttentionPass pass = AttentionPass::Forward;
  int dout = -1, aux = -1;     // the backward's dY and its Y or statistics (buffers), else -1
  std::array<SymExpr, 3> dout_strides, aux_strides;  // per batch, head, row
  int lse = -1;  // Forward: the log-sum-exp it also writes, Stats: the one it reads (buffers), else -1
  int dv = -1;   // GradKV: dV's output buffer, else -1
  std::array<SymExpr, 3> dv_strides;  // per batch, kv head, row
  int64_t heads = 1, kv_heads = 1, head_size = 1, v_head_size = 1;
  SymExpr batch, q_len, kv_len;
  std::array<SymExpr, 3> q_strides, k_strides, v_strides;  // per batch, head, row
  SymExpr q_offset, k_offset, v_offset;                      // of each view's first element
  std::array<SymExpr, 4> mask_strides;                     // per batch, head, query row, key
  double scale = 1, softcap = 0;
  bool causal = false;
  // A forward or gradient pass over f32 operands in a module compiled with
  // --precision tf32: its products may run on the tensor cores in TF32 (the
  // mma layouts).
  bool tf32 = false;
};

// A TopK kernel (Kind::TopK) selects, for each row of `length` elements of
// input buffer x, read as [outer, length, inner] (the row at (o, i) steps by
// inner), its k elements first in TopK's order: largest (or smallest) first,
// NaN above every number, equal values by lower index first (the
// interpreter's eval_topk). The domain is the outputs' [outer, k, inner]; a
// store of TopKValue writes Values there, one of TopKIndex the Indices.
struct TopKDesc {
  int x = -1;  // the input buffer
  int64_t length = 1;
  bool largest = true;
};

// A recurrence kernel (Kind::Recurrence) runs tcc::Recurrence (src/ops/recurrent.h):
// RNN, GRU or LSTM over a sequence of `seq` steps (symbolic or not) from
// each step's input projection xw [seq, batch, directions * gates * hidden].
// The domain is [directions, batch]: each point runs its row's steps
// (sequence_lens honoured: a row of length L runs steps 0..L-1, backward
// from L-1 for direction 1 or a reverse one), h (and c) kept from step to
// step. Step t adds h R^T + Rb to xw's gates, clips, applies the
// activations (the body's RecurrenceArg .. RecurrenceResult, two or three a
// direction, the cell's order: f, g, h) and writes h to y [seq, directions,
// batch, hidden]; y's steps past a row's length are zero, y_h and y_c hold
// the states after the row's last step (zero for a length of 0). Buffers of
// -1 are absent (inputs) or not read (outputs); every float buffer is of
// one dtype, f32 or f64, lens i32.
struct RecurrenceDesc {
  RecurrentCell cell = RecurrentCell::Rnn;
  int64_t directions = 1, hidden = 1;
  bool reverse = false;  // one direction, run backward
  double clip = 0;       // 0: none
  bool linear_before_reset = false, input_forget = false;
  SymExpr seq, batch;
  int xw = -1, r = -1, b = -1, lens = -1, init_h = -1, init_c = -1, p = -1;  // inputs
  int y = -1, y_h = -1, y_c = -1;                                            // outputs
  int64_t functions() const { return recurrent_functions(cell); }
  int64_t gates() const { return recurrent_gates(cell); }
};
// The descriptor's buffers by their text form's keys, inputs then outputs.
std::vector<std::pair<const char*, int>> recurrence_buffers(const RecurrenceDesc& r);
std::vector<std::pair<const char*, int*>> recurrence_buffers(RecurrenceDesc& r);

// An NMS kernel (Kind::Nms) runs tcc::NmsSelect (src/ops/detection.cc): for
// each (batch, class), the domain [batch, classes], the greedy selection of
// NonMaxSuppression over `boxes` boxes: boxes [batch, boxes, 4] f32 (corners,
// or centers and sizes where `center`), scores [batch, classes, boxes] f32,
// the optional scalars max_output (i64), iou_threshold and score_threshold
// (f32; -1: absent). It writes `selected` [batch, classes, boxes] i64, the
// box at each place (-1 past the count), and `count` [batch, classes] i64.
struct NmsDesc {
  bool center = false;
  SymExpr boxes;
  int box_data = -1, scores = -1, max_output = -1, iou_threshold = -1, score_threshold = -1;  // inputs
  int selected = -1, count = -1;                                                            // outputs
};
// The descriptor's buffers by their text form's keys, inputs then outputs.
std::vector<std::pair<const char*, int>> nms_buffers(const NmsDesc& n);
std::vector<std::pair<const char*, int*>> nms_buffers(NmsDesc& n);

// A RoiAlign kernel (Kind::RoiAlign) runs tcc::RoiAlign (src/ops/detection.cc)
// at every point of its domain, the output [rois, channels, output_height,
// output_width]: the bin's bilinear samples of x [N, C, H, W] (f32 or f64),
// sampling_ratio a side or, where it is 0, ceil(bin size) read from the
// region's box in rois [rois, 4] (x's dtype), averaged or their max; the
// region's image from batch_indices [rois] (i64).
struct RoiAlignDesc {
  bool max = false, half_pixel = true;
  int64_t sampling_ratio = 0;
  double spatial_scale = 1;
  int x = -1, rois = -1, batch_indices = -1;  // inputs
  int y = -1;                                 // output
};
// The descriptor's buffers by their text form's keys, inputs then the output.
std::vector<std::pair<const char*, int>> roi_align_buffers(const RoiAlignDesc& r);
std::vector<std::pair<const char*, int*>> roi_align_buffers(RoiAlignDesc& r);

struct Kernel {
  std::string name;                     // the symbol in the cubin and in host.so
  Kind kind = Kind::Pointwise;
  std::vector<Buffer> buffers;          // parameters: inputs first, then outputs
  std::vector<std::string> size_params; // symbols the kernel reads, passed as int64 arguments, sorted
  std::vector<SymExpr> domain;          // iteration space (reduction: outer axes, then reduced axes)
  int reduce_axes = 0;                  // trailing domain axes that are reduced
  std::vector<Instr> body;              // SSA: args refer to earlier instructions
  std::optional<GemmDesc> gemm;         // Kind::Gemm
  std::optional<ConvDesc> conv;         // Kind::Conv
  std::optional<AttentionDesc> attention;  // Kind::Attention
  std::optional<TopKDesc> topk;         // Kind::TopK
  std::optional<RecurrenceDesc> recurrence;  // Kind::Recurrence
  std::optional<NmsDesc> nms;           // Kind::Nms
  std::optional<RoiAlignDesc> roi_align;  // Kind::RoiAlign
  // The launch and layout choices the emitter reads (codegen/kernel_config.h),
  // as the schedule passes (codegen/kernel_schedule.h) left them; none until a
  // schedule pass runs, and then the emitter takes default_config. Not part of
  // structural_key: the choices follow from the structure and the device.
  std::optional<KernelConfig> schedule;
  std::vector<std::string> nodes;       // names of the source nodes fused into it
  bool zero_outputs = false;            // outputs are zeroed before each launch (accumulating stores)
  int copy_from = -1;                   // the one output starts as a copy of this input buffer (of its dtype
                                        // and shape) before each launch: a scatter's data, which its stores update
};

// Readable dump of a kernel, for tests and `TCC_LOG=codegen`. One line per
// buffer and per instruction (numbered by position); indices print their
// strides per domain axis and a nonzero offset; `|` splits a reduction domain
// into outer and reduced axes; `row` marks row values:
//   kernel tcc_k0_pointwise pointwise domain [b, 768] sizes(b)
//     nodes layer0/Add, layer0/Relu
//     buffer x: f32[b, 768] in
//     buffer bias: f32[768] in
//     buffer y: f32[b, 768] out
//     %0: f32 = load x [768, 1]
//     %1: f32 = load bias [0, 1]
//     %2: f32 = add %0, %1
//     %3: f32 = relu %2
//     %4 = store y [768, 1], %3
std::string print_kernel(const Kernel& k);

// The knobs of the `schedule` line, in KernelConfig's order: each an int
// (`number`) or a 0/1 flag (`flag`) of the config.
struct ScheduleKnob {
  const char* name;
  int KernelConfig::*number = nullptr;
  bool KernelConfig::*flag = nullptr;
};
const std::vector<ScheduleKnob>& schedule_knobs();

// Number of elements in the domain, and in its outer (row) part.
SymExpr domain_size(const Kernel& k);
SymExpr row_count(const Kernel& k);
SymExpr row_length(const Kernel& k);

// Bytes read and written, each element once: a buffer read through one plain
// load counts the elements that load reaches (a slice reads part of its
// buffer, a broadcast its own extent), others their whole size; and
// floating-point operations. For the report and the profiler's roofline.
SymExpr bytes_moved(const Kernel& k);
SymExpr flop_count(const Kernel& k);

// Whether the kernel reads the module's random offset (Op::RandomOffset): it
// takes one more argument, a pointer to the u64 offset (docs/MODULE.md).
bool draws_random(const Kernel& k);

// Structural key: equal for kernels that differ only in name and buffer names,
// so identical layers compile one kernel (regional reuse).
std::string structural_key(const Kernel& k);

}  // namespace tcc::kir
