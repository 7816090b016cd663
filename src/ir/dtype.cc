#include "src/ir/dtype.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "src/diag/errors.h"

namespace tcc {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<DTypeInfo, 21> kInfos = {{
    {DType::F32, "f32", 4},
    {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2},
    {DType::F64, "f64", 8},
    {DType::F8E4M3FN, "f8e4m3fn", 1},
    {DType::F8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::F8E5M2, "f8e5m2", 1},
    {DType::F8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::F4E2M1, "f4e2m1", 1},
    {DType::I64, "i64", 8},
    {DType::I32, "i32", 4},
    {DType::I16, "i16", 2},
    {DType::I8, "i8", 1},
    {DType::U8, "u8", 1},
    {DType::U16, "u16", 2},
    {DType::U32, "u32", 4},
    {DType::U64, "u64", 8},
    {DType::I4, "i4", 1},
    {DType::U4, "u4", 1},
    {DType::Bool, "bool", 1},
    {DType::String, "str", 0},
}};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return i.name;
  return "undef";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.name == name) return i.type;
  return std::nullopt;
}

namespace {
struct TorchSpelling {
  const char* name;
  DType type;
};
// The canonical names first: torch_dtype_name returns the first match.
constexpr TorchSpelling kTorchNames[] = {
    {"float32", DType::F32}, {"float16", DType::F16}, {"bfloat16", DType::BF16}, {"float64", DType::F64},
    {"int64", DType::I64},   {"int32", DType::I32},   {"int16", DType::I16},     {"int8", DType::I8},
    {"uint8", DType::U8},    {"uint16", DType::U16},  {"uint32", DType::U32},    {"uint64", DType::U64},
    {"float8_e4m3fn", DType::F8E4M3FN}, {"float8_e4m3fnuz", DType::F8E4M3FNUZ},
    {"float8_e5m2", DType::F8E5M2},     {"float8_e5m2fnuz", DType::F8E5M2FNUZ},
    {"bool", DType::Bool},   {"float", DType::F32},   {"half", DType::F16},      {"double", DType::F64},
    {"long", DType::I64},    {"int", DType::I32}};
}  // namespace

std::string torch_dtype_name(DType t) {
  for (const auto& d : kTorchNames)
    if (d.type == t) return d.name;
  return std::string(dtype_name(t));
}

std::optional<DType> parse_torch_dtype(std::string_view name) {
  for (const auto& d : kTorchNames)
    if (name == d.name) return d.type;
  return parse_dtype(name);
}

std::optional<DType> dtype_from_onnx(int32_t onnx_type) {
  for (const auto& i : kInfos)
    if (static_cast<int32_t>(i.type) == onnx_type) return i.type;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  for (const auto& i : kInfos)
    if (i.type == t) return i.size;
  return 0;
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64 || is_fp8(t) ||
         t == DType::F4E2M1;
}

bool is_fp8(DType t) {
  return t == DType::F8E4M3FN || t == DType::F8E4M3FNUZ || t == DType::F8E5M2 || t == DType::F8E5M2FNUZ;
}

bool is_4bit(DType t) { return t == DType::U4 || t == DType::I4 || t == DType::F4E2M1; }

bool is_integer(DType t) {
  switch (t) {
    case DType::I64: case DType::I32: case DType::I16: case DType::I8: case DType::I4:
    case DType::U64: case DType::U32: case DType::U16: case DType::U8: case DType::U4:
      return true;
    default:
      return false;
  }
}

