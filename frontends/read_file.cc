#include "frontends/read_file.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "src/diag/errors.h"

namespace tcc {
namespace {

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string read_regular(int fd, size_t size, const std::string& path, const std::string& what) {
  std::string bytes(size, '\0');
  size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, bytes.data() + got, std::min<size_t>(size - got, SSIZE_MAX));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path + ": cannot read " + what);
    if (n == 0) break;  // the file shrank meanwhile
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

// A pipe opened without blocking: a read only counts as its end once poll has
// said the pipe is ready, since a FIFO with no writer connected yet also reads
// as empty.
std::string read_pipe(int fd, const std::string& path, const std::string& what,
                      std::chrono::milliseconds idle_limit) {
  std::string bytes;
  char chunk[1 << 16];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, static_cast<int>(idle_limit.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw InputError(path + ": cannot read " + what);
    if (ready == 0) {
      int64_t ms = idle_limit.count();
      std::string wait = ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
      throw InputError(path + ": no " + what + " bytes arrived from the pipe in " + wait +
                       (bytes.empty() ? " (is anything writing to it?)" : ""));
    }
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw InputError(path + ": cannot read " + what);
    if (n == 0) return bytes;
    if (bytes.size() + static_cast<size_t>(n) > kMaxStreamBytes)
      throw InputError(path + ": more than 2 GiB of " + what + " came from the pipe; save it to a regular file");
    bytes.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

std::string read_file_bytes(const std::string& path, const std::string& what, std::chrono::milliseconds idle_limit) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  Fd fd(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw InputError(path + ": expected " + what + ", found a directory");
    throw InputError(path + ": cannot open " + what);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) throw InputError(path + ": cannot read " + what);
  if (S_ISDIR(st.st_mode)) throw InputError(path + ": expected " + what + ", found a directory");
  if (S_ISFIFO(st.st_mode)) return read_pipe(fd.get(), path, what, idle_limit);
  if (!S_ISREG(st.st_mode))
    throw InputError(path + ": expected " + what + ", found a device or socket; give a regular file or a pipe");
  int flags = fcntl(fd.get(), F_GETFL);
  if (flags < 0 || fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw InputError(path + ": cannot read " + what);
  return read_regular(fd.get(), static_cast<size_t>(st.st_size), path, what);
}

}  // namespace tcc
