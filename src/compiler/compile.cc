// The compile pipeline (see compile.h): one function per stage, called in
// order by compile().
#include "src/compiler/compile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "codegen/emit.h"
#include "codegen/emit_c.h"
#include "codegen/toolchain.h"
#include "frontends/load_model.h"
#include "src/analysis/partition.h"
#include "src/analysis/recompile_simulator.h"
#include "src/analysis/trace.h"
#include "src/autotune/compile_autotune.h"
#include "src/compiler/module_checks.h"
#include "src/compiler/scratch_dir.h"
#include "src/compiler/structured_io.h"
#include "src/ops/kernel_roles.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Why nodes of the model as written break the graph, by node name: the
// shapes stage's, for the fallbacks' reasons.
using Breaks = std::unordered_map<std::string, GraphBreak>;

// --specialize: each named input's readers read a constant of its values
// instead, which shape inference and constant folding then see through (a
// Reduce's axes, a Reshape's target, a Resize's scales). The module still
// takes the input; the manifest's guard on its values (write_module_dir)
// refuses others.
void specialize_inputs(Graph& g, const std::map<std::string, std::vector<double>>& specialize,
                       const std::string& model) {
  for (const auto& [name, values] : specialize) {
    auto it = std::find_if(g.inputs().begin(), g.inputs().end(), [&](const Value* v) { return v->name() == name; });
    std::string flag = "--specialize " + name + ": ";
    if (it == g.inputs().end()) throw InputError(model + ": " + flag + "the model has no input '" + name + "'");
    Value* input = *it;
    const Type& t = input->type();
    if (!t.is_tensor() || !(is_integer(t.dtype()) || is_float(t.dtype())) || !t.fully_static())
      throw InputError(model + ": " + flag + "input '" + name + "' is " + t.str() +
                       "; only a numeric tensor of static shape can be compiled for its values");
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape()) shape.push_back(d.value());
    Tensor data(t.dtype(), shape);
    if (data.numel() != static_cast<int64_t>(values.size()))
      throw InputError(model + ": " + flag + "input '" + name + "' is " + t.str() + ", " +
                       std::to_string(data.numel()) + " values, but the flag gives " + std::to_string(values.size()));
    for (size_t i = 0; i < values.size(); ++i) {
      // Integers up to 2^53 are exact as doubles; an integer input takes nothing else.
      if (is_integer(t.dtype()) && (values[i] != std::trunc(values[i]) || std::fabs(values[i]) > 0x1p53))
        throw InputError(model + ": " + flag + "input '" + name + "' is " + t.str() + ", but value " +
                         std::to_string(i) + " (" + format_float(values[i]) + ") is not an integer it holds exactly");
      data.set_f64(static_cast<int64_t>(i), values[i]);
    }
    g.replace_all_uses(input, g.add_initializer(name + "/specialized", std::move(data)));
  }
}

// load: the model (its --specialize inputs read as constants), and with
// --train its training step (inputs gain the label, lr, step and optimizer
// state; outputs are the loss and the updated parameters). --emit-onnx starts
// writing it beside the rest of the pipeline.
std::unique_ptr<Model> load(const CompileRequest& req, CompileResult& r, std::future<void>& emitted) {
  std::unique_ptr<Model> model = load_model(req.model);
  specialize_inputs(*model->graph, req.options.specialize, req.model);
  r.training = apply_train_flags(req.train, *model);
  emitted = emit_onnx(req.train, *model);
  hinted_sizes(*model->graph, req.options.shape_hints);  // a hint for a symbol the model lacks fails before any work
  r.structured_inputs = flatten_structured_inputs(*model->graph, req.options);
  // The passes make the min-cut choice; the comparison plans both choices on
  // copies of the step to see which peaks lower.
  if (r.training) r.activations = compare_saved_activations(*model, req.options.shape_hints);
  return model;
}

