// Contractions: MatMul (NumPy semantics), MatMulInteger and Gemm; and Det,
// the determinants of a batch of square matrices. (Einsum is in einsum.cc.)
//
// Shape rules unify the contracted dims symbolically, so a model whose K dims
// are `hidden` and `768` teaches hidden == 768. Kernels are plain index loops
// accumulating in double (floats) or int64 (integers).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "src/ops/families.h"
#include "src/ops/int8_product.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// True when input i is a tensor of known rank (absent optional inputs count).
// Inputs of unknown rank (an If whose branches disagree, say) make the result
// unranked rather than an error.
bool ranked(const InferContext& ctx, size_t i) {
  const Type& t = ctx.input_type(i);
  return !ctx.has_input(i) || (t.is_tensor() && t.has_rank());
}

// Requires a == b for a contracted dimension; `what` names it in the error.
void unify_or_fail(InferContext& ctx, const Dim& a, const Dim& b, const std::string& what) {
  if (!ctx.env().unify(a, b, &ctx.node()))
    ctx.fail("expected equal " + what + ", got " + a.str() + " and " + b.str());
}

}  // namespace

// ---------------------------------------------------------------------------
// MatMul: 1-D operands are promoted (a vector A as [1, K], a vector B as
// [K, 1]) and the promoted dim is dropped from the result; batch dims broadcast.

Dims matmul_dims(InferContext& ctx, size_t ia, size_t ib) {
  Dims a = ctx.ranked_input(ia).shape();
  Dims b = ctx.ranked_input(ib).shape();
  if (a.empty() || b.empty()) ctx.fail("MatMul operands must have rank >= 1, got a scalar");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), Dim(1));
  if (b_vec) b.push_back(Dim(1));
  unify_or_fail(ctx, a[a.size() - 1], b[b.size() - 2], "contraction dims (A's last, B's second to last)");
  Dims out = broadcast_dims(ctx, {Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2)});
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b[b.size() - 1]);
  return ctx.env().canonical(out);
}

Tensor matmul_compute(const Node& n, const Tensor& at, const Tensor& bt, DType out_dtype) {
  std::vector<int64_t> a = at.shape(), b = bt.shape();
  if (a.empty() || b.empty()) n.fail("MatMul operands must have rank >= 1, got a scalar");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1);
  if (b_vec) b.push_back(1);
  int64_t m = a[a.size() - 2], k = a[a.size() - 1], k2 = b[b.size() - 2], nn = b[b.size() - 1];
  if (k != k2)
    n.fail("expected equal contraction dims, got A " + shape_str(at.shape()) + " and B " + shape_str(bt.shape()));
  std::vector<int64_t> a_batch(a.begin(), a.end() - 2), b_batch(b.begin(), b.end() - 2);
  std::vector<int64_t> batch = broadcast_shapes(n, {a_batch, b_batch});
  BroadcastIndexer a_at(batch, a_batch), b_at(batch, b_batch);
  std::vector<int64_t> out_shape = batch;
  if (!a_vec) out_shape.push_back(m);
  if (!b_vec) out_shape.push_back(nn);
  Tensor out(out_dtype, out_shape);
  int64_t batches = checked_numel(batch);
  bool exact_int = !is_float(at.dtype()) && !is_float(bt.dtype());
  for (int64_t p = 0; p < batches; ++p) {
    int64_t a0 = a_at(p) * m * k, b0 = b_at(p) * k * nn, o0 = p * m * nn;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < nn; ++j) {
        if (exact_int) {
          int64_t acc = 0;
          for (int64_t q = 0; q < k; ++q) acc += at.get_i64(a0 + i * k + q) * bt.get_i64(b0 + q * nn + j);
          out.set_i64(o0 + i * nn + j, acc);
        } else {
          double acc = 0;
          for (int64_t q = 0; q < k; ++q) acc += at.get_f64(a0 + i * k + q) * bt.get_f64(b0 + q * nn + j);
          out.set_f64(o0 + i * nn + j, acc);
        }
      }
  }
  return out;
}

