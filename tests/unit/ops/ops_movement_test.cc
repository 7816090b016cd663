// Shape rules (symbolic dims and propagated shape values) and reference
// kernels of the movement family.
#include <gtest/gtest.h>

#include <limits>

#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::floats;
using testing::iota_f32;
using testing::OpGraph;
using testing::tensor_type;

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

TEST(MovementOps, TransposePermutesSymbolicDims) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "12"}));
  Value* y = t.op("Transpose", {x}, {{"perm", Attribute::of_ints({1, 2, 0})}});
  Value* rev = t.op("Transpose", {x});
  t.infer();
  EXPECT_EQ(y->type().str(), "f32[seq, 12, batch]");
  EXPECT_EQ(rev->type().str(), "f32[12, seq, batch]");
  auto out = t.run({y}, {{"x", iota_f32({2, 1, 12})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 12, 2}));
  EXPECT_EQ(out[0].get_f64(0), 0);
  EXPECT_EQ(out[0].get_f64(1), 12);
  EXPECT_EQ(out[0].get_f64(2), 1);
  EXPECT_EQ(out[0].get_f64(23), 23);

  OpGraph bad;
  Value* z = bad.input("z", tensor_type(DType::F32, {"2", "3"}));
  bad.op("Transpose", {z}, {{"perm", Attribute::of_ints({0, 0})}});
  EXPECT_THROW(bad.infer(), InputError);
}

TEST(MovementOps, GatherShapeAndPickValues) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  Value* s = t.op("Shape", {x});
  Value* seq = t.op("Gather", {s, t.scalar(1)});
  Value* pair = t.op("Gather", {s, t.ints1({-1, 0})});
  Value* rows = t.op("Gather", {x, t.input("idx", tensor_type(DType::I64, {"k", "2"}))}, {{"axis", Attribute::of_int(1)}});
  t.infer();
  EXPECT_EQ(t.values(seq), "[seq]");
  EXPECT_EQ(t.values(pair), "[768, batch]");
  EXPECT_EQ(rows->type().str(), "f32[batch, k, 2, 768]");

  OpGraph r;
  Value* d = r.input("d", tensor_type(DType::F32, {"3", "2"}));
  Value* g = r.op("Gather", {d, r.ints1({2, -3})});
  auto out = r.run({g}, {{"d", iota_f32({3, 2})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{4, 5, 0, 1}));
  Value* oob = r.op("Gather", {d, r.ints1({3})});
  EXPECT_THROW(r.run({oob}, {{"d", iota_f32({3, 2})}}), InputError);
}

