// The toolchain on the emitters' output (emit_kernels.h): NVRTC compiles every
// generated kernel and its cubin defines each one, shards link into one cubin
// per arch, and compiler errors carry their logs.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/emit.h"
#include "codegen/toolchain.h"
#include "src/diag/errors.h"
#include "src/module/shared_library.h"
#include "tests/unit/codegen/emit_kernels.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using namespace emit_kernels;

// The names readelf lists as FUNC symbols, when readelf is installed.
std::optional<std::set<std::string>> readelf_functions(const fs::path& file) {
  if (std::system("readelf --version > /dev/null 2>&1") != 0) return std::nullopt;
  std::string cmd = "readelf -sW '" + file.string() + "'";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return std::nullopt;
  std::set<std::string> names;
  char line[4096];
  // "Num: Value Size Type Bind Vis [<other>: N] Ndx Name": the type is the fourth word, the name the last.
  while (fgets(line, sizeof line, p.get())) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.size() >= 8 && w[3] == "FUNC") names.insert(w.back());
  }
  return names;
}

TEST(Toolchain, NvrtcCompilesEveryGeneratedKernel) {
  std::vector<kir::Kernel> ks = all_kernels();
  std::vector<CudaBinary> bins = compile_cuda(emit_cuda(ks), {"sm_90"}, true, 2);
  ASSERT_EQ(bins.size(), 2u);
  EXPECT_EQ(bins[0].arch, "sm_90");
  EXPECT_EQ(bins[0].file, "kernels.sm_90.cubin");
  EXPECT_EQ(bins[1].arch, "compute_90");
  EXPECT_EQ(bins[1].file, "kernels.compute_90.ptx");
  std::string ptx(bins[1].bytes.begin(), bins[1].bytes.end());
  std::vector<std::string> syms = cubin_symbols(bins[0].bytes);
  std::set<std::string> got(syms.begin(), syms.end());
  for (const kir::Kernel& k : ks) {
    bool generated = k.kind != kir::Kind::Gemm;
    EXPECT_EQ(got.count(k.name), generated ? 1u : 0u) << k.name;
    EXPECT_EQ(ptx.find(".entry " + k.name + "(") != std::string::npos, generated) << k.name;
  }
  const fs::path dir = make_temp_dir("tcc_cubin");
  fs::path cubin = dir / "k.cubin";
  std::ofstream(cubin, std::ios::binary).write(bins[0].bytes.data(), static_cast<std::streamsize>(bins[0].bytes.size()));
  if (auto elf = readelf_functions(cubin)) {
    EXPECT_EQ(*elf, got);
  }
  fs::remove_all(dir);
}

// Shards compile as relocatable code and nvJitLink makes one cubin per arch of
// them: it defines every generated kernel once, as the whole program's does;
// the PTX comes from the whole program.
TEST(Toolchain, ShardsLinkIntoOneCubinPerArch) {
  std::vector<kir::Kernel> ks = all_kernels();
  CudaSources sources(emit_cuda(ks));
  std::vector<size_t> generated;
  for (size_t i = 0; i < ks.size(); ++i)
    if (!runs_library(ks[i], default_config(ks[i]))) generated.push_back(i);
  for (const std::vector<size_t>& group : shard_kernels(ks, generated, 3)) {
    std::vector<kir::Kernel> shard;
    for (size_t i : group) shard.push_back(ks[i]);
    sources.shards.push_back(emit_cuda(shard));
  }
  ASSERT_EQ(sources.shards.size(), 3u);
  std::vector<CudaBinary> bins = compile_cuda(sources, {"sm_80", "sm_90"}, true, 2);
  ASSERT_EQ(bins.size(), 3u);
  std::vector<CudaBinary> whole = compile_cuda(sources.whole, {"sm_90"}, false, 2);
  std::vector<std::string> whole_syms = cubin_symbols(whole[0].bytes);
  std::multiset<std::string> expected;
  for (const std::string& s : whole_syms)
    if (s.rfind("k_", 0) == 0) expected.insert(s);  // the kernels, not NVRTC's internal helpers
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(bins[i].file, "kernels." + bins[i].arch + ".cubin");
    std::multiset<std::string> got;
    for (const std::string& s : cubin_symbols(bins[i].bytes))
      if (s.rfind("k_", 0) == 0) got.insert(s);
    EXPECT_EQ(got, expected) << bins[i].arch;
  }
  EXPECT_EQ(bins[2].arch, "compute_90");
  // Each shard is a translation unit of its own, and together they hold each generated kernel once.
  std::multiset<std::string> dealt;
  for (const std::string& shard : sources.shards)
    for (const kir::Kernel& k : ks)
      if (shard.find(" void " + k.name + "(") != std::string::npos) dealt.insert(k.name);
  std::multiset<std::string> want;
  for (size_t i : generated) want.insert(ks[i].name);
  EXPECT_EQ(dealt, want);
  EXPECT_TRUE(shard_kernels(ks, generated, 1).empty());
}

TEST(Toolchain, ShardCountLeavesEachArchItsThreads) {
  EXPECT_EQ(cuda_shard_count(40, 2, 2), 1);    // the build machine: one program per arch
  EXPECT_EQ(cuda_shard_count(40, 1, 2), 2);
  EXPECT_EQ(cuda_shard_count(40, 2, 16), 8);
  EXPECT_EQ(cuda_shard_count(5, 2, 16), 2);    // at least two kernels a shard
  EXPECT_EQ(cuda_shard_count(1, 1, 16), 1);
  EXPECT_EQ(cuda_shard_count(40, 0, 16), 1);   // PTX only
}

TEST(Toolchain, NvrtcErrorsCarryTheLog) {
  try {
    compile_cuda(std::string("extern \"C\" __global__ void broken() { undefined_thing(); }"), {"sm_90"}, false, 1);
    FAIL() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
  }
}

TEST(Toolchain, HostCompilerErrorsCarryItsOutput) {
  const fs::path dir = make_temp_dir("tcc_host_cc");
  fs::path src = dir / "bad.cc";
  std::ofstream(src) << "int f() { return not_declared_here; }\n";
  try {
    compile_host_library(src.string(), (dir / "bad.so").string());
    ADD_FAILURE() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("not_declared_here"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SharedLibrary((dir / "missing.so").string()), InputError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
