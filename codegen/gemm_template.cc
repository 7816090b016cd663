#include "codegen/gemm_template.h"

#include "codegen/emit_c.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

// Row padding of the shared tiles, in floats. A fragment load of A reads rows
// g = lane / 4 at columns t = lane % 4: with a row pitch of BK + 4 (36, 4 mod
// 32 banks) the 32 lanes hit 32 banks. B's loads read rows t at columns g:
// a pitch of BN + 8 (8 mod 32) does the same.
constexpr int kPadA = 4, kPadB = 8;

// Rows of stride `ld` floats and batch matrices `stride` apart keep a
// 16-byte aligned base's alignment at every row start.
bool aligned_rows(const SymExpr& ld, const SymExpr& stride) {
  return emitc::divisible_by(ld, 4) && emitc::divisible_by(stride, 4);
}

constexpr bool tiles_fit_static_shared_memory() {
  for (const GemmTile& t : kGemmTiles)
    if (t.shared_floats() * 4 > 48 * 1024) return false;
  return true;
}
static_assert(tiles_fit_static_shared_memory(), "a gemm tile's stages exceed 48 KB of static shared memory");

const GemmTile& tile_of(int tile) {
  TCC_CHECK(tile >= 1 && tile <= static_cast<int>(kGemmTiles.size())) << "gemm tile " << tile << " does not exist";
  return kGemmTiles[static_cast<size_t>(tile - 1)];
}

class TemplateEmitter : emitc::CodeWriter {
 public:
  TemplateEmitter(const kir::Kernel& k, const GemmTile& t, int split)
      : k_(k),
        g_(*k.gemm),
        t_(t),
        split_(split),
        vector_a_(!g_.trans_a && aligned_rows(g_.lda, g_.stride_a)),
        vector_b_(!g_.trans_b && aligned_rows(g_.ldb, g_.stride_b)) {}

