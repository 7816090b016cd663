// The runtime library (src/runtime/tcc_runtime.h): loading module directories
// strictly, running them on the host, refusing bad inputs, and the device path
// where there is no device.
//
// Most tests use a module written by hand here (manifest.json, host.cc built
// with the system compiler, weights.bin, fallback.tir) so the loader is
// checked against docs/MODULE.md independently of the module writer.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include "frontends/load_model.h"
#include "src/interp/interpreter.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/compile_util.h"
#include "tests/unit/support/example_models.h"
#include "tests/unit/support/temp_dir.h"
#include "tests/unit/runtime/module_test_util.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// y = -relu(x + w): a pointwise kernel in host.so writes the planned buffer t,
// and a fallback node (Neg, through the reference interpreter) writes y.
constexpr float kBias[4] = {0.5f, -1.0f, 2.0f, -3.0f};

const char* kHostSource = R"(#include <cstdint>
extern "C" void tcc_k0_pointwise(void* const* buffers, const int64_t* sizes) {
  const float* x = static_cast<const float*>(buffers[0]);
  const float* w = static_cast<const float*>(buffers[1]);
  float* t = static_cast<float*>(buffers[2]);
  for (int64_t i = 0; i < sizes[0] * 4; ++i) {
    float v = x[i] + w[i % 4];
    t[i] = v > 0 ? v : 0;
  }
}
)";

const char* kFallbackTir = R"(graph fallback opset(ai.onnx: 17) {
  input %t: f32[b, 4]
  %y: f32[b, 4] = Neg(%t) name("neg")
  output %y
}
)";

json hand_manifest() {
  return json::parse(R"({
    "format": "tcc-module", "format_version": 2, "tcc_version": "0.1.0", "model": "hand.tir", "mode": "default",
    "options": {"arch": ["sm_90"], "ptx": false, "dynamic": "auto"}, "random": false,
    "inputs": [{"name": "x", "dtype": "f32", "shape": ["b", 4]}],
    "outputs": [{"name": "y", "dtype": "f32", "shape": ["b", 4]}],
    "symbols": {"b": {"input": "x", "axis": 0}},
    "guards": [
      {"kind": "TENSOR_MATCH", "input": "x", "dtype": "float32", "size": [null, 4], "stride": [4, 1],
       "contiguous": true},
      {"kind": "SHAPE_ENV", "expr": "2 <= s0", "sources": ["x.size()[0]"]}],
    "weights": {"file": "weights.bin",
                "tensors": [{"name": "w", "dtype": "f32", "shape": [4], "offset": 0, "nbytes": 16}]},
    "memory": {"arena_bytes": "b*16", "unplanned_bytes": "b*16",
               "buffers": [{"name": "t", "dtype": "f32", "shape": ["b", 4], "offset": "0", "nbytes": "b*16"}]},
    "cuda": {"source": "kernels.cu", "binaries": []},
    "host": {"source": "host.cc", "library": "host.so"},
    "kernels": [
      {"name": "tcc_k0_pointwise", "kind": "pointwise", "nodes": ["add", "relu"],
       "buffers": [{"dtype": "f32", "shape": ["b", 4], "output": false},
                   {"dtype": "f32", "shape": [4], "output": false},
                   {"dtype": "f32", "shape": ["b", 4], "output": true}],
       "sizes": ["b"],
       "launch": {"grid": ["(b*4+255)//256", 1, 1], "block": [256, 1, 1], "shared_bytes": 0},
       "bytes_moved": "b*32+16", "flop": "b*8"}],
    "schedule": [
      {"kernel": 0, "node": "fused_0", "reads": ["x", "w"], "writes": ["t"]},
      {"fallback": "neg", "reads": ["t"], "writes": ["y"]}],
    "fallback_copies": 2
  })");
}

// Writes the hand module into `dir`; host.so is built once and copied.
void write_hand_module(const fs::path& dir, const json& manifest) {
  static const fs::path library = [] {
    fs::path build = make_temp_dir("tcc_runtime_host_build");
    write_file(build / "host.cc", kHostSource);
    std::string cmd = "c++ -O1 -fPIC -shared -o " + shell_quote((build / "host.so").string()) + " " +
                      shell_quote((build / "host.cc").string());
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return build / "host.so";
  }();
  write_file(dir / "manifest.json", manifest.dump(2));
  write_file(dir / "host.cc", kHostSource);
  fs::copy_file(library, dir / "host.so", fs::copy_options::overwrite_existing);
  write_file(dir / "weights.bin", std::string(reinterpret_cast<const char*>(kBias), sizeof(kBias)));
  write_file(dir / "fallback.tir", kFallbackTir);
}

struct Loaded {
  tcc_module* m = nullptr;
  tcc_status status = TCC_ERROR_INTERNAL;
  std::string error;
  explicit Loaded(const fs::path& dir) {
    status = tcc_module_load(dir.c_str(), &m);
    error = tcc_last_error();
  }
  ~Loaded() { tcc_module_free(m); }
};

class HandModule : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    write_hand_module(dir_, hand_manifest());
  }

  // Loads the module after `edit` changes its manifest; expects a refusal naming `expected`.
  void expect_bad_module(const std::function<void(json&)>& edit, const std::string& expected) {
    json manifest = hand_manifest();
    edit(manifest);
    write_file(dir_ / "manifest.json", manifest.dump());
    Loaded l(dir_);
    EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE) << expected;
    EXPECT_EQ(l.m, nullptr);
    EXPECT_NE(l.error.find(expected), std::string::npos) << "message: " << l.error;
  }
};

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4, 4);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

