// Shape rules and reference kernels of the signal ops (DFT, STFT, the windows,
// MelWeightMatrix) and of LpNormalization and GlobalLpPool.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>

#include "tests/unit/ops/ops_test_util.h"
#include "tests/unit/support/input_error.h"

namespace tcc {
namespace {

using testing::f32;
using testing::floats;
using testing::OpGraph;
using testing::tensor_of;
using testing::tensor_type;
using Complex = std::complex<double>;
constexpr double kPi = std::numbers::pi;

std::map<std::string, Attribute> ints(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::map<std::string, Attribute> m;
  for (const auto& [k, v] : kv) m[k] = Attribute::of_int(v);
  return m;
}

// A real signal [1, n, 1] of f64 values.
Tensor real_signal(const std::vector<double>& v) {
  return tensor_of(DType::F64, v, {1, static_cast<int64_t>(v.size()), 1});
}

// The complex values of a [..., 2] result, in order.
std::vector<Complex> complex_values(const Tensor& t) {
  std::vector<Complex> out;
  for (int64_t i = 0; i + 1 < t.numel(); i += 2) out.emplace_back(t.get_f64(i), t.get_f64(i + 1));
  return out;
}

// DFT over axis 1 of `x`, with the given attributes and optional dft_length.
Tensor dft(const Tensor& x, std::map<std::string, Attribute> attrs, std::optional<int64_t> length = std::nullopt) {
  OpGraph g(19);
  std::vector<Value*> ins = {g.input("x", Type::tensor(x.dtype(), Dims(x.shape().begin(), x.shape().end())))};
  if (length) ins.push_back(g.scalar(*length));
  Value* y = g.op("DFT", ins, attrs);
  g.infer();
  return g.run({y}, {{"x", x}})[0];
}

// The DFT by its definition, for comparison.
std::vector<Complex> direct_dft(const std::vector<Complex>& x, size_t n) {
  std::vector<Complex> y(n);
  for (size_t k = 0; k < n; ++k)
    for (size_t t = 0; t < std::min(n, x.size()); ++t)
      y[k] += x[t] * std::polar(1.0, -2 * kPi * static_cast<double>(k * t) / static_cast<double>(n));
  return y;
}

void expect_near(const std::vector<Complex>& got, const std::vector<Complex>& want, double tol = 1e-9) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i].real(), want[i].real(), tol) << "at " << i;
    EXPECT_NEAR(got[i].imag(), want[i].imag(), tol) << "at " << i;
  }
}

