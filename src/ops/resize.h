// What Resize's files share (src/ops/resize.cc: the op's shape rule,
// reference kernel, gradient and tcc::ResizeTable; src/ops/resize_decomposition.cc:
// its decompositions into kernels): the attributes, the source coordinate and
// taps of an output coordinate, and the per-axis plan both the reference and
// the decompositions follow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/ops/decomposition.h"

namespace tcc::resize {

// One output coordinate's taps along one axis: the weighted sum of the inputs
// at `index`, or extrapolation_value where tf_crop_and_resize extrapolates.
struct Taps {
  std::vector<int64_t> index;
  std::vector<double> weight;
  bool extrapolated = false;
};

// Resize's attributes, defaults filled in.
struct ResizeAttrs {
  std::string mode, coord, nearest_mode;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

ResizeAttrs resize_attrs(const Node& n);

// What Resize does along one axis it changes: output coordinate y (of `out`)
// reads taps[y] of the axis's `in` inputs.
struct AxisResize {
  int64_t axis = 0, in = 0, out = 0;
  std::vector<Taps> taps;
};

// The axes Resize acts on (opset 18 `axes`, default all), normalized.
std::vector<int64_t> resize_axes(const Node& n, int64_t rank);

// floor(in * scale) symbolically: exact for integer scales and their inverses.
// {num, den}: scale as num / 1 where it is a whole factor, 1 / den where it
// is exactly the inverse of one; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> whole_ratio(double scale);

// Source coordinate of output coordinate y (the ONNX coordinate transforms).
double source_coordinate(const Node& n, const ResizeAttrs& at, double y, double scale, int64_t in, int64_t out_int,
                         double roi_begin, double roi_end, bool& extrapolated);

// Taps of one output coordinate: x = base + ratio with ratio in (0, 1]; tap j
// sits at base + first + j.
Taps resize_taps(const Node& n, const ResizeAttrs& at, double x, double scale, int64_t in);

// Each axis's scale and output size, from sizes under keep_aspect_ratio_policy
// or from scales, as the reference computes them. `shape` is x's, -1 where a
// dim is not known, which an axis may only be where a scale of 1 leaves it
// alone; scales and sizes are null where absent or empty.
struct ResizeScales {
  std::vector<double> scale;
  std::vector<int64_t> out;
};
ResizeScales resize_scales(const Node& n, const std::vector<int64_t>& shape, const Tensor* scales, const Tensor* sizes);

// The axes Resize changes, in the order it resizes them (interpolation is
// separable), each with its taps: the reference kernel and the decomposition
// both follow this plan. `shape` is x's, -1 where a dim is not known, which an
// axis may only be where a scale of 1 leaves it alone; roi, scales and sizes
// are null where absent or empty.
std::vector<AxisResize> resize_plan(const Node& n, const ResizeAttrs& at, const std::vector<int64_t>& shape,
                                    const Tensor* roi, const Tensor* scales, const Tensor* sizes);

// Resize as kernels where its arguments allow (resize_decomposition.cc).
bool decompose_resize(Expansion& e);

}  // namespace tcc::resize
