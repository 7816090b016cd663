// The schedule decisions of codegen/kernel_schedule.h (the schedule passes build_schedule runs) read the target
// device's SM count: a GPU with fewer SMs splits few long rows fewer ways and
// stops splitting at fewer rows; one with as many SMs decides alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/emit.h"
#include "codegen/kernel_schedule.h"
#include "codegen/template_kernel.h"
#include "tests/unit/support/compile_util.h"
#include "tests/unit/codegen/emit_kernels.h"
#include "tests/unit/codegen/schedule_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using kir::Op;
using namespace emit_kernels;

// y[r] = sum of x[r, :], rows of `len` elements.
kir::Kernel sum_rows(int64_t rows, int64_t len) {
  KernelBuilder kb("k", kir::Kind::Reduction, {S(rows), S(len)}, 1);
  int x = kb.buffer("x", DType::F32, {S(rows), S(len)});
  int y = kb.buffer("y", DType::F32, {S(rows)}, true);
  kb.store(y, {S(1), S(0)}, kb.op(Op::ReduceSum, DType::F32, {kb.load(x, DType::F32, {S(len), S(1)})}, true), true);
  return kb.done();
}

// y[c] = sum of x[:, c] over `rows` rows of `cols` columns: rows side by side in memory.
kir::Kernel sum_columns(int64_t rows, int64_t cols) {
  KernelBuilder kb("k", kir::Kind::Reduction, {S(cols), S(rows)}, 1);
  int x = kb.buffer("x", DType::F32, {S(rows), S(cols)});
  int y = kb.buffer("y", DType::F32, {S(cols)}, true);
  kb.store(y, {S(1), S(0)}, kb.op(Op::ReduceSum, DType::F32, {kb.load(x, DType::F32, {S(1), S(cols)})}, true), true);
  return kb.done();
}

TEST(KernelSchedule, ProfilesDifferInSmCount) {
  EXPECT_EQ(default_device().name, "h100");
  EXPECT_EQ(default_device().sms, 132);
  EXPECT_EQ(find_device("h200").sms, 132);
  EXPECT_EQ(find_device("a100").sms, 108);
}

// Two blocks per SM in all, and no split from as many rows as SMs on.
TEST(KernelSchedule, RowSplitsFollowTheSmCount) {
  const DeviceProfile& h100 = find_device("h100");
  const DeviceProfile& h200 = find_device("h200");
  const DeviceProfile& a100 = find_device("a100");
  kir::Kernel global_sum = sum_rows(1, 1 << 24);
  EXPECT_EQ(reduction_split(global_sum, h100), 264);
  EXPECT_EQ(reduction_split(global_sum, h200), 264);
  EXPECT_EQ(reduction_split(global_sum, a100), 216);
  EXPECT_EQ(reduction_split(global_sum), reduction_split(global_sum, h100));
  kir::Kernel rows_120 = sum_rows(120, 1 << 20);
  EXPECT_EQ(reduction_split(rows_120, h100), 3);
  EXPECT_EQ(reduction_split(rows_120, a100), 1);
  EXPECT_EQ(default_config(rows_120, h100).split, 3);
  EXPECT_EQ(default_config(rows_120, a100).split, 1);
  // Slices of at least 4096 elements bound the split on either device.
  EXPECT_EQ(reduction_split(sum_rows(4, 16384), h100), 4);
  EXPECT_EQ(reduction_split(sum_rows(4, 16384), a100), 4);
}

// Sixteen column blocks per SM: 4096 columns are 128 blocks of 32 rows side
// by side, so 17 slices on 132 SMs and 14 on 108.
TEST(KernelSchedule, ColumnSplitsFollowTheSmCount) {
  kir::Kernel bias_grad = sum_columns(65536, 4096);
  EXPECT_EQ(column_split(bias_grad, find_device("h100")), 17);
  EXPECT_EQ(column_split(bias_grad, find_device("a100")), 14);
  KernelConfig c = default_config(bias_grad, find_device("a100"));
  EXPECT_TRUE(c.columns);
  EXPECT_EQ(c.split, 14);
  EXPECT_EQ(launch_config(bias_grad, c).grid[1], S(14));
}

// build_schedule runs the kernel-IR pipeline, the schedule passes last: every
// kernel carries what default_config chooses for it, and each pass's
// counters add up over the kernels.
TEST(KernelSchedule, TheScheduleStageRunsTheSchedulePasses) {
  ScheduledModel m = schedule_model("tests/fixtures/gpt2_block.onnx");
  ASSERT_FALSE(m.schedule.kernels.empty());
  for (const kir::Kernel& k : m.schedule.kernels) {
    ASSERT_TRUE(k.schedule.has_value()) << k.name;
    EXPECT_EQ(*k.schedule, default_config(k)) << k.name;
  }
  std::vector<std::string> names;
  for (const PassRecord& r : m.schedule.kernel_passes) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"collapse_axes", "vectorize", "split_reductions", "choose_schedule"}));
  const PassRecord& vectorize = m.schedule.kernel_passes[1];
  const PassRecord& choose = m.schedule.kernel_passes[3];
  EXPECT_TRUE(vectorize.changed);
  EXPECT_GT(vectorize.stats.counters.at("vectorized"), 0);
  EXPECT_TRUE(choose.changed);
  EXPECT_GT(choose.stats.counters.at("scheduled"), 0);
  EXPECT_GT(choose.stats.counters.at("row caches"), 0);  // softmax and the layer norms
}

