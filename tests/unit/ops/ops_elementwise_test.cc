// Elementwise ops: symbolic broadcasting, shape-value propagation and exact
// reference-kernel results.
#include <gtest/gtest.h>

#include <cmath>

#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::floats;
using testing::OneOp;
using testing::tensor_of;
using testing::tensor_type;

// Runs only the shape rule of `op`, with symbolic contents for its rank-0/1
// integer inputs, and prints the contents it records for output 0.
std::string value_rule(const std::string& op, const std::vector<Type>& types, const std::vector<Dims>& vals,
                       const std::map<std::string, Attribute>& attrs = {}) {
  Graph g;
  g.set_opset("", 17);
  std::vector<Value*> vs;
  for (size_t i = 0; i < types.size(); ++i) vs.push_back(g.add_input("in" + std::to_string(i), types[i]));
  Node* n = g.add_node(op, vs, {"out"}, "", op + "_0");
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  ShapeEnv env;
  for (const char* s : {"batch", "seq"}) env.declare(s);
  std::vector<const Dims*> vp;
  for (const Dims& d : vals) vp.push_back(&d);
  InferContext ctx(*n, env, types, std::vector<const Tensor*>(types.size(), nullptr), vp, nullptr);
  OpRegistry::get().lookup(*n)->infer(ctx);
  return ctx.out_values[0] ? dims_str(*ctx.out_values[0]) : "none";
}

Dim sym(const char* text) { return Dim(*SymExpr::parse(text)); }

TEST(ElementwiseShapes, BroadcastKeepsSymbolicDims) {
  OneOp add("Add", {tensor_type(DType::F32, {"batch", "seq", "768"}), tensor_type(DType::F32, {"768"})});
  EXPECT_EQ(add.type(), "f32[batch, seq, 768]");
  OneOp mul("Mul", {tensor_type(DType::F32, {"batch", "1", "seq"}), tensor_type(DType::F32, {"4", "1"})});
  EXPECT_EQ(mul.type(), "f32[batch, 4, seq]");
}

TEST(ElementwiseShapes, BroadcastUnifiesDistinctSymbols) {
  // n must equal seq at run time; the first-declared name survives.
  OneOp add("Add", {tensor_type(DType::F32, {"batch", "seq"}), tensor_type(DType::F32, {"n"})});
  EXPECT_EQ(add.type(), "f32[batch, seq]");
  EXPECT_EQ(add.g.inputs()[1]->type().str(), "f32[seq]");
}

TEST(ElementwiseShapes, IncompatibleStaticDimsNameTheNode) {
  OneOp add("Add", {tensor_type(DType::F32, {"2", "3"}), tensor_type(DType::F32, {"4"})});
  const std::string what = input_error([&] { add.type(); });
  EXPECT_NE(what.find("Add_0"), std::string::npos) << what;
  EXPECT_NE(what.find("cannot broadcast dimension 3 with 4"), std::string::npos) << what;
}

TEST(ElementwiseShapes, ComparisonsAndPredicatesAreBool) {
  OneOp less("Less", {tensor_type(DType::F32, {"batch", "1"}), tensor_type(DType::F32, {"seq"})});
  EXPECT_EQ(less.type(), "bool[batch, seq]");
  OneOp isnan("IsNaN", {tensor_type(DType::F16, {"batch", "seq"})});
  EXPECT_EQ(isnan.type(), "bool[batch, seq]");
  OneOp where("Where", {tensor_type(DType::Bool, {"seq", "1"}), tensor_type(DType::I64, {"batch", "1", "1"}),
                        tensor_type(DType::I64, {"seq"})});
  EXPECT_EQ(where.type(), "i64[batch, seq, seq]");
}

