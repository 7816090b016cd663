// The GPU's schedules of generated kernels: which reductions take column
// blocks (KernelConfig::columns), and the CUDA text of column, split and
// row-cache reductions, of tiled transposes, of scatters, of attention, of TopK and of the
// recurrence, compiled by NVRTC and run on the host by tests/unit/codegen/cuda_emulator.h
// against the reference interpreter, at the configurations autotuning tries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "codegen/attention_template.h"
#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/gemm_template.h"
#include "codegen/module_facts.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "src/interp/interpreter.h"
#include "src/module/shared_library.h"
#include "tests/unit/autotune/autotune_util.h"
#include "tests/unit/codegen/emulated_launch.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

std::vector<KernelConfig> column_configs(const kir::Kernel& k) {
  std::vector<KernelConfig> out;
  for (const KernelConfig& c : autotune::candidates(k))
    if (c.columns) out.push_back(c);
  return out;
}

// The config of `configs` that config_text spells `text`.
const KernelConfig* find_config(const kir::Kernel& k, const std::vector<KernelConfig>& configs,
                                const std::string& text) {
  for (const KernelConfig& c : configs)
    if (autotune::config_text(k, c) == text) return &c;
  return nullptr;
}

TEST(ColumnReduction, TakesReductionsWhoseRowsLieSideBySide) {
  ScheduledModel columns = schedule_model("tests/kernels/column_reductions.tir");
  ASSERT_EQ(columns.schedule.kernels.size(), 3u);
  for (const kir::Kernel& k : columns.schedule.kernels) {
    EXPECT_TRUE(reduces_columns(k)) << k.name;
    // The default reads in columns where the rows split (the sum and the max):
    // 2 or 3 column blocks of 32 rows, so the 64 slices the symbolic b may fill.
    KernelConfig d = default_config(k);
    EXPECT_EQ(d.columns, splits_rows(k)) << k.name;
    EXPECT_EQ(column_split(k), splits_rows(k) ? 64 : 0) << k.name;
    std::vector<KernelConfig> configs = column_configs(k);
    // Blocks of 64 to 1024 threads; the single-pass sum and max also 2 to 64 slices per row.
    ASSERT_EQ(configs.size(), splits_rows(k) ? 11u : 5u) << k.name;
    ASSERT_TRUE(row_count(k).is_constant());
    const SymExpr blocks = SymExpr::constant((row_count(k).constant_value() + 31) / 32);
    const KernelConfig* widest = find_config(k, configs, "block=1024 columns");
    ASSERT_NE(widest, nullptr) << k.name;
    KernelLaunch l = launch_config(k, *widest);
    EXPECT_EQ(l.block, (std::array<int, 3>{32, 32, 1}));
    EXPECT_EQ(l.grid[0], blocks) << k.name;
    EXPECT_EQ(l.workspace_bytes, SymExpr());
    if (!splits_rows(k)) continue;
    const KernelConfig* most = find_config(k, configs, "block=256 columns split=64");
    ASSERT_NE(most, nullptr) << k.name;
    EXPECT_EQ(*most, d) << k.name;
    l = launch_config(k, *most);
    EXPECT_EQ(l.block, (std::array<int, 3>{32, 8, 1}));
    EXPECT_EQ(l.grid[0], blocks) << k.name;
    EXPECT_EQ(l.grid[1], SymExpr::constant(64));
    EXPECT_EQ(l.workspace_bytes, row_count(k) * SymExpr::constant(64 * 8 + 4));
  }
  // Static extents: slices of at least 256 rows, and none where the column
  // blocks alone fill the GPU.
  ScheduledModel fixed = schedule_model("tests/kernels/column_reductions_static.tir");
  ASSERT_EQ(fixed.schedule.kernels.size(), 2u);
  EXPECT_EQ(column_split(fixed.schedule.kernels[0]), 4);
  EXPECT_EQ(column_split(fixed.schedule.kernels[1]), 1);
  EXPECT_TRUE(default_config(fixed.schedule.kernels[1]).columns);
  // Rows of contiguous elements (softmax and layer norm over the last axis),
  // a reduction over a middle axis whose rows are not adjacent, and kernels
  // that are no reduction take no columns.
  for (const char* model : {"tests/kernels/softmax.tir", "tests/kernels/layernorm.tir", "tests/kernels/concat.tir"})
    for (const kir::Kernel& k : schedule_model(model).schedule.kernels) {
      EXPECT_FALSE(reduces_columns(k)) << model << " " << k.name;
      KernelConfig c = default_config(k);
      c.columns = true;
      EXPECT_FALSE(config_refusal(k, c).empty()) << model << " " << k.name;
    }
}

// An input element of dtype t.
using Draw = std::function<double(DType t, std::mt19937& rng)>;

// Normal values; bools (an attention's mask) true three times in four.
double normal_or_bool(DType t, std::mt19937& rng) {
  std::normal_distribution<double> normal(0, 1);
  return t == DType::Bool ? rng() % 4 != 0 : normal(rng);
}

