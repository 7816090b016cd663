// Signal processing: DFT, STFT, the window generators (HannWindow,
// HammingWindow, BlackmanWindow) and MelWeightMatrix.
//
// A complex tensor is a real one with a trailing dim of 2 (real, imaginary); a
// real signal has a trailing dim of 1. Kernels compute in double: a transform
// of a power-of-two length is a radix-2 FFT (O(n log n)), any other length the
// direct O(n^2) sum. DFT and STFT with constant parameters decompose into a
// MatMul by a constant twiddle matrix. The windows and the mel matrix read only
// their scalar operands, so with constant operands shape inference folds them
// (try_fold runs these kernels) and constant_fold leaves initializers in their
// place; with sizes from shapes they are computed once per binding of the
// symbols (passes/binding_constants.h). A window or mel matrix whose size
// comes from data decomposes into kernels around the host step that reads the
// size back.
#include <cmath>
#include <complex>
#include <numbers>
#include <optional>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

using Complex = std::complex<double>;

// Input i's one integer as a dim: unknown where its value is not known at
// compile time.
Dim scalar_dim(InferContext& ctx, size_t i) {
  std::optional<Dims> v = input_values(ctx, i);
  return v && v->size() == 1 ? (*v)[0] : Dim::unknown();
}

// Fails unless d, where static, is at least `least`.
void require_at_least(InferContext& ctx, const Dim& d, int64_t least, const std::string& what) {
  if (d.is_static() && d.value() < least)
    ctx.fail(what + " must be at least " + std::to_string(least) + ", got " + std::to_string(d.value()));
}

// The one value of input i, which must hold exactly one element.
int64_t scalar_int(const EvalContext& ctx, size_t i, const std::string& what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.fail(what + " must be a scalar, got shape " + shape_str(t.shape()));
  return t.get_i64(0);
}

double scalar_float(const EvalContext& ctx, size_t i, const std::string& what) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) ctx.fail(what + " must be a scalar, got shape " + shape_str(t.shape()));
  return t.get_f64(0);
}

// floor(n / 2) + 1: the bins of a one-sided spectrum of length n.
Dim half_spectrum(const Dim& n) {
  if (n.is_unknown()) return n;
  return Dim(n.expr().floordiv(SymExpr::constant(2)) + SymExpr::constant(1));
}

// The element type `output_datatype` names (default float).
DType output_datatype(const Node& n) {
  int64_t code = n.get_int("output_datatype", 1);
  std::optional<DType> t = dtype_from_onnx(static_cast<int32_t>(code));
  if (!t || !(is_float(*t) || is_integer(*t)))
    n.fail("output_datatype " + std::to_string(code) + " is not a numeric ONNX element type");
  return *t;
}

// ---------------------------------------------------------------- transform

bool is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

// The DFT of a (y[k] = sum_t a[t] e^(-2 pi i k t / n)) or, with `inverse`, the
// inverse (e^(+2 pi i k t / n), scaled by 1/n), in place.
void transform(std::vector<Complex>& a, bool inverse) {
  size_t n = a.size();
  double sign = inverse ? 1.0 : -1.0;
  if (is_power_of_two(n)) {
    // Iterative Cooley-Tukey: bit-reversed order, then log2(n) butterfly passes.
    for (size_t i = 1, j = 0; i < n; ++i) {
      size_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) std::swap(a[i], a[j]);
    }
    for (size_t len = 2; len <= n; len <<= 1)
      for (size_t k = 0; k < len / 2; ++k) {
        Complex w = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(len));
        for (size_t i = 0; i < n; i += len) {
          Complex u = a[i + k], v = a[i + k + len / 2] * w;
          a[i + k] = u + v;
          a[i + k + len / 2] = u - v;
        }
      }
  } else {
    // Twiddles indexed by k t mod n, so no angle grows beyond 2 pi.
    std::vector<Complex> twiddle(n), out(n);
    for (size_t k = 0; k < n; ++k)
      twiddle[k] = std::polar(1.0, sign * 2 * std::numbers::pi * static_cast<double>(k) / static_cast<double>(n));
    for (size_t k = 0; k < n; ++k)
      for (size_t t = 0; t < n; ++t) out[k] += a[t] * twiddle[(k * t) % n];
    a = std::move(out);
  }
  if (inverse)
    for (Complex& v : a) v /= static_cast<double>(n);
}

// A [..., length, ..., channels] tensor seen as lines along one axis: element
// l of line (o, i), channel c, is at ((o * length + l) * inner + i) * channels + c.
struct Lines {
  int64_t outer, length, inner, channels;
  Lines(const std::vector<int64_t>& shape, size_t axis)
      : outer(product(std::vector<int64_t>(shape.begin(), shape.begin() + axis))),
        length(shape[axis]),
        inner(product(std::vector<int64_t>(shape.begin() + axis + 1, shape.end() - 1))),
        channels(shape.back()) {}
  int64_t at(int64_t o, int64_t l, int64_t i) const { return ((o * length + l) * inner + i) * channels; }
};

