// Every registry that says something about an op agrees with the op registry:
// the kernel expressions, kernel roles and gradient rules name registered ops,
// and each pointwise expression builds, for a node of its op, what the
// lowering can emit.
#include <gtest/gtest.h>

#include "src/autodiff/grad_rules.h"
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

TEST(OpRegistry, GradientRulesNameRegisteredOps) {
  for (const std::string& op : grad_rule_ops())
    EXPECT_NE(OpRegistry::get().lookup("", op, 23), nullptr) << "a gradient rule for '" << op << "', which tcc does not know";
}

}  // namespace
}  // namespace tcc
