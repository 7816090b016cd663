// The optimization passes checked by meaning, Glow style: each pass runs on
// small graphs built to make it fire, and on the exported fixtures, and the
// reference interpreter must compute the same outputs before and after on
// random inputs (float: within 1e-5 relative to the output's scale; other
// dtypes exactly). Structure is checked by tests/passes/*.tir; this file
// checks that the structure computes the same thing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <utility>

#include "frontends/load_model.h"
#include "frontends/onnx/tensor_io.h"
#include "passes/pass_manager.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"

namespace tcc {
namespace {

using Inputs = std::map<std::string, Tensor>;

// Random data for every graph input without a default: floats in [-2, 2],
// integers in [0, 4], bools either way. Inputs must have static shapes.
Inputs random_inputs(const Graph& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int64_t> integer(0, 4);
  Inputs in;
  for (const Value* v : g.inputs()) {
    if (v->is_initializer()) continue;
    const Type& t = v->type();
    EXPECT_TRUE(t.is_tensor() && t.fully_static()) << v->name() << ": " << t.str();
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape()) shape.push_back(d.value());
    Tensor x(t.dtype(), shape);
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (is_float(t.dtype())) x.set_f64(i, real(rng));
      else if (t.dtype() == DType::Bool) x.set_i64(i, integer(rng) % 2);
      else x.set_i64(i, integer(rng));
    }
    in.emplace(v->name(), x);
  }
  return in;
}

// Float outputs agree within 1e-5 of the larger of the element and the
// tensor's largest magnitude (sums that cancel to near zero carry the error
// of their terms, not of their result); everything else exactly.
void expect_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(want[o].dtype(), got[o].dtype()) << what << " output " << o;
    ASSERT_EQ(want[o].shape(), got[o].shape()) << what << " output " << o;
    if (!is_float(want[o].dtype())) {
      EXPECT_TRUE(want[o].identical(got[o])) << what << " output " << o;
      continue;
    }
    double scale = 0;
    for (int64_t i = 0; i < want[o].numel(); ++i) scale = std::max(scale, std::fabs(want[o].get_f64(i)));
    for (int64_t i = 0; i < want[o].numel(); ++i) {
      double w = want[o].get_f64(i), g = got[o].get_f64(i);
      if (std::isnan(w)) {
        EXPECT_TRUE(std::isnan(g)) << what << " output " << o << " element " << i;
        continue;
      }
      ASSERT_LE(std::fabs(w - g), 1e-5 * std::max(std::fabs(w), scale)) << what << " output " << o << " element " << i
                                                                         << ": " << w << " vs " << g;
    }
  }
}

size_t count_ops(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes()) n += node->op_type() == op;
  return n;
}

// Runs `passes` (verifier on) over m; returns whether anything changed.
bool optimize(Model& m, const std::string& passes) {
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager pm(build_pipeline(passes), options, report);
  return pm.run(m);
}

struct Case {
  const char* name;
  const char* passes;
  const char* text;
};

