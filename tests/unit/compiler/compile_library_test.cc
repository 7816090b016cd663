// The compiler as a library (src/compiler/compile.h), called in process: the
// stages in order with the graph each leaves, the module in memory and the
// directory write_module writes from it, the result against the module
// directory it wrote, and the request's checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "frontends/load_model.h"
#include "codegen/toolchain.h"
#include "src/compiler/compile.h"
#include "src/interp/interpreter.h"
#include "src/ops/fusion.h"
#include "tests/unit/support/compile_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + name; }

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

int fusions(const Graph& g) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(), [](const auto& n) { return is_fusion(*n); }));
}

class CompileLibrary : public TempDirTest {
 protected:
  CompileRequest request(const std::string& model, const std::string& mode = "default") {
    CompileRequest r;
    r.model = fixture(model);
    r.output = (dir_ / "module").string();
    r.options = quick_compile_options();
    r.options.host = false;
    r.options.mode = mode;
    return r;
  }
};

// print_after sees every stage of the default mode once, in order (no
// autotune), and the graph each left: nodes as loaded, tcc::Fusion nodes from
// the passes on.
TEST_F(CompileLibrary, StageHookSeesTheStagesInOrder) {
  CompileRequest req = request("mlp.onnx");
  std::vector<std::string> stages;
  std::vector<int> fused;
  std::vector<size_t> kernels;
  req.print_after = [&](const std::string& stage, const CompileResult& so_far) {
    stages.push_back(stage);
    fused.push_back(fusions(*so_far.model->graph));
    kernels.push_back(so_far.schedule.kernels.size());
  };
  CompileResult r = compile(req);
  EXPECT_EQ(stages, (std::vector<std::string>{"load", "shapes", "passes", "schedule", "memory", "emit", "build",
                                              "write"}));
  ASSERT_EQ(fused.size(), 8u);
  EXPECT_EQ(fused[0], 0);
  EXPECT_EQ(fused[1], 0);
  EXPECT_GT(fused[2], 0);
  EXPECT_EQ(fused.back(), fusions(*r.model->graph));
  EXPECT_EQ(kernels[2], 0u);  // the kernels come with the schedule
  EXPECT_EQ(kernels[3], r.schedule.kernels.size());
  EXPECT_GT(kernels[3], 0u);
  for (const std::string& s : stages)
    EXPECT_NE(std::find(kCompileStages.begin(), kCompileStages.end(), s), kCompileStages.end()) << s;
}

std::vector<char> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Without an output, the module stays in memory: the stages up to build run
// (no write), and the result holds the CUDA source, a cubin defining every
// generated kernel, and the host source and library (an ELF shared object)
// defining each kernel's CPU version. Nothing is written where a module could
// go.
TEST_F(CompileLibrary, CompilesIntoMemory) {
  CompileRequest req = request("trig_activations.tir");
  req.model = std::string(TCC_SOURCE_DIR) + "/tests/kernels/trig_activations.tir";
  req.output.clear();
  req.options.host = true;
  std::vector<std::string> stages;
  req.print_after = [&](const std::string& stage, const CompileResult&) { stages.push_back(stage); };
  CompileResult r = compile(req);
  EXPECT_EQ(stages, (std::vector<std::string>{"load", "shapes", "passes", "schedule", "memory", "emit", "build"}));
  EXPECT_EQ(r.timings.write, 0);
  EXPECT_TRUE(fs::is_empty(dir_));
  ASSERT_FALSE(r.schedule.kernels.empty());
  EXPECT_EQ(r.configs.size(), r.schedule.kernels.size());
  ASSERT_EQ(r.binaries.size(), 1u);
  EXPECT_EQ(r.binaries[0].arch, "sm_90");
  EXPECT_EQ(r.binaries[0].file, "kernels.sm_90.cubin");
  std::vector<std::string> symbols = cubin_symbols(r.binaries[0].bytes);
  ASSERT_GE(r.host_library.size(), 4u);
  EXPECT_EQ(std::string(r.host_library.begin(), r.host_library.begin() + 4), "\x7f" "ELF");
  for (const kir::Kernel& k : r.schedule.kernels) {
    EXPECT_NE(r.cuda_source.find(k.name), std::string::npos) << k.name;
    EXPECT_NE(r.host_source.find(k.name), std::string::npos) << k.name;
    EXPECT_NE(std::find(symbols.begin(), symbols.end(), k.name), symbols.end()) << k.name << " is not in the cubin";
  }
  std::string library(r.host_library.begin(), r.host_library.end());
  for (const kir::Kernel& k : r.schedule.kernels) EXPECT_NE(library.find(k.name), std::string::npos) << k.name;
}