TEST(MovementOps, GatherElementsAndGatherND) {
  OpGraph t;
  Value* d = t.input("d", tensor_type(DType::F32, {"n", "3"}));
  Value* idx = t.input("i", tensor_type(DType::I64, {"n", "2"}));
  Value* ge = t.op("GatherElements", {d, idx}, {{"axis", Attribute::of_int(1)}});
  Value* pts = t.input("p", tensor_type(DType::I64, {"k", "2"}));
  Value* nd = t.op("GatherND", {d, pts});
  t.infer();
  EXPECT_EQ(ge->type().str(), "f32[n, 2]");
  EXPECT_EQ(nd->type().str(), "f32[k]");
  auto out = t.run({ge, nd}, {{"d", iota_f32({2, 3})},
                              {"i", testing::i64({2, 0, -1, 1}, {2, 2})},
                              {"p", testing::i64({1, 2, 0, 1}, {2, 2})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{2, 0, 5, 4}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{5, 1}));
}

TEST(MovementOps, UnrankedInputsGiveUnrankedOutputs) {
  OpGraph t;
  Value* d = t.input("d", Type::tensor_unranked(DType::F32));
  Value* i = t.input("i", tensor_type(DType::I64, {"2"}));
  Value* g = t.op("Gather", {d, i});
  Value* s = t.op("Slice", {d, t.ints1({0}), t.ints1({1})});
  Value* c = t.op("Concat", {d, d}, {{"axis", Attribute::of_int(0)}});
  t.infer();
  EXPECT_EQ(g->type().str(), "f32[*]");
  EXPECT_EQ(s->type().str(), "f32[*]");
  EXPECT_EQ(c->type().str(), "f32[*]");
}

TEST(MovementOps, ScatterElementsAndScatterNDWithReductions) {
  OpGraph t(18);
  Value* d = t.input("d", tensor_type(DType::F32, {"2", "3"}));
  Value* se = t.op("ScatterElements", {d, t.g.add_initializer("i", testing::i64({1, 1}, {1, 2})),
                                       t.g.add_initializer("u", testing::f32({10, 20}, {1, 2}))},
                   {{"axis", Attribute::of_int(1)}, {"reduction", Attribute::of_string("add")}});
  Value* sn = t.op("ScatterND", {d, t.g.add_initializer("j", testing::i64({1}, {1, 1})),
                                 t.g.add_initializer("v", testing::f32({7, 8, 9}, {1, 3}))});
  t.infer();
  EXPECT_EQ(se->type().str(), "f32[2, 3]");
  auto out = t.run({se, sn}, {{"d", iota_f32({2, 3})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{0, 31, 2, 3, 4, 5}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{0, 1, 2, 7, 8, 9}));
}

TEST(MovementOps, SliceSymbolicDimsAndSentinels) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  Value* all = t.op("Slice", {x, t.ints1({0}), t.ints1({kEnd}), t.ints1({1})});
  Value* drop_last = t.op("Slice", {x, t.ints1({0}), t.ints1({-1}), t.ints1({1})});
  Value* from1 = t.op("Slice", {x, t.ints1({1}), t.ints1({kEnd}), t.ints1({1})});
  Value* rev = t.op("Slice", {x, t.ints1({-1}), t.ints1({std::numeric_limits<int64_t>::min()}), t.ints1({1}),
                              t.ints1({-1})});
  Value* step = t.op("Slice", {x, t.ints1({0, 0}), t.ints1({kEnd, 512}), t.ints1({1, 2}), t.ints1({2, 3})});
  // The causal-mask pattern: bias[:, :, :seq] of a static buffer with seq from Shape.
  Value* bias = t.input("bias", tensor_type(DType::F32, {"1024", "1024"}));
  Value* seq = t.op("Unsqueeze", {t.op("Gather", {t.op("Shape", {x}), t.scalar(1)}), t.ints1({0})});
  Value* mask = t.op("Slice", {bias, t.ints1({0, 0}), t.op("Concat", {seq, seq}, {{"axis", Attribute::of_int(0)}})});
  t.infer();
  EXPECT_EQ(all->type().str(), "f32[batch, seq, 768]");
  EXPECT_EQ(drop_last->type().str(), "f32[batch, seq-1, 768]");
  EXPECT_EQ(from1->type().str(), "f32[batch, seq-1, 768]");
  EXPECT_EQ(rev->type().str(), "f32[batch, seq, 768]");
  EXPECT_EQ(step->type().str(), "f32[batch, (seq+1)//(2), 171]");
  EXPECT_EQ(mask->type().str(), "f32[seq, seq]");

  OpGraph r;
  Value* d = r.input("d", tensor_type(DType::F32, {"2", "5"}));
  Value* s = r.op("Slice", {d, r.ints1({-1, 4}), r.ints1({kEnd, -kEnd}), r.ints1({0, 1}), r.ints1({1, -2})});
  r.infer();
  EXPECT_EQ(s->type().str(), "f32[1, 3]");
  auto out = r.run({s}, {{"d", iota_f32({2, 5})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{9, 7, 5}));
}

TEST(MovementOps, SliceOfShapeValues) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  Value* head = t.op("Slice", {t.op("Shape", {x}), t.ints1({0}), t.ints1({2})});
  Value* tail = t.op("Slice", {t.op("Shape", {x}), t.ints1({-1}), t.ints1({kEnd})});
  t.infer();
  EXPECT_EQ(head->type().str(), "i64[2]");
  EXPECT_EQ(t.values(head), "[batch, seq]");
  EXPECT_EQ(t.values(tail), "[768]");
}

TEST(MovementOps, SplitEqualSymbolicAndExplicit) {
  OpGraph t(18);
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "2304"}));
  Node* qkv = t.node("Split", {x}, 3, {{"axis", Attribute::of_int(2)}, {"num_outputs", Attribute::of_int(3)}});
  Node* halves = t.node("Split", {x}, 2, {{"axis", Attribute::of_int(1)}, {"num_outputs", Attribute::of_int(2)}});
  Node* parts = t.node("Split", {x, t.ints1({2300, 4})}, 2, {{"axis", Attribute::of_int(-1)}});
  Node* shape_parts = t.node("Split", {t.op("Shape", {x}), t.ints1({2, 1})}, 2);
  t.infer();
  EXPECT_EQ(qkv->output(0)->type().str(), "f32[batch, seq, 768]");
  EXPECT_EQ(qkv->output(2)->type().str(), "f32[batch, seq, 768]");
  EXPECT_EQ(halves->output(0)->type().str(), "f32[batch, (seq+1)//(2), 2304]");
  EXPECT_EQ(halves->output(1)->type().str(), "f32[batch, -((seq+1)//(2))+seq, 2304]");
  EXPECT_EQ(parts->output(1)->type().str(), "f32[batch, seq, 4]");
  EXPECT_EQ(t.values(shape_parts->output(0)), "[batch, seq]");
  EXPECT_EQ(t.values(shape_parts->output(1)), "[2304]");

  OpGraph r(18);
  Value* d = r.input("d", tensor_type(DType::F32, {"7"}));
  Node* n = r.node("Split", {d}, 3, {{"num_outputs", Attribute::of_int(3)}});
  r.infer();
  EXPECT_EQ(n->output(2)->type().str(), "f32[1]");
  auto out = r.run({n->output(0), n->output(1), n->output(2)}, {{"d", iota_f32({7})}});
  EXPECT_EQ(floats(out[1]), (std::vector<double>{3, 4, 5}));
  EXPECT_EQ(floats(out[2]), (std::vector<double>{6}));

  OpGraph bad(13);
  Value* b = bad.input("b", tensor_type(DType::F32, {"5"}));
  bad.node("Split", {b, bad.ints1({2, 2})}, 2);
  EXPECT_THROW(bad.infer(), InputError);

  // A negative size (an If branch that never runs holds one in ONNX's
  // AffineGrid function): the parts' sizes and values are unknown, where
  // reading 4 then -1 of the 3 known values would build a vector of -1.
  OpGraph negative(13);
  Value* shape = negative.op("Shape", {negative.input("x", tensor_type(DType::F32, {"2", "3", "5"}))});
  Node* pieces = negative.node("Split", {shape, negative.ints1({4, -1})}, 2);
  negative.infer();
  EXPECT_EQ(pieces->output(0)->type().str(), "i64[?]");
  EXPECT_EQ(negative.values(pieces->output(0)), "none");
}

