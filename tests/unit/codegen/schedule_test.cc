// The schedule of a fused graph: kernels shared by identical layers, host
// fallbacks for the nodes no kernel computes, and the copies they need.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/schedule.h"
#include "passes/pass_manager.h"
#include "src/ir/text.h"
#include "src/ops/kernel_roles.h"
#include "src/shape/shape_inference.h"

namespace tcc {
namespace {

// Layer i: an Exp then Add fusion reading `in`, writing `out`.
std::string layer(const std::string& i, const std::string& in, const std::string& out) {
  return "  %" + out + ": f32[b, 8] = tcc::Fusion(%" + in + ", %bias" + i +
         ") {kind = \"pointwise\", body = graph f" + i + " {\n" +
         "      input %in" + i + ": f32[b, 8]\n" +
         "      input %bias_in" + i + ": f32[8]\n" +
         "      %e" + i + ": f32[b, 8] = Exp(%in" + i + ") name(\"layer" + i + "/Exp\")\n" +
         "      %out" + i + ": f32[b, 8] = Add(%e" + i + ", %bias_in" + i + ") name(\"layer" + i + "/Add\")\n" +
         "      output %out" + i + "\n" +
         "    }} name(\"fused_" + i + "\")\n";
}

// A fusion whose body is one Reshape of `in` (f32[b, 8]) to f32[b, 2, 4].
std::string reshape(const std::string& name, const std::string& in, const std::string& out) {
  return "  %" + out + ": f32[b, 2, 4] = tcc::Fusion(%" + in + ") {kind = \"single\", body = graph " + name + "_body {\n" +
         "      input %" + name + "_in: f32[b, 8]\n" + "      %" + name + "_out: f32[b, 2, 4] = tcc::Reshape(%" + name +
         "_in) {shape = [\"b\", \"2\", \"4\"]} name(\"" + name + "/Reshape\")\n" + "      output %" + name +
         "_out\n" + "    }} name(\"" + name + "\")\n";
}

// m through shape inference and the fuse pipeline, then its schedule.
Schedule fused_schedule(Model& m) {
  infer_shapes(*m.graph);
  std::ostringstream log;
  PassManager(build_pipeline("", Phase::Fuse), PassManagerOptions(), log).run(m);
  return build_schedule(*m.graph);
}

std::string describe(const Schedule& s) {
  std::string out;
  for (const Step& st : s.steps) {
    out += st.kind == Step::Kind::Kernel ? s.kernels.at(st.kernel).name : "fallback";
    out += " " + st.node + " (";
    for (size_t i = 0; i < st.reads.size(); ++i) out += (i ? ", " : "") + st.reads[i];
    out += ") -> (";
    for (size_t i = 0; i < st.writes.size(); ++i) out += (i ? ", " : "") + st.writes[i];
    out += ")\n";
  }
  for (const ViewAlias& v : s.views) out += "view " + v.node + ": " + v.value + " = " + v.source + "\n";
  return out;
}

TEST(Schedule, IdenticalLayersShareOneKernel) {
  std::unique_ptr<Model> m = parse_model(
      "graph main opset(ai.onnx: 17, tcc: 1) {\n"
      "  input %x: f32[b, 8]\n"
      "  const %bias0: f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]\n"
      "  const %bias1: f32[8] = [7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]\n" +
      layer("0", "x", "h") + layer("1", "h", "y") + "  output %y\n}\n");
  Schedule s = build_schedule(*m->graph);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].name, "tcc_k0_pointwise");
  EXPECT_EQ(s.kernels[0].nodes, (std::vector<std::string>{"layer0/Exp", "layer0/Add"}));
  EXPECT_EQ(describe(s),
            "tcc_k0_pointwise fused_0 (x, bias0) -> (h)\n"
            "tcc_k0_pointwise fused_1 (h, bias1) -> (y)\n");
  EXPECT_EQ(s.fallback_copies, 0);
}

