// What the text-in/text-out test files share: tests/passes/**/*.tir (graph
// passes, pass_file_test.cc) and tests/kernel_ir/**/*.kir (kernel-IR passes and
// emitters, kernel_ir_file_test.cc). See docs/TEXT_IR.md, "Pass tests":
//
//   // RUN: <flags of the tool, for every case of the file>
//   <input>
//   // CHECK: text          a later output line contains `text`
//   // CHECK-NEXT: text     the line after the previous match contains it
//   // CHECK-NOT: text      no line between the neighbouring matches contains it
//   // EXPECT:              the whole output, exactly, one `// ` line per line
//   // ...
//   // ERROR: message       the run fails with an InputError of exactly this message
//   // -----
//   <next case>
//
// scripts/update-pass-tests rewrites EXPECT blocks and ERROR lines from what
// build/tcc prints; CHECK lines are written by hand.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tcc::file_check {

struct Check {
  enum class Kind { Contains, Next, Not };
  Kind kind = Kind::Contains;
  std::string text;
  size_t line = 0;  // in the test file
};

struct Case {
  size_t line = 0;        // where the case starts in the file
  std::string input;      // preceded by empty lines, so its line numbers are the file's
  std::string expected;   // the EXPECT block without its `// ` prefixes; empty if none
  bool has_expected = false;
  std::string error;      // the ERROR line's message; empty if none
  std::vector<Check> checks;
};

std::vector<std::string> split_lines(const std::string& text);

// The flags of the first line, `// RUN: <flags>`; InputError if it is not one.
std::vector<std::string> run_flags(const std::string& first_line);

// The cases of a test file's lines (the RUN line first). A case that expects
// nothing, or an ERROR beside other expectations, is an InputError.
std::vector<Case> split_cases(const std::vector<std::string>& lines);

// What the tool did with a case's input: its output, or the InputError it threw.
struct Outcome {
  bool failed = false;
  std::string text;  // the output, or the error message
};

// "" where the outcome meets every expectation of c; else what did not, with a
// line diff (- expected, + actual) for an EXPECT block.
std::string mismatch(const Case& c, const Outcome& outcome);

// A line diff good enough for small texts: common prefix and suffix kept, the
// middle shown as -expected / +actual.
std::string line_diff(const std::string& expected, const std::string& actual);

// The lines of test file `file` (relative to the source tree); an InputError
// when it cannot be read or is empty.
std::vector<std::string> read_lines(const std::string& file);

// Runs every case of a test file's `lines` through `run` (a case's input to the
// tool's output; an InputError it throws is the case's outcome) and reports
// each mismatch as a gtest failure at the case's line in `file`, followed by
// `hint`.
void expect_cases(const std::string& file, const std::vector<std::string>& lines,
                  const std::function<std::string(const std::string& input)>& run, const std::string& hint);

// The .`ext` files under `dir` (relative to the source tree), recursively,
// sorted, relative to `dir`; and a gtest name made of one.
std::vector<std::string> test_files(const std::string& dir, const std::string& ext);
std::string test_name(const std::string& file);

}  // namespace tcc::file_check
