// tcc explain: graph-break reasons, partition, guard sets, recompile rules 1-6
// and computed advice, on graphs built with the Graph API and a registry that
// knows only the ops each test names.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "src/analysis/advice.h"
#include "src/analysis/explain_report.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

// The registry's definitions of `ops` (at opset 17), Relu's limited to f32 and f16.
OpRegistry registry_of(std::initializer_list<const char*> ops) {
  OpRegistry r;
  for (const char* op : ops) {
    const OpDef* def = OpRegistry::get().lookup("", op, 17);
    EXPECT_NE(def, nullptr) << op;
    if (!def) continue;
    OpDef d = *def;
    if (std::string(op) == "Relu") d.dtypes = {DType::F32, DType::F16};
    r.add(std::move(d));
  }
  return r;
}

Type f32(Dims d) { return Type::tensor(DType::F32, std::move(d)); }

struct Fixture {
  std::unique_ptr<Model> m = std::make_unique<Model>();
  Graph& g = *m->graph;
  Fixture() { g.set_opset("", 17); }
};

TEST(ExplainPartition, BoolMaskSelectionBreaksOnce) {
  Fixture f;
  Value* x = f.g.add_input("x", f32({Dim::symbol("batch"), 16}));
  Node* relu = f.g.add_node("Relu", {x}, {"r"}, "", "relu0");
  Node* mask = f.g.add_node("Greater", {relu->output(0), x}, {"m"}, "", "gt");
  Node* nz = f.g.add_node("NonZero", {mask->output(0)}, {"idx"}, "", "nonzero0");
  nz->set_source("model.py:12");
  Node* gather = f.g.add_node("GatherND", {x, nz->output(0)}, {"sel"}, "", "gather");
  f.g.add_output(gather->output(0));
  ShapeInfo info;
  Partition p = partition_graph(f.g, info, registry_of({"Relu", "Greater", "NonZero", "GatherND"}));
  ASSERT_EQ(p.breaks.size(), 1u);
  EXPECT_EQ(p.breaks[0].node->name(), "nonzero0");
  EXPECT_EQ(p.breaks[0].reason, "data_dependent_shape");
  ASSERT_EQ(p.regions.size(), 2u);
  EXPECT_EQ(p.regions[0].nodes.size(), 2u);
  EXPECT_EQ(p.regions[1].nodes.size(), 1u);
  EXPECT_EQ(p.regions[1].nodes[0]->name(), "gather");
}

TEST(ExplainPartition, ShapeChainDoesNotBreakButDataShapeDoes) {
  Fixture f;
  Value* x = f.g.add_input("x", f32({Dim::symbol("b"), Dim::symbol("s"), 64}));
  Value* idx = f.g.add_initializer("i0", Tensor::from_i64({0}, {1}));
  Value* tail = f.g.add_initializer("tail", Tensor::from_i64({-1, 8}, {2}));
  Node* shape = f.g.add_node("Shape", {x}, {"sh"});
  Node* gather = f.g.add_node("Gather", {shape->output(0), idx}, {"b0"});
  Node* concat = f.g.add_node("Concat", {gather->output(0), tail}, {"target"});
  Node* reshape = f.g.add_node("Reshape", {x, concat->output(0)}, {"y"}, "", "exporter_reshape");
  // A reshape whose target is read from tensor data.
  Node* cast = f.g.add_node("Cast", {reshape->output(0)}, {"yi"});
  Node* bad = f.g.add_node("Reshape", {x, cast->output(0)}, {"z"}, "", "data_reshape");
  f.g.add_output(bad->output(0));
  ShapeInfo info;
  Partition p = partition_graph(f.g, info, registry_of({"Shape", "Gather", "Concat", "Reshape", "Cast"}));
  ASSERT_EQ(p.breaks.size(), 1u);
  EXPECT_EQ(p.breaks[0].node->name(), "data_reshape");
  EXPECT_EQ(p.breaks[0].reason, "data_dependent_shape");
  EXPECT_NE(p.breaks[0].message.find("'%yi'"), std::string::npos);
}

