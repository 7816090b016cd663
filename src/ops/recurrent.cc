// Recurrent ops over a sequence: RNN, GRU and LSTM (opsets 7, 14, 22).
//
// Each runs forward, in reverse, or both ways (bidirectional: direction 0
// forward, 1 reverse), from initial states (zero when absent), with per-batch
// sequence lengths: a batch entry's outputs past its length are zero and its
// final states are those after its last valid step (zero for a length of 0,
// as ONNX Runtime gives). Layout 0 is [seq, batch, ...] for X and Y and [dirs, batch,
// hidden] for the states; layout 1 (opset 14) puts batch first. Kernels
// compute in double and round once to X's dtype. A node decomposes into one
// MatMul projecting every step's input, then either its steps unrolled into
// MatMuls and pointwise kernels (a short static sequence) or one
// tcc::Recurrence, the persistent kernel (src/ops/recurrent.h), for a long or
// symbolic one (decompose_recurrent).
#include "src/ops/recurrent.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <optional>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// X's float types and sequence_lens' i32 (ONNX's schema keeps X, the weights
// and the states floating).
const std::vector<DType> kTypes = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32};

enum Input : size_t { kX, kW, kR, kB, kSeqLens, kInitH, kInitC, kP };
const char* const kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
const char* const kOutputNames[] = {"Y", "Y_h", "Y_c"};
const char* const kCellNames[] = {"RNN", "GRU", "LSTM"};  // the ONNX ops, tcc::Recurrence's `cell`

using Cell = RecurrentCell;

// -------------------------------------------------------- Activations

// How many of alpha and beta a function takes and their defaults, which are
// those of the ONNX ops of the same name (Affine and ScaledTanh, which have
// none, default to the identity scale: alpha 1, beta 0 / 1); the reference's
// function f and the persistent kernel's expression of it (`kernel`, over x
// in dtype t).
struct ActivationSpec {
  const char* name;
  bool takes_alpha, takes_beta;
  double alpha, beta;
  double (*f)(double x, double alpha, double beta);
  int (*kernel)(ScalarBuilder& b, DType t, int x, double alpha, double beta);
};

int unary(ScalarBuilder& b, ScalarOp op, DType t, int x) { return b.op(op, t, {x}); }
int binary(ScalarBuilder& b, ScalarOp op, DType t, int x, int y) { return b.op(op, t, {x, y}); }
int scaled(ScalarBuilder& b, DType t, int x, double v) { return binary(b, ScalarOp::Mul, t, x, b.constant(t, v)); }
// x where x >= from, else `otherwise`.
int at_least(ScalarBuilder& b, DType t, int x, double from, int otherwise) {
  const int kept = b.op(ScalarOp::GreaterOrEqual, DType::Bool, {x, b.constant(t, from)});
  return b.op(ScalarOp::Where, t, {kept, x, otherwise});
}

const ActivationSpec kActivations[] = {
    {"Relu", false, false, 0, 0, [](double x, double, double) { return std::max(x, 0.0); },
     [](ScalarBuilder& b, DType t, int x, double, double) { return unary(b, ScalarOp::Relu, t, x); }},
    {"Tanh", false, false, 0, 0, [](double x, double, double) { return std::tanh(x); },
     [](ScalarBuilder& b, DType t, int x, double, double) { return unary(b, ScalarOp::Tanh, t, x); }},
    {"Sigmoid", false, false, 0, 0,
     [](double x, double, double) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); },
     [](ScalarBuilder& b, DType t, int x, double, double) { return unary(b, ScalarOp::Sigmoid, t, x); }},
    {"Affine", true, true, 1, 0, [](double x, double a, double b) { return a * x + b; },
     [](ScalarBuilder& b, DType t, int x, double alpha, double beta) {
       return binary(b, ScalarOp::Add, t, scaled(b, t, x, alpha), b.constant(t, beta));
     }},
    {"LeakyRelu", true, false, 0.01, 0, [](double x, double a, double) { return x >= 0 ? x : a * x; },
     [](ScalarBuilder& b, DType t, int x, double alpha, double) {
       return at_least(b, t, x, 0, scaled(b, t, x, alpha));
     }},
    {"ThresholdedRelu", true, false, 1, 0, [](double x, double a, double) { return x >= a ? x : 0.0; },
     [](ScalarBuilder& b, DType t, int x, double alpha, double) { return at_least(b, t, x, alpha, b.constant(t, 0)); }},
    {"ScaledTanh", true, true, 1, 1, [](double x, double a, double b) { return a * std::tanh(b * x); },
     [](ScalarBuilder& b, DType t, int x, double alpha, double beta) {
       return scaled(b, t, unary(b, ScalarOp::Tanh, t, scaled(b, t, x, beta)), alpha);
     }},
    {"HardSigmoid", true, true, 0.2, 0.5, [](double x, double a, double b) { return std::clamp(a * x + b, 0.0, 1.0); },
     [](ScalarBuilder& b, DType t, int x, double alpha, double beta) {
       const int line = binary(b, ScalarOp::Add, t, scaled(b, t, x, alpha), b.constant(t, beta));
       return binary(b, ScalarOp::Max, t, binary(b, ScalarOp::Min, t, line, b.constant(t, 1)), b.constant(t, 0));
     }},
    {"Elu", true, false, 1, 0, [](double x, double a, double) { return x >= 0 ? x : a * std::expm1(x); },
     [](ScalarBuilder& b, DType t, int x, double alpha, double) {
       const int em1 = binary(b, ScalarOp::Sub, t, unary(b, ScalarOp::Exp, t, x), b.constant(t, 1));
       return at_least(b, t, x, 0, scaled(b, t, em1, alpha));
     }},
    {"Softsign", false, false, 0, 0, [](double x, double, double) { return x / (1 + std::abs(x)); },
     [](ScalarBuilder& b, DType t, int x, double, double) {
       const int one_plus_abs = binary(b, ScalarOp::Add, t, b.constant(t, 1), unary(b, ScalarOp::Abs, t, x));
       return binary(b, ScalarOp::Div, t, x, one_plus_abs);
     }},
    {"Softplus", false, false, 0, 0,
     [](double x, double, double) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); },
     [](ScalarBuilder& b, DType t, int x, double, double) {
       const int tail = unary(b, ScalarOp::Exp, t, unary(b, ScalarOp::Neg, t, unary(b, ScalarOp::Abs, t, x)));
       const int log1p = unary(b, ScalarOp::Log, t, binary(b, ScalarOp::Add, t, b.constant(t, 1), tail));
       return binary(b, ScalarOp::Add, t, unary(b, ScalarOp::Relu, t, x), log1p);
     }},
};

