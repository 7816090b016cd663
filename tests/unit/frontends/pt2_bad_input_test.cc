// Malformed .pt2 archives: each is an InputError (exit 2) naming the archive,
// the entry or node, and what was wrong; none crashes or reads outside the
// archive. The archives are tests/pt2/mlp.pt2 with one thing changed, written
// here through libzip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "frontends/load_model.h"
#include "frontends/pt2/pt2_importer.h"
#include "frontends/read_file.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"
#include "tests/unit/support/zip_entries.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kMlp = fs::path(TCC_SOURCE_DIR) / "tests/pt2/mlp.pt2";

class Pt2BadInput : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    entries_ = read_zip(read_file_bytes(kMlp.string(), "model"));
  }

  std::string& entry(const std::string& path) {
    for (auto& [name, data] : entries_)
      if (name == "mlp/" + path) return data;
    ADD_FAILURE() << "no entry " << path;
    return entries_[0].second;
  }
  json model() { return json::parse(entry("models/model.json")); }
  void set_model(const json& j) { entry("models/model.json") = j.dump(); }

  // Writes the entries (stored, or deflated where `deflate` says) as a zip.
  fs::path write(const std::function<bool(const std::string&)>& deflate = nullptr) {
    fs::path p = dir_ / "bad.pt2";
    std::ofstream(p, std::ios::binary | std::ios::trunc) << write_zip(entries_, deflate);
    return p;
  }

  // The InputError loading `p` throws.
  std::string load_error(const fs::path& p) {
    return input_error([&] {
      auto m = load_model(p.string());
      infer_shapes(*m->graph);
    });
  }

  ZipEntries entries_;
};

TEST_F(Pt2BadInput, RewrittenArchiveStillLoads) { EXPECT_NO_THROW(load_model(write().string())); }

