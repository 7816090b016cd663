// tcc's tensor-core GEMM template (codegen/gemm_template.h). Without a GPU:
// every configuration (tile, split-K) of every gemm kernel of the test models
// compiles with NVRTC for sm_80 and sm_90, and runs on the host under a CUDA
// emulator against the reference interpreter; the kernel reads the operands and applies the epilogue its
// GemmDesc names, and its grid covers D. With one (scripts/gpu-check): every
// tile matches cuBLASLt's output at sizes that leave partial tiles on every
// edge, and a module whose gemms all run as templates passes `tcc run --check`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/gemm_template.h"
#include "codegen/module_writer.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "src/autotune/kernel_timer.h"
#include "src/autotune/signature.h"
#include "src/autotune/tuning_cache.h"
#include "src/interp/interpreter.h"
#include "src/module/shared_library.h"
#include "tcc_runtime.h"
#include "tests/unit/autotune/autotune_util.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/codegen/emulated_launch.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

const char* const kGemmModels[] = {"tests/kernels/gemm_bias_relu.tir", "tests/kernels/gemm_bias_residual.tir",
                                   "tests/kernels/gemm_bias_gelu.tir", "tests/kernels/gemm_transposed.tir",
                                   "tests/kernels/batched_matmul.tir",  "tests/kernels/batched_matmul_transposed.tir",
                                   "tests/kernels/matmul_weight_transposed.tir", "tests/fixtures/gpt2_block.onnx"};

// The GPT-2 block's kernels are the only ones over its symbols batch and seq.
bool from_fixture(const kir::Kernel& k) {
  return std::find(k.size_params.begin(), k.size_params.end(), "batch") != k.size_params.end();
}

std::vector<kir::Kernel> gemm_kernels() {
  std::vector<kir::Kernel> out;
  for (const char* path : kGemmModels) {
    ScheduledModel s = schedule_model(path);
    for (const kir::Kernel& k : s.schedule.kernels)
      if (k.kind == kir::Kind::Gemm) out.push_back(k);
  }
  return out;
}

// The template's configurations among autotuning's candidates for k: every
// tile, and the split-K ones.
std::vector<KernelConfig> template_configs(const kir::Kernel& k) {
  std::vector<KernelConfig> out;
  for (const KernelConfig& c : autotune::candidates(k))
    if (c.tile > 0) out.push_back(c);
  return out;
}

