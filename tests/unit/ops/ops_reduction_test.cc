// Reduction ops: symbolic shape rules across opsets (axes attribute vs input)
// and exact reference-kernel results.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::floats;
using testing::OpGraph;
using testing::tensor_of;
using testing::tensor_type;

// One node whose input 0 is the graph input "x" and whose other inputs are
// initializers (null = absent), unlike testing::OneOp whose inputs are all graph
// inputs: reductions take axes, scale and bias as constants.
struct OpOnX {
  OpOnX(const std::string& op, Type x, const std::vector<const Tensor*>& consts,
        const std::map<std::string, Attribute>& attrs = {}, int64_t opset = 17, size_t outputs = 1) {
    g.set_opset("", opset);
    std::vector<Value*> vs{g.add_input("x", std::move(x))};
    for (size_t i = 0; i < consts.size(); ++i)
      vs.push_back(consts[i] ? g.add_initializer("c" + std::to_string(i), *consts[i]) : nullptr);
    std::vector<std::string> outs;
    for (size_t i = 0; i < outputs; ++i) outs.push_back("out" + std::to_string(i));
    node = g.add_node(op, vs, outs, "", op + "_0");
    for (const auto& [k, a] : attrs) node->set_attr(k, a);
    g.set_outputs(node->outputs());
  }
  std::string type(size_t i = 0) {
    infer_shapes(g);
    return node->output(i)->type().str();
  }
  std::vector<Tensor> run(const Tensor& x) { return Interpreter().run(g, {{"x", x}}); }
  Graph g;
  Node* node = nullptr;
};

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

TEST(ReductionShapes, AxesAttributeBeforeOpset18) {
  Type x = tensor_type(DType::F32, {"batch", "seq", "768"});
  EXPECT_EQ(OpOnX("ReduceMean", x, {}, {{"axes", ints({-1})}}, 17).type(), "f32[batch, seq, 1]");
  EXPECT_EQ(OpOnX("ReduceMax", x, {}, {{"axes", ints({0, 2})}, {"keepdims", Attribute::of_int(0)}}, 13).type(),
            "f32[seq]");
  EXPECT_EQ(OpOnX("ReduceProd", x, {}, {}, 13).type(), "f32[1, 1, 1]");
}

TEST(ReductionShapes, AxesInputFromOpset18AndReduceSumFrom13) {
  Type x = tensor_type(DType::F32, {"batch", "seq", "768"});
  Tensor axes = Tensor::from_i64({1}, {1});
  EXPECT_EQ(OpOnX("ReduceSum", x, {&axes}, {{"keepdims", Attribute::of_int(0)}}, 13).type(), "f32[batch, 768]");
  EXPECT_EQ(OpOnX("ReduceMean", x, {&axes}, {}, 18).type(), "f32[batch, 1, 768]");
  // No axes and noop_with_empty_axes: the identity.
  EXPECT_EQ(OpOnX("ReduceL2", x, {}, {{"noop_with_empty_axes", Attribute::of_int(1)}}, 18).type(),
            "f32[batch, seq, 768]");
  EXPECT_EQ(OpOnX("ReduceL2", x, {}, {{"keepdims", Attribute::of_int(0)}}, 18).type(), "f32[]");
}

// Axes read from data: each kept dim is a fresh symbol (the input's or 1, as
// the data decides), which the host step that reduces binds; without keepdims
// the rank loses the axes' count when that is static.
TEST(ReductionShapes, AxesFromDataGiveFreshSymbols) {
  auto reduce = [](std::vector<std::string> axes_dims, int64_t keepdims, int64_t noop = 0) {
    OpGraph t(18);
    Value* x = t.input("x", tensor_type(DType::F32, {"batch", "seq", "768"}));
    Value* axes = t.input("axes", tensor_type(DType::I64, std::move(axes_dims)));
    Value* y = t.op("ReduceSum", {x, axes},
                    {{"keepdims", Attribute::of_int(keepdims)}, {"noop_with_empty_axes", Attribute::of_int(noop)}});
    t.infer();
    return y->type().str();
  };
  EXPECT_EQ(reduce({"2"}, 1), "f32[u0, u1, u2]");
  EXPECT_EQ(reduce({"2"}, 0), "f32[u0]");
  EXPECT_EQ(reduce({"0"}, 0), "f32[]");
  EXPECT_EQ(reduce({"0"}, 0, 1), "f32[u0, u1, u2]");
  EXPECT_EQ(reduce({"n"}, 0), "f32[*]");
}

TEST(ReductionShapes, AxesAttributeWhereAnInputIsExpectedIsAnError) {
  OpOnX op("ReduceSum", tensor_type(DType::F32, {"batch"}), {}, {{"axes", ints({0})}}, 13);
  EXPECT_THROW(op.type(), InputError);
}

