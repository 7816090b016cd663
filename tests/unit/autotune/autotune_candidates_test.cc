// Candidate configurations, coordinate descent over a synthetic cost, and the
// emitter honouring a KernelConfig while its defaults keep today's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "src/autotune/progress.h"
#include "src/autotune/signature.h"
#include "tests/unit/autotune/autotune_util.h"

namespace tcc::autotune {
namespace {

class AutotuneCandidates : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gpt2_ = new ScheduledModel(schedule_model("tests/fixtures/gpt2_block.onnx"));
    pointwise_ = new ScheduledModel(schedule_model("tests/kernels/pointwise_chain.tir"));
  }
  static void TearDownTestSuite() {
    delete gpt2_;
    delete pointwise_;
  }
  static const kir::Kernel& vectorizable() {
    for (const ScheduledModel* m : {pointwise_, gpt2_})
      for (const kir::Kernel& k : m->schedule.kernels)
        if (k.kind == kir::Kind::Pointwise && vectorizes(k)) return k;
    throw std::runtime_error("no vectorizable pointwise kernel in the fixtures");
  }
  static const kir::Kernel& reduction() { return *first_kernel(gpt2_->schedule, kir::Kind::Reduction); }

  static ScheduledModel* gpt2_;
  static ScheduledModel* pointwise_;
};
ScheduledModel* AutotuneCandidates::gpt2_ = nullptr;
ScheduledModel* AutotuneCandidates::pointwise_ = nullptr;

TEST_F(AutotuneCandidates, GridStartsAtTheDefaultAndHoldsOnlyValidDistinctConfigs) {
  for (const ScheduledModel* m : {gpt2_, pointwise_})
    for (const kir::Kernel& k : m->schedule.kernels) {
      std::vector<KernelConfig> grid = candidates(k);
      ASSERT_FALSE(grid.empty());
      EXPECT_EQ(grid.front(), default_config(k)) << k.name;
      for (size_t i = 0; i < grid.size(); ++i) {
        EXPECT_EQ(config_refusal(k, grid[i]), "") << k.name << " " << config_text(k, grid[i]);
        for (size_t j = 0; j < i; ++j) EXPECT_NE(grid[i], grid[j]) << k.name;
      }
      bool any_vec4 = std::any_of(grid.begin(), grid.end(), [](const KernelConfig& c) { return c.vector_width == 4; });
      EXPECT_EQ(any_vec4, k.kind == kir::Kind::Pointwise && vectorizes(k)) << k.name;
    }
}

TEST_F(AutotuneCandidates, PointwiseGridCoversBlocksAndBothVectorWidths) {
  std::vector<KernelConfig> grid = candidates(vectorizable());
  EXPECT_EQ(grid.size(), 10u);  // blocks 64..1024 x vector widths 4 and 1
  EXPECT_NE(std::find(grid.begin(), grid.end(), KernelConfig{1024, 1, 1}), grid.end());
  EXPECT_NE(std::find(grid.begin(), grid.end(), KernelConfig{64, 4, 1}), grid.end());
}

