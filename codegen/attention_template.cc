#include "codegen/attention_template.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "codegen/attention_grad_template.h"
#include "codegen/attention_writer.h"
#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

using namespace attention_emit;

// Heads up to this size may take the split layout; larger ones take the warp
// layout, whose per-thread registers do not grow with the head.
constexpr int64_t kSplitMaxHead = 64;
constexpr int kMaxThreads = 256;

bool splits(const kir::AttentionDesc& a) { return a.head_size <= kSplitMaxHead && a.v_head_size <= kSplitMaxHead; }

// The warp layout's shared row pitch: one float past the longer head, so 32 rows hit 32 banks.
int warp_pitch(const kir::AttentionDesc& a) { return static_cast<int>(std::max(a.head_size, a.v_head_size)) + 1; }

// The warp layout's static shared memory: the block's query rows and one key or value tile.
int64_t warp_shared_bytes(const kir::AttentionDesc& a, const Blocking& b) {
  return (b.rows * a.head_size + kKeys * warp_pitch(a)) * 4;
}

// The split layout: L neighbouring lanes share a query row, which each holds
// in registers, and take every L-th key of the shared tiles with their own
// online softmax; the lanes' partial rows merge by shuffles at the end.
class SplitAttention : CudaAttentionWriter {
 public:
  SplitAttention(const kir::Kernel& k, const KernelConfig& c)
      : CudaAttentionWriter(k, c), kp_(split_pitch(a_.head_size)), vp_(split_pitch(a_.v_head_size)) {}

  std::string print() {
    const std::string D = std::to_string(a_.head_size), DV = std::to_string(a_.v_head_size);
    const std::string S = std::to_string(b_.lanes), G = std::to_string(kKeys / b_.lanes);
    const std::string BN = std::to_string(kKeys);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    prologue();
    line("const int tid = threadIdx.x, split = tid % " + S + ";");
    line("const int64_t i = i0 + tid / " + S + ";");
    line("const bool live = i < SQ;");
    line("__shared__ __align__(16) float ks[" + BN + "][" + std::to_string(kp_) + "];");
    line("__shared__ __align__(16) float vs[" + BN + "][" + std::to_string(vp_) + "];");
    line("float q[" + D + "], o[" + DV + "];");
    line("#pragma unroll");
    const std::string q_at = "Q[i * " + expr(a_.q_strides[2]) + " + d]";
    line("for (int d = 0; d < " + D + "; ++d) q[d] = live ? " + read(k_, a_.q, q_at) + " : 0.f;");
    line("#pragma unroll");
    line("for (int e = 0; e < " + DV + "; ++e) o[e] = 0.f;");
    line("float m = " + neg_inf + ", l = 0.f;");
    key_bound();
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += " + BN + ")");
    line("__syncthreads();");
    load_tile("ks", "K", a_.k, a_.k_strides[2], a_.head_size);
    load_tile("vs", "V", a_.v, a_.v_strides[2], a_.v_head_size);
    line("__syncthreads();");
    // This lane's keys of the tile: split, split + S, ...
    line("float sc[" + G + "];");
    line("float top = " + neg_inf + ";");
    line("#pragma unroll");
    open("for (int u = 0; u < " + G + "; ++u)");
    line("const int x = u * " + S + " + split;");
    line("const int64_t j = j0 + x;");
    line("float acc = 0.f;");
    vector_loop("ks[x]", a_.head_size, [](const std::string& k, const std::string& n) {
      return "acc += q[" + n + "] * " + k + ";";
    });
    line("float s = acc * " + emitc::literal(a_.scale, DType::F32) + ";");
    for (const std::string& l : masked_score(k_, a_, "!live || j >= SK")) line(l);
    line("sc[u] = s;");
    line("top = fmaxf(top, s);");
    close();
    // Online softmax over the lane's keys of the tile, one rescale per tile.
    open("if (top != " + neg_inf + ")");
    line("const float m_new = fmaxf(m, top), alpha = expf(m - m_new);");
    line("l *= alpha;");
    line("#pragma unroll");
    line("for (int e = 0; e < " + DV + "; ++e) o[e] *= alpha;");
    line("#pragma unroll");
    open("for (int u = 0; u < " + G + "; ++u)");
    line("const float pj = expf(sc[u] - m_new);");
    line("l += pj;");
    vector_loop("vs[u * " + S + " + split]", a_.v_head_size, [](const std::string& v, const std::string& n) {
      return "o[" + n + "] += pj * " + v + ";";
    });
    close();
    line("m = m_new;");
    close();
    close();
    // Merge the row's lanes' partial states (max, sum, output) by shuffles.
    open("for (int x = 1; x < " + S + "; x <<= 1)");
    line("const float m_other = __shfl_xor_sync(0xffffffffu, m, x), l_other = __shfl_xor_sync(0xffffffffu, l, x);");
    line("const float m_new = fmaxf(m, m_other);");
    line("const bool none = m_new == " + neg_inf + ";");
    line("const float a_self = none ? 0.f : expf(m - m_new), a_other = none ? 0.f : expf(m_other - m_new);");
    line("l = l * a_self + l_other * a_other;");
    line("#pragma unroll");
    line("for (int e = 0; e < " + DV + "; ++e) o[e] = o[e] * a_self + __shfl_xor_sync(0xffffffffu, o[e], x) * a_other;");
    line("m = m_new;");
    close();
    line("if (!live) return;");
    store_lse("m", "l", "split == 0");
    output_row();
    line("const float inv = l > 0.f ? 1.f / l : 0.f;");
    line("#pragma unroll");
    line("for (int e = 0; e < " + DV + "; ++e) if (e % " + S + " == split) Y[e] = " + store("o[e] * inv") + ";");
    out_ += "}\n";
    return out_;
  }

 private:
  // `step(x, n)` for each n < size, with x row[n] of a shared tile, unrolled;
  // four elements a 16-byte load where size allows.
  void vector_loop(const std::string& row, int64_t size,
                   const std::function<std::string(const std::string&, const std::string&)>& step) {
    const std::string n = std::to_string(size);
    line("#pragma unroll");
    if (size % 4 == 0) {
      open("for (int n = 0; n < " + n + "; n += 4)");
      line("const float4 r4 = *reinterpret_cast<const float4*>(&" + row + "[n]);");
      line(step("r4.x", "n"));
      line(step("r4.y", "n + 1"));
      line(step("r4.z", "n + 2"));
      line(step("r4.w", "n + 3"));
      close();
    } else {
      line("for (int n = 0; n < " + n + "; ++n) " + step(row + "[n]", "n"));
    }
  }

  int kp_, vp_;  // the key and value tiles' row pitches (split_pitch)
};

