// The GPU measuring loop (gpu_bench.h), on the runtime's device helpers.
#include "src/profiler/gpu_bench.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "src/diag/errors.h"
#include "src/profiler/cupti_trace.h"
#include "src/runtime/module.h"

namespace tcc::profiler {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Device copies of a module's inputs and outputs, freed with it.
struct DeviceTensors {
  std::vector<tcc_tensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<size_t> nbytes;
  ~DeviceTensors() {
    for (const tcc_tensor& t : tensors) runtime::device::release(t.data);
  }
  void add(DType dtype, std::vector<int64_t> shape, size_t bytes) {
    shapes.push_back(std::move(shape));
    nbytes.push_back(bytes);
    tensors.push_back({runtime::device::alloc(bytes), static_cast<tcc_dtype>(dtype),
                       static_cast<int32_t>(shapes.back().size()), nullptr});
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].shape = shapes[i].data();
  }
  // An output of `rank` dims whose size depends on the data: no memory until
  // the run asks for it through the module's output allocator (one run only).
  void add_sized(DType dtype, size_t rank, runtime::Module& m) {
    size_t i = tensors.size();
    add(dtype, std::vector<int64_t>(rank, 0), 0);
    runtime::device::release(tensors[i].data);
    tensors[i].data = nullptr;
    m.output_allocator = [this, &m](size_t output, const std::vector<int64_t>& shape, size_t bytes) {
      if (output >= tensors.size() || tensors[output].data)
        throw InputError("output '" + m.outputs[output].name + "' has a size that depends on the data, and a " +
                         "timed loop reuses one set of outputs: tcc run runs such a module, bench and profile do not");
      shapes[output] = shape;
      nbytes[output] = bytes;
      tensors[output].data = runtime::device::alloc(bytes);
      tensors[output].shape = shapes[output].data();
      return tensors[output].data;
    };
  }
};

std::vector<const Tensor*> ordered_inputs(const runtime::Module& m, const std::map<std::string, Tensor>& inputs) {
  std::vector<const Tensor*> out;
  for (const TensorSig& sig : m.inputs) {
    auto it = inputs.find(sig.name);
    if (it == inputs.end()) throw InputError("no value given for the module's input '" + sig.name + "'");
    out.push_back(&it->second);
  }
  return out;
}

// A module with its inputs and outputs on the device.
struct Loaded {
  std::unique_ptr<runtime::Module> module;
  DeviceTensors inputs, outputs;
  runtime::Binding binding;

  Loaded(const std::string& dir, const std::map<std::string, Tensor>& host_inputs) {
    module = runtime::load_module(dir);
    std::vector<tcc_tensor> host;
    for (const Tensor* t : ordered_inputs(*module, host_inputs)) {
      inputs.add(t->dtype(), t->shape(), t->nbytes());
      runtime::device::upload(inputs.tensors.back().data, t->raw(), t->nbytes());
    }
    binding = runtime::bind(*module, inputs.tensors.data(), inputs.tensors.size(), nullptr, nullptr);
    for (size_t i = 0; i < module->outputs.size(); ++i) {
      int id = module->output_values[i];
      if (binding.nbytes[id] < 0)
        outputs.add_sized(module->outputs[i].dtype, module->outputs[i].shape.size(), *module);
      else
        outputs.add(module->outputs[i].dtype, binding.shapes[id], static_cast<size_t>(binding.nbytes[id]));
    }
  }

  std::vector<Tensor> download() const {
    std::vector<Tensor> out;
    for (size_t i = 0; i < outputs.tensors.size(); ++i) {
      out.emplace_back(static_cast<DType>(outputs.tensors[i].dtype), outputs.shapes[i]);
      runtime::device::download(out.back().raw_mut(), outputs.tensors[i].data, outputs.nbytes[i]);
    }
    return out;
  }
};

// The runtime's errors as the driver's: a module or inputs that do not fit and
// a missing device are the user's to fix (exit 2); a failing CUDA call is not.
template <typename F>
auto tool_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const runtime::BadModule& e) {
    throw InputError(e.what());
  } catch (const runtime::InvalidArgument& e) {
    throw InputError(e.what());
  } catch (const runtime::NoDevice& e) {
    throw InputError(std::string("no GPU: ") + e.what());
  } catch (const runtime::CudaError& e) {
    throw Error(ExitCode::InternalError, std::string("CUDA: ") + e.what());
  }
}

// Sets the module's step inspector to call `inspect` with kernel names and value names.
void attach(runtime::Module& m, const StepInspector& inspect) {
  if (!inspect) return;
  m.step_inspector = [&m, inspect](const runtime::StepInfo& step,
                                   const std::vector<std::pair<int, Tensor>>& written) {
    std::map<std::string, Tensor> named;
    for (const auto& [id, t] : written) named.emplace(m.values[id].sig.name, t);
    inspect(step.fallback ? "" : m.kernels[step.kernel].name, step.node, named);
  };
}

