// Emitters on hand-built kernels (emit_kernels.h): the host C++ compiled by the
// system compiler and called on concrete data agrees with values computed
// here, and the CUDA C++ holds the launch and split choices the configs ask for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/toolchain.h"
#include "src/diag/errors.h"
#include "src/ir/tensor.h"
#include "src/module/shared_library.h"
#include "tests/unit/codegen/emit_kernels.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using kir::Op;
using namespace emit_kernels;


class EmitTest : public TempDirSuite {
 protected:
  static void SetUpTestSuite() {
    TempDirSuite::SetUpTestSuite();
    // The library is built as tcc compile builds it on many threads: shards of
    // the kernels compiled at once and linked (every test below calls into it).
    std::vector<kir::Kernel> ks = all_kernels();
    std::ofstream(suite_dir_ / "host.cc") << emit_host(ks);
    std::vector<std::string> shards;
    std::vector<size_t> every(ks.size());
    std::iota(every.begin(), every.end(), size_t{0});
    for (const std::vector<size_t>& group : shard_kernels(ks, every, 3)) {
      std::vector<kir::Kernel> shard;
      for (size_t i : group) shard.push_back(ks[i]);
      shards.push_back(emit_host(shard));
    }
    ASSERT_EQ(shards.size(), 3u);
    compile_host_library((suite_dir_ / "host.cc").string(), (suite_dir_ / "host.so").string(), shards, 2);
    ASSERT_FALSE(fs::exists(suite_dir_ / "host.so.shards"));
    lib_ = new SharedLibrary((suite_dir_ / "host.so").string());
  }
  static void TearDownTestSuite() {
    delete lib_;
    TempDirSuite::TearDownTestSuite();
  }

  static void call(const std::string& name, std::vector<void*> buffers, std::vector<int64_t> sizes) {
    auto fn = reinterpret_cast<HostKernelFn>(lib_->symbol(name));
    ASSERT_NE(fn, nullptr) << name;
    fn(buffers.data(), sizes.data());
  }

  static SharedLibrary* lib_;
};

SharedLibrary* EmitTest::lib_ = nullptr;

std::vector<float> ramp(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 1.7f + 0.3f) * scale + shift;
  return v;
}

TEST_F(EmitTest, PointwiseBroadcastAddRelu) {
  const int64_t b = 3;
  std::vector<float> x = ramp(b * 8, 2, 0), bias = ramp(8, 1, 0.1f), y(b * 8, -7);
  call("k_add_relu", {x.data(), bias.data(), y.data()}, {b});
  for (int64_t i = 0; i < b * 8; ++i) EXPECT_EQ(y[i], std::max(x[i] + bias[i % 8], 0.0f)) << i;
}

TEST_F(EmitTest, TransposedLoad) {
  std::vector<float> x = ramp(24, 1, 0), y(24);
  call("k_transpose", {x.data(), y.data()}, {});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(y[i * 4 + j], x[j * 6 + i]);
}

TEST_F(EmitTest, SoftmaxOverSymbolicRows) {
  const int64_t r = 4, n = 37;
  std::vector<float> x = ramp(r * n, 5, 1), y(r * n);
  call("k_softmax", {x.data(), y.data()}, {n, r});
  for (int64_t i = 0; i < r; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, static_cast<double>(x[i * n + j]));
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[i * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) EXPECT_NEAR(y[i * n + j], std::exp(x[i * n + j] - mx) / sum, 1e-6) << i << "," << j;
  }
}

TEST_F(EmitTest, RowValueStoredOncePerRow) {
  const int64_t n = 10;
  std::vector<float> x = ramp(3 * n, 1, 2), y(3);
  call("k_row_mean", {x.data(), y.data()}, {n});
  for (int64_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += x[i * n + j];
    EXPECT_NEAR(y[i], sum / n, 1e-6);
  }
}

// The host target runs a split kernel's rows in one loop each.
TEST_F(EmitTest, LongRowsOnTheHost) {
  std::vector<float> x = ramp(4 * 65536, 1, 0.25f), y(4);
  call("k_long_sum", {x.data(), y.data()}, {});
  for (int64_t i = 0; i < 4; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < 65536; ++j) sum += x[i * 65536 + j];
    EXPECT_NEAR(y[i], 0.5 * sum, 1e-5 * std::fabs(sum)) << i;
  }
  const int64_t n = 5000;
  std::vector<int64_t> v(2 * n), mx(2);
  for (int64_t i = 0; i < 2 * n; ++i) v[i] = (i * 7919) % 10007 - 5000;
  call("k_row_max", {v.data(), mx.data()}, {n});
  EXPECT_EQ(mx[0], *std::max_element(v.begin(), v.begin() + n));
  EXPECT_EQ(mx[1], *std::max_element(v.begin() + n, v.end()));
}

