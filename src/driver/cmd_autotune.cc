// `tcc autotune`: compiles a model up to its schedule, then chooses a
// configuration for every unique kernel: measured on the GPU when there is
// one (and written to the tuning cache), else from the cache, else by the
// emitter's heuristics, printing a table per kernel (src/autotune/table.h).
// `--import` / `--export` move cache entries between machines.
#include <iostream>

#include "codegen/module_writer.h"
#include "codegen/profiles.h"
#include "codegen/schedule.h"
#include "frontends/load_model.h"
#include "passes/pass_manager.h"
#include "src/autotune/compile_autotune.h"
#include "src/autotune/progress.h"
#include "src/autotune/table.h"
#include "src/autotune/tune.h"
#include "src/autotune/tuning_cache.h"
#include "src/driver/commands.h"
#include "src/shape/shape_inference.h"

namespace tcc {

namespace {

struct AutotuneCli {
  std::string model;
  std::string cache;
  std::string mode = "max-autotune";
  std::string device_name;
  std::string shape_hints;
  std::string precision = "fp32";
  std::string import_file;
  std::string export_file;
  bool no_refine = false;
  double budget_s = autotune::kDefaultTuneBudgetSeconds;
};

// A cache the user names for --import or --export must be one.
autotune::LoadedCache read_cache_file(const std::string& path, const std::string& flag) {
  autotune::LoadedCache c = autotune::load_cache(path);
  using Status = autotune::LoadedCache::Status;
  if (c.status == Status::Missing) throw InputError(flag + " " + path + ": no such file");
  if (c.status != Status::Ok) throw InputError(flag + " " + c.warnings.front());
  autotune::print_warnings("autotune", c.warnings);
  return c;
}

ExitCode import_export(const AutotuneCli& c) {
  if (!c.import_file.empty()) {
    autotune::LoadedCache in = read_cache_file(c.import_file, "--import");
    autotune::print_warnings("autotune", autotune::add_to_cache(c.cache, in.entries));
    std::cout << "tcc autotune: imported " << in.entries.size() << " entries from " << c.import_file << " into "
              << c.cache;
    if (!in.warnings.empty()) std::cout << " (" << in.warnings.size() << " invalid entries skipped)";
    std::cout << "\n";
  }
  if (!c.export_file.empty()) {
    autotune::LoadedCache cache = read_cache_file(c.cache, "--cache");
    autotune::write_cache(c.export_file, cache.entries);
    std::cout << "tcc autotune: exported " << cache.entries.size() << " entries from " << c.cache << " to "
              << c.export_file << "\n";
  }
  return ExitCode::Ok;
}

ExitCode run_autotune(AutotuneCli& c) {
  if (c.cache.empty()) throw InputError("tcc autotune: --cache FILE is required (the tuning cache to read and fill)");
  bool moves = !c.import_file.empty() || !c.export_file.empty();
  if (moves && !c.model.empty())
    throw InputError("tcc autotune: --import and --export work on the cache alone; give them without a MODEL");
  if (moves) return import_export(c);
  if (c.model.empty()) throw InputError("tcc autotune: a MODEL is required (or --import FILE / --export FILE)");
  const CompileMode& mode = find_mode(c.mode);
  if (!mode_autotunes(mode))
    throw InputError("tcc autotune: --mode " + c.mode + " does not autotune (use max-autotune or "
                     "max-autotune-no-cudagraphs)");
  std::map<std::string, int64_t> hints = parse_sizes(c.shape_hints, "--shape-hint");

  auto model = load_model(c.model);
  std::map<std::string, int64_t> sizes = hinted_sizes(*model->graph, hints, kUnhintedRunSize);
  infer_shapes(*model->graph);
  PassManagerOptions pass_options;
  pass_options.precision = precision_of(c.precision);
  PassManager pm(build_pipeline("", Phase::Fuse), pass_options, std::cerr);
  pm.run(*model);
  Schedule schedule = build_schedule(*model->graph, default_device(), {}, pass_options.precision);
  std::vector<int> steps(schedule.kernels.size(), 0);
  for (const Step& s : schedule.steps)
    if (s.kind == Step::Kind::Kernel) ++steps.at(s.kernel);

  autotune::LoadedCache cache = autotune::load_cache(c.cache);
  autotune::print_warnings("autotune", cache.warnings);
  std::string no_gpu;
  std::optional<autotune::Measurer> gpu = autotune::gpu_measurer(no_gpu);
  autotune::TuneOptions options;
  options.cache = &cache.entries;
  options.device_name = c.device_name;
  options.measurer = gpu ? &*gpu : nullptr;
  options.measure_cached = true;
  options.refine = !c.no_refine;
  options.budget_s = c.budget_s;
  autotune::ProgressBar bar = autotune::ProgressBar::for_stderr("kernels");
  if (gpu) options.progress = [&](size_t done, size_t total) { bar.update(done, total); };
  autotune::TuneResult r = autotune::tune_kernels(schedule.kernels, sizes, options);
  bar.finish();

  if (!gpu)
    std::cout << "tcc autotune: no GPU present (" << no_gpu << "): configurations chosen by heuristics and from the "
              << "cache (" << r.device_note << "); nothing measured, nothing written to " << c.cache << "\n";
  else
    std::cout << "tcc autotune: " << r.device_note << autotune::budget_summary(r, c.budget_s) << "\n";
  std::cout << autotune::tuning_table(schedule.kernels, r, steps);
  if (!r.measured.empty()) {
    autotune::print_warnings("autotune", autotune::add_to_cache(c.cache, r.measured));
    std::cout << "tcc autotune: wrote " << r.measured.size() << " entries to " << c.cache << "\n";
  }
  return ExitCode::Ok;
}

}  // namespace

CommandRunner setup_autotune(CLI::App& cmd) {
  auto c = std::make_shared<AutotuneCli>();
  std::string modes;
  for (const CompileMode& m : all_modes())
    if (mode_autotunes(m)) modes += (modes.empty() ? "" : ", ") + m.name;
  cmd.add_option("model", c->model, "ONNX model, .pt2 archive or tcc text IR whose kernels to tune");
  cmd.add_option("--cache", c->cache, "Tuning cache file to read and fill (created when missing)");
  cmd.add_option("--mode", c->mode, "Autotuning mode: " + modes)->capture_default_str();
  cmd.add_option("--device-name", c->device_name,
                 "Without a GPU: use the cache entries of this device (as the driver names it)");
  cmd.add_option("--shape-hint", c->shape_hints, "Sizes of symbolic dims to tune at, e.g. batch=8,seq=128 (default 8)");
  add_precision_option(cmd, c->precision);
  cmd.add_flag("--no-refine", c->no_refine, "Skip the coordinate-descent refinement around the best candidate");
  cmd.add_option("--tune-budget", c->budget_s,
                 "Seconds of measuring, heaviest kernels first; what it leaves keeps its cache entry or default "
                 "(0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--import", c->import_file, "Add the valid entries of this cache file to --cache");
  cmd.add_option("--export", c->export_file, "Write the valid entries of --cache to this file");
  return [c]() { return run_autotune(*c); };
}

}  // namespace tcc
