// TensorProto (.pb) and NumPy (.npy) tensor files: round trips, byte-exact
// agreement with NumPy's own files, and refusal of malformed files.
#include "frontends/onnx/tensor_io.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "frontends/onnx/tensor_proto.h"
#include "frontends/read_file.h"
#include "src/diag/errors.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

class TensorIo : public TempDirTest {
 protected:
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_bytes(const std::string& p, const std::string& bytes) const {
    std::ofstream f(p, std::ios::binary);
    f << bytes;
  }
  std::string read_bytes(const std::string& p) const {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  // A tensor of every supported dtype holding 0, 1, 2, ... (strings "s0", ...).
  static Tensor iota(DType dt, std::vector<int64_t> shape) {
    Tensor t(dt, std::move(shape));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (dt == DType::String) t.strings_mut()[i] = "s" + std::to_string(i);
      else t.set_f64(i, static_cast<double>(i % 3 == 2 ? -1 : i));
    }
    return t;
  }
};

TEST_F(TensorIo, PbRoundTripsEveryDtype) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                   DType::U8, DType::U16, DType::U32, DType::U64, DType::Bool, DType::String, DType::F8E4M3FN,
                   DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ, DType::I4, DType::U4, DType::F4E2M1}) {
    Tensor t = iota(dt, {2, 3});
    write_tensor_pb(path("t.pb"), t, "input_0");
    std::string name;
    Tensor back = read_tensor_pb(path("t.pb"), &name);
    EXPECT_TRUE(back.identical(t)) << dtype_name(dt);
    EXPECT_EQ(name, "input_0");
  }
  Tensor scalar = Tensor::scalar_f32(2.5f);
  write_tensor_pb(path("s.pb"), scalar, "");
  EXPECT_TRUE(read_tensor_pb(path("s.pb")).identical(scalar));
}

TEST_F(TensorIo, PbReadsTypedFields) {
  onnx::TensorProto p;
  p.set_name("output_0");
  p.set_data_type(onnx::TensorProto::INT32);
  p.add_dims(3);
  for (int v : {5, -6, 7}) p.add_int32_data(v);
  write_bytes(path("typed.pb"), p.SerializeAsString());
  Tensor t = read_tensor_pb(path("typed.pb"));
  EXPECT_EQ(t.dtype(), DType::I32);
  EXPECT_EQ(t.to_i64_vector(), (std::vector<int64_t>{5, -6, 7}));
}

TEST_F(TensorIo, PbBadFiles) {
  std::string missing = path("missing.pb");
  EXPECT_EQ(input_error([&] { read_tensor_pb(missing); }), missing + ": cannot open tensor file");
  write_bytes(path("empty.pb"), "");
  EXPECT_EQ(input_error([&] { read_tensor_pb(path("empty.pb")); }),
            path("empty.pb") + ": not a valid TensorProto file (the file is empty)");
  write_bytes(path("junk.pb"), "\xff\xff\xff\xff junk");
  EXPECT_EQ(input_error([&] { read_tensor_pb(path("junk.pb")); }),
            path("junk.pb") + ": not a valid TensorProto file (protobuf parse failed)");
  onnx::TensorProto p;
  p.set_name("x");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(4);
  p.set_raw_data(std::string(12, '\0'));
  write_bytes(path("short.pb"), p.SerializeAsString());
  EXPECT_EQ(input_error([&] { read_tensor_pb(path("short.pb")); }),
            path("short.pb") + ": tensor 'x' has 12 bytes of raw_data but shape [4] of f32 needs 16 bytes");
}

TEST_F(TensorIo, NpyRoundTripsEveryDtype) {
  for (DType dt : {DType::F16, DType::F32, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                   DType::U16, DType::U32, DType::U64, DType::Bool}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3, 4}, {0, 2}}) {
      Tensor t = iota(dt, shape);
      write_npy(path("t.npy"), t);
      EXPECT_TRUE(read_npy(path("t.npy")).identical(t)) << dtype_name(dt) << shape_str(shape);
      EXPECT_EQ(read_bytes(path("t.npy")).size() % 64, t.nbytes() % 64);  // data starts 64-byte aligned
    }
  }
}

// The bytes numpy.save writes for np.array([[1, 2, 3], [4, 5, 6]], dtype='<f4').
const std::string kNumpyF32 =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) + "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
    std::string(58, ' ') + "\n" +
    std::string("\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc0\x40", 24);
// np.array([True, False, True]) and np.array(7, dtype='<i8').
const std::string kNumpyBool =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) + "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }" +
    std::string(60, ' ') + "\n" + std::string("\x01\x00\x01", 3);
const std::string kNumpyScalar =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) + "{'descr': '<i8', 'fortran_order': False, 'shape': (), }" +
    std::string(62, ' ') + "\n" + std::string("\x07\x00\x00\x00\x00\x00\x00\x00", 8);

