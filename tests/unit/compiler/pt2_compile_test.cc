// torch.export .pt2 archives (tests/pt2) compiled: --train on the GPT-style
// block and the MLP's signature parameters, and range_constraints becoming the
// module's and explain's guards.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "src/analysis/trace.h"
#include "src/autodiff/autodiff.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kPt2 = fs::path(TCC_SOURCE_DIR) / "tests/pt2";

// --train on the GPT-style block: its scaled_dot_product_attention is one
// tcc::Attention, which autodiff differentiates through its decomposition.
TEST(Pt2Import, TrainingStepCompilesWithNoHostStep) {
  fs::path dir = make_temp_dir("tcc_pt2_train");
  CompileRequest req;
  req.model = (kPt2 / "gpt_block.pt2").string();
  req.output = (dir / "module").string();
  req.options = quick_compile_options();
  auto m = load_model(req.model);
  req.train.train = true;
  req.train.loss_fn = "cross_entropy";
  req.train.loss_on = m->graph->outputs().at(0)->name();
  req.train.label = "label";
  CompileResult r = compile(req);
  EXPECT_TRUE(r.fallbacks.empty());
  ASSERT_TRUE(r.training.has_value());
  EXPECT_FALSE(r.training->params.empty());
  fs::remove_all(dir);
}

// --train trains the graph signature's parameters: the MLP's three Linear
// layers, not its buffer `scale` nor the constants torch lifted
// (mul_const.1, div_const.2), which stay initializers the step does not
// update; --params filters among the parameters.
TEST(Pt2Import, TrainingTrainsTheSignaturesParameters) {
  const std::set<std::string> linear = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
  auto options = [](const Model& m) {
    TrainOptions o;
    o.builtin_loss = BuiltinLoss{LossKind::Mse, m.graph->outputs().at(0)->name(), "label"};
    o.optimizer.kind = OptimizerKind::Sgd;
    return o;
  };
  for (const char* file : {"mlp.pt2", "mlp.core.pt2"}) {
    auto m = load_model((kPt2 / file).string());
    std::set<std::string> names;
    for (const Value* v : m->graph->initializers())
      if (v->role() == InitializerRole::Parameter) names.insert(v->name());
    EXPECT_EQ(names, linear) << file;
    std::set<std::string> floats;
    for (const Value* v : m->graph->initializers())
      if (is_float(v->initializer().dtype())) floats.insert(v->name());
    EXPECT_TRUE(floats.count("scale")) << file;
    EXPECT_GT(floats.size(), linear.size()) << file;

    TrainingGraph tg = build_training_graph(*m, options(*m));
    EXPECT_EQ(std::set<std::string>(tg.params.begin(), tg.params.end()), linear) << file;
    EXPECT_TRUE(tg.frozen.empty()) << file;
    const Value* scale = m->graph->find("scale");
    ASSERT_NE(scale, nullptr) << file;
    EXPECT_TRUE(scale->is_initializer()) << file;
    for (const Value* in : m->graph->inputs()) EXPECT_NE(in->name(), "scale") << file;
    for (const Value* out : m->graph->outputs()) EXPECT_EQ(out->name().find("scale"), std::string::npos) << file;
  }

  auto m = load_model((kPt2 / "mlp.pt2").string());
  TrainOptions o = options(*m);
  o.param_patterns = {"fc1.*"};
  TrainingGraph tg = build_training_graph(*m, o);
  EXPECT_EQ(std::set<std::string>(tg.params.begin(), tg.params.end()),
            (std::set<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_EQ(tg.params_from, "the exporter's graph signature, chosen by --params");
  m = load_model((kPt2 / "mlp.pt2").string());
  o.param_patterns = {"scale"};
  const std::string what = input_error([&] { build_training_graph(*m, o); });
  EXPECT_NE(what.find(
                "--params 'scale' matches no parameter of the exporter's graph signature (buffers and constants are "
                "not trained)"),
            std::string::npos) << what;
}

// range_constraints become guards: the module refuses a sequence past the
// exported range (seq <= 11: the position table has 12 rows) before it runs,
// explain lists the bounds among the guards, and a range that cannot be read
// is an input error naming the archive and the symbol.
TEST(Pt2Import, RangeConstraintsBecomeGuards) {
  const fs::path archive = kPt2 / "gpt_block.pt2";
  fs::path dir = make_temp_dir("tcc_pt2_ranges");
  compile_with_no_host_step(archive, dir / "module");
  std::ifstream manifest_file(dir / "module" / "manifest.json");
  json manifest = json::parse(manifest_file);
  std::set<std::string> exprs;
  for (const json& g : manifest["guards"])
    if (g.contains("expr")) exprs.insert(g["expr"].get<std::string>());
  EXPECT_TRUE(exprs.count("ids.size()[0] <= 64")) << manifest["guards"].dump(1);
  EXPECT_TRUE(exprs.count("ids.size()[1] <= 11")) << manifest["guards"].dump(1);
  tcc_module* module = nullptr;
  ASSERT_EQ(tcc_module_load((dir / "module").c_str(), &module), TCC_OK) << tcc_last_error();
  for (int64_t seq : {11, 12}) {
    std::map<std::string, Tensor> inputs = {{"ids", Tensor(DType::I64, {3, seq})}};
    std::vector<tcc_tensor> ins = module_inputs(module, inputs);
    int64_t dims[8];
    int32_t rank = 0;
    tcc_status status = tcc_module_output_shape(module, ins.data(), ins.size(), 0, dims, 8, &rank);
    if (seq == 11) {
      EXPECT_EQ(status, TCC_OK) << tcc_last_error();
    } else {
      EXPECT_EQ(status, TCC_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(tcc_last_error()).find("guard 'ids.size()[1] <= 11'"), std::string::npos)
          << tcc_last_error();
    }
  }
  tcc_module_free(module);
  fs::remove_all(dir);

  CliResult r = run_tcc("explain " + shell_quote(archive.string()) + " --format json", "", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("ids.size()[1] <= 11"), std::string::npos) << r.output;

  auto m = load_model(archive.string());
  ShapeInfo info = infer_shapes(*m->graph);
  ModelSignature sig = build_signature(*m->graph, info, kTorchLeastSymbolicSize);
  std::string seq = m->graph->inputs()[0]->type().shape()[1].str();
  m->metadata["pt2.range." + seq] = "[2, eleven]";
  const std::string what = input_error([&] { read_size_ranges(sig, m->metadata, archive.string()); });
  EXPECT_NE(what.find(archive.string() + ": the range of symbol '" + seq + "' is '[2, eleven]'"),
            std::string::npos) << what;
}

}  // namespace
}  // namespace tcc
