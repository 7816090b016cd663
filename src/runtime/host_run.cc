// Running a module on the host: kernels from host.so, fallbacks through the
// reference interpreter, all on buffers placed in one arena as the memory plan
// says — the same layout the device run uses, so a wrong plan shows up here.
// The binding constants are computed for every run: the host run is the
// reference path, not a fast one. Kernels that draw random values read the
// module's random offset itself, which the run advances at its end.
#include <cstring>

#include "module.h"

namespace tcc::runtime {

namespace {

std::vector<std::byte> read_host_values(const tcc_tensor& t, size_t bytes, void*) {
  const auto* p = static_cast<const std::byte*>(t.data);
  return std::vector<std::byte>(p, p + bytes);
}

}  // namespace

void run_host(Module& m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs, size_t num_outputs) {
  if (!m.host_library)
    throw InvalidArgument("the module was compiled with --no-host: it has no host kernels and runs on a GPU only");
  Binding b = runtime::bind(m, inputs, num_inputs, read_host_values, nullptr);
  check_outputs(m, b, outputs, num_outputs);

  AlignedBytes arena(static_cast<size_t>(b.arena_bytes));
  AlignedBytes constants = compute_binding_constants(m, b);
  std::vector<std::byte*> ptr(m.values.size());
  std::vector<void*> allocated(m.outputs.size(), nullptr);  // outputs the output allocator provided
  auto place = [&] {
    for (size_t v = 0; v < m.values.size(); ++v) {
      const ValueInfo& info = m.values[v];
      switch (info.where) {
        case ValueInfo::Where::Input: ptr[v] = static_cast<std::byte*>(inputs[info.index].data); break;
        case ValueInfo::Where::Output: {
          void* data = outputs[info.index].data;
          ptr[v] = static_cast<std::byte*>(data ? data : allocated[info.index]);
          break;
        }
        case ValueInfo::Where::Weight: ptr[v] = m.weight_data.data() + m.weight_ranges[info.index].offset; break;
        case ValueInfo::Where::Buffer: {
          int64_t offset = b.buffer_offsets[info.index];
          ptr[v] = offset < 0 ? nullptr : arena.data() + offset;
          break;
        }
        case ValueInfo::Where::BindingConstant: ptr[v] = constants.data() + b.constant_offsets[info.index]; break;
      }
    }
  };
  place();
  // A data-dependent size, once a fallback produced it: the arena grows to
  // what the rest of the run needs, keeping what earlier steps wrote.
  auto sized = [&](int id, const std::vector<int64_t>& shape) {
    bind_value_symbols(m, b, id, shape);
    if (static_cast<size_t>(b.arena_bytes) > arena.size()) {
      AlignedBytes grown(static_cast<size_t>(b.arena_bytes));
      if (arena.size() > 0) std::memcpy(grown.data(), arena.data(), arena.size());
      arena = std::move(grown);
    }
    allocate_sized_outputs(m, b, outputs, allocated);
    place();
  };

  auto inspect = [&](const StepInfo& step) {
    if (!m.step_inspector) return;
    std::vector<std::pair<int, Tensor>> written;
    for (int id : step.writes)
      written.emplace_back(id, Tensor::from_bytes(m.values[id].sig.dtype, b.shapes[id],
                                                  std::vector<std::byte>(ptr[id], ptr[id] + b.nbytes[id])));
    m.step_inspector(step, written);
  };
  std::vector<void*> args;
  std::vector<int64_t> sizes;
  for (const StepInfo& step : m.steps) {
    if (step.fallback) {
      run_fallback(m, step, b, [&](int id) { return HostSpan{ptr[id], b.nbytes[id]}; }, sized);
      inspect(step);
      continue;
    }
    const KernelInfo& k = m.kernels[step.kernel];
    args.clear();
    for (int id : step.reads) args.push_back(ptr[id]);
    for (int id : step.writes) args.push_back(ptr[id]);
    if (k.launch.random_offset) args.push_back(&m.random_offset);
    sizes.clear();
    for (const SymExpr& s : k.sizes) sizes.push_back(evaluate(s, b, k, "sizes"));
    check_kernel_buffers(m, step, b);
    k.host(args.data(), sizes.data());
    inspect(step);
  }

  // Outputs that are inputs or weights were not written by any step.
  if (!b.complete) throw BadModule("manifest.json: a data-dependent size was never produced by its fallback step");
  if (m.random) {
    ++m.random_offset;
    m.random_offset_on_device = false;
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    int id = m.output_values[i];
    if (m.values[id].where != ValueInfo::Where::Output)
      std::memmove(outputs[i].data, ptr[id], static_cast<size_t>(b.nbytes[id]));
  }
}

}  // namespace tcc::runtime
