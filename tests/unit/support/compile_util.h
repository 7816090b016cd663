// Compiling a model into a module directory through the compiler library
// (src/compiler/compile.h), for tests that need a module rather than a test of
// the `tcc compile` command line.
#pragma once

#include <filesystem>

#include "src/compiler/compile.h"

namespace tcc {

// sm_90 without PTX: one NVRTC target, the shortest compile that still builds
// every kernel for the GPU.
inline CompileOptions quick_compile_options() {
  CompileOptions o;
  o.archs = {"sm_90"};
  o.ptx = false;
  return o;
}

inline CompileResult compile_model(const std::filesystem::path& model, const std::filesystem::path& module,
                                   const CompileOptions& options = CompileOptions()) {
  CompileRequest req;
  req.model = model.string();
  req.output = module.string();
  req.options = options;
  return compile(req);
}

}  // namespace tcc
