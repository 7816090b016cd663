// `tcc compile` end to end: the module directory of docs/MODULE.md for the
// bundled fixtures, its determinism, the cubins' symbols, and the flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "codegen/profiles.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "tests/unit/autotune/autotune_util.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + name; }

class CompileTest : public TempDirTest {
 protected:
  // Compiles a fixture into dir_/name and returns the tool's result.
  CliResult compile(const std::string& model, const std::string& name, const std::string& flags = "") {
    return run_tcc("compile " + shell_quote(fixture(model)) + " -o " + shell_quote((dir_ / name).string()) + " " +
                   flags);
  }
  json manifest(const std::string& name) { return json::parse(read_text(dir_ / name / "manifest.json")); }
};

TEST_F(CompileTest, ManifestHasTheDocumentedKeys) {
  for (const char* model : {"gpt2_block.onnx", "mlp.onnx"}) {
    CliResult r = compile(model, model, "--arch sm_90");
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find("kernels:"), std::string::npos) << r.output;
    // The manifest keeps docs/MODULE.md's key order (fallback.tir only with fallbacks).
    std::string text = read_text(dir_ / model / "manifest.json");
    json m = json::parse(text);
    std::vector<std::string> keys = {"format", "format_version", "tcc_version", "model", "model_path", "mode",
                                     "precision", "options", "random", "features", "inputs", "outputs", "symbols",
                                     "guards", "weights", "memory", "cuda", "host",
                                     "kernels", "schedule", "fallback_copies"};
    size_t at = 0;
    for (const std::string& k : keys) {
      ASSERT_TRUE(m.contains(k)) << model << ": " << k;
      size_t pos = text.find("\n  \"" + k + "\":");
      EXPECT_GT(pos, at) << model << ": " << k << " out of order";
      at = pos;
    }
    EXPECT_EQ(m["format"], "tcc-module");
    EXPECT_EQ(m["format_version"], 2);
    EXPECT_EQ(m["random"], false);
    EXPECT_EQ(m["model"], model);
    EXPECT_EQ(m["mode"], "default");
    EXPECT_EQ(m["precision"], "fp32");
    EXPECT_EQ(m["options"]["arch"], json::array({"sm_90"}));
    EXPECT_EQ(m["inputs"].size(), 1u);
    ASSERT_FALSE(m["kernels"].empty()) << model;
    for (const json& k : m["kernels"]) {
      EXPECT_TRUE(k.contains("name") && k.contains("kind") && k.contains("nodes") && k.contains("buffers") &&
                  k.contains("sizes") && k.contains("bytes_moved") && k.contains("flop"))
          << k.dump();
      EXPECT_FALSE(k["nodes"].empty()) << k.dump();
      EXPECT_TRUE(k["kind"] == "gemm" ? k.contains("gemm") : k.contains("launch")) << k.dump();
    }
    for (const json& s : m["schedule"]) EXPECT_TRUE(s.contains("kernel") || s.contains("fallback")) << s.dump();
    for (const char* f : {"kernels.cu", "kernels.sm_90.cubin", "kernels.compute_90.ptx", "host.cc", "host.so",
                          "weights.bin", "report.json", "report.md"})
      EXPECT_TRUE(fs::exists(dir_ / model / f)) << model << ": " << f;
    std::string report = read_text(dir_ / model / "report.md");
    for (const char* section : {"## Kernels", "## Nodes -> kernels", "## Memory plan", "## Compile time"})
      EXPECT_NE(report.find(section), std::string::npos) << section;
  }
}

// --precision: fp16 and bf16 make the GPT-2 block's GEMMs and its attention
// low precision (the report names each kernel's; the attention stays one
// kernel), and the host build of the module matches the reference interpreter
// within the precision's tolerance; tf32 keeps the graph f32 and marks the
// GEMMs tf32, which the manifest tells the runtime, and the attention kernel
// (heads of 16) multiplies on the tensor cores in TF32 (mma.sync.m16n8k8,
// operands rounded by cvt.rna.tf32.f32). An unknown precision exits 2.
TEST_F(CompileTest, PrecisionModesLowerTheProductsAndStayWithinTolerance) {
  for (const char* precision : {"fp16", "bf16", "tf32"}) {
    CliResult r = compile("gpt2_block.onnx", precision, std::string("--arch sm_90 --no-ptx --precision ") + precision);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_NE(r.output.find(std::string("precision: ") + precision), std::string::npos) << r.output;
    EXPECT_EQ(manifest(precision)["precision"], precision);
    json report = json::parse(read_text(dir_ / precision / "report.json"));
    EXPECT_EQ(report["precision"], precision);
    std::string gemm = std::string(precision) == "fp16" ? "f16" : std::string(precision) == "bf16" ? "bf16" : "tf32";
    int low_gemms = 0, attention = 0;
    for (const json& k : report["kernels"]) {
      if (k["kind"] == "gemm" && k["precision"] == gemm) ++low_gemms;
      if (k["kind"] == "attention") {
        ++attention;
        EXPECT_EQ(k["precision"], gemm) << k.dump();
      }
    }
    const std::string cu = read_text(dir_ / precision / "kernels.cu");
    const bool tf32 = gemm == "tf32";
    EXPECT_EQ(cu.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos, tf32) << precision;
    EXPECT_EQ(cu.find("cvt.rna.tf32.f32") != std::string::npos, tf32) << precision;
    EXPECT_EQ(low_gemms, 4) << precision << ": the QKV, output, and two MLP projections";
    EXPECT_EQ(attention, 1) << precision;
    CliResult run = run_tcc("run " + shell_quote((dir_ / precision).string()) + " --host --check --shapes batch=2,seq=16");
    EXPECT_EQ(run.code, 0) << run.output;
    EXPECT_NE(run.output.find(std::string("at ") + precision + " tolerance"), std::string::npos) << run.output;
  }
  CliResult bad = compile("mlp.onnx", "bad", "--precision fp8");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--precision"), std::string::npos) << bad.output;
}