TEST(ElementwiseShapes, CastAndCastLikeChangeOnlyTheDtype) {
  OneOp cast("Cast", {tensor_type(DType::F32, {"batch", "seq"})}, {{"to", Attribute::of_int(7)}});
  EXPECT_EQ(cast.type(), "i64[batch, seq]");
  OneOp like("CastLike", {tensor_type(DType::F32, {"batch"}), tensor_type(DType::F16, {})});
  EXPECT_EQ(like.type(), "f16[batch]");
  OneOp fp8("Cast", {tensor_type(DType::F32, {"batch"})}, {{"to", Attribute::of_int(17)}});
  EXPECT_EQ(fp8.type(), "f8e4m3fn[batch]");
  OneOp int4("Cast", {tensor_type(DType::F32, {"batch"})}, {{"to", Attribute::of_int(22)}});
  EXPECT_EQ(int4.type(), "i4[batch]");
  OneOp bad("Cast", {tensor_type(DType::F32, {"batch"})}, {{"to", Attribute::of_int(25)}});  // uint2
  EXPECT_THROW(bad.type(), InputError);
}

TEST(ElementwiseValues, ShapeArithmeticStaysSymbolic) {
  Type i64v = tensor_type(DType::I64, {"1"});
  Type i64s = tensor_type(DType::I64, {});
  EXPECT_EQ(value_rule("Div", {i64v, i64s}, {{sym("seq*768")}, {Dim(12)}}), "[seq*64]");
  EXPECT_EQ(value_rule("Mul", {i64s, i64s}, {{sym("batch")}, {sym("seq")}}), "[batch*seq]");
  EXPECT_EQ(value_rule("Add", {i64v, i64s}, {{sym("seq")}, {Dim(1)}}), "[seq+1]");
  EXPECT_EQ(value_rule("Sub", {i64v, i64v}, {{sym("seq")}, {sym("seq")}}), "[0]");
  // seq*3 / 2 is not exact: a floor division of a size stays symbolic.
  EXPECT_EQ(value_rule("Div", {i64s, i64s}, {{sym("seq*3")}, {Dim(2)}}), "[(seq*3)//(2)]");
  // Division by a symbol that does not divide: unknown.
  EXPECT_EQ(value_rule("Div", {i64s, i64s}, {{sym("seq")}, {sym("batch")}}), "none");
  // Integer Div truncates toward zero.
  EXPECT_EQ(value_rule("Div", {i64s, i64s}, {{Dim(-7)}, {Dim(2)}}), "[-3]");
}

TEST(ElementwiseValues, ExportersExpandChainResolves) {
  // torch exports expand(x, [-1, seq]) as Where(Equal(shape, -1), ones, shape).
  Type i64v = tensor_type(DType::I64, {"2"});
  Type boolv = tensor_type(DType::Bool, {"2"});
  EXPECT_EQ(value_rule("Equal", {i64v, i64v}, {{sym("batch"), sym("seq")}, {Dim(-1), sym("seq")}}), "[0, 1]");
  EXPECT_EQ(value_rule("Equal", {i64v, i64v}, {{sym("batch"), Dim(3)}, {sym("seq"), Dim(3)}}), "none");
  EXPECT_EQ(value_rule("Where", {boolv, i64v, i64v}, {{Dim(0), Dim(1)}, {Dim(1), Dim(1)}, {sym("batch"), sym("seq")}}),
            "[batch, 1]");
  EXPECT_EQ(value_rule("Cast", {i64v}, {{sym("batch"), Dim(4)}}, {{"to", Attribute::of_int(6)}}), "[batch, 4]");
}

TEST(ElementwiseValues, MaxAndMinWhenDecidable) {
  Type i64s = tensor_type(DType::I64, {});
  EXPECT_EQ(value_rule("Max", {i64s, i64s}, {{sym("seq")}, {Dim(0)}}), "[seq]");
  EXPECT_EQ(value_rule("Min", {i64s, i64s}, {{Dim(0)}, {sym("seq")}}), "[0]");
  EXPECT_EQ(value_rule("Max", {i64s, i64s}, {{Dim(3)}, {Dim(7)}}), "[7]");
  EXPECT_EQ(value_rule("Max", {i64s, i64s}, {{sym("seq")}, {Dim(8)}}), "none");
  EXPECT_EQ(value_rule("Max", {i64s, i64s}, {{sym("seq")}, {Dim(-1)}}), "[seq]");
}