// Each graph is built so that its pass fires; the interpreter is the oracle.
const Case kCases[] = {
    {"canonicalize", "canonicalize", R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 3, 4]
  input %v: f32[3, 4]
  const %c: f32[4] = [1.0, -2.0, 3.0, 0.5]
  const %s1: i64[2] = [6, 4]
  const %s2: i64[3] = [3, 2, 4]
  const %ax: i64[1] = [0]
  %i: f32[2, 3, 4] = Identity(%x)
  %d: f32[2, 3, 4] = Dropout(%i)
  %a: f32[2, 3, 4] = Add(%c, %d)
  %k: f32[2, 3, 4] = Cast(%a) {to = 1}
  %r1: f32[6, 4] = Reshape(%k, %s1)
  %r2: f32[3, 2, 4] = Reshape(%r1, %s2)
  %t1: f32[2, 4, 3] = Transpose(%r2) {perm = [1, 2, 0]}
  %t2: f32[4, 3, 2] = Transpose(%t1) {perm = [1, 2, 0]}
  %u: f32[1, 3, 4] = Unsqueeze(%v, %ax)
  %q: f32[3, 4] = Squeeze(%u, %ax)
  %m: f32[3, 4] = Mul(%c, %q)
  output %t2
  output %m
}
)"},
    {"constant_fold", "constant_fold", R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 3, 4]
  const %i0: i64[] = [0]
  const %ax: i64[1] = [0]
  const %m1: i64[1] = [-1]
  const %w: f32[4] = [1.0, 2.0, 3.0, 4.0]
  %shape: i64[3] = Shape(%x)
  %d0: i64[] = Gather(%shape, %i0)
  %u0: i64[1] = Unsqueeze(%d0, %ax)
  %target: i64[2] = Concat(%u0, %m1) {axis = 0}
  %y: f32[2, 12] = Reshape(%x, %target)
  %w2: f32[4] = Mul(%w, %w)
  %sq: f32[4] = Sqrt(%w2)
  %z: f32[2, 3, 4] = Div(%x, %sq)
  output %y
  output %z
}
)"},
    {"cse", "cse", R"(graph main opset(ai.onnx: 17) {
  input %x: f32[3, 4]
  const %w: f32[4] = [1.0, 2.0, 3.0, 4.0]
  %a1: f32[3, 4] = Mul(%x, %w)
  %a2: f32[3, 4] = Mul(%x, %w)
  %s1: f32[3, 4] = Softmax(%a1) {axis = 1}
  %s2: f32[3, 4] = Softmax(%a2) {axis = 1}
  %s3: f32[3, 4] = Softmax(%a2) {axis = 0}
  %y: f32[3, 4] = Sub(%s1, %s2)
  %z: f32[3, 4] = Add(%y, %s3)
  output %z
}
)"},
    {"simplify_algebra", "simplify_algebra", R"(graph main opset(ai.onnx: 17) {
  input %x: f32[3, 4]
  const %one: f32[] = [1.0]
  const %ones: f32[4] = [1.0, 1.0, 1.0, 1.0]
  const %zero: f32[] = [0.0]
  const %negzero: f32[1] = [-0.0]
  %a: f32[3, 4] = Mul(%ones, %x)
  %b: f32[3, 4] = Div(%a, %one)
  %c: f32[3, 4] = Pow(%b, %one)
  %d: f32[3, 4] = Sub(%c, %zero)
  %e: f32[3, 4] = Add(%d, %negzero)
  %n1: f32[3, 4] = Neg(%e)
  %n2: f32[3, 4] = Neg(%n1)
  %y: f32[3, 4] = Tanh(%n2)
  output %y
}
)"},
    {"fold_transpose_matmul", "fold_transpose_matmul", R"(graph main opset(ai.onnx: 17) {
  input %a: f32[5, 3]
  input %b: f32[4, 5]
  const %s: f32[] = [0.75]
  const %four: f32[] = [4.0]
  %at: f32[3, 5] = Transpose(%a) {perm = [1, 0]}
  %bt: f32[5, 4] = Transpose(%b)
  %m: f32[3, 4] = MatMul(%at, %bt)
  %ms: f32[3, 4] = Mul(%s, %m)
  %m2: f32[3, 4] = MatMul(%at, %bt)
  %md: f32[3, 4] = Div(%m2, %four)
  %y: f32[3, 4] = Sub(%ms, %md)
  output %y
}
)"},
    {"fold_batchnorm_conv", "fold_batchnorm_conv", R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 2, 5, 5]
  const %w: f32[3, 2, 2, 2] = [0.5, -1.0, 0.25, 2.0, 1.5, -0.5, 0.75, -2.0, 1.0, 0.5, -0.25, 1.25, -1.5, 0.125, 2.5, -0.75, 0.3, -0.6, 0.9, 1.2, -1.8, 0.4, -0.2, 0.7]
  const %b: f32[3] = [0.1, -0.2, 0.3]
  const %scale: f32[3] = [1.5, 0.5, -2.0]
  const %bias: f32[3] = [0.25, -1.0, 0.5]
  const %mean: f32[3] = [0.2, -0.4, 1.0]
  const %var: f32[3] = [0.5, 2.0, 1.5]
  %c: f32[2, 3, 2, 2] = Conv(%x, %w, %b) {kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]}
  %bn: f32[2, 3, 2, 2] = BatchNormalization(%c, %scale, %bias, %mean, %var) {epsilon = 0.001}
  %y: f32[2, 3, 2, 2] = Relu(%bn)
  output %y
}
)"},
    // Grouped-query heads repeated in place, both sides scaled, a bool mask that
    // hides keys (of two, so rows often entirely: Softmax's NaN meets the guard).
    {"fuse_attention", "fuse_attention", R"(graph main opset(ai.onnx: 18, tcc: 1) {
  input %q: f32[2, 4, 3, 8]
  input %k: f32[2, 2, 2, 8]
  input %v: f32[2, 2, 2, 6]
  input %hidden: bool[2, 1, 3, 2]
  const %ax: i64[1] = [2]
  const %root: f32[] = [0.59460354]
  const %ninf: f32[] = [-inf]
  const %zero: f32[] = [0.0]
  %ku: f32[2, 2, 1, 2, 8] = Unsqueeze(%k, %ax)
  %ke: f32[2, 2, 2, 2, 8] = tcc::Expand(%ku) {shape = ["2", "2", "2", "2", "8"]}
  %kr: f32[2, 4, 2, 8] = tcc::Reshape(%ke) {shape = ["2", "4", "2", "8"]}
  %vu: f32[2, 2, 1, 2, 6] = Unsqueeze(%v, %ax)
  %ve: f32[2, 2, 2, 2, 6] = tcc::Expand(%vu) {shape = ["2", "2", "2", "2", "6"]}
  %vr: f32[2, 4, 2, 6] = tcc::Reshape(%ve) {shape = ["2", "4", "2", "6"]}
  %kt: f32[2, 4, 8, 2] = Transpose(%kr) {perm = [0, 1, 3, 2]}
  %qs: f32[2, 4, 3, 8] = Mul(%q, %root)
  %kts: f32[2, 4, 8, 2] = Mul(%kt, %root)
  %qk: f32[2, 4, 3, 2] = MatMul(%qs, %kts)
  %l: f32[2, 4, 3, 2] = Where(%hidden, %ninf, %qk)
  %p: f32[2, 4, 3, 2] = Softmax(%l) {axis = -1}
  %nan: bool[2, 4, 3, 2] = IsNaN(%p)
  %pg: f32[2, 4, 3, 2] = Where(%nan, %zero, %p)
  %y: f32[2, 4, 3, 6] = MatMul(%pg, %vr)
  output %y
}
)"},
    // The legacy exporter's causal mask and K^T, and a finfo.min fill turned into an additive mask.
    {"fuse_attention_causal", "fuse_attention", R"(graph main opset(ai.onnx: 17) {
  input %q: f32[2, 4, 5, 8]
  input %x: f32[2, 5, 4, 8]
  input %v: f32[2, 4, 5, 8]
  input %keep: bool[2, 1, 1, 5]
  const %n: i64[2] = [5, 5]
  const %zero_k: i64[] = [0]
  const %zero: f32[] = [0.0]
  const %ninf: f32[] = [-inf]
  const %min: f32[] = [-3.4028235e+38]
  const %four: f32[] = [4.0]
  %ones: f32[5, 5] = ConstantOfShape(%n) {value = tensor<f32[1]> [1.0]}
  %tril: f32[5, 5] = Trilu(%ones, %zero_k) {upper = 0}
  %hidden: bool[5, 5] = Equal(%tril, %zero)
  %kt: f32[2, 4, 8, 5] = Transpose(%x) {perm = [0, 2, 3, 1]}
  %qk: f32[2, 4, 5, 5] = MatMul(%q, %kt)
  %sc: f32[2, 4, 5, 5] = Div(%qk, %four)
  %l: f32[2, 4, 5, 5] = Where(%hidden, %ninf, %sc)
  %p: f32[2, 4, 5, 5] = Softmax(%l) {axis = -1}
  %y: f32[2, 4, 5, 8] = MatMul(%p, %v)
  %qk2: f32[2, 4, 5, 5] = MatMul(%y, %kt)
  %l2: f32[2, 4, 5, 5] = Where(%keep, %qk2, %min)
  %p2: f32[2, 4, 5, 5] = Softmax(%l2) {axis = -1}
  %y2: f32[2, 4, 5, 8] = MatMul(%p2, %v)
  output %y2
}
)"},
    // Biases added to the products in torch's bmm view: DeBERTa's relative-position scores under a Where
    // with finfo.min, then BLOOM's ALiBi (the same for every query) under an additive mask.
    {"fuse_attention_bias", "fuse_attention", R"(graph main opset(ai.onnx: 18, tcc: 1) {
  input %q: f32[2, 4, 5, 8]
  input %k: f32[2, 4, 5, 8]
  input %v: f32[2, 4, 5, 8]
  input %pos: f32[8, 5, 8]
  input %emb: f32[8, 5]
  input %hide: bool[2, 1, 5, 5]
  input %pad: bool[2, 5]
  const %slopes: f32[1, 4, 1, 1] = [0.5, 0.25, 0.125, 0.0625]
  const %minus1: i64[] = [-1]
  const %four: f32[] = [4.0]
  const %zero: f32[] = [0.0]
  const %min: f32[] = [-3.4028235e+38]
  %q3: f32[8, 5, 8] = tcc::Reshape(%q) {shape = ["8", "5", "8"]}
  %k3: f32[8, 5, 8] = tcc::Reshape(%k) {shape = ["8", "5", "8"]}
  %v3: f32[8, 5, 8] = tcc::Reshape(%v) {shape = ["8", "5", "8"]}
  %kt3: f32[8, 8, 5] = Transpose(%k3) {perm = [0, 2, 1]}
  %kts: f32[8, 8, 5] = Div(%kt3, %four)
  %qk: f32[8, 5, 5] = MatMul(%q3, %kts)
  %c2p: f32[8, 5, 5] = MatMul(%pos, %emb)
  %rel: f32[8, 5, 5] = Div(%c2p, %four)
  %sum: f32[8, 5, 5] = Add(%qk, %rel)
  %sum4: f32[2, 4, 5, 5] = tcc::Reshape(%sum) {shape = ["2", "4", "5", "5"]}
  %masked: f32[2, 4, 5, 5] = Where(%hide, %min, %sum4)
  %p: f32[2, 4, 5, 5] = Softmax(%masked) {axis = -1}
  %p3: f32[8, 5, 5] = tcc::Reshape(%p) {shape = ["8", "5", "5"]}
  %y3: f32[8, 5, 8] = MatMul(%p3, %v3)
  %padf: f32[2, 5] = Cast(%pad) {to = 1}
  %count: f32[2, 5] = CumSum(%padf, %minus1)
  %at: f32[2, 1, 1, 5] = tcc::Reshape(%count) {shape = ["2", "1", "1", "5"]}
  %alibi4: f32[2, 4, 1, 5] = Mul(%at, %slopes)
  %alibi: f32[8, 1, 5] = tcc::Reshape(%alibi4) {shape = ["8", "1", "5"]}
  %y1: f32[2, 4, 5, 8] = tcc::Reshape(%y3) {shape = ["2", "4", "5", "8"]}
  %kb3: f32[8, 5, 8] = tcc::Reshape(%y1) {shape = ["8", "5", "8"]}
  %ktb: f32[8, 8, 5] = Transpose(%kb3) {perm = [0, 2, 1]}
  %qkb: f32[8, 5, 5] = MatMul(%q3, %ktb)
  %scaled: f32[8, 5, 5] = Div(%qkb, %four)
  %sumb: f32[8, 5, 5] = Add(%scaled, %alibi)
  %sumb4: f32[2, 4, 5, 5] = tcc::Reshape(%sumb) {shape = ["2", "4", "5", "5"]}
  %mask: f32[2, 1, 5, 5] = Where(%hide, %min, %zero)
  %maskedb: f32[2, 4, 5, 5] = Add(%sumb4, %mask)
  %pb: f32[2, 4, 5, 5] = Softmax(%maskedb) {axis = -1}
  %pb3: f32[8, 5, 5] = tcc::Reshape(%pb) {shape = ["8", "5", "5"]}
  %yb3: f32[8, 5, 8] = MatMul(%pb3, %v3)
  %y: f32[2, 4, 5, 8] = tcc::Reshape(%yb3) {shape = ["2", "4", "5", "8"]}
  output %y
}
)"},
    // MPNet's relative position bias gathered from a table, added to the scores before the padding mask.
    {"fuse_attention_bias4", "fuse_attention", R"(graph main opset(ai.onnx: 18) {
  input %q: f32[2, 4, 5, 8]
  input %k: f32[2, 4, 5, 8]
  input %v: f32[2, 4, 5, 8]
  input %buckets: i64[5, 5]
  input %keep: bool[2, 1, 1, 5]
  const %table: f32[5, 4] = [0.5, -1.0, 2.0, 0.25, -0.5, 1.5, 0.0, -2.0, 1.0, 0.75, -0.25, 3.0, -1.5, 0.125, 2.5, -0.75, 0.0, 1.25, -3.0, 0.5]
  const %ax: i64[1] = [0]
  const %scale: f32[] = [0.35355338]
  const %zero: f32[] = [0.0]
  const %min: f32[] = [-3.4028235e+38]
  %rel: f32[5, 5, 4] = Gather(%table, %buckets) {axis = 0}
  %relt: f32[4, 5, 5] = Transpose(%rel) {perm = [2, 0, 1]}
  %bias: f32[1, 4, 5, 5] = Unsqueeze(%relt, %ax)
  %mask: f32[2, 1, 1, 5] = Where(%keep, %zero, %min)
  %kt: f32[2, 4, 8, 5] = Transpose(%k) {perm = [0, 1, 3, 2]}
  %qk: f32[2, 4, 5, 5] = MatMul(%q, %kt)
  %scaled: f32[2, 4, 5, 5] = Mul(%qk, %scale)
  %biased: f32[2, 4, 5, 5] = Add(%bias, %scaled)
  %l: f32[2, 4, 5, 5] = Add(%biased, %mask)
  %p: f32[2, 4, 5, 5] = Softmax(%l) {axis = -1}
  %y: f32[2, 4, 5, 8] = MatMul(%p, %v)
  output %y
}
)"},
    // SwinV2's scale per head under Gemma 2's soft-capping, then XGLM's Softmax on the bmm view of
    // logits clamped to finfo.min after their mask.
    {"fuse_attention_scales", "fuse_attention", R"(graph main opset(ai.onnx: 18, tcc: 1) {
  input %q: f32[2, 4, 5, 8]
  input %k: f32[2, 4, 5, 8]
  input %v: f32[2, 4, 5, 8]
  input %keep: bool[2, 1, 5, 5]
  const %per_head: f32[4, 1, 1] = [2.5, 0.5, 1.0, 4.0]
  const %cap: f32[] = [3.0]
  const %zero: f32[] = [0.0]
  const %min: f32[] = [-3.4028235e+38]
  %mask: f32[2, 1, 5, 5] = Where(%keep, %zero, %min)
  %kt: f32[2, 4, 8, 5] = Transpose(%k) {perm = [0, 1, 3, 2]}
  %qk: f32[2, 4, 5, 5] = MatMul(%q, %kt)
  %scaled: f32[2, 4, 5, 5] = Mul(%per_head, %qk)
  %over: f32[2, 4, 5, 5] = Div(%scaled, %cap)
  %t: f32[2, 4, 5, 5] = Tanh(%over)
  %capped: f32[2, 4, 5, 5] = Mul(%cap, %t)
  %l: f32[2, 4, 5, 5] = Add(%capped, %mask)
  %p: f32[2, 4, 5, 5] = Softmax(%l) {axis = -1}
  %y1: f32[2, 4, 5, 8] = MatMul(%p, %v)
  %q3: f32[8, 5, 8] = tcc::Reshape(%y1) {shape = ["8", "5", "8"]}
  %k3: f32[8, 5, 8] = tcc::Reshape(%k) {shape = ["8", "5", "8"]}
  %v3: f32[8, 5, 8] = tcc::Reshape(%v) {shape = ["8", "5", "8"]}
  %kt3: f32[8, 8, 5] = Transpose(%k3) {perm = [0, 2, 1]}
  %qk3: f32[8, 5, 5] = MatMul(%q3, %kt3)
  %qk4: f32[2, 4, 5, 5] = tcc::Reshape(%qk3) {shape = ["2", "4", "5", "5"]}
  %l4: f32[2, 4, 5, 5] = Add(%qk4, %mask)
  %c4: f32[2, 4, 5, 5] = Max(%l4, %min)
  %l3: f32[8, 5, 5] = tcc::Reshape(%c4) {shape = ["8", "5", "5"]}
  %p3: f32[8, 5, 5] = Softmax(%l3) {axis = -1}
  %y3: f32[8, 5, 8] = MatMul(%p3, %v3)
  %y: f32[2, 4, 5, 8] = tcc::Reshape(%y3) {shape = ["2", "4", "5", "8"]}
  output %y
}
)"},
};