TEST_F(AutotuneCandidates, GemmsChooseALibraryAlgorithmOrATemplateTile) {
  const kir::Kernel& gemm = *first_kernel(gpt2_->schedule, kir::Kind::Gemm);
  std::vector<KernelConfig> grid = candidates(gemm);
  ASSERT_EQ(grid.size(), static_cast<size_t>(kLibraryAlgos) + kGemmTiles.size() + 6);
  for (int rank = 0; rank < kLibraryAlgos; ++rank) {
    EXPECT_EQ(grid[rank].algo, rank);
    EXPECT_EQ(grid[rank].tile, 0);
    EXPECT_EQ(config_text(gemm, grid[rank]), "cublaslt #" + std::to_string(rank));
  }
  for (size_t t = 0; t < kGemmTiles.size(); ++t) {
    const KernelConfig& c = grid[kLibraryAlgos + t];
    EXPECT_EQ(c.tile, static_cast<int>(t) + 1);
    EXPECT_EQ(c.algo, 0);
    EXPECT_EQ(c.split, 1);
  }
  // Then split-K by 2, 4 and 8 on the two-stage tiles of 64 x 64 and less.
  for (size_t i = kLibraryAlgos + kGemmTiles.size(); i < grid.size(); ++i) {
    const GemmTile& t = kGemmTiles[static_cast<size_t>(grid[i].tile - 1)];
    EXPECT_EQ(t.stages, 2);
    EXPECT_LE(t.bm * t.bn, 64 * 64);
    EXPECT_GT(grid[i].split, 1);
  }
  EXPECT_EQ(config_text(gemm, grid[kLibraryAlgos + 5]), "tf32x3 128x64x16 2x2 stages=3");
  EXPECT_EQ(config_text(gemm, grid.back()), "tf32x3 32x64x32 1x2 split=8");
  EXPECT_EQ(config_text(gemm, grid[kLibraryAlgos]), "tf32x3 128x128x16 2x4");
  KernelConfig launch_knob;
  launch_knob.block = 128;
  EXPECT_NE(config_refusal(gemm, launch_knob).find("choose a library algorithm"), std::string::npos);
  KernelConfig past_the_end;
  past_the_end.algo = kLibraryAlgos;
  EXPECT_NE(config_refusal(gemm, past_the_end).find("is not from 0 to 7"), std::string::npos);
  KernelConfig both;
  both.algo = 1;
  both.tile = 1;
  EXPECT_EQ(config_refusal(gemm, both), "the template runs no library algorithm");
  KernelConfig no_such_tile;
  no_such_tile.tile = static_cast<int>(kGemmTiles.size()) + 1;
  EXPECT_EQ(config_refusal(gemm, no_such_tile), "template tile 9 is not from 1 to 8");
  KernelConfig library_split;
  library_split.split = 2;
  EXPECT_EQ(config_refusal(gemm, library_split), "only the template splits K");
  KernelConfig too_many_slices;
  too_many_slices.tile = 1;
  too_many_slices.split = kMaxGemmSplit + 1;
  EXPECT_EQ(config_refusal(gemm, too_many_slices), "split 17 is not from 1 to 16");
  KernelConfig on_generated;
  on_generated.algo = 1;
  EXPECT_NE(config_refusal(reduction(), on_generated).find("only gemm and conv kernels"), std::string::npos);
  KernelConfig tile_on_generated;
  tile_on_generated = default_config(reduction());
  tile_on_generated.tile = 1;
  EXPECT_EQ(config_refusal(reduction(), tile_on_generated), "only gemm kernels choose a template tile");
  // The template computes f32 only: an f16 gemm keeps the library's algorithms.
  kir::Kernel half = gemm;
  for (kir::Buffer& b : half.buffers) b.dtype = DType::F16;
  EXPECT_EQ(candidates(half).size(), static_cast<size_t>(kLibraryAlgos));
  EXPECT_NE(config_refusal(half, grid.back()).find("the template computes f32 operands only"), std::string::npos);
  // The grid is every choice: descent has nowhere to go.
  int costed = 0;
  std::optional<DescentResult> d = coordinate_descent(gemm, grid[3], [&](const KernelConfig&) -> std::optional<double> {
    ++costed;
    return 1.0;
  });
  ASSERT_TRUE(d);
  EXPECT_EQ(d->best, grid[3]);
  EXPECT_EQ(costed, 1);
}

TEST_F(AutotuneCandidates, ConvsChooseAmongCudnnAlgorithmsOnly) {
  ScheduledModel conv = schedule_model("tests/kernels/conv_bias_relu.tir");
  const kir::Kernel& k = *first_kernel(conv.schedule, kir::Kind::Conv);
  std::vector<KernelConfig> grid = candidates(k);
  ASSERT_EQ(grid.size(), static_cast<size_t>(kLibraryAlgos));
  EXPECT_EQ(config_text(k, grid.back()), "cudnn #7");
  KernelConfig tile;
  tile.tile = 1;
  EXPECT_EQ(config_refusal(k, tile), "conv kernels have no template");
}

TEST_F(AutotuneCandidates, SplittableReductionsAlsoTrySplitFactors) {
  int splittable = 0;
  ScheduledModel long_rows = schedule_model("tests/kernels/long_rows.tir");
  for (const ScheduledModel* m : {gpt2_, pointwise_, &long_rows})
    for (const kir::Kernel& k : m->schedule.kernels) {
      std::vector<KernelConfig> grid = candidates(k);
      bool any_split = std::any_of(grid.begin(), grid.end(), [](const KernelConfig& c) { return c.split > 1; });
      EXPECT_EQ(any_split, splits_rows(k) || k.kind == kir::Kind::Gemm) << k.name << " (gemm: split-K)";
      if (!splits_rows(k)) continue;
      ++splittable;
      KernelConfig c = default_config(k);
      c.split = 64;
      EXPECT_NE(std::find(grid.begin(), grid.end(), c), grid.end()) << k.name;
      c.rows_per_block = 2;
      EXPECT_NE(config_refusal(k, c).find("one block per slice"), std::string::npos);
    }
  EXPECT_GT(splittable, 0);
  const kir::Kernel& red = reduction();
  KernelConfig c = default_config(red);
  c.split = 2 * kMaxSplit;
  EXPECT_NE(config_refusal(red, c).find("is not from 1 to 1024"), std::string::npos);
}