TEST_F(EmitTest, GemmWithBiasAndRelu) {
  std::vector<float> a = ramp(15, 1, 0), b = ramp(20, 1, 0.2f), bias = ramp(4, 0.5f, 0), d(12);
  call("k_gemm", {a.data(), b.data(), bias.data(), d.data()}, {});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int q = 0; q < 5; ++q) acc += static_cast<double>(a[i * 5 + q]) * b[q * 4 + j];
      EXPECT_NEAR(d[i * 4 + j], std::max(static_cast<float>(acc) + bias[j], 0.0f), 1e-6);
    }
}

TEST_F(EmitTest, BatchedGemmTransposedB) {
  std::vector<float> a = ramp(30, 1, 0), b = ramp(40, 1, -0.1f), d(24);
  call("k_bgemm", {a.data(), b.data(), d.data()}, {});
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) {
        double acc = 0;
        for (int q = 0; q < 5; ++q) acc += static_cast<double>(a[p * 15 + i * 5 + q]) * b[p * 20 + j * 5 + q];
        EXPECT_NEAR(d[p * 12 + i * 4 + j], acc, 1e-6);
      }
}

TEST_F(EmitTest, F16CastRoundsToNearestEven) {
  // 1 + 2^-11 is halfway between two halves; 65520 overflows to inf; the
  // rest covers subnormals, signs and NaN.
  std::vector<float> x = {(1 + 0x1p-11f) / 3, 65520.0f / 3, 1e-7f, -2.5f, NAN, 0x1p-24f / 3 * 2};
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> h(x.size());
  std::vector<float> y(x.size());
  call("k_f16_cast", {x.data(), h.data(), y.data()}, {n});
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t want = float_to_half(x[i] * 3);
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(half_to_float(h[i])));
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    EXPECT_EQ(h[i], want) << i;
    EXPECT_EQ(y[i], half_to_float(want) + 1) << i;
  }
}

// The generated 8-bit float conversions agree bit for bit with the
// interpreter's (src/ir/dtype.cc): every code decoded, and encoded from every
// value, the midpoints between neighbours (ties), just off them, and values
// beyond the range, infinities, NaN and tiny ones, which saturate or vanish.
TEST_F(EmitTest, Fp8CastsMatchTheInterpreter) {
  for (DType t : {DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ}) {
    std::vector<float> x = {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 1e-30f, -1e-30f, 0.0f, -0.0f};
    std::vector<uint8_t> b;
    for (int c = 0; c < 256; ++c) {
      b.push_back(static_cast<uint8_t>(c));
      float v = fp8_to_float(static_cast<uint8_t>(c), t), next = fp8_to_float(static_cast<uint8_t>(c + 1), t);
      x.push_back(v);
      if (c == 0x7f || c == 0xff || std::isnan(v) || std::isnan(next) || std::isinf(next)) continue;
      float mid = (v + next) / 2;
      x.insert(x.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), -mid, v * 1.5f});
    }
    b.resize(x.size(), 0);
    int64_t n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(x.size());
    std::vector<float> y(x.size()), z(x.size());
    call("k_" + std::string(dtype_name(t)) + "_cast", {x.data(), b.data(), q.data(), y.data(), z.data()}, {n});
    for (size_t i = 0; i < x.size(); ++i) {
      uint8_t want = float_to_fp8(x[i], t);
      EXPECT_EQ(q[i], want) << dtype_name(t) << " " << x[i];
      float back = fp8_to_float(want, t) + 1;
      EXPECT_TRUE(y[i] == back || (std::isnan(y[i]) && std::isnan(back))) << dtype_name(t) << " " << x[i];
      float decoded = fp8_to_float(b[i], t);
      EXPECT_TRUE(std::memcmp(&z[i], &decoded, 4) == 0 || (std::isnan(z[i]) && std::isnan(decoded)))
          << dtype_name(t) << " code " << int{b[i]};
    }
  }
}