// The model of `text` twice, shapes inferred: the original and the copy a pass rewrites.
std::pair<std::unique_ptr<Model>, std::unique_ptr<Model>> parse_twice(const std::string& text,
                                                                      const std::string& file = "<text>") {
  auto original = parse_model(text, file), rewritten = parse_model(text, file);
  infer_shapes(*original->graph);
  infer_shapes(*rewritten->graph);
  return {std::move(original), std::move(rewritten)};
}

// Both graphs' outputs on `in`, bit for bit.
void expect_identical_outputs(const Graph& want_graph, const Graph& got_graph, const Inputs& in) {
  Interpreter a, b;
  std::vector<Tensor> want = a.run(want_graph, in), got = b.run(got_graph, in);
  ASSERT_EQ(want.size(), got.size());
  for (size_t o = 0; o < want.size(); ++o) EXPECT_TRUE(want[o].identical(got[o])) << "output " << o;
}

class PassNumerics : public ::testing::TestWithParam<Case> {};

TEST_P(PassNumerics, SameOutputsOnRandomInputs) {
  const Case& c = GetParam();
  auto [original, optimized] = parse_twice(c.text, c.name);
  ASSERT_TRUE(optimize(*optimized, c.passes)) << c.name << " did not fire";
  EXPECT_LT(optimized->graph->nodes().size(), original->graph->nodes().size()) << print_model(*optimized);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    Inputs in = random_inputs(*original->graph, seed);
    Interpreter a, b;
    expect_close(a.run(*original->graph, in), b.run(*optimized->graph, in), std::string(c.name) + " seed " +
                                                                                std::to_string(seed));
  }
}