TEST_F(TensorIo, NpyMatchesNumpyBytes) {
  Tensor f = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
  write_npy(path("f.npy"), f);
  EXPECT_EQ(read_bytes(path("f.npy")), kNumpyF32);
  write_bytes(path("numpy.npy"), kNumpyF32);
  EXPECT_TRUE(read_npy(path("numpy.npy")).identical(f));

  Tensor b(DType::Bool, {3});
  b.set_i64(0, 1);
  b.set_i64(2, 1);
  write_npy(path("b.npy"), b);
  EXPECT_EQ(read_bytes(path("b.npy")), kNumpyBool);

  write_bytes(path("s.npy"), kNumpyScalar);
  Tensor s = read_npy(path("s.npy"));
  EXPECT_TRUE(s.identical(Tensor::scalar_i64(7)));
  write_npy(path("s2.npy"), s);
  EXPECT_EQ(read_bytes(path("s2.npy")), kNumpyScalar);
}

// ONNX packs 4-bit elements two to a byte, the first in the low nibble, in
// raw_data and in int32_data alike; tcc holds one a byte, i4 sign-extended.
TEST_F(TensorIo, PbPacksAndUnpacksFourBitTypes) {
  Tensor i4(DType::I4, {5});
  const int64_t values[] = {-8, 7, -1, 0, 3};
  for (int64_t i = 0; i < 5; ++i) i4.set_i64(i, values[i]);
  onnx::TensorProto p;
  tensor_to_proto(i4, "q", &p);
  EXPECT_EQ(p.data_type(), 22);
  EXPECT_EQ(p.raw_data(), std::string("\x78\x0f\x03", 3));  // odd count: the last high nibble is 0
  Tensor back = tensor_from_proto(p, {"q.pb", "", ""});
  EXPECT_TRUE(back.identical(i4));
  EXPECT_EQ(back.data<int8_t>()[0], -8);

  onnx::TensorProto u4;
  u4.set_data_type(21);
  u4.add_dims(3);
  for (int v : {0x21, 0x0f}) u4.add_int32_data(v);
  EXPECT_EQ(tensor_from_proto(u4, {"u.pb", "", ""}).to_i64_vector(), (std::vector<int64_t>{1, 2, 15}));

  // ONNX's test_cast_FLOAT_to_FLOAT4E2M1 output: 0.48, 0.25, 1.05, -3.5, -8, 9, 1e6, 1e-7, NaN, inf, inf, -inf,
  // -4, 0.01, -0 cast to f4e2m1.
  onnx::TensorProto f4;
  f4.set_data_type(23);
  f4.add_dims(3);
  f4.add_dims(5);
  f4.set_raw_data(std::string("\x01\xe2\x7f\x07\x78\xf7\x0e\x08", 8));
  Tensor f = tensor_from_proto(f4, {"f.pb", "", ""});
  const double expected[] = {0.5, 0, 1, -4, -6, 6, 6, 0, -0.0, 6, 6, -6, -4, 0, -0.0};
  for (int64_t i = 0; i < 15; ++i) {
    EXPECT_EQ(f.get_f64(i), expected[i]) << i;
    EXPECT_EQ(std::signbit(f.get_f64(i)), std::signbit(expected[i])) << i;
  }

  onnx::TensorProto bad;
  bad.set_name("w");
  bad.set_data_type(22);
  bad.add_dims(5);
  bad.set_raw_data(std::string(2, '\0'));
  EXPECT_EQ(input_error([&] { tensor_from_proto(bad, {"m.onnx", "", ""}); }),
            "m.onnx: tensor 'w' has 2 bytes of raw_data but shape [5] of i4 needs 3 bytes (two elements a byte)");
  bad.clear_raw_data();
  for (int v : {0x12, 0x100, 0}) bad.add_int32_data(v);
  EXPECT_EQ(input_error([&] { tensor_from_proto(bad, {"m.onnx", "", ""}); }),
            "m.onnx: tensor 'w' has 256 at int32_data[1], expected a byte of two packed i4 elements (0 to 255)");
  Tensor i4_npy(DType::I4, {2});
  EXPECT_EQ(input_error([&] { write_npy(path("i4.npy"), i4_npy); }),
            path("i4.npy") + ": i4 has no NumPy dtype, so it cannot be written as .npy; write a .pb file or "
                             "cast to f32");
}