// A Reduce's axes fed as a graph input: the break suggests compiling for its values.
TEST(ExplainPartition, ShapeInputFedByTheCallerSuggestsSpecializing) {
  Fixture f;
  f.g.set_opset("", 18);
  Value* x = f.g.add_input("x", f32({2, 3}));
  Value* axes = f.g.add_input("axes", Type::tensor(DType::I64, {1}));
  Node* sum = f.g.add_node("ReduceSum", {x, axes}, {"s"}, "", "sum");
  f.g.add_output(sum->output(0));
  ShapeInfo info;
  Partition p = partition_graph(f.g, info, registry_of({"ReduceSum"}));
  ASSERT_EQ(p.breaks.size(), 1u);
  EXPECT_EQ(p.breaks[0].reason, "data_dependent_shape");
  EXPECT_EQ(p.breaks[0].hint,
            "compile for its values with `tcc compile --specialize axes=...` (the module guards them), or compute it "
            "from Shape ops or constants");
}

TEST(ExplainPartition, EachReasonCode) {
  Fixture f;
  Value* x = f.g.add_input("x", f32({4}));
  Value* c = f.g.add_input("c", Type::tensor(DType::Bool, {}));
  Value* d = f.g.add_input("d", Type::tensor(DType::F64, {4}));
  Node* unk = f.g.add_node("FancyOp", {x}, {"u"}, "com.vendor", "fancy");
  Node* relu64 = f.g.add_node("Relu", {d}, {"r64"}, "", "relu64");
  auto then_g = std::make_shared<Graph>();
  Node* iff = f.g.add_node("If", {c}, {"o"}, "", "branch");
  then_g->set_parent(&f.g, iff);
  iff->set_attr("then_branch", Attribute::of_graph(then_g));
  Node* seq = f.g.add_node("SequenceConstruct", {x}, {"sq"}, "", "seq");
  f.g.set_outputs({unk->output(0), relu64->output(0), iff->output(0), seq->output(0)});
  ShapeInfo info;
  Partition p = partition_graph(f.g, info, registry_of({"Relu", "If", "SequenceConstruct"}));
  ASSERT_EQ(p.breaks.size(), 4u);
  EXPECT_EQ(p.breaks[0].reason, "unsupported_op");
  EXPECT_NE(p.breaks[0].message.find("com.vendor"), std::string::npos);
  EXPECT_EQ(p.breaks[1].reason, "unsupported_op");
  EXPECT_NE(p.breaks[1].message.find("dtype f64"), std::string::npos);
  EXPECT_EQ(p.breaks[2].reason, "data_dependent_control_flow");
  EXPECT_NE(p.breaks[2].message.find("does not compile device-side control flow"), std::string::npos);
  EXPECT_EQ(p.breaks[3].reason, "non_tensor_value");
  EXPECT_TRUE(p.regions.empty());
}

// A one-node model over x[batch, seq] and optionally a float scalar lr.
struct SimCase {
  Fixture f;
  ShapeInfo info;
  Partition p;
  ModelSignature sig;
  explicit SimCase(bool with_lr) {
    Value* x = f.g.add_input("x", f32({Dim::symbol("batch"), Dim::symbol("seq")}));
    std::vector<Value*> ins = {x};
    if (with_lr) ins.push_back(f.g.add_input("lr", f32({})));
    Node* n = f.g.add_node("Mul", ins.size() == 2 ? ins : std::vector<Value*>{x, x}, {"y"}, "", "mul");
    f.g.add_output(n->output(0));
    p = partition_graph(f.g, info, registry_of({"Mul"}));
    sig = build_signature(f.g, info, kTorchLeastSymbolicSize);
  }
  SimResult run(const std::string& jsonl, SimOptions o = {}) {
    Trace t = parse_trace(jsonl, "t.jsonl", sig);
    return simulate(sig, p.regions, t, o);
  }
};