  std::string print() {
    const int threads = t_.threads();
    const int tm = t_.bm / t_.warps_m, tn = t_.bn / t_.warps_n;
    const int fm = tm / 16, fn = tn / 8;
    TCC_CHECK(tm % 16 == 0 && tn % 8 == 0 && t_.bk % 8 == 0 && (t_.bm * t_.bk) % threads == 0 &&
              (t_.bk * t_.bn) % threads == 0)
        << "gemm tile " << t_.bm << "x" << t_.bn << "x" << t_.bk << " does not divide among its warps";
    int d = 0;
    while (d < static_cast<int>(k_.buffers.size()) && !k_.buffers[static_cast<size_t>(d)].output) ++d;
    out_ += emitc::cuda_signature(k_, split_ > 1, threads);
    line("const int64_t M = " + emitc::size_expr(g_.m) + ", N = " + emitc::size_expr(g_.n) +
         ", K = " + emitc::size_expr(g_.k) + ";");
    line("const int64_t lda = " + emitc::size_expr(g_.lda) + ", ldb = " + emitc::size_expr(g_.ldb) +
         ", ldd = " + emitc::size_expr(g_.ldd) + ";");
    if (split_ > 1) line("const int64_t z = blockIdx.z / " + std::to_string(split_) + ";");
    else line("const int64_t z = blockIdx.z;");
    line("const float* __restrict__ A = p" + std::to_string(g_.a) + " + z * (" + emitc::size_expr(g_.stride_a) + ");");
    line("const float* __restrict__ B = p" + std::to_string(g_.b) + " + z * (" + emitc::size_expr(g_.stride_b) + ");");
    line("float* __restrict__ D = p" + std::to_string(d) + " + z * (" + emitc::size_expr(g_.stride_d) + ");");
    if (vector_a_) line("const bool A_aligned = ((unsigned long long)A & 15) == 0;");
    if (vector_b_) line("const bool B_aligned = ((unsigned long long)B & 15) == 0;");
    if (g_.residual >= 0)
      line("const float* __restrict__ C = p" + std::to_string(g_.residual) + " + z * (" +
           emitc::size_expr(g_.stride_d) + ");");
    const std::string stages = std::to_string(t_.stages);
    line("__shared__ __align__(16) float As[" + stages + "][" + std::to_string(t_.bm) + "][" +
         std::to_string(t_.bk + kPadA) + "];");
    line("__shared__ __align__(16) float Bs[" + stages + "][" + std::to_string(t_.bk) + "][" +
         std::to_string(t_.bn + kPadB) + "];");
    line("const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;");
    line("const int wm = (warp / " + std::to_string(t_.warps_n) + ") * " + std::to_string(tm) + ", wn = (warp % " +
         std::to_string(t_.warps_n) + ") * " + std::to_string(tn) + ";");
    line("const int64_t row0 = (int64_t)blockIdx.x * " + std::to_string(t_.bm) + ", col0 = (int64_t)blockIdx.y * " +
         std::to_string(t_.bn) + ";");
    line("float acc[" + std::to_string(fm) + "][" + std::to_string(fn) + "][4] = {};");
    line("int64_t tiles = (K + " + std::to_string(t_.bk - 1) + ") / " + std::to_string(t_.bk) + ", k_first = 0;");
    if (split_ > 1) {
      // Slice blockIdx.z % split takes its share of the K tiles (the last ones may have none).
      const std::string split = std::to_string(split_);
      line("const int slice = (int)(blockIdx.z % " + split + ");");
      line("const int64_t per_slice = (tiles + " + std::to_string(split_ - 1) + ") / " + split + ";");
      line("k_first = slice * per_slice * " + std::to_string(t_.bk) + ";");
      line("tiles = tiles - slice * per_slice < per_slice ? tiles - slice * per_slice : per_slice;");
      line("if (tiles < 0) tiles = 0;");
    }
    // The pipeline: stages - 1 tiles in flight before the first step; step kt
    // waits for its own tile, passes a barrier (so every warp is done with the
    // stage the previous step read), refills that stage with tile kt + stages - 1
    // and multiplies tile kt while the copies land. One commit group per tile
    // (empty past the end), so "all but the latest stages - 2 groups" is tile kt.
    const int ahead = t_.stages - 1;
    for (int s = 0; s < ahead; ++s) {
      open("if (" + std::to_string(s) + " < tiles)");
      copy_tile(std::to_string(s), "k_first + " + std::to_string(s * t_.bk));
      close();
      line("tcc_cp_async_commit();");
    }
    open("for (int64_t kt = 0; kt < tiles; ++kt)");
    line("tcc_cp_async_wait<" + std::to_string(t_.stages - 2) + ">();");
    line("__syncthreads();");
    open("if (kt + " + std::to_string(ahead) + " < tiles)");
    copy_tile("(int)((kt + " + std::to_string(ahead) + ") % " + stages + ")",
              "k_first + (kt + " + std::to_string(ahead) + ") * " + std::to_string(t_.bk));
    close();
    line("tcc_cp_async_commit();");
    line("const int stage = (int)(kt % " + stages + ");");
    mma_steps(fm, fn);
    close();
    if (split_ > 1) combine_slices(fm, fn);
    epilogue(fm, fn);
    out_ += "}\n";
    return out_;
  }

 private:
  // Copies the A and B tiles at k0 into shared stage `stage` with cp.async,
  // which needs no registers to hold them; an element outside the matrix
  // copies no bytes and is zero-filled.
  void copy_tile(const std::string& stage, const std::string& k0) {
    copy_operand("As[" + stage + "]", "A", g_.trans_a, vector_a_, t_.bm, t_.bk, "row0", "M", k0, "K", "lda");
    copy_operand("Bs[" + stage + "]", "B", g_.trans_b, vector_b_, t_.bk, t_.bn, k0, "K", "col0", "N", "ldb");
  }

