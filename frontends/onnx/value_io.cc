// SequenceProto and OptionalProto files (value_io.h).
#include "frontends/onnx/value_io.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "frontends/onnx/tensor_io.h"
#include "frontends/onnx/tensor_proto.h"
#include "frontends/read_file.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

// The dtype of the tensors a sequence or optional type holds; Undefined when unknown.
DType element_dtype(const Type& t) {
  if (t.is_tensor()) return t.dtype();
  return t.kind() == Type::Kind::Sequence || t.kind() == Type::Kind::Optional ? element_dtype(t.elem())
                                                                                  : DType::Undefined;
}

// The tensors (field 3) and sequences (field 5) of a SequenceProto or
// OptionalProto, both of which number their fields so. They are read field by
// field: their generated classes come with the ONNX_ML protobuf, which tcc
// does not build with.
struct ValueFields {
  std::vector<std::string> tensors, sequences;
};

ValueFields value_fields(const std::string& bytes, const std::string& path, const std::string& what) {
  google::protobuf::UnknownFieldSet set;
  if (!set.ParseFromString(bytes)) throw InputError(path + ": not a readable " + what + " file");
  ValueFields f;
  for (int i = 0; i < set.field_count(); ++i) {
    const google::protobuf::UnknownField& field = set.field(i);
    if (field.number() == 3 || field.number() == 5) {
      if (field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
        throw InputError(path + ": not a readable " + what + " file");
      (field.number() == 3 ? f.tensors : f.sequences).push_back(field.length_delimited());
    } else if (field.number() > 3) {
      throw InputError(path + ": a " + what + " of sparse tensors, maps or optionals, which tcc does not read");
    }
  }
  return f;
}

Tensor tensor_from_bytes(const std::string& bytes, const std::string& path) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw InputError(path + ": an element is not a readable TensorProto");
  std::string folder = std::filesystem::path(path).parent_path().string();
  return tensor_from_proto(p, {path, folder.empty() ? "." : folder, ""});
}

Tensor sequence_from_bytes(const std::string& bytes, const Type& type, const std::string& path) {
  ValueFields f = value_fields(bytes, path, "SequenceProto");
  if (!f.sequences.empty()) throw InputError(path + ": a sequence of sequences, which tcc does not read");
  std::vector<Tensor> elems;
  for (const std::string& t : f.tensors) {
    elems.push_back(tensor_from_bytes(t, path));
    if (elems.back().dtype() != elems.front().dtype())
      throw InputError(path + ": a sequence of tensors of several dtypes");
  }
  DType dt = elems.empty() ? element_dtype(type) : elems.front().dtype();
  return Tensor::sequence(dt, std::move(elems));
}

}  // namespace

Tensor read_value_pb(const std::string& path, const Type& type) {
  bool sequence = type.kind() == Type::Kind::Sequence, optional = type.kind() == Type::Kind::Optional;
  if (!sequence && !optional) return read_tensor_pb(path);
  std::string bytes = read_file_bytes(path, "value file");
  if (sequence) return sequence_from_bytes(bytes, type, path);
  ValueFields fields = value_fields(bytes, path, "OptionalProto");
  std::vector<Tensor> value;
  for (const std::string& t : fields.tensors) value.push_back(tensor_from_bytes(t, path));
  for (const std::string& s : fields.sequences) value.push_back(sequence_from_bytes(s, type.elem(), path));
  if (value.size() > 1) throw InputError(path + ": an OptionalProto of several values");
  DType dt = value.empty() ? element_dtype(type) : value.front().dtype();
  return Tensor::optional(dt, std::move(value));
}


namespace {

// SequenceProto / OptionalProto elem_type: TENSOR and SEQUENCE.
constexpr int kTensorElements = 1, kSequenceElements = 3;

std::string tensor_bytes(const Tensor& t) {
  onnx::TensorProto p;
  tensor_to_proto(t, "", &p);
  std::string bytes;
  TCC_CHECK(p.SerializeToString(&bytes)) << "cannot serialize a sequence's element";
  return bytes;
}

// A SequenceProto or OptionalProto of t named `name`, field by field as
// value_fields reads them.
std::string value_bytes(const Tensor& t, const std::string& name) {
  google::protobuf::UnknownFieldSet set;
  set.AddLengthDelimited(1, name);
  bool of_sequence = t.is_optional() && !t.elements().empty() && t.elements().front().is_sequence();
  set.AddVarint(2, of_sequence ? kSequenceElements : kTensorElements);
  for (const Tensor& e : t.elements())
    set.AddLengthDelimited(e.is_sequence() ? 5 : 3, e.is_sequence() ? value_bytes(e, "") : tensor_bytes(e));
  std::string bytes;
  TCC_CHECK(set.SerializeToString(&bytes)) << "cannot serialize value '" << name << "'";
  return bytes;
}

}  // namespace

void write_value_pb(const std::string& path, const Tensor& t, const std::string& name) {
  if (t.kind() == Tensor::Kind::Tensor) {
    write_tensor_pb(path, t, name);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  std::string bytes = value_bytes(t, name);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw InputError(path + ": cannot write file");
}

}  // namespace tcc
