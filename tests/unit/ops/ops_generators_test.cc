// Shape rules and reference kernels of the generator ops (OneHot, EyeLike and
// the random generators), ReverseSequence and Det. The random generators'
// streams are tcc's own, so their tests check what the spec promises: shape,
// dtype, range, moments over many samples, and one stream per seed; the
// generator under them, Philox4x32-10, is checked against the published
// known answers and its documented mappings to uniform and normal draws.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"
#include "src/ops/random_stream.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::f32;
using testing::floats;
using testing::i64;
using testing::OneOp;
using testing::OpGraph;
using testing::tensor_type;

using Attrs = std::map<std::string, Attribute>;

TEST(GeneratorOps, OneHotPutsTheAxisWhereAsked) {
  OpGraph t(11);
  Value* ind = t.input("ind", tensor_type(DType::I64, {"2", "2"}));
  Value* values = t.g.add_initializer("values", f32({-1, 5}, {2}));
  Value* last = t.op("OneHot", {ind, t.scalar(3), values});
  Value* first = t.op("OneHot", {ind, t.scalar(3), values}, {{"axis", Attribute::of_int(0)}});
  t.infer();
  EXPECT_EQ(last->type().str(), "f32[2, 2, 3]");
  EXPECT_EQ(first->type().str(), "f32[3, 2, 2]");
  // -1 wraps to 2; 3 and -4 are out of range, a row of "off".
  auto out = t.run({last, first}, {{"ind", i64({0, -1, 3, -4}, {2, 2})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{5, -1, -1, -1, -1, 5, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{5, -1, -1, -1, -1, -1, -1, -1, -1, 5, -1, -1}));
}

TEST(GeneratorOps, OneHotOfARuntimeDepthHasAFreshDim) {
  OneOp op("OneHot", {tensor_type(DType::F32, {"n"}), tensor_type(DType::F32, {}), tensor_type(DType::I32, {"2"})},
           {}, 11);
  EXPECT_EQ(op.type(), "i32[n, u0]");
  Tensor values(DType::I32, {2});
  values.set_i64(1, 1);
  // Float indices truncate toward zero: 1.7 is 1.
  Tensor out = op.run({f32({1.7f, 0}, {2}), Tensor::scalar_f32(2), values});
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out.to_i64_vector(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(GeneratorOps, OneHotBeforeOpset11KeepsNegativeIndicesOff) {
  OneOp op("OneHot", {tensor_type(DType::I64, {"1"}), tensor_type(DType::I64, {}), tensor_type(DType::F32, {"2"})},
           {}, 10);
  EXPECT_EQ(floats(op.run({i64({-1}, {1}), Tensor::scalar_i64(2), f32({0, 1}, {2})})), (std::vector<double>{0, 0}));
}

TEST(GeneratorOps, OneHotRefusesBadOperands) {
  OneOp values("OneHot", {tensor_type(DType::I64, {"2"}), tensor_type(DType::I64, {}), tensor_type(DType::F32, {"3"})});
  EXPECT_NE(values.error().find("values must be a 1-D tensor of 2 elements"), std::string::npos) << values.error();
  OneOp depth("OneHot", {tensor_type(DType::I64, {"2"}), tensor_type(DType::I64, {"2"}), tensor_type(DType::F32, {"2"})});
  EXPECT_NE(depth.error().find("depth must be a scalar"), std::string::npos) << depth.error();
  OneOp run("OneHot", {tensor_type(DType::I64, {"1"}), tensor_type(DType::I64, {}), tensor_type(DType::F32, {"2"})});
  EXPECT_THROW(run.run({i64({0}, {1}), Tensor::scalar_i64(0), f32({0, 1}, {2})}), InputError);
}

TEST(GeneratorOps, EyeLikeShiftsTheDiagonalByK) {
  OneOp up("EyeLike", {tensor_type(DType::F32, {"3", "4"})}, {{"k", Attribute::of_int(1)}});
  EXPECT_EQ(up.type(), "f32[3, 4]");
  EXPECT_EQ(floats(up.run({Tensor(DType::F32, {3, 4})})),
            (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  OneOp down("EyeLike", {tensor_type(DType::F32, {"3", "2"})},
             {{"k", Attribute::of_int(-1)}, {"dtype", Attribute::of_int(static_cast<int64_t>(DType::I32))}});
  EXPECT_EQ(down.type(), "i32[3, 2]");
  Tensor out = down.run({Tensor(DType::F32, {3, 2})});
  EXPECT_EQ(out.dtype(), DType::I32);
  EXPECT_EQ(out.to_i64_vector(), (std::vector<int64_t>{0, 0, 1, 0, 0, 1}));
  OneOp cube("EyeLike", {tensor_type(DType::F32, {"2", "2", "2"})});
  EXPECT_NE(cube.error().find("expected a 2-D input"), std::string::npos) << cube.error();
}

TEST(GeneratorOps, EyeLikeHasAKernelExpression) {
  const OpDef* def = OpRegistry::get().lookup("", "EyeLike", 17);
  ASSERT_NE(def, nullptr);
  EXPECT_TRUE(def->pointwise != nullptr);
  OneOp op("EyeLike", {tensor_type(DType::F32, {"3", "3"})});
  op.type();
  EXPECT_EQ(kernel_role(*op.node), KernelRole::Pointwise);
}

// ---- random generators ----------------------------------------------------------

struct Moments {
  double mean = 0, variance = 0, min = INFINITY, max = -INFINITY;
};

Moments moments(const Tensor& t) {
  Moments m;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get_f64(i);
    m.mean += v;
    m.min = std::min(m.min, v);
    m.max = std::max(m.max, v);
  }
  m.mean /= static_cast<double>(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) m.variance += (t.get_f64(i) - m.mean) * (t.get_f64(i) - m.mean);
  m.variance /= static_cast<double>(t.numel());
  return m;
}

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

// The known-answer vectors of Random123 (the paper's reference implementation)
// for Philox4x32 with 10 rounds: counter, key -> block.
TEST(RandomStream, PhiloxGivesThePublishedKnownAnswers) {
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Element i's draws at random offset k come from the block of counter (i's
// low and high words, k's low and high words) under the key of the node's
// seed: 53 bits of words 0 and 1 make the uniform, and Box-Muller the normal
// from those and words 2 and 3.
TEST(RandomStream, DrawsAreTheDocumentedMappingsOfTheBlock) {
  PhiloxKey key = {0x40e00000, 0};  // the bits of the float 7
  OpGraph t;
  EXPECT_EQ(random_key(*t.node("RandomUniform", {}, 1, {{"seed", Attribute::of_float(7.0f)}})), key);
  EXPECT_EQ(random_key(*t.node("Dropout", {}, 1, {{"seed", Attribute::of_int(7)}})), key);
  EXPECT_EQ(random_key(*t.node("RandomUniform", {})), (PhiloxKey{0, 0}));
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, (uint64_t{5} << 32) + 2})
    for (int64_t i : {int64_t{0}, int64_t{5}, (int64_t{3} << 32) + 11}) {
      PhiloxBlock w = philox4x32_10({static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                                     static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)},
                                    key);
      double u = std::ldexp(static_cast<double>((uint64_t{w[0]} << 21) | (w[1] >> 11)), -53);
      double v = std::ldexp(static_cast<double>((uint64_t{w[2]} << 21) | (w[3] >> 11)), -53);
      EXPECT_EQ(uniform_draw(key, i, k), u) << i << " at offset " << k;
      EXPECT_EQ(normal_draw(key, i, k), std::sqrt(-2.0 * std::log(1.0 - u)) * std::cos(2 * M_PI * v))
          << i << " at offset " << k;
    }
}

// The interpreter draws at its random offset: 0 unless set, and each offset
// its own values, the same whenever it is set again.
TEST(RandomOps, EachRandomOffsetDrawsItsOwnValues) {
  OpGraph t;
  Node* n = t.node("RandomUniform", {}, 1, {{"shape", ints({64})}, {"seed", Attribute::of_float(3)}});
  auto draw = [&](std::optional<uint64_t> offset) {
    Interpreter interp;
    if (offset) interp.set_random_offset(*offset);
    return interp.eval_node(*n, {}).at(0);
  };
  EXPECT_TRUE(draw(std::nullopt).identical(draw(0)));
  EXPECT_FALSE(draw(0).identical(draw(1)));
  EXPECT_TRUE(draw(uint64_t{1} << 40).identical(draw(uint64_t{1} << 40)));
  EXPECT_FALSE(draw(1).identical(draw(uint64_t{1} << 32)));
}

TEST(RandomOps, UniformStaysInItsRangeWithItsMoments) {
  OneOp op("RandomUniform", {}, {{"shape", ints({200, 100})}, {"low", Attribute::of_float(2)},
                                 {"high", Attribute::of_float(5)}, {"seed", Attribute::of_float(7)}});
  EXPECT_EQ(op.type(), "f32[200, 100]");
  Tensor out = op.run({});
  ASSERT_EQ(out.dtype(), DType::F32);
  Moments m = moments(out);
  EXPECT_GE(m.min, 2.0);
  EXPECT_LT(m.max, 5.0);
  // 20000 draws: the mean's standard error is 0.006, the variance's 0.005.
  EXPECT_NEAR(m.mean, 3.5, 0.05);
  EXPECT_NEAR(m.variance, 9.0 / 12.0, 0.04);
}

TEST(RandomOps, NormalHasItsMeanAndScale) {
  OneOp op("RandomNormal", {}, {{"shape", ints({20000})}, {"mean", Attribute::of_float(1)},
                                {"scale", Attribute::of_float(2)},
                                {"dtype", Attribute::of_int(static_cast<int64_t>(DType::F64))}});
  EXPECT_EQ(op.type(), "f64[20000]");
  Moments m = moments(op.run({}));
  EXPECT_NEAR(m.mean, 1.0, 0.1);
  EXPECT_NEAR(m.variance, 4.0, 0.25);
}

TEST(RandomOps, OneSeedGivesOneStream) {
  auto draw = [](const char* op, float seed) {
    return OneOp(op, {}, {{"shape", ints({64})}, {"seed", Attribute::of_float(seed)}}).run({});
  };
  for (const char* op : {"RandomUniform", "RandomNormal"}) {
    EXPECT_TRUE(draw(op, 3).identical(draw(op, 3))) << op;
    EXPECT_FALSE(draw(op, 3).identical(draw(op, 4))) << op;
  }
}

TEST(RandomOps, LikeOpsTakeTheInputsShapeAndDtype) {
  OneOp half("RandomUniformLike", {tensor_type(DType::F16, {"n", "3"})});
  EXPECT_EQ(half.type(), "f16[n, 3]");
  Tensor out = half.run({Tensor(DType::F16, {500, 3})});
  ASSERT_EQ(out.dtype(), DType::F16);
  EXPECT_EQ(out.shape(), (std::vector<int64_t>{500, 3}));
  Moments m = moments(out);
  EXPECT_GE(m.min, 0.0);
  EXPECT_LT(m.max, 1.0);
  OneOp normal("RandomNormalLike", {tensor_type(DType::I64, {"4"})},
               {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::F32))}});
  EXPECT_EQ(normal.type(), "f32[4]");
  OneOp untyped("RandomNormalLike", {tensor_type(DType::I64, {"4"})});
  EXPECT_NE(untyped.error().find("generates float16, float or double"), std::string::npos) << untyped.error();
}