INSTANTIATE_TEST_SUITE_P(Passes, PassNumerics, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// simplify_algebra promises bitwise-exact rewrites: the values where x + 0.0
// would differ (-0.0), NaN and infinities come back unchanged.
TEST(PassNumerics, SimplifyAlgebraIsBitwiseExactOnSpecialValues) {
  const char* text = R"(graph main opset(ai.onnx: 17) {
  input %x: f32[6]
  const %one: f32[] = [1.0]
  const %zero: f32[] = [0.0]
  const %negzero: f32[] = [-0.0]
  %a: f32[6] = Mul(%x, %one)
  %b: f32[6] = Sub(%a, %zero)
  %c: f32[6] = Add(%negzero, %b)
  %d: f32[6] = Pow(%c, %one)
  %e: f32[6] = Div(%d, %one)
  %y: f32[6] = Abs(%e)
  %z: f32[6] = Neg(%e)
  output %y
  output %z
}
)";
  auto [original, optimized] = parse_twice(text);
  ASSERT_TRUE(optimize(*optimized, "simplify_algebra"));
  EXPECT_EQ(optimized->graph->nodes().size(), 2u) << print_model(*optimized);
  const float inf = std::numeric_limits<float>::infinity();
  Inputs in = {{"x", Tensor::from_f32({-0.0f, 0.0f, std::nanf(""), inf, -inf, -1.5f}, {6})}};
  expect_identical_outputs(*original->graph, *optimized->graph, in);
}

