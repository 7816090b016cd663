// A temporary directory of its own, removed with everything in it when the
// object goes: where the host compiler builds host.so for a module in memory,
// and where `tcc run` and `tcc bench` write the modules they compile.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "src/diag/errors.h"

namespace tcc {

struct ScratchDir {
  std::filesystem::path path;
  // A new directory in the system's temporary directory, named PREFIX-XXXXXX.
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!mkdtemp(pattern.data())) throw InputError("cannot create a temporary directory in " + pattern);
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace tcc
