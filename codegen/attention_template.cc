#include "codegen/attention_template.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "codegen/attention_emit.h"
#include "codegen/attention_grad_template.h"
#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

using namespace attention_emit;

constexpr int kKeys = 32;  // keys per shared tile

// Heads up to this size may take the split layout; larger ones take the warp
// layout, whose per-thread registers do not grow with the head.
constexpr int64_t kSplitMaxHead = 64;
constexpr int kWarpRows = 4;  // warp layout: query rows per warp
constexpr int kMaxThreads = 256;

bool splits(const kir::AttentionDesc& a) { return a.head_size <= kSplitMaxHead && a.v_head_size <= kSplitMaxHead; }

// The block's shape under a config.
struct Blocking {
  int lanes;  // lanes to a query row: the split layout; 0 the warp and mma layouts
  int warps;  // per block
  int rows;   // query rows per block
  bool mma;   // the tensor-core layout
  int threads() const { return 32 * warps; }
};

Blocking blocking(const kir::AttentionDesc& a, const KernelConfig& c) {
  TCC_CHECK(a.head_size >= 1 && a.head_size <= 256 && a.v_head_size >= 1 && a.v_head_size <= 256)
      << "attention head sizes " << a.head_size << ", " << a.v_head_size << " are outside 1..256";
  int warps = c.block / 32;
  int rows = c.mma ? warps * kMmaRows : c.lanes_per_row > 0 ? warps * 32 / c.lanes_per_row : warps * kWarpRows;
  return {c.lanes_per_row, warps, rows, c.mma};
}

// The warp layout's shared row pitch: one float past the longer head, so 32 rows hit 32 banks.
int warp_pitch(const kir::AttentionDesc& a) { return static_cast<int>(std::max(a.head_size, a.v_head_size)) + 1; }

// The warp layout's static shared memory: the block's query rows and one key or value tile.
int64_t warp_shared_bytes(const kir::AttentionDesc& a, const Blocking& b) {
  return (b.rows * a.head_size + kKeys * warp_pitch(a)) * 4;
}

