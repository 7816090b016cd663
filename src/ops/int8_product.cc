// The int8 product of the integer contractions (int8_product.h).
#include "src/ops/int8_product.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"

namespace tcc {

bool int8_product_form(const Node& n) {
  if (n.num_inputs() != 2 || n.input(0)->type().dtype() != DType::I8 || n.input(1)->type().dtype() != DType::I8)
    return false;
  return n.output(0)->type().dtype() == DType::I32 && strided_batches(n);
}

namespace {

int64_t shift_of(const IntegerOperand& o) { return o.from_uint8 || o.x->type().dtype() == DType::U8 ? 128 : 0; }

Type i32_of(const Dims& dims) { return Type::tensor(DType::I32, dims); }

// The correction d = shift - zero_point as int32: a constant when the zero
// point is one (nullopt when that constant is all 0), else computed; one
// value, or one per index viewed along `along` (a row: [M, 1]; a column: [N]).
std::optional<Value*> difference(Expansion& e, const std::string& tag, const IntegerOperand& o, const Dims& along) {
  const int64_t shift = shift_of(o);
  if (o.zero_point == nullptr) {
    if (shift == 0) return std::nullopt;
    return e.scalar("shift_" + tag, static_cast<double>(shift), DType::I32);
  }
  const bool single = single_element(o.zero_point->type());
  const Dims dims = single ? Dims{} : along;
  if (std::optional<Tensor> z = constant_value(o.zero_point)) {
    std::vector<double> d(static_cast<size_t>(z->numel()));
    bool zero = true;
    for (int64_t i = 0; i < z->numel(); ++i) {
      d[static_cast<size_t>(i)] = static_cast<double>(shift - z->get_i64(i));
      zero = zero && d[static_cast<size_t>(i)] == 0;
    }
    if (zero) return std::nullopt;
    std::vector<int64_t> shape;
    if (!single) shape = along.size() == 2 ? std::vector<int64_t>{z->numel(), 1} : std::vector<int64_t>{z->numel()};
    return e.numbers("difference_" + tag, d, shape, DType::I32);
  }
  Value* z = e.cast("Cast_zero_point_" + tag, o.zero_point, DType::I32);
  if (z->type().shape() != dims) z = e.reshape("Reshape_zero_point_" + tag, z, dims);
  return e.add("Sub_zero_point_" + tag, "Sub", {e.scalar("shift_" + tag, static_cast<double>(shift), DType::I32), z},
               i32_of(dims));
}

// Whether an operand of `rank` dims has a zero point that fits: absent, one
// value, or 1-D of the extent along `axis`.
bool zero_point_fits(const IntegerOperand& o, size_t axis) {
  if (o.zero_point == nullptr) return true;
  const Type& z = o.zero_point->type();
  if (!z.is_tensor() || !z.has_rank()) return false;
  if (single_element(z)) return true;
  return z.rank() == 1 && z.shape()[0] == o.x->type().shape()[axis];
}

// Batch dims one strided-batched call computes: an operand is a matrix or
// carries the output's batch dims.
bool batches_line_up(const Type& t, const Dims& out) {
  if (t.rank() == 2) return true;
  return t.rank() == out.size() && std::equal(t.shape().begin(), t.shape().end() - 2, out.begin());
}

}  // namespace

Value* as_int8(Expansion& e, const std::string& tag, Value* x) {
  if (x->type().dtype() == DType::I8) return x;
  const Dims& dims = x->type().shape();
  Value* wide = e.cast("Cast_" + tag, x, DType::I32);
  Value* shifted = e.add("Sub_" + tag, "Sub", {wide, e.scalar("shift", 128, DType::I32)}, i32_of(dims));
  return e.cast("Cast_int8_" + tag, shifted, DType::I8);
}

Value* int8_accumulator(Expansion& e, const IntegerOperand& a, const IntegerOperand& b, const Dims& out) {
  const Type& at = a.x->type();
  const Type& bt = b.x->type();
  if (!at.is_tensor() || !bt.is_tensor() || !at.fully_shaped() || !bt.fully_shaped() || at.rank() < 2 ||
      bt.rank() < 2 || out.size() < 2 || !batches_line_up(at, out) || !batches_line_up(bt, out) ||
      e.onnx_opset() < 11)
    return nullptr;
  const size_t ra = at.rank(), rb = bt.rank();
  if (!at.shape()[ra - 1].is_static() || !zero_point_fits(a, ra - 2) || !zero_point_fits(b, rb - 1)) return nullptr;
  const int64_t k = at.shape()[ra - 1].value();
  Value* a8 = as_int8(e, "a", a.x);
  Value* b8 = nullptr;
  Value* column_sums = nullptr;  // of b8, [..., 1, N] or [N]
  Value* acc = nullptr;
  std::optional<Tensor> bc = rb == 2 ? constant_value(b.x) : std::nullopt;
  if (bc) {
    // cuBLASLt's int8 tensor-core kernels take the TN layout with K, N and
    // the leading dims multiples of 4: B is laid out [N4, K4], zero past N
    // and K; A gains zero columns up to K4 (nothing added to the product or
    // its row sums), and the product's columns past N are cut off.
    const int64_t n = bc->shape()[1], k4 = (k + 3) / 4 * 4, n4 = (n + 3) / 4 * 4;
    const int64_t shift = shift_of(b);
    Tensor transposed(DType::I8, {n4, k4});
    std::vector<double> sums(static_cast<size_t>(n), 0.0);
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j) {
        int64_t v = bc->get_i64(q * n + j) - shift;
        transposed.set_i64(j * k4 + q, v);
        sums[static_cast<size_t>(j)] += static_cast<double>(v);
      }
    b8 = e.add("Transpose_b", "Transpose", {e.constant("b_int8", std::move(transposed))},
               Type::tensor(DType::I8, {Dim(k4), Dim(n4)}), {{"perm", Attribute::of_ints({1, 0})}});
    column_sums = e.numbers("b_column_sums", sums, {n}, DType::I32);
    Value* a_padded = a8;
    if (k4 != k) {
      std::vector<int64_t> pads(2 * ra, 0);
      pads.back() = k4 - k;
      Dims dims = at.shape();
      dims.back() = Dim(k4);
      a_padded = e.add("Pad_a", "Pad", {a8, e.i64s("pads", pads), e.scalar("zero", 0, DType::I8)},
                       Type::tensor(DType::I8, dims));
    }
    Dims padded_out = out;
    padded_out.back() = Dim(n4);
    acc = e.add("MatMul_int8", "MatMulInteger", {a_padded, b8}, i32_of(padded_out));
    if (n4 != n)
      acc = e.add("Slice_n", "Slice", {acc, e.i64("start", 0), e.i64("end", n), e.i64("axis", -1)}, i32_of(out));
  } else {
    b8 = as_int8(e, "b", b.x);
    acc = e.add("MatMul_int8", "MatMulInteger", {a8, b8}, i32_of(out));
  }
  const Dims& adims = at.shape();
  std::optional<Value*> da = difference(e, "a", a, {adims[ra - 2], Dim(1)});
  std::optional<Value*> db = difference(e, "b", b, {bt.shape()[rb - 1]});
  if (db) {
    Dims kept = adims;
    kept.back() = Dim(1);
    Value* rows = e.reduce("ReduceSum_a", "ReduceSum", e.cast("Cast_sum_a", a8, DType::I32),
                           {static_cast<int64_t>(ra) - 1}, i32_of(kept));
    Value* term = e.add("Mul_rows", "Mul", {*db, rows}, i32_of(broadcast_of({*db, rows})));
    acc = e.add("Add_rows", "Add", {acc, term}, i32_of(out));
  }
  if (da) {
    if (column_sums == nullptr) {
      Dims kept = bt.shape();
      kept[rb - 2] = Dim(1);
      column_sums = e.reduce("ReduceSum_b", "ReduceSum", e.cast("Cast_sum_b", b8, DType::I32),
                             {static_cast<int64_t>(rb) - 2}, i32_of(kept));
    }
    Value* term = e.add("Mul_columns", "Mul", {*da, column_sums}, i32_of(broadcast_of({*da, column_sums})));
    acc = e.add("Add_columns", "Add", {acc, term}, i32_of(out));
  }
  if (da && db) {
    Value* both = e.add("Mul_differences", "Mul", {*da, *db}, i32_of(broadcast_of({*da, *db})));
    Value* term = e.add("Mul_k", "Mul", {both, e.scalar("k", static_cast<double>(k), DType::I32)},
                        i32_of(broadcast_of({*da, *db})));
    acc = e.add("Add_k", "Add", {acc, term}, i32_of(out));
  }
  return acc;
}

}  // namespace tcc