struct Stream {
  void* handle = runtime::device::create_stream();
  ~Stream() { runtime::device::destroy_stream(handle); }
};

// One mode's step, ready to enqueue: the module loaded with its inputs and
// outputs on the device, on a stream of its own. With cuda_graph, each step
// goes through the runtime's graph per binding (enqueue_cuda_graphs: the
// inputs copied into the graph's static buffers, the replay, the outputs
// copied out; the graph is captured here, by the first step), or, with
// bound_inputs, replays one graph captured on the loaded buffers alone.
struct Stepper {
  Loaded l;
  Stream stream;
  bool graph = false;               // steps replay a captured CUDA graph
  bool per_binding_graphs = false;  // steps go through runtime::enqueue_cuda_graphs
  std::unique_ptr<runtime::CudaGraph> bound_graph;
  int64_t bound_replays = 0;
  std::string note;

  Stepper(const std::string& module_dir, const std::map<std::string, Tensor>& inputs, const BenchSettings& settings)
      : l(module_dir, inputs) {
    if (!settings.cuda_graph) return;
    runtime::Module& m = *l.module;
    std::string blocker = runtime::capture_blocker(m);
    graph = blocker.empty();
    if (!graph)
      note = "skipping cudagraphs due to " + blocker;
    else if (settings.bound_inputs)
      note = "inputs bound to the graph's captured buffers: no copy per step";
    if (graph && settings.bound_inputs) {
      bound_graph = runtime::capture_cuda(m, l.inputs.tensors.data(), l.inputs.tensors.size(),
                                          l.outputs.tensors.data(), l.outputs.tensors.size(), stream.handle);
      return;
    }
    per_binding_graphs = true;
    if (!graph) return;
    enqueue_step();
    sync();
  }

  void enqueue_direct() {
    runtime::enqueue_cuda(*l.module, l.inputs.tensors.data(), l.inputs.tensors.size(), l.outputs.tensors.data(),
                          l.outputs.tensors.size(), stream.handle);
  }

  void enqueue_step() {
    if (bound_graph) {
      bound_graph->launch(stream.handle);
      ++bound_replays;
    } else if (per_binding_graphs) {
      runtime::enqueue_cuda_graphs(*l.module, l.inputs.tensors.data(), l.inputs.tensors.size(),
                                   l.outputs.tensors.data(), l.outputs.tensors.size(), stream.handle);
    } else {
      enqueue_direct();
    }
  }

  // Over every step so far, the capturing one included.
  GraphCounts graph_counts() const {
    if (bound_graph) return {1, bound_replays, 0, 0, ""};
    runtime::GraphStats g = runtime::graph_stats(*l.module);
    return {static_cast<int64_t>(g.captures), static_cast<int64_t>(g.replays), static_cast<int64_t>(g.evictions),
            static_cast<int64_t>(g.uncaptured_runs), g.not_captured};
  }

  void sync() { runtime::device::sync(stream.handle); }
};

}  // namespace

std::string gpu_name() {
  return tool_errors([] { return runtime::device::name(); });
}

std::string gpu_arch() {
  return tool_errors([] {
    auto [major, minor] = runtime::device::compute_capability();
    return "sm_" + std::to_string(major * 10 + minor);
  });
}

std::vector<Tensor> run_on_host(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                                uint64_t random_offset, const StepInspector& inspect) {
  return tool_errors([&] {
    std::unique_ptr<runtime::Module> m = runtime::load_module(module_dir);
    runtime::set_random_offset(*m, random_offset);
    attach(*m, inspect);
    std::vector<tcc_tensor> ins;
    for (const Tensor* t : ordered_inputs(*m, inputs))
      ins.push_back({const_cast<std::byte*>(t->raw()), static_cast<tcc_dtype>(t->dtype()),
                     static_cast<int32_t>(t->rank()), t->shape().data()});
    runtime::Binding b = runtime::bind(*m, ins.data(), ins.size(), nullptr, nullptr);
    std::vector<Tensor> outs;
    std::vector<tcc_tensor> c_outs;
    for (size_t i = 0; i < m->outputs.size(); ++i) {
      int id = m->output_values[i];
      bool sized = b.nbytes[id] < 0;  // its size depends on the data: the run asks for its memory
      outs.emplace_back(m->outputs[i].dtype,
                        sized ? std::vector<int64_t>(m->outputs[i].shape.size(), 0) : b.shapes[id]);
      c_outs.push_back({sized ? nullptr : outs.back().raw_mut(), static_cast<tcc_dtype>(m->outputs[i].dtype),
                        static_cast<int32_t>(outs.back().rank()), nullptr});
    }
    for (size_t i = 0; i < outs.size(); ++i) c_outs[i].shape = outs[i].shape().data();
    m->output_allocator = [&](size_t output, const std::vector<int64_t>& shape, size_t) {
      outs[output] = Tensor(m->outputs[output].dtype, shape);
      return static_cast<void*>(outs[output].raw_mut());
    };
    runtime::run_host(*m, ins.data(), ins.size(), c_outs.data(), c_outs.size());
    return outs;
  });
}

