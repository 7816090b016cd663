// The fused attention backward (tcc::AttentionGrad, src/ops/attention_grad.cc)
// against the gradients autodiff takes through Attention's decomposition,
// which GradRule.MatchesFiniteDifferences checks against finite differences:
// the same model in f32 takes the fused passes, in f64 (which the fused
// kernels do not take) the decomposition, and their gradients agree. The
// fused backward reads the log-sum-exp its forward saved and runs the passes
// each case names: dK and dV from one pass where both are wanted.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tests/unit/transforms/grad_check.h"

namespace tcc {
namespace {

struct FusedCase {
  std::string name;
  std::string decls;  // `$T` for the float dtype
  std::string body;   // computes %y of type `ytype`
  std::string ytype;
  bool fused;  // whether the f32 model takes the fused backward
  std::string passes;  // then its passes' wrt, in graph order
};

std::ostream& operator<<(std::ostream& os, const FusedCase& c) { return os << c.name; }

// `text` with every `$T` replaced by `dtype`.
std::string with_dtype(std::string text, const std::string& dtype) {
  for (size_t at = text.find("$T"); at != std::string::npos; at = text.find("$T")) text.replace(at, 2, dtype);
  return text;
}

// The training graph (no optimizer: the loss and each parameter's gradient)
// of the case's model in `dtype`, its loss sum(y * r).
std::unique_ptr<Model> training_model(const FusedCase& c, const std::string& dtype) {
  const std::string text = "graph main opset(ai.onnx: 23) {\n" + c.decls + "  const %r: " + c.ytype + " = $R\n" +
                           c.body + "  %p: " + c.ytype + " = Mul(%y, %r)\n" +
                           "  %loss: $T[] = ReduceSum(%p) {keepdims = 0}\n  output %loss\n}\n";
  std::unique_ptr<Model> m = parse_model(with_dtype(fill_random(text, 5), dtype));
  TrainOptions opts;
  opts.loss_output = "loss";
  opts.param_patterns = {"w*"};
  build_training_graph(*m, opts);
  EXPECT_EQ(verify(*m->graph), std::vector<std::string>{});
  return m;
}

size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

class FusedAttentionBackward : public ::testing::TestWithParam<FusedCase> {};

TEST_P(FusedAttentionBackward, MatchesTheDecompositionsGradients) {
  const FusedCase& c = GetParam();
  std::unique_ptr<Model> fused = training_model(c, "f32");
  std::unique_ptr<Model> decomposed = training_model(c, "f64");
  EXPECT_EQ(count_ops(*fused->graph, "AttentionGrad") > 0, c.fused);
  EXPECT_EQ(count_ops(*fused->graph, "Softmax") > 0, !c.fused);
  EXPECT_EQ(count_ops(*decomposed->graph, "AttentionGrad"), 0u);
  // The forward saves its rows' log-sum-exp, which the statistics pass reads.
  const Node* forward = nullptr;
  std::string passes;
  for (const auto& n : fused->graph->nodes()) {
    if (n->op_type() == "Attention") forward = n.get();
    if (n->op_type() != "AttentionGrad") continue;
    passes += (passes.empty() ? "" : ",") + n->get_string("wrt", "");
    if (n->get_string("wrt", "") == "stats") {
      ASSERT_NE(forward, nullptr);
      ASSERT_EQ(forward->num_outputs(), 2u);
      EXPECT_EQ(n->input(6), forward->output(1));
    }
  }
  EXPECT_EQ(passes, c.passes);

  Interpreter interp;
  std::vector<Tensor> got = interp.run(*fused->graph, {});
  std::vector<Tensor> want = interp.run(*decomposed->graph, {});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    const std::string& name = decomposed->graph->outputs()[o]->name();
    ASSERT_EQ(got[o].shape(), want[o].shape()) << name;
    double largest = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) largest = std::max(largest, std::fabs(want[o].get_f64(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i)
      EXPECT_NEAR(got[o].get_f64(i), want[o].get_f64(i), 1e-5 * (1 + largest)) << name << "[" << i << "]";
  }
}

const FusedCase kCases[] = {
    {"gqa_causal",
     "  const %wq: $T[2, 4, 5, 8] = $R\n  const %wk: $T[2, 2, 5, 8] = $R\n  const %wv: $T[2, 2, 5, 6] = $R\n",
     "  %y: $T[2, 4, 5, 6] = Attention(%wq, %wk, %wv) {is_causal = 1}\n", "$T[2, 4, 5, 6]", true, "stats,q,kv"},
    // One parameter in all three slots: its gradient sums dQ, dK and dV; the mask is a constant.
    {"3d_additive_mask",
     "  const %w: $T[2, 4, 12] = $R\n  const %m: $T[4, 4] = $R\n",
     "  %y: $T[2, 4, 12] = Attention(%w, %w, %w, %m) {q_num_heads = 3, kv_num_heads = 3, scale = 0.3}\n",
     "$T[2, 4, 12]", true, "stats,q,kv"},
    // Query row 1 sees no key: its row passes no gradient.
    {"bool_mask_hidden_row",
     "  const %wq: $T[1, 2, 3, 4] = $R\n  const %wkv: $T[1, 2, 5, 4] = $R\n"
     "  const %m: bool[3, 5] = [true, false, true, true, false, false, false, false, false, false, true, true, "
     "false, true, true]\n",
     "  %y: $T[1, 2, 3, 4] = Attention(%wq, %wkv, %wkv, %m)\n", "$T[1, 2, 3, 4]", true, "stats,q,kv"},
    {"softcap_causal",
     "  const %wq: $T[1, 2, 4, 6] = $R\n  const %wk: $T[1, 2, 4, 6] = $R\n",
     "  %y: $T[1, 2, 4, 6] = Attention(%wq, %wk, %wk) {is_causal = 1, scale = 2.0, softcap = 1.5}\n",
     "$T[1, 2, 4, 6]", true, "stats,q,kv"},
    // V is no parameter: dK alone; Q and K no parameters: dV alone.
    {"frozen_values",
     "  const %wq: $T[1, 2, 4, 6] = $R\n  const %wk: $T[1, 1, 4, 6] = $R\n  const %v: $T[1, 1, 4, 3] = $R\n",
     "  %y: $T[1, 2, 4, 3] = Attention(%wq, %wk, %v) {is_causal = 1}\n", "$T[1, 2, 4, 3]", true, "stats,q,k"},
    {"values_only",
     "  const %q: $T[1, 2, 4, 6] = $R\n  const %k: $T[1, 2, 4, 6] = $R\n  const %wv: $T[1, 2, 4, 5] = $R\n",
     "  %y: $T[1, 2, 4, 5] = Attention(%q, %k, %wv)\n", "$T[1, 2, 4, 5]", true, "stats,v"},
    // A trained additive mask (a learned bias) needs the scores' gradient: the decomposition's.
    {"trained_mask",
     "  const %wq: $T[1, 2, 3, 4] = $R\n  const %wk: $T[1, 2, 3, 4] = $R\n  const %wm: $T[3, 3] = $R\n",
     "  %y: $T[1, 2, 3, 4] = Attention(%wq, %wk, %wk, %wm)\n", "$T[1, 2, 3, 4]", false, ""},
};

INSTANTIATE_TEST_SUITE_P(Autodiff, FusedAttentionBackward, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FusedCase>& i) { return i.param.name; });

}  // namespace
}  // namespace tcc
