#include "codegen/attention_grad_template.h"

#include <cmath>

#include "codegen/attention_emit.h"
#include "codegen/block_config.h"
#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

using namespace attention_emit;
using kir::AttentionPass;

constexpr int kMaxThreads = 256;

const kir::AttentionDesc& grad_desc(const kir::Kernel& k) {
  TCC_CHECK(k.kind == kir::Kind::Attention && k.attention && k.attention->pass != AttentionPass::Forward)
      << k.name << " is not an attention backward kernel";
  return *k.attention;
}

// Whether the pass's rows are key rows of a kv head (GradK, GradV, GradKV) rather than query rows of a head.
bool key_rows(const kir::AttentionDesc& a) {
  return a.pass == AttentionPass::GradK || a.pass == AttentionPass::GradV || a.pass == AttentionPass::GradKV;
}

// The stored output row's size: the statistics' two, a head's (dQ, dK) or a value head's (dV).
int64_t row_size(const kir::AttentionDesc& a) {
  return a.pass == AttentionPass::Stats ? 2 : a.pass == AttentionPass::GradV ? a.v_head_size : a.head_size;
}

// Text both targets share: the operands' rows, the output row, a score.
class GradWriter : protected emitc::CodeWriter {
 protected:
  explicit GradWriter(const kir::Kernel& k) : k_(k), a_(grad_desc(k)), o_(output_buffer(k)) {}

  std::string G() const { return std::to_string(a_.heads / a_.kv_heads); }
  std::string D() const { return std::to_string(a_.head_size); }
  std::string DV() const { return std::to_string(a_.v_head_size); }

  // `const T* name = buffer + b * s0 + <head> * s1 [+ <row> * s2];`
  void row_pointer(const std::string& name, int buffer, const std::array<SymExpr, 3>& s, const std::string& head,
                   const std::string& row) {
    std::vector<std::pair<std::string, SymExpr>> terms = {{"b", s[0]}, {head, s[1]}};
    if (!row.empty()) terms.push_back({row, s[2]});
    line("const " + stored(k_, buffer) + "* __restrict__ " + name + " = " + p(buffer) + " + " + offset(terms) + ";");
  }

  // The output row of batch b, row head hr, row r; GradKV's dV row too.
  void output_row() {
    const std::array<SymExpr, 3> os = output_strides(k_);
    line(stored(k_, o_) + "* __restrict__ O = " + p(o_) + " + " +
         offset({{"b", os[0]}, {"hr", os[1]}, {"r", os[2]}}) + ";");
    if (a_.pass == AttentionPass::GradKV)
      line(stored(k_, a_.dv) + "* __restrict__ OV = " + p(a_.dv) + " + " +
           offset({{"b", a_.dv_strides[0]}, {"hr", a_.dv_strides[1]}, {"r", a_.dv_strides[2]}}) + ";");
  }

  // The statistics pass's query row i of head h: dY's and Y's rows.
  void statistics_row() {
    line("const int64_t h = hr, i = r;");
    row_pointer("dY", a_.dout, a_.dout_strides, "h", "i");
    row_pointer("A", a_.aux, a_.aux_strides, "h", "i");
  }

  // A key-row pass's key row j of kv head hk: K's and V's rows.
  void key_row() {
    line("const int64_t hk = hr, j = r;");
    row_pointer("Kj", a_.k, a_.k_strides, "hk", "j");
    row_pointer("Vj", a_.v, a_.v_strides, "hk", "j");
  }

  // Whether the pass accumulates dK (GradK, GradKV) and dV (GradV, GradKV).
  bool grad_k() const { return a_.pass == AttentionPass::GradK || a_.pass == AttentionPass::GradKV; }
  bool grad_v() const { return a_.pass == AttentionPass::GradV || a_.pass == AttentionPass::GradKV; }

  // Element `e` of dY's, Y's or the statistics' row `row` (pointers dY and A
  // at the head) and of K's and V's (at the kv head).
  std::string at(const char* base, int buffer, const SymExpr& row_stride, const std::string& row,
                 const std::string& e) const {
    return read(k_, buffer, std::string(base) + "[" + row + " * " + expr(row_stride) + " + " + e + "]");
  }

  // Whether the gradient passes' coefficients carry the soft-cap's derivative.
  bool capped() const { return a_.softcap > 0 && a_.pass != AttentionPass::Stats; }

  const kir::Kernel& k_;
  const kir::AttentionDesc& a_;
  int o_;  // the output buffer
};

