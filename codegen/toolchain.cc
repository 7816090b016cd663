#include "codegen/toolchain.h"

#include <fcntl.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "src/diag/errors.h"

extern char** environ;

namespace tcc {

namespace {

struct NvrtcJob {
  std::string arch;  // sm_XX (a cubin) or compute_XX (PTX)
  const std::string* source;
  bool relocatable;  // a shard's cubin, to be linked with the other shards'
  CudaBinary result;
};

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw InternalError(std::string(what) + ": " + nvrtcGetErrorString(r));
}

// One NVRTC program per arch: programs are independent, so several compile at
// once, and each splits its own optimization and ptxas work over `threads`
// threads. (Split compilation changes no kernel's machine code: on the GPT-2
// block's training step every kernel's .text section came out byte-identical;
// only the cubin's layout moves.)
CudaBinary compile_one(const std::string& source, const std::string& arch, int threads, bool relocatable) {
  bool cubin = arch.rfind("sm_", 0) == 0;
  nvrtcProgram prog;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), "kernels.cu", 0, nullptr, nullptr), "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  // No --use_fast_math: the kernels must compute what the host library and the interpreter compute.
  std::string gpu = "--gpu-architecture=" + arch;
  std::string split = "--split-compile=" + std::to_string(threads);
  std::vector<const char*> options = {gpu.c_str(), "-std=c++17", split.c_str()};
  if (relocatable) options.push_back("--relocatable-device-code=true");
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(options.size()), options.data());
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    if (n > 0) nvrtcGetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    throw InternalError("NVRTC failed to compile the kernels for " + arch + " (" + nvrtcGetErrorString(r) + "):\n" + log);
  }
  CudaBinary b;
  b.arch = arch;
  b.file = "kernels." + arch + (cubin ? ".cubin" : ".ptx");
  size_t n = 0;
  if (cubin) {
    check_nvrtc(nvrtcGetCUBINSize(prog, &n), "nvrtcGetCUBINSize");
    b.bytes.resize(n);
    check_nvrtc(nvrtcGetCUBIN(prog, b.bytes.data()), "nvrtcGetCUBIN");
  } else {
    check_nvrtc(nvrtcGetPTXSize(prog, &n), "nvrtcGetPTXSize");
    b.bytes.resize(n);
    // The terminating NUL stays: cuModuleLoadData reads PTX as a C string.
    check_nvrtc(nvrtcGetPTX(prog, b.bytes.data()), "nvrtcGetPTX");
  }
  return b;
}

int arch_number(const std::string& arch) {
  size_t u = arch.find('_');
  TCC_CHECK(u != std::string::npos && u + 1 < arch.size()) << "malformed arch '" << arch << "'";
  return std::atoi(arch.c_str() + u + 1);
}

// Little-endian reads from an ELF image, bounds-checked.
class ElfReader {
 public:
  explicit ElfReader(const std::vector<char>& b) : b_(b) {}
  template <typename T>
  T get(uint64_t at) const {
    TCC_CHECK(at <= b_.size() && sizeof(T) <= b_.size() - at) << "cubin truncated at byte " << at;
    T v;
    std::memcpy(&v, b_.data() + at, sizeof(T));
    return v;
  }
  std::string str(uint64_t at) const {
    TCC_CHECK(at < b_.size()) << "cubin string at byte " << at << " is out of range";
    const char* p = b_.data() + at;
    return std::string(p, strnlen(p, b_.size() - at));
  }

 private:
  const std::vector<char>& b_;
};

