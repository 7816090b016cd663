// Shape rules (symbolic dims and symbolic shape values) and reference kernels of
// the shape family: Shape, Size, Reshape, Squeeze, Unsqueeze, Flatten, Identity,
// Constant, ConstantOfShape, Range, Dropout.
#include <gtest/gtest.h>

#include <limits>

#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::OpGraph;
using testing::tensor_type;

TEST(ShapeOps, ShapeGivesSymbolicValuesAndSlicesWithStartEnd) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  Value* s = t.op("Shape", {x});
  Value* tail = t.op("Shape", {x}, {{"start", Attribute::of_int(-2)}});
  Value* mid = t.op("Shape", {x}, {{"start", Attribute::of_int(1)}, {"end", Attribute::of_int(2)}});
  Value* n = t.op("Size", {x});
  t.infer();
  EXPECT_EQ(s->type().str(), "i64[3]");
  EXPECT_EQ(t.values(s), "[batch, seq, 768]");
  EXPECT_EQ(t.values(tail), "[seq, 768]");
  EXPECT_EQ(mid->type().str(), "i64[1]");
  EXPECT_EQ(t.values(mid), "[seq]");
  EXPECT_EQ(n->type().str(), "i64[]");
  EXPECT_EQ(t.values(n), "[batch*seq*768]");
  auto out = t.run({s, tail, n}, {{"x", Tensor(DType::F32, {2, 5, 768})}});
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{2, 5, 768}));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{5, 768}));
  EXPECT_EQ(out[2].rank(), 0u);
  EXPECT_EQ(out[2].get_i64(0), 2 * 5 * 768);
}

TEST(ShapeOps, ShapeOfStaticInputIsAConstant) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"2", "3"}));
  Value* s = t.op("Shape", {x});
  auto& info = t.infer();
  ASSERT_TRUE(info.consts.count(s));
  EXPECT_EQ(info.consts.at(s).to_i64_vector(), (std::vector<int64_t>{2, 3}));
}

TEST(ShapeOps, ReshapeCopiesZerosAndDividesSymbolically) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  Value* heads = t.op("Reshape", {x, t.ints1({0, 0, 12, -1})});
  Value* rows = t.op("Reshape", {x, t.ints1({-1, 768})});
  Value* back = t.op("Reshape", {rows, t.ints1({0, -1})});
  Value* flat = t.op("Reshape", {x, t.ints1({-1})});
  t.infer();
  EXPECT_EQ(heads->type().str(), "f32[batch, seq, 12, 64]");
  EXPECT_EQ(rows->type().str(), "f32[batch*seq, 768]");
  EXPECT_EQ(back->type().str(), "f32[batch*seq, 768]");
  EXPECT_EQ(flat->type().str(), "f32[batch*seq*768]");
  Tensor in = testing::iota_f32({1, 2, 768});
  auto out = t.run({heads}, {{"x", in}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 2, 12, 64}));
  EXPECT_EQ(testing::floats(out[0]), testing::floats(in));
}

TEST(ShapeOps, ReshapeAllowZeroAndErrors) {
  OpGraph t(14);
  Value* e = t.input("e", tensor_type(DType::F32, {"0", "3"}));
  Value* z = t.op("Reshape", {e, t.ints1({3, 0})}, {{"allowzero", Attribute::of_int(1)}});
  t.infer();
  EXPECT_EQ(z->type().str(), "f32[3, 0]");

  OpGraph bad;
  Value* x = bad.input("x", tensor_type(DType::F32, {"2", "3"}));
  bad.op("Reshape", {x, bad.ints1({4, -1})});
  const std::string what = input_error([&] { bad.infer(); });
  EXPECT_NE(what.find("cannot reshape [2, 3] (6 elements) into [4, -1]"), std::string::npos) << what;
  OpGraph two;
  Value* y = two.input("y", tensor_type(DType::F32, {"n"}));
  two.op("Reshape", {y, two.ints1({-1, -1})});
  EXPECT_THROW(two.infer(), InputError);
}

TEST(ShapeOps, ReshapeRuntimeMismatchFails) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"n"}));
  Value* shape = t.input("shape", tensor_type(DType::I64, {"2"}));
  Value* y = t.op("Reshape", {x, shape});
  t.infer();
  EXPECT_EQ(y->type().str(), "f32[?, ?]");
  EXPECT_THROW(t.run({y}, {{"x", Tensor(DType::F32, {5})}, {"shape", testing::i64({2, 2}, {2})}}), InputError);
}