  // One operand's rows x cols tile, whose element (r, c) is the matrix's
  // (row_base + r, col_base + c), stored row-major with row stride `ld`, or
  // transposed. Element e = tid + i * threads of the tile is read along the
  // matrix's contiguous axis: consecutive threads, consecutive addresses.
  // Where `vector` (a row-major operand whose rows and batch strides keep
  // 16-byte alignment), a thread copies four consecutive elements at once when
  // the operand's address is 16-byte aligned (checked at run time: a caller
  // may bind any pointer); at the matrix's last column the copy takes only the
  // elements inside it. The loops stay rolled: unrolled, the compiler keeps
  // every element's address live across the K loop and spills.
  void copy_operand(const std::string& tile, const std::string& matrix, bool transposed, bool vector, int rows,
                    int cols, const std::string& row_base, const std::string& row_end, const std::string& col_base,
                    const std::string& col_end, const std::string& ld) {
    const int threads = t_.threads();
    if (vector) {
      TCC_CHECK(!transposed && cols % 4 == 0 && (rows * cols / 4) % threads == 0)
          << "gemm tile " << rows << "x" << cols << " does not divide into float4 copies";
      const std::string quads = std::to_string(cols / 4);
      open("if (" + matrix + "_aligned)");
      line("#pragma unroll 1");
      open("for (int i = 0; i < " + std::to_string(rows * cols / 4 / threads) + "; ++i)");
      line("const int e = tid + i * " + std::to_string(threads) + ";");
      line("const int r = e / " + quads + ", c = e % " + quads + " * 4;");
      line("const int64_t gr = " + row_base + " + r, gc = " + col_base + " + c;");
      line("const int64_t left = " + col_end + " - gc;");
      line("const int bytes = gr >= " + row_end + " || left <= 0 ? 0 : left >= 4 ? 16 : (int)left * 4;");
      line("tcc_cp_async16(&" + tile + "[r][c], bytes ? " + matrix + " + gr * " + ld + " + gc : " + matrix +
           ", bytes);");
      close();
      --depth_;
      line("} else {");
      ++depth_;
    }
    line("#pragma unroll 1");
    open("for (int i = 0; i < " + std::to_string(rows * cols / threads) + "; ++i)");
    line("const int e = tid + i * " + std::to_string(threads) + ";");
    line(transposed ? "const int r = e % " + std::to_string(rows) + ", c = e / " + std::to_string(rows) + ";"
                    : "const int r = e / " + std::to_string(cols) + ", c = e % " + std::to_string(cols) + ";");
    line("const int64_t gr = " + row_base + " + r, gc = " + col_base + " + c;");
    line("const bool in = gr < " + row_end + " && gc < " + col_end + ";");
    line("tcc_cp_async4(&" + tile + "[r][c], in ? " + matrix + " + " +
         (transposed ? "gc * " + ld + " + gr" : "gr * " + ld + " + gc") + " : " + matrix + ", in);");
    close();
    if (vector) close();
  }

  // Per k step of 8: the warp's A fragments (rows g and g + 8, columns t and
  // t + 4 of each 16-row slice) and B fragments (rows t and t + 4, column g of
  // each 8-column slice), split into big and small TF32 parts; three mma per
  // output fragment, the small products first, into a fresh fragment that is
  // then added to the accumulators with rounded f32 adds. The tensor cores
  // truncate as they accumulate, so an mma into the accumulators themselves
  // would err by up to an ulp of everything summed so far, always the same
  // way: over K / 8 steps that drift grows with K (at K = 4096 it failed
  // autotuning's check on the H100). Truncating within one step's products
  // and rounding the running sum keeps the error of an f32 dot product.
  void mma_steps(int fm, int fn) {
    line("#pragma unroll");
    open("for (int kk = 0; kk < " + std::to_string(t_.bk) + "; kk += 8)");
    line("uint32_t ab[" + std::to_string(fm) + "][4], as[" + std::to_string(fm) + "][4], bb[" + std::to_string(fn) +
         "][2], bs[" + std::to_string(fn) + "][2];");
    unrolled_for("i", fm);
    line("const int r = wm + i * 16 + g;");
    line("tcc_tf32_split(As[stage][r][kk + t], ab[i][0], as[i][0]);");
    line("tcc_tf32_split(As[stage][r + 8][kk + t], ab[i][1], as[i][1]);");
    line("tcc_tf32_split(As[stage][r][kk + t + 4], ab[i][2], as[i][2]);");
    line("tcc_tf32_split(As[stage][r + 8][kk + t + 4], ab[i][3], as[i][3]);");
    close();
    unrolled_for("j", fn);
    line("const int c = wn + j * 8 + g;");
    line("tcc_tf32_split(Bs[stage][kk + t][c], bb[j][0], bs[j][0]);");
    line("tcc_tf32_split(Bs[stage][kk + t + 4][c], bb[j][1], bs[j][1]);");
    close();
    unrolled_for("i", fm);
    unrolled_for("j", fn);
    line("float p[4] = {0.f, 0.f, 0.f, 0.f};");
    line("tcc_mma_tf32(p, as[i], bb[j]);");
    line("tcc_mma_tf32(p, ab[i], bs[j]);");
    line("tcc_mma_tf32(p, ab[i], bb[j]);");
    line("acc[i][j][0] += p[0]; acc[i][j][1] += p[1]; acc[i][j][2] += p[2]; acc[i][j][3] += p[3];");
    close();
    close();
    close();
  }