// The generated 4-bit conversions agree with the interpreter's (Tensor::cast):
// f4e2m1 rounding at every midpoint and just off it, saturation, NaN and
// signed zeros; floats to i4 and u4 truncated and wrapped, infinities and NaN
// included; every valid element of t decoded.
TEST_F(EmitTest, FourBitCastsMatchTheInterpreter) {
  for (DType t : {DType::F4E2M1, DType::I4, DType::U4}) {
    std::vector<float> x = {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 3e9f, -3e9f, 0.0f, -0.0f, -1e-7f,
                            -9.0f,    15.9f,     7.5f, -8.5f, 100.7f, -100.2f, 16.0f, -16.5f};
    for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.5f})
      for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) x.insert(x.end(), {v, -v});
    const int64_t n = static_cast<int64_t>(x.size());
    Tensor xs(DType::F32, {n}), bs(t, {n});
    for (int64_t i = 0; i < n; ++i) {
      xs.set_f64(i, x[static_cast<size_t>(i)]);
      // every f4e2m1 code, u4 value and i4 value (wrapped)
      if (t == DType::F4E2M1) bs.data_mut<uint8_t>()[i] = static_cast<uint8_t>(i % 16);
      else bs.set_i64(i, i % 16);
    }
    const Tensor want = xs.cast(t), back = want.cast(DType::F32), decoded = bs.cast(DType::F32);
    std::vector<uint8_t> q(x.size());
    std::vector<float> y(x.size()), z(x.size());
    call("k_" + std::string(dtype_name(t)) + "_cast", {x.data(), bs.raw_mut(), q.data(), y.data(), z.data()}, {n});
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      EXPECT_EQ(q[k], want.data<uint8_t>()[i]) << dtype_name(t) << " " << x[k];
      EXPECT_EQ(y[k], static_cast<float>(back.get_f64(i)) + 1) << dtype_name(t) << " " << x[k];
      const float d = static_cast<float>(decoded.get_f64(i));
      EXPECT_EQ(std::memcmp(&z[k], &d, 4), 0) << dtype_name(t) << " element " << i;
    }
  }
  std::vector<int64_t> a = {-9, -8, 7, 8, 15, 16, -1, 100, INT64_MIN, INT64_MAX};
  std::vector<int8_t> i4(a.size());
  std::vector<uint8_t> u4(a.size());
  call("k_int4_wrap", {a.data(), i4.data(), u4.data()}, {static_cast<int64_t>(a.size())});
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(i4[k], wrap_int4(a[k], DType::I4)) << a[k];
    EXPECT_EQ(u4[k], wrap_int4(a[k], DType::U4)) << a[k];
  }
}

TEST_F(EmitTest, IntegerDivisionModuloAndSaturation) {
  std::vector<int64_t> a = {7, -7, 7, -7, INT64_MIN, 5}, b = {2, 2, -2, -2, -1, 0};
  std::vector<float> f = {1.9f, -1.9f, 3e9f, -3e9f, NAN, 2147483520.0f};
  std::vector<int64_t> div(6), mod(6), fmod(6), half(6);
  std::vector<int32_t> sat(6);
  call("k_int_ops", {a.data(), b.data(), f.data(), div.data(), mod.data(), fmod.data(), sat.data(), half.data()}, {4});
  EXPECT_EQ(div, (std::vector<int64_t>{3, -3, -3, 3, INT64_MIN, 0}));
  EXPECT_EQ(mod, (std::vector<int64_t>{1, 1, -1, -1, 0, 0}));
  EXPECT_EQ(fmod, (std::vector<int64_t>{1, -1, 1, -1, 0, 0}));
  EXPECT_EQ(sat, (std::vector<int32_t>{1, -1, INT32_MAX, INT32_MIN, 0, 2147483520}));
  EXPECT_EQ(half, std::vector<int64_t>(6, -2));  // (1 - 4) // 2
}

TEST(EmitC, SizeExpressionsFloorDivide) {
  EXPECT_EQ(emitc::size_expr(sym("batch") * sym("seq") * S(768)), "s_batch*s_seq*768");
  EXPECT_EQ(emitc::size_expr((sym("n") + S(1)).floordiv(S(2)) - S(3)), "tcc_fdiv((s_n + 1), (2)) - 3");
  EXPECT_EQ(emitc::size_expr(S(-5)), "-5");
}

