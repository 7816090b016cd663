#include "frontends/onnx/tensor_io.h"

#include <onnx/onnx_pb.h>

#include <array>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "frontends/onnx/tensor_proto.h"
#include "frontends/read_file.h"
#include "src/diag/errors.h"

namespace tcc {

namespace {

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw InputError(path + ": cannot write file");
}

std::string folder_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// NumPy type strings without the byte-order character.
struct NpyType {
  DType dtype;
  const char* code;
};
constexpr std::array<NpyType, 12> kNpyTypes = {{
    {DType::F16, "f2"},
    {DType::F32, "f4"},
    {DType::F64, "f8"},
    {DType::I8, "i1"},
    {DType::I16, "i2"},
    {DType::I32, "i4"},
    {DType::I64, "i8"},
    {DType::U8, "u1"},
    {DType::U16, "u2"},
    {DType::U32, "u4"},
    {DType::U64, "u8"},
    {DType::Bool, "b1"},
}};

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
// NumPy pads headers so the data starts on a 64-byte boundary.
constexpr size_t kNpyAlign = 64;

struct NpyHeader {
  DType dtype = DType::Undefined;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parser for the header, a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::string& text, const std::string& path) : t_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader h;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (!eat('}')) {
      std::string key = quoted();
      expect(':');
      if (key == "descr") {
        h.dtype = dtype_of(quoted());
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        fail("unexpected header key '" + key + "'");
      }
      if (!eat(',')) {
        expect('}');
        break;
      }
    }
    skip();
    if (p_ != t_.size()) fail("unexpected text after the header dict");
    if (!has_descr || !has_order || !has_shape) fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw InputError(path_ + ": not a valid .npy file: " + msg);
  }
  void skip() {
    while (p_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[p_]))) ++p_;
  }
  bool eat(char c) {
    skip();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "' in the header at offset " + std::to_string(p_));
  }
  std::string quoted() {
    skip();
    if (p_ >= t_.size() || (t_[p_] != '\'' && t_[p_] != '"')) fail("expected a quoted string in the header");
    char q = t_[p_++];
    size_t end = t_.find(q, p_);
    if (end == std::string::npos) fail("unterminated string in the header");
    std::string s = t_.substr(p_, end - p_);
    p_ = end + 1;
    return s;
  }
  bool boolean() {
    skip();
    for (const auto& [word, v] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (t_.compare(p_, std::strlen(word), word) == 0) {
        p_ += std::strlen(word);
        return v;
      }
    }
    fail("expected True or False for 'fortran_order'");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (!eat(')')) {
      skip();
      if (p_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[p_])))
        fail("expected a non-negative integer in 'shape'");
      int64_t v = 0;
      while (p_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[p_]))) {
        int digit = t_[p_++] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) fail("a dimension in 'shape' overflows int64");
        v = v * 10 + digit;
      }
      dims.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  DType dtype_of(const std::string& descr) const {
    if (descr.size() == 3 && descr[0] == '>' && descr[2] != '1')
      fail("dtype '" + descr + "' is big-endian; tcc reads little-endian data only");
    if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=' || descr[0] == '>'))
      for (const auto& nt : kNpyTypes)
        if (descr.compare(1, 2, nt.code) == 0) return nt.dtype;
    fail("dtype '" + descr + "' is not supported (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
  }

  const std::string& t_;
  const std::string& path_;
  size_t p_ = 0;
};

uint32_t read_le(const std::string& s, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

}  // namespace

Tensor read_tensor_pb(const std::string& path, std::string* name) {
  std::string bytes = read_file_bytes(path, "tensor file");
  if (bytes.empty()) throw InputError(path + ": not a valid TensorProto file (the file is empty)");
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) throw InputError(path + ": not a valid TensorProto file (protobuf parse failed)");
  Tensor t = tensor_from_proto(p, {path, folder_of(path), ""});
  if (name) *name = p.name();
  return t;
}

