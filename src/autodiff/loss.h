// Built-in losses (see BuiltinLoss in autodiff.h).
#pragma once

#include "src/autodiff/autodiff.h"

namespace tcc {

// Appends the loss on `spec.output` and returns its scalar value; adds the
// label as a graph input unless the model already has one of that name.
Value* build_builtin_loss(Graph& g, const BuiltinLoss& spec);

}  // namespace tcc
