// Symbolic image sizes through strided windows (tests/fixtures/strided_image.tir).
// The output dims are floor divisions of the size, and the buffer and launch
// sizes are their products; the module's host build must size and index
// everything as the interpreter does at even and odd sizes alike. (A product
// of two divisions once printed as "(s-1)//(2)*(s-1)//(2)", which reads back
// as ((s-1)//2*(s-1))//2: the module overran its buffers.)
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(StridedImage, SymbolicSizesMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_strided_image");
  auto fill = [](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>((i * 37) % 23) / 11 - 1);
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "the interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/strided_image.tir", dir / "module", "s",
                                    {8, 13, 16, 21}, fill, close);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
