// Shape rules (symbolic) and reference kernels of If, Loop and Scan.
#include <gtest/gtest.h>

#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

Dim S(const char* name) { return Dim::symbol(name); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}

Tensor scalar_bool(bool b) {
  Tensor t(DType::Bool, {});
  t.set_i64(0, b);
  return t;
}

// A region attached to node `owner` under attribute `attr`.
Graph& add_region(Graph& parent, Node* owner, const char* attr) {
  auto g = std::make_shared<Graph>();
  g->set_name(attr);
  g->set_parent(&parent, owner);
  owner->set_attr(attr, Attribute::of_graph(g));
  return *g;
}

// If whose branches return outer values of types a and b.
struct IfModel {
  Graph g;
  Node* node;
  IfModel(Dims a, Dims b) {
    g.set_opset("", 17);
    Value* cond = g.add_input("cond", Type::tensor(DType::Bool, {}));
    Value* x = g.add_input("x", Type::tensor(DType::F32, std::move(a)));
    Value* y = g.add_input("y", Type::tensor(DType::F32, std::move(b)));
    node = g.add_node("If", {cond}, {"res"});
    g.add_output(node->output(0));
    // Branches may return values of the enclosing graph directly.
    add_region(g, node, "then_branch").add_output(x);
    add_region(g, node, "else_branch").add_output(y);
  }
};

TEST(ControlFlowShapes, IfMergesBranchTypes) {
  IfModel same({S("batch"), 4}, {S("batch"), 4});
  infer_shapes(same.g);
  EXPECT_EQ(same.node->output(0)->type().str(), "f32[batch, 4]");

  IfModel differ({S("batch"), 4}, {S("batch"), 8});
  infer_shapes(differ.g);
  const Type& t = differ.node->output(0)->type();
  ASSERT_EQ(t.rank(), 2u);
  EXPECT_EQ(t.shape()[0].str(), "batch");
  EXPECT_TRUE(t.shape()[1].is_symbolic() && t.shape()[1].expr().is_symbol()) << t.str();
}

// A constant condition (a shape test, once folded) takes one branch: its types.
TEST(ControlFlowShapes, IfOfAConstantConditionTakesItsBranchsTypes) {
  for (bool c : {true, false}) {
    IfModel m({S("batch"), 4}, {S("batch"), 8});
    m.node->set_input(0, m.g.add_initializer("constant_cond", scalar_bool(c)));
    infer_shapes(m.g);
    EXPECT_EQ(m.node->output(0)->type().str(), c ? "f32[batch, 4]" : "f32[batch, 8]");
  }
}

// Only the taken branch is inferred: the other may compute what this input
// never does (ONNX's AffineGrid function splits a 2-D size five ways there),
// here a Reshape of 8 elements to 15 that a computed condition would refuse.
TEST(ControlFlowShapes, IfOfAConstantConditionInfersOnlyItsBranch) {
  for (bool constant : {true, false}) {
    IfModel m({2, 4}, {2, 4});
    if (constant) m.node->set_input(0, m.g.add_initializer("constant_cond", scalar_bool(true)));
    Graph& dead = *m.node->get_graph("else_branch");
    Value* target = dead.add_initializer("target", Tensor::from_i64({3, 5}, {2}));
    Node* reshape = dead.add_node("Reshape", {m.g.inputs()[2], target}, {"wrong"});
    dead.set_outputs({reshape->output(0)});
    if (constant) {
      infer_shapes(m.g);
      EXPECT_EQ(m.node->output(0)->type().str(), "f32[2, 4]");
    } else {
      EXPECT_NE(input_error([&] { infer_shapes(m.g); }).find("Reshape"), std::string::npos);
    }
  }
}

TEST(ControlFlowKernels, IfRunsTheChosenBranch) {
  IfModel m({2}, {3});
  for (bool c : {true, false}) {
    auto out = Interpreter().run(m.g, {{"cond", scalar_bool(c)},
                                       {"x", Tensor::from_f32({1, 2}, {2})},
                                       {"y", Tensor::from_f32({7, 8, 9}, {3})}});
    EXPECT_EQ(values(out[0]), c ? (std::vector<double>{1, 2}) : (std::vector<double>{7, 8, 9}));
  }
}

// Loop adding `step` (f32[1]) to a carried value each iteration and emitting
// it as a scan output; the condition passes through unchanged.
struct LoopModel {
  Graph g;
  Node* node;
  explicit LoopModel(Value* (*trip)(Graph&)) {
    g.set_opset("", 17);
    Value* m = trip(g);
    Value* cond = g.add_initializer("cond", scalar_bool(true));
    Value* x0 = g.add_input("x0", Type::tensor(DType::F32, {1}));
    Value* step = g.add_input("step", Type::tensor(DType::F32, {1}));
    node = g.add_node("Loop", {m, cond, x0}, {"x_final", "xs"});
    g.add_output(node->output(0));
    g.add_output(node->output(1));
    Graph& body = add_region(g, node, "body");
    body.add_input("i", Type::tensor(DType::I64, {}));
    Value* c_in = body.add_input("c_in", Type::tensor(DType::Bool, {}));
    Value* x_in = body.add_input("x_in", Type::tensor(DType::F32, {1}));
    Value* x_out = body.add_node("Add", {x_in, step}, {"x_out"})->output(0);
    body.set_outputs({c_in, x_out, x_out});
  }
};

Value* constant_trip(Graph& g) { return g.add_initializer("M", Tensor::scalar_i64(3)); }
Value* input_trip(Graph& g) { return g.add_input("M", Type::tensor(DType::I64, {})); }