TEST_F(AutotuneCandidates, InvalidConfigsSayWhy) {
  const kir::Kernel& red = reduction();
  EXPECT_NE(config_refusal(red, {48, 1, 1}).find("multiple of 32"), std::string::npos);
  EXPECT_NE(config_refusal(red, {2048, 1, 1}).find("multiple of 32 from 32 to 1024"), std::string::npos);
  EXPECT_NE(config_refusal(red, {256, 4, 1}).find("vector width 4 needs"), std::string::npos);
  EXPECT_NE(config_refusal(red, {256, 1, 3}).find("rows per block 3"), std::string::npos);
  EXPECT_NE(config_refusal(vectorizable(), {256, 4, 2}).find("reductions only"), std::string::npos);
  EXPECT_NE(config_refusal(vectorizable(), {256, 2, 1}).find("vector width 2"), std::string::npos);
  EXPECT_EQ(config_text(red, {128, 1, 2}), "block=128 rows=2");
  EXPECT_EQ(config_text(vectorizable(), {512, 4, 1}), "block=512 vec=4");
}

// Attention kernels choose a layout and a block: heads up to 64 take the split
// layout at 2, 4 or 8 lanes to a row or the warp layout, at 64, 128 and 256
// threads; a head of 160 only the warp layout, where its tiles fit 48 KB.
TEST_F(AutotuneCandidates, AttentionChoosesItsLayoutAndBlock) {
  ScheduledModel s = schedule_model("tests/kernels/attention.tir");
  auto named = [&](const std::string& node) -> const kir::Kernel& {
    for (const kir::Kernel& k : s.schedule.kernels)
      if (k.nodes == std::vector<std::string>{node}) return k;
    throw std::runtime_error("no kernel computes " + node);
  };
  const kir::Kernel& small = named("gqa_causal");
  const kir::Kernel& wide = named("wide_heads");
  std::vector<KernelConfig> grid = candidates(small);
  EXPECT_EQ(grid.size(), 12u);
  EXPECT_EQ(grid.front().lanes_per_row, 4);
  EXPECT_EQ(grid.front().block, 128);
  for (int lanes : {0, 2, 4, 8})
    EXPECT_EQ(std::count_if(grid.begin(), grid.end(), [&](const KernelConfig& c) { return c.lanes_per_row == lanes; }),
              3)
        << lanes;
  std::vector<KernelConfig> wide_grid = candidates(wide);
  EXPECT_EQ(wide_grid.size(), 3u);
  for (const KernelConfig& c : wide_grid) EXPECT_EQ(c.lanes_per_row, 0);

  KernelConfig c = default_config(small);
  c.lanes_per_row = 3;
  EXPECT_NE(config_refusal(small, c).find("not 0 (the warp layout), 2, 4 or 8"), std::string::npos);
  c = default_config(small);
  c.block = 512;
  EXPECT_NE(config_refusal(small, c).find("from 32 to 256"), std::string::npos);
  c = default_config(small);
  c.vector_width = 4;
  EXPECT_NE(config_refusal(small, c).find("nothing else"), std::string::npos);
  c = default_config(wide);
  c.lanes_per_row = 4;
  EXPECT_NE(config_refusal(wide, c).find("do not fit the split layout's registers"), std::string::npos);
  EXPECT_EQ(config_text(small, grid.front()), "block=128 lanes=4");
  EXPECT_EQ(config_text(wide, wide_grid.front()), "block=64 warp layout");
}

TEST_F(AutotuneCandidates, CoordinateDescentFindsTheMinimumOfABowlCostingEachConfigOnce) {
  const kir::Kernel& k = vectorizable();
  // Cheapest at block 128 with scalar accesses; each step away costs more.
  std::map<std::tuple<int, int, int>, int> calls;
  CostFn cost = [&](const KernelConfig& c) -> std::optional<double> {
    ++calls[{c.block, c.vector_width, c.rows_per_block}];
    return 10 + std::abs(std::log2(c.block) - 7) + (c.vector_width == 4 ? 3 : 0);
  };
  std::optional<DescentResult> r = coordinate_descent(k, KernelConfig{1024, 4, 1}, cost);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->best, (KernelConfig{128, 1, 1}));
  EXPECT_DOUBLE_EQ(r->cost, 10);
  for (const auto& [c, n] : calls) EXPECT_EQ(n, 1);
  EXPECT_EQ(r->tried.size(), calls.size());
  EXPECT_EQ(r->tried.front().first, (KernelConfig{1024, 4, 1}));
}

