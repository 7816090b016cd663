// Element types. Values match ONNX's TensorProto.DataType so the frontend
// converts by a cast; names are tcc's short textual spellings (f32, i64, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tcc {

enum class DType : int32_t {
  Undefined = 0,
  F32 = 1,
  U8 = 2,
  I8 = 3,
  U16 = 4,
  I16 = 5,
  I32 = 6,
  I64 = 7,
  String = 8,
  Bool = 9,
  F16 = 10,
  F64 = 11,
  U32 = 12,
  U64 = 13,
  BF16 = 16,
  F8E4M3FN = 17,
  F8E4M3FNUZ = 18,
  F8E5M2 = 19,
  F8E5M2FNUZ = 20,
  U4 = 21,
  I4 = 22,
  F4E2M1 = 23,
};

// Short name used by the textual IR ("f32", "bf16", "bool", ...).
std::string_view dtype_name(DType t);
// Inverse of dtype_name; nullopt for an unknown spelling.
std::optional<DType> parse_dtype(std::string_view name);
// torch's spelling of a dtype ("float32", "int64", ...), as traces, guards and
// module manifests write it.
std::string torch_dtype_name(DType t);
// Inverse of torch_dtype_name, also reading torch's aliases ("float", "half",
// "long", ...) and dtype_name's spellings; nullopt for an unknown one.
std::optional<DType> parse_torch_dtype(std::string_view name);
// ONNX's enum value -> DType; nullopt for types tcc does not model (complex, 2-bit, ...).
std::optional<DType> dtype_from_onnx(int32_t onnx_type);
// Bytes per element in a tcc tensor; 0 for String and Undefined. The 4-bit
// types take a byte each (packed two to a byte only in ONNX files).
size_t dtype_size(DType t);
bool is_float(DType t);    // f16, bf16, f32, f64, the 8-bit floats and f4e2m1
bool is_fp8(DType t);      // f8e4m3fn, f8e4m3fnuz, f8e5m2, f8e5m2fnuz
bool is_4bit(DType t);     // u4, i4, f4e2m1
bool is_integer(DType t);  // signed and unsigned integers, u4 and i4 among them (not bool)
bool is_signed(DType t);

// IEEE half and bfloat16 conversions, round to nearest even.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
// ONNX's 8-bit floats, t one of the is_fp8 types. "fn" types have no infinity
// (e4m3fn's NaN is S.1111.111), "fnuz" ones no negative zero and one NaN, 0x80.
// fp8_to_float is exact. float_to_fp8 rounds to nearest even; a value beyond
// the largest finite one (infinity included) becomes that largest value, signed,
// when saturate (Cast's default), else infinity for f8e5m2 and NaN otherwise.
float fp8_to_float(uint8_t bits, DType t);
uint8_t float_to_fp8(float f, DType t, bool saturate = true);
// An 8-bit float's layout, sign bit first, as the emitted kernels' conversions
// spell it out.
struct Fp8Format {
  int mantissa;       // mantissa bits, below the exponent's
  int bias;           // exponent bias
  bool fnuz;          // no -0; 0x80 is the one NaN
  bool inf;           // the code above max_code is infinity, the rest NaN (f8e5m2)
  uint32_t max_code;  // the largest finite magnitude's bits, sign cleared
};
Fp8Format fp8_format(DType t);
// ONNX's FLOAT4E2M1, a code in a byte's low four bits: sign bit 3, two exponent
// bits of bias 1, one mantissa bit; its values are 0, 0.5, 1, 1.5, 2, 3, 4, 6
// and their negatives, with no infinity or NaN. f4e2m1_to_float is exact.
// float_to_f4e2m1 rounds to nearest even and saturates (infinity to 6, signed);
// NaN becomes 0x8 (-0), as ONNX's reference casts it.
float f4e2m1_to_float(uint8_t code);
uint8_t float_to_f4e2m1(float f);
// v's low four bits as the 4-bit integer t: sign-extended for i4, 0 to 15 for
// u4 (integer casts to them wrap, as ONNX's tests expect).
int64_t wrap_int4(int64_t v, DType t);

}  // namespace tcc