TEST(ShapeOps, SqueezeAndUnsqueezeWithAxesInputAndAttribute) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "1", "seq"}));
  Value* sq = t.op("Squeeze", {x, t.ints1({1})});
  Value* all = t.op("Squeeze", {x});
  Value* un = t.op("Unsqueeze", {sq, t.ints1({0, -1})});
  t.infer();
  EXPECT_EQ(sq->type().str(), "f32[batch, seq]");
  EXPECT_EQ(all->type().str(), "f32[batch, seq]");
  EXPECT_EQ(un->type().str(), "f32[1, batch, seq, 1]");
  auto out = t.run({un}, {{"x", testing::iota_f32({2, 1, 3})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 2, 3, 1}));
  EXPECT_EQ(testing::floats(out[0]), (std::vector<double>{0, 1, 2, 3, 4, 5}));

  OpGraph old(11);
  Value* a = old.input("a", tensor_type(DType::F32, {"n"}));
  Value* u = old.op("Unsqueeze", {a}, {{"axes", Attribute::of_ints({1})}});
  Value* s = old.op("Squeeze", {u}, {{"axes", Attribute::of_ints({1})}});
  old.infer();
  EXPECT_EQ(u->type().str(), "f32[n, 1]");
  EXPECT_EQ(s->type().str(), "f32[n]");
}

TEST(ShapeOps, SqueezeOfANonUnitDimFails) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"2", "3"}));
  t.op("Squeeze", {x, t.ints1({0})});
  const std::string what = input_error([&] { t.infer(); });
  EXPECT_NE(what.find("its size is 2, not 1"), std::string::npos) << what;
}

TEST(ShapeOps, UnsqueezeAndSqueezeCarryScalarValues) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq"}));
  Value* seq = t.op("Gather", {t.op("Shape", {x}), t.scalar(1)});
  Value* u = t.op("Unsqueeze", {seq, t.ints1({0})});
  Value* s = t.op("Squeeze", {u, t.ints1({0})});
  t.infer();
  EXPECT_EQ(seq->type().str(), "i64[]");
  EXPECT_EQ(t.values(seq), "[seq]");
  EXPECT_EQ(u->type().str(), "i64[1]");
  EXPECT_EQ(t.values(u), "[seq]");
  EXPECT_EQ(t.values(s), "[seq]");
}

TEST(ShapeOps, FlattenMultipliesSymbolicDims) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "12", "64"}));
  Value* f2 = t.op("Flatten", {x}, {{"axis", Attribute::of_int(2)}});
  Value* f0 = t.op("Flatten", {x}, {{"axis", Attribute::of_int(0)}});
  Value* fneg = t.op("Flatten", {x}, {{"axis", Attribute::of_int(-1)}});
  t.infer();
  EXPECT_EQ(f2->type().str(), "f32[batch*seq, 768]");
  EXPECT_EQ(f0->type().str(), "f32[1, batch*seq*768]");
  EXPECT_EQ(fneg->type().str(), "f32[batch*seq*12, 64]");
}

TEST(ShapeOps, ConstantAttributesAndIdentity) {
  OpGraph t;
  Value* ints = t.op("Constant", {}, {{"value_ints", Attribute::of_ints({4, 5, 6})}});
  Value* fl = t.op("Constant", {}, {{"value_float", Attribute::of_float(2.5f)}});
  Value* str = t.op("Constant", {}, {{"value_strings", Attribute::of_strings({"a", "bc"})}});
  Value* id = t.op("Identity", {ints});
  auto& info = t.infer();
  EXPECT_EQ(ints->type().str(), "i64[3]");
  EXPECT_EQ(fl->type().str(), "f32[]");
  EXPECT_EQ(str->type().str(), "str[2]");
  EXPECT_EQ(t.values(id), "[4, 5, 6]");
  ASSERT_TRUE(info.consts.count(ints));
  auto out = t.run({id, fl, str}, {});
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(out[1].get_f64(0), 2.5);
  EXPECT_EQ(out[2].strings(), (std::vector<std::string>{"a", "bc"}));

  OpGraph none;
  none.op("Constant", {});
  EXPECT_THROW(none.infer(), InputError);
}

TEST(ShapeOps, ConstantOfShapeTakesSymbolicDimsFromValues) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq"}));
  Value* c = t.op("ConstantOfShape", {t.op("Shape", {x})},
                  {{"value", Attribute::of_tensor(Tensor::from_i64({7}, {1}))}});
  Value* z = t.op("ConstantOfShape", {t.ints1({2})});
  t.infer();
  EXPECT_EQ(c->type().str(), "i64[batch, seq]");
  EXPECT_EQ(z->type().str(), "f32[2]");
  auto out = t.run({c, z}, {{"x", Tensor(DType::F32, {2, 3})}});
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>(6, 7)));
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(testing::floats(out[1]), (std::vector<double>{0, 0}));
}