std::string call(int b, int s) {
  return "{\"x\": {\"shape\": [" + std::to_string(b) + ", " + std::to_string(s) + "], \"dtype\": \"float32\"}}\n";
}

TEST(ExplainSimulate, AutomaticDynamicAfterFirstSizeChange) {
  SimCase sc(false);
  SimResult r = sc.run(call(8, 16) + call(8, 24) + call(8, 32) + call(8, 16));
  EXPECT_EQ(r.compiles, 2u);
  ASSERT_EQ(r.recompiles.size(), 1u);
  EXPECT_EQ(r.recompiles[0].call, 1u);
  EXPECT_EQ(r.recompiles[0].compile_id, "0/1");
  ASSERT_EQ(r.recompiles[0].reasons.size(), 1u);
  EXPECT_EQ(r.recompiles[0].reasons[0], "0/0: tensor 'x' size mismatch at index 1. expected 16, actual 24");
  std::vector<std::string> tree = r.graphs[0].variants[1].tree_lines();
  ASSERT_EQ(tree.size(), 2u);
  EXPECT_EQ(tree[0], "TENSOR_MATCH: check_tensor(x, float32, size=[8, None], stride=[None, 1], contiguous)");
  EXPECT_EQ(tree[1], "SHAPE_ENV: 2 <= s0  # x.size()[1]");
}

TEST(ExplainSimulate, SizeOneIsSpecialized) {
  SimCase sc(false);
  SimResult r = sc.run(call(8, 16) + call(8, 24) + call(8, 1) + call(8, 5));
  EXPECT_EQ(r.compiles, 3u);
  ASSERT_EQ(r.recompiles.size(), 2u);
  EXPECT_EQ(r.recompiles[1].reasons[0], "0/1: 2 <= x.size()[1] (actual 1)");
}

TEST(ExplainSimulate, StaticModeAndLimitFallBackToEager) {
  SimCase sc(false);
  std::string t;
  for (int i = 0; i < 12; ++i) t += call(8, 10 + i);
  t += call(8, 10);
  SimOptions o;
  o.dynamic = DynamicMode::False;
  o.recompile_limit = 8;
  SimResult r = sc.run(t, o);
  EXPECT_EQ(r.compiles, 8u);
  EXPECT_EQ(r.recompile_count, 7u);
  EXPECT_EQ(r.eager_fallback_calls, 4u);
  std::vector<Advice> a = compute_advice(sc.sig, sc.p.regions, parse_trace(t, "t", sc.sig), o, r);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].text, "mark x:1 dynamic: 1 compile, no eager calls instead of 8 compiles and 4 eager calls");
  EXPECT_EQ(a[1].text, "pad x:1 to a multiple of 32: 1 compile, no eager calls instead of 8 compiles and 4 eager calls");
}

// Past the limit torch would have stopped at, a recompile words the newest
// eight variants' failures and counts the rest, so a long static trace costs
// linear output, not quadratic.
TEST(ExplainSimulate, ARecompileWordsTheEightNewestVariants) {
  SimCase sc(false);
  std::string t;
  for (int i = 0; i < 12; ++i) t += call(8, 10 + i);
  SimOptions o;
  o.dynamic = DynamicMode::False;
  o.recompile_limit = 100;
  SimResult r = sc.run(t, o);
  ASSERT_EQ(r.recompiles.size(), 11u);
  EXPECT_EQ(r.recompiles[7].reasons.size(), 8u);
  EXPECT_EQ(r.recompiles[7].unlisted_variants, 0u);
  const RecompileEvent& last = r.recompiles.back();
  ASSERT_EQ(last.reasons.size(), 8u);
  EXPECT_EQ(last.reasons.front(), "0/10: tensor 'x' size mismatch at index 1. expected 20, actual 21");
  EXPECT_EQ(last.reasons.back(), "0/3: tensor 'x' size mismatch at index 1. expected 13, actual 21");
  EXPECT_EQ(last.unlisted_variants, 3u);
}