TEST(EmitC, LaunchConfigsMatchTheKernels) {
  KernelLaunch add = launch_config(add_relu());  // vectorized: 4 elements per thread
  EXPECT_EQ(add.grid[0].str(), ((sym("b") * S(8) + S(1023)).floordiv(S(1024))).str());
  EXPECT_EQ(add.block[0], 256);
  KernelLaunch tr = launch_config(transpose());
  EXPECT_EQ(tr.grid[0], S(1));
  KernelLaunch sm = launch_config(softmax());
  EXPECT_EQ(sm.grid[0], sym("r"));
  EXPECT_EQ(sm.block[0], 128);  // a row of symbolic length
  KernelLaunch mean = launch_config(row_mean());
  EXPECT_EQ(mean.grid[0], S(3));
  EXPECT_EQ(mean.block[0] % 32, 0);
  EXPECT_EQ(mean.shared_bytes, 0);
}

// Four rows of 65536: 16 slices of 4096 elements per row (kSplitMinSlice caps
// the 66 that would fill the GPU), each block reducing its slice with 1024
// threads; the last block of a row combines the 16 partials and stores.
TEST(EmitC, LongRowsSplitAcrossBlocks) {
  std::string cu = emit_cuda({long_row_sum()});
  EXPECT_EQ(kernel_text(cu, "k_long_sum"), R"(extern "C" __global__ void k_long_sum(const float* __restrict__ p0, float* __restrict__ p1, void* __restrict__ ws) {
  const int64_t rows = 4, len = 65536;
  const int64_t split = gridDim.y;
  const int64_t r = blockIdx.x;
  uint32_t t0 = (uint32_t)(r);
  const int64_t c0 = t0;
  const float v2 = 0.5f;
  float acc0 = 0.0f;
  {
    int ju = blockIdx.y * blockDim.x + threadIdx.x;
    for (; ju + 3 * (int64_t)(split * blockDim.x) < len; ju += 4 * split * blockDim.x) {
      {
        const int j = ju;
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*65536 + c1];
        acc0 = acc0 + v0;
      }
      {
        const int j = ju + 1 * split * blockDim.x;
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*65536 + c1];
        acc0 = acc0 + v0;
      }
      {
        const int j = ju + 2 * split * blockDim.x;
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*65536 + c1];
        acc0 = acc0 + v0;
      }
      {
        const int j = ju + 3 * split * blockDim.x;
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*65536 + c1];
        acc0 = acc0 + v0;
      }
    }
    for (int j = ju; j < len; j += split * blockDim.x) {
      uint32_t t1 = (uint32_t)(j);
      const int64_t c1 = t1;
      const float v0 = p0[c0*65536 + c1];
      acc0 = acc0 + v0;
    }
  }
  acc0 = tcc_block_reduce<float>(acc0, tcc_sum(), 0.0f);
  if (split > 1) {
    if (!tcc_split_arrive<float>(ws, rows, r, split, acc0)) return;
    acc0 = tcc_split_combine<float>(ws, r, split, tcc_sum(), 0.0f);
  }
  const float v1 = (float)acc0;
  const float v3 = v1 * v2;
  if (threadIdx.x == 0) {
    p1[c0] = v3;
  }
}
)");
  EXPECT_NE(cu.find("__device__ bool tcc_split_arrive("), std::string::npos);
  EXPECT_EQ(emit_cuda({short_row_sum()}).find("tcc_split_arrive"), std::string::npos);
  EXPECT_EQ(reduction_split(long_row_sum()), 16);
  KernelLaunch c = launch_config(long_row_sum());
  EXPECT_EQ(c.grid[0], S(4));
  EXPECT_EQ(c.grid[1], S(16));
  EXPECT_EQ(c.grid[2], S(1));
  EXPECT_EQ(c.block[0], 512);  // the most a row's slice takes
  EXPECT_EQ(c.workspace_bytes, S(4 * 16 * 8 + 4 * 4));  // partials, then one counter per row
}