// One of the activation functions the spec lists, with its alpha and beta.
struct Activation {
  const ActivationSpec* spec = nullptr;
  double alpha = 0, beta = 0;
  double operator()(double x) const { return spec->f(x, alpha, beta); }
};

// Activation names compare case-insensitively, as ONNX Runtime reads them.
bool same_name(const std::string& a, const std::string& b) {
  auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [&](char x, char y) { return lower(x) == lower(y); });
}

// -------------------------------------------------------- Attributes

// A node's attributes, read once with the spec's defaults.
struct Recurrent {
  Cell cell = Cell::Rnn;
  int64_t gates = 1;       // row blocks of W and R: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c)
  int64_t directions = 1;  // 2 when bidirectional
  bool reverse = false;    // direction "reverse"
  int64_t layout = 0;
  std::optional<int64_t> hidden_size;
  std::optional<double> clip;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  // Per direction: f (RNN); f, g (GRU); f, g, h (LSTM).
  std::vector<std::vector<Activation>> activations;

  bool backward(int64_t direction) const { return directions == 2 ? direction == 1 : reverse; }
};

// The activations attribute, its functions looked up and their alpha and beta
// taken from activation_alpha / activation_beta in order, each list consumed
// only by the functions that take it, its defaults once it runs out (as ONNX
// Runtime reads them).
std::vector<std::vector<Activation>> read_activations(const Node& n, const Recurrent& r) {
  static const std::vector<std::string> kDefaults[] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
  const std::vector<std::string>& defaults = kDefaults[static_cast<int>(r.cell)];
  std::vector<std::string> names;
  for (int64_t d = 0; d < r.directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (const Attribute* a = n.attr("activations")) {
    if (a->kind != Attribute::Kind::Strings) n.fail("expected 'activations' to be a list of strings");
    if (a->strings.size() != names.size())
      n.fail("expected " + std::to_string(names.size()) + " activations (" + std::to_string(defaults.size()) +
             " per direction), got " + std::to_string(a->strings.size()));
    names = a->strings;
  }
  std::vector<float> alphas = n.get_floats("activation_alpha"), betas = n.get_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  std::vector<std::vector<Activation>> out(static_cast<size_t>(r.directions));
  for (size_t i = 0; i < names.size(); ++i) {
    const ActivationSpec* spec = nullptr;
    for (const ActivationSpec& s : kActivations)
      if (same_name(names[i], s.name)) spec = &s;
    if (!spec) n.fail("unknown activation '" + names[i] + "'");
    Activation act{spec, spec->alpha, spec->beta};
    if (spec->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (spec->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    out[i / defaults.size()].push_back(act);
  }
  return out;
}

Recurrent read_recurrent(const Node& n, Cell cell) {
  Recurrent r;
  r.cell = cell;
  r.gates = recurrent_gates(cell);
  std::string direction = n.get_string("direction", "forward");
  if (direction == "bidirectional") r.directions = 2;
  else if (direction == "reverse") r.reverse = true;
  else if (direction != "forward")
    n.fail("expected direction 'forward', 'reverse' or 'bidirectional', got '" + direction + "'");
  if (n.opset() >= 14) r.layout = n.get_int("layout", 0);
  if (r.layout != 0 && r.layout != 1) n.fail("expected layout 0 or 1, got " + std::to_string(r.layout));
  if (n.has_attr("hidden_size")) {
    r.hidden_size = n.get_int("hidden_size", 0);
    if (*r.hidden_size <= 0) n.fail("expected a positive hidden_size, got " + std::to_string(*r.hidden_size));
  }
  if (n.has_attr("clip")) {
    r.clip = n.get_float("clip", 0);
    if (!(*r.clip > 0)) n.fail("expected a positive clip, got " + std::to_string(*r.clip));
  }
  if (cell == Cell::Gru) r.linear_before_reset = n.get_int("linear_before_reset", 0) != 0;
  if (cell == Cell::Lstm) r.input_forget = n.get_int("input_forget", 0) != 0;
  r.activations = read_activations(n, r);
  return r;
}

// -------------------------------------------------------- Shapes

struct Sizes {
  Dim seq, batch, input, hidden;
};

Dim times(int64_t k, const Dim& d) { return Dim(SymExpr::constant(k) * d.expr()); }

// initial_h, initial_c, Y_h and Y_c.
Dims state_shape(const Recurrent& r, const Sizes& s) {
  Dim dirs(r.directions);
  return r.layout == 0 ? Dims{dirs, s.batch, s.hidden} : Dims{s.batch, dirs, s.hidden};
}

Dims y_shape(const Recurrent& r, const Sizes& s) {
  Dim dirs(r.directions);
  return r.layout == 0 ? Dims{s.seq, dirs, s.batch, s.hidden} : Dims{s.batch, s.seq, dirs, s.hidden};
}

// The shape input i (W and after) must have.
Dims input_shape(const Recurrent& r, size_t i, const Sizes& s) {
  Dim dirs(r.directions);
  switch (i) {
    case kW: return {dirs, times(r.gates, s.hidden), s.input};
    case kR: return {dirs, times(r.gates, s.hidden), s.hidden};
    case kB: return {dirs, times(2 * r.gates, s.hidden)};
    case kSeqLens: return {s.batch};
    case kP: return {dirs, times(3, s.hidden)};
    default: return state_shape(r, s);
  }
}

void expect_rank(const Node& n, size_t i, size_t got, size_t want) {
  if (got != want)
    n.fail("expected " + std::string(kInputNames[i]) + " of rank " + std::to_string(want) + ", got rank " +
           std::to_string(got));
}

// Operands W (R for a tcc::Recurrence, which has no W and holds operand i
// at i - 1) and after, where their types are known, have the shapes
// input_shape gives.
void expect_operand_shapes(InferContext& ctx, const Recurrent& r, const Sizes& s, bool projected) {
  const Node& n = ctx.node();
  for (size_t i = projected ? kR : kW; i <= kP; ++i) {
    const size_t at = projected ? i - 1 : i;
    if (at >= ctx.num_inputs()) break;
    const Type& t = ctx.input_type(at);
    if (!ctx.has_input(at) || !t.is_tensor() || !t.has_rank()) continue;
    Dims want = input_shape(r, i, s);
    expect_rank(n, i, t.rank(), want.size());
    for (size_t k = 0; k < want.size(); ++k)
      if (!ctx.env().unify(t.shape()[k], want[k], &n))
        ctx.fail("expected " + std::string(kInputNames[i]) + " of shape " + dims_str(ctx.env().canonical(want)) +
                 ", got " + dims_str(t.shape()));
  }
}

void infer_recurrent(InferContext& ctx, Cell cell) {
  const Node& n = ctx.node();
  Recurrent r = read_recurrent(n, cell);
  require_one_dtype(ctx, kX, {kW, kR, kB, kInitH, kInitC, kP});
  if (!inputs_ranked(ctx, {kX, kW, kR})) return;
  const Dims& x = ctx.input_type(kX).shape();
  const Dims& rw = ctx.input_type(kR).shape();
  expect_rank(n, kX, x.size(), 3);
  expect_rank(n, kR, rw.size(), 3);
  auto known = [&](const Dim& d) { return d.is_unknown() ? ctx.env().fresh("u") : d; };
  size_t seq_axis = static_cast<size_t>(r.layout);
  Sizes s{known(x[seq_axis]), known(x[1 - seq_axis]), known(x[2]),
          r.hidden_size ? Dim(*r.hidden_size) : known(rw[2])};
  expect_operand_shapes(ctx, r, s, false);
  DType dt = ctx.input_type(kX).dtype();
  ctx.set_output_type(0, Type::tensor(dt, ctx.env().canonical(y_shape(r, s))));
  for (size_t o = 1; o < ctx.num_outputs(); ++o)
    ctx.set_output_type(o, Type::tensor(dt, ctx.env().canonical(state_shape(r, s))));
}

// -------------------------------------------------------- Kernels

// One direction's recurrent weights: R [gates*H, H], its bias Rb [gates*H]
// and the peepholes P [3H] (i, o, f); all read as doubles.
struct Weights {
  std::vector<double> r, rb, p;
};

std::vector<double> slice(const Tensor* t, int64_t from, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count), 0.0);
  if (t)
    for (int64_t k = 0; k < count; ++k) v[static_cast<size_t>(k)] = t->get_f64(from + k);
  return v;
}

// y[row] = bias[row] + sum_k m[row, k] * v[k], for `rows` rows from `first`.
std::vector<double> affine(const std::vector<double>& m, const std::vector<double>& v,
                           const std::vector<double>& bias, int64_t first, int64_t rows) {
  size_t cols = v.size();
  std::vector<double> y(static_cast<size_t>(rows));
  for (int64_t row = 0; row < rows; ++row) {
    size_t at = static_cast<size_t>(first + row);
    double acc = bias[at];
    for (size_t k = 0; k < cols; ++k) acc += m[at * cols + k] * v[k];
    y[static_cast<size_t>(row)] = acc;
  }
  return y;
}

// One step of a cell: the states h (and c for LSTM) after the input whose
// projection (x W^T + Wb) is xw.
void step(const Recurrent& r, const std::vector<Activation>& act, const Weights& wt, const std::vector<double>& xw,
          std::vector<double>& h, std::vector<double>& c) {
  int64_t hs = static_cast<int64_t>(h.size());
  size_t hn = h.size();
  std::vector<double> hr = affine(wt.r, h, wt.rb, 0, r.gates * hs);
  // The input and recurrent terms of `gate` at unit j. `clip` bounds every
  // activation's input; LSTM's cell state is clipped only on its way into h.
  auto sum = [&](size_t gate, size_t j) { return xw[gate * hn + j] + hr[gate * hn + j]; };
  auto clipped = [&](double v) { return r.clip ? std::clamp(v, -*r.clip, *r.clip) : v; };
  if (r.cell == Cell::Rnn) {
    for (size_t j = 0; j < hn; ++j) h[j] = act[0](clipped(sum(0, j)));
  } else if (r.cell == Cell::Gru) {
    std::vector<double> z(hn), reset(hn), reset_h(hn);
    for (size_t j = 0; j < hn; ++j) {
      z[j] = act[0](clipped(sum(0, j)));
      reset[j] = act[0](clipped(sum(1, j)));
      reset_h[j] = reset[j] * h[j];
    }
    // The candidate's recurrent term: r * (h Rh^T + Rbh) with
    // linear_before_reset, else (r * h) Rh^T + Rbh.
    std::vector<double> recur(hn);
    if (r.linear_before_reset)
      for (size_t j = 0; j < hn; ++j) recur[j] = reset[j] * hr[2 * hn + j];
    else
      recur = affine(wt.r, reset_h, wt.rb, 2 * hs, hs);
    for (size_t j = 0; j < hn; ++j) {
      double cand = act[1](clipped(xw[2 * hn + j] + recur[j]));
      h[j] = (1 - z[j]) * cand + z[j] * h[j];
    }
  } else {
    for (size_t j = 0; j < hn; ++j) {
      double i = act[0](clipped(sum(0, j) + wt.p[j] * c[j]));
      double f = r.input_forget ? 1 - i : act[0](clipped(sum(2, j) + wt.p[2 * hn + j] * c[j]));
      c[j] = f * c[j] + i * act[1](clipped(sum(3, j)));
      double o = act[0](clipped(sum(1, j) + wt.p[hn + j] * c[j]));
      h[j] = o * act[2](clipped(c[j]));
    }
  }
}

void expect_shape(const EvalContext& ctx, size_t i, const Dims& want) {
  const Tensor& t = ctx.input(i);
  if (dims_of(t.shape()) != want)
    ctx.fail("expected " + std::string(kInputNames[i]) + " of shape " + dims_str(want) + ", got " +
             shape_str(t.shape()));
}

// The input of a node's operand i of the ONNX op (X, W, R, ...), or null
// where absent; tcc::Recurrence has no W and reads its XW where X is.
class Operands {
 public:
  Operands(const EvalContext& ctx, bool projected) : ctx_(ctx), projected_(projected) {}
  const Tensor* operator()(size_t i) const {
    TCC_CHECK(!projected_ || i != kW) << "tcc::Recurrence has no W";
    const size_t at = projected_ && i > kW ? i - 1 : i;
    return ctx_.has_input(at) ? &ctx_.input(at) : nullptr;
  }
  bool projected() const { return projected_; }

 private:
  const EvalContext& ctx_;
  bool projected_;
};

// Every direction and batch row of the recurrence, from each step's input
// projection `project(d, t, b)` (X W^T + Wb, [gates * hidden]): Y, Y_h and
// Y_c in the layout of r.
std::vector<Tensor> run_recurrence(EvalContext& ctx, const Recurrent& r, const Operands& in, DType dt, int64_t seq,
                                   int64_t batch, int64_t hs,
                                   const std::function<std::vector<double>(int64_t, int64_t, int64_t)>& project) {
  const Tensor *lens = in(kSeqLens), *init_h = in(kInitH), *init_c = in(kInitC);
  Sizes s{seq, batch, 1, hs};
  Dims y_dims = y_shape(r, s), state_dims = state_shape(r, s);
  Tensor y(dt, *static_values(&y_dims)), y_h(dt, *static_values(&state_dims)), y_c = y_h.clone();
  // Flat offsets of Y's row (t, d, b) and a state's row (d, b).
  auto y_at = [&](int64_t t, int64_t d, int64_t b) {
    return (r.layout == 0 ? (t * r.directions + d) * batch + b : (b * seq + t) * r.directions + d) * hs;
  };
  auto state_at = [&](int64_t d, int64_t b) { return (r.layout == 0 ? d * batch + b : b * r.directions + d) * hs; };
  int64_t rows = r.gates * hs;
  for (int64_t d = 0; d < r.directions; ++d) {
    Weights wt{slice(in(kR), d * rows * hs, rows * hs), slice(in(kB), d * 2 * rows + rows, rows),
               slice(r.cell == Cell::Lstm ? in(kP) : nullptr, d * 3 * hs, 3 * hs)};
    for (int64_t b = 0; b < batch; ++b) {
      int64_t len = lens ? lens->get_i64(b) : seq;
      if (in.projected()) len = std::clamp<int64_t>(len, 0, seq);
      if (len < 0 || len > seq)
        ctx.fail("expected sequence_lens in [0, " + std::to_string(seq) + "], got " + std::to_string(len) +
                 " for batch entry " + std::to_string(b));
      if (len == 0) continue;
      std::vector<double> h = slice(init_h, state_at(d, b), hs), c = slice(init_c, state_at(d, b), hs);
      for (int64_t k = 0; k < len; ++k) {
        int64_t t = r.backward(d) ? len - 1 - k : k;
        step(r, r.activations[static_cast<size_t>(d)], wt, project(d, t, b), h, c);
        for (int64_t j = 0; j < hs; ++j) y.set_f64(y_at(t, d, b) + j, h[static_cast<size_t>(j)]);
      }
      for (int64_t j = 0; j < hs; ++j) {
        y_h.set_f64(state_at(d, b) + j, h[static_cast<size_t>(j)]);
        y_c.set_f64(state_at(d, b) + j, c[static_cast<size_t>(j)]);
      }
    }
  }
  std::vector<Tensor> outs = {y, y_h, y_c};
  outs.resize(ctx.num_outputs());
  return outs;
}

std::vector<Tensor> eval_recurrent(EvalContext& ctx, Cell cell) {
  const Node& n = ctx.node();
  Recurrent r = read_recurrent(n, cell);
  const Tensor& x = ctx.input(kX);
  const Tensor& rw = ctx.input(kR);
  expect_rank(n, kX, x.rank(), 3);
  expect_rank(n, kR, rw.rank(), 3);
  size_t seq_axis = static_cast<size_t>(r.layout);
  int64_t seq = x.shape()[seq_axis], batch = x.shape()[1 - seq_axis], in = x.shape()[2];
  int64_t hs = r.hidden_size.value_or(rw.shape()[2]);
  Sizes s{seq, batch, in, hs};
  for (size_t i = kW; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i)) expect_shape(ctx, i, input_shape(r, i, s));
  const Operands operands(ctx, false);
  const int64_t rows = r.gates * hs;
  // Per direction: W [rows, in] and Wb [rows].
  struct Projection {
    std::vector<double> w, wb;
  };
  std::vector<Projection> wt;
  for (int64_t d = 0; d < r.directions; ++d)
    wt.push_back(Projection{slice(&ctx.input(kW), d * rows * in, rows * in), slice(operands(kB), d * 2 * rows, rows)});
  // X's row (t, b) projected by direction d's W and Wb.
  auto project = [&](int64_t d, int64_t t, int64_t b) {
    const int64_t at = (r.layout == 0 ? t * batch + b : b * seq + t) * in;
    const Projection& w = wt[static_cast<size_t>(d)];
    return affine(w.w, slice(&x, at, in), w.wb, 0, rows);
  };
  return run_recurrence(ctx, r, operands, x.dtype(), seq, batch, hs, project);
}

