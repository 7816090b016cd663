// ONNX TensorProto <-> tcc Tensor, shared by the model importer (initializers,
// tensor attributes) and tensor_io (.pb files), so both accept exactly the same
// encodings and refuse exactly the same malformed ones.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "src/ir/tensor.h"

namespace tcc {

// Where a TensorProto came from: `file` names it in messages; external data may
// be read only from files inside `data_dir` (empty: external data is refused);
// `context` ("node 'c' (Constant) attribute 'value': ") goes before the
// tensor's name in messages.
struct TensorOrigin {
  std::string file;
  std::string data_dir;
  std::string context;
};

// Decodes raw_data, the typed fields (float_data, int32_data, ...) or external
// data. Any size that does not match the shape exactly, an element count that
// overflows int64, an unsupported data type or an external file outside
// data_dir is an InputError naming the file and the tensor; nothing is
// allocated before the sizes are known to match the bytes present.
Tensor tensor_from_proto(const onnx::TensorProto& p, const TensorOrigin& origin);
// Same, but raw_data moves into the tensor instead of being copied (p loses it).
Tensor tensor_from_proto(onnx::TensorProto&& p, const TensorOrigin& origin);

// Encodes a tensor as raw_data (string_data for strings), the 4-bit types
// packed two elements to a byte as ONNX stores them (decoding unpacks them).
void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);
// Encodes all but the data: name, data type and dims (the exporter streams
// raw_data after them).
void tensor_header_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p);

}  // namespace tcc