// The schedule passes read the device build_schedule is given.
TEST(KernelSchedule, BuildScheduleSchedulesForTheDevice) {
  ScheduledModel m = schedule_model("tests/kernels/long_rows.tir");
  for (const char* device : {"h100", "a100"}) {
    Schedule s = build_schedule(*m.model->graph, find_device(device));
    for (const kir::Kernel& k : s.kernels) EXPECT_EQ(*k.schedule, default_config(k, find_device(device))) << k.name;
    EXPECT_EQ(s.kernels.at(1).schedule->split, device == std::string("h100") ? 132 : 108);
  }
}

// `tcc compile --device` decides the module's schedule: long_rows.tir's
// global-length maxima split two blocks per SM of the device it names.
TEST(KernelSchedule, CompileSplitsForTheTargetDevice) {
  fs::path dir = make_temp_dir("tcc_kernel_schedule");
  auto schedules = [&](const std::string& device) {
    CompileOptions o = quick_compile_options();
    o.host = false;
    o.device = device;
    compile_model(std::string(TCC_SOURCE_DIR) + "/tests/kernels/long_rows.tir", dir / device, o);
    std::ifstream in(dir / device / "manifest.json");
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json manifest = nlohmann::json::parse(text.str());
    std::vector<std::string> out;
    for (const auto& k : manifest.at("kernels")) out.push_back(k.at("schedule"));
    return out;
  };
  std::vector<std::string> h100 = schedules("h100"), a100 = schedules("a100");
  ASSERT_EQ(h100.size(), 3u);
  ASSERT_EQ(a100.size(), 3u);
  EXPECT_EQ(h100[1], "block 512, rows 1, split 132");
  EXPECT_EQ(a100[1], "block 512, rows 1, split 108");
  EXPECT_EQ(h100[0], a100[0]);  // four rows of 65536: sixteen slices of 4096 on either
  fs::remove_all(dir);
}

// Each template kind declares every hook, and the other kinds none: emit_cuda
// and emit_host print pointwise and reduction kernels, gemm and conv are library calls.
TEST(TemplateKernel, EachTemplateKindHasEveryHook) {
  const std::set<kir::Kind> untemplated = {kir::Kind::Pointwise, kir::Kind::Reduction, kir::Kind::Gemm,
                                           kir::Kind::Conv};
  for (kir::Kind kind : {kir::Kind::Pointwise, kir::Kind::Reduction, kir::Kind::Gemm, kir::Kind::Conv,
                         kir::Kind::Attention, kir::Kind::TopK, kir::Kind::Recurrence, kir::Kind::Nms,
                         kir::Kind::RoiAlign}) {
    SCOPED_TRACE(kir::kind_name(kind));
    const TemplateKernel* t = template_kernel(kind);
    if (untemplated.count(kind)) {
      EXPECT_EQ(t, nullptr);
      continue;
    }
    ASSERT_NE(t, nullptr);
    EXPECT_TRUE(t->default_config && t->refusal && t->configs && t->emit_cuda && t->emit_host && t->launch &&
                t->precision && t->schedule && t->config_text);
  }
}

// A template's default config and every config autotuning measures are ones its
// refusal takes, and its launch runs the config's block.
TEST(TemplateKernel, DefaultsAndCandidatesPassTheirRefusal) {
  for (const char* model : {"tests/kernels/attention.tir", "tests/kernels/attention_grad.tir", "tests/kernels/topk.tir",
                            "tests/kernels/recurrence.tir", "tests/kernels/nms.tir", "tests/kernels/roi_align.tir"})
    for (const kir::Kernel& k : schedule_model(model).schedule.kernels) {
      SCOPED_TRACE(std::string(model) + " " + k.name);
      const TemplateKernel* t = template_kernel(k.kind);
      ASSERT_NE(t, nullptr);
      const KernelConfig d = t->default_config(k);
      EXPECT_EQ(t->refusal(k, d), "");
      EXPECT_EQ(d, default_config(k));
      const std::vector<KernelConfig> configs = t->configs(k);
      EXPECT_FALSE(configs.empty());
      for (const KernelConfig& c : configs) EXPECT_EQ(t->refusal(k, c), "") << t->config_text(c);
      const KernelLaunch l = t->launch(k, d);
      EXPECT_EQ(l.block[0] * l.block[1] * l.block[2], d.block);
    }
}

}  // namespace
}  // namespace tcc