// Float scalars under each release's rules: guarded by value on every call
// before 2.6 (specialize_float=True); since then a changed value makes the
// float a graph input (automatic dynamic); from 2.8 dynamic=True does so at
// the first compile, and dynamic=False keeps the value guards.
TEST(ExplainSimulate, FloatScalarFollowsTheReleaseRules) {
  SimCase sc(true);
  std::string t;
  const char* lrs[] = {"0.01", "0.008", "0.006", "0.004", "0.002", "0.002"};
  for (const char* lr : lrs)
    t += std::string("{\"x\": {\"shape\": [4, 4], \"dtype\": \"float32\"}, \"lr\": {\"scalar\": ") + lr + "}}\n";
  SimOptions legacy;
  legacy.rules = torch_rules("2.3");
  SimResult old = sc.run(t, legacy);
  EXPECT_EQ(old.compiles, 5u);
  EXPECT_EQ(old.recompiles[0].reasons[0], "0/0: L['lr'] == 0.01 (now 0.008)");  // 2.3 spells the frame's locals
  std::vector<Advice> a = compute_advice(sc.sig, sc.p.regions, parse_trace(t, "t", sc.sig), legacy, old);
  ASSERT_GE(a.size(), 1u);
  EXPECT_EQ(a[0].text, "hold 'lr' in a tensor input: 1 compile instead of 5 compiles");

  SimResult now = sc.run(t);
  EXPECT_EQ(now.compiles, 2u);
  EXPECT_EQ(now.recompiles[0].reasons[0], "0/0: lr == 0.01 (now 0.008)");
  EXPECT_EQ(now.graphs[0].variants[1].to_json().size(), 1u);  // x's TENSOR_MATCH only: lr is an input
  SimOptions dyn;
  dyn.dynamic = DynamicMode::True;
  EXPECT_EQ(sc.run(t, dyn).compiles, 1u);
  dyn.rules = torch_rules("2.7");
  EXPECT_EQ(sc.run(t, dyn).compiles, 2u);
  SimOptions fixed;
  fixed.dynamic = DynamicMode::False;
  EXPECT_EQ(sc.run(t, fixed).compiles, 5u);
  fixed.rules = torch_rules("2.6");  // before 2.8, dynamic=False let a changed float become an input too
  EXPECT_EQ(sc.run(t, fixed).compiles, 2u);
}

TEST(ExplainSimulate, TorchVersionsAndTheirLimits) {
  EXPECT_EQ(torch_rules("2.0").recompile_limit, 64);
  EXPECT_EQ(torch_rules("2.3").recompile_limit_name, "cache_size_limit");
  EXPECT_EQ(torch_rules("2.15.1").recompile_limit_name, "recompile_limit");
  EXPECT_FALSE(torch_rules("2.0").automatic_dynamic);
  EXPECT_FALSE(torch_rules("2.0").has_mark_static);
  EXPECT_TRUE(torch_rules("2.1").has_mark_static);
  EXPECT_THROW(torch_rules("1.13"), InputError);
  EXPECT_THROW(torch_rules("2.99"), InputError);
  EXPECT_THROW(torch_rules("two"), InputError);
}

