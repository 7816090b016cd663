// Runs CUDA text tcc emits on the host, so CI checks it against the reference
// interpreter without a GPU: the GEMM template (codegen/gemm_template.cc: its
// tiling, guards, double buffering and epilogue) and reductions (column
// blocks' shared-memory combine, block reductions' warp shuffles, split rows'
// arrivals), scatters' atomic updates, the attention kernel's tiles,
// shuffles and tensor-core fragments (f16, bf16 and TF32), the TopK kernel's teams and the NMS kernel's
// phases and warp scan. Test code only: the tests
// compile this header together with the emitted kernels into a shared library
// with the host compiler.
//
// Each block runs as one std::thread per CUDA thread; __syncthreads is a
// barrier of the block's threads, `__shared__` arrays are function statics
// (blocks run one after another, so split-K's arrival counter sees the grid's order). The template's device helpers are replaced:
// cp.async copies at once (its waits are then no-ops), ldmatrix gathers the
// rows its warp's lanes name, cvt.rn.f16x2 / bf16x2 round pairs to nearest
// even, cvt.rna.tf32.f32
// (tcc_tf32, tcc_tf32_split) rounds away the low 13 mantissa bits, to nearest
// with ties away from zero, keeping 10 explicit bits (infinities stay, NaN
// stays NaN), and mma.sync.m16n8k8 gathers the warp's fragments and gives
// each lane its part of D (accumulated as the hardware does, toward_zero) by
// the PTX ISA's fragment layout for .tf32, reading only each operand's upper
// 19 bits (sign, exponent, 10 mantissa bits: the low 13 of an operand no cvt
// rounded are dropped, as the tensor cores drop them):
//   A (16x8, row): register q of lane l holds row l/4 + 8*(q%2), column l%4 + 4*(q/2);
//   B (8x8, col):  register q of lane l holds row l%4 + 4*q, column l/4;
//   C, D (16x8):   register q of lane l holds row l/4 + 8*(q/2), column 2*(l%4) + q%2;
// and mma.sync.m16n8k16 for .f16 and .bf16 (the attention template's), whose
// registers hold two elements each, the lower column or row in the low half:
//   A (16x16, row): register q of lane l holds row l/4 + 8*(q%2), columns 2*(l%4) + 8*(q/2) and one more;
//   B (16x8, col):  register q of lane l holds rows 2*(l%4) + 8*q and one more, column l/4;
//   C, D as for .tf32.
#pragma once

#include <math.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tcc_emu {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline thread_local Dim3 thread_index, block_index;
inline Dim3 grid_dim, block_dim;

class Barrier {
 public:
  explicit Barrier(unsigned count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    unsigned generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation != generation_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  unsigned count_, arrived_ = 0, generation_ = 0;
};

struct Warp {
  Barrier barrier{32};
  uint32_t a[32][4];
  uint32_t b[32][2];
  unsigned char exchange[32][8];  // a shuffle's values, one per lane
};

struct Block {
  std::unique_ptr<Barrier> barrier;
  std::vector<std::unique_ptr<Warp>> warps;
};
inline Block block;

inline float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t as_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// The tensor cores' f32 accumulation as measured on Volta, Turing and Ampere
// (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021), and as
// the H100 autotuning runs of 2026-11-25 show it (docs/AUTOTUNE.md): the
// products are exact, but their sum with the accumulator is truncated, not
// rounded to nearest. Modelled as the exact sum rounded toward zero to f32: the bias that
// makes a long chain of mma into one accumulator drift by about one ulp of the
// accumulator per step.
inline float toward_zero(double exact) {
  float f = static_cast<float>(exact);
  if (std::fabs(static_cast<double>(f)) > std::fabs(exact)) f = std::nextafter(f, 0.f);
  return f;
}

// The grid, block after block; `kernel` is called by every thread of a block
// of bx x by threads (x varies fastest, as CUDA numbers a block's threads).
inline void launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   const std::function<void()>& kernel) {
  grid_dim = {gx, gy, gz};
  block_dim = {bx, by, 1};
  const unsigned threads = bx * by;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        block.barrier = std::make_unique<Barrier>(threads);
        block.warps.clear();
        for (unsigned w = 0; w < threads / 32; ++w) block.warps.push_back(std::make_unique<Warp>());
        std::vector<std::thread> running;
        for (unsigned t = 0; t < threads; ++t)
          running.emplace_back([&, t] {
            thread_index = {t % bx, t / bx, 0};
            block_index = {x, y, z};
            kernel();
          });
        for (std::thread& th : running) th.join();
      }
}

}  // namespace tcc_emu

#define threadIdx tcc_emu::thread_index
#define blockIdx tcc_emu::block_index
#define gridDim tcc_emu::grid_dim
#define blockDim tcc_emu::block_dim
#define __global__
#define __device__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

inline void __syncthreads() { tcc_emu::block.barrier->arrive_and_wait(); }

