// Helpers shared by the op families' shape rules and reference kernels.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/ops/op_registry.h"

namespace tcc {

class Expansion;

// The element types most ops accept: the floats, and the floats with the integers.
inline const std::vector<DType> kFloatTypes = {DType::F32, DType::F16, DType::BF16, DType::F64};
inline const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64, DType::I32,
                                            DType::I16, DType::I8,  DType::U8,   DType::U16, DType::U32, DType::U64};

// Slice bounds at or beyond this magnitude are the "to the end" / "from the
// start" sentinels (exporters write INT64_MAX, INT32_MAX, or their negatives).
// A plain bound on a symbolic dim is taken to lie within it (src/ops/movement.cc),
// which the compiled graph's guards check (src/analysis/trace.cc).
inline constexpr int64_t kSliceSentinel = 2147483647;

// What explain suggests instead of an op that gathers the elements a mask
// selects (NonZero, Compress), whose count the data decides (OpDef::break_hint).
inline constexpr const char* kSelectInPlace =
    "keep shapes static: multiply by the mask or select with Where instead of gathering elements";

// n's attribute `attr` listing non-negative dims as SymExpr texts (a tcc
// op's target shape, tcc::Slice's starts); fails naming n when it is absent
// or a text is not one.
Dims parse_shape_attr(const Node& n, const std::string& attr);
// Those dims at the symbols this run bound; fails naming n where one does
// not evaluate (a symbol no graph input binds) or is negative.
std::vector<int64_t> eval_shape_attr(const EvalContext& ctx, const std::string& attr);
// tcc::Pad's (begin, end) per axis of a rank-`rank` input, from its `pads`
// attribute (src/ops/movement.cc); fails naming n when it does not list two per axis.
std::vector<std::pair<Dim, Dim>> tcc_pads(const Node& n, size_t rank);
// The inverse: dims as the SymExpr texts such an attribute lists.
Attribute shape_attr(const Dims& dims);

// Maps a possibly negative axis into [0, rank); fails naming the node when out of range.
int64_t normalize_axis(const Node& n, int64_t axis, int64_t rank);

// n's `dtype` attribute (or `attr`), an ONNX element type (SequenceEmpty's,
// EyeLike's, the random generators', Attention's softmax_precision), or
// `fallback` when absent; fails naming n on one tcc does not model.
DType dtype_attr(const Node& n, DType fallback, const std::string& attr = "dtype");

// v rounded to the nearest value of float dtype t (ties to even); other dtypes leave it.
double rounded(double v, DType t);

// ScatterElements along n's `axis` attribute (src/ops/gather_scatter.cc): `out`, the
// data, with each update written (`reduction` none) or combined (add, mul,
// max, min) where its index says; negative indices count from the end. Fails
// naming n on mismatched shapes or an index out of bounds.
Tensor scatter_elements(const Node& n, Tensor out, const Tensor& ind, const Tensor& upd, const std::string& reduction);

// MatMul with NumPy semantics (src/ops/linalg.cc), shared with the integer
// and quantized products. matmul_dims: the output dims of inputs ia @ ib,
// unifying the contracted dims. matmul_compute: the product of concrete
// tensors, accumulating in int64 when both are integers, in double otherwise,
// written as out_dtype.
Dims matmul_dims(InferContext& ctx, size_t ia, size_t ib);
Tensor matmul_compute(const Node& n, const Tensor& a, const Tensor& b, DType out_dtype);
// The axis along which a per-row zero point or scale of operand A (its rows,
// axis -2) or a per-column one of B (axis -1) runs; -1 for a 1-D operand,
// which takes only per-tensor ones.
int64_t row_axis(const Tensor& a);
int64_t column_axis(const Tensor& b);
// Input xi minus its zero point (input zi; absent is 0) as int64: the zero
// point is one value, or one per index along `axis` of input xi (axis -1: one
// value only). Fails naming the node on any other length.
Tensor subtract_zero_point(const EvalContext& ctx, size_t xi, size_t zi, int64_t axis);
// The same as pieces of a decomposition (decomposition.h), in f64, which
// holds every product and sum of the integer contractions exactly:
// zero_point_fits says whether node n's zero point zi is absent, one value,
// or one per index along `axis` of input xi (whose dims must be known);
// zero_point_shifted then builds Cast(x, f64) - Cast(zero point, f64), the
// zero point reshaped to run along `axis`.
bool zero_point_fits(const Node& n, size_t xi, size_t zi, int64_t axis);
Value* zero_point_shifted(Expansion& e, size_t xi, size_t zi, int64_t axis);

// Convolution (src/ops/conv_pool.cc), shared with the integer and quantized
// ones. conv_dims: the output dims of X (input xi) convolved with W (input
// wi) under n's window attributes, checking ranks and channels.
// conv_compute: the convolution of concrete tensors plus `bias` (one value
// per output channel, or null), accumulating in double, written as out_dtype.
Dims conv_dims(InferContext& ctx, size_t xi, size_t wi);
Tensor conv_compute(EvalContext& ctx, const Tensor& x, const Tensor& w, const Tensor* bias, DType out_dtype);

// Multidirectional (NumPy) broadcast of symbolic shapes. Dims that are neither
// equal nor 1 are unified in the ShapeEnv (they must be equal at run time);
// two different static sizes are an error naming the node.
Dims broadcast_dims(InferContext& ctx, const std::vector<Dims>& shapes);