// mark_unbacked: symbolic with 1 (no 0/1 specialization), but a 0 in an
// innermost dim fails the outer stride's guard, as in torch 2.15 (2.7 breaks
// the graph at the recompile and runs such calls eagerly); mark_static
// keeps a dim static under automatic dynamic.
TEST(ExplainSimulate, MarkUnbackedAndMarkStatic) {
  SimCase sc(false);
  SimOptions o;
  o.mark_unbacked.insert(sc.sig.inputs[0].dim_class[1]);
  SimResult r = sc.run(call(8, 8) + call(8, 9) + call(8, 1) + call(8, 0) + call(8, 10), o);
  EXPECT_EQ(r.compiles, 2u);
  ASSERT_EQ(r.recompiles.size(), 1u);
  EXPECT_EQ(r.recompiles[0].call, 3u);
  EXPECT_EQ(r.recompiles[0].reasons[0], "0/0: x.stride()[0] == x.size()[1] (actual 0)");
  o.rules = torch_rules("2.7");  // 2.5 to 2.8: the recompile for the 0 breaks the graph instead
  SimResult old = sc.run(call(8, 8) + call(8, 9) + call(8, 1) + call(8, 0) + call(8, 10) + call(8, 0), o);
  EXPECT_EQ(old.compiles, 1u);
  EXPECT_TRUE(old.recompiles.empty());
  EXPECT_EQ(old.eager_fallback_calls, 2u);
  ASSERT_EQ(old.breaks.size(), 1u);
  EXPECT_EQ(old.breaks[0].call, 3u);
  EXPECT_EQ(old.breaks[0].torch_reason,
            "Could not guard on data-dependent expression u0 > 8 (unhinted: u0 > 8).  (Size-like symbols: u0)");
  SimOptions st;
  st.mark_static.insert(sc.sig.inputs[0].dim_class[1]);
  EXPECT_EQ(sc.run(call(8, 8) + call(8, 9) + call(8, 10), st).compiles, 3u);
  SimOptions eager;
  eager.stance = Stance::EagerOnRecompile;
  SimResult e = sc.run(call(8, 8) + call(8, 9) + call(8, 8) + call(8, 10), eager);
  EXPECT_EQ(e.compiles, 1u);
  EXPECT_EQ(e.eager_fallback_calls, 2u);
}

TEST(ExplainSimulate, MarkDynamicAndDynamicTrueStartSymbolic) {
  SimCase sc(false);
  SimOptions o;
  o.mark_dynamic.insert(sc.sig.inputs[0].dim_class[1]);
  EXPECT_EQ(sc.run(call(8, 16) + call(8, 24), o).compiles, 1u);
  SimOptions all;
  all.dynamic = DynamicMode::True;
  SimResult r = sc.run(call(8, 16) + call(4, 24), all);
  EXPECT_EQ(r.compiles, 1u);
  // Duck sizing: equal symbolic sizes share a relation guard.
  SimResult duck = sc.run(call(8, 8) + call(8, 9), all);
  EXPECT_EQ(duck.compiles, 2u);
  EXPECT_EQ(duck.recompiles[0].reasons[0], "0/0: x.size()[1] == x.size()[0] (9 vs 8)");
}

TEST(ExplainTrace, ContradictionsAreInputErrors) {
  SimCase sc(false);
  auto err = [&](const std::string& line) { return input_error([&] { sc.run(call(2, 2) + line); }); };
  // A float input may change float dtype (a recompile); not to an integer one.
  EXPECT_EQ(err("{\"x\": {\"shape\": [2, 2], \"dtype\": \"float16\"}}"), "(no error)");
  EXPECT_EQ(err("{\"x\": {\"shape\": [2, 2], \"dtype\": \"int64\"}}"),
            "t.jsonl:2: input 'x': expected dtype float32 (or another float dtype), actual int64");
  EXPECT_EQ(err("{\"x\": {\"shape\": [2], \"dtype\": \"float32\"}}"),
            "t.jsonl:2: input 'x': expected rank 2, actual rank 1 [2]");
  EXPECT_EQ(err("{\"y\": {\"shape\": [2, 2], \"dtype\": \"float32\"}}"),
            "t.jsonl:2: unknown input 'y' (the model's inputs: x)");
  EXPECT_EQ(err("{}"), "t.jsonl:2: input 'x' is missing");
  EXPECT_EQ(err("{\"x\": {\"scalar\": 1.0}}"), "t.jsonl:2: input 'x': expected a tensor of rank 2, actual a scalar");
}

