// Schedule decisions for generated kernels (kernel_schedule.h). emit_cuda.cc
// says how each schedule runs; this file says when a kernel takes it.
#include "codegen/kernel_schedule.h"

#include <algorithm>

#include "codegen/block_config.h"
#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/gemm_template.h"
#include "codegen/template_kernel.h"

namespace tcc {

namespace {

constexpr int kPointwiseBlock = 256;
// Row reductions give each thread about kRowElementsPerThread elements of its
// slice, in a power of two of kMinRowBlock to kMaxRowBlock threads, and rows of
// symbolic length kSymbolicRowBlock. The H100's tables (bench/results,
// 2026-11-25, the GPT-2 block's training step) put rows of 512 and 768 at their
// fastest with 64 or 128 threads, and 1024 threads last in every table.
constexpr int kRowElementsPerThread = 8;
constexpr int kMinRowBlock = 64;
constexpr int kMaxRowBlock = 512;
constexpr int kSymbolicRowBlock = 128;
// Split reductions. One block per row leaves most of the GPU idle when rows are
// few (a global sum is one row), so such rows are cut into slices of one block
// each. The thresholds, in one place:
// - rows: from as many rows as the device has SMs on, one block per row
//   already gives every SM a block.
// - kSplitMinRowLength: a static row shorter than this is at most 64 KB of
//   f32, which one block reduces in a few microseconds; partials and atomics
//   would cost about what they save.
// - DeviceProfile::split_blocks_per_sm: the blocks wanted in all, per SM of
//   the device (2 in every profile: the H100's tables, bench/results).
// - kSplitMinSlice (kernel_config.h): the elements each block still reduces.
// Rows of symbolic length (with a static row count under the SM count) split
// too, since they may be long; such a kernel uses only the slices the length
// needs at run time (one slice: no workspace traffic at all).
constexpr int64_t kSplitMinRowLength = 16384;
// Column reductions (reduces_columns) read a row's elements in 256-thread
// blocks of kColumnRows rows by 8 (KernelConfig::columns) by default where
// their rows split and their row count is static: every warp then reads 128
// contiguous bytes, where one block per row reads 4 bytes of each 32-byte
// sector. The rows are cut into as many slices as the device profile's
// column_blocks_per_sm blocks per SM need (at most kColumnMaxSplit), each of
// at least kColumnMinSlice elements. The H100's tables (bench/results,
// 2026-11-25: bias gradients over 4096 rows of 768 to 3072 columns) were
// fastest at 16 slices of 256 rows, ahead of the two blocks per SM of row
// splits; every profile takes 16.
constexpr int kColumnBlock = 256;
constexpr int64_t kColumnMaxSplit = 64;
// A row of symbolic length is cached (KernelConfig::row_cache) by default up
// to this many elements, which covers the sequence lengths attention sees at
// GPT-2 sizes; a longer row takes the looped path, chosen at each launch.
constexpr int64_t kSymbolicCachedRow = 1024;

// A power of two from 64 to 512 giving each thread about eight elements of a
// static row (of a slice, when the row is split `split` ways); unsplit rows of
// symbolic length get a fixed middle size.
int reduction_block(const kir::Kernel& k, int split) {
  SymExpr len = row_length(k);
  if (!len.is_constant() && split == 1) return kSymbolicRowBlock;
  // A symbolic row that splits is cut into slices of kSplitMinSlice elements.
  int64_t slice = len.is_constant() ? (len.constant_value() + split - 1) / split : kSplitMinSlice;
  int64_t want = (slice + kRowElementsPerThread - 1) / kRowElementsPerThread;
  int b = kMinRowBlock;
  while (b < kMaxRowBlock && b < want) b *= 2;
  return b;
}

// c's block and row cache for a reduction taking one row per block, split as c says.
KernelConfig schedule_rows(const kir::Kernel& k, KernelConfig c) {
  c.block = reduction_block(k, c.split);
  c.row_cache = fitting_row_cache(k, c);
  return c;
}

}  // namespace

kir::Kernel vectorize_pass(kir::Kernel k, kir::KernelPassContext& ctx) {
  if (k.kind != kir::Kind::Pointwise || !vectorizes(k)) return k;
  KernelConfig c = k.schedule.value_or(KernelConfig{});
  if (c.vector_width == kVectorWidth) return k;
  c.vector_width = kVectorWidth;
  k.schedule = c;
  ctx.stats.add("vectorized");
  return k;
}

kir::Kernel split_reductions_pass(kir::Kernel k, kir::KernelPassContext& ctx) {
  if (k.kind != kir::Kind::Reduction) return k;
  KernelConfig c = k.schedule.value_or(KernelConfig{});
  if (int split = column_split(k, ctx.device)) {
    c.columns = true;
    c.split = split;
  } else {
    c.columns = false;
    c.split = reduction_split(k, ctx.device);
  }
  if (c == k.schedule.value_or(KernelConfig{})) return k;
  k.schedule = c;
  if (c.columns) ctx.stats.add("in columns");
  else if (c.split > 1) ctx.stats.add("rows split");
  return k;
}

kir::Kernel choose_schedule_pass(kir::Kernel k, kir::KernelPassContext& ctx) {
  KernelConfig c = k.schedule.value_or(KernelConfig{});
  if (k.kind == kir::Kind::Pointwise) {
    c.block = kPointwiseBlock;
    c.tiled = transpose_axis(k) >= 0;
    if (c.tiled) ctx.stats.add("tiled");
  } else if (const TemplateKernel* t = template_kernel(k.kind)) {
    c = t->default_config(k);
  } else if (k.kind == kir::Kind::Reduction) {
    if (c.columns) {
      c.block = kColumnBlock;
    } else {
      c = schedule_rows(k, c);
      if (c.row_cache > 0) ctx.stats.add("row caches");
    }
  }
  if (!k.schedule || c != *k.schedule) ctx.stats.add("scheduled");
  k.schedule = c;
  return k;
}

KernelConfig default_config(const kir::Kernel& k, const DeviceProfile& device) {
  kir::Kernel copy = k;
  copy.schedule.reset();
  kir::KernelPassContext ctx{device, {}};
  return *choose_schedule_pass(split_reductions_pass(vectorize_pass(std::move(copy), ctx), ctx), ctx).schedule;
}

std::vector<KernelConfig> scheduled_configs(const std::vector<kir::Kernel>& kernels) {
  std::vector<KernelConfig> out;
  for (size_t i = 0; i < kernels.size(); ++i) out.push_back(config_of(kernels, {}, i));
  return out;
}

KernelConfig row_reduction_config(const kir::Kernel& k, const DeviceProfile& device) {
  KernelConfig c;
  c.split = reduction_split(k, device);
  return schedule_rows(k, c);
}

int fitting_row_cache(const kir::Kernel& k, const KernelConfig& c) {
  if (k.kind != kir::Kind::Reduction || c.block < 1) return 0;
  SymExpr len = row_length(k);
  int64_t want = len.is_constant() ? len.constant_value() : kSymbolicCachedRow;
  int64_t per_thread = (want + c.block - 1) / c.block;
  int R = 1;
  while (R < per_thread && R < kMaxRowCache) R *= 2;
  KernelConfig cached = c;
  cached.row_cache = R;
  return R >= per_thread && row_cache_refusal(k, cached).empty() ? R : 0;
}

int column_split(const kir::Kernel& k, const DeviceProfile& device) {
  if (!reduces_columns(k) || !splits_rows(k)) return 0;
  SymExpr rows = row_count(k), len = row_length(k);
  if (!rows.is_constant() || rows.constant_value() < 1) return 0;
  int64_t groups = (rows.constant_value() + kColumnRows - 1) / kColumnRows;
  int64_t blocks = static_cast<int64_t>(device.column_blocks_per_sm) * device.sms;
  int64_t split = std::min(kColumnMaxSplit, (blocks + groups - 1) / groups);
  if (len.is_constant()) split = std::min(split, len.constant_value() / kColumnMinSlice);
  return static_cast<int>(std::max<int64_t>(split, 1));
}

int reduction_split(const kir::Kernel& k, const DeviceProfile& device) {
  if (!splits_rows(k)) return 1;
  SymExpr rows = row_count(k), len = row_length(k);
  if (!rows.is_constant() || rows.constant_value() < 1 || rows.constant_value() >= device.sms) return 1;
  if (len.is_constant() && len.constant_value() < kSplitMinRowLength) return 1;
  int64_t blocks = static_cast<int64_t>(device.split_blocks_per_sm) * device.sms;
  int64_t split = (blocks + rows.constant_value() - 1) / rows.constant_value();
  if (len.is_constant()) split = std::min(split, len.constant_value() / kSplitMinSlice);
  return split > 1 ? static_cast<int>(split) : 1;
}

std::string config_refusal(const kir::Kernel& k, const KernelConfig& c) {
  if (const TemplateKernel* t = template_kernel(k.kind)) return t->refusal(k, c);
  if (k.kind == kir::Kind::Gemm || k.kind == kir::Kind::Conv) {
    KernelConfig launch_knobs = c;
    launch_knobs.algo = 0;
    launch_knobs.tile = 0;
    launch_knobs.split = 1;
    if (launch_knobs != KernelConfig{})
      return "gemm and conv kernels choose a library algorithm (and gemm kernels a template tile and split), "
             "nothing else";
    if (c.algo < 0 || c.algo >= kLibraryAlgos)
      return "algorithm rank " + std::to_string(c.algo) + " is not from 0 to " + std::to_string(kLibraryAlgos - 1);
    if (c.tile == 0) return c.split == 1 ? "" : "only the template splits K";
    if (k.kind == kir::Kind::Conv) return "conv kernels have no template";
    if (c.tile < 0 || c.tile > static_cast<int>(kGemmTiles.size()))
      return "template tile " + std::to_string(c.tile) + " is not from 1 to " + std::to_string(kGemmTiles.size());
    if (c.algo != 0) return "the template runs no library algorithm";
    if (c.split < 1 || c.split > kMaxGemmSplit)
      return "split " + std::to_string(c.split) + " is not from 1 to " + std::to_string(kMaxGemmSplit);
    return gemm_template_refusal(k);
  }
  if (c.algo != 0) return "only gemm and conv kernels choose a library algorithm";
  if (c.tile != 0) return "only gemm kernels choose a template tile";
  if (std::string why = block_refusal(c.block, kMaxBlock); !why.empty()) return why;
  if (c.vector_width != 1 && c.vector_width != 4)
    return "vector width " + std::to_string(c.vector_width) + " is not 1 or 4";
  if (c.vector_width == 4 && !vectorizes(k))
    return "vector width 4 needs an f32 pointwise kernel with float4-aligned accesses";
  if (c.tiled && transpose_axis(k) < 0)
    return "only a pointwise kernel that reads along one axis and writes along the last goes through tiles";
  bool power_of_two = c.rows_per_block > 0 && (c.rows_per_block & (c.rows_per_block - 1)) == 0;
  if (c.rows_per_block > kMaxRowsPerBlock || !power_of_two)
    return "rows per block " + std::to_string(c.rows_per_block) + " is not a power of two from 1 to 8";
  if (c.rows_per_block != 1 && k.kind != kir::Kind::Reduction) return "rows per block applies to reductions only";
  if (c.split < 1 || c.split > kMaxSplit) return "split " + std::to_string(c.split) + " is not from 1 to " + std::to_string(kMaxSplit);
  if (c.split != 1 && !splits_rows(k))
    return "only a reduction that reduces once and stores row values alone splits its rows";
  if (c.split != 1 && c.rows_per_block != 1) return "a split reduction takes one block per slice of a row";
  if (c.columns) {
    if (!reduces_columns(k)) return "only a reduction over columns (rows side by side in memory) takes them in columns";
    if (c.rows_per_block != 1) return "a column reduction's blocks do not loop over rows";
    if (c.block < 2 * kColumnRows)
      return "a column reduction's block has " + std::to_string(kColumnRows) + " rows and at least two threads each";
  }
  return row_cache_refusal(k, c);
}

KernelConfig config_of(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs, size_t i) {
  if (!configs.empty()) return configs[i];
  return kernels[i].schedule ? *kernels[i].schedule : default_config(kernels[i]);
}

}  // namespace tcc