// The warp layout: lane j scores key j of the tile for each of its warp's rows.
class WarpAttention : CudaAttentionWriter {
 public:
  WarpAttention(const kir::Kernel& k, const KernelConfig& c)
      : CudaAttentionWriter(k, c), pitch_(warp_pitch(a_)), chunks_(static_cast<int>((a_.v_head_size + 31) / 32)) {}

  std::string print() {
    const std::string D = std::to_string(a_.head_size), DV = std::to_string(a_.v_head_size);
    const std::string BM = std::to_string(b_.rows), T = std::to_string(b_.threads()), R = std::to_string(kWarpRows);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    prologue();
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;");
    line("__shared__ float qs[" + BM + "][" + D + "];");
    line("__shared__ float kv[" + std::to_string(kKeys) + "][" + std::to_string(pitch_) + "];");
    open("for (int t = tid; t < " + BM + " * " + D + "; t += " + T + ")");
    line("const int r = t / " + D + ", d = t % " + D + ";");
    line("qs[r][d] = i0 + r < SQ ? " + read(k_, a_.q, "Q[(i0 + r) * " + expr(a_.q_strides[2]) + " + d]") + " : 0.f;");
    close();
    line("float m[" + R + "], l[" + R + "], o[" + R + "][" + std::to_string(chunks_) + "];");
    open("for (int r = 0; r < " + R + "; ++r)");
    line("m[r] = " + neg_inf + ";");
    line("l[r] = 0.f;");
    line("for (int c = 0; c < " + std::to_string(chunks_) + "; ++c) o[r][c] = 0.f;");
    close();
    key_bound();
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += " + std::to_string(kKeys) + ")");
    load_tile_between_barriers("K", a_.k, a_.k_strides[2], a_.head_size);
    scores();
    load_tile_between_barriers("V", a_.v, a_.v_strides[2], a_.v_head_size);
    line("const int n = SK - j0 < " + std::to_string(kKeys) + " ? (int)(SK - j0) : " + std::to_string(kKeys) + ";");
    open("for (int jj = 0; jj < n; ++jj)");
    open("for (int r = 0; r < " + R + "; ++r)");
    line("const float pj = __shfl_sync(0xffffffffu, pr[r], jj);");
    columns("o[r][c] += pj * kv[jj][e];");
    close();
    close();
    close();
    open("for (int r = 0; r < " + R + "; ++r)");
    line("const int64_t i = i0 + warp * " + R + " + r;");
    line("if (i >= SQ) continue;");
    store_lse("m[r]", "l[r]", "lane == 0");
    output_row();
    line("const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;");
    columns("Y[e] = " + store("o[r][c] * inv") + ";");
    close();
    out_ += "}\n";
    return out_;
  }

 private:
  // K's or V's rows of the tile into kv, the one tile both share, between barriers.
  void load_tile_between_barriers(const std::string& from, int buffer, const SymExpr& row_stride, int64_t size) {
    line("__syncthreads();");
    load_tile("kv", from, buffer, row_stride, size);
    line("__syncthreads();");
  }

  // Lane j's score of key j0 + j for each of the warp's rows, then the rows' online softmax step.
  void scores() {
    const std::string R = std::to_string(kWarpRows);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    line("const int64_t j = j0 + lane;");
    line("float pr[" + R + "];");
    line("float sr[" + R + "] = {};");
    open("for (int d = 0; d < " + std::to_string(a_.head_size) + "; ++d)");
    line("const float kd = kv[lane][d];");
    line("for (int r = 0; r < " + R + "; ++r) sr[r] += qs[warp * " + R + " + r][d] * kd;");
    close();
    open("for (int r = 0; r < " + R + "; ++r)");
    line("const int64_t i = i0 + warp * " + R + " + r;");
    line("float s = sr[r] * " + emitc::literal(a_.scale, DType::F32) + ";");
    for (const std::string& l : masked_score(k_, a_, "j >= SK || i >= SQ")) line(l);
    line("float top = s;");
    line("for (int x = 16; x > 0; x >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, x));");
    line("const float m_new = fmaxf(m[r], top);");
    line("const bool none = m_new == " + neg_inf + ";");
    line("const float pj = none ? 0.f : expf(s - m_new);");
    line("const float alpha = none ? 1.f : expf(m[r] - m_new);");
    line("float sum = pj;");
    line("for (int x = 16; x > 0; x >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, x);");
    line("l[r] = l[r] * alpha + sum;");
    line("for (int c = 0; c < " + std::to_string(chunks_) + "; ++c) o[r][c] *= alpha;");
    line("m[r] = m_new;");
    line("pr[r] = pj;");
    close();
  }

  // `body` for each of the lane's output columns e = c * 32 + lane (c its chunk).
  void columns(const std::string& body) {
    open("for (int c = 0; c < " + std::to_string(chunks_) + "; ++c)");
    line("const int e = c * 32 + lane;");
    if (a_.v_head_size % 32 != 0) line("if (e >= " + std::to_string(a_.v_head_size) + ") break;");
    line(body);
    close();
  }

  int pitch_;   // the shared tile's row pitch (warp_pitch)
  int chunks_;  // output columns per lane: e = c * 32 + lane
};