// A symbolic row length splits into as many blocks as fill the GPU (132 per
// row for two rows); the kernel uses only the slices the length needs.
TEST(EmitC, SymbolicLongRowsSplitAtRunTime) {
  EXPECT_EQ(reduction_split(symbolic_row_max()), 132);
  std::string text = kernel_text(emit_cuda({symbolic_row_max()}), "k_row_max");
  EXPECT_NE(text.find("int64_t s_n, void* __restrict__ ws)"), std::string::npos) << text;
  EXPECT_NE(text.find("const int64_t slices = (len + 4095) / 4096;"), std::string::npos) << text;
  EXPECT_NE(text.find("if (blockIdx.y >= split) return;"), std::string::npos) << text;
  EXPECT_NE(text.find("tcc_split_combine<int64_t>(ws, r, split, tcc_maxop(), "), std::string::npos) << text;
  KernelLaunch c = launch_config(symbolic_row_max());
  EXPECT_EQ(c.grid[1], S(132));
  EXPECT_EQ(c.block[0], 512);  // eight elements a thread of a 4096-element slice
  EXPECT_EQ(c.workspace_bytes, S(2 * 132 * 8 + 2 * 4));
}

// Which reductions split: few long rows of a single-pass body only.
TEST(EmitC, SplitNeedsFewLongRowsAndOnePass) {
  auto sum_rows = [](int64_t rows, int64_t len) {
    KernelBuilder kb("k", kir::Kind::Reduction, {S(rows), S(len)}, 1);
    int x = kb.buffer("x", DType::F32, {S(rows), S(len)});
    int y = kb.buffer("y", DType::F32, {S(rows)}, true);
    kb.store(y, {S(1), S(0)}, kb.op(Op::ReduceSum, DType::F32, {kb.load(x, DType::F32, {S(len), S(1)})}, true), true);
    return kb.done();
  };
  EXPECT_EQ(reduction_split(sum_rows(1, 1 << 24)), 264);  // a global sum: two blocks per SM of an H100
  EXPECT_EQ(reduction_split(sum_rows(4, 16384)), 4);      // 4096 elements per slice at least
  EXPECT_EQ(reduction_split(sum_rows(4, 16383)), 1);      // short rows
  EXPECT_EQ(reduction_split(sum_rows(132, 1 << 20)), 1);  // enough rows to fill the GPU
  EXPECT_EQ(reduction_split(short_row_sum()), 1);
  EXPECT_EQ(reduction_split(row_mean()), 88);             // symbolic length, three rows
  EXPECT_EQ(reduction_split(softmax()), 1);               // symbolic rows
  // Softmax over two long rows: its later passes read the row's max and sum.
  KernelBuilder kb("k_long_softmax", kir::Kind::Reduction, {S(2), S(1 << 20)}, 1);
  int x = kb.buffer("x", DType::F32, {S(2), S(1 << 20)});
  int y = kb.buffer("y", DType::F32, {S(2), S(1 << 20)}, true);
  int v = kb.load(x, DType::F32, {S(1 << 20), S(1)});
  int e = kb.op(Op::Exp, DType::F32, {kb.op(Op::Sub, DType::F32, {v, kb.op(Op::ReduceMax, DType::F32, {v}, true)})});
  kb.store(y, {S(1 << 20), S(1)}, kb.op(Op::Div, DType::F32, {e, kb.op(Op::ReduceSum, DType::F32, {e}, true)}));
  EXPECT_EQ(reduction_split(kb.done()), 1);
  EXPECT_EQ(launch_config(gemm_bias_relu()).workspace_bytes, S(0));
}

// The split is a config knob: autotuning may split rows the heuristic keeps
// whole, or keep whole rows it would split; the launch and the workspace follow.
TEST(EmitC, SplitFollowsTheConfig) {
  KernelConfig c = default_config(short_row_sum());
  EXPECT_EQ(c.split, 1);
  EXPECT_TRUE(splits_rows(short_row_sum()));
  c.split = 8;
  std::string text = kernel_text(emit_cuda({short_row_sum()}, {c}), "k_short_sum");
  EXPECT_NE(text.find("void* __restrict__ ws)"), std::string::npos) << text;
  EXPECT_NE(emit_cuda({short_row_sum()}, {c}).find("__device__ bool tcc_split_arrive("), std::string::npos);
  KernelLaunch l = launch_config(short_row_sum(), c);
  EXPECT_EQ(l.grid[0], S(3));
  EXPECT_EQ(l.grid[1], S(8));
  EXPECT_EQ(l.workspace_bytes, S(3 * 8 * 8 + 3 * 4));
  KernelConfig whole = default_config(long_row_sum());
  EXPECT_EQ(whole.split, 16);
  whole.split = 1;
  EXPECT_EQ(emit_cuda({long_row_sum()}, {whole}).find("tcc_split_arrive"), std::string::npos);
  EXPECT_EQ(launch_config(long_row_sum(), whole).workspace_bytes, SymExpr());
  EXPECT_FALSE(splits_rows(softmax()));  // its last pass stores elements after the row's sum
}