Complex complex_at(const Tensor& x, int64_t at, int64_t channels) {
  return {x.get_f64(at), channels == 2 ? x.get_f64(at + 1) : 0.0};
}

// ---------------------------------------------------------------- DFT

// What a DFT node computes, read from its attributes:
//   forward / inverse: complex to complex, n points along the axis;
//   onesided forward (rfft): real to the n / 2 + 1 bins of a one-sided spectrum;
//   onesided inverse (irfft): a one-sided spectrum to n real points, the other
//   half being the conjugate mirror (n defaults to 2 (bins - 1)).
struct DftMode {
  bool inverse, onesided;
  bool half_inverse() const { return inverse && onesided; }
  bool half_forward() const { return onesided && !inverse; }
};

DftMode dft_mode(const Node& n) { return {n.get_int("inverse", 0) != 0, n.get_int("onesided", 0) != 0}; }

// Maps a DFT axis into [0, rank - 2]: the trailing complex dim is no signal axis.
int64_t dft_axis(const Node& n, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank - 2)
    n.fail("axis " + std::to_string(axis) +
           " must lie in [-r, -2] or [0, r - 2] for an input of rank r = " + std::to_string(rank));
  return a;
}

void check_channels(const Node& n, int64_t channels, const char* what) {
  if (channels != 1 && channels != 2)
    n.fail(std::string(what) + "'s last dim must be 1 (real) or 2 (complex), got " + std::to_string(channels));
}

void infer_dft(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Node& n = ctx.node();
  const Type& x = ctx.input_type(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2) ctx.fail("expected an input of rank >= 2 ([..., signal, 1 or 2]), got " + x.str());
  const Dim& channels = x.shape().back();
  if (channels.is_static()) check_channels(n, channels.value(), "the input");
  DftMode mode = dft_mode(n);
  if (mode.half_forward() && channels.is_static() && channels.value() == 2)
    ctx.fail("onesided output needs a real input ([..., 1]); a complex input has no conjugate symmetry");
  std::optional<int64_t> axis;
  if (n.opset() < 20) {
    axis = dft_axis(n, n.get_int("axis", 1), rank);
  } else if (!ctx.has_input(2)) {
    axis = rank - 2;
  } else if (Dim a = scalar_dim(ctx, 2); a.is_static()) {
    axis = dft_axis(n, a.value(), rank);
  }
  std::optional<Dim> length;
  if (ctx.has_input(1)) {
    length = scalar_dim(ctx, 1);
    require_at_least(ctx, *length, 1, "dft_length");
  }
  Dims out = x.shape();
  out.back() = Dim(mode.half_inverse() ? 1 : 2);
  if (axis) {
    const Dim& in = x.shape()[*axis];
    Dim points = length ? *length : in;
    if (mode.half_inverse() && !length)
      points = in.is_unknown() ? in : Dim(in.expr() * SymExpr::constant(2) - SymExpr::constant(2));
    out[*axis] = mode.half_forward() ? half_spectrum(points) : points;
  } else if (length || mode.onesided) {
    // The axis is read at run time: any signal dim may be the one that changes.
    for (int64_t i = 0; i < rank - 1; ++i) out[i] = Dim::unknown();
  }
  ctx.set_output_type(0, Type::tensor(x.dtype(), out));
}

std::vector<Tensor> eval_dft(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  int64_t rank = static_cast<int64_t>(x.rank());
  if (rank < 2) ctx.fail("expected an input of rank >= 2 ([..., signal, 1 or 2]), got shape " + shape_str(x.shape()));
  check_channels(n, x.shape().back(), "the input");
  DftMode mode = dft_mode(n);
  if (mode.half_forward() && x.shape().back() == 2)
    ctx.fail("onesided output needs a real input ([..., 1]); a complex input has no conjugate symmetry");
  int64_t axis_arg = n.opset() < 20 ? n.get_int("axis", 1) : ctx.has_input(2) ? scalar_int(ctx, 2, "axis") : -2;
  size_t axis = static_cast<size_t>(dft_axis(n, axis_arg, rank));
  Lines in(x.shape(), axis);
  int64_t points = mode.half_inverse() ? 2 * (in.length - 1) : in.length;
  if (ctx.has_input(1)) points = scalar_int(ctx, 1, "dft_length");
  if (points < 1) ctx.fail("the transform needs at least one point, got " + std::to_string(points));
  std::vector<int64_t> yshape = x.shape();
  yshape[axis] = mode.half_forward() ? points / 2 + 1 : points;
  yshape.back() = mode.half_inverse() ? 1 : 2;
  Tensor y(x.dtype(), yshape);
  Lines out(yshape, axis);
  std::vector<Complex> line(static_cast<size_t>(points));
  for (int64_t o = 0; o < in.outer; ++o)
    for (int64_t i = 0; i < in.inner; ++i) {
      for (int64_t k = 0; k < points; ++k) {
        // Zero-padded or truncated to `points`; irfft mirrors bins past n / 2.
        bool mirrored = mode.half_inverse() && k > points / 2;
        int64_t src = mirrored ? points - k : k;
        Complex v = src < in.length ? complex_at(x, in.at(o, src, i), in.channels) : Complex{};
        line[static_cast<size_t>(k)] = mirrored ? std::conj(v) : v;
      }
      transform(line, mode.inverse);
      for (int64_t k = 0; k < out.length; ++k) {
        int64_t at = out.at(o, k, i);
        y.set_f64(at, line[static_cast<size_t>(k)].real());
        if (out.channels == 2) y.set_f64(at + 1, line[static_cast<size_t>(k)].imag());
      }
    }
  return {y};
}

