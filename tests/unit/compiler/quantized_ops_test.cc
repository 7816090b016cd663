// The integer and quantized ops compiled (tests/fixtures/quantized_ops.tir):
// they decompose onto kernels and the f64 library products, so the module
// has no host step, and its host build gives the interpreter's integers
// exactly, over the full ranges of its int8 and uint8 inputs.
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

TEST(QuantizedOps, DecomposeOntoKernelsAndMatchTheInterpreterExactly) {
  const fs::path model_path = fs::path(TCC_SOURCE_DIR) / "tests/fixtures/quantized_ops.tir";
  fs::path dir = make_temp_dir("tcc_quantized_ops");
  compile_with_no_host_step(model_path, dir / "module");
  if (HasFatalFailure()) return;
  std::unique_ptr<Model> model = load_model(model_path.string());
  infer_shapes(*model->graph);
  std::mt19937 rng(5);
  for (int64_t b : {2, 5}) {
    std::map<std::string, Tensor> inputs;
    for (const Value* in : model->graph->inputs()) {
      if (in->is_initializer()) continue;
      std::vector<int64_t> shape;
      for (const Dim& d : in->type().shape()) shape.push_back(*d.expr().evaluate({{"b", b}}));
      Tensor t(in->type().dtype(), shape);
      // Integers over their whole range, scales in [0.01, 0.1), x around 0.
      std::uniform_real_distribution<double> value(t.dtype() == DType::I8 ? -128 : 0,
                                                    t.dtype() == DType::I32 ? 4096 : 256);
      std::uniform_real_distribution<double> scale(0.01, 0.1), x(-3, 5);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.set_f64(i, in->name() == "x" ? x(rng) : is_float(t.dtype()) ? scale(rng) : std::floor(value(rng)));
      inputs.emplace(in->name(), std::move(t));
    }
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<Tensor> got = run_module_on_host(dir / "module", inputs);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t o = 0; o < got.size(); ++o) {
      const std::string name = model->graph->outputs()[o]->name();
      ASSERT_EQ(got[o].shape(), expected[o].shape()) << name;
      ASSERT_EQ(got[o].dtype(), expected[o].dtype()) << name;
      int64_t differ = 0;
      for (int64_t i = 0; i < got[o].numel(); ++i) differ += got[o].get_f64(i) != expected[o].get_f64(i);
      EXPECT_EQ(differ, 0) << name << " at b=" << b << ": " << differ << " of " << got[o].numel() << " differ";
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
