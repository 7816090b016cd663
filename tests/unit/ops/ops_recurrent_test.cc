// Shape rules and reference kernels of the recurrent ops: RNN, GRU, LSTM.
// One-step cases are checked against the spec's equations written out here;
// longer ones against recurrent_golden.inc, which recurrent_golden.py computes
// with numpy.
#include <gtest/gtest.h>

#include <cmath>

#include "src/ops/op_helpers.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::f32;
using testing::floats;
using testing::OpGraph;
using testing::tensor_type;

struct RecurrentCase {
  const char* op;
  const char* direction;
  int64_t layout, seq, batch, input, hidden;
  std::vector<int64_t> lens;
  std::vector<std::string> activations;
  std::vector<float> alphas, betas;
  float clip;
  int64_t linear_before_reset, input_forget;
  std::vector<float> x, w, r, b, h0, c0, p, y, y_h, y_c;
};

#include "tests/unit/ops/recurrent_golden.inc"
#include "tests/unit/support/input_error.h"

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

Tensor i32(const std::vector<int64_t>& v) {
  Tensor t(DType::I32, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  return t;
}

void expect_near(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_f64(static_cast<int64_t>(i)), want[i], 1e-5) << what << " at " << i;
}

// Runs one node over graph inputs named after the op's inputs (null: left
// out) and returns every output.
struct Recurrent {
  explicit Recurrent(const std::string& op, int64_t opset = 22) : t(opset), op(op) {}

  Recurrent& in(const std::string& name, const Tensor& v) {
    inputs.push_back(t.input(name, Type::tensor(v.dtype(), dims_of(v.shape()))));
    values[name] = v;
    return *this;
  }
  Recurrent& none() {
    inputs.push_back(nullptr);
    return *this;
  }
  Recurrent& attr(const std::string& name, Attribute a) {
    attrs[name] = std::move(a);
    return *this;
  }
  std::vector<Tensor> run(size_t outputs) {
    node = t.node(op, inputs, outputs, attrs);
    t.infer();
    return t.run(node->outputs(), values);
  }
  std::string error(size_t outputs) {
    node = t.node(op, inputs, outputs, attrs);
    return input_error([&] { t.infer(); });
  }

  OpGraph t;
  std::string op;
  std::vector<Value*> inputs;
  std::map<std::string, Tensor> values;
  std::map<std::string, Attribute> attrs;
  Node* node = nullptr;
};

// ------------------------------------------------------- one step by hand

TEST(RecurrentOps, RnnOneStepIsTanhOfTheAffineSum) {
  // Ht = tanh(x W^T + h0 R^T + Wb + Rb)
  auto out = Recurrent("RNN")
                 .in("X", f32({0.5f}, {1, 1, 1}))
                 .in("W", f32({2}, {1, 1, 1}))
                 .in("R", f32({3}, {1, 1, 1}))
                 .in("B", f32({0.1f, 0.2f}, {1, 2}))
                 .none()
                 .in("initial_h", f32({0.4f}, {1, 1, 1}))
                 .attr("hidden_size", Attribute::of_int(1))
                 .run(2);
  double want = std::tanh(0.5 * 2 + 0.4 * 3 + 0.1 + 0.2);
  EXPECT_NEAR(out[0].get_f64(0), want, 1e-6);
  EXPECT_NEAR(out[1].get_f64(0), want, 1e-6);
}

TEST(RecurrentOps, GruOneStepResetsBeforeOrAfterTheLinearMap) {
  // Gates z, r, h: W = [0.5, -0.5, 1], R = [0.2, 0.3, 0.4], Rbh = 0.3, x = 1, h0 = 0.5.
  double z = sigmoid(0.5 + 0.5 * 0.2), r = sigmoid(-0.5 + 0.5 * 0.3);
  double before = std::tanh(1 + (r * 0.5) * 0.4 + 0.3);  // linear_before_reset 0: (r . h) Rh^T + Rbh
  double after = std::tanh(1 + r * (0.5 * 0.4 + 0.3));   // 1: r . (h Rh^T + Rbh)
  for (int64_t lbr : {0, 1}) {
    auto out = Recurrent("GRU")
                   .in("X", f32({1}, {1, 1, 1}))
                   .in("W", f32({0.5f, -0.5f, 1}, {1, 3, 1}))
                   .in("R", f32({0.2f, 0.3f, 0.4f}, {1, 3, 1}))
                   .in("B", f32({0, 0, 0, 0, 0, 0.3f}, {1, 6}))
                   .none()
                   .in("initial_h", f32({0.5f}, {1, 1, 1}))
                   .attr("hidden_size", Attribute::of_int(1))
                   .attr("linear_before_reset", Attribute::of_int(lbr))
                   .run(2);
    double cand = lbr ? after : before;
    EXPECT_NEAR(out[1].get_f64(0), (1 - z) * cand + z * 0.5, 1e-6) << "linear_before_reset " << lbr;
  }
}

