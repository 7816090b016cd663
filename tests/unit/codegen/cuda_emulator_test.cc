// The CUDA emulator's TF32 (tests/unit/codegen/cuda_emulator.h), which the
// emulation tests of the GEMM template and of the attention's TF32 layout
// trust: cvt.rna.tf32.f32 keeps 10 explicit mantissa bits, rounding to
// nearest with ties away from zero, and mma.sync.m16n8k8.tf32 reads only an
// operand's upper 19 bits.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/codegen/cuda_emulator.h"

namespace {

float tf32(float x) { return tcc_emu::as_float(tcc_tf32(x)); }

TEST(CudaEmulator, Tf32RoundsToTenMantissaBitsTiesAwayFromZero) {
  const float ulp = std::ldexp(1.f, -10), half = std::ldexp(1.f, -11);
  EXPECT_EQ(tf32(1.f + half), 1.f + ulp) << "a tie rounds away from zero";
  EXPECT_EQ(tf32(-(1.f + half)), -(1.f + ulp));
  EXPECT_EQ(tf32(1.f + 5 * half), 1.f + 3 * ulp) << "not to even";
  EXPECT_EQ(tf32(std::nextafter(1.f + half, 1.f)), 1.f) << "below the tie";
  EXPECT_EQ(tf32(std::nextafter(1.f + half, 2.f)), 1.f + ulp);
  EXPECT_EQ(tf32(std::nextafter(2.f, 1.f)), 2.f) << "the carry steps the exponent";
  EXPECT_EQ(tf32(0.1f), 0.0999755859375f);
  EXPECT_EQ(tf32(INFINITY), INFINITY);
  EXPECT_EQ(tf32(-INFINITY), -INFINITY);
  EXPECT_TRUE(std::isnan(tf32(tcc_emu::as_float(0x7F800001u)))) << "a NaN whose payload TF32 drops stays NaN";
  uint32_t big = 0, small = 0;
  tcc_tf32_split(1.f + half + std::ldexp(1.f, -20), big, small);
  EXPECT_EQ(tcc_emu::as_float(big), 1.f + ulp);
  EXPECT_EQ(tcc_emu::as_float(small), tf32(std::ldexp(1.f, -20) - half));
}

// A warp's m16n8k8 over A = 1 + 3 * 2^-12 (all below TF32's last place, so
// dropped from an operand no cvt rounded) and over its rounding, 1 + 2^-10,
// with B = 1: each D element sums 8 products.
TEST(CudaEmulator, Tf32MmaReadsTheOperandsUpper19Bits) {
  for (bool rounded : {false, true}) {
    const float x = 1.f + std::ldexp(1.f, -12) + std::ldexp(1.f, -11);
    const uint32_t a_bits = rounded ? tcc_tf32(x) : tcc_emu::as_bits(x);
    float d[32][4];
    tcc_emu::launch(1, 1, 1, 32, 1, [&] {
      const uint32_t a[4] = {a_bits, a_bits, a_bits, a_bits};
      const uint32_t b[2] = {tcc_emu::as_bits(1.f), tcc_emu::as_bits(1.f)};
      float acc[4] = {0.f, 0.f, 0.f, 0.f};
      tcc_mma_tf32(acc, a, b);
      for (int q = 0; q < 4; ++q) d[threadIdx.x][q] = acc[q];
    });
    const float want = 8 * (rounded ? 1.f + std::ldexp(1.f, -10) : 1.f);
    for (int lane = 0; lane < 32; ++lane)
      for (int q = 0; q < 4; ++q) EXPECT_EQ(d[lane][q], want) << "lane " << lane << " register " << q;
  }
}

}  // namespace
