// Gemm and conv kernels: the cuBLASLt or cuDNN call a body computes, with the
// epilogue (bias, residual, activation) the library applies (lowering.h).
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "codegen/lowering.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc::lowering {

Lowering::Batch Lowering::batch_kind(const std::vector<SymExpr>& dims) {
  return std::all_of(dims.begin(), dims.end(), is_one) ? Batch::None : Batch::Full;
}

void Lowering::setup_gemm() {
  k_.kind = kir::Kind::Gemm;
  const Node* mm = nullptr;
  for (const auto& n : body_.nodes())
    if (kernel_role(*n) == KernelRole::Contraction) mm = n.get();
  TCC_CHECK(mm != nullptr) << "verify_fusion passed a gemm body without a contraction";
  const Value* a = mm->input(0);
  const Value* b = mm->input(1);
  std::vector<SymExpr> as = shape_of(a), bs = shape_of(b), out = shape_of(mm->output(0));
  kir::GemmDesc g;
  // An operand is a body input, or a body input read transposed (swaps_last_two_axes).
  auto operand = [&](const Value* v, bool& transposed) {
    const Node* t = v->producer();
    transposed = !is_body_input(v) && t != nullptr && swaps_last_two_axes(*t) && is_body_input(t->input(0));
    if (transposed) return input_buffer(t->input(0));
    if (!is_body_input(v)) fail(mm, "its operands are not body inputs");
    return input_buffer(v);
  };
  g.a = operand(a, g.trans_a);
  g.b = operand(b, g.trans_b);
  SymExpr m, n, kk;
  std::vector<int> out_to_domain;
  if (mm->op_type() == "Gemm") {
    if (as.size() != 2 || bs.size() != 2) fail(mm, "Gemm operands are not matrices");
    g.trans_a = mm->get_int("transA", 0) != 0;
    g.trans_b = mm->get_int("transB", 0) != 0;
    g.alpha = mm->get_float("alpha", 1.0f);
    m = as[g.trans_a ? 1 : 0];
    kk = as[g.trans_a ? 0 : 1];
    n = bs[g.trans_b ? 0 : 1];
    k_.domain = {m, n};
    out_to_domain = {0, 1};
  } else {
    // A 1-D operand is a matrix with one row (A) or one column (B) whose axis the output drops.
    std::vector<SymExpr> a_batch, b_batch;
    if (as.size() >= 2) a_batch.assign(as.begin(), as.end() - 2);
    if (bs.size() >= 2) b_batch.assign(bs.begin(), bs.end() - 2);
    m = as.size() >= 2 ? as[as.size() - 2] : c(1);
    kk = as.back();
    n = bs.size() >= 2 ? bs.back() : c(1);
    size_t batch_rank = out.size() - (as.size() >= 2 ? 1 : 0) - (bs.size() >= 2 ? 1 : 0);
    k_.domain.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(batch_rank));
    out_to_domain = iota(batch_rank);
    if (as.size() >= 2) out_to_domain.push_back(static_cast<int>(batch_rank));
    if (bs.size() >= 2) out_to_domain.push_back(static_cast<int>(batch_rank) + 1);
    k_.domain.push_back(m);
    k_.domain.push_back(n);
    std::vector<SymExpr> domain_batch(k_.domain.begin(), k_.domain.end() - 2);
    Batch ab = batch_kind(a_batch), bb = batch_kind(b_batch);
    SymExpr batch = product(domain_batch, 0, domain_batch.size());
    if (bb == Batch::None && ab == Batch::Full && !g.trans_a) {
      // B is shared by the whole batch: one gemm over every row of A.
      m = batch * m;
    } else {
      g.batch = batch;
      if (!is_one(batch)) {
        g.stride_a = ab == Batch::Full ? m * kk : SymExpr();
        g.stride_b = bb == Batch::Full ? kk * n : SymExpr();
        g.stride_d = m * n;
      }
    }
  }
  g.m = m;
  g.n = n;
  g.k = kk;
  g.lda = g.trans_a ? m : kk;
  g.ldb = g.trans_b ? kk : n;
  g.ldd = n;
  frames_.push_back(Frame{out, out_to_domain});
  int acc = emit(Op::MatMulAcc, mm->output(0)->type().dtype(), {});
  values_.emplace(std::make_pair(mm->output(0), 0), gemm_result(*mm, acc, g));
  describe_epilogue(*mm, g);
  k_.gemm = g;
}

// The contraction's own result: Gemm scales by alpha and adds beta * C.
int Lowering::gemm_result(const Node& mm, int acc, kir::GemmDesc& g) {
  if (mm.op_type() != "Gemm") return acc;
  DType dt = mm.output(0)->type().dtype();
  int r = acc;
  if (g.alpha != 1) r = emit(Op::Mul, dt, {r, constant(dt, g.alpha)});
  if (!mm.has_input(2)) return r;
  double beta = mm.get_float("beta", 1.0f);
  const Value* cv = mm.input(2);
  if (!is_body_input(cv)) fail(&mm, "C is not a body input");
  int cl = lower(cv, 0);
  if (add_to_gemm(mm, cv, g) == Addend::Bias) {
    if (beta != 1) fail(&mm, "scales a bias C by beta, which cuBLASLt's bias epilogue cannot");
  } else {
    g.beta = beta;
  }
  if (beta != 1) cl = emit(Op::Mul, dt, {cl, constant(dt, beta)});
  return emit(Op::Add, dt, {r, cl});
}

