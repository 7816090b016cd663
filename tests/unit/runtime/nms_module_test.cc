// NonMaxSuppression compiled (tests/fixtures/nms.tir): each node is an NMS
// kernel (codegen/nms_template.h) around the one host step that binds its
// count, and the module's host build selects exactly the interpreter's boxes
// over a thousand boxes a class, ties in scores and NaN included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"
#include "tests/unit/runtime/module_test_util.h"
#include "tests/unit/support/compile_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

// Boxes a few units wide over a field of 100, so that neighbours overlap:
// corners [y1, x1, y2, x2] at either diagonal, centers [x, y, width, height].
// Scores of 40 levels (ties everywhere), one in 200 NaN.
std::map<std::string, Tensor> nms_inputs(int64_t n, int64_t max_boxes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> at(0, 100), extent(1, 12);
  Tensor boxes(DType::F32, {1, n, 4}), centers(DType::F32, {1, n, 4}), scores(DType::F32, {1, 2, n});
  for (int64_t i = 0; i < n; ++i) {
    const float y = at(rng), x = at(rng), h = extent(rng), w = extent(rng);
    const bool flipped = rng() % 2 == 0;
    const float corners[4] = {flipped ? y + h : y, x, flipped ? y : y + h, x + w};
    for (int64_t c = 0; c < 4; ++c) boxes.set_f64(i * 4 + c, corners[c]);
    const float middle[4] = {x, y, w, h};
    for (int64_t c = 0; c < 4; ++c) centers.set_f64(i * 4 + c, middle[c]);
  }
  for (int64_t i = 0; i < scores.numel(); ++i)
    scores.set_f64(i, rng() % 200 == 0 ? std::nan("") : static_cast<double>(rng() % 40) / 40);
  return {{"boxes", boxes},
          {"centers", centers},
          {"scores", scores},
          {"max_boxes", Tensor::from_i64({max_boxes}, {1})},
          {"iou", Tensor::from_f32({0.3f}, {1})},
          {"score_min", Tensor::from_f32({0.2f}, {1})}};
}

class NmsModule : public TempDirTest {};

TEST_F(NmsModule, KernelsAroundOneHostStepEachMatchTheInterpreterExactly) {
  const std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/nms.tir";
  CompileResult r = compile_model(model_path, dir_ / "module", quick_compile_options());
  EXPECT_EQ(r.fallbacks.size(), 2u);
  for (const FallbackReason& f : r.fallbacks) EXPECT_EQ(f.op_type, "ConstantOfShape") << f.node;
  std::ifstream in(dir_ / "module" / "manifest.json");
  const nlohmann::json manifest = nlohmann::json::parse(in);
  int nms_kernels = 0;
  for (const nlohmann::json& k : manifest["kernels"]) nms_kernels += k["kind"] == "nms";
  EXPECT_EQ(nms_kernels, 2);
  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load((dir_ / "module").c_str(), &m), TCC_OK) << tcc_last_error();
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  // A thousand boxes with a limit that cuts the selection short, and 300 with one that does not.
  for (auto [n, max_boxes] : {std::pair<int64_t, int64_t>{1000, 60}, {300, 1000}}) {
    std::map<std::string, Tensor> inputs = nms_inputs(n, max_boxes, static_cast<uint32_t>(n));
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<tcc_tensor> ins = module_inputs(m, inputs);
    OutputAllocation a;
    a.tensors.assign(expected.size(), Tensor(DType::I64, {0, 3}));
    std::vector<tcc_tensor> outs = c_tensors(a.tensors);
    for (tcc_tensor& t : outs) t.data = nullptr;  // from the allocator
    ASSERT_EQ(tcc_module_set_output_allocator(m, &OutputAllocation::allocate, &a), TCC_OK);
    ASSERT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), outs.data(), outs.size()), TCC_OK) << tcc_last_error();
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string what = model->graph->outputs()[i]->name() + " n=" + std::to_string(n);
      EXPECT_GT(expected[i].shape()[0], 20) << what;
      ASSERT_EQ(a.tensors[i].shape(), expected[i].shape()) << what;
      for (int64_t e = 0; e < expected[i].numel(); ++e)
        ASSERT_EQ(a.tensors[i].get_i64(e), expected[i].get_i64(e)) << what << " element " << e;
    }
  }
  tcc_module_free(m);
}

}  // namespace
}  // namespace tcc