// A CumSum whose rows are empty elsewhere (a dim of 0 makes its load's stride
// along the scanned axis 0) still lowers to a scan over element values, so it
// compiles and its host run gives the empty result (a mutation campaign's
// finding: the load and the scan were taken for row values, an internal error).
TEST_F(CompileTest, ScanOverAZeroSizeDimCompiles) {
  CliResult r = compile("cumsum_empty_rows.tir", "scan", "--arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  CliResult run = run_tcc("run " + shell_quote((dir_ / "scan").string()) + " --host --check --shapes b=3");
  EXPECT_EQ(run.code, 0) << run.output;
}

// --train --precision bf16 is mixed-precision training: the forward and
// backward GEMMs read bf16, while the parameters, Adam's moments and every
// updated value stay f32 (the master weights).
TEST_F(CompileTest, MixedPrecisionTrainingKeepsF32MasterWeights) {
  CliResult r = compile("mlp.onnx", "train", "--arch sm_90 --no-ptx --no-host --train --loss-fn mse --loss-on output "
                                             "--label target --optimizer adam --precision bf16");
  ASSERT_EQ(r.code, 0) << r.output;
  json m = manifest("train");
  for (const char* side : {"inputs", "outputs"})
    for (const json& v : m[side]) EXPECT_EQ(v["dtype"], "f32") << side << ": " << v.dump();
  json report = json::parse(read_text(dir_ / "train" / "report.json"));
  int gemms = 0;
  for (const json& k : report["kernels"])
    if (k["kind"] == "gemm") {
      ++gemms;
      EXPECT_EQ(k["precision"], "bf16") << k.dump();
    }
  EXPECT_EQ(gemms, 5) << "two forward GEMMs, three for their gradients";
}

// --train --precision bf16 of the GPT-2 block: the attention backward's
// gradient passes (heads of 16) take the tensor-core layout, named bf16 in the
// report and by their schedule in the manifest, their CUDA calling
// m16n8k16's bf16 helper, while the statistics pass stays f32 on the CUDA
// cores; the step's host build agrees with the interpreter running the
// training graph (--emit-onnx) at bf16 tolerance.
TEST_F(CompileTest, MixedPrecisionAttentionBackwardRunsOnTensorCores) {
  CliResult r = compile("gpt2_block.onnx", "train",
                        "--arch sm_90 --no-ptx --train --loss-fn mse --loss-on output --label target --optimizer "
                        "momentum --precision bf16 --emit-onnx " + shell_quote((dir_ / "step.onnx").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  json report = json::parse(read_text(dir_ / "train" / "report.json"));
  json m = manifest("train");
  int forward = 0, statistics = 0, gradients = 0;
  for (size_t i = 0; i < report["kernels"].size(); ++i) {
    const json& k = report["kernels"][i];
    if (k["kind"] != "attention") continue;
    const std::string schedule = m["kernels"][i]["schedule"];
    if (schedule.starts_with("backward stats")) {
      ++statistics;
      EXPECT_EQ(schedule, "backward stats pass, a warp per row, block 128");
    } else if (schedule.starts_with("backward")) {
      ++gradients;
      EXPECT_EQ(k["precision"], "bf16") << k.dump();
      EXPECT_NE(schedule.find("tensor-core layout (mma.sync m16n8k16)"), std::string::npos) << schedule;
    } else {
      ++forward;
    }
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(statistics, 1);
  EXPECT_EQ(gradients, 2) << "dQ, and dK with dV";
  EXPECT_NE(read_text(dir_ / "train" / "kernels.cu").find("tcc_mma_bf16("), std::string::npos);
  CliResult run = run_tcc("run " + shell_quote((dir_ / "train").string()) + " --host --check --shapes batch=2,seq=16");
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("at bf16 tolerance"), std::string::npos) << run.output;
}

// The report's kernel table says how each kernel runs on the GPU: GPT-2's
// layer norms keep their rows in registers, its attention is the fused
// attention kernel, the head splits are vectorized copies, its GEMMs are
// cuBLASLt calls.
TEST_F(CompileTest, ReportNamesEachKernelsSchedule) {
  CliResult r = compile("gpt2_block.onnx", "g", "--no-host --arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  std::string report = read_text(dir_ / "g" / "report.md");
  EXPECT_NE(report.find("| kernel | kind | precision | schedule | steps |"), std::string::npos) << report;
  for (const char* row : {"| reduction | f32 | block 64, rows 1, row cache 1 |",
                          "| attention | f32 | split layout, block 128, rows 32, 4 lanes a row |",
                          "| pointwise | f32 | block 256, vector 4 |", "| gemm | f32 | cuBLASLt algorithm #0 |"})
    EXPECT_NE(report.find(row), std::string::npos) << row << "\n" << report;
}

// --time-passes prints the graph passes' table, then the kernel-IR passes'
// (the schedule stage's pipeline), each with its counters.
TEST_F(CompileTest, TimePassesTimesTheKernelIrPassesToo) {
  CliResult r = compile("mlp.onnx", "t", "--no-host --arch sm_90 --no-ptx --time-passes");
  ASSERT_EQ(r.code, 0) << r.output;
  size_t fuse = r.output.find("\nfuse ");
  size_t collapse = r.output.find("\ncollapse_axes ");
  ASSERT_NE(fuse, std::string::npos) << r.output;
  ASSERT_NE(collapse, std::string::npos) << r.output;
  EXPECT_LT(fuse, collapse);
  size_t vectorize = r.output.find("\nvectorize ", collapse);
  size_t split = r.output.find("\nsplit_reductions ", vectorize);
  size_t choose = r.output.find("\nchoose_schedule ", split);
  ASSERT_NE(choose, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("scheduled=", choose), std::string::npos) << r.output;
}

// --print-after dumps the main graph after the named stages, in stage order,
// to stderr: as loaded (no tcc::Fusion yet), then fused; from the schedule on
// the kernels too, as kernel IR. An unknown stage is refused with the list of
// stages.
TEST_F(CompileTest, PrintAfterDumpsTheNamedStages) {
  CliResult r = compile("mlp.onnx", "m", "--no-host --arch sm_90 --no-ptx --print-after passes,load,schedule");
  ASSERT_EQ(r.code, 0) << r.output;
  size_t load = r.output.find("// ----- IR after compile stage load -----\n");
  size_t passes = r.output.find("// ----- IR after compile stage passes -----\n");
  ASSERT_NE(load, std::string::npos) << r.output;
  ASSERT_NE(passes, std::string::npos) << r.output;
  EXPECT_LT(load, passes);
  EXPECT_EQ(r.output.find("IR after compile stage shapes"), std::string::npos);
  EXPECT_EQ(r.output.substr(load, passes - load).find("tcc::Fusion"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tcc::Fusion", passes), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  kernels:"), std::string::npos) << r.output;
  size_t kernels = r.output.find("// ----- kernel IR after compile stage schedule -----\n");
  ASSERT_NE(kernels, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("kernel IR after compile stage passes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nkernel ", kernels), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" gemm domain [", kernels), std::string::npos) << r.output;
  // The schedule passes' choices are in the kernel IR.
  EXPECT_NE(r.output.find("\n  schedule block=", kernels), std::string::npos) << r.output;
}

// --print-after also takes graph passes, printing the main graph after each
// (canonicalize's has no fusion yet, fuse's has), and kernel-IR passes,
// printing each kernel after each, named after its fusion node; a name that is
// neither a stage nor a pass is refused with the lists of all three.
TEST_F(CompileTest, PrintAfterTakesGraphAndKernelPasses) {
  CliResult r =
      compile("mlp.onnx", "m", "--no-host --arch sm_90 --no-ptx --print-after fuse,split_reductions,canonicalize");
  ASSERT_EQ(r.code, 0) << r.output;
  size_t canonicalize = r.output.find("// ----- IR after graph pass canonicalize -----\ngraph main");
  size_t fuse = r.output.find("// ----- IR after graph pass fuse -----\ngraph main");
  ASSERT_NE(canonicalize, std::string::npos) << r.output;
  ASSERT_NE(fuse, std::string::npos) << r.output;
  EXPECT_LT(canonicalize, fuse);
  EXPECT_EQ(r.output.substr(canonicalize, fuse - canonicalize).find("tcc::Fusion"), std::string::npos) << r.output;
  size_t kernel = r.output.find("// ----- kernel IR of ", fuse);
  ASSERT_NE(kernel, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tcc::Fusion", fuse), std::string::npos) << r.output;
  EXPECT_LT(r.output.find("tcc::Fusion", fuse), kernel) << r.output;
  size_t line_end = r.output.find('\n', kernel);
  const std::string title_end = " after kernel-IR pass split_reductions -----";
  EXPECT_EQ(r.output.substr(line_end - title_end.size(), title_end.size()), title_end) << r.output;
  EXPECT_EQ(r.output.compare(line_end + 1, 7, "kernel "), 0) << r.output;
  EXPECT_EQ(r.output.find("after kernel-IR pass vectorize"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("IR after graph pass dce"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("IR after compile stage"), std::string::npos) << r.output;

  CliResult bad = compile("mlp.onnx", "bad", "--print-after lowering");
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--print-after: unknown stage or pass 'lowering' (stages: load, shapes, passes, schedule, "
                            "memory, autotune, emit, build, write; graph passes: canonicalize, "),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("; kernel-IR passes: collapse_axes, vectorize, split_reductions, choose_schedule)"),
            std::string::npos)
      << bad.output;
}

// --no-host leaves out the kernels' CPU versions: no host.cc, host.so or
// manifest "host"; the module still loads, and a host run says why it cannot.
TEST_F(CompileTest, NoHostModulesRunOnAGpuOnly) {
  CliResult r = compile("gpt2_block.onnx", "g", "--no-host --arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("host compiler"), std::string::npos) << r.output;
  EXPECT_FALSE(manifest("g").contains("host"));
  EXPECT_TRUE(fs::exists(dir_ / "g" / "kernels.sm_90.cubin"));
  for (const char* f : {"host.cc", "host.so", "kernels.compute_90.ptx"}) EXPECT_FALSE(fs::exists(dir_ / "g" / f)) << f;
  CliResult run = run_tcc("run " + shell_quote((dir_ / "g").string()) + " --host --model " +
                          shell_quote(fixture("gpt2_block.onnx")) + " --shapes batch=2,seq=4");
  EXPECT_EQ(run.code, 2) << run.output;
  EXPECT_NE(run.output.find("compiled with --no-host: it has no host kernels and runs on a GPU only"),
            std::string::npos)
      << run.output;
}

// x[:, 1:1000] of a symbolic s has 999 rows only where s >= 1000, as shape
// inference and the kernels take it; x[:, 2:] (a sentinel end) and a slice
// of a static dim need nothing. The guard is explain's and the module's, which
// refuses a smaller s instead of reading past x's rows.
TEST_F(CompileTest, SliceBoundsOnSymbolicDimsAreGuarded) {
  fs::path model = dir_ / "slices.tir";
  std::ofstream(model) << R"(graph main opset(ai.onnx: 17) {
  input %x: f32[b, s, 6]
  const %one: i64[1] = [1]
  const %two: i64[1] = [2]
  const %thousand: i64[1] = [1000]
  const %end: i64[1] = [9223372036854775807]
  const %seq: i64[1] = [1]
  const %last: i64[1] = [2]
  %a: f32[b, 999, 6] = Slice(%x, %one, %thousand, %seq) name("bounded")
  %c: f32[b, s - 2, 6] = Slice(%x, %two, %end, %seq) name("to_the_end")
  %d: f32[b, s - 2, 4] = Slice(%c, %one, %end, %last) name("static_axis")
  output %a
  output %d
}
)";
  CliResult e = run_tcc("explain " + shell_quote(model.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("SHAPE_ENV: s1 >= 1000  # Slice 'bounded'"), std::string::npos) << e.output;
  EXPECT_EQ(e.output.find("Slice 'to_the_end'"), std::string::npos) << e.output;
  EXPECT_EQ(e.output.find("Slice 'static_axis'"), std::string::npos) << e.output;
  // In explain's simulation a shorter seq breaks the guard of the dynamic
  // variant, and the variant compiled for it keeps seq static.
  std::ofstream calls(dir_ / "calls.jsonl");
  for (int s : {1200, 1300, 500})
    calls << "{\"x\": {\"shape\": [2, " << s << ", 6], \"dtype\": \"float32\"}}\n";
  calls.close();
  e = run_tcc("explain " + shell_quote(model.string()) + " --trace " + shell_quote((dir_ / "calls.jsonl").string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("    - 0/1: s0 >= 1000 (actual 500), which Slice 'bounded' relies on"), std::string::npos)
      << e.output;
  EXPECT_NE(e.output.find("check_tensor(x, float32, size=[2, 500, 6]"), std::string::npos) << e.output;
  CliResult c = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote((dir_ / "m").string()));
  ASSERT_EQ(c.code, 0) << c.output;
  std::string run = "run " + shell_quote((dir_ / "m").string()) + " --host --model " + shell_quote(model.string());
  CliResult small = run_tcc(run + " --shapes b=2,s=5");
  EXPECT_EQ(small.code, 2) << small.output;
  EXPECT_NE(small.output.find("inputs fail the module's guard 's1 >= 1000' (s1 = x.size()[1] = 5), which Slice "
                              "'bounded' relies on"),
            std::string::npos)
      << small.output;
  CliResult large = run_tcc(run + " --shapes b=2,s=1001 --check");
  EXPECT_EQ(large.code, 0) << large.output;
}

// A module takes size 1 on every symbolic dim (batch 1, a one-token step),
// which torch.compile specializes and explain keeps guarding with `2 <= s`;
// where an op needs more (a Squeeze without axes keeps a symbolic dim only
// while it is not 1), a guard names the op.
TEST_F(CompileTest, ModulesTakeSizeOneWhereNoOpNeedsMore) {
  fs::path model = dir_ / "squeeze.tir";
  std::ofstream(model) << R"(graph main opset(ai.onnx: 11) {
  input %x: f32[b, 1, 4]
  input %y: f32[n]
  input %z: f32[n]
  %s: f32[b, 4] = Squeeze(%x) name("squeeze_all")
  %r: f32[b, 4] = Relu(%s) name("relu")
  %t: f32[n] = Add(%y, %z) name("add")
  output %r
  output %t
}
)";
  CliResult e = run_tcc("explain " + shell_quote(model.string()));
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("SHAPE_ENV: 2 <= s0"), std::string::npos) << e.output;
  EXPECT_EQ(e.output.find("Squeeze 'squeeze_all'"), std::string::npos) << e.output;
  CliResult c = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote((dir_ / "m").string()));
  ASSERT_EQ(c.code, 0) << c.output;
  // The summary sizes the arena where the module runs: b=2, the least the Squeeze's guard takes.
  EXPECT_NE(c.output.find(" at b=2, n=1 "), std::string::npos) << c.output;
  std::string run = "run " + shell_quote((dir_ / "m").string()) + " --host --check --shapes ";
  CliResult one = run_tcc(run + "b=2,n=1");
  EXPECT_EQ(one.code, 0) << one.output;
  CliResult squeezed = run_tcc(run + "b=1,n=3");
  EXPECT_EQ(squeezed.code, 2) << squeezed.output;
  EXPECT_NE(squeezed.output.find("inputs fail the module's guard 's0 >= 2' (s0 = x.size()[0] = 1), which Squeeze "
                                 "'squeeze_all' relies on"),
            std::string::npos)
      << squeezed.output;
}

// Every Conv of the ResNet fixture is a conv kernel (cuDNN on the device,
// host.so on the CPU) with its bias / residual / Relu epilogue: none is left to
// the reference interpreter, and no conv kernel is in the cubin.
TEST_F(CompileTest, ResNetConvsBecomeConvKernels) {
  CliResult r = compile("resnet_small.onnx", "r", "--arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  json m = manifest("r");
  std::set<std::string> conv_kernels, fused_nodes;
  for (const json& k : m["kernels"]) {
    if (k["kind"] != "conv") continue;
    conv_kernels.insert(k["name"].get<std::string>());
    EXPECT_EQ(k["library"], "cudnn") << k.dump();
    EXPECT_TRUE(k.contains("conv") && !k.contains("launch")) << k.dump();
    for (const json& n : k["nodes"]) fused_nodes.insert(n.get<std::string>());
  }
  EXPECT_EQ(fused_nodes.count("/conv1/Conv") + fused_nodes.count("/layer1/conv1/Conv") +
                fused_nodes.count("/layer1/conv2/Conv"),
            3u);
  EXPECT_TRUE(fused_nodes.count("/layer1/Add")) << "the residual Add joins the second conv of the block";
  size_t conv_steps = 0;
  for (const json& s : m["schedule"])
    if (s.contains("kernel")) conv_steps += m["kernels"][s["kernel"].get<size_t>()]["kind"] == "conv";
  EXPECT_EQ(conv_steps, 3u);
  json report = json::parse(read_text(dir_ / "r" / "report.json"));
  for (const json& f : report["fallbacks"]) EXPECT_NE(f["op_type"], "Conv") << f.dump();
  EXPECT_EQ(r.output.find("] Conv x"), std::string::npos) << r.output;
  std::string cubin = read_text(dir_ / "r" / "kernels.sm_90.cubin");
  for (const std::string& sym : cubin_symbols(std::vector<char>(cubin.begin(), cubin.end())))
    EXPECT_FALSE(conv_kernels.count(sym)) << sym;
}

// bench/models/pointwise_bandwidth.tir means what scripts/gpu-check reads
// from it: one fused kernel moving 16 bytes an element and one copy moving 8,
// both float4 loops (a grid of a quarter of the elements over 256 threads).
TEST_F(CompileTest, BandwidthBenchmarkIsOneFusedKernelAndOneCopy) {
  CliResult r = run_tcc("compile " + shell_quote(std::string(TCC_SOURCE_DIR) + "/bench/models/pointwise_bandwidth.tir") +
                        " -o " + shell_quote((dir_ / "bw").string()) + " --arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  json m = manifest("bw");
  ASSERT_EQ(m["kernels"].size(), 2u);
  EXPECT_EQ(m["kernels"][0]["nodes"], json({"fused/Mul", "fused/Add", "fused/Relu"}));
  EXPECT_EQ(m["kernels"][0]["bytes_moved"], "n*16384");
  EXPECT_EQ(m["kernels"][1]["nodes"], json({"copy/Neg"}));
  EXPECT_EQ(m["kernels"][1]["bytes_moved"], "n*8192");
  for (const json& k : m["kernels"]) EXPECT_EQ(k["launch"]["grid"][0], "n") << k["name"];
}

// bench/models/gemm_shapes.tir, which scripts/gpu-check tunes to set tcc's
// GEMM template against cuBLASLt: four gemm kernels, each with every template
// candidate (a Linear's Gemm with transB included).
TEST_F(CompileTest, GemmShapesBenchmarkIsFourTunableGemms) {
  ScheduledModel s = schedule_model("bench/models/gemm_shapes.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 4u);
  for (const kir::Kernel& k : s.schedule.kernels) {
    EXPECT_EQ(k.kind, kir::Kind::Gemm) << k.name;
    std::vector<KernelConfig> grid = autotune::candidates(k);
    EXPECT_EQ(std::count_if(grid.begin(), grid.end(), [](const KernelConfig& c) { return c.tile > 0; }), 14) << k.name;
  }
  EXPECT_TRUE(s.schedule.kernels[2].gemm->trans_b);
}

TEST_F(CompileTest, SymbolicDimsStaySymbolic) {
  ASSERT_EQ(compile("gpt2_block.onnx", "m", "--arch sm_90 --no-ptx").code, 0);
  json m = manifest("m");
  ASSERT_TRUE(m["symbols"].is_object());
  EXPECT_FALSE(m["symbols"].empty());
  for (const auto& [name, where] : m["symbols"].items()) {
    EXPECT_EQ(where["input"], m["inputs"][0]["name"]) << name;
    EXPECT_EQ(m["inputs"][0]["shape"][where["axis"].get<int>()], name);
  }
  EXPECT_TRUE(m["memory"]["arena_bytes"].is_string()) << m["memory"].dump();
  EXPECT_FALSE(fs::exists(dir_ / "m" / "kernels.compute_90.ptx"));
}

// With --jobs 8 the kernels compile in shards (4 per arch, 2 host shards) that
// nvJitLink and the linker join: the cubins and host.so define the same kernels.
TEST_F(CompileTest, EveryGeneratedKernelIsInTheCubin) {
  for (auto [file, flags] : std::vector<std::pair<std::string, std::string>>{
           {"gpt2_block.onnx", ""}, {"mlp.onnx", ""}, {"gpt2_block.onnx", " --jobs 8"}}) {
    std::string model = file + (flags.empty() ? "" : ".jobs8");
    ASSERT_EQ(compile(file, model, "--arch sm_80,sm_90" + flags).code, 0);
    json m = manifest(model);
    std::string sm80 = read_text(dir_ / model / "kernels.sm_80.cubin");
    std::vector<std::string> sm80_syms = cubin_symbols(std::vector<char>(sm80.begin(), sm80.end()));
    for (const json& k : m["kernels"]) {
      if (k["kind"] == "gemm") continue;
      EXPECT_EQ(std::count(sm80_syms.begin(), sm80_syms.end(), k["name"].get<std::string>()), 1)
          << model << ": " << k["name"];
    }
    std::string cubin = read_text(dir_ / model / "kernels.sm_90.cubin");
    ASSERT_FALSE(cubin.empty());
    std::vector<std::string> syms = cubin_symbols(std::vector<char>(cubin.begin(), cubin.end()));
    std::set<std::string> defined(syms.begin(), syms.end());
    // readelf is the independent check where binutils are installed.
    std::string readelf;
    if (std::system("command -v readelf >/dev/null 2>&1") == 0) {
      std::string cmd = "readelf -sW " + shell_quote((dir_ / model / "kernels.sm_90.cubin").string());
      FILE* p = popen(cmd.c_str(), "r");
      ASSERT_NE(p, nullptr);
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) readelf.append(buf, n);
      pclose(p);
    }
    int generated = 0;
    for (const json& k : m["kernels"]) {
      if (k["kind"] == "gemm") continue;
      ++generated;
      std::string name = k["name"];
      EXPECT_TRUE(defined.count(name)) << model << ": " << name << " is not in the sm_90 cubin";
      if (!readelf.empty()) {
        EXPECT_NE(readelf.find(" " + name + "\n"), std::string::npos) << name;
      }
    }
    // mlp fuses into cuBLASLt GEMMs with epilogues: its cubin holds no kernel of tcc's.
    if (std::string(model) == "gpt2_block.onnx") {
      EXPECT_GT(generated, 0);
    }
    EXPECT_TRUE(fs::exists(dir_ / model / "kernels.sm_80.cubin"));
  }
}

// A TopK whose k is an input leaves a size only the run knows (u0) in the
// arena: the summary counts it as 1, as an unhinted input dim, rather than
// failing after the module is written.
TEST_F(CompileTest, DataDependentSizesCountAsOneInTheSummary) {
  fs::path model = dir_ / "topk.tir";
  std::ofstream(model) << R"(graph main opset(ai.onnx: 17) {
  input %x: f32[4, 8]
  input %k: i64[1]
  const %ax: i64[1] = [1]
  %v: f32[4, ?], %i: i64[4, ?] = TopK(%x, %k) name("topk")
  %y: f32[4, ?] = Relu(%v) name("relu")
  %s: f32[4] = ReduceSum(%y, %ax) {keepdims = 0} name("sum")
  output %s
}
)";
  CliResult r = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote((dir_ / "t").string()) +
                        " --arch sm_90 --no-ptx --no-host");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("  arena:     0.5 KiB (0.5 KiB unplanned)"), std::string::npos) << r.output;
}

