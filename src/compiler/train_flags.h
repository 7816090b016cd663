// The training options that `tcc explain` and `tcc compile` share (--train,
// --loss, --loss-fn/--loss-on/--label, --params, --optimizer, --lr-as-scalar,
// --emit-onnx), applied to a loaded model in one place. The driver declares
// them as flags (src/driver/train_flags.h).
#pragma once

#include <future>
#include <optional>
#include <string>

#include "src/autodiff/autodiff.h"

namespace tcc {

struct TrainFlags {
  bool train = false;
  std::string loss_fn;
  std::string loss_on;
  std::string label;
  std::string optimizer = "none";
  std::string emit_onnx;  // write the graph (the training step with --train) as ONNX here
  TrainOptions opts;
};

// With --train, rewrites `model` into its training step and returns what was
// built; without it, refuses the training-only flags and returns nullopt.
std::optional<TrainingGraph> apply_train_flags(const TrainFlags& f, Model& model);

// --emit-onnx: writes `model` as it is now, on a thread of its own, from a copy
// that shares the weights, so the caller may go on changing `model` (a large
// model's write then overlaps the compile). Without the flag the future is
// ready at once; get() rethrows a failed write.
std::future<void> emit_onnx(const TrainFlags& f, const Model& model);

}  // namespace tcc
