#include "frontends/onnx/tensor_proto.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "src/diag/errors.h"

namespace tcc {

// raw_data and external data are little-endian; tcc copies them as they are.
static_assert(std::endian::native == std::endian::little, "tcc assumes a little-endian host");

namespace fs = std::filesystem;

namespace {

size_t packed_size(int64_t numel) { return static_cast<size_t>(numel / 2 + numel % 2); }

class Decoder {
 public:
  // With `movable`, a raw_data payload moves out of it rather than being copied.
  Decoder(const onnx::TensorProto& p, const TensorOrigin& o, onnx::TensorProto* movable = nullptr)
      : p_(p), o_(o), movable_(movable) {}

  Tensor decode() {
    std::optional<DType> dt = dtype_from_onnx(p_.data_type());
    if (!dt) {
      std::string type_name = onnx::TensorProto_DataType_IsValid(p_.data_type())
                                  ? onnx::TensorProto_DataType_Name(p_.data_type())
                                  : "unknown";
      fail("has data type " + std::to_string(p_.data_type()) + " (" + type_name + "), which tcc does not support");
    }
    dtype_ = *dt;
    shape_.assign(p_.dims().begin(), p_.dims().end());
    for (int64_t d : shape_)
      if (d < 0) fail("has a negative dimension in shape " + shape_str(shape_));
    numel_ = checked_numel(shape_);
    if (numel_ < 0) fail("has shape " + shape_str(shape_) + ", whose element count overflows int64");
    if (p_.has_segment()) fail("is segmented (TensorProto.segment), which tcc does not read");

    if (p_.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) return from_external();
    if (p_.has_raw_data()) return from_raw();
    return from_typed_fields();
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    std::string who = p_.name().empty() ? "tensor" : "tensor '" + p_.name() + "'";
    throw InputError(o_.file + ": " + o_.context + who + " " + msg);
  }

  // Bytes the shape needs, refusing sizes that do not fit in memory arithmetic.
  size_t expected_bytes() const {
    if (is_4bit(dtype_)) return packed_size(numel_);
    size_t elem = dtype_size(dtype_);
    if (static_cast<uint64_t>(numel_) > std::numeric_limits<size_t>::max() / elem)
      fail("has shape " + shape_str(shape_) + ", which is too large to hold in memory");
    return static_cast<size_t>(numel_) * elem;
  }

  std::string need_text() const {
    return "shape " + shape_str(shape_) + " of " + std::string(dtype_name(dtype_)) + " needs " +
           std::to_string(expected_bytes()) + " bytes" + (is_4bit(dtype_) ? " (two elements a byte)" : "");
  }

  Tensor from_raw() const {
    const std::string& raw = p_.raw_data();
    if (dtype_ == DType::String) fail("is a string tensor with raw_data; strings must be in string_data");
    if (raw.size() != expected_bytes())
      fail("has " + std::to_string(raw.size()) + " bytes of raw_data but " + need_text());
    if (is_4bit(dtype_))
      return unpacked([&](int64_t k) { return static_cast<uint8_t>(raw[static_cast<size_t>(k)]); });
    if (movable_) return Tensor::from_string_bytes(dtype_, shape_, std::move(*movable_->mutable_raw_data()));
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return Tensor::from_bytes(dtype_, shape_, std::move(bytes));
  }

  // The typed field ONNX stores this dtype in, and its element count.
  std::pair<const char*, int> typed_field() const {
    switch (dtype_) {
      case DType::F32: return {"float_data", p_.float_data_size()};
      case DType::F64: return {"double_data", p_.double_data_size()};
      case DType::I64: return {"int64_data", p_.int64_data_size()};
      case DType::U32:
      case DType::U64: return {"uint64_data", p_.uint64_data_size()};
      case DType::String: return {"string_data", p_.string_data_size()};
      default: return {"int32_data", p_.int32_data_size()};
    }
  }

