// `tcc compile MODEL -o OUT`: the flags of the compiler (src/compiler/compile.h)
// and the summary it prints from the result.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "codegen/kernel_ir_text.h"
#include "src/compiler/compile.h"
#include "src/driver/commands.h"
#include "src/driver/run_support.h"
#include "src/driver/train_flags.h"
#include "src/ir/text.h"
#include "src/ops/fusion.h"
#include "src/profiler/gpu_bench.h"
#include "tcc_runtime.h"

namespace tcc {

namespace {

struct CompileCli {
  CompileRequest request;
  std::string archs = "sm_80,sm_90";
  std::string shape_hints;
  std::vector<std::string> specialize;
  std::string precision = "fp32";
  std::vector<std::string> print_after;
  bool no_ptx = false;
  bool no_host = false;
  bool list_modes = false;
};

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

std::string human_bytes(int64_t bytes) {
  char buf[32];
  if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// Where each parameter's update runs: a kernel of update nodes only
// (fuse_multi_tensor merges those of one shape), or the kernel that computes its
// gradient (a reduction over the batch takes the update as its epilogue).
// Update-only steps that write no parameter compute shared scalars (bias
// corrections, decay).
void print_optimizer_steps(const CompileResult& r) {
  const TrainingGraph& training = *r.training;
  std::map<std::string, const Node*> nodes;
  for (const auto& n : r.model->graph->nodes()) nodes.emplace(n->name(), n.get());
  auto update_only = [&](const Step& s) {
    if (s.kind != Step::Kind::Kernel) return false;
    const auto& body = fusion_body(*nodes.at(s.node)).nodes();
    return std::all_of(body.begin(), body.end(), [](const auto& n) { return n->part() == StepPart::Optimizer; });
  };
  std::map<std::string, const Step*> writer;
  for (const Step& s : r.schedule.steps)
    for (const std::string& w : s.writes) writer[w] = &s;
  std::set<const Step*> own, shared, scalar;
  size_t own_params = 0, shared_params = 0;
  for (const std::string& p : training.params) {
    const Step* s = writer.at(p + ".updated");
    if (update_only(*s)) {
      own.insert(s);
      ++own_params;
    } else {
      shared.insert(s);
      ++shared_params;
    }
  }
  for (const Step& s : r.schedule.steps)
    if (update_only(s) && !own.count(&s)) scalar.insert(&s);
  std::cout << "  optimizer: " << training.params.size() << " updates: " << own_params << " in " << own.size()
            << " multi-tensor kernel steps, " << shared_params << " fused into " << shared.size()
            << " gradient steps, " << scalar.size() << " scalar steps\n";
}

void print_summary(const CompileRequest& req, const CompileResult& r) {
  const Schedule& schedule = r.schedule;
  const CompileTimings& t = r.timings;
  size_t kernel_steps = schedule.steps.size() - r.fallbacks.size();
  std::string at;
  for (const auto& [s, v] : r.sizes) at += (at.empty() ? " at " : ", ") + s + "=" + std::to_string(v);
  std::cout << "tcc compile: " << req.model << " -> " << req.output << " (mode " << r.mode->name << ")\n"
            << "  kernels:   " << schedule.kernels.size() << " compiled for " << kernel_steps << " kernel steps ("
            << kernel_steps - std::min(kernel_steps, schedule.kernels.size()) << " reused)\n"
            << "  views:     " << schedule.views.size() << " (reshapes that share their input's buffer: no kernel)\n"
            << "  binding:   " << schedule.binding_steps.size()
            << " nodes computed once per binding of the symbols (masks, positions), kept on the device\n"
            << "  fallbacks: " << r.fallbacks.size() << " nodes on the host (" << r.graph_breaks
            << " from graph breaks, " << r.fallbacks.size() - r.graph_breaks << " with no kernel), "
            << schedule.fallback_copies << " host<->device copies\n"
            << "  arena:     " << human_bytes(evaluate_bytes(r.memory.arena_bytes, r.sizes)) << at << " ("
            << human_bytes(evaluate_bytes(r.memory.unplanned_bytes, r.sizes)) << " unplanned)\n";
  if (req.options.precision != Precision::FP32) {
    std::cout << "  precision: " << precision_name(req.options.precision);
    for (const PassRecord& p : r.passes) {
      if (p.name != "autocast") continue;
      auto count = [&](const char* counter) {
        auto it = p.stats.counters.find(counter);
        return it == p.stats.counters.end() ? int64_t{0} : it->second;
      };
      std::cout << " (autocast: " << count("casts_inserted") << " casts, " << count("constants_converted")
                << " weights converted, " << count("outputs_cast_back") << " outputs cast back)";
    }
    std::cout << "\n";
  }
  if (!req.disabled_passes.empty()) {
    std::cout << "  disabled:  ";
    for (size_t i = 0; i < req.disabled_passes.size(); ++i) std::cout << (i ? ", " : "") << req.disabled_passes[i];
    std::cout << " (--disable-passes)\n";
  }
  if (r.training) {
    const TrainingGraph& training = *r.training;
    std::cout << "  training:  loss '" << training.loss << "', " << training.params.size()
              << " parameters from " << training.params_from << ", optimizer " << req.train.optimizer
              << (training.lr.empty()     ? ""
                  : training.step.empty() ? " (lr is an input)"
                                          : " (lr and step are inputs)")
              << "\n";
    if (!training.lr.empty()) print_optimizer_steps(r);
    std::istringstream lines(describe_saved_activations(*r.activations));
    for (std::string line; std::getline(lines, line);) std::cout << "  " << line << "\n";
    std::cout << "  compiled:  the " << (r.save_all ? "save-all" : "min-cut") << " choice\n";
  }
  char line[240];
  std::snprintf(line, sizeof line, "  time:      %.2f s (load %.2f, passes %.2f, lowering %.2f, NVRTC %.2f",
                (t.total + r.emit_onnx_wait) / 1e3, t.load / 1e3, t.passes / 1e3,
                (t.schedule + t.memory + t.emit) / 1e3, t.nvrtc / 1e3);
  std::cout << line;
  if (req.options.host) {
    std::snprintf(line, sizeof line, " || host compiler %.2f", t.host / 1e3);
    std::cout << line;
  }
  std::snprintf(line, sizeof line, ", write %.2f", t.write / 1e3);
  std::cout << line;
  if (!req.train.emit_onnx.empty()) {
    std::snprintf(line, sizeof line, ", then --emit-onnx %.2f", r.emit_onnx_wait / 1e3);
    std::cout << line;
  }
  std::cout << ")\n";
  if (r.autotune)
    std::cout << "  autotune:  " << r.autotune->measured << " kernels measured, " << r.autotune->from_cache
              << " from the cache, " << r.autotune->heuristic << " by heuristics (" << r.autotune->note << ")\n";
  // Grouped by op and reason, so twelve identical layers make one line; report.md lists every node.
  std::map<std::pair<std::string, std::string>, std::vector<const FallbackReason*>> groups;
  for (const FallbackReason& f : r.fallbacks) groups[{f.reason, f.op_type}].push_back(&f);
  for (const auto& [key, rs] : groups) {
    std::cout << "  fallback [" << key.first << "] " << key.second << " x" << rs.size() << ": " << rs[0]->message
              << " (";
    for (size_t i = 0; i < rs.size() && i < 3; ++i) std::cout << (i ? ", " : "") << rs[i]->node;
    if (rs.size() > 3) std::cout << ", +" << rs.size() - 3 << " more";
    std::cout << ")\n";
  }
}

ExitCode run_compile(CompileCli& c) {
  if (c.list_modes) {
    std::cout << modes_table();
    return ExitCode::Ok;
  }
  CompileRequest& req = c.request;
  if (req.model.empty()) throw InputError("tcc compile: a MODEL is required (or --list-modes)");
  if (req.output.empty()) throw InputError("tcc compile: -o OUT is required (the module directory to write)");
  // Flags are checked before the model is read so a typo fails fast.
  req.options.archs = parse_archs(c.archs);
  req.options.ptx = !c.no_ptx;
  req.options.host = !c.no_host;
  parse_shape_hints(c.shape_hints, req.options);
  parse_specializations(c.specialize, req.options);
  req.options.precision = precision_of(c.precision);
  // --print-after names compile stages, graph passes and kernel-IR passes.
  std::set<std::string> dump, graph_passes, kernel_passes;
  for (const std::string& name : c.print_after) {
    if (std::find_if(kCompileStages.begin(), kCompileStages.end(), [&](const char* s) { return name == s; }) !=
        kCompileStages.end()) {
      dump.insert(name);
    } else if (find_pass(name)) {
      graph_passes.insert(name);
    } else if (kir::find_kernel_pass(name)) {
      kernel_passes.insert(name);
    } else {
      std::string stages;
      for (const char* s : kCompileStages) stages += (stages.empty() ? "" : ", ") + std::string(s);
      throw InputError("--print-after: unknown stage or pass '" + name + "' (stages: " + stages +
                       "; graph passes: " + known_passes() + "; kernel-IR passes: " + kir::known_kernel_passes() +
                       ")");
    }
  }
  if (!graph_passes.empty())
    req.after_graph_pass = [graph_passes](const PassInfo& pass, const Model& m) {
      if (graph_passes.count(std::string(pass.name)))
        std::cerr << "// ----- IR after graph pass " << pass.name << " -----\n" << print_graph(*m.graph);
    };
  if (!kernel_passes.empty())
    req.after_kernel_pass = [kernel_passes](const kir::KernelPassInfo& pass, const kir::Kernel& k, bool) {
      if (kernel_passes.count(pass.name))
        std::cerr << "// ----- kernel IR of " << k.name << " after kernel-IR pass " << pass.name << " -----\n"
                  << kir::print_kernel(k);
    };
  if (!dump.empty())
    req.print_after = [dump](const std::string& stage, const CompileResult& r) {
      if (!dump.count(stage)) return;
      std::cerr << "// ----- IR after compile stage " << stage << " -----\n" << print_graph(*r.model->graph);
      if (!r.schedule.kernels.empty())
        std::cerr << "// ----- kernel IR after compile stage " << stage << " -----\n"
                  << kir::print_kernels(r.schedule.kernels);
    };
  print_summary(req, compile(req));
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_compile(CLI::App& cmd) {
  auto c = std::make_shared<CompileCli>();
  std::string modes, devices;
  for (const CompileMode& m : all_modes()) modes += (modes.empty() ? "" : ", ") + m.name;
  for (const DeviceProfile& d : all_devices()) devices += (devices.empty() ? "" : ", ") + d.name;
  CompileRequest& req = c->request;
  cmd.add_option("model", req.model, "ONNX model, .pt2 archive or tcc text IR");
  cmd.add_option("-o,--output", req.output, "Module directory to write (created; a previous module there is replaced)");
  cmd.add_option("--mode", req.options.mode, "Compile mode: " + modes)->capture_default_str();
  cmd.add_option("--arch", c->archs, "Comma-separated cubin architectures (native: this machine's GPU)")
      ->capture_default_str();
  cmd.add_flag("--no-ptx", c->no_ptx, "Do not add PTX for the newest architecture");
  cmd.add_flag("--no-host", c->no_host,
               "Do not build the kernels' CPU versions (host.so): a module that runs on a GPU only, compiled sooner");
  cmd.add_option("--jobs", req.jobs,
                 "Threads for NVRTC and the host compiler, which compile the kernels in shards when there are "
                 "threads to spare (default: hardware threads)");
  cmd.add_option("--shape-hint", c->shape_hints,
                 "Sizes of symbolic dims for the report (default 1) and for max-autotune's measurements (default 8), "
                 "e.g. batch=8,seq=128; and what a sequence or optional input is compiled for: xs=seq(3) (a "
                 "sequence of 3 tensors, module inputs xs.0, xs.1, xs.2; xs.1=[4x3] shapes one, [] a scalar), opt=present "
                 "or opt=absent (an optional)");
  add_specialize_option(cmd, c->specialize, false);
  cmd.add_option("--device", req.options.device,
                 "Target device profile (its SM count sizes split reductions, its peak rates the report's "
                 "estimates): " + devices)
      ->capture_default_str();
  cmd.add_flag("--time-passes", req.time_passes, "Print a table of pass times and counters to stderr");
  cmd.add_option("--cache", req.cache, "Tuning cache to take kernel configurations from (modes that autotune; "
                                     "see tcc autotune)");
  cmd.add_option("--device-name", req.device_name,
                 "Without a GPU: use the tuning cache entries of this device (as the driver names it)");
  cmd.add_option("--tune-budget", req.tune_budget_s,
                 "Seconds of measuring the tuning may take, heaviest kernels first (modes that autotune; 0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_flag("--list-modes", c->list_modes, "List the compile modes and what each turns on, and exit");
  cmd.add_option("--print-after", c->print_after,
                 "Print the main graph as text IR, and from `schedule` on its kernels as kernel IR, to stderr after "
                 "these compile stages (repeatable): load, shapes, passes, schedule, memory, autotune, emit, build, "
                 "write; or the main graph after these graph passes (tcc opt --list-passes), or each kernel after "
                 "these kernel-IR passes (tcc kir --list-passes)")
      ->delimiter(',');
  cmd.add_option("--disable-passes", req.disabled_passes,
                 "Leave these graph passes out (comma-separated; tcc opt --list-passes names them), to measure what "
                 "one buys, e.g. fuse_attention")
      ->delimiter(',');
  add_precision_option(cmd, c->precision);
  add_train_flags(cmd, req.train);
  return [c]() { return run_compile(*c); };
}

}  // namespace tcc
