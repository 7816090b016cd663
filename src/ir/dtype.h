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
// ONNX's enum value -> DType; nullopt for types tcc does not model (complex, float8, ...).
std::optional<DType> dtype_from_onnx(int32_t onnx_type);
// Bytes per element; 0 for String and Undefined.
size_t dtype_size(DType t);
bool is_float(DType t);    // f16, bf16, f32, f64
bool is_integer(DType t);  // signed and unsigned integers (not bool)
bool is_signed(DType t);

// IEEE half and bfloat16 conversions, round to nearest even.
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);

}  // namespace tcc
