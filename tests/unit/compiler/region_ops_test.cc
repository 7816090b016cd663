// RoiAlign, MaxRoiPool, Col2Im, Det, DeformConv and TfIdfVectorizer compiled
// (tests/fixtures/region_ops.tir):
// they decompose onto kernels, so the module has no host step, and its host
// build matches the interpreter's reference kernels, for two regions and for
// five.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(RegionOps, DecomposeOntoKernelsAndMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_region_ops");
  std::mt19937 rng(11);
  // Region corners from a little outside the image (at spatial_scale 0.5)
  // to past its far edge, batch indices 0 or 1, offsets that move taps past
  // the image's edges, tokens 2 to 8 (the pool's and one it lacks), the rest
  // around 0.
  std::uniform_real_distribution<double> corner(-3, 24), value(-1, 1), moved(-3, 3);
  std::uniform_int_distribution<int> image(0, 1), token(2, 8);
  auto draw = [&](const std::string& name, int64_t i) -> double {
    if (name == "batch" || (name == "pool_rois" && i % 5 == 0)) return image(rng);
    if (name == "rois" || name == "pool_rois") return corner(rng);
    if (name == "offset") return moved(rng);
    if (name == "tokens") return token(rng);
    return value(rng);
  };
  auto fill = [&](const std::string& name, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, draw(name, i));
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/region_ops.tir", dir / "module",
                                    "r", {2, 5}, fill, close);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
