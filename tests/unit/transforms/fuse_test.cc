// The fusion pipeline on the exported fixtures: the default pipeline through
// the fuse phase leaves a graph that verifies, whose every tcc::Fusion node
// keeps src/ops/fusion.h's contract, and that the reference interpreter runs
// to the same outputs as the unfused graph. Also the interpreter's symbol
// binding that tcc::Reshape / tcc::Expand / tcc::Slice evaluate their
// shapes with, and verify_fusion's diagnostics.
#include <gtest/gtest.h>

#include <random>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "passes/pass_manager.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/ir/verifier.h"
#include "src/ops/fusion.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using Inputs = std::map<std::string, Tensor>;

std::string fixture_path(const std::string& rel) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + rel; }

std::unique_ptr<Model> load_fixture(const std::string& name) {
  auto m = load_model(fixture_path(name + ".onnx"));
  infer_shapes(*m->graph);
  return m;
}

// Runs `spec` (every pass when empty) up to and including `stop_after`, verifying after each pass.
void run_passes(Model& m, const std::string& spec, Phase stop_after) {
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager(build_pipeline(spec, stop_after), options, report).run(m);
}

// The default pipeline without fuse: the same graph fuse starts from.
std::string all_passes_but_fuse() {
  std::string spec;
  for (const PassInfo* p : build_pipeline("", Phase::Fuse))
    if (p->name != "fuse") spec += (spec.empty() ? "" : ",") + std::string(p->name);
  return spec;
}

// Random float data in [lo, 2] for every input, each symbolic dim given its size from `sizes`.
Inputs random_inputs(const Graph& g, const std::map<std::string, int64_t>& sizes, uint32_t seed, double lo = -2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(lo, 2.0);
  Inputs in;
  for (const Value* v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : v->type().shape()) {
      std::optional<int64_t> size = d.expr().evaluate(sizes);
      EXPECT_TRUE(size) << v->name() << " dim " << d.str();
      shape.push_back(size.value_or(1));
    }
    Tensor x(v->type().dtype(), shape);
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, real(rng));
    in.emplace(v->name(), x);
  }
  return in;
}

std::vector<const Node*> fusion_nodes(const Graph& g) {
  std::vector<const Node*> out;
  for (const auto& n : g.nodes())
    if (is_fusion(*n)) out.push_back(n.get());
  return out;
}

std::map<std::string, size_t> kind_counts(const Graph& g) {
  std::map<std::string, size_t> counts;
  for (const Node* n : fusion_nodes(g)) ++counts[std::string(fusion_kind_name(fusion_kind(*n)))];
  return counts;
}

struct FixtureCase {
  const char* name;
  std::map<std::string, size_t> kinds;  // fusion groups by kind
  std::map<std::string, int64_t> sizes;  // symbol sizes for the random inputs
};

class FusedFixture : public testing::TestWithParam<FixtureCase> {};

TEST_P(FusedFixture, FusionNodesKeepTheContract) {
  const FixtureCase& c = GetParam();
  auto m = load_fixture(c.name);
  run_passes(*m, "", Phase::Fuse);
  EXPECT_TRUE(verify(*m->graph).empty());
  for (const Node* n : fusion_nodes(*m->graph)) EXPECT_EQ(verify_fusion(*n), "") << print_model(*m);
  EXPECT_EQ(kind_counts(*m->graph), c.kinds);
  // The fused graph is still a model: it prints and parses back to the same text.
  std::string text = print_model(*m);
  EXPECT_EQ(print_model(*parse_model(text, "fused.tir")), text);
}

// Fusion moves nodes into bodies and changes nothing they compute, so the
// interpreter runs the same kernels on the same values: bitwise equal.
TEST_P(FusedFixture, FusedGraphComputesTheSameBits) {
  const FixtureCase& c = GetParam();
  auto unfused = load_fixture(c.name);
  run_passes(*unfused, all_passes_but_fuse(), Phase::Fuse);
  auto fused = load_fixture(c.name);
  run_passes(*fused, "", Phase::Fuse);
  for (uint32_t seed : {1u, 2u}) {
    Inputs in = random_inputs(*unfused->graph, c.sizes, seed);
    std::vector<Tensor> want = Interpreter().run(*unfused->graph, in);
    std::vector<Tensor> got = Interpreter().run(*fused->graph, in);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(want[i].identical(got[i])) << c.name << " output " << i;
  }
}

