// Runs the text-in/text-out pass tests under tests/passes/<pass>/<case>.tir.
//
// File layout (see docs/TEXT_IR.md, "Pass tests"):
//   // RUN: --passes=dce --no-shape-inference     (tcc opt flags, first line)
//   <input graph>
//   // EXPECT:
//   // <expected printed IR, one comment line per line>
//   // -----
//   <next case: input graph, // EXPECT:, ...>
// Each case runs what `tcc opt FILE <RUN flags>` runs, in-process, with the
// verifier on, and must print exactly the expected text.
// scripts/update-pass-tests rewrites the expectations from build/tcc.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "passes/pass_manager.h"
#include "src/ir/text.h"
#include "src/shape/shape_inference.h"

namespace fs = std::filesystem;

namespace tcc {
namespace {

struct PassCase {
  size_t line = 0;  // where the case starts in the file
  std::string input;
  std::string expected;
};

struct RunFlags {
  std::string passes;
  std::optional<Phase> stop_after;
  bool shape_inference = true;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The subset of `tcc opt` flags that change what the pipeline computes.
RunFlags parse_run_line(const std::string& line) {
  const std::string prefix = "// RUN:";
  if (line.rfind(prefix, 0) != 0) throw InputError("the first line must be '// RUN: <tcc opt flags>'");
  RunFlags flags;
  std::istringstream in(line.substr(prefix.size()));
  for (std::string arg; in >> arg;) {
    if (arg.rfind("--passes=", 0) == 0) flags.passes = arg.substr(9);
    else if (arg.rfind("--stop-after=", 0) == 0) flags.stop_after = parse_phase_or_throw(arg.substr(13));
    else if (arg == "--no-shape-inference") flags.shape_inference = false;
    else throw InputError("unsupported flag in RUN line: " + arg);
  }
  return flags;
}

std::vector<PassCase> split_cases(const std::vector<std::string>& lines) {
  std::vector<PassCase> cases(1);
  cases[0].line = 2;
  bool in_expect = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l == "// -----") {
      cases.push_back({i + 2, "", ""});
      in_expect = false;
    } else if (l == "// EXPECT:") {
      in_expect = true;
    } else if (in_expect) {
      if (l.rfind("//", 0) != 0) throw InputError("line " + std::to_string(i + 1) + ": expected '// ' in EXPECT block");
      cases.back().expected += (l.size() > 3 ? l.substr(3) : "") + "\n";
    } else {
      cases.back().input += l + "\n";
    }
  }
  return cases;
}

std::string run_pipeline(const std::string& input, const RunFlags& flags, const std::string& file) {
  auto model = parse_model(input, file);
  if (flags.shape_inference) infer_shapes(*model->graph);
  PassManagerOptions options;
  options.verify = true;
  std::ostringstream report;
  PassManager pm(build_pipeline(flags.passes, flags.stop_after), options, report);
  pm.run(*model);
  return print_model(*model);
}

// A line diff good enough for small IR texts: common prefix and suffix kept,
// the middle shown as -expected / +actual.
std::string line_diff(const std::string& expected, const std::string& actual) {
  auto e = split_lines(expected), a = split_lines(actual);
  size_t pre = 0;
  while (pre < e.size() && pre < a.size() && e[pre] == a[pre]) ++pre;
  size_t suf = 0;
  while (suf < e.size() - pre && suf < a.size() - pre && e[e.size() - 1 - suf] == a[a.size() - 1 - suf]) ++suf;
  std::string d;
  for (size_t i = 0; i < pre; ++i) d += "  " + e[i] + "\n";
  for (size_t i = pre; i < e.size() - suf; ++i) d += "- " + e[i] + "\n";
  for (size_t i = pre; i < a.size() - suf; ++i) d += "+ " + a[i] + "\n";
  for (size_t i = e.size() - suf; i < e.size(); ++i) d += "  " + e[i] + "\n";
  return d;
}

std::vector<std::string> pass_test_files() {
  std::vector<std::string> files;
  fs::path root = fs::path(TCC_SOURCE_DIR) / "tests" / "passes";
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.path().extension() == ".tir") files.push_back(fs::relative(entry.path(), root).string());
  std::sort(files.begin(), files.end());
  return files;
}

class PassFile : public testing::TestWithParam<std::string> {};

TEST_P(PassFile, MatchesExpectedOutput) {
  fs::path path = fs::path(TCC_SOURCE_DIR) / "tests" / "passes" / GetParam();
  std::ifstream f(path);
  ASSERT_TRUE(f) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  auto lines = split_lines(ss.str());
  ASSERT_FALSE(lines.empty()) << path;
  RunFlags flags = parse_run_line(lines[0]);
  for (const PassCase& c : split_cases(lines)) {
    SCOPED_TRACE(path.string() + ":" + std::to_string(c.line));
    ASSERT_FALSE(c.expected.empty()) << "case has no // EXPECT: block";
    std::string actual = run_pipeline(c.input, flags, path.string());
    EXPECT_EQ(actual, c.expected) << "diff (- expected, + actual):\n"
                                  << line_diff(c.expected, actual)
                                  << "(scripts/update-pass-tests rewrites expectations)";
  }
}

INSTANTIATE_TEST_SUITE_P(Passes, PassFile, testing::ValuesIn(pass_test_files()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(0, info.param.size() - 4);
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// The harness itself: a wrong expectation must fail and show the diff.
TEST(PassFileHarness, SplitsCasesAndStripsCommentPrefix) {
  auto cases = split_cases(split_lines("// RUN: --passes=dce\ngraph a {\n}\n// EXPECT:\n// graph a {\n// }\n"
                                       "// -----\ngraph b {\n}\n// EXPECT:\n// graph b {\n//\n// }\n"));
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].input, "graph a {\n}\n");
  EXPECT_EQ(cases[0].expected, "graph a {\n}\n");
  EXPECT_EQ(cases[1].line, 8u);
  EXPECT_EQ(cases[1].expected, "graph b {\n\n}\n");
  RunFlags flags = parse_run_line("// RUN: --passes=dce --stop-after=optimize --no-shape-inference");
  EXPECT_EQ(flags.passes, "dce");
  EXPECT_EQ(flags.stop_after, Phase::Optimize);
  EXPECT_FALSE(flags.shape_inference);
  EXPECT_THROW(parse_run_line("// RUN: --bogus"), InputError);
  EXPECT_THROW(parse_run_line("graph g {}"), InputError);
}

TEST(PassFileHarness, DiffShowsChangedLines) {
  EXPECT_EQ(line_diff("a\nb\nc\n", "a\nx\nc\n"), "  a\n- b\n+ x\n  c\n");
  EXPECT_EQ(line_diff("a\n", "a\nb\n"), "  a\n+ b\n");
}

}  // namespace
}  // namespace tcc
