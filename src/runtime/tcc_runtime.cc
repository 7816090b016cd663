// The C API (tcc_runtime.h) over the C++ runtime: exceptions become status
// codes and a per-thread message.
#include "tcc_runtime.h"

#include <new>
#include <string>

#include "module.h"

using tcc::runtime::Module;

struct tcc_module {
  std::unique_ptr<Module> impl;
  mutable tcc::runtime::GraphStats graph_stats;  // the latest tcc_module_graph_stats answer, which points into it
};

struct tcc_cuda_graph {
  std::unique_ptr<tcc::runtime::CudaGraph> impl;
};

namespace {

thread_local std::string last_error;

template <typename F>
tcc_status guarded(F&& f) {
  try {
    f();
    return TCC_OK;
  } catch (const tcc::runtime::BadModule& e) {
    last_error = e.what();
    return TCC_ERROR_BAD_MODULE;
  } catch (const tcc::runtime::InvalidArgument& e) {
    last_error = e.what();
    return TCC_ERROR_INVALID_ARGUMENT;
  } catch (const tcc::runtime::NoDevice& e) {
    last_error = e.what();
    return TCC_ERROR_NO_DEVICE;
  } catch (const tcc::runtime::CudaError& e) {
    last_error = e.what();
    return TCC_ERROR_CUDA;
  } catch (const tcc::InputError& e) {
    // The reference implementation refusing a fallback's inputs (a Reshape to
    // a size these inputs do not have, an index out of range).
    last_error = e.what();
    return TCC_ERROR_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return TCC_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    last_error = e.what();
    return TCC_ERROR_INTERNAL;
  }
}

tcc_status null_argument(const char* what) {
  last_error = std::string(what) + " is null";
  return TCC_ERROR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* tcc_last_error(void) { return last_error.c_str(); }

tcc_status tcc_module_load(const char* module_dir, tcc_module** out) {
  if (!module_dir) return null_argument("module_dir");
  if (!out) return null_argument("out");
  *out = nullptr;
  return guarded([&] { *out = new tcc_module{tcc::runtime::load_module(module_dir), {}}; });
}

void tcc_module_free(tcc_module* m) { delete m; }

size_t tcc_module_num_inputs(const tcc_module* m) { return m ? m->impl->inputs.size() : 0; }
size_t tcc_module_num_outputs(const tcc_module* m) { return m ? m->impl->outputs.size() : 0; }

const char* tcc_module_input_name(const tcc_module* m, size_t i) {
  return m && i < m->impl->input_names.size() ? m->impl->input_names[i].c_str() : nullptr;
}
const char* tcc_module_output_name(const tcc_module* m, size_t i) {
  return m && i < m->impl->output_names.size() ? m->impl->output_names[i].c_str() : nullptr;
}

tcc_status tcc_module_tensor_info(const tcc_module* m, int output, size_t i, tcc_dtype* dtype, int32_t* rank,
                                  int64_t* shape_out, int32_t max_rank) {
  if (!m) return null_argument("module");
  if (!dtype || !rank) return null_argument(!dtype ? "dtype" : "rank");
  return guarded([&] {
    const std::vector<tcc::TensorSig>& sigs = output ? m->impl->outputs : m->impl->inputs;
    if (i >= sigs.size())
      throw tcc::runtime::InvalidArgument(std::string(output ? "output " : "input ") + std::to_string(i) + " of " +
                                          std::to_string(sigs.size()));
    const tcc::TensorSig& sig = sigs[i];
    *dtype = static_cast<tcc_dtype>(sig.dtype);
    *rank = static_cast<int32_t>(sig.shape.size());
    if (static_cast<int32_t>(sig.shape.size()) > max_rank || (!shape_out && !sig.shape.empty()))
      throw tcc::runtime::InvalidArgument("'" + sig.name + "' has rank " + std::to_string(sig.shape.size()) +
                                          ", more than max_rank " + std::to_string(max_rank));
    for (size_t d = 0; d < sig.shape.size(); ++d)
      shape_out[d] = sig.shape[d].is_constant() ? sig.shape[d].constant_value() : -1;
  });
}

tcc_status tcc_module_output_shape(const tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, size_t output,
                                   int64_t* shape_out, int32_t max_rank, int32_t* rank_out) {
  if (!m) return null_argument("module");
  if (!rank_out) return null_argument("rank_out");
  return guarded([&] {
    const Module& mod = *m->impl;
    if (output >= mod.outputs.size())
      throw tcc::runtime::InvalidArgument("output " + std::to_string(output) + " of " +
                                          std::to_string(mod.outputs.size()));
    // Data may live on the device here, so guards on scalar values are left to the run.
    tcc::runtime::Binding b = tcc::runtime::bind(mod, inputs, num_inputs, nullptr, nullptr);
    std::vector<int64_t> shape = b.shapes[mod.output_values[output]];
    if (b.nbytes[mod.output_values[output]] < 0)  // a size the data decides
      for (const tcc::SymExpr& d : mod.outputs[output].shape) shape.push_back(d.evaluate(b.symbols).value_or(-1));
    *rank_out = static_cast<int32_t>(shape.size());
    if (static_cast<int32_t>(shape.size()) > max_rank || (!shape_out && !shape.empty()))
      throw tcc::runtime::InvalidArgument("output '" + mod.outputs[output].name + "' has rank " +
                                          std::to_string(shape.size()) + ", more than max_rank " +
                                          std::to_string(max_rank));
    std::copy(shape.begin(), shape.end(), shape_out);
  });
}

tcc_status tcc_module_set_output_allocator(tcc_module* m, tcc_output_allocator allocate, void* ctx) {
  if (!m) return null_argument("module");
  if (!allocate) {
    m->impl->output_allocator = nullptr;
    return TCC_OK;
  }
  m->impl->output_allocator = [allocate, ctx](size_t output, const std::vector<int64_t>& shape, size_t nbytes) {
    return allocate(ctx, output, shape.data(), static_cast<int32_t>(shape.size()), nbytes);
  };
  return TCC_OK;
}

tcc_status tcc_module_random_offset(const tcc_module* m, uint64_t* out) {
  if (!m) return null_argument("module");
  if (!out) return null_argument("out");
  *out = m->impl->random_offset;
  return TCC_OK;
}

tcc_status tcc_module_set_random_offset(tcc_module* m, uint64_t offset) {
  if (!m) return null_argument("module");
  tcc::runtime::set_random_offset(*m->impl, offset);
  return TCC_OK;
}

tcc_status tcc_module_run_host(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                               size_t num_outputs) {
  if (!m) return null_argument("module");
  return guarded([&] { tcc::runtime::run_host(*m->impl, inputs, num_inputs, outputs, num_outputs); });
}

tcc_status tcc_module_run_cuda(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                               size_t num_outputs, void* stream) {
  if (!m) return null_argument("module");
  return guarded([&] { tcc::runtime::run_cuda(*m->impl, inputs, num_inputs, outputs, num_outputs, stream); });
}

tcc_status tcc_module_capture_cuda(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                                   size_t num_outputs, void* stream, tcc_cuda_graph** out) {
  if (!m) return null_argument("module");
  if (!out) return null_argument("out");
  *out = nullptr;
  return guarded([&] {
    *out = new tcc_cuda_graph{tcc::runtime::capture_cuda(*m->impl, inputs, num_inputs, outputs, num_outputs, stream)};
  });
}

tcc_status tcc_cuda_graph_launch(tcc_cuda_graph* g, void* stream) {
  if (!g) return null_argument("graph");
  return guarded([&] { g->impl->launch(stream); });
}

void tcc_cuda_graph_free(tcc_cuda_graph* g) { delete g; }

tcc_status tcc_module_run_cuda_graphs(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs,
                                      tcc_tensor* outputs, size_t num_outputs, void* stream) {
  if (!m) return null_argument("module");
  return guarded(
      [&] { tcc::runtime::enqueue_cuda_graphs(*m->impl, inputs, num_inputs, outputs, num_outputs, stream); });
}

tcc_status tcc_module_graph_stats(const tcc_module* m, tcc_graph_stats* out) {
  if (!m) return null_argument("module");
  if (!out) return null_argument("out");
  return guarded([&] {
    const tcc::runtime::GraphStats& s = m->graph_stats = tcc::runtime::graph_stats(*m->impl);
    *out = {s.captures, s.replays, s.evictions, s.uncaptured_runs, s.not_captured.c_str()};
  });
}

int tcc_cuda_available(void) {
  int available = 0;
  guarded([&] { available = tcc::runtime::cuda_available() ? 1 : 0; });
  return available;
}

}  // extern "C"
