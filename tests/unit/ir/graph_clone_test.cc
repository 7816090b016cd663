// clone_model: a copy that prints as the original, links regions to its own
// values, shares tensor storage, and changes apart from the original.
#include <gtest/gtest.h>

#include "src/ir/graph.h"
#include "src/ir/text.h"
#include "src/ir/verifier.h"

namespace tcc {
namespace {

constexpr const char* kNested = R"(graph main opset(ai.onnx: 17) ir_version(8) producer("test") {
  input %c: bool[]
  input %y: f32[] = [2.0]
  const %n: i64[] = [4]
  %5: f32[] = If(%c) {else_branch = graph else_branch {
      %a: f32[] = Identity(%y) part("backward")
      output %a
    }, then_branch = graph then_branch {
      %l: f32[] = Loop(%n, none, %y) {body = graph body {
          input %i: i64[]
          input %cond: bool[]
          input %acc: f32[]
          const %one: f32[] = [1.0]
          %next: f32[] = Add(%acc, %one)
          output %cond
          output %next
        }}
      output %l
    }}
  output %5
}
)";

TEST(GraphClone, PrintsAsTheOriginalAndVerifies) {
  std::unique_ptr<Model> m = parse_model(kNested, "nested.tir");
  std::unique_ptr<Model> copy = clone_model(*m);
  EXPECT_EQ(print_model(*copy), print_model(*m));
  EXPECT_TRUE(verify(*copy->graph).empty());
  EXPECT_EQ(copy->producer, "test");
  EXPECT_EQ(copy->graph->file(), m->graph->file());
}

TEST(GraphClone, RegionsReadTheCopysValues) {
  std::unique_ptr<Model> m = parse_model(kNested, "nested.tir");
  std::unique_ptr<Model> copy = clone_model(*m);
  const Node& branch = *copy->graph->nodes().at(0);
  Graph* else_branch = branch.get_graph("else_branch");
  ASSERT_NE(else_branch, nullptr);
  EXPECT_EQ(else_branch->parent(), copy->graph.get());
  EXPECT_EQ(else_branch->parent_node(), &branch);
  EXPECT_EQ(else_branch->nodes().at(0)->input(0), copy->graph->inputs().at(1));
  const Node& loop = *branch.get_graph("then_branch")->nodes().at(0);
  EXPECT_EQ(loop.input(0), copy->graph->initializers().at(0));
  EXPECT_EQ(loop.get_graph("body")->parent_node(), &loop);
}

TEST(GraphClone, SharesTensorStorage) {
  std::unique_ptr<Model> m = parse_model(kNested, "nested.tir");
  std::unique_ptr<Model> copy = clone_model(*m);
  EXPECT_EQ(copy->graph->inputs().at(1)->initializer().raw(), m->graph->inputs().at(1)->initializer().raw());
  EXPECT_EQ(copy->graph->initializers().at(0)->initializer().raw(), m->graph->initializers().at(0)->initializer().raw());
}

// What the exporter said of an initializer (a parameter, a buffer) survives the copy.
TEST(GraphClone, KeepsInitializerRoles) {
  std::unique_ptr<Model> m = parse_model(kNested, "nested.tir");
  m->graph->initializers().at(0)->set_role(InitializerRole::Buffer);
  std::unique_ptr<Model> copy = clone_model(*m);
  EXPECT_EQ(copy->graph->initializers().at(0)->role(), InitializerRole::Buffer);
}

TEST(GraphClone, ChangesToTheCopyLeaveTheOriginal) {
  std::unique_ptr<Model> m = parse_model(kNested, "nested.tir");
  std::string before = print_model(*m);
  std::unique_ptr<Model> copy = clone_model(*m);
  Graph& g = *copy->graph;
  // The copy's fresh names continue the original's counter.
  EXPECT_EQ(g.fresh_name("x"), m->graph->fresh_name("x"));
  Node* neg = g.add_node("Neg", {g.outputs().at(0)}, {g.fresh_name("neg")});
  g.set_outputs({neg->output(0)});
  g.inputs().at(1)->set_initializer(Tensor::scalar_f32(5.0f));
  EXPECT_EQ(print_model(*m), before);
  EXPECT_NE(print_model(*copy), before);
}

}  // namespace
}  // namespace tcc
