// Schedule decisions for generated kernels (kernel_schedule.h). emit_cuda.cc
// says how each schedule runs; this file says when a kernel takes it.
#include "codegen/kernel_schedule.h"

#include <algorithm>

#include "codegen/attention_template.h"
#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/recurrence_template.h"
#include "codegen/topk_template.h"

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
// - kSplitBlocksPerSm: the blocks wanted in all, per SM of the device.
// - kSplitMinSlice (kernel_config.h): the elements each block still reduces.
// Rows of symbolic length (with a static row count under the SM count) split
// too, since they may be long; such a kernel uses only the slices the length
// needs at run time (one slice: no workspace traffic at all).
constexpr int64_t kSplitMinRowLength = 16384;
constexpr int64_t kSplitBlocksPerSm = 2;
// Column reductions (reduces_columns) read a row's elements in 256-thread
// blocks of kColumnRows rows by 8 (KernelConfig::columns) by default where
// their rows split and their row count is static: every warp then reads 128
// contiguous bytes, where one block per row reads 4 bytes of each 32-byte
// sector. The rows are cut into as many slices as kColumnBlocksPerSm blocks
// per SM need (at most kColumnMaxSplit), each of at least kColumnMinSlice
// elements. The H100's tables (bench/results, 2026-11-25: bias gradients over
// 4096 rows of 768 to 3072 columns) were fastest at 16 slices of 256 rows,
// ahead of the two blocks per SM of row splits.
constexpr int kColumnBlock = 256;
constexpr int64_t kColumnBlocksPerSm = 16;
constexpr int64_t kColumnMaxSplit = 64;
// A row of symbolic length is cached (KernelConfig::row_cache) by default up
// to this many elements, which covers the sequence lengths attention sees at
// GPT-2 sizes; a longer row takes the looped path, chosen at each launch.
constexpr int64_t kSymbolicCachedRow = 1024;

// A power of two from 64 to 512 giving each thread about eight elements of a
// static row (of a slice, when the row is split); rows of symbolic length get
// a fixed middle size.
int reduction_block(const kir::Kernel& k, const DeviceProfile& device) {
  SymExpr len = row_length(k);
  int64_t split = reduction_split(k, device);
  if (!len.is_constant() && split == 1) return kSymbolicRowBlock;
  // A symbolic row that splits is cut into slices of kSplitMinSlice elements.
  int64_t slice = len.is_constant() ? (len.constant_value() + split - 1) / split : kSplitMinSlice;
  int64_t want = (slice + kRowElementsPerThread - 1) / kRowElementsPerThread;
  int b = kMinRowBlock;
  while (b < kMaxRowBlock && b < want) b *= 2;
  return b;
}

}  // namespace

KernelConfig default_config(const kir::Kernel& k, const DeviceProfile& device) {
  KernelConfig c;
  if (k.kind == kir::Kind::Pointwise) {
    c.block = kPointwiseBlock;
    c.vector_width = vectorizes(k) ? kVectorWidth : 1;
    c.tiled = transpose_axis(k) >= 0;
  } else if (k.kind == kir::Kind::Attention) {
    c = attention_default_config(k);
  } else if (k.kind == kir::Kind::TopK) {
    c = topk_default_config(k);
  } else if (k.kind == kir::Kind::Recurrence) {
    c = recurrence_default_config(k);
  } else if (k.kind == kir::Kind::Reduction) {
    if (int split = column_split(k, device)) {
      c.block = kColumnBlock;
      c.columns = true;
      c.split = split;
    } else {
      c = row_reduction_config(k, device);
    }
  }
  return c;
}

std::vector<KernelConfig> default_configs(const std::vector<kir::Kernel>& kernels, const DeviceProfile& device) {
  std::vector<KernelConfig> out;
  for (const kir::Kernel& k : kernels) out.push_back(default_config(k, device));
  return out;
}

KernelConfig row_reduction_config(const kir::Kernel& k, const DeviceProfile& device) {
  KernelConfig c;
  c.block = reduction_block(k, device);
  c.split = reduction_split(k, device);
  c.row_cache = fitting_row_cache(k, c);
  return c;
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
  int64_t blocks = kColumnBlocksPerSm * device.sms;
  int64_t split = std::min(kColumnMaxSplit, (blocks + groups - 1) / groups);
  if (len.is_constant()) split = std::min(split, len.constant_value() / kColumnMinSlice);
  return static_cast<int>(std::max<int64_t>(split, 1));
}

int reduction_split(const kir::Kernel& k, const DeviceProfile& device) {
  if (!splits_rows(k)) return 1;
  SymExpr rows = row_count(k), len = row_length(k);
  if (!rows.is_constant() || rows.constant_value() < 1 || rows.constant_value() >= device.sms) return 1;
  if (len.is_constant() && len.constant_value() < kSplitMinRowLength) return 1;
  int64_t blocks = kSplitBlocksPerSm * device.sms;
  int64_t split = (blocks + rows.constant_value() - 1) / rows.constant_value();
  if (len.is_constant()) split = std::min(split, len.constant_value() / kSplitMinSlice);
  return split > 1 ? static_cast<int>(split) : 1;
}

KernelConfig config_of(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs, size_t i) {
  return configs.empty() ? default_config(kernels[i]) : configs[i];
}

}  // namespace tcc
