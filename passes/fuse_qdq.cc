// fuse_qdq: the QDQ form ONNX Runtime's quantizer writes (DequantizeLinear
// before a contraction, QuantizeLinear after it) becomes the quantized
// contraction ONNX Runtime executes for it (its QDQ selectors and actions),
// so the product is computed on the integers.
//
// Rewrite (DQ: DequantizeLinear, Q: QuantizeLinear):
//   Q(Conv(DQ(x_q, xs, xz), DQ(w_q, ws, wz), DQ(b_q, bs, 0)), ys, yz)
//     -> QLinearConv(x_q, xs, xz, w_q, ws, wz, ys, yz, b_q)
//   Q(MatMul(DQ(a_q, as, az), DQ(w_q, ws, wz)), ys, yz)
//     -> QLinearMatMul(a_q, as, az, w_q, ws, wz, ys, yz)
//   Q(Gemm(DQ(a_q, ...), DQ(w_q, ...)) {transB}, ys, yz)
//     -> QLinearMatMul(a_q, ..., w_q', ...)   w_q' = w_q transposed when transB
//   Q(Relu(contraction), ys, yz) as Q(contraction) when yz is its type's
//     lowest value: Q's saturation then clamps what Relu would (Q(0) = yz).
// The bias is the int32 QLinearConv adds to its accumulator, which is what
// DQ(b_q) adds to the f32 sum exactly when bs is xs * ws rounded to f32 and
// its zero point 0, as the quantizer writes it.
//
// Expects: a verified graph, before constant_fold (which would dequantize the
// weights into f32 initializers).
// Leaves alone: weights, scales or zero points that are not constants; x, y
// or a Gemm's A with more than one scale; blocked quantization; scales other
// than f32 and 8-bit types other than int8 / uint8; per-channel weights along
// any other axis than the output channels; a bias of another scale or zero
// point; a Gemm with C, alpha != 1 or transA (QLinearMatMul adds no bias, so
// no exact form exists: it stays a float Gemm); a contraction, or Relu, read
// by anything but Q; and Q outputs of the main graph.
#include <optional>
#include <string>
#include <vector>

#include "passes/rewrite.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

bool is_8bit(DType t) { return t == DType::I8 || t == DType::U8; }

bool onnx_op(const Node& n) { return n.domain().empty(); }

// A DequantizeLinear's or QuantizeLinear's scale and zero point, both constants.
struct Quantization {
  Value* data = nullptr;  // DQ: the quantized input; Q: the float input
  Value* scale = nullptr;
  Value* zero_point = nullptr;
  Tensor scales, zero_points;
  int64_t axis = 0;  // normalized; meaningful when scales has more than one element
};

// The scale and zero point of a DQ or Q node n: constants, f32 scales, no
// blocks, an explicit zero point; nullopt otherwise.
std::optional<Quantization> quantization_of(const Node& n) {
  if (!onnx_op(n) || n.num_inputs() < 3 || !n.has_input(2)) return std::nullopt;
  if (n.opset() >= 21 && n.get_int("block_size", 0) != 0) return std::nullopt;
  if (n.opset() >= 23 && (n.get_int("output_dtype", 0) != 0 || n.get_int("precision", 0) != 0)) return std::nullopt;
  std::optional<Tensor> s = constant_value(n.input(1));
  std::optional<Tensor> z = constant_value(n.input(2));
  if (!s || !z || s->dtype() != DType::F32 || !is_8bit(z->dtype()) || s->numel() != z->numel() || s->rank() > 1)
    return std::nullopt;
  Quantization q{n.input(0), n.input(1), n.input(2), *s, *z, 0};
  const Type& x = n.input(0)->type();
  if (s->numel() > 1) {
    if (!x.is_tensor() || !x.has_rank()) return std::nullopt;
    int64_t rank = static_cast<int64_t>(x.rank());
    int64_t axis = n.get_int("axis", 1);
    if (axis < -rank || axis >= rank) return std::nullopt;
    q.axis = axis < 0 ? axis + rank : axis;
  }
  return q;
}