TEST(RandomOps, RandomDtypesFollowTheOpset) {
  Attrs bf16 = {{"shape", ints({2})}, {"dtype", Attribute::of_int(static_cast<int64_t>(DType::BF16))}};
  EXPECT_EQ(OneOp("RandomUniform", {}, bf16, 22).type(), "bf16[2]");
  EXPECT_NE(OneOp("RandomUniform", {}, bf16, 21).error().find("not bf16"), std::string::npos);
  Attrs i32 = {{"shape", ints({2})}, {"dtype", Attribute::of_int(static_cast<int64_t>(DType::I32))}};
  EXPECT_NE(OneOp("RandomNormal", {}, i32).error().find("not i32"), std::string::npos);
  EXPECT_NE(OneOp("RandomNormal", {}).error().find("needs a 'shape'"), std::string::npos);
  EXPECT_TRUE(OpRegistry::get().lookup("", "RandomNormal", 17)->has(kRandom));
}

TEST(RandomOps, BernoulliDrawsOnesWithProbabilityP) {
  OneOp op("Bernoulli", {tensor_type(DType::F32, {"20000"})},
           {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::I32))}, {"seed", Attribute::of_float(1)}}, 15);
  EXPECT_EQ(op.type(), "i32[20000]");
  Tensor p(DType::F32, {20000});
  for (int64_t i = 0; i < p.numel(); ++i) p.set_f64(i, i % 2 == 0 ? 0.3 : (i % 4 == 1 ? 0.0 : 1.0));
  Tensor out = op.run({p});
  ASSERT_EQ(out.dtype(), DType::I32);
  int64_t ones = 0;
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t v = out.get_i64(i);
    ASSERT_TRUE(v == 0 || v == 1);
    if (i % 4 == 1) {
      ASSERT_EQ(v, 0) << "p = 0 at " << i;
    }
    if (i % 4 == 3) {
      ASSERT_EQ(v, 1) << "p = 1 at " << i;
    }
    if (i % 2 == 0) ones += v;
  }
  // 10000 draws at p = 0.3: the frequency's standard error is 0.0046.
  EXPECT_NEAR(static_cast<double>(ones) / 10000, 0.3, 0.025);
  EXPECT_TRUE(out.identical(op.run({p})));
}