// Softmax over static rows of 500: the default gives 64 threads eight
// elements each and keeps them in registers (KernelConfig::row_cache), so the
// row is loaded once; the sum pass reads the max pass's elements, the store
// pass the sum pass's exponentials.
kir::Kernel static_softmax() {
  KernelBuilder kb("k_static_softmax", kir::Kind::Reduction, {S(2), S(500)}, 1);
  int x = kb.buffer("x", DType::F32, {S(2), S(500)});
  int y = kb.buffer("y", DType::F32, {S(2), S(500)}, true);
  int v = kb.load(x, DType::F32, {S(500), S(1)});
  int mx = kb.op(Op::ReduceMax, DType::F32, {v}, true);
  int e = kb.op(Op::Exp, DType::F32, {kb.op(Op::Sub, DType::F32, {v, mx})});
  int sum = kb.op(Op::ReduceSum, DType::F32, {e}, true);
  kb.store(y, {S(500), S(1)}, kb.op(Op::Div, DType::F32, {e, sum}));
  return kb.done();
}

TEST(EmitC, RowCacheLoadsTheRowOnce) {
  KernelConfig c = default_config(static_softmax());
  EXPECT_EQ(c.block, 64);
  EXPECT_EQ(c.row_cache, 8);
  EXPECT_EQ(kernel_text(emit_cuda({static_softmax()}), "k_static_softmax"), R"(extern "C" __global__ __launch_bounds__(64) void k_static_softmax(const float* __restrict__ p0, float* __restrict__ p1) {
  const int64_t rows = 2, len = 500;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    uint32_t t0 = (uint32_t)(r);
    const int64_t c0 = t0;
    float m0[8];
    float m3[8];
    float acc0 = -tcc_bits_float(0x7f800000u);
    #pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int j = threadIdx.x + u * blockDim.x;
      if (j < len) {
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*500 + c1];
        m0[u] = v0;
        acc0 = tcc_max(acc0, v0);
      }
    }
    const float v1 = (float)tcc_block_reduce<float>(acc0, tcc_maxop(), -tcc_bits_float(0x7f800000u));
    float acc1 = 0.0f;
    #pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int j = threadIdx.x + u * blockDim.x;
      if (j < len) {
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = m0[u];
        const float v2 = v0 - v1;
        const float v3 = expf(v2);
        m3[u] = v3;
        acc1 = acc1 + v3;
      }
    }
    const float v4 = (float)tcc_block_reduce<float>(acc1, tcc_sum(), 0.0f);
    #pragma unroll
    for (int u = 0; u < 8; ++u) {
      const int j = threadIdx.x + u * blockDim.x;
      if (j < len) {
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v3 = m3[u];
        const float v5 = v3 / v4;
        p1[c0*500 + c1] = v5;
      }
    }
  }
}
)");
}

// A row of symbolic length keeps the looped path beside the cached one, and
// takes it when the row outgrows the cache at run time. The cache's limits.
TEST(EmitC, RowCacheOfSymbolicRowsAndItsLimits) {
  KernelConfig c = default_config(softmax());
  EXPECT_EQ(c.block, 128);
  EXPECT_EQ(c.row_cache, 8);  // 1024 elements
  std::string text = kernel_text(emit_cuda({softmax()}), "k_softmax");
  EXPECT_NE(text.find("    if (len <= 8 * (int64_t)blockDim.x) {\n      float m0[8];\n      float m3[8];\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    else {\n"), std::string::npos) << text;
  EXPECT_NE(text.find("__launch_bounds__(128)"), std::string::npos) << text;
  size_t loads = 0;
  for (size_t at = text.find("p0["); at != std::string::npos; at = text.find("p0[", at + 1)) ++loads;
  EXPECT_EQ(loads, 1u + 3u * 5u) << text;  // once cached; per pass looped, four unrolled and the remainder
  c.row_cache = 0;
  EXPECT_EQ(kernel_text(emit_cuda({softmax()}, {c}), "k_softmax").find("m0["), std::string::npos);

  c = default_config(static_softmax());
  c.block = 32;  // 500 elements need 16 per thread
  EXPECT_EQ(fitting_row_cache(static_softmax(), c), 16);
  EXPECT_EQ(row_cache_refusal(static_softmax(), c), "a row of 500 elements does not fit 8 per thread of 32");
  c.row_cache = 3;
  EXPECT_EQ(row_cache_refusal(static_softmax(), c), "row cache 3 is not a power of two from 1 to 16");
  c.row_cache = 16;
  EXPECT_EQ(row_cache_refusal(static_softmax(), c), "");
  // Two cached values per element: 32 registers at 16.
  c.block = 16;
  c.row_cache = 32;
  EXPECT_NE(row_cache_refusal(static_softmax(), c), "");
  EXPECT_EQ(fitting_row_cache(static_softmax(), c), 0);
  // One pass: nothing to keep.
  EXPECT_EQ(default_config(short_row_sum()).row_cache, 0);
  c = default_config(short_row_sum());
  c.row_cache = 1;
  EXPECT_EQ(row_cache_refusal(short_row_sum(), c), "no pass reads a value an earlier pass computed");
  c = default_config(long_row_sum());
  c.row_cache = 1;
  EXPECT_EQ(row_cache_refusal(long_row_sum(), c), "a split or column reduction keeps no row in registers");
}