// x / 2^k -> x * 2^-k, bit for bit: results that round into the subnormals
// or overflow, the largest and smallest floats, zeros, infinities and NaN, in
// f32 and f16, by powers of two up to f32's 2^127 (whose reciprocal is
// subnormal) and negative ones.
TEST(PassNumerics, DivisionByPowersOfTwoBecomesAnIdenticalProduct) {
  const char* text = R"(graph main opset(ai.onnx: 17) {
  input %x: f32[12]
  input %h: f16[12]
  const %scales: f32[12] = [8.0, 0.125, -2.0, 1.7014118346046923e+38, 2.0, 0.5, 4.0, -0.25, 1024.0, 3.0517578125e-05, 2.0, 0.5]
  const %half_scales: f16[12] = [8.0, 0.125, -2.0, 16384.0, 2.0, 0.5, 4.0, -0.25, 1024.0, 0.0009765625, 2.0, 0.5]
  %y: f32[12] = Div(%x, %scales)
  %z: f16[12] = Div(%h, %half_scales)
  %y2: f32[12] = Abs(%y)
  %z2: f16[12] = Abs(%z)
  output %y2
  output %z2
}
)";
  auto [original, optimized] = parse_twice(text);
  ASSERT_TRUE(optimize(*optimized, "simplify_algebra"));
  for (const auto& n : optimized->graph->nodes()) EXPECT_NE(n->op_type(), "Div") << print_model(*optimized);
  const float inf = std::numeric_limits<float>::infinity(), big = std::numeric_limits<float>::max(),
              tiny = std::numeric_limits<float>::denorm_min(), least = std::numeric_limits<float>::min();
  std::vector<float> x = {-0.0f, 0.0f, std::nanf(""), inf, -inf, big, 3.0f * least, tiny, 1.5f, least, big, -tiny};
  // f16's largest, smallest normal (2^-14) and smallest subnormal (2^-24) in the same places.
  const double half_values[12] = {-0.0, 0.0, std::nan(""), inf, -inf, 65504.0, 3 * 6.103515625e-05,
                                  5.960464477539063e-08, 1.5, 6.103515625e-05, 65504.0, -5.960464477539063e-08};
  Tensor h(DType::F16, {12});
  for (int64_t i = 0; i < 12; ++i) h.set_f64(i, half_values[i]);
  Inputs in = {{"x", Tensor::from_f32(x, {12})}, {"h", h}};
  expect_identical_outputs(*original->graph, *optimized->graph, in);
}