// Runs every kernel of `kernels` (configs[i] each, from `lib`) on random inputs
// at `sizes` and compares its outputs with the interpreter's run of s's graph,
// both at a random offset other than 0 (a module's fourth call). The kernels
// read each input `input_shift` bytes past a 16-byte boundary (a caller's
// device pointer need not be aligned as the module's arena is).
void expect_emulated_runs_match(const ScheduledModel& s, const std::vector<kir::Kernel>& kernels,
                                const std::vector<KernelConfig>& configs, const SharedLibrary& lib,
                                const std::map<std::string, int64_t>& sizes, const Draw& draw = normal_or_bool,
                                int input_shift = 0) {
  const Graph& g = *s.model->graph;
  std::mt19937 rng(11);
  std::map<std::string, Tensor> inputs;
  for (const Value* v : g.inputs()) {
    if (v->is_initializer()) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : v->type().shape()) shape.push_back(*d.expr().evaluate(sizes));
    Tensor t(v->type().dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, draw(t.dtype(), rng));
    inputs.emplace(v->name(), std::move(t));
  }
  const uint64_t offset = 3;
  Interpreter interp;
  interp.set_random_offset(offset);
  std::vector<Tensor> outs = interp.run(g, inputs);
  std::map<std::string, Tensor> want;
  for (size_t i = 0; i < outs.size(); ++i) want.emplace(g.outputs()[i]->name(), outs[i]);

  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    const kir::Kernel& k = kernels[ki];
    SCOPED_TRACE(k.name + " " + autotune::config_text(k, configs[ki]));
    std::vector<Tensor> buffers;
    for (const kir::Buffer& b : k.buffers) {
      ASSERT_TRUE(b.output ? want.count(b.name) : inputs.count(b.name)) << b.name << " is no graph input or output";
      buffers.push_back(b.output ? Tensor(want.at(b.name).dtype(), want.at(b.name).shape()) : inputs.at(b.name));
      if (b.output)
        for (int64_t i = 0; i < buffers.back().numel(); ++i) buffers.back().set_f64(i, std::nan(""));
    }
    std::vector<void*> ptrs;
    std::vector<std::vector<char>> shifted;
    for (size_t b = 0; b < buffers.size(); ++b) {
      Tensor& t = buffers[b];
      if (input_shift == 0 || k.buffers[b].output) {
        ptrs.push_back(t.raw_mut());
        continue;
      }
      const size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
      shifted.emplace_back(bytes + 16 + static_cast<size_t>(input_shift));
      char* start = shifted.back().data();
      start += (16 - reinterpret_cast<uintptr_t>(start) % 16) % 16 + static_cast<size_t>(input_shift);
      std::memcpy(start, t.raw_mut(), bytes);
      ptrs.push_back(start);
    }
    if (kir::draws_random(k)) ptrs.push_back(const_cast<uint64_t*>(&offset));
    std::vector<int64_t> args;
    for (const std::string& p : k.size_params) args.push_back(sizes.at(p));
    KernelLaunch l = launch_config(k, configs[ki]);
    auto launch = reinterpret_cast<EmulatedLaunch>(lib.symbol("launch_" + k.name));
    ASSERT_NE(launch, nullptr);
    // Zeroed, as the runtime allocates it; launched twice, since each launch must leave the counters at 0.
    std::vector<char> workspace(l.workspace_bytes == SymExpr() ? 0 : *l.workspace_bytes.evaluate(sizes));
    for (int run = 0; run < (configs[ki].split > 1 ? 2 : 1); ++run)
      launch(ptrs.data(), args.data(), workspace.data(), static_cast<unsigned>(*l.grid[0].evaluate(sizes)),
             static_cast<unsigned>(*l.grid[1].evaluate(sizes)), 1, static_cast<unsigned>(l.block[0]),
             static_cast<unsigned>(l.block[1]));
    for (size_t b = 0; b < k.buffers.size(); ++b) {
      if (!k.buffers[b].output) continue;
      const Tensor& got = buffers[b];
      const Tensor& expected = want.at(k.buffers[b].name);
      // f32 sums of up to 9000 terms against the interpreter's doubles: within 1e-4 of
      // the largest result (a wrong element or row is off by its own size); an f16 or
      // bf16 output rounded once from each may differ in its last place. TF32
      // attention rounds Q, K, V and the probabilities to 10 mantissa bits (2^-11
      // relative each), so a score moves by up to a few times 2^-11 of scale *
      // sum |q_d k_d|, and an output, a weighted mean of V's rows, by as much
      // relative to the largest (heads up to 128 of normal values: at most 0.9 x
      // 2^-11 in the test models): allowed 4 x 2^-11.
      const bool tf32 = k.kind == kir::Kind::Attention && attention_tf32(k, configs[ki]);
      const double tol = tf32 ? std::ldexp(4, -11)
                         : expected.dtype() == DType::F16 ? 1e-3 : expected.dtype() == DType::BF16 ? 8e-3 : 1e-4;
      double largest = 0;
      for (int64_t i = 0; i < expected.numel(); ++i) largest = std::max(largest, std::fabs(expected.get_f64(i)));
      int64_t bad = 0;
      for (int64_t i = 0; i < got.numel(); ++i) {
        double a = got.get_f64(i), e = expected.get_f64(i);
        const bool both_nan = std::isnan(a) && std::isnan(e);
        if (!both_nan && a != e && !(std::fabs(a - e) <= tol * largest + tol * std::fabs(e)) && bad++ < 5)
          ADD_FAILURE() << k.buffers[b].name << " element " << i << ": emulated " << a << ", interpreter " << e;
      }
      EXPECT_EQ(bad, 0) << bad << " of " << got.numel() << " elements of " << k.buffers[b].name << " differ";
    }
  }
}

