// Emitters: kernel IR to source text. Both take every kernel of a module and
// return one translation unit, deterministic for the same kernels.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "codegen/kernel_schedule.h"
#include "src/module/manifest_records.h"

namespace tcc {

// CUDA C++ for NVRTC, self-contained (no #include), one `extern "C" __global__`
// function per kernel that does not run_library, named Kernel::name, with
// parameters (buffer pointers in Kernel::buffers order, then one int64_t per
// size parameter, then the workspace pointer when launch_config gives one,
// then the random offset's address when the kernel draws_random). A module's
// The module's helper kernels are not among them (emitc::module_helpers).
// `configs` holds one KernelConfig per kernel, or is empty for every kernel's
// default_config (kernel_schedule.h) for the default device.
std::string emit_cuda(const std::vector<kir::Kernel>& kernels, const std::vector<KernelConfig>& configs = {});
// Whether kernel k with `config` is a library call with no CUDA source: every
// Conv kernel (cuDNN) and a Gemm kernel unless config.tile picks tcc's template.
bool runs_library(const kir::Kernel& k, const KernelConfig& config);
// The kernels of `order` (indices into `kernels`) dealt into at most `units`
// groups of about equal size (by body length, longest first, each to the
// lightest group), for translation units compiled in parallel
// (codegen/toolchain.h). Empty when fewer than two groups would be made.
std::vector<std::vector<size_t>> shard_kernels(const std::vector<kir::Kernel>& kernels, std::vector<size_t> order,
                                               int units);
// How the runtime launches kernel k at `config`: the module's launch record
// (src/module/manifest_records.h), its grid over the kernel's size parameters.
KernelLaunch launch_config(const kir::Kernel& k, const KernelConfig& config);
KernelLaunch launch_config(const kir::Kernel& k);  // with default_config(k)

// Empty where c's row_cache is valid for reduction kernel k, else why not: a
// cache needs one block per row (no split, no columns), a later pass that reads
// what an earlier one computed, at most 64 registers of cached values per
// thread, and a static row that fits row_cache x block.
std::string row_cache_refusal(const kir::Kernel& k, const KernelConfig& c);
// Whether a pointwise kernel can move four f32 elements per access (float4).
bool vectorizes(const kir::Kernel& k);

// The axis along which pointwise kernel k's transposed loads are contiguous,
// or -1 where k transposes nothing that tiles (KernelConfig::tiled): k stores
// contiguously along its last axis, some load steps by more than one element
// along it and by one along an earlier axis (the same for every such load), and
// no load is guarded, dynamic or a coordinate. Reading such a load along the
// last axis touches a 32-byte sector per element; a tile reads it along the
// other axis and turns it round in shared memory.
int transpose_axis(const kir::Kernel& k);

// Whether several blocks may share a row of reduction kernel k: its body
// reduces once and stores only row values (the last block of a row finishes it).
bool splits_rows(const kir::Kernel& k);

// Whether reduction kernel k reduces columns: its rows lie side by side in
// memory (every per-element access steps by 1, or 0, from one row to the
// next) while each row's elements lie apart (some access steps by more along
// the reduced axes), as a bias gradient's [batch*seq, n] summed over its
// rows. One block per row reads one float from each 32-byte sector there;
// KernelConfig::columns lets a warp read 32 rows' elements together.
bool reduces_columns(const kir::Kernel& k);

// Host C++: one `extern "C" void NAME(void* const* buffers, const int64_t* sizes)`
// per kernel of every kind (Gemm and Conv as loops), buffers and sizes in the kernel's
// parameter order, the random offset's address after the buffers where the
// kernel draws_random. Compiled with the system compiler into host.so.
std::string emit_host(const std::vector<kir::Kernel>& kernels);

}  // namespace tcc
