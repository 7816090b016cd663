// What the op registry says of each op holds together: each pointwise
// expression builds, for a node of its op, what the lowering can emit, and the
// facts an OpDef gathers (role, expression, refusal, library epilogues,
// decomposition, autocast class, commutativity, the non-tensor trait) agree
// with one another.
#include <gtest/gtest.h>

#include <algorithm>

#include "src/ir/graph.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Records what a pointwise expression asks of the lowering.
struct CountingBuilder : ScalarBuilder {
  int op(ScalarOp, DType, std::vector<int> args) override {
    for (int a : args) EXPECT_TRUE(a >= 0 && a < next) << "an operand that was never built";
    return next++;
  }
  int constant(DType, double) override { return next++; }
  int coordinate(const Node&, int) override { return next++; }
  int size(DType, const SymExpr&) override { return next++; }
  int random_offset() override { return next++; }
  int next = 0;
};

TEST(OpRegistry, PointwiseExpressionsBuildForTheirOps) {
  int checked = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    if (!def->pointwise) continue;
    EXPECT_TRUE(def->kernel) << def->op_type << " has a kernel expression but no kernel role";
    Graph g;
    g.set_opset(def->domain, 20);
    std::vector<Value*> inputs;
    size_t arity = def->op_type == "Where" ? 3 : 2;
    for (size_t i = 0; i < arity; ++i)
      inputs.push_back(g.add_input("x" + std::to_string(i), Type::tensor(DType::F32, {Dim(4)})));
    Node* n = g.add_node(def->op_type, inputs, {"y"}, def->domain, def->op_type);
    n->output(0)->set_type(Type::tensor(DType::F32, {Dim(4)}));
    if (def->op_type == "Size") n->set_attr("dims", Attribute::of_strings({"4"}));
    if (def->op_type == "BitShift") n->set_attr("direction", Attribute::of_string("LEFT"));
    CountingBuilder b;
    b.next = static_cast<int>(arity);
    std::vector<int> in;
    for (size_t i = 0; i < arity; ++i) in.push_back(static_cast<int>(i));
    int result = def->pointwise(*n, b, in);
    EXPECT_TRUE(result >= 0 && result < b.next) << def->op_type << "'s expression returned a value it did not build";
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// What one OpDef says about its op holds together: a kernel expression comes
// with the Pointwise role, training through a decomposition needs one, an
// autocast class is given to float ops, and a commutative op is a pointwise
// binary op with an expression.
TEST(OpRegistry, DefinitionsAgree) {
  int autocast = 0, commutative = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (def->pointwise) {
      EXPECT_EQ(def->declared_role, KernelRole::Pointwise) << op;
    }
    if (def->grad_by_decomposition) {
      EXPECT_TRUE(def->decompose) << op << " trains through a decomposition it lacks";
    }
    if (def->autocast != AutocastClass::Follow) {
      ++autocast;
      const bool takes_f32 = def->dtypes.empty() || std::find(def->dtypes.begin(), def->dtypes.end(), DType::F32) !=
                                                       def->dtypes.end();
      EXPECT_TRUE(takes_f32) << op << " has an autocast class but computes no f32";
    }
    if (def->commutative) {
      ++commutative;
      EXPECT_TRUE(def->has(kPointwise) && def->pointwise) << op << " commutes but is not a pointwise op with an expression";
    }
  }
  EXPECT_GE(autocast, 30);
  EXPECT_GE(commutative, 9);
}

