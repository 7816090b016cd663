// What the attention templates' writers share (attention_template.cc and
// attention_mma.cc, the forward; attention_grad_template.cc, the backward's passes): how they name
// buffers and sizes in the emitted text, find the output's strides and mask
// a score.
#pragma once

#include <array>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "codegen/emit_c.h"
#include "codegen/kernel_ir.h"
#include "src/diag/errors.h"

namespace tcc::attention_emit {

inline std::string expr(const SymExpr& e) { return "(" + emitc::size_expr(e) + ")"; }

// origin plus the sum of coordinate * stride over the terms with a stride.
inline std::string offset(const std::vector<std::pair<std::string, SymExpr>>& terms, const SymExpr& origin = {}) {
  std::string out = origin == SymExpr() ? "" : expr(origin);
  for (const auto& [coord, stride] : terms) {
    if (stride == SymExpr()) continue;
    out += (out.empty() ? "" : " + ") + coord + " * " + expr(stride);
  }
  return out.empty() ? "0" : out;
}

inline std::string p(int buffer) { return "p" + std::to_string(buffer); }

inline DType dtype_of(const kir::Kernel& k, int buffer) { return k.buffers[static_cast<size_t>(buffer)].dtype; }

// Buffer `buffer`'s element type in memory (f16 and bf16 as their bits) and
// `element`, one of its elements, read as a float.
inline std::string stored(const kir::Kernel& k, int buffer) { return emitc::storage_type(dtype_of(k, buffer)); }
inline std::string read(const kir::Kernel& k, int buffer, const std::string& element) {
  return emitc::decode(element, dtype_of(k, buffer));
}

// The kernel's one store: of Y, the statistics or a gradient.
inline const kir::Instr& output_store(const kir::Kernel& k) {
  for (const kir::Instr& in : k.body)
    if (in.op == kir::Op::Store) return in;
  TCC_CHECK(false) << k.name << " stores nothing";
  return k.body.front();
}

// The output buffer the store writes, and its strides per batch, head and row.
inline int output_buffer(const kir::Kernel& k) { return output_store(k).buffer; }
inline std::array<SymExpr, 3> output_strides(const kir::Kernel& k) {
  const kir::Instr& st = output_store(k);
  return {st.index.strides[0], st.index.strides[1], st.index.strides[2]};
}

// The element of the log-sum-exp buffer (f32 [batch, heads, q_len]) at query
// row i of batch b and head h.
inline std::string lse_element(const kir::AttentionDesc& a) {
  return p(a.lse) + "[(b * " + std::to_string(a.heads) + " + h) * SQ + i]";
}

// The mask's element at query i and key j of batch b and head h (the mask must be present).
inline std::string mask_element(const kir::AttentionDesc& a) {
  return p(a.mask) + "[" +
         offset({{"b", a.mask_strides[0]}, {"h", a.mask_strides[1]}, {"i", a.mask_strides[2]}, {"j", a.mask_strides[3]}}) +
         "]";
}

// The host kernels' lines that add the mask to the double score `s` of query
// i and key j and `continue` past a key the mask hides (a false bool, or an
// additive -inf).
inline std::vector<std::string> host_masked_score(const kir::Kernel& k, const kir::AttentionDesc& a) {
  std::vector<std::string> lines;
  if (a.mask >= 0) {
    if (dtype_of(k, a.mask) == DType::Bool) lines.push_back("if (!" + mask_element(a) + ") continue;");
    else lines.push_back("s += " + read(k, a.mask, mask_element(a)) + ";");
  }
  lines.push_back("if (s == " + emitc::literal(-INFINITY, DType::F64) + ") continue;");
  return lines;
}

// Lines that soft-cap the f32 score `s` of query i and key j of batch b and
// head h and set it to -inf where the key is hidden from the query: where
// `outside` holds (past the keys or the queries), after i under causal
// masking, or by the mask (a false bool, or an additive -inf). Where
// `derivative` names a float, the soft-cap's derivative is assigned to it.
inline std::vector<std::string> masked_score(const kir::Kernel& k, const kir::AttentionDesc& a,
                                             const std::string& outside, const std::string& derivative = "") {
  std::vector<std::string> lines;
  if (a.softcap > 0) {
    std::string cap = emitc::literal(a.softcap, DType::F32);
    lines.push_back("s = " + cap + " * tanhf(s / " + cap + ");");
    if (!derivative.empty()) lines.push_back(derivative + " = 1.f - (s / " + cap + ") * (s / " + cap + ");");
  }
  lines.push_back("bool hidden = " + outside + (a.causal ? " || j > i" : "") + ";");
  if (a.mask >= 0) {
    if (dtype_of(k, a.mask) == DType::Bool) lines.push_back("hidden = hidden || !" + mask_element(a) + ";");
    else lines.push_back("if (!hidden) s += " + read(k, a.mask, mask_element(a)) + ";");
  }
  lines.push_back("if (hidden) s = " + emitc::literal(-INFINITY, DType::F32) + ";");
  return lines;
}

// ----- The tensor-core (mma.sync) layouts' pieces: the forward's and the backward's gradient passes'. -----
// A warp takes 16 rows (an m16 tile) of its output, lane l holding rows g = l / 4 and g + 8 (r0, r1) and
// columns 2 t, 2 t + 1 (t = l % 4) of each n-tile of eight, as the PTX ISA's fragment layouts place them.

constexpr int kMmaRows = 16;
// Heads up to this size may take the tensor-core layouts, whose row fragments and accumulators stay in
// registers (TF32's fragments twice f16's).
constexpr int64_t kMmaMaxHead = 128;

// The dtype the kernel's products read: Q's (dY's in the statistics pass, which has no Q).
inline DType operand_dtype(const kir::Kernel& k, const kir::AttentionDesc& a) {
  return dtype_of(k, a.q >= 0 ? a.q : a.dout);
}

// Why the tensor-core layouts cannot compute k ("" where they can): they multiply f16 or bf16, 16 head
// elements at a time for the scores and 8 for the forward's output (16 for the backward, whose dY rows are
// operands too), or f32 as TF32 where the module's precision is tf32, 8 at a time for both; the backward's
// statistics pass multiplies nothing, and its gradient passes read dY in the operands' dtype.
inline std::string mma_refusal(const kir::Kernel& k, const kir::AttentionDesc& a) {
  const bool forward = a.pass == kir::AttentionPass::Forward;
  if (a.pass == kir::AttentionPass::Stats) return "the backward's statistics pass has no tensor-core layout";
  DType t = operand_dtype(k, a);
  if (!forward && dtype_of(k, a.dout) != t) return "the tensor-core layout reads dY in Q's dtype";
  if (t == DType::F32) {
    if (!a.tf32) return "the tensor-core layout multiplies f32 only as TF32 (--precision tf32)";
    if (a.head_size % 8 != 0 || a.v_head_size % 8 != 0 || a.head_size > kMmaMaxHead || a.v_head_size > kMmaMaxHead)
      return "the TF32 tensor-core layout takes heads that are multiples of 8 up to " + std::to_string(kMmaMaxHead);
    return "";
  }
  if (t != DType::F16 && t != DType::BF16) return "the tensor-core layout multiplies f16, bf16 or TF32, not " +
                                                  std::string(dtype_name(t));
  const int64_t values = forward ? 8 : 16;
  if (a.head_size % 16 != 0 || a.v_head_size % values != 0 || a.head_size > kMmaMaxHead ||
      a.v_head_size > kMmaMaxHead)
    return "the tensor-core layout takes heads that are multiples of 16 (values " + std::to_string(values) +
           ") up to " + std::to_string(kMmaMaxHead);
  return "";
}

// A shared tile's row pitch in floats for rows of `size`: a multiple of four
// (16-byte rows for float4 loads) whose quarter is odd, so the up to eight
// neighbouring rows read at once start in different 16-byte bank groups.
inline int split_pitch(int64_t size) {
  int pitch = static_cast<int>((size + 3) / 4 * 4);
  return (pitch / 4) % 2 == 1 ? pitch : pitch + 4;
}

// The mma layout's shared row pitch in 16-bit elements for rows of `size`:
// a whole number of 32-bit words that is four times an odd number, so the
// eight rows and four word columns a fragment load reads hit 32 banks.
inline int mma_pitch(int64_t size) { return 2 * split_pitch((size + 1) / 2); }

// The helper that issues the dtype's mma.sync (TF32's for f32), and the head elements one takes (its k).
inline std::string mma_helper(DType t) {
  return t == DType::F32 ? "tcc_mma_tf32" : t == DType::F16 ? "tcc_mma_f16" : "tcc_mma_bf16";
}
inline int mma_k(DType t) { return t == DType::F32 ? 8 : 16; }

// A shared tile's element as it holds `element` of an operand: TF32 bits (uint32_t), or the 16-bit bits as stored.
inline std::string tile_bits(DType t) { return t == DType::F32 ? "uint32_t" : "uint16_t"; }
inline std::string tile_element(DType t, const std::string& element) {
  return t == DType::F32 ? "tcc_tf32(" + element + ")" : element;
}

// Elements c and c + 1 of a shared tile's row, one 32-bit load.
inline std::string shared_pair(const std::string& tile, const std::string& row, const std::string& c) {
  return "*reinterpret_cast<const uint32_t*>(&" + tile + "[" + row + "][" + c + "])";
}

// Two f32 values rounded to the 16-bit dtype t, the first in the low half: one register of an A fragment,
// one cvt.rn.f16x2 / bf16x2 (kAttentionMmaHelpers' tcc_pack_f16 and tcc_pack_bf16).
inline std::string pack(const std::string& lo, const std::string& hi, DType t) {
  return std::string(t == DType::F16 ? "tcc_pack_f16(" : "tcc_pack_bf16(") + lo + ", " + hi + ")";
}

// `name`'s A fragments of k-steps kk (uint32_t name[size / k][4]): rows r0 and r1 of `base` (rows `stride`
// apart, zeros from row `bound` on), each k-step holding its k elements: TF32 single elements rounded by
// cvt.rna, or f16 / bf16 pairs.
inline std::vector<std::string> a_fragments(DType t, const std::string& name, const std::string& base,
                                            const SymExpr& stride, int64_t size, const std::string& bound) {
  auto element = [&](const std::string& row, const std::string& c) {
    const std::string at = base + "[" + row + " * " + expr(stride) + " + " + c;
    if (t == DType::F32) return "(" + row + " < " + bound + " ? tcc_tf32(" + at + "]) : 0u)";
    return "(" + row + " < " + bound + " ? (uint32_t)" + at + "] | ((uint32_t)" + at + " + 1] << 16) : 0u)";
  };
  const int k = mma_k(t);
  const std::string half = std::to_string(k / 2), steps = std::to_string(size / k);
  return {"uint32_t " + name + "[" + steps + "][4];",
          "for (int kk = 0; kk < " + steps + "; ++kk) {",
          "  const int c = kk * " + std::to_string(k) + (t == DType::F32 ? " + t;" : " + 2 * t;"),
          "  " + name + "[kk][0] = " + element("r0", "c") + ";",
          "  " + name + "[kk][1] = " + element("r1", "c") + ";",
          "  " + name + "[kk][2] = " + element("r0", "c + " + half) + ";",
          "  " + name + "[kk][3] = " + element("r1", "c + " + half) + ";",
          "}"};
}

// out[4][4] = the A fragments `a` (k-steps of `size` elements) times the 32 rows of `tile` as B (tile[n][k]:
// n-tile nt's eight columns are its rows nt * 8 ..): element q of n-tile nt is row q < 2 ? r0 : r1, column
// 8 nt + 2 t + q % 2.
inline std::vector<std::string> row_products(DType t, const std::string& out, const std::string& a,
                                             const std::string& tile, int64_t size) {
  const int k = mma_k(t);
  const std::string b =
      t == DType::F32
          ? "{" + tile + "[nt * 8 + g][kk * 8 + t], " + tile + "[nt * 8 + g][kk * 8 + t + 4]}"
          : "{" + shared_pair(tile, "nt * 8 + g", "kk * 16 + 2 * t") + ", " +
                shared_pair(tile, "nt * 8 + g", "kk * 16 + 2 * t + 8") + "}";
  return {"float " + out + "[4][4];",
          "for (int nt = 0; nt < 4; ++nt) {",
          "  " + out + "[nt][0] = " + out + "[nt][1] = " + out + "[nt][2] = " + out + "[nt][3] = 0.f;",
          "  for (int kk = 0; kk < " + std::to_string(size / k) + "; ++kk) {",
          "    const uint32_t kb[2] = " + b + ";",
          "    " + mma_helper(t) + "(" + out + "[nt], " + a + "[kk], kb);",
          "  }",
          "}"};
}

// acc[n][4] (n < size / 8) += the coefficients c[4][4] (row_products' layout over 32 columns) times the 32
// rows of a tile: f16 and bf16 pack keys 16 kh .. 16 kh + 15 as an A fragment as they lie, B from `transposed`
// (tile[e][row]); TF32 takes n-tile nt's columns in the order 0, 2, 4, 6, 1, 3, 5, 7 (column t of the A
// fragment is 2 t, column t + 4 is 2 t + 1, no shuffle), B from `rows` (tile[row][e]) at the same rows.
inline std::vector<std::string> weighted_rows(DType t, const std::string& c, const std::string& rows,
                                              const std::string& transposed, const std::string& acc, int64_t size) {
  const std::string n = std::to_string(size / 8), mma = mma_helper(t);
  if (t == DType::F32)
    return {"for (int nt = 0; nt < 4; ++nt) {",
            "  const uint32_t pa[4] = {tcc_tf32(" + c + "[nt][0]), tcc_tf32(" + c + "[nt][2]), tcc_tf32(" + c +
                "[nt][1]), tcc_tf32(" + c + "[nt][3])};",
            "  for (int n = 0; n < " + n + "; ++n) {",
            "    const uint32_t vb[2] = {" + rows + "[nt * 8 + 2 * t][n * 8 + g], " + rows +
                "[nt * 8 + 2 * t + 1][n * 8 + g]};",
            "    " + mma + "(" + acc + "[n], pa, vb);",
            "  }",
            "}"};
  auto at = [&](const std::string& nt, int q) { return c + "[" + nt + "][" + std::to_string(q) + "]"; };
  return {"for (int kh = 0; kh < 2; ++kh) {",
          "  const uint32_t pa[4] = {" + pack(at("2 * kh", 0), at("2 * kh", 1), t) + ", " +
              pack(at("2 * kh", 2), at("2 * kh", 3), t) + ", " + pack(at("2 * kh + 1", 0), at("2 * kh + 1", 1), t) +
              ", " + pack(at("2 * kh + 1", 2), at("2 * kh + 1", 3), t) + "};",
          "  for (int n = 0; n < " + n + "; ++n) {",
          "    const uint32_t vb[2] = {" + shared_pair(transposed, "n * 8 + g", "kh * 16 + 2 * t") + ", " +
              shared_pair(transposed, "n * 8 + g", "kh * 16 + 2 * t + 8") + "};",
          "    " + mma + "(" + acc + "[n], pa, vb);",
          "  }",
          "}"};
}

}  // namespace tcc::attention_emit