TEST_F(HandModule, RunsOnTheHostThroughKernelAndFallback) {
  Loaded l(dir_);
  ASSERT_EQ(l.status, TCC_OK) << l.error;
  ASSERT_EQ(tcc_module_num_inputs(l.m), 1u);
  ASSERT_EQ(tcc_module_num_outputs(l.m), 1u);
  EXPECT_STREQ(tcc_module_input_name(l.m, 0), "x");
  EXPECT_STREQ(tcc_module_output_name(l.m, 0), "y");
  EXPECT_EQ(tcc_module_input_name(l.m, 1), nullptr);

  for (int64_t batch : {2, 7}) {
    std::vector<float> x = random_floats(batch * 4, static_cast<unsigned>(batch));
    std::vector<float> y(batch * 4, 123.0f);
    int64_t shape[2] = {batch, 4};
    tcc_tensor in = {x.data(), TCC_F32, 2, shape};
    tcc_tensor out = {y.data(), TCC_F32, 2, shape};

    int64_t out_shape[4] = {};
    int32_t rank = 0;
    ASSERT_EQ(tcc_module_output_shape(l.m, &in, 1, 0, out_shape, 4, &rank), TCC_OK) << tcc_last_error();
    EXPECT_EQ(rank, 2);
    EXPECT_EQ(out_shape[0], batch);
    EXPECT_EQ(out_shape[1], 4);

    ASSERT_EQ(tcc_module_run_host(l.m, &in, 1, &out, 1), TCC_OK) << tcc_last_error();
    for (int64_t i = 0; i < batch * 4; ++i) EXPECT_EQ(y[i], -std::max(0.0f, x[i] + kBias[i % 4])) << i;
  }
}

