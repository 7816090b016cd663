// The forward attention layouts' shared pieces (attention_template.cc: the
// split and warp layouts, the hooks; attention_mma.cc: the tensor-core
// layouts): the block's shape under a config, and what every CUDA layout
// writes alike.
#pragma once

#include <array>
#include <cmath>
#include <string>

#include "codegen/attention_emit.h"
#include "codegen/emit_c.h"
#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "src/diag/errors.h"

namespace tcc::attention_emit {

constexpr int kKeys = 32;     // keys per shared tile of the f32 layouts (split, warp, TF32)
constexpr int kWarpRows = 4;  // warp layout: query rows per warp

// The block's shape under a config.
struct Blocking {
  int lanes;  // lanes to a query row: the split layout; 0 the warp and mma layouts
  int warps;  // per block
  int rows;   // query rows per block
  bool mma;   // the tensor-core layout
  int threads() const { return 32 * warps; }
};

inline Blocking blocking(const kir::AttentionDesc& a, const KernelConfig& c) {
  TCC_CHECK(a.head_size >= 1 && a.head_size <= 256 && a.v_head_size >= 1 && a.v_head_size <= 256)
      << "attention head sizes " << a.head_size << ", " << a.v_head_size << " are outside 1..256";
  int warps = c.block / 32;
  int rows = c.mma ? warps * kMmaRows : c.lanes_per_row > 0 ? warps * 32 / c.lanes_per_row : warps * kWarpRows;
  return {c.lanes_per_row, warps, rows, c.mma};
}

inline const kir::AttentionDesc& desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::Attention && k.attention.has_value()) << k.name << " is not an attention kernel";
  return *k.attention;
}

// What both CUDA layouts write alike: the opening (sizes, the block's batch
// and head, the operands' rows), the shared tiles' loads, the causal bound
// of the keys and the output row.
class CudaAttentionWriter : protected emitc::CodeWriter {
 protected:
  CudaAttentionWriter(const kir::Kernel& k, const KernelConfig& c) : k_(k), a_(desc(k)), b_(blocking(a_, c)) {}

  // The signature (min_blocks: blocks an SM should hold, 0 for no bound), SQ
  // and SK, the block's b, h and hk, and Q, K and V at them.
  void prologue(int min_blocks = 0) {
    out_ += emitc::cuda_signature(k_, false, b_.threads(), min_blocks);
    line("const int64_t SQ = " + expr(a_.q_len) + ", SK = " + expr(a_.kv_len) + ";");
    line("const int64_t b = blockIdx.x / " + std::to_string(a_.heads) + ", h = blockIdx.x % " +
         std::to_string(a_.heads) + ", hk = h / " + std::to_string(a_.heads / a_.kv_heads) + ";");
    line("const int64_t i0 = (int64_t)blockIdx.y * " + std::to_string(b_.rows) + ";");
    line("const " + stored(k_, a_.q) + "* __restrict__ Q = " + p(a_.q) + " + " +
         offset({{"b", a_.q_strides[0]}, {"h", a_.q_strides[1]}}, a_.q_offset) + ";");
    line("const " + stored(k_, a_.k) + "* __restrict__ K = " + p(a_.k) + " + " +
         offset({{"b", a_.k_strides[0]}, {"hk", a_.k_strides[1]}}, a_.k_offset) + ";");
    line("const " + stored(k_, a_.v) + "* __restrict__ V = " + p(a_.v) + " + " +
         offset({{"b", a_.v_strides[0]}, {"hk", a_.v_strides[1]}}, a_.v_offset) + ";");
  }

  // kv_end: keys after the block's last query row are hidden from all its rows.
  void key_bound() {
    const std::string BM = std::to_string(b_.rows);
    line(std::string("const int64_t kv_end = ") + (a_.causal ? "SK < i0 + " + BM + " ? SK : i0 + " + BM : "SK") + ";");
  }