TEST(ShapeOps, RangeOverASymbolicLimit) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq"}));
  Value* seq = t.op("Gather", {t.op("Shape", {x}), t.scalar(1)});
  Value* r1 = t.op("Range", {t.scalar(0), seq, t.scalar(1)});
  Value* r2 = t.op("Range", {t.scalar(0), seq, t.scalar(2)});
  Value* r3 = t.op("Range", {seq, t.scalar(0), t.scalar(-1)});
  Value* small = t.op("Range", {t.scalar(1), t.scalar(4), t.scalar(1)});
  t.infer();
  EXPECT_EQ(r1->type().str(), "i64[seq]");
  EXPECT_EQ(r2->type().str(), "i64[(seq+1)//(2)]");
  EXPECT_EQ(r3->type().str(), "i64[seq]");
  EXPECT_EQ(small->type().str(), "i64[3]");
  EXPECT_EQ(t.values(small), "[1, 2, 3]");
  auto out = t.run({r1, r2, r3}, {{"x", Tensor(DType::F32, {1, 5})}});
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(out[2].to_i64_vector(), (std::vector<int64_t>{5, 4, 3, 2, 1}));
}

TEST(ShapeOps, RangeOfRuntimeFloatsHasAFreshLength) {
  OpGraph t;
  Value* lim = t.input("lim", Type::tensor(DType::F32, {}));
  Value* r = t.op("Range", {t.g.add_initializer("zero", Tensor(DType::F32, {})), lim,
                            t.g.add_initializer("half", Tensor::from_f32({0.5f}, {}))});
  t.infer();
  EXPECT_EQ(r->type().str(), "f32[u0]");
  auto out = t.run({r}, {{"lim", Tensor::from_f32({1.2f}, {})}});
  EXPECT_EQ(testing::floats(out[0]), (std::vector<double>{0, 0.5, 1.0}));
}

TEST(ShapeOps, DropoutAtInferenceIsIdentityWithTrueMask) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "4"}));
  Node* d = t.node("Dropout", {x, t.g.add_initializer("ratio", Tensor::from_f32({0.3f}, {}))}, 2);
  t.infer();
  EXPECT_EQ(d->output(0)->type().str(), "f32[batch, 4]");
  EXPECT_EQ(d->output(1)->type().str(), "bool[batch, 4]");
  Tensor in = testing::iota_f32({1, 4});
  auto out = t.run({d->output(0), d->output(1)}, {{"x", in}});
  EXPECT_EQ(testing::floats(out[0]), testing::floats(in));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(ShapeOps, DropoutInTrainingScalesKeptElements) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"1000"}));
  Tensor on(DType::Bool, {});
  on.set_i64(0, 1);
  Value* train = t.g.add_initializer("train", on);
  Node* d = t.node("Dropout", {x, t.g.add_initializer("ratio", Tensor::from_f32({0.5f}, {})), train}, 2,
                   {{"seed", Attribute::of_int(3)}});
  Tensor ones(DType::F32, {1000});
  for (int64_t i = 0; i < 1000; ++i) ones.set_f64(i, 1);
  auto out = t.run({d->output(0), d->output(1)}, {{"x", ones}});
  int64_t kept = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(out[0].get_f64(i), out[1].get_i64(i) ? 2.0 : 0.0);
    kept += out[1].get_i64(i);
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
}

// ONNX asks for a ratio in [0, 1). One from data outside it is defined as the
// kernels compute it: at or below 0 the identity, at or above 1 or NaN every
// element dropped; at inference it is not read. A constant one is refused.
TEST(ShapeOps, DropoutRatioOutsideItsRangeIsDefinedOrRefused) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"4"}));
  Value* ratio = t.input("ratio", tensor_type(DType::F32, {}));
  Value* train = t.input("train", tensor_type(DType::Bool, {}));
  Node* d = t.node("Dropout", {x, ratio, train}, 2);
  t.infer();
  Tensor in = testing::iota_f32({4});
  auto run = [&](float r, bool training) {
    Tensor on(DType::Bool, {});
    on.set_i64(0, training);
    return t.run({d->output(0), d->output(1)}, {{"x", in}, {"ratio", Tensor::from_f32({r}, {})}, {"train", on}});
  };
  for (float r : {-0.5f, 0.0f}) {
    auto out = run(r, true);
    EXPECT_EQ(testing::floats(out[0]), testing::floats(in)) << r;
    EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 1, 1, 1})) << r;
  }
  for (float r : {1.0f, 7.0f, std::numeric_limits<float>::quiet_NaN()}) {
    auto out = run(r, true);
    EXPECT_EQ(testing::floats(out[0]), (std::vector<double>{0, 0, 0, 0})) << r;
    EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 0})) << r;
  }
  EXPECT_EQ(testing::floats(run(2.0f, false)[0]), testing::floats(in));

  OpGraph c;
  Value* cx = c.input("x", tensor_type(DType::F32, {"4"}));
  c.node("Dropout", {cx, c.g.add_initializer("ratio", Tensor::from_f32({1.0f}, {}))}, 2);
  EXPECT_THROW(c.infer(), InputError);
}

}  // namespace
}  // namespace tcc