// The DequantizeLinear producing v, with its quantization; nullopt otherwise.
std::optional<Quantization> dequantized(const Value* v) {
  const Node* p = v->producer();
  if (!p || p->op_type() != "DequantizeLinear" || v->type().dtype() != DType::F32) return std::nullopt;
  std::optional<Quantization> q = quantization_of(*p);
  if (!q || q->data->type().dtype() != q->zero_points.dtype()) return std::nullopt;
  return q;
}

// A per-tensor quantization of an activation.
bool per_tensor(const std::optional<Quantization>& q) { return q && q->scales.numel() == 1; }

// A constant weight, per tensor or per index along `axis`.
bool weight_along(const std::optional<Quantization>& q, int64_t axis) {
  return q && constant_value(q->data) && (q->scales.numel() == 1 || q->axis == axis);
}

// The int32 bias of a QLinearConv for DQ(b_q, bs, bz) next to x's and w's
// scales: b_q itself when bz is 0 and bs is xs * ws rounded to f32 for every
// channel; null otherwise.
Value* exact_bias(const Value* b, const Quantization& x, const Quantization& w) {
  const Node* p = b->producer();
  if (!p || p->op_type() != "DequantizeLinear" || !onnx_op(*p) || b->type().dtype() != DType::F32) return nullptr;
  if (p->opset() >= 21 && p->get_int("block_size", 0) != 0) return nullptr;
  std::optional<Tensor> q = constant_value(p->input(0));
  std::optional<Tensor> s = p->num_inputs() > 1 ? constant_value(p->input(1)) : std::nullopt;
  if (!q || !s || q->dtype() != DType::I32 || s->dtype() != DType::F32 || q->rank() != 1) return nullptr;
  const int64_t channels = q->numel();
  if (w.scales.numel() != 1 && w.scales.numel() != channels) return nullptr;
  if (s->numel() != 1 && s->numel() != channels) return nullptr;
  if (p->has_input(2)) {
    std::optional<Tensor> z = constant_value(p->input(2));
    if (!z) return nullptr;
    for (int64_t i = 0; i < z->numel(); ++i)
      if (z->get_i64(i) != 0) return nullptr;
  }
  const float xs = static_cast<float>(x.scales.get_f64(0));
  for (int64_t c = 0; c < channels; ++c) {
    float ws = static_cast<float>(w.scales.get_f64(w.scales.numel() == 1 ? 0 : c));
    if (static_cast<float>(s->get_f64(s->numel() == 1 ? 0 : c)) != xs * ws) return nullptr;
  }
  return p->input(0);
}

// The lowest value of an 8-bit type.
int64_t lowest(DType t) { return t == DType::I8 ? -128 : 0; }

// The contraction Q quantizes (through a Relu, kZeroFloor, that Q's
// saturation makes redundant), read by nothing else; null otherwise.
Node* quantized_contraction(Node& q, const Quantization& y, Rewriter& rw) {
  Value* v = q.input(0);
  Node* p = v->producer();
  const OpDef* def = p ? OpRegistry::get().lookup(*p) : nullptr;
  if (def && def->has(kZeroFloor) && rw.num_uses(v) == 1 && !is_model_output(v) &&
      y.zero_points.get_i64(0) == lowest(y.zero_points.dtype())) {
    v = p->input(0);
    p = v->producer();
  }
  if (!p || !onnx_op(*p) || rw.num_uses(v) != 1 || is_model_output(v) || p->num_outputs() != 1) return nullptr;
  const std::string& op = p->op_type();
  return op == "Conv" || op == "MatMul" || op == "Gemm" ? p : nullptr;
}

// The QLinear node's output replaces Q's.
bool take_over(Node& q, Node* fused, Rewriter& rw) {
  fused->set_source(q.source());
  fused->output(0)->set_type(q.output(0)->type());
  return rw.replace(q.output(0), fused->output(0));
}

