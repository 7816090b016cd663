// Quantization ops: golden values of the reference kernels (ties rounding to
// even, saturation at both ends of each target, per-axis and blocked scales,
// requantized contractions), their shape rules, the bad inputs they refuse
// with an error naming the node, and which nodes get a pointwise kernel.
#include <gtest/gtest.h>

#include "src/ops/kernel_roles.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::floats;
using testing::OneOp;
using testing::tensor_of;
using testing::tensor_type;

Type t(DType dt, const std::vector<std::string>& dims) { return tensor_type(dt, dims); }
using Doubles = std::vector<double>;

// The message running `op` on `ins` fails with.
std::string run_error(OneOp& op, const std::vector<Tensor>& ins) {
  return input_error([&] { op.run(ins); });
}

TEST(QuantizeLinear, TiesRoundToEven) {
  OneOp q("QuantizeLinear", {t(DType::F32, {"8"}), t(DType::F32, {}), t(DType::I8, {})});
  EXPECT_EQ(q.type(), "i8[8]");
  Tensor x = tensor_of(DType::F32, {0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999}, {8});
  Doubles want = {0, 2, 2, 4, 0, -2, -2, 2};
  EXPECT_EQ(floats(q.run({x, tensor_of(DType::F32, {1}, {}), tensor_of(DType::I8, {0}, {})})), want);
  // x / scale is the tie: 5 / 2 = 2.5 -> 2, 7 / 2 = 3.5 -> 4; the zero point adds after rounding.
  Tensor y = q.run({tensor_of(DType::F32, {5, 7, -5, -7, 1, 3, -1, -3}, {8}), tensor_of(DType::F32, {2}, {}),
                    tensor_of(DType::I8, {10}, {})});
  EXPECT_EQ(floats(y), (Doubles{12, 14, 8, 6, 10, 12, 10, 8}));
}

// float4e2m1 (opset 23): x / scale, not rounded to an integer, plus the zero
// point, then rounded to float4e2m1 (to even, saturating at 6), as the formula
// and ONNX's reference compute it; DequantizeLinear subtracts the zero point
// again, as the formula says.
TEST(QuantizeLinear, Float4E2M1AddsItsZeroPoint) {
  OneOp q("QuantizeLinear", {t(DType::F32, {"4"}), t(DType::F32, {}), t(DType::F4E2M1, {})}, {}, 23);
  EXPECT_EQ(q.type(), "f4e2m1[4]");
  // 3 / 2 + 0.5 = 2; 1 / 2 + 0.5 = 1; 5 / 2 + 0.5 = 3; 20 / 2 + 0.5 saturates at 6.
  Tensor y = q.run({tensor_of(DType::F32, {3, 1, 5, 20}, {4}), tensor_of(DType::F32, {2}, {}),
                    tensor_of(DType::F4E2M1, {0.5}, {})});
  EXPECT_EQ(floats(y), (Doubles{2, 1, 3, 6}));
  OneOp dq("DequantizeLinear", {t(DType::F4E2M1, {"4"}), t(DType::F32, {}), t(DType::F4E2M1, {})}, {}, 23);
  EXPECT_EQ(floats(dq.run({y, tensor_of(DType::F32, {2}, {}), tensor_of(DType::F4E2M1, {0.5}, {})})),
            (Doubles{3, 1, 5, 11}));
}

TEST(QuantizeLinear, SaturatesAtBothEndsOfEachTarget) {
  Tensor x = tensor_of(DType::F32, {-1e9, -200, 200, 1e9}, {4});
  Tensor one = tensor_of(DType::F32, {1}, {});
  struct Case {
    DType dt;
    double zp;
    Doubles want;
  };
  for (const Case& c : {Case{DType::I8, 0, {-128, -128, 127, 127}}, Case{DType::U8, 100, {0, 0, 255, 255}},
                        Case{DType::I16, 0, {-32768, -200, 200, 32767}}, Case{DType::U16, 300, {0, 100, 500, 65535}}}) {
    OneOp q("QuantizeLinear", {t(DType::F32, {"4"}), t(DType::F32, {}), t(c.dt, {})}, {}, 21);
    EXPECT_EQ(floats(q.run({x, one, tensor_of(c.dt, {c.zp}, {})})), c.want) << dtype_name(c.dt);
  }
  // Without a zero point or output_dtype the target is uint8.
  OneOp u8("QuantizeLinear", {t(DType::F32, {"4"}), t(DType::F32, {})});
  EXPECT_EQ(u8.type(), "u8[4]");
  EXPECT_EQ(floats(u8.run({x, one})), (Doubles{0, 0, 200, 255}));
}

