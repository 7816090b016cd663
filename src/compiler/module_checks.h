// What a compiled module cannot carry, refused by name: before the pipeline
// does any work on the model, and its outputs' sizes once the graph passes
// have refined them.
#pragma once

#include "src/ir/graph.h"
#include "src/ir/shape_env.h"

namespace tcc {

// Names JSON cannot hold and string tensors (modules hold numeric buffers);
// sequence and optional outputs are flatten_outputs' to refuse or flatten.
void refuse_what_modules_cannot_carry(const Graph& g);

// Outputs whose size no run can know: an unknown dim, or a symbol that neither
// an input's dim nor a node's output gives. A size a node produces from data
// (NonZero's count, as a dim of its output) is bound when that node has run;
// the caller's output allocator provides such an output's memory. Checked
// once the graph passes have refined the types (a SplitToSequence's piece
// read as a Slice has the size its sequence's element type leaves unknown).
void refuse_unsized_outputs(const Graph& g);

// A dim that must equal a static size but is a product of symbols (b*b
// broadcast against 24) binds no symbol (ShapeEnv::unify), so the kernels
// could not index it: refused, naming the node that asked for the equality.
void refuse_unsolved_static_dims(const ShapeEnv& env);

}  // namespace tcc