// -------------------------------------------------------- tcc::Recurrence

Cell cell_of(const Node& n) {
  const std::string name = n.get_string("cell", "");
  for (int c = 0; c < 3; ++c)
    if (name == kCellNames[c]) return static_cast<Cell>(c);
  n.fail("expected cell 'RNN', 'GRU' or 'LSTM', got '" + name + "'");
}

// Y [seq, dirs, batch, hidden] and the states [dirs, batch, hidden] from XW [seq, batch, dirs * gates * hidden].
void infer_recurrence(InferContext& ctx) {
  const Node& n = ctx.node();
  Recurrent r = read_recurrent(n, cell_of(n));
  // XW, R, B, initial_h, initial_c and P of one dtype, f32 or f64; sequence_lens i32.
  require_one_dtype(ctx, 0, {1, 2, 4, 5, 6});
  const DType dt = ctx.input_type(0).dtype();
  if (dt != DType::F32 && dt != DType::F64) ctx.fail("expected XW of f32 or f64");
  if (ctx.has_input(3) && ctx.input_type(3).is_tensor() && ctx.input_type(3).dtype() != DType::I32)
    ctx.fail("expected sequence_lens of i32");
  if (!inputs_ranked(ctx, {0})) return;
  const Dims& xw = ctx.input_type(0).shape();
  if (xw.size() != 3 || !r.hidden_size) ctx.fail("expected XW of rank 3 and a hidden_size");
  Sizes s{xw[0], xw[1], Dim(1), Dim(*r.hidden_size)};
  if (!ctx.env().unify(xw[2], times(r.directions * r.gates, s.hidden), &n))
    ctx.fail("expected XW's last dim to be directions x gates x hidden_size, got " + dims_str(xw));
  expect_operand_shapes(ctx, r, s, true);
  ctx.set_output_type(0, Type::tensor(dt, ctx.env().canonical(y_shape(r, s))));
  for (size_t o = 1; o < ctx.num_outputs(); ++o)
    ctx.set_output_type(o, Type::tensor(dt, ctx.env().canonical(state_shape(r, s))));
}