// A causal mask built from the sequence length (Shape -> Gather ->
// Unsqueeze -> Concat -> ConstantOfShape, then Add and Trilu) runs once per
// binding, its nodes whole (decompose leaves the Gather and the Trilu alone):
// the manifest lists them as binding steps writing binding constants, the
// schedule has no host step left, and the Equal that compares the mask with
// zero, which the softmax's kernel cannot take (it computes over [s, s], not
// [b, s, s]) and a kernel of its own would compute from the binding alone,
// runs once per binding too: the softmax reads its bool mask.
TEST_F(CompileTest, ShapeDeterminedValuesBecomeBindingConstants) {
  CliResult r = compile("causal_mask.tir", "causal", "--arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("  binding:   8 nodes computed once per binding"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  fallbacks: 0 nodes on the host"), std::string::npos) << r.output;
  json m = manifest("causal");
  std::vector<std::string> nodes, values;
  for (const json& step : m["binding_constants"]["steps"]) nodes.push_back(step["fallback"]);
  for (const json& v : m["binding_constants"]["values"]) values.push_back(v["name"]);
  EXPECT_EQ(nodes,
            (std::vector<std::string>{"shape", "seq_len", "unsqueeze", "dims", "zeros", "ones", "tril", "is_future"}));
  EXPECT_EQ(values.back(), "future");
  EXPECT_EQ(m["binding_constants"]["values"].back()["shape"], json::parse(R"(["s", "s"])"));
  for (const json& step : m["schedule"]) EXPECT_TRUE(step.contains("kernel")) << step.dump();
  bool reads_mask = false;
  for (const json& step : m["schedule"])
    for (const json& v : step["reads"]) reads_mask = reads_mask || v == "future";
  EXPECT_TRUE(reads_mask) << m["schedule"].dump();
  EXPECT_NE(read_text(dir_ / "causal" / "report.md").find("| binding constants | 8 nodes"), std::string::npos);
}

