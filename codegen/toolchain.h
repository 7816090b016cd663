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

// Compiles one translation unit for every arch in `archs` ("sm_80", "sm_90",
// ...), plus PTX for the newest arch when `ptx` is set, with up to `jobs`
// threads: one per program while there are more programs than that, the rest
// shared out to each program's split compilation. NVRTC errors are an
// InternalError carrying its log.
std::vector<CudaBinary> compile_cuda(const std::string& source, const std::vector<std::string>& archs, bool ptx,
                                     int jobs);

// Kernel symbols defined in a cubin (ELF symbol table), for checks and tests.
std::vector<std::string> cubin_symbols(const std::vector<char>& cubin);

// Compiles host C++ into a shared library with $CXX (or c++), -O2 -fPIC -shared.
// A failing compiler is an InternalError with its output.
void compile_host_library(const std::string& source_file, const std::string& library_file);

// A loaded shared library (dlopen); closes on destruction.
class SharedLibrary {
 public:
  explicit SharedLibrary(const std::string& path);  // InputError naming the file on failure
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  // Null when the symbol is absent.
  void* symbol(const std::string& name) const;

 private:
  void* handle_ = nullptr;
};

}  // namespace tcc