TEST_F(AutotuneCandidates, CoordinateDescentSkipsFailingConfigsAndNeedsARunnableStart) {
  const kir::Kernel& red = reduction();
  // Blocks above 64 fail (as a candidate that does not compile would); rows help.
  CostFn cost = [](const KernelConfig& c) -> std::optional<double> {
    if (c.block > 64) return std::nullopt;
    return 100.0 / c.rows_per_block + c.block;
  };
  std::optional<DescentResult> r = coordinate_descent(red, KernelConfig{64, 1, 1}, cost);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->best, (KernelConfig{32, 1, 8}));
  EXPECT_FALSE(coordinate_descent(red, KernelConfig{256, 1, 1}, cost));
}

TEST_F(AutotuneCandidates, DefaultConfigsEmitTodaysCode) {
  const std::vector<kir::Kernel>& ks = gpt2_->schedule.kernels;
  std::vector<KernelConfig> defaults;
  for (const kir::Kernel& k : ks) defaults.push_back(default_config(k));
  EXPECT_EQ(emit_cuda(ks, defaults), emit_cuda(ks));
  for (const kir::Kernel& k : ks) {
    KernelLaunch a = launch_config(k), b = launch_config(k, default_config(k));
    EXPECT_EQ(a.grid[0], b.grid[0]);
    EXPECT_EQ(a.block, b.block);
  }
}

TEST_F(AutotuneCandidates, EmitterHonoursTheConfig) {
  const kir::Kernel& pw = vectorizable();
  EXPECT_NE(emit_cuda({pw}, {{256, 4, 1}}).find("float4"), std::string::npos);
  EXPECT_EQ(emit_cuda({pw}, {{256, 1, 1}}).find("float4"), std::string::npos);
  KernelLaunch l = launch_config(pw, {128, 4, 1});
  EXPECT_EQ(l.block[0], 128);
  EXPECT_EQ(l.grid[0], (domain_size(pw) + SymExpr::constant(511)).floordiv(SymExpr::constant(512)));

  const kir::Kernel& red = reduction();
  KernelLaunch r = launch_config(red, {64, 1, 4});
  EXPECT_EQ(r.block[0], 64);
  EXPECT_EQ(r.grid[0], (row_count(red) + SymExpr::constant(3)).floordiv(SymExpr::constant(4)));
  // A tuned module still compiles: every candidate of every kernel goes through NVRTC.
  std::vector<kir::Kernel> ks;
  std::vector<KernelConfig> configs;
  for (const kir::Kernel& k : {pw, red})
    for (const KernelConfig& c : candidates(k)) {
      kir::Kernel copy = k;
      copy.name += "_" + std::to_string(ks.size());
      ks.push_back(copy);
      configs.push_back(c);
    }
  std::vector<CudaBinary> bins = compile_cuda(emit_cuda(ks, configs), {"sm_90"}, false, 1);
  ASSERT_EQ(bins.size(), 1u);
  std::vector<std::string> symbols = cubin_symbols(bins[0].bytes);
  for (const kir::Kernel& k : ks)
    EXPECT_NE(std::find(symbols.begin(), symbols.end(), k.name), symbols.end()) << k.name;
}

TEST_F(AutotuneCandidates, SignatureHoldsStructureAndSizes) {
  ScheduledModel sym = schedule_model("tests/kernels/symbolic_dims.tir");
  const kir::Kernel& k = sym.schedule.kernels.front();
  ASSERT_FALSE(k.size_params.empty());
  std::string at8 = kernel_signature(k, {{k.size_params[0], 8}});
  EXPECT_NE(at8, kernel_signature(k, {{k.size_params[0], 16}}));
  EXPECT_EQ(at8.find(k.name), std::string::npos);  // names do not matter, structure does
  EXPECT_NE(at8.find("at " + k.size_params[0] + "=8"), std::string::npos) << at8;
  EXPECT_EQ(kernel_signature(k, {}), kernel_signature(k, {{k.size_params[0], 1}}));
  EXPECT_NE(op_summary(k, {{k.size_params[0], 8}}).find("8"), std::string::npos);
}

TEST(AutotuneProgress, FrameShowsCountAndEta) {
  EXPECT_EQ(ProgressBar::frame(5, 10, 10.0, "kernels"),
            "[###############...............] 5/10 kernels  ETA 10 s");
  EXPECT_EQ(ProgressBar::frame(10, 10, 3.0, "kernels"), "[##############################] 10/10 kernels");
  std::ostringstream out;
  ProgressBar off(out, false, "kernels");
  off.update(1, 2);
  off.finish();
  EXPECT_EQ(out.str(), "");
  ProgressBar on(out, true, "kernels");
  on.update(1, 2);
  on.finish();
  EXPECT_NE(out.str().find("\r[###############...............] 1/2 kernels"), std::string::npos);
}

}  // namespace
}  // namespace tcc::autotune