TEST(QuantizeLinear, OutputDtypeAttributeFromOpset21) {
  OneOp q("QuantizeLinear", {t(DType::F32, {"3"}), t(DType::F32, {})}, {{"output_dtype", Attribute::of_int(5)}}, 21);
  EXPECT_EQ(q.type(), "i16[3]");
  EXPECT_EQ(floats(q.run({tensor_of(DType::F32, {-40000, 2.5, 1000.6}, {3}), tensor_of(DType::F32, {1}, {})})),
            (Doubles{-32768, 2, 1001}));
  OneOp clash("QuantizeLinear", {t(DType::F32, {"3"}), t(DType::F32, {}), t(DType::U8, {})},
              {{"output_dtype", Attribute::of_int(3)}}, 21);
  EXPECT_NE(clash.error().find("output_dtype i8 disagrees with the zero point's u8"), std::string::npos)
      << clash.error();
}

TEST(QuantizeLinear, DividesInTheScalesPrecision) {
  // 53.25 / 0.3 is 177.47 (-> 177) exactly, but 177.5 (-> 178) in float16;
  // 3.45 / 0.3 is 11.4999997 exactly, but 11.5 (-> 12) in float32.
  OneOp f16("QuantizeLinear", {t(DType::F16, {"1"}), t(DType::F16, {}), t(DType::I16, {})}, {}, 21);
  EXPECT_EQ(floats(f16.run({tensor_of(DType::F16, {53.25}, {1}), tensor_of(DType::F16, {0.3}, {}),
                            tensor_of(DType::I16, {0}, {})})),
            (Doubles{178}));
  OneOp f32("QuantizeLinear", {t(DType::F32, {"1"}), t(DType::F32, {}), t(DType::I16, {})}, {}, 21);
  EXPECT_EQ(floats(f32.run({tensor_of(DType::F32, {3.45}, {1}), tensor_of(DType::F32, {0.3}, {}),
                            tensor_of(DType::I16, {0}, {})})),
            (Doubles{12}));
  // precision (opset 23) divides the float32 operands in float16: 53.25 / 0.3 -> 178 again.
  OneOp p("QuantizeLinear", {t(DType::F32, {"1"}), t(DType::F32, {}), t(DType::I16, {})},
          {{"precision", Attribute::of_int(10)}}, 23);
  EXPECT_EQ(floats(p.run({tensor_of(DType::F32, {53.25}, {1}), tensor_of(DType::F32, {0.3}, {}),
                          tensor_of(DType::I16, {0}, {})})),
            (Doubles{178}));
}

TEST(QuantizeLinear, PerAxisScalesAndZeroPoints) {
  Tensor x = tensor_of(DType::F32, {1, 2, 3, 4, 5, 6}, {2, 3});
  OneOp cols("QuantizeLinear", {t(DType::F32, {"2", "3"}), t(DType::F32, {"3"}), t(DType::U8, {"3"})},
             {{"axis", Attribute::of_int(-1)}});
  EXPECT_EQ(floats(cols.run({x, tensor_of(DType::F32, {1, 2, 4}, {3}), tensor_of(DType::U8, {0, 10, 20}, {3})})),
            (Doubles{1, 11, 21, 4, 12, 22}));  // 3 / 4 = 0.75 -> 1, 2 / 2, 6 / 4 = 1.5 -> 2
  OneOp rows("QuantizeLinear", {t(DType::F32, {"2", "3"}), t(DType::F32, {"2"})}, {{"axis", Attribute::of_int(0)}});
  EXPECT_EQ(floats(rows.run({x, tensor_of(DType::F32, {1, 0.5}, {2})})), (Doubles{1, 2, 3, 8, 10, 12}));
}

TEST(QuantizeLinear, BlockedScalesCoverARemainderBlock) {
  // x [2, 5] in blocks of 2 along axis 1: scale [2, 3], the last block one element wide.
  OneOp q("QuantizeLinear", {t(DType::F32, {"2", "5"}), t(DType::F32, {"2", "3"}), t(DType::I8, {"2", "3"})},
          {{"axis", Attribute::of_int(1)}, {"block_size", Attribute::of_int(2)}}, 21);
  EXPECT_EQ(q.type(), "i8[2, 5]");
  Tensor x = tensor_of(DType::F32, {10, 20, 30, 40, 50, 10, 20, 30, 40, 50}, {2, 5});
  Tensor s = tensor_of(DType::F32, {1, 10, 50, 2, 4, 5}, {2, 3});
  Tensor zp = tensor_of(DType::I8, {0, 1, 2, -1, -2, -3}, {2, 3});
  EXPECT_EQ(floats(q.run({x, s, zp})), (Doubles{10, 20, 4, 5, 3, 4, 9, 6, 8, 7}));
}