int64_t row_axis(const Tensor& a) { return a.rank() >= 2 ? static_cast<int64_t>(a.rank()) - 2 : -1; }
int64_t column_axis(const Tensor& b) { return b.rank() >= 2 ? static_cast<int64_t>(b.rank()) - 1 : -1; }

Tensor subtract_zero_point(const EvalContext& ctx, size_t xi, size_t zi, int64_t axis) {
  const Tensor& x = ctx.input(xi);
  Tensor out(DType::I64, x.shape());
  const Tensor* zp = ctx.has_input(zi) ? &ctx.input(zi) : nullptr;
  int64_t extent = axis >= 0 ? x.shape().at(axis) : 1;
  int64_t inner = axis >= 0 ? product(x.shape(), axis + 1) : 1;
  if (zp && zp->numel() != 1 && zp->numel() != extent)
    ctx.fail("zero point " + std::to_string(zi) + " must be a scalar or have " + std::to_string(extent) +
             " elements, got shape " + shape_str(zp->shape()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t z = 0;
    if (zp) z = zp->numel() == 1 ? zp->get_i64(0) : zp->get_i64((i / inner) % extent);
    out.set_i64(i, x.get_i64(i) - z);
  }
  return out;
}

bool zero_point_fits(const Node& n, size_t xi, size_t zi, int64_t axis) {
  const Type& x = n.input(xi)->type();
  if (!x.is_tensor() || !x.fully_shaped()) return false;
  if (!n.has_input(zi)) return true;
  const Type& z = n.input(zi)->type();
  if (!z.is_tensor() || !z.has_rank()) return false;
  if (single_element(z)) return true;
  return axis >= 0 && z.rank() == 1 && z.shape()[0] == x.shape()[static_cast<size_t>(axis)];
}

Value* zero_point_shifted(Expansion& e, size_t xi, size_t zi, int64_t axis) {
  const Node& n = e.node();
  const std::string tag = std::to_string(xi);
  Value* x = e.cast("Cast_" + tag, n.input(xi), DType::F64);
  if (!n.has_input(zi)) return x;
  Value* z = e.cast("Cast_zero_point_" + tag, n.input(zi), DType::F64);
  const Dims& dims = x->type().shape();
  // One per index along a middle axis: viewed with ones after it to broadcast there.
  if (!single_element(n.input(zi)->type()) && static_cast<size_t>(axis) + 1 < dims.size()) {
    Dims along(dims.size() - static_cast<size_t>(axis), Dim(1));
    along[0] = dims[static_cast<size_t>(axis)];
    z = e.reshape("Reshape_zero_point_" + tag, z, along);
  }
  return e.add("Sub_" + tag, "Sub", {x, z}, Type::tensor(DType::F64, dims));
}

namespace {

// MatMulInteger(A, B, a_zero_point, b_zero_point) -> the int8 product with
// its zero-point corrections (int8_product.h), or, where that declines (batch
// dims one strided-batched call cannot express), the MatMul of the operands
// less their zero points (per tensor, per row of A, per column of B) in f64,
// exact, cast to int32. Declines the int8 form itself, 1-D operands and
// unknown dims.
bool decompose_matmul_integer(Expansion& e) {
  const Node& n = e.node();
  const Type& a = n.input(0)->type();
  const Type& b = n.input(1)->type();
  const Type& y = n.output(0)->type();
  if (int8_product_form(n) || !y.is_tensor() || !y.fully_shaped() || !a.has_rank() || !b.has_rank() || a.rank() < 2 ||
      b.rank() < 2)
    return false;
  auto zero_point = [&](size_t i) { return n.has_input(i) ? n.input(i) : nullptr; };
  if (Value* acc = int8_accumulator(e, {n.input(0), zero_point(2)}, {n.input(1), zero_point(3)}, y.shape())) {
    e.take_over(0, acc);
    return true;
  }
  const auto rows = static_cast<int64_t>(a.rank()) - 2, columns = static_cast<int64_t>(b.rank()) - 1;
  if (!zero_point_fits(n, 0, 2, rows) || !zero_point_fits(n, 1, 3, columns)) return false;
  Value* product = e.add("MatMul", "MatMul", {zero_point_shifted(e, 0, 2, rows), zero_point_shifted(e, 1, 3, columns)},
                         Type::tensor(DType::F64, y.shape()));
  e.finish("Cast", "Cast", {product}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::I32))}});
  return true;
}

