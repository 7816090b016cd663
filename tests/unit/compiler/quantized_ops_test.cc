// The integer and quantized ops compiled (tests/fixtures/quantized_ops.tir):
// they decompose onto kernels and cuBLASLt's int8 products (the convolutions
// through im2col), with no f64 product left and no host step, and the
// module's host build gives the interpreter's integers exactly, over the full
// ranges of its int8 and uint8 inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(QuantizedOps, DecomposeOntoInt8ProductsAndMatchTheInterpreterExactly) {
  fs::path dir = make_temp_dir("tcc_quantized_ops");
  std::mt19937 rng(5);
  // Integers over their whole range, scales in [0.01, 0.1), x around 0.
  auto fill = [&](const std::string& name, Tensor& t) {
    std::uniform_real_distribution<double> value(t.dtype() == DType::I8 ? -128 : 0, t.dtype() == DType::I32 ? 4096 : 256);
    std::uniform_real_distribution<double> scale(0.01, 0.1), x(-3, 5);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, name == "x" ? x(rng) : is_float(t.dtype()) ? scale(rng) : std::floor(value(rng)));
  };
  auto exactly = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    ASSERT_EQ(got.shape(), expected.shape()) << what;
    ASSERT_EQ(got.dtype(), expected.dtype()) << what;
    int64_t differ = 0;
    for (int64_t i = 0; i < got.numel(); ++i) differ += got.get_f64(i) != expected.get_f64(i);
    EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << got.numel() << " differ";
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/quantized_ops.tir", dir / "module", "b",
                                    {2, 5}, fill, exactly);
  std::map<std::string, int> kernels = library_kernels(dir / "module");
  EXPECT_EQ(kernels["gemm i8"], 4);
  EXPECT_EQ(kernels.size(), 1u) << "a float library product is left";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
