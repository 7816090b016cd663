#include "codegen/memory_plan.h"

#include <gtest/gtest.h>

namespace tcc {
namespace {

// A chain of Relu nodes over the given types, each its own schedule step:
// step i reads value i and writes value i + 1. Value 0 is the graph input and
// the last value the graph output; the ones between are the intermediates.
struct Chain {
  Graph g;
  Schedule s;

  explicit Chain(const std::vector<Type>& types) {
    Value* v = g.add_input("v0", types[0]);
    for (size_t i = 1; i < types.size(); ++i) {
      Node* n = g.add_node("Relu", {v}, {"v" + std::to_string(i)}, "", "relu" + std::to_string(i));
      n->output(0)->set_type(types[i]);
      s.steps.push_back({Step::Kind::Kernel, 0, n->name(), {v->name()}, {n->output(0)->name()}});
      v = n->output(0);
    }
    g.add_output(v);
  }
};

Type f32(Dims shape) { return Type::tensor(DType::F32, std::move(shape)); }
SymExpr sym(const std::string& text) { return *SymExpr::parse(text); }

TEST(MemoryPlanTest, ChainAlternatesTwoSlots) {
  Type t = f32({Dim::symbol("batch"), 768});
  Chain c({t, t, t, t, t, t});
  MemoryPlan p = plan_memory(c.g, c.s);
  ASSERT_EQ(p.buffers.size(), 4u);  // v1..v4: not the input v0 nor the output v5
  std::vector<std::string> offsets;
  for (const PlannedBuffer& b : p.buffers) {
    EXPECT_EQ(b.nbytes, sym("batch*3072"));
    EXPECT_EQ(b.last_step, b.first_step + 1);
    offsets.push_back(b.offset.str());
  }
  // v3 takes v1's slot once step 2 (the last to read v1) is over.
  EXPECT_EQ(offsets, (std::vector<std::string>{"0", "batch*3072", "0", "batch*3072"}));
  EXPECT_EQ(p.buffers[0].value, "v1");
  EXPECT_EQ(p.arena_bytes, sym("batch*6144"));
  EXPECT_EQ(p.unplanned_bytes, sym("batch*12288"));
  EXPECT_EQ(evaluate_bytes(p.arena_bytes, {{"batch", 8}}), 8 * 6144);
}

TEST(MemoryPlanTest, StaticSlotsHoldSmallerBuffersButNotLarger) {
  Chain c({f32({1024}), f32({1024}), f32({512}), f32({256}), f32({2048}), f32({8})});
  MemoryPlan p = plan_memory(c.g, c.s);
  ASSERT_EQ(p.buffers.size(), 4u);
  EXPECT_EQ(p.buffers[0].offset, SymExpr::constant(0));     // v1: 4096 bytes
  EXPECT_EQ(p.buffers[1].offset, SymExpr::constant(4096));  // v2: 2048, v1 still read by step 1
  EXPECT_EQ(p.buffers[2].offset, SymExpr::constant(0));     // v3: 1024 fits v1's 4096
  EXPECT_EQ(p.buffers[3].offset, SymExpr::constant(6144));  // v4: 8192 fits no freed slot
  EXPECT_EQ(p.arena_bytes, SymExpr::constant(4096 + 2048 + 8192));
  EXPECT_EQ(p.unplanned_bytes, SymExpr::constant(4096 + 2048 + 1024 + 8192));
}

TEST(MemoryPlanTest, SmallestFittingStaticSlotIsTaken) {
  // v1 (4096 bytes) and v2 (2048) are both free when v4 (1024) is placed: it takes v2's slot.
  Graph g;
  Value* x = g.add_input("x", f32({16}));
  auto node = [&](const std::vector<Value*>& in, const std::string& out, int64_t n) {
    Node* r = g.add_node("Relu", in, {out}, "", out + "_node");
    r->output(0)->set_type(f32({n}));
    return r->output(0);
  };
  Value* v1 = node({x}, "v1", 1024);
  Value* v2 = node({x}, "v2", 512);
  Value* v3 = node({v1, v2}, "v3", 16);
  Value* v4 = node({v3}, "v4", 256);
  g.add_output(node({v4}, "y", 256));
  Schedule s;
  s.steps = {{Step::Kind::Kernel, 0, "a", {"x"}, {"v1"}},
             {Step::Kind::Kernel, 0, "b", {"x"}, {"v2"}},
             {Step::Kind::Kernel, 0, "c", {"v1", "v2"}, {"v3"}},
             {Step::Kind::Kernel, 0, "d", {"v3"}, {"v4"}},
             {Step::Kind::Kernel, 0, "e", {"v4"}, {"y"}}};
  MemoryPlan p = plan_memory(g, s);
  ASSERT_EQ(p.buffers.size(), 4u);
  EXPECT_EQ(p.buffers[2].value, "v3");
  EXPECT_EQ(p.buffers[2].offset, SymExpr::constant(6144));  // v1 and v2 are still read by its step
  EXPECT_EQ(p.buffers[3].value, "v4");
  EXPECT_EQ(p.buffers[3].offset, SymExpr::constant(4096));
  EXPECT_EQ(p.arena_bytes, SymExpr::constant(4096 + 2048 + 256));
}

TEST(MemoryPlanTest, DifferentSymbolicSizesDoNotShare) {
  // batch*3072 >= batch*1024 for every batch, but the planner proves only equality.
  Chain c({f32({Dim::symbol("batch"), 768}), f32({Dim::symbol("batch"), 768}),
           f32({Dim::symbol("batch"), 256}), f32({Dim::symbol("batch"), 256}),
           f32({Dim::symbol("batch"), 256})});
  MemoryPlan p = plan_memory(c.g, c.s);
  ASSERT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.buffers[1].offset, sym("batch*3072"));
  EXPECT_EQ(p.buffers[2].offset, sym("batch*3072+batch*1024"));  // not v1's freed slot
  EXPECT_EQ(p.arena_bytes, sym("batch*3072+batch*2048"));
}

TEST(MemoryPlanTest, SizesRoundUpTo256Bytes) {
  Type odd = Type::tensor(DType::F16, {Dim::symbol("n"), 3});
  Chain c({f32({3}), f32({3}), odd, f32({3})});
  MemoryPlan p = plan_memory(c.g, c.s);
  ASSERT_EQ(p.buffers.size(), 2u);
  EXPECT_EQ(p.buffers[0].nbytes, SymExpr::constant(256));
  EXPECT_EQ(p.buffers[1].nbytes, (sym("n*6") + SymExpr::constant(255)).floordiv(SymExpr::constant(256)) *
                                     SymExpr::constant(256));
  EXPECT_EQ(SymExpr::parse(p.buffers[1].nbytes.str()), p.buffers[1].nbytes);  // as the manifest spells it
  EXPECT_EQ(p.buffers[1].dtype, DType::F16);
  EXPECT_EQ(evaluate_bytes(p.buffers[1].nbytes, {{"n", 1}}), 256);
  EXPECT_EQ(evaluate_bytes(p.buffers[1].nbytes, {{"n", 43}}), 512);
  EXPECT_EQ(evaluate_bytes(p.arena_bytes, {{"n", 100}}), 256 + 768);
}

TEST(MemoryPlanTest, UnreadValueLivesForItsOwnStep) {
  Type t = f32({64});
  Chain c({t, t, t});
  Node* extra = c.g.add_node("Relu", {c.g.inputs()[0]}, {"unused"}, "", "extra");
  extra->output(0)->set_type(t);
  c.s.steps.insert(c.s.steps.begin(), {Step::Kind::Kernel, 0, "extra", {"v0"}, {"unused"}});
  MemoryPlan p = plan_memory(c.g, c.s);
  ASSERT_EQ(p.buffers.size(), 2u);
  EXPECT_EQ(p.buffers[0].value, "unused");
  EXPECT_EQ(p.buffers[0].first_step, 0);
  EXPECT_EQ(p.buffers[0].last_step, 0);
  EXPECT_EQ(p.buffers[1].offset, SymExpr::constant(0));  // v1 reuses it from step 1 on
  EXPECT_EQ(p.arena_bytes, SymExpr::constant(256));
}

// A symbol without a size (a data-dependent u0, no input's dim) counts as 1.
TEST(MemoryPlanTest, EvaluateCountsUnsizedSymbolsAsOne) {
  EXPECT_EQ(evaluate_bytes(sym("batch*seq*4"), {{"batch", 2}}), 8);
  EXPECT_EQ(evaluate_bytes(sym("batch*seq*4"), {{"batch", 2}, {"seq", 3}}), 24);
}

// v1's slot is not free while v2, a view of it, is still read: v3 (same size)
// takes a new slot, and the view names v1's offset.
TEST(MemoryPlanTest, AViewKeepsItsSourceLive) {
  Type t = f32({Dim::symbol("batch"), 768});
  Graph g;
  Value* x = g.add_input("x", t);
  auto node = [&](const std::string& op, const std::vector<Value*>& in, const std::string& out, const Type& type) {
    Node* n = g.add_node(op, in, {out}, "", out + "_node");
    n->output(0)->set_type(type);
    return n->output(0);
  };
  Value* v1 = node("Relu", {x}, "v1", t);
  Value* v2 = node("Identity", {v1}, "v2", f32({Dim::symbol("batch"), 2, 384}));
  Value* v3 = node("Relu", {x}, "v3", t);
  g.add_output(node("Add", {v2, v3}, "y", t));
  Schedule s;
  s.steps = {{Step::Kind::Kernel, 0, "a", {"x"}, {"v1"}},
             {Step::Kind::Kernel, 0, "b", {"x"}, {"v3"}},
             {Step::Kind::Kernel, 0, "c", {"v2", "v3"}, {"y"}}};
  s.views = {{"v2", "v1", "v2_node"}};
  MemoryPlan p = plan_memory(g, s);
  ASSERT_EQ(p.buffers.size(), 3u);
  EXPECT_EQ(p.buffers[0].value, "v1");
  EXPECT_EQ(p.buffers[0].last_step, 2);  // read through the view by step c
  EXPECT_EQ(p.buffers[1].value, "v3");
  EXPECT_EQ(p.buffers[1].offset, sym("batch*3072"));
  EXPECT_EQ(p.buffers[2].value, "v2");
  EXPECT_EQ(p.buffers[2].offset, SymExpr::constant(0));
  EXPECT_EQ(p.buffers[2].shape, (std::vector<SymExpr>{sym("batch"), SymExpr::constant(2), SymExpr::constant(384)}));
  EXPECT_EQ(p.arena_bytes, sym("batch*6144"));
  EXPECT_EQ(p.unplanned_bytes, sym("batch*6144"));  // the view adds no bytes
}

}  // namespace
}  // namespace tcc