// Copies of s's kernels, one per config `pick` keeps of each kernel's
// autotuning candidates (and its default where `pick` keeps it), named apart.
struct KernelVariants {
  std::vector<kir::Kernel> kernels;
  std::vector<KernelConfig> configs;
};
KernelVariants variants(const ScheduledModel& s, const std::function<bool(const kir::Kernel&, const KernelConfig&)>& pick) {
  KernelVariants out;
  for (const kir::Kernel& base : s.schedule.kernels) {
    std::vector<KernelConfig> grid;
    for (const KernelConfig& c : autotune::candidates(base))
      if (pick(base, c)) grid.push_back(c);
    for (size_t i = 0; i < grid.size(); ++i) {
      out.kernels.push_back(base);
      out.kernels.back().name = base.name + "_c" + std::to_string(i);
      out.configs.push_back(grid[i]);
    }
  }
  return out;
}

// The CUDA text of v, which NVRTC must take as it is, built for the host with
// the host prelude in place of NVRTC's (fixed-width types, bit casts), keeping
// the combiners, the block and column combines, whose member functions are
// inline, not static, and a launcher per kernel.
SharedLibrary emulated_library(const KernelVariants& v, const fs::path& dir) {
  std::string cuda = emit_cuda(v.kernels, v.configs);
  std::vector<CudaBinary> bins = compile_cuda(cuda, {"sm_90"}, false, 1);
  EXPECT_EQ(bins.size(), 1u);
  std::vector<std::string> symbols = cubin_symbols(bins.at(0).bytes);
  for (const kir::Kernel& k : v.kernels)
    EXPECT_NE(std::find(symbols.begin(), symbols.end(), k.name), symbols.end()) << k.name;
  size_t combiners = cuda.find("struct tcc_sum");
  EXPECT_NE(combiners, std::string::npos);
  // The emulator has its own mma and cvt helpers.
  for (const char* helper : {kAttentionMmaHelpers, kAttentionTf32Helpers, kMmaTf32Helper})
    if (size_t at = cuda.find(helper); at != std::string::npos) cuda.erase(at, std::strlen(helper));
  std::string source = "#include \"" + std::string(TCC_SOURCE_DIR) + "/tests/unit/codegen/cuda_emulator.h\"\n" +
                       emitc::prelude(emitc::Target::Host) + "#undef TCC_FN\n#define TCC_FN inline\n" +
                       cuda.substr(combiners);
  for (size_t i = 0; i < v.kernels.size(); ++i)
    source += emulated_launcher(v.kernels[i], launch_config(v.kernels[i], v.configs[i]).workspace_bytes != SymExpr());
  std::ofstream(dir / "emulated.cc") << source;
  compile_host_library((dir / "emulated.cc").string(), (dir / "emulated.so").string());
  return SharedLibrary((dir / "emulated.so").string());
}

// v's CUDA text emulated (emulated_library, in a temporary directory named
// after dir_name) against the interpreter at each of `bindings` in turn.
void expect_emulated_matches(const ScheduledModel& s, const KernelVariants& v, const std::string& dir_name,
                             const std::vector<std::map<std::string, int64_t>>& bindings,
                             const Draw& draw = normal_or_bool, int input_shift = 0) {
  fs::path dir = make_temp_dir(dir_name);
  SharedLibrary lib = emulated_library(v, dir);
  for (const std::map<std::string, int64_t>& sizes : bindings) {
    std::string trace;
    for (const auto& [name, value] : sizes) trace += (trace.empty() ? "" : " ") + name + "=" + std::to_string(value);
    SCOPED_TRACE(trace);
    expect_emulated_runs_match(s, v.kernels, v.configs, lib, sizes, draw, input_shift);
  }
  fs::remove_all(dir);
}

TEST(ColumnReduction, EmulatedOnTheHostEveryBlockAndSplitMatchesTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/column_reductions.tir");
  // The emulator runs a thread per CUDA thread: a few slices suffice, and the
  // default's 64, most of whose blocks find no slice at these sizes.
  KernelVariants v = variants(s, [](const kir::Kernel& k, const KernelConfig& c) {
    return c.columns && (c.split <= 4 || c == default_config(k));
  });
  // Columns of 9000 rows fill 36 slices of 256 (kColumnMinSlice); columns of
  // 600 fill three, so split 4 leaves its last block without one.
  expect_emulated_matches(s, v, "tcc_column_reduction", {{{"b", 9000}}, {{"b", 600}}});
}

// Rows cut into slices (KernelConfig::split) in blocks of threads along x,
// combined by warp shuffles: long static rows, rows of symbolic length, and a
// max that also stores the elements it reduces (in its one pass, so it splits).
TEST(SplitReduction, EmulatedOnTheHostRowSlicesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/long_rows.tir");
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_TRUE(splits_rows(k)) << k.name;
  KernelVariants v = variants(s, [](const kir::Kernel&, const KernelConfig& c) {
    return !c.columns && c.rows_per_block == 1 && c.block <= 512 && c.split <= 4;
  });
  int split = 0;
  for (const KernelConfig& c : v.configs) split += c.split > 1;
  EXPECT_GT(split, 0) << "no candidate splits rows";
  // 20000 fills five slices of 4096 (kSplitMinSlice), so split 4 takes two
  // slices' worth per block; 3000 fills one, and the other blocks return.
  expect_emulated_matches(s, v, "tcc_split_reduction", {{{"n", 20000}}, {{"n", 3000}}});
}