TEST(RecurrentOps, LstmOneStepWithPeepholes) {
  // Gates i, o, f, c: W = [0.1, 0.2, 0.3, 0.4], R = [0.5, 0.6, 0.7, 0.8],
  // P (i, o, f) = [0.1, 0.2, 0.3]; x = 1, h0 = 0.5, c0 = 0.25.
  double i = sigmoid(0.1 + 0.5 * 0.5 + 0.1 * 0.25);
  double f = sigmoid(0.3 + 0.5 * 0.7 + 0.3 * 0.25);
  double c = f * 0.25 + i * std::tanh(0.4 + 0.5 * 0.8);
  double o = sigmoid(0.2 + 0.5 * 0.6 + 0.2 * c);
  auto out = Recurrent("LSTM")
                 .in("X", f32({1}, {1, 1, 1}))
                 .in("W", f32({0.1f, 0.2f, 0.3f, 0.4f}, {1, 4, 1}))
                 .in("R", f32({0.5f, 0.6f, 0.7f, 0.8f}, {1, 4, 1}))
                 .none()
                 .none()
                 .in("initial_h", f32({0.5f}, {1, 1, 1}))
                 .in("initial_c", f32({0.25f}, {1, 1, 1}))
                 .in("P", f32({0.1f, 0.2f, 0.3f}, {1, 3}))
                 .attr("hidden_size", Attribute::of_int(1))
                 .run(3);
  EXPECT_NEAR(out[0].get_f64(0), o * std::tanh(c), 1e-6);
  EXPECT_NEAR(out[1].get_f64(0), o * std::tanh(c), 1e-6);
  EXPECT_NEAR(out[2].get_f64(0), c, 1e-6);
}

// ------------------------------------------------------------ masking, layout

TEST(RecurrentOps, SequenceLensZeroTheTailAndStopTheState) {
  // Batch entry 0 has length 1 of 3, entry 1 length 0: Y is zero past each
  // length; Y_h is the state after the last valid step, zero for length 0.
  auto out = Recurrent("RNN")
                 .in("X", f32({1, 2, 3, 4, 5, 6}, {3, 2, 1}))
                 .in("W", f32({0.5f}, {1, 1, 1}))
                 .in("R", f32({0.25f}, {1, 1, 1}))
                 .none()
                 .in("sequence_lens", i32({1, 0}))
                 .in("initial_h", f32({0.2f, 0.7f}, {1, 2, 1}))
                 .run(2);
  double step = std::tanh(1 * 0.5 + 0.2 * 0.25);
  EXPECT_NEAR(out[0].get_f64(0), step, 1e-6);
  EXPECT_EQ(floats(out[0]), (std::vector<double>{out[0].get_f64(0), 0, 0, 0, 0, 0}));
  EXPECT_EQ(out[1].get_f64(0), out[0].get_f64(0));
  EXPECT_EQ(out[1].get_f64(1), 0);
}