// Expects an InputError naming the node whose message contains `what`.
template <typename F>
void expect_input_error(F run, const std::string& node, const std::string& what) {
  const std::string msg = input_error(run);
  EXPECT_NE(msg.find(node), std::string::npos) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

// ---------------------------------------------------------------- DFT

TEST(OpsSignal, DftOfImpulseIsFlatAndOfDelayedImpulseAPhaseRamp) {
  for (size_t n : {8, 6}) {  // the radix-2 FFT and the direct sum
    std::vector<double> impulse(n, 0.0), delayed(n, 0.0);
    impulse[0] = 1;
    delayed[1] = 1;
    expect_near(complex_values(dft(real_signal(impulse), ints({{"axis", 1}}))), std::vector<Complex>(n, 1.0));
    std::vector<Complex> ramp;
    for (size_t k = 0; k < n; ++k)
      ramp.push_back(std::polar(1.0, -2 * kPi * static_cast<double>(k) / static_cast<double>(n)));
    expect_near(complex_values(dft(real_signal(delayed), ints({{"axis", 1}}))), ramp);
  }
}

TEST(OpsSignal, DftOfPureToneHasTwoBins) {
  for (size_t n : {16, 12}) {
    std::vector<double> tone;
    for (size_t t = 0; t < n; ++t)
      tone.push_back(std::cos(2 * kPi * 3 * static_cast<double>(t) / static_cast<double>(n)));
    std::vector<Complex> want(n, 0.0);
    want[3] = want[n - 3] = static_cast<double>(n) / 2;
    expect_near(complex_values(dft(real_signal(tone), ints({{"axis", 1}}))), want);
  }
}

TEST(OpsSignal, InverseDftUndoesDft) {
  for (int64_t n : {16, 12, 7}) {
    Tensor x(DType::F64, {2, n, 2});
    for (int64_t i = 0; i < x.numel(); ++i)
      x.set_f64(i, std::sin(0.7 * static_cast<double>(i * i)) + 0.1 * static_cast<double>(i % 5));
    Tensor y = dft(x, ints({{"axis", 1}}));
    Tensor back = dft(y, ints({{"axis", 1}, {"inverse", 1}}));
    ASSERT_EQ(back.shape(), x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) EXPECT_NEAR(back.get_f64(i), x.get_f64(i), 1e-12) << "at " << i;
  }
}

TEST(OpsSignal, OnesidedDftKeepsHalfPlusOneBins) {
  OpGraph g(19);
  Value* x = g.input("x", tensor_type(DType::F32, {"batch", "n", "1"}));
  Value* y = g.op("DFT", {x}, ints({{"axis", 1}, {"onesided", 1}}));
  g.infer();
  Dim half(SymExpr::symbol("n").floordiv(SymExpr::constant(2)) + SymExpr::constant(1));
  EXPECT_EQ(y->type().str(), "f32[batch, " + half.str() + ", 2]");

  std::vector<double> v = {3, -1, 4, 1, -5, 9, 2, 6, 5};
  std::vector<Complex> full = complex_values(dft(real_signal(v), ints({{"axis", 1}})));
  Tensor half_spectrum = dft(real_signal(v), ints({{"axis", 1}, {"onesided", 1}}));
  EXPECT_EQ(half_spectrum.shape(), (std::vector<int64_t>{1, 5, 2}));
  expect_near(complex_values(half_spectrum), std::vector<Complex>(full.begin(), full.begin() + 5));
}

TEST(OpsSignal, OnesidedInverseRestoresTheRealSignal) {
  for (std::vector<double> v :
       {std::vector<double>{3, -1, 4, 1, -5, 9, 2, 6}, std::vector<double>{3, -1, 4, 1, -5, 9, 2}}) {
    int64_t n = static_cast<int64_t>(v.size());
    Tensor half = dft(real_signal(v), ints({{"axis", 1}, {"onesided", 1}}));
    Tensor back = dft(half, ints({{"axis", 1}, {"onesided", 1}, {"inverse", 1}}), n);
    EXPECT_EQ(back.shape(), (std::vector<int64_t>{1, n, 1}));
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(back.get_f64(i), v[static_cast<size_t>(i)], 1e-12) << "at " << i;
  }
}

TEST(OpsSignal, DftLengthPadsWithZerosOrTruncates) {
  std::vector<double> v = {1, 2, -3, 0.5, 4};
  std::vector<Complex> cv(v.begin(), v.end());
  expect_near(complex_values(dft(real_signal(v), ints({{"axis", 1}}), 8)), direct_dft(cv, 8));
  expect_near(complex_values(dft(real_signal(v), ints({{"axis", 1}}), 3)), direct_dft(cv, 3));
}

TEST(OpsSignal, DftAxisInputOfOpset20) {
  OpGraph g(20);
  Value* x = g.input("x", tensor_type(DType::F32, {"2", "10", "3", "1"}));
  Value* a = g.input("a", Type::tensor(DType::I64, {}));
  Value* at_const = g.op("DFT", {x, nullptr, g.scalar(-3)}, ints({{"onesided", 1}}));
  Value* at_default = g.op("DFT", {x}, ints({{"onesided", 1}}));
  Value* at_runtime = g.op("DFT", {x, nullptr, a}, ints({{"onesided", 1}}));
  Value* full_runtime = g.op("DFT", {x, nullptr, a});
  g.infer();
  EXPECT_EQ(at_const->type().str(), "f32[2, 6, 3, 2]");
  EXPECT_EQ(at_default->type().str(), "f32[2, 10, 2, 2]");
  EXPECT_EQ(at_runtime->type().str(), "f32[?, ?, ?, 2]");
  EXPECT_EQ(full_runtime->type().str(), "f32[2, 10, 3, 2]");
}

TEST(OpsSignal, DftRefusesTheComplexAxisNamingTheNode) {
  OpGraph g(19);
  Value* x = g.input("x", tensor_type(DType::F32, {"4", "2"}));
  Node* n = g.node("DFT", {x}, 1, ints({{"axis", 1}}));
  expect_input_error([&] { g.infer(); }, n->name(), "axis 1 must lie in");
}

TEST(OpsSignal, DftRefusesAComplexOnesidedInputNamingTheNode) {
  OpGraph g(19);
  Value* x = g.input("x", tensor_type(DType::F32, {"4", "2"}));
  Node* n = g.node("DFT", {x}, 1, ints({{"axis", 0}, {"onesided", 1}}));
  expect_input_error([&] { g.infer(); }, n->name(), "onesided output needs a real input");
}

// ---------------------------------------------------------------- STFT

TEST(OpsSignal, StftFramesAreWindowedDfts) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F64, {"batch", "10", "1"}));
  Value* w = g.input("w", tensor_type(DType::F64, {"4"}));
  Value* y = g.op("STFT", {x, g.scalar(3), w});
  g.infer();
  EXPECT_EQ(y->type().str(), "f64[batch, 3, 3, 2]");
  std::vector<double> sig = {1, -2, 3, 0.5, 2, -1, 4, 0, 1.5, -3};
  std::vector<double> win = {0.1, 0.9, 0.7, 0.3};
  Tensor out = g.run({y}, {{"x", real_signal(sig)}, {"w", tensor_of(DType::F64, win, {4})}})[0];
  ASSERT_EQ(out.shape(), (std::vector<int64_t>{1, 3, 3, 2}));
  std::vector<Complex> got = complex_values(out);
  for (size_t f = 0; f < 3; ++f) {
    std::vector<Complex> frame;
    for (size_t t = 0; t < 4; ++t) frame.emplace_back(sig[f * 3 + t] * win[t]);
    std::vector<Complex> want = direct_dft(frame, 4);
    expect_near(
        std::vector<Complex>(got.begin() + static_cast<long>(f * 3), got.begin() + static_cast<long>(f * 3 + 3)),
        std::vector<Complex>(want.begin(), want.begin() + 3));
  }
}

