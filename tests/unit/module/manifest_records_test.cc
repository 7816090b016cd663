// The manifest's shared records: what *_json writes, read_* reads back
// unchanged, and a field out of its range is refused with its path.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/module/manifest_records.h"

namespace tcc {
namespace {

using nlohmann::json;

SymExpr sym(const char* s) { return SymExpr::symbol(s); }
SymExpr num(int64_t v) { return SymExpr::constant(v); }

// Every size read, with the field it came from.
struct Recorded {
  std::vector<std::string> sizes, where;
  SizeCheck check() {
    return [this](const SymExpr& e, const ManifestField& f) {
      sizes.push_back(e.str());
      where.push_back(f.path());
    };
  }
};

// The record as the manifest holds it: written, dumped and parsed back.
json written(const nlohmann::ordered_json& j) { return json::parse(j.dump()); }

std::string refusal(const std::function<void()>& read) {
  try {
    read();
  } catch (const BadModule& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ManifestRecords, TensorsRoundTripAndReportTheirSizes) {
  TensorSig t{"x", DType::F16, {sym("batch"), num(3) * sym("seq"), num(8)}};
  json j = written(tensor_json(t));
  Recorded r;
  TensorSig back = read_tensor(ManifestField(j, "inputs[0]"), r.check());
  EXPECT_EQ(back.name, "x");
  EXPECT_EQ(back.dtype, DType::F16);
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(r.sizes, (std::vector<std::string>{"batch", "seq*3", "8"}));
  EXPECT_EQ(r.where, std::vector<std::string>(3, "inputs[0].shape"));

  PlacedTensor p{t, sym("batch") * num(256), num(4096)};
  json pj = written(placed_json(p));
  PlacedTensor pb = read_placed(ManifestField(pj, "memory.buffers[1]"), Recorded().check());
  EXPECT_EQ(pb.sig.shape, t.shape);
  EXPECT_EQ(pb.offset, p.offset);
  EXPECT_EQ(pb.nbytes, p.nbytes);
}

TEST(ManifestRecords, WeightsAreStaticAlignedAndHoldTheirShape) {
  PlacedTensor w{{"w", DType::F32, {num(4), num(2)}}, num(512), num(32)};
  json j = written(placed_json(w));
  PlacedTensor back = read_weight(ManifestField(j, "weights.tensors[0]"), 256);
  EXPECT_EQ(back.sig.shape, w.sig.shape);
  EXPECT_EQ(back.offset, num(512));

  json short_bytes = j;
  short_bytes["nbytes"] = 28;
  EXPECT_EQ(refusal([&] { read_weight(ManifestField(short_bytes, "weights.tensors[0]"), 256); }),
            "manifest.json: weights.tensors[0].nbytes: 28 bytes do not hold f32[4, 2]");
  json misaligned = j;
  misaligned["offset"] = 100;
  EXPECT_EQ(refusal([&] { read_weight(ManifestField(misaligned, "weights.tensors[0]"), 256); }),
            "manifest.json: weights.tensors[0].offset: not 256-byte aligned");
  json symbolic = j;
  symbolic["shape"][0] = "n";
  EXPECT_EQ(refusal([&] { read_weight(ManifestField(symbolic, "weights.tensors[0]"), 256); }),
            "manifest.json: weights.tensors[0].shape[0]: a weight's dims must be static");
}

TEST(ManifestRecords, GemmCallsRoundTrip) {
  GemmDesc g;
  g.a = 0;
  g.b = 1;
  g.bias = 2;
  g.trans_b = true;
  g.batch = sym("b");
  g.m = sym("s") * num(4);
  g.n = num(64);
  g.k = num(32);
  g.lda = num(32);
  g.ldb = num(32);
  g.ldd = num(64);
  g.stride_a = g.m * num(32);
  g.stride_b = num(0);
  g.stride_d = g.m * num(64);
  g.alpha = 0.125;
  g.activation = "gelu_tanh";
  json j = written(gemm_json(g, 3));
  ManifestField f(j, "kernels[0].gemm");
  GemmDesc back = read_gemm(f, 4, Recorded().check());
  EXPECT_EQ(read_algo(f), 3);
  EXPECT_EQ(gemm_json(back, 3), gemm_json(g, 3));

  json bad = j;
  bad["bias"] = 4;
  EXPECT_EQ(refusal([&] { read_gemm(ManifestField(bad, "kernels[0].gemm"), 4, Recorded().check()); }),
            "manifest.json: kernels[0].gemm.bias: expected an integer in [-1, 3], got 4");
  json algo = j;
  algo["algo"] = kLibraryAlgos;
  EXPECT_NE(refusal([&] { read_algo(ManifestField(algo, "kernels[0].gemm")); }).find("kernels[0].gemm.algo"),
            std::string::npos);
}

TEST(ManifestRecords, ConvCallsRoundTripAndMatchTheKernelsParameters) {
  ConvDesc c;
  c.x = 0;
  c.w = 1;
  c.bias = 2;
  c.activation = "relu";
  c.n = sym("n");
  c.c = num(8);
  c.k = num(16);
  c.in = {num(10), num(10)};
  c.out = {num(8), num(8)};
  c.kernel = {3, 3};
  c.strides = {1, 1};
  c.dilations = {1, 1};
  c.pads = {0, 0};
  c.groups = 2;
  std::vector<KernelParam> params = {{DType::F32, {sym("n"), num(8), num(10), num(10)}, false},
                                     {DType::F32, {num(16), num(4), num(3), num(3)}, false},
                                     {DType::F32, {num(16)}, false},
                                     {DType::F32, {sym("n"), num(16), num(8), num(8)}, true}};
  json j = written(conv_json(c, 1));
  ConvDesc back = read_conv(ManifestField(j, "kernels[2].conv"), params, 3, Recorded().check());
  EXPECT_EQ(conv_json(back, 1), conv_json(c, 1));

  std::vector<KernelParam> wrong_weight = params;
  wrong_weight[1].shape[1] = num(8);
  EXPECT_EQ(refusal([&] { read_conv(ManifestField(j, "kernels[2].conv"), wrong_weight, 3, Recorded().check()); }),
            "manifest.json: kernels[2].conv.w: buffer 1 does not have the shape [16, 4, 3, 3]");
}

TEST(ManifestRecords, LaunchesRoundTripAndCheckWorkspaceAndCopy) {
  KernelLaunch l;
  l.grid = {sym("rows"), num(4), num(1)};
  l.block = {256, 1, 1};
  l.shared_bytes = 1024;
  l.workspace_bytes = sym("rows") * num(40);
  std::vector<KernelParam> params = {{DType::F32, {sym("rows"), num(64)}, false}, {DType::F32, {sym("rows")}, true}};
  json j = written(launch_json(l));
  KernelLaunch back = read_launch(ManifestField(j, "kernels[1].launch"), KernelKind::Reduction, params, 1,
                                  Recorded().check());
  EXPECT_EQ(launch_json(back), launch_json(l));
  EXPECT_EQ(refusal([&] {
              read_launch(ManifestField(j, "kernels[1].launch"), KernelKind::Pointwise, params, 1, Recorded().check());
            }),
            "manifest.json: kernels[1].launch.workspace_bytes: only split reductions, split-K gemm templates "
            "and NMS kernels take a workspace");

  KernelLaunch scatter;
  scatter.copy_from = 0;
  std::vector<KernelParam> same = {{DType::F32, {num(8)}, false}, {DType::I64, {num(2)}, false},
                                   {DType::F32, {num(8)}, true}};
  json sj = written(launch_json(scatter));
  EXPECT_EQ(read_launch(ManifestField(sj, "l"), KernelKind::Pointwise, same, 2, Recorded().check()).copy_from, 0);
  same[0].shape = {num(9)};
  EXPECT_NE(refusal([&] { read_launch(ManifestField(sj, "l"), KernelKind::Pointwise, same, 2, Recorded().check()); })
                .find("l.copy_from: expected an input of the dtype and shape of the kernel's one output"),
            std::string::npos);
}

}  // namespace
}  // namespace tcc
