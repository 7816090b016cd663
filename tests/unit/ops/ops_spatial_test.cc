// Shape rules and reference kernels of the spatial and detection ops:
// GridSample, AffineGrid, DeformConv, Col2Im, MaxUnpool, CenterCropPad,
// RoiAlign, MaxRoiPool, NonMaxSuppression.
#include <gtest/gtest.h>

#include "src/ops/op_registry.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::f32;
using testing::floats;
using testing::i64;
using testing::iota_f32;
using testing::OneOp;
using testing::OpGraph;
using testing::tensor_type;

Type f32t(const std::vector<std::string>& dims) { return tensor_type(DType::F32, dims); }
Type i64t(const std::vector<std::string>& dims) { return tensor_type(DType::I64, dims); }

void expect_near(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

// ---------------------------------------------------------------- GridSample

TEST(SpatialOps, GridSampleKeepsBatchAndGridDims) {
  OneOp gs("GridSample", {f32t({"n", "3", "h", "w"}), f32t({"n", "ho", "wo", "2"})});
  EXPECT_EQ(gs.type(), "f32[n, 3, ho, wo]");
  OneOp volumetric("GridSample", {f32t({"n", "3", "d", "h", "w"}), f32t({"n", "5", "6", "7", "3"})}, {}, 20);
  EXPECT_EQ(volumetric.type(), "f32[n, 3, 5, 6, 7]");
}

TEST(SpatialOps, GridSampleRefusesAGridWhoseLastDimIsNotTheSpatialRank) {
  OneOp gs("GridSample", {f32t({"1", "3", "4", "4"}), f32t({"1", "2", "2", "3"})});
  std::string err = gs.error();
  EXPECT_NE(err.find("GridSample_0"), std::string::npos) << err;
  EXPECT_NE(err.find("expected grid's last dim to be 2"), std::string::npos) << err;
  // Before opset 20 only 4-D X is sampled; opset 16 also spells the modes bilinear / bicubic.
  OneOp old("GridSample", {f32t({"1", "3", "4", "4", "4"}), f32t({"1", "2", "2", "2", "3"})}, {}, 16);
  EXPECT_NE(old.error().find("4-D X"), std::string::npos) << old.error();
  OneOp renamed("GridSample", {f32t({"1", "3", "4", "4"}), f32t({"1", "2", "2", "2"})},
                {{"mode", Attribute::of_string("linear")}}, 16);
  EXPECT_NE(renamed.error().find("expected mode bilinear, nearest or bicubic"), std::string::npos) << renamed.error();
}

// A 1 x 4 image [10, 20, 30, 40] sampled outside its extent: zeros reads 0,
// border the edge pixel, reflection the pixel mirrored about the image's edge
// (align_corners 0: the outer pixel edges, -0.5 and 3.5).
TEST(SpatialOps, GridSamplePaddingModes) {
  Tensor x = f32({10, 20, 30, 40}, {1, 1, 1, 4});
  // Normalized x -> pixel coordinate: 1.5 -> 4.5, -1.5 -> -1.5, -0.9 -> -0.3.
  Tensor grid = f32({1.5f, 0, -1.5f, 0, -0.9f, 0}, {1, 1, 3, 2});
  auto sample = [&](const char* padding) {
    OneOp gs("GridSample", {f32t({"1", "1", "1", "4"}), f32t({"1", "1", "3", "2"})},
             {{"padding_mode", Attribute::of_string(padding)}});
    return floats(gs.run({x, grid}));
  };
  expect_near(sample("zeros"), {0, 0, 7});  // -0.3 reads 0.3 of the zero at -1
  expect_near(sample("border"), {40, 10, 10});
  expect_near(sample("reflection"), {35, 15, 10});  // 4.5 -> 2.5, -1.5 -> 0.5
}

TEST(SpatialOps, GridSampleReflectsAboutPixelCentersWithAlignCorners) {
  // align_corners 1: -1 and 1 are the centers of pixels 0 and 3; x = 1.5 is pixel 3.75 -> 2.25.
  OneOp gs("GridSample", {f32t({"1", "1", "1", "4"}), f32t({"1", "1", "1", "2"})},
           {{"padding_mode", Attribute::of_string("reflection")}, {"align_corners", Attribute::of_int(1)}});
  expect_near(floats(gs.run({f32({10, 20, 30, 40}, {1, 1, 1, 4}), f32({1.5f, 0}, {1, 1, 1, 2})})), {32.5});
}

TEST(SpatialOps, GridSampleNearestRoundsHalfToEven) {
  // Pixel coordinates 0.5 and 1.5 round to 0 and 2.
  OneOp gs("GridSample", {f32t({"1", "1", "1", "4"}), f32t({"1", "1", "2", "2"})},
           {{"mode", Attribute::of_string("nearest")}}, 20);
  expect_near(floats(gs.run({f32({10, 20, 30, 40}, {1, 1, 1, 4}), f32({-0.5f, 0, 0, 0}, {1, 1, 2, 2})})), {10, 30});
}

TEST(SpatialOps, GridSampleCubicUsesTorchsCoefficient) {
  // Pixel 1.25 of a ramp 0, 1, 2, ... reads taps 0..3 with Keys' weights for
  // a = -0.75 at 1.25, 0.25, 0.75, 1.75: -0.1055, 0.8789, 0.2617, -0.0352,
  // which overshoot the ramp (a = -0.5 would give 1.25).
  OneOp gs("GridSample", {f32t({"1", "1", "1", "6"}), f32t({"1", "1", "1", "2"})},
           {{"mode", Attribute::of_string("cubic")}, {"align_corners", Attribute::of_int(1)}}, 20);
  expect_near(floats(gs.run({iota_f32({1, 1, 1, 6}), f32({-0.5f, 0}, {1, 1, 1, 2})})), {1.296875});
}

// ---------------------------------------------------------------- AffineGrid

TEST(SpatialOps, AffineGridOfTheIdentityIsTheBaseGrid) {
  OpGraph t(20);
  Value* theta = t.input("theta", f32t({"1", "2", "3"}));
  Value* grid = t.op("AffineGrid", {theta, t.ints1({1, 1, 2, 3})});
  t.infer();
  EXPECT_EQ(grid->type().str(), "f32[1, 2, 3, 2]");
  auto out = t.run({grid}, {{"theta", f32({1, 0, 0, 0, 1, 0}, {1, 2, 3})}});
  // x at pixel centers of 3 columns, y of 2 rows (align_corners 0).
  double a = 2.0 / 3;
  expect_near(floats(out[0]), {-a, -0.5, 0, -0.5, a, -0.5, -a, 0.5, 0, 0.5, a, 0.5});
}

TEST(SpatialOps, AffineGridRefusesThetaOfTheWrongShape) {
  OpGraph t(20);
  Value* theta = t.input("theta", f32t({"1", "3", "4"}));
  t.op("AffineGrid", {theta, t.ints1({1, 1, 2, 3})});
  const std::string what = input_error([&] { t.infer(); });
  EXPECT_NE(what.find("expected theta of shape (N, 2, 3)"), std::string::npos) << what;
}

// ---------------------------------------------------------------- DeformConv

TEST(SpatialOps, DeformConvSamplesAtOffsetsScaledByTheMask) {
  // A 1x1 kernel over [1, 2, 3] moved half a pixel right: 1.5, 2.5, and 3 * 0.5
  // (its right neighbour is outside, zero); the mask doubles each sample.
  OneOp dc("DeformConv", {f32t({"1", "1", "1", "3"}), f32t({"1", "1", "1", "1"}), f32t({"1", "2", "1", "3"}),
                          f32t({"1"}), f32t({"1", "1", "1", "3"})},
              {}, 19);
  EXPECT_EQ(dc.type(), "f32[1, 1, 1, 3]");
  Tensor out = dc.run({f32({1, 2, 3}, {1, 1, 1, 3}), f32({1}, {1, 1, 1, 1}), f32({0, 0, 0, 0.5f, 0.5f, 0.5f}, {1, 2, 1, 3}),
                       f32({10}, {1}), f32({2, 2, 2}, {1, 1, 1, 3})});
  expect_near(floats(out), {13, 15, 13});
}

TEST(SpatialOps, DeformConvWithZeroOffsetsIsAGroupedConv) {
  OpGraph t(19);
  Value* x = t.input("x", f32t({"1", "4", "3", "3"}));
  Value* w = t.input("w", f32t({"2", "2", "2", "2"}));
  Value* off = t.input("off", f32t({"1", "16", "2", "2"}));
  std::map<std::string, Attribute> attrs = {{"group", Attribute::of_int(2)}, {"offset_group", Attribute::of_int(2)}};
  Value* deform = t.op("DeformConv", {x, w, off}, attrs);
  Value* conv = t.op("Conv", {x, w}, {{"group", Attribute::of_int(2)}});
  t.infer();
  EXPECT_EQ(deform->type().str(), "f32[1, 2, 2, 2]");
  Tensor wv = iota_f32({2, 2, 2, 2});
  auto out = t.run({deform, conv}, {{"x", iota_f32({1, 4, 3, 3})}, {"w", wv}, {"off", Tensor(DType::F32, {1, 16, 2, 2})}});
  expect_near(floats(out[0]), floats(out[1]));
}

// ---------------------------------------------------------------- Col2Im

TEST(SpatialOps, Col2ImAddsOverlappingBlocks) {
  OpGraph t(18);
  Value* x = t.input("x", f32t({"n", "8", "4"}));
  Value* y = t.op("Col2Im", {x, t.ints1({3, 3}), t.ints1({2, 2})});
  t.infer();
  EXPECT_EQ(y->type().str(), "f32[n, 2, 3, 3]");
  Tensor ones(DType::F32, {1, 8, 4});
  for (int64_t i = 0; i < ones.numel(); ++i) ones.set_f64(i, 1);
  auto out = t.run({y}, {{"x", ones}});
  expect_near(floats(out[0]), {1, 2, 1, 2, 4, 2, 1, 2, 1, 1, 2, 1, 2, 4, 2, 1, 2, 1});
}

// ---------------------------------------------------------------- MaxUnpool

TEST(SpatialOps, MaxUnpoolWithAndWithoutOutputShape) {
  OpGraph t;
  Value* x = t.input("x", f32t({"n", "1", "h", "2"}));
  Value* ind = t.input("i", i64t({"n", "1", "h", "2"}));
  Value* plain = t.op("MaxUnpool", {x, ind}, {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  Value* sized = t.op("MaxUnpool", {x, ind, t.ints1({1, 1, 5, 5})},
                      {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  t.infer();
  EXPECT_EQ(plain->type().str(), "f32[n, 1, h*2, 4]");
  EXPECT_EQ(sized->type().str(), "f32[1, 1, 5, 5]");
  auto out = t.run({plain, sized}, {{"x", f32({1, 2, 3, 4}, {1, 1, 2, 2})}, {"i", i64({0, 3, 9, 15}, {1, 1, 2, 2})}});
  expect_near(floats(out[0]), {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 4});
  // The indices count over the 4 x 4 unpooled shape, placed at the 5 x 5 output's origin.
  std::vector<double> want(25, 0);
  want[0] = 1, want[3] = 2, want[10 + 1] = 3, want[15 + 3] = 4;
  expect_near(floats(out[1]), want);
}

TEST(SpatialOps, MaxUnpoolRefusesAnIndexOutsideTheOutput) {
  OneOp up("MaxUnpool", {f32t({"1", "1", "1", "1"}), i64t({"1", "1", "1", "1"})},
           {{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}});
  const std::string what = input_error([&] { up.run({f32({1}, {1, 1, 1, 1}), i64({4}, {1, 1, 1, 1})}); });
  EXPECT_NE(what.find("MaxUnpool_0"), std::string::npos) << what;
  EXPECT_NE(what.find("index 4 in I is out of range"), std::string::npos) << what;
}

// ---------------------------------------------------------------- CenterCropPad

TEST(SpatialOps, CenterCropPadCropsLeftOfCenterAndPadsRightOfIt) {
  OpGraph t(18);
  Value* x = t.input("x", f32t({"b", "5", "2"}));
  Value* y = t.op("CenterCropPad", {x, t.ints1({2, 5})}, {{"axes", Attribute::of_ints({-2, -1})}});
  t.infer();
  EXPECT_EQ(y->type().str(), "f32[b, 2, 5]");
  auto out = t.run({y}, {{"x", iota_f32({1, 5, 2})}});
  // Rows 1 and 2 of 0..4 (odd crop starts low); columns padded 1 before, 2 after.
  expect_near(floats(out[0]), {0, 2, 3, 0, 0, 0, 4, 5, 0, 0});
}

// ---------------------------------------------------------------- RoiAlign

// X[y, x] = 4y + x, linear, so bilinear samples inside read 4y + x exactly.
TEST(SpatialOps, RoiAlignOfABoxPartlyOutsideTheImage) {
  auto pool = [](const char* mode) {
    OneOp ra("RoiAlign", {f32t({"1", "1", "4", "4"}), f32t({"r", "4"}), i64t({"r"})},
             {{"mode", Attribute::of_string(mode)}, {"sampling_ratio", Attribute::of_int(2)}});
    EXPECT_EQ(ra.type(), "f32[r, 1, 1, 1]");
    // half_pixel: the box spans pixels 1.5 to 5.5; its samples at 2.5 and 4.5 per axis,
    // of which only (2.5, 2.5) lies within a pixel of the image.
    return floats(ra.run({iota_f32({1, 1, 4, 4}), f32({2, 2, 6, 6}, {1, 4}), i64({0}, {1})}));
  };
  expect_near(pool("avg"), {12.5 / 4});
  expect_near(pool("max"), {0.25 * 15});  // the largest weighted tap of the one sample inside
}

TEST(SpatialOps, RoiAlignRefusesABatchIndexOutOfRange) {
  OneOp ra("RoiAlign", {f32t({"1", "1", "4", "4"}), f32t({"1", "4"}), i64t({"1"})});
  const std::string what = input_error([&] { ra.run({iota_f32({1, 1, 4, 4}), f32({0, 0, 1, 1}, {1, 4}), i64({1}, {1})}); });
  EXPECT_NE(what.find("batch index 1 is out of range"), std::string::npos) << what;
}

// ---------------------------------------------------------------- MaxRoiPool

TEST(SpatialOps, MaxRoiPoolBinsAndAnEmptyBinOutsideTheImage) {
  OneOp rp("MaxRoiPool", {f32t({"1", "1", "4", "4"}), f32t({"2", "5"})}, {{"pooled_shape", Attribute::of_ints({2, 2})}});
  EXPECT_EQ(rp.type(), "f32[2, 1, 2, 2]");
  // [0, 0, 0, 1, 1]: one pixel per bin. [0, 2, 2, 5, 5]: bins of 2, the second row and column past the image.
  Tensor out = rp.run({iota_f32({1, 1, 4, 4}), f32({0, 0, 0, 1, 1, 0, 2, 2, 5, 5}, {2, 5})});
  expect_near(floats(out), {0, 1, 4, 5, 15, 0, 0, 0});
}

// ---------------------------------------------------------------- NonMaxSuppression

TEST(SpatialOps, NonMaxSuppressionBreaksScoreTiesByIndexAndKeepsIouAtTheThreshold) {
  // Box 0 and its duplicate 1 tie on score: 0 wins and suppresses 1 (IoU 1);
  // box 2 lies inside box 0 with IoU exactly 0.5, which does not suppress.
  std::vector<float> corners = {0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 1};
  std::vector<float> centers = {1, 0.5f, 2, 1, 1, 0.5f, 2, 1, 0.5f, 0.5f, 1, 1};
  for (int64_t center : {0, 1}) {
    OpGraph t;
    Value* boxes = t.input("boxes", f32t({"1", "n", "4"}));
    Value* scores = t.input("scores", f32t({"1", "1", "n"}));
    Value* iou = t.g.add_initializer("iou", f32({0.5f}, {1}));
    Value* sel = t.op("NonMaxSuppression", {boxes, scores, t.ints1({10}), iou},
                      {{"center_point_box", Attribute::of_int(center)}});
    t.infer();
    EXPECT_EQ(sel->type().str(), "i64[u0, 3]");
    auto out = t.run({sel}, {{"boxes", f32(center ? centers : corners, {1, 3, 4})}, {"scores", f32({0.9f, 0.9f, 0.8f}, {1, 1, 3})}});
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 0, 0, 2})) << "center_point_box " << center;
  }
  EXPECT_TRUE(OpRegistry::get().lookup("", "NonMaxSuppression", 11)->has(kDataDependentShape));
}

TEST(SpatialOps, NonMaxSuppressionSelectsNothingWithoutAMaximum) {
  OneOp nms("NonMaxSuppression", {f32t({"1", "2", "4"}), f32t({"1", "1", "2"})});
  Tensor out = nms.run({f32({0, 0, 1, 1, 2, 2, 3, 3}, {1, 2, 4}), f32({0.5f, 0.7f}, {1, 1, 2})});
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{0, 3}));
}

}  // namespace
}  // namespace tcc
