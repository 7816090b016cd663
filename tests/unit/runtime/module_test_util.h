// Shared by the tests that run graphs and compiled modules: random inputs for a
// graph, and the conversions between tcc's Tensor and the runtime's C API.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "src/ir/graph.h"
#include "src/ir/tensor.h"
#include "tcc_runtime.h"

namespace tcc {

// Random inputs for every graph input without a default: normal floats,
// integers cycling 0, 1, 2 (valid class indices), every symbolic dim `size`.
// A training step's lr is 0.01 and its step 2 (Adam's bias correction needs
// step >= 1).
inline std::map<std::string, Tensor> random_inputs(const Graph& g, int64_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::map<std::string, Tensor> inputs;
  for (const Value* in : g.inputs()) {
    if (in->is_initializer()) continue;
    std::vector<int64_t> shape;
    for (const Dim& d : in->type().shape()) shape.push_back(d.is_static() ? d.value() : size);
    Tensor t(in->type().dtype(), shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.set_f64(i, in->type().dtype() == DType::I64 ? static_cast<double>(i % 3) : dist(rng));
    inputs[in->name()] = t;
  }
  if (inputs.count("lr")) inputs["lr"] = Tensor::scalar_f32(0.01f);
  if (inputs.count("step")) inputs["step"] = Tensor::scalar_f32(2.0f);
  return inputs;
}

// A training step's next inputs: each output `<x>.updated` of `step` (a
// parameter or optimizer state) becomes input `<x>`.
inline void feed_back(const Graph& step, const std::vector<Tensor>& outs, std::map<std::string, Tensor>& inputs) {
  const std::string suffix = ".updated";
  for (size_t i = 0; i < outs.size(); ++i) {
    const std::string& name = step.outputs().at(i)->name();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      inputs[name.substr(0, name.size() - suffix.size())] = outs[i].clone();
  }
}

inline tcc_tensor c_tensor(Tensor& t) {
  return {t.raw_mut(), static_cast<tcc_dtype>(t.dtype()), static_cast<int32_t>(t.rank()), t.shape().data()};
}

inline std::vector<tcc_tensor> c_tensors(std::vector<Tensor>& ts) {
  std::vector<tcc_tensor> c;
  for (Tensor& t : ts) c.push_back(c_tensor(t));
  return c;
}

// The caller's output allocator (tcc_module_set_output_allocator) into host
// tensors, one per output: each keeps the dtype it holds before the run and
// takes the shape the module asks for, whose byte count must agree.
struct OutputAllocation {
  std::vector<Tensor> tensors;
  int calls = 0;

  static void* allocate(void* ctx, size_t output, const int64_t* shape, int32_t rank, size_t nbytes) {
    auto* a = static_cast<OutputAllocation*>(ctx);
    ++a->calls;
    Tensor& t = a->tensors.at(output);
    t = Tensor(t.dtype(), std::vector<int64_t>(shape, shape + rank));
    EXPECT_EQ(t.nbytes(), nbytes) << "output " << output;
    return t.raw_mut();
  }
};

// `inputs` (by name) in the module's input order.
inline std::vector<tcc_tensor> module_inputs(const tcc_module* m, std::map<std::string, Tensor>& inputs) {
  std::vector<tcc_tensor> c;
  for (size_t i = 0; i < tcc_module_num_inputs(m); ++i) c.push_back(c_tensor(inputs.at(tcc_module_input_name(m, i))));
  return c;
}

// Host tensors for the module's outputs, sized by tcc_module_output_shape for `ins`.
inline std::vector<Tensor> module_output_tensors(const tcc_module* m, const std::vector<tcc_tensor>& ins) {
  std::vector<Tensor> outs;
  for (size_t i = 0; i < tcc_module_num_outputs(m); ++i) {
    tcc_dtype dtype;
    int32_t rank = 0;
    int64_t dims[8];
    EXPECT_EQ(tcc_module_tensor_info(m, 1, i, &dtype, &rank, dims, 8), TCC_OK) << tcc_last_error();
    EXPECT_EQ(tcc_module_output_shape(m, ins.data(), ins.size(), i, dims, 8, &rank), TCC_OK) << tcc_last_error();
    outs.emplace_back(static_cast<DType>(dtype), std::vector<int64_t>(dims, dims + rank));
  }
  return outs;
}

}  // namespace tcc