// x + 0.0 is the rewrite simplify_algebra refuses: it would differ on -0.0,
// which 1 / y makes visible as the sign of an infinity.
TEST(PassNumerics, SimplifyAlgebraKeepsAddOfPositiveZero) {
  auto m = parse_model(R"(graph main opset(ai.onnx: 17) {
  input %x: f32[1]
  const %zero: f32[] = [0.0]
  const %one: f32[] = [1.0]
  %a: f32[1] = Add(%x, %zero)
  %y: f32[1] = Div(%one, %a)
  output %y
}
)");
  infer_shapes(*m->graph);
  // With the Add, -0.0 becomes +0.0 and 1 / y is +inf; without it, -inf.
  Interpreter before;
  Tensor neg_zero = Tensor::from_f32({-0.0f}, {1});
  EXPECT_EQ(before.run(*m->graph, {{"x", neg_zero}})[0].data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_FALSE(optimize(*m, "simplify_algebra"));
  EXPECT_EQ(count_ops(*m->graph, "Add"), 1u);
}

// conv1x1_matmul adds nodes (views, a bias Add) where the cases above remove
// them: each shape it rewrites -- pixels with a bias, one pixel (Gemm), a 1-D
// Conv with weights computed in the graph, a 3-D Conv -- computes the Conv's values.
TEST(PassNumerics, Conv1x1MatmulComputesTheConvolution) {
  const char* cases[] = {
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 3, 4, 5]
  input %w: f32[6, 3, 1, 1]
  input %b: f32[6]
  %y: f32[2, 6, 4, 5] = Conv(%x, %w, %b)
  %r: f32[2, 6, 4, 5] = Relu(%y)
  output %r
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[3, 5, 1, 1]
  input %w: f32[4, 5, 1, 1]
  input %b: f32[4]
  %y: f32[3, 4, 1, 1] = Conv(%x, %w, %b)
  %r: f32[3, 4, 1, 1] = Sigmoid(%y)
  output %r
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[2, 3, 7]
  input %w: f32[2, 3, 1]
  %wn: f32[2, 3, 1] = Neg(%w)
  %y: f32[2, 2, 7] = Conv(%x, %wn)
  %r: f32[2, 2, 7] = Relu(%y)
  output %r
})",
      R"(graph main opset(ai.onnx: 17) {
  input %x: f32[1, 2, 3, 2, 2]
  input %w: f32[3, 2, 1, 1, 1]
  input %b: f32[3]
  %y: f32[1, 3, 3, 2, 2] = Conv(%x, %w, %b)
  %r: f32[1, 3, 3, 2, 2] = Relu(%y)
  output %r
})",
  };
  for (const char* text : cases) {
    auto [original, rewritten] = parse_twice(text);
    ASSERT_TRUE(optimize(*rewritten, "conv1x1_matmul")) << text;
    EXPECT_EQ(count_ops(*rewritten->graph, "Conv"), 0u) << print_model(*rewritten);
    for (uint32_t seed = 1; seed <= 2; ++seed) {
      Inputs in = random_inputs(*original->graph, seed);
      Interpreter a, b;
      expect_close(a.run(*original->graph, in), b.run(*rewritten->graph, in), text);
    }
  }
}

