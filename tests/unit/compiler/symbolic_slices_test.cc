// Splits and slices whose bounds are expressions of a symbolic size
// (tests/fixtures/symbolic_slices.tir): torch.chunk, a split at seq // 2,
// slices from seq // 2 by 2, from -3 to seq - 1, and a causal LM's shifted
// pair. Each part is a tcc::Slice whose start is a SymExpr; the module must
// compile with no host step and its host build read every part where the
// interpreter does, at even and odd sizes.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(SymbolicSlices, SymbolicStartsMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_symbolic_slices");
  auto fill = [](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>((i * 37) % 23) / 11 - 1);
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "the interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/symbolic_slices.tir", dir / "module",
                                    "seq", {4, 7, 10, 13}, fill, close);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
