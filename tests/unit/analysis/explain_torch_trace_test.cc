// `tcc explain --torch-trace DIR`: what real torch.compile (torch 2.15, CPU,
// the eager backend; the cudagraphs backend for cudagraph_skip) logged under
// TORCH_TRACE for small programs (tests/explain/torch_trace, written by
// scripts/gen-torch-trace): every graph break once with torch's reason and the
// user's line, every recompile with torch's guard failures, guards, times and
// CUDA-graph skip reasons per compile, the CI gates and --baseline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/analysis/torch_trace.h"
#include "src/diag/errors.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using tcc::run_tcc;

std::string fixture(const std::string& name) {
  return std::string(TCC_SOURCE_DIR) + "/tests/explain/torch_trace/" + name;
}

TEST(TorchTrace, FloatLearningRateCompilesTwice) {
  tcc::TorchTrace t = tcc::read_torch_trace(fixture("float_lr"));
  EXPECT_EQ(t.torch_version, "2.15.0+cu132");
  ASSERT_EQ(t.compiles.size(), 2u);
  EXPECT_EQ(t.compiles[0].compile_id, "0/0");
  EXPECT_EQ(t.compiles[0].frame, "step");
  EXPECT_EQ(t.compiles[0].source, "/work/example/float_lr.py:3");
  EXPECT_GT(t.compiles[0].guards, 0);
  EXPECT_GT(t.compiles[0].seconds, 0);
  EXPECT_FALSE(t.compiles[0].guard_kinds.empty());
  ASSERT_EQ(t.recompiles.size(), 1u);
  EXPECT_EQ(t.recompiles[0].compile_id, "0/1");
  EXPECT_EQ(t.recompiles[0].frame, "step");
  EXPECT_EQ(t.recompiles[0].reasons, std::vector<std::string>{"0/0: lr == 0.1"});
  EXPECT_TRUE(t.breaks.empty());
}

// A graph that is not CUDA-graphed: torch's reason (its first line) and the user's line it names.
TEST(TorchTrace, CudagraphSkipReasonsAreReported) {
  tcc::TorchTrace t = tcc::read_torch_trace(fixture("cudagraph_skip"));
  ASSERT_EQ(t.compiles.size(), 1u);
  const std::string reason = "skipping cudagraphs due to skipping cudagraphs due to cpu device (arg0_1).";
  EXPECT_EQ(t.compiles[0].cudagraph_skip, reason);
  EXPECT_EQ(t.compiles[0].cudagraph_skip_source, "/work/example/cudagraph_skip.py:4");
  EXPECT_NE(tcc::torch_trace_text(t).find("not CUDA-graphed: " + reason + " (at /work/example/cudagraph_skip.py:4)"),
            std::string::npos);
  EXPECT_EQ(tcc::torch_trace_json(t)["compiles"][0]["cudagraph_skip_reason"], reason);
  tcc::TorchTrace plain = tcc::read_torch_trace(fixture("float_lr"));
  EXPECT_TRUE(plain.compiles[0].cudagraph_skip.empty());
  EXPECT_FALSE(tcc::torch_trace_json(plain)["compiles"][0].contains("cudagraph_skip_reason"));
}

TEST(TorchTrace, VaryingLengthRecompilesOnceForTheSize) {
  tcc::TorchTrace t = tcc::read_torch_trace(fixture("varying_seq"));
  ASSERT_EQ(t.recompiles.size(), 1u);
  EXPECT_EQ(t.recompiles[0].reasons,
            std::vector<std::string>{"0/0: tensor 'x' size mismatch at index 0. expected 8, actual 9"});
  EXPECT_EQ(t.compiles.size(), 2u);
}

