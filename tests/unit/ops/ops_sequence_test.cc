// Shape rules and reference kernels of the sequence and optional ops, and how
// the interpreter takes and checks sequence and optional values.
#include <gtest/gtest.h>

#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::f32;
using testing::floats;
using testing::i64;
using testing::iota_f32;
using testing::OpGraph;
using testing::tensor_type;

Type f32_seq(const std::vector<std::string>& dims) { return Type::sequence(tensor_type(DType::F32, dims)); }

Tensor seq_of(std::vector<Tensor> elems) {
  DType dt = elems.front().dtype();
  return Tensor::sequence(dt, std::move(elems));
}

TEST(SequenceOps, ConstructAtInsertEraseLength) {
  OpGraph t(17);
  Value* a = t.input("a", tensor_type(DType::F32, {"2", "3"}));
  Value* b = t.input("b", tensor_type(DType::F32, {"4", "3"}));
  Value* s = t.op("SequenceConstruct", {a, b});
  Value* front = t.op("SequenceInsert", {s, b, t.scalar(0)});        // [b, a, b]
  Value* back = t.op("SequenceInsert", {front, a});                  // [b, a, b, a]
  Value* erased = t.op("SequenceErase", {back, t.scalar(-3)});       // [b, b, a]
  Value* last = t.op("SequenceErase", {erased});                     // [b, b]
  Value* at = t.op("SequenceAt", {erased, t.scalar(-1)});            // a
  Value* len = t.op("SequenceLength", {erased});
  Value* len2 = t.op("SequenceLength", {last});
  t.infer();
  EXPECT_EQ(s->type().str(), "seq<f32[?, 3]>");
  EXPECT_EQ(at->type().str(), "f32[?, 3]");
  EXPECT_EQ(len->type().str(), "i64[]");
  auto out = t.run({erased, at, len, len2}, {{"a", iota_f32({2, 3})}, {"b", Tensor(DType::F32, {4, 3})}});
  ASSERT_TRUE(out[0].is_sequence());
  ASSERT_EQ(out[0].elements().size(), 3u);
  EXPECT_EQ(out[0].elements()[0].shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(out[0].elements()[1].shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_TRUE(out[0].elements()[2].identical(iota_f32({2, 3})));
  EXPECT_TRUE(out[1].identical(iota_f32({2, 3})));
  EXPECT_EQ(out[2].get_i64(0), 3);
  EXPECT_EQ(out[3].get_i64(0), 2);
}

TEST(SequenceOps, PositionsOutOfRangeAndMixedDtypesFail) {
  OpGraph t(17);
  Value* s = t.input("s", f32_seq({"2"}));
  Value* at = t.op("SequenceAt", {s, t.scalar(2)});
  t.infer();
  Tensor two = seq_of({f32({1, 2}, {2}), f32({3, 4}, {2})});
  EXPECT_THROW(t.run({at}, {{"s", two}}), InputError);

  OpGraph mixed(17);
  Value* x = mixed.input("x", tensor_type(DType::F32, {"2"}));
  Value* y = mixed.input("y", tensor_type(DType::I64, {"2"}));
  mixed.op("SequenceConstruct", {x, y});
  EXPECT_THROW(mixed.infer(), InputError);

  OpGraph empty(17);
  Value* e = empty.op("SequenceEmpty", {}, {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::I64))}});
  Value* erased = empty.op("SequenceErase", {e});
  empty.infer();
  EXPECT_EQ(e->type().str(), "seq<i64[*]>");
  EXPECT_THROW(empty.run({erased}, {}), InputError);
}

