// Schedule decisions: the KernelConfig each generated kernel gets without
// tuning, chosen from the kernel and the target device by three kernel-IR
// passes (codegen/kernel_passes.h) that write it into Kernel::schedule, where
// the text form shows it (`schedule block=128 split=4`):
//   vectorize         vector_width: four f32 elements per access where vectorizes(k)
//   split_reductions  split and columns: rows shared among blocks, or taken in columns
//   choose_schedule   block, tiled, row_cache, and the templates' layouts; every
//                     kernel has a schedule after it
// build_schedule runs them after collapse_axes; default_config runs them on a
// copy. What a config may be for a kernel (vectorizes, transpose_axis,
// splits_rows, reduces_columns, row_cache_refusal in emit.h) is what the CUDA
// emitter can print; these choose among those. Where the device's size
// decides (how many blocks keep every SM busy) they read DeviceProfile::sms,
// so a module compiled for another GPU (`tcc compile --device`) splits its
// reductions for that GPU.
#pragma once

#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/kernel_passes.h"
#include "codegen/profiles.h"

namespace tcc {

// The schedule passes. Each starts from k's schedule (KernelConfig's defaults
// where it has none) and counts the kernels it changes: "vectorized", "rows
// split", "in columns", "scheduled" (choose_schedule, which also counts the
// kernels it gives tiles or a row cache).
// vectorize: pointwise kernels that vectorizes(k) move kVectorWidth elements per access.
kir::Kernel vectorize_pass(kir::Kernel k, kir::KernelPassContext& ctx);
// split_reductions: a column reduction whose rows split (column_split) takes
// them in columns; another reduction splits its rows as reduction_split says.
kir::Kernel split_reductions_pass(kir::Kernel k, kir::KernelPassContext& ctx);
// choose_schedule: 256-thread pointwise blocks, tiled where transpose_axis(k)
// finds an axis; 256-thread column reductions; other reductions one row per
// block of a power of two from 64 to 512 threads giving each thread about
// eight elements of its slice (128 threads for unsplit rows of symbolic
// length), with the row cache fitting_row_cache gives; the template kinds'
// default configs (codegen/template_kernel.h); library calls KernelConfig's
// defaults.
kir::Kernel choose_schedule_pass(kir::Kernel k, kir::KernelPassContext& ctx);

// The schedule the three passes choose for k on `device`, whatever k's own.
KernelConfig default_config(const kir::Kernel& k, const DeviceProfile& device = default_device());

// What choose_schedule gives a reduction that splits as reduction_split says
// and is not taken in columns (autotuning's reference point for rows).
KernelConfig row_reduction_config(const kir::Kernel& k, const DeviceProfile& device = default_device());

// Every kernel's schedule, in order (default_config for default_device()
// where a kernel has none): the configs of a module compiled without tuning.
std::vector<KernelConfig> scheduled_configs(const std::vector<kir::Kernel>& kernels);

// The smallest power-of-two row cache at c's block that holds a whole row (of
// a symbolic length: of 1024 elements), or 0 where none may (row_cache_refusal).
int fitting_row_cache(const kir::Kernel& k, const KernelConfig& c);

// The split of a column reduction's default columns config: enough slices of
// its rows for the device's column_blocks_per_sm blocks per SM; 0 where
// split_reductions leaves the rows alone (not reduces_columns, rows that do
// not split, or a symbolic row count).
int column_split(const kir::Kernel& k, const DeviceProfile& device = default_device());

// KernelConfig::split without tuning: 1 (one block per row) unless
// splits_rows(k) and the rows are fewer than the device's SMs and long (or of
// symbolic length); then the device's split_blocks_per_sm blocks per SM in all, each with a slice of at
// least kSplitMinSlice elements. Split kernels launch a grid of
// [rows, split, 1] and take a workspace.
int reduction_split(const kir::Kernel& k, const DeviceProfile& device = default_device());

// Empty when the config is valid for the kernel, else why not ("vector width 4
// needs a float4-aligned f32 kernel"): what the emitters can print, which the
// verifier checks a kernel's schedule against and autotuning its candidates.
// Gemm and conv kernels take only `algo`, or for an all-f32 gemm `tile`
// (tcc's template) and its split instead.
std::string config_refusal(const kir::Kernel& k, const KernelConfig& c);

// Kernel i's config: configs[i]; when `configs` is empty, the kernel's
// schedule, or its default_config for default_device() where it has none.
KernelConfig config_of(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs, size_t i);

}  // namespace tcc
