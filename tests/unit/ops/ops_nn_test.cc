// Shape rules (symbolic) and reference kernels of the nn op family and
// TfIdfVectorizer (their decompositions: tests/unit/transforms/nn_decomposition_test.cc).
#include <gtest/gtest.h>

#include <cmath>

#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

Dims D(std::initializer_list<Dim> d) { return Dims(d); }
Dim S(const char* name) { return Dim::symbol(name); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}

struct Fixture {
  Graph g;
  Fixture() { g.set_opset("", 17); }
  Value* in(const char* name, DType dt, Dims shape) { return g.add_input(name, Type::tensor(dt, std::move(shape))); }
  Node* node(const char* op, std::vector<Value*> ins, std::vector<std::string> outs) {
    Node* n = g.add_node(op, ins, outs);
    for (Value* v : n->outputs()) g.add_output(v);
    return n;
  }
  std::string type(size_t out = 0) {
    infer_shapes(g);
    return g.outputs()[out]->type().str();
  }
};

TEST(NnShapes, ConvKeepsSymbolicDims) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 3, S("h"), 32}));
  Value* w = f.g.add_initializer("w", Tensor(DType::F32, {8, 3, 3, 3}));
  Node* n = f.node("Conv", {x, w}, {"y"});
  n->set_attr("pads", Attribute::of_ints({1, 1, 1, 1}));
  EXPECT_EQ(f.type(), "f32[batch, 8, h, 32]");
}

TEST(NnShapes, StridedConvUsesFloorDivision) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 3, S("h"), 9}));
  Value* w = f.g.add_initializer("w", Tensor(DType::F32, {4, 3, 3, 3}));
  Node* n = f.node("Conv", {x, w}, {"y"});
  n->set_attr("strides", Attribute::of_ints({2, 2}));
  Dim h = Dim((SymExpr::symbol("h") - SymExpr::constant(3)).floordiv(SymExpr::constant(2)) + SymExpr::constant(1));
  EXPECT_EQ(f.type(), "f32[batch, 4, " + h.str() + ", 4]");
}

TEST(NnShapes, SameUpperConvIsCeilOfInputOverStride) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 3, S("h"), 9}));
  Value* w = f.g.add_initializer("w", Tensor(DType::F32, {4, 3, 3, 3}));
  Node* n = f.node("Conv", {x, w}, {"y"});
  n->set_attr("strides", Attribute::of_ints({2, 2}));
  n->set_attr("auto_pad", Attribute::of_string("SAME_UPPER"));
  Dim h = Dim((SymExpr::symbol("h") + SymExpr::constant(1)).floordiv(SymExpr::constant(2)));
  EXPECT_EQ(f.type(), "f32[batch, 4, " + h.str() + ", 5]");
}

TEST(NnShapes, ConvChannelMismatchNamesGroup) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 3, 5, 5}));
  Value* w = f.g.add_initializer("w", Tensor(DType::F32, {4, 2, 1, 1}));
  f.node("Conv", {x, w}, {"y"});
  std::string error = testing::shape_error(f.g);
  EXPECT_NE(error.find("group (1) times W's input channels (2)"), std::string::npos) << error;
}

TEST(NnShapes, ConvTransposeGrowsSymbolicLength) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 2, S("seq")}));
  Value* w = f.g.add_initializer("w", Tensor(DType::F32, {2, 3, 3}));
  Node* n = f.node("ConvTranspose", {x, w}, {"y"});
  n->set_attr("strides", Attribute::of_ints({2}));
  n->set_attr("group", Attribute::of_int(2));
  EXPECT_EQ(f.type(), "f32[batch, 6, seq*2+1]");
}

TEST(NnShapes, PoolsAndIndices) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 4, S("seq")}));
  Node* n = f.node("MaxPool", {x}, {"y", "idx"});
  n->set_attr("kernel_shape", Attribute::of_ints({2}));
  n->set_attr("strides", Attribute::of_ints({2}));
  n->set_attr("ceil_mode", Attribute::of_int(1));
  Dim len = Dim((SymExpr::symbol("seq") - SymExpr::constant(1)).floordiv(SymExpr::constant(2)) + SymExpr::constant(1));
  EXPECT_EQ(f.type(0), "f32[batch, 4, " + len.str() + "]");
  EXPECT_EQ(f.type(1), "i64[batch, 4, " + len.str() + "]");
}