  // Split-K: each slice's block writes its raw accumulators to its part of
  // the output tile's workspace (every position, zeros past D's edges); the
  // last slice of the tile to arrive (an atomic counter, reset for the next
  // launch) sums the slices in slice order, so the result does not depend on
  // arrival order, and runs the epilogue. Workspace: per output tile, split
  // partial tiles of BM x BN floats, then one uint32 counter per output tile.
  void combine_slices(int fm, int fn) {
    const std::string tile_floats = std::to_string(t_.bm * t_.bn), bn = std::to_string(t_.bn);
    line("const int64_t tile_id = (z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;");
    line("const int64_t tiles_out = (int64_t)gridDim.x * gridDim.y * (gridDim.z / " + std::to_string(split_) + ");");
    line("float* part = (float*)ws + tile_id * " + std::to_string(split_) + " * " + tile_floats + ";");
    each_accumulator(fm, fn, "part[slice * " + tile_floats + " + r * " + bn + " + c] = acc[i][j][q];");
    line("if (!tcc_gemm_arrive((unsigned int*)((float*)ws + tiles_out * " + std::to_string(split_) + " * " +
         tile_floats + ") + tile_id, " + std::to_string(split_) + ")) return;");
    each_accumulator(fm, fn,
                     "float sum = 0.f; for (int s = 0; s < " + std::to_string(split_) +
                         "; ++s) sum += ((volatile const float*)part)[s * " + tile_floats + " + r * " + bn +
                         " + c]; acc[i][j][q] = sum;");
  }

  // Opens `for (int var = 0; var < count; ++var)`, fully unrolled: the loops over
  // a warp's fragments and registers, whose counts the tile fixes.
  void unrolled_for(const char* var, int count) {
    const std::string v = var;
    line("#pragma unroll");
    open("for (int " + v + " = 0; " + v + " < " + std::to_string(count) + "; ++" + v + ")");
  }

  // `body` for every accumulator register, with r and c its row and column within the block's tile.
  void each_accumulator(int fm, int fn, const std::string& body) {
    unrolled_for("i", fm);
    unrolled_for("j", fn);
    unrolled_for("q", 4);
    line("const int r = wm + i * 16 + g + 8 * (q >> 1), c = wn + j * 8 + 2 * t + (q & 1);");
    line(body);
    close();
    close();
    close();
  }

  // Accumulator register q of fragment (i, j) holds row g + 8 * (q / 2),
  // column 2 * t + q % 2 of the fragment: D's element (row0 + r, col0 + c).
  void epilogue(int fm, int fn) {
    std::string body = "const int64_t gr = row0 + r, gc = col0 + c; if (gr >= M || gc >= N) continue; float v = " +
                       (g_.alpha == 1 ? std::string() : emitc::literal(g_.alpha, DType::F32) + " * ") + "acc[i][j][q];";
    if (g_.residual >= 0)
      body += " v += " + (g_.beta == 1 ? std::string() : emitc::literal(g_.beta, DType::F32) + " * ") +
              "C[gr * ldd + gc];";
    if (g_.bias >= 0) body += " v += p" + std::to_string(g_.bias) + "[gc];";
    if (g_.activation == "relu") body += " v = fmaxf(v, 0.f);";
    else if (g_.activation == "gelu_tanh")
      body += " v = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));";
    else TCC_CHECK(g_.activation == "none") << "kernel " << k_.name << ": unknown activation " << g_.activation;
    each_accumulator(fm, fn, body + " D[gr * ldd + gc] = v;");
  }