std::vector<Tensor> eval_recurrence(EvalContext& ctx) {
  const Node& n = ctx.node();
  Recurrent r = read_recurrent(n, cell_of(n));
  const Tensor& xw = ctx.input(0);
  if (xw.rank() != 3 || !r.hidden_size) ctx.fail("expected XW of rank 3 and a hidden_size");
  const int64_t seq = xw.shape()[0], batch = xw.shape()[1], rows = r.gates * *r.hidden_size;
  auto project = [&](int64_t d, int64_t t, int64_t b) {
    return slice(&xw, (t * batch + b) * xw.shape()[2] + d * rows, rows);
  };
  return run_recurrence(ctx, r, Operands(ctx, true), xw.dtype(), seq, batch, *r.hidden_size, project);
}

// -------------------------------------------------------- Decomposition

// A node unrolled over its static sequence into kernels and library calls: one
// MatMul projects every step's input for all directions and gates, then each
// step adds MatMul(h, R^T) and the biases, slices out the gates and applies
// their activations (pointwise pieces, which fuse) in f32 (f64 for f64 X).
class Unroller {
 public:
  Unroller(Expansion& e, const Recurrent& r, DType dt, int64_t hidden) : e_(e), r_(r), dt_(dt), hidden_(hidden) {}

  Value* op(const std::string& piece, const std::string& op, const std::vector<Value*>& ins, const Dims& dims,
            std::map<std::string, Attribute> attrs = {}) {
    return e_.add(piece, op, ins, Type::tensor(dt_, dims), std::move(attrs));
  }