// The most entries of the twiddle matrix a DFT or STFT decomposes into: past
// it the matrix outweighs the signal, and the host's FFT is the better path.
constexpr int64_t kMaxTwiddles = int64_t{1} << 22;

// The [length * channels, bins * out_channels] matrix that takes a line of
// `length` points, each of `channels` values (real, imaginary), to the bins of
// its transform of `points` points: entry ((t, c), (k, c')) is what part c of
// x[t] adds to part c' of bin k, as `transform` and eval_dft's padding,
// truncation and mirroring have it. For x[t] = a + ib read as a + i s b (s =
// -1 where irfft mirrors it), w (a + i s b) = (wr a - s wi b) + i (wi a + s wr b).
Tensor twiddle_matrix(DftMode mode, int64_t length, int64_t channels, int64_t points, int64_t bins,
                      int64_t out_channels, DType dtype) {
  int64_t cols = bins * out_channels;
  std::vector<double> m(static_cast<size_t>(length * channels * cols), 0.0);
  double sign = mode.inverse ? 1.0 : -1.0, scale = mode.inverse ? 1.0 / static_cast<double>(points) : 1.0;
  for (int64_t j = 0; j < points; ++j) {
    bool mirrored = mode.half_inverse() && j > points / 2;
    int64_t t = mirrored ? points - j : j;
    if (t >= length) continue;
    double s = mirrored ? -1.0 : 1.0;
    for (int64_t k = 0; k < bins; ++k) {
      double angle = sign * 2 * std::numbers::pi * static_cast<double>((k * j) % points) / static_cast<double>(points);
      Complex w = std::polar(scale, angle);
      size_t re = static_cast<size_t>(t * channels * cols + k * out_channels), im = re + static_cast<size_t>(cols);
      m[re] += w.real();
      if (out_channels == 2) m[re + 1] += w.imag();
      if (channels == 1) continue;
      m[im] -= s * w.imag();
      if (out_channels == 2) m[im + 1] += s * w.real();
    }
  }
  Tensor out(dtype, {length * channels, cols});
  for (size_t i = 0; i < m.size(); ++i) out.set_f64(static_cast<int64_t>(i), m[i]);
  return out;
}

// The one value of a constant scalar input as an integer, or `absent` where
// the node leaves it out; nullopt where it is data.
std::optional<int64_t> constant_int(const Node& n, size_t i, int64_t absent) {
  if (n.num_inputs() <= i || !n.has_input(i)) return absent;
  std::optional<double> v = scalar_constant(n.input(i));
  if (!v) return std::nullopt;
  return static_cast<int64_t>(*v);
}

