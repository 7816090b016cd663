// Runs the built `tcc` binary (TCC_BINARY) for tests of the whole tool.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tcc {

struct CliResult {
  int code;            // exit status; 128 + N when killed by signal N, 124 when `timeout` stopped it
  std::string output;  // stdout and stderr together
};

// Every child runs under `timeout` so a hang fails the test instead of
// blocking the suite; the bound is far above any run's time on an idle
// machine, and a compile of a large model (hundreds of kernels through NVRTC
// and the host compiler, beside other tests) asks for a longer one.
inline CliResult run_tcc(const std::string& args, const std::string& env = "", int timeout_s = 20) {
  std::string cmd = env + " timeout " + std::to_string(timeout_s) + " " + TCC_BINARY + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, "popen failed for: " + cmd};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  // The shell may exec the command directly, so a crash can arrive as a signal.
  if (WIFSIGNALED(status)) return {128 + WTERMSIG(status), out};
  return {WEXITSTATUS(status), out};
}

// The environment that hides every GPU from a child (the CUDA driver then
// finds no device), for tests of what tcc does without one that must hold on
// a GPU machine too.
inline const std::string kNoGpuEnv = "CUDA_VISIBLE_DEVICES=";

// Quotes a path for the shell command line run_tcc builds.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace tcc