TEST(MovementOps, ConcatUnifiesAndSums) {
  OpGraph t;
  Value* a = t.input("a", tensor_type(DType::F32, {"batch", "past", "64"}));
  Value* b = t.input("b", tensor_type(DType::F32, {"n", "seq", "64"}));
  Value* c = t.op("Concat", {a, b}, {{"axis", Attribute::of_int(-2)}});
  t.infer();
  EXPECT_EQ(c->type().str(), "f32[batch, past+seq, 64]");
  EXPECT_EQ(b->type().str(), "f32[batch, seq, 64]");  // n was unified with batch
  auto out = t.run({c}, {{"a", iota_f32({1, 1, 64})}, {"b", iota_f32({1, 2, 64})}});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 3, 64}));
  EXPECT_EQ(out[0].get_f64(64), 0);
  EXPECT_EQ(out[0].get_f64(63), 63);

  OpGraph bad;
  Value* x = bad.input("x", tensor_type(DType::F32, {"2", "3"}));
  Value* y = bad.input("y", tensor_type(DType::F32, {"2", "4"}));
  bad.op("Concat", {x, y}, {{"axis", Attribute::of_int(0)}});
  const std::string what = input_error([&] { bad.infer(); });
  EXPECT_NE(what.find("has size 4 at dim 1 where input 0 has 3"), std::string::npos) << what;

  // Above the opsets whose ONNX schemas tcc checks types against, Concat's own rule refuses it.
  OpGraph mixed(18);
  Value* ids = mixed.input("ids", tensor_type(DType::I32, {"s"}));
  Value* more = mixed.input("more", tensor_type(DType::I64, {"2"}));
  mixed.op("Concat", {ids, more}, {{"axis", Attribute::of_int(0)}});
  const std::string why = input_error([&] { mixed.infer(); });
  EXPECT_NE(why.find("inputs must have one element type: input 0 is i32, input 1 is i64"), std::string::npos) << why;
}

TEST(MovementOps, ExpandAndTileFromShapeValues) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq"}));
  Value* row = t.input("row", tensor_type(DType::F32, {"1", "seq"}));
  Value* e = t.op("Expand", {row, t.op("Shape", {x})});
  Value* up = t.op("Expand", {row, t.ints1({3, 1, 1})});
  Value* tl = t.op("Tile", {x, t.ints1({2, 3})});
  Value* runtime = t.op("Expand", {row, t.input("shape", tensor_type(DType::I64, {"3"}))});
  t.infer();
  EXPECT_EQ(runtime->type().str(), "f32[?, ?, ?]");
  EXPECT_EQ(e->type().str(), "f32[batch, seq]");
  EXPECT_EQ(up->type().str(), "f32[3, 1, seq]");
  EXPECT_EQ(tl->type().str(), "f32[batch*2, seq*3]");
  auto out = t.run({e, tl}, {{"x", iota_f32({2, 2})}, {"row", iota_f32({1, 2})}, {"shape", testing::i64({1, 1, 2}, {3})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{0, 1, 0, 1}));
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(out[1].get_f64(5), 1);
  EXPECT_EQ(out[1].get_f64(6 * 3 + 4), 2);
}