// Every lane of the warp (threads numbered x fastest, 32 to a warp) posts its
// value, then reads the value of the lane `from` names; the second barrier
// keeps a later shuffle's posts behind this one's reads.
namespace tcc_emu {
template <class T, class From> T shuffle(T v, From from) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  const unsigned t = thread_index.x + thread_index.y * block_dim.x;
  Warp& w = *block.warps[t / 32];
  std::memcpy(w.exchange[t % 32], &v, sizeof v);
  w.barrier.arrive_and_wait();
  T out;
  std::memcpy(&out, w.exchange[from(t % 32)], sizeof out);
  w.barrier.arrive_and_wait();
  return out;
}
}  // namespace tcc_emu
template <class T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return tcc_emu::shuffle(v, [&](unsigned lane) { return lane ^ static_cast<unsigned>(mask); });
}
template <class T> T __shfl_sync(unsigned, T v, int src) {
  return tcc_emu::shuffle(v, [&](unsigned) { return static_cast<unsigned>(src) & 31u; });
}
// Lanes below `delta` keep their own value.
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta) {
  return tcc_emu::shuffle(v, [&](unsigned lane) { return lane >= delta ? lane - delta : lane; });
}
// CUDA's vector type, 16-byte aligned as on the device, for float4 pointwise kernels.
struct __align__(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// A product no multiply-add fuses (the NMS kernel's IoU).
inline double __dmul_rn(double a, double b) { return a * b; }

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// The combining stores' atomics (a block's threads run at once, so they race
// as on the GPU): integer adds, compare-and-swap, and float adds through it.
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
template <class W> W atomicCAS(W* p, W expected, W desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
template <class T, class W> T tcc_emu_atomic_add(T* p, T v) {
  W seen = __atomic_load_n(reinterpret_cast<W*>(p), __ATOMIC_SEQ_CST);
  for (;;) {
    T old, next;
    std::memcpy(&old, &seen, sizeof old);
    next = old + v;
    W want;
    std::memcpy(&want, &next, sizeof want);
    W before = atomicCAS(reinterpret_cast<W*>(p), seen, want);
    if (before == seen) return old;
    seen = before;
  }
}
inline float atomicAdd(float* p, float v) { return tcc_emu_atomic_add<float, unsigned>(p, v); }
inline double atomicAdd(double* p, double v) { return tcc_emu_atomic_add<double, unsigned long long>(p, v); }

namespace tcc_emu {
constexpr uint32_t kTf32Bits = 0xFFFFE000u;  // sign, exponent and the 10 mantissa bits TF32 keeps
// cvt.rna.tf32.f32: the magnitude's bits plus half of the dropped place, so a
// tie rounds away from zero; a carry out of the mantissa steps the exponent.
inline uint32_t tf32_bits(float v) {
  const uint32_t bits = as_bits(v);
  if ((bits & 0x7F800000u) == 0x7F800000u) return (bits & kTf32Bits) | (bits & 0x007FFFFFu ? 0x00400000u : 0u);
  return (bits + 0x1000u) & kTf32Bits;
}
}  // namespace tcc_emu

inline uint32_t tcc_tf32(float x) { return tcc_emu::tf32_bits(x); }
inline void tcc_tf32_split(float x, uint32_t& big, uint32_t& small) {
  big = tcc_emu::tf32_bits(x);
  small = tcc_emu::tf32_bits(x - tcc_emu::as_float(big));
}

// Blocks run one at a time, so arrival order is the grid's; every slice but
// the last of a tile returns, the last sums them.
inline bool tcc_gemm_arrive(unsigned int* count, unsigned int split) {
  static bool last;  // the block's shared flag
  __syncthreads();
  if (threadIdx.x == 0) {
    last = ++*count == split;
    if (last) *count = 0;
  }
  __syncthreads();
  return last;
}

inline void tcc_cp_async4(float* shared, const float* global, bool copy) { *shared = copy ? *global : 0.f; }
inline void tcc_cp_async16(float* shared, const float* global, int bytes) {
  for (int i = 0; i < 4; ++i) shared[i] = i * 4 < bytes ? global[i] : 0.f;
}
inline void tcc_cp_async_commit() {}
template <int pending> void tcc_cp_async_wait() {}

namespace tcc_emu {
// An IEEE half's value.
inline float half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const float sign = h & 0x8000 ? -1.f : 1.f;
  if (exponent == 0x1f) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}
inline float bfloat_value(uint16_t b) { return as_float(static_cast<uint32_t>(b) << 16); }

// m16n8k16 over 16-bit elements that `value` reads, by the layouts above.
template <float (*value)(uint16_t)>
void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const unsigned lane = thread_index.x % 32;
  Warp& w = *block.warps[thread_index.x / 32];
  std::memcpy(w.a[lane], a, sizeof a);
  std::memcpy(w.b[lane], b, sizeof b);
  w.barrier.arrive_and_wait();
  auto half = [](uint32_t reg, unsigned upper) { return value(static_cast<uint16_t>(upper ? reg >> 16 : reg)); };
  auto A = [&](unsigned r, unsigned k) { return half(w.a[(r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)], k % 2); };
  auto B = [&](unsigned k, unsigned n) { return half(w.b[n * 4 + (k % 8) / 2][k / 8], k % 2); };
  for (unsigned q = 0; q < 4; ++q) {
    unsigned row = lane / 4 + 8 * (q / 2), col = 2 * (lane % 4) + q % 2;
    double sum = d[q];
    for (unsigned k = 0; k < 16; ++k) sum += static_cast<double>(A(row, k)) * B(k, col);
    d[q] = toward_zero(sum);
  }
  w.barrier.arrive_and_wait();
}

// ldmatrix .m8n8 .b16 over `count` matrices: every lane posts the row it
// names (lane L: row L % 8 of matrix L / 8), then register i of lane l takes
// matrix i's row l / 4, elements 2 (l % 4) and one more, or (transposed)
// column l / 4, rows 2 (l % 4) and one more, the first in the low half.
inline void ldmatrix(uint32_t* r, const void* row, int count, bool transposed) {
  const unsigned t = thread_index.x + thread_index.y * block_dim.x, lane = t % 32;
  Warp& w = *block.warps[t / 32];
  std::memcpy(w.exchange[lane], &row, sizeof row);
  w.barrier.arrive_and_wait();
  auto element = [&](int matrix, unsigned r, unsigned c) {
    const uint16_t* base;
    std::memcpy(&base, w.exchange[matrix * 8 + r], sizeof base);
    return static_cast<uint32_t>(base[c]);
  };
  for (int i = 0; i < count; ++i) {
    const unsigned a = lane / 4, b = 2 * (lane % 4);
    r[i] = transposed ? element(i, b, a) | element(i, b + 1, a) << 16 : element(i, a, b) | element(i, a, b + 1) << 16;
  }
  w.barrier.arrive_and_wait();
}
}  // namespace tcc_emu