// write_module writes the module in memory as a directory: the binaries and
// the host library byte for byte, a manifest of its kernels and schedule, the
// write's time; the host build computes what the interpreter does. A
// non-empty directory that is not a module is refused.
TEST_F(CompileLibrary, WritesTheModuleInMemory) {
  CompileRequest req = request("trig_activations.tir");
  req.model = std::string(TCC_SOURCE_DIR) + "/tests/kernels/trig_activations.tir";
  req.output.clear();
  req.options.host = true;
  CompileResult r = compile(req);
  fs::path module = dir_ / "module";
  write_module(r, module.string());
  EXPECT_GT(r.timings.write, 0);
  ASSERT_EQ(r.binaries.size(), 1u);
  EXPECT_EQ(read_bytes(module / r.binaries[0].file), r.binaries[0].bytes);
  EXPECT_EQ(read_bytes(module / "host.so"), r.host_library);
  std::vector<char> host_source = read_bytes(module / "host.cc");
  EXPECT_EQ(std::string(host_source.begin(), host_source.end()), r.host_source);
  json manifest = read_json(module / "manifest.json");
  ASSERT_EQ(manifest["kernels"].size(), r.schedule.kernels.size());
  for (size_t i = 0; i < r.schedule.kernels.size(); ++i)
    EXPECT_EQ(manifest["kernels"][i]["name"], r.schedule.kernels[i].name);
  EXPECT_EQ(manifest["schedule"].size(), r.schedule.steps.size());
  EXPECT_TRUE(fs::exists(module / "report.json"));

  std::unique_ptr<Model> loaded = load_model(req.model);
  std::map<std::string, Tensor> inputs = random_inputs(*loaded->graph, 3, 1);
  std::vector<Tensor> want = Interpreter().run(*loaded->graph, inputs);
  std::vector<Tensor> got = run_module_on_host(module, inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    expect_close_to(got[i], want[i], "output " + std::to_string(i), "the interpreter");

  fs::path other = dir_ / "not_a_module";
  fs::create_directories(other);
  std::ofstream(other / "notes.txt") << "mine";
  const std::string what = input_error([&] { write_module(r, other.string()); });
  EXPECT_NE(what.find("not empty and not a tcc module"), std::string::npos) << what;
  EXPECT_TRUE(fs::exists(other / "notes.txt"));
}

// In a mode that autotunes, the autotune stage runs between memory and emit,
// and the result says how every kernel's configuration was chosen.
TEST_F(CompileLibrary, AutotuneModesRunTheAutotuneStage) {
  CompileRequest req = request("mlp.onnx", "max-autotune");
  std::vector<std::string> stages;
  req.print_after = [&](const std::string& stage, const CompileResult&) { stages.push_back(stage); };
  CompileResult r = compile(req);
  auto at = std::find(stages.begin(), stages.end(), "autotune");
  ASSERT_NE(at, stages.end());
  EXPECT_EQ(*(at - 1), "memory");
  EXPECT_EQ(*(at + 1), "emit");
  ASSERT_TRUE(r.autotune.has_value());
  EXPECT_EQ(r.autotune->sources.size(), r.schedule.kernels.size());
  EXPECT_EQ(static_cast<size_t>(r.autotune->measured + r.autotune->from_cache + r.autotune->heuristic),
            r.schedule.kernels.size());
}

// The result describes the module it wrote: kernels, steps, fallbacks (the
// NonZero fixture has one), views, binding steps, the memory plan and the
// passes match the manifest and report.json.
TEST_F(CompileLibrary, ResultMatchesTheManifest) {
  for (const char* model : {"gpt2_block.onnx", "nonzero.tir"}) {
    CompileResult r = compile(request(model));
    json manifest = read_json(dir_ / "module" / "manifest.json");
    json report = read_json(dir_ / "module" / "report.json");
    EXPECT_EQ(r.mode->name, "default");
    EXPECT_EQ(manifest["kernels"].size(), r.schedule.kernels.size()) << model;
    EXPECT_EQ(manifest["schedule"].size(), r.schedule.steps.size()) << model;
    size_t fallback_steps = std::count_if(manifest["schedule"].begin(), manifest["schedule"].end(),
                                          [](const json& s) { return s.contains("fallback"); });
    EXPECT_EQ(fallback_steps, r.fallbacks.size()) << model;
    ASSERT_EQ(report["fallbacks"].size(), r.fallbacks.size()) << model;
    for (size_t i = 0; i < r.fallbacks.size(); ++i) {
      EXPECT_EQ(report["fallbacks"][i]["node"], r.fallbacks[i].node) << model;
      EXPECT_EQ(report["fallbacks"][i]["reason"], r.fallbacks[i].reason) << model;
    }
    EXPECT_EQ(report["summary"]["views"], r.schedule.views.size()) << model;
    EXPECT_EQ(report["summary"]["binding_steps"], r.schedule.binding_steps.size()) << model;
    const SymExpr& arena = r.memory.arena_bytes;
    EXPECT_EQ(manifest["memory"]["arena_bytes"], arena.is_constant() ? json(arena.constant_value()) : json(arena.str()))
        << model;
    EXPECT_EQ(manifest["memory"]["buffers"].size(), r.memory.buffers.size()) << model;
    EXPECT_EQ(report["sizes"], json(r.sizes)) << model;
    ASSERT_EQ(report["passes"].size(), r.passes.size()) << model;
    EXPECT_EQ(manifest["outputs"].size(), r.model->graph->outputs().size()) << model;
    if (std::string(model) == "nonzero.tir") {
      EXPECT_FALSE(r.fallbacks.empty());
    }
  }
}

// Flags that contradict the mode fail before the model is read: the missing
// file is never reported.
TEST_F(CompileLibrary, ChecksTheRequestBeforeReadingTheModel) {
  CompileRequest req = request("no_such_model.onnx");
  req.cache = (dir_ / "cache.json").string();
  const std::string what = input_error([&] { compile(req); });
  EXPECT_NE(what.find("--cache and --device-name apply to modes that autotune"), std::string::npos) << what;
  EXPECT_FALSE(fs::exists(dir_ / "module"));
}

// --disable-passes leaves a pass out to measure what it buys: without
// fuse_attention, GPT-2's attention is the score GEMMs and softmax it was
// exported as. Unknown passes, and those the later stages need, are refused
// before the model is read.
TEST_F(CompileLibrary, DisabledPassesAreLeftOut) {
  auto attention_kernels = [](const CompileResult& r) {
    return std::count_if(r.schedule.kernels.begin(), r.schedule.kernels.end(),
                         [](const kir::Kernel& k) { return k.attention.has_value(); });
  };
  CompileRequest req = request("gpt2_block.onnx");
  EXPECT_EQ(attention_kernels(compile(req)), 1);
  req.disabled_passes = {"fuse_attention"};
  CompileResult without = compile(req);
  EXPECT_EQ(attention_kernels(without), 0);
  EXPECT_TRUE(std::none_of(without.passes.begin(), without.passes.end(),
                           [](const PassRecord& p) { return p.name == "fuse_attention"; }));
  const std::pair<const char*, const char*> refused[] = {
      {"no_such_pass", "--disable-passes: unknown pass 'no_such_pass'"},
      {"fuse", "--disable-passes: 'fuse' cannot be left out"},
      {"decompose", "--disable-passes: 'decompose' cannot be left out"}};
  for (const auto& [pass, message] : refused) {
    CompileRequest bad = request("no_such_model.onnx");
    bad.disabled_passes = {pass};
    const std::string what = input_error([&] { compile(bad); });
    EXPECT_NE(what.find(message), std::string::npos) << what;
  }
}

// Models of the trigonometric, activation and bitwise ops (tests/kernels, where
// kernel_numerics_test runs their kernels against the interpreter) compile
// into generated kernels alone: no node is left to a host step.
TEST_F(CompileLibrary, PointwiseMathAndBitwiseOpsNeedNoHostStep) {
  for (const char* model : {"trig_activations.tir", "bitwise.tir"}) {
    CompileRequest req = request(model);
    req.model = std::string(TCC_SOURCE_DIR) + "/tests/kernels/" + model;
    CompileResult r = compile(req);
    for (const FallbackReason& f : r.fallbacks) ADD_FAILURE() << model << ": a host step: " << f.node << " (" << f.op_type << ")";
    std::set<std::string> in_kernels;
    for (const kir::Kernel& k : r.schedule.kernels) in_kernels.insert(k.nodes.begin(), k.nodes.end());
    std::unique_ptr<Model> loaded = load_model(req.model);
    for (const auto& n : loaded->graph->nodes())
      EXPECT_TRUE(in_kernels.count(n->name())) << model << ": " << n->name() << " (" << n->op_type() << ") is in no kernel";
  }
}

// Upsampling that compiles through a decomposition (tests/kernels: a
// decoder's Resize ×2, nearest then linear, with constant scales; a
// ConvTranspose with a constant W) leaves no host step with a symbolic batch,
// and the module's host build computes what the interpreter computes on the
// original nodes.
TEST_F(CompileLibrary, DecomposedUpsamplingNeedsNoHostStep) {
  for (const char* model : {"resize.tir", "conv_transpose.tir"}) {
    fs::path file = fs::path(TCC_SOURCE_DIR) / "tests/kernels" / model;
    compile_with_no_host_step(file, dir_ / model);
    if (HasFatalFailure()) return;
    std::unique_ptr<Model> loaded = load_model(file.string());
    std::map<std::string, Tensor> inputs = random_inputs(*loaded->graph, 3, 1);
    std::vector<Tensor> want = Interpreter().run(*loaded->graph, inputs);
    std::vector<Tensor> got = run_module_on_host(dir_ / model, inputs);
    ASSERT_EQ(got.size(), want.size()) << model;
    for (size_t i = 0; i < want.size(); ++i)
      expect_close_to(got[i], want[i], std::string(model) + " output " + std::to_string(i), "the interpreter");
  }
}

}  // namespace
}  // namespace tcc
