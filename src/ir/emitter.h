// Emitter: appends nodes to a graph under one name prefix, with the small
// helpers that the loss, the gradient rules (src/ops/gradient.h) and the
// optimizers share (scalar and i64 constants, opset-aware
// Reduce*/Squeeze/Unsqueeze, sum-to-shape).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "src/ir/graph.h"

namespace tcc {

class Emitter {
 public:
  // Nodes are named `<prefix>/<Op>.<n>`, their single output takes the same
  // name, and they compute `part` of the step.
  Emitter(Graph& g, std::string prefix, StepPart part = StepPart::Forward);

  Graph& graph() { return g_; }
  int64_t opset() const { return opset_; }

  Value* op(const std::string& op_type, const std::vector<Value*>& inputs,
            std::map<std::string, Attribute> attrs = {});
  std::vector<Value*> op_n(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                           std::map<std::string, Attribute> attrs = {}, const std::string& domain = "");
  // A value with a chosen name (graph outputs of the training step).
  Value* named(const std::string& name, const std::string& op_type, const std::vector<Value*>& inputs,
              std::map<std::string, Attribute> attrs = {});

  Value* scalar(double v, DType dtype);         // 0-d constant
  Value* ints(const std::vector<int64_t>& v);  // 1-D i64 constant
  Value* shape_of(Value* x) { return op("Shape", {x}); }
  Value* zeros_like(Value* x, DType dtype);

  // Reduce* over constant axes (an input from opset 13 for ReduceSum and 18 for
  // the others, an attribute before). Empty axes reduce every axis.
  Value* reduce(const std::string& op_type, Value* x, const std::vector<int64_t>& axes, bool keepdims,
               const std::string& result_name = "");
  Value* squeeze(Value* x, const std::vector<int64_t>& axes);
  Value* unsqueeze(Value* x, const std::vector<int64_t>& axes);
  // Sums a gradient of shape `from` down to `to`, the shape of an operand that
  // was broadcast to `from`: leading axes are summed away, axes where `to` is 1
  // and `from` is not are summed with keepdims. Symbolic dims are assumed not
  // to be broadcast (shape inference has unified them).
  Value* sum_to(Value* grad, const Dims& from, const Dims& to);

 private:
  std::string fresh(const std::string& op_type);
  Graph& g_;
  std::string prefix_;
  StepPart part_;
  int64_t opset_;
};

}  // namespace tcc
