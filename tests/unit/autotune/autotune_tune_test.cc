// The tuning loop of src/autotune/tune.h with a synthetic KernelBench in place
// of the GPU: what is measured, what wins, what reaches the cache, and the
// table `tcc autotune` prints from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "codegen/emit.h"
#include "codegen/memory_plan.h"
#include "src/autotune/candidates.h"
#include "src/autotune/signature.h"
#include "src/autotune/table.h"
#include "src/autotune/tune.h"
#include "tests/unit/autotune/autotune_util.h"

namespace tcc::autotune {
namespace {

// Fastest at 128 threads, one row per block and float4 where legal (10 us),
// a row cache or tiles saving a quarter microsecond, attention with eight lanes
// to a row; 1024-thread configs "fail to
// compile"; library kernels are fastest with the third-ranked algorithm and
// "offer" only seven; records what it was asked, each timing taking a second
// of the fixture's clock.
class FakeBench : public KernelBench {
 public:
  FakeBench(std::set<std::string>& timed, double& clock, const kir::Kernel& k, bool default_fails)
      : timed_(timed), clock_(clock), k_(k), default_fails_(default_fails) {}
  void precompile(const std::vector<KernelConfig>& configs) override { precompiled_ += configs.size(); }
  std::optional<double> time_us(const KernelConfig& c, std::string& note) override {
    timed_.insert(k_.name + " " + config_text(k_, c));
    clock_ += 1;
    if (c.block == 1024 || (default_fails_ && c == default_config(k_))) {
      note = "failed to compile: synthetic";
      return std::nullopt;
    }
    if (k_.kind == kir::Kind::Gemm || k_.kind == kir::Kind::Conv) {
      if (c.tile > 0) return 20 + c.tile;  // tcc's GEMM template: slower than the library here
      if (c.algo == kLibraryAlgos - 1) {
        note = "the library offers 7 algorithms for this problem";
        return std::nullopt;
      }
      return 10 + std::abs(c.algo - 2);
    }
    return 10 + std::abs(std::log2(c.block) - 7) + (c.rows_per_block - 1) * 0.5 +
           (vectorizes(k_) && c.vector_width == 1 ? 1 : 0) - (c.row_cache > 0 || c.tiled ? 0.25 : 0) +
           (k_.kind == kir::Kind::Attention && c.lanes_per_row != 8 ? 0.5 : 0);
  }
  size_t precompiled_ = 0;

 private:
  std::set<std::string>& timed_;
  double& clock_;
  const kir::Kernel& k_;
  bool default_fails_;
};

class AutotuneTune : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = schedule_model("tests/fixtures/gpt2_block.onnx");
    measurer_.device = {"Fake GPU", "sm_90", "13.0", "13.0"};
    measurer_.bench = [this](const kir::Kernel& k, const std::map<std::string, int64_t>&) {
      return std::make_unique<FakeBench>(timed_, clock_, k, k.name == failing_default_);
    };
  }
  const std::vector<kir::Kernel>& kernels() const { return model_.schedule.kernels; }
  int tunable() const { return static_cast<int>(kernels().size()); }

  ScheduledModel model_;
  Measurer measurer_;
  std::set<std::string> timed_;
  double clock_ = 0;
  std::string failing_default_;
};

// Whether any candidate of kernel `name` was timed.
bool timed_kernel(const std::set<std::string>& timed, const std::string& name) {
  return std::any_of(timed.begin(), timed.end(), [&](const std::string& t) { return t.rfind(name + " ", 0) == 0; });
}