TEST_F(HandModule, TensorInfoReportsSymbolicDimsAsMinusOne) {
  Loaded l(dir_);
  ASSERT_EQ(l.status, TCC_OK) << l.error;
  tcc_dtype dtype;
  int32_t rank = 0;
  int64_t dims[4];
  ASSERT_EQ(tcc_module_tensor_info(l.m, 0, 0, &dtype, &rank, dims, 4), TCC_OK);
  EXPECT_EQ(dtype, TCC_F32);
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(dims[0], -1);
  EXPECT_EQ(dims[1], 4);
  EXPECT_EQ(tcc_module_tensor_info(l.m, 1, 3, &dtype, &rank, dims, 4), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tcc_module_tensor_info(l.m, 0, 0, &dtype, &rank, dims, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(), "'x' has rank 2, more than max_rank 1");
}

TEST_F(HandModule, RefusesInputsThatDoNotFit) {
  Loaded l(dir_);
  ASSERT_EQ(l.status, TCC_OK) << l.error;
  std::vector<float> x(64), y(64);
  std::vector<double> x64(64);
  int64_t good[2] = {3, 4}, static_wrong[2] = {3, 5}, too_small[2] = {1, 4}, other_batch[2] = {5, 4};
  tcc_tensor out = {y.data(), TCC_F32, 2, good};
  struct Case {
    tcc_tensor in;
    std::string message;
  };
  const Case cases[] = {
      {{x64.data(), TCC_F64, 2, good}, "input 'x': expected f32[b, 4], got dtype 11 rank 2 [3, 4]"},
      {{x.data(), TCC_F32, 1, good}, "input 'x': expected f32[b, 4], got dtype 1 rank 1 [3]"},
      {{x.data(), TCC_F32, 2, static_wrong}, "input 'x': dim 1 is 5, expected 4 (f32[b, 4])"},
      {{x.data(), TCC_F32, 2, too_small}, "inputs fail the module's guard '2 <= s0' (x.size()[0] = 1)"},
      {{nullptr, TCC_F32, 2, good}, "input 'x': data is null"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(tcc_module_run_host(l.m, &c.in, 1, &out, 1), TCC_ERROR_INVALID_ARGUMENT) << c.message;
    EXPECT_EQ(tcc_last_error(), c.message);
  }
  tcc_tensor in = {x.data(), TCC_F32, 2, good};
  EXPECT_EQ(tcc_module_run_host(l.m, &in, 0, &out, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(), "expected 1 inputs, got 0");
  tcc_tensor wrong_out = {y.data(), TCC_F32, 2, other_batch};
  EXPECT_EQ(tcc_module_run_host(l.m, &in, 1, &wrong_out, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(), "output 'y': shape [5, 4], expected [3, 4]");
  EXPECT_EQ(tcc_module_run_host(nullptr, &in, 1, &out, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(), "module is null");
}

TEST_F(HandModule, ShapeGuardsRelateInputDims) {
  // A second input whose dim must equal x's batch, and a divisibility guard.
  json manifest = hand_manifest();
  manifest["inputs"].push_back({{"name", "mask"}, {"dtype", "f32"}, {"shape", {"n"}}});
  manifest["symbols"]["n"] = {{"input", "mask"}, {"axis", 0}};
  manifest["guards"].push_back({{"kind", "SHAPE_ENV"}, {"expr", "mask.size()[0] == x.size()[0]"},
                                {"sources", {"mask.size()[0]", "x.size()[0]"}}});
  manifest["guards"].push_back({{"kind", "SHAPE_ENV"}, {"expr", "(s0*3) % 2 == 0"}, {"sources", {"Reshape_1"}}});
  write_file(dir_ / "manifest.json", manifest.dump());
  Loaded l(dir_);
  ASSERT_EQ(l.status, TCC_OK) << l.error;
  std::vector<float> x(64), mask(64), y(64);
  int64_t x_shape[2] = {4, 4}, mask4[1] = {4}, mask6[1] = {6}, x_odd[2] = {3, 4};
  tcc_tensor ins[2] = {{x.data(), TCC_F32, 2, x_shape}, {mask.data(), TCC_F32, 1, mask4}};
  tcc_tensor out = {y.data(), TCC_F32, 2, x_shape};
  EXPECT_EQ(tcc_module_run_host(l.m, ins, 2, &out, 1), TCC_OK) << tcc_last_error();
  ins[1].shape = mask6;
  EXPECT_EQ(tcc_module_run_host(l.m, ins, 2, &out, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(),
               "inputs fail the module's guard 'mask.size()[0] == x.size()[0]' (mask.size()[0] = 6, x.size()[0] = 4)");
  int64_t mask3[1] = {3};
  ins[0].shape = x_odd;
  ins[1].shape = mask3;
  out.shape = x_odd;
  EXPECT_EQ(tcc_module_run_host(l.m, ins, 2, &out, 1), TCC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(tcc_last_error(),
               "inputs fail the module's guard '(s0*3) % 2 == 0' (s0 = x.size()[0] = 3), which Reshape_1 relies on");
}

TEST_F(HandModule, RefusesBadManifestsNamingTheField) {
  expect_bad_module([](json& j) { j["format"] = "onnx"; }, "manifest.json: format: not a tcc module ('onnx')");
  expect_bad_module([](json& j) { j["format_version"] = 1; },
                    "manifest.json: format_version: version 1 is not supported (this runtime reads 2)");
  expect_bad_module([](json& j) { j.erase("random"); }, "manifest.json: random: missing");
  expect_bad_module([](json& j) { j["kernels"][0]["launch"]["random_offset"] = true; },
                    "manifest.json: random: false, but kernel 'tcc_k0_pointwise' reads the random offset");
  expect_bad_module([](json& j) { j.erase("schedule"); }, "manifest.json: schedule: missing");
  expect_bad_module([](json& j) { j["inputs"][0]["dtype"] = "f33"; }, "manifest.json: inputs[0].dtype: unknown dtype 'f33'");
  expect_bad_module([](json& j) { j["inputs"][0]["shape"][0] = "b+"; },
                    "manifest.json: inputs[0].shape[0]: 'b+' is not a size expression");
  expect_bad_module([](json& j) { j["outputs"][0]["shape"][0] = "q"; },
                    "manifest.json: outputs[0].shape: mentions symbol 'q', which neither an input nor a fallback's value binds");
  expect_bad_module([](json& j) { j["symbols"]["b"]["axis"] = 7; },
                    "manifest.json: symbols.b.axis: expected an integer in [0, 1], got 7");
  expect_bad_module([](json& j) { j["weights"]["file"] = "../weights.bin"; },
                    "manifest.json: weights.file: '../weights.bin' leaves the module directory");
  expect_bad_module([](json& j) { j["weights"]["file"] = "/etc/passwd"; },
                    "manifest.json: weights.file: '/etc/passwd' is not a path relative to the module directory");
  expect_bad_module([](json& j) { j["host"]["library"] = "missing.so"; },
                    "manifest.json: host.library: 'missing.so' does not exist in");
  expect_bad_module([](json& j) { j["weights"]["tensors"][0]["offset"] = 256; },
                    "manifest.json: weights.tensors[0]: weight 'w' (bytes 256..272) lies past the end of weights.bin "
                    "(16 bytes)");
  expect_bad_module([](json& j) { j["weights"]["tensors"][0]["nbytes"] = 12; },
                    "manifest.json: weights.tensors[0].nbytes: 12 bytes do not hold f32[4]");
  expect_bad_module([](json& j) { j["kernels"][0]["name"] = "tcc_k9_pointwise"; },
                    "manifest.json: kernels[0].name: 'tcc_k9_pointwise' is not defined in host.so");
  expect_bad_module([](json& j) { j["kernels"][0]["kind"] = "winograd"; },
                    "manifest.json: kernels[0].kind: unknown kernel kind 'winograd'");
  expect_bad_module([](json& j) { j["kernels"][0]["kind"] = "conv"; }, "manifest.json: kernels[0].conv: missing");
  expect_bad_module([](json& j) { j["schedule"][0]["kernel"] = 1; },
                    "manifest.json: schedule[0].kernel: expected an integer in [0, 0], got 1");
  expect_bad_module([](json& j) { j["schedule"][0]["reads"][1] = "v"; },
                    "manifest.json: schedule[0].reads[1]: 'v' is not an input, weight, planned buffer, binding constant or output");
  expect_bad_module([](json& j) { j["schedule"][0]["reads"] = {"x"}; },
                    "manifest.json: schedule[0]: binds 1 reads and 1 writes to kernel 'tcc_k0_pointwise', which "
                    "reads 2 and writes 1 buffers");
  expect_bad_module([](json& j) { j["schedule"][0]["writes"] = {"x"}; },
                    "manifest.json: schedule[0].writes[0]: a step may not write an input, a weight or a binding constant");
  expect_bad_module([](json& j) { j["schedule"][1]["fallback"] = "abs"; },
                    "manifest.json: schedule[1].fallback: no node 'abs' in fallback.tir");
  expect_bad_module([](json& j) { j["guards"][0]["kind"] = "ID_MATCH"; },
                    "manifest.json: guards[0].kind: unknown guard kind 'ID_MATCH'");
  expect_bad_module([](json& j) { j["guards"][1]["expr"] = "2 <= s0 +"; }, "manifest.json: guards[1].expr: cannot read");
  expect_bad_module([](json& j) { j["kernels"][0]["sizes"][0] = 3; },
                    "manifest.json: kernels[0].sizes[0]: expected a symbol the kernel reads, got '3'");
  expect_bad_module(
      [](json& j) {
        j["kernels"][0]["kind"] = "gemm";
        j["kernels"][0]["gemm"] = 1;
      },
                    "manifest.json: kernels[0].gemm: expected an object");
  expect_bad_module([](json& j) { j["kernels"][0]["launch"]["workspace_bytes"] = 64; },
                    "manifest.json: kernels[0].launch.workspace_bytes: only split reductions, split-K gemm templates "
                    "and NMS kernels take a workspace");
  auto reduction_with_workspace = [](json bytes) {
    return [bytes](json& j) {
      j["kernels"][0]["kind"] = "reduction";
      j["kernels"][0]["launch"]["workspace_bytes"] = bytes;
    };
  };
  expect_bad_module(reduction_with_workspace(0),
                    "manifest.json: kernels[0].launch.workspace_bytes: expected a positive byte count, got 0");
  expect_bad_module(reduction_with_workspace("q*8"),
                    "manifest.json: kernels[0].launch.workspace_bytes: mentions symbol 'q', which neither an input nor a fallback's value binds");
  expect_bad_module(reduction_with_workspace("b*"),
                    "manifest.json: kernels[0].launch.workspace_bytes: 'b*' is not a size expression");
  expect_bad_module(reduction_with_workspace(true),
                    "manifest.json: kernels[0].launch.workspace_bytes: expected an integer or a size expression");
}

// A reduction kernel may declare a workspace; the host target does not use it.
TEST_F(HandModule, LoadsAKernelWorkspace) {
  json manifest = hand_manifest();
  manifest["kernels"][0]["kind"] = "reduction";
  manifest["kernels"][0]["launch"]["workspace_bytes"] = "b*8+4";
  write_file(dir_ / "manifest.json", manifest.dump());
  Loaded l(dir_);
  EXPECT_EQ(l.status, TCC_OK) << l.error;
}

TEST_F(HandModule, RefusesTruncatedFiles) {
  std::string weights = read_text(dir_ / "weights.bin");
  write_file(dir_ / "weights.bin", weights.substr(0, 10));
  {
    Loaded l(dir_);
    EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE);
    EXPECT_NE(l.error.find("lies past the end of weights.bin (10 bytes)"), std::string::npos) << l.error;
  }
  write_file(dir_ / "weights.bin", weights);
  write_file(dir_ / "fallback.tir", std::string(kFallbackTir).substr(0, 60));
  {
    Loaded l(dir_);
    EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE);
    EXPECT_EQ(l.error.rfind("fallback.tir: ", 0), 0u) << l.error;
  }
  write_file(dir_ / "host.so", "not a shared library");
  write_file(dir_ / "fallback.tir", kFallbackTir);
  {
    Loaded l(dir_);
    EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE);
    EXPECT_EQ(l.error.rfind("manifest.json: host.library: ", 0), 0u) << l.error;
  }
  fs::remove(dir_ / "manifest.json");
  Loaded l(dir_);
  EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE);
  EXPECT_NE(l.error.find("manifest.json: cannot read"), std::string::npos) << l.error;
}

// Every prefix of the manifest, and every field deleted or given a value of
// the wrong kind, is refused (or, where the field is optional, loads) without
// crashing; whatever loads also runs or refuses its inputs cleanly.
TEST_F(HandModule, SurvivesHostileManifests) {
  std::string text = hand_manifest().dump();
  for (size_t n = 0; n < text.size(); n += 7) {
    write_file(dir_ / "manifest.json", text.substr(0, n));
    Loaded l(dir_);
    EXPECT_EQ(l.status, TCC_ERROR_BAD_MODULE) << n;
  }
  const json hostile[] = {json(), json(-1), json(int64_t{1} << 62), json("zz"), json::array(), json::object(),
                          json(0.5)};
  json base = hand_manifest();
  std::vector<json::json_pointer> leaves;
  const json flat = base.flatten();
  for (const auto& [path, _] : flat.items()) leaves.emplace_back(path);
  int loaded = 0;
  for (const json::json_pointer& leaf : leaves) {
    for (const json& value : hostile) {
      json j = base;
      j[leaf] = value;
      write_file(dir_ / "manifest.json", j.dump());
      Loaded l(dir_);
      ASSERT_TRUE(l.status == TCC_OK || l.status == TCC_ERROR_BAD_MODULE) << leaf.to_string() << " " << l.error;
      if (l.status != TCC_OK) continue;
      ++loaded;
      std::vector<float> x(16), y(16);
      int64_t shape[2] = {4, 4};
      tcc_tensor in = {x.data(), TCC_F32, 2, shape}, out = {y.data(), TCC_F32, 2, shape};
      tcc_status s = tcc_module_run_host(l.m, &in, 1, &out, 1);
      // An arena size the process cannot allocate is the one internal error a manifest can cause.
      if (s == TCC_ERROR_INTERNAL) {
        EXPECT_STREQ(tcc_last_error(), "out of memory") << leaf.to_string();
      }
    }
    json::json_pointer parent = leaf.parent_pointer();
    if (base[parent].is_object()) {
      json j = base;
      j[parent].erase(leaf.back());
      write_file(dir_ / "manifest.json", j.dump());
      Loaded l(dir_);
      EXPECT_TRUE(l.status == TCC_OK || l.status == TCC_ERROR_BAD_MODULE) << leaf.to_string() << " " << l.error;
    }
  }
  // Informational fields (tcc_version, model, bytes_moved, ...) do not stop a load.
  EXPECT_GT(loaded, 0);
}

TEST_F(HandModule, CudaRunWithoutADeviceSaysSo) {
  if (tcc_cuda_available()) GTEST_SKIP() << "a CUDA device is present";
  Loaded l(dir_);
  ASSERT_EQ(l.status, TCC_OK) << l.error;
  std::vector<float> x(16), y(16);
  int64_t shape[2] = {4, 4};
  tcc_tensor in = {x.data(), TCC_F32, 2, shape}, out = {y.data(), TCC_F32, 2, shape};
  EXPECT_EQ(tcc_module_run_cuda(l.m, &in, 1, &out, 1, nullptr), TCC_ERROR_NO_DEVICE);
  std::string error = tcc_last_error();
  EXPECT_TRUE(error == "no CUDA driver (libcuda.so.1 cannot be loaded)" || error == "no CUDA device") << error;
}

// The example program: loads a module, runs it on zero inputs, prints output 0.
CliResult run_example(const std::string& args) {
  std::string cmd = std::string("timeout 20 ") + TCC_RUN_MODULE_EXAMPLE + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int status = pclose(p);
  return {WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status), out};
}

TEST_F(HandModule, ExampleProgramRunsIt) {
  // Zero inputs: y = -relu(w) per column.
  CliResult r = run_example(shell_quote(dir_.string()) + " 3");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output, "y: -0.5 -0 -2 -0 -0.5 -0 -2 -0\n");
  r = run_example(shell_quote(dir_.string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.output, "run_module: input 'x': negative dim -1\n");
  r = run_example(shell_quote((dir_ / "nowhere").string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("not a directory"), std::string::npos) << r.output;
}

// End to end: `tcc compile` on the bundled fixtures, the module loaded and run
// through the C API, every output compared with the reference interpreter
// running the original model on the same random inputs.
struct CompiledFixture {
  const char* name;
  const char* file;                      // the model, relative to the source tree
  std::map<std::string, int64_t> sizes;  // values for the model's symbolic dims
};

// NonZero's count (tests/fixtures/nonzero.tir) decides the size of what
// follows it: the module binds it once the fallback has run, a kernel computes
// from it, and the output whose size it decides comes from the caller's
// output allocator; the output shape query reports that dim as -1. Outputs
// match the interpreter at two sizes.
TEST(DataDependentSizes, OutputsComeFromTheCallersAllocator) {
  fs::path dir = make_temp_dir("tcc_nonzero");
  std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/nonzero.tir";
  compile_model(model_path, dir / "module", quick_compile_options());
  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load((dir / "module").c_str(), &m), TCC_OK) << tcc_last_error();
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  for (int64_t n : {3, 17}) {
    std::map<std::string, Tensor> inputs = random_inputs(*model->graph, n, static_cast<uint32_t>(n));
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<tcc_tensor> ins = module_inputs(m, inputs);
    int64_t dims[2];
    int32_t rank = 0;
    ASSERT_EQ(tcc_module_output_shape(m, ins.data(), ins.size(), 0, dims, 2, &rank), TCC_OK) << tcc_last_error();
    EXPECT_EQ(std::vector<int64_t>(dims, dims + rank), (std::vector<int64_t>{2, -1}));

    OutputAllocation a;
    a.tensors = {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {n, 4})};
    std::vector<tcc_tensor> outs = c_tensors(a.tensors);
    outs[0].data = nullptr;  // from the allocator
    EXPECT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), outs.data(), outs.size()), TCC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tcc_last_error()).find("set an output allocator"), std::string::npos) << tcc_last_error();
    ASSERT_EQ(tcc_module_set_output_allocator(m, &OutputAllocation::allocate, &a), TCC_OK);
    ASSERT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), outs.data(), outs.size()), TCC_OK) << tcc_last_error();
    EXPECT_EQ(a.calls, 1);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(a.tensors[i].shape(), expected[i].shape()) << "output " << i << " n=" << n;
      for (int64_t e = 0; e < expected[i].numel(); ++e)
        EXPECT_NEAR(a.tensors[i].get_f64(e), expected[i].get_f64(e), 1e-6 * (1 + std::fabs(expected[i].get_f64(e))));
    }
    ASSERT_EQ(tcc_module_set_output_allocator(m, nullptr, nullptr), TCC_OK);
  }
  tcc_module_free(m);
  fs::remove_all(dir);
}

