// TopK compiled (tests/fixtures/topk.tir): every TopK is a kernel of its own
// (codegen/topk_template.h), so the module has no host step, and its host
// build selects exactly what the interpreter does, ties and NaN included.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(TopKCompile, KernelsWithNoHostStepMatchTheInterpreterExactly) {
  fs::path dir = make_temp_dir("tcc_topk_compile");
  std::mt19937 rng(5);
  // Eight values that repeat, so ties decide, and NaN one time in sixteen.
  auto fill = [&](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      const unsigned r = rng() % 16;
      t.set_f64(i, r == 0 ? std::nan("") : static_cast<double>(r % 8) / 4 - 1);
    }
  };
  auto same = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    ASSERT_EQ(got.dtype(), expected.dtype()) << what;
    ASSERT_EQ(got.shape(), expected.shape()) << what;
    int64_t bad = 0;
    for (int64_t e = 0; e < expected.numel(); ++e) {
      const double a = got.get_f64(e), x = expected.get_f64(e);
      if (!(a == x || (std::isnan(a) && std::isnan(x))) && bad++ < 5)
        ADD_FAILURE() << what << " element " << e << ": module " << a << ", interpreter " << x;
    }
    EXPECT_EQ(bad, 0) << what;
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/topk.tir", dir / "module", "b", {2, 3},
                                    fill, same);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