  // A 1-D i64 constant, one per list (Slice bounds recur at every step).
  Value* ints(const std::vector<int64_t>& values) {
    Value*& c = ints_[values];
    if (!c) c = e_.i64s("index", values);
    return c;
  }

  // A scalar of the compute dtype, one constant per value.
  Value* scalar(double v) {
    Value*& c = scalars_[v];
    if (!c) c = e_.scalar("scalar", v, dt_);
    return c;
  }

  Value* slice(const std::string& piece, Value* x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
               const std::vector<int64_t>& axes, const Dims& dims) {
    return op(piece, "Slice", {x, ints(starts), ints(ends), ints(axes)}, dims);
  }

  // Columns [from, to) of m [rows, columns].
  Value* columns(const std::string& piece, Value* m, int64_t from, int64_t to) {
    return slice(piece, m, {from}, {to}, {1}, {m->type().shape()[0], Dim(to - from)});
  }

  // Gate g's columns of v [batch, k * hidden].
  Value* gate(const std::string& piece, Value* v, int64_t g) {
    return slice(piece, v, {g * hidden_}, {(g + 1) * hidden_}, {1}, {v->type().shape()[0], Dim(hidden_)});
  }

  Value* concat(const std::string& piece, const std::vector<Value*>& vs, int64_t axis, const Dims& dims) {
    return vs.size() == 1 ? vs[0] : op(piece, "Concat", vs, dims, {{"axis", Attribute::of_int(axis)}});
  }

  // a(x), its input bounded by clip: the ONNX op of the activation's name
  // with its alpha and beta, or for Affine and ScaledTanh (no longer ONNX
  // ops) the scale and shift they stand for.
  Value* activate(const std::string& piece, const Activation& a, Value* x) {
    if (r_.clip) x = pointwise(piece + "_Clip", "Clip", {x, scalar(-*r_.clip), scalar(*r_.clip)});
    const std::string name = a.spec->name;
    if (name == "Affine") return add(piece + "_Add", mul(piece + "_Mul", x, scalar(a.alpha)), scalar(a.beta));
    if (name == "ScaledTanh") {
      Value* t = pointwise(piece + "_Tanh", "Tanh", {mul(piece + "_Mul", x, scalar(a.beta))});
      return mul(piece + "_Scale", t, scalar(a.alpha));
    }
    std::map<std::string, Attribute> attrs;
    if (a.spec->takes_alpha) attrs["alpha"] = Attribute::of_float(static_cast<float>(a.alpha));
    if (a.spec->takes_beta) attrs["beta"] = Attribute::of_float(static_cast<float>(a.beta));
    return pointwise(piece + "_" + name, name, {x}, std::move(attrs));
  }

  // h R^T + Rb, of R^T's columns.
  Value* recurrent(const std::string& piece, Value* h, Value* rt, Value* rb) {
    Dims out = {h->type().shape()[0], rt->type().shape()[1]};
    Value* y = op(piece + "_MatMul", "MatMul", {h, rt}, out);
    return rb ? op(piece + "_Add_Rb", "Add", {y, rb}, out) : y;
  }

  // A pointwise piece of the compute dtype: its operands broadcast (a
  // missing initial state is zeros [1, hidden] until the first step).
  Value* pointwise(const std::string& piece, const std::string& op, const std::vector<Value*>& ins,
                   std::map<std::string, Attribute> attrs = {}) {
    return e_.add(piece, op, ins, Type::tensor(dt_, broadcast_of(ins)), std::move(attrs));
  }
  Value* add(const std::string& piece, Value* a, Value* b) { return pointwise(piece, "Add", {a, b}); }
  Value* mul(const std::string& piece, Value* a, Value* b) { return pointwise(piece, "Mul", {a, b}); }
  Value* sub(const std::string& piece, Value* a, Value* b) { return pointwise(piece, "Sub", {a, b}); }
  Value* where(const std::string& piece, Value* mask, Value* a, Value* b) {
    return pointwise(piece, "Where", {mask, a, b});
  }

 private:
  Expansion& e_;
  const Recurrent& r_;
  DType dt_;
  int64_t hidden_;
  std::map<double, Value*> scalars_;
  std::map<std::vector<int64_t>, Value*> ints_;
};

