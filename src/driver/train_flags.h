// The training flags that `tcc explain` and `tcc compile` share, declared once;
// what they mean is src/compiler/train_flags.h.
#pragma once

#include <CLI/CLI.hpp>

#include "src/compiler/train_flags.h"

namespace tcc {

// Declares the flags on `cmd`; `f` must outlive the parse.
void add_train_flags(CLI::App& cmd, TrainFlags& f);

}  // namespace tcc