TEST(ReductionShapes, BadAxesNameTheNode) {
  Type x = tensor_type(DType::F32, {"batch", "seq"});
  OpOnX op("ReduceMean", x, {}, {{"axes", ints({2})}}, 17);
  const std::string what = input_error([&] { op.type(); });
  EXPECT_NE(what.find("ReduceMean_0"), std::string::npos) << what;
  EXPECT_NE(what.find("axis 2 is out of range for rank 2"), std::string::npos) << what;
}

TEST(ReductionShapes, ArgSoftmaxLayerNormCumSum) {
  Type x = tensor_type(DType::F16, {"batch", "seq", "768"});
  EXPECT_EQ(OpOnX("ArgMax", x, {}, {{"axis", Attribute::of_int(1)}}).type(), "i64[batch, 1, 768]");
  EXPECT_EQ(OpOnX("ArgMin", x, {}, {{"keepdims", Attribute::of_int(0)}}).type(), "i64[seq, 768]");
  EXPECT_EQ(OpOnX("Softmax", x, {}, {}).type(), "f16[batch, seq, 768]");
  Tensor axis = Tensor::scalar_i64(1);
  EXPECT_EQ(OpOnX("CumSum", x, {&axis}).type(), "f16[batch, seq, 768]");
  Tensor scale = tensor_of(DType::F16, std::vector<double>(768, 1), {768});
  OpOnX ln("LayerNormalization", x, {&scale}, {}, 17, 3);
  EXPECT_EQ(ln.type(0), "f16[batch, seq, 768]");
  EXPECT_EQ(ln.type(1), "f32[batch, seq, 1]");
  EXPECT_EQ(ln.type(2), "f32[batch, seq, 1]");
}

TEST(ReductionShapes, LayerNormScaleUnifiesWithNormalizedDim) {
  Graph g;
  g.set_opset("", 17);
  Value* x = g.add_input("x", tensor_type(DType::F32, {"batch", "hidden"}));
  Value* s = g.add_input("scale", tensor_type(DType::F32, {"768"}));
  Node* ln = g.add_node("LayerNormalization", {x, s}, {"y"});
  g.set_outputs({ln->output(0)});
  infer_shapes(g);
  EXPECT_EQ(ln->output(0)->type().str(), "f32[batch, 768]");
  EXPECT_EQ(g.inputs()[0]->type().str(), "f32[batch, 768]");
}

TEST(ReductionKernels, ReduceFamilyOnOneMatrix) {
  Tensor x = tensor_of(DType::F32, {1, -2, 3, 4, 5, -6}, {2, 3});
  Type t = tensor_type(DType::F32, {"2", "3"});
  auto reduce = [&](const std::string& op, std::vector<int64_t> axes) {
    Tensor a = Tensor::from_i64(axes, {static_cast<int64_t>(axes.size())});
    return floats(OpOnX(op, t, {axes.empty() ? nullptr : &a}, {{"keepdims", Attribute::of_int(0)}}, 18).run(x)[0]);
  };
  EXPECT_EQ(reduce("ReduceSum", {1}), (std::vector<double>{2, 3}));
  EXPECT_EQ(reduce("ReduceMean", {0}), (std::vector<double>{2.5, 1.5, -1.5}));
  EXPECT_EQ(reduce("ReduceMax", {1}), (std::vector<double>{3, 5}));
  EXPECT_EQ(reduce("ReduceMin", {}), (std::vector<double>{-6}));
  EXPECT_EQ(reduce("ReduceProd", {1}), (std::vector<double>{-6, -120}));
  EXPECT_EQ(reduce("ReduceL1", {1}), (std::vector<double>{6, 15}));
  EXPECT_EQ(reduce("ReduceSumSquare", {1}), (std::vector<double>{14, 77}));
  EXPECT_EQ(reduce("ReduceL2", {1})[0], static_cast<float>(std::sqrt(14.0)));
  EXPECT_EQ(reduce("ReduceLogSum", {0})[0], static_cast<float>(std::log(5.0)));
  EXPECT_EQ(reduce("ReduceLogSumExp", {1})[1], static_cast<float>(std::log(std::exp(4.0) + std::exp(5.0) + std::exp(-6.0))));
}