TEST(ExplainTrace, EqualCallsShareOneRowHoweverWritten) {
  SimCase sc(true);
  std::string t = "{\"x\": {\"shape\": [4, 4], \"dtype\": \"float32\"}, \"lr\": {\"scalar\": 0.01}}\n"
                  "{\"lr\":{\"scalar\":0.010},\"x\":{\"dtype\":\"float32\",\"shape\":[4,4]}}\n"
                  "\n"
                  "{\"x\": {\"shape\": [4, 4], \"dtype\": \"float32\"}, \"lr\": {\"scalar\": 0.02}}\n"
                  "{\"x\": {\"shape\": [4, 8], \"dtype\": \"float32\"}, \"lr\": {\"scalar\": 0.01}}";
  Trace trace = parse_trace(t, "t.jsonl", sc.sig);
  EXPECT_EQ(trace.calls, (std::vector<uint32_t>{0, 0, 1, 2}));
  ASSERT_EQ(trace.distinct_count, 3u);
  CallRecord third = trace.distinct(2);
  EXPECT_EQ(third.kinds[0], EntryKind::Tensor);
  EXPECT_EQ(third.kinds[1], EntryKind::FloatScalar);
  EXPECT_EQ(third.floats[1], 0.01);
  EXPECT_EQ(third.class_values[sc.sig.inputs[0].dim_class[1]], 8);
}

// A trace file is read in 1 MiB blocks: lines that cross a block boundary, a
// blank line and a last line without a newline read as parse_trace reads the text.
TEST(ExplainTrace, FileReadInBlocksMatchesText) {
  SimCase sc(false);
  std::string t;
  for (int i = 0; t.size() < 3u << 20; ++i) t += i == 5000 ? "\n" : call(8, 2 + i % 700);
  std::string bad = "{\"x\": {\"shape\": [8], \"dtype\": \"float32\"}}";
  size_t lines = static_cast<size_t>(std::count(t.begin(), t.end(), '\n'));
  const std::filesystem::path dir = make_temp_dir("tcc_explain_blocks");
  const std::string path = (dir / "trace.jsonl").string();
  std::ofstream(path, std::ios::binary) << t << call(8, 3).substr(0, call(8, 3).size() - 1);
  Trace file = read_trace(path, sc.sig);
  Trace text = parse_trace(t + call(8, 3), path, sc.sig);
  EXPECT_EQ(file.calls.size(), lines);
  EXPECT_EQ(file.calls, text.calls);
  EXPECT_EQ(file.class_values, text.class_values);
  EXPECT_EQ(file.distinct_count, 700u);
  std::ofstream(path, std::ios::binary) << t << bad;
  const std::string what = input_error([&] { read_trace(path, sc.sig); });
  EXPECT_EQ(what,
            path + ":" + std::to_string(lines + 1) + ": input 'x': expected rank 2, actual rank 1 [8]");
  std::filesystem::remove_all(dir);
}

std::string with_layout(int b, int s, const std::string& layout) {
  return "{\"x\": {\"shape\": [" + std::to_string(b) + ", " + std::to_string(s) + "], \"dtype\": \"float32\", " +
         layout + "}}\n";
}

