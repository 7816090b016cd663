// `tcc ops`: every registered op, its opsets, interpreter, GPU path and
// gradient, as text, JSON and the markdown table README embeds.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "src/ops/op_registry.h"
#include "tests/unit/support/cli_util.h"

namespace {

using tcc::run_tcc;

nlohmann::json ops_json() {
  tcc::CliResult r = run_tcc("ops --format json");
  EXPECT_EQ(r.code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

const nlohmann::json* find_op(const nlohmann::json& j, const std::string& domain, const std::string& name) {
  for (const auto& op : j["ops"])
    if (op["domain"] == domain && op["name"] == name) return &op;
  return nullptr;
}

TEST(OpsCommand, JsonListsEveryRegisteredOp) {
  nlohmann::json j = ops_json();
  EXPECT_EQ(j["ops"].size(), tcc::OpRegistry::get().all().size());
  for (const auto& op : j["ops"]) {
    EXPECT_TRUE(op["interpreter"].get<bool>()) << op;
    std::string gpu = op["gpu"];
    EXPECT_TRUE(gpu == "kernel" || gpu == "library" || gpu == "host") << op;
    EXPECT_LE(op["opsets"][0].get<int64_t>(), op["opsets"][1].get<int64_t>()) << op;
  }
}

// The path follows each op's definition: a pointwise kernel, a library call,
// a decomposition into ops with kernels, the host.
TEST(OpsCommand, GpuPathAndGradientFollowTheDefinitions) {
  nlohmann::json j = ops_json();
  struct Case {
    const char* domain;
    const char* name;
    const char* gpu;
    bool gradient;
  };
  for (const Case& c : {Case{"", "Add", "kernel", true}, Case{"", "MatMul", "library", true},
                        Case{"", "Conv", "library", true}, Case{"", "Softmax", "kernel", true},
                        Case{"", "NonZero", "kernel", false}, Case{"", "Unique", "kernel", false},
                        Case{"", "Multinomial", "kernel", false}, Case{"", "Loop", "host", false},
                        Case{"tcc", "Fusion", "host", false}}) {
    const nlohmann::json* op = find_op(j, c.domain, c.name);
    ASSERT_NE(op, nullptr) << c.name;
    EXPECT_EQ((*op)["gpu"], c.gpu) << c.name;
    EXPECT_EQ((*op)["gradient"].get<bool>(), c.gradient) << c.name;
  }
  const nlohmann::json* add = find_op(j, "", "Add");
  EXPECT_EQ((*add)["opsets"], nlohmann::json::array({7, tcc::kMaxOpset}));
}

TEST(OpsCommand, TextEndsWithCountsAndBadFormatExitsTwo) {
  tcc::CliResult r = run_tcc("ops");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(std::to_string(tcc::OpRegistry::get().all().size()) + " ops: "), std::string::npos);
  tcc::CliResult bad = run_tcc("ops --format yaml");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--format must be text, json or markdown"), std::string::npos) << bad.output;
}

// README's op table is `tcc ops --format markdown` (scripts/update-op-table writes it).
TEST(OpsCommand, ReadmeTableIsCurrent) {
  std::ifstream in(std::string(TCC_SOURCE_DIR) + "/README.md");
  std::stringstream readme;
  readme << in.rdbuf();
  const std::string begin = "<!-- tcc ops --format markdown -->\n", end = "<!-- end of tcc ops -->";
  std::string text = readme.str();
  size_t b = text.find(begin), e = text.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  tcc::CliResult r = run_tcc("ops --format markdown");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(text.substr(b + begin.size(), e - b - begin.size()), r.output)
      << "README's op table is stale: run scripts/update-op-table";
}

}  // namespace