// DFT -> a MatMul of x's lines along the axis (moved next to the channels by
// a Transpose and flattened with them) by a constant twiddle_matrix, whose
// bins are viewed and moved back into the axis's place. Needs a float x whose
// axis and channels are static, the axis and dft_length constant, and at most
// kMaxTwiddles entries.
bool decompose_dft(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  const Type& y = n.output(0)->type();
  if (x == nullptr || x->rank() < 2 || !y.is_tensor() || !y.has_rank() || !y.fully_shaped()) return false;
  auto rank = static_cast<int64_t>(x->rank());
  std::optional<int64_t> axis = n.opset() < 20 ? n.get_int("axis", 1) : constant_int(n, 2, -2);
  if (!axis) return false;
  if (*axis < 0) *axis += rank;
  if (*axis < 0 || *axis > rank - 2) return false;
  const Dim& along = x->shape()[static_cast<size_t>(*axis)];
  if (!along.is_static() || !x->shape().back().is_static()) return false;
  DftMode mode = dft_mode(n);
  int64_t length = along.value(), channels = x->shape().back().value();
  std::optional<int64_t> points = constant_int(n, 1, mode.half_inverse() ? 2 * (length - 1) : length);
  if (!points || *points < 1 || (channels != 1 && channels != 2)) return false;
  int64_t bins = mode.half_forward() ? *points / 2 + 1 : *points, out_channels = mode.half_inverse() ? 1 : 2;
  if (length * channels > kMaxTwiddles / (bins * out_channels)) return false;
  // x as [others..., length, channels]: the other dims first, in order.
  std::vector<int64_t> perm;
  Dims lines;
  for (int64_t a = 0; a < rank - 1; ++a)
    if (a != *axis) {
      perm.push_back(a);
      lines.push_back(x->shape()[static_cast<size_t>(a)]);
    }
  perm.push_back(*axis);
  perm.push_back(rank - 1);
  bool moved = *axis != rank - 2;
  Value* v = n.input(0);
  if (moved) {
    Dims dims = lines;
    dims.push_back(along);
    dims.push_back(Dim(channels));
    v = e.add("Transpose", "Transpose", {v}, Type::tensor(x->dtype(), dims), {{"perm", Attribute::of_ints(perm)}});
  }
  if (lines.empty()) lines.push_back(Dim(1));
  Dims flat = lines, spectrum = lines;
  flat.push_back(Dim(length * channels));
  spectrum.push_back(Dim(bins * out_channels));
  Value* m = e.constant("twiddles", twiddle_matrix(mode, length, channels, *points, bins, out_channels, x->dtype()));
  Value* product =
      e.add("MatMul", "MatMul", {e.reshape("Reshape", v, flat), m}, Type::tensor(x->dtype(), spectrum));
  if (!moved) {
    e.finish_reshape("Reshape_1", product);
    return true;
  }
  Dims split = lines;
  split.push_back(Dim(bins));
  split.push_back(Dim(out_channels));
  std::vector<int64_t> back(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) back[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  e.finish("Transpose_1", "Transpose", {e.reshape("Reshape_1", product, split)}, {{"perm", Attribute::of_ints(back)}});
  return true;
}

// ---------------------------------------------------------------- STFT

// STFT(signal [batch, length, 1 or 2], frame_step, window, frame_length):
// frames of frame_length samples every frame_step, each multiplied by the
// window and transformed: [batch, frames, bins, 2], frames = (length -
// frame_length) / frame_step + 1, bins = frame_length / 2 + 1 when onesided.
void infer_stft(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Node& n = ctx.node();
  const Type& x = ctx.input_type(0);
  if (x.rank() != 3) ctx.fail("expected a signal of shape [batch, length, 1 or 2], got " + x.str());
  const Dim& channels = x.shape()[2];
  if (channels.is_static()) check_channels(n, channels.value(), "the signal");
  bool onesided = n.get_int("onesided", 1) != 0;
  if (onesided && channels.is_static() && channels.value() == 2)
    ctx.fail("onesided output needs a real signal ([batch, length, 1]); set onesided = 0 for a complex one");
  Dim step = scalar_dim(ctx, 1);
  require_at_least(ctx, step, 1, "frame_step");
  Dim frame = x.shape()[1];
  if (ctx.has_input(2)) {
    const Type& w = ctx.input_type(2);
    if (w.is_tensor() && w.has_rank()) {
      if (w.rank() != 1) ctx.fail("the window must have rank 1, got " + w.str());
      frame = w.shape()[0];
    }
  }
  if (ctx.has_input(3)) {
    Dim given = scalar_dim(ctx, 3);
    require_at_least(ctx, given, 1, "frame_length");
    if (ctx.has_input(2) && given.is_static() && frame.is_static() && given != frame)
      ctx.fail("frame_length " + std::to_string(given.value()) + " differs from the window's length " +
               std::to_string(frame.value()));
    frame = given;
  }
  const Dim& length = x.shape()[1];
  if (length.is_static() && frame.is_static() && frame.value() > length.value())
    ctx.fail("frame_length " + std::to_string(frame.value()) + " exceeds the signal's length " +
             std::to_string(length.value()));
  Dim frames = Dim::unknown();
  if (!length.is_unknown() && !frame.is_unknown() && !step.is_unknown())
    frames = Dim((length.expr() - frame.expr()).floordiv(step.expr()) + SymExpr::constant(1));
  Dim bins = onesided ? half_spectrum(frame) : frame;
  ctx.set_output_type(0, Type::tensor(x.dtype(), {x.shape()[0], frames, bins, Dim(2)}));
}

std::vector<Tensor> eval_stft(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3) ctx.fail("expected a signal of shape [batch, length, 1 or 2], got shape " + shape_str(x.shape()));
  int64_t batch = x.shape()[0], length = x.shape()[1], channels = x.shape()[2];
  check_channels(n, channels, "the signal");
  bool onesided = n.get_int("onesided", 1) != 0;
  if (onesided && channels == 2)
    ctx.fail("onesided output needs a real signal ([batch, length, 1]); set onesided = 0 for a complex one");
  int64_t step = scalar_int(ctx, 1, "frame_step");
  if (step < 1) ctx.fail("frame_step must be at least 1, got " + std::to_string(step));
  const Tensor* window = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (window && window->rank() != 1) ctx.fail("the window must have rank 1, got shape " + shape_str(window->shape()));
  int64_t frame = window ? window->numel() : length;
  if (ctx.has_input(3)) {
    int64_t given = scalar_int(ctx, 3, "frame_length");
    if (window && given != frame)
      ctx.fail("frame_length " + std::to_string(given) + " differs from the window's length " + std::to_string(frame));
    frame = given;
  }
  if (frame < 1 || frame > length)
    ctx.fail("frame_length " + std::to_string(frame) + " must lie in [1, " + std::to_string(length) +
             "], the signal's length");
  int64_t frames = (length - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  Tensor y(x.dtype(), {batch, frames, bins, 2});
  std::vector<Complex> line(static_cast<size_t>(frame));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < frame; ++t) {
        double w = window ? window->get_f64(t) : 1.0;
        line[static_cast<size_t>(t)] = w * complex_at(x, (b * length + f * step + t) * channels, channels);
      }
      transform(line, false);
      for (int64_t k = 0; k < bins; ++k) {
        int64_t at = ((b * frames + f) * bins + k) * 2;
        y.set_f64(at, line[static_cast<size_t>(k)].real());
        y.set_f64(at + 1, line[static_cast<size_t>(k)].imag());
      }
    }
  return {y};
}

