// The 8-bit floats compiled (tests/fixtures/fp8_ops.tir): QuantizeLinear to
// f8e4m3fn, DequantizeLinear and Casts through f8e5m2 fuse into one kernel,
// an unsaturated Cast to f8e4m3fnuz runs in a kernel too, the host build gives
// the interpreter's values exactly, saturation, infinities and NaN included,
// and the source carries the conversions of the types it uses and of no other.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

TEST(Fp8Ops, QuantizeAndCastFuseAndMatchTheInterpreterExactly) {
  fs::path dir = make_temp_dir("tcc_fp8_ops");
  std::mt19937 rng(7);
  // x / 0.05 spans f8e4m3fn's range (448) and beyond, where it saturates;
  // x * 10 goes past f8e4m3fnuz's (240).
  auto fill = [&](const std::string&, Tensor& t) {
    std::uniform_real_distribution<float> x(-30, 30);
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, x(rng));
    t.set_f64(0, std::numeric_limits<float>::infinity());
    t.set_f64(1, -std::numeric_limits<float>::infinity());
    t.set_f64(2, std::numeric_limits<float>::quiet_NaN());
    t.set_f64(3, -1e-30);
  };
  const fs::path module = dir / "module";
  expect_module_matches_interpreter(fs::path(TCC_SOURCE_DIR) / "tests/fixtures/fp8_ops.tir", module, "b", {2, 7},
                                    fill, expect_same_values);
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(module / "manifest.json"));
  bool fused = false;
  for (const nlohmann::json& k : manifest["kernels"]) fused |= k["nodes"] == nlohmann::json({"q", "dq", "c", "back", "y"});
  EXPECT_TRUE(fused) << manifest["kernels"].dump();
  const std::string source = read_text(module / "host.cc");
  EXPECT_NE(source.find("tcc_f2f8e4m3fn("), std::string::npos);
  EXPECT_NE(source.find("tcc_f2f8e5m2(float"), std::string::npos);
  EXPECT_NE(source.find("tcc_f2f8e4m3fnuz(float"), std::string::npos);
  EXPECT_EQ(source.find("f8e5m2fnuz"), std::string::npos) << "conversions of a type no kernel uses";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tcc