// The same on concrete shapes, for kernels.
std::vector<int64_t> broadcast_shapes(const Node& n, const std::vector<std::vector<int64_t>>& shapes);

// Maps a flat index of a broadcast output to the flat index of one input.
class BroadcastIndexer {
 public:
  BroadcastIndexer(const std::vector<int64_t>& out_shape, const std::vector<int64_t>& in_shape);
  int64_t operator()(int64_t out_index) const;

 private:
  std::vector<int64_t> out_shape_;
  std::vector<int64_t> in_strides_;  // 0 along broadcast dims, aligned to out_shape_
  bool identity_ = false;
};

// The product of v's elements from index `from` on.
int64_t product(const std::vector<int64_t>& v, size_t from = 0);

// Input i of a convolution, pool or normalization: ranked, of rank >= 3
// ([N, C, spatial...]); fails naming the node otherwise.
const Type& ranked_nchw(InferContext& ctx, size_t i);
// The same for a kernel's input tensor.
void check_nchw(const EvalContext& ctx, const Tensor& x);

// Keys' cubic convolution kernel with coefficient a at distance d (Resize's
// and GridSample's cubic taps; a = -0.75 is torch's, -0.5 Keys' own).
double cubic_convolution(double d, double a);

// A constant for the symbolic size arithmetic of the spatial shape rules.
inline SymExpr C(int64_t v) { return SymExpr::constant(v); }

// Interpolating and rearranging kernels read elements as numbers: strings
// are refused, naming n.
void require_numeric(const Node& n, DType dt, const char* what);

// Static dims of a concrete shape.
Dims dims_of(const std::vector<int64_t>& shape);

// Applies a float function elementwise over broadcast inputs, computing in
// double and rounding once to `out_dtype`. For pointwise kernels.
Tensor map_float(const Node& n, const std::vector<const Tensor*>& ins, DType out_dtype,
                 double (*fn)(const std::vector<double>&));

// Copies element si of src into element di of dst (same dtype, strings included).
// For kernels that only move data and must not round through double.
void copy_element(Tensor& dst, int64_t di, const Tensor& src, int64_t si);

// The multi-index of a row-major flat index.
std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape);

// Steps a row-major multi-index; for walking every element of an output.
void advance(std::vector<int64_t>& idx, const std::vector<int64_t>& shape);

// The flat index of a multi-index, given the strides.
int64_t flat_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& strides);

// A tensor of out_shape whose element at multi-index idx is src's element at
// flat index from(idx); a negative index takes element 0 of `fill` instead.
template <typename F>
Tensor remap(const Tensor& src, const std::vector<int64_t>& out_shape, F from, const Tensor* fill = nullptr) {
  Tensor out(src.dtype(), out_shape);
  std::vector<int64_t> idx(out_shape.size(), 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t s = from(idx);
    if (s >= 0) copy_element(out, i, src, s);
    else if (fill) copy_element(out, i, *fill, 0);
    advance(idx, out_shape);
  }
  return out;
}

// True when the listed inputs have a known rank. Otherwise output 0 becomes a
// tensor of input 0's dtype and unknown rank (other outputs stay unknown), so a
// rule degrades instead of failing on a model whose earlier shapes tcc could not
// infer. An input that is not a tensor at all is an error naming the node.
bool inputs_ranked(InferContext& ctx, std::initializer_list<size_t> inputs);

// Input 0 when its rank is known. Otherwise output 0 becomes an unranked tensor
// of out_dtype (Undefined: input 0's), since an If whose branches disagree,
// say, is not an error, and the caller's rule stops (the reductions').
const Type* ranked_or_unranked_output(InferContext& ctx, DType out_dtype = DType::Undefined);

// Input i's element type; Undefined where it is absent or no tensor.
DType input_dtype(const InferContext& ctx, size_t i);

// Fails unless the given inputs, where present and typed, share input first's
// element type, as the one type variable T of ONNX's schema says (Add's A and
// B, MatMul's operands, Gemm's A, B and C).
void require_one_dtype(InferContext& ctx, size_t first, const std::vector<size_t>& others);

// Fails unless input i, where its type is known, is a 1-D integer tensor (a
// shape, repeats or axes operand): `what` names it in the message.
void require_index_vector(InferContext& ctx, size_t i, const std::string& what);

// The canonical symbolic contents of input i, or null.
std::optional<Dims> input_values(InferContext& ctx, size_t i);

// The contents of a shape-like input as integers, when every element is static.
std::optional<std::vector<int64_t>> static_values(const Dims* values);

// The strides, dilations and begin / end pads of n's sliding window (Conv,
// ConvTranspose, the pools) of `kernel` over the spatial dims `in` (-1 where
// symbolic), auto_pad resolved.
struct SlidingWindow {
  std::vector<int64_t> strides, dilations, begin, end;
};
// Resolves them into *w and returns "", or returns what is wrong: malformed
// strides, dilations or pads, SAME padding of a symbolic dim, an unknown auto_pad.
std::string sliding_window(const Node& n, const std::vector<int64_t>& kernel, const std::vector<int64_t>& in,
                           SlidingWindow* w);

}  // namespace tcc
