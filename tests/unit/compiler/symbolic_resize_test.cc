// Resize along axes of symbolic size by whole factors and their inverses
// (tests/fixtures/symbolic_resize.tir): the module computes each tap's tables
// once per binding and resizes on kernels, with no host step; its host build
// must match the interpreter at even and odd sizes, where the downsampled
// dims round down.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(SymbolicResize, TablesPerBindingMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_symbolic_resize");
  auto fill = [](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>((i * 29) % 19) / 9 - 1);
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "the interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/symbolic_resize.tir", dir / "module", "s",
                                    {2, 5, 8, 11}, fill, close);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