// Range with bounds from data, windows of a size read at run time, Compress,
// MelWeightMatrix, NonMaxSuppression and Unique (tests/fixtures/data_dependent.tir)
// run on kernels around one host step each, a ConstantOfShape that reads the
// size back and binds it; every output the data sizes comes from the caller's
// allocator, and each equals the interpreter's bit for bit.
TEST(DataDependentSizes, SizesFromDataRunOnKernelsAndMatchTheInterpreterExactly) {
  fs::path dir = make_temp_dir("tcc_data_dependent");
  std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/data_dependent.tir";
  CompileResult r = compile_model(model_path, dir / "module", quick_compile_options());
  EXPECT_EQ(r.fallbacks.size(), 9u);
  for (const FallbackReason& f : r.fallbacks) EXPECT_EQ(f.op_type, "ConstantOfShape") << f.node;
  tcc_module* m = nullptr;
  ASSERT_EQ(tcc_module_load((dir / "module").c_str(), &m), TCC_OK) << tcc_last_error();
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  for (int64_t n : {3, 17}) {
    std::map<std::string, Tensor> inputs = random_inputs(*model->graph, n, static_cast<uint32_t>(n));
    // Bounds whose float span is no whole number of steps; an integer range downwards.
    inputs["start"] = Tensor::scalar_f32(0.1f);
    inputs["limit"] = Tensor::scalar_f32(2.35f + static_cast<float>(n));
    inputs["delta"] = Tensor::scalar_f32(0.3f);
    for (auto [name, v] : {std::pair{"istart", 7}, {"ilimit", -6 - static_cast<int>(n)}, {"idelta", -4}}) {
      inputs[name] = Tensor(DType::I32, {});
      inputs[name].set_i64(0, v);
    }
    inputs["size"] = Tensor::scalar_i64(n + 2);
    for (int64_t i = 0; i < n; ++i) inputs["keep"].set_i64(i, i % 3 != 1);
    // Mel bands from 100 Hz to 3.9 kHz over a spectrogram of 33 bins at 8 kHz.
    inputs["mels"] = Tensor::scalar_i64(n + 5);
    inputs["dft"] = Tensor::scalar_i64(64);
    inputs["rate"] = Tensor::scalar_i64(8000);
    inputs["lower"] = Tensor::scalar_f32(100.0f);
    inputs["upper"] = Tensor::scalar_f32(3900.0f);
    // Random boxes (any diagonal) and scores: at most n / 4 + 1 boxes a class
    // above a score of -0.5 and an IoU of 0.2.
    inputs["max_boxes"] = Tensor::from_i64({n / 4 + 1}, {1});
    inputs["iou"] = Tensor::from_f32({0.2f}, {1});
    inputs["score_min"] = Tensor::from_f32({-0.5f}, {1});
    // Few distinct values, a NaN (equal to itself for Unique) and rows that repeat.
    for (int64_t i = 0; i < 14; ++i)
      inputs["repeated"].set_f64(i, i == 3 ? std::nan("") : static_cast<double>((i * n) % 5 % (i % 2 + 2)));
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<tcc_tensor> ins = module_inputs(m, inputs);
    OutputAllocation a;  // of the expected dtypes, sized when allocated
    std::vector<tcc_tensor> outs;
    a.tensors.reserve(expected.size());  // outs point at their shapes
    for (size_t i = 0; i < expected.size(); ++i) {
      int64_t dims[2];
      int32_t rank = 0;
      ASSERT_EQ(tcc_module_output_shape(m, ins.data(), ins.size(), i, dims, 2, &rank), TCC_OK) << tcc_last_error();
      std::vector<int64_t> shape(dims, dims + rank);
      bool decided = std::find(shape.begin(), shape.end(), -1) != shape.end();  // -1: the data decides it
      for (int64_t& d : shape) d = std::max<int64_t>(d, 0);
      a.tensors.emplace_back(expected[i].dtype(), shape);
      outs.push_back(c_tensor(a.tensors.back()));
      if (decided) outs.back().data = nullptr;  // from the allocator
    }
    ASSERT_EQ(tcc_module_set_output_allocator(m, &OutputAllocation::allocate, &a), TCC_OK);
    ASSERT_EQ(tcc_module_run_host(m, ins.data(), ins.size(), outs.data(), outs.size()), TCC_OK) << tcc_last_error();
    for (size_t i = 0; i < expected.size(); ++i) {
      const std::string what = model->graph->outputs()[i]->name() + " n=" + std::to_string(n);
      ASSERT_EQ(a.tensors[i].shape(), expected[i].shape()) << what;
      const std::byte *got = a.tensors[i].raw(), *want = expected[i].raw();
      EXPECT_TRUE(std::equal(want, want + expected[i].nbytes(), got)) << what;
    }
  }
  tcc_module_free(m);
  fs::remove_all(dir);
}