// Decomposition does change the arithmetic (composite kernels compute in
// double and round once; the pieces round after each op), so against the
// original model and ONNX Runtime's stored output the fixtures' 1e-4 holds.
TEST_P(FusedFixture, FusedGraphMatchesTheStoredOutput) {
  const FixtureCase& c = GetParam();
  auto fused = load_fixture(c.name);
  run_passes(*fused, "", Phase::Fuse);
  Inputs in = {{"input", read_tensor_pb(fixture_path(std::string(c.name) + "/input_0.pb"))}};
  Tensor got = Interpreter().run(*fused->graph, in).at(0);
  Tensor ort = read_tensor_pb(fixture_path(std::string(c.name) + "/output_0.pb"));
  ASSERT_EQ(got.shape(), ort.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.get_f64(i), ort.get_f64(i), 1e-4 * std::max(1.0, std::fabs(ort.get_f64(i)))) << c.name << " element " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FusedFixture,
    testing::Values(FixtureCase{"mlp", {{"gemm", 2}}, {{"batch", 3}}},
                    // Each conv takes its Relu or the block's residual Add; the BatchNorm + Relu after the block
                    // is the prologue of the global average pool's reduction; the MaxPool is a pool kernel of
                    // its own and the Flatten a lone movement op.
                    FixtureCase{"resnet_small", {{"conv", 3}, {"gemm", 1}, {"reduction", 1}, {"single", 2}},
                                {{"batch", 2}}},
                    // LN1, c_attn, the causal attention (fuse_attention's one node) reading
                    // q, k and v as views of c_attn's output (a slice, reshape and transpose
                    // each) and storing through the transpose and reshape back,
                    // c_proj+residual, LN2, c_fc, erf-gelu, c_proj+residual.
                    FixtureCase{"gpt2_block",
                                {{"gemm", 4}, {"pointwise", 1}, {"reduction", 2}, {"single", 1}},
                                {{"batch", 2}, {"seq", 7}}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(FusedGpt2Block, NoShapeChainIsLeft) {
  auto m = load_fixture("gpt2_block");
  run_passes(*m, "", Phase::Fuse);
  std::map<std::string, size_t> ops;
  for (const auto& n : m->graph->nodes()) ++ops[n->domain() + "::" + n->op_type()];
  for (const char* op : {"::Shape", "::Gather", "::Concat", "::Unsqueeze", "::Reshape", "::Slice"})
    EXPECT_EQ(ops.count(op), 0u) << op << " left in\n" << print_model(*m);
  // Everything is in a kernel (decompose made the QKV Split three Slices, each
  // with its reshape and transpose a view the attention reads, which stores
  // its output through the transpose and reshape back) but the Constant that
  // held the Split's sizes.
  EXPECT_EQ(ops, (std::map<std::string, size_t>{{"::Constant", 1}, {"tcc::Fusion", 8}}));
}

// ---- decompose keeps the meaning ------------------------------------------------

// `text` parsed twice, shapes inferred: as written, and through decompose.
std::pair<std::unique_ptr<Model>, std::unique_ptr<Model>> original_and_decomposed(const std::string& text) {
  auto original = parse_model(text, "d.tir");
  infer_shapes(*original->graph);
  auto decomposed = parse_model(text, "d.tir");
  infer_shapes(*decomposed->graph);
  run_passes(*decomposed, "decompose", Phase::Fuse);
  return {std::move(original), std::move(decomposed)};
}

// The pieces round after each op where the composite kernel rounds once, so
// outputs agree to float32 accuracy relative to the output's largest magnitude.
TEST(DecomposeNumerics, PiecesComputeTheCompositeOp) {
  const char* graphs[] = {
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 3, 5]
  %y: f32[2, 3, 5] = Softmax(%x) {axis = 1}
  output %y
})",
      R"(graph main opset(ai.onnx: 18) {
  input %x: f32[n, 5]
  %y: f32[n, 5] = LogSoftmax(%x)
  output %y
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[n, 4, 6]
  input %g: f32[4, 6]
  input %b: f32[6]
  %y: f32[n, 4, 6] = LayerNormalization(%x, %g, %b) {axis = -2, epsilon = 0.001}
  output %y
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[n, 2, 3, 3]
  const %s: f32[2] = [1.0, 2.0]
  const %b: f32[2] = [0.5, -0.5]
  const %m: f32[2] = [0.25, 1.0]
  const %v: f32[2] = [4.0, 0.25]
  %y: f32[n, 2, 3, 3] = BatchNormalization(%x, %s, %b, %m, %v)
  output %y
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[n, 3, 5]
  input %s: f32[3]
  input %b: f32[3]
  input %m: f32[3]
  input %v: f32[3]
  %y: f32[n, 3, 5] = BatchNormalization(%x, %s, %b, %m, %v)
  output %y
})"};
  for (const char* text : graphs) {
    auto [original, decomposed] = original_and_decomposed(text);
    ASSERT_NE(print_model(*decomposed), print_model(*original)) << "decompose did not fire on\n" << text;
    // Positive data keeps BatchNormalization's variance input valid.
    Inputs in = random_inputs(*original->graph, {{"n", 3}}, 7, 0.25);
    Tensor want = Interpreter().run(*original->graph, in).at(0);
    Tensor got = Interpreter().run(*decomposed->graph, in).at(0);
    ASSERT_EQ(want.shape(), got.shape());
    double scale = 0;
    for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::fabs(want.get_f64(i)));
    for (int64_t i = 0; i < want.numel(); ++i)
      ASSERT_NEAR(got.get_f64(i), want.get_f64(i), 1e-5 * scale) << text << "\nelement " << i;
  }
}