// The kernel facts of an OpDef agree: a refusal belongs to an op with a kernel
// role; an op a library epilogue applies is a pointwise op with an
// expression (the fuse pass grows a GEMM or convolution only by pointwise
// nodes); an op on sequences or optionals takes no kernel at all.
TEST(OpRegistry, KernelFactsAgree) {
  std::vector<std::string> refusing, epilogues;
  int non_tensor = 0;
  for (const OpDef* def : OpRegistry::get().all()) {
    const std::string op = def->domain + "::" + def->op_type;
    if (def->refusal) {
      refusing.push_back(def->op_type);
      EXPECT_TRUE(def->kernel && def->declared_role != KernelRole::None) << op << " refuses a kernel role it lacks";
    }
    if (def->epilogues != 0) {
      epilogues.push_back(def->op_type);
      EXPECT_EQ(def->declared_role, KernelRole::Pointwise) << op;
      EXPECT_TRUE(def->pointwise) << op << " is a library epilogue without a kernel expression";
      EXPECT_EQ(def->epilogues & ~uint32_t{kGemmEpilogue | kConvEpilogue}, 0u) << op;
    }
    if (def->has(kNonTensor)) {
      ++non_tensor;
      EXPECT_FALSE(def->kernel || def->pointwise || def->refusal || def->epilogues) << op << " works on non-tensors";
    }
  }
  std::sort(refusing.begin(), refusing.end());
  EXPECT_EQ(refusing, (std::vector<std::string>{"AveragePool", "Conv", "Expand", "Gemm", "MatMul", "MaxPool",
                                                "Reshape", "Slice", "TopK"}));
  EXPECT_EQ(epilogues, (std::vector<std::string>{"Gelu", "Relu"}));
  EXPECT_EQ(non_tensor, 12);
}

// On nodes: a node the refusal refuses takes no role, and kernel_refusal
// says why; one it accepts takes the declared role. The epilogues apply
// where the op says: Relu after both libraries, Gelu's tanh form after
// cuBLASLt only.
TEST(OpRegistry, RefusalsAndEpiloguesOnNodes) {
  Graph g;
  g.set_opset("", 20);
  auto input = [&](const std::string& name, DType t, std::vector<Dim> dims) {
    return g.add_input(name, Type::tensor(t, std::move(dims)));
  };
  auto node = [&](const std::string& op, std::vector<Value*> in, DType t, std::vector<Dim> dims) {
    std::string name = op + std::to_string(g.nodes().size());
    Node* n = g.add_node(op, std::move(in), {name}, "", name);
    n->output(0)->set_type(Type::tensor(t, std::move(dims)));
    return n;
  };
  for (DType t : {DType::F32, DType::I64}) {
    std::string s(dtype_name(t));
    Node* mm = node("MatMul", {input("a" + s, t, {Dim(2), Dim(3)}), input("b" + s, t, {Dim(3), Dim(4)})}, t,
                    {Dim(2), Dim(4)});
    EXPECT_EQ(kernel_refusal(*mm).empty(), t == DType::F32) << s << ": " << kernel_refusal(*mm);
    EXPECT_EQ(kernel_role(*mm), t == DType::F32 ? KernelRole::Contraction : KernelRole::None) << s;
  }
  Node* reshape = node("Reshape", {input("x", DType::F32, {Dim(6)}), input("shape", DType::I64, {Dim(2)})}, DType::F32,
                       {Dim(2), Dim(3)});
  EXPECT_EQ(kernel_refusal(*reshape),
            "its target shape is computed at run time from values shape inference cannot follow");
  EXPECT_EQ(kernel_role(*reshape), KernelRole::None);

  Value* x = input("y", DType::F32, {Dim(4)});
  Node* relu = node("Relu", {x}, DType::F32, {Dim(4)});
  Node* tanh_gelu = node("Gelu", {x}, DType::F32, {Dim(4)});
  tanh_gelu->set_attr("approximate", Attribute::of_string("tanh"));
  Node* erf_gelu = node("Gelu", {x}, DType::F32, {Dim(4)});
  Node* exp = node("Exp", {x}, DType::F32, {Dim(4)});
  EXPECT_TRUE(library_epilogue(*relu, kGemmEpilogue) && library_epilogue(*relu, kConvEpilogue));
  EXPECT_TRUE(library_epilogue(*tanh_gelu, kGemmEpilogue));
  EXPECT_FALSE(library_epilogue(*tanh_gelu, kConvEpilogue));
  EXPECT_FALSE(library_epilogue(*erf_gelu, kGemmEpilogue));
  EXPECT_FALSE(library_epilogue(*exp, kGemmEpilogue) || library_epilogue(*exp, kConvEpilogue));
}

}  // namespace
}  // namespace tcc