// STFT -> the frames as a Gather along x's length of a constant [frames,
// frame_length] index (f frame_step + t), times the window viewed as
// [frame_length, 1], then DFT's MatMul by a twiddle_matrix, viewed as [batch,
// frames, bins, 2]. Needs a float x whose length and channels are static,
// frame_step constant, the frame length static (the window's or a constant
// frame_length), and at most kMaxTwiddles entries.
bool decompose_stft(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  const Type& y = n.output(0)->type();
  if (x == nullptr || x->rank() != 3 || !x->shape()[1].is_static() || !x->shape()[2].is_static() || !y.is_tensor() ||
      !y.has_rank() || !y.fully_shaped())
    return false;
  int64_t length = x->shape()[1].value(), channels = x->shape()[2].value();
  std::optional<int64_t> step = constant_int(n, 1, 0), frame = constant_int(n, 3, length);
  Value* window = n.num_inputs() > 2 && n.has_input(2) ? n.input(2) : nullptr;
  if (window) {
    const Type& w = window->type();
    if (!w.is_tensor() || !w.has_rank() || w.rank() != 1 || !w.shape()[0].is_static()) return false;
    if (n.num_inputs() <= 3 || !n.has_input(3)) frame = w.shape()[0].value();
    if (frame != w.shape()[0].value()) return false;
  }
  bool onesided = n.get_int("onesided", 1) != 0;
  if (!step || *step < 1 || !frame || *frame < 1 || *frame > length || (channels != 1 && channels != 2) ||
      (onesided && channels == 2))
    return false;
  int64_t frames = (length - *frame) / *step + 1, bins = onesided ? *frame / 2 + 1 : *frame;
  if (*frame * channels > kMaxTwiddles / (bins * 2)) return false;
  std::vector<int64_t> samples(static_cast<size_t>(frames * *frame));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < *frame; ++t) samples[static_cast<size_t>(f * *frame + t)] = f * *step + t;
  const Dim& batch = x->shape()[0];
  Type framed = Type::tensor(x->dtype(), {batch, Dim(frames), Dim(*frame), Dim(channels)});
  Value* v = e.add("Gather", "Gather", {n.input(0), e.constant("frames", Tensor::from_i64(samples, {frames, *frame}))},
                   framed, {{"axis", Attribute::of_int(1)}});
  if (window) v = e.add("Mul", "Mul", {v, e.reshape("Reshape", window, {Dim(*frame), Dim(1)})}, framed);
  DftMode forward{false, onesided};
  Value* m = e.constant("twiddles", twiddle_matrix(forward, *frame, channels, *frame, bins, 2, x->dtype()));
  Value* lines = e.reshape("Reshape_1", v, {batch, Dim(frames), Dim(*frame * channels)});
  e.finish_reshape("Reshape_2", e.add("MatMul", "MatMul", {lines, m},
                                      Type::tensor(x->dtype(), {batch, Dim(frames), Dim(bins * 2)})));
  return true;
}

// ---------------------------------------------------------------- windows

// A generalized cosine window, w[t] = a0 - a1 cos(2 pi t / N) + a2 cos(4 pi t / N),
// with N = size when `periodic` (the default), size - 1 when symmetric.
struct CosineWindow {
  double a0, a1, a2;
};

// A size from tensor data is a fresh symbol, like NonZero's count.
void infer_window(InferContext& ctx) {
  Dim size = scalar_dim(ctx, 0);
  require_at_least(ctx, size, 0, "the window size");
  ctx.set_output_type(0, Type::tensor(output_datatype(ctx.node()), {size.is_unknown() ? ctx.env().fresh("u") : size}));
}

// A symmetric window of one point is [1] (as torch's), where the formula would divide by 0.
std::vector<Tensor> eval_window(EvalContext& ctx, CosineWindow c) {
  DType dt = output_datatype(ctx.node());
  int64_t size = scalar_int(ctx, 0, "the window size");
  if (size < 0) ctx.fail("the window size must be at least 0, got " + std::to_string(size));
  bool periodic = ctx.node().get_int("periodic", 1) != 0;
  double period = static_cast<double>(periodic ? size : size - 1);
  Tensor y(dt, {size});
  for (int64_t t = 0; t < size; ++t) {
    double phase = period == 0 ? 0.0 : 2 * std::numbers::pi * static_cast<double>(t) / period;
    y.set_f64(t, period == 0 ? 1.0 : c.a0 - c.a1 * std::cos(phase) + c.a2 * std::cos(2 * phase));
  }
  return {y};
}

