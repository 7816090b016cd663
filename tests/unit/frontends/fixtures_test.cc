// The exported-model fixtures (tests/fixtures, written by scripts/gen-fixtures
// in torch.onnx.export's patterns): each loads, every value gets a fully
// symbolic shape, and the reference interpreter agrees with onnxruntime's
// outputs stored next to the model.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"

namespace tcc {
namespace {

struct Fixture {
  const char* name;
  const char* input_type;
  const char* output_type;
};

const Fixture kFixtures[] = {
    {"mlp", "f32[batch, 32]", "f32[batch, 10]"},
    {"resnet_small", "f32[batch, 3, 32, 32]", "f32[batch, 10]"},
    {"gpt2_block", "f32[batch, seq, 64]", "f32[batch, seq, 64]"},
};

std::string fixture_path(const std::string& rel) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + rel; }

const Node* find_node(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name() == name) return n.get();
  return nullptr;
}

class ExportedModel : public ::testing::TestWithParam<Fixture> {};

TEST_P(ExportedModel, EveryValueHasAFullySymbolicShape) {
  const Fixture& f = GetParam();
  auto m = load_model(fixture_path(std::string(f.name) + ".onnx"));
  Graph& g = *m->graph;
  infer_shapes(g);
  ASSERT_EQ(g.inputs().size(), 1u);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0]->type().str(), f.input_type);
  EXPECT_EQ(g.outputs()[0]->type().str(), f.output_type);
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs()) {
      EXPECT_TRUE(v->type().is_tensor() && v->type().fully_shaped())
          << f.name << ": " << v->name() << " (" << n->op_type() << ") has type " << v->type().str();
    }
}

TEST_P(ExportedModel, InterpreterMatchesOnnxRuntime) {
  const Fixture& f = GetParam();
  auto m = load_model(fixture_path(std::string(f.name) + ".onnx"));
  infer_shapes(*m->graph);
  Tensor input = read_tensor_pb(fixture_path(std::string(f.name) + "/input_0.pb"));
  Tensor expected = read_tensor_pb(fixture_path(std::string(f.name) + "/output_0.pb"));
  Interpreter interp;
  std::vector<Tensor> out = interp.run(*m->graph, {{"input", input}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].dtype(), DType::F32);
  ASSERT_EQ(out[0].shape(), expected.shape());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    double e = expected.get_f64(i), a = out[0].get_f64(i);
    ASSERT_LE(std::fabs(a - e), 1e-4 * (1 + std::fabs(e))) << f.name << " output element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExportedModel, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param.name); });

// The exporter's reshape chains resolve to the heads layout, and the mask
// slice to the sequence length, with the user's dim names kept.
TEST(GptFixture, ShapeChainsResolveSymbolically) {
  auto m = load_model(fixture_path("gpt2_block.onnx"));
  Graph& g = *m->graph;
  infer_shapes(g);
  auto type_of = [&](const std::string& name) {
    const Value* v = g.find(name);
    return v ? v->type().str() : "no value " + name;
  };
  EXPECT_EQ(type_of("/h.0/attn/Concat_output_0"), "i64[4]");
  EXPECT_EQ(type_of("/h.0/attn/Reshape_output_0"), "f32[batch, seq, 4, 16]");
  EXPECT_EQ(type_of("/h.0/attn/Transpose_1_output_0"), "f32[batch, 4, 16, seq]");
  EXPECT_EQ(type_of("/h.0/attn/Slice_1_output_0"), "bool[1, 1, seq, seq]");
  EXPECT_EQ(type_of("/h.0/attn/Softmax_output_0"), "f32[batch, 4, seq, seq]");
  EXPECT_EQ(type_of("/h.0/attn/Reshape_3_output_0"), "f32[batch, seq, 64]");
  EXPECT_EQ(type_of("/h.0/mlp/act/Mul_1_output_0"), "f32[batch, seq, 256]");
}

TEST(GptFixture, NodesKeepTorchNamesAndSourceLocations) {
  auto m = load_model(fixture_path("gpt2_block.onnx"));
  const Node* reshape = find_node(*m->graph, "/h.0/attn/Reshape");
  ASSERT_NE(reshape, nullptr);
  EXPECT_EQ(reshape->op_type(), "Reshape");
  EXPECT_EQ(reshape->source(), "gpt2_block.py:11");
  const Node* erf = find_node(*m->graph, "/h.0/mlp/act/Erf");
  ASSERT_NE(erf, nullptr);
  EXPECT_EQ(erf->source(), "gpt2_block.py:34");
}

}  // namespace
}  // namespace tcc
