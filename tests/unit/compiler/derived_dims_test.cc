// Symbols bound through a derived dim (tests/fixtures/derived_dims.tir): the
// module divides the input's size by the constant, and refuses a size the
// constant does not divide.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tcc_runtime.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

const fs::path kModel = fs::path(TCC_SOURCE_DIR) / "tests/fixtures/derived_dims.tir";

TEST(DerivedDims, SymbolReadAsAQuotientOfAnInputSize) {
  fs::path dir = make_temp_dir("tcc_derived_dims");
  auto fill = [](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(i % 7) - 3);
  };
  auto same = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "the interpreter");
  };
  expect_module_matches_interpreter(kModel, dir / "module", "s", {1, 3, 8}, fill, same);
  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load((dir / "module").c_str(), &m), TCC_OK) << tcc_last_error();
  std::vector<float> x(20);
  int64_t ragged[2] = {2, 10}, dims[3];
  int32_t rank = 0;
  tcc_tensor in = {x.data(), TCC_F32, 2, ragged};
  EXPECT_EQ(tcc_module_output_shape(m, &in, 1, 0, dims, 3, &rank), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(), "input 'x': dim 1 is 10, expected s*4 = 8 (f32[2, s*4])");
  tcc_module_free(m);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
