#include "src/ops/kernel_roles.h"

#include <algorithm>
#include <numeric>

#include "src/ops/fusion.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {

bool strided_batches(const Node& n) {
  const Type& out = n.output(0)->type();
  if (!out.is_tensor() || !out.has_rank() || out.rank() < 3) return true;
  const SymExpr one = SymExpr::constant(1);
  size_t batch = out.rank() - 2;
  for (size_t i = 0; i < 2; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.has_rank() || t.rank() < 3) continue;
    size_t mine = t.rank() - 2, lead = batch - std::min(batch, mine);
    bool all_one = true, full = true;
    for (size_t d = 0; d < batch; ++d) {
      const SymExpr& e = d < lead ? one : t.shape()[d - lead].expr();
      all_one = all_one && e == one;
      full = full && (e == out.shape()[d].expr() || out.shape()[d].expr() == one);
    }
    if (!all_one && !full) return false;
  }
  return true;
}

namespace {

bool fully_known_tensor(const Value* v) {
  if (v == nullptr || !v->type().is_tensor() || !v->type().has_rank()) return false;
  for (const Dim& d : v->type().shape())
    if (d.is_unknown()) return false;
  return true;
}

bool kernel_dtype(DType t) { return t != DType::String && t != DType::Undefined; }

}  // namespace

bool constant_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (v == nullptr) return true;
  if (v->is_initializer()) return true;
  return v->producer() != nullptr && v->producer()->op_type() == "Constant" && v->producer()->domain().empty();
}

bool literal_input(const Node& n, size_t i) {
  if (!constant_input(n, i)) return false;
  const Value* v = n.input(i);
  if (v == nullptr) return true;
  const Type& t = v->type();
  if (!t.is_tensor() || !t.has_rank()) return false;
  int64_t numel = 1;
  for (const Dim& d : t.shape()) {
    if (!d.is_static()) return false;
    numel *= d.value();
  }
  return is_literal(t.dtype(), static_cast<int64_t>(t.rank()), numel);
}

std::string computed_shape_refusal(const Node& n) {
  if (n.has_input(1) && !literal_input(n, 1))
    return "its target shape is computed at run time from values shape inference cannot follow";
  return "";
}

bool single_element(const Type& t) {
  return std::all_of(t.shape().begin(), t.shape().end(), [](const Dim& d) { return d.is_static() && d.value() == 1; });
}

namespace {

std::vector<int64_t> static_dims(const Value* v) {
  std::vector<int64_t> dims;
  for (const Dim& d : v->type().shape()) dims.push_back(d.is_static() ? d.value() : -1);
  return dims;
}

}  // namespace

std::string conv_window(const Node& n, ConvWindow* out) {
  if (n.num_inputs() < 2 || n.input(0) == nullptr || n.input(1) == nullptr) return "Conv needs X and W";
  const Value* x = n.input(0);
  const Value* w = n.input(1);
  for (const Value* v : {x, w})
    if (!v->type().is_tensor() || !v->type().has_rank()) return "X or W is not a tensor of known rank";
  DType dt = x->type().dtype();
  if (!is_float(dt)) return "convolution kernels compute float dtypes, not " + std::string(dtype_name(dt));
  for (const Value* v : n.inputs())
    if (v != nullptr && v->type().dtype() != dt) return "X, W and B differ in dtype";
  size_t rank = x->type().shape().size();
  if (rank < 3 || rank > 5) return "cuDNN convolves 1 to 3 spatial dims, not " + std::to_string(rank - 2);
  std::vector<int64_t> ws = static_dims(w), xs = static_dims(x);
  if (ws.size() != rank) return "W's rank is not X's";
  for (size_t i = 0; i < rank; ++i)
    if (i != 1 && ws[i] < 0) return "W's shape is not static (but for its input channels, when they are X's)";
  ConvWindow cw;
  cw.kernel.assign(ws.begin() + 2, ws.end());
  if (n.has_attr("kernel_shape") && n.get_ints("kernel_shape") != cw.kernel) return "kernel_shape disagrees with W";
  SlidingWindow sw;
  if (std::string why = sliding_window(n, cw.kernel, {xs.begin() + 2, xs.end()}, &sw); !why.empty()) return why;
  cw.groups = n.get_int("group", 1);
  if (cw.groups < 1) return "malformed group";
  if (sw.begin != sw.end) return "asymmetric padding, which cuDNN's convolution descriptor cannot express";
  cw.strides = std::move(sw.strides);
  cw.dilations = std::move(sw.dilations);
  cw.pads = std::move(sw.begin);
  if (ws[1] < 0) {
    // A weight gradient's convolution: X's batch is its symbolic channel axis.
    const Dim &xc = x->type().shape()[1], &wc = w->type().shape()[1];
    if (cw.groups != 1 || xc.is_unknown() || wc.is_unknown() || xc.expr() != wc.expr())
      return "W's input channels are symbolic and not X's";
  } else if (ws[0] % cw.groups != 0 || (xs[1] >= 0 && xs[1] != ws[1] * cw.groups)) {
    return "channels do not match group";
  }
  if (n.has_input(2) && static_dims(n.input(2)) != std::vector<int64_t>{ws[0]}) return "B is not one value per filter";
  if (out != nullptr) *out = std::move(cw);
  return "";
}