// One direction's weights as pieces: R^T [hidden, gates * hidden], Rb
// [1, gates * hidden] and the peepholes i, o, f [1, hidden] each (null when
// absent). A GRU without linear_before_reset multiplies R_h by r * h apart:
// rt and rb then hold z and r's columns, rt_h and rb_h h's.
struct StepWeights {
  Value* rt = nullptr;
  Value* rb = nullptr;
  Value* rt_h = nullptr;
  Value* rb_h = nullptr;
  std::vector<Value*> p;
};

// The states after step `tag` of one direction, from xw (the step's input
// projection with Wb, [batch, gates * hidden]), as the reference's step().
void unrolled_step(Unroller& u, const Recurrent& r, const std::vector<Activation>& act, const StepWeights& wt,
                   const std::string& tag, Value* xw, Value*& h, Value*& c) {
  auto piece = [&](const std::string& what) { return tag + "/" + what; };
  if (r.cell == Cell::Rnn) {
    h = u.activate(piece("f"), act[0], u.add(piece("Add"), xw, u.recurrent(piece("R"), h, wt.rt, wt.rb)));
  } else if (r.cell == Cell::Gru) {
    Value* hr = u.recurrent(piece("R"), h, wt.rt, wt.rb);
    auto sum = [&](const std::string& name, int64_t g) {
      return u.add(piece("Add_" + name), u.gate(piece("Slice_x" + name), xw, g),
                   u.gate(piece("Slice_h" + name), hr, g));
    };
    Value* z = u.activate(piece("f_z"), act[0], sum("z", 0));
    Value* reset = u.activate(piece("f_r"), act[0], sum("r", 1));
    // The candidate's recurrent term: r * (h Rh^T + Rbh) with
    // linear_before_reset, else (r * h) Rh^T + Rbh.
    Value* recur = r.linear_before_reset
                       ? u.mul(piece("Mul_reset"), reset, u.gate(piece("Slice_hh"), hr, 2))
                       : u.recurrent(piece("Rh"), u.mul(piece("Mul_reset"), reset, h), wt.rt_h, wt.rb_h);
    Value* cand = u.activate(piece("g"), act[1], u.add(piece("Add_h"), u.gate(piece("Slice_xh"), xw, 2), recur));
    // (1 - z) * cand + z * h
    h = u.add(piece("Add_state"), cand, u.mul(piece("Mul_z"), z, u.sub(piece("Sub_state"), h, cand)));
  } else {
    Value* s = u.add(piece("Add"), xw, u.recurrent(piece("R"), h, wt.rt, wt.rb));
    // Gate g's sum, plus the peephole term P_g * state when P is given.
    auto pre = [&](const std::string& name, int64_t g, size_t peephole, Value* state) {
      Value* v = u.gate(piece("Slice_" + name), s, g);
      if (wt.p.empty()) return v;
      return u.add(piece("Add_p" + name), v, u.mul(piece("Mul_p" + name), wt.p[peephole], state));
    };
    Value* i = u.activate(piece("f_i"), act[0], pre("i", 0, 0, c));
    Value* f =
        r.input_forget ? u.sub(piece("Sub_f"), u.scalar(1), i) : u.activate(piece("f_f"), act[0], pre("f", 2, 2, c));
    Value* g = u.activate(piece("g"), act[1], u.gate(piece("Slice_c"), s, 3));
    c = u.add(piece("Add_c"), u.mul(piece("Mul_fc"), f, c), u.mul(piece("Mul_ig"), i, g));
    Value* o = u.activate(piece("f_o"), act[0], pre("o", 1, 1, c));
    h = u.mul(piece("Mul_h"), o, u.activate(piece("h"), act[2], c));
  }
}

// Output o (Y, Y_h, Y_c) from v, in layout 0 and the compute dtype: in the
// node's layout and dtype, taking over the node's output.
void take_output(Expansion& e, const Recurrent& r, size_t o, Value* v) {
  const Node& n = e.node();
  const std::vector<int64_t> batch_first = o == 0 ? std::vector<int64_t>{2, 0, 1, 3} : std::vector<int64_t>{1, 0, 2};
  if (r.layout == 1)
    v = e.add("Transpose_" + std::string(kOutputNames[o]), "Transpose", {v},
              Type::tensor(v->type().dtype(), n.output(o)->type().shape()),
              {{"perm", Attribute::of_ints(batch_first)}});
  e.take_over(o, e.cast("Cast_" + std::string(kOutputNames[o]), v, n.input(kX)->type().dtype()));
}

// The recurrence as one tcc::Recurrence, the persistent kernel, over every
// step's projection xw [seq, batch, dirs * gates * hidden] (`in`: the node's
// inputs in the compute dtype dt), its initial states in layout 0.
void persistent_recurrence(Expansion& e, const Recurrent& r, Cell cell, Value* xw,
                           const std::function<Value*(size_t)>& in, DType dt, int64_t hs) {
  const Node& n = e.node();
  const Dim seq = xw->type().shape()[0], batch = xw->type().shape()[1], dirs(r.directions), hidden(hs);
  const Dims state = {dirs, batch, hidden};
  auto layout0 = [&](size_t i) {
    Value* v = in(i);
    if (!v || r.layout == 0) return v;
    return e.add("Transpose_" + std::string(kInputNames[i]), "Transpose", {v}, Type::tensor(dt, state),
                 {{"perm", Attribute::of_ints({1, 0, 2})}});
  };
  std::map<std::string, Attribute> attrs = n.attrs();
  attrs.erase("layout");
  attrs["cell"] = Attribute::of_string(kCellNames[static_cast<int>(cell)]);
  attrs["hidden_size"] = Attribute::of_int(hs);
  std::vector<Value*> ins = {xw, in(kR), in(kB), n.input(kSeqLens), layout0(kInitH)};
  if (cell == Cell::Lstm) ins.insert(ins.end(), {layout0(kInitC), in(kP)});
  while (ins.back() == nullptr) ins.pop_back();
  std::vector<Type> types = {Type::tensor(dt, {seq, dirs, batch, hidden}), Type::tensor(dt, state)};
  if (cell == Cell::Lstm) types.push_back(Type::tensor(dt, state));
  std::vector<Value*> outs = e.add_outputs("Recurrence", "Recurrence", ins, types, std::move(attrs),
                                           std::string(kTccDomain));
  for (size_t o = 0; o < outs.size(); ++o)
    if (o < n.num_outputs() && e.used(n.output(o))) take_output(e, r, o, outs[o]);
}