// ---------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C, A' and B' optionally transposed, C
// broadcast to [M, N].

void infer_gemm(InferContext& ctx) {
  require_one_dtype(ctx, 0, {1, 2});
  if (!ranked(ctx, 0) || !ranked(ctx, 1)) {
    ctx.set_output_type(0, Type::tensor(input_dtype(ctx, 0), Dims(2)));
    return;
  }
  const Type& a = ctx.ranked_input(0);
  const Type& b = ctx.ranked_input(1);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail("A and B must be 2-D, got " + a.str() + " and " + b.str());
  bool ta = ctx.node().get_int("transA", 0) != 0, tb = ctx.node().get_int("transB", 0) != 0;
  Dim m = a.shape()[ta ? 1 : 0], ka = a.shape()[ta ? 0 : 1];
  Dim kb = b.shape()[tb ? 1 : 0], n = b.shape()[tb ? 0 : 1];
  unify_or_fail(ctx, ka, kb, "contraction dims of A and B");
  Dims out = ctx.env().canonical(Dims{m, n});
  if (ctx.has_input(2)) {
    const Type& c = ctx.input_type(2);
    if (c.is_tensor() && c.has_rank()) {
      if (c.rank() > 2) ctx.fail("C must have rank <= 2, got " + c.str());
      Dims bc = broadcast_dims(ctx, {out, c.shape()});
      out = bc;
    }
  }
  ctx.set_output_type(0, Type::tensor(a.dtype(), ctx.env().canonical(out)));
}