class CudaAttentionGrad : GradWriter {
 public:
  CudaAttentionGrad(const kir::Kernel& k, const KernelConfig& c) : GradWriter(k), warps_(c.block / 32) {}

  std::string print() {
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    const std::string RH = std::to_string(key_rows(a_) ? a_.kv_heads : a_.heads);
    out_ += emitc::cuda_signature(k_, false, warps_ * 32);
    line("const int64_t SQ = " + expr(a_.q_len) + ", SK = " + expr(a_.kv_len) + ";");
    line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
    line("const int64_t b = blockIdx.x / " + RH + ", hr = blockIdx.x % " + RH + ";");
    line("const int64_t r = (int64_t)blockIdx.y * " + std::to_string(warps_) + " + warp;");
    line(std::string("if (r >= ") + (key_rows(a_) ? "SK" : "SQ") + ") return;");
    output_row();
    if (a_.pass == AttentionPass::Stats) {
      statistics();
      out_ += "}\n";
      return out_;
    }
    declare_accumulator("acc", row_size(a_));
    if (a_.pass == AttentionPass::GradKV) declare_accumulator("accv", a_.v_head_size);
    if (key_rows(a_)) key_row_pass(neg_inf);
    else query_row_pass(neg_inf);
    store_accumulator("acc", "O", o_, row_size(a_));
    if (a_.pass == AttentionPass::GradKV) store_accumulator("accv", "OV", a_.dv, a_.v_head_size);
    out_ += "}\n";
    return out_;
  }

 private:
  static int chunks(int64_t size) { return static_cast<int>((size + 31) / 32); }

  // float acc[chunks]: the lane's elements lane + 32 t of an output row of `size`.
  void declare_accumulator(const std::string& acc, int64_t size) {
    line("float " + acc + "[" + std::to_string(chunks(size)) + "];");
    line("for (int t = 0; t < " + std::to_string(chunks(size)) + "; ++t) " + acc + "[t] = 0.f;");
  }

  void store_accumulator(const std::string& acc, const std::string& row, int buffer, int64_t size) {
    line("#pragma unroll");
    open("for (int t = 0; t < " + std::to_string(chunks(size)) + "; ++t)");
    line("const int e = lane + 32 * t;");
    line("if (e < " + std::to_string(size) + ") " + row + "[e] = " + emitc::encode(acc + "[t]", dtype_of(k_, buffer)) +
         ";");
    close();
  }

  // Lines that set the f32 score s of query row i and key j (K pointing at
  // the key's row when `key_row` is empty, else at the kv head) from Q's row.
  // With soft-capping, dcap is its derivative at the score.
  void score(const std::string& q_row, const std::string& k_row, const std::string& live) {
    line("float s = " + emitc::literal(-INFINITY, DType::F32) + ";");
    if (capped()) line("float dcap = 0.f;");
    open("if (" + live + ")");
    line("float dot = 0.f;");
    line("for (int d = 0; d < " + D() + "; ++d) dot += " + read(k_, a_.q, q_row + "[d]") + " * " +
         read(k_, a_.k, k_row + "[d]") + ";");
    line("s = dot * " + emitc::literal(a_.scale, DType::F32) + ";");
    for (const std::string& l : masked_score(k_, a_, "false", capped() ? "dcap" : "")) line(l);
    close();
  }

  std::string cap_factor() const { return capped() ? " * dcap" : ""; }

  void warp_sum(const std::string& v) {
    line("for (int x = 16; x > 0; x >>= 1) " + v + " += __shfl_xor_sync(0xffffffffu, " + v + ", x);");
  }

  // acc[t] += (lane u's coefficient) * row[lane + 32 t] for the n rows of
  // `size` from `first` of `base` (a row stride apart).
  void accumulate(const std::string& n, const std::string& base, int buffer, const SymExpr& stride,
                  const std::string& first, const std::string& coefficient, const std::string& acc, int64_t size) {
    open("for (int u = 0; u < " + n + "; ++u)");
    line("const float cu = __shfl_sync(0xffffffffu, " + coefficient + ", u);");
    line("#pragma unroll");
    open("for (int t = 0; t < " + std::to_string(chunks(size)) + "; ++t)");
    line("const int e = lane + 32 * t;");
    line("if (e < " + std::to_string(size) + ") " + acc + "[t] += cu * " +
         at(base.c_str(), buffer, stride, "(" + first + " + u)", "e") + ";");
    close();
    close();
  }