const kir::AttentionDesc& desc(const kir::Kernel& k) {
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
         offset({{"b", a_.q_strides[0]}, {"h", a_.q_strides[1]}}) + ";");
    line("const " + stored(k_, a_.k) + "* __restrict__ K = " + p(a_.k) + " + " +
         offset({{"b", a_.k_strides[0]}, {"hk", a_.k_strides[1]}}) + ";");
    line("const " + stored(k_, a_.v) + "* __restrict__ V = " + p(a_.v) + " + " +
         offset({{"b", a_.v_strides[0]}, {"hk", a_.v_strides[1]}}) + ";");
  }

  // kv_end: keys after the block's last query row are hidden from all its rows.
  void key_bound() {
    const std::string BM = std::to_string(b_.rows);
    line(std::string("const int64_t kv_end = ") + (a_.causal ? "SK < i0 + " + BM + " ? SK : i0 + " + BM : "SK") + ";");
  }

  // Rows j0 .. j0 + kKeys - 1 of K or V (buffer `buffer`; zeros past the
  // last key) into a shared tile of floats.
  void load_tile(const std::string& tile, const std::string& from, int buffer, const SymExpr& row_stride,
                 int64_t size) {
    const std::string S = std::to_string(size);
    open("for (int t = threadIdx.x; t < " + std::to_string(kKeys) + " * " + S + "; t += " +
         std::to_string(b_.threads()) + ")");
    line("const int r = t / " + S + ", d = t % " + S + ";");
    line(tile + "[r][d] = j0 + r < SK ? " + read(k_, buffer, from + "[(j0 + r) * " + expr(row_stride) + " + d]") +
         " : 0.f;");
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

// The tensor-core layout for f16 and bf16 operands, FlashAttention-2's
// forward: each warp takes 16 query rows as an m16 tile (lane l holds rows
// l/4 and l/4 + 8), whose A fragments stay in registers for the whole key
// loop. Keys advance 64 at a time through K and V tiles in shared memory, rows as stored with a pitch of eight elements past
// the head, so the eight 16-byte rows an ldmatrix phase reads start in
// different bank groups. The tiles arrive by cp.async, 16 bytes a copy,
// where the operands' rows allow it (the head offsets and row strides whole
// 16-byte units; else element by element): V's copy is issued before the
// scores of the same keys are computed and the next K tile's before their
// probabilities meet V, so each copy overlaps a product. The scores'
// B fragments come from the K tile by ldmatrix, two n-tiles of eight keys a
// call, and V's from the V tile by ldmatrix.trans; the online softmax runs
// on the f32 accumulators in base 2 (exp2f of the scores times log2 e), each
// row's four lanes agreeing on its maximum by two shuffles, and the
// probabilities become the A fragments of the product with V as they lie.
// Tiles inside the keys, and for causal masking wholly at or before the
// warp's first row, skip the per-score masking when the kernel has no mask
// and no soft cap. Each lane sums its own probabilities; the row's four sums
// merge at the end.
class TensorCoreAttention : CudaAttentionWriter {
 public:
  TensorCoreAttention(const kir::Kernel& k, const KernelConfig& c)
      : CudaAttentionWriter(k, c), t_(operand_dtype(k, a_)), kp_(static_cast<int>(a_.head_size) + 8),
        vp_(static_cast<int>(a_.v_head_size) + 8) {}

  std::string print() {
    const int D = static_cast<int>(a_.head_size), DV = static_cast<int>(a_.v_head_size);
    const std::string BN = std::to_string(kTileKeys), T = std::to_string(b_.threads());
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    // Heads up to 64 fit 128 registers a thread (ptxas, sm_90), so an SM's
    // 65536 hold 16 warps to hide the latency of each tile's chain of
    // products, maxima and exponentials.
    prologue(D <= 64 && DV <= 64 ? 65536 / (128 * b_.threads()) : 0);
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;");
    // Rows and keys as int (sequences stay far below 2^31): fewer registers than int64_t.
    line("const int w0 = (int)i0 + warp * " + std::to_string(kMmaRows) + ", r0 = w0 + g, r1 = r0 + 8;");
    line("__shared__ __align__(16) uint16_t ks[" + BN + "][" + std::to_string(kp_) + "];");
    line("__shared__ __align__(16) uint16_t vs[" + BN + "][" + std::to_string(vp_) + "];");
    // 16-byte copies need 16-byte aligned rows: K and V (at this batch and head) and their row strides.
    line("const bool whole = ((unsigned long long)K % 16 == 0) && ((unsigned long long)V % 16 == 0) && " +
         expr(a_.k_strides[2]) + " % 8 == 0 && " + expr(a_.v_strides[2]) + " % 8 == 0;");
    lines(a_fragments(t_, "qa", "Q", a_.q_strides[2], D, "SQ"));
    line("float o[" + std::to_string(DV / 8) + "][4];");
    line("#pragma unroll");
    line("for (int n = 0; n < " + std::to_string(DV / 8) + "; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;");
    line("float m0 = " + neg_inf + ", m1 = " + neg_inf + ", l0 = 0.f, l1 = 0.f;");
    key_bound();
    open("if (kv_end > 0)");
    copy_tile("ks", "K", a_.k_strides[2], D, "0");
    close();
    line("tcc_att_commit();");
    open("for (int j0 = 0; j0 < kv_end; j0 += " + BN + ")");
    copy_tile("vs", "V", a_.v_strides[2], DV, "j0");
    line("tcc_att_commit();");
    line("tcc_att_wait<1>();");
    line("__syncthreads();");
    scores(D);
    softmax();
    line("__syncthreads();");
    open("if (j0 + " + BN + " < kv_end)");
    copy_tile("ks", "K", a_.k_strides[2], D, "j0 + " + BN);
    close();
    line("tcc_att_commit();");
    line("tcc_att_wait<1>();");
    line("__syncthreads();");
    weighted_values(DV);
    line("__syncthreads();");
    close();
    open("for (int x = 1; x < 4; x <<= 1)");
    line("l0 += __shfl_xor_sync(0xffffffffu, l0, x);");
    line("l1 += __shfl_xor_sync(0xffffffffu, l1, x);");
    close();
    // The maxima are in base 2: times ln 2 for the log-sum-exp.
    const std::string ln2 = emitc::literal(0.6931471805599453, DType::F32);
    mma_store_row("r0", "(m0 * " + ln2 + ")", "l0", 0);
    mma_store_row("r1", "(m1 * " + ln2 + ")", "l1", 2);
    out_ += "}\n";
    return out_;
  }

 private:
  // Keys per tile: with heads up to 128 (kMmaMaxHead) the two tiles take at most 34 KB.
  static constexpr int kTileKeys = 64;

  // float `name` = `leaf` (over n-tile n) combined over the tile's n-tiles
  // pairwise by `combine` (a function of two floats, or + where empty).
  void tree(const std::string& name, const std::string& leaf, const std::string& combine) {
    const int N = kTileKeys / 8;
    auto join = [&](const std::string& a, const std::string& b) {
      return combine.empty() ? a + " + " + b : combine + "(" + a + ", " + b + ")";
    };
    line("float " + name + "_t[" + std::to_string(N) + "];");
    line("#pragma unroll");
    line("for (int n = 0; n < " + std::to_string(N) + "; ++n) " + name + "_t[n] = " + leaf + ";");
    line("#pragma unroll");
    open("for (int w = " + std::to_string(N / 2) + "; w > 0; w >>= 1)");
    line("#pragma unroll");
    line("for (int n = 0; n < w; ++n) " + name + "_t[n] = " + join(name + "_t[n]", name + "_t[n + w]") + ";");
    close();
    line("float " + name + " = " + name + "_t[0];");
  }

  // Rows from..from + keys - 1 of `from` (K or V; zeros past the last key)
  // into `tile`: 16-byte copies where `whole`, else element by element.
  void copy_tile(const std::string& tile, const std::string& src, const SymExpr& row_stride, int size,
                 const std::string& first) {
    const std::string S = std::to_string(size), C = std::to_string(size / 8), BN = std::to_string(kTileKeys);
    const std::string T = std::to_string(b_.threads());
    open("if (whole)");
    open("for (int x = tid; x < " + BN + " * " + C + "; x += " + T + ")");
    line("const int r = x / " + C + ", c = x % " + C + " * 8;");
    line("const int j = " + first + " + r;");
    line("tcc_att_cp16(&" + tile + "[r][c], " + src + " + (j < SK ? j : 0) * " + expr(row_stride) + " + c, j < SK);");
    close();
    close();
    open("else");
    open("for (int x = tid; x < " + BN + " * " + S + "; x += " + T + ")");
    line("const int r = x / " + S + ", c = x % " + S + ";");
    line("const int j = " + first + " + r;");
    line(tile + "[r][c] = j < SK ? " + src + "[j * " + expr(row_stride) + " + c] : (uint16_t)0;");
    close();
    close();
  }

  // sc[n][q]: the warp's scores against the tile's keys, n-tile n holding keys
  // 8 n .. 8 n + 7, in base 2 and masked.
  void scores(int D) {
    const int N = kTileKeys / 8;
    const std::string NT = std::to_string(N);
    line("float sc[" + NT + "][4];");
    line("#pragma unroll");
    line("for (int n = 0; n < " + NT + "; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.f;");
    // ldmatrix: lane L names row L % 8 of matrix L / 8; matrices 0 and 1 are
    // n-tile 2 p's B registers (head elements kk * 16 and kk * 16 + 8 on),
    // 2 and 3 n-tile 2 p + 1's.
    line("#pragma unroll");
    open("for (int kk = 0; kk < " + std::to_string(D / 16) + "; ++kk)");
    line("#pragma unroll");
    open("for (int p = 0; p < " + std::to_string(N / 2) + "; ++p)");
    line("uint32_t kb[4];");
    line("tcc_ldsm_x4(kb, &ks[p * 16 + (lane >> 4) * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]);");
    line("const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};");
    line(mma_helper(t_) + "(sc[2 * p], qa[kk], b0);");
    line(mma_helper(t_) + "(sc[2 * p + 1], qa[kk], b1);");
    close();
    close();
    const std::string log2e = emitc::literal(1.4426950408889634, DType::F32);
    const bool plain = a_.mask < 0 && a_.softcap <= 0;
    if (plain) {
      // Inside the keys and (causal) at or before the warp's first row: no score is hidden.
      line(std::string("const bool inside = j0 + ") + std::to_string(kTileKeys) + " <= SK" +
           (a_.causal ? " && j0 + " + std::to_string(kTileKeys - 1) + " <= w0" : "") + ";");
      open("if (inside)");
      line("#pragma unroll");
      open("for (int n = 0; n < " + NT + "; ++n)");
      line("#pragma unroll");
      line("for (int q = 0; q < 4; ++q) sc[n][q] *= " + emitc::literal(a_.scale * 1.4426950408889634, DType::F32) +
           ";");
      close();
      close();
      open("else");
    }
    line("#pragma unroll");
    open("for (int n = 0; n < " + NT + "; ++n)");
    line("#pragma unroll");
    open("for (int q = 0; q < 4; ++q)");
    line("const int i = q < 2 ? r0 : r1, j = j0 + n * 8 + 2 * t + (q & 1);");
    line("float s = sc[n][q] * " + emitc::literal(a_.scale, DType::F32) + ";");
    for (const std::string& l : masked_score(k_, a_, "j >= SK || i >= SQ")) line(l);
    line("sc[n][q] = s * " + log2e + ";");
    close();
    close();
    if (plain) close();
  }

  // The online softmax over the tile's scores (base 2): the rows' new
  // maxima, the probabilities in sc, the sums and the output rescaled.
  void softmax() {
    const std::string NT = std::to_string(kTileKeys / 8), NO = std::to_string(a_.v_head_size / 8);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    // Maxima and sums over the n-tiles as trees, not chains of dependent steps.
    tree("top0", "fmaxf(sc[n][0], sc[n][1])", "fmaxf");
    tree("top1", "fmaxf(sc[n][2], sc[n][3])", "fmaxf");
    line("top0 = fmaxf(top0, m0);");
    line("top1 = fmaxf(top1, m1);");
    open("for (int x = 1; x < 4; x <<= 1)");
    line("top0 = fmaxf(top0, __shfl_xor_sync(0xffffffffu, top0, x));");
    line("top1 = fmaxf(top1, __shfl_xor_sync(0xffffffffu, top1, x));");
    close();
    // A row hidden so far keeps its maximum at -inf: subtracting 0 then gives zeros, not NaN.
    line("const float z0 = top0 == " + neg_inf + " ? 0.f : top0, z1 = top1 == " + neg_inf + " ? 0.f : top1;");
    line("const float a0 = exp2f(m0 - z0), a1 = exp2f(m1 - z1);");
    line("#pragma unroll");
    open("for (int n = 0; n < " + NT + "; ++n)");
    line("sc[n][0] = exp2f(sc[n][0] - z0);");
    line("sc[n][1] = exp2f(sc[n][1] - z0);");
    line("sc[n][2] = exp2f(sc[n][2] - z1);");
    line("sc[n][3] = exp2f(sc[n][3] - z1);");
    close();
    tree("s0", "sc[n][0] + sc[n][1]", "");
    tree("s1", "sc[n][2] + sc[n][3]", "");
    line("l0 = l0 * a0 + s0;");
    line("l1 = l1 * a1 + s1;");
    line("m0 = top0;");
    line("m1 = top1;");
    line("#pragma unroll");
    open("for (int n = 0; n < " + NO + "; ++n)");
    line("o[n][0] *= a0;");
    line("o[n][1] *= a0;");
    line("o[n][2] *= a1;");
    line("o[n][3] *= a1;");
    close();
  }

  // o += the probabilities (sc, packed as A fragments, 16 keys a k-step)
  // times the V tile: ldmatrix.trans gives B registers, matrices 0 and 1
  // n-tile 2 p's (keys kh * 16 and kh * 16 + 8 on), 2 and 3 n-tile 2 p + 1's;
  // an odd last n-tile takes two matrices.
  void weighted_values(int DV) {
    auto at = [](const std::string& n, int q) { return "sc[" + n + "][" + std::to_string(q) + "]"; };
    const int NO = DV / 8;
    line("#pragma unroll");
    open("for (int kh = 0; kh < " + std::to_string(kTileKeys / 16) + "; ++kh)");
    line("const uint32_t pa[4] = {" + pack(at("2 * kh", 0), at("2 * kh", 1), t_) + ", " +
         pack(at("2 * kh", 2), at("2 * kh", 3), t_) + ", " + pack(at("2 * kh + 1", 0), at("2 * kh + 1", 1), t_) + ", " +
         pack(at("2 * kh + 1", 2), at("2 * kh + 1", 3), t_) + "};");
    line("#pragma unroll");
    open("for (int p = 0; p < " + std::to_string(NO / 2) + "; ++p)");
    line("uint32_t vb[4];");
    line("tcc_ldsm_x4_t(vb, &vs[kh * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][p * 16 + (lane >> 4) * 8]);");
    line("const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};");
    line(mma_helper(t_) + "(o[2 * p], pa, b0);");
    line(mma_helper(t_) + "(o[2 * p + 1], pa, b1);");
    close();
    if (NO % 2 == 1) {
      line("uint32_t vb[2];");
      line("tcc_ldsm_x2_t(vb, &vs[kh * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][" + std::to_string(DV - 8) + "]);");
      line(mma_helper(t_) + "(o[" + std::to_string(NO - 1) + "], pa, vb);");
    }
    close();
  }

  DType t_;      // the operands' dtype: f16 or bf16
  int kp_, vp_;  // the K and V tiles' row pitches in elements
};

// The tensor-core layout for f32 operands under --precision tf32 (m16n8k8):
// each warp takes 16 query rows as an m16 tile, lane l holding rows l/4 and
// l/4 + 8, its query fragments rounded to TF32 (cvt.rna) in registers for
// the whole key loop. Per tile of 32 keys, K and V as stored and rounded to
// TF32 as the tiles load, the scores come from mma.sync into f32, the online
// softmax runs on them in registers (each row's four lanes agree on its
// maximum by two shuffles), and the probabilities, rounded, become the A
// fragments of the next mma, with V, into the f32 output accumulators. The
// accumulator holds keys 2 t and 2 t + 1 of an n-tile where the A fragment
// wants columns t and t + 4, so the P V product takes the n-tile's keys in
// the order 0, 2, 4, 6, 1, 3, 5, 7: column t is key 2 t, column t + 4 key
// 2 t + 1, and V's B fragment reads the same keys' rows; no shuffle moves a
// probability. Each lane sums its own probabilities; the row's four sums
// merge at the end.
class Tf32Attention : CudaAttentionWriter {
 public:
  Tf32Attention(const kir::Kernel& k, const KernelConfig& c)
      : CudaAttentionWriter(k, c), kp_(split_pitch(a_.head_size)), vp_(split_pitch(a_.v_head_size)) {}

  std::string print() {
    const int D = static_cast<int>(a_.head_size), DV = static_cast<int>(a_.v_head_size);
    const std::string NO = std::to_string(DV / 8), BN = std::to_string(kKeys);
    const std::string T = std::to_string(b_.threads());
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    prologue();
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;");
    line("const int64_t r0 = i0 + warp * " + std::to_string(kMmaRows) + " + g, r1 = r0 + 8;");
    line("__shared__ __align__(16) uint32_t ks[" + BN + "][" + std::to_string(kp_) + "];");
    line("__shared__ __align__(16) uint32_t vs[" + BN + "][" + std::to_string(vp_) + "];");
    // The query rows as A fragments, k-step kk holding head elements 8 kk .. 8 kk + 7.
    lines(a_fragments(DType::F32, "qa", "Q", a_.q_strides[2], D, "SQ"));
    line("float o[" + NO + "][4];");
    line("for (int n = 0; n < " + NO + "; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;");
    line("float m0 = " + neg_inf + ", m1 = " + neg_inf + ", l0 = 0.f, l1 = 0.f;");
    key_bound();
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += " + BN + ")");
    line("__syncthreads();");
    open("for (int x = tid; x < " + BN + " * " + std::to_string(D) + "; x += " + T + ")");
    line("const int r = x / " + std::to_string(D) + ", d = x % " + std::to_string(D) + ";");
    line("ks[r][d] = j0 + r < SK ? tcc_tf32(K[(j0 + r) * " + expr(a_.k_strides[2]) + " + d]) : 0u;");
    close();
    open("for (int x = tid; x < " + BN + " * " + std::to_string(DV) + "; x += " + T + ")");
    line("const int r = x / " + std::to_string(DV) + ", d = x % " + std::to_string(DV) + ";");
    line("vs[r][d] = j0 + r < SK ? tcc_tf32(V[(j0 + r) * " + expr(a_.v_strides[2]) + " + d]) : 0u;");
    close();
    line("__syncthreads();");
    // Scores of the warp's 16 rows against the tile's keys, eight keys an n-tile, scaled and masked.
    lines(row_products(DType::F32, "sc", "qa", "ks", D));
    open("for (int nt = 0; nt < 4; ++nt)");
    open("for (int q = 0; q < 4; ++q)");
    line("const int64_t i = q < 2 ? r0 : r1, j = j0 + nt * 8 + 2 * t + (q & 1);");
    line("float s = sc[nt][q] * " + emitc::literal(a_.scale, DType::F32) + ";");
    for (const std::string& l : masked_score(k_, a_, "j >= SK || i >= SQ")) line(l);
    line("sc[nt][q] = s;");
    close();
    close();
    line("float top0 = " + neg_inf + ", top1 = " + neg_inf + ";");
    open("for (int nt = 0; nt < 4; ++nt)");
    line("top0 = fmaxf(top0, fmaxf(sc[nt][0], sc[nt][1]));");
    line("top1 = fmaxf(top1, fmaxf(sc[nt][2], sc[nt][3]));");
    close();
    open("for (int x = 1; x < 4; x <<= 1)");
    line("top0 = fmaxf(top0, __shfl_xor_sync(0xffffffffu, top0, x));");
    line("top1 = fmaxf(top1, __shfl_xor_sync(0xffffffffu, top1, x));");
    close();
    line("const float n0 = fmaxf(m0, top0), n1 = fmaxf(m1, top1);");
    line("const float a0 = n0 == " + neg_inf + " ? 1.f : expf(m0 - n0);");
    line("const float a1 = n1 == " + neg_inf + " ? 1.f : expf(m1 - n1);");
    open("for (int nt = 0; nt < 4; ++nt)");
    line("sc[nt][0] = n0 == " + neg_inf + " ? 0.f : expf(sc[nt][0] - n0);");
    line("sc[nt][1] = n0 == " + neg_inf + " ? 0.f : expf(sc[nt][1] - n0);");
    line("sc[nt][2] = n1 == " + neg_inf + " ? 0.f : expf(sc[nt][2] - n1);");
    line("sc[nt][3] = n1 == " + neg_inf + " ? 0.f : expf(sc[nt][3] - n1);");
    close();
    line("l0 = l0 * a0 + sc[0][0] + sc[0][1] + sc[1][0] + sc[1][1] + sc[2][0] + sc[2][1] + sc[3][0] + sc[3][1];");
    line("l1 = l1 * a1 + sc[0][2] + sc[0][3] + sc[1][2] + sc[1][3] + sc[2][2] + sc[2][3] + sc[3][2] + sc[3][3];");
    line("m0 = n0;");
    line("m1 = n1;");
    open("for (int n = 0; n < " + NO + "; ++n)");
    line("o[n][0] *= a0;");
    line("o[n][1] *= a0;");
    line("o[n][2] *= a1;");
    line("o[n][3] *= a1;");
    close();
    lines(weighted_rows(DType::F32, "sc", "vs", "", "o", DV));
    close();
    open("for (int x = 1; x < 4; x <<= 1)");
    line("l0 += __shfl_xor_sync(0xffffffffu, l0, x);");
    line("l1 += __shfl_xor_sync(0xffffffffu, l1, x);");
    close();
    mma_store_row("r0", "m0", "l0", 0);
    mma_store_row("r1", "m1", "l1", 2);
    out_ += "}\n";
    return out_;
  }

 private:
  int kp_, vp_;  // the key and value tiles' row pitches
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
         offset({{"b", a_.q_strides[0]}, {"h", a_.q_strides[1]}, {"i", a_.q_strides[2]}}) + ";");
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F64);
    line("double m = " + neg_inf + ", l = 0, o[" + DV + "] = {};");
    open(std::string("for (int64_t j = 0; j < ") + (a_.causal ? "(i + 1 < SK ? i + 1 : SK)" : "SK") + "; ++j)");
    line("const " + stored(k_, a_.k) + "* k = " + p(a_.k) + " + " +
         offset({{"b", a_.k_strides[0]}, {"hk", a_.k_strides[1]}, {"j", a_.k_strides[2]}}) + ";");
    line("const " + stored(k_, a_.v) + "* v = " + p(a_.v) + " + " +
         offset({{"b", a_.v_strides[0]}, {"hk", a_.v_strides[1]}, {"j", a_.v_strides[2]}}) + ";");
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

}  // namespace

