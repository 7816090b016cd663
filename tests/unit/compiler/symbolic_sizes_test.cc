// Fixtures whose sizes are expressions of one symbol, each compiled with no
// host step and its module's host build checked against the interpreter at
// several sizes, odd and even:
//   - strided_image.tir: symbolic images through strided windows. The output
//     dims are floor divisions of the size and the buffer and launch sizes
//     their products. (A product of two divisions once printed as
//     "(s-1)//(2)*(s-1)//(2)", which reads back as ((s-1)//2*(s-1))//2: the
//     module overran its buffers.)
//   - symbolic_resize.tir: Resize by whole factors and their inverses along
//     axes of symbolic size; the module computes each tap's tables once per
//     binding and resizes on kernels, the downsampled dims rounding down.
//   - symbolic_slices.tir: splits and slices whose bounds are expressions of
//     the size (torch.chunk, a split at seq // 2, slices from seq // 2 by 2
//     and from -3 to seq - 1, a causal LM's shifted pair, torch.chunk of a
//     computed size as Slices past the end and as SplitToSequence), each
//     part a tcc::Slice whose start is a SymExpr.
//   - symbolic_conv_transpose.tir: strided ConvTransposes, the input
//     gradient of a strided convolution, as Convs of the spread input.
//   - row_broadcast_stores.tir: a value constant along a reduction's row
//     stored broadcast over it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

struct SymbolicFixture {
  std::string name;  // tests/fixtures/<name>.tir
  std::string symbol;
  std::vector<int64_t> sizes;
};

void PrintTo(const SymbolicFixture& f, std::ostream* os) { *os << f.name; }

class SymbolicSizes : public TempDirFixture<::testing::TestWithParam<SymbolicFixture>> {};

TEST_P(SymbolicSizes, ModuleMatchesTheInterpreter) {
  const SymbolicFixture& f = GetParam();
  auto fill = [](const std::string&, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>((i * 37) % 23) / 11 - 1);
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "the interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures" / (f.name + ".tir"), dir_ / "module",
                                    f.symbol, f.sizes, fill, close);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SymbolicSizes,
                         ::testing::Values(SymbolicFixture{"strided_image", "s", {8, 13, 16, 21}},
                                           SymbolicFixture{"symbolic_resize", "s", {2, 5, 8, 11}},
                                           SymbolicFixture{"symbolic_slices", "seq", {4, 7, 10, 13}},
                                           SymbolicFixture{"symbolic_conv_transpose", "s", {3, 4, 7}},
                                           SymbolicFixture{"row_broadcast_stores", "s", {3, 6}}),
                         [](const ::testing::TestParamInfo<SymbolicFixture>& i) { return i.param.name; });

}  // namespace
}  // namespace tcc