TEST(DequantizeLinear, PerTensorPerAxisAndBlocked) {
  OneOp per_tensor("DequantizeLinear", {t(DType::U8, {"3"}), t(DType::F32, {}), t(DType::U8, {})});
  EXPECT_EQ(per_tensor.type(), "f32[3]");
  EXPECT_EQ(floats(per_tensor.run({tensor_of(DType::U8, {0, 128, 255}, {3}), tensor_of(DType::F32, {0.5}, {}),
                                   tensor_of(DType::U8, {128}, {})})),
            (Doubles{-64, 0, 63.5}));
  OneOp per_axis("DequantizeLinear", {t(DType::I8, {"2", "2"}), t(DType::F32, {"2"}), t(DType::I8, {"2"})},
                 {{"axis", Attribute::of_int(0)}});
  EXPECT_EQ(floats(per_axis.run({tensor_of(DType::I8, {-128, 127, 3, 4}, {2, 2}), tensor_of(DType::F32, {1, 2}, {2}),
                                 tensor_of(DType::I8, {0, 1}, {2})})),
            (Doubles{-128, 127, 4, 6}));
  OneOp blocked("DequantizeLinear", {t(DType::I16, {"1", "4"}), t(DType::F32, {"1", "2"})},
                {{"axis", Attribute::of_int(1)}, {"block_size", Attribute::of_int(3)}}, 21);
  EXPECT_EQ(floats(blocked.run({tensor_of(DType::I16, {1, 2, 3, -32768}, {1, 4}), tensor_of(DType::F32, {2, 0.5}, {1, 2})})),
            (Doubles{2, 4, 6, -16384}));
}

TEST(DequantizeLinear, MultipliesInFloat32ThenRoundsToOutputDtype) {
  // (2049 - 0) * 0.5 = 1024.5 in float32, a tie that float16 rounds to even (1024).
  OneOp q("DequantizeLinear", {t(DType::I32, {"2"}), t(DType::F32, {})}, {{"output_dtype", Attribute::of_int(10)}}, 23);
  EXPECT_EQ(q.type(), "f16[2]");
  EXPECT_EQ(floats(q.run({tensor_of(DType::I32, {2049, -3}, {2}), tensor_of(DType::F32, {0.5}, {})})),
            (Doubles{1024, -1.5}));
  OneOp before23("DequantizeLinear", {t(DType::I32, {"2"}), t(DType::F16, {})}, {}, 21);
  EXPECT_EQ(before23.type(), "f16[2]");
}

TEST(QuantizationErrors, ScaleLengthMustMatchTheAxis) {
  OneOp q("QuantizeLinear", {t(DType::F32, {"2", "3"}), t(DType::F32, {"4"})}, {{"axis", Attribute::of_int(1)}});
  std::string e = q.error();
  EXPECT_NE(e.find("QuantizeLinear_0"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a scale of one element or 3 (x's dim along axis 1), got [4]"), std::string::npos) << e;
  // A symbolic dim learns its size only when the kernel runs.
  OneOp late("DequantizeLinear", {t(DType::I8, {"n"}), t(DType::F32, {"4"})}, {{"axis", Attribute::of_int(0)}});
  EXPECT_EQ(late.type(), "f32[n]");
  e = run_error(late, {tensor_of(DType::I8, {1, 2, 3}, {3}), tensor_of(DType::F32, {1, 1, 1, 1}, {4})});
  EXPECT_NE(e.find("DequantizeLinear_0"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a scale of one element or 3"), std::string::npos) << e;
}

TEST(QuantizationErrors, MalformedScalesZeroPointsAndAttributes) {
  auto error = [](const std::vector<Type>& ins, const std::map<std::string, Attribute>& attrs, int64_t opset) {
    return OneOp("QuantizeLinear", ins, attrs, opset).error();
  };
  Type x = t(DType::F32, {"2", "6"});
  EXPECT_NE(error({x, t(DType::F32, {"2", "6"})}, {}, 19).find("expected a scalar or 1-D scale"), std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {"6"}), t(DType::I8, {"3"})}, {}, 19)
                .find("expected the zero point to have the scale's shape [6], got [3]"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {"2", "2"})}, {{"block_size", Attribute::of_int(2)}}, 21)
                .find("2 blocks of 2 do not cover x's 6 elements along axis 1"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {"3"})}, {{"block_size", Attribute::of_int(2)}}, 21)
                .find("blocked quantization: expected a scale of x's rank 2"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {})}, {{"block_size", Attribute::of_int(-1)}}, 21).find("positive block_size"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {"6"})}, {{"axis", Attribute::of_int(2)}}, 19).find("axis 2 is out of range"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {})}, {{"output_dtype", Attribute::of_int(7)}}, 21)
                .find("expected output_dtype int8, uint8, int16, uint16, an 8-bit float, uint4, int4 or float4e2m1"),
            std::string::npos);
  EXPECT_NE(error({x, t(DType::F32, {})}, {{"precision", Attribute::of_int(7)}}, 23)
                .find("expected precision float, float16 or bfloat16"),
            std::string::npos);
}