// static: every translation unit that holds an mma attention kernel has its
// own copy, so relocatable shards linked into one cubin do not collide.
const char* const kAttentionMmaHelpers = R"(static __device__ __forceinline__ void tcc_mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
static __device__ __forceinline__ void tcc_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Two floats rounded to nearest even, the first in the low half.
static __device__ __forceinline__ uint32_t tcc_pack_f16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
static __device__ __forceinline__ uint32_t tcc_pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// Four (two) 8x8 matrices of 16-bit elements from shared memory, lane L naming row L % 8 of matrix L / 8;
// register i of lane l gets matrix i's row l / 4, elements 2 (l % 4) and one more (.trans: column l / 4,
// rows 2 (l % 4) and one more).
static __device__ __forceinline__ void tcc_ldsm_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(row)));
}
static __device__ __forceinline__ void tcc_ldsm_x4_t(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"((uint32_t)__cvta_generic_to_shared(row)));
}
static __device__ __forceinline__ void tcc_ldsm_x2_t(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(r[0]), "=r"(r[1]) : "r"((uint32_t)__cvta_generic_to_shared(row)));
}
// 16 bytes from global to shared memory, or 16 zero bytes where !copy.
static __device__ __forceinline__ void tcc_att_cp16(void* shared, const void* global, bool copy) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"((uint32_t)__cvta_generic_to_shared(shared)), "l"(global), "r"(copy ? 16 : 0) : "memory");
}
static __device__ __forceinline__ void tcc_att_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most the latest `pending` committed groups are in flight.
template <int pending> static __device__ __forceinline__ void tcc_att_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(pending) : "memory");
}
)";

const char* const kAttentionTf32Helpers = R"(static __device__ __forceinline__ uint32_t tcc_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
)";

bool attention_tf32(const kir::Kernel& k, const KernelConfig& c) {
  const kir::AttentionDesc& a = desc(k);
  return a.tf32 && c.mma && operand_dtype(k, a) == DType::F32;
}

namespace {

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
  if (c.mma) return operand_dtype(k, desc(k)) == DType::F32 ? Tf32Attention(k, c).print()
                                                            : TensorCoreAttention(k, c).print();
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