// A static sequence of up to kUnrolledSteps steps unrolls: a MatMul over the
// batch and a few pointwise kernels a step, launches that cost little over so
// few steps, and pieces autodiff differentiates (training always unrolls).
// A longer or symbolic one runs the persistent kernel, one launch whose
// states never leave shared memory, where its hidden size fits
// (recurrence_shared_elements); a symbolic one that does not stays a host step.
constexpr int64_t kUnrolledSteps = 16;

// Declines opsets before 11 (Slice and Clip take their bounds as inputs from
// there on): such nodes stay host steps. Unrolled, with sequence_lens, a
// row's steps at or past its length keep its states and write zeros to Y, and
// a length of 0 leaves zero final states, as the reference does; a backward
// direction, whose rows each start at their own last step, runs forward over
// each row's first `length` steps reversed (ReverseSequence, which decomposes
// in turn) and reverses its Y back.
bool decompose_recurrent(Expansion& e, Cell cell) {
  const Node& n = e.node();
  const Type& xt = n.input(kX)->type();
  const Type& yt = n.output(0)->type();
  if (e.onnx_opset() < 11 || !xt.is_tensor() || !xt.has_rank() || xt.rank() != 3 || !is_float(xt.dtype()) ||
      !yt.is_tensor() || !yt.has_rank())
    return false;
  Recurrent r = read_recurrent(n, cell);
  Value* lens = n.input(kSeqLens);
  const size_t seq_axis = static_cast<size_t>(r.layout);
  const Dim seq_dim = xt.shape()[seq_axis], batch = xt.shape()[1 - seq_axis];
  const Dim input = xt.shape()[2], hidden_dim = yt.shape().back();
  if ((seq_dim.is_static() && seq_dim.value() == 0) || !input.is_static() || !hidden_dim.is_static()) return false;
  const int64_t hs = hidden_dim.value(), dirs = r.directions, rows = r.gates * hs;
  const DType dt = xt.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const bool persistent =
      !e.differentiates() && (!seq_dim.is_static() || seq_dim.value() > kUnrolledSteps) &&
      recurrence_shared_elements(cell, hs, r.linear_before_reset) * static_cast<int64_t>(dtype_size(dt)) <=
          kRecurrenceSharedBytes;
  if (!seq_dim.is_static() && !persistent) return false;
  Unroller u(e, r, dt, hs);
  // Input i in the compute dtype (null when absent), cast once.
  std::map<size_t, Value*> cast_inputs;
  auto in = [&](size_t i) {
    Value*& v = cast_inputs[i];
    if (!v && n.input(i)) v = e.cast("Cast_" + std::string(kInputNames[i]), n.input(i), dt);
    return v;
  };

  // Every step's input projection X W^T + Wb: [seq, batch, dirs * rows].
  Value* x = in(kX);
  if (r.layout == 1)
    x = u.op("Transpose_X", "Transpose", {x}, {seq_dim, batch, input}, {{"perm", Attribute::of_ints({1, 0, 2})}});
  Value* w = e.reshape("Reshape_W", in(kW), {dirs * rows, input});
  Value* wt = u.op("Transpose_W", "Transpose", {w}, {input, dirs * rows}, {{"perm", Attribute::of_ints({1, 0})}});
  Value* xw = u.op("MatMul_X", "MatMul", {x, wt}, {seq_dim, batch, dirs * rows});
  Value* b = in(kB);
  if (b) {
    Value* wb = e.reshape("Reshape_Wb", u.slice("Slice_Wb", b, {0}, {rows}, {1}, {dirs, rows}), {dirs * rows});
    xw = u.op("Add_Wb", "Add", {xw, wb}, {seq_dim, batch, dirs * rows});
  }
  if (persistent) {
    persistent_recurrence(e, r, cell, xw, in, dt, hs);
    return true;
  }
  const int64_t seq = seq_dim.value();
  // Row d of a state input [dirs, batch, hidden] (batch first in layout 1),
  // or zeros [1, hidden] that the first step broadcasts.
  Value* zeros = nullptr;
  auto initial = [&](size_t i, int64_t d) {
    Value* v = in(i);
    if (!v) {
      if (!zeros) zeros = e.constant("zeros", Tensor(dt, {1, hs}));
      return zeros;
    }
    Dims one = r.layout == 0 ? Dims{1, batch, hs} : Dims{batch, 1, hs};
    return e.reshape("Reshape_" + std::string(kInputNames[i]),
                     u.slice("Slice_" + std::string(kInputNames[i]), v, {d}, {d + 1}, {r.layout}, one), {batch, hs});
  };
  // Whether step t is within each row's length: [batch, 1].
  auto valid = [&](int64_t t) {
    Value* less = e.add("Less", "Less", {e.scalar("t", static_cast<double>(t), lens->type().dtype()), lens},
                        Type::tensor(DType::Bool, {batch}));
    return e.reshape("Reshape_valid", less, {batch, 1});
  };
  Value* first_valid = lens ? valid(0) : nullptr;
  Value* lens64 = nullptr;
  auto reverse_rows = [&](const std::string& piece, Value* v) {
    if (!lens64) lens64 = e.cast("Cast_sequence_lens", lens, DType::I64);
    return e.add(piece, "ReverseSequence", {v, lens64}, v->type(),
                 {{"batch_axis", Attribute::of_int(1)}, {"time_axis", Attribute::of_int(0)}});
  };

  auto used = [&](size_t o) { return o < n.num_outputs() && e.used(n.output(o)); };
  const bool want_y = used(0);
  std::vector<Value*> ys(static_cast<size_t>(dirs)), final_h, final_c;
  for (int64_t d = 0; d < dirs; ++d) {
    const std::string dir = "d" + std::to_string(d);
    StepWeights sw;
    Value* rd =
        e.reshape(dir + "/Reshape_R", u.slice(dir + "/Slice_R", in(kR), {d}, {d + 1}, {0}, {1, rows, hs}), {rows, hs});
    sw.rt = u.op(dir + "/Transpose_R", "Transpose", {rd}, {hs, rows}, {{"perm", Attribute::of_ints({1, 0})}});
    if (b) sw.rb = u.slice(dir + "/Slice_Rb", b, {d, rows}, {d + 1, 2 * rows}, {0, 1}, {1, rows});
    if (cell == Cell::Gru && !r.linear_before_reset) {
      sw.rt_h = u.columns(dir + "/Slice_R_h", sw.rt, 2 * hs, rows);
      sw.rt = u.columns(dir + "/Slice_R_zr", sw.rt, 0, 2 * hs);
      if (b) {
        sw.rb_h = u.columns(dir + "/Slice_Rb_h", sw.rb, 2 * hs, rows);
        sw.rb = u.columns(dir + "/Slice_Rb_zr", sw.rb, 0, 2 * hs);
      }
    }
    if (cell == Cell::Lstm && n.input(kP))
      for (int64_t g = 0; g < 3; ++g)
        sw.p.push_back(u.slice(dir + "/Slice_P", in(kP), {d, g * hs}, {d + 1, (g + 1) * hs}, {0, 1}, {1, hs}));
    Value* h = initial(kInitH, d);
    Value* c = initial(kInitC, d);
    const bool rows_reversed = lens && r.backward(d);
    Value* source = rows_reversed ? reverse_rows(dir + "/ReverseSequence_x", xw) : xw;
    std::vector<Value*> steps(static_cast<size_t>(seq));
    for (int64_t k = 0; k < seq; ++k) {
      const int64_t t = r.backward(d) && !rows_reversed ? seq - 1 - k : k;
      const std::string tag = dir + "/t" + std::to_string(t);
      Value* xw_t =
          e.reshape(tag + "/Reshape_x",
                    u.slice(tag + "/Slice_x", source, {t, d * rows}, {t + 1, (d + 1) * rows}, {0, 2}, {1, batch, rows}),
                    {batch, Dim(rows)});
      Value* prev_h = h;
      Value* prev_c = c;
      unrolled_step(u, r, r.activations[static_cast<size_t>(d)], sw, tag, xw_t, h, c);
      steps[static_cast<size_t>(t)] = h;
      if (lens) {
        Value* mask = t == 0 ? first_valid : valid(t);
        if (want_y) steps[static_cast<size_t>(t)] = u.where(tag + "/Where_y", mask, h, u.scalar(0));
        h = u.where(tag + "/Where_h", mask, h, prev_h);
        if (cell == Cell::Lstm) c = u.where(tag + "/Where_c", mask, c, prev_c);
      }
    }
    if (lens) {
      h = u.where(dir + "/Where_final_h", first_valid, h, u.scalar(0));
      if (cell == Cell::Lstm) c = u.where(dir + "/Where_final_c", first_valid, c, u.scalar(0));
    }
    if (want_y) {
      for (Value*& s : steps) s = e.reshape(dir + "/Reshape_y", s, {1, 1, batch, hs});
      Value* y = u.concat(dir + "/Concat_y", steps, 0, {seq, 1, batch, hs});
      if (rows_reversed)
        y = e.reshape(dir + "/Reshape_y_reversed",
                      reverse_rows(dir + "/ReverseSequence_y", e.reshape(dir + "/Reshape_y_rows", y, {seq, batch, hs})),
                      {seq, 1, batch, hs});
      ys[static_cast<size_t>(d)] = y;
    }
    final_h.push_back(h);
    final_c.push_back(c);
  }

  // The directions' final states [dirs, batch, hidden].
  auto stacked = [&](size_t o, std::vector<Value*> states) {
    const std::string name = kOutputNames[o];
    for (Value*& s : states) s = e.reshape("Reshape_" + name, s, {1, batch, hs});
    return u.concat("Concat_" + name, states, 0, {dirs, batch, hs});
  };
  if (want_y) take_output(e, r, 0, u.concat("Concat_Y", ys, 1, {seq, dirs, batch, hs}));
  if (used(1)) take_output(e, r, 1, stacked(1, final_h));
  if (cell == Cell::Lstm && used(2)) take_output(e, r, 2, stacked(2, final_c));
  return true;
}

