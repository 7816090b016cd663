// Contractions: symbolic shape rules (contracted dims unify) and exact
// reference-kernel results for MatMul, MatMulInteger, Gemm and Einsum.
#include <gtest/gtest.h>

#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/ops/ops_test_util.h"

namespace tcc {
namespace {

using testing::floats;
using testing::OneOp;
using testing::tensor_of;
using testing::tensor_type;

Attribute eq(const std::string& s) { return Attribute::of_string(s); }

TEST(LinalgShapes, MatMulBroadcastsBatchAndUnifiesK) {
  OneOp mm("MatMul", {tensor_type(DType::F32, {"batch", "seq", "hidden"}), tensor_type(DType::F32, {"768", "3072"})});
  EXPECT_EQ(mm.type(), "f32[batch, seq, 3072]");
  EXPECT_EQ(mm.input_type(0), "f32[batch, seq, 768]");  // hidden == 768 was learned
  OneOp att("MatMul",
            {tensor_type(DType::F16, {"batch", "12", "seq", "64"}), tensor_type(DType::F16, {"1", "12", "64", "seq"})});
  EXPECT_EQ(att.type(), "f16[batch, 12, seq, seq]");
}

TEST(LinalgShapes, MatMulVectorPromotions) {
  EXPECT_EQ(OneOp("MatMul", {tensor_type(DType::F32, {"k"}), tensor_type(DType::F32, {"batch", "k", "n"})}).type(),
            "f32[batch, n]");
  EXPECT_EQ(OneOp("MatMul", {tensor_type(DType::F32, {"batch", "m", "k"}), tensor_type(DType::F32, {"k"})}).type(),
            "f32[batch, m]");
  EXPECT_EQ(OneOp("MatMul", {tensor_type(DType::F32, {"k"}), tensor_type(DType::F32, {"k"})}).type(), "f32[]");
}

TEST(LinalgShapes, MismatchedKNamesTheNode) {
  OneOp mm("MatMul", {tensor_type(DType::F32, {"batch", "4", "5"}), tensor_type(DType::F32, {"6", "7"})});
  std::string err = mm.error();
  EXPECT_NE(err.find("MatMul_0"), std::string::npos) << err;
  EXPECT_NE(err.find("expected equal contraction dims"), std::string::npos) << err;
  EXPECT_NE(err.find("got 5 and 6"), std::string::npos) << err;
}

TEST(LinalgShapes, GemmTransposesAndBroadcastsC) {
  OneOp g(
      "Gemm",
      {tensor_type(DType::F32, {"k", "batch"}), tensor_type(DType::F32, {"n", "768"}), tensor_type(DType::F32, {"n"})},
      {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)}});
  EXPECT_EQ(g.type(), "f32[batch, n]");
  EXPECT_EQ(g.input_type(0), "f32[768, batch]");
}

TEST(LinalgShapes, EinsumExplicitImplicitAndEllipsis) {
  EXPECT_EQ(
      OneOp("Einsum", {tensor_type(DType::F32, {"batch", "seq", "d"}), tensor_type(DType::F32, {"batch", "t", "64"})},
            {{"equation", eq("bij,bkj->bik")}})
          .type(),
      "f32[batch, seq, t]");
  // Implicit output: labels seen once, sorted (here i, k).
  EXPECT_EQ(OneOp("Einsum", {tensor_type(DType::F32, {"m", "k"}), tensor_type(DType::F32, {"k", "n"})},
                  {{"equation", eq("ij,jk")}})
                .type(),
            "f32[m, n]");
  EXPECT_EQ(
      OneOp("Einsum", {tensor_type(DType::F32, {"batch", "1", "3", "4"}), tensor_type(DType::F32, {"seq", "4", "5"})},
            {{"equation", eq("...ij,...jk->...ik")}})
          .type(),
      "f32[batch, seq, 3, 5]");
  EXPECT_EQ(OneOp("Einsum", {tensor_type(DType::F32, {"batch", "n", "n"})}, {{"equation", eq("bii->bi")}}).type(),
            "f32[batch, n]");
  OneOp bad("Einsum", {tensor_type(DType::F32, {"2", "3"})}, {{"equation", eq("ijk->i")}});
  EXPECT_NE(bad.error().find("has 3 labels but input 0 has rank 2"), std::string::npos) << bad.error();
}