  // Stats: the warp's query row's saved log-sum-exp beside dY . Y; no score.
  void statistics() {
    statistics_row();
    line("float dd = 0.f;");
    line("for (int e = lane; e < " + DV() + "; e += 32) dd += " + read(k_, a_.dout, "dY[e]") + " * " +
         read(k_, a_.aux, "A[e]") + ";");
    warp_sum("dd");
    open("if (lane == 0)");
    line("O[0] = " + lse_element(a_) + ";");
    line("O[1] = dd;");
    close();
  }

  // GradQ: the warp's query row i against the keys, 32 at a time.
  void query_row_pass(const std::string& neg_inf) {
    line("const int64_t h = hr, hk = h / " + G() + ", i = r;");
    row_pointer("Q", a_.q, a_.q_strides, "h", "i");
    row_pointer("K", a_.k, a_.k_strides, "hk", "");
    row_pointer("V", a_.v, a_.v_strides, "hk", "");
    row_pointer("dY", a_.dout, a_.dout_strides, "h", "i");
    row_pointer("A", a_.aux, a_.aux_strides, "h", "i");
    line(std::string("const int64_t kv_end = ") + (a_.causal ? "i + 1 < SK ? i + 1 : SK" : "SK") + ";");
    line("const float lse = A[0], dd = A[1];");
    open("if (lse != " + neg_inf + ")");
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += 32)");
    line("const int64_t j = j0 + lane;");
    score("Q", "(K + j * " + expr(a_.k_strides[2]) + ")", "j < kv_end");
    line("float c = 0.f;");
    open("if (s != " + neg_inf + ")");
    line("float dp = 0.f;");
    line("for (int e = 0; e < " + DV() + "; ++e) dp += " + read(k_, a_.dout, "dY[e]") + " * " +
         at("V", a_.v, a_.v_strides[2], "j", "e") + ";");
    line("c = expf(s - lse) * (dp - dd) * " + emitc::literal(a_.scale, DType::F32) + cap_factor() + ";");
    close();
    line("const int n = kv_end - j0 < 32 ? (int)(kv_end - j0) : 32;");
    accumulate("n", "K", a_.k, a_.k_strides[2], "j0", "c", "acc", a_.head_size);
    close();
    close();
  }

  // GradK, GradV and GradKV: the warp's key row j against the query rows of
  // its kv head's group, 32 at a time; GradKV accumulates dK (acc, from
  // dS_ij) and dV (accv, from P_ij) from the same scores.
  void key_row_pass(const std::string& neg_inf) {
    key_row();
    open("for (int g = 0; g < " + G() + "; ++g)");
    line("const int64_t h = hk * " + G() + " + g;");
    row_pointer("Q", a_.q, a_.q_strides, "h", "");
    row_pointer("dY", a_.dout, a_.dout_strides, "h", "");
    row_pointer("A", a_.aux, a_.aux_strides, "h", "");
    open(std::string("for (int64_t i0 = ") + (a_.causal ? "j" : "0") + "; i0 < SQ; i0 += 32)");
    line("const int64_t i = i0 + lane;");
    score("(Q + i * " + expr(a_.q_strides[2]) + ")", "Kj", "i < SQ");
    line("float c = 0.f;");
    if (a_.pass == AttentionPass::GradKV) line("float cv = 0.f;");
    open("if (s != " + neg_inf + ")");
    line("const float lse = A[i * " + expr(a_.aux_strides[2]) + "];");
    open("if (lse != " + neg_inf + ")");
    if (grad_k()) {
      line("const float pj = expf(s - lse);");
      line("float dp = 0.f;");
      line("for (int e = 0; e < " + DV() + "; ++e) dp += " + at("dY", a_.dout, a_.dout_strides[2], "i", "e") + " * " +
           read(k_, a_.v, "Vj[e]") + ";");
      line("c = pj * (dp - A[i * " + expr(a_.aux_strides[2]) + " + 1]) * " + emitc::literal(a_.scale, DType::F32) +
           cap_factor() + ";");
      if (grad_v()) line("cv = pj;");
    } else {
      line("c = expf(s - lse);");
    }
    close();
    close();
    line("const int n = SQ - i0 < 32 ? (int)(SQ - i0) : 32;");
    if (grad_k()) accumulate("n", "Q", a_.q, a_.q_strides[2], "i0", "c", "acc", a_.head_size);
    if (a_.pass == AttentionPass::GradV)
      accumulate("n", "dY", a_.dout, a_.dout_strides[2], "i0", "c", "acc", a_.v_head_size);
    if (a_.pass == AttentionPass::GradKV)
      accumulate("n", "dY", a_.dout, a_.dout_strides[2], "i0", "cv", "accv", a_.v_head_size);
    close();
    close();
  }

  int warps_;
};