class HostAttention : emitc::CodeWriter {
 public:
  explicit HostAttention(const kir::Kernel& k) : k_(k), a_(desc(k)) {}

  std::string print() {
    out_ += emitc::host_signature(k_);
    const std::array<SymExpr, 3> ys = output_strides(k_);
    const std::string DV = std::to_string(a_.v_head_size);
    line("const int64_t SQ = " + expr(a_.q_len) + ", SK = " + expr(a_.kv_len) + ";");
    open("for (int64_t b = 0; b < " + expr(a_.batch) + "; ++b)");
    open("for (int64_t h = 0; h < " + std::to_string(a_.heads) + "; ++h)");
    line("const int64_t hk = h / " + std::to_string(a_.heads / a_.kv_heads) + ";");
    open("for (int64_t i = 0; i < SQ; ++i)");
    line("const " + stored(k_, a_.q) + "* q = " + p(a_.q) + " + " +
         offset({{"b", a_.q_strides[0]}, {"h", a_.q_strides[1]}, {"i", a_.q_strides[2]}}, a_.q_offset) + ";");
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F64);
    line("double m = " + neg_inf + ", l = 0, o[" + DV + "] = {};");
    open(std::string("for (int64_t j = 0; j < ") + (a_.causal ? "(i + 1 < SK ? i + 1 : SK)" : "SK") + "; ++j)");
    line("const " + stored(k_, a_.k) + "* k = " + p(a_.k) + " + " +
         offset({{"b", a_.k_strides[0]}, {"hk", a_.k_strides[1]}, {"j", a_.k_strides[2]}}, a_.k_offset) + ";");
    line("const " + stored(k_, a_.v) + "* v = " + p(a_.v) + " + " +
         offset({{"b", a_.v_strides[0]}, {"hk", a_.v_strides[1]}, {"j", a_.v_strides[2]}}, a_.v_offset) + ";");
    line("double s = 0;");
    line("for (int d = 0; d < " + std::to_string(a_.head_size) + "; ++d) s += (double)" + read(k_, a_.q, "q[d]") +
         " * " + read(k_, a_.k, "k[d]") + ";");
    line("s *= " + emitc::literal(a_.scale, DType::F64) + ";");
    if (a_.softcap > 0) {
      std::string cap = emitc::literal(a_.softcap, DType::F64);
      line("s = " + cap + " * tanh(s / " + cap + ");");
    }
    for (const std::string& l : host_masked_score(k_, a_)) line(l);
    line("const double m_new = s > m ? s : m, alpha = exp(m - m_new), pj = exp(s - m_new);");
    line("l = l * alpha + pj;");
    line("for (int e = 0; e < " + DV + "; ++e) o[e] = o[e] * alpha + pj * " + read(k_, a_.v, "v[e]") + ";");
    line("m = m_new;");
    close();
    const int y = output_buffer(k_);
    if (a_.lse >= 0)
      line(lse_element(a_) + " = m == " + neg_inf + " ? (float)m : (float)(m + log(l));");
    line(stored(k_, y) + "* y = " + p(y) + " + " + offset({{"b", ys[0]}, {"h", ys[1]}, {"i", ys[2]}}) + ";");
    line("for (int e = 0; e < " + DV + "; ++e) y[e] = " +
         emitc::encode("(l > 0 ? (float)(o[e] / l) : 0.f)", dtype_of(k_, y)) + ";");
    close();
    close();
    close();
    out_ += "}\n";
    return out_;
  }

 private:
  const kir::Kernel& k_;
  const kir::AttentionDesc& a_;
};

