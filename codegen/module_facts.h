// What several files of a module directory are made from (module_writer.cc:
// the manifest and weights; module_report.cc: report.json and report.md),
// gathered once from the module's contents.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/module_writer.h"

namespace tcc {

// weights.bin places each tensor at a multiple of this.
constexpr int64_t kWeightAlignment = 256;

// What the reports know about one kernel at the hinted sizes.
struct KernelEstimate {
  int steps = 0;                   // schedule steps that run it (regional reuse)
  std::optional<int64_t> bytes, flop;
  double seconds = 0;              // one run, roofline: the slower of memory and compute
  bool compute_bound = false;
  std::string precision;           // kernel_precision
};

// Where a run reads a symbol: the dim of an input that is `scale` times it.
struct SymbolSource {
  std::string input;
  int axis = 0;
  int64_t scale = 1;
};

struct ModuleFacts {
  std::map<std::string, SymbolSource> symbols;  // a whole dim where one holds the symbol, else the first multiple
  // Data-dependent sizes (NonZero's count): symbol -> (the value a fallback step writes, axis), first occurrence.
  std::map<std::string, std::pair<std::string, int>> value_symbols;
  std::map<std::string, int64_t> sizes;                        // report sizes per symbol
  std::vector<std::pair<const Value*, Tensor>> weights;       // in first-read order
  std::vector<int64_t> weight_offsets;
  int64_t weights_bytes = 0;
  std::vector<KernelEstimate> kernels;
  std::vector<std::vector<std::string>> step_nodes;  // per step: the source nodes it runs
  // Per kernel: the distinct sources (Node::source: a .pt2's user frame and
  // module, an ONNX exporter's stack frame) of the nodes its steps run, in
  // schedule order; empty where the model records none.
  std::vector<std::vector<std::string>> kernel_sources;
};

ModuleFacts gather_module_facts(const ModuleContents& m);

// The arithmetic a kernel's products or math run in under config c, the one
// it is emitted with: a GEMM's or convolution's operand dtype ("f16", "bf16",
// "f32", or "tf32" for f32 operands in a module compiled with --precision tf32
// that c runs on the library, not on tcc's 3xTF32 template); a template kind's
// TemplateKernel::precision (attention's "tf32" where c takes an f32 pass's
// tensor-core layout; template_kernel.h); a generated kernel computes f16 and
// bf16 elements in f32 ("f32", "f64"), or names its integer or bool output dtype.
std::string kernel_precision(const kir::Kernel& k, const KernelConfig& c, Precision precision);

// How a kernel runs on the GPU: its library and algorithm, or its generated
// schedule ("block 64, rows 1, row cache 8", "block 256, tiled").
std::string schedule_text(const kir::Kernel& k, const KernelConfig& c);

}  // namespace tcc