// ---- The exported fixtures ----------------------------------------------------

std::string fixture_path(const std::string& rel) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + rel; }

constexpr const char* kOptimizePasses =
    "canonicalize,constant_fold,simplify_algebra,cse,fold_transpose_matmul,fold_batchnorm_conv,dce";

struct FixtureRun {
  const char* fixture;
  const char* passes;
};

class FixtureNumerics : public ::testing::TestWithParam<FixtureRun> {};

// Each pass alone, and all of them in pipeline order, keep the fixture's
// outputs: against the unoptimized graph (1e-5) and against onnxruntime's
// stored outputs (the fixture tests' 1e-4).
TEST_P(FixtureNumerics, OptimizedModelComputesTheSameOutputs) {
  const FixtureRun& r = GetParam();
  const std::string model = fixture_path(std::string(r.fixture) + ".onnx");
  auto original = load_model(model);
  auto optimized = load_model(model);
  infer_shapes(*original->graph);
  infer_shapes(*optimized->graph);
  optimize(*optimized, r.passes);
  Inputs in = {{"input", read_tensor_pb(fixture_path(std::string(r.fixture) + "/input_0.pb"))}};
  Interpreter a, b;
  std::vector<Tensor> want = a.run(*original->graph, in), got = b.run(*optimized->graph, in);
  expect_close(want, got, std::string(r.fixture) + " after " + r.passes);
  Tensor ort = read_tensor_pb(fixture_path(std::string(r.fixture) + "/output_0.pb"));
  ASSERT_EQ(got[0].shape(), ort.shape());
  for (int64_t i = 0; i < ort.numel(); ++i)
    ASSERT_LE(std::fabs(got[0].get_f64(i) - ort.get_f64(i)), 1e-4 * (1 + std::fabs(ort.get_f64(i))))
        << r.fixture << " element " << i;
}

