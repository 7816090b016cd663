// The 4-bit types compiled (tests/fixtures/int4_ops.tir): QuantizeLinear to i4
// and u4 clamp, Casts to i4 and u4 wrap and f4e2m1 rounds and saturates, in
// generated kernels whose host build gives the interpreter's values exactly,
// and the source carries the conversions of the types it uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(Int4Ops, QuantizeAndCastMatchTheInterpreterExactly) {
  fs::path dir = make_temp_dir("tcc_int4_ops");
  std::mt19937 rng(11);
  // x / scale spans i4's and u4's ranges and beyond, where quantization
  // clamps; x itself goes past f4e2m1's 6 and i4's 7, where the casts
  // saturate and wrap.
  auto fill = [&](const std::string&, Tensor& t) {
    std::uniform_real_distribution<float> x(-40, 40);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, x(rng));
    t.set_f64(0, std::numeric_limits<float>::infinity());
    t.set_f64(1, -std::numeric_limits<float>::infinity());
    t.set_f64(2, std::numeric_limits<float>::quiet_NaN());
    t.set_f64(3, -1e-30);
    t.set_f64(4, 2.5);  // a tie, to even for both rounding and f4e2m1
  };
  int64_t clamped = 0;
  auto exactly = [&](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_same_values(got, expected, what);
    for (int64_t i = 0; i < got.numel() && got.dtype() == DType::U4; ++i) {
      const double a = got.get_f64(i);
      clamped += a == 0 || a == 15;
    }
  };
  const fs::path module = dir / "module";
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/int4_ops.tir", module, "b", {3, 9},
                                    fill, exactly);
  EXPECT_GT(clamped, 0) << "no value reached u4's bounds";
  const std::string source = read_text(module / "host.cc");
  for (const char* f : {"tcc_f2f4e2m1(float", "tcc_f4e2m12f(uint8_t", "tcc_i4(int64_t", "tcc_u4(int64_t"})
    EXPECT_NE(source.find(f), std::string::npos) << f;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