TEST(SequenceOps, SplitToSequenceAndConcatFromSequenceRoundTrip) {
  OpGraph t(17);
  Value* x = t.input("x", tensor_type(DType::F32, {"5", "2"}));
  Value* chunks = t.op("SplitToSequence", {x, t.scalar(2)});  // rows 2, 2, 1
  Value* sizes = t.op("SplitToSequence", {x, t.ints1({1, 4})});
  Value* rows = t.op("SplitToSequence", {x}, {{"keepdims", Attribute::of_int(0)}});
  Value* cols = t.op("SplitToSequence", {x}, {{"axis", Attribute::of_int(1)}});
  Value* joined = t.op("ConcatFromSequence", {chunks}, {{"axis", Attribute::of_int(0)}});
  Value* stacked = t.op("ConcatFromSequence", {rows}, {{"axis", Attribute::of_int(-1)}, {"new_axis", Attribute::of_int(1)}});
  t.infer();
  EXPECT_EQ(chunks->type().str(), "seq<f32[?, 2]>");
  EXPECT_EQ(sizes->type().str(), "seq<f32[?, 2]>");
  EXPECT_EQ(rows->type().str(), "seq<f32[2]>");
  EXPECT_EQ(cols->type().str(), "seq<f32[5, 1]>");
  EXPECT_EQ(joined->type().str(), "f32[?, 2]");
  EXPECT_EQ(stacked->type().str(), "f32[2, ?]");
  Tensor in = iota_f32({5, 2});
  auto out = t.run({chunks, sizes, rows, joined, stacked}, {{"x", in}});
  ASSERT_EQ(out[0].elements().size(), 3u);
  EXPECT_EQ(out[0].elements()[2].shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(floats(out[0].elements()[2]), (std::vector<double>{8, 9}));
  ASSERT_EQ(out[1].elements().size(), 2u);
  EXPECT_EQ(out[1].elements()[1].shape(), (std::vector<int64_t>{4, 2}));
  ASSERT_EQ(out[2].elements().size(), 5u);
  EXPECT_EQ(out[2].elements()[3].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(floats(out[2].elements()[3]), (std::vector<double>{6, 7}));
  EXPECT_TRUE(out[3].identical(in));
  // Stacking the rows along a new last axis transposes x.
  EXPECT_EQ(floats(out[4]), (std::vector<double>{0, 2, 4, 6, 8, 1, 3, 5, 7, 9}));

  OpGraph bad(17);
  Value* y = bad.input("y", tensor_type(DType::F32, {"5"}));
  Value* wrong = bad.op("SplitToSequence", {y, bad.ints1({2, 2})});
  bad.infer();
  EXPECT_THROW(bad.run({wrong}, {{"y", iota_f32({5})}}), InputError);
}

// A SequenceMap adding its tensor input to each element of its sequence input.
TEST(SequenceOps, SequenceMapRunsTheBodyPerElement) {
  OpGraph t(17);
  Value* s = t.input("s", Type::sequence(Type::tensor(DType::F32, {Dim::unknown()})));
  Value* bias = t.input("bias", tensor_type(DType::F32, {"1"}));
  Node* map = t.node("SequenceMap", {s, bias});
  auto body = std::make_shared<Graph>();
  body->set_parent(&t.g, map);
  Value* elem = body->add_input("elem", Type());
  Value* b = body->add_input("b", Type());
  body->add_output(body->add_node("Add", {elem, b}, {"sum"})->output(0));
  map->set_attr("body", Attribute::of_graph(body));
  t.infer();
  EXPECT_EQ(map->output(0)->type().str(), "seq<f32[?]>");
  auto out = t.run({map->output(0)}, {{"s", seq_of({f32({1, 2}, {2}), f32({3}, {1})})}, {"bias", f32({10}, {1})}});
  ASSERT_EQ(out[0].elements().size(), 2u);
  EXPECT_EQ(floats(out[0].elements()[0]), (std::vector<double>{11, 12}));
  EXPECT_EQ(floats(out[0].elements()[1]), (std::vector<double>{13}));
}

TEST(SequenceOps, OptionalsHoldOneValueOrNone) {
  OpGraph t(18);
  Value* x = t.input("x", tensor_type(DType::F32, {"2"}));
  Value* opt = t.op("Optional", {x});
  Value* has = t.op("OptionalHasElement", {opt});
  Value* got = t.op("OptionalGetElement", {opt});
  Value* absent = t.op("OptionalHasElement", {nullptr});
  Value* none = t.op("Optional", {});
  none->set_type(Type::optional(tensor_type(DType::F32, {"2"})));
  Value* none_has = t.op("OptionalHasElement", {none});
  t.infer();
  EXPECT_EQ(opt->type().str(), "opt<f32[2]>");
  EXPECT_EQ(got->type().str(), "f32[2]");
  EXPECT_EQ(has->type().str(), "bool[]");
  ASSERT_TRUE(t.info.consts.count(absent));
  EXPECT_EQ(t.info.consts.at(absent).get_i64(0), 0);
  auto out = t.run({has, got, none_has, none}, {{"x", f32({1, 2}, {2})}});
  EXPECT_EQ(out[0].get_i64(0), 1);
  EXPECT_EQ(floats(out[1]), (std::vector<double>{1, 2}));
  EXPECT_EQ(out[2].get_i64(0), 0);
  ASSERT_TRUE(out[3].is_optional());
  EXPECT_TRUE(out[3].elements().empty());
}

TEST(SequenceOps, GettingTheElementOfNoneFails) {
  OpGraph t(18);
  Value* o = t.input("o", Type::optional(tensor_type(DType::F32, {"2"})));
  Value* got = t.op("OptionalGetElement", {o});
  t.infer();
  EXPECT_THROW(t.run({got}, {{"o", Tensor::optional(DType::F32, {})}}), InputError);
}

TEST(SequenceValues, TheInterpreterChecksTheirKindAndElements) {
  OpGraph t(17);
  Value* s = t.input("s", f32_seq({"2"}));
  Value* len = t.op("SequenceLength", {s});
  t.infer();
  auto run = [&](const Tensor& v) { return t.run({len}, {{"s", v}}); };
  EXPECT_EQ(run(seq_of({f32({1, 2}, {2})}))[0].get_i64(0), 1);
  EXPECT_THROW(run(f32({1, 2}, {2})), InputError);                // a tensor for a sequence
  EXPECT_THROW(run(seq_of({f32({1, 2, 3}, {3})})), InputError);   // an element of another shape
  EXPECT_THROW(run(Tensor::optional(DType::F32, {})), InputError);  // an optional

  OpGraph dense(17);
  Value* x = dense.input("x", tensor_type(DType::F32, {"2"}));
  Value* y = dense.op("Neg", {x});
  dense.infer();
  EXPECT_THROW(dense.run({y}, {{"x", seq_of({f32({1, 2}, {2})})}}), InputError);
}

TEST(SequenceValues, IdenticalAndCloneSeeElements) {
  Tensor a = seq_of({f32({1, 2}, {2}), f32({3}, {1})});
  Tensor b = seq_of({f32({1, 2}, {2}), f32({4}, {1})});
  EXPECT_TRUE(a.identical(a.clone()));
  EXPECT_FALSE(a.identical(b));
  EXPECT_FALSE(Tensor::optional(DType::F32, {}).identical(Tensor::sequence(DType::F32, {})));
  EXPECT_FALSE(Tensor::optional(DType::F32, {}).identical(Tensor::optional(DType::F32, {f32({1}, {1})})));
}

}  // namespace
}  // namespace tcc
