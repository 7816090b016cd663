// What the op registry says of each op holds together: each pointwise
// expression builds, for a node of its op, what the lowering can emit, and the
// facts an OpDef gathers (role, expression, decomposition, autocast class,
// commutativity) agree with one another.
#include <gtest/gtest.h>

#include <algorithm>

#include "src/ir/graph.h"
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

}  // namespace
}  // namespace tcc