Tensor gemm_kernel(const EvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Node& n = ctx.node();
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail("A and B must be 2-D, got " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
  bool ta = n.get_int("transA", 0) != 0, tb = n.get_int("transB", 0) != 0;
  double alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
  int64_t m = a.shape()[ta ? 1 : 0], k = a.shape()[ta ? 0 : 1];
  int64_t k2 = b.shape()[tb ? 1 : 0], nn = b.shape()[tb ? 0 : 1];
  if (k != k2) ctx.fail("expected equal contraction dims, got A " + shape_str(a.shape()) + " and B " +
                        shape_str(b.shape()) + " (transA=" + std::to_string(ta) + ", transB=" + std::to_string(tb) + ")");
  std::vector<int64_t> out_shape{m, nn};
  std::optional<BroadcastIndexer> c_at;
  if (ctx.has_input(2)) {
    const Tensor& c = ctx.input(2);
    if (broadcast_shapes(n, {out_shape, c.shape()}) != out_shape)
      ctx.fail("C of shape " + shape_str(c.shape()) + " does not broadcast to " + shape_str(out_shape));
    c_at.emplace(out_shape, c.shape());
  }
  Tensor out(a.dtype(), out_shape);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < nn; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc += a.get_f64(ta ? q * m + i : i * k + q) * b.get_f64(tb ? j * k + q : q * nn + j);
      double v = alpha * acc;
      if (c_at) v += beta * ctx.input(2).get_f64((*c_at)(i * nn + j));
      out.set_f64(i * nn + j, v);
    }
  return out;
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// MatMul with numpy semantics: rank-1 operands are promoted ([k] -> [1, k] on
// the left, [k, 1] on the right) and batch axes broadcast. dA = g @ B^T,
// dB = A^T @ g, each summed back over the batch axes it was broadcast along.
void matmul_rule(GradContext& c) {
  Emitter& e = c.e();
  Value *a = c.in(0), *b = c.in(1), *g = c.dy();
  Dims ad = c.dims(a), bd = c.dims(b), yd = c.dims(c.out());
  bool a_vec = ad.size() == 1, b_vec = bd.size() == 1;
  if (a_vec) {
    a = e.unsqueeze(a, {0});
    ad.insert(ad.begin(), Dim(1));
    g = e.unsqueeze(g, {static_cast<int64_t>(yd.size()) - (b_vec ? 0 : 1)});
    yd.insert(yd.end() - (b_vec ? 0 : 1), Dim(1));
  }
  if (b_vec) {
    b = e.unsqueeze(b, {1});
    bd.push_back(Dim(1));
    g = e.unsqueeze(g, {-1});
    yd.push_back(Dim(1));
  }
  Dims batch(yd.begin(), yd.end() - 2);
  if (c.wants(0)) {
    Value* da = e.op("MatMul", {g, transpose_last2(c, b, bd.size())});
    Dims from = batch;
    from.insert(from.end(), ad.end() - 2, ad.end());
    da = e.sum_to(da, from, ad);
    c.set(0, a_vec ? e.squeeze(da, {0}) : da);
  }
  if (c.wants(1) && !a_vec && !b_vec && bd.size() == 2 && ad.size() > 2 && ad.back().is_static() &&
      bd.back().is_static()) {
    // A weight shared across batch axes (x @ W over [batch, seq, K]): one 2-D
    // product over the flattened rows, A^T [K, batch*seq] @ g [batch*seq, N],
    // rather than a batched product summed over the batch afterwards (a
    // [batch, K, N] temporary, and a reduction kernel instead of a GEMM).
    Value* rows_a = e.op("Reshape", {a, e.ints({-1, ad.back().value()})});
    Value* rows_g = e.op("Reshape", {g, e.ints({-1, bd.back().value()})});
    c.set(1, e.op("MatMul", {e.op("Transpose", {rows_a}, {{"perm", Attribute::of_ints({1, 0})}}), rows_g}));
  } else if (c.wants(1)) {
    Value* db = e.op("MatMul", {transpose_last2(c, a, ad.size()), g});
    Dims from = batch;
    from.insert(from.end(), bd.end() - 2, bd.end());
    db = e.sum_to(db, from, bd);
    c.set(1, b_vec ? e.squeeze(db, {1}) : db);
  }
}

// Y = alpha op(A) op(B) + beta C. With dOpA = alpha g op(B)^T and
// dOpB = alpha op(A)^T g, each written as one Gemm:
//   dA = transA ? alpha op(B) g^T : alpha g op(B)^T
//   dB = transB ? alpha g^T op(A) : alpha op(A)^T g
//   dC = beta g summed back to C's shape
void gemm_rule(GradContext& c) {
  const Node& n = c.node();
  int64_t ta = n.get_int("transA", 0), tb = n.get_int("transB", 0);
  float alpha = n.get_float("alpha", 1.0f), beta = n.get_float("beta", 1.0f);
  auto gemm = [&](Value* x, Value* y, int64_t tx, int64_t ty) {
    return c.e().op("Gemm", {x, y}, {{"alpha", Attribute::of_float(alpha)}, {"transA", Attribute::of_int(tx)},
                                     {"transB", Attribute::of_int(ty)}});
  };
  if (c.wants(0)) c.set(0, ta ? gemm(c.in(1), c.dy(), tb, 1) : gemm(c.dy(), c.in(1), 0, 1 - tb));
  if (c.wants(1)) c.set(1, tb ? gemm(c.dy(), c.in(0), 1, ta) : gemm(c.in(0), c.dy(), 1 - ta, 0));
  if (c.wants(2)) {
    Value* g = beta == 1.0f ? c.dy() : mul(c, c.dy(), scalar(c, beta));
    c.set(2, c.unbroadcast(g, 2));
  }
}

// Whether cuBLASLt takes Gemm's C as it is: the output's shape, or (beta 1) a
// bias of one value per column, [N] or [1, N] with N > 1.
bool gemm_takes_c(const Node& n) {
  const Type& c = n.input(2)->type();
  const Type& y = n.output(0)->type();
  if (!c.is_tensor() || !c.has_rank() || !y.is_tensor() || !y.has_rank() || y.rank() != 2) return true;
  if (c.shape() == y.shape()) return true;
  if (n.get_float("beta", 1.0f) != 1.0f || c.rank() == 0 || c.shape().back() != y.shape()[1]) return false;
  if (y.shape()[1].is_static() && y.shape()[1].value() == 1) return false;
  return c.rank() == 1 || c.shape()[0] == Dim(1);
}

// Gemm(A, B, C) -> Gemm(A, B) + C * beta when cuBLASLt cannot take C
// (decomposition.h): a C of [M, 1] or a scalar is an ordinary broadcast Add.
bool decompose_gemm(Expansion& e) {
  const Node& n = e.node();
  if (!n.has_input(2) || gemm_takes_c(n)) return false;
  std::map<std::string, Attribute> attrs;
  for (const char* a : {"alpha", "transA", "transB"})
    if (const Attribute* v = n.attr(a)) attrs[a] = *v;
  Type y = n.output(0)->type();
  Value* product = e.add("Gemm", "Gemm", {n.input(0), n.input(1)}, y, std::move(attrs));
  Value* c = n.input(2);
  double beta = n.get_float("beta", 1.0f);
  if (beta != 1) c = e.add("Mul", "Mul", {c, e.scalar("beta", beta, c->type().dtype())}, c->type());
  e.finish("Add", "Add", {product, c});
  return true;
}

// ---------------------------------------------------------------------------
// Det: X [*, M, M] -> [*], by Gaussian elimination with partial pivoting in
// double, rounded once to X's dtype.

void infer_det(InferContext& ctx) {
  if (!inputs_ranked(ctx, {0})) return;
  const Type& x = ctx.input_type(0);
  if (x.rank() < 2) ctx.fail("expected a matrix or a batch of matrices [*, M, M], got " + x.str());
  const Dims& d = x.shape();
  unify_or_fail(ctx, d[d.size() - 2], d[d.size() - 1], "matrix dims");
  ctx.set_output_type(0, Type::tensor(x.dtype(), ctx.env().canonical(Dims(d.begin(), d.end() - 2))));
}

double determinant(std::vector<double> a, int64_t m) {
  double det = 1;
  for (int64_t col = 0; col < m; ++col) {
    int64_t pivot = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::fabs(a[r * m + col]) > std::fabs(a[pivot * m + col])) pivot = r;
    if (a[pivot * m + col] == 0) return 0;
    if (pivot != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[pivot * m + k], a[col * m + k]);
      det = -det;
    }
    det *= a[col * m + col];
    for (int64_t r = col + 1; r < m; ++r) {
      double f = a[r * m + col] / a[col * m + col];
      for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
    }
  }
  return det;
}

