// `tcc kir` as a command (src/driver/cmd_kir.cc): a model's kernels come out as
// kernel IR, scheduled for --device and lowered at --precision, that reads back unchanged, malformed or invalid
// kernel IR exits 2 with the parser's or verifier's message, and the flags are checked. What the
// passes and emitters do on text is tested by tests/kernel_ir/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

class KirCli : public TempDirTest {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return shell_quote(p.string());
  }
};

TEST_F(KirCli, LowersAModelAndReadsItsKernelsBack) {
  std::string model = shell_quote(std::string(TCC_SOURCE_DIR) + "/tests/kernels/softmax.tir");
  CliResult lowered = run_tcc("kir " + model + " -o " + shell_quote((dir_ / "softmax.kir").string()));
  ASSERT_EQ(lowered.code, 0) << lowered.output;
  std::string text = read_text(dir_ / "softmax.kir");
  EXPECT_EQ(text.rfind("kernel tcc_k0_reduction reduction domain [", 0), 0u) << text;
  EXPECT_NE(text.find("\n  schedule block="), std::string::npos) << text;
  CliResult again = run_tcc("kir " + shell_quote((dir_ / "softmax.kir").string()));
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.output, text);
}

// The line of the one attention kernel's descriptor in `text`, and its schedule line.
std::pair<std::string, std::string> attention_lines(const std::string& text) {
  size_t kernel = text.find(" attention domain [");
  if (kernel == std::string::npos) return {};
  size_t desc = text.find("\n  attention q=", kernel);
  size_t schedule = text.find("\n  schedule ", kernel);
  if (desc == std::string::npos || schedule == std::string::npos) return {};
  auto line = [&](size_t at) { return text.substr(at + 1, text.find('\n', at + 1) - at - 1); };
  return {line(desc), line(schedule)};
}

// --precision lowers a model's kernels as tcc compile does at that precision: the GPT-2 block's attention is
// marked tf32=1 under tf32 alone, and takes the tensor-core layout (mma=1) over f32 operands under tf32 and over
// bf16 operands under bf16, while fp32 keeps it exact.
TEST_F(KirCli, PrecisionLowersTheAttentionAsCompileDoes) {
  std::string model = shell_quote(std::string(TCC_SOURCE_DIR) + "/tests/fixtures/gpt2_block.onnx");
  for (const char* precision : {"fp32", "tf32", "bf16"}) {
    CliResult r = run_tcc("kir " + model + " --precision " + precision);
    ASSERT_EQ(r.code, 0) << precision << ": " << r.output;
    auto [desc, schedule] = attention_lines(r.output);
    ASSERT_FALSE(desc.empty()) << precision << ": " << r.output;
    const std::string p = precision;
    EXPECT_EQ(desc.find(" tf32=1") != std::string::npos, p == "tf32") << p << ": " << desc;
    EXPECT_EQ(schedule.find(" mma=1") != std::string::npos, p != "fp32") << p << ": " << schedule;
    size_t kernel = r.output.find(" attention domain [");
    const std::string q_buffer = r.output.substr(kernel, r.output.find("\n  attention q=", kernel) - kernel);
    EXPECT_NE(q_buffer.find(p == "bf16" ? ": bf16[" : ": f32["), std::string::npos) << p << ": " << q_buffer;
  }
  CliResult bad = run_tcc("kir " + model + " --precision fp8");
  EXPECT_EQ(bad.code, 2) << bad.output;
}

TEST_F(KirCli, InvalidKernelIrExitsTwoWithTheMessage) {
  std::string bad = write("bad.kir",
                          "kernel k pointwise domain [4]\n"
                          "  buffer x: f32[4] in\n"
                          "  buffer y: f32[4] out\n"
                          "  %0: f32 = load x [1]\n"
                          "  %1: f32 = add %0, %2\n"
                          "  %2 = store y [1], %0\n");
  CliResult r = run_tcc("kir " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("bad.kir:5:3: %1 (add) reads %2, which is not defined before it"), std::string::npos)
      << r.output;
  CliResult syntax = run_tcc("kir " + write("syntax.kir", "kernel k pointwise domain [4\n"));
  EXPECT_EQ(syntax.code, 2);
  EXPECT_NE(syntax.output.find("syntax.kir:2:1: expected ']', got end of file"), std::string::npos) << syntax.output;
}

TEST_F(KirCli, PrintsEachKernelAfterThePassesAndTimesThem) {
  std::string two_d = write("two_d.kir",
                            "kernel k pointwise domain [4, 8]\n"
                            "  buffer x: f32[4, 8] in\n"
                            "  buffer y: f32[4, 8] out\n"
                            "  %0: f32 = load x [8, 1]\n"
                            "  %1 = store y [8, 1], %0\n");
  std::string passes = " --passes=collapse_axes,split_reductions";
  CliResult all = run_tcc("kir " + two_d + passes + " --print-ir-after-all");
  ASSERT_EQ(all.code, 0) << all.output;
  EXPECT_NE(all.output.find("// ----- kernel IR of k after collapse_axes -----\nkernel k pointwise domain [32]"),
            std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("// ----- kernel IR of k after split_reductions (unchanged) -----"), std::string::npos)
      << all.output;
  CliResult changed = run_tcc("kir " + two_d + passes + " --print-ir-after-change");
  ASSERT_EQ(changed.code, 0) << changed.output;
  EXPECT_NE(changed.output.find("after collapse_axes -----"), std::string::npos) << changed.output;
  EXPECT_EQ(changed.output.find("after split_reductions"), std::string::npos) << changed.output;
  CliResult timed = run_tcc("kir " + two_d + passes + " --time-passes");
  ASSERT_EQ(timed.code, 0) << timed.output;
  EXPECT_NE(timed.output.find("axes merged=1"), std::string::npos) << timed.output;
}

TEST_F(KirCli, UnknownPassDeviceOrEmitExitsTwo) {
  std::string ok = write("ok.kir",
                         "kernel k pointwise domain [4]\n"
                         "  buffer y: f32[4] out\n"
                         "  %0: f32 = const 1\n"
                         "  %1 = store y [1], %0\n");
  CliResult pass = run_tcc("kir " + ok + " --passes=collapse_axes,fold");
  EXPECT_EQ(pass.code, 2);
  EXPECT_NE(pass.output.find("unknown kernel-IR pass 'fold' (known: collapse_axes, vectorize, split_reductions, "
                             "choose_schedule)"),
            std::string::npos)
      << pass.output;
  CliResult device = run_tcc("kir " + ok + " --passes=choose_schedule --device=v100");
  EXPECT_EQ(device.code, 2);
  EXPECT_NE(device.output.find("v100"), std::string::npos) << device.output;
  CliResult emit = run_tcc("kir " + ok + " --emit=ptx");
  EXPECT_EQ(emit.code, 2);
  EXPECT_NE(emit.output.find("unknown --emit 'ptx' (known: ir, cuda, c)"), std::string::npos) << emit.output;
  CliResult list = run_tcc("kir --list-passes");
  EXPECT_EQ(list.code, 0);
  EXPECT_EQ(list.output.rfind("collapse_axes  ", 0), 0u) << list.output;
}

}  // namespace
}  // namespace tcc
