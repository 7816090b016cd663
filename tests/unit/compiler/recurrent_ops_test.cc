// The recurrent ops compiled (tests/fixtures/recurrent_ops.tir): over a static
// sequence they unroll into MatMuls and pointwise kernels, so the module has
// no host step, and its host build, in f32, matches the interpreter's f64
// reference kernels.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(RecurrentCompile, UnrollOntoKernelsAndMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_recurrent_ops");
  std::mt19937 rng(7);
  // Lengths over [0, 3], a full sequence among them; the rest around 0.
  auto fill = [&](const std::string& name, Tensor& t) {
    std::uniform_int_distribution<int> length(0, 3);
    std::uniform_real_distribution<double> value(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, name == "lens" ? (i == 0 ? 3 : length(rng)) : value(rng));
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/recurrent_ops.tir", dir / "module", "b",
                                    {2, 5}, fill, close);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
