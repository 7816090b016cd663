// The zoo (tests/zoo, written by scripts/gen-zoo): small models as PyPI's
// torch, transformers and torchvision export them, with ONNX Runtime's outputs
// for one set of inputs. Each compiles with no host step in its schedule (what
// the shapes alone determine, masks and positions, is computed once per
// binding), and its module's host build matches ONNX Runtime, and the
// interpreter at the least sizes its symbols take: batch 1, one token.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kZoo = fs::path(TCC_SOURCE_DIR) / "tests/zoo";

std::vector<std::string> zoo_models() {
  std::ifstream in(kZoo / "zoo.json");
  json zoo = json::parse(in);
  std::vector<std::string> names;
  for (const json& m : zoo["models"])
    if (fs::exists(kZoo / m["name"].get<std::string>() / "model.onnx")) names.push_back(m["name"]);
  return names;
}

// The least size of each zoo symbol where it is above 1 (the Dim minimum
// bench/zoo_models.py exports with): wav2vec2's convolutions need 400 samples.
const std::map<std::string, int64_t> kLeastSizes = {{"samples", 400}};

// t[:shape[0], :shape[1], ...], each of shape's dims at most t's.
Tensor leading_block(const Tensor& t, const std::vector<int64_t>& shape) {
  Tensor out(t.dtype(), shape);
  const size_t elem = dtype_size(t.dtype());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t e = 0; e < out.numel(); ++e) {
    int64_t from = 0;
    for (size_t d = 0; d < shape.size(); ++d) from = from * t.shape()[d] + index[d];
    std::memcpy(out.raw_mut() + e * elem, t.raw() + from * elem, elem);
    for (size_t d = shape.size(); d-- > 0 && ++index[d] == shape[d];) index[d] = 0;
  }
  return out;
}

class Zoo : public TempDirFixture<::testing::TestWithParam<std::string>> {};

TEST_P(Zoo, CompilesWithNoHostStepAndMatchesOnnxRuntime) {
  fs::path model = kZoo / GetParam();
  compile_with_no_host_step(model / "model.onnx", dir_ / "module");
  if (HasFatalFailure()) return;
  std::map<std::string, Tensor> inputs = read_example_inputs(model);
  std::vector<Tensor> outs = run_module_on_host(dir_ / "module", inputs);
  std::vector<Tensor> expected = read_example_outputs(model);
  ASSERT_EQ(outs.size(), expected.size());
  for (size_t i = 0; i < outs.size(); ++i)
    expect_close_to(outs[i], expected[i], "output " + std::to_string(i), "ONNX Runtime");

  // The same module at every symbol's least size, on the examples' leading
  // blocks: the batch-1 call and the one-token decode step.
  std::unique_ptr<Model> m = load_model((model / "model.onnx").string());
  infer_shapes(*m->graph);
  std::map<std::string, int64_t> least;
  for (const Value* in : m->graph->inputs())
    for (const Dim& d : in->type().shape())
      for (const std::string& symbol : d.expr().symbols())
        least[symbol] = kLeastSizes.count(symbol) ? kLeastSizes.at(symbol) : 1;
  std::map<std::string, Tensor> small;
  for (const auto& [name, t] : inputs) {
    std::vector<int64_t> shape;
    for (const Dim& d : m->graph->find(name)->type().shape()) shape.push_back(*d.expr().evaluate(least));
    small.emplace(name, leading_block(t, shape));
  }
  std::vector<Tensor> got = run_module_on_host(dir_ / "module", small);
  std::vector<Tensor> want = Interpreter().run(*m->graph, small);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    expect_close_to(got[i], want[i], "output " + std::to_string(i) + " at the least sizes", "the interpreter");
}

// ONNX Runtime's QDQ ResNet: fuse_qdq makes each convolution a QLinearConv,
// which computes as im2col into cuBLASLt's int8 product; no float convolution
// is left. The classifier's Gemm has a bias QLinearMatMul cannot add, so it
// stays one f32 product.
TEST(ZooQuantized, ResnetQdqConvolvesInInt8) {
  fs::path dir = make_temp_dir("tcc_zoo_qdq");
  compile_with_no_host_step(kZoo / "resnet_qdq" / "model.onnx", dir / "module");
  std::map<std::string, int> kernels = library_kernels(dir / "module");
  EXPECT_GT(kernels["gemm i8"], 0);
  EXPECT_EQ(kernels["gemm f32"], 1);
  EXPECT_EQ(kernels["conv f32"] + kernels["conv f64"] + kernels["gemm f64"], 0);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zoo_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tcc
