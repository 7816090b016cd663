// The schedule of a compiled graph: what runs, in order, and which values each
// step reads and writes. Built from a fused graph by codegen/schedule.cc; the
// memory planner, the module writer and the runtime all walk it.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/kernel_passes.h"
#include "codegen/profiles.h"
#include "passes/pass_manager.h"
#include "src/ir/graph.h"

namespace tcc {

struct Step {
  enum class Kind {
    Kernel,    // a generated kernel (or a cuBLASLt / cuDNN call for a Gemm / Conv kernel) on the device
    Fallback,  // one node run by the reference implementation on the host (graph breaks,
               // ops with no kernel), with device->host copies of its inputs and back;
               // in Schedule::binding_steps, once per binding of the symbols instead
  };
  Kind kind = Kind::Kernel;
  int kernel = -1;                  // Kernel: index into Schedule::kernels (shared by identical layers)
  std::string node;                 // the fusion node or the fallback node
  std::vector<std::string> reads;   // values, in the kernel's buffer order for Kernel steps
  std::vector<std::string> writes;
};

// A value that is another value's bytes under a new shape: a fusion that only
// reshapes (Reshape, Flatten, Squeeze, Unsqueeze, Identity) a row-major
// intermediate runs no kernel. The memory plan gives it the source's buffer and
// keeps that buffer live while the view is read.
struct ViewAlias {
  std::string value;   // the view
  std::string source;  // the value whose buffer it shares; written by a step, never itself a view
  std::string node;    // the reshape node (inside its fusion) the view stands for
};

struct Schedule {
  std::vector<kir::Kernel> kernels;  // unique kernels (regional reuse: identical layers share one)
  std::vector<Step> steps;
  // Nodes run once per binding of the symbols, before the steps that read
  // them (passes/binding_constants.h): Fallback steps whose values live apart
  // from the arena, as weights do.
  std::vector<Step> binding_steps;
  std::vector<ViewAlias> views;      // in schedule order
  int fallback_copies = 0;           // host<->device tensor copies the fallbacks need
  // The kernel-IR passes that ran, in order: each one's time and counters
  // over every fusion lowered (before regional reuse).
  std::vector<PassRecord> kernel_passes;
};

// Lowers every fusion node of g (codegen/lower.h) and runs the kernel-IR
// passes on it for `device` (the schedule passes choose for it), verified after
// each (codegen/kernel_passes.h), reusing one kernel for
// structurally identical fusions, and makes every other node with tensor data a
// Fallback step. Constant nodes and nodes computing only from constants get no
// step: the module carries their values. Nodes whose values a binding of the
// symbols determines are binding steps (analyze_constants). A reshape-only fusion of a value a step
// writes, when the reshape is no graph output, is a ViewAlias instead of a step.
// Kernel names are tcc_k<N>_<kind>, numbered in schedule order; `after` sees
// each kernel after each pass, named after its fusion node. `precision` is
// --precision, which the lowering reads (lower_fusion).
Schedule build_schedule(const Graph& g, const DeviceProfile& device = default_device(),
                        kir::AfterKernelPass after = {}, Precision precision = Precision::FP32);

}  // namespace tcc