// The gradient passes' tensor-core layout, FlashAttention-2's backward on mma.sync: each warp takes 16 rows of
// the pass's output (query rows for GradQ, key rows of a kv head for the others), their operand rows as A
// fragments in registers (attention_emit's layout), and walks the other side 32 rows a tile through shared
// memory, recomputing the scores from the saved log-sum-exp: GradQ, per key tile, S = Q K^T and dP = dY V^T,
// then dQ += dS K with dS = P (dP - D) * scale; the key-row passes, per query tile of each head of the group,
// S^T = K Q^T, then dV += P^T dY and, with dP^T = V dY^T, dK += dS^T Q. Products in the operands' dtype (TF32
// for f32 under --precision tf32), the coefficients rounded to it as A fragments, accumulated in f32; the
// statistics pass (dY . Y) stays on the CUDA cores.
class MmaAttentionGrad : GradWriter {
 public:
  MmaAttentionGrad(const kir::Kernel& k, const KernelConfig& c)
      : GradWriter(k), warps_(c.block / 32), t_(operand_dtype(k, a_)), tf32_(t_ == DType::F32) {}

  std::string print() {
    const std::string RH = std::to_string(key_rows(a_) ? a_.kv_heads : a_.heads);
    out_ += emitc::cuda_signature(k_, false, warps_ * 32);
    line("const int64_t SQ = " + expr(a_.q_len) + ", SK = " + expr(a_.kv_len) + ";");
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;");
    line("const int64_t b = blockIdx.x / " + RH + ", hr = blockIdx.x % " + RH + ";");
    line("const int64_t first = (int64_t)blockIdx.y * " + std::to_string(warps_ * kMmaRows) + ";");
    line("const int64_t r0 = first + warp * " + std::to_string(kMmaRows) + " + g, r1 = r0 + 8;");
    if (key_rows(a_)) key_tile_pass();
    else query_tile_pass();
    out_ += "}\n";
    return out_;
  }

 private:
  static constexpr int kTile = 32;  // rows of the other side per shared tile

  // __shared__ tiles of kTile rows of `size`: `rows` (tile[row][e]) and, for f16 and bf16 where named,
  // `transposed` (tile[e][row]), the B operand of a product that sums over the tile's rows.
  void declare_tiles(const std::string& rows, const std::string& transposed, int64_t size) {
    const std::string T = std::to_string(kTile);
    line("__shared__ __align__(16) " + tile_bits(t_) + " " + rows + "[" + T + "][" +
         std::to_string(tf32_ ? split_pitch(size) : mma_pitch(size)) + "];");
    if (!tf32_ && !transposed.empty())
      line("__shared__ __align__(16) uint16_t " + transposed + "[" + std::to_string(size) + "][" +
           std::to_string(mma_pitch(kTile)) + "];");
  }

  // Rows start .. start + kTile - 1 of `from` (zeros from row `bound` on) into the tiles.
  void load_tiles(const std::string& rows, const std::string& transposed, const std::string& from,
                  const SymExpr& stride, int64_t size, const std::string& start, const std::string& bound) {
    const std::string S = std::to_string(size), bits = tile_bits(t_);
    open("for (int x = tid; x < " + std::to_string(kTile) + " * " + S + "; x += " + std::to_string(warps_ * 32) +
         ")");
    line("const int r = x / " + S + ", d = x % " + S + ";");
    line("const " + bits + " e = " + start + " + r < " + bound + " ? " +
         tile_element(t_, from + "[(" + start + " + r) * " + expr(stride) + " + d]") + " : (" + bits + ")0;");
    line(rows + "[r][d] = e;");
    if (!tf32_ && !transposed.empty()) line(transposed + "[d][r] = e;");
    close();
  }

  // float acc[size / 8][4], zeroed: an f32 accumulator of 16 rows of `size`.
  void declare_accumulator(const std::string& acc, int64_t size) {
    const std::string n = std::to_string(size / 8);
    line("float " + acc + "[" + n + "][4];");
    line("for (int n = 0; n < " + n + "; ++n) " + acc + "[n][0] = " + acc + "[n][1] = " + acc + "[n][2] = " + acc +
         "[n][3] = 0.f;");
  }