std::vector<Tensor> run_on_gpu(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                               uint64_t random_offset, const StepInspector& inspect) {
  return tool_errors([&] {
    Loaded l(module_dir, inputs);
    runtime::set_random_offset(*l.module, random_offset);
    attach(*l.module, inspect);
    Stream stream;
    runtime::run_cuda(*l.module, l.inputs.tensors.data(), l.inputs.tensors.size(), l.outputs.tensors.data(),
                      l.outputs.tensors.size(), stream.handle);
    return l.download();
  });
}

ModeMeasurement bench_on_gpu(const std::string& module_dir, const std::string& mode,
                             const std::map<std::string, Tensor>& inputs, const BenchSettings& settings,
                             std::vector<Tensor>* outputs) {
  return tool_errors([&] {
    Stepper step(module_dir, inputs, settings);
    ModeMeasurement result;
    result.mode = mode;
    result.note = step.note;
    result.cuda_graph = step.graph;
    if (settings.cuda_graph && !step.graph) std::cerr << "tcc bench: " << mode << ": " << step.note << "\n";
    result.warmup = settings.warmup;
    result.kernels = module_kernel_specs(module_dir, step.l.binding.symbols);

    for (int i = 0; i < settings.warmup; ++i) step.enqueue_step();
    step.sync();

    runtime::device::Timer timer;
    // The enqueue time is the step's alone, without the timer's event records.
    auto timed_step = [&] {
      timer.start(step.stream.handle);
      Clock::time_point begin = Clock::now();
      step.enqueue_step();
      Clock::time_point enqueued = Clock::now();
      timer.stop(step.stream.handle);
      double gpu = timer.elapsed_ms();
      result.latencies_ms.push_back(ms_between(begin, Clock::now()));
      result.enqueue_ms.push_back(ms_between(begin, enqueued));
      result.gpu_ms.push_back(gpu);
    };
    Clock::time_point start = Clock::now();
    if (settings.iterations > 0) {
      for (int i = 0; i < settings.iterations; ++i) timed_step();
    } else if (settings.duration_s > 0) {
      while (ms_between(start, Clock::now()) < settings.duration_s * 1e3 || result.latencies_ms.size() < 10)
        timed_step();
    } else {
      double previous = -1;
      while (static_cast<int>(result.latencies_ms.size()) < kMaxSteps) {
        std::vector<double> batch;
        for (int i = 0; i < kStableBatch; ++i) {
          timed_step();
          batch.push_back(result.latencies_ms.back());
        }
        double median = stats_of(batch).median;
        if (previous > 0 && std::abs(median - previous) <= kStableTolerance * previous) break;
        previous = median;
      }
    }

    // Throughput, as a training loop runs its steps and as trtexec and the peer
    // benchmark's PyTorch rows measure it: no wait between steps.
    result.pipelined_steps =
        std::clamp(static_cast<int>(result.latencies_ms.size()), kMinPipelinedSteps, kMaxPipelinedSteps);
    for (int batch = 0; batch < kPipelinedBatches; ++batch) {
      step.sync();
      Clock::time_point begin = Clock::now();
      for (int i = 0; i < result.pipelined_steps; ++i) step.enqueue_step();
      step.sync();
      result.pipelined_ms.push_back(ms_between(begin, Clock::now()));
    }
    if (settings.cuda_graph) result.graphs = step.graph_counts();
    if (outputs) {
      // What --check compares: call 0's draws, which the reference draws.
      if (step.l.module->random) {
        runtime::set_random_offset(*step.l.module, 0);
        step.enqueue_step();
        step.sync();
      }
      *outputs = step.l.download();
    }
    return result;
  });
}

void trace_on_gpu(const std::string& module_dir, const std::map<std::string, Tensor>& inputs,
                  const BenchSettings& settings, int steps, ModeMeasurement& mode) {
  tool_errors([&] {
    Stepper step(module_dir, inputs, settings);
    // The first run loads the module and builds the library plans; none of that belongs in the trace.
    step.enqueue_step();
    step.sync();
    CuptiTrace trace(*step.l.module);
    // A graph's replays are named after one step launched directly (CuptiTrace::finish), outside the steps' windows.
    if (step.graph) {
      step.enqueue_direct();
      step.sync();
    }
    for (int i = 0; i < steps; ++i)
      trace.trace_step([&] {
        step.enqueue_step();
        step.sync();
      });
    CuptiTrace::Result traced = trace.finish();
    mode.traced_steps = steps;
    mode.activities = std::move(traced.kernels);
    mode.step_windows = std::move(traced.windows);
    mode.spans = std::move(traced.spans);
  });
}

}  // namespace tcc::profiler
