// A generated transformer-like stack for the load/verify/shape benchmark.
//
// Each layer is a GPT-2 block in the node patterns torch.onnx.export writes
// (the same as tests/fixtures/gpt2_block.onnx): LayerNormalization, MatMul+Add
// projections, Split, Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains
// into heads, Transpose, scaled and causally masked Softmax attention, Erf
// GELU and residual Adds, on an input f32[batch, seq, hidden] with symbolic
// batch and seq. Layers are stacked until the graph has at least the asked
// number of nodes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "src/ir/graph.h"

namespace tcc::bench {

struct StackShape {
  int64_t min_nodes = 100000;
  int64_t hidden = 16;  // small weights keep the file and the process small
  int64_t heads = 2;
  int64_t context = 64;  // rows of the causal-mask buffer
};

// Builds the stack directly with the Graph API (opset 17).
std::unique_ptr<Model> build_transformer_stack(const StackShape& s);

}  // namespace tcc::bench
