// The training options explain and compile share (see train_flags.h).
#include "src/compiler/train_flags.h"

#include "frontends/onnx/onnx_exporter.h"

namespace tcc {

namespace {

TrainOptions train_options(const TrainFlags& f) {
  TrainOptions t = f.opts;
  if (!f.loss_fn.empty() || !f.loss_on.empty() || !f.label.empty()) {
    if (f.loss_fn.empty() || f.loss_on.empty() || f.label.empty())
      throw InputError("--loss-fn, --loss-on and --label go together");
    t.builtin_loss = BuiltinLoss{parse_loss_kind(f.loss_fn), f.loss_on, f.label};
  }
  t.optimizer.kind = *parse_optimizer(f.optimizer);
  return t;
}

}  // namespace

std::optional<TrainingGraph> apply_train_flags(const TrainFlags& f, Model& model) {
  std::optional<TrainingGraph> built;
  if (f.train) {
    built = build_training_graph(model, train_options(f));
  } else if (!f.opts.loss_output.empty() || !f.loss_fn.empty() || !f.loss_on.empty() || !f.label.empty() ||
             !f.opts.param_patterns.empty() || f.optimizer != "none" || f.opts.lr_as_scalar) {
    throw InputError("--loss, --loss-fn, --loss-on, --label, --params, --optimizer and --lr-as-scalar need --train");
  }
  return built;
}

std::future<void> emit_onnx(const TrainFlags& f, const Model& model) {
  if (f.emit_onnx.empty()) {
    std::promise<void> nothing;
    nothing.set_value();
    return nothing.get_future();
  }
  return std::async(std::launch::async,
                    [path = f.emit_onnx, copy = clone_model(model)] { export_onnx_file(*copy, path); });
}

}  // namespace tcc
