// `tcc kir FILE --passes=a,b --device=D --emit=ir|cuda|c`: the kernel IR's text-in /
// text-out tool, as `tcc opt` is the graph IR's (--print-ir-after-all,
// --print-ir-after-change and --time-passes write to stderr as there). FILE.kir is kernel IR text
// (docs/KERNEL_IR.md); any other FILE is a model whose kernels are lowered as
// `tcc compile` lowers them at --precision (the way to get kernel IR to start from). The
// kernel-IR tests under tests/kernel_ir/ are written against it.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_ir_tool.h"
#include "codegen/kernel_passes.h"
#include "codegen/schedule.h"
#include "frontends/load_model.h"
#include "frontends/read_file.h"
#include "passes/pass_manager.h"
#include "src/driver/commands.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

struct KirOptions {
  std::string file;
  kir::KernelToolOptions tool;
  std::string output;
  std::string precision = "fp32";
  bool list_passes = false;
};

// The kernels build_schedule makes of a model for `device` at `precision`, through the fuse phase (autocast
// included, as in tcc compile).
std::vector<kir::Kernel> lower_model(const std::string& path, const DeviceProfile& device, Precision precision) {
  auto model = load_model(path);
  infer_shapes(*model->graph);
  std::ostringstream report;
  PassManagerOptions options;
  options.precision = precision;
  PassManager(build_pipeline("", Phase::Fuse), options, report).run(*model);
  return build_schedule(*model->graph, device, {}, precision).kernels;
}

ExitCode run_kir(const KirOptions& o) {
  if (o.list_passes) {
    size_t width = 0;
    for (const kir::KernelPassInfo& p : kir::all_kernel_passes()) width = std::max(width, p.name.size());
    for (const kir::KernelPassInfo& p : kir::all_kernel_passes())
      std::cout << p.name << std::string(width - p.name.size() + 2, ' ') << p.summary << "\n";
    return ExitCode::Ok;
  }
  if (o.file.empty()) throw InputError("tcc kir: a FILE is required (or --list-passes)");
  const DeviceProfile& device = find_device(o.tool.device);
  const Precision precision = precision_of(o.precision);
  std::vector<kir::Kernel> kernels = std::filesystem::path(o.file).extension() == ".kir"
                                         ? kir::parse_kernels(read_file_bytes(o.file, "kernel IR file"), o.file)
                                         : lower_model(o.file, device, precision);
  write_output(o.output, kir::run_kernel_tool(std::move(kernels), o.tool, std::cerr));
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_kir(CLI::App& cmd) {
  auto o = std::make_shared<KirOptions>();
  std::string pass_names;
  for (const kir::KernelPassInfo& p : kir::all_kernel_passes()) pass_names += (pass_names.empty() ? "" : ", ") + p.name;
  cmd.add_option("file", o->file, "Kernel IR (.kir), or a model whose kernels are lowered as tcc compile does");
  cmd.add_option("--passes", o->tool.passes, "Comma-separated kernel-IR passes to run, in order (default: none): " +
                                            pass_names);
  std::string devices;
  for (const DeviceProfile& d : all_devices()) devices += (devices.empty() ? "" : ", ") + d.name;
  cmd.add_option("--device", o->tool.device, "GPU the schedule passes choose for: " + devices)->capture_default_str();
  add_precision_option(cmd, o->precision);
  cmd.add_option("--emit", o->tool.emit, "What to print: ir (kernel IR text), cuda (CUDA C++), c (host C++)");
  cmd.add_flag("--print-ir-after-all", o->tool.print_ir_after_all, "Print each kernel to stderr after every pass");
  cmd.add_flag("--print-ir-after-change", o->tool.print_ir_after_change,
               "Print each kernel to stderr after each pass that changed it");
  cmd.add_flag("--time-passes", o->tool.time_passes, "Print a table of pass times and counters to stderr");
  cmd.add_flag("--list-passes", o->list_passes, "List the kernel-IR passes (name, summary) and exit");
  cmd.add_option("-o,--output", o->output, "Write the output here instead of stdout");
  return [o]() { return run_kir(*o); };
}

}  // namespace tcc