const kir::Kernel& only_gemm(const ScheduledModel& s) {
  const kir::Kernel* k = first_kernel(s.schedule, kir::Kind::Gemm);
  TCC_CHECK(k != nullptr) << "no gemm kernel";
  return *k;
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// Every configuration of the test models' gemms for sm_90; for sm_80, and for
// the GPT-2 block's gemms, each kernel at one configuration, in turn (NVRTC
// takes about half a second per template kernel on the build machine).
TEST(GemmTemplate, EveryConfigCompilesForEveryGemmOfTheTestModels) {
  std::vector<kir::Kernel> ks, rotation;
  std::vector<KernelConfig> configs, rotation_configs;
  for (const kir::Kernel& k : gemm_kernels()) {
    std::vector<KernelConfig> all = template_configs(k);
    ASSERT_EQ(all.size(), kGemmTiles.size() + 6) << "every tile, and three splits on two tiles";
    bool test_model = !from_fixture(k);
    size_t turn = rotation.size() % all.size();
    for (size_t i = 0; i < all.size(); ++i) {
      kir::Kernel copy = k;
      copy.name += "_c" + std::to_string(i) + "_" + std::to_string(ks.size() + rotation.size());
      if (i == turn) {
        rotation.push_back(copy);
        rotation_configs.push_back(all[i]);
      } else if (test_model) {
        ks.push_back(copy);
        configs.push_back(all[i]);
      }
    }
  }
  ASSERT_GE(rotation.size(), 8u);
  std::string cu = emit_cuda(ks, configs);
  EXPECT_EQ(count(cu, "void tcc_mma_tf32("), 1u) << "the helpers are emitted once";
  EXPECT_EQ(count(cu, "__global__ __launch_bounds__("), ks.size());
  EXPECT_EQ(count(cu, "tcc_split_arrive"), 0u) << "a split gemm needs no split reduction's helpers";
  std::vector<CudaBinary> bins = compile_cuda(cu, {"sm_90"}, false, 1);
  std::vector<CudaBinary> turns = compile_cuda(emit_cuda(rotation, rotation_configs), {"sm_80", "sm_90"}, false, 2);
  ASSERT_EQ(bins.size(), 1u);
  ASSERT_EQ(turns.size(), 2u);
  for (const auto& [bin, kernels] : {std::pair{bins[0], ks}, std::pair{turns[0], rotation}, std::pair{turns[1], rotation}}) {
    std::vector<std::string> symbols = cubin_symbols(bin.bytes);
    for (const kir::Kernel& k : kernels)
      EXPECT_NE(std::find(symbols.begin(), symbols.end(), k.name), symbols.end()) << k.name << " on " << bin.arch;
  }
}

TEST(GemmTemplate, ReadsTheOperandsAndAppliesTheEpilogueOfItsGemmDesc) {
  KernelConfig c;
  c.tile = 2;
  ScheduledModel transposed = schedule_model("tests/kernels/gemm_transposed.tir");
  std::string t = emit_cuda({only_gemm(transposed)}, {c});
  EXPECT_NE(t.find("__launch_bounds__(128) void tcc_k0_gemm("), std::string::npos) << t;
  EXPECT_NE(t.find("A + gc * lda + gr"), std::string::npos) << "A is stored k x m";
  EXPECT_NE(t.find("B + gc * ldb + gr"), std::string::npos) << "B is stored n x k";
  EXPECT_NE(t.find("float v = 0.5f * acc[i][j][q]; v += 2.0f * C[gr * ldd + gc]; D[gr * ldd + gc] = v;"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("tanhf"), std::string::npos);

  ScheduledModel gelu = schedule_model("tests/kernels/gemm_bias_gelu.tir");
  std::string g = emit_cuda({only_gemm(gelu)}, {c});
  EXPECT_NE(g.find("A + gr * lda + gc"), std::string::npos);
  EXPECT_NE(g.find("B + gr * ldb + gc"), std::string::npos);
  EXPECT_NE(g.find("float v = acc[i][j][q]; v += p2[gc];"), std::string::npos) << g;
  EXPECT_NE(g.find("tanhf(0.7978845608f * (v + 0.044715f * v * v * v))"), std::string::npos) << g;
  EXPECT_EQ(g.find("C["), std::string::npos);

  ScheduledModel batched = schedule_model("tests/kernels/batched_matmul.tir");
  const kir::Kernel& bk = only_gemm(batched);
  std::string b = emit_cuda({bk}, {c});
  EXPECT_NE(b.find("const float* __restrict__ A = p0 + z * (" + emitc::size_expr(bk.gemm->stride_a) + ");"),
            std::string::npos)
      << b;
  // The library call emits nothing.
  EXPECT_EQ(emit_cuda({bk}).find("tcc_k"), std::string::npos);
}

TEST(GemmTemplate, GridCoversTheOutputEveryBatchAndSlice) {
  ScheduledModel batched = schedule_model("tests/kernels/batched_matmul.tir");
  const kir::Kernel& k = only_gemm(batched);
  std::map<std::string, int64_t> sizes = {{"b", 3}, {"s", 200}};
  for (const KernelConfig& c : template_configs(k)) {
    SCOPED_TRACE(gemm_template_text(c));
    const GemmTile& t = kGemmTiles[static_cast<size_t>(c.tile - 1)];
    KernelLaunch l = launch_config(k, c);
    int64_t tiles_m = (200 + t.bm - 1) / t.bm, tiles_n = (200 + t.bn - 1) / t.bn;
    EXPECT_EQ(*l.grid[0].evaluate(sizes), tiles_m);
    EXPECT_EQ(*l.grid[1].evaluate(sizes), tiles_n);
    EXPECT_EQ(*l.grid[2].evaluate(sizes), 3 * 4 * c.split) << "a block row per batch matrix and K slice";
    EXPECT_EQ(l.block[0], t.threads());
    if (c.split == 1) EXPECT_EQ(l.workspace_bytes, SymExpr());
    else EXPECT_EQ(*l.workspace_bytes.evaluate(sizes), tiles_m * tiles_n * 12 * (c.split * t.bm * t.bn * 4 + 4));
  }
}

TEST(GemmTemplate, ComputesF32GemmsOnly) {
  ScheduledModel s = schedule_model("tests/kernels/gemm_bias_relu.tir");
  kir::Kernel k = only_gemm(s);
  EXPECT_EQ(gemm_template_refusal(k), "");
  k.buffers[1].dtype = DType::BF16;
  EXPECT_EQ(gemm_template_refusal(k), "the template computes f32 operands only; 'w' is bf16");
  ScheduledModel softmax = schedule_model("tests/kernels/softmax.tir");
  EXPECT_EQ(gemm_template_refusal(softmax.schedule.kernels.front()), "only gemm kernels have a template");
}

// The template's CUDA text, run on the host by tests/unit/codegen/cuda_emulator.h
// (threads, barriers, cp.async and mma.sync emulated), against the reference
// interpreter on random inputs: every configuration of every gemm test model,
// at sizes that give several blocks along M or N, partial tiles and several K
// steps (and slices with none, where K has fewer tiles than the split).
TEST(GemmTemplate, EmulatedOnTheHostEveryConfigMatchesTheInterpreter) {
  struct Case {
    const char* model;
    std::map<std::string, int64_t> sizes;
    bool splits;  // also the split-K configurations (the emulator takes seconds per model for them)
  };
  const Case cases[] = {{"tests/kernels/gemm_bias_relu.tir", {{"b", 70}}, false},
                        {"tests/kernels/gemm_bias_residual.tir", {{"b", 3}, {"s", 23}}, false},
                        {"tests/kernels/gemm_bias_gelu.tir", {{"b", 3}, {"s", 11}}, true},
                        {"tests/kernels/gemm_transposed.tir", {{"m", 75}}, true},
                        {"tests/kernels/batched_matmul.tir", {{"b", 2}, {"s", 5}}, true},
                        {"tests/kernels/batched_matmul_transposed.tir", {{"b", 2}, {"s", 21}}, false},
                        {"tests/kernels/matmul_weight_transposed.tir", {{"b", 3}, {"s", 29}}, false}};
  auto configs_of = [&](size_t m, const kir::Kernel& k) {
    std::vector<KernelConfig> out;
    for (const KernelConfig& c : template_configs(k))
      if (cases[m].splits || c.split == 1) out.push_back(c);
    return out;
  };
  fs::path dir = make_temp_dir("tcc_gemm_emulated");
  std::vector<ScheduledModel> models;
  std::string source = "#include \"" + std::string(TCC_SOURCE_DIR) + "/tests/unit/codegen/cuda_emulator.h\"\n";
  for (const Case& c : cases) {
    models.push_back(schedule_model(c.model));
    ASSERT_EQ(models.back().schedule.kernels.size(), 1u) << c.model;
    const kir::Kernel& base = models.back().schedule.kernels[0];
    std::vector<KernelConfig> configs = configs_of(models.size() - 1, base);
    for (size_t i = 0; i < configs.size(); ++i) {
      kir::Kernel k = base;
      k.name = "m" + std::to_string(models.size() - 1) + "_c" + std::to_string(i);
      source += emit_gemm_template(k, configs[i]) + emulated_launcher(k, configs[i].split > 1);
    }
  }
  std::ofstream(dir / "emulated.cc") << source;
  compile_host_library((dir / "emulated.cc").string(), (dir / "emulated.so").string());
  SharedLibrary lib((dir / "emulated.so").string());

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (size_t m = 0; m < models.size(); ++m) {
    SCOPED_TRACE(cases[m].model);
    const Graph& g = *models[m].model->graph;
    std::map<std::string, Tensor> inputs;
    for (const Value* v : g.inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : v->type().shape()) shape.push_back(*d.expr().evaluate(cases[m].sizes));
      Tensor t(DType::F32, shape);
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, uniform(rng));
      inputs.emplace(v->name(), std::move(t));
    }
    Interpreter interp;
    std::vector<Tensor> want = interp.run(g, inputs);
    ASSERT_EQ(want.size(), 1u);
    const kir::Kernel& k = models[m].schedule.kernels[0];
    std::vector<KernelConfig> configs = configs_of(m, k);
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      const KernelConfig& c = configs[ci];
      SCOPED_TRACE(gemm_template_text(c));
      std::vector<Tensor> buffers;
      for (const kir::Buffer& b : k.buffers) {
        if (!b.output) {
          buffers.push_back(inputs.at(b.name));
          continue;
        }
        buffers.emplace_back(DType::F32, want[0].shape());
        for (int64_t i = 0; i < buffers.back().numel(); ++i) buffers.back().set_f64(i, std::nan(""));
      }
      std::vector<void*> ptrs;
      for (Tensor& t : buffers) ptrs.push_back(t.raw_mut());
      // The first model's operands are row-major with rows a multiple of four floats: its
      // kernels copy float4s from 16-byte aligned operands; every other configuration of it
      // runs with the inputs one float past alignment, where it must copy single floats.
      ASSERT_EQ(reinterpret_cast<uintptr_t>(ptrs[0]) % 16, 0u);
      std::vector<std::vector<float>> shifted;
      if (ci % 2 == 1 && m == 0)
        for (size_t b = 0; b < k.buffers.size(); ++b) {
          if (k.buffers[b].output) continue;
          shifted.emplace_back(static_cast<size_t>(buffers[b].numel()) + 1);
          std::memcpy(shifted.back().data() + 1, buffers[b].raw(), buffers[b].nbytes());
          ptrs[b] = shifted.back().data() + 1;
        }
      std::vector<int64_t> sizes;
      for (const std::string& s : k.size_params) sizes.push_back(cases[m].sizes.at(s));
      KernelLaunch l = launch_config(k, c);
      unsigned grid[3];
      for (int d = 0; d < 3; ++d) grid[d] = static_cast<unsigned>(*l.grid[d].evaluate(cases[m].sizes));
      // Zeroed, as the runtime allocates it; launched twice, since each launch must leave the counters at 0.
      std::vector<char> workspace(l.workspace_bytes == SymExpr() ? 0 : *l.workspace_bytes.evaluate(cases[m].sizes));
      auto launch =
          reinterpret_cast<EmulatedLaunch>(lib.symbol("launch_m" + std::to_string(m) + "_c" + std::to_string(ci)));
      ASSERT_NE(launch, nullptr);
      for (int run = 0; run < (c.split > 1 ? 2 : 1); ++run)
        launch(ptrs.data(), sizes.data(), workspace.data(), grid[0], grid[1], grid[2],
               static_cast<unsigned>(l.block[0]), 1);
      const Tensor& got = buffers.back();
      int64_t bad = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        double a = got.get_f64(i), b = want[0].get_f64(i);
        if (!(std::fabs(a - b) <= 1e-5 + 1e-5 * std::fabs(b)) && bad++ < 5)
          ADD_FAILURE() << "element " << i << ": template " << a << ", interpreter " << b;
      }
      EXPECT_EQ(bad, 0) << bad << " of " << got.numel() << " elements differ";
    }
  }
  fs::remove_all(dir);
}

