#include "codegen/kernel_ops.h"

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "src/ir/fusion.h"

namespace tcc {

namespace {

bool fully_known_tensor(const Value* v) {
  if (v == nullptr || !v->type().is_tensor() || !v->type().has_rank()) return false;
  for (const Dim& d : v->type().shape())
    if (d.is_unknown()) return false;
  return true;
}

bool kernel_dtype(DType t) { return t != DType::String && t != DType::Undefined; }

// Inputs that must be compile-time constants for the op to be generated.
bool constant_input(const Node& n, size_t i) {
  const Value* v = n.input(i);
  if (v == nullptr) return true;
  if (v->is_initializer()) return true;
  return v->producer() != nullptr && v->producer()->op_type() == "Constant" && v->producer()->domain().empty();
}

bool single_element(const Type& t) {
  return std::all_of(t.shape().begin(), t.shape().end(), [](const Dim& d) { return d.is_static() && d.value() == 1; });
}

KernelRole default_domain_role(const Node& n) {
  static const std::unordered_set<std::string_view> pointwise = {
      "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Neg", "Abs", "Sign", "Relu", "Sqrt",
      "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sin", "Cos", "Floor", "Ceil", "Round", "Sigmoid",
      "Softplus", "HardSigmoid", "LeakyRelu", "Elu", "Gelu", "IsNaN", "Equal", "Less", "LessOrEqual",
      "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where", "Cast", "Clip"};
  static const std::unordered_set<std::string_view> reductions = {"ReduceSum", "ReduceMean", "ReduceMax",
                                                                  "ReduceMin", "ReduceProd"};
  static const std::unordered_set<std::string_view> movement = {"Reshape", "Flatten", "Transpose", "Unsqueeze",
                                                                "Squeeze", "Expand", "Identity"};
  const std::string& op = n.op_type();
  if (pointwise.count(op)) {
    // Max/Min take any number of inputs; kernels take two. Mod with fmod=0 on floats is not generated.
    if ((op == "Max" || op == "Min") && n.num_inputs() != 2) return KernelRole::None;
    if (op == "Clip")
      for (size_t i = 1; i < n.num_inputs(); ++i)
        if (!constant_input(n, i)) return KernelRole::None;
    return KernelRole::Pointwise;
  }
  if (reductions.count(op)) {
    if (n.opset() >= 18 || op == "ReduceSum") {
      if (n.has_input(1) && !constant_input(n, 1)) return KernelRole::None;
    }
    return KernelRole::Reduction;
  }
  if (movement.count(op)) {
    // Reshape, Flatten and Expand take their target shape from the output type; their
    // shape argument is not read by the kernel. Squeeze/Unsqueeze axes must be known.
    if ((op == "Squeeze" || op == "Unsqueeze") && n.has_input(1) && !constant_input(n, 1)) return KernelRole::None;
    return KernelRole::Movement;
  }
  if (op == "Slice") {
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (!constant_input(n, i)) return KernelRole::None;
    return KernelRole::Movement;
  }
  if (op == "Conv") return conv_window(n, nullptr).empty() ? KernelRole::Convolution : KernelRole::None;
  if (op == "Concat") {
    // Integer Concats build shapes the host reads; a one-element constant
    // input would be copied into the body as a literal, not a buffer.
    if (!is_float(n.output(0)->type().dtype()) || !n.has_attr("axis")) return KernelRole::None;
    for (size_t i = 0; i < n.num_inputs(); ++i)
      if (!n.has_input(i) || (constant_input(n, i) && single_element(n.input(i)->type()))) return KernelRole::None;
    return KernelRole::Indexed;
  }
  if (op == "Gather") {
    // Integer Gathers pick shape values the host reads; constant indices (a
    // few integers) or a one-element table would be copied into the body as
    // literals, not buffers.
    if (!is_float(n.output(0)->type().dtype()) || constant_input(n, 1) ||
        (constant_input(n, 0) && single_element(n.input(0)->type())))
      return KernelRole::None;
    DType index = n.input(1)->type().dtype();
    return index == DType::I64 || index == DType::I32 ? KernelRole::Indexed : KernelRole::None;
  }
  if (op == "MatMul") return KernelRole::Contraction;
  if (op == "Gemm") return KernelRole::Contraction;
  return KernelRole::None;
}

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
  if (ws.size() != rank || std::find(ws.begin(), ws.end(), -1) != ws.end()) return "W's shape is not static";
  size_t ns = rank - 2;
  ConvWindow cw;
  cw.kernel.assign(ws.begin() + 2, ws.end());
  if (n.has_attr("kernel_shape") && n.get_ints("kernel_shape") != cw.kernel) return "kernel_shape disagrees with W";
  cw.strides = n.get_ints("strides", std::vector<int64_t>(ns, 1));
  cw.dilations = n.get_ints("dilations", std::vector<int64_t>(ns, 1));
  std::vector<int64_t> pads = n.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
  cw.groups = n.get_int("group", 1);
  if (cw.strides.size() != ns || cw.dilations.size() != ns || pads.size() != 2 * ns || cw.groups < 1 ||
      std::any_of(cw.strides.begin(), cw.strides.end(), [](int64_t s) { return s < 1; }) ||
      std::any_of(cw.dilations.begin(), cw.dilations.end(), [](int64_t d) { return d < 1; }))
    return "malformed strides, dilations, pads or group";
  std::string auto_pad = n.get_string("auto_pad", "NOTSET");
  if (auto_pad == "VALID") {
    pads.assign(2 * ns, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < ns; ++i) {
      if (xs[2 + i] < 0) return "SAME padding of a symbolic spatial dim";
      int64_t out = (xs[2 + i] + cw.strides[i] - 1) / cw.strides[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * cw.strides[i] + cw.dilations[i] * (cw.kernel[i] - 1) + 1 - xs[2 + i]);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[ns + i] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return "unknown auto_pad '" + auto_pad + "'";
  }
  for (size_t i = 0; i < ns; ++i) {
    if (pads[i] != pads[ns + i]) return "asymmetric padding, which cuDNN's convolution descriptor cannot express";
    cw.pads.push_back(pads[i]);
  }
  if (ws[0] % cw.groups != 0 || (xs[1] >= 0 && xs[1] != ws[1] * cw.groups)) return "channels do not match group";
  if (n.has_input(2) && static_dims(n.input(2)) != std::vector<int64_t>{ws[0]}) return "B is not one value per filter";
  if (out != nullptr) *out = std::move(cw);
  return "";
}

KernelRole kernel_role(const Node& n) {
  for (const Value* v : n.outputs())
    if (!fully_known_tensor(v) || !kernel_dtype(v->type().dtype())) return KernelRole::None;
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (v != nullptr && (!fully_known_tensor(v) || !kernel_dtype(v->type().dtype()))) return KernelRole::None;
  }
  if (n.domain().empty()) return default_domain_role(n);
  if (n.domain() == kTccDomain && (n.op_type() == "Reshape" || n.op_type() == "Expand" || n.op_type() == "Slice"))
    return KernelRole::Movement;
  if (n.domain() == kTccDomain && (n.op_type() == "Size" || n.op_type() == "Range")) return KernelRole::Pointwise;
  if (n.domain() == kTccDomain && n.op_type() == "ScatterAdd") {
    // Atomic adds of f32 and f64; indices a buffer, not a literal.
    DType t = n.output(0)->type().dtype();
    return (t == DType::F32 || t == DType::F64) && !constant_input(n, 0) ? KernelRole::Indexed : KernelRole::None;
  }
  return KernelRole::None;
}

}  // namespace tcc