// A kernel that would compute from the binding alone runs once per binding
// (RoPE's angle table, a causal comparison of two Ranges), unless what it
// writes has more symbolic dims than any model input: a [b, s, s] mask of
// [b, s] ids stays in the step, computed where the binding would keep it.
TEST_F(CompileTest, KernelsOfTheBindingAloneRunOncePerBinding) {
  fs::path model = dir_ / "tables.tir";
  std::ofstream(model) << R"(graph main opset(ai.onnx: 17) {
  input %ids: i64[b, s]
  input %x: f32[b, s, 4]
  const %zero: i64[] = [0]
  const %one: i64[] = [1]
  const %zero1: i64[1] = [0]
  const %one1: i64[1] = [1]
  const %axes01: i64[2] = [0, 1]
  const %axes02: i64[2] = [0, 2]
  const %axis1: i64[1] = [1]
  const %freq: f32[4] = [1.0, 0.5, 0.25, 0.125]
  const %neg: f32[] = [-10000.0]
  %shape: i64[2] = Shape(%ids) name("shape")
  %len: i64[] = Gather(%shape, %one) {axis = 0} name("len")
  %pos: i64[s] = Range(%zero, %len, %one) name("range")
  %posf: f32[s] = Cast(%pos) {to = 1} name("posf")
  %col: f32[s, 1] = Unsqueeze(%posf, %axis1) name("col")
  %angle: f32[s, 4] = Mul(%col, %freq) name("angle")
  %cos: f32[s, 4] = Cos(%angle) name("cos")
  %rotated: f32[b, s, 4] = Mul(%x, %cos) name("rotate")
  %rows: i64[1, s, 1] = Unsqueeze(%pos, %axes02) name("rows")
  %cols: i64[1, 1, s] = Unsqueeze(%pos, %axes01) name("cols")
  %future: bool[1, s, s] = Less(%rows, %cols) name("future")
  %batch: i64[1] = Slice(%shape, %zero1, %one1) name("batch")
  %dims: i64[3] = Concat(%batch, %one1, %one1) {axis = 0} name("dims")
  %zeros: f32[b, 1, 1] = ConstantOfShape(%dims) name("zeros")
  %mask: f32[b, s, s] = Where(%future, %neg, %zeros) name("mask")
  %y: f32[b, s, 4] = MatMul(%mask, %rotated) name("mix")
  output %y
}
)";
  CliResult c = run_tcc("compile " + shell_quote(model.string()) + " -o " + shell_quote((dir_ / "m").string()));
  ASSERT_EQ(c.code, 0) << c.output;
  json m = json::parse(read_text(dir_ / "m" / "manifest.json"));
  std::set<std::string> binding;
  for (const json& step : m["binding_constants"]["steps"]) binding.insert(step["fallback"].get<std::string>());
  for (const char* node : {"range", "posf", "col", "angle", "cos", "rows", "cols", "future", "zeros"})
    EXPECT_TRUE(binding.count(node)) << node << " in " << m["binding_constants"].dump();
  EXPECT_FALSE(binding.count("mask")) << m["binding_constants"].dump();
  std::set<std::string> in_kernels;
  for (const json& k : m["kernels"])
    for (const json& n : k["nodes"]) in_kernels.insert(n.get<std::string>());
  EXPECT_TRUE(in_kernels.count("mask") && in_kernels.count("rotate")) << m["kernels"].dump();
  EXPECT_FALSE(in_kernels.count("cos") || in_kernels.count("future")) << m["kernels"].dump();
  CliResult run = run_tcc("run " + shell_quote((dir_ / "m").string()) + " --host --check --shapes b=3,s=5");
  EXPECT_EQ(run.code, 0) << run.output;
}

