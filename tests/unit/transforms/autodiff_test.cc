// Every gradient rule against central finite differences through the reference
// interpreter (float64). Whole models, losses and optimizers: autodiff_training_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>

#include "src/ops/op_registry.h"
#include "tests/unit/transforms/grad_check.h"

namespace tcc {
namespace {

struct RuleCase {
  std::string name;
  std::string decls;
  std::string body;
  std::string ytype;
  int opset = 17;
  FdOptions fd = {};
};

std::ostream& operator<<(std::ostream& os, const RuleCase& c) { return os << c.name; }

class GradRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(GradRule, MatchesFiniteDifferences) {
  const RuleCase& c = GetParam();
  check_gradients(fill_random(wrap(c.decls, c.body, c.ytype, c.opset), 7), {}, {}, c.fd);
}

// Positive operands for Log, Sqrt, Pow and divisors: w*w + 0.5.
const char* kPositive = "  const %half: f64[] = [0.5]\n  %w2: f64[2, 3] = Mul(%w, %w)\n"
                        "  %pos: f64[2, 3] = Add(%w2, %half)\n";

// Operands inside (-1, 1) for Asin, Acos and Atanh: 0.9 w.
const char* kInsideUnit = "  const %k: f64[] = [0.9]\n  %in: f64[2, 3] = Mul(%w, %k)\n";

// Operands above 1 for Acosh: w*w + 1.25.
const char* kAboveOne = "  const %q: f64[] = [1.25]\n  %w2: f64[2, 3] = Mul(%w, %w)\n"
                        "  %big: f64[2, 3] = Add(%w2, %q)\n";

const RuleCase kRuleCases[] = {
    {"Add_broadcast", "  const %w0: f64[2, 1, 3] = $R\n  const %w1: f64[4, 1] = $R\n",
     "  %y: f64[2, 4, 3] = Add(%w0, %w1)\n", "f64[2, 4, 3]"},
    {"Add_same_value", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Add(%w, %w)\n", "f64[2, 3]"},
    {"Sub", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[1, 3] = $R\n", "  %y: f64[2, 3] = Sub(%w0, %w1)\n",
     "f64[2, 3]"},
    {"Mul", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[2, 1] = $R\n", "  %y: f64[2, 3] = Mul(%w0, %w1)\n",
     "f64[2, 3]"},
    {"Div", "  const %w0: f64[2, 3] = $R\n  const %w: f64[2, 3] = $R\n",
     std::string(kPositive) + "  %y: f64[2, 3] = Div(%w0, %pos)\n", "f64[2, 3]"},
    // Quotients away from the jumps at whole numbers; negative ones tell floor (fmod 0) from trunc (fmod 1).
    {"Mod_python", "  const %w0: f64[2, 3] = [2.3, -1.7, 0.45, -3.2, 5.1, -0.6]\n  const %w1: f64[3] = [0.7, -1.1, 1.3]\n",
     "  %y: f64[2, 3] = Mod(%w0, %w1)\n", "f64[2, 3]"},
    {"Mod_fmod", "  const %w0: f64[2, 3] = [2.3, -1.7, 0.45, -3.2, 5.1, -0.6]\n  const %w1: f64[3] = [0.7, -1.1, 1.3]\n",
     "  %y: f64[2, 3] = Mod(%w0, %w1) {fmod = 1}\n", "f64[2, 3]"},
    {"Neg", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Neg(%w)\n", "f64[2, 3]"},
    {"Pow_integer", "  const %w: f64[2, 3] = $R\n  const %e: f64[] = [3.0]\n", "  %y: f64[2, 3] = Pow(%w, %e)\n",
     "f64[2, 3]"},
    {"Pow_fractional", "  const %w: f64[2, 3] = $R\n  const %e: f64[] = [1.5]\n",
     std::string(kPositive) + "  %y: f64[2, 3] = Pow(%pos, %e)\n", "f64[2, 3]"},
    {"Relu", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Relu(%w)\n", "f64[2, 3]"},
    {"Sigmoid", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Sigmoid(%w)\n", "f64[2, 3]"},
    {"Tanh", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Tanh(%w)\n", "f64[2, 3]"},
    {"Exp", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Exp(%w)\n", "f64[2, 3]"},
    {"Log", "  const %w: f64[2, 3] = $R\n", std::string(kPositive) + "  %y: f64[2, 3] = Log(%pos)\n", "f64[2, 3]"},
    {"Sqrt", "  const %w: f64[2, 3] = $R\n", std::string(kPositive) + "  %y: f64[2, 3] = Sqrt(%pos)\n", "f64[2, 3]"},
    {"Erf", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Erf(%w)\n", "f64[2, 3]"},
    {"Gelu_erf", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Gelu(%w)\n", "f64[2, 3]", 20},
    {"Gelu_tanh", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Gelu(%w) {approximate = \"tanh\"}\n",
     "f64[2, 3]", 20},
    {"Softmax", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[2, 3, 4] = Softmax(%w) {axis = 1}\n", "f64[2, 3, 4]"},
    {"LogSoftmax", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[2, 3, 4] = LogSoftmax(%w) {axis = -1}\n",
     "f64[2, 3, 4]"},
    {"LayerNormalization_last_axis", "  const %w: f64[2, 3, 4] = $R\n  const %ws: f64[4] = $R\n  const %wb: f64[4] = $R\n",
     "  %y: f64[2, 3, 4] = LayerNormalization(%w, %ws, %wb) {axis = -1, epsilon = 1e-05}\n", "f64[2, 3, 4]"},
    {"LayerNormalization_two_axes", "  const %w: f64[2, 3, 4] = $R\n  const %ws: f64[3, 4] = $R\n",
     "  %y: f64[2, 3, 4] = LayerNormalization(%w, %ws) {axis = 1, epsilon = 1e-05}\n", "f64[2, 3, 4]"},
    {"ReduceSum", "  const %w: f64[2, 3, 4] = $R\n  const %ax: i64[1] = [1]\n",
     "  %y: f64[2, 4] = ReduceSum(%w, %ax) {keepdims = 0}\n", "f64[2, 4]"},
    {"ReduceMean_attr_axes", "  const %w: f64[2, 3, 4] = $R\n",
     "  %y: f64[1, 3, 1] = ReduceMean(%w) {axes = [0, 2], keepdims = 1}\n", "f64[1, 3, 1]"},
    {"ReduceMean_input_axes", "  const %w: f64[2, 3, 4] = $R\n  const %ax: i64[1] = [-1]\n",
     "  %y: f64[2, 3] = ReduceMean(%w, %ax) {keepdims = 0}\n", "f64[2, 3]", 18},
    {"GlobalAveragePool", "  const %w: f64[2, 3, 2, 4] = $R\n", "  %y: f64[2, 3, 1, 1] = GlobalAveragePool(%w)\n",
     "f64[2, 3, 1, 1]"},
    // dx as a convolution of g (stride 1), dw cut to the window, db.
    {"Conv_padded", "  const %w0: f64[2, 3, 5, 4] = $R\n  const %w1: f64[4, 3, 3, 2] = $R\n  const %w2: f64[4] = $R\n",
     "  %y: f64[2, 4, 5, 5] = Conv(%w0, %w1, %w2) {pads = [1, 1, 1, 1]}\n", "f64[2, 4, 5, 5]"},
    // Uneven pads, dilation, groups: dx as a grouped convolution of g.
    {"Conv_grouped_dilated_dx", "  const %w: f64[1, 4, 6, 5] = $R\n  const %k: f64[6, 2, 2, 3] = $R\n",
     "  %y: f64[1, 6, 6, 3] = Conv(%w, %k) {group = 2, dilations = [2, 1], pads = [1, 0, 1, 0]}\n", "f64[1, 6, 6, 3]"},
    // Grouped weights: one batched product over the groups per tap.
    {"Conv_grouped_weights", "  const %w0: f64[2, 4, 5, 6] = $R\n  const %w1: f64[6, 2, 2, 3] = $R\n",
     "  %y: f64[2, 6, 3, 2] = Conv(%w0, %w1) {group = 2, strides = [2, 2], dilations = [1, 2], pads = [1, 1, 0, 1]}\n",
     "f64[2, 6, 3, 2]"},
    // Depthwise with a channel multiplier of 2, 1-D.
    {"Conv_depthwise_1d", "  const %w0: f64[2, 3, 7] = $R\n  const %w1: f64[6, 1, 3] = $R\n",
     "  %y: f64[2, 6, 7] = Conv(%w0, %w1) {group = 3, pads = [1, 1]}\n", "f64[2, 6, 7]"},
    {"ConvTranspose_strided", "  const %w0: f64[1, 2, 3, 3] = $R\n  const %w1: f64[2, 3, 3, 3] = $R\n"
                              "  const %w2: f64[3] = $R\n",
     "  %y: f64[1, 3, 6, 5] = ConvTranspose(%w0, %w1, %w2) {strides = [2, 2], pads = [1, 1, 1, 1], "
     "output_padding = [1, 0]}\n",
     "f64[1, 3, 6, 5]"},
    {"ConvTranspose_grouped_dilated_1d", "  const %w0: f64[2, 4, 5] = $R\n  const %w1: f64[4, 1, 3] = $R\n",
     "  %y: f64[2, 2, 8] = ConvTranspose(%w0, %w1) {group = 2, dilations = [2], pads = [1, 0]}\n", "f64[2, 2, 8]"},
    // Stride 2 (dx through ConvTranspose with output padding), 1-D.
    {"Conv_strided_1d", "  const %w0: f64[2, 2, 8] = $R\n  const %w1: f64[3, 2, 3] = $R\n",
     "  %y: f64[2, 3, 4] = Conv(%w0, %w1) {strides = [2], pads = [1, 1]}\n", "f64[2, 3, 4]"},
    // Overlapping windows (stride 1 < kernel 2) and padding: g adds up where windows took the same element.
    {"MaxPool_overlapping", "  const %w: f64[2, 2, 4, 5] = $R\n",
     "  %y: f64[2, 2, 4, 5] = MaxPool(%w) {kernel_shape = [2, 3], pads = [1, 1, 0, 1]}\n", "f64[2, 2, 4, 5]"},
    {"MaxPool_strided", "  const %w: f64[1, 3, 6, 6] = $R\n",
     "  %y: f64[1, 3, 3, 3] = MaxPool(%w) {kernel_shape = [2, 2], strides = [2, 2]}\n", "f64[1, 3, 3, 3]"},
    {"Einsum_matmul", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3, 4] = $R\n",
     "  %y: f64[2, 4] = Einsum(%w0, %w1) {equation = \"ij,jk->ik\"}\n", "f64[2, 4]"},
    {"Einsum_batched_transposed_out", "  const %w0: f64[2, 3, 4] = $R\n  const %w1: f64[2, 4, 5] = $R\n",
     "  %y: f64[2, 5, 3] = Einsum(%w0, %w1) {equation = \"b i j, b j k -> b k i\"}\n", "f64[2, 5, 3]"},
    // Implicit output: the labels that appear once, "i"; j and k are summed.
    {"Einsum_implicit_three_operands", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3, 4] = $R\n"
                                       "  const %w2: f64[4] = $R\n",
     "  %y: f64[2] = Einsum(%w0, %w1, %w2) {equation = \"ij,jk,k\"}\n", "f64[2]"},
    // j appears in the first operand only: its gradient is broadcast back along it.
    {"Einsum_summed_label", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[2] = $R\n",
     "  %y: f64[2] = Einsum(%w0, %w1) {equation = \"ij,i->i\"}\n", "f64[2]"},
    // w0's "..." is [2, 1] and w1's [3]: the 1 is broadcast to 3.
    {"Einsum_ellipsis_broadcast", "  const %w0: f64[2, 1, 3, 4] = $R\n  const %w1: f64[3, 4, 5] = $R\n",
     "  %y: f64[2, 3, 3, 5] = Einsum(%w0, %w1) {equation = \"...ij,...jk->...ik\"}\n", "f64[2, 3, 3, 5]"},
    // Implicit output: "..." first, then k.
    {"Einsum_ellipsis_implicit", "  const %w0: f64[2, 3, 4] = $R\n  const %w1: f64[4, 5] = $R\n",
     "  %y: f64[2, 3, 5] = Einsum(%w0, %w1) {equation = \"...j,jk\"}\n", "f64[2, 3, 5]"},
    {"Einsum_ellipsis_inside", "  const %w0: f64[2, 3, 4, 5] = $R\n  const %w1: f64[2, 5] = $R\n",
     "  %y: f64[2, 3, 4] = Einsum(%w0, %w1) {equation = \"b...j, bj -> b...\"}\n", "f64[2, 3, 4]"},
    // Diagonals: a label repeated within an operand reads x[i, i]; its gradient lies on the diagonal.
    {"Einsum_diagonal", "  const %w: f64[3, 3] = $R\n", "  %y: f64[3] = Einsum(%w) {equation = \"ii->i\"}\n", "f64[3]"},
    // Implicit output: i appears twice, so it is summed (the trace).
    {"Einsum_trace_implicit", "  const %w: f64[3, 3] = $R\n", "  %y: f64[] = Einsum(%w) {equation = \"ii\"}\n", "f64[]"},
    {"Einsum_diagonal_summed", "  const %w: f64[2, 2, 3] = $R\n", "  %y: f64[3] = Einsum(%w) {equation = \"iij->j\"}\n",
     "f64[3]"},
    {"Einsum_batched_diagonal", "  const %w: f64[2, 3, 3] = $R\n",
     "  %y: f64[2, 3] = Einsum(%w) {equation = \"bii->bi\"}\n", "f64[2, 3]"},
    {"Einsum_triple_diagonal", "  const %w: f64[2, 2, 2] = $R\n", "  %y: f64[2] = Einsum(%w) {equation = \"iii->i\"}\n",
     "f64[2]"},
    // Two labels repeated, apart; the output transposed.
    {"Einsum_two_diagonals", "  const %w: f64[2, 3, 2, 3] = $R\n",
     "  %y: f64[3, 2] = Einsum(%w) {equation = \"ijij->ji\"}\n", "f64[3, 2]"},
    // The other operand's gradient reads w0's diagonal.
    {"Einsum_diagonal_with_operand", "  const %w0: f64[3, 3] = $R\n  const %w1: f64[3, 4] = $R\n",
     "  %y: f64[4] = Einsum(%w0, %w1) {equation = \"ii,ij->j\"}\n", "f64[4]"},
    {"Einsum_ellipsis_diagonal", "  const %w: f64[2, 3, 3] = $R\n",
     "  %y: f64[2, 3] = Einsum(%w) {equation = \"...ii->...i\"}\n", "f64[2, 3]"},
    {"Resize_nearest_asymmetric", "  const %w: f64[1, 2, 3, 4] = $R\n  const %sc: f32[4] = [1.0, 1.0, 2.0, 2.0]\n",
     "  %y: f64[1, 2, 6, 8] = Resize(%w, none, %sc) {mode = \"nearest\", coordinate_transformation_mode = "
     "\"asymmetric\", nearest_mode = \"floor\"}\n",
     "f64[1, 2, 6, 8]", 13},
    {"Resize_nearest_half_pixel_by_3", "  const %w: f64[1, 1, 2, 3] = $R\n  const %sc: f32[4] = [1.0, 1.0, 1.0, 3.0]\n",
     "  %y: f64[1, 1, 2, 9] = Resize(%w, none, %sc) {mode = \"nearest\"}\n", "f64[1, 1, 2, 9]", 13},
    // Nearest by 1.5 (half_pixel, round_prefer_floor): inputs copied to two outputs or one, through a 0/1 matrix.
    {"Resize_nearest_half_pixel_by_1_5", "  const %w: f64[1, 1, 2, 4] = $R\n  const %sc: f32[4] = [1.0, 1.0, 1.0, 1.5]\n",
     "  %y: f64[1, 1, 2, 6] = Resize(%w, none, %sc) {mode = \"nearest\"}\n", "f64[1, 1, 2, 6]", 13},
    // H by a whole factor (summed over blocks), W by 1.5 (a matrix), in one gradient.
    {"Resize_nearest_blocks_and_matrix", "  const %w: f64[1, 2, 3, 4] = $R\n  const %sc: f32[4] = [1.0, 1.0, 2.0, 1.5]\n",
     "  %y: f64[1, 2, 6, 6] = Resize(%w, none, %sc) {mode = \"nearest\"}\n", "f64[1, 2, 6, 6]", 13},
    // Downsampling by 0.6: inputs no output reads get 0.
    {"Resize_nearest_downsample_asymmetric_floor", "  const %w: f64[2, 7] = $R\n  const %sc: f32[2] = [1.0, 0.6]\n",
     "  %y: f64[2, 4] = Resize(%w, none, %sc) {mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", "
     "nearest_mode = \"floor\"}\n",
     "f64[2, 4]", 13},
    // Sizes: rows 3 -> 4 (the axis before the last), columns 5 -> 3; ties at .5 round up.
    {"Resize_nearest_align_corners_round_prefer_ceil_sizes", "  const %w: f64[3, 5] = $R\n  const %sz: i64[2] = [4, 3]\n",
     "  %y: f64[4, 3] = Resize(%w, none, none, %sz) {mode = \"nearest\", coordinate_transformation_mode = "
     "\"align_corners\", nearest_mode = \"round_prefer_ceil\"}\n",
     "f64[4, 3]", 13},
    // The first output rounds down to -1, past the edge: exclude_outside makes it 0 (it reads nothing).
    {"Resize_nearest_floor_exclude_outside", "  const %w: f64[2, 3] = $R\n  const %sc: f32[2] = [1.0, 2.0]\n",
     "  %y: f64[2, 6] = Resize(%w, none, %sc) {mode = \"nearest\", nearest_mode = \"floor\", exclude_outside = 1}\n",
     "f64[2, 6]", 13},
    // The last two outputs fall outside the roi's reach and take extrapolation_value.
    {"Resize_nearest_ceil_tf_crop_and_resize", "  const %w: f64[2, 5] = $R\n"
     "  const %roi: f32[4] = [0.0, 0.2, 1.0, 1.3]\n  const %sz: i64[2] = [2, 6]\n",
     "  %y: f64[2, 6] = Resize(%w, %roi, none, %sz) {mode = \"nearest\", coordinate_transformation_mode = "
     "\"tf_crop_and_resize\", nearest_mode = \"ceil\", extrapolation_value = 0.5}\n",
     "f64[2, 6]", 13},
    // Opset 18's axes: the middle axis doubled, asymmetric with round_prefer_ceil (not blocks: 0.5 rounds up).
    {"Resize_nearest_axes_asymmetric_round_prefer_ceil", "  const %w: f64[2, 3, 2] = $R\n  const %sc: f32[1] = [2.0]\n",
     "  %y: f64[2, 6, 2] = Resize(%w, none, %sc) {mode = \"nearest\", coordinate_transformation_mode = "
     "\"asymmetric\", nearest_mode = \"round_prefer_ceil\", axes = [1]}\n",
     "f64[2, 6, 2]", 18},
    {"Resize_nearest_half_pixel_symmetric", "  const %w: f64[3, 4] = $R\n  const %sc: f32[2] = [1.0, 1.7]\n",
     "  %y: f64[3, 6] = Resize(%w, none, %sc) {mode = \"nearest\", coordinate_transformation_mode = "
     "\"half_pixel_symmetric\"}\n",
     "f64[3, 6]", 19},
    // Linear Resize: the edge outputs read the edge twice (half_pixel upsampling).
    {"Resize_linear_1d_half_pixel", "  const %w: f64[2, 3, 5] = $R\n  const %sc: f32[3] = [1.0, 1.0, 1.5]\n",
     "  %y: f64[2, 3, 7] = Resize(%w, none, %sc) {mode = \"linear\"}\n", "f64[2, 3, 7]", 13},
    // Sizes: H upsampled, W downsampled.
    {"Resize_linear_2d_align_corners_sizes", "  const %w: f64[1, 2, 3, 4] = $R\n  const %sz: i64[4] = [1, 2, 5, 3]\n",
     "  %y: f64[1, 2, 5, 3] = Resize(%w, none, none, %sz) {mode = \"linear\", coordinate_transformation_mode = "
     "\"align_corners\"}\n",
     "f64[1, 2, 5, 3]", 13},
    // Three axes, one ahead of the last two (moved for the product) and resized to 1: pytorch_half_pixel reads
    // it at -0.5, which antialias's eight taps tell from the edge.
    {"Resize_linear_3d_pytorch_half_pixel_axes", "  const %w: f64[4, 3, 2, 2] = $R\n  const %sc: f32[3] = [1.5, 0.25, 2.0]\n",
     "  %y: f64[1, 3, 3, 4] = Resize(%w, none, %sc) {mode = \"linear\", coordinate_transformation_mode = "
     "\"pytorch_half_pixel\", axes = [2, 0, -1], antialias = 1}\n",
     "f64[1, 3, 3, 4]", 18},
    // Downsampling with antialias widens the taps to four; exclude_outside renormalizes those past the edges.
    {"Resize_linear_antialias_exclude_outside", "  const %w: f64[1, 1, 8, 6] = $R\n  const %sc: f32[4] = [1.0, 1.0, 0.5, 0.75]\n",
     "  %y: f64[1, 1, 4, 4] = Resize(%w, none, %sc) {mode = \"linear\", antialias = 1, exclude_outside = 1}\n",
     "f64[1, 1, 4, 4]", 18},
    {"Resize_linear_antialias", "  const %w: f64[2, 10] = $R\n  const %sc: f32[2] = [1.0, 0.4]\n",
     "  %y: f64[2, 4] = Resize(%w, none, %sc) {mode = \"linear\", antialias = 1}\n", "f64[2, 4]", 18},
    // The first and last outputs fall outside the roi's reach and take extrapolation_value.
    {"Resize_linear_tf_crop_and_resize", "  const %w: f64[2, 5] = $R\n  const %roi: f32[4] = [0.0, -0.2, 1.0, 1.1]\n"
     "  const %sz: i64[2] = [2, 7]\n",
     "  %y: f64[2, 7] = Resize(%w, %roi, none, %sz) {mode = \"linear\", coordinate_transformation_mode = "
     "\"tf_crop_and_resize\", extrapolation_value = 0.5}\n",
     "f64[2, 7]", 13},
    {"Resize_linear_half_pixel_symmetric", "  const %w: f64[3, 3] = $R\n  const %sc: f32[2] = [1.0, 1.5]\n",
     "  %y: f64[3, 4] = Resize(%w, none, %sc) {mode = \"linear\", coordinate_transformation_mode = "
     "\"half_pixel_symmetric\"}\n",
     "f64[3, 4]", 19},
    // not_larger keeps the aspect ratio: both axes scaled by min(5/4, 5/6).
    {"Resize_linear_asymmetric_not_larger", "  const %w: f64[1, 4, 6] = $R\n  const %sz: i64[2] = [5, 5]\n",
     "  %y: f64[1, 3, 5] = Resize(%w, none, none, %sz) {mode = \"linear\", coordinate_transformation_mode = "
     "\"asymmetric\", axes = [1, 2], keep_aspect_ratio_policy = \"not_larger\"}\n",
     "f64[1, 3, 5]", 18},
    // Cubic Resize: four taps, the first and last outputs reading past both edges (half_pixel).
    {"Resize_cubic_2d_half_pixel", "  const %w: f64[1, 1, 3, 4] = $R\n  const %sc: f32[4] = [1.0, 1.0, 1.5, 2.0]\n",
     "  %y: f64[1, 1, 4, 8] = Resize(%w, none, %sc) {mode = \"cubic\"}\n", "f64[1, 1, 4, 8]", 13},
    // exclude_outside renormalizes the taps within the input; cubic_coeff_a -0.5 (as TensorFlow).
    {"Resize_cubic_exclude_outside_sizes", "  const %w: f64[2, 5] = $R\n  const %sz: i64[2] = [2, 7]\n",
     "  %y: f64[2, 7] = Resize(%w, none, none, %sz) {mode = \"cubic\", coordinate_transformation_mode = "
     "\"asymmetric\", cubic_coeff_a = -0.5, exclude_outside = 1}\n",
     "f64[2, 7]", 13},
    // Downsampling with antialias: the cubic widened to 2 / 0.4 each side, its taps renormalized.
    {"Resize_cubic_antialias", "  const %w: f64[2, 10] = $R\n  const %sc: f32[2] = [1.0, 0.4]\n",
     "  %y: f64[2, 4] = Resize(%w, none, %sc) {mode = \"cubic\", antialias = 1}\n", "f64[2, 4]", 18},
    {"SoftmaxCrossEntropyLoss_mean", "  const %w: f64[3, 4] = $R\n  const %lab: i64[3] = [1, 3, 0]\n",
     "  %y: f64[] = SoftmaxCrossEntropyLoss(%w, %lab)\n", "f64[]"},
    // [N, C, D] scores, class weights, an ignored label, one loss per element.
    {"SoftmaxCrossEntropyLoss_none_weighted_ignore", "  const %w: f64[2, 3, 2] = $R\n"
     "  const %lab: i64[2, 2] = [0, 2, -1, 1]\n  const %cw: f64[3] = [0.5, 2.0, 1.0]\n",
     "  %y: f64[2, 2] = SoftmaxCrossEntropyLoss(%w, %lab, %cw) {reduction = \"none\", ignore_index = -1}\n",
     "f64[2, 2]"},
    {"SoftmaxCrossEntropyLoss_mean_weighted", "  const %w: f64[3, 4] = $R\n  const %lab: i64[3] = [1, 3, 1]\n"
     "  const %cw: f64[4] = [0.5, 2.0, 1.0, 3.0]\n",
     "  %y: f64[] = SoftmaxCrossEntropyLoss(%w, %lab, %cw)\n", "f64[]"},
    {"NegativeLogLikelihoodLoss_sum", "  const %w: f64[3, 4] = $R\n  const %lab: i64[3] = [2, 0, 3]\n",
     "  %y: f64[] = NegativeLogLikelihoodLoss(%w, %lab) {reduction = \"sum\"}\n", "f64[]"},
    {"InstanceNormalization", "  const %w: f64[2, 3, 4] = $R\n  const %ws: f64[3] = $R\n  const %wb: f64[3] = $R\n",
     "  %y: f64[2, 3, 4] = InstanceNormalization(%w, %ws, %wb) {epsilon = 1e-05}\n", "f64[2, 3, 4]"},
    {"GatherElements_repeated", "  const %w: f64[3, 4] = $R\n  const %i: i64[2, 4] = [0, 2, 1, 2, 2, 2, 0, 1]\n",
     "  %y: f64[2, 4] = GatherElements(%w, %i) {axis = 0}\n", "f64[2, 4]"},
    {"GatherND_repeated_rows", "  const %w: f64[3, 4] = $R\n  const %i: i64[2, 1] = [2, 2]\n",
     "  %y: f64[2, 4] = GatherND(%w, %i)\n", "f64[2, 4]"},
    {"AveragePool_exclude_pad", "  const %w: f64[2, 2, 5, 4] = $R\n",
     "  %y: f64[2, 2, 3, 4] = AveragePool(%w) {kernel_shape = [3, 2], strides = [2, 1], pads = [1, 1, 1, 0]}\n",
     "f64[2, 2, 3, 4]"},
    {"AveragePool_include_pad_dilated", "  const %w: f64[1, 3, 6] = $R\n",
     "  %y: f64[1, 3, 3] = AveragePool(%w) {kernel_shape = [2], strides = [2], dilations = [2], pads = [1, 0], "
     "count_include_pad = 1}\n",
     "f64[1, 3, 3]", 19},
    {"BatchNormalization", "  const %w: f64[2, 3, 2, 2] = $R\n  const %ws: f64[3] = $R\n  const %wb: f64[3] = $R\n"
                           "  const %mean: f64[3] = [0.1, -0.2, 0.3]\n  const %var: f64[3] = [0.5, 1.5, 2.0]\n",
     "  %y: f64[2, 3, 2, 2] = BatchNormalization(%w, %ws, %wb, %mean, %var) {epsilon = 1e-05}\n", "f64[2, 3, 2, 2]"},
    {"Reshape", "  const %w: f64[2, 3, 4] = $R\n  const %s: i64[2] = [6, -1]\n",
     "  %y: f64[6, 4] = Reshape(%w, %s)\n", "f64[6, 4]"},
    {"Transpose", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[4, 2, 3] = Transpose(%w) {perm = [2, 0, 1]}\n",
     "f64[4, 2, 3]"},
    {"Unsqueeze_Squeeze", "  const %w: f64[2, 3] = $R\n  const %a: i64[1] = [1]\n",
     "  %u: f64[2, 1, 3] = Unsqueeze(%w, %a)\n  %t: f64[2, 1, 3] = Tanh(%u)\n  %y: f64[2, 3] = Squeeze(%t, %a)\n",
     "f64[2, 3]"},
    {"Concat", "  const %w0: f64[2, 3] = $R\n  const %c: f64[2, 2] = $R\n  const %w1: f64[2, 1] = $R\n",
     "  %y: f64[2, 6] = Concat(%w0, %c, %w1) {axis = 1}\n", "f64[2, 6]"},
    {"Split_with_unused_output", "  const %w: f64[2, 6] = $R\n  const %s: i64[3] = [2, 1, 3]\n",
     "  %a: f64[2, 2], %b: f64[2, 1], %c: f64[2, 3] = Split(%w, %s) {axis = 1}\n"
     "  %y: f64[2, 2] = Mul(%a, %b)\n",
     "f64[2, 2]"},
    {"Slice", "  const %w: f64[4, 5] = $R\n  const %st: i64[2] = [1, -4]\n  const %en: i64[2] = [3, 100]\n",
     "  %y: f64[2, 4] = Slice(%w, %st, %en)\n", "f64[2, 4]"},
    // Swin's patch merging, x[:, 1::2, 0::3]: zeros between the picked rows and columns, and after the last.
    {"Slice_strided", "  const %w: f64[2, 6, 7] = $R\n  const %st: i64[2] = [1, 0]\n  const %en: i64[2] = [6, 7]\n"
     "  const %ax: i64[2] = [1, 2]\n  const %sp: i64[2] = [2, 3]\n",
     "  %y: f64[2, 3, 3] = Slice(%w, %st, %en, %ax, %sp)\n", "f64[2, 3, 3]"},
    {"Gather_repeated_indices", "  const %w: f64[3, 4] = $R\n  const %i: i64[2, 2] = [3, 0, -1, 1]\n",
     "  %y: f64[3, 2, 2] = Gather(%w, %i) {axis = 1}\n", "f64[3, 2, 2]"},
    {"Gather_scalar_index", "  const %w: f64[3, 4] = $R\n  const %i: i64[] = [2]\n",
     "  %y: f64[4] = Gather(%w, %i) {axis = 0}\n", "f64[4]"},
    // An f32 parameter: a step of 1e-6 would vanish in its rounding; y is linear in it.
    {"Cast", "  const %w: f32[2, 3] = $R\n", "  %y: f64[2, 3] = Cast(%w) {to = 11}\n", "f64[2, 3]", 17, {1e-2, 1e-5}},
    {"CastLike", "  const %w: f32[2, 3] = $R\n  const %like: f64[] = [0.0]\n",
     "  %y: f64[2, 3] = CastLike(%w, %like)\n", "f64[2, 3]", 17, {1e-2, 1e-5}},
    // The target's values are not read: its gradient is 0.
    {"CastLike_trained_target", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3] = $R\n",
     "  %t: f64[3] = CastLike(%w0, %w1)\n  %y: f64[2, 3] = Mul(%t, %w1)\n", "f64[2, 3]"},
    {"Identity", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Identity(%w)\n", "f64[2, 3]"},
    {"Where", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3] = $R\n"
              "  const %cond: bool[2, 3] = [true, false, true, false, false, true]\n",
     "  %y: f64[2, 3] = Where(%cond, %w0, %w1)\n", "f64[2, 3]"},
    {"Expand", "  const %w: f64[3, 1] = $R\n  const %s: i64[3] = [2, 3, 4]\n", "  %y: f64[2, 3, 4] = Expand(%w, %s)\n",
     "f64[2, 3, 4]"},
    {"MatMul_2d", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3, 4] = $R\n", "  %y: f64[2, 4] = MatMul(%w0, %w1)\n",
     "f64[2, 4]"},
    {"MatMul_batched_broadcast", "  const %w0: f64[2, 1, 2, 3] = $R\n  const %w1: f64[3, 3, 4] = $R\n",
     "  %y: f64[2, 3, 2, 4] = MatMul(%w0, %w1)\n", "f64[2, 3, 2, 4]"},
    {"MatMul_vector_left", "  const %w0: f64[3] = $R\n  const %w1: f64[2, 3, 4] = $R\n",
     "  %y: f64[2, 4] = MatMul(%w0, %w1)\n", "f64[2, 4]"},
    {"MatMul_weight_shared_over_batch", "  const %w0: f64[2, 3, 4] = $R\n  const %w1: f64[4, 5] = $R\n",
     "  %y: f64[2, 3, 5] = MatMul(%w0, %w1)\n", "f64[2, 3, 5]"},
    {"MatMul_vector_right", "  const %w0: f64[2, 3, 4] = $R\n  const %w1: f64[4] = $R\n",
     "  %y: f64[2, 3] = MatMul(%w0, %w1)\n", "f64[2, 3]"},
    {"Gemm_plain", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3, 4] = $R\n  const %w2: f64[4] = $R\n",
     "  %y: f64[2, 4] = Gemm(%w0, %w1, %w2)\n", "f64[2, 4]"},
    {"Gemm_transposed_scaled", "  const %w0: f64[3, 2] = $R\n  const %w1: f64[4, 3] = $R\n  const %w2: f64[2, 1] = $R\n",
     "  %y: f64[2, 4] = Gemm(%w0, %w1, %w2) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1}\n", "f64[2, 4]"},
    {"Gemm_transA_no_C", "  const %w0: f64[3, 2] = $R\n  const %w1: f64[3, 4] = $R\n",
     "  %y: f64[2, 4] = Gemm(%w0, %w1) {alpha = 1.5, transA = 1}\n", "f64[2, 4]"},
    {"Abs", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Abs(%w)\n", "f64[2, 3]"},
    {"Sin", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Sin(%w)\n", "f64[2, 3]"},
    {"Cos", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Cos(%w)\n", "f64[2, 3]"},
    {"Tan", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Tan(%w)\n", "f64[2, 3]"},
    {"Asin", "  const %w: f64[2, 3] = $R\n", std::string(kInsideUnit) + "  %y: f64[2, 3] = Asin(%in)\n", "f64[2, 3]"},
    {"Acos", "  const %w: f64[2, 3] = $R\n", std::string(kInsideUnit) + "  %y: f64[2, 3] = Acos(%in)\n", "f64[2, 3]"},
    {"Atan", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Atan(%w)\n", "f64[2, 3]"},
    {"Sinh", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Sinh(%w)\n", "f64[2, 3]"},
    {"Cosh", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Cosh(%w)\n", "f64[2, 3]"},
    {"Asinh", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Asinh(%w)\n", "f64[2, 3]"},
    {"Acosh", "  const %w: f64[2, 3] = $R\n", std::string(kAboveOne) + "  %y: f64[2, 3] = Acosh(%big)\n", "f64[2, 3]"},
    {"Atanh", "  const %w: f64[2, 3] = $R\n", std::string(kInsideUnit) + "  %y: f64[2, 3] = Atanh(%in)\n", "f64[2, 3]"},
    {"Reciprocal", "  const %w: f64[2, 3] = $R\n", std::string(kPositive) + "  %y: f64[2, 3] = Reciprocal(%pos)\n",
     "f64[2, 3]"},
    {"Softplus", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Softplus(%w)\n", "f64[2, 3]"},
    {"LeakyRelu", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = LeakyRelu(%w) {alpha = 0.1}\n", "f64[2, 3]"},
    {"Elu", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Elu(%w) {alpha = 0.7}\n", "f64[2, 3]"},
    {"Selu", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Selu(%w)\n", "f64[2, 3]"},
    // alpha x + beta spans both saturated sides and the slope between.
    {"HardSigmoid", "  const %w: f64[3, 4] = $R\n", "  %y: f64[3, 4] = HardSigmoid(%w) {alpha = 1.0, beta = 0.5}\n",
     "f64[3, 4]"},
    // 4 x spans both flat sides (below -3, above 3) and the curve between.
    {"HardSwish", "  const %w: f64[3, 4] = $R\n  const %four: f64[] = [4.0]\n",
     "  %s: f64[3, 4] = Mul(%w, %four)\n  %y: f64[3, 4] = HardSwish(%s)\n", "f64[3, 4]"},
    // Opset 18: shape inference checks dtypes against schemas up to 17, and Celu-12 takes f32 only (f64 from Celu-28).
    {"Celu", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Celu(%w) {alpha = 0.7}\n", "f64[2, 3]", 18},
    {"Mish", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Mish(%w)\n", "f64[2, 3]", 18},
    {"Softsign", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Softsign(%w)\n", "f64[2, 3]"},
    {"ThresholdedRelu", "  const %w: f64[3, 4] = $R\n", "  %y: f64[3, 4] = ThresholdedRelu(%w) {alpha = 0.2}\n",
     "f64[3, 4]"},
    // Both sides of the dead zone and the zone itself.
    {"Shrink", "  const %w: f64[3, 4] = $R\n", "  %y: f64[3, 4] = Shrink(%w) {bias = 0.3, lambd = 0.4}\n", "f64[3, 4]"},
    // The slope broadcast over X's rows: its gradient is summed over them.
    {"PRelu", "  const %w0: f64[4, 3] = $R\n  const %w1: f64[3] = $R\n", "  %y: f64[4, 3] = PRelu(%w0, %w1)\n",
     "f64[4, 3]", 16},
    {"Clip", "  const %w: f64[3, 4] = $R\n  const %lo: f64[] = [-0.4]\n  const %hi: f64[] = [0.3]\n",
     "  %y: f64[3, 4] = Clip(%w, %lo, %hi)\n", "f64[3, 4]"},
    {"Clip_upper_only", "  const %w: f64[3, 4] = $R\n  const %hi: f64[] = [0.3]\n",
     "  %y: f64[3, 4] = Clip(%w, none, %hi)\n", "f64[3, 4]"},
    {"Floor_and_Sign", "  const %w: f64[2, 3] = $R\n",
     "  %f: f64[2, 3] = Floor(%w)\n  %s: f64[2, 3] = Sign(%w)\n  %t: f64[2, 3] = Add(%f, %s)\n"
     "  %y: f64[2, 3] = Add(%t, %w)\n",
     "f64[2, 3]"},
    {"Dropout_inference", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Dropout(%w)\n", "f64[2, 3]"},
    {"Sum_broadcast", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3] = $R\n  const %w2: f64[2, 1] = $R\n",
     "  %y: f64[2, 3] = Sum(%w0, %w1, %w2)\n", "f64[2, 3]"},
    {"Mean", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3] = $R\n", "  %y: f64[2, 3] = Mean(%w0, %w1)\n",
     "f64[2, 3]"},
    {"Max_three", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[3] = $R\n  const %w2: f64[2, 1] = $R\n",
     "  %y: f64[2, 3] = Max(%w0, %w1, %w2)\n", "f64[2, 3]"},
    // A tie: max(w, w) = w, its gradient split between the two operands and summed back.
    {"Max_same_value", "  const %w: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Max(%w, %w)\n", "f64[2, 3]"},
    {"Min", "  const %w0: f64[2, 3] = $R\n  const %w1: f64[2, 3] = $R\n", "  %y: f64[2, 3] = Min(%w0, %w1)\n",
     "f64[2, 3]"},
    {"ReduceSumSquare", "  const %w: f64[2, 3, 4] = $R\n",
     "  %y: f64[2, 4] = ReduceSumSquare(%w) {axes = [1], keepdims = 0}\n", "f64[2, 4]"},
    {"ReduceLogSumExp", "  const %w: f64[2, 3, 4] = $R\n",
     "  %y: f64[2, 1, 1] = ReduceLogSumExp(%w) {axes = [1, 2]}\n", "f64[2, 1, 1]"},
    {"ReduceLogSum", "  const %w: f64[2, 3] = $R\n", std::string(kPositive) +
     "  %y: f64[2] = ReduceLogSum(%pos) {axes = [1], keepdims = 0}\n", "f64[2]"},
    // Input axes (opset 18); noop_with_empty_axes makes the reduction the identity.
    {"ReduceLogSumExp_input_axes", "  const %w: f64[2, 3, 4] = $R\n  const %ax: i64[2] = [0, -1]\n",
     "  %y: f64[3] = ReduceLogSumExp(%w, %ax) {keepdims = 0}\n", "f64[3]", 18},
    {"ReduceSumSquare_noop", "  const %w: f64[2, 3] = $R\n",
     "  %y: f64[2, 3] = ReduceSumSquare(%w) {noop_with_empty_axes = 1}\n", "f64[2, 3]", 18},
    {"ReduceLogSum_noop", "  const %w: f64[2, 3] = $R\n", std::string(kPositive) +
     "  %y: f64[2, 3] = ReduceLogSum(%pos) {noop_with_empty_axes = 1}\n", "f64[2, 3]", 18},
    // Elements of both signs, away from |x|'s kink at 0.
    {"ReduceL1_attr_axes",
     "  const %w: f64[2, 3, 2] = [0.3, -0.8, 1.2, -0.1, -0.5, 0.9, 0.7, -1.3, 0.2, 0.6, -0.4, -1.1]\n",
     "  %y: f64[1, 3, 1] = ReduceL1(%w) {axes = [0, 2], keepdims = 1}\n", "f64[1, 3, 1]", 13},
    {"ReduceL1_input_axes", "  const %w: f64[2, 3] = [0.3, -0.8, 1.2, -0.1, -0.5, 0.9]\n  const %ax: i64[1] = [-1]\n",
     "  %y: f64[2] = ReduceL1(%w, %ax) {keepdims = 0}\n", "f64[2]", 18},
    {"ReduceL1_noop", "  const %w: f64[2, 3] = [0.3, -0.8, 1.2, -0.1, -0.5, 0.9]\n",
     "  %y: f64[2, 3] = ReduceL1(%w) {noop_with_empty_axes = 1}\n", "f64[2, 3]", 18},
    {"ReduceL2_attr_axes", "  const %w: f64[2, 3, 4] = $R\n",
     "  %y: f64[2, 4] = ReduceL2(%w) {axes = [1], keepdims = 0}\n", "f64[2, 4]", 13},
    {"ReduceL2_input_axes", "  const %w: f64[2, 3, 4] = $R\n  const %ax: i64[2] = [0, 2]\n",
     "  %y: f64[3] = ReduceL2(%w, %ax) {keepdims = 0}\n", "f64[3]", 18},
    {"ReduceL2_all_axes", "  const %w: f64[2, 3] = $R\n", "  %y: f64[] = ReduceL2(%w) {keepdims = 0}\n", "f64[]", 18},
    // A group of zeros: the subgradient 0 (central differences agree: the norm is |h| either way).
    {"ReduceL2_zero_group", "  const %w: f64[2, 3] = [0.0, 0.0, 0.0, -0.1, -0.5, 0.9]\n",
     "  %y: f64[2] = ReduceL2(%w) {axes = [1], keepdims = 0}\n", "f64[2]", 13},
    // The identity, also at a zero element (where x / y would be 0 / 0).
    {"ReduceL2_noop", "  const %w: f64[2, 3] = [0.3, -0.8, 0.0, -0.1, -0.5, 0.9]\n",
     "  %y: f64[2, 3] = ReduceL2(%w) {noop_with_empty_axes = 1}\n", "f64[2, 3]", 18},
    {"ReduceMax", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[3] = ReduceMax(%w) {axes = [0, 2], keepdims = 0}\n",
     "f64[3]"},
    {"ReduceMin_all_axes", "  const %w: f64[2, 3] = $R\n", "  %y: f64[1, 1] = ReduceMin(%w)\n", "f64[1, 1]"},
    {"GlobalMaxPool", "  const %w: f64[2, 3, 2, 4] = $R\n", "  %y: f64[2, 3, 1, 1] = GlobalMaxPool(%w)\n",
     "f64[2, 3, 1, 1]"},
    {"Pad_constant", "  const %w: f64[2, 3] = $R\n  const %pads: i64[4] = [1, 0, 2, 3]\n  const %v: f64[] = [0.5]\n",
     "  %y: f64[5, 6] = Pad(%w, %pads, %v)\n", "f64[5, 6]"},
    {"Tile", "  const %w: f64[2, 3] = $R\n  const %reps: i64[2] = [3, 2]\n", "  %y: f64[6, 6] = Tile(%w, %reps)\n",
     "f64[6, 6]"},
    {"CumSum_reverse_exclusive", "  const %w: f64[2, 4] = $R\n  const %a: i64[] = [1]\n",
     "  %y: f64[2, 4] = CumSum(%w, %a) {exclusive = 1, reverse = 1}\n", "f64[2, 4]"},
    {"Trilu_lower", "  const %w: f64[3, 4] = $R\n  const %k: i64[] = [1]\n",
     "  %y: f64[3, 4] = Trilu(%w, %k) {upper = 0}\n", "f64[3, 4]"},
    {"ReduceProd", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[2, 1, 4] = ReduceProd(%w) {axes = [1]}\n",
     "f64[2, 1, 4]"},
    // A row with one zero (its gradient there is the others' product) and one with two (all 0).
    {"ReduceProd_zeros", "  const %w: f64[2, 3] = [0.0, 2.0, -1.5, 0.0, 0.0, 3.0]\n",
     "  %y: f64[2] = ReduceProd(%w) {axes = [1], keepdims = 0}\n", "f64[2]"},
    {"TopK", "  const %w: f64[3, 5] = $R\n  const %k: i64[1] = [2]\n",
     "  %y: f64[3, 2], %yi: i64[3, 2] = TopK(%w, %k) {axis = 1}\n", "f64[3, 2]"},
    {"TopK_smallest_opset13", "  const %w: f64[4, 3] = $R\n  const %k: i64[1] = [2]\n",
     "  %y: f64[2, 3], %yi: i64[2, 3] = TopK(%w, %k) {axis = 0, largest = 0}\n", "f64[2, 3]", 13},
    {"ScatterElements", "  const %w: f64[3, 4] = $R\n  const %wu: f64[2, 4] = $R\n"
     "  const %i: i64[2, 4] = [0, 2, 1, 0, 2, 1, 0, 2]\n",
     "  %y: f64[3, 4] = ScatterElements(%w, %i, %wu) {axis = 0}\n", "f64[3, 4]"},
    {"ScatterElements_add_repeated", "  const %w: f64[2, 4] = $R\n  const %wu: f64[2, 3] = $R\n"
     "  const %i: i64[2, 3] = [0, 0, 2, 1, 3, 1]\n",
     "  %y: f64[2, 4] = ScatterElements(%w, %i, %wu) {axis = 1, reduction = \"add\"}\n", "f64[2, 4]", 16},
    {"ScatterND", "  const %w: f64[4, 3] = $R\n  const %wu: f64[2, 3] = $R\n  const %i: i64[2, 1] = [3, 1]\n",
     "  %y: f64[4, 3] = ScatterND(%w, %i, %wu)\n", "f64[4, 3]"},
    // mul with repeated indices: each factor's gradient is g times the others' product.
    {"ScatterElements_mul_repeated", "  const %w: f64[2, 4] = $R\n  const %wu: f64[2, 3] = $R\n"
     "  const %i: i64[2, 3] = [0, 0, 2, 1, 3, 1]\n",
     "  %y: f64[2, 4] = ScatterElements(%w, %i, %wu) {axis = 1, reduction = \"mul\"}\n", "f64[2, 4]", 16},
    // Zeros: data's only zero (row 0, column 0), an update's only zero (column 2), two zeros (row 1, column 1).
    {"ScatterElements_mul_zeros", "  const %w: f64[2, 4] = [0.0, 1.5, -0.7, 2.0, 0.9, 0.0, 1.2, -0.4]\n"
     "  const %wu: f64[2, 3] = [0.5, -1.3, 0.0, 0.0, 1.1, 0.8]\n  const %i: i64[2, 3] = [0, 0, 2, 1, 3, 1]\n",
     "  %y: f64[2, 4] = ScatterElements(%w, %i, %wu) {axis = 1, reduction = \"mul\"}\n", "f64[2, 4]", 16},
    {"ScatterND_mul_repeated", "  const %w: f64[4, 3] = $R\n  const %wu: f64[3, 3] = $R\n  const %i: i64[3, 1] = [1, 3, 1]\n",
     "  %y: f64[4, 3] = ScatterND(%w, %i, %wu) {reduction = \"mul\"}\n", "f64[4, 3]", 16},
    // Ties split g: data and an update (row 0, column 0), two updates (row 1, column 1); an update below data gets 0.
    {"ScatterElements_max_ties", "  const %w: f64[2, 3] = [0.5, -0.2, 0.8, 0.1, 0.3, -0.6]\n"
     "  const %wu: f64[2, 2] = [0.5, 0.3, 0.9, 0.9]\n  const %i: i64[2, 2] = [0, 2, 1, 1]\n",
     "  %y: f64[2, 3] = ScatterElements(%w, %i, %wu) {axis = 1, reduction = \"max\"}\n", "f64[2, 3]", 18},
    {"ScatterElements_min_repeated", "  const %w: f64[3, 4] = $R\n  const %wu: f64[2, 4] = $R\n"
     "  const %i: i64[2, 4] = [0, 2, 1, 0, 0, 1, 1, 2]\n",
     "  %y: f64[3, 4] = ScatterElements(%w, %i, %wu) {axis = 0, reduction = \"min\"}\n", "f64[3, 4]", 18},
    // Row 0 takes both updates: a tie of data and the first (column 0), of the two updates (column 1).
    {"ScatterND_min_ties", "  const %w: f64[3, 2] = [0.4, 0.5, 0.1, -0.9, 0.6, 0.2]\n"
     "  const %wu: f64[2, 2] = [0.4, -0.3, 0.7, -0.3]\n  const %i: i64[2, 1] = [0, 0]\n",
     "  %y: f64[3, 2] = ScatterND(%w, %i, %wu) {reduction = \"min\"}\n", "f64[3, 2]", 18},
    {"ScatterND_max_elements", "  const %w: f64[3, 4] = $R\n  const %wu: f64[3] = $R\n"
     "  const %i: i64[3, 2] = [0, 1, 2, 3, 0, 1]\n",
     "  %y: f64[3, 4] = ScatterND(%w, %i, %wu) {reduction = \"max\"}\n", "f64[3, 4]", 18},
    {"Compress_axis", "  const %w: f64[2, 4, 3] = $R\n  const %keep: bool[4] = [true, false, true, true]\n",
     "  %y: f64[2, 3, 3] = Compress(%w, %keep) {axis = 1}\n", "f64[2, 3, 3]"},
    // Without an axis, over w flattened; the condition is shorter than w.
    {"Compress_flat", "  const %w: f64[2, 3] = $R\n  const %keep: bool[4] = [false, true, false, true]\n",
     "  %y: f64[2] = Compress(%w, %keep)\n", "f64[2]", 13},
    {"LpPool_p2", "  const %w: f64[2, 2, 5, 4] = $R\n",
     "  %y: f64[2, 2, 3, 4] = LpPool(%w) {kernel_shape = [3, 2], strides = [2, 1], pads = [1, 1, 1, 0]}\n",
     "f64[2, 2, 3, 4]"},
    {"LpPool_p3", "  const %w: f64[1, 3, 6] = $R\n", "  %y: f64[1, 3, 3] = LpPool(%w) {kernel_shape = [2], strides = [2], p = 3}\n",
     "f64[1, 3, 3]"},
    {"GlobalLpPool_p2", "  const %w: f64[2, 3, 2, 2] = $R\n", "  %y: f64[2, 3, 1, 1] = GlobalLpPool(%w)\n",
     "f64[2, 3, 1, 1]"},
    {"GlobalLpPool_p3", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[2, 3, 1] = GlobalLpPool(%w) {p = 3}\n",
     "f64[2, 3, 1]"},
    {"LpNormalization_p2", "  const %w: f64[3, 4] = $R\n", "  %y: f64[3, 4] = LpNormalization(%w) {axis = 0}\n",
     "f64[3, 4]"},
    {"LpNormalization_p1", "  const %w: f64[2, 3, 4] = $R\n", "  %y: f64[2, 3, 4] = LpNormalization(%w) {p = 1}\n",
     "f64[2, 3, 4]"},
    // No rule of its own: differentiated through its decomposition (autodiff expands it first).
    {"Attention_gqa_causal",
     "  const %wq: f64[1, 4, 3, 2] = $R\n  const %wk: f64[1, 2, 3, 2] = $R\n  const %wv: f64[1, 2, 3, 2] = $R\n",
     "  %y: f64[1, 4, 3, 2] = Attention(%wq, %wk, %wv) {is_causal = 1}\n", "f64[1, 4, 3, 2]", 23},
    {"Attention_3d_mask_softcap",
     "  const %w: f64[2, 3, 4] = $R\n  const %m: f64[3, 3] = $R\n",
     "  %y: f64[2, 3, 4] = Attention(%w, %w, %w, %m) {q_num_heads = 2, kv_num_heads = 2, softcap = 2.0}\n",
     "f64[2, 3, 4]", 23},
    // No rules of their own either: differentiated through their unrolled decompositions
    // (two steps of three rows; LSTM's peepholes, GRU's linear_before_reset, RNN both ways).
    {"LSTM_peepholes",
     "  const %w: f64[2, 3, 2] = $R\n  const %wx: f64[1, 12, 2] = $R\n  const %wr: f64[1, 12, 3] = $R\n"
     "  const %wb: f64[1, 24] = $R\n  const %wp: f64[1, 9] = $R\n",
     "  %y: f64[2, 1, 3, 3] = LSTM(%w, %wx, %wr, %wb, none, none, none, %wp) {hidden_size = 3}\n",
     "f64[2, 1, 3, 3]", 14},
    {"GRU_linear_before_reset",
     "  const %w: f64[2, 3, 2] = $R\n  const %wx: f64[1, 9, 2] = $R\n  const %wr: f64[1, 9, 3] = $R\n"
     "  const %wb: f64[1, 18] = $R\n",
     "  %y: f64[2, 1, 3, 3] = GRU(%w, %wx, %wr, %wb) {hidden_size = 3, linear_before_reset = 1}\n",
     "f64[2, 1, 3, 3]", 14},
    {"RNN_bidirectional",
     "  const %w: f64[2, 3, 2] = $R\n  const %wx: f64[2, 3, 2] = $R\n  const %wr: f64[2, 3, 3] = $R\n",
     "  %y: f64[2, 2, 3, 3] = RNN(%w, %wx, %wr) {hidden_size = 3, direction = \"bidirectional\"}\n",
     "f64[2, 2, 3, 3]", 14},
    // Through their decompositions as well: RoiAlign's weighed taps (avg and
    // max), MaxRoiPool's masked maxima, Col2Im's gathered pieces, Det's products.
    {"RoiAlign_avg",
     "  const %w: f64[2, 2, 4, 5] = $R\n  const %rois: f64[2, 4] = [0.3, 0.7, 6.1, 5.3, 1.9, 0.2, 8.6, 7.7]\n"
     "  const %ind: i64[2] = [1, 0]\n",
     "  %y: f64[2, 2, 2, 3] = RoiAlign(%w, %rois, %ind) {output_height = 2, output_width = 3, sampling_ratio = 2, "
     "spatial_scale = 0.5}\n",
     "f64[2, 2, 2, 3]", 22},
    {"RoiAlign_max_output_half_pixel",
     "  const %w: f64[1, 2, 4, 5] = $R\n  const %rois: f64[1, 4] = [0.6, 0.3, 3.1, 2.8]\n  const %ind: i64[1] = [0]\n",
     "  %y: f64[1, 2, 2, 2] = RoiAlign(%w, %rois, %ind) {coordinate_transformation_mode = \"output_half_pixel\", "
     "mode = \"max\", output_height = 2, output_width = 2, sampling_ratio = 2}\n",
     "f64[1, 2, 2, 2]", 22},
    {"MaxRoiPool",
     "  const %w: f64[1, 2, 4, 5] = $R\n  const %rois: f64[1, 5] = [0.0, 1.2, 0.4, 7.9, 5.6]\n",
     "  %y: f64[1, 2, 2, 2] = MaxRoiPool(%w, %rois) {pooled_shape = [2, 2], spatial_scale = 0.5}\n",
     "f64[1, 2, 2, 2]", 22},
    {"Col2Im",
     "  const %w: f64[1, 4, 6] = $R\n  const %image: i64[2] = [3, 4]\n  const %block: i64[2] = [2, 2]\n",
     "  %y: f64[1, 1, 3, 4] = Col2Im(%w, %image, %block)\n", "f64[1, 1, 3, 4]", 18},
    {"Det", "  const %w: f64[2, 3, 3] = $R\n", "  %y: f64[2] = Det(%w)\n", "f64[2]", 22},
    // Cropped along one axis, padded (an odd difference) along another.
    {"CenterCropPad", "  const %w: f64[2, 5, 2] = $R\n  const %s: i64[2] = [2, 5]\n",
     "  %y: f64[2, 2, 5] = CenterCropPad(%w, %s) {axes = [1, -1]}\n", "f64[2, 2, 5]", 18},
    {"DepthToSpace", "  const %w: f64[1, 8, 2, 3] = $R\n",
     "  %y: f64[1, 2, 4, 6] = DepthToSpace(%w) {blocksize = 2}\n", "f64[1, 2, 4, 6]"},
    {"SpaceToDepth", "  const %w: f64[1, 2, 4, 6] = $R\n",
     "  %y: f64[1, 8, 2, 3] = SpaceToDepth(%w) {blocksize = 2}\n", "f64[1, 8, 2, 3]"},
    // Scale broadcast onto the normalized axes from a single value per last axis.
    {"RMSNormalization_axis", "  const %w: f64[2, 3, 4] = $R\n  const %ws: f64[4] = $R\n",
     "  %y: f64[2, 3, 4] = RMSNormalization(%w, %ws) {axis = -2, epsilon = 0.01, stash_type = 11}\n",
     "f64[2, 3, 4]", 23},
    // Opset 18: scale and bias per group; 21: per channel.
    {"GroupNormalization_opset18", "  const %w: f64[2, 4, 3] = $R\n  const %ws: f64[2] = $R\n  const %wb: f64[2] = $R\n",
     "  %y: f64[2, 4, 3] = GroupNormalization(%w, %ws, %wb) {num_groups = 2, epsilon = 0.01}\n", "f64[2, 4, 3]", 18},
    {"GroupNormalization_opset21", "  const %w: f64[2, 4, 3] = $R\n  const %ws: f64[4] = $R\n  const %wb: f64[4] = $R\n",
     "  %y: f64[2, 4, 3] = GroupNormalization(%w, %ws, %wb) {num_groups = 2, stash_type = 11}\n", "f64[2, 4, 3]",
     21},
    {"MeanVarianceNormalization", "  const %w: f64[2, 3, 2, 2] = $R\n",
     "  %y: f64[2, 3, 2, 2] = MeanVarianceNormalization(%w)\n", "f64[2, 3, 2, 2]"},
    {"MeanVarianceNormalization_axes", "  const %w: f64[3, 4] = $R\n",
     "  %y: f64[3, 4] = MeanVarianceNormalization(%w) {axes = [1]}\n", "f64[3, 4]"},
    // An even size: the window reaches one channel further after than before.
    {"LRN", "  const %w: f64[2, 5, 2, 3] = $R\n",
     "  %y: f64[2, 5, 2, 3] = LRN(%w) {size = 4, alpha = 0.5, beta = 0.75, bias = 1.5}\n", "f64[2, 5, 2, 3]"},
    {"RotaryEmbedding_interleaved_positions",
     "  const %w: f64[2, 2, 3, 6] = $R\n  const %cos: f64[5, 2] = $R\n  const %sin: f64[5, 2] = $R\n"
     "  const %ids: i64[2, 3] = [0, 4, 2, 1, 1, 3]\n",
     "  %y: f64[2, 2, 3, 6] = RotaryEmbedding(%w, %cos, %sin, %ids) {interleaved = 1, rotary_embedding_dim = 4}\n",
     "f64[2, 2, 3, 6]", 23},
    {"RotaryEmbedding_3d", "  const %w: f64[2, 3, 8] = $R\n  const %cos: f64[2, 3, 2] = $R\n  const %sin: f64[2, 3, 2] = $R\n",
     "  %y: f64[2, 3, 8] = RotaryEmbedding(%w, %cos, %sin) {num_heads = 2}\n", "f64[2, 3, 8]", 23},
    {"Hardmax", "  const %w: f64[3, 4] = $R\n", "  %y: f64[3, 4] = Hardmax(%w) {axis = 0}\n", "f64[3, 4]"},
};

INSTANTIATE_TEST_SUITE_P(Autodiff, GradRule, ::testing::ValuesIn(kRuleCases),
                         [](const auto& info) { return info.param.name; });

// An op that trains through its decomposition (OpDef::grad_by_decomposition,
// which `tcc ops` reports as a gradient) has a case above: its name, or its
// name and a variant.
TEST(GradRuleCases, CoverEveryOpThatTrainsThroughItsDecomposition) {
  for (const OpDef* def : OpRegistry::get().all()) {
    if (!def->grad_by_decomposition) continue;
    EXPECT_TRUE(std::any_of(std::begin(kRuleCases), std::end(kRuleCases), [&](const RuleCase& c) {
      return c.name == def->op_type || c.name.rfind(def->op_type + "_", 0) == 0;
    })) << def->op_type << " has no finite-difference case";
  }
}

}  // namespace
}  // namespace tcc
