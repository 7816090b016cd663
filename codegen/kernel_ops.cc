#include "codegen/kernel_ops.h"

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

KernelRole default_domain_role(const Node& n) {
  static const std::unordered_set<std::string_view> pointwise = {
      "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Neg", "Abs", "Sign", "Relu", "Sqrt",
      "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sin", "Cos", "Floor", "Ceil", "Round", "Sigmoid",
      "Softplus", "HardSigmoid", "LeakyRelu", "Elu", "Gelu", "IsNaN", "Equal", "Less", "LessOrEqual",
      "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Where", "Cast", "Clip"};
  static const std::unordered_set<std::string_view> reductions = {"ReduceSum", "ReduceMean", "ReduceMax",
                                                                  "ReduceMin", "ReduceProd"};
  static const std::unordered_set<std::string_view> movement = {"Reshape", "Transpose", "Unsqueeze",
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
    // Reshape and Expand take their target shape from the output type; their
    // shape argument is not read by the kernel. Squeeze/Unsqueeze axes must be known.
    if ((op == "Squeeze" || op == "Unsqueeze") && n.has_input(1) && !constant_input(n, 1)) return KernelRole::None;
    return KernelRole::Movement;
  }
  if (op == "Slice") {
    for (size_t i = 1; i < n.num_inputs(); ++i)
      if (!constant_input(n, i)) return KernelRole::None;
    return KernelRole::Movement;
  }
  if (op == "MatMul") return KernelRole::Contraction;
  if (op == "Gemm") return KernelRole::Contraction;
  return KernelRole::None;
}

}  // namespace

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
  return KernelRole::None;
}

}  // namespace tcc