TEST(ReductionKernels, IntegerSumsAreExactAndEmptySetsGiveIdentities) {
  Tensor big = tensor_of(DType::I64, {0, 0}, {2});
  big.set_i64(0, (int64_t{1} << 60) + 1);
  big.set_i64(1, 1);
  Tensor axes = Tensor::from_i64({0}, {1});
  OpOnX sum("ReduceSum", tensor_type(DType::I64, {"2"}), {&axes}, {}, 13);
  EXPECT_EQ(sum.run(big)[0].get_i64(0), (int64_t{1} << 60) + 2);

  Tensor empty(DType::F32, {0, 2});
  Type te = tensor_type(DType::F32, {"0", "2"});
  auto over_rows = [&](const std::string& op) { return floats(OpOnX(op, te, {&axes}, {}, 18).run(empty)[0]); };
  EXPECT_EQ(over_rows("ReduceSum"), (std::vector<double>{0, 0}));
  EXPECT_EQ(over_rows("ReduceProd"), (std::vector<double>{1, 1}));
  EXPECT_EQ(over_rows("ReduceMax")[0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(over_rows("ReduceLogSumExp")[0], -std::numeric_limits<double>::infinity());
}

TEST(ReductionKernels, ArgMaxTiesAndSelectLastIndex) {
  Tensor x = tensor_of(DType::I32, {2, 7, 7, 1, 1, 0}, {2, 3});
  Type t = tensor_type(DType::I32, {"2", "3"});
  EXPECT_EQ(floats(OpOnX("ArgMax", t, {}, {{"axis", Attribute::of_int(1)}}).run(x)[0]), (std::vector<double>{1, 0}));
  EXPECT_EQ(floats(OpOnX("ArgMax", t, {}, {{"axis", Attribute::of_int(1)}, {"select_last_index", Attribute::of_int(1)}})
                       .run(x)[0]),
            (std::vector<double>{2, 1}));
  EXPECT_EQ(floats(OpOnX("ArgMin", t, {}, {{"keepdims", Attribute::of_int(0)}}).run(x)[0]),
            (std::vector<double>{1, 1, 1}));
}

TEST(ReductionKernels, SoftmaxAndLogSoftmaxAlongAnAxis) {
  Tensor x = tensor_of(DType::F64, {1, 2, 3, 1000, 1000, 1000}, {2, 3});
  Type t = tensor_type(DType::F64, {"2", "3"});
  std::vector<double> sm = floats(OpOnX("Softmax", t, {}).run(x)[0]);
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_DOUBLE_EQ(sm[0], std::exp(1.0) / z);
  EXPECT_DOUBLE_EQ(sm[4], 1.0 / 3);  // large inputs do not overflow
  std::vector<double> col = floats(OpOnX("Softmax", t, {}, {{"axis", Attribute::of_int(0)}}).run(x)[0]);
  EXPECT_DOUBLE_EQ(col[0] + col[3], 1.0);
  std::vector<double> lsm = floats(OpOnX("LogSoftmax", t, {}).run(x)[0]);
  EXPECT_NEAR(lsm[2], 3 - std::log(z), 1e-12);
}

TEST(ReductionKernels, LayerNormalizationWithBiasAndStatistics) {
  Tensor x = tensor_of(DType::F64, {1, 2, 3, 4}, {2, 2});
  Tensor scale = tensor_of(DType::F64, {2, 3}, {2});
  Tensor bias = tensor_of(DType::F64, {10, 20}, {2});
  OpOnX ln("LayerNormalization", tensor_type(DType::F64, {"2", "2"}), {&scale, &bias},
           {{"epsilon", Attribute::of_float(0)}}, 17, 3);
  std::vector<Tensor> out = ln.run(x);
  EXPECT_EQ(floats(out[0]), (std::vector<double>{8, 23, 8, 23}));  // normalized rows are [-1, 1]
  EXPECT_EQ(out[1].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(floats(out[1]), (std::vector<double>{1.5, 3.5}));
  EXPECT_EQ(floats(out[2]), (std::vector<double>{2, 2}));  // 1 / sqrt(0.25)
}

TEST(ReductionKernels, CumSumExclusiveAndReverse) {
  Tensor x = tensor_of(DType::I32, {1, 2, 3, 4, 5, 6}, {2, 3});
  Type t = tensor_type(DType::I32, {"2", "3"});
  Tensor axis1 = Tensor::scalar_i64(1);
  Tensor axis0 = Tensor::scalar_i64(-2);
  EXPECT_EQ(floats(OpOnX("CumSum", t, {&axis1}).run(x)[0]), (std::vector<double>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(floats(OpOnX("CumSum", t, {&axis0}).run(x)[0]), (std::vector<double>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(
      floats(OpOnX("CumSum", t, {&axis1}, {{"exclusive", Attribute::of_int(1)}, {"reverse", Attribute::of_int(1)}})
                 .run(x)[0]),
      (std::vector<double>{5, 3, 0, 11, 6, 0}));
}

}  // namespace
}  // namespace tcc