// A GEMM whose K is long and symbolic, as a weight gradient's (batch x seq)
// is: D [32, 64] = A [32, k] B [k, 64], written into `dir`.
ScheduledModel long_k_gemm(const fs::path& dir) {
  std::ofstream(dir / "long_k.tir") << "graph main opset(ai.onnx: 17) {\n"
                                       "  input %a: f32[32, k]\n"
                                       "  input %b: f32[k, 64]\n"
                                       "  %y: f32[32, 64] = MatMul(%a, %b) name(\"weight_grad\")\n"
                                       "  output %y\n"
                                       "}\n";
  return schedule_model((dir / "long_k.tir").string());
}

// The tensor cores truncate as they accumulate (tests/unit/codegen/cuda_emulator.h,
// toward_zero), so one accumulator carried through a long K drifts by about an
// ulp of itself per mma: at K = 4096 on the H100 every unsplit tile failed
// autotuning's check, and a K that is symbolic (a weight gradient's batch x
// seq) could pass at the tuning size and drift at a larger one. The template
// adds each k step's three products into its accumulators with an f32 add, so
// its error stays that of an f32 dot product whatever K is.
TEST(GemmTemplate, EmulatedLongKStaysF32Accurate) {
  constexpr int64_t kM = 32, kN = 64, kK = 4096;
  fs::path dir = make_temp_dir("tcc_gemm_long_k");
  ScheduledModel s = long_k_gemm(dir);
  kir::Kernel k = only_gemm(s);
  KernelConfig c;
  c.tile = 5;  // 32 x 64 x 32: one block covers D
  ASSERT_EQ(kGemmTiles[4].bm, kM);
  ASSERT_EQ(kGemmTiles[4].bn, kN);
  k.name = "long_k";
  std::ofstream(dir / "emulated.cc") << "#include \"" << TCC_SOURCE_DIR << "/tests/unit/codegen/cuda_emulator.h\"\n"
                                     << emit_gemm_template(k, c) << emulated_launcher(k, false);
  compile_host_library((dir / "emulated.cc").string(), (dir / "emulated.so").string());
  SharedLibrary lib((dir / "emulated.so").string());

  // Entries in [0, 1): every product adds to the sums, which grow to about K / 4.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(0, 1);
  std::vector<float> a(kM * kK), b(kK * kN), d(kM * kN, std::nanf(""));
  for (float& x : a) x = unit(rng);
  for (float& x : b) x = unit(rng);
  void* buffers[] = {a.data(), b.data(), d.data()};
  const int64_t sizes[] = {kK};
  ASSERT_EQ(k.size_params, std::vector<std::string>{"k"});
  auto launch = reinterpret_cast<EmulatedLaunch>(lib.symbol("launch_long_k"));
  ASSERT_NE(launch, nullptr);
  launch(buffers, sizes, nullptr, 1, 1, 1, static_cast<unsigned>(kGemmTiles[4].threads()), 1);

  double worst = 0;
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double exact = 0;
      for (int64_t q = 0; q < kK; ++q) exact += static_cast<double>(a[i * kK + q]) * b[q * kN + j];
      worst = std::max(worst, std::fabs(d[i * kN + j] - exact) / exact);
    }
  // Rounded f32 adds err at random, about 1e-6 at worst here; one truncating
  // accumulator through K / 8 steps errs one way, by about 3e-5.
  EXPECT_LT(worst, 1e-5) << "the template drifts with K";
  fs::remove_all(dir);
}

class GemmTemplateGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!tcc_cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// Sizes that are no multiple of any tile (nor of 8 or 4), so every edge of D
// and of K has a partial tile; the first config timed (cuBLASLt's first
// choice) is the reference each configuration must match (src/autotune/kernel_timer.cc).
// Times k's library call and then every template configuration at `sizes`;
// timing a candidate first checks its output against the library call's, so
// one autotuning drops for its time alone (over the bound of ten times the
// default) has matched it.
void expect_every_config_matches_the_library(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
  std::unique_ptr<autotune::KernelBench> bench = runtime::cuda_measurer().bench(k, sizes);
  std::vector<KernelConfig> grid = {KernelConfig{}};
  for (const KernelConfig& c : template_configs(k)) grid.push_back(c);
  bench->precompile(grid);
  for (const KernelConfig& c : grid) {
    std::string note;
    std::optional<double> t = bench->time_us(c, note);
    EXPECT_TRUE(t || note.starts_with("over the time bound")) << k.name << " " << autotune::config_text(k, c) << ": "
                                                              << note;
  }
}

TEST_F(GemmTemplateGpu, EveryConfigMatchesTheLibraryAtOddSizes) {
  for (const kir::Kernel& k : gemm_kernels())
    expect_every_config_matches_the_library(k, {{"b", 3}, {"s", 53}, {"m", 131}, {"batch", 3}, {"seq", 77}});
}