// A window whose size comes from tensor data (its length a symbol no input
// shape binds) -> kernels around one host step, which reads the size back
// (Expansion::counted_range): over t = 0..size-1, in f64 as the reference
// computes it, phase = 2 pi t / N, a0 - a1 cos(phase) (+ a2 cos(2 phase)),
// 1 where N is 0, cast to output_datatype.
bool decompose_window(Expansion& e, CosineWindow c) {
  const Node& n = e.node();
  const Type& y = n.output(0)->type();
  const Type& size = n.input(0)->type();
  if (!y.is_tensor() || !e.data_dependent(y.shape()[0]) || !size.is_tensor() || !size.fully_static() ||
      dims_product(size.shape()) != Dim(1))
    return false;
  const Dim length = y.shape()[0];
  const Type scalar = Type::tensor(DType::F64, {}), line = Type::tensor(DType::F64, {length});
  Value* count = e.cast("Cast_count", n.input(0), DType::I64);
  Value* t = e.cast("Cast_index", e.counted_range("Index", count, length), DType::F64);
  Value* period = e.cast("Cast_size", n.input(0), DType::F64);
  if (size.rank() != 0) period = e.reshape("Reshape_size", period, {});
  if (n.get_int("periodic", 1) == 0)
    period = e.add("Sub_period", "Sub", {period, e.scalar("one", 1, DType::F64)}, scalar);
  Value* angle = e.add("Mul_angle", "Mul", {e.scalar("two_pi", 2 * std::numbers::pi, DType::F64), t}, line);
  Value* phase = e.add("Div_phase", "Div", {angle, period}, line);
  auto term = [&](const std::string& tag, Value* at, double a) {
    return e.add("Mul_" + tag, "Mul", {e.scalar(tag, a, DType::F64), e.add("Cos_" + tag, "Cos", {at}, line)}, line);
  };
  Value* w = e.add("Sub", "Sub", {e.scalar("a0", c.a0, DType::F64), term("a1", phase, c.a1)}, line);
  if (c.a2 != 0) {
    Value* twice = e.add("Mul_twice", "Mul", {phase, e.scalar("two", 2, DType::F64)}, line);
    w = e.add("Add", "Add", {w, term("a2", twice, c.a2)}, line);
  }
  Value* degenerate =
      e.add("Equal", "Equal", {period, e.scalar("zero", 0, DType::F64)}, Type::tensor(DType::Bool, {}));
  Value* window = e.add("Where", "Where", {degenerate, e.scalar("unit", 1, DType::F64), w}, line);
  e.finish("Cast", "Cast", {window}, {{"to", Attribute::of_int(static_cast<int64_t>(y.dtype()))}});
  return true;
}

// ---------------------------------------------------------------- MelWeightMatrix

// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz,
// upper_edge_hertz): [dft_length / 2 + 1, num_mel_bins], column m a triangle
// rising from spectrogram bin f[m] to 1 at f[m + 1] and falling to f[m + 2],
// where f holds num_mel_bins + 2 frequencies evenly spaced on the mel scale
// (mel = 2595 log10(1 + hz / 700)) from the lower edge, each mapped to the bin
// floor((dft_length + 1) hz / sample_rate).
void infer_mel(InferContext& ctx) {
  Dim mels = scalar_dim(ctx, 0), dft = scalar_dim(ctx, 1);
  require_at_least(ctx, mels, 0, "num_mel_bins");
  require_at_least(ctx, dft, 1, "dft_length");
  // Sizes from tensor data are fresh symbols, like NonZero's count.
  Dim bins = dft.is_unknown() ? ctx.env().fresh("u") : half_spectrum(dft);
  if (mels.is_unknown()) mels = ctx.env().fresh("u");
  ctx.set_output_type(0, Type::tensor(output_datatype(ctx.node()), {bins, mels}));
}

