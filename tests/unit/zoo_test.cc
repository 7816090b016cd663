// The zoo (tests/zoo, written by scripts/gen-zoo): small models as PyPI's
// torch, transformers and torchvision export them, with ONNX Runtime's outputs
// for one set of inputs. Each compiles with no host step in its schedule (what
// the shapes alone determine, masks and positions, is computed once per
// binding), and its module's host build matches ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontends/onnx/tensor_io.h"
#include "tcc_runtime.h"
#include "tests/unit/cli_util.h"
#include "tests/unit/module_test_util.h"
#include "tests/unit/temp_dir.h"

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

// The example's tensors, input_0.pb, input_1.pb, ... (or output_N.pb).
std::vector<Tensor> read_numbered(const fs::path& dir, const std::string& prefix, std::vector<std::string>* names) {
  std::vector<Tensor> ts;
  for (int i = 0; fs::exists(dir / (prefix + std::to_string(i) + ".pb")); ++i) {
    std::string name;
    ts.push_back(read_tensor_pb((dir / (prefix + std::to_string(i) + ".pb")).string(), &name));
    if (names) names->push_back(name);
  }
  return ts;
}

class Zoo : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { dir_ = make_temp_dir("tcc_zoo_test"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(Zoo, CompilesWithNoHostStepAndMatchesOnnxRuntime) {
  fs::path model = kZoo / GetParam();
  fs::path module = dir_ / "module";
  CliResult r = run_tcc("compile " + shell_quote((model / "model.onnx").string()) + " -o " +
                            shell_quote(module.string()) + " --arch sm_90 --no-ptx",
                        "", 300);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(module / "manifest.json");
  json manifest = json::parse(in);
  for (const json& step : manifest["schedule"])
    EXPECT_FALSE(step.contains("fallback")) << "a host step: " << step.dump() << "\n" << r.output;

  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load(module.c_str(), &m), TCC_OK) << tcc_last_error();
  std::vector<std::string> names;
  std::vector<Tensor> inputs = read_numbered(model, "input_", &names);
  std::vector<Tensor> expected = read_numbered(model, "output_", nullptr);
  std::map<std::string, Tensor> by_name;
  for (size_t i = 0; i < inputs.size(); ++i) by_name.emplace(names[i], inputs[i]);
  std::vector<tcc_tensor> ins = module_inputs(m, by_name);
  std::vector<Tensor> outs = module_output_tensors(m, ins);
  std::vector<tcc_tensor> c_outs = c_tensors(outs);
  ASSERT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), c_outs.data(), c_outs.size()), TCC_OK) << tcc_last_error();
  tcc_module_free(m);
  ASSERT_EQ(outs.size(), expected.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_EQ(outs[i].shape(), expected[i].shape()) << "output " << i;
    // Relative 1e-4, of at least 1 (`tcc run --check`'s f32 tolerance).
    double worst = 0;
    for (int64_t e = 0; e < expected[i].numel(); ++e) {
      double want = expected[i].get_f64(e), got = outs[i].get_f64(e);
      worst = std::max(worst, std::fabs(got - want) / (1 + std::fabs(want)));
    }
    EXPECT_LE(worst, 1e-4) << "output " << i << ": largest |tcc - ONNX Runtime| / (1 + |ONNX Runtime|)";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Zoo, ::testing::ValuesIn(zoo_models()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace tcc