// Rows kept in registers (KernelConfig::row_cache): softmax and layer norm
// over static rows, and over rows of symbolic length that fit every cached
// candidate's cache (300), fit some (1000: not 16 x 32 threads), and fit none
// (1500: the looped path the kernel keeps beside the cache), at every cached
// candidate of up to 256 threads and one row per block or several.
TEST(RowCache, EmulatedOnTheHostCachedRowsMatchTheInterpreter) {
  const std::pair<const char*, std::vector<std::map<std::string, int64_t>>> models[] = {
      {"tests/kernels/softmax.tir", {{{"b", 3}}}},
      {"tests/kernels/layernorm.tir", {{{"b", 2}, {"s", 5}}}},
      {"tests/kernels/symbolic_rows.tir", {{{"b", 2}, {"n", 300}}, {{"b", 2}, {"n", 1000}}, {{"b", 2}, {"n", 1500}}}},
  };
  for (const auto& [model, bindings] : models) {
    SCOPED_TRACE(model);
    ScheduledModel s = schedule_model(model);
    KernelVariants v = variants(s, [](const kir::Kernel&, const KernelConfig& c) {
      return c.row_cache > 0 && c.block <= 256 && c.rows_per_block <= 2;
    });
    ASSERT_FALSE(v.kernels.empty());
    for (const kir::Kernel& k : s.schedule.kernels) EXPECT_GT(default_config(k).row_cache, 0) << k.name;
    expect_emulated_matches(s, v, "tcc_row_cache", bindings);
  }
}

// Transposes through shared-memory tiles (KernelConfig::tiled): attention's
// K^T over a symbolic length that fills whole tiles (64) and one that leaves
// the edge tiles partly empty (45), a transpose added to a tensor read in
// order, and static 37 x 45 transposes, at every tiled candidate up to 256
// threads (8 rows of 32 and fewer, each thread taking several rows of a tile).
TEST(TiledTranspose, EmulatedOnTheHostTilesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/transposes.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 3u);
  std::vector<int> axes;
  for (const kir::Kernel& k : s.schedule.kernels) {
    axes.push_back(transpose_axis(k));
    EXPECT_TRUE(default_config(k).tiled) << k.name;
    EXPECT_EQ(launch_config(k).block, (std::array<int, 3>{32, 8, 1})) << k.name;
  }
  // K^T's heads and head dim merge into one axis of 64 (collapse_axes), across which it reads.
  std::sort(axes.begin(), axes.end());
  EXPECT_EQ(axes, (std::vector<int>{0, 1, 1}));
  // Kernels that read in the order they write take no tiles.
  for (const char* model : {"tests/kernels/pointwise_chain.tir", "tests/kernels/concat.tir", "tests/kernels/softmax.tir"})
    for (const kir::Kernel& k : schedule_model(model).schedule.kernels) {
      EXPECT_EQ(transpose_axis(k), -1) << model << " " << k.name;
      EXPECT_FALSE(default_config(k).tiled) << model << " " << k.name;
    }
  KernelVariants v = variants(s, [](const kir::Kernel&, const KernelConfig& c) { return c.tiled && c.block <= 256; });
  ASSERT_EQ(v.kernels.size(), 3u * 3u);  // 64, 128 and 256 threads
  expect_emulated_matches(s, v, "tcc_tiled_transpose", {{{"b", 2}, {"s", 45}}, {{"b", 2}, {"s", 64}}});
}

// Pointwise kernels as float4s on the host: axes that collapse_axes merged,
// a bias broadcast along rows, a movement chain's copy, concats, and RoPE's
// rotate_half computed in the kernel that reads it. A guard that
// no aligned four straddle (each input's range along the last axis starts at a
// multiple of four, or the concat is along another axis) holds for the four
// elements, so each input is read as float4s where it holds; a concat that
// splits some four is read element by element.
TEST(VectorPointwise, EmulatedOnTheHostFloat4sMatchTheInterpreter) {
  ScheduledModel quads = schedule_model("tests/kernels/concat_quads.tir");
  ASSERT_EQ(quads.schedule.kernels.size(), 3u);
  std::vector<bool> vectorized;
  for (const kir::Kernel& k : quads.schedule.kernels) vectorized.push_back(default_config(k).vector_width == 4);
  EXPECT_EQ(vectorized, (std::vector<bool>{true, true, false}));
  std::string cuda = emit_cuda({quads.schedule.kernels[0]}, {default_config(quads.schedule.kernels[0])});
  EXPECT_NE(cuda.find(" ? *(const float4*)(p1 + "), std::string::npos) << cuda;

  const std::pair<const char*, std::map<std::string, int64_t>> cases[] = {
      {"tests/kernels/concat_quads.tir", {{"b", 3}, {"s", 5}}},
      {"tests/kernels/contiguous_axes.tir", {{"b", 2}, {"s", 3}}},
      {"tests/kernels/movement_chain.tir", {{"b", 3}, {"s", 5}}},
      {"tests/kernels/rope.tir", {{"b", 2}, {"s", 5}}}};
  for (const auto& [model, sizes] : cases) {
    SCOPED_TRACE(model);
    ScheduledModel s = schedule_model(model);
    KernelVariants v = variants(s, [](const kir::Kernel& k, const KernelConfig& c) {
      return vectorizes(k) ? c.block == 128 && c.vector_width == 4 : c == default_config(k);
    });
    ASSERT_EQ(v.kernels.size(), s.schedule.kernels.size());
    EXPECT_TRUE(std::any_of(v.configs.begin(), v.configs.end(), [](const KernelConfig& c) { return c.vector_width == 4; }));
    expect_emulated_matches(s, v, "tcc_vector_pointwise", {sizes});
  }
}

// The random generators' kernels as the GPU runs them: each thread draws its
// elements' Philox blocks from their indices (64-bit unsigned products, shifts
// and masks, then double math) as the interpreter does; a wrong word, shift
// or mapping moves values far beyond the tolerance.
TEST(RandomOps, EmulatedOnTheHostDrawsMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/random.tir");
  KernelVariants v = variants(s, [](const kir::Kernel& k, const KernelConfig& c) { return c == default_config(k); });
  ASSERT_EQ(v.kernels.size(), s.schedule.kernels.size());
  expect_emulated_matches(s, v, "tcc_random_ops", {{{"n", 5}}});
}

