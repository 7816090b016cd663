#include "frontends/read_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/diag/diagnostics.h"

namespace tcc {

std::string read_file_bytes(const std::string& path, const std::string& what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open " + what);
  std::error_code ec;
  std::string bytes;
  if (std::filesystem::is_regular_file(path, ec)) {
    bytes.resize(std::filesystem::file_size(path, ec));
    if (ec) throw InputError(path + ": cannot read the size of " + what);
    f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    bytes.resize(static_cast<size_t>(f.gcount()));  // the file may have shrunk meanwhile
    if (f.bad()) throw InputError(path + ": cannot read " + what);
    return bytes;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace tcc
