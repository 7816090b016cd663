// The conv epilogue kernel (src/module/kernel_abi.h), which the runtime
// launches after a convolution cuDNN runs without its epilogue: its CUDA text,
// compiled by NVRTC and run under tests/unit/codegen/cuda_emulator.h at the
// launch shapes the runtime picks (a block row per plane, a plane smaller than
// a block in the warps it fills, planes longer than the grid's rows strided),
// against its host twin and against the epilogue computed here.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codegen/emit_c.h"
#include "codegen/toolchain.h"
#include "src/ir/tensor.h"
#include "src/module/shared_library.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

// A Conv kernel of y's dtype with the given epilogue: all module_helpers reads of it.
kir::Kernel conv_kernel(DType y, bool bias, bool residual, bool relu) {
  kir::Kernel k;
  k.name = "conv";
  k.kind = kir::Kind::Conv;
  k.buffers = {{"x", y, {}, false}, {"w", y, {}, false}, {"y", y, {}, true}};
  ConvDesc d;
  d.x = 0;
  d.w = 1;
  d.bias = bias ? 1 : -1;
  d.residual = residual ? 0 : -1;
  d.activation = relu ? "relu" : "none";
  k.conv = d;
  return k;
}

using Emulated = void (*)(void* y, const void* bias, const void* residual, const int64_t* sizes, unsigned gx,
                          unsigned gy, unsigned bx);

// The helpers of `kernels` twice in one library: the CUDA text (which NVRTC
// must take as it is) under the emulator, behind `launch_<dtype>`, and the
// host text.
SharedLibrary helper_library(const std::vector<kir::Kernel>& kernels, const std::vector<DType>& dtypes,
                             const std::filesystem::path& dir) {
  std::string cuda = emitc::module_helpers(kernels, emitc::Target::Cuda);
  EXPECT_EQ(compile_cuda(emitc::prelude(emitc::Target::Cuda) + cuda, {"sm_90"}, false, 1).size(), 1u);
  std::string source = "#include \"" + std::string(TCC_SOURCE_DIR) + "/tests/unit/codegen/cuda_emulator.h\"\n" +
                       emitc::prelude(emitc::Target::Host) + "#undef TCC_FN\n#define TCC_FN inline\n";
  std::string renamed = cuda;
  for (DType t : dtypes) {
    const std::string name = conv_epilogue_kernel(t);
    const std::string emulated = "emulated_" + name;
    for (size_t at = renamed.find(name); at != std::string::npos; at = renamed.find(name, at + emulated.size()))
      renamed.replace(at, name.size(), emulated);
  }
  // Both texts declare their kernels extern "C": the emulated ones are renamed apart.
  source += renamed + emitc::module_helpers(kernels, emitc::Target::Host);
  for (DType t : dtypes) {
    const std::string name = conv_epilogue_kernel(t), store = emitc::storage_type(t);
    source += "extern \"C\" void launch_" + std::string(dtype_name(t)) +
              "(void* y, const void* bias, const void* residual, const int64_t* s, unsigned gx, unsigned gy, "
              "unsigned bx) {\n  tcc_emu::launch(gx, gy, 1, bx, 1, [&] { emulated_" + name + "((" + store +
              "*)y, (const " + store + "*)bias, (const " + store + "*)residual, s[0], s[1], s[2], s[3]); });\n}\n";
  }
  std::ofstream(dir / "helpers.cc") << source;
  compile_host_library((dir / "helpers.cc").string(), (dir / "helpers.so").string());
  return SharedLibrary((dir / "helpers.so").string());
}

Tensor random_tensor(DType t, std::vector<int64_t> shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  Tensor out(t, std::move(shape));
  for (int64_t i = 0; i < out.numel(); ++i) out.set_f64(i, dist(rng));
  return out;
}

using ConvEpilogue = TempDirFixture<>;