// The random ops (tests/fixtures/random_ops.tir) compile onto kernels with no
// host step, and the module's draws are the interpreter's bit for bit, the
// same on a second call; a Dropout switched off at run time is the identity.
// Probabilities and a computed ratio outside ONNX's ranges (NaN included)
// give the same defined results on both paths.
TEST(RandomOps, CompiledModuleDrawsTheInterpretersBitsOnKernels) {
  fs::path dir = make_temp_dir("tcc_random_ops");
  std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/random_ops.tir";
  compile_with_no_host_step(model_path, dir / "module");
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  std::map<std::string, Tensor> inputs = random_inputs(*model->graph, 9, 5);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor& p_raw = inputs["p_raw"];
  for (int64_t i = 0; i < p_raw.numel(); ++i) p_raw.set_f64(i, std::array<double, 4>{-0.5, 1.5, nan, 0.5}[i % 4]);
  const std::array<double, 4> ratios = {0.3, -0.5, 1.0, nan};
  for (int call = 0; call < 4; ++call) {
    inputs["train"] = Tensor(DType::Bool, {});
    inputs["train"].set_i64(0, call != 2);
    inputs["ratio_in"] = Tensor::from_f32({static_cast<float>(ratios[call])}, {});
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<Tensor> outs = run_module_on_host(dir / "module", inputs);
    ASSERT_EQ(outs.size(), expected.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string what = model->graph->outputs()[i]->name() + " call " + std::to_string(call);
      ASSERT_EQ(outs[i].dtype(), expected[i].dtype()) << what;
      ASSERT_EQ(outs[i].shape(), expected[i].shape()) << what;
      EXPECT_TRUE(outs[i].identical(expected[i])) << what;
    }
  }
  fs::remove_all(dir);
}