TEST(LinalgKernels, BatchedMatMulWithBroadcastAndIntegers) {
  Tensor a = tensor_of(DType::I32, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor b = tensor_of(DType::I32, {1, 0, 1, 1}, {2, 2});
  OneOp mm("MatMul", {tensor_type(DType::I32, {"2", "2", "2"}), tensor_type(DType::I32, {"2", "2"})});
  Tensor y = mm.run({a, b});
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(floats(y), (std::vector<double>{3, 2, 7, 4, 11, 6, 15, 8}));
  OneOp vec("MatMul", {tensor_type(DType::F32, {"2"}), tensor_type(DType::F32, {"2", "2", "2"})});
  Tensor v = vec.run({tensor_of(DType::F32, {1, -1}, {2}), tensor_of(DType::F32, {1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2})});
  EXPECT_EQ(v.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(floats(v), (std::vector<double>{-2, -2, -2, -2}));
}

TEST(LinalgKernels, MatMulIntegerSubtractsZeroPoints) {
  Graph g;
  g.set_opset("", 17);
  Value* a = g.add_input("a", tensor_type(DType::U8, {"2", "2"}));
  Value* b = g.add_input("b", tensor_type(DType::U8, {"2", "2"}));
  Value* az = g.add_initializer("az", tensor_of(DType::U8, {1}, {}));
  Value* bz = g.add_initializer("bz", tensor_of(DType::U8, {0, 2}, {2}));  // per column
  Node* n = g.add_node("MatMulInteger", {a, b, az, bz}, {"y"});
  g.set_outputs({n->output(0)});
  infer_shapes(g);
  EXPECT_EQ(n->output(0)->type().str(), "i32[2, 2]");
  Tensor y = Interpreter().run(g, {{"a", tensor_of(DType::U8, {2, 3, 4, 5}, {2, 2})},
                                   {"b", tensor_of(DType::U8, {1, 3, 2, 4}, {2, 2})}})[0];
  // (A - 1) = [[1, 2], [3, 4]], (B - [0, 2]) = [[1, 1], [2, 2]].
  EXPECT_EQ(floats(y), (std::vector<double>{5, 5, 11, 11}));
}

TEST(LinalgKernels, GemmAlphaBetaTransposes) {
  OneOp gemm("Gemm",
             {tensor_type(DType::F32, {"2", "2"}), tensor_type(DType::F32, {"2", "2"}), tensor_type(DType::F32, {"1"})},
             {{"transA", Attribute::of_int(1)}, {"alpha", Attribute::of_float(2)}, {"beta", Attribute::of_float(0.5)}});
  Tensor a = tensor_of(DType::F32, {1, 2, 3, 4}, {2, 2});  // A' = [[1, 3], [2, 4]]
  Tensor b = tensor_of(DType::F32, {1, 0, 0, 1}, {2, 2});
  Tensor c = tensor_of(DType::F32, {10}, {1});
  EXPECT_EQ(floats(gemm.run({a, b, c})), (std::vector<double>{7, 11, 9, 13}));
}

TEST(LinalgKernels, EinsumDiagonalTraceTransposeAndBatchMatMul) {
  Tensor sq = tensor_of(DType::F64, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  Type tsq = tensor_type(DType::F64, {"3", "3"});
  EXPECT_EQ(floats(OneOp("Einsum", {tsq}, {{"equation", eq("ii->i")}}).run({sq})), (std::vector<double>{1, 5, 9}));
  EXPECT_EQ(floats(OneOp("Einsum", {tsq}, {{"equation", eq("ii")}}).run({sq})), (std::vector<double>{15}));
  EXPECT_EQ(floats(OneOp("Einsum", {tsq}, {{"equation", eq("ij->ji")}}).run({sq})),
            (std::vector<double>{1, 4, 7, 2, 5, 8, 3, 6, 9}));
  EXPECT_EQ(floats(OneOp("Einsum", {tsq, tsq}, {{"equation", eq("ij,ij->")}}).run({sq, sq})),
            (std::vector<double>{285}));
  Tensor a = tensor_of(DType::F32, {1, 2, 3, 4}, {2, 1, 2});
  Tensor b = tensor_of(DType::F32, {1, 1, 2, 0}, {2, 2, 1});
  OneOp bmm("Einsum", {tensor_type(DType::F32, {"2", "1", "2"}), tensor_type(DType::F32, {"2", "2", "1"})},
            {{"equation", eq("...ij,...jk->...ik")}});
  EXPECT_EQ(floats(bmm.run({a, b})), (std::vector<double>{3, 6}));
}

}  // namespace
}  // namespace tcc
