// The matcher the text-in/text-out test files share (tests/unit/support/file_check.h):
// a wrong expectation must fail, and say where.
#include "tests/unit/support/file_check.h"

#include <gtest/gtest.h>

#include "src/diag/errors.h"

namespace tcc::file_check {
namespace {

std::vector<Case> cases(const std::string& text) { return split_cases(split_lines(text)); }

TEST(FileCheck, SplitsCasesKeepingTheFilesLineNumbers) {
  auto cs = cases("// RUN: --passes=dce\ngraph a {\n}\n// EXPECT:\n// graph a {\n// }\n"
                  "// -----\ngraph b {\n}\n// EXPECT:\n// graph b {\n//\n// }\n");
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].input, "\ngraph a {\n}\n");
  EXPECT_EQ(cs[0].expected, "graph a {\n}\n");
  EXPECT_EQ(cs[1].line, 8u);
  EXPECT_EQ(split_lines(cs[1].input).size(), 9u);  // 7 empty lines, then lines 8 and 9
  EXPECT_EQ(split_lines(cs[1].input)[7], "graph b {");
  EXPECT_EQ(cs[1].expected, "graph b {\n\n}\n");
  EXPECT_EQ(run_flags("// RUN: --passes=dce --emit=c"), (std::vector<std::string>{"--passes=dce", "--emit=c"}));
  EXPECT_THROW(run_flags("graph g {}"), InputError);
}

TEST(FileCheck, RefusesCasesThatExpectNothingOrBoth) {
  EXPECT_THROW(cases("// RUN:\nkernel k\n"), InputError);
  EXPECT_THROW(cases("// RUN:\nkernel k\n// ERROR: x\n// CHECK: y\n"), InputError);
}

TEST(FileCheck, ChecksMatchInOrder) {
  Case c = cases("// RUN:\nin\n// CHECK: alpha\n// CHECK-NEXT: beta\n// CHECK-NOT: gamma\n// CHECK: delta\n")[0];
  EXPECT_EQ(mismatch(c, {false, "x alpha\nbeta y\nz\ndelta\n"}), "");
  EXPECT_EQ(mismatch(c, {false, "alpha\nbeta\ngamma\ndelta\n"}),
            "CHECK-NOT at line 5: output line 3 contains 'gamma': gamma");
  EXPECT_EQ(mismatch(c, {false, "alpha\nz\nbeta\ndelta\n"}), "CHECK-NEXT at line 4: 'beta' is not on output line 2");
  EXPECT_EQ(mismatch(c, {false, "delta\nalpha\nbeta\n"}), "CHECK at line 6: 'delta' on no output line from 4");
  // A trailing CHECK-NOT covers the rest of the output.
  Case tail = cases("// RUN:\nin\n// CHECK: a\n// CHECK-NOT: b\n")[0];
  EXPECT_EQ(mismatch(tail, {false, "b\na\nc\n"}), "");
  EXPECT_NE(mismatch(tail, {false, "a\nc\nb\n"}), "");
  EXPECT_EQ(mismatch(c, {true, "f.kir:1:1: bad"}), "the run failed: f.kir:1:1: bad");
}

TEST(FileCheck, ExpectIsExactAndErrorIsTheWholeMessage) {
  Case c = cases("// RUN:\nin\n// EXPECT:\n// a\n// b\n")[0];
  EXPECT_EQ(mismatch(c, {false, "a\nb\n"}), "");
  EXPECT_EQ(mismatch(c, {false, "a\nx\n"}), "output differs (- expected, + actual):\n  a\n- b\n+ x\n");
  Case e = cases("// RUN:\nin\n// ERROR: f.kir:2:1: bad\n")[0];
  EXPECT_EQ(mismatch(e, {true, "f.kir:2:1: bad"}), "");
  EXPECT_NE(mismatch(e, {true, "f.kir:2:1: bad, and more"}), "");
  EXPECT_NE(mismatch(e, {false, "output\n"}), "");
}

TEST(FileCheck, DiffShowsChangedLines) {
  EXPECT_EQ(line_diff("a\nb\nc\n", "a\nx\nc\n"), "  a\n- b\n+ x\n  c\n");
  EXPECT_EQ(line_diff("a\n", "a\nb\n"), "  a\n+ b\n");
}

}  // namespace
}  // namespace tcc::file_check