TEST(NnShapes, CeilModeWindowThatMayStartInPaddingGetsFreshSymbol) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 1, S("seq")}));
  Node* n = f.node("AveragePool", {x}, {"y"});
  n->set_attr("kernel_shape", Attribute::of_ints({2}));
  n->set_attr("strides", Attribute::of_ints({2}));
  n->set_attr("pads", Attribute::of_ints({1, 1}));
  n->set_attr("ceil_mode", Attribute::of_int(1));
  infer_shapes(f.g);
  const Dim& d = f.g.outputs()[0]->type().shape()[2];
  EXPECT_TRUE(d.is_symbolic());
  EXPECT_TRUE(d.expr().is_symbol()) << d.str();
  EXPECT_NE(d.str(), "seq");
}

TEST(NnShapes, GlobalPoolAndBatchNorm) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 8, S("h"), S("w")}));
  f.node("GlobalAveragePool", {x}, {"y"});
  EXPECT_EQ(f.type(), "f32[batch, 8, 1, 1]");
}

TEST(NnShapes, ResizeByConstantScalesAndSizes) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 3, S("h"), S("w")}));
  Value* up = f.g.add_initializer("up", Tensor::from_f32({1, 1, 2, 2}, {4}));
  Value* down = f.g.add_initializer("down", Tensor::from_f32({1, 1, 0.5f, 1}, {4}));
  Value* sizes = f.g.add_initializer("sizes", Tensor::from_i64({1, 3, 10, 20}, {4}));
  f.node("Resize", {x, nullptr, up}, {"a"});
  f.node("Resize", {x, nullptr, down}, {"b"});
  f.node("Resize", {x, nullptr, nullptr, sizes}, {"c"});
  EXPECT_EQ(f.type(0), "f32[batch, 3, h*2, w*2]");
  EXPECT_EQ(f.type(1), "f32[batch, 3, " + Dim(SymExpr::symbol("h").floordiv(SymExpr::constant(2))).str() + ", w]");
  EXPECT_EQ(f.type(2), "f32[1, 3, 10, 20]");
}

TEST(NnShapes, ResizeWithoutScalesOrSizesFails) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 3, 4, 4}));
  f.node("Resize", {x}, {"y"});
  std::string error = testing::shape_error(f.g);
  EXPECT_NE(error.find("expected a scales or a sizes input"), std::string::npos) << error;
}

TEST(NnShapes, LossesFollowReduction) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({S("batch"), 5, S("seq")}));
  Value* t = f.in("t", DType::I64, D({S("batch"), S("seq")}));
  Node* none = f.node("SoftmaxCrossEntropyLoss", {x, t}, {"l", "logp"});
  none->set_attr("reduction", Attribute::of_string("none"));
  f.node("NegativeLogLikelihoodLoss", {x, t}, {"m"});
  EXPECT_EQ(f.type(0), "f32[batch, seq]");
  EXPECT_EQ(f.type(1), "f32[batch, 5, seq]");
  EXPECT_EQ(f.type(2), "f32[]");
}

// ---------------------------------------------------------------- kernels

std::vector<Tensor> run(Graph& g, const std::map<std::string, Tensor>& ins) { return Interpreter().run(g, ins); }

TEST(NnKernels, ConvWithBias) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 1, 3, 3}));
  Value* w = f.g.add_initializer("w", Tensor::from_f32({1, 1, 1, 1}, {1, 1, 2, 2}));
  Value* b = f.g.add_initializer("b", Tensor::from_f32({1}, {1}));
  f.node("Conv", {x, w, b}, {"y"});
  auto out = run(f.g, {{"x", Tensor::from_f32({0, 1, 2, 3, 4, 5, 6, 7, 8}, {1, 1, 3, 3})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1, 2, 2}));
  EXPECT_EQ(values(out[0]), (std::vector<double>{9, 13, 21, 25}));
}

TEST(NnKernels, ConvTransposeStride) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 1, 2}));
  Value* w = f.g.add_initializer("w", Tensor::from_f32({1, 10}, {1, 1, 2}));
  Node* n = f.node("ConvTranspose", {x, w}, {"y"});
  n->set_attr("strides", Attribute::of_ints({2}));
  auto out = run(f.g, {{"x", Tensor::from_f32({1, 2}, {1, 1, 2})}});
  EXPECT_EQ(values(out[0]), (std::vector<double>{1, 10, 2, 20}));
}

TEST(NnKernels, MaxPoolIndicesInBothStorageOrders) {
  for (int order : {0, 1}) {
    Fixture f;
    Value* x = f.in("x", DType::F32, D({1, 1, 2, 2}));
    Node* n = f.node("MaxPool", {x}, {"y", "i"});
    n->set_attr("kernel_shape", Attribute::of_ints({2, 2}));
    n->set_attr("storage_order", Attribute::of_int(order));
    auto out = run(f.g, {{"x", Tensor::from_f32({1, 4, 3, 2}, {1, 1, 2, 2})}});
    EXPECT_EQ(values(out[0]), (std::vector<double>{4}));
    EXPECT_EQ(out[1].get_i64(0), order == 0 ? 1 : 2);
  }
}

