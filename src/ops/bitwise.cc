// Bitwise ops on integers: BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseNot and
// BitShift (the bool logic of And, Or, Xor and Not is in elementwise.cc). The
// binary ops broadcast multidirectionally.
//
// Kernels work on each element's bits as an int64 (get_i64 keeps a u64's bits
// and sign-extends a signed element), and set_i64 keeps the output dtype's
// width of the result, so no op needs a case per dtype.
#include <string>

#include "src/ops/elementwise.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"

namespace tcc {

namespace {

const std::vector<DType> kInteger = {DType::I64, DType::I32, DType::I16, DType::I8,
                                     DType::U64, DType::U32, DType::U16, DType::U8};

// f(x, y) over the bits of inputs 0 and 1, broadcast; output of input 0's dtype.
template <typename F>
Tensor combine_bits(const EvalContext& ctx, F f) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  std::vector<int64_t> shape = broadcast_shapes(ctx.node(), {x.shape(), y.shape()});
  BroadcastIndexer xi(shape, x.shape()), yi(shape, y.shape());
  Tensor out(x.dtype(), shape);
  for (int64_t i = 0; i < out.numel(); ++i) out.set_i64(i, f(x.get_i64(xi(i)), y.get_i64(yi(i))));
  return out;
}

bool shifts_left(const Node& n) {
  std::string dir = n.get_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") n.fail("direction must be \"LEFT\" or \"RIGHT\", got \"" + dir + "\"");
  return dir == "LEFT";
}

// A shift by a negative amount or by at least the width shifts every bit out
// (NumPy semantics, which the ONNX tests follow), not masked as in C: left and
// unsigned right shifts give 0, a signed right shift the sign.
Tensor bitshift_kernel(const EvalContext& ctx) {
  bool left = shifts_left(ctx.node());
  DType dt = ctx.input(0).dtype();
  int64_t width = static_cast<int64_t>(dtype_size(dt) * 8);
  bool arithmetic = is_signed(dt);
  return combine_bits(ctx, [&](int64_t v, int64_t s) -> int64_t {
    bool all_out = s < 0 || s >= width;
    if (left) return all_out ? 0 : static_cast<int64_t>(static_cast<uint64_t>(v) << s);
    if (arithmetic) return all_out ? (v < 0 ? -1 : 0) : v >> s;
    // An unsigned element's bits above its width are 0, except a u64's top bit
    // that get_i64 reads as the sign: shift the bits as unsigned.
    return all_out ? 0 : static_cast<int64_t>(static_cast<uint64_t>(v) >> s);
  });
}

}  // namespace

void register_bitwise_ops(OpRegistry& r) {
  add_op(r, "BitwiseAnd", 18, kInteger, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{combine_bits(ctx, [](int64_t a, int64_t b) { return a & b; })};
  }).pointwise_kernel(scalar(ScalarOp::BitAnd)).commutes();
  add_op(r, "BitwiseOr", 18, kInteger, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{combine_bits(ctx, [](int64_t a, int64_t b) { return a | b; })};
  }).pointwise_kernel(scalar(ScalarOp::BitOr)).commutes();
  add_op(r, "BitwiseXor", 18, kInteger, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{combine_bits(ctx, [](int64_t a, int64_t b) { return a ^ b; })};
  }).pointwise_kernel(scalar(ScalarOp::BitXor)).commutes();
  add_op(r, "BitwiseNot", 18, kInteger, infer_same_dtype(), [](EvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor out(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.set_i64(i, ~x.get_i64(i));
    return std::vector<Tensor>{out};
  }).pointwise_kernel(scalar(ScalarOp::BitNot));
  add_op(r, "BitShift", 11, kInteger, infer_same_dtype(), [](EvalContext& ctx) {
    return std::vector<Tensor>{bitshift_kernel(ctx)};
  }).pointwise_kernel([](const Node& n, ScalarBuilder& b, const std::vector<int>& in) {
    return b.op(shifts_left(n) ? ScalarOp::ShiftLeft : ScalarOp::ShiftRight, out_dtype(n), in);
  });
}

}  // namespace tcc
