// The passes that shape a training step for compilation:
//  - fuse_multi_tensor: the optimizer update of same-shaped parameters becomes
//    one fusion (one kernel) and still computes what the unfused update does;
//  - recompute_activations: the min-cut choice of saved forward values computes
//    the same loss, gradients and updates, and its memory plan peaks no higher
//    than saving every forward value the backward reads.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <sstream>

#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/autodiff/autodiff.h"
#include "src/compiler/saved_activations.h"
#include "src/interp/interpreter.h"
#include "src/ops/fusion.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/runtime/module_test_util.h"

namespace tcc {
namespace {

std::unique_ptr<Model> training_step(const std::string& path, const std::string& loss_on, OptimizerKind optimizer) {
  std::unique_ptr<Model> m = load_model(std::string(TCC_SOURCE_DIR) + "/" + path);
  TrainOptions opts;
  opts.builtin_loss = BuiltinLoss{LossKind::Mse, loss_on, "target"};
  opts.optimizer.kind = optimizer;
  build_training_graph(*m, opts);
  return m;
}

// Runs the named passes (comma-separated; empty: every pass) with the verifier on.
void run_passes(Model& m, const std::string& spec) {
  infer_shapes(*m.graph);
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager(build_pipeline(spec), options, report).run(m);
}

void expect_same_outputs(const Graph& expected_graph, const Graph& actual_graph,
                         const std::map<std::string, Tensor>& inputs, double tol) {
  std::vector<Tensor> expected = Interpreter().run(expected_graph, inputs);
  std::vector<Tensor> actual = Interpreter().run(actual_graph, inputs);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    ASSERT_EQ(actual[o].shape(), expected[o].shape()) << expected_graph.outputs()[o]->name();
    for (int64_t i = 0; i < expected[o].numel(); ++i)
      ASSERT_NEAR(actual[o].get_f64(i), expected[o].get_f64(i), tol * (1 + std::fabs(expected[o].get_f64(i))))
          << expected_graph.outputs()[o]->name() << " element " << i;
  }
}

// Fusion nodes whose body is all optimizer update, with their output shapes.
std::vector<const Node*> update_fusions(const Graph& g) {
  std::vector<const Node*> out;
  for (const auto& n : g.nodes()) {
    if (!is_fusion(*n)) continue;
    bool update = true;
    for (const auto& b : fusion_body(*n).nodes()) update = update && b->part() == StepPart::Optimizer;
    if (update) out.push_back(n.get());
  }
  return out;
}

const char* kFusePipeline =
    "canonicalize,constant_fold,simplify_algebra,cse,dce,recompute_activations,decompose,fuse";

// The passes compile runs up to the choice of saved activations, as a spec.
std::string optimize_and_recompute() {
  std::string spec;
  for (const PassInfo* p : build_pipeline("", Phase::Fuse)) {
    if (!spec.empty()) spec += ",";
    spec += p->name;
    if (p->name == "recompute_activations") break;
  }
  return spec;
}

TEST(MultiTensorUpdate, TenSameShapedLayersUpdateInOneKernel) {
  std::unique_ptr<Model> reference = training_step("examples/train_linear10/model.tir", "y", OptimizerKind::Adam);
  std::unique_ptr<Model> unmerged = training_step("examples/train_linear10/model.tir", "y", OptimizerKind::Adam);
  std::unique_ptr<Model> merged = training_step("examples/train_linear10/model.tir", "y", OptimizerKind::Adam);
  run_passes(*unmerged, kFusePipeline);
  run_passes(*merged, std::string(kFusePipeline) + ",fuse_multi_tensor");

  // Before: one pointwise update fusion per parameter (plus the scalar bias corrections).
  size_t per_param = 0;
  for (const Node* f : update_fusions(*unmerged->graph)) per_param += f->output(0)->type().str() == "f32[32, 32]";
  EXPECT_EQ(per_param, 10u);
  // After: one fusion updates all ten weights and their two moments.
  std::vector<const Node*> after;
  for (const Node* f : update_fusions(*merged->graph))
    if (f->output(0)->type().str() == "f32[32, 32]") after.push_back(f);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(fusion_kind(*after[0]), FusionKind::Pointwise);
  EXPECT_EQ(after[0]->num_outputs(), 30u);
  std::set<std::string> names;
  for (const Value* v : after[0]->outputs()) names.insert(v->name());
  for (int i = 0; i < 10; ++i)
    for (const char* suffix : {".updated", ".m.updated", ".v.updated"})
      EXPECT_TRUE(names.count("layers." + std::to_string(i) + ".weight" + suffix)) << i << suffix;
  // lr is read once however many updates read it.
  int lr_reads = 0;
  for (const Value* v : after[0]->inputs()) lr_reads += v->name() == "lr";
  EXPECT_EQ(lr_reads, 1);

  std::map<std::string, Tensor> inputs = random_inputs(*reference->graph, 8, 3);
  expect_same_outputs(*reference->graph, *merged->graph, inputs, 1e-6);
}

// The MLP's parameters all differ in shape: nothing merges, every weight's
// update stays one fusion, and a bias's update joins the reduction that sums
// its gradient over the batch (the kept shape is the bias's).
TEST(MultiTensorUpdate, MlpUpdatesFuseWhereTheyCan) {
  std::unique_ptr<Model> reference = training_step("tests/fixtures/mlp.onnx", "output", OptimizerKind::AdamW);
  std::unique_ptr<Model> merged = training_step("tests/fixtures/mlp.onnx", "output", OptimizerKind::AdamW);
  run_passes(*merged, std::string(kFusePipeline) + ",fuse_multi_tensor");
  std::set<std::string> update_types;
  for (const Node* f : update_fusions(*merged->graph))  // scalars (bias corrections, decay) read by the updates aside
    if (f->output(0)->type().rank() > 0) {
      EXPECT_TRUE(update_types.insert(f->output(0)->type().str()).second) << "two update fusions of one type";
    }
  std::map<std::string, const Node*> producer;
  for (const auto& n : merged->graph->nodes())
    for (const Value* v : n->outputs()) producer[v->name()] = n.get();
  for (const char* weight : {"fc1.weight", "fc2.weight"}) {
    const Node* f = producer.at(std::string(weight) + ".updated");
    EXPECT_EQ(fusion_kind(*f), FusionKind::Pointwise) << weight;
    EXPECT_EQ(f, producer.at(std::string(weight) + ".m.updated")) << weight;
  }
  for (const char* bias : {"fc1.bias", "fc2.bias"})
    EXPECT_EQ(fusion_kind(*producer.at(std::string(bias) + ".updated")), FusionKind::Reduction) << bias;
  expect_same_outputs(*reference->graph, *merged->graph, random_inputs(*reference->graph, 4, 5), 1e-6);
}

// Relu's gradient reads its output, not its input, so the training step needs
// no pre-activation: the forward's Relu stays the epilogue of fc1's Gemm, one
// kernel as in inference, and the step still computes what the unfused one does.
TEST(FuseTrainingStep, ReluStaysInItsGemmsEpilogue) {
  std::unique_ptr<Model> reference = training_step("tests/fixtures/mlp.onnx", "output", OptimizerKind::Adam);
  std::unique_ptr<Model> fused = training_step("tests/fixtures/mlp.onnx", "output", OptimizerKind::Adam);
  run_passes(*fused, kFusePipeline);
  const Node* relu_fusion = nullptr;
  for (const auto& n : fused->graph->nodes())
    if (is_fusion(*n))
      for (const auto& b : fusion_body(*n).nodes())
        if (b->name() == "/relu/Relu") relu_fusion = n.get();
  ASSERT_NE(relu_fusion, nullptr) << "/relu/Relu is in no fusion";
  EXPECT_EQ(fusion_kind(*relu_fusion), FusionKind::Gemm);
  std::set<std::string> body;
  for (const auto& b : fusion_body(*relu_fusion).nodes()) body.insert(b->name());
  EXPECT_EQ(body, (std::set<std::string>{"/fc1/Gemm", "/relu/Relu"}));
  expect_same_outputs(*reference->graph, *fused->graph, random_inputs(*reference->graph, 4, 7), 1e-6);
}

// The captioning model's training step joins forward reductions with backward
// nodes in one fusion group (LogSoftmax with its gradient); fuse used to cut
// its cycle check short by graph order there and create a cycle. The fused
// step computes what the unfused one does.
TEST(FuseTrainingStep, CaptioningStepFusesWithoutACycle) {
  std::unique_ptr<Model> reference = load_model(std::string(TCC_SOURCE_DIR) + "/examples/train_captioning/model.onnx");
  TrainOptions opts;
  opts.loss_output = "loss";
  opts.optimizer.kind = OptimizerKind::AdamW;
  build_training_graph(*reference, opts);
  std::unique_ptr<Model> fused = load_model(std::string(TCC_SOURCE_DIR) + "/examples/train_captioning/model.onnx");
  build_training_graph(*fused, opts);
  run_passes(*fused, "");  // the whole pipeline, as tcc compile runs it
  std::map<std::string, Tensor> inputs = random_inputs(*reference->graph, 2, 21);
  std::mt19937 rng(4);
  for (const char* ids : {"decoder_input_ids", "labels"}) {
    Tensor& t = inputs.at(ids);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, static_cast<double>(rng() % 64));
  }
  inputs.at("labels").set_f64(0, -100);  // padding counts for nothing
  // The loss and the moments (linear and quadratic in the gradients) are
  // compared; the parameters' Adam steps m / sqrt(v) would magnify rounding
  // in gradients that are zero but for it (the keys' biases under softmax).
  std::vector<Tensor> expected = Interpreter().run(*reference->graph, inputs);
  std::vector<Tensor> actual = Interpreter().run(*fused->graph, inputs);
  ASSERT_EQ(actual.size(), expected.size());
  int compared = 0;
  for (size_t o = 0; o < expected.size(); ++o) {
    const std::string& name = reference->graph->outputs()[o]->name();
    if (name != "loss" && name.find(".m.updated") == std::string::npos && name.find(".v.updated") == std::string::npos)
      continue;
    ++compared;
    for (int64_t i = 0; i < expected[o].numel(); ++i)
      ASSERT_NEAR(actual[o].get_f64(i), expected[o].get_f64(i), 1e-5 * (1 + std::fabs(expected[o].get_f64(i))))
          << name << " element " << i;
  }
  // 60 parameters: the model's 62 float initializers but its two attentions' scales, which
  // fuse_attention folds into their tcc::Attention before anything is differentiated.
  EXPECT_EQ(compared, 1 + 2 * 60);
}

