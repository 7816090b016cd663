// Every generated kernel is launched with runtime::kernel_params (by the
// runtime and by autotuning's kernel timer), which must pass as many
// parameters as the emitted kernel's signature declares.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/emit.h"
#include "src/runtime/cuda_driver.h"
#include "tests/unit/codegen/emit_kernels.h"

namespace tcc {
namespace {

using namespace emit_kernels;

// The runtime and the autotuning timer launch every generated kernel with
// kernel_params: as many parameters as its signature declares, the workspace
// of a split reduction and the random offset of a kernel that draws included
// (cuLaunchKernel cannot check the count).
TEST(EmitC, LaunchParamsMatchTheSignature) {
  for (const kir::Kernel& k : all_kernels()) {
    KernelConfig config = default_config(k);
    if (k.kind == kir::Kind::Gemm) config.tile = 1;  // the template; the library call has no signature
    if (runs_library(k, config)) continue;
    std::string text = kernel_text(emit_cuda({k}, {config}), k.name);
    std::string signature = text.substr(0, text.find(") {"));
    size_t declared = static_cast<size_t>(std::count(signature.begin(), signature.end(), ',')) + 1;
    std::vector<CUdeviceptr> buffers(k.buffers.size(), 0x1000);
    std::vector<int64_t> sizes(k.size_params.size(), 1);
    CUdeviceptr workspace = launch_config(k, config).workspace_bytes == SymExpr() ? 0 : 0x2000;
    CUdeviceptr random_offset = kir::draws_random(k) ? 0x3000 : 0;
    std::vector<void*> params;
    runtime::kernel_params(buffers, sizes, workspace, random_offset, params);
    EXPECT_EQ(params.size(), declared) << signature;
  }
}

}  // namespace
}  // namespace tcc