std::string attention_precision(const kir::Kernel& k, const KernelConfig& c) {
  if (attention_tf32(k, c)) return "tf32";
  const DType operand = operand_dtype(k, desc(k));
  // Off the tensor cores (the warp layouts, the backward's statistics), f16 and bf16 elements are widened and
  // multiplied in f32.
  if (!c.mma && (operand == DType::F16 || operand == DType::BF16)) return "f32";
  return std::string(dtype_name(operand));
}

KernelConfig attention_default_config(const kir::Kernel& k) {
  const kir::AttentionDesc& a = desc(k);
  if (a.pass != kir::AttentionPass::Forward) return attention_grad_default_config(k);
  KernelConfig c;
  if (mma_refusal(k, a).empty()) {
    c.block = operand_dtype(k, a) == DType::F32 ? 128 : 256;
    c.mma = true;
  } else if (splits(a)) {
    c.block = 128;
    c.lanes_per_row = 4;
  } else {
    c.block = a.head_size <= 128 && a.v_head_size <= 128 ? 256 : 64;
  }
  return c;
}

std::string attention_refusal(const kir::Kernel& k, const KernelConfig& c) {
  const kir::AttentionDesc& a = desc(k);
  if (a.pass != kir::AttentionPass::Forward) return attention_grad_refusal(k, c);
  KernelConfig knobs;
  knobs.block = c.block;
  knobs.lanes_per_row = c.lanes_per_row;
  knobs.mma = c.mma;
  if (c != knobs)
    return "attention kernels choose their threads per block, lanes to a query row and the tensor-core layout, "
           "nothing else";
  if (std::string why = block_refusal(c.block, kMaxThreads); !why.empty()) return why;
  if (c.mma) return c.lanes_per_row != 0 ? "the tensor-core layout has no lanes to a query row" : mma_refusal(k, a);
  if (c.lanes_per_row != 0 && c.lanes_per_row != 2 && c.lanes_per_row != 4 && c.lanes_per_row != 8)
    return "lanes to a query row " + std::to_string(c.lanes_per_row) + " is not 0 (the warp layout), 2, 4 or 8";
  if (c.lanes_per_row > 0 && !splits(a))
    return "heads of " + std::to_string(std::max(a.head_size, a.v_head_size)) +
           " do not fit the split layout's registers (up to " + std::to_string(kSplitMaxHead) + ")";
  if (c.lanes_per_row == 0 && warp_shared_bytes(a, blocking(a, c)) > 48 * 1024)
    return "the warp layout's tiles at block " + std::to_string(c.block) + " exceed 48 KB of shared memory";
  return "";
}

