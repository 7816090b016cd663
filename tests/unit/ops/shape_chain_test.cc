// The shape chain torch's exporter emits around GPT-2's attention: split the
// hidden dim into heads with a Reshape whose target is computed from Shape(x),
// transpose, and merge back. Every intermediate type must come out fully
// symbolic, and the interpreter must reproduce the data movement exactly.
#include <gtest/gtest.h>

#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::OpGraph;
using testing::tensor_type;

TEST(ShapeChain, Gpt2AttentionHeadsSplitAndMerge) {
  OpGraph t(17);
  Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
  auto dim_of = [&](int64_t i) {
    Value* d = t.op("Gather", {t.op("Shape", {x}), t.scalar(i)}, {{"axis", Attribute::of_int(0)}});
    return std::pair{d, t.op("Unsqueeze", {d, t.ints1({0})})};
  };
  auto [b0, b] = dim_of(0);
  auto [s0, s] = dim_of(1);
  Value* split_shape = t.op("Concat", {b, s, t.ints1({12}), t.ints1({64})}, {{"axis", Attribute::of_int(0)}});
  Value* heads = t.op("Reshape", {x, split_shape});
  Value* perm = t.op("Transpose", {heads}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  Value* unperm = t.op("Transpose", {perm}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  Value* merge_shape = t.op("Concat", {b, s, t.ints1({-1})}, {{"axis", Attribute::of_int(0)}});
  Value* merged = t.op("Reshape", {unperm, merge_shape});
  t.infer();

  EXPECT_EQ(b0->type().str(), "i64[]");
  EXPECT_EQ(t.values(b0), "[batch]");
  EXPECT_EQ(t.values(s0), "[seq]");
  EXPECT_EQ(b->type().str(), "i64[1]");
  EXPECT_EQ(t.values(b), "[batch]");
  EXPECT_EQ(t.values(s), "[seq]");
  EXPECT_EQ(split_shape->type().str(), "i64[4]");
  EXPECT_EQ(t.values(split_shape), "[batch, seq, 12, 64]");
  EXPECT_EQ(heads->type().str(), "f32[batch, seq, 12, 64]");
  EXPECT_EQ(perm->type().str(), "f32[batch, 12, seq, 64]");
  EXPECT_EQ(unperm->type().str(), "f32[batch, seq, 12, 64]");
  EXPECT_EQ(t.values(merge_shape), "[batch, seq, -1]");
  EXPECT_EQ(merged->type().str(), "f32[batch, seq, 768]");
  for (const auto& n : t.g.nodes())
    for (Value* v : n->outputs()) EXPECT_TRUE(v->type().fully_shaped()) << v->name() << ": " << v->type().str();
  EXPECT_TRUE(t.info.unsupported.empty());

  // x[b, s, h*64 + d] must land at perm[b, h, s, d] and come back unchanged.
  const int64_t B = 2, S = 3;
  Tensor in = testing::iota_f32({B, S, 768});
  auto out = t.run({perm, merged}, {{"x", in}});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{B, 12, S, 64}));
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < 12; ++h)
      for (int64_t si = 0; si < S; ++si)
        for (int64_t d = 0; d < 64; ++d)
          ASSERT_EQ(out[0].get_f64(((bi * 12 + h) * S + si) * 64 + d), in.get_f64((bi * S + si) * 768 + h * 64 + d));
  EXPECT_TRUE(out[1].identical(in));
}

}  // namespace
}  // namespace tcc
