// The integer contractions' exact int32 accumulator as an int8 product on
// cuBLASLt (CUBLAS_COMPUTE_32I), which MatMulInteger, QLinearMatMul and,
// through im2col, ConvInteger and QLinearConv decompose into
// (src/ops/linalg.cc, src/ops/quantization.cc).
#pragma once

#include <cstddef>
#include <string>

#include "src/ops/decomposition.h"

namespace tcc {

// Whether MatMulInteger n is the int8 product itself (int8 operands, no zero
// points, int32 out), the form whose kernel role is Contraction.
bool int8_product_form(const Node& n);

// x (int8 or uint8) as int8: itself, or x - 128 for uint8 (pieces named by tag).
Value* as_int8(Expansion& e, const std::string& tag, Value* x);

// An operand of an integer product and its zero point (null: 0): one value,
// or one per row of A (axis -2) / per column of B (axis -1).
struct IntegerOperand {
  Value* x = nullptr;
  Value* zero_point = nullptr;
  bool from_uint8 = false;  // x is int8 already, shifted from uint8 (im2col's rows)
};

// sum over k of (a - a_zero_point)(b - b_zero_point), as int32 of the output
// dims `out`: a uint8 operand becomes int8 by subtracting 128 (exact), and
// with a = a8 + sa, b = b8 + sb (sa, sb the shifts) and da = sa - a_zero_point,
// db = sb - b_zero_point,
//   sum (a8 + da)(b8 + db) = a8 b8 + db * rowsum(a8) + da * colsum(b8) + K da db,
// where a8 b8 is one int8 product (MatMulInteger of the int8 form). A
// constant 2-D B is shifted, summed and laid out [N, K] (read transposed: the
// TN layout cuBLASLt's int8 tensor-core kernels take, with K and N padded to
// multiples of 4) at compile time; a B computed at run time is multiplied as
// it lies (NN). A correction known to be 0 is left out. Every term is int32,
// as MatMulInteger's output: the exact sum must fit it, as in ONNX Runtime. Returns null, adding nothing, when it
// declines: operands below 2-D, unknown dims or a symbolic K, zero points of
// another length, batch dims one strided-batched call cannot express, or a
// graph below opset 11 (Pad's inputs).
Value* int8_accumulator(Expansion& e, const IntegerOperand& a, const IntegerOperand& b, const Dims& out);

}  // namespace tcc
