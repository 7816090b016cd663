// Runs the built `tcc` binary and checks exit codes and messages of the driver
// itself (commands, flags, logging topics); command behaviour is tested where
// each command lives.
#include <gtest/gtest.h>

#include <string>

#include "src/log/log.h"
#include "tests/unit/support/cli_util.h"

namespace {

using tcc::run_tcc;
using Result = tcc::CliResult;

TEST(Driver, VersionAndHelp) {
  Result v = run_tcc("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.output, std::string("tcc ") + TCC_VERSION + "\n");
  Result h = run_tcc("--help");
  EXPECT_EQ(h.code, 0);
  for (const char* cmd : {"explain", "compile", "opt", "kir", "run", "bench", "profile", "autotune"})
    EXPECT_NE(h.output.find(cmd), std::string::npos) << cmd;
  EXPECT_NE(h.output.find("Exit codes"), std::string::npos);
}

TEST(Driver, UsageErrorsExitTwo) {
  EXPECT_EQ(run_tcc("").code, 2);
  EXPECT_EQ(run_tcc("no-such-command").code, 2);
  EXPECT_EQ(run_tcc("run").code, 2);  // MODEL is required
}

TEST(Driver, MissingModelFileIsAnInputError) {
  Result r = run_tcc("run /nonexistent/model.onnx --reference");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("/nonexistent/model.onnx: cannot open model file"), std::string::npos) << r.output;
}

TEST(Driver, UnknownLogTopicIsAnInputError) {
  Result r = run_tcc("run /nonexistent.onnx --reference", "TCC_LOG=graph_breaks,bogus");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown topic 'bogus'"), std::string::npos) << r.output;
}

}  // namespace