  // The accumulator's rows r0 and r1 into `buffer` (row head hr) where they are below `bound`.
  void store_accumulator(const std::string& acc, int buffer, const std::array<SymExpr, 3>& s, int64_t size,
                         const std::string& bound) {
    for (const auto& [row, q] : {std::pair<std::string, int>{"r0", 0}, {"r1", 2}}) {
      open("if (" + row + " < " + bound + ")");
      line(stored(k_, buffer) + "* __restrict__ R = " + p(buffer) + " + " +
           offset({{"b", s[0]}, {"hr", s[1]}, {row, s[2]}}) + ";");
      open("for (int n = 0; n < " + std::to_string(size / 8) + "; ++n)");
      line("R[n * 8 + 2 * t] = " + emitc::encode(acc + "[n][" + std::to_string(q) + "]", dtype_of(k_, buffer)) + ";");
      line("R[n * 8 + 2 * t + 1] = " + emitc::encode(acc + "[n][" + std::to_string(q + 1) + "]", dtype_of(k_, buffer)) +
           ";");
      close();
      close();
    }
  }

  // Lines that turn element q of n-tile nt of the scores sc (row i, key j; outside: past the queries or keys)
  // into P = exp(s - lse), and where `dp` names dP's fragments into dS = P (dP - dd) * scale (times the
  // soft-cap's derivative), assigned to `coefficient`.
  void coefficients(const std::string& outside, const std::string& lse, const std::string& dd, const std::string& dp,
                    const std::string& coefficient, const std::string& probability) {
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F32);
    line("float s = sc[nt][q] * " + emitc::literal(a_.scale, DType::F32) + ";");
    if (capped()) line("float dcap = 0.f;");
    for (const std::string& l : masked_score(k_, a_, outside, capped() ? "dcap" : "")) line(l);
    line("const float lse = " + lse + ";");
    line("const float pij = s == " + neg_inf + " || lse == " + neg_inf + " ? 0.f : expf(s - lse);");
    if (!probability.empty()) line(probability + "[nt][q] = pij;");
    if (dp.empty()) line(coefficient + "[nt][q] = pij;");
    else
      line(coefficient + "[nt][q] = pij * (" + dp + "[nt][q] - " + dd + ") * " +
           emitc::literal(a_.scale, DType::F32) + (capped() ? " * dcap" : "") + ";");
  }

  // GradQ: the warp's 16 query rows against the keys, a tile at a time.
  void query_tile_pass() {
    const int64_t hd = a_.head_size, vd = a_.v_head_size;
    const std::string T = std::to_string(kTile), neg_inf = emitc::literal(-INFINITY, DType::F32);
    line("const int64_t h = hr, hk = h / " + G() + ";");
    row_pointer("Q", a_.q, a_.q_strides, "h", "");
    row_pointer("K", a_.k, a_.k_strides, "hk", "");
    row_pointer("V", a_.v, a_.v_strides, "hk", "");
    row_pointer("dY", a_.dout, a_.dout_strides, "h", "");
    row_pointer("A", a_.aux, a_.aux_strides, "h", "");
    declare_tiles("ks", "kt", hd);
    declare_tiles("vk", "", vd);
    lines(a_fragments(t_, "qa", "Q", a_.q_strides[2], hd, "SQ"));
    lines(a_fragments(t_, "da", "dY", a_.dout_strides[2], vd, "SQ"));
    for (const char* r : {"0", "1"}) {
      const std::string row = std::string("r") + r;
      line("const float lse" + std::string(r) + " = " + row + " < SQ ? " +
           at("A", a_.aux, a_.aux_strides[2], row, "0") + " : " + neg_inf + ";");
      line("const float dd" + std::string(r) + " = " + row + " < SQ ? " +
           at("A", a_.aux, a_.aux_strides[2], row, "1") + " : 0.f;");
    }
    declare_accumulator("acc", hd);
    const std::string BM = std::to_string(warps_ * kMmaRows);
    line(std::string("const int64_t kv_end = ") + (a_.causal ? "SK < first + " + BM + " ? SK : first + " + BM : "SK") +
         ";");
    open("for (int64_t j0 = 0; j0 < kv_end; j0 += " + T + ")");
    line("__syncthreads();");
    load_tiles("ks", "kt", "K", a_.k_strides[2], hd, "j0", "SK");
    load_tiles("vk", "", "V", a_.v_strides[2], vd, "j0", "SK");
    line("__syncthreads();");
    lines(row_products(t_, "sc", "qa", "ks", hd));
    lines(row_products(t_, "dp", "da", "vk", vd));
    open("for (int nt = 0; nt < 4; ++nt)");
    open("for (int q = 0; q < 4; ++q)");
    line("const int64_t i = q < 2 ? r0 : r1, j = j0 + nt * 8 + 2 * t + (q & 1);");
    coefficients("j >= SK || i >= SQ", "q < 2 ? lse0 : lse1", "(q < 2 ? dd0 : dd1)", "dp", "sc", "");
    close();
    close();
    lines(weighted_rows(t_, "sc", "ks", "kt", "acc", hd));
    close();
    store_accumulator("acc", o_, output_strides(k_), hd, "SQ");
  }

  // GradK, GradV and GradKV: the warp's 16 key rows against the query rows of each head of their kv head's
  // group, a tile at a time; GradKV accumulates dK (acc) and dV (accv) from the same scores.
  void key_tile_pass() {
    const int64_t hd = a_.head_size, vd = a_.v_head_size;
    const std::string T = std::to_string(kTile), neg_inf = emitc::literal(-INFINITY, DType::F32);
    line("const int64_t hk = hr;");
    row_pointer("K", a_.k, a_.k_strides, "hk", "");
    row_pointer("V", a_.v, a_.v_strides, "hk", "");
    const std::string qt = grad_k() ? "qt" : "", yt = grad_v() ? "yt" : "";
    declare_tiles("qs", qt, hd);
    declare_tiles("ys", yt, vd);
    line("__shared__ float ls[" + T + "], ds[" + T + "];");
    lines(a_fragments(t_, "ka", "K", a_.k_strides[2], hd, "SK"));
    if (grad_k()) lines(a_fragments(t_, "va", "V", a_.v_strides[2], vd, "SK"));
    declare_accumulator("acc", a_.pass == AttentionPass::GradV ? vd : hd);
    if (a_.pass == AttentionPass::GradKV) declare_accumulator("accv", vd);
    open("for (int gq = 0; gq < " + G() + "; ++gq)");
    line("const int64_t h = hk * " + G() + " + gq;");
    row_pointer("Q", a_.q, a_.q_strides, "h", "");
    row_pointer("dY", a_.dout, a_.dout_strides, "h", "");
    row_pointer("A", a_.aux, a_.aux_strides, "h", "");
    open(std::string("for (int64_t i0 = ") + (a_.causal ? "first" : "0") + "; i0 < SQ; i0 += " + T + ")");
    line("__syncthreads();");
    load_tiles("qs", qt, "Q", a_.q_strides[2], hd, "i0", "SQ");
    load_tiles("ys", yt, "dY", a_.dout_strides[2], vd, "i0", "SQ");
    open("if (tid < " + T + ")");
    line("ls[tid] = i0 + tid < SQ ? " + at("A", a_.aux, a_.aux_strides[2], "(i0 + tid)", "0") + " : " + neg_inf + ";");
    line("ds[tid] = i0 + tid < SQ ? " + at("A", a_.aux, a_.aux_strides[2], "(i0 + tid)", "1") + " : 0.f;");
    close();
    line("__syncthreads();");
    lines(row_products(t_, "sc", "ka", "qs", hd));
    if (grad_k()) lines(row_products(t_, "dp", "va", "ys", vd));
    if (a_.pass == AttentionPass::GradKV) line("float pv[4][4];");
    open("for (int nt = 0; nt < 4; ++nt)");
    open("for (int q = 0; q < 4; ++q)");
    line("const int c = nt * 8 + 2 * t + (q & 1);");
    line("const int64_t j = q < 2 ? r0 : r1, i = i0 + c;");
    coefficients("i >= SQ || j >= SK", "ls[c]", "ds[c]", grad_k() ? "dp" : "", "sc",
                 a_.pass == AttentionPass::GradKV ? "pv" : "");
    close();
    close();
    if (grad_k()) lines(weighted_rows(t_, "sc", "qs", "qt", "acc", hd));
    if (a_.pass == AttentionPass::GradV) lines(weighted_rows(t_, "sc", "ys", "yt", "acc", vd));
    if (a_.pass == AttentionPass::GradKV) lines(weighted_rows(t_, "pv", "ys", "yt", "accv", vd));
    close();
    close();
    store_accumulator("acc", o_, output_strides(k_), a_.pass == AttentionPass::GradV ? vd : hd, "SK");
    if (a_.pass == AttentionPass::GradKV) store_accumulator("accv", a_.dv, a_.dv_strides, vd, "SK");
  }

  int warps_;
  DType t_;    // the operands' dtype
  bool tf32_;  // f32 operands as TF32 (m16n8k8), else f16 or bf16 (m16n8k16)
};