TEST(OpsSignal, StftFrameCountIsSymbolic) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F32, {"1", "len", "2"}));
  Value* y = g.op("STFT", {x, g.scalar(4), nullptr, g.scalar(16)}, ints({{"onesided", 0}}));
  g.infer();
  Dim frames((SymExpr::symbol("len") - SymExpr::constant(16)).floordiv(SymExpr::constant(4)) + SymExpr::constant(1));
  EXPECT_EQ(y->type().str(), "f32[1, " + frames.str() + ", 16, 2]");
}

TEST(OpsSignal, StftRefusesAFrameLongerThanTheSignalNamingTheNode) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F32, {"1", "8", "1"}));
  Node* n = g.node("STFT", {x, g.scalar(2), nullptr, g.scalar(16)});
  expect_input_error([&] { g.infer(); }, n->name(), "exceeds the signal's length");
}

// ---------------------------------------------------------------- windows

std::vector<double> window(const char* op, int64_t size, bool periodic) {
  OpGraph g(17);
  auto attrs = ints({{"periodic", periodic ? 1 : 0}, {"output_datatype", static_cast<int64_t>(DType::F64)}});
  Value* y = g.op(op, {g.scalar(size)}, attrs);
  g.infer();
  EXPECT_EQ(y->type().str(), "f64[" + std::to_string(size) + "]");
  return floats(g.run({y}, {})[0]);
}

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << "at " << i;
}

