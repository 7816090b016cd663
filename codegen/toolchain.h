// Turning emitted source into binaries: NVRTC for CUDA (no GPU needed), the
// system C++ compiler for the host library.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tcc {

struct CudaBinary {
  std::string arch;        // "sm_80", "sm_90" (a cubin) or "compute_90" (PTX)
  std::string file;        // file name in the module: "kernels.sm_90.cubin", "kernels.compute_90.ptx"
  std::vector<char> bytes;
};

// A module's CUDA source as NVRTC compiles it: the whole translation unit
// (kernels.cu; PTX is made from it) and, optionally, shards of it, each a
// self-contained translation unit of some of the kernels (emit_cuda of a
// subset). Shards compile in parallel, as relocatable code, and nvJitLink links
// their cubins into one per arch, so a module's compile is not one serial
// NVRTC program of all of its kernels.
struct CudaSources {
  CudaSources(std::string whole_source) : whole(std::move(whole_source)) {}  // NOLINT: one program, no shards
  std::string whole;
  std::vector<std::string> shards;  // none or several
};

// Compiles `sources` for every arch in `archs` ("sm_80", "sm_90", ...), plus
// PTX for the newest arch when `ptx` is set, with up to `jobs` threads: one per
// program while there are more programs than that, the rest shared out to each
// program's split compilation. NVRTC and nvJitLink errors are an InternalError
// carrying their log.
std::vector<CudaBinary> compile_cuda(const CudaSources& sources, const std::vector<std::string>& archs, bool ptx,
                                     int jobs);

// How many shards a module of `kernels` generated kernels is best compiled in,
// with `jobs` threads for `cubin_archs` cubin programs: a shard per thread left
// to each arch, at least two kernels a shard, 1 (no sharding) on few threads.
int cuda_shard_count(size_t kernels, size_t cubin_archs, int jobs);

// Kernel symbols defined in a cubin (ELF symbol table), for checks and tests.
std::vector<std::string> cubin_symbols(const std::vector<char>& cubin);

// Compiles host C++ into a shared library with $CXX (or c++), -O2 -fPIC:
// `source_file` alone, or, given `shards` (self-contained translation units of
// its kernels: emit_host of each of shard_kernels' groups), the shards, up to
// `jobs` compilers at once, linked into one library. A failing compiler is an
// InternalError with its output.
void compile_host_library(const std::string& source_file, const std::string& library_file,
                          const std::vector<std::string>& shards = {}, int jobs = 1);

}  // namespace tcc
