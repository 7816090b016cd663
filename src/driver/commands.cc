#include "src/driver/commands.h"

#include <fstream>
#include <iostream>

#include "src/compiler/structured_io.h"
#include "src/ir/sym.h"

namespace tcc {

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> commands = {
      {"explain", "Report graph breaks, guard sets and recompilations (CI gates)", setup_explain},
      {"compile", "Compile a model into a loadable CUDA module", setup_compile},
      {"opt", "Run optimization passes and print the IR between them", setup_opt},
      {"kir", "Read kernel IR (or lower a model's), run kernel-IR passes, print it or emit CUDA / host C++", setup_kir},
      {"run", "Execute a model on the GPU (--host: the module on the CPU; --reference: the interpreter)", setup_run},
      {"bench", "Benchmark a model on the GPU across modes", setup_bench},
      {"profile", "Profile a model on the GPU with CUPTI and write a report", setup_profile},
      {"autotune", "Benchmark candidate kernels on the GPU and fill the tuning cache", setup_autotune},
      {"ops", "List the ops tcc knows: opsets, interpreter, GPU path, gradient", setup_ops},
  };
  return commands;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!(f << text)) throw InputError(path + ": cannot write the output file");
}

void add_precision_option(CLI::App& cmd, std::string& precision) {
  std::vector<std::string> names;
  for (Precision p : kPrecisions) names.emplace_back(precision_name(p));
  cmd.add_option("--precision", precision,
                 "Arithmetic of the compiled model: fp32 (exact), tf32 (tensor cores for f32 GEMMs, "
                 "convolutions and attention), fp16 or bf16 (products in that dtype with f32 accumulation, by torch.autocast's "
                 "rules; inputs and outputs keep their dtypes)")
      ->capture_default_str()
      ->check(CLI::IsMember(names));
}

Precision precision_of(const std::string& name) {
  std::optional<Precision> p = parse_precision(name);
  if (!p) throw InputError("--precision must be fp32, tf32, fp16 or bf16, not '" + name + "'");
  return *p;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string::npos) end = s.size();
    parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::map<std::string, int64_t> parse_sizes(const std::string& spec, const std::string& flag) {
  std::map<std::string, int64_t> sizes;
  if (spec.empty()) return sizes;
  for (const std::string& part : split(spec, ',')) {
    size_t eq = part.find('=');
    std::string name = part.substr(0, eq);
    int64_t value = 0;
    bool ok = eq != std::string::npos && is_symbol_name(name);
    if (ok) {
      try {
        size_t used = 0;
        value = std::stoll(part.substr(eq + 1), &used);
        ok = used == part.size() - eq - 1 && value >= 0;
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok) throw InputError(flag + ": expected SYMBOL=SIZE[,SYMBOL=SIZE...], got '" + part + "'");
    sizes[name] = value;
  }
  return sizes;
}

void add_specialize_option(CLI::App& cmd, std::vector<std::string>& specs, bool takes_inputs) {
  std::string help =
      "Compile for these values of an input that decides shapes or a kernel's constants "
      "(a Reduce's axes, a Reshape's shape, a Resize's sizes or scales), once per input: axes=0,2 or "
      "scales=1,1,0.5,0.5; the module guards them and refuses a call with others";
  if (takes_inputs) help += " (random inputs hold these values; the files --inputs gives must hold them too)";
  cmd.add_option("--specialize", specs, help)->allow_extra_args(false);
}

void parse_specializations(const std::vector<std::string>& specs, CompileOptions& options) {
  for (const std::string& spec : specs) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq);
    auto fail = [&] {
      throw InputError("--specialize: expected INPUT=VALUE[,VALUE...] (numbers), got '" + spec + "'");
    };
    if (eq == std::string::npos || name.empty()) fail();
    if (options.specialize.count(name)) throw InputError("--specialize: input '" + name + "' is given twice");
    std::vector<double>& values = options.specialize[name];
    const std::string list = spec.substr(eq + 1);
    for (const std::string& v : list.empty() ? std::vector<std::string>{} : split(list, ',')) {
      try {
        size_t used = 0;
        values.push_back(std::stod(v, &used));
        if (used != v.size()) fail();
      } catch (const std::logic_error&) {
        fail();
      }
    }
  }
}

void parse_shape_hints(const std::string& spec, CompileOptions& options) {
  std::string sizes;
  for (const std::string& part : spec.empty() ? std::vector<std::string>{} : split(spec, ',')) {
    size_t eq = part.find('=');
    if (eq == std::string::npos || !parse_structure_hint(part.substr(0, eq), part.substr(eq + 1), options))
      sizes += (sizes.empty() ? "" : ",") + part;
  }
  options.shape_hints = parse_sizes(sizes, "--shape-hint");
}

}  // namespace tcc
