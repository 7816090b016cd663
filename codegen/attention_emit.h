// What the attention templates' writers share (attention_template.cc, the
// forward; attention_grad_template.cc, the backward's passes): how they name
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

// sum of coordinate * stride over the terms with a stride.
inline std::string offset(const std::vector<std::pair<std::string, SymExpr>>& terms) {
  std::string out;
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

}  // namespace tcc::attention_emit
