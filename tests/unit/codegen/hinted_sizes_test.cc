// hinted_sizes (codegen/module_writer.h): the sizes of the symbols that the
// compile report and the random inputs of run, bench and autotune take.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "codegen/module_writer.h"
#include "frontends/load_model.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using Sizes = std::map<std::string, int64_t>;

std::unique_ptr<Model> zoo_model(const std::string& name) {
  auto m = load_model((std::filesystem::path(TCC_SOURCE_DIR) / "tests/zoo" / name / "model.onnx").string());
  infer_shapes(*m->graph);
  return m;
}

// wav2vec2's frame count, samples//20-1, is negative below 20 samples: the
// unhinted sample count doubles to the first power of two that sizes every
// value (32, at which the encoder sees no frame), the batch stays, and a
// given size is kept as given.
TEST(HintedSizes, AnUnhintedSymbolDoublesWhileAValueWouldHaveANegativeDim) {
  auto w = zoo_model("wav2vec2");
  EXPECT_EQ(hinted_sizes(*w->graph, {}), (Sizes{{"batch", 1}, {"samples", 32}}));
  EXPECT_EQ(hinted_sizes(*w->graph, {}, kUnhintedRunSize), (Sizes{{"batch", 8}, {"samples", 32}}));
  EXPECT_EQ(hinted_sizes(*w->graph, {{"samples", 16000}}), (Sizes{{"batch", 1}, {"samples", 16000}}));
  EXPECT_EQ(hinted_sizes(*w->graph, {{"samples", 8}}), (Sizes{{"batch", 1}, {"samples", 8}}));
  auto g = zoo_model("gpt2");
  EXPECT_EQ(hinted_sizes(*g->graph, {}), (Sizes{{"batch", 1}, {"seq", 1}}));
}

TEST(HintedSizes, AHintForASymbolTheModelLacksNamesItsOption) {
  auto w = zoo_model("wav2vec2");
  EXPECT_EQ(input_error([&] { hinted_sizes(*w->graph, {{"sample", 8}}, kUnhintedRunSize, "--shapes"); }),
            "--shapes sample: the model has no symbol 'sample' (its symbols: batch, samples)");
}

}  // namespace
}  // namespace tcc
