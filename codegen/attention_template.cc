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

  // The signature, SQ and SK, the block's b, h and hk, and Q, K and V at them.
  void prologue() {
    out_ += emitc::cuda_signature(k_, false, b_.threads());
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

// The mma layout: each warp takes 16 query rows as an m16 tile. Lane l holds
// rows l/4 and l/4 + 8 of it; its query fragments stay in registers for the
// whole key loop. Per tile of 32 keys in shared memory the scores come from
// mma.sync into f32, the online softmax runs on them in registers (each
// row's four lanes agree on its maximum by two shuffles), and the
// probabilities become the A fragments of the next mma, with V, into the f32
// output accumulators, FlashAttention-2's register reuse. Each lane sums its
// own probabilities; the row's four sums merge at the end.
//
// f16 and bf16 (m16n8k16): K as stored and V transposed, both as their
// 16-bit bits; a lane's probabilities of an n-tile, keys 2 t and 2 t + 1,
// pack into the A fragment as they lie.
// TF32 (f32 operands under --precision tf32, m16n8k8): K and V as stored,
// rounded to TF32 (cvt.rna) as the tiles load, Q as its fragments do and the
// probabilities as they become A fragments. The accumulator holds keys 2 t
// and 2 t + 1 of an n-tile where the A fragment wants columns t and t + 4,
// so the P V product takes the n-tile's keys in the order 0, 2, 4, 6, 1, 3,
// 5, 7: column t is key 2 t, column t + 4 key 2 t + 1, and V's B fragment
// reads the same keys' rows; no shuffle moves a probability.
class MmaAttention : CudaAttentionWriter {
 public:
  MmaAttention(const kir::Kernel& k, const KernelConfig& c)
      : CudaAttentionWriter(k, c), t_(operand_dtype(k, a_)), tf32_(t_ == DType::F32),
        kp_(tf32_ ? split_pitch(a_.head_size) : mma_pitch(a_.head_size)),
        vp_(tf32_ ? split_pitch(a_.v_head_size) : mma_pitch(kKeys)) {}

  std::string print() {
    const int D = static_cast<int>(a_.head_size), DV = static_cast<int>(a_.v_head_size);
    const std::string NO = std::to_string(DV / 8), BN = std::to_string(kKeys);
    const std::string T = std::to_string(b_.threads());
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    prologue();
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;");
    line("const int64_t r0 = i0 + warp * " + std::to_string(kMmaRows) + " + g, r1 = r0 + 8;");
    const std::string bits = tile_bits(t_);
    line("__shared__ __align__(16) " + bits + " ks[" + BN + "][" + std::to_string(kp_) + "];");
    if (tf32_) line("__shared__ __align__(16) uint32_t vs[" + BN + "][" + std::to_string(vp_) + "];");
    else line("__shared__ __align__(16) uint16_t vt[" + std::to_string(DV) + "][" + std::to_string(vp_) + "];");
    // The query rows as A fragments, k-step kk holding head elements k kk .. k kk + k - 1.
    lines(a_fragments(t_, "qa", "Q", a_.q_strides[2], D, "SQ"));
    line("float o[" + NO + "][4];");
    line("for (int n = 0; n < " + NO + "; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;");
    line("float m0 = " + neg_inf + ", m1 = " + neg_inf + ", l0 = 0.f, l1 = 0.f;");
    key_bound();
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += " + BN + ")");
    line("__syncthreads();");
    open("for (int x = tid; x < " + BN + " * " + std::to_string(D) + "; x += " + T + ")");
    line("const int r = x / " + std::to_string(D) + ", d = x % " + std::to_string(D) + ";");
    line("ks[r][d] = j0 + r < SK ? " + tile_element(t_, "K[(j0 + r) * " + expr(a_.k_strides[2]) + " + d]") + " : (" +
         bits + ")0;");
    close();
    open("for (int x = tid; x < " + BN + " * " + std::to_string(DV) + "; x += " + T + ")");
    line("const int r = x / " + std::to_string(DV) + ", d = x % " + std::to_string(DV) + ";");
    line(std::string(tf32_ ? "vs[r][d]" : "vt[d][r]") + " = j0 + r < SK ? " +
         tile_element(t_, "V[(j0 + r) * " + expr(a_.v_strides[2]) + " + d]") + " : (" + bits + ")0;");
    close();
    line("__syncthreads();");
    // Scores of the warp's 16 rows against the tile's keys, eight keys an n-tile, scaled and masked.
    lines(row_products(t_, "sc", "qa", "ks", D));
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
    lines(weighted_rows(t_, "sc", "vs", "vt", "o", DV));
    close();
    open("for (int x = 1; x < 4; x <<= 1)");
    line("l0 += __shfl_xor_sync(0xffffffffu, l0, x);");
    line("l1 += __shfl_xor_sync(0xffffffffu, l1, x);");
    close();
    store_row("r0", "m0", "l0", 0);
    store_row("r1", "m1", "l1", 2);
    out_ += "}\n";
    return out_;
  }

 private:
  // Row `row` of the output from accumulator elements first and first + 1 of
  // each n-tile, and its log-sum-exp from its maximum `top` and sum.
  void store_row(const std::string& row, const std::string& top, const std::string& sum, int first) {
    open("if (" + row + " < SQ)");
    line("const int64_t i = " + row + ";");
    store_lse(top, sum, "t == 0");
    output_row();
    line("const float inv = " + sum + " > 0.f ? 1.f / " + sum + " : 0.f;");
    open("for (int n = 0; n < " + std::to_string(a_.v_head_size / 8) + "; ++n)");
    line("Y[n * 8 + 2 * t] = " + store("o[n][" + std::to_string(first) + "] * inv") + ";");
    line("Y[n * 8 + 2 * t + 1] = " + store("o[n][" + std::to_string(first + 1) + "] * inv") + ";");
    close();
    close();
  }

  DType t_;           // the operands' dtype
  bool tf32_;         // f32 operands as TF32 (m16n8k8), else f16 or bf16 (m16n8k16)
  int kp_, vp_;       // the key tile's and the value tile's (transposed for f16 and bf16) row pitches
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
    c.block = 128;
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
  if (c.mma) return MmaAttention(k, c).print();
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
