// Runs the text-in/text-out pass tests under tests/passes/<pass>/<case>.tir
// (the file layout and the matching: tests/unit/support/file_check.h, docs/TEXT_IR.md
// "Pass tests"). The RUN line holds `tcc opt` flags; each case runs what
// `tcc opt FILE <RUN flags>` runs, in-process, with the verifier on.
// scripts/update-pass-tests rewrites the expectations from build/tcc.
#include <gtest/gtest.h>

#include <optional>
#include <sstream>

#include "passes/pass_manager.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/file_check.h"

namespace tcc {
namespace {

struct RunFlags {
  std::string passes;
  std::optional<Phase> stop_after;
  bool shape_inference = true;
  Precision precision = Precision::FP32;
};

// The subset of `tcc opt` flags that change what the pipeline computes.
RunFlags parse_run_line(const std::string& line) {
  RunFlags flags;
  for (const std::string& arg : file_check::run_flags(line)) {
    if (arg.rfind("--passes=", 0) == 0) flags.passes = arg.substr(9);
    else if (arg.rfind("--stop-after=", 0) == 0) flags.stop_after = parse_phase_or_throw(arg.substr(13));
    else if (arg == "--no-shape-inference") flags.shape_inference = false;
    else if (arg.rfind("--precision=", 0) == 0 && parse_precision(arg.substr(12)))
      flags.precision = *parse_precision(arg.substr(12));
    else throw InputError("unsupported flag in RUN line: " + arg);
  }
  return flags;
}

std::string run_pipeline(const std::string& input, const RunFlags& flags, const std::string& file) {
  auto model = parse_model(input, file);
  if (flags.shape_inference) infer_shapes(*model->graph);
  PassManagerOptions options;
  options.verify = true;
  options.precision = flags.precision;
  std::ostringstream report;
  PassManager pm(build_pipeline(flags.passes, flags.stop_after), options, report);
  pm.run(*model);
  return print_model(*model);
}

class PassFile : public testing::TestWithParam<std::string> {};

TEST_P(PassFile, MatchesExpectedOutput) {
  std::string file = "tests/passes/" + GetParam();  // as error messages name it
  std::vector<std::string> lines = file_check::read_lines(file);
  RunFlags flags = parse_run_line(lines[0]);
  file_check::expect_cases(
      file, lines, [&](const std::string& input) { return run_pipeline(input, flags, file); },
      "(scripts/update-pass-tests rewrites expectations)");
}

INSTANTIATE_TEST_SUITE_P(Passes, PassFile, testing::ValuesIn(file_check::test_files("tests/passes", ".tir")),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return file_check::test_name(info.param);
                         });

TEST(PassFileHarness, ReadsTheRunLine) {
  RunFlags flags = parse_run_line("// RUN: --passes=dce --stop-after=optimize --no-shape-inference");
  EXPECT_EQ(flags.passes, "dce");
  EXPECT_EQ(flags.stop_after, Phase::Optimize);
  EXPECT_FALSE(flags.shape_inference);
  EXPECT_THROW(parse_run_line("// RUN: --bogus"), InputError);
  EXPECT_THROW(parse_run_line("graph g {}"), InputError);
}

}  // namespace
}  // namespace tcc