std::vector<KernelConfig> attention_configs(const kir::Kernel& k) {
  if (desc(k).pass != kir::AttentionPass::Forward) return attention_grad_configs(k);
  std::vector<KernelConfig> out;
  KernelConfig c;
  c.mma = true;
  for (c.block = 64; c.block <= kMaxThreads; c.block *= 2)
    if (attention_refusal(k, c).empty()) out.push_back(c);
  c.mma = false;
  for (int lanes : {0, 2, 4, 8})
    for (c.block = 64; c.block <= kMaxThreads; c.block *= 2) {
      c.lanes_per_row = lanes;
      if (attention_refusal(k, c).empty()) out.push_back(c);
    }
  return out;
}

std::string emit_attention_cuda(const kir::Kernel& k, const KernelConfig& c) {
  if (desc(k).pass != kir::AttentionPass::Forward) return emit_attention_grad_cuda(k, c);
  std::string refusal = attention_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  if (c.mma) return emit_mma_attention_cuda(k, c);
  return c.lanes_per_row > 0 ? SplitAttention(k, c).print() : WarpAttention(k, c).print();
}

std::string emit_attention_host(const kir::Kernel& k) {
  if (desc(k).pass != kir::AttentionPass::Forward) return emit_attention_grad_host(k);
  return HostAttention(k).print();
}

std::string attention_schedule(const kir::Kernel& k, const KernelConfig& c) {
  if (desc(k).pass != kir::AttentionPass::Forward) return attention_grad_schedule(k, c);
  Blocking b = blocking(desc(k), c);
  const bool tf32 = operand_dtype(k, desc(k)) == DType::F32;
  return std::string(b.mma ? (tf32 ? "tensor-core layout (mma.sync m16n8k8 tf32)" : "tensor-core layout (mma.sync m16n8k16)")
                           : b.lanes > 0 ? "split layout" : "warp layout") +
         ", block " + std::to_string(b.threads()) +
         ", rows " + std::to_string(b.rows) + (b.lanes > 0 ? ", " + std::to_string(b.lanes) + " lanes a row" : "");
}

KernelLaunch attention_launch(const kir::Kernel& k, const KernelConfig& c) {
  if (desc(k).pass != kir::AttentionPass::Forward) return attention_grad_launch(k, c);
  const kir::AttentionDesc& a = desc(k);
  Blocking b = blocking(a, c);
  KernelLaunch l;
  l.grid[0] = a.batch * SymExpr::constant(a.heads);
  l.grid[1] = (a.q_len + SymExpr::constant(b.rows - 1)).floordiv(SymExpr::constant(b.rows));
  l.block[0] = b.threads();
  return l;
}

std::string attention_config_text(const KernelConfig& c) {
  return block_config_text(c) +
         (c.mma ? " mma" : c.lanes_per_row > 0 ? " lanes=" + std::to_string(c.lanes_per_row) : " warp layout");
}

}  // namespace

const TemplateKernel kAttentionTemplate = {
    .default_config = attention_default_config,
    .refusal = attention_refusal,
    .configs = attention_configs,
    .emit_cuda = emit_attention_cuda,
    .emit_host = emit_attention_host,
    .launch = attention_launch,
    .precision = attention_precision,
    .schedule = attention_schedule,
    .config_text = attention_config_text,
};

}  // namespace tcc