// The host kernel: the same sums per output row, in double.
class HostAttentionGrad : GradWriter {
 public:
  explicit HostAttentionGrad(const kir::Kernel& k) : GradWriter(k) {}

  std::string print() {
    out_ += emitc::host_signature(k_);
    const std::string neg_inf = emitc::literal(-INFINITY, DType::F64);
    line("const int64_t SQ = " + expr(a_.q_len) + ", SK = " + expr(a_.kv_len) + ";");
    open("for (int64_t b = 0; b < " + expr(a_.batch) + "; ++b)");
    const bool keys = key_rows(a_);
    open("for (int64_t hr = 0; hr < " + std::to_string(keys ? a_.kv_heads : a_.heads) + "; ++hr)");
    open(std::string("for (int64_t r = 0; r < ") + (keys ? "SK" : "SQ") + "; ++r)");
    output_row();
    if (a_.pass == AttentionPass::Stats) {
      statistics_row();
      line("double dd = 0;");
      line("for (int e = 0; e < " + DV() + "; ++e) dd += (double)" + read(k_, a_.dout, "dY[e]") + " * " +
           read(k_, a_.aux, "A[e]") + ";");
      line("O[0] = " + lse_element(a_) + ";");
      line("O[1] = (float)dd;");
      close();
      close();
      close();
      out_ += "}\n";
      return out_;
    }
    const std::string size = std::to_string(row_size(a_));
    line("double acc[" + size + "] = {};");
    if (a_.pass == AttentionPass::GradKV) line("double accv[" + DV() + "] = {};");
    if (keys) {
      key_row();
      open("for (int64_t h = hk * " + G() + "; h < (hk + 1) * " + G() + "; ++h)");
      row_pointer("A", a_.aux, a_.aux_strides, "h", "");
      open(std::string("for (int64_t i = ") + (a_.causal ? "j" : "0") + "; i < SQ; ++i)");
      row_pointer("Q", a_.q, a_.q_strides, "h", "i");
      row_pointer("dY", a_.dout, a_.dout_strides, "h", "i");
      score("Kj");
      line("const double lse = A[i * " + expr(a_.aux_strides[2]) + "];");
      line("if (lse == " + neg_inf + ") continue;");
      line("const double pj = exp(s - lse);");
      if (grad_k()) {
        dp("Vj");
        line("const double c = pj * (dp - A[i * " + expr(a_.aux_strides[2]) + " + 1]) * " +
             emitc::literal(a_.scale, DType::F64) + (capped() ? " * dcap" : "") + ";");
        line("for (int e = 0; e < " + D() + "; ++e) acc[e] += c * " + read(k_, a_.q, "Q[e]") + ";");
      }
      if (grad_v())
        line("for (int e = 0; e < " + DV() + "; ++e) " + (grad_k() ? "accv" : "acc") + "[e] += pj * " +
             read(k_, a_.dout, "dY[e]") + ";");
      close();
      close();
    } else {
      line("const int64_t h = hr, hk = h / " + G() + ", i = r;");
      row_pointer("Q", a_.q, a_.q_strides, "h", "i");
      row_pointer("dY", a_.dout, a_.dout_strides, "h", "i");
      row_pointer("A", a_.aux, a_.aux_strides, "h", "i");
      line("const double lse = A[0], dd = A[1];");
      open(std::string("for (int64_t j = 0; j < ") + (a_.causal ? "(i + 1 < SK ? i + 1 : SK)" : "SK") + "; ++j)");
      row_pointer("Kj", a_.k, a_.k_strides, "hk", "j");
      row_pointer("Vj", a_.v, a_.v_strides, "hk", "j");
      score("Kj");
      line("if (lse == " + neg_inf + ") continue;");
      dp("Vj");
      line("const double c = exp(s - lse) * (dp - dd) * " + emitc::literal(a_.scale, DType::F64) +
           (capped() ? " * dcap" : "") + ";");
      line("for (int e = 0; e < " + D() + "; ++e) acc[e] += c * " + read(k_, a_.k, "Kj[e]") + ";");
      close();
    }
    line("for (int e = 0; e < " + size + "; ++e) O[e] = " + emitc::encode("(float)acc[e]", dtype_of(k_, o_)) + ";");
    if (a_.pass == AttentionPass::GradKV)
      line("for (int e = 0; e < " + DV() + "; ++e) OV[e] = " + emitc::encode("(float)accv[e]", dtype_of(k_, a_.dv)) +
           ";");
    close();
    close();
    close();
    out_ += "}\n";
    return out_;
  }

