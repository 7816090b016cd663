#include "src/ir/emitter.h"

namespace tcc {

Emitter::Emitter(Graph& g, std::string prefix, StepPart part) : g_(g), prefix_(std::move(prefix)), part_(part) {
  auto it = g.opsets().find("");
  opset_ = it == g.opsets().end() ? 0 : it->second;
}

std::string Emitter::fresh(const std::string& op_type) { return g_.fresh_name(prefix_ + "/" + op_type); }

std::vector<Value*> Emitter::op_n(const std::string& op_type, const std::vector<Value*>& inputs, size_t num_outputs,
                                  std::map<std::string, Attribute> attrs, const std::string& domain) {
  std::string name = fresh(op_type);
  std::vector<std::string> outs;
  for (size_t i = 0; i < num_outputs; ++i) outs.push_back(num_outputs == 1 ? name : name + ":" + std::to_string(i));
  Node* n = g_.add_node(op_type, inputs, outs, domain, name);
  n->set_part(part_);
  for (auto& [k, a] : attrs) n->set_attr(k, std::move(a));
  return n->outputs();
}

Value* Emitter::op(const std::string& op_type, const std::vector<Value*>& inputs,
                   std::map<std::string, Attribute> attrs) {
  return op_n(op_type, inputs, 1, std::move(attrs)).front();
}

Value* Emitter::named(const std::string& name, const std::string& op_type, const std::vector<Value*>& inputs,
                      std::map<std::string, Attribute> attrs) {
  Node* n = g_.add_node(op_type, inputs, {name}, "", fresh(op_type));
  n->set_part(part_);
  for (auto& [k, a] : attrs) n->set_attr(k, std::move(a));
  return n->output(0);
}

Value* Emitter::scalar(double v, DType dtype) {
  Tensor t(dtype, {});
  t.set_f64(0, v);
  return g_.add_initializer(fresh("const"), std::move(t));
}

Value* Emitter::ints(const std::vector<int64_t>& v) {
  return g_.add_initializer(fresh("const"), Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
}

Value* Emitter::zeros_like(Value* x, DType dtype) {
  return op("ConstantOfShape", {shape_of(x)}, {{"value", Attribute::of_tensor(Tensor(dtype, {1}))}});
}

Value* Emitter::reduce(const std::string& op_type, Value* x, const std::vector<int64_t>& axes, bool keepdims,
                      const std::string& result_name) {
  std::map<std::string, Attribute> attrs{{"keepdims", Attribute::of_int(keepdims ? 1 : 0)}};
  std::vector<Value*> inputs{x};
  if (!axes.empty() && opset_ >= (op_type == "ReduceSum" ? 13 : 18)) inputs.push_back(ints(axes));
  else if (!axes.empty()) attrs["axes"] = Attribute::of_ints(axes);
  if (!result_name.empty()) return named(result_name, op_type, inputs, std::move(attrs));
  return op(op_type, inputs, std::move(attrs));
}

Value* Emitter::squeeze(Value* x, const std::vector<int64_t>& axes) {
  if (opset_ >= 13) return op("Squeeze", {x, ints(axes)});
  return op("Squeeze", {x}, {{"axes", Attribute::of_ints(axes)}});
}

Value* Emitter::unsqueeze(Value* x, const std::vector<int64_t>& axes) {
  if (opset_ >= 13) return op("Unsqueeze", {x, ints(axes)});
  return op("Unsqueeze", {x}, {{"axes", Attribute::of_ints(axes)}});
}

Value* Emitter::sum_to(Value* grad, const Dims& from, const Dims& to) {
  TCC_CHECK(from.size() >= to.size()) << "sum_to from rank " << from.size() << " to rank " << to.size();
  size_t lead = from.size() - to.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < lead; ++i) axes.push_back(static_cast<int64_t>(i));
  bool kept_axes = false;
  for (size_t i = 0; i < to.size(); ++i) {
    const Dim& f = from[lead + i];
    if (to[i].is_static() && to[i].value() == 1 && !(f.is_static() && f.value() == 1)) {
      axes.push_back(static_cast<int64_t>(lead + i));
      kept_axes = true;
    }
  }
  if (axes.empty()) return grad;
  if (!kept_axes) return reduce("ReduceSum", grad, axes, false);
  Value* summed = reduce("ReduceSum", grad, axes, true);
  if (lead == 0) return summed;
  std::vector<int64_t> leading(axes.begin(), axes.begin() + static_cast<std::ptrdiff_t>(lead));
  return squeeze(summed, leading);
}

}  // namespace tcc
