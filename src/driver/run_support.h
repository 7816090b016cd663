// What the commands that run models share (run, bench, profile): reading or
// making inputs, compiling a model into a module with the compiler library,
// and comparing outputs with the reference interpreter's.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "src/compiler/compile.h"
#include "src/ir/graph.h"
#include "src/ir/tensor.h"

namespace tcc {

// Both: an input with a default (a training step's parameter) that nothing
// else gives keeps its default, given explicitly, since a module compiled
// from the graph takes it as an input.
//
// The graph's inputs from DIR: ONNX test-case files (input_N.pb, matched by
// the tensor name they carry, else by position) or <name>.npy.
std::map<std::string, Tensor> read_inputs(const Graph& g, const std::string& dir);

// Random inputs of the graph's input types, symbolic dims at `sizes` (--shapes;
// kUnhintedRunSize when not given, or the power of two hinted_sizes doubles it
// to); floats uniform in [-1, 1], integers in [0, 4).
std::map<std::string, Tensor> random_inputs(const Graph& g, const std::map<std::string, int64_t>& sizes, unsigned seed);

// Random inputs take the values an input is compiled for (--specialize),
// which the module's guard requires; an input of another element count is left
// for the compiler to refuse.
void feed_specializations(const std::map<std::string, std::vector<double>>& values,
                          std::map<std::string, Tensor>& inputs);

// The file name a value's .npy is written to and read from.
std::string npy_file_name(const std::string& value_name);

// The cubin architectures tcc generates code for (`tcc compile --arch`): NVRTC
// targets of the tensor-core generations the GEMM and reduction code paths are
// written for. The default compiles sm_80 and sm_90.
extern const std::vector<std::string> kCubinArchs;

// The request of `tcc compile MODEL -o DIR --mode MODE --shape-hint HINTS`.
// With a `device_arch` ("sm_90"), the module is for that GPU only, as a JIT
// compiles (the options device_flags spells), scheduled for the device
// profile `device` where one is named.
CompileRequest module_request(const std::string& model, const std::string& dir, const std::string& mode,
                              const std::string& shape_hints, const std::string& device_arch,
                              const std::string& device = "");

// Compiles and writes the module `request` asks for, in this process, printing
// no summary; returns the wall time in seconds. The compiler's errors pass
// through: an InputError for a model or request it refuses.
double compile_module(const CompileRequest& request);

// The `tcc compile` flags of a module for one GPU of `device_arch`: no host
// kernels, and the device's cubin alone (no other arch, no PTX) when tcc has
// that target; a device newer than every target keeps them all and the PTX.
// A named device profile `device` adds its --device.
std::vector<std::string> device_flags(const std::string& device_arch, const std::string& device = "");

// A directory that is a compiled module (holds manifest.json).
bool is_module_dir(const std::string& path);

// Elementwise agreement with the reference: |actual - expected| <= abs + rel * |expected|.
// The one place tolerances are stated, per dtype.
struct Tolerance {
  double abs = 0, rel = 0;
};
// The tolerance of an output of `dtype` from a model compiled at `precision`:
// the looser of the dtype's and the precision's (fp16 and tf32 1e-2, bf16 5e-2,
// each absolute plus relative to the reference).
Tolerance tolerance_for(DType dtype, Precision precision = Precision::FP32);

struct OutputCheck {
  std::string name;
  double max_abs = 0, max_rel = 0;
  int64_t mismatches = 0;
  std::string problem;  // a dtype or shape disagreement
  bool ok() const { return mismatches == 0 && problem.empty(); }
};
OutputCheck check_output(const std::string& name, const Tensor& expected, const Tensor& actual,
                         Precision precision = Precision::FP32);

}  // namespace tcc