std::vector<Tensor> eval_det(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  size_t rank = x.rank();
  if (rank < 2 || x.shape()[rank - 1] != x.shape()[rank - 2])
    ctx.fail("expected a matrix or a batch of square matrices [*, M, M], got shape " + shape_str(x.shape()));
  int64_t m = x.shape()[rank - 1];
  Tensor out(x.dtype(), std::vector<int64_t>(x.shape().begin(), x.shape().end() - 2));
  std::vector<double> a(static_cast<size_t>(m * m));
  for (int64_t b = 0; b < out.numel(); ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.get_f64(b * m * m + i);
    out.set_f64(b, determinant(a, m));
  }
  return {out};
}

// Det of matrices up to this size decomposes: n! products of n entries each.
constexpr int64_t kMaxLeibnizDet = 4;

// Det -> Leibniz's formula in f64: X's matrices viewed as [*, M * M], one
// Gather of the M! permutations' entries [*, M!, M] (entry (i, p(i)) of
// each), ReduceProd over them, times each permutation's sign, ReduceSum,
// cast back. Needs M static, 1 to kMaxLeibnizDet; larger matrices stay a
// host step (elimination needs pivots chosen from the data).
bool decompose_det(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  if (x == nullptr || x->rank() < 2 || !x->shape().back().is_static()) return false;
  const int64_t m = x->shape().back().value();
  if (m < 1 || m > kMaxLeibnizDet) return false;
  std::vector<int64_t> order(static_cast<size_t>(m)), entries;
  std::vector<double> signs;
  for (int64_t i = 0; i < m; ++i) order[static_cast<size_t>(i)] = i;
  do {
    int64_t inversions = 0;
    for (int64_t i = 0; i < m; ++i) {
      entries.push_back(i * m + order[static_cast<size_t>(i)]);
      for (int64_t j = i + 1; j < m; ++j) inversions += order[static_cast<size_t>(i)] > order[static_cast<size_t>(j)];
    }
    signs.push_back(inversions % 2 == 0 ? 1.0 : -1.0);
  } while (std::next_permutation(order.begin(), order.end()));
  const auto terms = static_cast<int64_t>(signs.size());
  const Dims batch(x->shape().begin(), x->shape().end() - 2);
  auto f64 = [&](std::vector<Dim> tail) {
    Dims d = batch;
    d.insert(d.end(), tail.begin(), tail.end());
    return Type::tensor(DType::F64, d);
  };
  const auto axis = static_cast<int64_t>(batch.size());
  Value* flat = e.reshape("Reshape", e.cast("Cast", n.input(0), DType::F64), f64({Dim(m * m)}).shape());
  Value* picked = e.add("Gather", "Gather", {flat, e.constant("entries", Tensor::from_i64(entries, {terms, m}))},
                        f64({Dim(terms), Dim(m)}), {{"axis", Attribute::of_int(axis)}});
  Value* products = e.reduce("ReduceProd", "ReduceProd", picked, {axis + 1}, f64({Dim(terms), Dim(1)}));
  Value* signed_products =
      e.add("Mul", "Mul", {products, e.numbers("signs", signs, {terms, 1}, DType::F64)}, f64({Dim(terms), Dim(1)}));
  Value* sum = e.reduce("ReduceSum", "ReduceSum", signed_products, {axis}, f64({Dim(1), Dim(1)}));
  if (x->dtype() == DType::F64) {
    e.finish_reshape("Reshape_1", sum);
    return true;
  }
  e.finish("Cast_1", "Cast", {e.reshape("Reshape_1", sum, batch)},
           {{"to", Attribute::of_int(static_cast<int64_t>(x->dtype()))}});
  return true;
}

