// The training losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss
// over scores [N, C, D...] and integer targets [N, D...].
#include <cmath>
#include <numeric>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Float scores and weights with integer targets.
const std::vector<DType> kLossTypes = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64};

// ---------------------------------------------------------------- Losses

void infer_loss(InferContext& ctx, bool with_log_prob) {
  const Type& scores = ctx.ranked_input(0);
  if (scores.rank() < 2) ctx.fail("expected scores of rank >= 2 ([N, C, ...]), got " + scores.str());
  const Type& target = ctx.input_type(1);
  Dims expect = {scores.shape()[0]};
  expect.insert(expect.end(), scores.shape().begin() + 2, scores.shape().end());
  if (target.is_tensor() && target.has_rank()) {
    if (target.rank() != expect.size())
      ctx.fail("expected target of rank " + std::to_string(expect.size()) + " (scores without C), got " + target.str());
    for (size_t i = 0; i < expect.size(); ++i) {
      const Dim& d = target.shape()[i];
      if (d.is_unknown() || expect[i].is_unknown()) continue;
      if (!ctx.env().unify(expect[i], d, &ctx.node()))
        ctx.fail("target dim " + std::to_string(i) + " (" + d.str() + ") disagrees with scores " + scores.str());
    }
  }
  std::string reduction = ctx.node().get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("expected reduction none, sum or mean, got '" + reduction + "'");
  ctx.set_output_type(0, Type::tensor(scores.dtype(), reduction == "none" ? expect : Dims{}));
  if (with_log_prob && ctx.num_outputs() > 1) ctx.set_output_type(1, scores);
}

// Negative log likelihood of `logp` ([N, C, D...] as doubles) at the targets.
Tensor nll(const EvalContext& ctx, const std::vector<double>& logp, const std::vector<int64_t>& scores_shape,
           const Tensor& target, DType out_dtype) {
  const Node& n = ctx.node();
  std::string reduction = n.get_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    ctx.fail("expected reduction none, sum or mean, got '" + reduction + "'");
  int64_t nb = scores_shape[0], c = scores_shape[1], d = product(scores_shape, 2);
  if (target.numel() != nb * d || target.rank() + 1 != scores_shape.size())
    ctx.fail("expected target of shape [N, D...] matching scores " + shape_str(scores_shape) + ", got " +
             shape_str(target.shape()));
  bool has_ignore = n.has_attr("ignore_index");
  int64_t ignore = n.get_int("ignore_index", 0);
  const Tensor* weight = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (weight && weight->numel() != c) ctx.fail("expected weight of " + std::to_string(c) + " values");
  Tensor loss(out_dtype, target.shape());
  double total = 0, wsum = 0;
  for (int64_t i = 0; i < target.numel(); ++i) {
    int64_t cls = target.get_i64(i);
    if (has_ignore && cls == ignore) continue;  // loss 0, weight 0
    if (cls < 0 || cls >= c)
      ctx.fail("target class " + std::to_string(cls) + " is out of range [0, " + std::to_string(c) + ")");
    double w = weight ? weight->get_f64(cls) : 1.0;
    double l = -logp[((i / d) * c + cls) * d + i % d] * w;
    loss.set_f64(i, l);
    total += l;
    wsum += w;
  }
  if (reduction == "none") return loss;
  Tensor out(out_dtype, {});
  out.set_f64(0, reduction == "sum" ? total : total / wsum);
  return out;
}

std::vector<Tensor> eval_nll(EvalContext& ctx) {
  const Tensor& input = ctx.input(0);
  if (input.rank() < 2) ctx.fail("expected input of rank >= 2 ([N, C, ...]), got shape " + shape_str(input.shape()));
  std::vector<double> logp(input.numel());
  for (int64_t i = 0; i < input.numel(); ++i) logp[i] = input.get_f64(i);
  return {nll(ctx, logp, input.shape(), ctx.input(1), input.dtype())};
}

