// torch.export .pt2 archives (tests/pt2, written by scripts/gen-pt2 with
// PyPI's torch): an MLP, a CNN, a GPT-style block, transformers' GPT-2 and
// torchvision's MobileNetV3 (in-place activations in the training IR, clamp in
// core ATen), each in the training IR and in core ATen. The interpreter and
// the compiled module's host build match torch's outputs, compile has no host
// step, explain finds no graph break, and the graph signature's parameters,
// buffers, symbols and sources arrive (training and guards from them:
// tests/unit/compiler/pt2_compile_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kPt2 = fs::path(TCC_SOURCE_DIR) / "tests/pt2";

struct Program {
  std::string model;  // folder of inputs and outputs
  std::string file;   // archive
};

void PrintTo(const Program& p, std::ostream* os) { *os << p.file; }

// Older releases' layouts (torch<major.minor>/, the MLP and the GPT-style block).
const char* const kOldReleases[] = {"torch2.6", "torch2.7", "torch2.8"};

std::vector<Program> programs() {
  std::vector<Program> out;
  for (const char* m : {"mlp", "cnn", "gpt_block", "hf_gpt2", "mobilenetv3"})
    for (const char* suffix : {".pt2", ".core.pt2"}) out.push_back({m, std::string(m) + suffix});
  for (std::string release : kOldReleases)
    for (const char* m : {"mlp", "gpt_block"})
      for (const char* suffix : {".pt2", ".core.pt2"})
        out.push_back({release + "/" + m, release + "/" + m + suffix});
  return out;
}

std::string test_name(const ::testing::TestParamInfo<Program>& i) {
  std::string n = i.param.file.substr(0, i.param.file.size() - 4);
  for (char& c : n)
    if (c == '.' || c == '/') c = '_';
  return n;
}

std::map<std::string, Tensor> inputs_of(const std::string& model) { return read_example_inputs(kPt2 / model); }

Tensor expected_of(const std::string& model) { return read_example_outputs(kPt2 / model).at(0); }

class Pt2Program : public TempDirFixture<::testing::TestWithParam<Program>> {};

TEST_P(Pt2Program, InterpreterMatchesTorch) {
  auto m = load_model((kPt2 / GetParam().file).string());
  infer_shapes(*m->graph);
  Interpreter interp;
  std::vector<Tensor> out = interp.run(*m->graph, inputs_of(GetParam().model));
  ASSERT_EQ(out.size(), 1u);
  expect_close_to(out[0], expected_of(GetParam().model), GetParam().file, "torch");
}

TEST_P(Pt2Program, ExplainFindsNoGraphBreak) {
  CliResult r = run_tcc("explain " + shell_quote((kPt2 / GetParam().file).string()) + " --format json", "", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  json j = json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["graph_break_count"], 0) << j["graph_breaks"].dump(1);
}

TEST_P(Pt2Program, CompilesWithNoHostStepAndMatchesTorch) {
  compile_with_no_host_step(kPt2 / GetParam().file, dir_ / "module");
  if (HasFatalFailure()) return;
  std::map<std::string, Tensor> inputs = inputs_of(GetParam().model);
  std::vector<Tensor> outs = run_module_on_host(dir_ / "module", inputs);
  ASSERT_EQ(outs.size(), 1u);
  expect_close_to(outs[0], expected_of(GetParam().model), GetParam().file + " (host build)", "torch");
}

INSTANTIATE_TEST_SUITE_P(Programs, Pt2Program, ::testing::ValuesIn(programs()), test_name);