TEST(ElementwiseKernels, IntegerDivTruncatesAndModFollowsFmod) {
  Tensor x = tensor_of(DType::I32, {-7, 7, -7, 7}, {4});
  Tensor y = tensor_of(DType::I32, {2, -2, 3, 3}, {4});
  OneOp div("Div", {tensor_type(DType::I32, {"4"}), tensor_type(DType::I32, {"4"})});
  EXPECT_EQ(floats(div.run({x, y})), (std::vector<double>{-3, -3, -2, 2}));
  OneOp mod("Mod", {tensor_type(DType::I32, {"4"}), tensor_type(DType::I32, {"4"})});
  EXPECT_EQ(floats(mod.run({x, y})), (std::vector<double>{1, -1, 2, 1}));  // sign of the divisor
  OneOp fmod("Mod", {tensor_type(DType::I32, {"4"}), tensor_type(DType::I32, {"4"})}, {{"fmod", Attribute::of_int(1)}});
  EXPECT_EQ(floats(fmod.run({x, y})), (std::vector<double>{-1, 1, -1, 1}));  // sign of the dividend
}

TEST(ElementwiseKernels, UnsignedArithmeticIsExactAt64Bits) {
  Tensor big(DType::U64, {1});
  big.set_i64(0, -2);  // 2^64 - 2
  Tensor two(DType::U64, {1});
  two.set_i64(0, 2);
  OneOp div("Div", {tensor_type(DType::U64, {"1"}), tensor_type(DType::U64, {"1"})});
  Tensor q = div.run({big, two});
  EXPECT_EQ(static_cast<uint64_t>(q.get_i64(0)), (~uint64_t{0} - 1) / 2);
  OneOp greater("Greater", {tensor_type(DType::U64, {"1"}), tensor_type(DType::U64, {"1"})});
  EXPECT_EQ(greater.run({big, two}).get_i64(0), 1);
}

TEST(ElementwiseKernels, PowWithIntegerAndFloatExponents) {
  OneOp ipow("Pow", {tensor_type(DType::I64, {"3"}), tensor_type(DType::I64, {"3"})});
  EXPECT_EQ(floats(ipow.run({tensor_of(DType::I64, {2, 3, -2}, {3}), tensor_of(DType::I64, {10, 2, 3}, {3})})),
            (std::vector<double>{1024, 9, -8}));
  OneOp fpow("Pow", {tensor_type(DType::F32, {"2"}), tensor_type(DType::I32, {})});
  EXPECT_EQ(floats(fpow.run({tensor_of(DType::F32, {1.5, -2}, {2}), tensor_of(DType::I32, {2}, {})})),
            (std::vector<double>{2.25, 4}));
}

TEST(ElementwiseKernels, BroadcastingComparisonsAndWhere) {
  OneOp less("Less", {tensor_type(DType::F32, {"2", "1"}), tensor_type(DType::F32, {"3"})});
  Tensor m = less.run({tensor_of(DType::F32, {1, 2}, {2, 1}), tensor_of(DType::F32, {0, 1.5, 3}, {3})});
  EXPECT_EQ(m.dtype(), DType::Bool);
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats(m), (std::vector<double>{0, 1, 1, 0, 0, 1}));
  OneOp where("Where", {tensor_type(DType::Bool, {"3"}), tensor_type(DType::I64, {"3"}), tensor_type(DType::I64, {})});
  Tensor w = where.run({tensor_of(DType::Bool, {1, 0, 1}, {3}), tensor_of(DType::I64, {7, 8, 9}, {3}),
                        tensor_of(DType::I64, {-1}, {})});
  EXPECT_EQ(floats(w), (std::vector<double>{7, -1, 9}));
}