TEST(ControlFlowShapes, LoopScanOutputsUseConstantTripCount) {
  LoopModel m(constant_trip);
  infer_shapes(m.g);
  EXPECT_EQ(m.node->output(0)->type().str(), "f32[1]");
  EXPECT_EQ(m.node->output(1)->type().str(), "f32[3, 1]");
}

TEST(ControlFlowShapes, LoopWithRuntimeTripCountGetsFreshLength) {
  LoopModel m(input_trip);
  infer_shapes(m.g);
  const Type& xs = m.node->output(1)->type();
  ASSERT_EQ(xs.rank(), 2u);
  EXPECT_TRUE(xs.shape()[0].is_symbolic() && xs.shape()[0].expr().is_symbol()) << xs.str();
  EXPECT_EQ(xs.shape()[1].str(), "1");
}

TEST(ControlFlowShapes, LoopCarriedValueThatGrowsGetsMergedType) {
  // Each iteration pads the carried [1, 1, L] by one: its length is not fixed.
  Graph g;
  g.set_opset("", 17);
  Value* m = g.add_initializer("M", Tensor::scalar_i64(2));
  Value* x0 = g.add_input("x0", Type::tensor(DType::F32, {1, 1, 1}));
  Node* loop = g.add_node("Loop", {m, nullptr, x0}, {"x_final"});
  g.add_output(loop->output(0));
  Graph& body = add_region(g, loop, "body");
  body.add_input("i", Type::tensor(DType::I64, {}));
  Value* c_in = body.add_input("c_in", Type::tensor(DType::Bool, {}));
  Value* x_in = body.add_input("x_in", Type::tensor(DType::F32, {1, 1, 1}));
  Node* pool = body.add_node("MaxPool", {x_in}, {"x_out"});
  pool->set_attr("kernel_shape", Attribute::of_ints({1}));
  pool->set_attr("pads", Attribute::of_ints({0, 1}));
  body.set_outputs({c_in, pool->output(0)});
  infer_shapes(g);
  const Type& t = loop->output(0)->type();
  ASSERT_EQ(t.rank(), 3u) << t.str();
  EXPECT_TRUE(t.shape()[2].is_symbolic() && t.shape()[2].expr().is_symbol()) << t.str();
  // Inside the body the length is symbolic too, one more than the carried one.
  EXPECT_EQ(pool->output(0)->type().shape()[2].str(), t.shape()[2].str() + "+1");
  auto out = Interpreter().run(g, {{"x0", Tensor::from_f32({5}, {1, 1, 1})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(out[0].get_f64(0), 5);
}

TEST(ControlFlowKernels, LoopCarriesAndStacks) {
  LoopModel m(constant_trip);
  auto out = Interpreter().run(m.g, {{"x0", Tensor::from_f32({1}, {1})}, {"step", Tensor::from_f32({2}, {1})}});
  EXPECT_EQ(values(out[0]), (std::vector<double>{7}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(values(out[1]), (std::vector<double>{3, 5, 7}));
}

// Scan computing a running sum over axis 0 of x (f32[seq, 2]).
struct ScanModel {
  Graph g;
  Node* node;
  explicit ScanModel(int64_t direction) {
    g.set_opset("", 17);
    Value* s0 = g.add_input("s0", Type::tensor(DType::F32, {2}));
    Value* x = g.add_input("x", Type::tensor(DType::F32, {S("seq"), 2}));
    node = g.add_node("Scan", {s0, x}, {"s_final", "partial"});
    node->set_attr("num_scan_inputs", Attribute::of_int(1));
    node->set_attr("scan_input_directions", Attribute::of_ints({direction}));
    g.add_output(node->output(0));
    g.add_output(node->output(1));
    Graph& body = add_region(g, node, "body");
    Value* s_in = body.add_input("s_in", Type::tensor(DType::F32, {2}));
    Value* row = body.add_input("row", Type::tensor(DType::F32, {2}));
    Value* s_out = body.add_node("Add", {s_in, row}, {"s_out"})->output(0);
    body.set_outputs({s_out, s_out});
  }
};

TEST(ControlFlowShapes, ScanOutputsTakeTheSequenceLength) {
  ScanModel m(0);
  infer_shapes(m.g);
  EXPECT_EQ(m.node->output(0)->type().str(), "f32[2]");
  EXPECT_EQ(m.node->output(1)->type().str(), "f32[seq, 2]");
}

TEST(ControlFlowKernels, ScanForwardAndReverse) {
  for (int64_t dir : {0, 1}) {
    ScanModel m(dir);
    auto out = Interpreter().run(m.g, {{"s0", Tensor::from_f32({0, 0}, {2})},
                                       {"x", Tensor::from_f32({1, 2, 3, 4, 5, 6}, {3, 2})}});
    EXPECT_EQ(values(out[0]), (std::vector<double>{9, 12}));
    EXPECT_EQ(values(out[1]), dir == 0 ? (std::vector<double>{1, 2, 4, 6, 9, 12})
                                       : (std::vector<double>{5, 6, 8, 10, 9, 12}));
  }
}

TEST(ControlFlowShapes, ScanRejectsMismatchedNumScanInputs) {
  ScanModel m(0);
  m.node->set_attr("num_scan_inputs", Attribute::of_int(5));
  const std::string what = input_error([&] { infer_shapes(m.g); });
  EXPECT_NE(what.find("expected num_scan_inputs in [1, 2], got 5"), std::string::npos) << what;
}

}  // namespace
}  // namespace tcc
