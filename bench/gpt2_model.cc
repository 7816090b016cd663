// Writes the model bench/compile_bench.sh compiles: a GPT-2-small-sized stack
// (hidden 768, 12 heads, 1024-token causal mask, dynamic batch and seq) of
// exactly N layers, in the node patterns torch.onnx.export writes. About
// 340 MB of f32 weights at 12 layers, so it is generated, never committed.
// Usage: tcc_gpt2_model OUT.onnx [LAYERS]   (default 12)
#include <cstdlib>
#include <iostream>
#include <string>

#include "bench/transformer_graph.h"
#include "frontends/onnx/onnx_exporter.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: tcc_gpt2_model OUT.onnx [LAYERS]\n";
    return 2;
  }
  int layers = argc == 3 ? std::atoi(argv[2]) : 12;
  if (layers < 1) {
    std::cerr << "tcc_gpt2_model: LAYERS must be at least 1\n";
    return 2;
  }
  try {
    // The stack grows whole layers until it has min_nodes nodes; a one-layer
    // stack with tiny weights says how many nodes a layer has.
    tcc::bench::StackShape probe{.min_nodes = 1, .hidden = 16, .heads = 2, .context = 8};
    int64_t per_layer = static_cast<int64_t>(tcc::bench::build_transformer_stack(probe)->graph->nodes().size()) - 1;
    tcc::bench::StackShape gpt2{.min_nodes = (layers - 1) * per_layer + 1, .hidden = 768, .heads = 12, .context = 1024};
    auto model = tcc::bench::build_transformer_stack(gpt2);
    tcc::export_onnx_file(*model, argv[1]);
    std::cout << argv[1] << ": " << layers << " layers, " << model->graph->nodes().size() << " nodes, "
              << model->graph->initializers().size() << " initializers\n";
  } catch (const std::exception& e) {
    std::cerr << "tcc_gpt2_model: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