// Convolutions become cuDNN's; one whose pads differ at the two ends, which
// cuDNN's descriptor cannot express, pads its input with a kernel first.
TEST(Schedule, ConvsBecomeConvKernelsAsymmetricPadsAfterAPadKernel) {
  std::unique_ptr<Model> m = parse_model(R"(graph main opset(ai.onnx: 17) {
  input %x: f32[b, 4, 8, 8]
  input %w0: f32[4, 4, 3, 3]
  input %w1: f32[4, 4, 3, 3]
  input %w2: f32[4, 4, 2, 2]
  %a: f32[b, 4, 8, 8] = Conv(%x, %w0) {pads = [1, 1, 1, 1]} name("conv0")
  %ra: f32[b, 4, 8, 8] = Relu(%a) name("relu0")
  %c: f32[b, 4, 8, 8] = Conv(%ra, %w1) {pads = [1, 1, 1, 1]} name("conv1")
  %rc: f32[b, 4, 8, 8] = Relu(%c) name("relu1")
  %y: f32[b, 4, 8, 8] = Conv(%rc, %w2) {pads = [0, 0, 1, 1]} name("conv_asym")
  output %y
}
)");
  const Node* asym = m->graph->nodes().back().get();
  ASSERT_EQ(asym->name(), "conv_asym");
  EXPECT_EQ(conv_window(*asym, nullptr), "asymmetric padding, which cuDNN's convolution descriptor cannot express");
  Schedule s = fused_schedule(*m);
  EXPECT_EQ(describe(s),
            "tcc_k0_conv fused_0 (x, w0) -> (ra)\n"
            "tcc_k0_conv fused_1 (ra, w1) -> (rc)\n"
            "tcc_k1_pointwise fused_2 (rc) -> (conv_asym/Pad.1)\n"
            "tcc_k2_conv fused_3 (conv_asym/Pad.1, w2) -> (y)\n");
  EXPECT_EQ(s.fallback_copies, 0);
}

// A Reshape to a shape read from data: its output's dims are the model's
// claim, not something shape inference derived, so no kernel is built from
// them; the host runs it, reading the shape. The same op with a literal shape
// gets a kernel (a copy, since its result is a graph output).
TEST(Schedule, ReshapesToAShapeReadFromDataRunOnTheHost) {
  std::unique_ptr<Model> m = parse_model(R"(graph main opset(ai.onnx: 17) {
  input %x: f32[b, 6]
  input %target: i64[2]
  const %flat: i64[1] = [-1]
  %e: f32[b, 6] = Exp(%x) name("exp")
  %y: f32[b, 3, 2] = Reshape(%e, %target) name("from_data")
  %z: f32[b*6] = Reshape(%e, %flat) name("literal")
  output %y
  output %z
}
)");
  Schedule s = fused_schedule(*m);
  EXPECT_EQ(describe(s),
            "tcc_k0_pointwise fused_0 (x) -> (e)\n"
            "fallback from_data (e, target) -> (y)\n"
            "tcc_k1_pointwise fused_1 (e) -> (z)\n");
  const Node* from_data = nullptr;
  for (const auto& n : m->graph->nodes())
    if (n->name() == "from_data") from_data = n.get();
  ASSERT_NE(from_data, nullptr);
  EXPECT_EQ(kernel_role(*from_data), KernelRole::None);
  EXPECT_EQ(kernel_refusal(*from_data), "its target shape is computed at run time from values shape inference cannot follow");
}

// cuBLASLt multiplies floating-point matrices: an integer MatMul is a host
// step, and the compile summary says why.
TEST(Schedule, IntegerMatMulsRunOnTheHost) {
  std::unique_ptr<Model> m = parse_model(R"(graph main opset(ai.onnx: 17) {
  input %i: i64[4, 8]
  input %j: i64[8, 2]
  %y: i64[4, 2] = MatMul(%i, %j) name("int_mm")
  output %y
}
)");
  Schedule s = fused_schedule(*m);
  EXPECT_EQ(describe(s), "fallback int_mm (i, j) -> (y)\n");
  const Node& mm = *m->graph->nodes().front();
  EXPECT_EQ(kernel_role(mm), KernelRole::None);
  EXPECT_EQ(kernel_refusal(mm), "cuBLASLt multiplies floating-point matrices, and this one is i64");
}