// CumSum on the GPU: a row in tiles of the block's threads, each tile's
// running sums a warp-shuffle scan combined through shared memory, carried
// from tile to tile. Rows of 150 take three tiles of 64 threads (the last
// partly past the row) or one of 256, one or two rows per block; and a
// reversed exclusive scan along the first of three axes.
TEST(Scan, EmulatedOnTheHostBlockScansMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/cumsum.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 2u);
  for (const kir::Kernel& k : s.schedule.kernels) {
    EXPECT_EQ(k.kind, kir::Kind::Reduction) << k.name;
    EXPECT_TRUE(emitc::scans(k)) << k.name;
    EXPECT_FALSE(reduces_columns(k)) << k.name;
    KernelConfig d = default_config(k);
    EXPECT_EQ(d.split, 1) << k.name;
    EXPECT_EQ(d.row_cache, 0) << k.name;
  }
  KernelVariants v = variants(s, [](const kir::Kernel&, const KernelConfig& c) {
    return (c.block == 64 || c.block == 256) && c.rows_per_block <= 2;
  });
  ASSERT_GE(v.kernels.size(), 4u);
  expect_emulated_matches(s, v, "tcc_scan", {{{"b", 3}}});
}

// Scatters' combining stores on the GPU: the output starts as a copy of the
// data (the runtime's copy, made here), and a block's threads combine their
// updates into it at once, through atomicAdd and tcc_atomic's compare-and-swap.
// Every combining scatter of tests/kernels/scatter.tir (add, mul, max, min; f32
// and i64; repeated indices) matches the interpreter, float adds within their
// order's rounding. Reduction none leaves one of several updates to an element,
// on the GPU unspecified which: the host library's tests check those.
TEST(Scatter, EmulatedOnTheHostAtomicUpdatesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/scatter.tir");
  KernelVariants v;
  std::vector<const Node*> nodes;
  for (const Step& step : s.schedule.steps) {
    ASSERT_EQ(step.kind, Step::Kind::Kernel) << step.node;
    const kir::Kernel& k = s.schedule.kernels.at(static_cast<size_t>(step.kernel));
    bool combines = std::any_of(k.body.begin(), k.body.end(),
                                [](const kir::Instr& in) { return in.accumulate != kir::Accumulate::None; });
    if (!combines) continue;
    EXPECT_GE(k.copy_from, 0) << step.node;
    v.kernels.push_back(k);
    v.kernels.back().name = k.name + "_" + std::to_string(nodes.size());
    v.configs.push_back(default_config(k));
    for (const auto& n : s.model->graph->nodes())
      if (n->name() == step.node) nodes.push_back(n.get());
    ASSERT_EQ(nodes.size(), v.kernels.size()) << step.node;
  }
  ASSERT_EQ(v.kernels.size(), 5u);
  fs::path dir = make_temp_dir("tcc_scatter");
  SharedLibrary lib = emulated_library(v, dir);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> real(-2.0, 2.0);
  std::uniform_int_distribution<int64_t> index(-9, 9);
  const std::map<std::string, int64_t> sizes = {{"n", 6}};
  Interpreter interp;
  for (size_t i = 0; i < v.kernels.size(); ++i) {
    const kir::Kernel& k = v.kernels[i];
    SCOPED_TRACE(nodes[i]->name());
    std::vector<Tensor> buffers;
    for (const kir::Buffer& b : k.buffers) {
      std::vector<int64_t> shape;
      for (const SymExpr& d : b.shape) shape.push_back(*d.evaluate(sizes));
      buffers.emplace_back(b.dtype, shape);
      for (int64_t e = 0; e < buffers.back().numel(); ++e)
        buffers.back().set_f64(e, is_float(b.dtype) ? real(rng) : static_cast<double>(index(rng)));
    }
    std::vector<const Tensor*> inputs;
    for (size_t b = 0; b + 1 < buffers.size(); ++b) inputs.push_back(&buffers[b]);
    ASSERT_EQ(inputs.size(), nodes[i]->num_inputs());
    Tensor want = interp.eval_node(*nodes[i], inputs).at(0);
    Tensor& got = buffers.back();
    got = buffers.at(static_cast<size_t>(k.copy_from)).clone();
    std::vector<void*> ptrs;
    for (Tensor& t : buffers) ptrs.push_back(t.raw_mut());
    std::vector<int64_t> args;
    for (const std::string& p : k.size_params) args.push_back(sizes.at(p));
    KernelLaunch l = launch_config(k, v.configs[i]);
    auto launch = reinterpret_cast<EmulatedLaunch>(lib.symbol("launch_" + k.name));
    ASSERT_NE(launch, nullptr);
    launch(ptrs.data(), args.data(), nullptr, static_cast<unsigned>(*l.grid[0].evaluate(sizes)),
           static_cast<unsigned>(*l.grid[1].evaluate(sizes)), static_cast<unsigned>(*l.grid[2].evaluate(sizes)),
           static_cast<unsigned>(l.block[0]), static_cast<unsigned>(l.block[1]));
    ASSERT_EQ(got.shape(), want.shape());
    int64_t bad = 0;
    for (int64_t e = 0; e < got.numel(); ++e) {
      bool same = is_float(want.dtype()) ? std::fabs(got.get_f64(e) - want.get_f64(e)) <= 1e-5 * (1 + std::fabs(want.get_f64(e)))
                                         : got.get_i64(e) == want.get_i64(e);
      if (!same && bad++ < 5)
        ADD_FAILURE() << "element " << e << ": emulated " << got.get_f64(e) << ", interpreter " << want.get_f64(e);
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got.numel() << " elements differ";
  }
  fs::remove_all(dir);
}

// A kernel's default config and its 64-thread candidates (the autotuning
// grid's other blocks of the attention and recurrence templates change only
// how many rows a block takes).
bool default_or_block_64(const kir::Kernel& k, const KernelConfig& c) {
  return c == default_config(k) || c.block == 64;
}

// Every default and 64-thread candidate of the `kernels` attention kernels of s.
KernelVariants attention_variants(const ScheduledModel& s, size_t kernels = 5) {
  EXPECT_EQ(s.schedule.kernels.size(), kernels);
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(k.kind, kir::Kind::Attention) << k.name;
  return variants(s, default_or_block_64);
}

// v's CUDA text emulated against the interpreter over 37 keys and queries: a
// full and a partial key tile, and two or more blocks of query rows.
void expect_emulated_attention_matches(const ScheduledModel& s, const KernelVariants& v, const std::string& dir_name) {
  expect_emulated_matches(s, v, dir_name, {{{"b", 2}, {"s", 37}}});
}

// The attention template (codegen/attention_template.h): grouped-query causal
// heads, 3-D operands with an additive mask and soft-capping, a boolean mask
// and causal heads of 6, each in the split layout with 2, 4 and 8 lanes to a
// row and in the warp layout, and a head of 160 in the warp layout.
TEST(Attention, EmulatedOnTheHostFlashTilesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention.tir");
  KernelVariants v = attention_variants(s);
  EXPECT_EQ(v.kernels.size(), 4 * 5 + 1u);
  expect_emulated_attention_matches(s, v, "tcc_attention");
}

// The template reading K and V through views, as exporters write them (a
// transpose of [b, s, heads, size]; a head split and transpose of
// [b, s, heads * size]), and f16 Q, K and V as slices of one fused projection
// with the output stored with its heads merged: one kernel each, its operands
// the projections' buffers (from the slices' offsets), strided per batch,
// head and row, in every layout, the tensor-core one among them.
TEST(Attention, EmulatedOnTheHostOperandViewsMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_views.tir");
  KernelVariants v = attention_variants(s, 2);
  int mma_variants = 0;
  for (const KernelConfig& c : v.configs) mma_variants += c.mma ? 1 : 0;
  EXPECT_GT(mma_variants, 0);
  expect_emulated_attention_matches(s, v, "tcc_attention_views");
}

// The same template over f16 and bf16 operands and masks (and an f32 mask on
// bf16 operands, as autocast leaves it): the CUDA-core
// layouts read them into f32, the tensor-core layout multiplies them by
// mma.sync (emulated by the PTX ISA's fragment layouts); each output is
// rounded once.
TEST(Attention, EmulatedOnTheHostLowPrecisionMatchesTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_low.tir");
  KernelVariants v = attention_variants(s, 6);
  // The f16 heads of 16 take the tensor-core layout by default (8 warps, 128
  // rows: one block) and at 2 warps (two blocks); the 3-D heads of 20 and the
  // head of 160 cannot.
  const std::set<std::string> tensor_cores = {"gqa_causal_f16", "bool_mask_f16", "f16_mask", "f32_mask_bf16"};
  for (const kir::Kernel& k : s.schedule.kernels)
    EXPECT_EQ(default_config(k).mma, tensor_cores.count(k.nodes.front()) == 1) << k.nodes.front();
  int mma_variants = 0;
  for (const KernelConfig& c : v.configs) mma_variants += c.mma ? 1 : 0;
  EXPECT_EQ(mma_variants, 4 * 2);
  expect_emulated_attention_matches(s, v, "tcc_attention_low");
}

// The f16 / bf16 tensor-core layout over several key tiles of 64: heads of
// 64 unmasked (whose tiles inside the keys skip the per-score masking) and
// causal (whose warps past a tile's last key skip it too), and grouped causal
// f16 heads of 32 with values of 24 (an odd last n-tile of V) that save their
// log-sum-exp. 150 keys and queries are two full key tiles and a partial
// one, and two blocks of 128 query rows by default (five of 32 at block 64).
// The K and V tiles arrive by 16-byte copies; with the inputs 4 bytes off a
// 16-byte boundary, element by element.
TEST(Attention, EmulatedOnTheHostTensorCoreTilesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_mma.tir");
  KernelVariants v = variants(s, [](const kir::Kernel& k, const KernelConfig& c) {
    return c.mma && (c == default_config(k) || c.block == 64);
  });
  ASSERT_EQ(v.kernels.size(), 3 * 2u);
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(default_config(k).block, 256) << k.name;
  expect_emulated_matches(s, v, "tcc_attention_mma", {{{"b", 1}, {"s", 150}}});
  expect_emulated_matches(s, v, "tcc_attention_mma_shifted", {{{"b", 1}, {"s", 150}}}, normal_or_bool, 4);
}

// f32 attention compiled with --precision tf32: the heads that are multiples
// of 8 up to 128 (32 causal and grouped, 24 under an additive mask with
// soft-capping, 64 with values of 128 under a bool mask, 128) take the
// tensor-core layout by default, through mma.sync.m16n8k8.tf32 and
// cvt.rna.tf32.f32 (the emulator's TF32 rounding and fragments), within the
// TF32 tolerance over a symbolic seq of 37 (a partial key tile); their split
// and warp candidates and the heads of 6 stay on the CUDA cores, exact to the
// f32 tolerance. At fp32 no kernel takes the tensor cores.
TEST(Attention, EmulatedOnTheHostTf32TensorCoresMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_tf32.tir", Precision::TF32);
  KernelVariants v = attention_variants(s);
  for (const kir::Kernel& k : s.schedule.kernels) {
    const bool tensor_cores = k.nodes.front() != "odd_heads";
    EXPECT_EQ(k.attention->tf32, true) << k.nodes.front();
    EXPECT_EQ(default_config(k).mma, tensor_cores) << k.nodes.front();
    EXPECT_EQ(kernel_precision(k, default_config(k), Precision::TF32), tensor_cores ? "tf32" : "f32")
        << k.nodes.front();
  }
  int tf32_variants = 0;
  for (size_t i = 0; i < v.kernels.size(); ++i) tf32_variants += attention_tf32(v.kernels[i], v.configs[i]);
  EXPECT_EQ(tf32_variants, 4 * 2);
  const std::string cuda = emit_cuda(s.schedule.kernels, {});
  EXPECT_NE(cuda.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
  EXPECT_NE(cuda.find("cvt.rna.tf32.f32"), std::string::npos);
  EXPECT_EQ(cuda.find("m16n8k16"), std::string::npos) << "no f16 or bf16 helper";
  expect_emulated_attention_matches(s, v, "tcc_attention_tf32");

  for (const kir::Kernel& k : schedule_model("tests/kernels/attention_tf32.tir").schedule.kernels) {
    EXPECT_FALSE(k.attention->tf32) << k.nodes.front();
    EXPECT_FALSE(default_config(k).mma) << k.nodes.front();
    KernelConfig mma;
    mma.block = 128;
    mma.mma = true;
    EXPECT_NE(config_refusal(k, mma), "") << k.nodes.front();
    EXPECT_EQ(kernel_precision(k, default_config(k), Precision::FP32), "f32") << k.nodes.front();
  }
}

// The attention backward's passes (codegen/attention_grad_template.h): the
// statistics, dQ, dK and dV together (one kernel, two outputs) and dK and dV
// alone, of grouped-query causal heads, of 3-D operands with an additive
// mask, of a head of 160, under a boolean mask, soft-capped and over bf16
// operands, each at its default block of four rows and at two rows a block.
TEST(AttentionBackward, EmulatedOnTheHostPassesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_grad.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 19u);
  int two_outputs = 0;
  for (const kir::Kernel& k : s.schedule.kernels)
    two_outputs += k.attention && k.attention->pass == kir::AttentionPass::GradKV && k.attention->dv >= 0;
  EXPECT_EQ(two_outputs, 4);
  for (const kir::Kernel& k : s.schedule.kernels) {
    ASSERT_EQ(k.kind, kir::Kind::Attention) << k.name;
    EXPECT_NE(k.attention->pass, kir::AttentionPass::Forward) << k.name;
  }
  // The bf16 dK and dK-with-dV passes (heads of 16) default to the tensor-core layout and take it at 64 threads too.
  KernelVariants v = variants(s, default_or_block_64);
  EXPECT_EQ(v.kernels.size(), 38u + 2);
  expect_emulated_attention_matches(s, v, "tcc_attention_grad");
}

// The gradient passes' tensor-core layout over f16 and bf16 operands
// (FlashAttention-2's backward on mma.sync, emulated by the PTX ISA's fragment
// layouts): grouped-query causal heads (dQ, dK, dV, dK with dV), 3-D operands
// under an additive mask with soft-capping, a bool mask and a head of 128, each
// by default (four warps, 64 rows a block) and at two warps, besides their
// warp-per-row candidate; P and dS are rounded to the operands' dtype as the
// fragments take them, and the gradients once.
TEST(AttentionBackward, EmulatedOnTheHostTensorCoresMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_grad_low.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 9u);
  for (const kir::Kernel& k : s.schedule.kernels) {
    EXPECT_TRUE(default_config(k).mma) << k.nodes.front();
    EXPECT_EQ(kernel_precision(k, default_config(k), Precision::FP32), dtype_name(k.buffers.front().dtype))
        << k.nodes.front();
  }
  KernelVariants v = variants(s, default_or_block_64);
  int mma_variants = 0;
  for (const KernelConfig& c : v.configs) mma_variants += c.mma ? 1 : 0;
  EXPECT_EQ(mma_variants, 9 * 2);
  EXPECT_EQ(v.kernels.size(), 9u * 3);
  expect_emulated_attention_matches(s, v, "tcc_attention_grad_low");
}