TEST(ElementwiseKernels, VariadicMaxSumMean) {
  std::vector<Type> ts{tensor_type(DType::F32, {"2"}), tensor_type(DType::F32, {"1"}), tensor_type(DType::F32, {"2"})};
  std::vector<Tensor> ins{tensor_of(DType::F32, {1, 5}, {2}), tensor_of(DType::F32, {3}, {1}),
                          tensor_of(DType::F32, {2, 1}, {2})};
  EXPECT_EQ(floats(OneOp("Max", ts).run(ins)), (std::vector<double>{3, 5}));
  EXPECT_EQ(floats(OneOp("Min", ts).run(ins)), (std::vector<double>{1, 1}));
  EXPECT_EQ(floats(OneOp("Sum", ts).run(ins)), (std::vector<double>{6, 9}));
  EXPECT_EQ(floats(OneOp("Mean", ts).run(ins)), (std::vector<double>{2, 3}));
}

TEST(ElementwiseKernels, ActivationsMatchTheirFormulas) {
  Tensor x = tensor_of(DType::F64, {-1.5, 0, 2}, {3});
  Type t = tensor_type(DType::F64, {"3"});
  auto run = [&](const std::string& op, const std::map<std::string, Attribute>& attrs = {}, int64_t opset = 17) {
    return floats(OneOp(op, {t}, attrs, opset).run({x}));
  };
  EXPECT_EQ(run("Relu"), (std::vector<double>{0, 0, 2}));
  EXPECT_EQ(run("LeakyRelu", {{"alpha", Attribute::of_float(0.5f)}}), (std::vector<double>{-0.75, 0, 2}));
  std::vector<double> hs = run("HardSigmoid");  // alpha 0.2 and beta 0.5, as float attributes
  EXPECT_DOUBLE_EQ(hs[0], 0.2f * -1.5 + 0.5);
  EXPECT_DOUBLE_EQ(hs[2], 0.2f * 2 + 0.5);
  EXPECT_EQ(run("HardSwish", {}, 14), (std::vector<double>{-1.5 * (0.25), 0, 2 * (2.0 / 6 + 0.5)}));
  EXPECT_DOUBLE_EQ(run("Elu")[0], std::expm1(-1.5));
  EXPECT_DOUBLE_EQ(run("Sigmoid")[2], 1 / (1 + std::exp(-2.0)));
  EXPECT_DOUBLE_EQ(run("Softplus")[2], std::log1p(std::exp(2.0)));
  EXPECT_DOUBLE_EQ(run("Gelu", {}, 20)[0], 0.5 * -1.5 * (1 + std::erf(-1.5 / std::sqrt(2.0))));
  double tanh_gelu = 0.5 * 2 * (1 + std::tanh(std::sqrt(2 / M_PI) * (2 + 0.044715 * 8)));
  EXPECT_DOUBLE_EQ(run("Gelu", {{"approximate", Attribute::of_string("tanh")}}, 20)[2], tanh_gelu);
  EXPECT_THROW(run("Gelu", {{"approximate", Attribute::of_string("fast")}}, 20), InputError);
}

TEST(ElementwiseKernels, RoundHalfToEvenAndSign) {
  Tensor x = tensor_of(DType::F32, {0.5, 1.5, 2.5, -2.5, -0.2}, {5});
  Type t = tensor_type(DType::F32, {"5"});
  EXPECT_EQ(floats(OneOp("Round", {t}).run({x})), (std::vector<double>{0, 2, 2, -2, -0.0}));
  EXPECT_EQ(floats(OneOp("Sign", {t}).run({x})), (std::vector<double>{1, 1, 1, -1, -1}));
}

TEST(ElementwiseKernels, NegFlipsTheSignOfZero) {
  Tensor x = tensor_of(DType::F32, {0.0, -0.0, 2.0}, {3});
  Tensor y = OneOp("Neg", {tensor_type(DType::F32, {"3"})}).run({x});
  EXPECT_TRUE(std::signbit(y.get_f64(0)));
  EXPECT_FALSE(std::signbit(y.get_f64(1)));
  EXPECT_EQ(y.get_f64(2), -2.0);
}