// shapes: inference, what a module cannot carry, and explain's view of the
// model as written: why nodes break the graph, and the guards of the whole
// graph compiled as one variant from its declared types (into the result).
Breaks analyze(Model& model, CompileResult& r) {
  Breaks breaks;
  Graph& g = *model.graph;
  ShapeInfo info = infer_shapes(g);
  refuse_what_modules_cannot_carry(g);
  refuse_unsolved_dims(info.env);
  Partition partition = partition_graph(g, info, OpRegistry::get());
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
  // A module takes every positive size, 1 included (batch 1, a one-token
  // decode step); where an op needs a size above 1 a fact guards it.
  r.signature = std::make_unique<ModelSignature>(build_signature(g, info, 1));
  ModelSignature& signature = *r.signature;
  read_size_ranges(signature, model.metadata, model.path);
  // Explain treats an integer scalar input as torch.compile treats a Python
  // int, a dynamic size it guards (`2 <= s0`). A module reads it as data on
  // every call (CumSum's axis, a Range bound), for every value: no guard.
  for (InputSignature& in : signature.inputs) in.scalar_class = -1;
  std::vector<int> all_inputs(signature.inputs.size());
  std::iota(all_inputs.begin(), all_inputs.end(), 0);
  r.guards.emplace(declared_guards(signature, all_inputs, 0));
  return breaks;
}

// --disable-passes: known passes, and none the later stages depend on.
void check_disabled_passes(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (!find_pass(name))
      throw InputError("--disable-passes: unknown pass '" + name + "' (passes: " + known_passes() + ")");
    if (name == "decompose" || name == "flatten_outputs" || name == "fuse")
      throw InputError("--disable-passes: '" + name + "' cannot be left out: scheduling and code generation read "
                       "the graph in the form it leaves (--mode eager compiles without fusing)");
  }
}

// passes: the pipeline through Fuse. The min-cut minimizes saved bytes, a
// proxy: where the memory planner finds saving everything peaks lower, the
// module keeps the save-all graph.
std::vector<PassRecord> run_passes(Model& model, const CompileRequest& req, const CompileMode& mode, bool save_all) {
  const std::vector<std::string>& disabled = req.disabled_passes;
  PassManagerOptions options;
  options.time_passes = req.time_passes;
  options.precision = req.options.precision;
  options.fusion = std::any_of(mode.features.begin(), mode.features.end(),
                               [](const Feature* f) { return f->name == "fusion"; });
  std::vector<const PassInfo*> pipeline = build_pipeline("", Phase::Fuse);
  std::erase_if(pipeline, [&](const PassInfo* p) {
    return (save_all && p->name == "recompute_activations") ||
           std::find(disabled.begin(), disabled.end(), p->name) != disabled.end();
  });
  // Outputs are sized once the passes have refined the types (decompose
  // infers them again where sequences resolve, flatten_outputs makes their
  // elements outputs), and before fuse, so a refusal names the node that
  // writes the output.
  options.after_pass = [&](const PassInfo& p, const Model& m) {
    if (p.name == "flatten_outputs") refuse_unsized_outputs(*m.graph);
    if (req.after_graph_pass) req.after_graph_pass(p, m);
  };
  PassManager pm(pipeline, options, std::cerr);
  pm.run(model);
  return pm.records();
}

std::vector<kir::Kernel> kernels_of(const std::vector<kir::Kernel>& kernels, const std::vector<size_t>& group) {
  std::vector<kir::Kernel> out;
  for (size_t i : group) out.push_back(kernels[i]);
  return out;
}

// The host library built from `shards` (and `source`, host.cc, when there is
// one shard), in a scratch directory: the module keeps its bytes.
std::vector<char> build_host_library(const std::string& source, const std::vector<std::string>& shards, int jobs) {
  ScratchDir scratch("tcc-host");
  std::string source_file = (scratch.path / kHostSourceFile).string();
  std::string library_file = (scratch.path / kHostLibraryFile).string();
  std::ofstream(source_file, std::ios::binary) << source;
  compile_host_library(source_file, library_file, shards, jobs);
  std::ifstream in(library_file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) throw InternalError(library_file + ": cannot read the host library");
  return bytes;
}