// The f32 gradient passes under --precision tf32: those whose heads are
// multiples of 8 up to 128 (the grouped-query causal ones, the bool-masked dK)
// take the tensor-core layout through mma.sync.m16n8k8.tf32, within the TF32
// tolerance; the 3-D heads of 20, the head of 160 and the statistics stay on
// the CUDA cores, exact, and the bf16 passes take m16n8k16 but for the
// statistics, which widen bf16 to f32 and say so.
TEST(AttentionBackward, EmulatedOnTheHostTf32TensorCoresMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/attention_grad.tir", Precision::TF32);
  const std::set<std::string> tf32 = {"gqa_dq", "gqa_dk", "gqa_dv", "gqa_dkv", "bool_dk"};
  for (const kir::Kernel& k : s.schedule.kernels) {
    const std::string& node = k.nodes.front();
    const bool low = k.buffers.front().dtype == DType::BF16;
    EXPECT_EQ(k.attention->tf32, !low && k.attention->pass != kir::AttentionPass::Stats) << node;
    EXPECT_EQ(default_config(k).mma, tf32.count(node) == 1 || (low && k.attention->pass != kir::AttentionPass::Stats))
        << node;
    const bool low_mma = low && k.attention->pass != kir::AttentionPass::Stats;
    const std::string precision = tf32.count(node) ? "tf32" : low_mma ? "bf16" : "f32";
    EXPECT_EQ(kernel_precision(k, default_config(k), Precision::TF32), precision) << node;
  }
  KernelVariants v = variants(s, [&](const kir::Kernel& k, const KernelConfig& c) {
    return default_or_block_64(k, c) && (tf32.count(k.nodes.front()) == 1 || c == default_config(k));
  });
  int tf32_variants = 0;
  for (size_t i = 0; i < v.kernels.size(); ++i) tf32_variants += attention_tf32(v.kernels[i], v.configs[i]);
  EXPECT_EQ(tf32_variants, 5 * 2);
  const std::string cuda = emit_cuda(s.schedule.kernels, {});
  EXPECT_NE(cuda.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
  expect_emulated_attention_matches(s, v, "tcc_attention_grad_tf32");
}

// The TopK template (codegen/topk_template.h) at its default and every
// candidate of up to 128 threads: a warp per row, teams of two warps and of
// four (their bests meet in shared memory), over rows of 6 to 700 elements
// (longer than any block, so each lane scans several). The values repeat and
// an eighth are NaN (none in the integer rows), so ties and NaN order the
// selections as the interpreter does: largest first with NaN above every
// number, smallest first with NaN last, equal values by lower index.
TEST(TopK, EmulatedOnTheHostTiesAndNaNMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/topk.tir");
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(k.kind, kir::Kind::TopK) << k.name;
  KernelVariants v = variants(s, [](const kir::Kernel& k, const KernelConfig& c) {
    return c == default_config(k) || c.block <= 128;
  });
  EXPECT_EQ(v.kernels.size(), 5 * 5 + 6u);  // the rows of 700 default to a block of 256
  expect_emulated_matches(s, v, "tcc_topk", {{{"b", 3}}}, [](DType t, std::mt19937& rng) {
    const unsigned r = rng() % 8;
    return r == 0 && is_float(t) ? std::nan("") : static_cast<double>(r % 4) - 1.5;
  });
}

// The NMS template (codegen/nms_template.h) at its default block and at 64
// threads (several boxes and mask words a thread, one warp scanning) over 70
// boxes (two mask words a row) and a symbolic 90: coordinates and scores of
// eight levels in [0, 1), so scores tie, boxes coincide or have no area, and
// the thresholds drawn from them are valid; limits from 0 to 39.
TEST(Nms, EmulatedOnTheHostTiesAndDegenerateBoxesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/nms.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 3u);
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(k.kind, kir::Kind::Nms) << k.name;
  KernelVariants v = variants(s, default_or_block_64);
  EXPECT_EQ(v.kernels.size(), 6u);
  expect_emulated_matches(s, v, "tcc_nms", {{{"b", 2}, {"n", 90}}}, [](DType t, std::mt19937& rng) {
    return t == DType::I64 ? static_cast<double>(rng() % 40) : static_cast<double>(rng() % 8) / 8;
  });
}