 private:
  // double s: query row Q against the key row `k_row`, soft-capped (dcap: the
  // cap's derivative, for the gradients) and masked; a hidden key `continue`s.
  void score(const std::string& k_row) {
    line("double s = 0;");
    line("for (int d = 0; d < " + D() + "; ++d) s += (double)" + read(k_, a_.q, "Q[d]") + " * " +
         read(k_, a_.k, k_row + "[d]") + ";");
    line("s *= " + emitc::literal(a_.scale, DType::F64) + ";");
    if (a_.softcap > 0) {
      const std::string cap = emitc::literal(a_.softcap, DType::F64);
      line("const double t = tanh(s / " + cap + ");");
      line("s = " + cap + " * t;");
      if (capped()) line("const double dcap = 1 - t * t;");
    }
    if (a_.mask >= 0)
      for (const std::string& l : host_masked_score(k_, a_)) line(l);
  }

  // double dp = dY . V_j.
  void dp(const std::string& v_row) {
    line("double dp = 0;");
    line("for (int e = 0; e < " + DV() + "; ++e) dp += (double)" + read(k_, a_.dout, "dY[e]") + " * " +
         read(k_, a_.v, v_row + "[e]") + ";");
  }
};

}  // namespace

std::string emit_attention_grad_cuda(const kir::Kernel& k, const KernelConfig& c) {
  std::string refusal = attention_grad_refusal(k, c);
  TCC_CHECK(refusal.empty()) << k.name << ": " << refusal;
  return c.mma ? MmaAttentionGrad(k, c).print() : CudaAttentionGrad(k, c).print();
}

