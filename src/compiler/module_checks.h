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

// Two dims that must be equal where the equality binds no symbol
// (ShapeEnv::unify): a product of symbols against a static size (b*b broadcast
// against 24), or two sizes that agree only for some bindings (torch.chunk's
// pieces (seq+1)//2 and seq-(seq+1)//2 multiplied). The kernels could not index
// them: refused, naming the node that asked for the equality.
void refuse_unsolved_dims(const ShapeEnv& env);

}  // namespace tcc