// An f16 or bf16 LayerNormalization (a model exported after .half()) computes
// in its f32 stash_type: the pieces leave no LayerNormalization, and their one
// rounding to the input's dtype, at the end, lands within a unit in the last
// place (of max(|y|, 1)) of the reference's, which computes in double and
// rounds once. Its Mean output is f32, as the stash.
TEST(DecomposeNumerics, HalfPrecisionLayerNormComputesInItsStashType) {
  for (const auto& [dtype, ulp] : {std::pair{"f16", 0x1p-10}, std::pair{"bf16", 0x1p-7}}) {
    const std::string text = std::string("graph main opset(ai.onnx: 17) {\n") + "  input %x: " + dtype +
                             "[n, 4, 6]\n  input %g: " + dtype + "[6]\n  input %b: " + dtype +
                             "[6]\n  %y: " + dtype +
                             "[n, 4, 6], %m: f32[n, 4, 1] = LayerNormalization(%x, %g, %b) {epsilon = 0.001}\n"
                             "  output %y\n  output %m\n}";
    auto [original, decomposed] = original_and_decomposed(text);
    for (const auto& n : decomposed->graph->nodes()) EXPECT_NE(n->op_type(), "LayerNormalization") << dtype;
    Inputs in = random_inputs(*original->graph, {{"n", 3}}, 7);
    std::vector<Tensor> want = Interpreter().run(*original->graph, in), got = Interpreter().run(*decomposed->graph, in);
    ASSERT_EQ(got.at(0).dtype(), want.at(0).dtype()) << dtype;
    ASSERT_EQ(got.at(1).dtype(), DType::F32) << dtype;
    for (int64_t i = 0; i < want[0].numel(); ++i) {
      double w = want[0].get_f64(i);
      ASSERT_LE(std::fabs(got[0].get_f64(i) - w), ulp * std::max(std::fabs(w), 1.0)) << dtype << " element " << i;
    }
    for (int64_t i = 0; i < want[1].numel(); ++i)
      ASSERT_NEAR(got[1].get_f64(i), want[1].get_f64(i), 1e-6) << dtype << " mean " << i;
  }
}