  // ONNX packs 4-bit elements two to a byte, the first in the low nibble; a tcc
  // tensor holds one a byte, an i4 sign-extended (docs/MODULE.md). byte(k) is
  // the packed byte k.
  template <typename Bytes>
  Tensor unpacked(const Bytes& byte) const {
    Tensor t(dtype_, shape_);
    uint8_t* out = t.data_mut<uint8_t>();
    for (int64_t i = 0; i < numel_; ++i)
      out[i] = static_cast<uint8_t>(wrap_int4(byte(i / 2) >> (i % 2 * 4), dtype_));
    return t;
  }

  template <typename T, typename Field>
  void copy_field(Tensor& t, const Field& f) const {
    T* out = t.data_mut<T>();
    for (int64_t i = 0; i < numel_; ++i) out[i] = static_cast<T>(f.Get(static_cast<int>(i)));
  }

  Tensor from_typed_fields() const {
    auto [field, count] = typed_field();
    if (is_4bit(dtype_)) {  // int32_data holds the packed bytes
      if (static_cast<size_t>(count) != expected_bytes())
        fail("has " + std::to_string(count) + " bytes in int32_data but " + need_text());
      for (int k = 0; k < count; ++k)
        if (p_.int32_data(k) < 0 || p_.int32_data(k) > 255)
          fail("has " + std::to_string(p_.int32_data(k)) + " at int32_data[" + std::to_string(k) +
               "], expected a byte of two packed " + std::string(dtype_name(dtype_)) + " elements (0 to 255)");
      return unpacked([&](int64_t k) { return static_cast<uint8_t>(p_.int32_data(static_cast<int>(k))); });
    }
    if (count != numel_)
      fail("has " + std::to_string(count) + " elements in " + field + " but shape " + shape_str(shape_) +
           " has " + std::to_string(numel_));
    // Only now is the allocation known to be bounded by the message's own size.
    Tensor t(dtype_, shape_);
    switch (dtype_) {
      case DType::F32: copy_field<float>(t, p_.float_data()); break;
      case DType::F64: copy_field<double>(t, p_.double_data()); break;
      case DType::I64: copy_field<int64_t>(t, p_.int64_data()); break;
      case DType::U64: copy_field<uint64_t>(t, p_.uint64_data()); break;
      case DType::U32: copy_field<uint32_t>(t, p_.uint64_data()); break;
      case DType::I32: copy_field<int32_t>(t, p_.int32_data()); break;
      case DType::I16: copy_field<int16_t>(t, p_.int32_data()); break;
      case DType::I8: copy_field<int8_t>(t, p_.int32_data()); break;
      // int32_data holds the bit patterns of 16- and 8-bit floats and the values of small unsigned types.
      case DType::U16:
      case DType::F16:
      case DType::BF16: copy_field<uint16_t>(t, p_.int32_data()); break;
      case DType::U8:
      case DType::F8E4M3FN:
      case DType::F8E4M3FNUZ:
      case DType::F8E5M2:
      case DType::F8E5M2FNUZ: copy_field<uint8_t>(t, p_.int32_data()); break;
      case DType::Bool: {
        uint8_t* out = t.data_mut<uint8_t>();
        for (int64_t i = 0; i < numel_; ++i) out[i] = p_.int32_data(static_cast<int>(i)) != 0;
        break;
      }
      case DType::String:
        for (int64_t i = 0; i < numel_; ++i) t.strings_mut()[i] = p_.string_data(static_cast<int>(i));
        break;
      default: TCC_CHECK(false) << "unhandled dtype " << dtype_name(dtype_);
    }
    return t;
  }

  static std::optional<uint64_t> parse_u64(const std::string& s) {
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
  }