// Why cuBLASLt does not multiply MatMul or Gemm node n: it multiplies
// floating-point matrices only (an integer product runs on the host).
std::string float_product_refusal(const Node& n) {
  DType t = n.num_outputs() > 0 && n.output(0) ? n.output(0)->type().dtype() : DType::Undefined;
  if (t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::F64)
    return "cuBLASLt multiplies floating-point matrices, and this one is " + std::string(dtype_name(t));
  return "";
}

// MatMul whose operands broadcast over different batch dims ([3, 1, m, k] @
// [1, 2, k, n]), which no one strided-batched call expresses
// (strided_batches): each operand whose batch dims are neither all 1 nor the
// output's is expanded to the output's (a tcc::Expand, copied by its kernel),
// then the two are multiplied. Needs known dims and a product cuBLASLt takes.
bool decompose_matmul_batches(Expansion& e) {
  const Node& n = e.node();
  const Type& y = n.output(0)->type();
  if (strided_batches(n) || !float_product_refusal(n).empty() || !y.is_tensor() || !y.fully_shaped()) return false;
  for (size_t i = 0; i < 2; ++i)
    if (!n.input(i)->type().is_tensor() || !n.input(i)->type().fully_shaped()) return false;
  const Dims batch(y.shape().begin(), y.shape().end() - 2);
  std::vector<Value*> operands;
  for (size_t i = 0; i < 2; ++i) {
    Value* v = n.input(i);
    const Type& t = v->type();
    if (t.rank() < 3) {  // no batch dims of its own
      operands.push_back(v);
      continue;
    }
    Dims own(t.shape().begin(), t.shape().end() - 2);
    bool all_one = std::all_of(own.begin(), own.end(), [](const Dim& d) { return d.is_static() && d.value() == 1; });
    if (!all_one && own != batch) {
      Dims dims = batch;
      dims.insert(dims.end(), t.shape().end() - 2, t.shape().end());
      v = e.expand("Expand_" + std::to_string(i), v, dims);
    }
    operands.push_back(v);
  }
  e.finish("MatMul", "MatMul", operands);
  return true;
}

}  // namespace