// If, Loop and Scan whose shapes allow it (tests/fixtures/control_flow.tir)
// decompose onto kernels, no host step, and compute what the interpreter does
// on either side of the If's computed condition.
TEST(ControlFlow, DecomposedRegionsMatchTheInterpreterWithNoHostStep) {
  fs::path dir = make_temp_dir("tcc_control_flow");
  std::string model_path = std::string(TCC_SOURCE_DIR) + "/tests/fixtures/control_flow.tir";
  compile_with_no_host_step(model_path, dir / "module");
  std::unique_ptr<Model> model = load_model(model_path);
  infer_shapes(*model->graph);
  for (double sign : {1.0, -1.0}) {
    std::map<std::string, Tensor> inputs = random_inputs(*model->graph, 3, 7);
    Tensor& x = inputs["x"];
    for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, sign * (0.25 + std::fabs(x.get_f64(i))));
    std::vector<Tensor> expected = Interpreter().run(*model->graph, inputs);
    std::vector<Tensor> outs = run_module_on_host(dir / "module", inputs);
    ASSERT_EQ(outs.size(), expected.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string what = model->graph->outputs()[i]->name() + " sign " + std::to_string(sign);
      ASSERT_EQ(outs[i].shape(), expected[i].shape()) << what;
      for (int64_t k = 0; k < outs[i].numel(); ++k)
        EXPECT_NEAR(outs[i].get_f64(k), expected[i].get_f64(k), 1e-6 + 1e-6 * std::fabs(expected[i].get_f64(k)))
            << what << " element " << k;
    }
  }
  fs::remove_all(dir);
}