// Pads read from data: every dim is a fresh symbol, which the host step that
// pads binds.
TEST(MovementOps, PadsFromDataGiveFreshSymbols) {
  OpGraph t(19);
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "3"}));
  Value* pads = t.input("pads", tensor_type(DType::I64, {"4"}));
  Value* y = t.op("Pad", {x, pads});
  t.infer();
  EXPECT_EQ(y->type().str(), "f32[u0, u1]");
  Tensor p = Tensor::from_i64({0, 1, 2, 0}, {4});
  EXPECT_EQ(t.run({y}, {{"x", iota_f32({1, 3})}, {"pads", p}})[0].shape(), (std::vector<int64_t>{3, 4}));
}

TEST(MovementOps, PadModes) {
  OpGraph t(19);
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "3"}));
  Value* fill = t.g.add_initializer("fill", testing::f32({-1}, {}));
  Value* c = t.op("Pad", {x, t.ints1({0, 1, 0, 2}), fill});
  Value* r = t.op("Pad", {x, t.ints1({2, 2}), nullptr, t.ints1({1})}, {{"mode", Attribute::of_string("reflect")}});
  Value* ed = t.op("Pad", {x, t.ints1({1, 1}), nullptr, t.ints1({-1})}, {{"mode", Attribute::of_string("edge")}});
  Value* w = t.op("Pad", {x, t.ints1({1, 0, 1, 0})}, {{"mode", Attribute::of_string("wrap")}});
  t.infer();
  EXPECT_EQ(c->type().str(), "f32[batch, 6]");
  EXPECT_EQ(r->type().str(), "f32[batch, 7]");
  EXPECT_EQ(w->type().str(), "f32[batch+2, 3]");
  auto out = t.run({c, r, ed, w}, {{"x", iota_f32({1, 3})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{-1, 0, 1, 2, -1, -1}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{2, 1, 0, 1, 2, 1, 0}));
  EXPECT_EQ(floats(out[2]), (std::vector<double>{0, 0, 1, 2, 2}));
  EXPECT_EQ(floats(out[3]), (std::vector<double>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
}

TEST(MovementOps, TriluUpperAndLowerWithK) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"n", "3"}));
  Value* up = t.op("Trilu", {x});
  Value* lo = t.op("Trilu", {x, t.scalar(-1)}, {{"upper", Attribute::of_int(0)}});
  t.infer();
  EXPECT_EQ(up->type().str(), "f32[n, 3]");
  Tensor in = iota_f32({3, 3});
  for (int64_t i = 0; i < 9; ++i) in.set_f64(i, i + 1);
  auto out = t.run({up, lo}, {{"x", in}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{1, 2, 3, 0, 5, 6, 0, 0, 9}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
}

TEST(MovementOps, DepthToSpaceRoundTripsThroughSpaceToDepth) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "8", "h", "w"}));
  Value* d2s = t.op("DepthToSpace", {x}, {{"blocksize", Attribute::of_int(2)}});
  Value* back = t.op("SpaceToDepth", {d2s}, {{"blocksize", Attribute::of_int(2)}});
  t.infer();
  EXPECT_EQ(d2s->type().str(), "f32[batch, 2, h*2, w*2]");
  EXPECT_EQ(back->type().str(), "f32[batch, 8, h, w]");
  Tensor in = iota_f32({1, 8, 1, 2});
  auto out = t.run({d2s, back}, {{"x", in}});
  // DCR order, as numpy's reshape(1, 2, 2, 2, 1, 2).transpose(0, 3, 4, 1, 5, 2) gives.
  std::vector<double> moved = floats(out[0]);
  EXPECT_EQ(std::vector<double>(moved.begin(), moved.begin() + 8), (std::vector<double>{0, 4, 1, 5, 8, 12, 9, 13}));
  EXPECT_EQ(floats(out[1]), floats(in));
}

TEST(MovementOps, CompressHasADataDependentLength) {
  OpGraph t;
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "3"}));
  Value* cond = t.input("cond", tensor_type(DType::Bool, {"3"}));
  Value* c = t.op("Compress", {x, cond}, {{"axis", Attribute::of_int(1)}});
  Value* flat = t.op("Compress", {x, cond});
  t.infer();
  EXPECT_EQ(c->type().str(), "f32[batch, u0]");
  EXPECT_EQ(flat->type().str(), "f32[u1]");
  Tensor mask(DType::Bool, {3});
  mask.set_i64(0, 1);
  mask.set_i64(2, 1);
  auto out = t.run({c, flat}, {{"x", iota_f32({2, 3})}, {"cond", mask}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{0, 2, 3, 5}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{0, 2}));
}

}  // namespace
}  // namespace tcc