std::vector<FixtureRun> fixture_runs() {
  std::vector<FixtureRun> runs;
  for (const char* f : {"mlp", "resnet_small", "gpt2_block"})
    for (const char* p : {"canonicalize", "constant_fold", "simplify_algebra", "cse", "fold_transpose_matmul",
                          "fold_batchnorm_conv", kOptimizePasses})
      runs.push_back({f, p});
  return runs;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureNumerics, ::testing::ValuesIn(fixture_runs()), [](const auto& info) {
  std::string p = info.param.passes == std::string(kOptimizePasses) ? "all" : info.param.passes;
  return std::string(info.param.fixture) + "_" + p;
});

// The ResNet fixture's exporter already folded each Conv's BatchNormalization
// (torch.onnx.export does in eval mode); the one left follows a residual Add,
// which has no weights to fold into, so it must stay.
TEST(FixtureNumerics, ResNetBatchNormAfterAddStays) {
  auto m = load_model(fixture_path("resnet_small.onnx"));
  infer_shapes(*m->graph);
  ASSERT_EQ(count_ops(*m->graph, "BatchNormalization"), 1u);
  EXPECT_FALSE(optimize(*m, "fold_batchnorm_conv"));
  EXPECT_EQ(count_ops(*m->graph, "BatchNormalization"), 1u);
}

// ONNX Runtime's QDQ ResNet (tests/zoo/resnet_qdq): fuse_qdq makes its 20
// convolutions the QLinearConvs ONNX Runtime runs for them (the classifier's
// Gemm, whose bias is a float, stays), and the interpreter on the fused graph
// gives ONNX Runtime's recorded logits.
TEST(FixtureNumerics, QdqResNetFusesIntoQLinearConvsAndKeepsOnnxRuntimesOutputs) {
  const std::string dir = std::string(TCC_SOURCE_DIR) + "/tests/zoo/resnet_qdq/";
  auto m = load_model(dir + "model.onnx");
  infer_shapes(*m->graph);
  ASSERT_TRUE(optimize(*m, "fuse_qdq"));
  EXPECT_EQ(count_ops(*m->graph, "QLinearConv"), 20u);
  EXPECT_EQ(count_ops(*m->graph, "Conv"), 0u);
  EXPECT_EQ(count_ops(*m->graph, "Gemm"), 1u);
  Interpreter interpreter;
  std::vector<Tensor> got = interpreter.run(*m->graph, {{"images", read_tensor_pb(dir + "input_0.pb")}});
  Tensor ort = read_tensor_pb(dir + "output_0.pb");
  ASSERT_EQ(got[0].shape(), ort.shape());
  for (int64_t i = 0; i < ort.numel(); ++i)
    ASSERT_LE(std::fabs(got[0].get_f64(i) - ort.get_f64(i)), 1e-4 * (1 + std::fabs(ort.get_f64(i)))) << "element " << i;
}

}  // namespace
}  // namespace tcc