void register_linalg_ops(OpRegistry& r) {
  r.add(OpDef{"", "MatMul", 1, kContraction | kTransposedOperands,
              [](InferContext& ctx) {
                require_one_dtype(ctx, 0, {1});
                DType dt = input_dtype(ctx, 0);
                if (!ranked(ctx, 0) || !ranked(ctx, 1)) ctx.set_output_type(0, Type::tensor_unranked(dt));
                else ctx.set_output_type(0, Type::tensor(dt, matmul_dims(ctx, 0, 1)));
              },
              [](EvalContext& ctx) {
                return std::vector<Tensor>{
                    matmul_compute(ctx.node(), ctx.input(0), ctx.input(1), ctx.input(0).dtype())};
              },
              kNumeric})
      .kernel_unless(KernelRole::Contraction, float_product_refusal, strided_batches)
      .gradient(matmul_rule)
      .decomposition(decompose_matmul_batches)
      .under_autocast(AutocastClass::Low);
  r.add(OpDef{"", "MatMulInteger", 10, kContraction | kTransposedOperands,
              [](InferContext& ctx) {
                if (!ranked(ctx, 0) || !ranked(ctx, 1)) ctx.set_output_type(0, Type::tensor_unranked(DType::I32));
                else ctx.set_output_type(0, Type::tensor(DType::I32, matmul_dims(ctx, 0, 1)));
              },
              [](EvalContext& ctx) {
                Tensor a = subtract_zero_point(ctx, 0, 2, row_axis(ctx.input(0)));
                Tensor b = subtract_zero_point(ctx, 1, 3, column_axis(ctx.input(1)));
                return std::vector<Tensor>{matmul_compute(ctx.node(), a, b, DType::I32)};
              },
              {DType::U8, DType::I8, DType::I32}})
      .kernel_role(KernelRole::Contraction, int8_product_form)
      .decomposition(decompose_matmul_integer);
  r.add(OpDef{"", "Gemm", 11, kContraction, infer_gemm,
              [](EvalContext& ctx) { return std::vector<Tensor>{gemm_kernel(ctx)}; }, kNumeric})
      .kernel_unless(KernelRole::Contraction, float_product_refusal)
      .gradient(gemm_rule)
      .decomposition(decompose_gemm)
      .under_autocast(AutocastClass::Low);
  r.add(OpDef{"", "Det", 11, 0, infer_det, eval_det, {DType::F16, DType::BF16, DType::F32, DType::F64}})
      .decomposition(decompose_det)
      .trains_through_decomposition();
}

}  // namespace tcc