// On the device, every tile passes the check at K = 16384, four times the K at
// which every unsplit tile failed it on the H100 before each step's products
// were summed apart (GemmTemplate.EmulatedLongKStaysF32Accurate); on the H200
// on 2026-11-27 all did, and the single-block tiles then exceeded the time bound.
TEST_F(GemmTemplateGpu, EveryConfigMatchesTheLibraryAtLongK) {
  fs::path dir = make_temp_dir("tcc_gemm_long_k_gpu");
  ScheduledModel s = long_k_gemm(dir);
  expect_every_config_matches_the_library(only_gemm(s), {{"k", 16384}});
  fs::remove_all(dir);
}

// A module whose every gemm runs as the template (a tuning cache that chose
// it, as a GPU would have) agrees with the reference interpreter end to end.
TEST_F(GemmTemplateGpu, ModuleOfTemplatesPassesRunCheck) {
  fs::path dir = make_temp_dir("tcc_gemm_template");
  ScheduledModel s = schedule_model("tests/fixtures/gpt2_block.onnx");
  std::map<std::string, int64_t> sizes = {{"batch", kUnhintedRunSize}, {"seq", kUnhintedRunSize}};
  autotune::DeviceKey device = runtime::current_device_key();
  size_t chosen = 0;
  // Every kernel has an entry (the others their default), so the compile measures nothing.
  std::vector<autotune::CacheEntry> entries = cache_entries(s.schedule, sizes, device, [&](const kir::Kernel& k) {
    if (k.kind != kir::Kind::Gemm) return default_config(k);
    std::vector<KernelConfig> configs = template_configs(k);
    return configs[chosen++ % configs.size()];
  });
  ASSERT_GT(chosen, 0u);
  autotune::write_cache((dir / "tune.json").string(), entries);
  std::string model = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/gpt2_block.onnx";
  CliResult r = run_tcc("compile " + shell_quote(model) + " -o " + shell_quote((dir / "m").string()) +
                        " --mode max-autotune-no-cudagraphs --cache " +
                        shell_quote((dir / "tune.json").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("0 kernels measured, " + std::to_string(entries.size()) + " from the cache"),
            std::string::npos)
      << r.output;
  r = run_tcc("run " + shell_quote((dir / "m").string()) + " --model " + shell_quote(model) + " --check");
  EXPECT_EQ(r.code, 0) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
