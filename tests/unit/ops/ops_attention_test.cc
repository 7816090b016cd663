// Attention (src/ops/attention.cc): bad operands named, by the shape rule and
// the reference kernel. tests/unit/compiler/attention_compile_test.cc checks its
// decomposition and fused kernel against the reference kernel; the ONNX node
// tests (test_attention_*) check the reference kernel and, compiled, the fused
// kernel or the decomposition; tests/unit/autotune/schedule_emulation_test.cc runs
// the kernel's CUDA under the emulator.
#include <gtest/gtest.h>

#include <string>

#include "src/diag/errors.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

std::string infer_error(const char* text) {
  return input_error([&] {
    auto m = parse_model(text, "bad.tir");
    infer_shapes(*m->graph);
  });
}

TEST(AttentionOp, BadOperandsAreNamed) {
  EXPECT_NE(infer_error(R"(graph main opset(ai.onnx: 23) {
  input %q: f32[2, 5, 12]
  input %k: f32[2, 5, 12]
  input %v: f32[2, 5, 12]
  %y: f32[2, 5, 12] = Attention(%q, %k, %v) name("attn")
  output %y
})").find("3-D Q, K and V need a positive q_num_heads attribute, got none"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(graph main opset(ai.onnx: 23) {
  input %q: f32[2, 6, 5, 8]
  input %k: f32[2, 4, 5, 8]
  input %v: f32[2, 4, 5, 8]
  %y: f32[2, 6, 5, 8] = Attention(%q, %k, %v) name("attn")
  output %y
})").find("Q's 6 heads are not a multiple of K's and V's 4"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(graph main opset(ai.onnx: 23) {
  input %q: f32[2, 6, 5, 8]
  input %k: f32[2, 0, 5, 8]
  input %v: f32[2, 0, 5, 8]
  %y: f32[2, 6, 5, 8] = Attention(%q, %k, %v) name("attn")
  output %y
})").find("Q, K and V need at least one head, got 0"),
            std::string::npos);
  EXPECT_NE(infer_error(R"(graph main opset(ai.onnx: 23) {
  input %q: f32[2, 2, 5, 8]
  input %k: f32[2, 2, 5, 4]
  input %v: f32[2, 2, 5, 8]
  %y: f32[2, 2, 5, 8] = Attention(%q, %k, %v) name("attn")
  output %y
})").find("Q's and K's head sizes differ: 4 and 8"),
            std::string::npos);
}

// A mask that does not broadcast onto the scores fails in the interpreter, naming the node.
TEST(AttentionOp, MaskThatDoesNotBroadcastIsNamed) {
  auto m = parse_model(R"(graph main opset(ai.onnx: 23) {
  input %q: f32[1, 2, 3, 4]
  input %k: f32[1, 2, 3, 4]
  input %v: f32[1, 2, 3, 4]
  input %m: f32[a, 3]
  %y: f32[1, 2, 3, 4] = Attention(%q, %k, %v, %m) name("attn")
  output %y
})",
                       "bad.tir");
  infer_shapes(*m->graph);
  auto in = testing::random_normal_inputs(*m->graph, {{"a", 2}}, 1);
  const std::string what = input_error([&] { Interpreter().run(*m->graph, in); });
  EXPECT_NE(what.find("attn"), std::string::npos) << what;
  EXPECT_NE(what.find("attn_mask [2, 3] does not broadcast onto the scores [1, 2, 3, 3]"),
            std::string::npos) << what;
}

}  // namespace
}  // namespace tcc
