// Reading and writing single tensors as ONNX TensorProto (.pb) and NumPy (.npy)
// files, the formats of the ONNX conformance tests and of `tcc run --inputs`.
#pragma once

#include <string>

#include "src/ir/tensor.h"

namespace tcc {

// Reads a TensorProto file; `name` receives the tensor's name when non-null.
Tensor read_tensor_pb(const std::string& path, std::string* name = nullptr);
// Writes a TensorProto file; a tensor of 2 GiB or more, which protobuf cannot
// serialize, is an InputError that points to .npy.
void write_tensor_pb(const std::string& path, const Tensor& t, const std::string& name);
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tcc
