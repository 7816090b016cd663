// The C++ that emit_host.cc and emit_cuda.cc print alike: size expressions,
// types, conversions and the expression of every body instruction. Sharing it
// is what makes the host library check the numerics of the CUDA kernels: both
// compute each value with the same expression in the same types.
//
// Names in emitted code: buffer b is `p<b>`, size parameter `batch` is
// `s_batch`, domain coordinate d is `c<d>`, instruction i defines `v<i>`.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace tcc::emitc {

enum class Target { Host, Cuda };

// Indented lines of emitted code: what the emitters' kernel printers derive from.
class CodeWriter {
 protected:
  void line(const std::string& s) { out_ += indent() + s + "\n"; }
  // Each of `ls` a line, at the current depth (their own leading spaces nest them further).
  void lines(const std::vector<std::string>& ls) {
    for (const std::string& l : ls) line(l);
  }
  // `s {`, or a bare block's `{` for an empty s.
  void open(const std::string& s) {
    line(s.empty() ? "{" : s + " {");
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }
  std::string indent() const { return std::string(static_cast<size_t>(depth_) * 2, ' '); }

  std::string out_;
  int depth_ = 1;
};

// The helper functions emitted code calls (conversions, integer division and
// modulo, NaN-propagating max/min, ...), on CUDA the block reduction, and the
// conversions of the 8-bit floats and 4-bit types `kernels` use.
std::string prelude(Target t, const std::vector<kir::Kernel>& kernels = {});

// An int64 C++ expression for a size expression; floor divisions go through
// tcc_fdiv, which rounds toward negative infinity as SymExpr does.
std::string size_expr(const SymExpr& e);
std::string size_var(const std::string& symbol);
// Whether e is a multiple of d for every value of its symbols.
bool divisible_by(const SymExpr& e, int64_t d);

// The opening of a CUDA kernel, `extern "C" __global__ [__launch_bounds__(n[, m])]
// void NAME(const T0* __restrict__ p0, ..., int64_t s_x, ...[, void* __restrict__ ws]
// [, const uint64_t* __restrict__ ro]) {`: emit_cuda's parameter convention
// (codegen/emit.h), `ro` the random offset of a kernel that draws_random. A
// launch bound of 0 leaves it out; min_blocks (m, the blocks an SM should
// hold at once, which caps ptxas's registers per thread) is left out at 0.
std::string cuda_signature(const kir::Kernel& k, bool workspace, int launch_bound = 0, int min_blocks = 0);
// The opening of a host kernel, `extern "C" void NAME(void* const* buffers,
// const int64_t* sizes) {`, and its first lines: buffer b as `p<b>` of its
// storage type, each size parameter as its size_var, and for a kernel that
// draws_random `ro`, the random offset's pointer after the buffers (emit_host's
// convention).
std::string host_signature(const kir::Kernel& k);

// The kernels a module holds besides its own (src/module/kernel_abi.h), for a
// translation unit that already holds the prelude: kRandomOffsetAdvance where
// one of `kernels` draws_random, and the conv epilogue of each dtype of their
// Conv kernels with one (conv_epilogue_kernel).
std::string module_helpers(const std::vector<kir::Kernel>& kernels, Target t);

// The type a value is computed in (f16/bf16, the 8-bit floats and f4e2m1:
// float; i4: int8_t; u4: uint8_t; bool: bool) and the type a buffer element is
// stored as (f16/bf16: uint16_t; bool, the 8-bit floats and f4e2m1: uint8_t).
const char* compute_type(DType t);
const char* storage_type(DType t);
// The type a reduction accumulates in: integers in 64 bits, floats in their compute type.
const char* accumulator_type(DType t);

// `x` (computed as `from`) converted to `to` with the interpreter's Cast
// semantics: rounding through f16/bf16, the 8-bit floats and f4e2m1
// (saturating), saturating float -> integer except to i4 and u4, which keep
// the low four bits of the value as an int64, x != 0 -> bool.
std::string convert(const std::string& x, DType from, DType to);
// A stored element read into its compute type, and a computed value encoded for
// storage (a value of an 8-bit float dtype is one of its values, infinity and
// NaN included, so its encoding does not saturate).
std::string decode(const std::string& element, DType stored);
std::string encode(const std::string& value, DType stored);

std::string literal(double v, DType t);

// sum of coord * stride + offset over the domain coordinates c<d>.
std::string index_expr(const kir::Index& ix);

// The expression computing instruction i from its arguments (v<arg>): every op
// except Load, Store, the reductions and MatMulAcc.
std::string instr_expr(const kir::Kernel& k, int i);

// `const T v<i> = ...;` for Load and the ops instr_expr covers.
std::string define(const kir::Kernel& k, int i);
// `p<b>[index] = ...;` for a Store; an accumulating one adds (atomicAdd on CUDA).
std::string store(const kir::Kernel& k, int i, Target target);

// A reduction's identity and one accumulation step `acc = acc op v`, in the accumulator type.
std::string reduce_identity(const kir::Instr& r);
std::string reduce_step(const kir::Instr& r, const std::string& acc, const std::string& v);

// Instructions `roots` depend on (including themselves), not looking through
// instructions for which `stop` holds (they are still included).
std::vector<bool> closure(const kir::Kernel& k, const std::vector<int>& roots, const std::vector<bool>& stop);

bool is_reduce(kir::Op op);
// Whether a ScanSum runs along k's rows (CumSum): its row's last pass goes in order.
bool scans(const kir::Kernel& k);

// How a reduction kernel computes a row: pass k (one per reduction, in body
// order) accumulates reduction k from the element values it needs, recomputing
// them; a last pass computes the element values the element stores need, and
// stores. Where those stores read no reduction's result, they are made in the
// first pass instead and the last pass is empty. Row values are computed once
// per row, as soon as the reductions they depend on are done.
struct ReductionPlan {
  std::vector<int> reductions;
  std::vector<std::vector<int>> passes;      // element instructions of each pass, stores included
  std::vector<std::vector<int>> row_values;  // [k]: computed after pass k-1 ([0]: before the first pass)
  std::vector<int> row_stores;               // stores of row values, after the last pass
};
ReductionPlan plan_reduction(const kir::Kernel& k);

}  // namespace tcc::emitc
