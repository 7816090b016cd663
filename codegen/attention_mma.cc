// The forward attention kernel's tensor-core layouts (attention_template.h
// describes them): f16 / bf16 operands through mma.sync.m16n8k16, f32 under
// --precision tf32 through mma.sync.m16n8k8, and the device helpers they call.
#include <cmath>

#include "codegen/attention_template.h"
#include "codegen/attention_writer.h"

namespace tcc {

using namespace attention_emit;

namespace {

// The tensor-core layout for f16 and bf16 operands, FlashAttention-2's
// forward: each warp takes 16 query rows as an m16 tile (lane l holds rows
// l/4 and l/4 + 8), whose A fragments stay in registers for the whole key
// loop. Keys advance 64 at a time through K and V tiles in shared memory,
// rows as stored with a pitch of eight elements past the head, so the eight
// 16-byte rows an ldmatrix phase reads start in different bank groups. The
// tiles arrive by cp.async, 16 bytes a copy, where the operands' rows allow
// it (the head offsets and row strides whole 16-byte units; else element by
// element): V's copy is issued before the scores of the same keys are
// computed and the next K tile's before their probabilities meet V, so each
// copy overlaps a product. The scores' B fragments come from the K tile by
// ldmatrix, two n-tiles of eight keys a call, and V's from the V tile by
// ldmatrix.trans; the online softmax runs
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
    const std::string BN = std::to_string(kTileKeys);
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
    std::string whole = "(unsigned long long)K % 16 == 0 && (unsigned long long)V % 16 == 0";
    for (const SymExpr& stride : {a_.k_strides[2], a_.v_strides[2]})
      if (!emitc::divisible_by(stride, 8)) whole += " && " + expr(stride) + " % 8 == 0";
    line("const bool whole = " + whole + ";");
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
    mma_merge_sums();
    // The maxima are in base 2: times ln 2 for the log-sum-exp.
    const std::string ln2 = emitc::literal(1 / kLog2e, DType::F32);
    mma_store_row("r0", "(m0 * " + ln2 + ")", "l0", 0);
    mma_store_row("r1", "(m1 * " + ln2 + ")", "l1", 2);
    out_ += "}\n";
    return out_;
  }

 private:
  // Keys per tile: with heads up to 128 (kMmaMaxHead) the two tiles take at most 34 KB.
  static constexpr int kTileKeys = 64;
  static constexpr double kLog2e = 1.4426950408889634;

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

  // acc[2 p] and acc[2 p + 1] += `a` (an A fragment) times the B registers of
  // two n-tiles that one ldmatrix (`load`, x4, from shared element `row`)
  // gives: matrices 0 and 1 n-tile 2 p's, 2 and 3 n-tile 2 p + 1's.
  void pair_products(const std::string& load, const std::string& row, const std::string& acc, const std::string& a) {
    line("uint32_t b[4];");
    line(load + "(b, &" + row + ");");
    line("const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};");
    line(mma_helper(t_) + "(" + acc + "[2 * p], " + a + ", b0);");
    line(mma_helper(t_) + "(" + acc + "[2 * p + 1], " + a + ", b1);");
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
    // ldmatrix: lane L names row L % 8 of matrix L / 8, of keys p * 16 on
    // (matrices 2 and 3 eight keys further) and head elements kk * 16 on
    // (matrices 1 and 3 eight elements further).
    line("#pragma unroll");
    open("for (int kk = 0; kk < " + std::to_string(D / 16) + "; ++kk)");
    line("#pragma unroll");
    open("for (int p = 0; p < " + std::to_string(N / 2) + "; ++p)");
    pair_products("tcc_ldsm_x4", "ks[p * 16 + (lane >> 4) * 8 + (lane & 7)][kk * 16 + ((lane >> 3) & 1) * 8]", "sc",
                  "qa[kk]");
    close();
    close();
    const std::string log2e = emitc::literal(kLog2e, DType::F32);
    const bool plain = a_.mask < 0 && a_.softcap <= 0;
    if (plain) {
      // Inside the keys and (causal) at or before the warp's first row: no score is hidden.
      line(std::string("const bool inside = j0 + ") + std::to_string(kTileKeys) + " <= SK" +
           (a_.causal ? " && j0 + " + std::to_string(kTileKeys - 1) + " <= w0" : "") + ";");
      open("if (inside)");
      line("#pragma unroll");
      open("for (int n = 0; n < " + NT + "; ++n)");
      line("#pragma unroll");
      line("for (int q = 0; q < 4; ++q) sc[n][q] *= " + emitc::literal(a_.scale * kLog2e, DType::F32) +
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
    const std::string NT = std::to_string(kTileKeys / 8);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    // Maxima and sums over the n-tiles as trees, not chains of dependent steps.
    tree("top0", "fmaxf(sc[n][0], sc[n][1])", "fmaxf");
    tree("top1", "fmaxf(sc[n][2], sc[n][3])", "fmaxf");
    line("top0 = fmaxf(top0, m0);");
    line("top1 = fmaxf(top1, m1);");
    mma_row_maxima();
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
    mma_rescale_output();
  }

  // o += the probabilities (sc, packed as A fragments, 16 keys a k-step)
  // times the V tile: ldmatrix.trans gives B registers, matrices 1 and 3 of
  // keys kh * 16 + 8 on, 2 and 3 of value columns eight further; an odd last
  // n-tile takes two matrices.
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
    pair_products("tcc_ldsm_x4_t", "vs[kh * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][p * 16 + (lane >> 4) * 8]", "o",
                  "pa");
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
    load_tile("ks", "K", a_.k, a_.k_strides[2], a_.head_size, true);
    load_tile("vs", "V", a_.v, a_.v_strides[2], a_.v_head_size, true);
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
    mma_row_maxima();
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
    mma_rescale_output();
    lines(weighted_rows(DType::F32, "sc", "vs", "", "o", DV));
    close();
    mma_merge_sums();
    mma_store_row("r0", "m0", "l0", 0);
    mma_store_row("r1", "m1", "l1", 2);
    out_ += "}\n";
    return out_;
  }

 private:
  int kp_, vp_;  // the key and value tiles' row pitches
};

}  // namespace

std::string attention_emit::emit_mma_attention_cuda(const kir::Kernel& k, const KernelConfig& c) {
  return operand_dtype(k, desc(k)) == DType::F32 ? Tf32Attention(k, c).print() : TensorCoreAttention(k, c).print();
}

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

}  // namespace tcc
