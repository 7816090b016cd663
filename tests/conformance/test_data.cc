// Reading a node test's data sets and comparing outputs with what they expect.
#include "tests/conformance/test_data.h"

#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "frontends/onnx/tensor_io.h"
#include "frontends/onnx/tensor_proto.h"
#include "src/diag/errors.h"

namespace tcc::conformance {

namespace fs = std::filesystem;

namespace {

std::string multi_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] > 0) {
      idx[i] = flat % shape[i];
      flat /= shape[i];
    }
  }
  return shape_str(idx);
}

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string kind_name(const Tensor& t) {
  return t.is_sequence() ? "a sequence" : t.is_optional() ? "an optional" : "a tensor";
}

}  // namespace

// Sequences and optionals match element by element.
std::string compare(const Tensor& expected, const Tensor& actual) {
  if (expected.kind() != actual.kind()) return kind_name(actual) + ", expected " + kind_name(expected);
  if (expected.kind() != Tensor::Kind::Tensor) {
    const std::vector<Tensor>& e = expected.elements();
    const std::vector<Tensor>& a = actual.elements();
    if (e.size() != a.size())
      return std::to_string(a.size()) + " elements, expected " + std::to_string(e.size());
    for (size_t i = 0; i < e.size(); ++i) {
      std::string mismatch = compare(e[i], a[i]);
      if (!mismatch.empty()) return "element " + std::to_string(i) + ": " + mismatch;
    }
    return "";
  }
  if (expected.dtype() != actual.dtype())
    return "dtype " + std::string(dtype_name(actual.dtype())) + ", expected " + std::string(dtype_name(expected.dtype()));
  if (expected.shape() != actual.shape())
    return "shape " + shape_str(actual.shape()) + ", expected " + shape_str(expected.shape());
  if (expected.dtype() == DType::String) {
    for (int64_t i = 0; i < expected.numel(); ++i)
      if (expected.strings()[i] != actual.strings()[i])
        return "index " + multi_index(i, expected.shape()) + ": expected \"" + expected.strings()[i] +
               "\", actual \"" + actual.strings()[i] + "\"";
    return "";
  }
  bool exact = !is_float(expected.dtype());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    bool ok;
    std::string e, a;
    if (exact) {
      int64_t x = expected.get_i64(i), y = actual.get_i64(i);
      ok = x == y;
      e = std::to_string(x), a = std::to_string(y);
    } else {
      double x = expected.get_f64(i), y = actual.get_f64(i);
      if (std::isnan(x) || std::isnan(y))
        ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(x) || std::isinf(y))
        ok = x == y;
      else
        ok = std::fabs(y - x) <= kAtol + kRtol * std::fabs(x);
      e = format_number(x), a = format_number(y);
    }
    if (!ok) return "index " + multi_index(i, expected.shape()) + ": expected " + e + ", actual " + a;
  }
  return "";
}

std::vector<fs::path> data_sets(const fs::path& test_dir) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(test_dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

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

Tensor tensor_from_bytes(const std::string& bytes, const fs::path& path) {
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw InputError(path.string() + ": an element is not a readable TensorProto");
  return tensor_from_proto(p, {path.string(), path.parent_path().string(), ""});
}

Tensor sequence_from_bytes(const std::string& bytes, const Type& type, const fs::path& path) {
  ValueFields f = value_fields(bytes, path.string(), "SequenceProto");
  if (!f.sequences.empty()) throw InputError(path.string() + ": a sequence of sequences, which tcc does not read");
  std::vector<Tensor> elems;
  for (const std::string& t : f.tensors) {
    elems.push_back(tensor_from_bytes(t, path));
    if (elems.back().dtype() != elems.front().dtype())
      throw InputError(path.string() + ": a sequence of tensors of several dtypes");
  }
  DType dt = elems.empty() ? element_dtype(type) : elems.front().dtype();
  return Tensor::sequence(dt, std::move(elems));
}

}  // namespace

Tensor read_value_pb(const fs::path& path, const Type& type) {
  bool sequence = type.kind() == Type::Kind::Sequence, optional = type.kind() == Type::Kind::Optional;
  if (!sequence && !optional) return read_tensor_pb(path.string());
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path.string() + ": cannot open");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (sequence) return sequence_from_bytes(bytes, type, path);
  ValueFields fields = value_fields(bytes, path.string(), "OptionalProto");
  std::vector<Tensor> value;
  for (const std::string& t : fields.tensors) value.push_back(tensor_from_bytes(t, path));
  for (const std::string& s : fields.sequences) value.push_back(sequence_from_bytes(s, type.elem(), path));
  if (value.size() > 1) throw InputError(path.string() + ": an OptionalProto of several values");
  DType dt = value.empty() ? element_dtype(type) : value.front().dtype();
  return Tensor::optional(dt, std::move(value));
}

}  // namespace tcc::conformance
