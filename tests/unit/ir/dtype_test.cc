// Element types: the 8-bit floats' and 4-bit types' names and sizes, and their
// conversions to and from float (round to nearest even, ONNX's NaN, infinity,
// negative zero and saturation rules per type; i4 and u4 wrapping).
#include "src/ir/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "src/ir/tensor.h"

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
  EXPECT_FALSE(dtype_from_onnx(24).has_value());  // float8e8m0
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

TEST(DType, FourBitNamesAndSizes) {
  const DType types[] = {DType::U4, DType::I4, DType::F4E2M1};
  const char* names[] = {"u4", "i4", "f4e2m1"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dtype_from_onnx(21 + i), types[i]);
    EXPECT_EQ(dtype_name(types[i]), names[i]);
    EXPECT_EQ(parse_dtype(names[i]), types[i]);
    EXPECT_EQ(dtype_size(types[i]), 1u);  // one a byte inside tcc
    EXPECT_TRUE(is_4bit(types[i]));
  }
  EXPECT_TRUE(is_integer(DType::U4) && !is_signed(DType::U4) && !is_float(DType::U4));
  EXPECT_TRUE(is_integer(DType::I4) && is_signed(DType::I4) && !is_float(DType::I4));
  EXPECT_TRUE(is_float(DType::F4E2M1) && is_signed(DType::F4E2M1) && !is_integer(DType::F4E2M1));
  EXPECT_FALSE(is_fp8(DType::F4E2M1) || is_4bit(DType::I8) || is_4bit(DType::F8E4M3FN));
}

// Every f4e2m1 code: its value (ONNX's table), and the code it encodes back to.
TEST(DType, F4e2m1EveryCodeRoundTrips) {
  const float values[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    const float v = f4e2m1_to_float(static_cast<uint8_t>(c));
    EXPECT_EQ(bits(v), bits(c < 8 ? values[c] : -values[c - 8])) << c;
    EXPECT_EQ(float_to_f4e2m1(v), c) << v;
  }
}

TEST(DType, F4e2m1RoundsToNearestEvenAndSaturates) {
  // Ties between neighbours go to the even code: 0.25 to 0, 0.75 to 1 (code 2),
  // 1.25 to 1, 1.75 to 2 (code 4), 2.5 to 2, 3.5 to 4 (code 6), 5 to 4.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const uint8_t tie_codes[] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(float_to_f4e2m1(ties[i]), tie_codes[i]) << ties[i];
    EXPECT_EQ(float_to_f4e2m1(-ties[i]), tie_codes[i] | 8) << -ties[i];
    // Just off a tie rounds to the nearer neighbour, below and above.
    EXPECT_EQ(float_to_f4e2m1(std::nextafter(ties[i], 0.0f)), i) << ties[i];
    EXPECT_EQ(float_to_f4e2m1(std::nextafter(ties[i], INFINITY)), i + 1) << ties[i];
  }
  // Beyond 6, infinities included, saturates; NaN is 0x8 as ONNX's reference
  // casts it; -0 and tiny negatives keep their sign.
  EXPECT_EQ(float_to_f4e2m1(9), 0x7);
  EXPECT_EQ(float_to_f4e2m1(1e6f), 0x7);
  EXPECT_EQ(float_to_f4e2m1(INFINITY), 0x7);
  EXPECT_EQ(float_to_f4e2m1(-INFINITY), 0xf);
  EXPECT_EQ(float_to_f4e2m1(-8), 0xf);
  EXPECT_EQ(float_to_f4e2m1(NAN), 0x8);
  EXPECT_EQ(float_to_f4e2m1(-0.0f), 0x8);
  EXPECT_EQ(float_to_f4e2m1(-1e-7f), 0x8);
  EXPECT_EQ(float_to_f4e2m1(1e-7f), 0x0);
}

// The 4-bit integers keep an integer's low four bits: i4 in [-8, 7], u4 in
// [0, 15], as ONNX's Cast tests take -9 ... 15 to them.
TEST(DType, Int4Wraps) {
  for (int64_t v = -40; v <= 40; ++v) {
    const int64_t i4 = wrap_int4(v, DType::I4), u4 = wrap_int4(v, DType::U4);
    EXPECT_TRUE(i4 >= -8 && i4 <= 7 && (v - i4) % 16 == 0) << v;
    EXPECT_TRUE(u4 >= 0 && u4 <= 15 && (v - u4) % 16 == 0) << v;
    if (v >= -8 && v <= 7) {
      EXPECT_EQ(i4, v);
    }
    if (v >= 0 && v <= 15) {
      EXPECT_EQ(u4, v);
    }
  }
  EXPECT_EQ(wrap_int4(-9, DType::I4), 7);
  EXPECT_EQ(wrap_int4(8, DType::I4), -8);
  EXPECT_EQ(wrap_int4(-1, DType::U4), 15);
  EXPECT_EQ(wrap_int4(INT64_MIN, DType::I4), 0);
}

// Tensor::cast takes floats to i4 and u4 truncated and wrapped (NaN to 0),
// integers wrapped, and i4 back to wider integers by value.
TEST(DType, TensorCastsToFourBitIntegersWrap) {
  const float x[] = {-9, -8.7f, 7.9f, 8, 15, 16.5f, NAN, 2.5f};
  Tensor f(DType::F32, {8});
  for (int64_t i = 0; i < 8; ++i) f.set_f64(i, x[i]);
  EXPECT_EQ(f.cast(DType::I4).to_i64_vector(), (std::vector<int64_t>{7, -8, 7, -8, -1, 0, 0, 2}));
  EXPECT_EQ(f.cast(DType::U4).to_i64_vector(), (std::vector<int64_t>{7, 8, 7, 8, 15, 0, 0, 2}));
  Tensor i(DType::I64, {3});
  for (int64_t k = 0; k < 3; ++k) i.set_i64(k, std::vector<int64_t>{-9, 8, 100}[static_cast<size_t>(k)]);
  const Tensor i4 = i.cast(DType::I4);
  EXPECT_EQ(i4.to_i64_vector(), (std::vector<int64_t>{7, -8, 4}));
  EXPECT_EQ(i4.cast(DType::I8).to_i64_vector(), (std::vector<int64_t>{7, -8, 4}));
  EXPECT_EQ(i4.cast(DType::U4).to_i64_vector(), (std::vector<int64_t>{7, 8, 4}));
  EXPECT_EQ(i4.data<int8_t>()[1], -8);  // a byte each, sign-extended
}

}  // namespace
}  // namespace tcc
