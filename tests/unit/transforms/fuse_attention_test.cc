// fuse_attention on the exported models: the zoo (tests/zoo) and the .pt2
// fixtures (tests/pt2). The pipeline runs up to the pass, and again through
// it; each attention layer of the model must be one tcc::Attention afterwards,
// and the reference interpreter must compute the same outputs on the example
// inputs (relative 1e-5 of the output's scale) before and after.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/interp/interpreter.h"
#include "src/ops/fusion.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/example_models.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = fs::path(TCC_SOURCE_DIR);

struct Exported {
  std::string name;      // the test's name
  fs::path file;         // the model
  fs::path examples;     // input_N.pb beside it
  size_t attention = 0;  // its attention layers
};

void PrintTo(const Exported& e, std::ostream* os) { *os << e.name; }

// Attention layers per model (the zoo's configurations in bench/zoo_models.py,
// the GPT-style block's two in scripts/gen-pt2). A zoo model missing here fails.
// swin_any_size has three; its shifted block's windows, whose count is
// symbolic, stay unfused (the fused node takes windows as a static head count).
const std::map<std::string, size_t> kZooAttention = {
    {"gpt2", 2}, {"gpt2_mask", 2}, {"llama", 2}, {"bert", 2}, {"phi", 2}, {"gemma", 2}, {"gemma2", 2}, {"deberta", 2}, {"bloom", 2},
    {"gptneox", 2}, {"falcon", 2},
    {"vit", 2}, {"swin", 4}, {"swin_any_size", 2}, {"swinv2", 2}, {"maxvit", 4}, {"gpt_block_legacy", 1}, {"resnet", 0}, {"resnet_qdq", 0}, {"mobilenetv3", 0},
    {"convnext", 0}, {"efficientnet", 0}, {"lraspp", 0}, {"wav2vec2", 2},
};

std::vector<Exported> models() {
  std::vector<Exported> out;
  std::ifstream in(kSource / "tests/zoo/zoo.json");
  const nlohmann::json zoo = nlohmann::json::parse(in);
  for (const auto& m : zoo["models"]) {
    std::string name = m["name"];
    fs::path dir = kSource / "tests/zoo" / name;
    if (!fs::exists(dir / "model.onnx")) continue;
    auto known = kZooAttention.find(name);
    out.push_back({name, dir / "model.onnx", dir, known == kZooAttention.end() ? SIZE_MAX : known->second});
  }
  for (const char* dialect : {"", ".core"}) {
    std::string suffix = dialect[0] ? "_core" : "";
    out.push_back({"pt2_gpt_block" + suffix, kSource / ("tests/pt2/gpt_block" + std::string(dialect) + ".pt2"),
                   kSource / "tests/pt2/gpt_block", 2});
    out.push_back({"pt2_mlp" + suffix, kSource / ("tests/pt2/mlp" + std::string(dialect) + ".pt2"),
                   kSource / "tests/pt2/mlp", 0});
  }
  return out;
}

// The default pipeline's passes before fuse_attention, or through it.
std::vector<const PassInfo*> pipeline(bool through) {
  std::vector<const PassInfo*> passes;
  for (const PassInfo* p : build_pipeline("", Phase::Optimize)) {
    if (p->name == "fuse_attention" && !through) break;
    passes.push_back(p);
    if (p->name == "fuse_attention") break;
  }
  return passes;
}

std::unique_ptr<Model> optimized(const fs::path& file, bool through) {
  auto m = load_model(file.string());
  infer_shapes(*m->graph);
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream log;
  PassManager(pipeline(through), options, log).run(*m);
  return m;
}

size_t count_attention(const Graph& g) {
  return std::count_if(g.nodes().begin(), g.nodes().end(),
                       [](const auto& n) { return n->domain() == kTccDomain && n->op_type() == "Attention"; });
}

class FuseAttention : public ::testing::TestWithParam<Exported> {};

TEST_P(FuseAttention, EveryLayerIsOneNodeComputingTheSame) {
  const Exported& model = GetParam();
  ASSERT_NE(model.attention, SIZE_MAX) << model.name << ": add its attention layers to kZooAttention";
  auto before = optimized(model.file, false);
  auto after = optimized(model.file, true);
  EXPECT_EQ(count_attention(*after->graph), model.attention);
  std::map<std::string, Tensor> inputs = read_example_inputs(model.examples);
  Interpreter a, b;
  std::vector<Tensor> want = a.run(*before->graph, inputs), got = b.run(*after->graph, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].shape(), got[o].shape()) << "output " << o;
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) scale = std::max(scale, std::fabs(want[o].get_f64(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i)
      worst = std::max(worst, std::fabs(want[o].get_f64(i) - got[o].get_f64(i)) / std::max(scale, 1e-30));
    EXPECT_LE(worst, 1e-5) << "output " << o << ": largest |after - before| / max |before|";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, FuseAttention, ::testing::ValuesIn(models()),
                         [](const ::testing::TestParamInfo<Exported>& i) { return i.param.name; });

}  // namespace
}  // namespace tcc