class CompiledModule : public TempDirFixture<::testing::TestWithParam<CompiledFixture>> {
 protected:
  void SetUp() override {
    TempDirFixture::SetUp();
    model_path_ = std::string(TCC_SOURCE_DIR) + "/" + GetParam().file;
    compile_model(model_path_, dir_ / "module");
    ASSERT_EQ(tcc_module_load((dir_ / "module").c_str(), &module_), TCC_OK) << tcc_last_error();
    model_ = load_model(model_path_);
    infer_shapes(*model_->graph);
  }
  void TearDown() override {
    tcc_module_free(module_);
    TempDirFixture::TearDown();
  }

  // Random inputs of the model's input types with `scale` times the fixture's sizes.
  std::map<std::string, Tensor> random_inputs(int64_t scale, unsigned seed) {
    std::map<std::string, Tensor> inputs;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(-1, 1);
    for (const Value* in : model_->graph->inputs()) {
      std::vector<int64_t> shape;
      for (const Dim& d : in->type().shape()) {
        std::map<std::string, int64_t> env;
        for (const auto& [name, v] : GetParam().sizes) env[name] = v * scale;
        shape.push_back(*d.expr().evaluate(env));
      }
      Tensor t(in->type().dtype(), shape);
      for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, dist(rng));
      inputs.emplace(in->name(), t);
    }
    return inputs;
  }

  static void expect_close(const Tensor& expected, const Tensor& actual, const std::string& what) {
    ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
    ASSERT_EQ(actual.shape(), expected.shape()) << what;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      double e = expected.get_f64(i), a = actual.get_f64(i);
      ASSERT_LE(std::fabs(a - e), 1e-4 + 1e-4 * std::fabs(e)) << what << " element " << i << ": " << a << " vs " << e;
    }
  }

  std::string model_path_;
  tcc_module* module_ = nullptr;
  std::unique_ptr<Model> model_;
};

TEST_P(CompiledModule, HostRunMatchesTheReferenceInterpreter) {
  for (int64_t scale : {1, 2}) {
    std::map<std::string, Tensor> inputs = random_inputs(scale, static_cast<unsigned>(scale));
    uint64_t call = 0;  // random ops draw at the call's offset
    ASSERT_EQ(tcc_module_random_offset(module_, &call), TCC_OK);
    Interpreter reference;
    reference.set_random_offset(call);
    std::vector<Tensor> expected = reference.run(*model_->graph, inputs);
    std::vector<tcc_tensor> ins = module_inputs(module_, inputs);
    std::vector<Tensor> outs = module_output_tensors(module_, ins);
    std::vector<tcc_tensor> c_outs = c_tensors(outs);
    ASSERT_EQ(tcc_module_run_host(module_, ins.data(), ins.size(), c_outs.data(), c_outs.size()), TCC_OK)
        << tcc_last_error();
    ASSERT_EQ(outs.size(), expected.size());
    for (size_t i = 0; i < outs.size(); ++i)
      expect_close(expected[i], outs[i], std::string(tcc_module_output_name(module_, i)) + " at scale " +
                                             std::to_string(scale));
  }
}

TEST_P(CompiledModule, ExampleProgramRunsIt) {
  std::string dims;
  for (const Value* in : model_->graph->inputs())
    for (const Dim& d : in->type().shape())
      if (!d.is_static()) dims += " " + std::to_string(GetParam().sizes.at(d.expr().symbol_name()));
  CliResult r = run_example(shell_quote((dir_ / "module").string()) + dims);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.rfind(std::string(tcc_module_output_name(module_, 0)) + ": ", 0), 0u) << r.output;
}