TEST(DynamicQuantizeLinear, ScaleAndZeroPointSpanZero) {
  Graph g;
  g.set_opset("", 17);
  Value* x = g.add_input("x", t(DType::F32, {"4"}));
  Node* n = g.add_node("DynamicQuantizeLinear", {x}, {"y", "s", "z"});
  g.set_outputs({n->output(0), n->output(1), n->output(2)});
  infer_shapes(g);
  EXPECT_EQ(n->output(0)->type().str(), "u8[4]");
  EXPECT_EQ(n->output(1)->type().str(), "f32[]");
  EXPECT_EQ(n->output(2)->type().str(), "u8[]");
  // [min(x, 0), max(x, 0)] = [-1, 2.5]: scale 3.5 / 255, zero point 1 / scale = 72.86 -> 73.
  std::vector<Tensor> out = Interpreter().run(g, {{"x", tensor_of(DType::F32, {-1, 0, 1, 2.5}, {4})}});
  EXPECT_EQ(floats(out[0]), (Doubles{0, 73, 146, 255}));
  EXPECT_FLOAT_EQ(static_cast<float>(out[1].get_f64(0)), 3.5f / 255.0f);
  EXPECT_EQ(out[2].get_f64(0), 73);
  // All positive: the zero point is 0 and the largest value maps to 255
  // (2 / (4 / 255) is 127.4999 in float32 -> 127).
  out = Interpreter().run(g, {{"x", tensor_of(DType::F32, {1, 2, 3, 4}, {4})}});
  EXPECT_EQ(floats(out[0]), (Doubles{64, 127, 191, 255}));
  EXPECT_EQ(out[2].get_f64(0), 0);
  // All zero: the scale is 1 / 255, as in the ONNX reference.
  out = Interpreter().run(g, {{"x", tensor_of(DType::F32, {0, 0, 0, 0}, {4})}});
  EXPECT_FLOAT_EQ(static_cast<float>(out[1].get_f64(0)), 1.0f / 255.0f);
  EXPECT_EQ(floats(out[0]), (Doubles{0, 0, 0, 0}));
}

TEST(QLinearMatMul, PerColumnScalesRequantize) {
  Graph g;
  g.set_opset("", 21);
  auto in = [&](const std::string& name, DType dt, const std::vector<std::string>& dims) {
    return g.add_input(name, t(dt, dims));
  };
  std::vector<Value*> ins = {in("a", DType::U8, {"2", "2"}),  in("as", DType::F32, {}), in("az", DType::U8, {}),
                             in("b", DType::I8, {"2", "2"}),  in("bs", DType::F32, {"nb"}), in("bz", DType::I8, {"2"}),
                             in("ys", DType::F32, {}), in("yz", DType::I8, {})};
  Node* n = g.add_node("QLinearMatMul", ins, {"y"}, "", "qmm");
  g.set_outputs({n->output(0)});
  infer_shapes(g);
  EXPECT_EQ(n->output(0)->type().str(), "i8[2, 2]");
  std::map<std::string, Tensor> feeds = {
      {"a", tensor_of(DType::U8, {11, 12, 13, 14}, {2, 2})}, {"as", tensor_of(DType::F32, {0.5}, {})},
      {"az", tensor_of(DType::U8, {10}, {})},                {"b", tensor_of(DType::I8, {1, 2, 3, 4}, {2, 2})},
      {"bs", tensor_of(DType::F32, {1, 100}, {2})},          {"bz", tensor_of(DType::I8, {0, 1}, {2})},
      {"ys", tensor_of(DType::F32, {1}, {})},                {"yz", tensor_of(DType::I8, {-5}, {})}};
  // (A - 10) @ (B - [0, 1]) = [[1, 2], [3, 4]] @ [[1, 1], [3, 3]] = [[7, 7], [15, 15]];
  // times 0.5 * [1, 100]: [[3.5, 350], [7.5, 750]] -> round to even, - 5, saturate.
  EXPECT_EQ(floats(Interpreter().run(g, feeds)[0]), (Doubles{-1, 127, 3, 127}));
  feeds["bs"] = tensor_of(DType::F32, {1, 1, 1}, {3});
  const std::string what = input_error([&] { Interpreter().run(g, feeds); });
  EXPECT_NE(what.find("qmm"), std::string::npos) << what;
  EXPECT_NE(what.find("b_scale (per column) of one element or 2"), std::string::npos) << what;
}