std::string emit_attention_grad_host(const kir::Kernel& k) { return HostAttentionGrad(k).print(); }

KernelLaunch attention_grad_launch(const kir::Kernel& k, const KernelConfig& c) {
  const kir::AttentionDesc& a = grad_desc(k);
  const int rows = c.block / 32 * (c.mma ? kMmaRows : 1);
  KernelLaunch l;
  l.grid[0] = a.batch * SymExpr::constant(key_rows(a) ? a.kv_heads : a.heads);
  l.grid[1] = ((key_rows(a) ? a.kv_len : a.q_len) + SymExpr::constant(rows - 1)).floordiv(SymExpr::constant(rows));
  l.block[0] = c.block;
  return l;
}

KernelConfig attention_grad_default_config(const kir::Kernel& k) {
  KernelConfig c = block_config(128);
  c.mma = mma_refusal(k, grad_desc(k)).empty();
  return c;
}

std::string attention_grad_refusal(const kir::Kernel& k, const KernelConfig& c) {
  const kir::AttentionDesc& a = grad_desc(k);
  KernelConfig knobs = block_config(c.block);
  knobs.mma = c.mma;
  if (c != knobs)
    return "the attention backward's kernels choose their threads per block and the tensor-core layout, nothing else";
  if (std::string why = block_refusal(c.block, kMaxThreads); !why.empty()) return why;
  return c.mma ? mma_refusal(k, a) : "";
}

std::vector<KernelConfig> attention_grad_configs(const kir::Kernel& k) {
  std::vector<KernelConfig> out;
  for (bool mma : {true, false})
    for (int block = 64; block <= kMaxThreads; block *= 2) {
      KernelConfig c = block_config(block);
      c.mma = mma;
      if (attention_grad_refusal(k, c).empty()) out.push_back(c);
    }
  return out;
}

std::string attention_grad_schedule(const kir::Kernel& k, const KernelConfig& c) {
  const kir::AttentionDesc& a = grad_desc(k);
  const std::string mma = operand_dtype(k, a) == DType::F32 ? "m16n8k8 tf32" : "m16n8k16";
  const std::string layout = c.mma ? "tensor-core layout (mma.sync " + mma + "), 16 rows a warp" : "a warp per row";
  return std::string("backward ") + kir::attention_pass_name(a.pass) + " pass, " + layout + ", block " +
         std::to_string(c.block);
}

}  // namespace tcc
