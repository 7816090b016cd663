// Shape rules and reference kernels of the data-dependent ops: NonZero, Unique, TopK.
#include <gtest/gtest.h>

#include "src/ops/op_registry.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::floats;
using testing::OpGraph;
using testing::tensor_type;

TEST(DataDependentOps, NonZeroHasAFreshCount) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "3"}));
  Value* nz = t.op("NonZero", {x});
  t.infer();
  EXPECT_EQ(nz->type().str(), "i64[2, u0]");
  auto out = t.run({nz}, {{"x", testing::f32({0, 2, 0, 1, 0, 3}, {2, 3})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  EXPECT_TRUE(OpRegistry::get().lookup("", "NonZero", 17)->has(kDataDependentShape));
}

TEST(DataDependentOps, NonZeroOfAConstantIsStatic) {
  OpGraph t;
  Value* c = t.g.add_initializer("c", testing::i64({0, 5, 7}, {3}));
  Value* nz = t.op("NonZero", {c});
  t.infer();
  EXPECT_EQ(nz->type().str(), "i64[1, 2]");
}

TEST(DataDependentOps, UniqueSortedAndUnsortedWithAllOutputs) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"n"}));
  Node* s = t.node("Unique", {x}, 4);
  Node* u = t.node("Unique", {x}, 4, {{"sorted", Attribute::of_int(0)}});
  t.infer();
  EXPECT_EQ(s->output(0)->type().str(), "f32[u0]");
  EXPECT_EQ(s->output(1)->type().str(), "i64[u0]");
  EXPECT_EQ(s->output(2)->type().str(), "i64[n]");
  EXPECT_EQ(s->output(3)->type().str(), "i64[u0]");
  auto out = t.run({s->output(0), s->output(1), s->output(2), s->output(3), u->output(0), u->output(1)},
                   {{"x", testing::f32({2, 1, 1, 3, 4, 3}, {6})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(out[2].to_i64_vector(), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(out[3].to_i64_vector(), (std::vector<int64_t>{2, 1, 2, 1}));
  EXPECT_EQ(floats(out[4]), (std::vector<double>{2, 1, 3, 4}));
  EXPECT_EQ(out[5].to_i64_vector(), (std::vector<int64_t>{0, 1, 3, 4}));
}

TEST(DataDependentOps, UniqueAlongAnAxis) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::I64, {"rows", "2"}));
  Node* u = t.node("Unique", {x}, 3, {{"axis", Attribute::of_int(0)}});
  t.infer();
  EXPECT_EQ(u->output(0)->type().str(), "i64[u0, 2]");
  EXPECT_EQ(u->output(2)->type().str(), "i64[rows]");
  auto out = t.run({u->output(0), u->output(2)}, {{"x", testing::i64({1, 0, 0, 1, 1, 0}, {3, 2})}});
  EXPECT_EQ(out[0].to_i64_vector(), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 0, 1}));
}

TEST(DataDependentOps, TopKUsesKnownOrSymbolicK) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "vocab"}));
  Node* k3 = t.node("TopK", {x, t.ints1({3})}, 2);
  Value* seq = t.op("Slice", {t.op("Shape", {x}), t.ints1({0}), t.ints1({1})});
  Node* ks = t.node("TopK", {x, seq}, 2, {{"axis", Attribute::of_int(1)}});
  Node* kr = t.node("TopK", {x, t.input("k", tensor_type(DType::I64, {"1"}))}, 2);
  t.infer();
  EXPECT_EQ(k3->output(0)->type().str(), "f32[batch, 3]");
  EXPECT_EQ(k3->output(1)->type().str(), "i64[batch, 3]");
  EXPECT_EQ(ks->output(0)->type().str(), "f32[batch, batch]");
  EXPECT_EQ(kr->output(0)->type().str(), "f32[batch, u0]");
}

TEST(DataDependentOps, TopKBreaksTiesByLowerIndex) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"2", "4"}));
  Node* big = t.node("TopK", {x, t.ints1({3})}, 2);
  Node* small = t.node("TopK", {x, t.ints1({2})}, 2, {{"largest", Attribute::of_int(0)}, {"axis", Attribute::of_int(0)}});
  auto out = t.run({big->output(0), big->output(1), small->output(0), small->output(1)},
                   {{"x", testing::f32({1, 3, 3, 2, 5, 5, 5, 0}, {2, 4})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{3, 3, 2, 5, 5, 5}));
  EXPECT_EQ(out[1].to_i64_vector(), (std::vector<int64_t>{1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(floats(out[2]), (std::vector<double>{1, 3, 3, 0, 5, 5, 5, 2}));
  EXPECT_EQ(out[3].to_i64_vector(), (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 1, 0}));

  OpGraph bad;
  Value* y = bad.input("y", tensor_type(DType::F32, {"2", "4"}));
  bad.node("TopK", {y, bad.ints1({5})}, 2);
  EXPECT_THROW(bad.infer(), InputError);
}

}  // namespace
}  // namespace tcc