TEST(NnKernels, AveragePoolCountIncludePad) {
  for (int include : {0, 1}) {
    Fixture f;
    Value* x = f.in("x", DType::F32, D({1, 1, 3}));
    Node* n = f.node("AveragePool", {x}, {"y"});
    n->set_attr("kernel_shape", Attribute::of_ints({2}));
    n->set_attr("pads", Attribute::of_ints({1, 1}));
    n->set_attr("count_include_pad", Attribute::of_int(include));
    auto out = run(f.g, {{"x", Tensor::from_f32({1, 2, 3}, {1, 1, 3})}});
    EXPECT_EQ(values(out[0]), include ? (std::vector<double>{0.5, 1.5, 2.5, 1.5}) : (std::vector<double>{1, 1.5, 2.5, 3}));
  }
}

TEST(NnKernels, BatchNormInference) {
  Fixture f;
  Value* x = f.in("x", DType::F32, D({1, 2, 1, 1}));
  Value* s = f.g.add_initializer("s", Tensor::from_f32({1, 2}, {2}));
  Value* b = f.g.add_initializer("b", Tensor::from_f32({0, 1}, {2}));
  Value* m = f.g.add_initializer("m", Tensor::from_f32({0, 1}, {2}));
  Value* v = f.g.add_initializer("v", Tensor::from_f32({1, 4}, {2}));
  Node* n = f.node("BatchNormalization", {x, s, b, m, v}, {"y"});
  n->set_attr("epsilon", Attribute::of_float(0));
  // y = scale * (x - mean) / sqrt(var) + B per channel: 1*(1-0)/1+0, 2*(3-1)/2+1.
  auto out = run(f.g, {{"x", Tensor::from_f32({1, 3}, {1, 2, 1, 1})}});
  EXPECT_EQ(values(out[0]), (std::vector<double>{1, 3}));
}

TEST(NnKernels, ResizeModesTorchEmits) {
  struct Case {
    const char *mode, *coord;
    std::vector<double> expect;
  };
  for (const Case& c : {Case{"nearest", "asymmetric", {0, 0, 4, 4}}, Case{"linear", "half_pixel", {0, 1, 3, 4}},
                        Case{"linear", "align_corners", {0, 4.0 / 3, 8.0 / 3, 4}},
                        Case{"linear", "pytorch_half_pixel", {0, 1, 3, 4}}}) {
    Fixture f;
    Value* x = f.in("x", DType::F64, D({1, 1, 1, 2}));
    Value* sc = f.g.add_initializer("sc", Tensor::from_f32({1, 1, 1, 2}, {4}));
    Node* n = f.node("Resize", {x, nullptr, sc}, {"y"});
    n->set_attr("mode", Attribute::of_string(c.mode));
    n->set_attr("coordinate_transformation_mode", Attribute::of_string(c.coord));
    n->set_attr("nearest_mode", Attribute::of_string("floor"));
    auto out = run(f.g, {{"x", Tensor::from_f32({0, 4}, {1, 1, 1, 2}).cast(DType::F64)}});
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{1, 1, 1, 4})) << c.mode << " " << c.coord;
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out[0].get_f64(i), c.expect[i], 1e-12) << c.mode << " " << c.coord;
  }
}

TEST(NnKernels, NllWeightsIgnoreIndexAndReductions) {
  struct Case {
    const char* reduction;
    bool ignore;
    std::vector<double> expect;
  };
  for (const Case& c : {Case{"none", false, {9, 4}}, Case{"sum", false, {13}}, Case{"mean", false, {3.25}},
                        Case{"mean", true, {3}}}) {
    Fixture f;
    Value* x = f.in("x", DType::F32, D({2, 3}));
    Value* t = f.in("t", DType::I64, D({2}));
    Value* w = f.g.add_initializer("w", Tensor::from_f32({1, 2, 3}, {3}));
    Node* n = f.node("NegativeLogLikelihoodLoss", {x, t, w}, {"l"});
    n->set_attr("reduction", Attribute::of_string(c.reduction));
    if (c.ignore) n->set_attr("ignore_index", Attribute::of_int(0));
    auto out = run(f.g, {{"x", Tensor::from_f32({-1, -2, -3, -4, -5, -6}, {2, 3})}, {"t", Tensor::from_i64({2, 0}, {2})}});
    EXPECT_EQ(values(out[0]), c.expect) << c.reduction << " ignore=" << c.ignore;
  }
}