// The layouts of torch 2.8 (weights torch.save'd in the folder) and 2.7 and
// earlier (no folder, serialized_exported_program.json) carry the same
// signature: the MLP's Linear layers are its parameters, its buffer `scale`
// an initializer; the graph is named by the folder, or by the file without one.
TEST(Pt2Import, OlderLayoutsKeepTheSignature) {
  const std::set<std::string> linear = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"};
  for (std::string release : kOldReleases)
    for (const char* file : {"mlp.pt2", "mlp.core.pt2"}) {
      const std::string path = release + "/" + file;
      auto m = load_model((kPt2 / path).string());
      std::set<std::string> names;
      for (const Value* v : m->graph->initializers())
        if (v->role() == InitializerRole::Parameter) names.insert(v->name());
      EXPECT_EQ(names, linear) << path;
      const Value* scale = m->graph->find("scale");
      ASSERT_NE(scale, nullptr) << path;
      ASSERT_TRUE(scale->is_initializer()) << path;
      EXPECT_EQ(scale->role(), InitializerRole::Buffer) << path;
      EXPECT_EQ(scale->initializer().shape(), std::vector<int64_t>{4}) << path;
      EXPECT_FLOAT_EQ(scale->initializer().data<float>()[3], 1.5f) << path;
      EXPECT_EQ(m->producer.rfind("torch " + release.substr(5) + ".", 0), 0u) << m->producer;
      EXPECT_EQ(m->graph->name(), std::string(file).substr(0, std::strlen(file) - 4)) << path;
    }
}

TEST(Pt2Import, SignatureBecomesInputsAndInitializers) {
  auto m = load_model((kPt2 / "gpt_block.pt2").string());
  const Graph& g = *m->graph;
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0]->name(), "ids");
  const Type& t = g.inputs()[0]->type();
  ASSERT_TRUE(t.is_tensor() && t.rank() == 2);
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_FALSE(t.shape()[0].is_static());
  EXPECT_FALSE(t.shape()[1].is_static());
  // Parameters and buffers, named by their module path.
  std::set<std::string> inits;
  for (const Value* v : g.initializers()) inits.insert(v->name());
  for (const char* name : {"tok.weight", "blocks.0.qkv.weight", "blocks.1.ln2.bias", "blocks.1.mask", "head.weight"})
    EXPECT_TRUE(inits.count(name)) << name;
  // range_constraints: batch in [2, 64], seq in [2, 11].
  std::string batch = t.shape()[0].str(), seq = t.shape()[1].str();
  EXPECT_EQ(m->metadata["pt2.range." + batch], "[2, 64]");
  EXPECT_EQ(m->metadata["pt2.range." + seq], "[2, 11]");
  EXPECT_EQ(m->metadata["pt2.dialect"], "TRAINING");
  EXPECT_EQ(m->producer.rfind("torch 2.", 0), 0u) << m->producer;
}

