// The normalizations, Hardmax and RotaryEmbedding against their
// decompositions: the reference kernel and the pieces the decompose pass
// rewrites each op into compute the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

// Output 0 of a model in tcc's text form by the reference kernels, then by
// the pieces decompose rewrites its one op into (checked to have fired).
struct TwoWays {
  std::vector<double> reference, decomposed;
};

TwoWays run_two_ways(const std::string& text, const std::map<std::string, Tensor>& ins) {
  auto m = parse_model(text);
  infer_shapes(*m->graph);
  TwoWays out;
  out.reference = testing::floats(Interpreter().run(*m->graph, ins).at(0));
  PassContext ctx;
  EXPECT_TRUE(decompose(*m->graph, ctx)) << "decompose did not fire on\n" << text;
  out.decomposed = testing::floats(Interpreter().run(*m->graph, ins).at(0));
  return out;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << what << " element " << i;
}

void expect_both(const TwoWays& got, const std::vector<double>& want) {
  expect_near(got.reference, want, "reference");
  expect_near(got.decomposed, want, "decomposed");
}

using testing::f32;

// Of tied maxima, the first along the axis wins (ONNX's Hardmax is argmax's one-hot).
TEST(NnDecomposed, HardmaxPicksTheFirstOfTiedMaxima) {
  Tensor x = f32({1, 3, 3, 0, 2, 2, 2, 2, 2, 3, 1, 0}, {3, 4});
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 13) {
  input %x: f32[3, 4]
  %y: f32[3, 4] = Hardmax(%x) {axis = 1}
  output %y
})",
                           {{"x", x}}),
              {0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0});
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 13) {
  input %x: f32[3, 4]
  %y: f32[3, 4] = Hardmax(%x) {axis = 0}
  output %y
})",
                           {{"x", x}}),
              {0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0});
}

// Axis 1 normalizes each row, axis 0 the whole tensor; scale broadcasts along the last axis.
TEST(NnDecomposed, RmsNormalizationAxisEpsilonAndScale) {
  std::map<std::string, Tensor> in = {{"x", f32({1, 7, -10, 10}, {2, 2})}, {"s", f32({1, 10}, {2})}};
  // Rows: mean squares 25 and 100, so 1 / 5 and 1 / 10.
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 23) {
  input %x: f32[2, 2]
  input %s: f32[2]
  %y: f32[2, 2] = RMSNormalization(%x, %s) {axis = 1, epsilon = 0.0}
  output %y
})",
                           in),
              {0.2, 14, -1, 10});
  // All four: mean square 62.5, plus epsilon 1.5 is 64.
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 23) {
  input %x: f32[2, 2]
  input %s: f32[2]
  %y: f32[2, 2] = RMSNormalization(%x, %s) {axis = 0, epsilon = 1.5}
  output %y
})",
                           in),
              {0.125, 8.75, -1.25, 12.5});
}

// Groups [0, 2] and [5, 7]: variance 1, plus epsilon 3, so each normalizes to [-0.5, 0.5].
TEST(NnDecomposed, GroupNormalizationEpsilonPerGroupThenPerChannelAffine) {
  std::map<std::string, Tensor> in = {{"x", f32({0, 2, 5, 7}, {1, 4, 1})}};
  in["s"] = f32({2, 4}, {2});
  in["b"] = f32({1, -1}, {2});
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 18) {
  input %x: f32[1, 4, 1]
  input %s: f32[2]
  input %b: f32[2]
  %y: f32[1, 4, 1] = GroupNormalization(%x, %s, %b) {num_groups = 2, epsilon = 3.0}
  output %y
})",
                           in),
              {0, 2, -3, 1});
  in["s"] = f32({1, 2, 3, 4}, {4});
  in["b"] = f32({0, 0, 0, 1}, {4});
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 21) {
  input %x: f32[1, 4, 1]
  input %s: f32[4]
  input %b: f32[4]
  %y: f32[1, 4, 1] = GroupNormalization(%x, %s, %b) {num_groups = 2, epsilon = 3.0}
  output %y
})",
                           in),
              {-0.5, 1, -1.5, 3});
}

// A row of zeros has no variance: 0 / (0 + 1e-9) is 0.
TEST(NnDecomposed, MeanVarianceNormalizationOverOneAxis) {
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 13) {
  input %x: f32[2, 2]
  %y: f32[2, 2] = MeanVarianceNormalization(%x) {axes = [1]}
  output %y
})",
                           {{"x", f32({1, 3, 0, 0}, {2, 2})}}),
              {-1, 1, 0, 0});
}

// size 2: each channel and the next; alpha / size = 1, so y = x / (1 + sum of squares).
TEST(NnDecomposed, LrnEvenWindowReachesTheNextChannel) {
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 13) {
  input %x: f32[1, 3, 1]
  %y: f32[1, 3, 1] = LRN(%x) {size = 2, alpha = 2.0, beta = 1.0, bias = 1.0}
  output %y
})",
                           {{"x", f32({1, 2, 3}, {1, 3, 1})}}),
              {1.0 / 6, 2.0 / 14, 3.0 / 10});
}

// Two tokens at positions 2 and 0; the caches' rows: position 0 is angle 0
// for pair 0 and 90 degrees for pair 1, position 2 90 and 180 degrees.
constexpr const char* kRotary = R"(graph main opset(ai.onnx: 23) {
  input %x: f32[1, 1, 2, 4]
  const %cos: f32[3, 2] = [1.0, 0.0, 0.5, 0.5, 0.0, -1.0]
  const %sin: f32[3, 2] = [0.0, 1.0, 0.5, 0.5, 1.0, 0.0]
  const %ids: i64[1, 2] = [2, 0]
  %y: f32[1, 1, 2, 4] = RotaryEmbedding(%x, %cos, %sin, %ids) ATTRS
  output %y
})";

std::string rotary(const std::string& attrs) {
  std::string text = kRotary;
  return text.replace(text.find("ATTRS"), 5, attrs);
}

TEST(NnDecomposed, RotaryEmbeddingPairsHalvesOrNeighboursAtPositionIds) {
  std::map<std::string, Tensor> in = {{"x", f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4})}};
  // Pairs (x0, x2) and (x1, x3): token 0 turns them by 90 and 180 degrees, token 1 by 0 and 90.
  expect_both(run_two_ways(rotary("{interleaved = 0}"), in), {-3, -2, 1, -4, 5, -8, 7, 6});
  // Pairs (x0, x1) and (x2, x3).
  expect_both(run_two_ways(rotary("{interleaved = 1}"), in), {-2, 1, -3, -4, 5, 6, -8, 7});
}

// A 3-D input of 2 heads, each rotating its first 2 of 4 features (one pair,
// cache values per token), the others kept.
TEST(NnDecomposed, RotaryEmbeddingThreeDimensionalPartialRotation) {
  std::map<std::string, Tensor> in = {{"x", f32({1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 8})},
                                      {"c", f32({0}, {1, 1, 1})},
                                      {"s", f32({1}, {1, 1, 1})}};
  expect_both(run_two_ways(R"(graph main opset(ai.onnx: 23) {
  input %x: f32[1, 1, 8]
  input %c: f32[1, 1, 1]
  input %s: f32[1, 1, 1]
  %y: f32[1, 1, 8] = RotaryEmbedding(%x, %c, %s) {num_heads = 2, rotary_embedding_dim = 2}
  output %y
})",
                           in),
              {-2, 1, 3, 4, -6, 5, 7, 8});
}

}  // namespace
}  // namespace tcc
