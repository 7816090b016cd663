// Runs the built `tcc` binary and checks exit codes and messages of the driver
// itself (commands, flags, logging topics); command behaviour is tested where
// each command lives.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Result {
  int code;
  std::string output;  // stdout and stderr together
};

Result run_tcc(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " " + TCC_BINARY + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

TEST(Driver, VersionAndHelp) {
  Result v = run_tcc("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.output, std::string("tcc ") + TCC_VERSION + "\n");
  Result h = run_tcc("--help");
  EXPECT_EQ(h.code, 0);
  for (const char* cmd : {"explain", "compile", "opt", "run", "bench", "profile", "autotune"})
    EXPECT_NE(h.output.find(cmd), std::string::npos) << cmd;
  EXPECT_NE(h.output.find("Exit codes"), std::string::npos);
}

TEST(Driver, UsageErrorsExitTwo) {
  EXPECT_EQ(run_tcc("").code, 2);
  EXPECT_EQ(run_tcc("no-such-command").code, 2);
  EXPECT_EQ(run_tcc("run").code, 2);  // MODEL is required
}

TEST(Driver, UnbuiltCommandsSaySoAndExitTwo) {
  for (const char* cmd : {"bench", "profile", "autotune"}) {
    Result r = run_tcc(std::string(cmd) + " model.onnx --modes default");
    EXPECT_EQ(r.code, 2) << cmd;
    EXPECT_NE(r.output.find("not built yet"), std::string::npos) << r.output;
  }
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
