// Reading a whole input file (a model, a tensor) into memory in one piece.
#pragma once

#include <string>

namespace tcc {

// The file's bytes. A regular file is read with one allocation of its size (a
// model's weights are not copied through a growing buffer); a pipe or other
// stream is read to its end. A file that cannot be opened or read is an
// InputError "PATH: cannot open WHAT".
std::string read_file_bytes(const std::string& path, const std::string& what);

}  // namespace tcc
