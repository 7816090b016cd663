// Attention (src/ops/attention.cc) compiled: its decomposition against the
// reference kernel with symbolic dims, and the fused kernel's module (one
// kernel, no intermediate) against the interpreter.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "passes/pass_manager.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

// Grouped-query causal attention over 4-D heads: 4 query heads share 2 kv heads.
constexpr const char* kGqaCausal = R"(graph main opset(ai.onnx: 23) {
  input %q: f32[batch, 4, seq, 8]
  input %k: f32[batch, 2, seq, 8]
  input %v: f32[batch, 2, seq, 6]
  %y: f32[batch, 4, seq, 6] = Attention(%q, %k, %v) {is_causal = 1}
  output %y
})";

// 3-D operands with a boolean [seq, seq] mask, a scale and soft-capping.
constexpr const char* kMasked3d = R"(graph main opset(ai.onnx: 23) {
  input %q: f32[batch, seq, 12]
  input %k: f32[batch, seq, 12]
  input %v: f32[batch, seq, 12]
  input %m: bool[seq, seq]
  %y: f32[batch, seq, 12] = Attention(%q, %k, %v, %m) {q_num_heads = 3, kv_num_heads = 3, scale = 0.3, softcap = 2.5}
  output %y
})";

// An additive float mask and a cache of past keys and values, causal.
constexpr const char* kCachedCausal = R"(graph main opset(ai.onnx: 23) {
  input %q: f32[batch, 2, seq, 4]
  input %k: f32[batch, 2, seq, 4]
  input %v: f32[batch, 2, seq, 4]
  input %m: f32[batch, 1, seq, seq+3]
  input %pk: f32[batch, 2, 3, 4]
  input %pv: f32[batch, 2, 3, 4]
  %y: f32[batch, 2, seq, 4] = Attention(%q, %k, %v, %m, %pk, %pv) {is_causal = 1}
  output %y
})";

// A float mask shorter than the 6 keys: ONNX pads it with -inf, hiding the last 2.
constexpr const char* kShortMask = R"(graph main opset(ai.onnx: 23) {
  input %q: f32[batch, 2, seq, 4]
  input %k: f32[batch, 2, 6, 4]
  input %v: f32[batch, 2, 6, 4]
  input %m: f32[batch, 1, seq, 4]
  %y: f32[batch, 2, seq, 4] = Attention(%q, %k, %v, %m)
  output %y
})";

void decompose(Model& m) {
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager(build_pipeline("decompose", Phase::Fuse), options, report).run(m);
}

void expect_near(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.numel(); ++i) ASSERT_NEAR(got.get_f64(i), want.get_f64(i), tol) << what << " element " << i;
}

// The pieces where the fused kernel does not apply: f64 operands (the same
// graphs with f64 for f32), a cache and a mask shorter than the keys.
TEST(AttentionOp, DecomposedPiecesComputeTheOpWithSymbolicDims) {
  for (std::string text :
       {std::string(kGqaCausal), std::string(kMasked3d), std::string(kCachedCausal), std::string(kShortMask)}) {
    for (size_t at; (at = text.find("f32")) != std::string::npos;) text.replace(at, 3, "f64");
    auto original = parse_model(text, "a.tir");
    infer_shapes(*original->graph);
    auto decomposed = parse_model(text, "a.tir");
    infer_shapes(*decomposed->graph);
    decompose(*decomposed);
    for (const auto& n : decomposed->graph->nodes()) ASSERT_NE(n->op_type(), "Attention") << "not decomposed:\n" << text;
    for (int64_t seq : {1, 5}) {
      auto in = testing::random_normal_inputs(*original->graph, {{"batch", 2}, {"seq", seq}}, 11);
      Tensor want = Interpreter().run(*original->graph, in).at(0);
      Tensor got = Interpreter().run(*decomposed->graph, in).at(0);
      expect_near(got, want, 1e-9, text + "\nseq " + std::to_string(seq));
    }
  }
}

// The fused kernel's host build (codegen/attention_template.h) against the reference kernel.
TEST(AttentionOp, CompilesToOneKernelAndMatchesTheInterpreter) {
  std::filesystem::path dir = make_temp_dir("tcc_attention");
  // The cache and the short mask leave the node to its decomposition: kernels without a host step.
  struct Case {
    const char* name;
    const char* text;
    bool fused;
  };
  for (const auto& [name, text, fused] :
       {Case{"gqa_causal", kGqaCausal, true}, Case{"masked_3d", kMasked3d, true}, Case{"cached", kCachedCausal, false},
        Case{"short_mask", kShortMask, false}}) {
    std::filesystem::path model = dir / (std::string(name) + ".tir");
    std::ofstream(model) << text;
    CompileResult r = compile_model(model, dir / name, quick_compile_options());
    EXPECT_TRUE(r.fallbacks.empty()) << name << " has a host step";
    if (fused) {
      // One attention kernel, and no intermediate (the [batch, heads, seq, seq] scores) in the memory plan.
      ASSERT_EQ(r.schedule.kernels.size(), 1u) << name;
      EXPECT_EQ(r.schedule.kernels[0].kind, kir::Kind::Attention) << name;
      EXPECT_TRUE(r.memory.buffers.empty()) << name;
    }
    auto parsed = parse_model(text, model.string());
    infer_shapes(*parsed->graph);
    auto in = testing::random_normal_inputs(*parsed->graph, {{"batch", 3}, {"seq", 7}}, 5);
    Tensor want = Interpreter().run(*parsed->graph, in).at(0);
    std::vector<Tensor> got = run_module_on_host(dir / name, in);
    ASSERT_EQ(got.size(), 1u);
    expect_close_to(got[0], want, name, "the interpreter");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tcc
