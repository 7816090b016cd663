// The kernel IR's text form (codegen/kernel_ir_text.h) and verifier
// (codegen/kernel_ir_verify.h): every kernel the compiler lowers from the
// fixtures of tests/kernels, tests/zoo and tests/pt2 prints, parses back
// verified, prints the same and emits the same CUDA and host C++; malformed
// text is an InputError naming file, line and column. The verifier's messages
// and the passes on text are tested by the files of tests/kernel_ir/.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "codegen/emit.h"
#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_ir_verify.h"
#include "src/diag/errors.h"
#include "tests/unit/codegen/schedule_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lowered_fixtures() {
  std::vector<std::string> models;
  fs::path root(TCC_SOURCE_DIR);
  for (const auto& e : fs::directory_iterator(root / "tests/kernels"))
    if (e.path().extension() == ".tir") models.push_back(fs::relative(e.path(), root).string());
  for (const auto& e : fs::directory_iterator(root / "tests/zoo"))
    if (fs::exists(e.path() / "model.onnx")) models.push_back(fs::relative(e.path() / "model.onnx", root).string());
  for (const auto& e : fs::directory_iterator(root / "tests/pt2"))
    if (e.path().extension() == ".pt2") models.push_back(fs::relative(e.path(), root).string());
  std::sort(models.begin(), models.end());
  return models;
}

class KernelIrRoundTrip : public testing::TestWithParam<std::string> {};

