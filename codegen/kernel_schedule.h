// Schedule decisions: the KernelConfig each generated kernel gets without
// tuning (default_config), chosen from the kernel and the target device.
// What a config may be for a kernel (vectorizes, transpose_axis, splits_rows,
// reduces_columns, row_cache_refusal in emit.h) is what the CUDA emitter can
// print; this chooses among those. Where the device's size decides (how many
// blocks keep every SM busy) it reads DeviceProfile::sms, so a module
// compiled for another GPU (`tcc compile --device`) splits its reductions for
// that GPU. The device defaults to default_device(), as for `tcc compile`
// without --device.
#pragma once

#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/profiles.h"

namespace tcc {

// 256-thread pointwise blocks moving four f32 elements per access where
// vectorizes(k), or tiled where transpose_axis(k) finds an axis; column
// reductions whose rows split in columns (column_split); other reductions
// row_reduction_config.
KernelConfig default_config(const kir::Kernel& k, const DeviceProfile& device = default_device());

// default_config of every kernel, in order.
std::vector<KernelConfig> default_configs(const std::vector<kir::Kernel>& kernels, const DeviceProfile& device);

// One row per block of a power of two from 64 to 512 threads giving each
// thread about eight elements (128 threads for rows of symbolic length),
// split as reduction_split says, with the row cache fitting_row_cache gives.
KernelConfig row_reduction_config(const kir::Kernel& k, const DeviceProfile& device = default_device());

// The smallest power-of-two row cache at c's block that holds a whole row (of
// a symbolic length: of 1024 elements), or 0 where none may (row_cache_refusal).
int fitting_row_cache(const kir::Kernel& k, const KernelConfig& c);

// The split of a column reduction's default columns config: enough slices of
// its rows for sixteen blocks per SM of the device; 0 where the default is
// row_reduction_config (not reduces_columns, rows that do not split, or a
// symbolic row count).
int column_split(const kir::Kernel& k, const DeviceProfile& device = default_device());

// KernelConfig::split without tuning: 1 (one block per row) unless
// splits_rows(k) and the rows are fewer than the device's SMs and long (or of
// symbolic length); then two blocks per SM in all, each with a slice of at
// least kSplitMinSlice elements. Split kernels launch a grid of
// [rows, split, 1] and take a workspace.
int reduction_split(const kir::Kernel& k, const DeviceProfile& device = default_device());

// Kernel i's config: configs[i], or its default_config for default_device()
// when `configs` is empty.
KernelConfig config_of(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs, size_t i);

}  // namespace tcc
