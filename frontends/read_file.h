// Reading a whole input file (a model, a tensor) into memory in one piece.
#pragma once

#include <chrono>
#include <string>

namespace tcc {

// How long a pipe may stay silent, no writer connected or no bytes arriving,
// before read_file_bytes gives up on it.
inline constexpr std::chrono::milliseconds kPipeIdleLimit{10000};

// Streams (pipes, process substitution) are read to their end up to this size;
// a model this large is a regular file.
inline constexpr size_t kMaxStreamBytes = size_t{2} << 30;

// The file's bytes. A regular file is read with one allocation of its size (a
// model's weights are not copied through a growing buffer); a pipe is read to
// its end, but never waited on longer than `idle_limit` at a time, so a FIFO
// nobody writes to is an error rather than a hang. Anything else (a directory,
// a device such as /dev/zero) is refused before a byte is read. Every failure
// is an InputError naming the path: "PATH: cannot open WHAT", "PATH: expected
// WHAT, found a directory", ...
std::string read_file_bytes(const std::string& path, const std::string& what,
                            std::chrono::milliseconds idle_limit = kPipeIdleLimit);

}  // namespace tcc