TEST_F(ConvEpilogue, EmulatedMatchesItsHostTwinAndTheEpilogueAtTheRuntimesShapes) {
  const std::vector<DType> dtypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
  std::vector<kir::Kernel> kernels;
  for (DType t : dtypes) kernels.push_back(conv_kernel(t, true, true, true));
  SharedLibrary lib = helper_library(kernels, dtypes, dir_);
  const int64_t n = 2, channels = 3;
  struct Shape {
    int64_t plane;
    unsigned block, blocks_along;
  };
  // 9 x 9 in three warps; 600 in three blocks of 256; 600 in two of 64, each thread striding.
  for (Shape s : {Shape{81, 96, 1}, Shape{600, 256, 3}, Shape{600, 64, 2}})
    for (DType t : dtypes)
      for (int flags = 0; flags < 8; ++flags) {
        const bool bias = flags & 1, residual = flags & 2, relu = flags & 4;
        SCOPED_TRACE(std::string(dtype_name(t)) + " plane " + std::to_string(s.plane) + " block " +
                     std::to_string(s.block) + (bias ? " bias" : "") + (residual ? " residual" : "") +
                     (relu ? " relu" : ""));
        Tensor y = random_tensor(t, {n, channels, s.plane}, 1), b = random_tensor(t, {channels}, 2),
               r = random_tensor(t, {n, channels, s.plane}, 3);
        Tensor emulated = y.clone(), host = y.clone();
        const void* bias_ptr = bias ? b.raw() : nullptr;
        const void* residual_ptr = residual ? r.raw() : nullptr;
        const int64_t sizes[] = {n * channels, s.plane, channels, relu};
        auto launch = reinterpret_cast<Emulated>(lib.symbol("launch_" + std::string(dtype_name(t))));
        auto host_fn = reinterpret_cast<void (*)(void* const*, const int64_t*)>(lib.symbol(conv_epilogue_kernel(t)));
        ASSERT_TRUE(launch && host_fn);
        launch(emulated.raw_mut(), bias_ptr, residual_ptr, sizes, static_cast<unsigned>(n * channels), s.blocks_along,
               s.block);
        void* const buffers[] = {host.raw_mut(), const_cast<void*>(bias_ptr), const_cast<void*>(residual_ptr)};
        host_fn(buffers, sizes);
        for (int64_t i = 0; i < y.numel(); ++i) {
          // In y's compute type: f64 for f64, f32 for the rest.
          double v = y.get_f64(i) + (bias ? b.get_f64(i / s.plane % channels) : 0.0);
          if (t != DType::F64) v = static_cast<float>(v);
          if (residual) v += r.get_f64(i);
          if (t != DType::F64) v = static_cast<float>(v);
          if (relu && v < 0) v = 0;
          Tensor want(t, {});
          want.set_f64(0, v);
          ASSERT_EQ(host.get_f64(i), want.get_f64(0)) << "element " << i;
          ASSERT_EQ(emulated.get_f64(i), host.get_f64(i)) << "element " << i;
        }
      }
}

TEST(ModuleHelpers, HoldOneConvEpiloguePerDtypeOfTheConvKernelsWithOne) {
  std::vector<kir::Kernel> kernels = {conv_kernel(DType::F32, true, false, false),
                                      conv_kernel(DType::F32, false, false, true),
                                      conv_kernel(DType::F16, false, false, false)};
  for (emitc::Target t : {emitc::Target::Cuda, emitc::Target::Host}) {
    std::string text = emitc::module_helpers(kernels, t);
    const std::string f32 = conv_epilogue_kernel(DType::F32) + "(";
    EXPECT_NE(text.find(f32), std::string::npos);
    EXPECT_EQ(text.find(f32), text.rfind(f32)) << "one f32 epilogue for both f32 kernels";
    EXPECT_EQ(text.find(conv_epilogue_kernel(DType::F16)), std::string::npos) << "the f16 conv has no epilogue";
    EXPECT_EQ(text.find(kRandomOffsetAdvance), std::string::npos) << "no kernel draws random values";
  }
  EXPECT_EQ(emitc::module_helpers({conv_kernel(DType::F32, false, false, false)}, emitc::Target::Cuda), "");
}

}  // namespace
}  // namespace tcc
