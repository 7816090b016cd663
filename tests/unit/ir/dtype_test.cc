// Element types: the 8-bit floats' names and sizes, and their conversions to
// and from float (round to nearest even, ONNX's NaN, infinity, negative zero
// and saturation rules per type).
#include "src/ir/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace tcc {
namespace {

const DType kFp8[] = {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ};

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(DType, Fp8NamesAndSizes) {
  const char* names[] = {"f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz"};
  const char* torch[] = {"float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"};
  for (int i = 0; i < 4; ++i) {
    DType t = kFp8[i];
    EXPECT_EQ(dtype_from_onnx(17 + i), t);
    EXPECT_EQ(dtype_name(t), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), t);
    EXPECT_EQ(torch_dtype_name(t), torch[i]);
    EXPECT_EQ(parse_torch_dtype(torch[i]), t);
    EXPECT_EQ(dtype_size(t), 1u);
    EXPECT_TRUE(is_float(t) && is_fp8(t) && is_signed(t));
    EXPECT_FALSE(is_integer(t));
  }
  EXPECT_FALSE(is_fp8(DType::F16));
  EXPECT_FALSE(dtype_from_onnx(21).has_value());  // uint4
}

// Every code decodes to a value that encodes back to it (NaNs to a NaN).
TEST(DType, Fp8EveryCodeRoundTrips) {
  for (DType t : kFp8) {
    int nans = 0;
    for (int c = 0; c < 256; ++c) {
      float v = fp8_to_float(static_cast<uint8_t>(c), t);
      uint8_t back = float_to_fp8(v, t, false);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(fp8_to_float(back, t))) << dtype_name(t) << " " << c;
        continue;
      }
      EXPECT_EQ(back, c) << dtype_name(t) << " " << v;
      if (!std::isinf(v)) {
        EXPECT_EQ(float_to_fp8(v, t, true), c) << dtype_name(t) << " " << v;
      }
    }
    // e4m3fn: S.1111.111; e5m2: S.11111.{01,10,11}; fnuz: 0x80 alone.
    EXPECT_EQ(nans, t == DType::F8E4M3FN ? 2 : t == DType::F8E5M2 ? 6 : 1) << dtype_name(t);
  }
}

TEST(DType, Fp8KnownValues) {
  // One, the largest finite value and the smallest subnormal of each type.
  struct Case {
    DType t;
    uint8_t one;
    float max;
    uint8_t max_code;
    float tiny;
  };
  for (const Case& c : {Case{DType::F8E4M3FN, 0x38, 448, 0x7e, 0x1p-9f}, Case{DType::F8E4M3FNUZ, 0x40, 240, 0x7f, 0x1p-10f},
                        Case{DType::F8E5M2, 0x3c, 57344, 0x7b, 0x1p-16f}, Case{DType::F8E5M2FNUZ, 0x40, 57344, 0x7f, 0x1p-17f}}) {
    EXPECT_EQ(float_to_fp8(1.0f, c.t), c.one) << dtype_name(c.t);
    EXPECT_EQ(fp8_to_float(c.max_code, c.t), c.max) << dtype_name(c.t);
    EXPECT_EQ(fp8_to_float(c.max_code | 0x80, c.t), -c.max) << dtype_name(c.t);
    EXPECT_EQ(fp8_to_float(0x01, c.t), c.tiny) << dtype_name(c.t);
  }
  EXPECT_EQ(fp8_to_float(0x7c, DType::F8E5M2), INFINITY);
  EXPECT_EQ(fp8_to_float(0xfc, DType::F8E5M2), -INFINITY);
  EXPECT_TRUE(std::isnan(fp8_to_float(0x80, DType::F8E4M3FNUZ)));
  EXPECT_TRUE(std::isnan(fp8_to_float(0xff, DType::F8E4M3FN)));
}

TEST(DType, Fp8RoundsToNearestEven) {
  const DType t = DType::F8E4M3FN;  // 1 = 0x38, 1.125 = 0x39, 1.25 = 0x3a
  EXPECT_EQ(float_to_fp8(1.0625f, t), 0x38);  // tie: to the even 1
  EXPECT_EQ(float_to_fp8(std::nextafter(1.0625f, 2.0f), t), 0x39);
  EXPECT_EQ(float_to_fp8(1.1875f, t), 0x3a);  // tie: to the even 1.25
  EXPECT_EQ(float_to_fp8(std::nextafter(1.1875f, 0.0f), t), 0x39);
  EXPECT_EQ(float_to_fp8(-1.0625f, t), 0xb8);
  // Subnormals, quantum 2^-9: a tie at half of it goes to 0, at 1.5 to 2.
  EXPECT_EQ(float_to_fp8(0x1p-10f, t), 0x00);
  EXPECT_EQ(float_to_fp8(std::nextafter(0x1p-10f, 1.0f), t), 0x01);
  EXPECT_EQ(float_to_fp8(3 * 0x1p-10f, t), 0x02);
  EXPECT_EQ(float_to_fp8(0x1p-6f - 0x1p-10f, t), 0x08);  // rounds up into the smallest normal
  // A carry into the exponent: halfway between 1.875 (0x3f) and 2 goes to 2 (0x40).
  EXPECT_EQ(float_to_fp8(1.9375f, t), 0x40);
  EXPECT_EQ(float_to_fp8(1.625f, DType::F8E5M2), 0x3e);  // tie between 1.5 (0x3e) and 1.75: to the even 1.5
}

// Zeros, NaN and the range's edges, with and without saturation.
TEST(DType, Fp8SaturationAndSpecials) {
  struct Case {
    DType t;
    float tie;       // halfway between the largest finite value and the next step
    uint8_t max;     // the largest finite code
    uint8_t over;    // what overflow becomes without saturation
    uint8_t tie_to;  // where the tie goes without saturation
  };
  for (const Case& c : {Case{DType::F8E4M3FN, 464, 0x7e, 0x7f, 0x7e}, Case{DType::F8E4M3FNUZ, 248, 0x7f, 0x80, 0x80},
                        Case{DType::F8E5M2, 61440, 0x7b, 0x7c, 0x7c}, Case{DType::F8E5M2FNUZ, 61440, 0x7f, 0x80, 0x80}}) {
    const DType t = c.t;
    const bool fnuz = t == DType::F8E4M3FNUZ || t == DType::F8E5M2FNUZ;
    EXPECT_EQ(float_to_fp8(std::nextafter(c.tie, 0.0f), t, false), c.max) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(c.tie, t, false), c.tie_to) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(std::nextafter(c.tie, INFINITY), t, false), c.over) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(c.tie, t, true), c.max) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(1e30f, t, true), c.max) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(INFINITY, t, true), c.max) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(-INFINITY, t, true), c.max | 0x80) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(INFINITY, t, false), c.over) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(-INFINITY, t, false), fnuz ? 0x80 : c.over | 0x80) << dtype_name(t);
    EXPECT_TRUE(std::isnan(fp8_to_float(float_to_fp8(NAN, t), t))) << dtype_name(t);
    // Negative zero and negative values that round to zero keep their sign,
    // except in fnuz types, which have no -0.
    EXPECT_EQ(float_to_fp8(-0.0f, t), fnuz ? 0x00 : 0x80) << dtype_name(t);
    EXPECT_EQ(float_to_fp8(-1e-30f, t), fnuz ? 0x00 : 0x80) << dtype_name(t);
    EXPECT_EQ(bits(fp8_to_float(0x00, t)), 0u) << dtype_name(t);
  }
  EXPECT_EQ(bits(fp8_to_float(0x80, DType::F8E5M2)), 0x80000000u);
}

}  // namespace
}  // namespace tcc