// ONNX asks for p in [0, 1]. From data, what lies outside is defined as the
// kernel computes it (u < p): at or below 0, and NaN, give 0; at or above 1,
// 1. A constant outside is refused by the shape rule, on every path.
TEST(RandomOps, BernoulliOutsideTheUnitIntervalIsDefinedOrRefused) {
  OneOp op("Bernoulli", {tensor_type(DType::F32, {"8"})}, {}, 15);
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor out = op.run({f32({-0.5f, 1.5f, nan, -1e30f, 1e30f, 0.0f, 1.0f, 2.0f}, {8})});
  EXPECT_EQ(floats(out), (std::vector<double>{0, 1, 0, 0, 1, 0, 1, 1}));
  OpGraph t(15);
  t.op("Bernoulli", {t.g.add_initializer("p", f32({0.5f, 1.25f}, {2}))});
  EXPECT_THROW(t.infer(), InputError);
}

TEST(RandomOps, MultinomialSamplesBySoftmaxOfTheLogits) {
  OneOp op("Multinomial", {tensor_type(DType::F32, {"2", "3"})}, {{"sample_size", Attribute::of_int(6000)}});
  EXPECT_EQ(op.type(), "i32[2, 6000]");
  // Row 0: probabilities 0.2, 0.8, 0; row 1: class 2 only.
  float zero = -std::numeric_limits<float>::infinity();
  Tensor x = f32({std::log(0.2f), std::log(0.8f), zero, zero, zero, 0.0f}, {2, 3});
  Tensor out = op.run({x});
  ASSERT_EQ(out.dtype(), DType::I32);
  int64_t counts[3] = {0, 0, 0};
  for (int64_t s = 0; s < 6000; ++s) {
    ++counts[out.get_i64(s)];
    ASSERT_EQ(out.get_i64(6000 + s), 2);
  }
  EXPECT_EQ(counts[2], 0);
  // The frequency's standard error is 0.005.
  EXPECT_NEAR(static_cast<double>(counts[0]) / 6000, 0.2, 0.03);
  OneOp i64_out("Multinomial", {tensor_type(DType::F32, {"b", "3"})},
                {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::I64))}});
  EXPECT_EQ(i64_out.type(), "i64[b, 1]");
  OneOp f32_out("Multinomial", {tensor_type(DType::F32, {"1", "3"})},
                {{"dtype", Attribute::of_int(static_cast<int64_t>(DType::F32))}});
  EXPECT_NE(f32_out.error().find("int32 or int64"), std::string::npos) << f32_out.error();
}