TEST(RecurrentOps, BidirectionalStacksForwardThenReverse) {
  // Y[t, 0] is a forward run with direction 0's weights, Y[t, 1] a reverse
  // run with direction 1's; Y_h[1] is the reverse state after t = 0.
  Tensor x = f32({0.3f, -0.6f, 0.9f, 0.2f}, {4, 1, 1});
  auto run = [&](const char* direction, std::vector<float> w, std::vector<float> r) {
    int64_t dirs = static_cast<int64_t>(w.size());
    return Recurrent("RNN")
        .in("X", x)
        .in("W", f32(w, {dirs, 1, 1}))
        .in("R", f32(r, {dirs, 1, 1}))
        .attr("direction", Attribute::of_string(direction))
        .run(2);
  };
  auto both = run("bidirectional", {0.8f, -1.2f}, {0.5f, 0.4f});
  auto fwd = run("forward", {0.8f}, {0.5f});
  auto rev = run("reverse", {-1.2f}, {0.4f});
  EXPECT_EQ(both[0].shape(), (std::vector<int64_t>{4, 2, 1, 1}));
  for (int64_t t = 0; t < 4; ++t) {
    EXPECT_EQ(both[0].get_f64(2 * t), fwd[0].get_f64(t)) << "t " << t;
    EXPECT_EQ(both[0].get_f64(2 * t + 1), rev[0].get_f64(t)) << "t " << t;
  }
  EXPECT_EQ(both[1].get_f64(0), fwd[0].get_f64(3));
  EXPECT_EQ(both[1].get_f64(1), rev[0].get_f64(0));
}

// ------------------------------------------------------------- numpy goldens

void check_case(const RecurrentCase& c) {
  int64_t dirs = std::string(c.direction) == "bidirectional" ? 2 : 1;
  int64_t gates = std::string(c.op) == "RNN" ? 1 : std::string(c.op) == "GRU" ? 3 : 4;
  std::vector<int64_t> state = c.layout ? std::vector<int64_t>{c.batch, dirs, c.hidden}
                                        : std::vector<int64_t>{dirs, c.batch, c.hidden};
  Recurrent node(c.op);
  node.in("X", f32(c.x, c.layout ? std::vector<int64_t>{c.batch, c.seq, c.input}
                                  : std::vector<int64_t>{c.seq, c.batch, c.input}))
      .in("W", f32(c.w, {dirs, gates * c.hidden, c.input}))
      .in("R", f32(c.r, {dirs, gates * c.hidden, c.hidden}))
      .in("B", f32(c.b, {dirs, 2 * gates * c.hidden}))
      .in("sequence_lens", i32(c.lens))
      .in("initial_h", f32(c.h0, state));
  if (!c.c0.empty()) node.in("initial_c", f32(c.c0, state));
  if (!c.p.empty()) node.in("P", f32(c.p, {dirs, 3 * c.hidden}));
  node.attr("hidden_size", Attribute::of_int(c.hidden))
      .attr("direction", Attribute::of_string(c.direction))
      .attr("layout", Attribute::of_int(c.layout))
      .attr("activations", Attribute::of_strings(c.activations));
  if (!c.alphas.empty()) node.attr("activation_alpha", Attribute::of_floats(c.alphas));
  if (!c.betas.empty()) node.attr("activation_beta", Attribute::of_floats(c.betas));
  if (c.clip > 0) node.attr("clip", Attribute::of_float(c.clip));
  if (gates == 3) node.attr("linear_before_reset", Attribute::of_int(c.linear_before_reset));
  if (gates == 4) node.attr("input_forget", Attribute::of_int(c.input_forget));
  auto out = node.run(gates == 4 ? 3 : 2);
  expect_near(out[0], c.y, "Y");
  expect_near(out[1], c.y_h, "Y_h");
  if (gates == 4) expect_near(out[2], c.y_c, "Y_c");
}

TEST(RecurrentOps, GruBidirectionalBatchFirstMatchesNumpy) { check_case(kGruBidirectionalBatchFirst); }
TEST(RecurrentOps, GruClippedMatchesNumpy) { check_case(kGruClipped); }
TEST(RecurrentOps, LstmReversePeepholesInputForgetMatchesNumpy) { check_case(kLstmReversePeepholes); }
TEST(RecurrentOps, RnnBidirectionalEluScaledTanhMatchesNumpy) { check_case(kRnnBidirectional); }
TEST(RecurrentOps, RnnAffineThresholdedReluMatchesNumpy) { check_case(kRnnAffineThresholded); }
TEST(RecurrentOps, LstmSoftplusReluBatchFirstMatchesNumpy) { check_case(kLstmSoftplusRelu); }