// A call outside range_constraints is one the exported program refuses (its
// input check raises): explain lists it and exits 1 naming the dim, the range
// and the call, whether a recompile, --dynamic true or --mark-dynamic would
// make its variant symbolic, and for a lone first call as well; calls within
// the range still recompile as usual.
TEST(Pt2Import, ExplainRejectsCallsOutsideTheExportedRange) {
  const fs::path archive = kPt2 / "gpt_block.pt2";
  fs::path dir = make_temp_dir("tcc_pt2_range_trace");
  auto trace = [&](const std::string& name, std::initializer_list<int> seqs) {
    fs::path p = dir / (name + ".jsonl");
    std::ofstream f(p);
    for (int seq : seqs) f << "{\"ids\": {\"shape\": [3, " << seq << "], \"dtype\": \"int64\"}}\n";
    return shell_quote(p.string());
  };
  const std::string model = shell_quote(archive.string());
  struct Case {
    std::string trace, flags;
    size_t call;
  };
  for (const Case& c : {Case{trace("grow", {5, 12}), "", 1}, Case{trace("grow", {5, 12}), "--dynamic false", 1},
                        Case{trace("lone", {12}), "", 0}, Case{trace("lone", {12}), "--dynamic true", 0},
                        Case{trace("lone", {12}), "--mark-dynamic ids:1", 0}}) {
    CliResult r = run_tcc("explain " + model + " --trace " + c.trace + " " + c.flags, "", 60);
    const std::string why = "call " + std::to_string(c.call) + ": ids.size()[1] = 12 is outside the exported range [2, 11]";
    EXPECT_EQ(r.code, 1) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find("Rejected Calls: 1 "), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find("  " + why), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find("gate tripped: the exported program raises at " + why), std::string::npos)
        << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find("Compiles: " + std::to_string(c.call == 1 ? 1 : 0) + "\n"), std::string::npos)
        << c.flags << "\n" << r.output;
  }

  // Within the range: the second length recompiles with seq symbolic, whose
  // variant carries the range's bound; nothing is rejected.
  CliResult ok = run_tcc("explain " + model + " --trace " + trace("within", {5, 11, 7}) + " --format json", "", 60);
  ASSERT_EQ(ok.code, 0) << ok.output;
  json j = json::parse(ok.output.substr(ok.output.find('{')));
  EXPECT_EQ(j["rejected_call_count"], 0);
  EXPECT_TRUE(j["rejected_calls"].empty());
  EXPECT_EQ(j["recompile_count"], 1) << j["recompiles"].dump(1);
  EXPECT_NE(j["graphs"][0]["guards"].dump().find("ids.size()[1] <= 11"), std::string::npos);

  // The JSON lists each distinct rejected call once, at its first call, and counts them all.
  CliResult bad = run_tcc("explain " + model + " --trace " + trace("mixed", {12, 5, 12, 70}) + " --format json", "", 60);
  ASSERT_EQ(bad.code, 1) << bad.output;
  // The report, then the gate's line on stderr.
  const size_t report_end = bad.output.rfind("\n}") + 2;
  j = json::parse(bad.output.substr(bad.output.find('{'), report_end - bad.output.find('{')));
  EXPECT_NE(bad.output.find("gate tripped: the exported program raises at call 0: ", report_end), std::string::npos)
      << bad.output;
  EXPECT_EQ(j["rejected_call_count"], 3);
  ASSERT_EQ(j["rejected_calls"].size(), 2u) << j["rejected_calls"].dump(1);
  EXPECT_EQ(j["rejected_calls"][1]["call"], 3);
  EXPECT_NE(j["rejected_calls"][1]["reason"].get<std::string>().find("ids.size()[1] = 70 is outside the exported range [2, 11]"),
            std::string::npos);
  EXPECT_EQ(j["compiles"], 1);
  fs::remove_all(dir);
}

// The compile reports name the source of each kernel's nodes: the MLP's GEMM
// kernels compute fc1, fc2 and fc3, each at its line of scripts/gen-pt2.
TEST(Pt2Import, CompileReportNamesEachKernelsSources) {
  fs::path dir = make_temp_dir("tcc_pt2_report");
  CliResult r = run_tcc("compile " + shell_quote((kPt2 / "mlp.pt2").string()) + " -o " +
                            shell_quote((dir / "m").string()) + " --no-host --arch sm_90 --no-ptx",
                        "", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream report_file(dir / "m" / "report.json");
  json report = json::parse(report_file);
  std::set<std::string> gemm_modules;
  for (const json& k : report["kernels"]) {
    ASSERT_TRUE(k.contains("sources")) << k.dump();
    for (const json& src : k["sources"]) {
      std::string text = src.get<std::string>();
      EXPECT_EQ(text.rfind("gen-pt2:", 0), 0u) << text;
      if (k["kind"] == "gemm" && text.find(" (fc") != std::string::npos) gemm_modules.insert(text.substr(text.find('(')));
    }
  }
  EXPECT_EQ(gemm_modules, (std::set<std::string>{"(fc1)", "(fc2)", "(fc3)"})) << report["kernels"].dump(1);
  std::string md = read_text(dir / "m" / "report.md");
  EXPECT_NE(md.find("| bound | nodes | source |"), std::string::npos) << md;
  EXPECT_NE(md.find(" (fc1) |"), std::string::npos) << md;
  fs::remove_all(dir);
}

TEST(Pt2Import, NodesCarryTheUsersSourceAndModule) {
  auto m = load_model((kPt2 / "mlp.pt2").string());
  bool found = false;
  for (const auto& n : m->graph->nodes()) {
    if (n->op_type() != "Gemm") continue;
    EXPECT_NE(n->source().find("gen-pt2:"), std::string::npos) << n->source();
    EXPECT_NE(n->source().find("(fc"), std::string::npos) << n->source();
    found = true;
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tcc