// ---- ReverseSequence, Det ----------------------------------------------------------

TEST(ReverseSequenceOp, ReversesEachBatchEntrysPrefix) {
  // The spec's example: time along axis 0, batch along axis 1.
  OneOp op("ReverseSequence", {tensor_type(DType::F32, {"4", "4"}), tensor_type(DType::I64, {"4"})}, {}, 10);
  EXPECT_EQ(op.type(), "f32[4, 4]");
  Tensor x = testing::iota_f32({4, 4});
  EXPECT_EQ(floats(op.run({x, i64({4, 3, 2, 1}, {4})})),
            (std::vector<double>{12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15}));
  OneOp batch_first("ReverseSequence", {tensor_type(DType::F32, {"2", "3"}), tensor_type(DType::I64, {"2"})},
                    {{"batch_axis", Attribute::of_int(0)}, {"time_axis", Attribute::of_int(1)}}, 10);
  EXPECT_EQ(floats(batch_first.run({testing::iota_f32({2, 3}), i64({2, 0}, {2})})),
            (std::vector<double>{1, 0, 2, 3, 4, 5}));
  EXPECT_THROW(batch_first.run({testing::iota_f32({2, 3}), i64({4, 0}, {2})}), InputError);
  OneOp lens("ReverseSequence", {tensor_type(DType::F32, {"2", "3"}), tensor_type(DType::I64, {"5"})}, {}, 10);
  EXPECT_NE(lens.error().find("one length per batch entry"), std::string::npos) << lens.error();
  OneOp axes("ReverseSequence", {tensor_type(DType::F32, {"2", "3"}), tensor_type(DType::I64, {"3"})},
             {{"batch_axis", Attribute::of_int(1)}, {"time_axis", Attribute::of_int(1)}}, 10);
  EXPECT_NE(axes.error().find("batch_axis and time_axis"), std::string::npos) << axes.error();
}

TEST(DetOp, DeterminantsOfABatch) {
  OneOp op("Det", {tensor_type(DType::F32, {"b", "3", "3"})}, {}, 11);
  EXPECT_EQ(op.type(), "f32[b]");
  // 2*(3*1 - 0) + 1*(0 - 3*1) = 3; a row swap of the identity, -1 (its
  // elimination swaps pivot rows); a matrix of two proportional rows, 0.
  Tensor x = f32({2, 0, 1, 0, 3, 0, 1, 0, 1,  //
                  0, 1, 0, 1, 0, 0, 0, 0, 1,  //
                  1, 2, 3, 2, 4, 6, 0, 1, 1},
                 {3, 3, 3});
  std::vector<double> det = floats(op.run({x}));
  ASSERT_EQ(det.size(), 3u);
  EXPECT_NEAR(det[0], 3, 1e-6);
  EXPECT_NEAR(det[1], -1, 1e-6);
  EXPECT_NEAR(det[2], 0, 1e-6);
  OneOp rect("Det", {tensor_type(DType::F32, {"2", "3"})}, {}, 11);
  EXPECT_NE(rect.error().find("matrix dims"), std::string::npos) << rect.error();
}

}  // namespace
}  // namespace tcc