Node* insert_fused(Node& q, const std::string& op, const std::vector<Value*>& inputs, const Node& contraction) {
  Graph& g = *q.graph();
  return g.insert_node(&q, op, inputs, {g.fresh_name(q.output(0)->name())}, "", contraction.name());
}

bool fuse_conv(Node& q, const Quantization& y, Node& conv, Rewriter& rw) {
  std::optional<Quantization> x = dequantized(conv.input(0));
  std::optional<Quantization> w = dequantized(conv.input(1));
  if (!per_tensor(x) || !weight_along(w, 0)) return false;
  std::vector<Value*> inputs = {x->data, x->scale, x->zero_point, w->data, w->scale, w->zero_point, y.scale,
                                y.zero_point};
  if (conv.has_input(2)) {
    Value* b = exact_bias(conv.input(2), *x, *w);
    if (!b) return false;
    inputs.push_back(b);
  }
  Node* fused = insert_fused(q, "QLinearConv", inputs, conv);
  for (const auto& [name, attr] : conv.attrs()) fused->set_attr(name, attr);
  return take_over(q, fused, rw);
}

// MatMul, or Gemm without C, alpha or transA: B [K, N] quantized per tensor
// or per column (a Gemm's transposed B [N, K] per row, transposed here).
bool fuse_matmul(Node& q, const Quantization& y, Node& mm, Rewriter& rw) {
  std::optional<Quantization> a = dequantized(mm.input(0));
  std::optional<Quantization> b = dequantized(mm.input(1));
  if (!per_tensor(a) || !b) return false;
  const bool gemm = mm.op_type() == "Gemm";
  const bool trans_b = gemm && mm.get_int("transB", 0) != 0;
  if (gemm && (mm.has_input(2) || mm.get_int("transA", 0) != 0 || mm.get_float("alpha", 1.0f) != 1.0f)) return false;
  std::optional<Tensor> w = constant_value(b->data);
  if (!w || (b->scales.numel() > 1 && (w->rank() != 2 || b->axis != (trans_b ? 0 : 1)))) return false;
  Value* weight = b->data;
  if (trans_b) {
    if (w->rank() != 2) return false;
    const int64_t n = w->shape()[0], k = w->shape()[1];
    Tensor t(w->dtype(), {k, n});
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) t.set_f64(j * n + i, w->get_f64(i * k + j));
    Graph& g = *q.graph();
    weight = g.add_initializer(g.fresh_name(b->data->name() + "_t"), t);
  }
  Node* fused = insert_fused(q, "QLinearMatMul",
                             {a->data, a->scale, a->zero_point, weight, b->scale, b->zero_point, y.scale, y.zero_point},
                             mm);
  return take_over(q, fused, rw);
}

// Q(contraction(DQ, DQ)) -> QLinearConv / QLinearMatMul
bool fuse_quantized(Node& q, Rewriter& rw) {
  std::optional<Quantization> y = quantization_of(q);
  if (!y || y->scales.numel() != 1 || is_model_output(q.output(0)) || q.input(0)->type().dtype() != DType::F32 ||
      q.output(0)->type().dtype() != y->zero_points.dtype())
    return false;
  Node* c = quantized_contraction(q, *y, rw);
  if (!c) return false;
  return c->op_type() == "Conv" ? fuse_conv(q, *y, *c, rw) : fuse_matmul(q, *y, *c, rw);
}

const std::vector<RewriteRule> kRules = {
    // Q(Conv | MatMul | Gemm (DQ(x), DQ(w), DQ(b)?)) -> QLinearConv | QLinearMatMul
    {"QuantizeLinear", "qdq_fused", fuse_quantized},
};

}  // namespace

bool fuse_qdq(Graph& g, PassContext& ctx) { return apply_rewrites(g, kRules, ctx.stats); }

}  // namespace tcc