TEST(ConvInteger, ZeroPointsPerTensorAndPerOutputChannel) {
  OneOp c("ConvInteger", {t(DType::U8, {"1", "1", "3", "3"}), t(DType::I8, {"2", "1", "2", "2"}), t(DType::U8, {}),
                          t(DType::I8, {"2"})});
  EXPECT_EQ(c.type(), "i32[1, 2, 2, 2]");
  Tensor x = tensor_of(DType::U8, {2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 1, 3, 3});  // x - 1 = 1..9
  Tensor w = tensor_of(DType::I8, {1, 1, 1, 1, 2, 2, 2, 2}, {2, 1, 2, 2});      // w - [0, 1]: sums, then sums again
  EXPECT_EQ(floats(c.run({x, w, tensor_of(DType::U8, {1}, {}), tensor_of(DType::I8, {0, 1}, {2})})),
            (Doubles{12, 16, 24, 28, 12, 16, 24, 28}));
}

TEST(QLinearConv, BiasAndPerChannelWeightScales) {
  Graph g;
  g.set_opset("", 13);
  auto in = [&](const std::string& name, DType dt, const std::vector<std::string>& dims) {
    return g.add_input(name, t(dt, dims));
  };
  std::vector<Value*> ins = {in("x", DType::I8, {"1", "1", "2", "2"}), in("xs", DType::F32, {}),
                             in("xz", DType::I8, {}),                   in("w", DType::I8, {"2", "1", "1", "1"}),
                             in("ws", DType::F32, {"2"}),              in("wz", DType::I8, {"2"}),
                             in("ys", DType::F32, {}),                 in("yz", DType::U8, {}),
                             in("bias", DType::I32, {"2"})};
  Node* n = g.add_node("QLinearConv", ins, {"y"}, "", "qconv");
  g.set_outputs({n->output(0)});
  infer_shapes(g);
  EXPECT_EQ(n->output(0)->type().str(), "u8[1, 2, 2, 2]");
  std::map<std::string, Tensor> feeds = {
      {"x", tensor_of(DType::I8, {1, 2, 3, 4}, {1, 1, 2, 2})}, {"xs", tensor_of(DType::F32, {0.5}, {})},
      {"xz", tensor_of(DType::I8, {0}, {})},                   {"w", tensor_of(DType::I8, {1, -1}, {2, 1, 1, 1})},
      {"ws", tensor_of(DType::F32, {1, 1000}, {2})},           {"wz", tensor_of(DType::I8, {0, 0}, {2})},
      {"ys", tensor_of(DType::F32, {1}, {})},                  {"yz", tensor_of(DType::U8, {100}, {})},
      {"bias", tensor_of(DType::I32, {0, 2}, {2})}};
  // Channel 0: x * 0.5 = [0.5, 1, 1.5, 2] -> [0, 1, 2, 2] + 100; channel 1: (2 - x) * 500 saturates at 0 or 255.
  EXPECT_EQ(floats(Interpreter().run(g, feeds)[0]), (Doubles{100, 101, 102, 102, 255, 100, 0, 0}));
}

TEST(QuantizationKernels, PointwiseWhereScalesLineUpWithX) {
  auto role = [](const std::vector<Type>& ins, int64_t axis, int64_t block = 0) {
    std::map<std::string, Attribute> attrs = {{"axis", Attribute::of_int(axis)}};
    if (block) attrs["block_size"] = Attribute::of_int(block);
    OneOp q("QuantizeLinear", ins, attrs, 21);
    q.type();
    return kernel_role(*q.node);
  };
  Type x = t(DType::F32, {"4", "8"});
  EXPECT_EQ(role({x, t(DType::F32, {}), t(DType::I8, {})}, 1), KernelRole::Pointwise);
  EXPECT_EQ(role({x, t(DType::F32, {"8"}), t(DType::I8, {"8"})}, -1), KernelRole::Pointwise);
  EXPECT_EQ(role({x, t(DType::F32, {"4"}), t(DType::I8, {"4"})}, 0), KernelRole::None);
  EXPECT_EQ(role({x, t(DType::F32, {"4", "4"})}, 1, 2), KernelRole::None);
}

}  // namespace
}  // namespace tcc