// tf_crop_and_resize of a roi read from data: the taps computed on kernels
// from the roi match the reference's, for linear and every nearest_mode, with
// boxes inside the image, past its edges (extrapolation_value), flipped, and
// landing halfway between rows.
TEST(DecomposeNumerics, CropAndResizeOfARoiFromDataTakesTheReferencesTaps) {
  const std::vector<std::string> modes = {"mode = \"linear\"",
                                          "mode = \"nearest\", nearest_mode = \"round_prefer_floor\"",
                                          "mode = \"nearest\", nearest_mode = \"round_prefer_ceil\"",
                                          "mode = \"nearest\", nearest_mode = \"floor\"",
                                          "mode = \"nearest\", nearest_mode = \"ceil\""};
  const std::vector<std::vector<float>> boxes = {
      {0.1f, 0.25f, 0.8f, 0.9f}, {-0.3f, 0.2f, 1.4f, 0.7f}, {0.9f, 0.6f, 0.2f, 0.1f},
      {0.0f, 0.0f, 0.375f, 0.3f}};  // the last steps rows by exactly 0.5, where the nearest modes part
  for (const std::string& mode : modes) {
    const std::string text = "graph main opset(ai.onnx: 19) {\n"
                             "  input %x: f32[2, 1, 5, 6]\n"
                             "  input %roi: f32[4]\n"
                             "  const %sizes: i64[2] = [4, 7]\n"
                             "  %y: f32[2, 1, 4, 7] = Resize(%x, %roi, none, %sizes) {" + mode +
                             ", coordinate_transformation_mode = \"tf_crop_and_resize\", axes = [2, 3], "
                             "extrapolation_value = -3.0}\n"
                             "  output %y\n}";
    auto [original, decomposed] = original_and_decomposed(text);
    for (const auto& n : decomposed->graph->nodes()) ASSERT_NE(n->op_type(), "Resize") << mode;
    for (const std::vector<float>& box : boxes) {
      Inputs in = random_inputs(*original->graph, {}, 11, -1.0);
      Tensor roi(DType::F32, {4});
      for (int64_t i = 0; i < 4; ++i) roi.set_f64(i, box[static_cast<size_t>(i)]);
      in["roi"] = roi;
      Tensor want = Interpreter().run(*original->graph, in).at(0);
      Tensor got = Interpreter().run(*decomposed->graph, in).at(0);
      ASSERT_EQ(want.shape(), got.shape());
      for (int64_t i = 0; i < want.numel(); ++i)
        ASSERT_NEAR(got.get_f64(i), want.get_f64(i), 1e-5) << mode << " box " << box[0] << "\nelement " << i;
    }
  }
}

// ---- symbols bound at run time ------------------------------------------------

constexpr const char* kSymbolic = R"(graph main opset(ai.onnx: 17, tcc: 1) {
  input %x: f32[batch, seq, 4]
  input %m: f32[seq, 2]
  %y: f32[batch, seq*2, 2] = tcc::Reshape(%x) {shape = ["batch", "seq*2", "2"]} name("r")
  %e: f32[3, seq, 2] = tcc::Expand(%m) {shape = ["3", "seq", "2"]} name("e")
  %s: f32[batch, 1, 4] = tcc::Slice(%x) {axes = [1], starts = ["1"], steps = [2], shape = ["batch", "1", "4"]} name("s")
  %h: f32[batch, seq-seq//2, 4] = tcc::Slice(%x) {axes = [1], starts = ["seq//2"], steps = [1], shape = ["batch", "seq-seq//2", "4"]} name("h")
  output %y
  output %e
  output %s
  output %h
}
)";

TEST(SymbolBinding, TccShapesEvaluateWithInputSizes) {
  auto m = parse_model(kSymbolic, "s.tir");
  Tensor x(DType::F32, {2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, static_cast<double>(i));
  Tensor mm(DType::F32, {3, 2});
  for (int64_t i = 0; i < mm.numel(); ++i) mm.set_f64(i, static_cast<double>(-i));
  Interpreter interp;
  std::vector<Tensor> out = interp.run(*m->graph, {{"x", x}, {"m", mm}});
  EXPECT_EQ(interp.symbols(), (std::map<std::string, int64_t>{{"batch", 2}, {"seq", 3}}));
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 6, 2}));
  EXPECT_TRUE(out[0].reshaped({2, 3, 4}).identical(x));
  ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{3, 3, 2}));
  EXPECT_EQ(out[1].get_f64(2 * 6 + 5), -5.0);
  // Rows 1 (of 3) of each batch: elements 4..7 and 16..19.
  ASSERT_EQ(out[2].shape(), (std::vector<int64_t>{2, 1, 4}));
  EXPECT_EQ(out[2].get_f64(0), 4.0);
  EXPECT_EQ(out[2].get_f64(7), 19.0);
  // Rows 1 and 2 (from seq//2) of each batch: elements 4..11 and 16..23.
  ASSERT_EQ(out[3].shape(), (std::vector<int64_t>{2, 2, 4}));
  EXPECT_EQ(out[3].get_f64(0), 4.0);
  EXPECT_EQ(out[3].get_f64(15), 23.0);
}

TEST(SymbolBinding, InputsDisagreeingOnASymbolAreNamed) {
  auto m = parse_model(kSymbolic, "s.tir");
  const std::string what = input_error(
      [&] { Interpreter().run(*m->graph, {{"x", Tensor(DType::F32, {2, 3, 4})}, {"m", Tensor(DType::F32, {5, 2})}}); });
  EXPECT_NE(what.find("symbol 'seq' is 3 by input 'x' dim 1 but 5 by input 'm' dim 0"), std::string::npos) << what;
}