TEST_P(CompiledModule, CudaRunMatchesHostRun) {
  if (!tcc_cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::map<std::string, Tensor> inputs = random_inputs(1, 7);
  std::vector<tcc_tensor> ins = module_inputs(module_, inputs);
  std::vector<Tensor> host_outs = module_output_tensors(module_, ins), device_outs = module_output_tensors(module_, ins);
  std::vector<tcc_tensor> c_host = c_tensors(host_outs);
  ASSERT_EQ(tcc_module_run_host(module_, ins.data(), ins.size(), c_host.data(), c_host.size()), TCC_OK)
      << tcc_last_error();
  // Device copies of the inputs and outputs.
  std::vector<void*> device;
  auto to_device = [&](tcc_tensor t, size_t nbytes, bool copy) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(nbytes, 1)), cudaSuccess);
    if (copy) {
      EXPECT_EQ(cudaMemcpy(p, t.data, nbytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
    device.push_back(p);
    t.data = p;
    return t;
  };
  std::vector<tcc_tensor> d_ins, d_outs;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Tensor& t = inputs.at(tcc_module_input_name(module_, i));
    d_ins.push_back(to_device(ins[i], t.nbytes(), true));
  }
  std::vector<tcc_tensor> c_device = c_tensors(device_outs);
  for (size_t i = 0; i < c_device.size(); ++i) d_outs.push_back(to_device(c_device[i], device_outs[i].nbytes(), false));
  // Twice: split reductions must leave their workspace's counters at zero for
  // the next run. Each draws at the host run's random offset.
  for (int run = 0; run < 2; ++run) {
    ASSERT_EQ(tcc_module_set_random_offset(module_, 0), TCC_OK);
    ASSERT_EQ(tcc_module_run_cuda(module_, d_ins.data(), d_ins.size(), d_outs.data(), d_outs.size(), nullptr), TCC_OK)
        << tcc_last_error();
    for (size_t i = 0; i < d_outs.size(); ++i) {
      ASSERT_EQ(cudaMemcpy(device_outs[i].raw_mut(), d_outs[i].data, device_outs[i].nbytes(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      expect_close(host_outs[i], device_outs[i],
                   std::string(tcc_module_output_name(module_, i)) + " on the device, run " + std::to_string(run));
    }
  }
  for (void* p : device) cudaFree(p);
}

// The conv kernels of the compiled ResNet fixture describe their cuDNN call;
// the loader refuses a description that disagrees with the kernel's buffers.
TEST_P(CompiledModule, RefusesBadConvDescriptions) {
  if (std::string(GetParam().name) != "resnet_small") GTEST_SKIP() << "no conv kernels";
  std::ifstream in(dir_ / "module" / "manifest.json");
  const json original = json::parse(in);
  size_t conv = 0;
  while (conv < original["kernels"].size() && original["kernels"][conv]["kind"] != "conv") ++conv;
  ASSERT_LT(conv, original["kernels"].size());
  EXPECT_EQ(original["kernels"][conv]["library"], "cudnn");
  std::string at = "manifest.json: kernels[" + std::to_string(conv) + "].conv.";
  struct Case {
    std::function<void(json&)> edit;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](json& c) { c["x"] = 9; }, at + "x: expected an integer in [0, "},
      {[](json& c) { c["bias"] = "none"; }, at + "bias: expected an integer"},
      {[](json& c) { c["kernel"] = json::array({3, 3, 3, 3}); }, at + "kernel: expected 1 to 3 spatial dims, got 4"},
      {[](json& c) { c["strides"] = json::array({1}); }, at + "strides: expected 2 values, one per spatial dim"},
      {[](json& c) { c["strides"][0] = 0; }, at + "strides[0]: expected an integer in [1, "},
      {[](json& c) { c["pads"][1] = -1; }, at + "pads[1]: expected an integer in [0, "},
      {[](json& c) { c["kernel"][0] = 5; }, at + "w: buffer "},
      {[](json& c) { c["out"][0] = 31; }, at + "out: buffer "},
      {[](json& c) { c["n"] = "q"; }, at + "n: mentions symbol 'q', which neither an input nor a fallback's value binds"},
      {[](json& c) { c["groups"] = 5; }, at + "groups: does not divide c and k"},
      {[](json& c) { c["activation"] = "gelu"; }, at + "activation: unknown activation 'gelu'"},
      {[](json& c) { c.erase("dilations"); }, at + "dilations: missing"},
  };
  for (const Case& c : cases) {
    json m = original;
    c.edit(m["kernels"][conv]["conv"]);
    std::ofstream(dir_ / "module" / "manifest.json") << m.dump();
    tcc_module* loaded = nullptr;
    EXPECT_EQ(tcc_module_load((dir_ / "module").c_str(), &loaded), TCC_ERROR_BAD_MODULE) << c.message;
    EXPECT_EQ(loaded, nullptr);
    std::string error = tcc_last_error();
    EXPECT_NE(error.find(c.message), std::string::npos) << "message: " << error;
  }
  std::ofstream(dir_ / "module" / "manifest.json") << original.dump();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CompiledModule,
                         ::testing::Values(CompiledFixture{"mlp", "tests/fixtures/mlp.onnx", {{"batch", 3}}},
                                           CompiledFixture{"gpt2_block", "tests/fixtures/gpt2_block.onnx",
                                                           {{"batch", 2}, {"seq", 5}}},
                                           CompiledFixture{"resnet_small", "tests/fixtures/resnet_small.onnx",
                                                           {{"batch", 2}}},
                                           // Split reductions: their GPU numerics are checked against the host run.
                                           CompiledFixture{"long_rows", "tests/kernels/long_rows.tir", {{"n", 70000}}},
                                           // keepdims=0 results broadcast back over what they reduce.
                                           CompiledFixture{"keepdims_broadcast", "tests/kernels/keepdims_broadcast.tir",
                                                           {{"n", 37}}},
                                           // A causal mask computed once per binding (binding constants).
                                           CompiledFixture{"causal_mask", "tests/fixtures/causal_mask.tir",
                                                           {{"b", 2}, {"s", 5}}},
                                           // A host fallback whose region reads values of the main graph.
                                           CompiledFixture{"region_captures", "tests/fixtures/region_captures.tir",
                                                           {{"b", 3}}},
                                           // If, Loop and Scan decomposed onto kernels.
                                           CompiledFixture{"control_flow", "tests/fixtures/control_flow.tir", {{"b", 3}}},
                                           // The random ops' kernels: the GPU draws the host build's stream.
                                           CompiledFixture{"random_ops", "tests/fixtures/random_ops.tir", {{"b", 3}}}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tcc