  const kir::Kernel& k_;
  const kir::GemmDesc& g_;
  const GemmTile& t_;
  const int split_;
  const bool vector_a_, vector_b_;  // float4 copies where the operand's address allows them
};

}  // namespace

// static: every translation unit that holds a template kernel has its own
// copy, so relocatable shards linked into one cubin do not collide.
const char* const kGemmTemplateHelpers = R"(static __device__ __forceinline__ void tcc_tf32_split(float x, uint32_t& big, uint32_t& small) {
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
  const float rest = x - __uint_as_float(big);
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}
static __device__ __forceinline__ void tcc_cp_async4(float* shared, const float* global, bool copy) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;"
               :: "r"((uint32_t)__cvta_generic_to_shared(shared)), "l"(global), "r"(copy ? 4 : 0) : "memory");
}
// Copies `bytes` (0, 4, 8, 12 or 16) and zero-fills the rest of the 16.
static __device__ __forceinline__ void tcc_cp_async16(float* shared, const float* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :: "r"((uint32_t)__cvta_generic_to_shared(shared)), "l"(global), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void tcc_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Waits until at most the latest `pending` committed groups are in flight.
template <int pending> static __device__ __forceinline__ void tcc_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" :: "n"(pending) : "memory");
}
// Split-K: whether this block is the last of its output tile's slices to
// arrive; its partial (written before the call) is then visible to it.
static __device__ bool tcc_gemm_arrive(unsigned int* count, unsigned int split) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(count, 1u) == split - 1;
    if (last) *count = 0;
  }
  __syncthreads();
  return last;
}
)";

const char* const kMmaTf32Helper = R"(static __device__ __forceinline__ void tcc_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
)";

std::string gemm_template_refusal(const kir::Kernel& k) {
  if (k.kind != kir::Kind::Gemm || !k.gemm) return "only gemm kernels have a template";
  for (const kir::Buffer& b : k.buffers)
    if (b.dtype != DType::F32)
      return "the template computes f32 operands only; '" + b.name + "' is " + std::string(dtype_name(b.dtype));
  return "";
}

std::string gemm_template_text(const KernelConfig& config) {
  const GemmTile& t = tile_of(config.tile);
  return "tf32x3 " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" + std::to_string(t.bk) + " " +
         std::to_string(t.warps_m) + "x" + std::to_string(t.warps_n) +
         (t.stages != 2 ? " stages=" + std::to_string(t.stages) : "") +
         (config.split > 1 ? " split=" + std::to_string(config.split) : "");
}

std::string emit_gemm_template(const kir::Kernel& k, const KernelConfig& config) {
  std::string refusal = gemm_template_refusal(k);
  TCC_CHECK(refusal.empty()) << "kernel " << k.name << ": " << refusal;
  TCC_CHECK(config.split >= 1 && config.split <= kMaxGemmSplit) << "kernel " << k.name << ": split " << config.split;
  return TemplateEmitter(k, tile_of(config.tile), config.split).print();
}

KernelLaunch gemm_template_launch(const kir::Kernel& k, const KernelConfig& config) {
  const GemmTile& t = tile_of(config.tile);
  const kir::GemmDesc& g = *k.gemm;
  KernelLaunch c;
  c.grid[0] = (g.m + SymExpr::constant(t.bm - 1)).floordiv(SymExpr::constant(t.bm));
  c.grid[1] = (g.n + SymExpr::constant(t.bn - 1)).floordiv(SymExpr::constant(t.bn));
  c.grid[2] = g.batch * SymExpr::constant(config.split);
  c.block[0] = t.threads();
  if (config.split > 1)
    c.workspace_bytes = c.grid[0] * c.grid[1] * g.batch *
                        SymExpr::constant(int64_t{config.split} * t.bm * t.bn * 4 + 4);
  return c;
}

}  // namespace tcc
