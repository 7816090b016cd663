// reduce-overhead as torch's CUDA-graph trees run it: one CUDA graph per
// binding of the symbolic dims, captured the first time a run meets that
// binding, on static input and output buffers of its own, and replayed for
// every later run at the same input shapes. A run copies its inputs into the
// binding's static inputs, replays, and copies the static outputs out, all on
// the caller's stream. At most kMaxGraphs are kept; the least recently used
// goes first. A module that cannot be captured (host fallback steps, guards on
// input values) runs step by step, and the statistics say why.
#include <algorithm>

#include "module.h"

namespace tcc::runtime {

namespace {

// Device memory of one tensor, released with its owner.
struct DeviceBuffer {
  void* ptr = nullptr;
  std::vector<int64_t> shape;
  DeviceBuffer(size_t nbytes, std::vector<int64_t> dims) : ptr(device::alloc(nbytes)), shape(std::move(dims)) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { device::release(ptr); }
};

}  // namespace

struct CudaGraphs {
  struct Entry {
    std::vector<int64_t> dims;  // every input's dims in order
    Binding binding;            // at those dims, as the capture bound them
    std::vector<std::unique_ptr<DeviceBuffer>> inputs, outputs;
    std::vector<tcc_tensor> input_tensors, output_tensors;  // views of the buffers above
    std::vector<size_t> input_bytes, output_bytes;
    std::unique_ptr<CudaGraph> graph;  // declared last: destroyed before the buffers it reads
  };
  std::vector<std::unique_ptr<Entry>> entries;  // the most recently used first
  GraphStats stats;
};

void CudaGraphsDeleter::operator()(CudaGraphs* g) const { delete g; }

namespace {

std::vector<int64_t> all_dims(const tcc_tensor* inputs, size_t num_inputs) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < num_inputs; ++i) {
    if (inputs[i].rank > 0 && !inputs[i].shape) throw InvalidArgument("input " + std::to_string(i) + " has no shape");
    dims.push_back(inputs[i].rank);
    dims.insert(dims.end(), inputs[i].shape, inputs[i].shape + std::max(inputs[i].rank, 0));
  }
  return dims;
}

tcc_tensor view(const DeviceBuffer& b, DType dtype) {
  return {b.ptr, static_cast<tcc_dtype>(dtype), static_cast<int32_t>(b.shape.size()), b.shape.data()};
}

// Static buffers for a binding, the inputs copied in, and one run captured on them.
std::unique_ptr<CudaGraphs::Entry> capture_binding(Module& m, const tcc_tensor* inputs, size_t num_inputs,
                                                   const Binding& b, void* stream) {
  auto e = std::make_unique<CudaGraphs::Entry>();
  e->dims = all_dims(inputs, num_inputs);
  e->binding = b;
  for (size_t i = 0; i < num_inputs; ++i) {
    int id = m.value_ids.at(m.inputs[i].name);
    e->input_bytes.push_back(static_cast<size_t>(b.nbytes[id]));
    e->inputs.push_back(std::make_unique<DeviceBuffer>(e->input_bytes.back(), b.shapes[id]));
    e->input_tensors.push_back(view(*e->inputs.back(), m.inputs[i].dtype));
    if (e->input_bytes.back() > 0)
      device::copy_async(e->inputs.back()->ptr, inputs[i].data, e->input_bytes.back(), stream);
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    int id = m.output_values[i];
    e->output_bytes.push_back(static_cast<size_t>(b.nbytes[id]));
    e->outputs.push_back(std::make_unique<DeviceBuffer>(e->output_bytes.back(), b.shapes[id]));
    e->output_tensors.push_back(view(*e->outputs.back(), m.outputs[i].dtype));
  }
  e->graph = capture_cuda(m, e->input_tensors.data(), e->input_tensors.size(), e->output_tensors.data(),
                          e->output_tensors.size(), stream);
  return e;
}

// Copies each buffer with bytes into its counterpart, in one driver call where it can.
void copy_all(const std::vector<void*>& to, const std::vector<const void*>& from, const std::vector<size_t>& bytes,
              void* stream) {
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == 0) continue;
    dsts.push_back(to[i]);
    srcs.push_back(from[i]);
    sizes.push_back(bytes[i]);
  }
  if (!sizes.empty()) device::copy_batch_async(dsts, srcs, sizes, stream);
}

}  // namespace

void enqueue_cuda_graphs(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                         size_t num_outputs, void* stream) {
  if (!stream) throw InvalidArgument("CUDA graphs need a created stream, not the legacy default stream");
  if (!m.cuda_graphs) m.cuda_graphs.reset(new CudaGraphs);
  CudaGraphs& g = *m.cuda_graphs;
  if (std::string blocker = capture_blocker(m); !blocker.empty()) {
    g.stats.not_captured = blocker;
    ++g.stats.uncaptured_runs;
    enqueue_cuda(m, inputs, num_inputs, outputs, num_outputs, stream);
    return;
  }
  if (num_inputs != m.inputs.size() || (num_inputs > 0 && !inputs))
    throw InvalidArgument("expected " + std::to_string(m.inputs.size()) + " inputs, got " + std::to_string(num_inputs));
  std::vector<int64_t> dims = all_dims(inputs, num_inputs);
  auto hit = std::find_if(g.entries.begin(), g.entries.end(), [&](const auto& e) { return e->dims == dims; });
  CudaGraphs::Entry* e = nullptr;
  if (hit != g.entries.end()) {
    std::rotate(g.entries.begin(), hit, hit + 1);
    e = g.entries.front().get();
    // The dims matched, so the binding's guards hold; the dtypes and the outputs are checked here.
    for (size_t i = 0; i < num_inputs; ++i)
      if (static_cast<DType>(inputs[i].dtype) != m.inputs[i].dtype || (!inputs[i].data && e->input_bytes[i] > 0))
        throw InvalidArgument("input '" + m.inputs[i].name + "': not the " +
                              std::string(dtype_name(m.inputs[i].dtype)) + " tensor the module takes");
    check_outputs(m, e->binding, outputs, num_outputs);
    std::vector<const void*> from;
    for (size_t i = 0; i < num_inputs; ++i) from.push_back(inputs[i].data);
    std::vector<void*> to;
    for (const auto& buffer : e->inputs) to.push_back(buffer->ptr);
    copy_all(to, from, e->input_bytes, stream);
    e->graph->launch(stream);
    ++g.stats.replays;
  } else {
    Binding b = bind(m, inputs, num_inputs, nullptr, nullptr);
    check_outputs(m, b, outputs, num_outputs);
    if (g.entries.size() == GraphStats::kMaxGraphs) {
      device::sync(stream);  // the evicted graph's buffers may still be in use
      g.entries.pop_back();
      ++g.stats.evictions;
    }
    g.entries.insert(g.entries.begin(), capture_binding(m, inputs, num_inputs, b, stream));
    e = g.entries.front().get();
    ++g.stats.captures;
  }
  std::vector<void*> to;
  for (size_t i = 0; i < num_outputs; ++i) to.push_back(outputs[i].data);
  std::vector<const void*> from;
  for (const auto& buffer : e->outputs) from.push_back(buffer->ptr);
  copy_all(to, from, e->output_bytes, stream);
}

GraphStats graph_stats(const Module& m) { return m.cuda_graphs ? m.cuda_graphs->stats : GraphStats{}; }

}  // namespace tcc::runtime