std::string pool_window(const Node& n, PoolWindow* out) {
  if (n.num_inputs() != 1 || n.input(0) == nullptr) return "a pool takes one input";
  const Value* x = n.input(0);
  if (!x->type().is_tensor() || !x->type().has_rank()) return "X is not a tensor of known rank";
  DType dt = x->type().dtype();
  bool bytes = n.op_type() == "MaxPool" && (dt == DType::I8 || dt == DType::U8);
  if (!is_float(dt) && !bytes)
    return "pool kernels compute float dtypes (and int8 and uint8 maxima), not " + std::string(dtype_name(dt));
  std::vector<int64_t> xs = static_dims(x);
  if (xs.size() < 3) return "X has no spatial dims";
  PoolWindow pw;
  pw.kernel = n.get_ints("kernel_shape");
  if (pw.kernel.size() != xs.size() - 2 || std::any_of(pw.kernel.begin(), pw.kernel.end(), [](int64_t k) { return k < 1; }))
    return "kernel_shape does not give one positive size per spatial dim";
  int64_t taps = 1;
  for (size_t i = 0; i < pw.kernel.size() && taps <= kMaxPoolTaps; ++i)
    taps *= std::min(pw.kernel[i], kMaxPoolTaps + 1);
  if (taps > kMaxPoolTaps)
    return "a window of more than " + std::to_string(kMaxPoolTaps) + " taps (the kernel unrolls its window)";
  SlidingWindow sw;
  if (std::string why = sliding_window(n, pw.kernel, {xs.begin() + 2, xs.end()}, &sw); !why.empty()) return why;
  pw.strides = std::move(sw.strides);
  pw.dilations = std::move(sw.dilations);
  pw.pads_begin = std::move(sw.begin);
  pw.pads_end = std::move(sw.end);
  pw.count_include_pad = n.op_type() == "AveragePool" && n.get_int("count_include_pad", 0) != 0;
  if (out != nullptr) *out = std::move(pw);
  return "";
}

std::string depthwise_window(const Node& n, PoolWindow* out) {
  ConvWindow cw;
  if (std::string why = conv_window(n, &cw); !why.empty()) return why;
  const Dim& channels = n.input(0)->type().shape()[1];
  const Dim& filters = n.input(1)->type().shape()[0];
  if (!channels.is_static() || cw.groups != channels.value() || !filters.is_static() ||
      filters.value() != channels.value())
    return "not a depthwise convolution (one filter per input channel)";
  int64_t taps = 1;
  for (int64_t k : cw.kernel) taps *= std::min(k, kMaxPoolTaps + 1);
  if (taps > kMaxPoolTaps)
    return "a window of more than " + std::to_string(kMaxPoolTaps) + " taps (the kernel unrolls its window)";
  if (out != nullptr) {
    out->kernel = std::move(cw.kernel);
    out->strides = std::move(cw.strides);
    out->dilations = std::move(cw.dilations);
    out->pads_begin = cw.pads;
    out->pads_end = std::move(cw.pads);
    out->count_include_pad = false;
  }
  return "";
}

