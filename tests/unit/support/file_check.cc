#include "tests/unit/support/file_check.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "src/diag/errors.h"

namespace fs = std::filesystem;

namespace tcc::file_check {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// `// KEY: text` -> text (the line starts with `prefix` = "// KEY:").
std::string after(const std::string& line, const std::string& prefix) {
  std::string rest = line.substr(prefix.size());
  return rest.empty() || rest[0] != ' ' ? rest : rest.substr(1);
}

std::string where(const Check& c) { return "line " + std::to_string(c.line); }

// The CHECK lines against the output's lines, FileCheck's way.
std::string match_checks(const std::vector<Check>& checks, const std::string& output) {
  std::vector<std::string> lines = split_lines(output);
  size_t next = 0;                  // the first line a match may use
  std::vector<const Check*> nots;  // CHECK-NOTs waiting for the next match
  auto clear_nots = [&](size_t end) -> std::string {
    for (const Check* n : nots)
      for (size_t l = next; l < end; ++l)
        if (lines[l].find(n->text) != std::string::npos)
          return "CHECK-NOT at " + where(*n) + ": output line " + std::to_string(l + 1) + " contains '" + n->text +
                 "': " + lines[l];
    nots.clear();
    return "";
  };
  for (const Check& c : checks) {
    if (c.kind == Check::Kind::Not) {
      nots.push_back(&c);
      continue;
    }
    size_t found = lines.size();
    if (c.kind == Check::Kind::Next) {
      if (next < lines.size() && lines[next].find(c.text) != std::string::npos) found = next;
      else return "CHECK-NEXT at " + where(c) + ": '" + c.text + "' is not on output line " + std::to_string(next + 1);
    } else {
      for (size_t l = next; l < lines.size() && found == lines.size(); ++l)
        if (lines[l].find(c.text) != std::string::npos) found = l;
      if (found == lines.size())
        return "CHECK at " + where(c) + ": '" + c.text + "' on no output line from " + std::to_string(next + 1);
    }
    if (std::string e = clear_nots(found); !e.empty()) return e;
    next = found + 1;
  }
  return clear_nots(lines.size());
}

}  // namespace

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::vector<std::string> run_flags(const std::string& first_line) {
  const std::string prefix = "// RUN:";
  if (!starts_with(first_line, prefix)) throw InputError("the first line must be '// RUN: <flags>'");
  std::vector<std::string> flags;
  std::istringstream in(first_line.substr(prefix.size()));
  for (std::string arg; in >> arg;) flags.push_back(arg);
  return flags;
}

std::vector<Case> split_cases(const std::vector<std::string>& lines) {
  std::vector<Case> cases(1);
  cases[0].line = 2;
  cases[0].input = "\n";
  bool in_expect = false;
  auto finish = [](const Case& c) {
    std::string at = "the case at line " + std::to_string(c.line);
    if (!c.has_expected && c.error.empty() && c.checks.empty())
      throw InputError(at + " expects nothing (no CHECK, EXPECT or ERROR)");
    if (!c.error.empty() && (c.has_expected || !c.checks.empty()))
      throw InputError(at + " expects both an error and an output");
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    Case& c = cases.back();
    if (l == "// -----") {
      finish(c);
      cases.push_back({});
      cases.back().line = i + 2;
      cases.back().input = std::string(i + 1, '\n');
      in_expect = false;
    } else if (l == "// EXPECT:") {
      in_expect = true;
      c.has_expected = true;
    } else if (in_expect) {
      if (!starts_with(l, "//")) throw InputError("line " + std::to_string(i + 1) + ": expected '// ' in EXPECT block");
      c.expected += (l.size() > 3 ? l.substr(3) : "") + "\n";
    } else if (starts_with(l, "// ERROR:")) {
      c.error = after(l, "// ERROR:");
    } else if (starts_with(l, "// CHECK-NEXT:")) {
      c.checks.push_back({Check::Kind::Next, after(l, "// CHECK-NEXT:"), i + 1});
    } else if (starts_with(l, "// CHECK-NOT:")) {
      c.checks.push_back({Check::Kind::Not, after(l, "// CHECK-NOT:"), i + 1});
    } else if (starts_with(l, "// CHECK:")) {
      c.checks.push_back({Check::Kind::Contains, after(l, "// CHECK:"), i + 1});
    } else {
      c.input += l + "\n";
    }
  }
  finish(cases.back());
  return cases;
}

std::string mismatch(const Case& c, const Outcome& outcome) {
  if (!c.error.empty()) {
    if (!outcome.failed) return "expected the error\n  " + c.error + "\nbut the run succeeded";
    if (outcome.text != c.error) return "expected the error\n  " + c.error + "\ngot\n  " + outcome.text;
    return "";
  }
  if (outcome.failed) return "the run failed: " + outcome.text;
  if (c.has_expected && outcome.text != c.expected)
    return "output differs (- expected, + actual):\n" + line_diff(c.expected, outcome.text);
  return match_checks(c.checks, outcome.text);
}

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

std::vector<std::string> read_lines(const std::string& file) {
  std::ifstream f(fs::path(TCC_SOURCE_DIR) / file);
  if (!f) throw InputError(file + ": cannot read the test file");
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<std::string> lines = split_lines(ss.str());
  if (lines.empty()) throw InputError(file + ": the test file is empty");
  return lines;
}

void expect_cases(const std::string& file, const std::vector<std::string>& lines,
                  const std::function<std::string(const std::string& input)>& run, const std::string& hint) {
  for (const Case& c : split_cases(lines)) {
    SCOPED_TRACE(file + ":" + std::to_string(c.line));
    Outcome outcome;
    try {
      outcome.text = run(c.input);
    } catch (const InputError& e) {
      outcome = {true, e.what()};
    }
    std::string wrong = mismatch(c, outcome);
    EXPECT_TRUE(wrong.empty()) << wrong << hint;
  }
}

std::vector<std::string> test_files(const std::string& dir, const std::string& ext) {
  std::vector<std::string> files;
  fs::path root = fs::path(TCC_SOURCE_DIR) / dir;
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.path().extension() == ext) files.push_back(fs::relative(entry.path(), root).string());
  std::sort(files.begin(), files.end());
  return files;
}

std::string test_name(const std::string& file) {
  std::string name = file.substr(0, file.rfind('.'));
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

}  // namespace tcc::file_check