  Tensor from_external() const {
    if (dtype_ == DType::String) fail("is a string tensor with external data, which ONNX does not allow");
    std::string location;
    std::optional<uint64_t> offset, length;
    for (const auto& kv : p_.external_data()) {
      if (kv.key() == "location") {
        location = kv.value();
      } else if (kv.key() == "offset" || kv.key() == "length") {
        auto v = parse_u64(kv.value());
        if (!v) fail("has external data " + kv.key() + " '" + kv.value() + "', which is not a non-negative integer");
        (kv.key() == "offset" ? offset : length) = v;
      }
    }
    if (location.empty()) fail("is stored externally but names no 'location'");
    std::string quoted = "'" + location + "'";
    if (o_.data_dir.empty())
      fail("is stored in external file " + quoted +
           ", but the model was not read from a file; external data is read only from the model's folder");
    fs::path rel(location);
    if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
      fail("has external data path " + quoted + ", which is absolute; it must be relative to the model's folder");
    for (const auto& part : rel)
      if (part == "..")
        fail("has external data path " + quoted + ", which contains '..'; it must stay inside the model's folder");

    // Resolve symlinks on both sides, then require the file to lie under the folder.
    std::error_code ec;
    fs::path dir = fs::weakly_canonical(fs::absolute(o_.data_dir, ec), ec);
    if (ec) fail("has external data, but the model's folder '" + o_.data_dir + "' cannot be resolved");
    fs::path full = fs::weakly_canonical(dir / rel, ec);
    if (ec) fail("has external data path " + quoted + ", which cannot be resolved");
    auto [dir_end, full_it] = std::mismatch(dir.begin(), dir.end(), full.begin(), full.end());
    if (dir_end != dir.end() || full_it == full.end())
      fail("has external data path " + quoted + ", which resolves to '" + full.string() +
           "', outside the model's folder '" + dir.string() + "'");
    if (!fs::is_regular_file(full, ec))
      fail("has external data file '" + full.string() + "', which does not exist or is not a regular file");
    uint64_t file_size = fs::file_size(full, ec);
    if (ec) fail("has external data file '" + full.string() + "', whose size cannot be read");

    uint64_t off = offset.value_or(0);
    if (off > file_size)
      fail("has external data offset " + std::to_string(off) + ", past the end of '" + full.string() + "' (" +
           std::to_string(file_size) + " bytes)");
    uint64_t len = length.value_or(file_size - off);
    if (len > file_size - off)
      fail("has external data range [" + std::to_string(off) + ", " + std::to_string(off) + "+" +
           std::to_string(len) + ") outside '" + full.string() + "' (" + std::to_string(file_size) + " bytes)");
    if (len != expected_bytes())
      fail("has " + std::to_string(len) + " bytes of external data in '" + full.string() + "' but " + need_text());

    std::ifstream f(full, std::ios::binary);
    std::vector<std::byte> bytes(len);
    f.seekg(static_cast<std::streamoff>(off));
    f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(len));
    if (!f) fail("has external data file '" + full.string() + "', which could not be read");
    if (is_4bit(dtype_))
      return unpacked([&](int64_t k) { return static_cast<uint8_t>(bytes[static_cast<size_t>(k)]); });
    return Tensor::from_bytes(dtype_, shape_, std::move(bytes));
  }

  const onnx::TensorProto& p_;
  const TensorOrigin& o_;
  onnx::TensorProto* movable_;
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
};

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& p, const TensorOrigin& origin) {
  return Decoder(p, origin).decode();
}

Tensor tensor_from_proto(onnx::TensorProto&& p, const TensorOrigin& origin) {
  return Decoder(p, origin, &p).decode();
}

void tensor_header_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  TCC_CHECK(t.defined()) << "encoding an undefined tensor";
  p->Clear();
  p->set_name(name);
  p->set_data_type(static_cast<int32_t>(t.dtype()));
  for (int64_t d : t.shape()) p->add_dims(d);
}

void tensor_to_proto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  tensor_header_to_proto(t, name, p);
  if (t.dtype() == DType::String) {
    for (const auto& s : t.strings()) p->add_string_data(s);
  } else if (is_4bit(t.dtype())) {
    std::string packed(packed_size(t.numel()), '\0');
    const uint8_t* in = t.data<uint8_t>();
    for (int64_t i = 0; i < t.numel(); ++i)
      packed[static_cast<size_t>(i / 2)] |= static_cast<char>((in[i] & 15u) << (i % 2 * 4));
    p->set_raw_data(std::move(packed));
  } else {
    p->set_raw_data(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  }
}

}  // namespace tcc
