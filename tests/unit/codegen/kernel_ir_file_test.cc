// Runs the kernel-IR tests under tests/kernel_ir/<pass-or-emitter>/<case>.kir
// (the file layout and the matching: tests/unit/support/file_check.h). The RUN line
// holds `tcc kir` flags (--passes=, --emit=, --device=); each case runs what
// `tcc kir FILE <RUN flags>` runs, in-process: parse and verify, the passes
// with the verifier after each, then print or emit. Error messages name the
// file as tests/kernel_ir/<dir>/<case>.kir, with the file's line numbers.
// scripts/update-pass-tests rewrites EXPECT blocks and ERROR lines from build/tcc.
#include <gtest/gtest.h>

#include <sstream>

#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_ir_tool.h"
#include "src/diag/errors.h"
#include "tests/unit/support/file_check.h"

namespace tcc {
namespace {

kir::KernelToolOptions parse_kir_run_line(const std::string& line) {
  kir::KernelToolOptions flags;
  for (const std::string& arg : file_check::run_flags(line)) {
    if (arg.rfind("--passes=", 0) == 0) flags.passes = arg.substr(9);
    else if (arg.rfind("--emit=", 0) == 0) flags.emit = arg.substr(7);
    else if (arg.rfind("--device=", 0) == 0) flags.device = arg.substr(9);
    else throw InputError("unsupported flag in RUN line: " + arg);
  }
  return flags;
}

class KernelIrFile : public testing::TestWithParam<std::string> {};

TEST_P(KernelIrFile, MatchesExpectations) {
  std::string file = "tests/kernel_ir/" + GetParam();
  std::vector<std::string> lines = file_check::read_lines(file);
  kir::KernelToolOptions flags = parse_kir_run_line(lines[0]);
  file_check::expect_cases(
      file, lines,
      [&](const std::string& input) {
        std::ostringstream report;
        return kir::run_kernel_tool(kir::parse_kernels(input, file), flags, report);
      },
      "(scripts/update-pass-tests rewrites EXPECT and ERROR lines)");
}

INSTANTIATE_TEST_SUITE_P(KernelIr, KernelIrFile, testing::ValuesIn(file_check::test_files("tests/kernel_ir", ".kir")),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return file_check::test_name(info.param);
                         });

TEST(KernelIrFileHarness, ReadsTheRunLine) {
  kir::KernelToolOptions flags = parse_kir_run_line("// RUN: --passes=collapse_axes --emit=cuda --device=a100");
  EXPECT_EQ(flags.passes, "collapse_axes");
  EXPECT_EQ(flags.emit, "cuda");
  EXPECT_EQ(flags.device, "a100");
  EXPECT_EQ(parse_kir_run_line("// RUN:").device, kDefaultDevice);
  EXPECT_EQ(parse_kir_run_line("// RUN:").emit, "ir");
  EXPECT_THROW(parse_kir_run_line("// RUN: --no-shape-inference"), InputError);
}

}  // namespace
}  // namespace tcc
