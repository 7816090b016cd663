// The ONNX exporter (frontends/onnx/onnx_exporter.h) against the importer:
// a model written out and read back has the same nodes, attributes, types and
// weights, and computes bitwise the same outputs in the reference interpreter;
// forward fixtures and training steps alike, and fused graphs with tcc-domain
// ops and regions. `--emit-onnx` on explain and compile writes the same bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <sstream>

#include "frontends/load_model.h"
#include "frontends/onnx/onnx_exporter.h"
#include "frontends/onnx/onnx_importer.h"
#include "passes/pass_manager.h"
#include "src/autodiff/autodiff.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/runtime/module_test_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + name + ".onnx"; }

// Writes m, reads it back, and checks structure (a training step's parts too: node metadata) and outputs.
void expect_round_trip(const Model& m, int64_t size) {
  std::unique_ptr<Model> back = import_onnx_bytes(export_onnx_bytes(m), "exported.onnx");
  const Graph& a = *m.graph;
  const Graph& b = *back->graph;
  ASSERT_EQ(a.nodes().size(), b.nodes().size());
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    const Node& x = *a.nodes()[i];
    const Node& y = *b.nodes()[i];
    EXPECT_EQ(x.name(), y.name());
    EXPECT_EQ(x.op_type(), y.op_type());
    EXPECT_EQ(x.domain(), y.domain());
    EXPECT_EQ(x.source(), y.source());
    EXPECT_EQ(x.part(), y.part()) << x.name();
    ASSERT_EQ(x.attrs().size(), y.attrs().size()) << x.name();
    for (size_t o = 0; o < x.num_outputs(); ++o) {
      EXPECT_EQ(x.output(o)->name(), y.output(o)->name());
      EXPECT_EQ(x.output(o)->type(), y.output(o)->type()) << x.output(o)->name();
    }
  }
  ASSERT_EQ(a.outputs().size(), b.outputs().size());
  for (size_t o = 0; o < a.outputs().size(); ++o) EXPECT_EQ(a.outputs()[o]->name(), b.outputs()[o]->name());
  EXPECT_EQ(a.opsets(), b.opsets());

  // An input with a default comes back as an initializer (the importer reads
  // initializers listed as inputs as weights), so both run on the inputs
  // without defaults.
  std::map<std::string, Tensor> inputs = random_inputs(a, size, 7);
  std::vector<Tensor> ra = Interpreter().run(a, inputs);
  std::vector<Tensor> rb = Interpreter().run(b, inputs);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t o = 0; o < ra.size(); ++o) {
    ASSERT_EQ(ra[o].shape(), rb[o].shape());
    for (int64_t i = 0; i < ra[o].numel(); ++i)
      ASSERT_EQ(ra[o].get_f64(i), rb[o].get_f64(i)) << a.outputs()[o]->name() << " element " << i;
  }
}

TEST(OnnxExport, ForwardFixturesRoundTrip) {
  for (const char* name : {"mlp", "gpt2_block", "resnet_small"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> m = load_model(fixture(name));
    infer_shapes(*m->graph);
    expect_round_trip(*m, 2);
  }
}

TEST(OnnxExport, TrainingStepsRoundTrip) {
  for (OptimizerKind kind : {OptimizerKind::None, OptimizerKind::Momentum, OptimizerKind::AdamW}) {
    SCOPED_TRACE(optimizer_name(kind));
    std::unique_ptr<Model> m = load_model(fixture("gpt2_block"));
    TrainOptions opts;
    opts.builtin_loss = BuiltinLoss{LossKind::Mse, m->graph->outputs()[0]->name(), "target"};
    opts.optimizer.kind = kind;
    build_training_graph(*m, opts);
    infer_shapes(*m->graph);
    expect_round_trip(*m, 3);
  }
}

// Fused graphs carry tcc::Fusion nodes (domain "tcc", opset 1) whose bodies
// are GRAPH attributes, and symbolic dims as dim_param expressions.
TEST(OnnxExport, FusedGraphWithTccOpsRoundTrips) {
  std::unique_ptr<Model> m = load_model(fixture("gpt2_block"));
  infer_shapes(*m->graph);
  std::ostringstream report;
  PassManager(build_pipeline("", Phase::Fuse), PassManagerOptions{}, report).run(*m);
  ASSERT_TRUE(m->graph->opsets().count("tcc"));
  std::unique_ptr<Model> back = import_onnx_bytes(export_onnx_bytes(*m), "fused.onnx");
  back->producer = m->producer;  // the exporter writes itself as the producer
  EXPECT_EQ(print_model(*m), print_model(*back));
  expect_round_trip(*m, 2);
}

TEST(OnnxExport, EmitOnnxFlag) {
  fs::path dir = make_temp_dir("tcc_emit_onnx");
  std::string model = shell_quote(fixture("mlp"));
  std::string train = " --train --loss-fn mse --loss-on output --label target --optimizer sgd";
  CliResult r = run_tcc("explain " + model + train + " --emit-onnx " + shell_quote((dir / "a.onnx").string()) +
                        " -o /dev/null");
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_tcc("compile " + model + " -o " + shell_quote((dir / "module").string()) + train + " --emit-onnx " +
              shell_quote((dir / "b.onnx").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  std::string a = read_text(dir / "a.onnx");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, read_text(dir / "b.onnx"));  // both write the training step as built, before any pass
  std::unique_ptr<Model> step = import_onnx_file((dir / "a.onnx").string());
  EXPECT_EQ(step->graph->outputs()[0]->name(), "loss");
  EXPECT_TRUE(step->graph->find("lr") && step->graph->find("lr")->is_graph_input());

  r = run_tcc("explain " + model + " --emit-onnx /nonexistent-dir/x.onnx -o /dev/null");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent-dir/x.onnx: cannot open for writing"), std::string::npos) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
