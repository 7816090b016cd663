// Host code that runs tcc's emitted CUDA kernels under tests/unit/codegen/cuda_emulator.h:
// the launcher each test compiles beside a kernel, and its type.
#pragma once

#include <string>

#include "codegen/emit_c.h"
#include "codegen/kernel_ir.h"

namespace tcc {

// `extern "C" void launch_NAME(buffers, sizes, workspace, gx, gy, gz, bx, by)`,
// which runs kernel k on a gx x gy x gz grid of bx x by blocks with its
// buffers (of their storage types), its size parameters, when `workspace`,
// the workspace argument, and for a kernel that draws_random the random
// offset's pointer, after the buffers in `b` (the host kernels' convention).
inline std::string emulated_launcher(const kir::Kernel& k, bool workspace) {
  std::string args;
  for (size_t b = 0; b < k.buffers.size(); ++b)
    args += std::string(args.empty() ? "" : ", ") + "(" + (k.buffers[b].output ? "" : "const ") +
            emitc::storage_type(k.buffers[b].dtype) + "*)b[" + std::to_string(b) + "]";
  for (size_t i = 0; i < k.size_params.size(); ++i) args += ", s[" + std::to_string(i) + "]";
  if (workspace) args += ", ws";
  if (kir::draws_random(k)) args += ", (const uint64_t*)b[" + std::to_string(k.buffers.size()) + "]";
  return "extern \"C\" void launch_" + k.name +
         "(void* const* b, const int64_t* s, void* ws, unsigned gx, unsigned gy, unsigned gz, unsigned bx, "
         "unsigned by) {\n  tcc_emu::launch(gx, gy, gz, bx, by, [&] { " + k.name + "(" + args + "); });\n}\n";
}

using EmulatedLaunch = void (*)(void* const* buffers, const int64_t* sizes, void* workspace, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by);

}  // namespace tcc
