// Reading and writing a model's values of any kind as ONNX files: a tensor as
// a TensorProto (tensor_io.h), a sequence as a SequenceProto, an optional as
// an OptionalProto, the layout of the ONNX node tests' data sets, of
// `tcc run --inputs` and of what it writes.
#pragma once

#include <string>

#include "src/ir/tensor.h"
#include "src/ir/type.h"

namespace tcc {

// One value of `type`: a TensorProto, or for a sequence or optional type a
// SequenceProto or OptionalProto. Unreadable files are InputErrors naming them.
Tensor read_value_pb(const std::string& path, const Type& type);
// Writes t (a tensor, sequence or optional) as read_value_pb reads it.
void write_value_pb(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace tcc