TEST(ElementwiseKernels, ClipWithOptionalBoundsAndCastTruncates) {
  Graph g;
  g.set_opset("", 17);
  Value* x = g.add_input("x", tensor_type(DType::F32, {"4"}));
  Value* hi = g.add_initializer("hi", Tensor::scalar_f32(1.5f));
  Node* clip = g.add_node("Clip", {x, nullptr, hi}, {"y"});
  Node* cast = g.add_node("Cast", {clip->output(0)}, {"z"});
  cast->set_attr("to", Attribute::of_int(6));  // int32
  g.set_outputs({clip->output(0), cast->output(0)});
  infer_shapes(g);
  EXPECT_EQ(cast->output(0)->type().str(), "i32[4]");
  std::vector<Tensor> out = Interpreter().run(g, {{"x", tensor_of(DType::F32, {-3.7, 0.5, 1.2, 9}, {4})}});
  EXPECT_EQ(floats(out[0]), (std::vector<double>{-3.7f, 0.5, 1.2f, 1.5}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{-3, 0, 1, 1}));
}

TEST(ElementwiseKernels, LogicOps) {
  Tensor a = tensor_of(DType::Bool, {0, 0, 1, 1}, {4});
  Tensor b = tensor_of(DType::Bool, {0, 1, 0, 1}, {4});
  Type t = tensor_type(DType::Bool, {"4"});
  EXPECT_EQ(floats(OneOp("And", {t, t}).run({a, b})), (std::vector<double>{0, 0, 0, 1}));
  EXPECT_EQ(floats(OneOp("Or", {t, t}).run({a, b})), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(floats(OneOp("Xor", {t, t}).run({a, b})), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(floats(OneOp("Not", {t}).run({a})), (std::vector<double>{1, 1, 0, 0}));
}

TEST(ElementwiseKernels, BitShiftSaturatesLikeNumPy) {
  Type t = tensor_type(DType::I8, {"3"});
  Tensor x = tensor_of(DType::I8, {-8, 4, 64}, {3});
  Tensor s = tensor_of(DType::I8, {1, 9, 1}, {3});
  EXPECT_EQ(floats(OneOp("BitShift", {t, t}, {{"direction", Attribute::of_string("RIGHT")}}).run({x, s})),
            (std::vector<double>{-4, 0, 32}));
  EXPECT_EQ(floats(OneOp("BitShift", {t, t}, {{"direction", Attribute::of_string("LEFT")}}).run({x, s})),
            (std::vector<double>{-16, 0, -128}));
}

TEST(ElementwiseKernels, InverseTrigonometricEdges) {
  Type t = tensor_type(DType::F64, {"5"});
  auto run = [&](const std::string& op, const std::vector<double>& x) {
    return floats(OneOp(op, {t}).run({tensor_of(DType::F64, x, {5})}));
  };
  // Acosh is 0 at 1 and undefined below; Atanh is infinite at +-1, finite just inside.
  std::vector<double> acosh = run("Acosh", {1, 2, 0.5, -1, 1e300});
  EXPECT_EQ(acosh[0], 0.0);
  EXPECT_DOUBLE_EQ(acosh[1], std::log(2 + std::sqrt(3.0)));
  EXPECT_TRUE(std::isnan(acosh[2]) && std::isnan(acosh[3]));
  EXPECT_DOUBLE_EQ(acosh[4], std::acosh(1e300));
  std::vector<double> atanh = run("Atanh", {1, -1, 1 - 1e-12, 0, 1.5});
  EXPECT_EQ(atanh[0], INFINITY);
  EXPECT_EQ(atanh[1], -INFINITY);
  EXPECT_NEAR(atanh[2], 0.5 * std::log(2 / 1e-12), 1e-3);
  EXPECT_EQ(atanh[3], 0.0);
  EXPECT_TRUE(std::isnan(atanh[4]));
  std::vector<double> asin = run("Asin", {1, -1, 0, 0.5, 1.01});
  EXPECT_EQ(asin[0], M_PI / 2);
  EXPECT_EQ(asin[1], -M_PI / 2);
  EXPECT_DOUBLE_EQ(asin[3], M_PI / 6);
  EXPECT_TRUE(std::isnan(asin[4]));
  std::vector<double> acos = run("Acos", {1, -1, 0, 0.5, -1.01});
  EXPECT_EQ(acos[0], 0.0);
  EXPECT_EQ(acos[1], M_PI);
  EXPECT_DOUBLE_EQ(acos[3], M_PI / 3);
  EXPECT_TRUE(std::isnan(acos[4]));
  std::vector<double> atan = run("Atan", {INFINITY, -INFINITY, 0, 1, -1});
  EXPECT_EQ(atan[0], M_PI / 2);
  EXPECT_EQ(atan[1], -M_PI / 2);
  EXPECT_DOUBLE_EQ(atan[3], M_PI / 4);
  std::vector<double> asinh = run("Asinh", {0, 1, -1, INFINITY, -1e300});
  EXPECT_DOUBLE_EQ(asinh[1], std::log(1 + std::sqrt(2.0)));
  EXPECT_EQ(asinh[2], -asinh[1]);
  EXPECT_EQ(asinh[3], INFINITY);
  EXPECT_DOUBLE_EQ(asinh[4], -std::log(2e300));
}

TEST(ElementwiseKernels, TrigonometricAndHyperbolic) {
  Tensor x = tensor_of(DType::F32, {-2, 0, 0.75, 100}, {4});
  Type t = tensor_type(DType::F32, {"4"});
  auto run = [&](const std::string& op) { return floats(OneOp(op, {t}).run({x})); };
  // Computed in double and rounded once to f32.
  auto f32 = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  EXPECT_EQ(run("Tan"), (std::vector<double>{f32(std::tan(-2.0)), 0, f32(std::tan(0.75)), f32(std::tan(100.0))}));
  EXPECT_EQ(run("Sinh"), (std::vector<double>{f32(std::sinh(-2.0)), 0, f32(std::sinh(0.75)), INFINITY}));
  EXPECT_EQ(run("Cosh"), (std::vector<double>{f32(std::cosh(2.0)), 1, f32(std::cosh(0.75)), INFINITY}));
}

TEST(ElementwiseKernels, CeluMishSoftsignThresholdedRelu) {
  Tensor x = tensor_of(DType::F64, {-1.5, 0, 0.5, 2}, {4});
  Type t = tensor_type(DType::F64, {"4"});
  auto run = [&](const std::string& op, const std::map<std::string, Attribute>& attrs = {}) {
    return floats(OneOp(op, {t}, attrs, 18).run({x}));
  };
  std::vector<double> celu = run("Celu", {{"alpha", Attribute::of_float(2.0f)}});
  EXPECT_DOUBLE_EQ(celu[0], 2 * std::expm1(-0.75));
  EXPECT_EQ(celu[1], 0.0);
  EXPECT_EQ(celu[3], 2.0);
  EXPECT_THROW(run("Celu", {{"alpha", Attribute::of_float(0.0f)}}), InputError);
  std::vector<double> mish = run("Mish");
  EXPECT_DOUBLE_EQ(mish[0], -1.5 * std::tanh(std::log1p(std::exp(-1.5))));
  EXPECT_DOUBLE_EQ(mish[3], 2 * std::tanh(std::log1p(std::exp(2.0))));
  EXPECT_EQ(run("Softsign"), (std::vector<double>{-1.5 / 2.5, 0, 0.5 / 1.5, 2.0 / 3}));
  // The threshold itself is not above it.
  EXPECT_EQ(run("ThresholdedRelu", {{"alpha", Attribute::of_float(0.5f)}}), (std::vector<double>{0, 0, 0, 2}));
  EXPECT_EQ(run("ThresholdedRelu", {{"alpha", Attribute::of_float(-2.0f)}}), (std::vector<double>{-1.5, 0, 0.5, 2}));
  EXPECT_EQ(run("ThresholdedRelu"), (std::vector<double>{0, 0, 0, 2}));  // alpha 1
}

TEST(ElementwiseKernels, ShrinkBiasAndLambd) {
  Type t = tensor_type(DType::F32, {"7"});
  Tensor x = tensor_of(DType::F32, {-3, -1, -0.5, 0, 0.5, 1, 3}, {7});
  // Defaults: lambd 0.5, bias 0 (hard shrink); +-lambd itself is inside.
  EXPECT_EQ(floats(OneOp("Shrink", {t}, {}, 9).run({x})), (std::vector<double>{-3, -1, 0, 0, 0, 1, 3}));
  std::map<std::string, Attribute> soft = {{"lambd", Attribute::of_float(1.0f)}, {"bias", Attribute::of_float(1.5f)}};
  EXPECT_EQ(floats(OneOp("Shrink", {t}, soft, 9).run({x})), (std::vector<double>{-1.5, 0, 0, 0, 0, 0, 1.5}));
  // Integers compute in double and truncate toward 0; a result out of range saturates.
  Type ti = tensor_type(DType::I8, {"5"});
  std::map<std::string, Attribute> frac = {{"lambd", Attribute::of_float(1.0f)}, {"bias", Attribute::of_float(-0.5f)}};
  EXPECT_EQ(floats(OneOp("Shrink", {ti}, frac, 9).run({tensor_of(DType::I8, {-5, -1, 1, 3, 127}, {5})})),
            (std::vector<double>{-5, 0, 0, 3, 127}));
  Type tu = tensor_type(DType::U8, {"3"});
  EXPECT_EQ(floats(OneOp("Shrink", {tu}, soft, 9).run({tensor_of(DType::U8, {1, 2, 255}, {3})})),
            (std::vector<double>{0, 0, 253}));
}

TEST(ElementwiseKernels, PReluBroadcastsTheSlopeToX) {
  OneOp f("PRelu", {tensor_type(DType::F32, {"2", "3"}), tensor_type(DType::F32, {"3"})}, {}, 16);
  EXPECT_EQ(f.type(), "f32[2, 3]");
  EXPECT_EQ(floats(f.run({tensor_of(DType::F32, {-1, -2, 3, 0, -4, 5}, {2, 3}), tensor_of(DType::F32, {0.5, 2, -1}, {3})})),
            (std::vector<double>{-0.5, -4, 3, 0, -8, 5}));
  OneOp i("PRelu", {tensor_type(DType::I32, {"4"}), tensor_type(DType::I32, {"1"})}, {}, 16);
  EXPECT_EQ(floats(i.run({tensor_of(DType::I32, {-3, 0, 7, -2147483647}, {4}), tensor_of(DType::I32, {-2}, {1})})),
            (std::vector<double>{6, 0, 7, -2}));  // -2147483647 * -2 wraps around
  OneOp u("PRelu", {tensor_type(DType::U32, {"2"}), tensor_type(DType::U32, {"1"})}, {}, 16);
  EXPECT_EQ(floats(u.run({tensor_of(DType::U32, {4294967295.0, 1}, {2}), tensor_of(DType::U32, {3}, {1})})),
            (std::vector<double>{4294967295.0, 1}));  // never negative
  // A symbolic X dim takes a static slope dim; the output keeps X's shape.
  OneOp sym("PRelu", {tensor_type(DType::F32, {"b", "4"}), tensor_type(DType::F32, {"1", "4"})}, {}, 16);
  EXPECT_EQ(sym.type(), "f32[b, 4]");
}

TEST(ElementwiseShapes, PReluRefusesASlopeThatWouldWidenX) {
  OneOp wider("PRelu", {tensor_type(DType::F32, {"1", "3"}), tensor_type(DType::F32, {"2", "3"})}, {}, 16);
  EXPECT_NE(wider.error().find("slope f32[2, 3] must broadcast to X's shape f32[1, 3]"), std::string::npos)
      << wider.error();
  OneOp longer("PRelu", {tensor_type(DType::F32, {"3"}), tensor_type(DType::F32, {"1", "3"})}, {}, 16);
  EXPECT_NE(longer.error().find("must broadcast to X's shape"), std::string::npos) << longer.error();
  OneOp mixed("PRelu", {tensor_type(DType::F32, {"3"}), tensor_type(DType::F64, {"3"})}, {}, 16);
  EXPECT_NE(mixed.error(), "(no error)");
}

TEST(ElementwiseKernels, BitwiseOnSignedAndUnsigned) {
  Type t = tensor_type(DType::I8, {"4"});
  Tensor a = tensor_of(DType::I8, {-1, -128, 0x55, 12}, {4});
  Tensor b = tensor_of(DType::I8, {0x0f, -1, -86, 10}, {4});  // -86 is 0xaa
  EXPECT_EQ(floats(OneOp("BitwiseAnd", {t, t}, {}, 18).run({a, b})), (std::vector<double>{15, -128, 0, 8}));
  EXPECT_EQ(floats(OneOp("BitwiseOr", {t, t}, {}, 18).run({a, b})), (std::vector<double>{-1, -1, -1, 14}));
  EXPECT_EQ(floats(OneOp("BitwiseXor", {t, t}, {}, 18).run({a, b})), (std::vector<double>{-16, 127, -1, 6}));
  EXPECT_EQ(floats(OneOp("BitwiseNot", {t}, {}, 18).run({a})), (std::vector<double>{0, 127, -86, -13}));
  // Unsigned: the complement stays within the width; u64's top bit is a value bit, broadcast over a scalar.
  Type u8 = tensor_type(DType::U8, {"3"});
  EXPECT_EQ(floats(OneOp("BitwiseNot", {u8}, {}, 18).run({tensor_of(DType::U8, {0, 5, 255}, {3})})),
            (std::vector<double>{255, 250, 0}));
  Tensor top(DType::U64, {2});
  top.set_i64(0, INT64_MIN);  // 2^63
  top.set_i64(1, -1);         // 2^64 - 1
  Tensor mask(DType::U64, {});
  mask.set_i64(0, INT64_MIN | 1);
  Tensor y = OneOp("BitwiseAnd", {tensor_type(DType::U64, {"2"}), tensor_type(DType::U64, {})}, {}, 18).run({top, mask});
  EXPECT_EQ(static_cast<uint64_t>(y.get_i64(0)), uint64_t{1} << 63);
  EXPECT_EQ(static_cast<uint64_t>(y.get_i64(1)), (uint64_t{1} << 63) | 1);
  OneOp mixed("BitwiseOr", {tensor_type(DType::I32, {"2"}), tensor_type(DType::U32, {"2"})}, {}, 18);
  EXPECT_NE(mixed.error(), "(no error)");
}

TEST(ElementwiseKernels, BitShiftOfUnsignedShiftsInZeros) {
  Tensor x(DType::U64, {3});
  x.set_i64(0, INT64_MIN);  // 2^63
  x.set_i64(1, 3);
  x.set_i64(2, -1);
  Tensor s = tensor_of(DType::U64, {63, 62, 64}, {3});
  Type t = tensor_type(DType::U64, {"3"});
  Tensor right = OneOp("BitShift", {t, t}, {{"direction", Attribute::of_string("RIGHT")}}).run({x, s});
  EXPECT_EQ(floats(right), (std::vector<double>{1, 0, 0}));
  Tensor left = OneOp("BitShift", {t, t}, {{"direction", Attribute::of_string("LEFT")}}).run({x, s});
  EXPECT_EQ(static_cast<uint64_t>(left.get_i64(1)), uint64_t{3} << 62);
  EXPECT_EQ(floats(left), (std::vector<double>{0, 13835058055282163712.0, 0}));
  EXPECT_THROW(OneOp("BitShift", {t, t}, {{"direction", Attribute::of_string("UP")}}).run({x, s}), InputError);
}

}  // namespace
}  // namespace tcc