  // Rows j0 .. j0 + kKeys - 1 of K or V (buffer `buffer`; zeros past the
  // last key) into a shared tile of floats, or with `tf32` of their TF32 bits
  // (cvt.rna, tcc_tf32).
  void load_tile(const std::string& tile, const std::string& from, int buffer, const SymExpr& row_stride,
                 int64_t size, bool tf32 = false) {
    const std::string S = std::to_string(size);
    const std::string element = read(k_, buffer, from + "[(j0 + r) * " + expr(row_stride) + " + d]");
    open("for (int x = threadIdx.x; x < " + std::to_string(kKeys) + " * " + S + "; x += " +
         std::to_string(b_.threads()) + ")");
    line("const int r = x / " + S + ", d = x % " + S + ";");
    line(tile + "[r][d] = j0 + r < SK ? " + (tf32 ? "tcc_tf32(" + element + ") : 0u;" : element + " : 0.f;"));
    close();
  }

  // Y: output row i of the block's batch and head.
  void output_row() {
    const std::array<SymExpr, 3> ys = output_strides(k_);
    line(stored(k_, y()) + "* __restrict__ Y = " + p(y()) + " + " + offset({{"b", ys[0]}, {"h", ys[1]}, {"i", ys[2]}}) +
         ";");
  }

  // The output buffer, and `value` encoded for it.
  int y() const { return output_buffer(k_); }
  std::string store(const std::string& value) const { return emitc::encode(value, dtype_of(k_, y())); }

  // Where the forward saves its log-sum-exp: row i's, from its maximum m and
  // sum l, written where `writer` holds (one thread of those sharing the row).
  void store_lse(const std::string& m, const std::string& l, const std::string& writer) {
    if (a_.lse < 0) return;
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    line("if (" + writer + ") " + lse_element(a_) + " = " + m + " == " + neg_inf + " ? " + m + " : " + m + " + logf(" +
         l + ");");
  }

  // The mma layouts' per-tile steps on the warp's rows r0 and r1, each
  // shared by the four lanes t = 0..3: the rows' maxima top0 and top1 agreed
  // by two shuffles; the output accumulators o[n] rescaled by a0 and a1; and,
  // after the key loop, the lanes' sums l0 and l1 merged.
  void mma_row_maxima() {
    open("for (int x = 1; x < 4; x <<= 1)");
    line("top0 = fmaxf(top0, __shfl_xor_sync(0xffffffffu, top0, x));");
    line("top1 = fmaxf(top1, __shfl_xor_sync(0xffffffffu, top1, x));");
    close();
  }
  void mma_rescale_output() {
    line("#pragma unroll");
    open("for (int n = 0; n < " + std::to_string(a_.v_head_size / 8) + "; ++n)");
    line("o[n][0] *= a0;");
    line("o[n][1] *= a0;");
    line("o[n][2] *= a1;");
    line("o[n][3] *= a1;");
    close();
  }
  void mma_merge_sums() {
    open("for (int x = 1; x < 4; x <<= 1)");
    line("l0 += __shfl_xor_sync(0xffffffffu, l0, x);");
    line("l1 += __shfl_xor_sync(0xffffffffu, l1, x);");
    close();
  }

  // The mma layouts' output row `row` (r0 or r1) from elements first and
  // first + 1 of each n-tile's accumulator o[n], and its log-sum-exp from its
  // maximum `m` (natural log units) and its sum.
  void mma_store_row(const std::string& row, const std::string& m, const std::string& sum, int first) {
    open("if (" + row + " < SQ)");
    line("const int64_t i = " + row + ";");
    store_lse(m, sum, "t == 0");
    output_row();
    line("const float inv = " + sum + " > 0.f ? 1.f / " + sum + " : 0.f;");
    line("#pragma unroll");
    open("for (int n = 0; n < " + std::to_string(a_.v_head_size / 8) + "; ++n)");
    line("Y[n * 8 + 2 * t] = " + store("o[n][" + std::to_string(first) + "] * inv") + ";");
    line("Y[n * 8 + 2 * t + 1] = " + store("o[n][" + std::to_string(first + 1) + "] * inv") + ";");
    close();
    close();
  }

  const kir::Kernel& k_;
  const kir::AttentionDesc& a_;
  Blocking b_;
};

// The CUDA text of forward kernel k in the tensor-core layout under config c
// (c.mma): f16 / bf16 operands through m16n8k16, f32 under tf32 through
// m16n8k8 (attention_mma.cc).
std::string emit_mma_attention_cuda(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc::attention_emit