// A budget of 12 timings: the heaviest kernel (the block's MLP GEMM or
// attention, by bytes and FLOPs) is measured first, timing stops once the
// budget is spent, and the kernels after it keep their defaults with the
// budget's note.
TEST_F(AutotuneTune, BudgetMeasuresTheHeaviestKernelsFirstAndStops) {
  TuneOptions o;
  o.measurer = &measurer_;
  o.budget_s = 12;
  o.clock = [this] { return clock_; };
  TuneResult r = tune_kernels(kernels(), {}, o);
  EXPECT_GE(clock_, 12);
  EXPECT_LE(clock_, 12 + 1);  // the timing that crossed the budget is the last
  EXPECT_GT(r.cut_by_budget, 0);
  EXPECT_EQ(r.by_measurement + r.by_heuristic, tunable());
  EXPECT_EQ(r.by_heuristic, r.cut_by_budget);
  EXPECT_DOUBLE_EQ(r.spent_s, clock_);
  size_t heaviest = 0;
  uint64_t most = 0;
  for (size_t i = 0; i < kernels().size(); ++i) {
    uint64_t w = static_cast<uint64_t>(evaluate_bytes(bytes_moved(kernels()[i]), {}) +
                                       evaluate_bytes(flop_count(kernels()[i]), {}) / 16);
    if (w > most) most = w, heaviest = i;
  }
  EXPECT_EQ(r.kernels[heaviest].source, KernelChoice::Source::Measured) << kernels()[heaviest].name;
  for (size_t i = 0; i < kernels().size(); ++i) {
    const KernelChoice& c = r.kernels[i];
    if (c.source != KernelChoice::Source::Heuristic) continue;
    EXPECT_FALSE(timed_kernel(timed_, kernels()[i].name)) << kernels()[i].name;
    EXPECT_EQ(c.note, budget_note(12)) << kernels()[i].name;
    EXPECT_EQ(c.config, default_config(kernels()[i]));
  }
  EXPECT_EQ(budget_summary(r, 12).rfind("; " , 0), 0u);
  EXPECT_NE(budget_summary(r, 12).find("kernels left unmeasured"), std::string::npos) << budget_summary(r, 12);
}

// Two kernels of one signature (the same kernel twice): timed once, both take its choice.
TEST_F(AutotuneTune, IdenticalKernelsAreTunedOnce) {
  std::vector<kir::Kernel> twice = {kernels().front(), kernels().front()};
  twice[1].name += "_again";
  TuneOptions o;
  o.measurer = &measurer_;
  TuneResult r = tune_kernels(twice, {}, o);
  EXPECT_EQ(r.shared, 1);
  EXPECT_EQ(r.by_measurement, 2);
  EXPECT_EQ(r.measured.size(), 1u);
  EXPECT_FALSE(timed_kernel(timed_, twice[1].name));
  EXPECT_EQ(r.configs[0], r.configs[1]);
  EXPECT_EQ(r.kernels[1].note, "tuned once with " + twice[0].name + " (the same signature)");
}

TEST_F(AutotuneTune, MeasuresEveryKernelAndRecordsTheFastest) {
  TuneOptions o;
  o.measurer = &measurer_;
  TuneResult r = tune_kernels(kernels(), {}, o);
  EXPECT_EQ(r.by_measurement, tunable());
  EXPECT_EQ(r.by_heuristic, 0);
  ASSERT_EQ(r.measured.size(), static_cast<size_t>(tunable()));
  size_t e = 0;
  for (size_t i = 0; i < kernels().size(); ++i) {
    const kir::Kernel& k = kernels()[i];
    KernelConfig want{128, vectorizes(k) ? 4 : 1, 1};
    want.row_cache = fitting_row_cache(k, want);
    want.tiled = transpose_axis(k) >= 0;
    if (k.kind == kir::Kind::Gemm || k.kind == kir::Kind::Conv) {
      want = KernelConfig{};
      want.algo = 2;
    }
    if (k.kind == kir::Kind::Attention) {
      want = KernelConfig{};
      want.block = 128;
      want.lanes_per_row = 8;
    }
    EXPECT_EQ(r.configs[i], want) << k.name;
    EXPECT_EQ(r.kernels[i].source, KernelChoice::Source::Measured);
    const CacheEntry& entry = r.measured[e++];
    EXPECT_EQ(entry.config, want);
    EXPECT_EQ(entry.device, measurer_.device);
    EXPECT_EQ(entry.signature, kernel_signature(k, {}));
    // The fake's fastest: 10 at block 128, less with a row cache or tiles.
    double fastest = want.row_cache > 0 || want.tiled ? 9.75 : 10;
    EXPECT_DOUBLE_EQ(entry.time_us, fastest);
    EXPECT_GE(entry.default_time_us, entry.time_us);
    // Every grid candidate was timed (1024 included, failing) and counted only when it ran; the
    // attention's grid has no 1024-thread block, so all of its ran.
    for (const KernelConfig& c : candidates(k)) EXPECT_TRUE(timed_.count(k.name + " " + config_text(k, c)));
    if (k.kind == kir::Kind::Attention) EXPECT_EQ(entry.candidates, static_cast<int>(r.kernels[i].rows.size()));
    else EXPECT_LT(entry.candidates, static_cast<int>(r.kernels[i].rows.size()));
  }
}

