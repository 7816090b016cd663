// The training flags of explain and compile (see train_flags.h).
#include "src/driver/train_flags.h"

namespace tcc {

void add_train_flags(CLI::App& cmd, TrainFlags& f) {
  cmd.add_flag("--train", f.train, "Build the training step (forward, loss, backward, optimizer update)");
  cmd.add_option("--loss", f.opts.loss_output, "Model output that is the loss (with --train)");
  cmd.add_option("--loss-fn", f.loss_fn, "Built-in loss on --loss-on against --label")
      ->check(CLI::IsMember({"cross_entropy", "mse"}));
  cmd.add_option("--loss-on", f.loss_on, "Model output the built-in loss reads");
  cmd.add_option("--label", f.label, "Input holding the targets of the built-in loss");
  cmd.add_option("--params", f.opts.param_patterns,
                 "Glob over initializer names to train (repeatable; default: the parameters of the exporter's graph "
                 "signature (a .pt2, torch's dynamo ONNX export), else every float initializer)");
  cmd.add_option("--optimizer", f.optimizer, "Update appended to the step")
      ->check(CLI::IsMember({"none", "sgd", "momentum", "adam", "adamw"}))
      ->capture_default_str();
  cmd.add_flag("--lr-as-scalar", f.opts.lr_as_scalar,
               "Pass the learning rate as a Python float (value-guarded) instead of a 0-d tensor");
  cmd.add_option("--emit-onnx", f.emit_onnx, "Write the graph (the training step with --train) as ONNX to FILE");
}

}  // namespace tcc