// Few long rows become split reductions: a grid of [rows, slices, 1] and a
// workspace (partials of 8 bytes, then one counter per row) that the manifest
// declares and the kernel takes after its sizes; a max that also stores its
// elements splits too. The multi-pass reductions of the GPT-2 block (softmax,
// layer norm) keep one block per row.
TEST_F(CompileTest, LongRowReductionsDeclareAWorkspace) {
  std::string model = std::string(TCC_SOURCE_DIR) + "/tests/kernels/long_rows.tir";
  CliResult r = run_tcc("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "l").string()) +
                        " --arch sm_90 --no-ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  json m = manifest("l");
  ASSERT_EQ(m["kernels"].size(), 3u) << m["kernels"].dump();
  std::map<std::string, json> by_node;
  for (const json& k : m["kernels"]) by_node[k["nodes"][0].get<std::string>()] = k;
  const json& mean = by_node.at("mean")["launch"];
  EXPECT_EQ(mean["grid"], json::array({"4", "16", "1"})) << mean.dump();
  EXPECT_EQ(mean["workspace_bytes"], 4 * 16 * 8 + 4 * 4) << mean.dump();
  const json& max = by_node.at("max")["launch"];
  EXPECT_EQ(max["grid"], json::array({"2", "132", "1"})) << max.dump();
  EXPECT_EQ(max["workspace_bytes"], 2 * 132 * 8 + 2 * 4) << max.dump();
  const json& halves = by_node.at("halve")["launch"];
  EXPECT_EQ(halves["grid"], json::array({"3", "88", "1"})) << halves.dump();
  EXPECT_EQ(halves["workspace_bytes"], 3 * 88 * 8 + 3 * 4) << halves.dump();
  std::string cu = read_text(dir_ / "l" / "kernels.cu");
  std::string cubin = read_text(dir_ / "l" / "kernels.sm_90.cubin");
  std::vector<std::string> syms = cubin_symbols(std::vector<char>(cubin.begin(), cubin.end()));
  for (const json& k : m["kernels"]) {
    std::string name = k["name"];
    EXPECT_NE(std::find(syms.begin(), syms.end(), name), syms.end()) << name;
    size_t at = cu.find("void " + name + "(");
    ASSERT_NE(at, std::string::npos) << name;
    EXPECT_NE(cu.substr(at, cu.find('{', at) - at).find(", void* __restrict__ ws)"), std::string::npos) << name;
  }

  ASSERT_EQ(compile("gpt2_block.onnx", "g", "--arch sm_90 --no-ptx").code, 0);
  for (const json& k : manifest("g")["kernels"])
    if (k.contains("launch")) {
      EXPECT_FALSE(k["launch"].contains("workspace_bytes")) << k.dump();
    }
}

TEST_F(CompileTest, SameInputsGiveIdenticalModulesButTimings) {
  ASSERT_EQ(compile("gpt2_block.onnx", "a", "--arch sm_90").code, 0);
  ASSERT_EQ(compile("gpt2_block.onnx", "b", "--arch sm_90").code, 0);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(dir_ / "a")) files.insert(e.path().filename().string());
  std::set<std::string> other;
  for (const auto& e : fs::directory_iterator(dir_ / "b")) other.insert(e.path().filename().string());
  EXPECT_EQ(files, other);
  for (const std::string& f : files) {
    std::string a = read_text(dir_ / "a" / f), b = read_text(dir_ / "b" / f);
    if (f == "report.json") {
      json ja = json::parse(a), jb = json::parse(b);
      ASSERT_TRUE(ja.contains("timings"));
      ja.erase("timings");
      jb.erase("timings");
      EXPECT_EQ(ja, jb);
    } else if (f == "report.md") {
      size_t cut = a.find("## Compile time");
      ASSERT_NE(cut, std::string::npos);
      EXPECT_EQ(a.substr(0, cut), b.substr(0, cut));
    } else {
      EXPECT_TRUE(a == b) << f << " differs between two compiles";
    }
  }
}

