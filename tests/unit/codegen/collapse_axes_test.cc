// codegen/collapse_axes.h on scheduled kernels: which axes merge, and that the
// merged kernels index as before (the kernel numerics and NVRTC tests run
// every model of tests/kernels, this one's included, on the host and through
// the compiler).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "codegen/collapse_axes.h"
#include "codegen/emit.h"
#include "tests/unit/codegen/schedule_util.h"

namespace tcc {
namespace {

// "pointwise domain [b*s*96]": the kernel dump's first line without the name.
std::string domain_line(const kir::Kernel& k) {
  std::string text = print_kernel(k);
  std::string first = text.substr(0, text.find('\n'));
  return first.substr(first.find(' ', first.find(' ') + 1) + 1);
}

std::vector<std::string> domains(const std::string& model) {
  std::vector<std::string> out;
  for (const kir::Kernel& k : schedule_model(model).schedule.kernels) out.push_back(domain_line(k));
  return out;
}

TEST(CollapseAxes, MergesAxesEveryAccessStepsThroughAsOne) {
  EXPECT_EQ(domains("tests/kernels/contiguous_axes.tir"),
            (std::vector<std::string>{"pointwise domain [b*s*96] sizes(b, s)",
                                      "pointwise domain [b*s, 96] sizes(b, s)",
                                      "reduction domain [96 | b*s] sizes(b, s)"}));
}

TEST(CollapseAxes, KeepsTransposedCoordinateAndLibraryAxes) {
  // A transpose's load steps across the written axes.
  EXPECT_EQ(domains("tests/kernels/symbolic_dims.tir"),
            (std::vector<std::string>{"reduction domain [b, 8 | s] sizes(b, s)"}));
  // Concat's guards read the concatenated axis's coordinate: the first
  // Concat's kernel (its transposed input a load, the Relu after it a member)
  // keeps its three axes, the second's its two.
  EXPECT_EQ(domains("tests/kernels/concat.tir"),
            (std::vector<std::string>{"pointwise domain [n, 6, 6] sizes(n)", "pointwise domain [n, 43] sizes(n)"}));
  for (const char* model : {"tests/kernels/batched_matmul.tir", "tests/kernels/conv_bias_relu.tir"}) {
    for (const kir::Kernel& k : schedule_model(model).schedule.kernels) {
      ASSERT_TRUE(k.kind == kir::Kind::Gemm || k.kind == kir::Kind::Conv) << model;
      EXPECT_EQ(print_kernel(kir::collapse_axes(k)), print_kernel(k)) << model;
    }
  }
}

// A merged axis of symbolic extent still moves float4s when it is a multiple of four.
TEST(CollapseAxes, MergedSymbolicAxesStillVectorize) {
  ScheduledModel s = schedule_model("tests/kernels/contiguous_axes.tir");
  EXPECT_TRUE(vectorizes(s.schedule.kernels.at(0)));
  EXPECT_EQ(default_config(s.schedule.kernels.at(0)).vector_width, 4);
}

}  // namespace
}  // namespace tcc
