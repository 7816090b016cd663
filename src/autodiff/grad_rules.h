// Gradient rules: one per differentiable op, in a table keyed by op type
// (default ONNX domain), as src/ops registers one OpDef per op.
//
// A rule reads the forward node, the incoming gradients of its outputs and
// emits the gradients of the inputs that need one. It may read forward values
// (inputs and outputs: they are computed before the backward runs) and their
// types, which shape inference has filled in.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "src/autodiff/builder.h"
#include "src/shape/shape_inference.h"

namespace tcc {

class GradContext {
 public:
  GradContext(const Node& node, Emitter& e, const ShapeInfo& info, std::vector<Value*> dys,
              std::vector<bool> wants)
      : node_(node), e_(e), info_(info), dys_(std::move(dys)), wants_(std::move(wants)), dxs_(wants_.size()) {}

  const Node& node() const { return node_; }
  Emitter& e() { return e_; }
  Value* in(size_t i) const { return node_.input(i); }
  Value* out(size_t i = 0) const { return node_.output(i); }
  // Incoming gradient of output i; null when the loss does not depend on it.
  Value* dy(size_t i = 0) const { return i < dys_.size() ? dys_[i] : nullptr; }
  // Whether input i needs a gradient (it is float and depends on a parameter).
  bool wants(size_t i) const { return i < wants_.size() && wants_[i]; }
  void set(size_t i, Value* g) { dxs_.at(i) = g; }
  const std::vector<Value*>& results() const { return dxs_; }

  // The forward value's dims; a value of unknown rank fails naming the node.
  const Dims& dims(const Value* v) const;
  DType dtype() const { return out()->type().dtype(); }
  // Input i's value when it is known at compile time (an initializer, a
  // Constant or a folded value), else null.
  const Tensor* constant(size_t i) const;
  std::vector<int64_t> const_ints(size_t i, const std::string& what) const;
  // Normalizes a possibly negative axis against a rank.
  int64_t axis(int64_t a, size_t rank) const;
  // g (shaped like output 0) summed down to input i's shape.
  Value* unbroadcast(Value* g, size_t i) { return e_.sum_to(g, dims(out()), dims(in(i))); }
  [[noreturn]] void fail(const std::string& msg) const { node_.fail(msg); }

 private:
  const Node& node_;
  Emitter& e_;
  const ShapeInfo& info_;
  std::vector<Value*> dys_;
  std::vector<bool> wants_;
  std::vector<Value*> dxs_;
};

using GradRule = std::function<void(GradContext&)>;

// The rule for a node's op, or null when there is none (or tcc does not
// support the op at the node's opset).
const GradRule* find_grad_rule(const Node& n);
// The ops (default domain) that have a rule.
std::vector<std::string> grad_rule_ops();
// Why an op has no rule, for ops tcc does not support or knows it cannot
// differentiate yet; empty otherwise.
std::string no_grad_rule_reason(const Node& n);

}  // namespace tcc