TEST_F(AutotuneTune, CachedKernelsAreNotMeasuredAgainUnlessAsked) {
  TuneOptions o;
  o.measurer = &measurer_;
  std::vector<CacheEntry> cache = tune_kernels(kernels(), {}, o).measured;
  timed_.clear();
  o.cache = &cache;
  TuneResult again = tune_kernels(kernels(), {}, o);
  EXPECT_EQ(again.from_cache, tunable());
  EXPECT_TRUE(again.measured.empty());
  EXPECT_TRUE(timed_.empty());
  o.measure_cached = true;
  EXPECT_EQ(tune_kernels(kernels(), {}, o).by_measurement, tunable());
  // Entries of another device are not used with a GPU.
  for (CacheEntry& c : cache) c.device.driver = "12.0";
  o.measure_cached = false;
  EXPECT_EQ(tune_kernels(kernels(), {}, o).from_cache, 0);
}

TEST_F(AutotuneTune, AFailingDefaultKeepsTheDefaultAndIsNotCached) {
  const kir::Kernel* k = first_kernel(model_.schedule, kir::Kind::Reduction);
  failing_default_ = k->name;
  TuneOptions o;
  o.measurer = &measurer_;
  TuneResult r = tune_kernels(kernels(), {}, o);
  size_t i = static_cast<size_t>(k - kernels().data());
  EXPECT_EQ(r.configs[i], default_config(*k));
  EXPECT_EQ(r.kernels[i].source, KernelChoice::Source::Heuristic);
  EXPECT_NE(r.kernels[i].note.find("the default configuration failed (failed to compile: synthetic)"),
            std::string::npos);
  EXPECT_EQ(r.measured.size(), static_cast<size_t>(tunable() - 1));
}

TEST_F(AutotuneTune, TableListsCandidatesFastestFirstWithPercentages) {
  TuneOptions o;
  o.measurer = &measurer_;
  o.refine = false;
  TuneResult r = tune_kernels(kernels(), {}, o);
  std::vector<int> steps(kernels().size(), 1);
  std::string table = tuning_table(kernels(), r, steps);
  const kir::Kernel* red = first_kernel(model_.schedule, kir::Kind::Reduction);
  std::string head = "AUTOTUNE " + red->name + " " + op_summary(*red, {}) + "\n";
  size_t at = table.find(head);
  ASSERT_NE(at, std::string::npos) << table;
  std::string block = table.substr(at + head.size());
  EXPECT_EQ(block.find("  block=128 rows=1 cache=1      9.75 us  100.0%  <- chosen (measured)\n"
                       "  block=128 rows=1             10.00 us   97.5%\n"),
            0u)
      << block;
  EXPECT_NE(block.find("  block=64 rows=1 cache=1      10.75 us   90.7%  [default]\n"), std::string::npos) << block;
  EXPECT_NE(block.find("  block=1024 rows=1          failed to compile: synthetic"), std::string::npos) << block;
  EXPECT_NE(table.find("Summary: " + std::to_string(kernels().size()) + " kernels: " + std::to_string(tunable()) +
                       " measured, 0 from the cache, 0 by heuristics"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Expected gain: "), std::string::npos) << table;
}

TEST_F(AutotuneTune, WithoutAGpuNothingIsMeasuredOrRecorded) {
  TuneResult r = tune_kernels(kernels(), {}, TuneOptions{});
  EXPECT_EQ(r.by_heuristic, tunable());
  EXPECT_TRUE(r.measured.empty());
  EXPECT_EQ(r.device_note, "no tuning cache entries");
  for (size_t i = 0; i < kernels().size(); ++i) {
    EXPECT_EQ(r.configs[i], default_config(kernels()[i]));
    for (const CandidateRow& row : r.kernels[i].rows) EXPECT_FALSE(row.time_us);
  }
}

}  // namespace
}  // namespace tcc::autotune