// build: NVRTC and the host compiler at the same time. The host compiler's
// share of the threads is a quarter (about its part of the work on the bundled
// models), in shards once that is two or more; NVRTC's programs, in shards of
// their own, take the rest (all of them without a host build).
void build(const CompileRequest& req, CompileResult& r) {
  const CompileOptions& o = r.options;
  const std::vector<kir::Kernel>& kernels = r.schedule.kernels;
  CompileTimings& t = r.timings;
  int jobs = req.jobs > 0 ? req.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int host_jobs = std::max(1, jobs / 4);
  int nvrtc_jobs = o.host && host_jobs > 1 ? jobs - host_jobs : jobs;
  auto nvrtc = std::async(std::launch::async, [&] {
    auto begin = Clock::now();
    CudaSources sources(r.cuda_source);
    std::vector<size_t> generated;
    for (size_t i = 0; i < kernels.size(); ++i)
      if (!runs_library(kernels[i], config_of(kernels, r.configs, i))) generated.push_back(i);
    int units = cuda_shard_count(generated.size(), o.archs.size(), nvrtc_jobs);
    for (const std::vector<size_t>& group : shard_kernels(kernels, generated, units)) {
      std::vector<KernelConfig> configs;
      for (size_t i : group)
        configs.push_back(r.configs[i]);
      sources.shards.push_back(emit_cuda(kernels_of(kernels, group), configs));
      if (sources.shards.size() == 1) sources.shards.back() += emitc::module_helpers(kernels, emitc::Target::Cuda);
    }
    auto binaries = compile_cuda(sources, o.archs, o.ptx, nvrtc_jobs);
    t.nvrtc = ms_since(begin);
    return binaries;
  });
  if (o.host) {
    auto begin = Clock::now();
    try {
      std::vector<std::string> host_shards;
      std::vector<size_t> every(kernels.size());
      std::iota(every.begin(), every.end(), size_t{0});
      for (const std::vector<size_t>& group : shard_kernels(kernels, every, host_jobs)) {
        host_shards.push_back(emit_host(kernels_of(kernels, group)));
        if (host_shards.size() == 1) host_shards.back() += emitc::module_helpers(kernels, emitc::Target::Host);
      }
      r.host_library = build_host_library(r.host_source, host_shards, host_jobs);
    } catch (...) {
      nvrtc.wait();
      throw;
    }
    t.host = ms_since(begin);
  }
  r.binaries = nvrtc.get();
}

// Why each fallback step runs on the host: a graph break explain reports, or
// a node no generated kernel computes.
std::vector<FallbackReason> fallback_reasons(const Graph& g, const Schedule& schedule, const Breaks& breaks,
                                             int& graph_breaks) {
  std::vector<FallbackReason> reasons;
  std::unordered_map<std::string, const Node*> nodes;
  for (const auto& n : g.nodes()) nodes.emplace(n->name(), n.get());
  for (const Step& s : schedule.steps) {
    if (s.kind != Step::Kind::Fallback) continue;
    const Node* n = nodes.at(s.node);
    auto it = breaks.find(s.node);
    if (it != breaks.end()) {
      ++graph_breaks;
      reasons.push_back({s.node, n->op_type(), it->second.reason, it->second.message});
    } else {
      std::string message = "no generated kernel computes " + n->op_type();
      if (std::string why = kernel_refusal(*n); !why.empty()) message += ": " + why;
      reasons.push_back({s.node, n->op_type(), "no_kernel", message});
    }
  }
  return reasons;
}

}  // namespace

