// The recurrent ops compiled: over a short static sequence
// (tests/fixtures/recurrent_ops.tir) they unroll into MatMuls and pointwise
// kernels, over a symbolic or long one (tests/fixtures/recurrent_persistent.tir)
// they run one MatMul and the persistent recurrence kernel. Either way the
// module has no host step, and its host build, in f32, matches the
// interpreter's f64 reference kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(RecurrentCompile, UnrollOntoKernelsAndMatchTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_recurrent_ops");
  std::mt19937 rng(7);
  // Lengths over [0, 3], a full sequence among them; the rest around 0.
  auto fill = [&](const std::string& name, Tensor& t) {
    std::uniform_int_distribution<int> length(0, 3);
    std::uniform_real_distribution<double> value(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, name == "lens" ? (i == 0 ? 3 : length(rng)) : value(rng));
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/recurrent_ops.tir", dir / "module", "b",
                                    {2, 5}, fill, close);
  fs::remove_all(dir);
}

// At two sequence lengths, one module: the kernel reads the length at run
// time. Each row's length lies in [0, s], the first row's s.
TEST(RecurrentCompile, PersistentKernelOverASymbolicSequenceMatchesTheInterpreter) {
  fs::path dir = make_temp_dir("tcc_recurrent_persistent");
  std::mt19937 rng(5);
  int64_t seq = 0;
  auto fill = [&](const std::string& name, Tensor& t) {
    if (name == "x") seq = t.shape()[0];
    std::uniform_int_distribution<int64_t> length(0, seq);
    std::uniform_real_distribution<double> value(-1, 1);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, name == "lens" ? static_cast<double>(i == 0 ? seq : length(rng)) : value(rng));
  };
  auto close = [](const Tensor& got, const Tensor& expected, const std::string& what) {
    expect_close_to(got, expected, what, "interpreter");
  };
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/recurrent_persistent.tir",
                                    dir / "module", "s", {3, 9}, fill, close);
  // The LSTM, the GRU and the RNN of 20 steps each run as the persistent kernel, not unrolled.
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(dir / "module" / "manifest.json"));
  EXPECT_EQ(std::count_if(manifest["kernels"].begin(), manifest["kernels"].end(),
                          [](const nlohmann::json& k) { return k["kind"] == "recurrence"; }),
            3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
