// tcc explain against real torch.compile: every recording under
// tests/fidelity/<torch X.Y>/ (written by scripts/torch-oracle; no torch needed
// here) is simulated by the `tcc explain` binary with the recording's model,
// trace and flags, and the counts must equal torch's: compiles, recompiles,
// eager fallback calls, graph breaks. Each distinct graph break's reason, up
// to its first blank line (after which torch gives a developer context, the
// user's stack with file paths and line numbers, and links), must be tcc's
// wording of torch's (explain's `torch_reason`). Reasons are compared per recompiling
// call: for each earlier variant torch names, its one failed check (torch
// reports the first) must equal tcc's first failed guard of that variant,
// after tcc's value note (" (now 0.2)", " (actual 0)", " (9 vs 8)") is cut;
// the order of variants is not compared (torch lists them most recently used
// first, tcc newest first). Recordings of releases whose reasons carry no
// compile id (2.3) compare each call's checks as one list. A recording's
// "sources" say how torch's guards name an input passed otherwise than by its
// name (a compiled nn.Module's argument: args[0]). A size tcc words as
// data-dependent (a break result's, ___stack0's, which the data sets) is
// compared without torch's "expected N, actual M".
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace {

namespace fs = std::filesystem;

struct ExplainRun {
  int rc;
  std::string out;
};

ExplainRun run_tcc(const std::string& args) {
  std::string cmd = std::string("cd ") + TCC_SOURCE_DIR + " && " + TCC_BINARY + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

// "0/1: lr == 0.1 (now 0.2)" -> {"0/1", "lr == 0.1"}.
std::pair<std::string, std::string> split_reason(const std::string& r, bool tcc_note) {
  size_t colon = r.find(": ");
  std::string id = r.substr(0, colon), text = r.substr(colon + 2);
  if (tcc_note) text = std::regex_replace(text, std::regex(R"( \((now|actual) [^)]*\)$| \(-?\d+ vs -?\d+\)$)"), "");
  return {id, text};
}

TEST(Fidelity, TccMatchesRecordedTorch) {
  fs::path root = fs::path(TCC_SOURCE_DIR) / "tests/fidelity";
  std::vector<fs::path> recordings;
  for (const auto& version : fs::directory_iterator(root))
    if (version.is_directory() && version.path().filename() != "models")
      for (const auto& sc : fs::directory_iterator(version.path()))
        if (fs::exists(sc.path() / "recording.json")) recordings.push_back(sc.path() / "recording.json");
  std::sort(recordings.begin(), recordings.end());
  ASSERT_GE(recordings.size(), 30u);
  int compared = 0;
  for (const fs::path& path : recordings) {
    nlohmann::json rec = nlohmann::json::parse(std::ifstream(path));
    std::string name = path.parent_path().parent_path().filename().string() + "/" + rec["scenario"].get<std::string>();
    SCOPED_TRACE(name);
    const nlohmann::json& torch = rec["recorded"];
    std::string flags;
    for (const auto& f : rec["flags"]) flags += " " + f.get<std::string>();
    ExplainRun r = run_tcc("explain " + rec["model"].get<std::string>() + " --trace " + rec["trace"].get<std::string>() + flags +
                " --format json");
    if (!torch["raised"].is_null()) {
      // set_stance('fail_on_recompile'): torch raised; tcc's gate trips at the same call.
      EXPECT_EQ(r.rc, 1);
      auto j = nlohmann::json::parse(r.out);
      ASSERT_FALSE(j["recompiles"].empty());
      EXPECT_EQ(j["recompiles"][0]["call"], torch["raised"]["call"]);
      ++compared;
      continue;
    }
    ASSERT_EQ(r.rc, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["compiles"], torch["compiles"]);
    EXPECT_EQ(j["recompile_count"], torch["recompile_count"]);
    EXPECT_EQ(j["eager_fallback_calls"], torch["eager_fallback_calls"]);
    EXPECT_EQ(j["graph_break_count"], torch["graph_breaks"]);
    // Torch's distinct break reasons up to their first blank line, against tcc's wording of torch's.
    std::set<std::string> tcc_breaks, torch_breaks;
    for (const auto& b : j["graph_breaks"]) tcc_breaks.insert(b["torch_reason"].get<std::string>());
    for (const auto& reason : torch["graph_break_reasons"]) {
      const std::string text = reason.get<std::string>();
      torch_breaks.insert(text.substr(0, text.find("\n\n")));
    }
    EXPECT_EQ(tcc_breaks, torch_breaks);
    // Per recompiling call: variant -> its first failed check. Releases before
    // 2.6 word a reason without its variant's compile id: there the checks are
    // compared as one list per call, tcc's first per variant against torch's.
    std::map<size_t, std::map<std::string, std::string>> tcc_reasons, torch_reasons;
    std::set<std::pair<size_t, std::string>> data_dependent;  // (call, variant) whose first check is such a size
    static const std::string kDataDependent = " (data-dependent)";
    const nlohmann::json sources = rec.value("sources", nlohmann::json::object());
    for (const auto& e : j["recompiles"])
      for (const auto& reason : e["reasons"]) {
        auto [id, text] = split_reason(reason.get<std::string>(), true);
        const size_t call = e["call"].template get<size_t>();
        if (text.size() > kDataDependent.size() &&
            text.compare(text.size() - kDataDependent.size(), kDataDependent.size(), kDataDependent) == 0) {
          text.resize(text.size() - kDataDependent.size());
          if (!tcc_reasons[call].count(id)) data_dependent.emplace(call, id);
        }
        // How torch's guards name an input that is not passed under its own name.
        for (const auto& [input, source] : sources.items())
          text = std::regex_replace(text, std::regex("'" + input + "'"), "'" + source.get<std::string>() + "'");
        tcc_reasons[call].emplace(id, text);  // keeps the first per variant
      }
    static const std::regex kCompileId(R"(^\d+/\d+: )");
    bool ids = true;
    std::map<size_t, std::vector<std::string>> torch_lists;
    for (const auto& e : torch["recompiles"])
      for (const auto& reason : e["reasons"]) {
        const std::string r = reason.get<std::string>();
        size_t call = e["call"].template get<size_t>();
        torch_lists[call].push_back(r);
        if (!std::regex_search(r, kCompileId)) {
          ids = false;
          continue;
        }
        auto [id, text] = split_reason(r, false);
        if (data_dependent.count({call, id})) text = std::regex_replace(text, std::regex(R"(\. expected \d+, actual \d+$)"), "");
        torch_reasons[call].emplace(id, text);
      }
    if (ids) {
      EXPECT_EQ(tcc_reasons, torch_reasons);
    } else {
      std::map<size_t, std::vector<std::string>> tcc_lists;
      for (const auto& [call, by_variant] : tcc_reasons)
        for (const auto& [id, text] : by_variant) tcc_lists[call].push_back(text);
      for (auto& [call, list] : tcc_lists) std::sort(list.begin(), list.end());
      for (auto& [call, list] : torch_lists) std::sort(list.begin(), list.end());
      EXPECT_EQ(tcc_lists, torch_lists);
    }
    ++compared;
  }
  std::printf("[fidelity] %d scenarios compared with torch\n", compared);
}

}  // namespace