std::vector<Tensor> eval_mel(EvalContext& ctx) {
  DType dt = output_datatype(ctx.node());
  int64_t mels = scalar_int(ctx, 0, "num_mel_bins"), dft = scalar_int(ctx, 1, "dft_length");
  int64_t rate = scalar_int(ctx, 2, "sample_rate");
  double lower = scalar_float(ctx, 3, "lower_edge_hertz"), upper = scalar_float(ctx, 4, "upper_edge_hertz");
  if (mels < 0 || dft < 1 || rate < 1)
    ctx.fail("expected num_mel_bins >= 0, dft_length >= 1 and sample_rate >= 1, got " + std::to_string(mels) + ", " +
             std::to_string(dft) + ", " + std::to_string(rate));
  int64_t bins = dft / 2 + 1;
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  double low_mel = to_mel(lower), step = (to_mel(upper) - low_mel) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t m = 0; m < mels + 2; ++m) {
    double hz = 700 * (std::pow(10.0, (static_cast<double>(m) * step + low_mel) / 2595) - 1);
    double bin = std::floor(static_cast<double>(dft + 1) * hz / static_cast<double>(rate));
    if (!(bin >= 0 && bin < static_cast<double>(bins)))
      ctx.fail("the band edges [" + std::to_string(lower) + ", " + std::to_string(upper) +
               "] Hz fall outside the spectrogram's " + std::to_string(bins) + " bins at sample_rate " +
               std::to_string(rate));
    edge[static_cast<size_t>(m)] = static_cast<int64_t>(bin);
  }
  Tensor y(dt, {bins, mels});
  for (int64_t m = 0; m < mels; ++m) {
    size_t at = static_cast<size_t>(m);
    int64_t lo = edge[at], mid = edge[at + 1], hi = edge[at + 2];
    if (mid == lo)
      y.set_f64(mid * mels + m, 1.0);
    else
      for (int64_t j = lo; j <= mid; ++j)
        y.set_f64(j * mels + m, static_cast<double>(j - lo) / static_cast<double>(mid - lo));
    for (int64_t j = mid; j < hi; ++j)
      y.set_f64(j * mels + m, static_cast<double>(hi - j) / static_cast<double>(hi - mid));
  }
  return {y};
}