// cvt.rn.f16x2.f32 and cvt.rn.bf16x2.f32: two floats to nearest even, the
// first in the low half (a NaN becomes the canonical 0x7fff).
inline uint32_t tcc_pack_f16(float lo, float hi) {
  auto bits = [](float f) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t b;
    std::memcpy(&b, &h, sizeof b);
    return static_cast<uint32_t>(f != f ? 0x7fffu : b);
  };
  return bits(lo) | bits(hi) << 16;
}
inline uint32_t tcc_pack_bf16(float lo, float hi) {
  auto bits = [](float f) {
    const uint32_t x = tcc_emu::as_bits(f);
    return f != f ? 0x7fffu : (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  };
  return bits(lo) | bits(hi) << 16;
}
inline void tcc_ldsm_x4(uint32_t (&r)[4], const void* row) { tcc_emu::ldmatrix(r, row, 4, false); }
inline void tcc_ldsm_x4_t(uint32_t (&r)[4], const void* row) { tcc_emu::ldmatrix(r, row, 4, true); }
inline void tcc_ldsm_x2_t(uint32_t (&r)[2], const void* row) { tcc_emu::ldmatrix(r, row, 2, true); }
inline void tcc_att_cp16(void* shared, const void* global, bool copy) {
  if (copy) std::memcpy(shared, global, 16);
  else std::memset(shared, 0, 16);
}
inline void tcc_att_commit() {}
template <int pending> void tcc_att_wait() {}

inline void tcc_mma_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  tcc_emu::mma_m16n8k16<tcc_emu::half_value>(d, a, b);
}
inline void tcc_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  tcc_emu::mma_m16n8k16<tcc_emu::bfloat_value>(d, a, b);
}

inline void tcc_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const unsigned lane = tcc_emu::thread_index.x % 32;
  tcc_emu::Warp& w = *tcc_emu::block.warps[tcc_emu::thread_index.x / 32];
  std::memcpy(w.a[lane], a, sizeof a);
  std::memcpy(w.b[lane], b, sizeof b);
  w.barrier.arrive_and_wait();
  auto tf32 = [](uint32_t reg) { return tcc_emu::as_float(reg & tcc_emu::kTf32Bits); };
  auto A = [&](unsigned r, unsigned k) { return tf32(w.a[(r % 8) * 4 + k % 4][r / 8 + 2 * (k / 4)]); };
  auto B = [&](unsigned k, unsigned n) { return tf32(w.b[n * 4 + k % 4][k / 4]); };
  for (unsigned q = 0; q < 4; ++q) {
    unsigned row = lane / 4 + 8 * (q / 2), col = 2 * (lane % 4) + q % 2;
    double sum = d[q];
    for (unsigned k = 0; k < 8; ++k) sum += static_cast<double>(A(row, k)) * B(k, col);
    d[q] = tcc_emu::toward_zero(sum);
  }
  w.barrier.arrive_and_wait();
}