bool is_reshape(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  return def != nullptr && def->has(kReshape);
}

std::optional<std::vector<int>> split_axes(const std::vector<SymExpr>& in, const std::vector<SymExpr>& out) {
  const SymExpr one = SymExpr::constant(1);
  std::vector<int> from(out.size(), -1);
  size_t j = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k] == one) continue;
    SymExpr product = one;
    bool took = false;
    while (j < out.size() && !(took && product == in[k])) {
      if (out[j] != one) {
        product = product * out[j];
        took = true;
        from[j] = static_cast<int>(k);
      }
      ++j;
    }
    if (!took || product != in[k]) return std::nullopt;
  }
  for (; j < out.size(); ++j)
    if (out[j] != one) return std::nullopt;
  return from;
}

bool swaps_last_two_axes(const Node& n) {
  if (n.op_type() != "Transpose" || !n.domain().empty() || n.num_inputs() != 1) return false;
  const Type& t = n.input(0)->type();
  if (!t.is_tensor() || (!is_float(t.dtype()) && t.dtype() != DType::I8) || !t.has_rank() || t.rank() < 2) return false;
  std::vector<int64_t> perm(t.rank());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return n.get_ints("perm", {}) == perm;
}

std::string topk_kernel_refusal(const Node& n) {
  if (!literal_input(n, 1)) return "k is computed at run time; the kernel needs it constant";
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.has_rank() || x.rank() == 0) return "X is not a tensor of known rank 1 or more";
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t axis = n.get_int("axis", -1);
  if (axis < -rank || axis >= rank) return "axis " + std::to_string(axis) + " is out of range";
  const auto at = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  if (!x.shape()[at].is_static()) return "the axis is symbolic; the kernel walks static rows";
  const Type& values = n.output(0)->type();
  if (!values.is_tensor() || !values.has_rank() || values.rank() != x.rank() || !values.shape()[at].is_static() ||
      values.shape()[at].value() < 1)
    return "k is not a constant of at least 1";
  return "";
}

std::string kernel_refusal(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  return def != nullptr && def->refusal ? def->refusal(n) : "";
}

std::string epilogue_activation(const Node& n, uint32_t library) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (def == nullptr || (def->epilogues & library) == 0) return "";
  return def->epilogue_refusal && !def->epilogue_refusal(n).empty() ? "" : def->activation;
}

bool library_epilogue(const Node& n, uint32_t library) { return !epilogue_activation(n, library).empty(); }

std::string epilogue_refusal(const Node& n, uint32_t library) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (def == nullptr || (def->epilogues & library) == 0 || !def->epilogue_refusal) return "";
  return def->epilogue_refusal(n);
}

std::string epilogue_ops(uint32_t library) {
  std::string ops;
  for (const OpDef* def : OpRegistry::get().all())
    if ((def->epilogues & library) != 0) ops += (ops.empty() ? "" : ", ") + def->op_type;
  return ops;
}

bool atomic_update_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::I32 || dtype == DType::I64;
}

bool is_literal(DType dtype, int64_t rank, int64_t numel) {
  return numel == 1 || (is_integer(dtype) && rank <= 1 && numel <= kMaxLiteralElements);
}

KernelRole kernel_role(const Node& n) {
  for (const Value* v : n.outputs())
    if (!fully_known_tensor(v) || !kernel_dtype(v->type().dtype())) return KernelRole::None;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (v != nullptr && (!fully_known_tensor(v) || !kernel_dtype(v->type().dtype()))) return KernelRole::None;
  }
  // An op tcc does not know at the node's opset (Gelu before 20) has no rule
  // that checked its types: its declared output is all there is, and no kernel
  // is built from it.
  const OpDef* def = OpRegistry::get().lookup(n);
  return def != nullptr && def->kernel ? def->kernel(n) : KernelRole::None;
}

}  // namespace tcc