TEST_P(KernelIrRoundTrip, PrintsParsesAndEmitsTheSame) {
  std::vector<kir::Kernel> kernels = schedule_model(GetParam()).schedule.kernels;
  ASSERT_FALSE(kernels.empty()) << GetParam();
  std::string text = kir::print_kernels(kernels);
  std::vector<kir::Kernel> parsed = kir::parse_kernels(text, GetParam() + ".kir");
  ASSERT_EQ(parsed.size(), kernels.size());
  EXPECT_EQ(kir::print_kernels(parsed), text);
  EXPECT_EQ(emit_cuda(parsed), emit_cuda(kernels));
  EXPECT_EQ(emit_host(parsed), emit_host(kernels));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KernelIrRoundTrip, testing::ValuesIn(lowered_fixtures()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(std::string("tests/").size());
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// Attention compiled with --precision tf32 says so (tf32=1) and reads back
// to the same TF32 tensor-core CUDA; at fp32 the text has no tf32 key.
TEST(KernelIrText, Tf32AttentionRoundTrips) {
  std::vector<kir::Kernel> kernels = schedule_model("tests/kernels/attention_tf32.tir", Precision::TF32).schedule.kernels;
  std::string text = kir::print_kernels(kernels);
  EXPECT_NE(text.find(" causal=1 tf32=1 lse="), std::string::npos) << text;
  std::vector<kir::Kernel> parsed = kir::parse_kernels(text, "tf32.kir");
  EXPECT_EQ(kir::print_kernels(parsed), text);
  EXPECT_EQ(emit_cuda(parsed), emit_cuda(kernels));
  std::string fp32 = kir::print_kernels(schedule_model("tests/kernels/attention_tf32.tir").schedule.kernels);
  EXPECT_EQ(fp32.find(" tf32="), std::string::npos) << fp32;
}

TEST(KernelIrText, EveryOpNameReadsBack) {
  for (int o = static_cast<int>(kir::Op::Load); o <= static_cast<int>(kir::Op::ConvAcc); ++o)
    EXPECT_EQ(kir::op_by_name(kir::op_name(static_cast<kir::Op>(o))), static_cast<kir::Op>(o)) << o;
  EXPECT_EQ(kir::op_by_name("Add"), std::nullopt);
}

// Names the graph allows that the printer must quote: spaces, commas, a
// trailing ':', "//", and a buffer called -1 (gemm's "no buffer").
TEST(KernelIrText, OddNamesRoundTrip) {
  kir::Kernel k;
  k.name = "k 0";
  k.domain = {SymExpr::constant(4)};
  k.nodes = {"a, b", "/layer0/Add"};
  k.buffers = {{"-1", DType::F32, {SymExpr::constant(4)}, false}, {"y://z", DType::F32, {SymExpr::constant(4)}, true}};
  kir::Instr load;
  load.op = kir::Op::Load;
  load.buffer = 0;
  load.index.strides = {SymExpr::constant(1)};
  kir::Instr store = load;
  store.op = kir::Op::Store;
  store.buffer = 1;
  store.args = {0};
  k.body = {load, store};
  std::string text = print_kernel(k);
  EXPECT_EQ(text,
            "kernel \"k 0\" pointwise domain [4]\n"
            "  nodes \"a, b\", /layer0/Add\n"
            "  buffer \"-1\": f32[4] in\n"
            "  buffer \"y://z\": f32[4] out\n"
            "  %0: f32 = load \"-1\" [1]\n"
            "  %1 = store \"y://z\" [1], %0\n");
  EXPECT_EQ(print_kernel(kir::parse_kernels(text).at(0)), text);
}

std::string parse_error(const std::string& text) {
  return input_error([&] { kir::parse_kernels(text, "t.kir"); });
}

TEST(KernelIrText, MalformedTextNamesFileLineAndColumn) {
  const std::string head = "kernel k pointwise domain [4]\n  buffer x: f32[4] in\n  buffer y: f32[4] out\n";
  EXPECT_EQ(parse_error(""), "t.kir:1:1: expected 'kernel', got end of file");
  EXPECT_EQ(parse_error("kernel k loop domain [4]\n"),
            "t.kir:1:10: expected a kernel kind (pointwise, reduction, gemm, conv, attention, topk, recurrence, "
            "nms, roi_align), got 'loop'");
  EXPECT_EQ(parse_error("kernel k pointwise domain [4 | 2]\n"), "t.kir:1:30: only a reduction kernel's domain has a '|'");
  EXPECT_EQ(parse_error("kernel k reduction domain [4, 2]\n"),
            "t.kir:1:32: expected '|' between a reduction's outer and reduced axes, got ']'");
  EXPECT_EQ(parse_error(head + "  %0: f33 = load x [1]\n"),
            "t.kir:4:7: expected a dtype (f32 f16 bf16 f64 f8e4m3fn f8e4m3fnuz f8e5m2 f8e5m2fnuz f4e2m1 i64 i32 i16 i8 i4 u8 u16 u32 u64 u4 bool), got 'f33'");
  EXPECT_EQ(parse_error(head + "  %0: f32 = loud x [1]\n"),
            "t.kir:4:13: expected an op (docs/KERNEL_IR.md lists them), got 'loud'");
  EXPECT_EQ(parse_error(head + "  %1: f32 = load x [1]\n"),
            "t.kir:4:3: expected %0 (instructions are numbered in order), got %1");
  EXPECT_EQ(parse_error(head + "  %0: f32 = load z [1]\n"),
            "t.kir:4:18: undefined buffer 'z' (buffers are declared before the instructions)");
  EXPECT_EQ(parse_error(head + "  %0: f32 = load x [1 +]\n"), "t.kir:4:23: expected ']', got '+'");
  EXPECT_EQ(parse_error(head + "  %0: f32 = load x [1]\n  %1: f32 = store y [1], %0\n"),
            "t.kir:5:3: a store has no dtype ('%N = store ...')");
  EXPECT_EQ(parse_error(head + "  buffer x: f32[4] in\n"), "t.kir:4:10: buffer 'x' is already declared");
  std::string ok = head + "  %0: f32 = load x [1]\n  %1 = store y [1], %0\n";
  EXPECT_EQ(parse_error(ok + ok), "t.kir:6:1: kernel 'k' is already defined");
}

// Text that is cut short or has bytes replaced is read, or refused with an
// InputError: never a crash or an internal error, and what reads back prints
// and emits (the verifier admits nothing the emitters reject).
TEST(KernelIrText, DamagedTextIsReadOrRefused) {
  std::string text = kir::print_kernels(schedule_model("tests/kernels/gather.tir").schedule.kernels) +
                     kir::print_kernels(schedule_model("tests/kernels/layernorm.tir").schedule.kernels);
  std::mt19937 rng(7);
  const std::string bytes = "%0123456789[]|,:=+*- \nabxyz\"";
  std::vector<std::string> damaged;
  for (size_t cut = 0; cut < text.size(); cut += 7) damaged.push_back(text.substr(0, cut));
  for (int n = 0; n < 3000; ++n) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = bytes[rng() % bytes.size()];
    damaged.push_back(t);
  }
  int read = 0;
  for (const std::string& t : damaged) {
    std::vector<kir::Kernel> kernels;
    try {
      kernels = kir::parse_kernels(t, "t.kir");
    } catch (const InputError&) {
      continue;
    }
    ++read;
    kir::print_kernels(kernels);
    emit_cuda(kernels);
    emit_host(kernels);
  }
  EXPECT_GT(read, 0);  // some damage (a renamed buffer, another constant) still reads
}

TEST(KernelIrVerify, AcceptsWhatTheLoweringMakesAndNamesTheInstructionAtFault) {
  std::vector<kir::Kernel> kernels = schedule_model("tests/kernels/softmax.tir").schedule.kernels;
  ASSERT_FALSE(kernels.empty());
  kir::Kernel k = kernels[0];
  EXPECT_FALSE(kir::verify_kernel(k).has_value());
  k.body.back().args = {static_cast<int>(k.body.size())};
  std::optional<kir::KernelProblem> p = kir::verify_kernel(k);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->instr, static_cast<int>(k.body.size()) - 1);
  EXPECT_NE(p->message.find("which is not defined before it"), std::string::npos) << p->message;
}

}  // namespace
}  // namespace tcc