OpDef recurrent_op(const char* name, Cell cell) {
  OpDef def{"", name, 7, 0, [cell](InferContext& ctx) { infer_recurrent(ctx, cell); },
             [cell](EvalContext& ctx) { return eval_recurrent(ctx, cell); }, kTypes};
  def.decomposition([cell](Expansion& e) { return decompose_recurrent(e, cell); }).trains_through_decomposition();
  return def;
}

}  // namespace

RecurrenceAttrs recurrence_attrs(const Node& n) {
  const Recurrent r = read_recurrent(n, cell_of(n));
  if (!r.hidden_size) n.fail("expected a hidden_size");
  RecurrenceAttrs a;
  a.cell = r.cell;
  a.directions = r.directions;
  a.reverse = r.reverse;
  a.hidden = *r.hidden_size;
  a.clip = r.clip;
  a.linear_before_reset = r.linear_before_reset;
  a.input_forget = r.input_forget;
  return a;
}

int recurrence_activation(const Node& n, int64_t d, int64_t f, ScalarBuilder& b, DType t, int x) {
  const Recurrent r = read_recurrent(n, cell_of(n));
  const Activation& a = r.activations.at(static_cast<size_t>(d)).at(static_cast<size_t>(f));
  return a.spec->kernel(b, t, x, a.alpha, a.beta);
}

int64_t recurrence_shared_elements(RecurrentCell cell, int64_t hidden, bool linear_before_reset) {
  const int64_t states = cell == Cell::Lstm ? 2 : 1;
  const int64_t reset_h = cell == Cell::Gru && !linear_before_reset ? 1 : 0;
  return (states + recurrent_gates(cell) + reset_h) * hidden;
}

// The ONNX ops have no kernel role: they decompose into MatMuls and kernels
// (above), tcc::Recurrence into the persistent kernel. No gradient rule.
void register_recurrent_ops(OpRegistry& r) {
  r.add(recurrent_op("RNN", Cell::Rnn));
  r.add(recurrent_op("GRU", Cell::Gru));
  r.add(recurrent_op("LSTM", Cell::Lstm));
  r.add(OpDef{std::string(kTccDomain), "Recurrence", 1, 0, infer_recurrence, eval_recurrence,
              {DType::F32, DType::F64, DType::I32}})
      .kernel_role(KernelRole::Recurrence);
}

}  // namespace tcc