// ------------------------------------------------------------------ shapes

TEST(RecurrentShapes, SymbolicSequenceAndBatch) {
  OpGraph t(22);
  Value* x = t.input("x", tensor_type(DType::F32, {"seq", "batch", "3"}));
  Value* w = t.input("w", tensor_type(DType::F32, {"2", "16", "3"}));
  Value* r = t.input("r", tensor_type(DType::F32, {"2", "16", "4"}));
  Value* lens = t.input("lens", tensor_type(DType::I32, {"n"}));
  Node* n = t.node("LSTM", {x, w, r, nullptr, lens}, 3, {{"direction", Attribute::of_string("bidirectional")}});
  t.infer();
  EXPECT_EQ(n->output(0)->type().str(), "f32[seq, 2, batch, 4]");
  EXPECT_EQ(n->output(1)->type().str(), "f32[2, batch, 4]");
  EXPECT_EQ(n->output(2)->type().str(), "f32[2, batch, 4]");
  EXPECT_EQ(t.g.inputs()[3]->type().str(), "i32[batch]");
}

TEST(RecurrentShapes, BatchFirstLayoutAndHiddenSizeFromRAndW) {
  OpGraph t(22);
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "3"}));
  Value* w = t.input("w", tensor_type(DType::F32, {"1", "15", "3"}));
  Value* r = t.input("r", tensor_type(DType::F32, {"1", "15", "h"}));
  Node* n = t.node("GRU", {x, w, r}, 2, {{"layout", Attribute::of_int(1)}});
  t.infer();
  EXPECT_EQ(n->output(0)->type().str(), "f32[batch, seq, 1, 5]");
  EXPECT_EQ(n->output(1)->type().str(), "f32[batch, 1, 5]");
}

// ------------------------------------------------------------------ bad input

TEST(RecurrentShapes, WrongWShapeNamesTheNode) {
  std::string e = Recurrent("GRU")
                      .in("X", f32(std::vector<float>(6), {1, 2, 3}))
                      .in("W", f32(std::vector<float>(36), {1, 12, 3}))
                      .in("R", f32(std::vector<float>(75), {1, 15, 5}))
                      .error(2);
  EXPECT_NE(e.find("GRU_node"), std::string::npos) << e;
  EXPECT_NE(e.find("expected W of shape [1, 15, 3], got [1, 12, 3]"), std::string::npos) << e;
}

TEST(RecurrentShapes, UnknownActivationNamesTheNode) {
  std::string e = Recurrent("RNN")
                      .in("X", f32(std::vector<float>(2), {1, 1, 2}))
                      .in("W", f32(std::vector<float>(2), {1, 1, 2}))
                      .in("R", f32({0}, {1, 1, 1}))
                      .attr("activations", Attribute::of_strings({"Swish"}))
                      .error(2);
  EXPECT_NE(e.find("RNN_node"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown activation 'Swish'"), std::string::npos) << e;
}

TEST(RecurrentShapes, ActivationCountIsPerDirection) {
  std::string e = Recurrent("LSTM")
                      .in("X", f32(std::vector<float>(2), {1, 1, 2}))
                      .in("W", f32(std::vector<float>(16), {2, 4, 2}))
                      .in("R", f32(std::vector<float>(8), {2, 4, 1}))
                      .attr("direction", Attribute::of_string("bidirectional"))
                      .attr("activations", Attribute::of_strings({"Sigmoid", "Tanh", "Tanh"}))
                      .error(3);
  EXPECT_NE(e.find("expected 6 activations (3 per direction), got 3"), std::string::npos) << e;
}

TEST(RecurrentOps, SequenceLengthPastTheSequenceIsAnInputError) {
  Recurrent node("RNN");
  node.in("X", f32({1, 2}, {2, 1, 1}))
      .in("W", f32({1}, {1, 1, 1}))
      .in("R", f32({1}, {1, 1, 1}))
      .none()
      .in("sequence_lens", i32({3}));
  const std::string what = input_error([&] { node.run(2); });
  EXPECT_NE(what.find("expected sequence_lens in [0, 2], got 3"), std::string::npos) << what;
}

}  // namespace
}  // namespace tcc
