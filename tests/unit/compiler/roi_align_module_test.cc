// RoiAlign that its Gather decomposition cannot take, compiled: adaptive
// samples (sampling_ratio 0) in both modes and both coordinate modes, opset
// 10's behaviour, and more fixed taps than the Gather takes
// (tests/fixtures/roi_align_adaptive.tir, roi_align_opset10.tir), and f16 and
// bf16 images (roi_align_half.tir), run on RoiAlign
// kernels (codegen/roi_align_template.h), so the module has no host step, and
// its host build matches the interpreter for two regions and for six.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

class RoiAlignModule : public ::testing::TestWithParam<const char*> {};

TEST_P(RoiAlignModule, AdaptiveSamplesRunOnKernelsAndMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_roi_align_module");
  std::mt19937 rng(5);
  // Corners from a little outside the 20 x 24 image (at spatial_scale 0.5)
  // to past its far edge, so regions span up to 26 pixels a side (bins of
  // up to 13 adaptive samples a side) and some are inverted or empty.
  std::uniform_real_distribution<double> corner(-4, 52), value(-1, 1);
  std::uniform_int_distribution<int> image(0, 1);
  auto fill = [&](const std::string& name, Tensor& t) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, name == "batch" ? image(rng) : name == "rois" ? corner(rng) : value(rng));
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures" / GetParam(), dir / "module", "r",
                                    {2, 6}, fill, close);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RoiAlignModule,
                         ::testing::Values("roi_align_adaptive.tir", "roi_align_opset10.tir", "roi_align_half.tir"));

}  // namespace
}  // namespace tcc
