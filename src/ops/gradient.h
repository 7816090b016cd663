// Gradient rules: an op's OpDef::grad (op_registry.h), registered with the op
// in its family file, builds the gradients of a forward node's inputs from the
// incoming gradients of its outputs. src/autodiff runs them in the backward.
//
// A rule reads the forward node, the incoming gradients of its outputs and
// emits the gradients of the inputs that need one. It may read forward values
// (inputs and outputs: they are computed before the backward runs) and their
// types, which shape inference has filled in. Each rule's comment states the
// derivative it emits, with g the incoming gradient and y the forward output.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/ir/emitter.h"

namespace tcc {

class GradContext {
 public:
  // A forward value's compile-time constant (an initializer, a Constant or a
  // value shape inference folded), or null.
  using ConstantFn = std::function<const Tensor*(const Value*)>;

  GradContext(const Node& node, Emitter& e, ConstantFn constant_of, std::vector<Value*> dys, std::vector<bool> wants)
      : node_(node),
        e_(e),
        constant_of_(std::move(constant_of)),
        dys_(std::move(dys)),
        wants_(std::move(wants)),
        dxs_(wants_.size()) {}

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
  ConstantFn constant_of_;
  std::vector<Value*> dys_;
  std::vector<bool> wants_;
  std::vector<Value*> dxs_;
};

using GradRule = std::function<void(GradContext&)>;
// Whether a rule covers a node, given which of its inputs need a gradient;
// where it does not, autodiff differentiates the op's decomposition instead.
using GradApplies = std::function<bool(const Node&, const std::vector<bool>& wants)>;
// Rewrites a forward node the rule covers, before the backward is built, so
// that it also outputs what the rule reads (Attention: each query row's
// log-sum-exp, which its kernel computes anyway).
using SaveForGradient = std::function<void(Graph&, Node&)>;

// ---- helpers the families' rules share

using Attrs = std::map<std::string, Attribute>;

Attrs int_attr(const std::string& k, int64_t v);
Value* mul(GradContext& c, Value* a, Value* b);
// A 0-d constant of the node's float type.
Value* scalar(GradContext& c, double v);
// v (a bool, an integer or another float) cast to the node's float type.
Value* as_dtype(GradContext& c, Value* v);
// x, of the given rank, with axes a and b swapped.
Value* swap_axes(GradContext& c, Value* x, size_t rank, size_t a, size_t b);
// Transpose of the last two axes of a value of the given rank.
Value* transpose_last2(GradContext& c, Value* x, size_t rank);

// The factors x of products, each with whether it is 0 and `safe`, x with 1 for 0.
struct Factors {
  Value* is_zero;
  Value* safe;
};
Factors factors_of(GradContext& c, Value* x);

// The derivative of a product by each of its factors f, the product of the
// others: p / x where the product has no zero, p' (the product of its nonzero
// factors) at its only zero, and 0 at every factor of a product with two or
// more. `nonzero_product` (p', the product of the safe factors) and `zeros`
// (how many factors are 0) are those of each factor's product, read at the factor.
Value* product_of_others(GradContext& c, const Factors& f, Value* nonzero_product, Value* zeros);

// g put into `zeros` at `index` along `axis`, where the index names each
// position at most once (a selection's gradient). With opset 16's reduction
// add, such a scatter into zeros is a generated kernel (tcc::ScatterAdd).
Value* scatter_back(GradContext& c, Value* zeros, Value* index, Value* g, int64_t axis);

// g divided by the elements averaged into each output (x's size over y's).
Value* mean_share(GradContext& c);

// The rules of the ops that only move or broadcast their data, shared by the
// ONNX ops and tcc's symbolic-shape forms (tcc::Reshape, tcc::Expand):
// Reshape's dy back to x's shape, Expand's dy summed over what it broadcast.
void reshape_rule(GradContext& c);
void expand_rule(GradContext& c);

// g to the elements equal to y, split evenly among ties (as torch.amax);
// `reduce` counts the ties with the reduction's axes kept.
void to_extrema(GradContext& c, Value* g, Value* y, const std::function<Value*(Value*)>& reduce);

}  // namespace tcc