// The RoiAlign template (codegen/roi_align_template.h) at its default block
// and at 64 threads: adaptive samples averaged and their max, and a fixed
// grid of 5 x 5, over 7 regions whose corners lie in [-2, 6) scaled by 1.5 to
// 3 (so regions cover many pixels, leave the image, or are empty or inverted)
// and batch indices from -1 to 10 of 10 images (those outside give 0).
TEST(RoiAlign, EmulatedOnTheHostAdaptiveSamplesMatchTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/roi_align.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 3u);
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(k.kind, kir::Kind::RoiAlign) << k.name;
  KernelVariants v = variants(s, default_or_block_64);
  EXPECT_EQ(v.kernels.size(), 6u);
  expect_emulated_matches(s, v, "tcc_roi_align", {{{"r", 7}}}, [](DType t, std::mt19937& rng) {
    std::uniform_real_distribution<double> at(-2, 6);
    return t == DType::I64 ? static_cast<double>(rng() % 12) - 1 : at(rng);
  });
}

// The persistent recurrence (codegen/recurrence_template.h) of every cell,
// forward, reverse and bidirectional, with sequence_lens (drawn from -2 to 6
// over 5 steps, so clamped at both ends), at its default block of one warp
// and at two warps (threads with no unit still meet every barrier). Every
// step's phases meet at __syncthreads: a missing one lets a thread read h
// before its step is written.
TEST(Recurrence, EmulatedOnTheHostEveryCellAndDirectionMatchesTheInterpreter) {
  ScheduledModel s = schedule_model("tests/kernels/recurrence.tir");
  ASSERT_EQ(s.schedule.kernels.size(), 7u);
  for (const kir::Kernel& k : s.schedule.kernels) EXPECT_EQ(k.kind, kir::Kind::Recurrence) << k.name;
  KernelVariants v = variants(s, default_or_block_64);
  EXPECT_EQ(v.kernels.size(), 14u);
  expect_emulated_matches(s, v, "tcc_recurrence", {{{"s", 5}, {"b", 3}}}, [](DType t, std::mt19937& rng) {
    std::normal_distribution<double> normal(0, 0.7);
    return t == DType::I32 ? static_cast<double>(rng() % 9) - 2 : normal(rng);
  });
}

}  // namespace
}  // namespace tcc