TEST(SymbolBinding, UnboundSymbolNamesTheNode) {
  auto m = parse_model(R"(graph main opset(ai.onnx: 17, tcc: 1) {
  input %x: f32[6]
  %y: f32[n, 2] = tcc::Reshape(%x) {shape = ["n", "2"]} name("r")
  output %y
}
)",
                       "u.tir");
  const std::string what = input_error([&] { Interpreter().run(*m->graph, {{"x", Tensor(DType::F32, {6})}}); });
  EXPECT_NE(what.find("'r'"), std::string::npos) << what;
  EXPECT_NE(what.find("no graph input binds 'n'"), std::string::npos) << what;
}

// torch.export's derived dims (4*h of an image whose height is any multiple
// of 4) bind their symbol from the multiple.
TEST(SymbolBinding, ScaledSymbolBindsFromItsMultiple) {
  auto m = parse_model(R"(graph main opset(ai.onnx: 17, tcc: 1) {
  input %x: f32[n*2]
  %y: f32[n, 2] = tcc::Reshape(%x) {shape = ["n", "2"]} name("r")
  output %y
}
)",
                       "d.tir");
  std::vector<Tensor> out = Interpreter().run(*m->graph, {{"x", Tensor(DType::F32, {6})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  const std::string what = input_error([&] { Interpreter().run(*m->graph, {{"x", Tensor(DType::F32, {7})}}); });
  EXPECT_NE(what.find("input 'x' dim 0 is 7, not a multiple of 2 (n*2)"), std::string::npos) << what;
}

// ---- verify_fusion --------------------------------------------------------------

std::string first_fusion_problem(const std::string& text) {
  auto m = parse_model(text, "f.tir");
  for (const Node* n : fusion_nodes(*m->graph)) return verify_fusion(*n);
  return "no fusion node";
}

TEST(VerifyFusion, MovementOnAnIntermediateIsRefused) {
  std::string why = first_fusion_problem(R"(graph main opset(ai.onnx: 17, tcc: 1) {
  input %x: f32[2, 3]
  %y: f32[3, 2] = tcc::Fusion(%x) {kind = "pointwise", body = graph b {
      input %xi: f32[2, 3]
      %e: f32[2, 3] = Exp(%xi) name("exp")
      %t: f32[3, 2] = Transpose(%e) {perm = [1, 0]} name("t")
      output %t
    }} name("fused_0")
  output %y
}
)");
  EXPECT_NE(why.find("node 't' (Transpose) moves 'e'"), std::string::npos) << why;
}

TEST(VerifyFusion, ReductionsOverDifferentAxesAreRefused) {
  std::string why = first_fusion_problem(R"(graph main opset(ai.onnx: 17, tcc: 1) {
  input %x: f32[2, 3]
  %y: f32[1, 1] = tcc::Fusion(%x) {kind = "reduction", body = graph b {
      input %xi: f32[2, 3]
      const %ax: i64[1] = [1]
      %r: f32[2, 1] = ReduceSum(%xi, %ax) {keepdims = 1} name("rows")
      %c: f32[1, 1] = ReduceMax(%r) {axes = [0]} name("cols")
      output %c
    }} name("fused_0")
  output %y
}
)");
  EXPECT_NE(why.find("node 'cols' (ReduceMax) reduces"), std::string::npos) << why;
}

TEST(VerifyFusion, GemmEpilogueOfErfGeluIsRefused) {
  std::string why = first_fusion_problem(R"(graph main opset(ai.onnx: 20, tcc: 1) {
  input %x: f32[2, 3]
  input %w: f32[3, 3]
  %y: f32[2, 3] = tcc::Fusion(%x, %w) {kind = "gemm", body = graph b {
      input %xi: f32[2, 3]
      input %wi: f32[3, 3]
      %p: f32[2, 3] = MatMul(%xi, %wi) name("mm")
      %g: f32[2, 3] = Gelu(%p) name("gelu")
      output %g
    }} name("fused_0")
  output %y
}
)");
  EXPECT_NE(why.find("node 'gelu' (Gelu) is an erf Gelu"), std::string::npos) << why;
}

TEST(VerifyFusion, FusionKindNamesRoundTrip) {
  for (FusionKind k : {FusionKind::Pointwise, FusionKind::Reduction, FusionKind::Gemm, FusionKind::Conv,
                       FusionKind::Single})
    EXPECT_EQ(parse_fusion_kind(fusion_kind_name(k)), k);
  EXPECT_EQ(parse_fusion_kind("loop"), std::nullopt);
}

}  // namespace
}  // namespace tcc