// Runs task(0) .. task(count - 1) on up to `threads` threads (the caller's
// among them), each index once; rethrows the first failure, by index, once all
// have run.
void run_parallel(size_t count, size_t threads, const std::function<void(size_t)>& task) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      try {
        task(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(count, threads); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// One cubin of the shards' relocatable cubins for `arch`.
CudaBinary link_cubins(const std::string& arch, const std::vector<CudaBinary*>& parts) {
  std::string option = "-arch=" + arch;
  const char* options[] = {option.c_str()};
  nvJitLinkHandle link = nullptr;
  if (nvJitLinkCreate(&link, 1, options) != NVJITLINK_SUCCESS)
    throw InternalError("nvJitLinkCreate failed for " + arch);
  struct Destroy {
    nvJitLinkHandle* h;
    ~Destroy() { nvJitLinkDestroy(h); }
  } destroy{&link};
  auto fail = [&](const char* what) {
    size_t n = 0;
    nvJitLinkGetErrorLogSize(link, &n);
    std::string log(n, '\0');
    if (n > 0) nvJitLinkGetErrorLog(link, log.data());
    throw InternalError(std::string(what) + " failed linking the kernels' shards for " + arch + ":\n" + log);
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name = "shard" + std::to_string(i);
    if (nvJitLinkAddData(link, NVJITLINK_INPUT_CUBIN, parts[i]->bytes.data(), parts[i]->bytes.size(), name.c_str()) !=
        NVJITLINK_SUCCESS)
      fail("nvJitLinkAddData");
  }
  if (nvJitLinkComplete(link) != NVJITLINK_SUCCESS) fail("nvJitLinkComplete");
  CudaBinary b;
  b.arch = arch;
  b.file = "kernels." + arch + ".cubin";
  size_t n = 0;
  if (nvJitLinkGetLinkedCubinSize(link, &n) != NVJITLINK_SUCCESS) fail("nvJitLinkGetLinkedCubinSize");
  b.bytes.resize(n);
  if (nvJitLinkGetLinkedCubin(link, b.bytes.data()) != NVJITLINK_SUCCESS) fail("nvJitLinkGetLinkedCubin");
  return b;
}

}  // namespace

std::vector<CudaBinary> compile_cuda(const CudaSources& sources, const std::vector<std::string>& archs, bool ptx,
                                     int jobs) {
  bool sharded = sources.shards.size() > 1;
  std::vector<NvrtcJob> work;
  // The PTX program, of the whole source, is the longest: it goes first.
  if (ptx && !archs.empty()) {
    auto newest = std::max_element(archs.begin(), archs.end(),
                                   [](const std::string& x, const std::string& y) { return arch_number(x) < arch_number(y); });
    work.push_back(NvrtcJob{"compute_" + std::to_string(arch_number(*newest)), &sources.whole, false, {}});
  }
  for (const std::string& a : archs) {
    if (!sharded) work.push_back(NvrtcJob{a, &sources.whole, false, {}});
    for (size_t i = 0; sharded && i < sources.shards.size(); ++i)
      work.push_back(NvrtcJob{a, &sources.shards[i], true, {}});
  }
  // One thread per program while they last; each program splits its work over its share of the rest.
  int budget = std::max(jobs, 1);
  size_t threads = std::min(work.size(), static_cast<size_t>(budget));
  int split = std::max(1, budget / static_cast<int>(std::max<size_t>(threads, 1)));
  run_parallel(work.size(), threads, [&](size_t i) {
    work[i].result = compile_one(*work[i].source, work[i].arch, split, work[i].relocatable);
  });
  std::vector<CudaBinary> out;
  for (const std::string& a : archs) {
    std::vector<CudaBinary*> parts;
    for (NvrtcJob& j : work)
      if (j.arch == a) parts.push_back(&j.result);
    out.push_back(sharded ? link_cubins(a, parts) : std::move(*parts.front()));
  }
  if (ptx && !archs.empty()) out.push_back(std::move(work.front().result));
  return out;
}

int cuda_shard_count(size_t kernels, size_t cubin_archs, int jobs) {
  if (cubin_archs == 0) return 1;
  size_t per_arch = static_cast<size_t>(std::max(jobs, 1)) / cubin_archs;
  return static_cast<int>(std::max<size_t>(1, std::min(per_arch, kernels / 2)));
}

std::vector<std::string> cubin_symbols(const std::vector<char>& cubin) {
  ElfReader elf(cubin);
  TCC_CHECK(cubin.size() >= 64 && std::memcmp(cubin.data(), "\x7f" "ELF", 4) == 0) << "not an ELF file";
  TCC_CHECK(elf.get<uint8_t>(4) == 2 && elf.get<uint8_t>(5) == 1) << "not a little-endian ELF64 file";
  uint64_t shoff = elf.get<uint64_t>(0x28);
  uint16_t shentsize = elf.get<uint16_t>(0x3a), shnum = elf.get<uint16_t>(0x3c);
  TCC_CHECK(shentsize >= 64) << "ELF section headers of " << shentsize << " bytes";
  constexpr uint32_t kSymtab = 2;
  constexpr uint8_t kFunc = 2;
  std::vector<std::string> names;
  for (uint64_t s = 0; s < shnum; ++s) {
    uint64_t sh = shoff + s * shentsize;
    if (elf.get<uint32_t>(sh + 4) != kSymtab) continue;
    uint64_t offset = elf.get<uint64_t>(sh + 0x18), size = elf.get<uint64_t>(sh + 0x20);
    uint32_t link = elf.get<uint32_t>(sh + 0x28);
    uint64_t entsize = elf.get<uint64_t>(sh + 0x38);
    TCC_CHECK(entsize >= 24 && link < shnum) << "malformed ELF symbol table";
    uint64_t strtab = elf.get<uint64_t>(shoff + link * shentsize + 0x18);
    for (uint64_t e = offset; e + entsize <= offset + size; e += entsize) {
      if ((elf.get<uint8_t>(e + 4) & 0xf) != kFunc) continue;
      std::string name = elf.str(strtab + elf.get<uint32_t>(e));
      if (!name.empty()) names.push_back(std::move(name));
    }
  }
  return names;
}

namespace {

// Runs $CXX (which may name a launcher and a compiler, "ccache g++": split on
// spaces, no shell) with `args`; a failure is an InternalError naming `what`.
void run_host_compiler(const std::vector<std::string>& flags, const std::string& what) {
  const char* env = std::getenv("CXX");
  std::vector<std::string> args;
  std::istringstream words(env != nullptr && *env != '\0' ? env : "c++");
  for (std::string w; words >> w;) args.push_back(w);
  args.insert(args.end(), flags.begin(), flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Close-on-exec: a compiler that a shard's thread starts must not hold another's pipe open.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw InternalError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string output;
  if (rc == 0) {
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      output.append(buf, static_cast<size_t>(n));
    }
  }
  close(fds[0]);
  if (rc != 0) throw InternalError("cannot run the host compiler '" + args[0] + "': " + std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw InternalError("the host compiler '" + args[0] + "' failed on " + what + ":\n" + output);
}

}  // namespace

void compile_host_library(const std::string& source_file, const std::string& library_file,
                          const std::vector<std::string>& shards, int jobs) {
  if (shards.size() < 2) {
    run_host_compiler({"-O2", "-fPIC", "-shared", "-o", library_file, source_file}, source_file);
    return;
  }
  // The shards' sources and objects live beside the library until it is linked.
  const std::string dir = library_file + ".shards";
  std::filesystem::create_directories(dir);
  struct Remove {
    const std::string& d;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } remove{dir};
  std::vector<std::string> sources, objects;
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string base = dir + "/shard" + std::to_string(i);
    sources.push_back(base + ".cc");
    objects.push_back(base + ".o");
    std::ofstream(sources.back()) << shards[i];
  }
  run_parallel(shards.size(), static_cast<size_t>(std::max(jobs, 1)), [&](size_t i) {
    run_host_compiler({"-O2", "-fPIC", "-c", "-o", objects[i], sources[i]},
                      source_file + " (shard " + std::to_string(i) + ")");
  });
  std::vector<std::string> link = {"-shared", "-o", library_file};
  link.insert(link.end(), objects.begin(), objects.end());
  run_host_compiler(link, library_file);
}

}  // namespace tcc
