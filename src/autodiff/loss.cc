#include "src/autodiff/loss.h"

#include "src/ir/emitter.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

Value* label_input(Graph& g, const std::string& name, const Type& type) {
  if (Value* v = g.find_local(name)) {
    if (!v->is_graph_input() || v->is_initializer())
      model_error(g, "--label '" + name + "' names a value that is not a graph input");
    return v;
  }
  return g.add_input(name, type);
}

}  // namespace

Value* build_builtin_loss(Graph& g, const BuiltinLoss& spec) {
  Value* out = nullptr;
  for (Value* v : g.outputs())
    if (v->name() == spec.output) out = v;
  if (!out) model_error(g, "--loss-on '" + spec.output + "' is not an output of the model");
  if (spec.label.empty()) throw InputError("--loss-fn needs --label NAME (the input holding the targets)");
  infer_shapes(g);
  const Type& t = out->type();
  if (!t.is_tensor() || !t.has_rank() || !is_float(t.dtype()))
    model_error(g, "--loss-on '" + spec.output + "' must be a float tensor of known rank, got " +
                                                 t.str());
  Emitter e(g, "loss");
  std::string loss_name = g.find("loss") ? g.fresh_name("loss") : "loss";
  if (spec.kind == LossKind::Mse) {
    Value* label = label_input(g, spec.label, t);
    Value* diff = e.op("Sub", {out, label});
    return e.reduce("ReduceMean", e.op("Mul", {diff, diff}), {}, false, loss_name);
  }
  // Cross-entropy over the last axis: -mean(sum(log_softmax(logits) * one_hot(label))).
  // The one-hot mask comes from comparing the label with Range(0, classes),
  // which keeps the loss to ops that have gradient rules. Both sides are f32
  // (exact for class indices below 2^24): an i64 range of a few classes would
  // fold into a literal integer vector, which a generated kernel cannot take,
  // where an f32 one is a buffer like any weight.
  if (t.rank() == 0) model_error(g, "cross_entropy needs logits with a class axis, got " + t.str());
  Dims label_dims(t.shape().begin(), t.shape().end() - 1);
  Value* label = label_input(g, spec.label, Type::tensor(DType::I64, label_dims));
  Value* logp = e.op("LogSoftmax", {out}, {{"axis", Attribute::of_int(-1)}});
  Value* classes = e.op("Gather", {e.shape_of(out), e.ints({-1})}, {{"axis", Attribute::of_int(0)}});
  auto to_f32 = [&](Value* v) { return e.op("Cast", {v}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::F32))}}); };
  Value* range = e.op("Range", {e.scalar(0, DType::F32), to_f32(e.squeeze(classes, {0})), e.scalar(1, DType::F32)});
  Value* hit = e.op("Equal", {to_f32(e.unsqueeze(label, {-1})), range});
  Value* one_hot = e.op("Cast", {hit}, {{"to", Attribute::of_int(static_cast<int64_t>(t.dtype()))}});
  Value* picked = e.reduce("ReduceSum", e.op("Mul", {logp, one_hot}), {-1}, false);
  return e.named(loss_name, "Neg", {e.reduce("ReduceMean", picked, {}, false)});
}

}  // namespace tcc
