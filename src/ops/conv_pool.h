// What the sliding-window ops of conv_pool.cc and ConvTranspose
// (conv_transpose.cc) share: their attributes, and the pieces their gradient
// rules build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/ops/gradient.h"

namespace tcc {

// Sliding-window attributes of Conv, ConvTranspose and the pools, defaults filled in.
struct Window {
  std::vector<int64_t> kernel;  // -1 where the kernel size is not known statically
  std::vector<int64_t> strides, dilations;
  std::vector<int64_t> pads;  // all begins, then all ends
  std::string auto_pad;
  bool ceil_mode = false;

  size_t rank() const { return kernel.size(); }
  int64_t extent(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
  bool same() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
};

// `kernel` is the fallback when the node has no kernel_shape (Conv reads W's dims).
Window read_window(const Node& n, size_t nspatial, std::vector<int64_t> kernel);

// The spatial dims of an [N, C, spatial...] shape.
std::vector<int64_t> spatial_of(const std::vector<int64_t>& shape);

// A sliding window's attributes with explicit pads, one entry per spatial dim;
// window_of fails naming the node for auto_pad SAME (its pads depend on the
// input's size). x's and y's spatial dims may be symbolic.
struct ExplicitWindow {
  std::vector<int64_t> kernel, strides, dilations, begin, end;
  Dims in, out;  // x's and y's spatial dims
  int64_t extent(size_t i) const { return dilations[i] * (kernel[i] - 1) + 1; }
};

ExplicitWindow window_of(GradContext& c, const std::vector<int64_t>& kernel);

// A convolution's strides, dilations and pads (begins, then ends) as attributes.
Attrs window_attrs(const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                   const std::vector<int64_t>& begin, const std::vector<int64_t>& end);

// The gradient of a convolution's weights W [K, C/G, kernel...] from its input
// x and the gradient g of its output, `out` g's spatial dims (conv_pool.cc says how).
Value* weight_gradient(GradContext& c, Value* x, Value* g, const ExplicitWindow& w, const Dims& out, int64_t group,
                       int64_t k, int64_t cg);

// The static kernel dims of a convolution's W (dims 2...), failing naming the node otherwise.
std::vector<int64_t> kernel_of(GradContext& c, const char* op);

// The bias gradient of a convolution: g summed over every axis but the channel.
Value* bias_gradient(GradContext& c, size_t rank);

}  // namespace tcc