bool is_signed(DType t) {
  return is_float(t) || t == DType::I64 || t == DType::I32 || t == DType::I16 || t == DType::I8 || t == DType::I4;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24
      float v = std::ldexp(static_cast<float>(mant), -24);
      bits = std::bit_cast<uint32_t>(v) | sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absx < 0x38800000u) {  // result is subnormal or zero: round abs/2^-24 to an integer
    float a = std::bit_cast<float>(absx);
    float scaled = a * 16777216.0f;  // exact: power of two
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // nearest even; may carry into exp
  return static_cast<uint16_t>(sign | h);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

Fp8Format fp8_format(DType t) {
  switch (t) {
    case DType::F8E4M3FN: return {3, 7, false, false, 0x7e};
    case DType::F8E4M3FNUZ: return {3, 8, true, false, 0x7f};
    case DType::F8E5M2: return {2, 15, false, true, 0x7b};
    case DType::F8E5M2FNUZ: return {2, 16, true, false, 0x7f};
    default: TCC_CHECK(false) << dtype_name(t) << " is not an 8-bit float"; return {};
  }
}

float fp8_to_float(uint8_t bits, DType t) {
  const Fp8Format f = fp8_format(t);
  const uint32_t sign = static_cast<uint32_t>(bits & 0x80u) << 24, code = bits & 0x7fu;
  if (f.fnuz && bits == 0x80u) return std::numeric_limits<float>::quiet_NaN();
  if (code > f.max_code)  // infinity or NaN
    return std::bit_cast<float>(sign | (f.inf && code == f.max_code + 1 ? 0x7f800000u : 0x7fc00000u));
  const uint32_t exp = code >> f.mantissa, mant = code & ((1u << f.mantissa) - 1u);
  if (exp == 0) {  // subnormal: mant * 2^(1 - bias - mantissa), exact
    const float magnitude = std::ldexp(static_cast<float>(mant), 1 - f.bias - f.mantissa);
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exp + 127 - f.bias) << 23) | (mant << (23 - f.mantissa)));
}

uint8_t float_to_fp8(float v, DType t, bool saturate) {
  const Fp8Format f = fp8_format(t);
  const uint32_t x = std::bit_cast<uint32_t>(v);
  const uint32_t sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  const uint8_t nan = f.fnuz ? 0x80u : static_cast<uint8_t>(sign | 0x7fu);
  if (a > 0x7f800000u) return nan;
  uint32_t code = f.max_code + 1;  // infinity overflows
  if (a < 0x7f800000u) {
    // |v| = m * 2^(e - 23); the result counts units of the fp8's quantum at
    // that exponent, 2^(max(e, 1 - bias) - mantissa), rounded to nearest even.
    const int e = static_cast<int>(a >> 23) - 127, emin = 1 - f.bias;
    const uint32_t m = (a & 0x7fffffu) | (a >= 0x800000u ? 0x800000u : 0u);
    const int shift = 23 - f.mantissa + (e < emin ? emin - e : 0);
    if (shift > 25) {
      code = 0;
    } else {
      const uint32_t rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
      code = m >> shift;
      if (e >= emin) code = (static_cast<uint32_t>(e - emin + 1) << f.mantissa) | (code & ((1u << f.mantissa) - 1u));
      if (rest > half || (rest == half && (code & 1u))) ++code;  // may carry into the exponent
    }
  }
  if (code > f.max_code) {
    if (saturate) return static_cast<uint8_t>(sign | f.max_code);
    return f.inf ? static_cast<uint8_t>(sign | (f.max_code + 1)) : nan;
  }
  if (code == 0 && f.fnuz) return 0;
  return static_cast<uint8_t>(sign | code);
}

float f4e2m1_to_float(uint8_t code) {
  const uint32_t exp = (code >> 1) & 3u, mant = code & 1u;
  // Subnormal (exp 0): mant * 0.5; else (1 + mant / 2) * 2^(exp - 1).
  const float half_mant = 0.5f * static_cast<float>(mant);
  const float magnitude = exp == 0 ? half_mant : std::ldexp(1.0f + half_mant, static_cast<int>(exp) - 1);
  return (code & 8u) ? -magnitude : magnitude;
}

uint8_t float_to_f4e2m1(float f) {
  if (std::isnan(f)) return 8;
  const uint8_t sign = std::signbit(f) ? 8 : 0;
  const float a = std::fabs(f);
  // The midpoints between neighbouring values; a tie goes to the even code.
  const uint8_t code = a <= 0.25f ? 0 : a < 0.75f ? 1 : a <= 1.25f ? 2 : a < 1.75f ? 3
                       : a <= 2.5f  ? 4 : a < 3.5f  ? 5 : a <= 5.0f  ? 6 : 7;
  return static_cast<uint8_t>(sign | code);
}

int64_t wrap_int4(int64_t v, DType t) {
  const int64_t low = v & 15;
  return t == DType::I4 && low >= 8 ? low - 16 : low;
}

}  // namespace tcc
