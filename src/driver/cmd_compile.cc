// `tcc compile MODEL -o OUT`: the whole compiler, from a model file to the
// module directory of docs/MODULE.md, on a machine with or without a GPU.
//
//   load, infer shapes          the model as the user wrote it
//   partition, guards           explain's analysis: why nodes break the graph,
//                               and what the module assumes about its inputs
//   passes through Fuse         optimization, then fusion into tcc::Fusion nodes
//   build_schedule              one kernel per fusion (shared by identical
//                               layers), host fallbacks for the rest
//   plan_memory                 one arena for the values between steps
//   emit, NVRTC || host build   the two compilers run at the same time
//   write_module                manifest, binaries, weights, report
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "codegen/emit.h"
#include "codegen/memory_plan.h"
#include "codegen/module_writer.h"
#include "codegen/profiles.h"
#include "codegen/schedule.h"
#include "codegen/toolchain.h"
#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/analysis/partition.h"
#include "src/analysis/recompile_simulator.h"
#include "src/compiler/saved_activations.h"
#include "src/driver/commands.h"
#include "src/driver/run_support.h"
#include "src/driver/train_flags.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/profiler/gpu_bench.h"
#include "src/shape/shape_inference.h"
#include "tcc_runtime.h"

namespace tcc {

namespace {

struct CompileCli {
  std::string model;
  std::string output;
  std::string archs = "sm_80,sm_90";
  std::string shape_hints;
  bool no_ptx = false;
  bool no_host = false;
  bool time_passes = false;
  bool list_modes = false;
  int jobs = 0;
  std::string cache;        // tuning cache (modes that autotune)
  std::string device_name;  // whose cache entries to use without a GPU
  CompileOptions options;
  TrainFlags train;
};

// Whether `name` is valid UTF-8, which the manifest's JSON needs (nlohmann's
// writer refuses anything else).
bool utf8(const std::string& name) {
  try {
    static_cast<void>(nlohmann::json(name).dump());
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// Node and value names of g and its regions that the manifest cannot spell.
void refuse_names_json_cannot_hold(const Graph& g) {
  auto check = [&](const std::string& name, const std::string& what) {
    if (!utf8(name))
      throw InputError(g.file() + ": " + what + " name '" + name +
                       "' is not valid UTF-8; a compiled module's manifest is JSON, which names values in UTF-8");
  };
  for (const Value* v : g.inputs()) check(v->name(), "value");
  for (const Value* v : g.initializers()) check(v->name(), "value");
  for (const auto& n : g.nodes()) {
    check(n->name(), "node");
    for (const Value* v : n->outputs()) check(v->name(), "value");
    for (const Graph* r : n->regions()) refuse_names_json_cannot_hold(*r);
  }
}

// What a compiled module's C API cannot carry, refused by name before any
// work: names JSON cannot hold, string tensors (modules hold numeric buffers),
// and outputs whose size no run can know: an unknown dim, or a symbol that
// neither an input's dim nor a node's output gives. A size a node produces
// from data (NonZero's count, as a dim of its output) is bound when that node
// has run; the caller's output allocator provides such an output's memory.
void refuse_what_modules_cannot_carry(const Graph& g) {
  refuse_names_json_cannot_hold(g);
  std::set<std::string> bound = g.bound_symbols();
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs())
      if (v && v->type().is_tensor() && v->type().has_rank())
        for (const Dim& d : v->type().shape())
          if (d.is_symbolic() && d.expr().is_symbol()) bound.insert(d.expr().symbol_name());
  auto refuse_strings = [](const Value* v, const char* what) {
    if (v->type().is_tensor() && v->type().dtype() == DType::String)
      v->fail(std::string(what) + " '" + v->name() +
              "' is a string tensor; a compiled module takes and returns numeric tensors only");
  };
  for (const Value* v : g.inputs()) refuse_strings(v, "input");
  for (const Value* v : g.outputs()) {
    refuse_strings(v, "output");
    if (!v->type().is_tensor() || !v->type().has_rank()) continue;
    auto refuse_size = [&](const std::string& size) {
      v->fail("output '" + v->name() + "' has type " + v->type().str() + ", whose size " + size +
              " neither the inputs' shapes nor a node's output give, so a compiled module cannot size it");
    };
    for (size_t k = 0; k < v->type().shape().size(); ++k) {
      const Dim& d = v->type().shape()[k];
      if (d.is_unknown()) refuse_size("along axis " + std::to_string(k));
      for (const std::string& sym : d.expr().symbols())
        if (!bound.count(sym)) refuse_size("'" + sym + "'");
    }
  }
}

// A dim that must equal a static size but is a product of symbols (b*b
// broadcast against 24) binds no symbol (ShapeEnv::unify), so the kernels
// could not index it: refused, naming the node that asked for the equality.
void refuse_unsolved_static_dims(const ShapeEnv& env) {
  for (const ShapeEnv::Equality& e : env.equalities()) {
    Dim a = env.canonical(Dim(e.lhs)), b = env.canonical(Dim(e.rhs));
    if (a == b || !(a.is_static() || b.is_static()) || !e.node) continue;
    e.node->fail("its dims '" + a.expr().str() + "' and '" + b.expr().str() +
                 "' must be equal, which fixes no symbol: tcc solves an equality for a symbol only where it is linear "
                 "in it (b+1 == 24); declare the dim as a symbol of its own or a static size");
  }
}

// "native", as nvcc spells it: the architecture of the GPU here.
std::string native_arch() {
  if (!tcc_cuda_available()) throw InputError("--arch native: no usable GPU here to take the architecture from");
  return profiler::gpu_arch();
}

std::vector<std::string> parse_archs(const std::string& spec) {
  std::vector<std::string> archs;
  for (std::string a : split(spec, ',')) {
    bool native = a == "native";
    if (native) a = native_arch();
    if (std::find(kCubinArchs.begin(), kCubinArchs.end(), a) == kCubinArchs.end()) {
      std::string valid;
      for (const std::string& k : kCubinArchs) valid += (valid.empty() ? "" : ", ") + k;
      throw InputError(native ? "--arch native: this GPU is " + a + ", which tcc has no cubin target for (valid: " +
                                    valid + "); the default archs' PTX runs on newer GPUs"
                              : "--arch: unknown architecture '" + a + "' (valid: " + valid + ", native)");
    }
    if (std::find(archs.begin(), archs.end(), a) == archs.end()) archs.push_back(a);
  }
  // Ascending, so the PTX (for the newest) and the file list do not depend on how the flag was spelled.
  std::sort(archs.begin(), archs.end());
  return archs;
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

std::string human_bytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

ExitCode run_compile(CompileCli& c) {
  if (c.list_modes) {
    std::cout << modes_table();
    return ExitCode::Ok;
  }
  if (c.model.empty()) throw InputError("tcc compile: a MODEL is required (or --list-modes)");
  if (c.output.empty()) throw InputError("tcc compile: -o OUT is required (the module directory to write)");
  // Flags are checked before the model is read so a typo fails fast.
  CompileOptions& o = c.options;
  const CompileMode& mode = find_mode(o.mode);
  const DeviceProfile& device = find_device(o.device);
  bool autotunes = mode_autotunes(mode);
  if (!autotunes && (!c.cache.empty() || !c.device_name.empty()))
    throw InputError("tcc compile: --cache and --device-name apply to modes that autotune (max-autotune, "
                     "max-autotune-no-cudagraphs), not to --mode " + mode.name);
  o.archs = parse_archs(c.archs);
  o.ptx = !c.no_ptx;
  o.host = !c.no_host;
  o.shape_hints = parse_sizes(c.shape_hints, "--shape-hint");
  int jobs = c.jobs > 0 ? c.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  ModuleContents m;
  CompileTimings& t = m.timings;
  auto start = std::chrono::steady_clock::now();
  auto stage = start;
  auto model = load_model(c.model);
  // With --train the module is the training step: inputs gain the label, lr,
  // step and optimizer state, outputs are the loss and the updated parameters.
  std::optional<TrainingGraph> training = apply_train_flags(c.train, *model);
  t.load = ms_since(stage);
  std::future<void> emitted = emit_onnx(c.train, *model);
  hinted_sizes(*model->graph, o.shape_hints);  // a hint for a symbol the model lacks fails before any work
  // The pipeline below makes the min-cut choice; the comparison plans both
  // choices on copies of the step to see which peaks lower.
  std::optional<SavedActivations> activations;
  if (training) activations = compare_saved_activations(*model, o.shape_hints);

  stage = std::chrono::steady_clock::now();
  ShapeInfo info = infer_shapes(*model->graph);
  refuse_what_modules_cannot_carry(*model->graph);
  refuse_unsolved_static_dims(info.env);
  // Explain's view of the model as written: why nodes break the graph, and the
  // guards of the whole graph compiled as one variant from its declared types.
  Partition partition = partition_graph(*model->graph, info, OpRegistry::get());
  std::unordered_map<std::string, GraphBreak> breaks;
  for (const GraphBreak& b : partition.breaks) {
    // Other breaks run on the host through the reference implementation; an op
    // tcc does not know (whatever else breaks there: Expand at opset 7 reads
    // data for its shape too) has none, so no module could run it end to end.
    bool known = OpRegistry::get().lookup(*b.node) != nullptr;
    if (b.reason == "unsupported_op" || !known)
      b.node->fail((known ? b.message : OpRegistry::get().why_unsupported(*b.node)) +
                   "; tcc has no implementation of it, on the GPU or the host, so a compiled module could not run "
                   "(tcc explain reports it as a graph break)");
    breaks.emplace(b.node->name(), b);
  }
  ModelSignature signature = build_signature(*model->graph, info);
  // Explain treats an integer scalar input as torch.compile treats a Python
  // int, a dynamic size it guards (`2 <= s0`). A module reads it as data on
  // every call (CumSum's axis, a Range bound), for every value: no guard.
  for (InputSignature& in : signature.inputs) in.scalar_class = -1;
  std::vector<int> all_inputs(signature.inputs.size());
  for (size_t i = 0; i < all_inputs.size(); ++i) all_inputs[i] = static_cast<int>(i);
  GuardSet guards = declared_guards(signature, all_inputs, 0);
  t.shapes = ms_since(stage);

  stage = std::chrono::steady_clock::now();
  PassManagerOptions pm_options;
  pm_options.time_passes = c.time_passes;
  pm_options.fusion = std::any_of(mode.features.begin(), mode.features.end(),
                                  [](const Feature* f) { return f->name == "fusion"; });
  std::vector<const PassInfo*> pipeline = build_pipeline("", Phase::Fuse);
  // The min-cut minimizes saved bytes, a proxy: where the memory planner finds
  // saving everything peaks lower, the module keeps the save-all graph.
  bool save_all = activations && activations->save_all_peak < activations->min_cut_peak;
  if (save_all)
    std::erase_if(pipeline, [](const PassInfo* p) { return p->name == "recompute_activations"; });
  PassManager pm(pipeline, pm_options, std::cerr);
  pm.run(*model);
  t.passes = ms_since(stage);
  const Graph& g = *model->graph;

  stage = std::chrono::steady_clock::now();
  Schedule schedule = build_schedule(g);
  t.schedule = ms_since(stage);
  stage = std::chrono::steady_clock::now();
  MemoryPlan plan = plan_memory(g, schedule);
  t.memory = ms_since(stage);

  if (autotunes) {
    m.autotune.emplace();
    m.configs = compile_autotune(schedule.kernels, hinted_sizes(g, o.shape_hints, kUnhintedRunSize), c.cache,
                                 c.device_name, *m.autotune);
  }

  stage = std::chrono::steady_clock::now();
  m.cuda_source = emit_cuda(schedule.kernels, m.configs);
  t.emit = ms_since(stage);

  m.model = c.model;
  m.reference = c.train.train ? c.train.emit_onnx : c.model;
  m.options = o;
  m.mode = &mode;
  m.device = &device;
  m.graph = &g;
  m.guards = &guards;
  m.schedule = &schedule;
  m.memory = &plan;
  // NVRTC, the host compiler and the weights' write are independent: run them together.
  prepare_module_dir(c.output);
  if (o.host) {
    stage = std::chrono::steady_clock::now();
    write_module_file(c.output, kHostSourceFile, emit_host(schedule.kernels));
    t.emit += ms_since(stage);
  }
  ModuleWriter writer(c.output, m);
  // The host compiler's share of the threads is a quarter (about its part of the
  // work on the bundled models), in shards once that is two or more; NVRTC's
  // programs, in shards of their own, take the rest (all of them with --no-host).
  int host_jobs = std::max(1, jobs / 4);
  int nvrtc_jobs = o.host && host_jobs > 1 ? jobs - host_jobs : jobs;
  auto kernels_of = [&](const std::vector<size_t>& group) {
    std::vector<kir::Kernel> kernels;
    for (size_t i : group) kernels.push_back(schedule.kernels[i]);
    return kernels;
  };
  auto nvrtc = std::async(std::launch::async, [&] {
    auto begin = std::chrono::steady_clock::now();
    CudaSources sources(m.cuda_source);
    std::vector<size_t> generated;
    for (size_t i = 0; i < schedule.kernels.size(); ++i)
      if (!runs_library(schedule.kernels[i], config_of(schedule.kernels, m.configs, i)))
        generated.push_back(i);
    int units = cuda_shard_count(generated.size(), o.archs.size(), nvrtc_jobs);
    for (const std::vector<size_t>& group : shard_kernels(schedule.kernels, generated, units)) {
      std::vector<KernelConfig> configs;
      for (size_t i : group)
        if (!m.configs.empty()) configs.push_back(m.configs[i]);
      sources.shards.push_back(emit_cuda(kernels_of(group), configs));
    }
    auto binaries = compile_cuda(sources, o.archs, o.ptx, nvrtc_jobs);
    t.nvrtc = ms_since(begin);
    return binaries;
  });
  stage = std::chrono::steady_clock::now();
  if (o.host) {
    try {
      std::vector<std::string> host_shards;
      std::vector<size_t> every(schedule.kernels.size());
      std::iota(every.begin(), every.end(), size_t{0});
      for (const std::vector<size_t>& group : shard_kernels(schedule.kernels, every, host_jobs))
        host_shards.push_back(emit_host(kernels_of(group)));
      compile_host_library(c.output + "/" + kHostSourceFile, c.output + "/" + kHostLibraryFile, host_shards,
                           host_jobs);
    } catch (...) {
      nvrtc.wait();
      throw;
    }
    t.host = ms_since(stage);
  }
  m.binaries = nvrtc.get();

  int graph_breaks = 0;
  std::unordered_map<std::string, const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.emplace(n->name(), n.get());
  for (const Step& s : schedule.steps) {
    if (s.kind != Step::Kind::Fallback) continue;
    const Node* n = nodes.at(s.node);
    auto it = breaks.find(s.node);
    if (it != breaks.end()) {
      ++graph_breaks;
      m.fallbacks.push_back({s.node, n->op_type(), it->second.reason, it->second.message});
    } else {
      std::string message = "no generated kernel computes " + n->op_type();
      if (std::string why = kernel_refusal(*n); !why.empty()) message += ": " + why;
      m.fallbacks.push_back({s.node, n->op_type(), "no_kernel", message});
    }
  }

  m.passes = pm.records();
  t.total = ms_since(start);
  writer.finish();
  // The ONNX write ran beside everything since the load; what is left of it is waited for here.
  auto written = std::chrono::steady_clock::now();
  emitted.get();
  double emit_wait = ms_since(written);

  size_t kernel_steps = schedule.steps.size() - m.fallbacks.size();
  std::map<std::string, int64_t> sizes = hinted_sizes(g, o.shape_hints);
  std::string at;
  for (const auto& [s, v] : sizes) at += (at.empty() ? " at " : ", ") + s + "=" + std::to_string(v);
  std::cout << "tcc compile: " << c.model << " -> " << c.output << " (mode " << mode.name << ")\n"
            << "  kernels:   " << schedule.kernels.size() << " compiled for " << kernel_steps << " kernel steps ("
            << kernel_steps - std::min(kernel_steps, schedule.kernels.size()) << " reused)\n"
            << "  views:     " << schedule.views.size() << " (reshapes that share their input's buffer: no kernel)\n"
            << "  binding:   " << schedule.binding_steps.size()
            << " nodes computed once per binding of the symbols (masks, positions), kept on the device\n"
            << "  fallbacks: " << m.fallbacks.size() << " nodes on the host (" << graph_breaks << " from graph breaks, "
            << m.fallbacks.size() - graph_breaks << " with no kernel), " << schedule.fallback_copies
            << " host<->device copies\n"
            << "  arena:     " << human_bytes(evaluate_bytes(plan.arena_bytes, sizes)) << at << " ("
            << human_bytes(evaluate_bytes(plan.unplanned_bytes, sizes)) << " unplanned)\n";
  if (training) {
    std::cout << "  training:  loss '" << training->loss << "', " << training->params.size() << " parameters, optimizer "
              << c.train.optimizer
              << (training->lr.empty()     ? ""
                  : training->step.empty() ? " (lr is an input)"
                                           : " (lr and step are inputs)")
              << "\n";
    if (!training->lr.empty()) {
      // Where each parameter's update runs: a kernel of update nodes only (fuse_multi_tensor merges
      // those of one shape), or the kernel that computes its gradient (a reduction over the batch
      // takes the update as its epilogue). Update-only steps that write no parameter compute
      // shared scalars (bias corrections, decay).
      auto update_only = [&](const Step& s) {
        if (s.kind != Step::Kind::Kernel) return false;
        const auto& body = fusion_body(*nodes.at(s.node)).nodes();
        return std::all_of(body.begin(), body.end(), [](const auto& n) { return step_part(*n) == StepPart::Optimizer; });
      };
      std::map<std::string, const Step*> writer;
      for (const Step& s : schedule.steps)
        for (const std::string& w : s.writes) writer[w] = &s;
      std::set<const Step*> own, shared, scalar;
      size_t own_params = 0, shared_params = 0;
      for (const std::string& p : training->params) {
        const Step* s = writer.at(p + ".updated");
        if (update_only(*s)) {
          own.insert(s);
          ++own_params;
        } else {
          shared.insert(s);
          ++shared_params;
        }
      }
      for (const Step& s : schedule.steps)
        if (update_only(s) && !own.count(&s)) scalar.insert(&s);
      std::cout << "  optimizer: " << training->params.size() << " updates: " << own_params << " in " << own.size()
                << " multi-tensor kernel steps, " << shared_params << " fused into " << shared.size()
                << " gradient steps, " << scalar.size() << " scalar steps\n";
    }
    std::istringstream lines(describe_saved_activations(*activations));
    for (std::string line; std::getline(lines, line);) std::cout << "  " << line << "\n";
    std::cout << "  compiled:  the " << (save_all ? "save-all" : "min-cut") << " choice\n";
  }
  char line[240];
  std::snprintf(line, sizeof line, "  time:      %.2f s (load %.2f, passes %.2f, lowering %.2f, NVRTC %.2f",
                ms_since(start) / 1e3, t.load / 1e3, t.passes / 1e3, (t.schedule + t.memory + t.emit) / 1e3,
                t.nvrtc / 1e3);
  std::cout << line;
  if (o.host) {
    std::snprintf(line, sizeof line, " || host compiler %.2f", t.host / 1e3);
    std::cout << line;
  }
  std::snprintf(line, sizeof line, ", write %.2f", (ms_since(start) - t.total - emit_wait) / 1e3);
  std::cout << line;
  if (!c.train.emit_onnx.empty()) {
    std::snprintf(line, sizeof line, ", then --emit-onnx %.2f", emit_wait / 1e3);
    std::cout << line;
  }
  std::cout << ")\n";
  // Grouped by op and reason, so twelve identical layers make one line; report.md lists every node.
  std::map<std::pair<std::string, std::string>, std::vector<const FallbackReason*>> groups;
  for (const FallbackReason& r : m.fallbacks) groups[{r.reason, r.op_type}].push_back(&r);
  if (m.autotune)
    std::cout << "  autotune:  " << m.autotune->measured << " kernels measured, " << m.autotune->from_cache
              << " from the cache, " << m.autotune->heuristic << " by heuristics (" << m.autotune->note << ")\n";
  for (const auto& [key, rs] : groups) {
    std::cout << "  fallback [" << key.first << "] " << key.second << " x" << rs.size() << ": " << rs[0]->message
              << " (";
    for (size_t i = 0; i < rs.size() && i < 3; ++i) std::cout << (i ? ", " : "") << rs[i]->node;
    if (rs.size() > 3) std::cout << ", +" << rs.size() - 3 << " more";
    std::cout << ")\n";
  }
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_compile(CLI::App& cmd) {
  auto c = std::make_shared<CompileCli>();
  std::string modes, devices;
  for (const CompileMode& m : all_modes()) modes += (modes.empty() ? "" : ", ") + m.name;
  for (const DeviceProfile& d : all_devices()) devices += (devices.empty() ? "" : ", ") + d.name;
  cmd.add_option("model", c->model, "ONNX model or tcc text IR");
  cmd.add_option("-o,--output", c->output, "Module directory to write (created; a previous module there is replaced)");
  cmd.add_option("--mode", c->options.mode, "Compile mode: " + modes)->capture_default_str();
  cmd.add_option("--arch", c->archs, "Comma-separated cubin architectures (native: this machine's GPU)")
      ->capture_default_str();
  cmd.add_flag("--no-ptx", c->no_ptx, "Do not add PTX for the newest architecture");
  cmd.add_flag("--no-host", c->no_host,
               "Do not build the kernels' CPU versions (host.so): a module that runs on a GPU only, compiled sooner");
  cmd.add_option("--jobs", c->jobs,
                 "Threads for NVRTC and the host compiler, which compile the kernels in shards when there are "
                 "threads to spare (default: hardware threads)");
  cmd.add_option("--shape-hint", c->shape_hints, "Sizes of symbolic dims for the report (default 1) and for "
                                                 "max-autotune's measurements (default 8), e.g. batch=8,seq=128");
  cmd.add_option("--device", c->options.device, "Device profile for the report's estimates: " + devices)
      ->capture_default_str();
  cmd.add_flag("--time-passes", c->time_passes, "Print a table of pass times and counters to stderr");
  cmd.add_option("--cache", c->cache, "Tuning cache to take kernel configurations from (modes that autotune; "
                                     "see tcc autotune)");
  cmd.add_option("--device-name", c->device_name,
                 "Without a GPU: use the tuning cache entries of this device (as the driver names it)");
  cmd.add_flag("--list-modes", c->list_modes, "List the compile modes and what each turns on, and exit");
  add_train_flags(cmd, c->train);
  return [c]() { return run_compile(*c); };
}

}  // namespace tcc