TEST(OpsSignal, WindowValuesAtKnownPoints) {
  expect_values(window("HannWindow", 4, true), {0, 0.5, 1, 0.5});
  expect_values(window("HannWindow", 5, false), {0, 0.5, 1, 0.5, 0});
  expect_values(window("HammingWindow", 3, false), {4.0 / 46, 1, 4.0 / 46});
  expect_values(window("HammingWindow", 4, true), {4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
  expect_values(window("BlackmanWindow", 3, false), {0, 1, 0});
  expect_values(window("BlackmanWindow", 4, true), {0, 0.34, 1, 0.34});
  expect_values(window("HannWindow", 1, false), {1});
}

TEST(OpsSignal, WindowOfConstantSizeFoldsAndOfSymbolicSizeHasThatLength) {
  OpGraph g(17);
  Value* folded = g.op("HannWindow", {g.scalar(6)});
  Value* x = g.input("x", tensor_type(DType::F32, {"seq"}));
  Value* sym = g.op("BlackmanWindow", {g.op("Size", {x})});
  ShapeInfo& info = g.infer();
  ASSERT_TRUE(info.consts.count(folded));
  EXPECT_EQ(info.consts.at(folded).shape(), (std::vector<int64_t>{6}));
  EXPECT_NEAR(info.consts.at(folded).get_f64(3), 1.0, 1e-7);
  EXPECT_EQ(sym->type().str(), "f32[seq]");
}

TEST(OpsSignal, WindowRefusesANonNumericDatatypeNamingTheNode) {
  OpGraph g(17);
  Node* n = g.node("HannWindow", {g.scalar(4)}, 1, ints({{"output_datatype", static_cast<int64_t>(DType::String)}}));
  expect_input_error([&] { g.infer(); }, n->name(), "output_datatype 8 is not a numeric");
}

// ---------------------------------------------------------------- MelWeightMatrix

TEST(OpsSignal, MelWeightMatrixTrianglesPeakAtOne) {
  OpGraph g(17);
  Value* mels = g.input("mels", Type::tensor(DType::I64, {}));
  Value* y =
      g.op("MelWeightMatrix", {mels, g.scalar(32), g.scalar(8000), g.g.add_initializer("lo", Tensor::scalar_f32(0)),
                               g.g.add_initializer("hi", Tensor::scalar_f32(4000))});
  g.infer();
  EXPECT_EQ(y->type().str(), "f32[17, u0]");
  Tensor m = g.run({y}, {{"mels", Tensor::scalar_i64(4)}})[0];
  ASSERT_EQ(m.shape(), (std::vector<int64_t>{17, 4}));
  for (int64_t col = 0; col < 4; ++col) {
    double peak = 0;
    for (int64_t row = 0; row < 17; ++row) peak = std::max(peak, m.get_f64(row * 4 + col));
    EXPECT_EQ(peak, 1.0) << "column " << col;
  }
  // Six edges evenly spaced in mel from 0 to 4000 Hz (0, 262, 621, 1115, 1792, 2723 Hz) fall
  // in bins 0, 1, 2, 4, 7, 11 of (32 + 1) hz / 8000: the second triangle rises over
  // bins [1, 2] and falls over [2, 4].
  expect_values({m.get_f64(1 * 4 + 1), m.get_f64(2 * 4 + 1), m.get_f64(3 * 4 + 1), m.get_f64(4 * 4 + 1)},
                {0, 1, 0.5, 0});
}

// ---------------------------------------------------------------- LpNormalization, GlobalLpPool

TEST(OpsSignal, LpNormalizationScalesLinesToUnitNorm) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F64, {"2", "2"}));
  Value* l2 = g.op("LpNormalization", {x}, ints({{"axis", 0}}));
  Value* l1 = g.op("LpNormalization", {x}, ints({{"p", 1}}));
  g.infer();
  EXPECT_EQ(l2->type().str(), "f64[2, 2]");
  auto out = g.run({l2, l1}, {{"x", tensor_of(DType::F64, {3, -1, 4, 2}, {2, 2})}});
  expect_values(floats(out[0]), {0.6, -1 / std::sqrt(5.0), 0.8, 2 / std::sqrt(5.0)});
  expect_values(floats(out[1]), {0.75, -0.25, 4.0 / 6, 2.0 / 6});
  // A line of zeros stays zeros.
  auto zeros = g.run({l2, l1}, {{"x", tensor_of(DType::F64, {0, 1, 0, 2}, {2, 2})}});
  expect_values(floats(zeros[0]), {0, 1 / std::sqrt(5.0), 0, 2 / std::sqrt(5.0)});
  expect_values(floats(zeros[1]), {0, 1, 0, 1});
}

TEST(OpsSignal, LpNormalizationRefusesP3NamingTheNode) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F32, {"2", "2"}));
  Node* n = g.node("LpNormalization", {x}, 1, ints({{"p", 3}}));
  expect_input_error([&] { g.infer(); }, n->name(), "p must be 1 or 2, got 3");
}

TEST(OpsSignal, GlobalLpPoolIsTheNormOverSpatialAxes) {
  OpGraph g(17);
  Value* x = g.input("x", tensor_type(DType::F64, {"n", "2", "h", "2"}));
  Value* y = g.op("GlobalLpPool", {x}, ints({{"p", 3}}));
  g.infer();
  EXPECT_EQ(y->type().str(), "f64[n, 2, 1, 1]");
  Tensor out = g.run({y}, {{"x", tensor_of(DType::F64, {1, -2, 0, 2, 3, 0, 0, 0}, {1, 2, 2, 2})}})[0];
  expect_values(floats(out), {std::cbrt(17.0), 3});
}

}  // namespace
}  // namespace tcc
