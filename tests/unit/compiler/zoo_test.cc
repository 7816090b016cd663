// The zoo (tests/zoo, written by scripts/gen-zoo): small models as PyPI's
// torch, transformers and torchvision export them, with ONNX Runtime's outputs
// for one set of inputs. Each compiles with no host step in its schedule (what
// the shapes alone determine, masks and positions, is computed once per
// binding), and its module's host build matches ONNX Runtime.
#include <gtest/gtest.h>

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
