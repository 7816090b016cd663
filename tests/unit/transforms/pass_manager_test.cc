#include "passes/pass_manager.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "src/ir/text.h"

namespace tcc {
namespace {

const char* kDeadNode = R"(graph main {
  input %x: f32[2]
  %dead: f32[2] = Neg(%x)
  %y: f32[2] = Relu(%x)
  output %y
}
)";

const char* kClean = R"(graph main {
  input %x: f32[2]
  %y: f32[2] = Relu(%x)
  output %y
}
)";

PassManagerOptions verifying() {
  PassManagerOptions o;
  o.verify = true;
  return o;
}

TEST(PassRegistry, NamesAreUniqueAndPhasesInOrder) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < all_passes().size(); ++i) {
    const PassInfo& p = all_passes()[i];
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_FALSE(p.summary.empty()) << p.name;
    EXPECT_NE(p.fn, nullptr) << p.name;
    if (i) {
      EXPECT_LE(all_passes()[i - 1].phase, p.phase) << p.name << " is listed out of phase order";
    }
  }
  ASSERT_NE(find_pass("dce"), nullptr);
  EXPECT_EQ(find_pass("dce")->fn, &dce);
  EXPECT_EQ(find_pass("dce")->phase, Phase::Optimize);
  EXPECT_EQ(find_pass("nope"), nullptr);
}

TEST(PassRegistry, PhasesParse) {
  for (Phase p : {Phase::Import, Phase::Optimize, Phase::Fuse, Phase::Codegen})
    EXPECT_EQ(parse_phase(phase_name(p)), p);
  EXPECT_EQ(parse_phase("optimise"), std::nullopt);
  EXPECT_EQ(parse_phase_or_throw("fuse"), Phase::Fuse);
  EXPECT_THROW(parse_phase_or_throw("later"), InputError);
}

TEST(BuildPipeline, ParsesPassListAndStopsAfterPhase) {
  auto p = build_pipeline("dce,dce");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0]->name, "dce");
  EXPECT_EQ(build_pipeline("").size(), all_passes().size());
  EXPECT_TRUE(build_pipeline("dce", Phase::Import).empty());
  EXPECT_EQ(build_pipeline("dce", Phase::Optimize).size(), 1u);
  for (const PassInfo* p : build_pipeline("", Phase::Optimize)) EXPECT_LE(p->phase, Phase::Optimize) << p->name;
}

TEST(BuildPipeline, UnknownPassListsKnownOnes) {
  try {
    build_pipeline("dce,fold_everything");
    FAIL() << "no error";
  } catch (const InputError& e) {
    std::string known;
    for (const PassInfo& p : all_passes()) known += (known.empty() ? "" : ", ") + std::string(p.name);
    EXPECT_EQ(std::string(e.what()), "unknown pass 'fold_everything'; known passes: " + known);
    EXPECT_NE(known.find("dce"), std::string::npos);
    EXPECT_EQ(e.code(), ExitCode::InputError);
  }
  EXPECT_THROW(build_pipeline("dce,"), InputError);
}

TEST(PassManager, RunsPassesAndRecordsWhatChanged) {
  auto m = parse_model(kDeadNode);
  std::ostringstream report;
  PassManager pm(build_pipeline("dce,dce"), verifying(), report);
  EXPECT_TRUE(pm.run(*m));
  EXPECT_EQ(print_model(*m), kClean);
  ASSERT_EQ(pm.records().size(), 2u);
  EXPECT_TRUE(pm.records()[0].changed);
  EXPECT_EQ(pm.records()[0].stats.counters.at("nodes_removed"), 1);
  EXPECT_FALSE(pm.records()[1].changed);
  EXPECT_TRUE(pm.records()[1].stats.counters.empty());
  EXPECT_EQ(report.str(), "");
}

TEST(PassManager, PrintsIrAfterChangeOnlyWhenChanged) {
  auto m = parse_model(kDeadNode);
  std::ostringstream report;
  PassManagerOptions o = verifying();
  o.print_ir_after_change = true;
  PassManager(build_pipeline("dce,dce"), o, report).run(*m);
  EXPECT_EQ(report.str(), std::string("// ----- IR after dce -----\n") + kClean);
}

TEST(PassManager, PrintsIrAfterAll) {
  auto m = parse_model(kClean);
  std::ostringstream report;
  PassManagerOptions o = verifying();
  o.print_ir_after_all = true;
  PassManager(build_pipeline("dce"), o, report).run(*m);
  EXPECT_EQ(report.str(), std::string("// ----- IR after dce (unchanged) -----\n") + kClean);
}

TEST(PassManager, TimePassesTable) {
  auto m = parse_model(kDeadNode);
  std::ostringstream report;
  PassManagerOptions o = verifying();
  o.time_passes = true;
  PassManager pm(build_pipeline("dce"), o, report);
  pm.run(*m);
  std::string t = report.str();
  EXPECT_EQ(t, pm.timing_table());
  EXPECT_EQ(t.substr(0, t.find('\n')), "pass     wall ms  changed  counters");
  std::string row = t.substr(t.find('\n') + 1);
  EXPECT_EQ(row.substr(0, 4), "dce ");
  EXPECT_NE(row.find("  yes      nodes_removed=1\n"), std::string::npos) << t;
  EXPECT_NE(t.find("total"), std::string::npos);
}

// A pass that breaks an invariant (here: a node reading a value before the
// node that computes it) must be reported as an internal error naming the pass.
bool break_the_graph(Graph& g, PassContext&) {
  Node* relu = g.nodes().at(0).get();
  g.insert_node(relu, "Neg", {relu->output(0)}, {"z"}, "", "early");
  return true;
}

TEST(PassManager, VerifierNamesTheBrokenPass) {
  static const PassInfo broken{"break_the_graph", "test pass", Phase::Optimize, break_the_graph};
  auto m = parse_model(kClean);
  std::ostringstream report;
  PassManager pm({&broken}, verifying(), report);
  try {
    pm.run(*m);
    FAIL() << "no error";
  } catch (const InternalError& e) {
    EXPECT_EQ(std::string(e.what()),
              "internal error: pass 'break_the_graph' left the IR malformed:\n"
              "  node 'early' (Neg) reads 'y' before the node that computes it (the graph is not in topological "
              "order or has a cycle)");
  }
}

TEST(Dce, CountsRemovedInitializers) {
  auto m = parse_model(R"(graph main {
  input %x: f32[2]
  const %w: f32[2] = [1.0, 2.0]
  const %v: f32[2] = [3.0, 4.0]
  %dead: f32[2] = Add(%x, %w)
  output %x
}
)");
  PassContext ctx;
  EXPECT_TRUE(dce(*m->graph, ctx));
  EXPECT_EQ(ctx.stats.counters.at("nodes_removed"), 1);
  EXPECT_EQ(ctx.stats.counters.at("initializers_removed"), 2);
  EXPECT_TRUE(m->graph->nodes().empty());
  EXPECT_TRUE(m->graph->initializers().empty());
  PassContext again;
  EXPECT_FALSE(dce(*m->graph, again));
}

}  // namespace
}  // namespace tcc
