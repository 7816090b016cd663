// The recurrent ops compiled (tests/fixtures/recurrent_ops.tir): over a static
// sequence they unroll into MatMuls and pointwise kernels, so the module has
// no host step, and its host build, in f32, matches the interpreter's f64
// reference kernels.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(RecurrentCompile, UnrollOntoKernelsAndMatchTheInterpreter) {
  const fs::path model_path = fs::path(TCC_SOURCE_DIR) / "tests/fixtures/recurrent_ops.tir";
  fs::path dir = make_temp_dir("tcc_recurrent_ops");
  compile_with_no_host_step(model_path, dir / "module");
  if (HasFatalFailure()) return;
  std::unique_ptr<Model> model = load_model(model_path.string());
  infer_shapes(*model->graph);
  std::mt19937 rng(7);
  for (int64_t b : {2, 5}) {
    std::map<std::string, Tensor> inputs;
    for (const Value* in : model->graph->inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : in->type().shape()) shape.push_back(*d.expr().evaluate({{"b", b}}));
      Tensor t(in->type().dtype(), shape);
      // Lengths over [0, 3], a full sequence among them; the rest around 0.
      std::uniform_int_distribution<int> length(0, 3);
      std::uniform_real_distribution<double> value(-1, 1);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set_f64(i, in->name() == "lens" ? (i == 0 ? 3 : length(rng)) : value(rng));
      inputs.emplace(in->name(), std::move(t));
    }
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<Tensor> got = run_module_on_host(dir / "module", inputs);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t o = 0; o < got.size(); ++o)
      expect_close_to(got[o], expected[o], model->graph->outputs()[o]->name() + " at b=" + std::to_string(b),
                      "interpreter");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