// TENSOR_MATCH guards a tensor's device, requires_grad and strides as well as
// its sizes, in the order torch checks them, and words each as torch does
// (tests/fidelity/2.15/requires_grad_change, stride_change, device_change).
TEST(ExplainSimulate, DeviceRequiresGradAndStridesAreGuarded) {
  SimCase sc(false);
  SimResult grad = sc.run(call(4, 8) + with_layout(4, 8, "\"requires_grad\": true") + call(4, 8));
  EXPECT_EQ(grad.compiles, 2u);
  ASSERT_EQ(grad.recompiles.size(), 1u);
  EXPECT_EQ(grad.recompiles[0].reasons[0], "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0");

  SimResult stride = sc.run(with_layout(4, 8, "\"stride\": [8, 1]") + with_layout(4, 8, "\"stride\": [1, 4]"));
  ASSERT_EQ(stride.recompiles.size(), 1u);
  EXPECT_EQ(stride.recompiles[0].reasons[0], "0/0: tensor 'x' stride mismatch at index 0. expected 8, actual 1");
  // Explicit row-major strides are the same call as none given.
  EXPECT_EQ(sc.run(call(4, 8) + with_layout(4, 8, "\"stride\": [8, 1]")).compiles, 1u);

  SimResult device = sc.run(with_layout(4, 8, "\"device\": \"cuda:0\"") + with_layout(4, 8, "\"device\": \"cuda:1\""));
  ASSERT_EQ(device.recompiles.size(), 1u);
  EXPECT_EQ(device.recompiles[0].reasons[0], "0/0: tensor 'x' device mismatch. expected cuda:0, actual cuda:1");
  // Another device type is another backend: torch's first check, the dispatch key set, fails
  // (tests/fidelity/2.15/device_change), and the device's own check is not worded as well.
  SimResult backend = sc.run(call(4, 8) + with_layout(4, 8, "\"device\": \"meta\""));
  ASSERT_EQ(backend.recompiles.size(), 1u);
  EXPECT_EQ(backend.recompiles[0].reasons,
            std::vector<std::string>{"0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, "
                                     "BackendSelect, ADInplaceOrView, AutogradCPU), actual DispatchKeySet(Meta, "
                                     "BackendSelect, ADInplaceOrView, AutogradMeta)"});

  // A size change is worded as the size mismatch alone, though the strides differ too.
  SimResult size = sc.run(with_layout(4, 8, "\"stride\": [8, 1]") + with_layout(4, 9, "\"stride\": [9, 1]"));
  ASSERT_EQ(size.recompiles.size(), 1u);
  EXPECT_EQ(size.recompiles[0].reasons,
            std::vector<std::string>{"0/0: tensor 'x' size mismatch at index 1. expected 8, actual 9"});
}

// A graph reading a break result whose size the data sets (nonzero's) sees it
// change at the next call, though the trace's calls are all alike: one
// recompile under automatic dynamic, every call up to the limit under
// dynamic=False (tests/fidelity/2.15/example_train_graph_break).
TEST(ExplainSimulate, DataDependentBreakResultRecompiles) {
  SimCase sc(false);
  sc.p.regions[0].data_dependent_inputs = {sc.f.g.inputs()[0]};
  const std::string calls = call(4, 8) + call(4, 8) + call(4, 8) + call(4, 8) + call(4, 8);
  SimResult automatic = sc.run(calls);
  EXPECT_EQ(automatic.compiles, 2u);
  ASSERT_EQ(automatic.recompiles.size(), 1u);
  EXPECT_EQ(automatic.recompiles[0].call, 1u);
  EXPECT_EQ(automatic.recompiles[0].reasons,
            std::vector<std::string>{"0/0: tensor '___stack0' size mismatch at index 0 (data-dependent)"});
  SimOptions fixed;
  fixed.dynamic = DynamicMode::False;
  fixed.recompile_limit = 3;
  SimResult limited = sc.run(calls, fixed);
  EXPECT_EQ(limited.compiles, 3u);
  EXPECT_EQ(limited.eager_fallback_calls, 2u);
  fixed.dynamic = DynamicMode::True;
  EXPECT_EQ(sc.run(calls, fixed).compiles, 1u);
}

TEST(ExplainTrace, LayoutKeysAreChecked) {
  SimCase sc(false);
  auto err = [&](const std::string& layout) { return input_error([&] { sc.run(with_layout(2, 2, layout)); }); };
  EXPECT_EQ(err("\"stride\": [1]"), "t.jsonl:1: input 'x': expected one stride per dim (2), actual 1 strides");
  EXPECT_NE(err("\"requires_grad\": 1").find("\"requires_grad\" must be true or false"), std::string::npos);
  EXPECT_NE(err("\"strides\": [2, 1]").find("unknown key \"strides\""), std::string::npos);
}

}  // namespace
}  // namespace tcc
