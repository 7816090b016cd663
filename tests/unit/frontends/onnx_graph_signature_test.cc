// The dynamo exporter's graph signature in the ONNX metadata (tests/zoo):
// each initializer's role (Value::role) as torch's ExportedProgram has it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "frontends/load_model.h"

namespace tcc {
namespace {

const std::filesystem::path kZoo = std::filesystem::path(TCC_SOURCE_DIR) / "tests/zoo";

InitializerRole role(const Model& m, const std::string& name) {
  const Value* v = m.graph->find(name);
  EXPECT_TRUE(v != nullptr && v->is_initializer()) << name;
  return v && v->is_initializer() ? v->role() : InitializerRole::Unmarked;
}

// A value marked PARAMETER is a parameter, a BUFFER a buffer (RoPE's inverse
// frequencies); a constant the exporter lifted (GELU's 0.044715, a Pow's
// exponent) or folded from constants is a constant.
TEST(OnnxGraphSignature, MarkedKindsGiveTheRoles) {
  auto gpt2 = load_model((kZoo / "gpt2/model.onnx").string());
  EXPECT_EQ(role(*gpt2, "model.wte.weight"), InitializerRole::Parameter);
  EXPECT_EQ(role(*gpt2, "model.h.0.attn.c_attn.weight"), InitializerRole::Parameter);
  EXPECT_EQ(role(*gpt2, "val_8"), InitializerRole::Constant);
  EXPECT_EQ(role(*gpt2, "val_154"), InitializerRole::Constant);
  auto llama = load_model((kZoo / "llama/model.onnx").string());
  EXPECT_EQ(role(*llama, "model.rotary_emb.inv_freq"), InitializerRole::Buffer);
  EXPECT_EQ(role(*llama, "model.norm.weight"), InitializerRole::Parameter);
}

// The exporter's optimizer keeps some parameters in another layout: a Linear's
// weight transposed (a "val_N" folded from the weight's name), a BatchNorm
// folded into the Conv's weight (the Conv's name kept, no metadata). Those
// are the parameters torch trains; the folded BatchNorm's bias is a new
// value no metadata traces to a parameter.
TEST(OnnxGraphSignature, FoldedParametersStayParameters) {
  auto bert = load_model((kZoo / "bert/model.onnx").string());
  EXPECT_EQ(role(*bert, "val_57"), InitializerRole::Parameter);  // query.weight, transposed
  EXPECT_EQ(role(*bert, "val_96"), InitializerRole::Constant);   // folded from two constants
  auto resnet = load_model((kZoo / "resnet/model.onnx").string());
  EXPECT_EQ(role(*resnet, "conv1.weight"), InitializerRole::Parameter);
  EXPECT_EQ(role(*resnet, "conv1.weight_bias"), InitializerRole::Constant);
  EXPECT_EQ(role(*resnet, "fc.bias"), InitializerRole::Parameter);
}

// The legacy (TorchScript) exporter writes no signature: every role is unmarked.
TEST(OnnxGraphSignature, LegacyExportsAreUnmarked) {
  auto block = load_model((kZoo / "gpt_block_legacy/model.onnx").string());
  ASSERT_FALSE(block->graph->initializers().empty());
  for (const Value* v : block->graph->initializers()) EXPECT_EQ(v->role(), InitializerRole::Unmarked) << v->name();
}

}  // namespace
}  // namespace tcc