void write_tensor_pb(const std::string& path, const Tensor& t, const std::string& name) {
  // Protobuf serializes no message of 2 GiB or more.
  constexpr size_t kMaxProtoBytes = (size_t{2} << 30) - 1;
  if (t.nbytes() >= kMaxProtoBytes)
    throw InputError(path + ": tensor '" + name + "' holds " + std::to_string(t.nbytes()) +
                     " bytes, more than a TensorProto file can (2 GiB); write .npy files (--format npy)");
  onnx::TensorProto p;
  tensor_to_proto(t, name, &p);
  std::string bytes;
  TCC_CHECK(p.SerializeToString(&bytes)) << "cannot serialize tensor '" << name << "'";
  write_file(path, bytes);
}

Tensor read_npy(const std::string& path) {
  std::string bytes = read_file_bytes(path, ".npy file");
  auto bad = [&](const std::string& msg) { return InputError(path + ": not a valid .npy file: " + msg); };
  if (bytes.size() < kNpyMagicSize + 4 || bytes.compare(0, kNpyMagicSize, kNpyMagic) != 0)
    throw bad("it does not start with the NumPy magic string");
  int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3) throw bad("format version " + std::to_string(major) + " is not 1, 2 or 3");
  size_t len_size = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_size) throw bad("the header is truncated");
  size_t header_len = read_le(bytes, 8, len_size);
  size_t data_at = 8 + len_size + header_len;
  if (data_at > bytes.size()) throw bad("the header is truncated");
  NpyHeader h = NpyHeaderParser(bytes.substr(8 + len_size, header_len), path).parse();
  if (h.fortran_order) throw bad("the array is in Fortran order; tcc reads C order (use numpy.ascontiguousarray)");
  int64_t numel = checked_numel(h.shape);
  if (numel < 0) throw bad("shape " + shape_str(h.shape) + " has more elements than int64 can count");
  size_t elem = dtype_size(h.dtype);
  size_t have = bytes.size() - data_at;
  // Compare without multiplying first: a hostile shape can overflow size_t.
  bool too_many = static_cast<uint64_t>(numel) > have / elem;
  if (too_many || static_cast<size_t>(numel) * elem != have)
    throw bad("it holds " + std::to_string(have) + " data bytes but shape " + shape_str(h.shape) + " of " +
              std::string(dtype_name(h.dtype)) + " needs " +
              (too_many && static_cast<uint64_t>(numel) > SIZE_MAX / elem ? "more than that"
                                                                          : std::to_string(numel * elem)));
  std::vector<std::byte> data(have);
  std::memcpy(data.data(), bytes.data() + data_at, have);
  return Tensor::from_bytes(h.dtype, h.shape, std::move(data));
}

void write_npy(const std::string& path, const Tensor& t) {
  if (t.dtype() == DType::BF16 || is_fp8(t.dtype()) || is_4bit(t.dtype()))
    throw InputError(path + ": " + std::string(dtype_name(t.dtype())) +
                     " has no NumPy dtype, so it cannot be written as .npy; write a .pb file or cast to f32");
  const char* code = nullptr;
  for (const auto& nt : kNpyTypes)
    if (nt.dtype == t.dtype()) code = nt.code;
  if (!code)
    throw InputError(path + ": " + std::string(dtype_name(t.dtype())) + " tensors cannot be written as .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.rank(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  if (t.rank() == 1) shape += ",";  // Python's one-element tuple
  shape += ")";
  char order = dtype_size(t.dtype()) == 1 ? '|' : '<';
  std::string header = "{'descr': '" + std::string(1, order) + code + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Version 1 stores the header length in 16 bits; longer headers need version 2.
  size_t prefix = header.size() + kNpyAlign <= 0xffff ? kNpyMagicSize + 4 : kNpyMagicSize + 6;
  size_t padded = (prefix + header.size() + 1 + kNpyAlign - 1) / kNpyAlign * kNpyAlign;
  header.append(padded - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out(kNpyMagic, kNpyMagicSize);
  out += static_cast<char>(prefix == kNpyMagicSize + 4 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < prefix - kNpyMagicSize - 2; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  write_file(path, out);
}

}  // namespace tcc