TEST_F(CompileTest, ModeFeaturesAreReportedNotFaked) {
  ASSERT_EQ(compile("mlp.onnx", "m", "--arch sm_90 --no-ptx --mode reduce-overhead").code, 0);
  json m = manifest("m");
  EXPECT_EQ(m["mode"], "reduce-overhead");
  bool graphs = false;
  for (const json& f : m["features"])
    if (f["name"] == "cuda_graphs") {
      graphs = true;
      EXPECT_EQ(f["status"], "built");
      EXPECT_FALSE(f.contains("why")) << f.dump();
    } else {
      EXPECT_EQ(f["status"], "built") << f.dump();
    }
  EXPECT_TRUE(graphs);
}

TEST_F(CompileTest, ListModesPrintsTheProfiles) {
  CliResult r = run_tcc("compile --list-modes");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, modes_table());
  EXPECT_EQ(r.output.find("default\n  Fuse and plan memory"), 0u) << r.output;
  for (const char* line : {"\nmax-autotune\n", "\nmax-autotune-no-cudagraphs\n", "\nreduce-overhead\n",
                           "  + cuda_graphs\n",
                           "  + autotune_kernels\n", "  + autotune_gemm_templates\n", "  + fusion\n"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line;
}

TEST_F(CompileTest, UnknownModeArchOrDeviceExitsTwoListingTheValidOnes) {
  CliResult r = compile("mlp.onnx", "m", "--mode fastest");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown mode 'fastest' (valid: default, eager, max-autotune, max-autotune-no-cudagraphs, "
                          "reduce-overhead)"),
            std::string::npos)
      << r.output;
  r = compile("mlp.onnx", "m", "--arch sm_90,sm_75");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown architecture 'sm_75' (valid: sm_80, sm_86, sm_89, sm_90, native)"),
            std::string::npos)
      << r.output;
  r = run_tcc("compile " + shell_quote(fixture("mlp.onnx")) + " -o " + shell_quote((dir_ / "m").string()) +
                  " --arch native",
              kNoGpuEnv);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--arch native: no usable GPU here to take the architecture from"), std::string::npos)
      << r.output;
  r = compile("mlp.onnx", "m", "--device v100");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("unknown device 'v100' (valid: a100, h100, h200)"), std::string::npos) << r.output;
  r = compile("mlp.onnx", "m", "--shape-hint batch");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--shape-hint: expected SYMBOL=SIZE"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "m")) << "flags are checked before anything is written";
}