TEST_F(Pt2BadInput, TruncatedZip) {
  std::string bytes = read_file_bytes(kMlp.string(), "model");
  fs::path p = dir_ / "cut.pt2";
  std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string e = load_error(p);
  EXPECT_NE(e.find("cut.pt2: not a valid .pt2 archive"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, CorruptEntryFailsItsChecksum) {
  std::string bytes = read_file_bytes(write().string(), "model");
  size_t at = bytes.find("\"graph_module\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] = 'G';
  fs::path p = dir_ / "crc.pt2";
  std::ofstream(p, std::ios::binary) << bytes;
  std::string e = load_error(p);
  EXPECT_NE(e.find("entry 'mlp/models/model.json': is corrupt"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, EntryEscapingTheArchive) {
  entries_.emplace_back("mlp/../../etc/passwd", "x");
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/../../etc/passwd' escapes the archive"), std::string::npos) << e;
}

// An archive has its entries in one top-level folder (torch 2.8 and later) or
// at the top (2.7 and earlier), not both.
TEST_F(Pt2BadInput, EntriesInAndOutsideTheFolder) {
  entries_.emplace_back("version", "8.7");
  std::string e = load_error(write());
  EXPECT_NE(e.find("bad.pt2: entries 'mlp/...' and 'version' lie in different top-level folders; a .pt2 archive has "
                   "one, or none"),
            std::string::npos)
      << e;
}

TEST_F(Pt2BadInput, WeightPathEscapingItsFolder) {
  json c = json::parse(entry("data/weights/model_weights_config.json"));
  c["config"]["fc1.weight"]["path_name"] = "../models/model.json";
  entry("data/weights/model_weights_config.json") = c.dump();
  std::string e = load_error(write());
  EXPECT_NE(e.find("model_weights_config.json': tensor 'fc1.weight' names the file '../models/model.json', which "
                   "escapes its folder"),
            std::string::npos)
      << e;
}

TEST_F(Pt2BadInput, WeightSmallerThanItsShape) {
  json c = json::parse(entry("data/weights/model_weights_config.json"));
  std::string file = c["config"]["fc1.weight"]["path_name"];
  entry("data/weights/" + file).resize(64);
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/data/weights/" + file + "': holds 16 elements, but tensor 'fc1.weight' of shape [32, 16]"),
            std::string::npos)
      << e;
}

TEST_F(Pt2BadInput, WeightNotWholeElements) {
  json c = json::parse(entry("data/weights/model_weights_config.json"));
  std::string file = c["config"]["fc1.bias"]["path_name"];
  entry("data/weights/" + file).resize(7);
  std::string e = load_error(write());
  EXPECT_NE(e.find("holds 7 bytes, not a whole number of f32 elements (for tensor 'fc1.bias')"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, WeightShapeDisagreesWithTheGraph) {
  json c = json::parse(entry("data/weights/model_weights_config.json"));
  c["config"]["fc1.bias"]["tensor_meta"]["sizes"][0]["as_int"] = 31;
  entry("data/weights/model_weights_config.json") = c.dump();
  std::string e = load_error(write());
  EXPECT_NE(e.find("tensor 'fc1.bias' is f32[31] but the graph reads it as f32[32]"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, ZipBombIsRefusedBeforeInflating) {
  entries_.emplace_back("mlp/data/weights/bomb", std::string(size_t{4} << 20, '\0'));
  std::string e = load_error(write([](const std::string& n) { return n.find("bomb") != std::string::npos; }));
  EXPECT_NE(e.find("entry 'mlp/data/weights/bomb' would inflate from"), std::string::npos) << e;
  EXPECT_NE(e.find("(a zip bomb?)"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, TotalSizeIsCapped) {
  Pt2Limits limits;
  limits.max_total_bytes = 4096;
  const std::string what = input_error([&] { import_pt2_bytes(read_file_bytes(kMlp.string(), "model"), "mlp.pt2", limits); });
  EXPECT_NE(what.find("mlp.pt2: the .pt2 archive's entries add up to more than"), std::string::npos) << what;
}

TEST_F(Pt2BadInput, UnknownArchiveVersion) {
  entry("archive_version") = "7";
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/archive_version': is '7', which tcc does not know"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, UnknownSchemaVersion) {
  json j = model();
  j["schema_version"]["major"] = 99;
  set_model(j);
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/models/model.json': has schema version 99."), std::string::npos) << e;
}

TEST_F(Pt2BadInput, NotJson) {
  entry("models/model.json") = "{\"graph_module\": ";
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/models/model.json': is not valid JSON"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, JsonOfTheWrongShape) {
  const json original = model();
  json j = original;
  j["graph_module"]["graph"]["nodes"] = json::object();
  set_model(j);
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/models/model.json': the graph's 'nodes' is a object, expected array"), std::string::npos)
      << e;

  j = original;
  j["graph_module"]["graph"]["nodes"][0]["inputs"][0]["arg"] = {{"as_int", 3}};
  set_model(j);
  e = load_error(write());
  EXPECT_NE(e.find("node 'linear' (aten.linear.default)"), std::string::npos) << e;
  EXPECT_NE(e.find("argument 'input' must be a tensor, got as_int"), std::string::npos) << e;

  j = original;
  j["graph_module"]["graph"]["nodes"][1]["inputs"][0]["arg"]["as_tensor"]["name"] = "nowhere";
  set_model(j);
  e = load_error(write());
  EXPECT_NE(e.find("reads tensor 'nowhere', which no input or earlier node defines"), std::string::npos) << e;

  j = original;
  j["graph_module"]["graph"]["tensor_values"]["x"]["sizes"][0] = {{"as_expr", {{"expr_str", "Max(s1, 3)"}}}};
  set_model(j);
  e = load_error(write());
  EXPECT_NE(e.find("tensor 'x''s size has the symbolic size 'Max(s1, 3)', which tcc cannot read"), std::string::npos)
      << e;
}

// A convolution or pool of an operand without batch, channel and spatial dims
// (the MLP's first node made a pool of the rank-1 buffer, or a convolution
// with it as the weight) names the node and the argument.
TEST_F(Pt2BadInput, PoolOrConvOfTooFewDims) {
  const json original = model();
  for (const char* target : {"max_pool2d.default", "avg_pool2d.default", "conv2d.default"}) {
    json j = original;
    json& node = j["graph_module"]["graph"]["nodes"][0];
    node["target"] = std::string("torch.ops.aten.") + target;
    bool conv = std::string(target) == "conv2d.default";
    node["inputs"] = json::array({{{"name", conv ? "input" : "self"}, {"arg", {{"as_tensor", {{"name", conv ? "x" : "b_scale"}}}}}},
                                  {{"name", "kernel_size"}, {"arg", {{"as_ints", {2, 2}}}}}});
    if (conv) node["inputs"][1] = {{"name", "weight"}, {"arg", {{"as_tensor", {{"name", "b_scale"}}}}}};
    set_model(j);
    std::string e = load_error(write());
    EXPECT_NE(e.find(std::string("(aten.") + target + ")"), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("argument '") + (conv ? "weight" : "self") +
                     "' has rank 1; expected batch, channels and spatial dims"),
              std::string::npos)
        << e;
  }
}

TEST_F(Pt2BadInput, NotAProgramArchive) {
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [](const auto& e) { return e.first.find("archive_format") != std::string::npos; }),
                 entries_.end());
  std::string e = load_error(write());
  EXPECT_NE(e.find("entry 'mlp/archive_format': is missing"), std::string::npos) << e;
}

TEST_F(Pt2BadInput, UnknownOpIsAGraphBreakNotAnError) {
  json j = model();
  for (json& n : j["graph_module"]["graph"]["nodes"])
    if (n["target"] == "torch.ops.aten.silu.default") n["target"] = "torch.ops.aten.frobnicate.default";
  set_model(j);
  fs::path p = write();
  auto m = load_model(p.string());
  bool found = false;
  for (const auto& n : m->graph->nodes()) found = found || (n->domain() == "aten" && n->op_type() == "aten.frobnicate.default");
  EXPECT_TRUE(found);
  CliResult r = run_tcc("explain " + shell_quote(p.string()) + " --format json", "", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  json report = json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(report["graph_break_count"], 1) << report["graph_breaks"].dump(1);
  EXPECT_NE(report["graph_breaks"].dump().find("aten.frobnicate.default"), std::string::npos)
      << report["graph_breaks"].dump(1);
}

TEST_F(Pt2BadInput, CliExitsTwoNamingTheArchive) {
  entry("archive_version") = "7";
  fs::path p = write();
  CliResult r = run_tcc("opt " + shell_quote(p.string()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.pt2: entry 'mlp/archive_version'"), std::string::npos) << r.output;
}

// An in-place op maps as its functional form only where nothing reads the
// operand it writes afterwards: the MLP's silu node, made relu_ of its own
// operand, becomes a Relu; made relu_ of `gelu`, which a later mul reads, it
// stays an opaque aten node (a graph break), since tcc's values do not change
// after they are computed.
TEST_F(Pt2BadInput, InPlaceOpMapsOnlyWhereItsOperandIsNotReadAfter) {
  auto aten_relu_nodes = [](const Model& m) {
    return std::count_if(m.graph->nodes().begin(), m.graph->nodes().end(),
                         [](const auto& n) { return n->op_type() == "aten.relu_.default"; });
  };
  const json original = model();
  for (const char* operand : {"linear_1", "gelu"}) {
    json j = original;
    json& silu = j["graph_module"]["graph"]["nodes"][3];
    ASSERT_EQ(silu["target"], "torch.ops.aten.silu.default");
    silu["target"] = "torch.ops.aten.relu_.default";
    silu["inputs"][0]["arg"]["as_tensor"]["name"] = operand;
    set_model(j);
    auto m = load_model(write().string());
    EXPECT_EQ(aten_relu_nodes(*m), operand == std::string("gelu") ? 1 : 0) << operand;
  }
}

}  // namespace
}  // namespace tcc