TEST(NnKernels, SoftmaxCrossEntropyWithLogProb) {
  Fixture f;
  Value* x = f.in("x", DType::F64, D({1, 2}));
  Value* t = f.in("t", DType::I64, D({1}));
  f.node("SoftmaxCrossEntropyLoss", {x, t}, {"l", "lp"});
  auto out = run(f.g, {{"x", Tensor(DType::F64, {1, 2})}, {"t", Tensor::from_i64({1}, {1})}});
  EXPECT_DOUBLE_EQ(out[0].get_f64(0), std::log(2.0));
  EXPECT_EQ(values(out[1]), (std::vector<double>{-std::log(2.0), -std::log(2.0)}));
}

TEST(NnDecomposed, GroupNormalizationNamesGroupsThatDoNotDivideTheChannels) {
  Fixture f;
  f.g.set_opset("", 21);
  Value* x = f.in("x", DType::F32, D({1, 6, 2}));
  Value* s = f.in("s", DType::F32, D({6}));
  Node* n = f.node("GroupNormalization", {x, s, s}, {"y"});
  n->set_attr("num_groups", Attribute::of_int(4));
  std::string error = testing::shape_error(f.g);
  EXPECT_NE(error.find("num_groups (4) must divide the 6 channels"), std::string::npos) << error;
}

// ---------------------------------------------------------------- TfIdfVectorizer

// The ONNX example's pool: unigrams 2, 3, 5, 4 (columns 0-3), bigrams (5, 6),
// (7, 8), (6, 7) (columns 4-6). ONNX's node tests are opset 9, older than tcc
// reads, so these are its cases at opset 13.
constexpr const char* kTfIdf = R"(graph main opset(ai.onnx: 13) {
  input %x: i32[2, 6]
  %y: f32[2, 7] = TfIdfVectorizer(%x) {mode = "MODE", min_gram_length = MIN, max_gram_length = 2, max_skip_count = SKIP, ngram_counts = [0, 4], ngram_indexes = [0, 1, 2, 3, 4, 5, 6], pool_int64s = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7], weights = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]}
  output %y
})";

std::vector<double> tfidf(const std::string& mode, int min_length, int skip) {
  std::string text = kTfIdf;
  for (auto [key, v] : {std::pair<std::string, std::string>{"MODE", mode}, {"MIN", std::to_string(min_length)},
                        {"SKIP", std::to_string(skip)}})
    text.replace(text.find(key), key.size(), v);
  auto m = parse_model(text);
  Tensor x(DType::I32, {2, 6});
  std::vector<int64_t> tokens = {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8};
  for (int64_t i = 0; i < x.numel(); ++i) x.set_i64(i, tokens[static_cast<size_t>(i)]);
  return values(Interpreter().run(*m->graph, {{"x", x}}).at(0));
}

TEST(TextKernels, TfIdfVectorizerCountsUnigramsOnceAndBigramsPerSkip) {
  // Row 0: unigram 3 three times. Row 1: unigram 5; (5, 6) and (6, 7) adjacent, (7, 8) two tokens apart.
  EXPECT_EQ(tfidf("TF", 1, 5), (std::vector<double>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1}));
  EXPECT_EQ(tfidf("TF", 2, 0), (std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}));
  // One skip does not reach (7, 8). TFIDF weighs each count, IDF each column that counted anything.
  EXPECT_EQ(tfidf("TFIDF", 1, 1), (std::vector<double>{0, 3, 0, 0, 0, 0, 0, 0, 0, 1.5, 0, 2.5, 0, 3.5}));
  EXPECT_EQ(tfidf("IDF", 1, 1), (std::vector<double>{0, 1, 0, 0, 0, 0, 0, 0, 0, 1.5, 0, 2.5, 0, 3.5}));
}

TEST(TextKernels, TfIdfVectorizerRefusesStringTokens) {
  Fixture f;
  Value* x = f.in("x", DType::String, D({4}));
  Node* n = f.node("TfIdfVectorizer", {x}, {"y"});
  n->set_attr("mode", Attribute::of_string("TF"));
  n->set_attr("min_gram_length", Attribute::of_int(1));
  n->set_attr("max_gram_length", Attribute::of_int(1));
  n->set_attr("ngram_counts", Attribute::of_ints({0}));
  n->set_attr("ngram_indexes", Attribute::of_ints({0}));
  n->set_attr("pool_int64s", Attribute::of_ints({1}));
  std::string error = testing::shape_error(f.g);
  EXPECT_NE(error.find("integer tokens"), std::string::npos) << error;
}

}  // namespace
}  // namespace tcc