// Records an addend of the product in g: a residual (C, the output's shape)
// or a bias along N.
Lowering::Addend Lowering::add_to_gemm(const Node& at, const Value* v, kir::GemmDesc& g) {
  if (!is_body_input(v)) fail(&at, "adds '" + v->name() + "', which is not a body input");
  if (shape_of(v) == frames_[0].shape) {
    if (g.residual >= 0) fail(&at, "adds a second residual");
    g.residual = input_buffer(v);
    g.beta = 1;
    return Addend::Residual;
  }
  std::vector<int> map = axis_map(v, 0);
  int n_axis = static_cast<int>(k_.domain.size()) - 1;
  if (!std::all_of(map.begin(), map.end(), [&](int d) { return d < 0 || d == n_axis; }))
    fail(&at, "adds '" + v->name() + "', which is neither a bias along N nor the output's shape");
  // cuBLASLt reads N bias values: one broadcast along N (a scalar C) would be read past its end.
  if (!is_one(g.n) && std::find(map.begin(), map.end(), n_axis) == map.end())
    fail(&at, "adds '" + v->name() + "', which is broadcast along N; cuBLASLt's bias holds one value per column");
  if (g.bias >= 0) fail(&at, "adds a second bias");
  g.bias = input_buffer(v);
  return Addend::Bias;
}

// Checks that the epilogue is what cuBLASLt applies, D = act(AB + C + bias),
// and fills in bias, residual and activation.
void Lowering::describe_epilogue(const Node& mm, kir::GemmDesc& g) {
  walk_epilogue(mm, "cuBLASLt", [&](const Node& u, const Value* v) { add_to_gemm(u, v, g); },
                [&](const Node& u) { g.activation = activation(u, "cuBLASLt", kGemmEpilogue); });
}

std::string Lowering::activation(const Node& u, const std::string& library, uint32_t epilogue) {
  std::string name = epilogue_activation(u, epilogue);
  if (!name.empty()) return name;
  std::string what = epilogue_refusal(u, epilogue);
  fail(&u, what.empty() ? "is not an epilogue " + library + " applies" : "is " + what);
}

void Lowering::setup_conv() {
  k_.kind = kir::Kind::Conv;
  const Node* cv = nullptr;
  for (const auto& n : body_.nodes())
    if (kernel_role(*n) == KernelRole::Convolution) cv = n.get();
  TCC_CHECK(cv != nullptr) << "verify_fusion passed a conv body without a convolution";
  ConvWindow win;
  if (std::string why = conv_window(*cv, &win); !why.empty()) fail(cv, why);
  const Value* x = cv->input(0);
  const Value* w = cv->input(1);
  if (!is_body_input(x) || !is_body_input(w)) fail(cv, "X or W is not a body input");
  std::vector<SymExpr> xs = shape_of(x), out = shape_of(cv->output(0));
  kir::ConvDesc d;
  d.x = input_buffer(x);
  d.w = input_buffer(w);
  d.n = xs[0];
  d.c = xs[1];
  d.k = out[1];
  d.in.assign(xs.begin() + 2, xs.end());
  d.out.assign(out.begin() + 2, out.end());
  d.kernel = win.kernel;
  d.strides = win.strides;
  d.dilations = win.dilations;
  d.pads = win.pads;
  d.groups = win.groups;
  k_.domain = out;
  frames_.push_back(Frame{out, iota(out.size())});
  DType dt = cv->output(0)->type().dtype();
  int result = emit(Op::ConvAcc, dt, {});
  if (cv->has_input(2)) {
    // B has one value per output channel: a load along domain axis 1.
    const Value* b = cv->input(2);
    if (!is_body_input(b)) fail(cv, "B is not a body input");
    d.bias = input_buffer(b);
    Instr in;
    in.op = Op::Load;
    in.dtype = dt;
    in.buffer = d.bias;
    in.index.strides.assign(out.size(), SymExpr());
    in.index.strides[1] = c(1);
    result = emit(Op::Add, dt, {result, emit(std::move(in))});
  }
  values_.emplace(std::make_pair(cv->output(0), 0), result);
  walk_epilogue(*cv, "cuDNN", [&](const Node& u, const Value* v) { add_to_conv(u, v, d); },
                [&](const Node& u) { d.activation = activation(u, "cuDNN", kConvEpilogue); });
  k_.conv = d;
}

// Records an addend of the convolution in d: a residual of the output's
// shape, or a bias with one value per output channel.
void Lowering::add_to_conv(const Node& at, const Value* v, kir::ConvDesc& d) {
  if (!is_body_input(v)) fail(&at, "adds '" + v->name() + "', which is not a body input");
  std::vector<SymExpr> shape = shape_of(v);
  if (shape == frames_[0].shape) {
    if (d.residual >= 0) fail(&at, "adds a second residual");
    d.residual = input_buffer(v);
    return;
  }
  std::vector<int> map = axis_map(v, 0);
  if (!std::all_of(map.begin(), map.end(), [](int a) { return a < 0 || a == 1; }) ||
      product(shape, 0, shape.size()) != d.k)
    fail(&at, "adds '" + v->name() + "', which is neither a bias per channel nor the output's shape");
  if (d.bias >= 0) fail(&at, "adds a second bias");
  d.bias = input_buffer(v);
}

}  // namespace tcc::lowering