std::vector<Tensor> eval_sce(EvalContext& ctx) {
  const Tensor& scores = ctx.input(0);
  if (scores.rank() < 2) ctx.fail("expected scores of rank >= 2 ([N, C, ...]), got shape " + shape_str(scores.shape()));
  int64_t nb = scores.shape()[0], c = scores.shape()[1], d = product(scores.shape(), 2);
  std::vector<double> logp(scores.numel());
  // Log-softmax over the class axis, shifted by the max for stability.
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t k = 0; k < d; ++k) {
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, scores.get_f64((b * c + j) * d + k));
      for (int64_t j = 0; j < c; ++j) sum += std::exp(scores.get_f64((b * c + j) * d + k) - mx);
      for (int64_t j = 0; j < c; ++j)
        logp[(b * c + j) * d + k] = scores.get_f64((b * c + j) * d + k) - mx - std::log(sum);
    }
  Tensor loss = nll(ctx, logp, scores.shape(), ctx.input(1), scores.dtype());
  if (ctx.num_outputs() < 2) return {loss};
  Tensor lp(scores.dtype(), scores.shape());
  for (int64_t i = 0; i < lp.numel(); ++i) lp.set_f64(i, logp[i]);
  return {loss, lp};
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over [N, C, D...]: with
// a = g * weight[label] (0 at ignore_index; divided by the weights' sum for
// reduction mean), the log-probabilities' gradient is -onehot(label) * a, and
// (SoftmaxCrossEntropyLoss) the scores' is that minus softmax * its sum over
// the classes, with log_prob's own gradient added first when it has one.
void class_loss_rule(GradContext& c) {
  const Node& n = c.node();
  if (c.wants(2)) c.fail("tcc does not differentiate a loss's class weights");
  Emitter& e = c.e();
  const Dims& sd = c.dims(c.in(0));
  if (!sd[1].is_static()) c.fail("the gradient of " + n.op_type() + " needs a static class count, not " + sd[1].str());
  size_t rank = sd.size();
  Value* labels = c.in(1);
  Value* weight = n.num_inputs() > 2 && c.in(2) ? c.in(2) : nullptr;
  Value* a = nullptr;  // per [N, D...] element: its weight, 0 where ignored
  if (n.has_attr("ignore_index")) {
    Value* ignore = e.op("Equal", {labels, e.scalar(static_cast<double>(n.get_int("ignore_index", 0)), DType::I64)});
    labels = e.op("Where", {ignore, e.scalar(0, DType::I64), labels});
    a = e.op("Where", {ignore, scalar(c, 0.0), scalar(c, 1.0)});
  }
  if (weight) {
    Value* w = e.op("Gather", {weight, labels}, int_attr("axis", 0));
    a = a ? mul(c, a, w) : w;
  }
  std::string reduction = n.get_string("reduction", "mean");
  Value* g = c.dy();
  if (reduction == "mean") {
    Value* total = a ? e.reduce("ReduceSum", a, {}, false)
                     : as_dtype(c, e.op("Size", {labels}));
    g = e.op("Div", {g, total});
  }
  bool per_element = a != nullptr || reduction == "none";  // else a is a scalar
  a = a ? mul(c, a, g) : g;  // broadcasts a scalar g (sum, mean) over the elements
  std::vector<int64_t> class_shape(rank, 1);
  class_shape[1] = sd[1].value();
  Value* classes = e.op("Reshape", {e.op("Range", {e.scalar(0, DType::I64), e.scalar(static_cast<double>(sd[1].value()), DType::I64),
                                                  e.scalar(1, DType::I64)}),
                                    e.ints(class_shape)});
  Value* onehot = as_dtype(c, e.op("Equal", {e.unsqueeze(labels, {1}), classes}));
  Value* dlogp = e.op("Neg", {mul(c, onehot, per_element ? e.unsqueeze(a, {1}) : a)});
  if (n.op_type() == "NegativeLogLikelihoodLoss") return c.set(0, dlogp);
  if (c.dy(1)) dlogp = e.op("Add", {dlogp, c.dy(1)});
  Value* softmax = e.op("Softmax", {c.in(0)}, int_attr("axis", 1));
  c.set(0, e.op("Sub", {dlogp, mul(c, softmax, e.reduce("ReduceSum", dlogp, {1}, true))}));
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// NegativeLogLikelihoodLoss(x, t, w) -> -GatherElements(x, t viewed as
// [N, 1, D...], axis 1) * w[t] (Gather), where a target equal to ignore_index
// reads class 0 and weighs 0 (Where); reduction sum is a ReduceSum of that,
// mean its ReduceSum over the weights' (a ReduceMean without weights or
// ignore_index). SoftmaxCrossEntropyLoss is the same over LogSoftmax(x, axis
// 1), which is its log_prob output. Needs x of known shape and a float dtype,
// and for SoftmaxCrossEntropyLoss of rank > 2 opset 13 (LogSoftmax before it
// normalizes over the flattened C, D...). A target out of [0, C) is not
// checked, as the reference kernel does.
bool decompose_class_loss(Expansion& e) {
  const Node& n = e.node();
  const Type* x = e.ranked_float_input(0);
  const Type& target = n.input(1)->type();
  bool sce = n.op_type() == "SoftmaxCrossEntropyLoss";
  if (x == nullptr || x->rank() < 2 || !target.is_tensor() || (sce && x->rank() > 2 && e.onnx_opset() < 13))
    return false;
  DType dt = x->dtype(), it = target.dtype();
  Dims per_dims = {x->shape()[0]};  // [N, D...]
  per_dims.insert(per_dims.end(), x->shape().begin() + 2, x->shape().end());
  Type per = Type::tensor(dt, per_dims);
  Value* logp = n.input(0);
  if (sce) {
    logp = e.add("LogSoftmax", "LogSoftmax", {logp}, *x, {{"axis", Attribute::of_int(1)}});
    if (n.num_outputs() > 1 && e.used(n.output(1))) e.take_over(1, logp);
  }
  Value* label = n.input(1);
  Value* ignored = nullptr;
  if (n.has_attr("ignore_index")) {
    Value* ignore = e.scalar("ignore_index", static_cast<double>(n.get_int("ignore_index", 0)), it);
    ignored = e.add("Equal", "Equal", {label, ignore}, Type::tensor(DType::Bool, per_dims));
    label = e.add("Where", "Where", {ignored, e.scalar("class_0", 0, it), label}, Type::tensor(it, per_dims));
  }
  Dims column = per_dims;
  column.insert(column.begin() + 1, Dim(1));
  Value* picked = e.add("GatherElements", "GatherElements", {logp, e.reshape("Reshape", label, column)},
                        Type::tensor(dt, column), {{"axis", Attribute::of_int(1)}});
  picked = e.reshape("Reshape_1", picked, per_dims);
  Value* weight = nullptr;
  if (n.num_inputs() > 2 && n.has_input(2)) weight = e.add("Gather", "Gather", {n.input(2), label}, per);
  if (ignored) {
    Value* kept_weight = weight ? weight : e.scalar("one", 1, dt);
    weight = e.add("Where_1", "Where", {ignored, e.scalar("zero", 0, dt), kept_weight}, per);
  }
  std::string reduction = n.get_string("reduction", "mean");
  if (reduction == "none" && !weight) {
    e.finish("Neg", "Neg", {picked});
    return true;
  }
  Value* loss = e.add("Neg", "Neg", {picked}, per);
  if (reduction == "none") {
    e.finish("Mul", "Mul", {loss, weight});
    return true;
  }
  if (weight) loss = e.add("Mul", "Mul", {loss, weight}, per);
  std::vector<int64_t> all(per_dims.size());
  std::iota(all.begin(), all.end(), int64_t{0});
  Type kept = Expansion::kept_type(per, all);
  Value* total = nullptr;
  if (reduction == "sum") {
    total = e.reduce("ReduceSum", "ReduceSum", loss, all, kept);
  } else if (weight) {
    Value* weights = e.reduce("ReduceSum_1", "ReduceSum", weight, all, kept);
    total = e.add("Div", "Div", {e.reduce("ReduceSum", "ReduceSum", loss, all, kept), weights}, kept);
  } else {
    total = e.reduce("ReduceMean", "ReduceMean", loss, all, kept);
  }
  e.finish_reshape("Reshape_2", total);
  return true;
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r.add(OpDef{"", "NegativeLogLikelihoodLoss", 12, kReduction, [](InferContext& c) { infer_loss(c, false); },
              eval_nll, kLossTypes})
      .gradient(class_loss_rule)
      .decomposition(decompose_class_loss)
      .under_autocast(AutocastClass::F32);
  r.add(OpDef{"", "SoftmaxCrossEntropyLoss", 12, kReduction, [](InferContext& c) { infer_loss(c, true); }, eval_sce,
              kLossTypes})
      .gradient(class_loss_rule)
      .decomposition(decompose_class_loss)
      .under_autocast(AutocastClass::F32);
}

}  // namespace tcc