TEST(Schedule, DifferentKernelsAreNumberedInOrder) {
  std::unique_ptr<Model> m = parse_model(
      "graph main opset(ai.onnx: 17, tcc: 1) {\n"
      "  input %x: f32[b, 8]\n"
      "  input %bias0: f32[8]\n" +
      layer("0", "x", "h") +
      "  %y: f32[b, 1] = tcc::Fusion(%h) {kind = \"reduction\", body = graph r {\n"
      "      input %h_in: f32[b, 8]\n"
      "      %y_out: f32[b, 1] = ReduceSum(%h_in) {keepdims = 1} name(\"sum\")\n"
      "      output %y_out\n"
      "    }} name(\"fused_1\")\n"
      "  output %y\n}\n");
  Schedule s = build_schedule(*m->graph);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].name, "tcc_k0_pointwise");
  EXPECT_EQ(s.kernels[1].name, "tcc_k1_reduction");
}

// NonZero has no kernel: its input goes to the host, and its result comes back
// for the kernel that reads it; the Shape after it reads the host copy, and
// constants need no copies at all.
TEST(Schedule, FallbacksCountHostCopies) {
  std::unique_ptr<Model> m = parse_model(
      "graph main opset(ai.onnx: 17, tcc: 1) {\n"
      "  input %x: f32[b, 8]\n"
      "  const %bias0: f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]\n"
      "  const %k: i64[1] = [1]\n" +
      layer("0", "x", "h") +
      "  %nz: i64[2, n] = NonZero(%h) name(\"nz\")\n"
      "  %nzf: f32[2, n] = Cast(%nz) {to = 1} name(\"cast\")\n"
      "  %sh: i64[2] = Shape(%nz) name(\"shape\")\n"
      "  %c: i64[1] = Constant() {value = tensor<i64[1]> [3]} name(\"three\")\n"
      "  %kc: i64[1] = Add(%k, %c) name(\"folded\")\n"
      "  %top: f32[2, 1], %idx: i64[2, 1] = TopK(%nzf, %kc) name(\"topk\")\n"
      "  %e: f32[2, n] = tcc::Fusion(%nzf) {kind = \"pointwise\", body = graph g {\n"
      "      input %nzf_in: f32[2, n]\n"
      "      %e_out: f32[2, n] = Exp(%nzf_in) name(\"exp\")\n"
      "      output %e_out\n"
      "    }} name(\"fused_1\")\n"
      "  output %e\n"
      "  output %sh\n"
      "  output %top\n}\n");
  Schedule s = build_schedule(*m->graph);
  EXPECT_EQ(describe(s),
            "tcc_k0_pointwise fused_0 (x, bias0) -> (h)\n"
            "fallback nz (h) -> (nz)\n"
            "fallback cast (nz) -> (nzf)\n"
            "fallback shape (nz) -> (sh)\n"
            "fallback topk (nzf, kc) -> (top, idx)\n"
            "tcc_k1_pointwise fused_1 (nzf) -> (e)\n");
  // h to the host; nzf back for fused_1; sh and top back as graph outputs.
  EXPECT_EQ(s.fallback_copies, 4);
}

// A reshape of a value a kernel writes is a view of that value's buffer, even
// through another reshape; a reshape of a graph input, or one that is a graph
// output, has memory of the caller's and stays a copy kernel.
TEST(Schedule, ReshapesOfIntermediatesAreViews) {
  std::unique_ptr<Model> m = parse_model(
      "graph main opset(ai.onnx: 17, tcc: 1) {\n"
      "  input %x: f32[b, 8]\n"
      "  const %bias0: f32[8] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]\n" +
      layer("0", "x", "h") + reshape("of_h", "h", "v") + reshape("of_x", "x", "w") +
      "  %back: f32[b, 8] = tcc::Fusion(%v) {kind = \"single\", body = graph back_body {\n"
      "      input %back_in: f32[b, 2, 4]\n"
      "      %back_out: f32[b, 8] = tcc::Reshape(%back_in) {shape = [\"b\", \"8\"]} name(\"back/Reshape\")\n"
      "      output %back_out\n"
      "    }} name(\"back\")\n" +
      reshape("to_out", "back", "y") + "  output %w\n  output %y\n}\n");
  Schedule s = build_schedule(*m->graph);
  EXPECT_EQ(describe(s),
            "tcc_k0_pointwise fused_0 (x, bias0) -> (h)\n"
            "tcc_k1_pointwise of_x (x) -> (w)\n"
            "tcc_k1_pointwise to_out (back) -> (y)\n"
            "view of_h/Reshape: v = h\n"
            "view back/Reshape: back = h\n");
}

}  // namespace
}  // namespace tcc
