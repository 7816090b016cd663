// The schedule of a compiled graph: what runs, in order, and which values each
// step reads and writes. Built from a fused graph by codegen/schedule.cc; the
// memory planner, the module writer and the runtime all walk it.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "src/ir/graph.h"

namespace tcc {

struct Step {
  enum class Kind {
    Kernel,    // a generated kernel (or a cuBLASLt / cuDNN call for a Gemm / Conv kernel) on the device
    Fallback,  // one node run by the reference implementation on the host (graph breaks,
               // ops with no kernel), with device->host copies of its inputs and back
  };
  Kind kind = Kind::Kernel;
  int kernel = -1;                  // Kernel: index into Schedule::kernels (shared by identical layers)
  std::string node;                 // the fusion node or the fallback node
  std::vector<std::string> reads;   // values, in the kernel's buffer order for Kernel steps
  std::vector<std::string> writes;
};

struct Schedule {
  std::vector<kir::Kernel> kernels;  // unique kernels (regional reuse: identical layers share one)
  std::vector<Step> steps;
  int fallback_copies = 0;           // host<->device tensor copies the fallbacks need
};

// Lowers every fusion node of g (codegen/lower.h), reusing one kernel for
// structurally identical fusions, and makes every other node with tensor data a
// Fallback step. Constant
// nodes and nodes computing only from constants get no step: the module carries
// their values. Kernel names are tcc_k<N>_<kind>, numbered in schedule order.
Schedule build_schedule(const Graph& g);

}  // namespace tcc