TEST_F(CompileTest, BadModelsExitTwo) {
  std::string bytes = read_text(fixture("mlp.onnx"));
  fs::path truncated = dir_ / "truncated.onnx";
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CliResult r = run_tcc("compile " + shell_quote(truncated.string()) + " -o " + shell_quote((dir_ / "m").string()));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("truncated.onnx"), std::string::npos) << r.output;
  EXPECT_EQ(run_tcc("compile " + shell_quote((dir_ / "missing.onnx").string()) + " -o x").code, 2);
  EXPECT_EQ(run_tcc("compile " + shell_quote(fixture("mlp.onnx"))).code, 2);  // no -o
}

TEST_F(CompileTest, RefusesToOverwriteWhatIsNotAModule) {
  fs::create_directories(dir_ / "precious");
  std::ofstream(dir_ / "precious" / "notes.txt") << "keep me";
  CliResult r = compile("mlp.onnx", "precious", "--arch sm_90 --no-ptx");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("not a tcc module; refusing to overwrite it"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "precious" / "notes.txt"));
  // A previous module is replaced, stale files included.
  ASSERT_EQ(compile("mlp.onnx", "m", "--arch sm_80,sm_90").code, 0);
  ASSERT_EQ(compile("mlp.onnx", "m", "--arch sm_90 --no-ptx").code, 0);
  EXPECT_FALSE(fs::exists(dir_ / "m" / "kernels.sm_80.cubin"));
}

}  // namespace
}  // namespace tcc