struct RecomputeCase {
  const char* name;
  const char* path;
  const char* loss_on;
  std::map<std::string, int64_t> sizes;
  // Whether the cut recomputes. On the MLP every value the backward reads (a
  // Relu's output, the loss's operands) costs as much to save as what it is
  // computed from, so the cut nearest the backward saves exactly those and the
  // step is save-all's. On the transformer block, where saved activations
  // dominate, it recomputes, saves less and must peak no higher.
  bool recomputes;
};

void PrintTo(const RecomputeCase& c, std::ostream* os) { *os << c.name; }

class Recompute : public ::testing::TestWithParam<RecomputeCase> {};

TEST_P(Recompute, MinCutComputesTheSameStep) {
  const RecomputeCase& c = GetParam();
  std::unique_ptr<Model> reference = training_step(c.path, c.loss_on, OptimizerKind::Adam);
  std::unique_ptr<Model> rewritten = training_step(c.path, c.loss_on, OptimizerKind::Adam);
  run_passes(*rewritten, optimize_and_recompute());
  int recomputed = 0;
  for (const auto& n : rewritten->graph->nodes()) recomputed += n->name().rfind("recompute/", 0) == 0;
  EXPECT_EQ(recomputed > 0, c.recomputes) << recomputed << " nodes recomputed on " << c.name;
  std::map<std::string, Tensor> inputs = random_inputs(*reference->graph, c.sizes.begin()->second, 9);
  expect_same_outputs(*reference->graph, *rewritten->graph, inputs, 1e-6);

  SavedActivations s = compare_saved_activations(*reference, c.sizes);
  EXPECT_GT(s.save_all_peak, 0);
  EXPECT_GT(s.min_cut_peak, 0);
  EXPECT_EQ(s.recomputed_nodes, recomputed);
  if (c.recomputes) {
    EXPECT_LE(s.min_cut_peak, s.save_all_peak);
    EXPECT_LT(s.saved_values, s.backward_reads);
  } else {
    EXPECT_EQ(s.min_cut_peak, s.save_all_peak);
    EXPECT_EQ(s.saved_values, s.backward_reads);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Recompute,
                         ::testing::Values(RecomputeCase{"mlp", "tests/fixtures/mlp.onnx", "output", {{"batch", 64}}, false},
                                           RecomputeCase{"gpt2_block", "tests/fixtures/gpt2_block.onnx", "output",
                                                         {{"batch", 4}, {"seq", 128}}, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tcc