// MelWeightMatrix with a size from tensor data (each output dim static or a
// symbol no input shape binds, one at least) -> kernels around one host step:
// [dft_length / 2 + 1, num_mel_bins] read back by a ConstantOfShape, which
// binds the symbols; then, in f64 as the reference computes it, each column
// m's band edges lo, mid, hi (the bins of mel points m, m + 1, m + 2) and at
// row j 0 below lo, (j - lo) / (mid - lo) below mid, 1 at mid, (hi - j) /
// (hi - mid) below hi, 0 beyond. log10 is Log / ln 10, which may differ from
// the reference's log10 in the last bit, moving an edge only where a point
// falls that close to a bin's boundary. Edges outside the spectrogram, which
// the reference refuses, are not checked.
bool decompose_mel(Expansion& e) {
  const Node& n = e.node();
  const Type& y = n.output(0)->type();
  if (!y.is_tensor() || !y.has_rank() || y.rank() != 2) return false;
  const Dim bins = y.shape()[0], mels = y.shape()[1];
  if (!(e.data_dependent(bins) || e.data_dependent(mels)) || !(bins.is_static() || e.data_dependent(bins)) ||
      !(mels.is_static() || e.data_dependent(mels)))
    return false;
  for (size_t i = 0; i < 5; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.fully_static() || dims_product(t.shape()) != Dim(1)) return false;
  }
  const Dim cells(bins.expr() * mels.expr());
  const Type scalar = Type::tensor(DType::F64, {}), grid = Type::tensor(DType::F64, {cells}),
             flags = Type::tensor(DType::Bool, {cells}), integer = Type::tensor(DType::I64, {}),
             positions = Type::tensor(DType::I64, {cells});
  auto operand = [&](size_t i, const std::string& name, DType t) {
    Value* v = e.cast("Cast_" + name, n.input(i), t);
    return v->type().rank() == 0 ? v : e.reshape("Reshape_" + name, v, {});
  };
  auto number = [&](const std::string& name, double v) { return e.scalar(name, v, DType::F64); };
  auto whole = [&](const std::string& name, int64_t v) { return e.scalar(name, static_cast<double>(v), DType::I64); };
  Value *mel_count = operand(0, "mels", DType::I64), *dft = operand(1, "dft", DType::I64);
  Value *rate = operand(2, "rate", DType::F64), *lower = operand(3, "lower", DType::F64);
  Value* upper = operand(4, "upper", DType::F64);
  // The shape [dft / 2 + 1, mels] as bins * (1, 0) + mels * (0, 1), on kernels.
  const Type pair = Type::tensor(DType::I64, {Dim(2)});
  Value* bin_count = e.add("Add_bins", "Add", {e.add("Div_bins", "Div", {dft, whole("two", 2)}, integer), whole("one_bin", 1)},
                           integer);
  Value* shape = e.add("Add_shape", "Add",
                       {e.add("Mul_bins", "Mul", {bin_count, e.i64s("rows", {1, 0})}, pair),
                        e.add("Mul_mels", "Mul", {mel_count, e.i64s("columns", {0, 1})}, pair)},
                       pair);
  Value* zeros = e.add("ConstantOfShape", "ConstantOfShape", {shape}, Type::tensor(DType::I64, {bins, mels}),
                       {{"value", Attribute::of_tensor(Tensor(DType::I64, {1}))}});
  // Each cell's row j and column m from its row-major position, counted over
  // the zeros so that every kernel of the grid runs after the read-back.
  Value* at = e.add("Add_cells", "Add",
                    {e.reshape("Reshape_zeros", zeros, {cells}), e.range("Range_cells", 0, cells)}, positions);
  Value* row = e.add("Div_row", "Div", {at, mel_count}, positions);
  Value* column = e.add("Sub_column", "Sub", {at, e.add("Mul_row", "Mul", {row, mel_count}, positions)}, positions);
  Value *j = e.cast("Cast_j", row, DType::F64), *m = e.cast("Cast_m", column, DType::F64);
  Value *ln10 = number("ln10", std::log(10.0)), *one = number("one", 1);
  Value *hz_scale = number("hz_scale", 700), *mel_scale = number("mel_scale", 2595);
  // mel = 2595 log10(1 + hz / 700)
  auto to_mel = [&](const std::string& tag, Value* hz) {
    Value* ratio = e.add("Div_hz" + tag, "Div", {hz, hz_scale}, scalar);
    Value* log = e.add("Log" + tag, "Log", {e.add("Add_hz" + tag, "Add", {one, ratio}, scalar)}, scalar);
    Value* log10 = e.add("Div_log" + tag, "Div", {log, ln10}, scalar);
    return e.add("Mul_mel" + tag, "Mul", {mel_scale, log10}, scalar);
  };
  Value* low_mel = to_mel("_lower", lower);
  Value* points =
      e.cast("Cast_points", e.add("Add_points", "Add", {mel_count, whole("two_points", 2)}, integer), DType::F64);
  Value* span = e.add("Sub_span", "Sub", {to_mel("_upper", upper), low_mel}, scalar);
  Value* step = e.add("Div_step", "Div", {span, points}, scalar);
  Value* scale = e.cast("Cast_scale", e.add("Add_scale", "Add", {dft, whole("one_scale", 1)}, integer), DType::F64);
  // The bin of mel point m + k: floor((dft + 1) hz / rate), hz = 700 (10^((m step + low_mel) / 2595) - 1).
  Value* ten = number("ten", 10);
  auto edge = [&](int k) {
    const std::string t = std::to_string(k);
    Value* point = k == 0 ? m : e.add("Add_point" + t, "Add", {m, number("k" + t, k)}, grid);
    Value* mel = e.add("Add_mel" + t, "Add", {e.add("Mul_step" + t, "Mul", {point, step}, grid), low_mel}, grid);
    Value* exponent = e.add("Div_mel" + t, "Div", {mel, mel_scale}, grid);
    Value* power = e.add("Pow" + t, "Pow", {ten, exponent}, grid);
    Value* hz = e.add("Mul_hz" + t, "Mul", {hz_scale, e.add("Sub_hz" + t, "Sub", {power, one}, grid)}, grid);
    Value* bin = e.add("Div_bin" + t, "Div", {e.add("Mul_bin" + t, "Mul", {scale, hz}, grid), rate}, grid);
    return e.add("Floor" + t, "Floor", {bin}, grid);
  };
  Value *lo = edge(0), *mid = edge(1), *hi = edge(2);
  Value* rising = e.add("Div_rising", "Div",
                        {e.add("Sub_rising", "Sub", {j, lo}, grid), e.add("Sub_rise", "Sub", {mid, lo}, grid)}, grid);
  Value* falling = e.add("Div_falling", "Div",
                         {e.add("Sub_falling", "Sub", {hi, j}, grid), e.add("Sub_fall", "Sub", {hi, mid}, grid)}, grid);
  Value* zero = number("zero", 0);
  Value* v = e.add("Where_beyond", "Where", {e.add("Less_hi", "Less", {j, hi}, flags), falling, zero}, grid);
  v = e.add("Where_mid", "Where", {e.add("Equal_mid", "Equal", {j, mid}, flags), number("peak", 1), v}, grid);
  v = e.add("Where_rising", "Where", {e.add("Less_mid", "Less", {j, mid}, flags), rising, v}, grid);
  v = e.add("Where_below", "Where", {e.add("Less_lo", "Less", {j, lo}, flags), zero, v}, grid);
  e.finish_reshape("Reshape", e.add("Cast", "Cast", {v}, Type::tensor(y.dtype(), {cells}),
                                    {{"to", Attribute::of_int(static_cast<int64_t>(y.dtype()))}}));
  return true;
}

}  // namespace

void register_signal_ops(OpRegistry& r) {
  // DFT's dft_length and (from opset 20) axis; STFT's frame_step and frame_length.
  r.add(OpDef{"", "DFT", 17, 0, infer_dft, eval_dft, {}}).shape_from_inputs({1, 2}).decomposition(decompose_dft);
  r.add(OpDef{"", "STFT", 17, 0, infer_stft, eval_stft, {}}).shape_from_inputs({1, 3}).decomposition(decompose_stft);
  auto window = [&r](const char* op, CosineWindow c) {
    r.add(OpDef{"", op, 17, kConstant, infer_window, [c](EvalContext& ctx) { return eval_window(ctx, c); }, {}})
        .decomposition([c](Expansion& e) { return decompose_window(e, c); });
  };
  window("HannWindow", {0.5, 0.5, 0.0});
  window("HammingWindow", {25.0 / 46.0, 21.0 / 46.0, 0.0});
  window("BlackmanWindow", {0.42, 0.5, 0.08});
  r.add(OpDef{"", "MelWeightMatrix", 17, kConstant, infer_mel, eval_mel, {}}).decomposition(decompose_mel);
}

}  // namespace tcc