// Short rows keep one block per row and no workspace (this text predates split reductions).
TEST(EmitC, ShortRowsReduceInOneBlockPerRow) {
  EXPECT_EQ(kernel_text(emit_cuda({short_row_sum()}), "k_short_sum"), R"(extern "C" __global__ void k_short_sum(const float* __restrict__ p0, float* __restrict__ p1) {
  const int64_t rows = 3, len = 40;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    uint32_t t0 = (uint32_t)(r);
    const int64_t c0 = t0;
    const float v2 = 0.5f;
    float acc0 = 0.0f;
    {
      int ju = threadIdx.x;
      for (; ju + 3 * (int64_t)(blockDim.x) < len; ju += 4 * blockDim.x) {
        {
          const int j = ju;
          uint32_t t1 = (uint32_t)(j);
          const int64_t c1 = t1;
          const float v0 = p0[c0*40 + c1];
          acc0 = acc0 + v0;
        }
        {
          const int j = ju + 1 * blockDim.x;
          uint32_t t1 = (uint32_t)(j);
          const int64_t c1 = t1;
          const float v0 = p0[c0*40 + c1];
          acc0 = acc0 + v0;
        }
        {
          const int j = ju + 2 * blockDim.x;
          uint32_t t1 = (uint32_t)(j);
          const int64_t c1 = t1;
          const float v0 = p0[c0*40 + c1];
          acc0 = acc0 + v0;
        }
        {
          const int j = ju + 3 * blockDim.x;
          uint32_t t1 = (uint32_t)(j);
          const int64_t c1 = t1;
          const float v0 = p0[c0*40 + c1];
          acc0 = acc0 + v0;
        }
      }
      for (int j = ju; j < len; j += blockDim.x) {
        uint32_t t1 = (uint32_t)(j);
        const int64_t c1 = t1;
        const float v0 = p0[c0*40 + c1];
        acc0 = acc0 + v0;
      }
    }
    const float v1 = (float)tcc_block_reduce<float>(acc0, tcc_sum(), 0.0f);
    const float v3 = v1 * v2;
    if (threadIdx.x == 0) {
      p1[c0] = v3;
    }
  }
}
)");
  KernelLaunch c = launch_config(short_row_sum());
  EXPECT_EQ(c.grid[0], S(3));
  EXPECT_EQ(c.grid[1], S(1));
  EXPECT_EQ(c.workspace_bytes, S(0));
}

TEST(EmitC, OnlyContiguousF32KernelsVectorize) {
  std::string cu = emit_cuda({add_relu(), transpose()});
  size_t transpose_at = cu.find("void k_transpose(");
  ASSERT_NE(transpose_at, std::string::npos);
  EXPECT_NE(cu.substr(0, transpose_at).find("float4"), std::string::npos);
  EXPECT_EQ(cu.substr(transpose_at).find("float4"), std::string::npos);
  EXPECT_EQ(emit_cuda({gemm_bias_relu()}).find("k_gemm"), std::string::npos);
}

TEST(EmitC, EmittersAreDeterministic) {
  EXPECT_EQ(emit_cuda(all_kernels()), emit_cuda(all_kernels()));
  EXPECT_EQ(emit_host(all_kernels()), emit_host(all_kernels()));
}

}  // namespace
}  // namespace tcc