// Each break in explain's kinds, with torch's title, explanation, hint and the user's line.
TEST(TorchTrace, BreaksCarryTorchsReasonAndTheUsersLine) {
  struct Case {
    const char* scenario;
    const char* kind;
    const char* source;
    const char* reason;
  };
  for (const Case& c : {Case{"print", "unsupported_op", "/work/example/print.py:5", "Failed to trace builtin operator"},
                        Case{"data_dependent_branch", "data_dependent_control_flow",
                             "/work/example/data_dependent_branch.py:4", "Data-dependent branching"},
                        Case{"item", "non_tensor_value", "/work/example/item.py:4",
                             "Unsupported Tensor.item() call with capture_scalar_outputs=False"},
                        Case{"nonzero", "data_dependent_shape", "/work/example/nonzero.py:4",
                             "Dynamic shape operator"}}) {
    tcc::TorchTrace t = tcc::read_torch_trace(fixture(c.scenario));
    ASSERT_EQ(t.breaks.size(), 1u) << c.scenario;
    EXPECT_EQ(t.breaks[0].kind, c.kind) << c.scenario;
    EXPECT_EQ(t.breaks[0].source, c.source) << c.scenario;
    EXPECT_EQ(t.breaks[0].reason, c.reason) << c.scenario;
    EXPECT_FALSE(t.breaks[0].explanation.empty()) << c.scenario;
    EXPECT_FALSE(t.breaks[0].hint.empty()) << c.scenario;
  }
}

// torch logs the branch's break again when it recompiles the frame for a new size: reported once.
TEST(TorchTrace, ABreakLoggedOncePerCompileIsReportedOnce) {
  tcc::TorchTrace t = tcc::read_torch_trace(fixture("data_dependent_branch"));
  ASSERT_EQ(t.breaks.size(), 1u);
  EXPECT_EQ(t.breaks[0].times, 2);
  EXPECT_EQ(t.recompiles.size(), 2u);
}

TEST(TorchTrace, BadFoldersAndRecordsAreInputErrors) {
  EXPECT_THROW(tcc::read_torch_trace(fixture("no_such_scenario")), tcc::InputError);
  fs::path dir = tcc::make_temp_dir("tcc_torch_trace_bad");
  EXPECT_THROW(tcc::read_torch_trace(dir.string()), tcc::InputError);  // no *.log
  std::ofstream(dir / "rank_0.log") << "V1127 17:12:40.814000 1363 torch/_dynamo/utils.py:2473] {\"str\": [\n";
  try {
    tcc::read_torch_trace(dir.string());
    ADD_FAILURE() << "a truncated record was accepted";
  } catch (const tcc::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("rank_0.log:1"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(TorchTraceCli, GatesApplyToTorchsNumbers) {
  EXPECT_EQ(run_tcc("explain --torch-trace " + fixture("print")).code, 0);
  tcc::CliResult breaks = run_tcc("explain --torch-trace " + fixture("print") + " --max-graph-breaks 0");
  EXPECT_EQ(breaks.code, 1) << breaks.output;
  EXPECT_NE(breaks.output.find("print.py:5"), std::string::npos) << breaks.output;
  tcc::CliResult recompiles = run_tcc("explain --torch-trace " + fixture("float_lr") + " --fail-on-recompile");
  EXPECT_EQ(recompiles.code, 1) << recompiles.output;
  EXPECT_NE(recompiles.output.find("lr == 0.1"), std::string::npos) << recompiles.output;
}

// A run compared with its own report has nothing new; compared with another
// scenario's, its breaks and recompiles are new and named.
TEST(TorchTraceCli, BaselineFailsOnlyOnWhatItLacks) {
  const fs::path dir = tcc::make_temp_dir("tcc_torch_trace_baseline");
  const fs::path report = dir / "baseline.json";
  ASSERT_EQ(run_tcc("explain --torch-trace " + fixture("data_dependent_branch") + " --format json -o " +
                    report.string())
                .code,
            0);
  EXPECT_EQ(run_tcc("explain --torch-trace " + fixture("data_dependent_branch") + " --baseline " + report.string()).code,
            0);
  tcc::CliResult fresh = run_tcc("explain --torch-trace " + fixture("float_lr") + " --baseline " + report.string());
  EXPECT_EQ(fresh.code, 1) << fresh.output;
  EXPECT_NE(fresh.output.find("recompile [0/1] of step: 0/0: lr == 0.1"), std::string::npos) << fresh.output;
  fs::remove(report);
  EXPECT_EQ(run_tcc("explain --torch-trace " + fixture("float_lr") + " --baseline " + report.string()).code, 2);
  EXPECT_EQ(run_tcc("explain --baseline " + report.string()).code, 2);
  EXPECT_EQ(run_tcc("explain").code, 2);
  fs::remove_all(dir);
}

}  // namespace