TEST_F(TensorIo, NpyRefusesBfloat16Float8AndStrings) {
  Tensor bf(DType::BF16, {2});
  EXPECT_EQ(input_error([&] { write_npy(path("bf.npy"), bf); }),
            path("bf.npy") + ": bf16 has no NumPy dtype, so it cannot be written as .npy; write a .pb file or "
                             "cast to f32");
  Tensor f8(DType::F8E5M2, {2});
  EXPECT_EQ(input_error([&] { write_npy(path("f8.npy"), f8); }),
            path("f8.npy") + ": f8e5m2 has no NumPy dtype, so it cannot be written as .npy; write a .pb file or "
                             "cast to f32");
  Tensor str(DType::String, {1});
  EXPECT_EQ(input_error([&] { write_npy(path("s.npy"), str); }), path("s.npy") + ": str tensors cannot be written as .npy");
}

TEST_F(TensorIo, NpyBadFiles) {
  auto error_for = [&](const std::string& bytes) {
    write_bytes(path("bad.npy"), bytes);
    return input_error([&] { read_npy(path("bad.npy")); });
  };
  std::string prefix = path("bad.npy") + ": not a valid .npy file: ";
  auto with_header = [](std::string header_text) {
    std::string h = std::string("\x93NUMPY\x01\x00", 8);
    h += static_cast<char>(header_text.size());
    h += '\0';
    return h + header_text;
  };
  EXPECT_EQ(error_for("PK\x03\x04 not numpy"), prefix + "it does not start with the NumPy magic string");
  EXPECT_EQ(error_for(kNumpyF32.substr(0, 60)), prefix + "the header is truncated");
  EXPECT_EQ(error_for(kNumpyF32.substr(0, kNumpyF32.size() - 4)),
            prefix + "it holds 20 data bytes but shape [2, 3] of f32 needs 24");
  EXPECT_EQ(error_for(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + "abcd"),
            prefix + "dtype '>f4' is big-endian; tcc reads little-endian data only");
  EXPECT_EQ(error_for(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + "abcd"),
            prefix + "the array is in Fortran order; tcc reads C order (use numpy.ascontiguousarray)");
  EXPECT_EQ(error_for(with_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }")),
            prefix + "dtype '<c8' is not supported (supported: f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
  EXPECT_EQ(error_for(with_header("{'descr': '<f4', 'shape': (1,), }")),
            prefix + "header lacks one of 'descr', 'fortran_order', 'shape'");
  EXPECT_EQ(error_for(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }")),
            prefix + "shape [99999999999, 99999999999] has more elements than int64 can count");
  EXPECT_EQ(error_for(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }")),
            prefix + "it holds 0 data bytes but shape [4611686018427387904] of f32 needs more than that");
  EXPECT_EQ(error_for(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }")),
            prefix + "expected a non-negative integer in 'shape'");
}

// A proto given up with std::move hands its raw_data to the tensor instead of copying it.
TEST_F(TensorIo, MovedProtoHandsOverItsBytes) {
  Tensor t = iota(DType::F32, {3, 5});
  onnx::TensorProto p;
  tensor_to_proto(t, "w", &p);
  Tensor copied = tensor_from_proto(p, {"w.pb", "", ""});
  Tensor moved = tensor_from_proto(std::move(p), {"w.pb", "", ""});
  EXPECT_TRUE(copied.identical(t));
  EXPECT_TRUE(moved.identical(t));
  EXPECT_TRUE(p.raw_data().empty());  // NOLINT(bugprone-use-after-move): the documented state
}

TEST_F(TensorIo, ReadFileBytesKeepsEveryByteAndReadsPipes) {
  std::string bytes("a\0b\xff\0", 5);
  write_bytes(path("f.bin"), bytes);
  EXPECT_EQ(read_file_bytes(path("f.bin"), "test file"), bytes);
  ASSERT_EQ(mkfifo(path("pipe").c_str(), 0600), 0);
  std::thread writer([&] { write_bytes(path("pipe"), bytes + bytes); });
  EXPECT_EQ(read_file_bytes(path("pipe"), "test file"), bytes + bytes);
  writer.join();
  EXPECT_EQ(input_error([&] { read_file_bytes(path("missing.bin"), "test file"); }),
            path("missing.bin") + ": cannot open test file");
}

// What would hang or exhaust memory if read to its end is refused by name.
TEST_F(TensorIo, ReadFileBytesRefusesWhatNeverEnds) {
  ASSERT_EQ(mkfifo(path("silent").c_str(), 0600), 0);
  EXPECT_EQ(input_error([&] { read_file_bytes(path("silent"), "test file", std::chrono::milliseconds(50)); }),
            path("silent") + ": no test file bytes arrived from the pipe in 50 ms (is anything writing to it?)");
  EXPECT_EQ(input_error([&] { read_file_bytes("/dev/zero", "test file"); }),
            "/dev/zero: expected test file, found a device or socket; give a regular file or a pipe");
  fs::create_directories(path("dir"));
  EXPECT_EQ(input_error([&] { read_file_bytes(path("dir"), "test file"); }),
            path("dir") + ": expected test file, found a directory");
}

}  // namespace
}  // namespace tcc