CompileResult compile(const CompileRequest& req) {
  const CompileOptions& o = req.options;
  CompileResult r;
  r.model_file = req.model;
  r.reference = req.train.train ? req.train.emit_onnx : req.model;
  r.options = o;
  r.mode = &find_mode(o.mode);
  r.device = &find_device(o.device);
  bool autotunes = mode_autotunes(*r.mode);
  if (!autotunes && (!req.cache.empty() || !req.device_name.empty()))
    throw InputError("tcc compile: --cache and --device-name apply to modes that autotune (max-autotune, "
                     "max-autotune-no-cudagraphs), not to --mode " + r.mode->name);
  check_disabled_passes(req.disabled_passes);
  CompileTimings& t = r.timings;
  auto after = [&](const char* stage) {
    if (req.print_after) req.print_after(stage, r);
  };
  auto start = Clock::now();

  auto stage = Clock::now();
  std::future<void> emitted;
  r.model = load(req, r, emitted);
  t.load = ms_since(stage);
  after("load");

  stage = Clock::now();
  Breaks breaks = analyze(*r.model, r);
  t.shapes = ms_since(stage);
  after("shapes");

  stage = Clock::now();
  r.save_all = r.activations && r.activations->save_all_peak < r.activations->min_cut_peak;
  std::vector<std::pair<std::string, Type>> structured;  // the outputs flatten_outputs flattens
  for (const Value* v : r.model->graph->outputs())
    if (v->type().kind() == Type::Kind::Sequence || v->type().kind() == Type::Kind::Optional)
      structured.emplace_back(v->name(), v->type());
  r.passes = run_passes(*r.model, req, *r.mode, r.save_all);
  std::vector<std::string> output_names;
  for (const Value* v : r.model->graph->outputs()) output_names.push_back(v->name());
  for (const auto& [name, type] : structured) r.structured_outputs.push_back(structured_output(name, type, output_names));
  t.passes = ms_since(stage);
  after("passes");
  const Graph& g = *r.model->graph;
  r.sizes = hinted_sizes(g, o.shape_hints, 1, "--shape-hint", r.signature->facts);

  stage = Clock::now();
  r.schedule = build_schedule(g, *r.device, req.after_kernel_pass, o.precision);
  if (req.time_passes) std::cerr << timing_table(r.schedule.kernel_passes);
  t.schedule = ms_since(stage);
  after("schedule");

  stage = Clock::now();
  r.memory = plan_memory(g, r.schedule);
  t.memory = ms_since(stage);
  after("memory");

  // Every kernel's config, for the target device: measured or cached in modes
  // that autotune, else the schedule's defaults.
  if (autotunes) {
    r.autotune.emplace();
    std::map<std::string, int64_t> tuned_at =
        hinted_sizes(g, o.shape_hints, kUnhintedRunSize, "--shape-hint", r.signature->facts);
    r.configs = compile_autotune(r.schedule.kernels, tuned_at, *r.device, req.cache, req.device_name,
                                 req.tune_budget_s, *r.autotune);
    after("autotune");
  } else {
    r.configs = scheduled_configs(r.schedule.kernels);
  }

  stage = Clock::now();
  r.cuda_source = emit_cuda(r.schedule.kernels, r.configs);
  if (o.host) r.host_source = emit_host(r.schedule.kernels);
  r.cuda_source += emitc::module_helpers(r.schedule.kernels, emitc::Target::Cuda);
  if (o.host) r.host_source += emitc::module_helpers(r.schedule.kernels, emitc::Target::Host);
  t.emit = ms_since(stage);
  after("emit");

  build(req, r);
  r.fallbacks = fallback_reasons(g, r.schedule, breaks, r.graph_breaks);
  t.total = ms_since(start);
  after("build");

  if (!req.output.empty()) {
    write_module(r, req.output);
    after("write");
  }
  // The ONNX write ran beside everything since the load; what is left of it is waited for here.
  auto written = Clock::now();
  emitted.get();
  r.emit_onnx_wait = ms_since(written);
  return r;
}

void write_module(CompileResult& r, const std::string& dir) {
  auto start = Clock::now();
  ModuleContents m;
  m.model = r.model_file;
  m.reference = r.reference;
  m.options = r.options;
  m.mode = r.mode;
  m.device = r.device;
  m.graph = r.model->graph.get();
  m.structured_inputs = r.structured_inputs;
  m.structured_outputs = r.structured_outputs;
  m.guards = &*r.guards;
  m.schedule = &r.schedule;
  m.memory = &r.memory;
  m.passes = r.passes;
  m.fallbacks = r.fallbacks;
  m.configs = r.configs;
  m.autotune = r.autotune;
  m.cuda_source = r.cuda_source;
  m.binaries = r.binaries;
  m.host_source = r.host_source;
  m.host_library = r.host_library;
  m.timings = r.timings;
  write_module_dir(dir, m);
  r.timings.write = ms_since(start);
  r.timings.total += r.timings.write;
}

}  // namespace tcc
