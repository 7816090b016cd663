// The module directory's manifest, binaries, weights and fallback nodes; the
// reports are module_report.cc's.
#include "codegen/module_writer.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "codegen/module_facts.h"
#include "codegen/module_report.h"
#include "src/analysis/trace.h"
#include "src/diag/errors.h"
#include "src/ir/tensor.h"
#include "src/ir/text.h"
#include "src/module/manifest_records.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

// A graph value the module names: its type is fully known once the compile
// pipeline has inferred shapes.
TensorSig value_sig(const Value& v) {
  TensorSig sig{v.name(), v.type().dtype(), {}};
  TCC_CHECK(v.type().has_rank()) << "module value " << v.name() << " has no rank";
  for (const Dim& d : v.type().shape()) {
    TCC_CHECK(!d.is_unknown()) << "module value " << v.name() << " has an unknown dim";
    sig.shape.push_back(d.expr());
  }
  return sig;
}

ojson kernel_json(const ModuleContents& m, size_t index) {
  const kir::Kernel& k = m.schedule->kernels[index];
  KernelConfig config = config_of(m.schedule->kernels, m.configs, index);
  ojson j = {{"name", k.name}, {"kind", kir::kind_name(k.kind)}};
  if (k.kind == kir::Kind::Gemm) {
    if (runs_library(k, config)) j["library"] = "cublasLt";
    else j["template"] = gemm_template_text(config);
  }
  if (k.kind == kir::Kind::Conv) j["library"] = "cudnn";
  j["schedule"] = schedule_text(k, config);
  j["nodes"] = k.nodes;
  ojson bufs = ojson::array();
  for (const kir::Buffer& b : k.buffers) bufs.push_back(param_json({b.dtype, b.shape, b.output}));
  j["buffers"] = bufs;
  j["sizes"] = k.size_params;
  if (k.kind == kir::Kind::Gemm) j["gemm"] = gemm_json(*k.gemm, config.algo);
  if (k.kind == kir::Kind::Conv) j["conv"] = conv_json(*k.conv, config.algo);
  if (!runs_library(k, config)) j["launch"] = launch_json(launch_config(k, config));
  if (m.autotune) {
    ojson t = {{"source", m.autotune->sources.at(index)}};
    if (k.kind == kir::Kind::Gemm)
      t["config"] = {{"algo", config.algo}, {"tile", config.tile}, {"split", config.split}};
    else if (k.kind == kir::Kind::Conv)
      t["config"] = {{"algo", config.algo}};
    else if (k.kind == kir::Kind::Attention)
      t["config"] = {{"block", config.block}, {"lanes_per_row", config.lanes_per_row}, {"mma", config.mma}};
    else
      t["config"] = {{"block", config.block},
                     {"vector_width", config.vector_width},
                     {"rows_per_block", config.rows_per_block},
                     {"split", config.split},
                     {"columns", config.columns},
                     {"row_cache", config.row_cache},
                     {"tiled", config.tiled}};
    j["autotune"] = t;
  }
  j["bytes_moved"] = size_json(kir::bytes_moved(k));
  j["flop"] = size_json(kir::flop_count(k));
  return j;
}

// Whether a call draws random values (docs/MODULE.md, "Random ops"): a kernel
// reads the random offset or a fallback step runs a random op.
bool module_draws_random(const ModuleContents& m) {
  const std::vector<kir::Kernel>& kernels = m.schedule->kernels;
  if (std::any_of(kernels.begin(), kernels.end(), [](const kir::Kernel& k) { return kir::draws_random(k); }))
    return true;
  std::set<std::string> fallbacks;
  for (const Step& s : m.schedule->steps)
    if (s.kind == Step::Kind::Fallback) fallbacks.insert(s.node);
  for (const auto& n : m.graph->nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (fallbacks.count(n->name()) && def && def->has(kRandom)) return true;
  }
  return false;
}

// The guard on an input compiled for its values (--specialize): the values as
// the input's dtype holds them (0.6 as the f32 nearest it), integers written
// as integers.
ojson specialized_guard_json(const Graph& g, const std::string& input, const std::vector<double>& values) {
  auto it = std::find_if(g.inputs().begin(), g.inputs().end(), [&](const Value* v) { return v->name() == input; });
  TCC_CHECK(it != g.inputs().end()) << "specialized input '" << input << "' is not a graph input";
  Tensor held((*it)->type().dtype(), {static_cast<int64_t>(values.size())});
  ojson list = ojson::array();
  std::string expr;
  for (size_t i = 0; i < values.size(); ++i) {
    held.set_f64(static_cast<int64_t>(i), values[i]);
    double v = held.get_f64(static_cast<int64_t>(i));
    bool integral = !is_float(held.dtype());
    list.push_back(integral ? ojson(static_cast<int64_t>(v)) : ojson(v));
    expr += (i == 0 ? "" : ", ") + (integral ? std::to_string(static_cast<int64_t>(v)) : format_float(v));
  }
  return {{"kind", "EQUALS_MATCH"}, {"input", input}, {"expr", input + " == [" + expr + "]"}, {"values", list}};
}

ojson manifest_json(const ModuleContents& m, const ModuleFacts& f, const std::string& dir) {
  const Graph& g = *m.graph;
  ojson j;
  j["format"] = kModuleFormat;
  j["format_version"] = kModuleFormatVersion;
  j["tcc_version"] = TCC_VERSION;
  j["model"] = fs::path(m.model).filename().string();
  if (!m.reference.empty()) {
    std::error_code ec;
    fs::path rel = fs::relative(fs::absolute(m.reference), fs::absolute(dir), ec);
    if (!ec && !rel.empty()) j["model_path"] = rel.generic_string();
  }
  j["mode"] = m.mode->name;
  j["precision"] = precision_name(m.options.precision);
  j["options"] = {{"arch", m.options.archs}, {"ptx", m.options.ptx}, {"host", m.options.host}};
  j["random"] = module_draws_random(m);
  ojson features = ojson::array();
  for (const Feature* feat : m.mode->features) {
    ojson e = {{"name", feat->name}, {"status", feat->built ? "built" : "unbuilt"}};
    if (!feat->built) e["why"] = feat->why;
    if (feat->built && m.autotune && feat->name == kAutotuneFeature) {
      const AutotuneSummary& a = *m.autotune;
      e["kernels"] = {{"measured", a.measured}, {"cache", a.from_cache}, {"heuristic", a.heuristic}};
      e["note"] = a.note;
    }
    features.push_back(e);
  }
  j["features"] = features;
  ojson inputs = ojson::array(), outputs = ojson::array();
  for (const Value* v : g.inputs()) inputs.push_back(tensor_json(value_sig(*v)));
  for (const Value* v : g.outputs()) outputs.push_back(tensor_json(value_sig(*v)));
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  for (const auto& [key, values] : {std::pair{"structured_inputs", &m.structured_inputs},
                                    std::pair{"structured_outputs", &m.structured_outputs}}) {
    if (values->empty()) continue;
    ojson list = ojson::array();
    for (const StructuredValue& v : *values) list.push_back(structured_json(v));
    j[key] = list;
  }
  ojson symbols = ojson::object();
  for (const auto& [name, where] : f.symbols) {
    symbols[name] = {{"input", where.input}, {"axis", where.axis}};
    if (where.scale != 1) symbols[name]["scale"] = where.scale;
  }
  for (const auto& [name, where] : f.value_symbols) symbols[name] = {{"value", where.first}, {"axis", where.second}};
  j["symbols"] = symbols;
  // The guard set is explain's JSON; re-parsed so its objects keep their (sorted) key order. Then
  // an input compiled for its values (--specialize) is guarded by them.
  j["guards"] = ojson::parse(m.guards->to_json().dump());
  for (const auto& [input, values] : m.options.specialize) j["guards"].push_back(specialized_guard_json(g, input, values));

  ojson tensors = ojson::array();
  for (size_t i = 0; i < f.weights.size(); ++i) {
    const auto& [v, data] = f.weights[i];
    TensorSig sig{v->name(), data.dtype(), {}};
    for (int64_t d : data.shape()) sig.shape.push_back(SymExpr::constant(d));
    tensors.push_back(placed_json({std::move(sig), SymExpr::constant(f.weight_offsets[i]),
                                   SymExpr::constant(static_cast<int64_t>(data.nbytes()))}));
  }
  j["weights"] = {{"file", kWeightsFile}, {"tensors", tensors}};

  ojson buffers = ojson::array();
  for (const PlannedBuffer& b : m.memory->buffers) buffers.push_back(placed_json({{b.value, b.dtype, b.shape}, b.offset, b.nbytes}));
  j["memory"] = {{"arena_bytes", size_json(m.memory->arena_bytes)},
                 {"unplanned_bytes", size_json(m.memory->unplanned_bytes)},
                 {"buffers", buffers}};

  ojson binaries = ojson::array();
  for (const CudaBinary& b : m.binaries) binaries.push_back({{"arch", b.arch}, {"file", b.file}});
  j["cuda"] = {{"source", kCudaSourceFile}, {"binaries", binaries}};
  if (m.options.host) j["host"] = {{"source", kHostSourceFile}, {"library", kHostLibraryFile}};

  ojson kernels = ojson::array();
  for (size_t k = 0; k < m.schedule->kernels.size(); ++k) kernels.push_back(kernel_json(m, k));
  j["kernels"] = kernels;
  auto step_json = [](const Step& s) {
    ojson e;
    if (s.kind == Step::Kind::Kernel) {
      e["kernel"] = s.kernel;
      e["node"] = s.node;
    } else {
      e["fallback"] = s.node;
    }
    e["reads"] = s.reads;
    e["writes"] = s.writes;
    return e;
  };
  if (!m.schedule->binding_steps.empty()) {
    ojson values = ojson::array(), steps = ojson::array();
    for (const Step& s : m.schedule->binding_steps) {
      steps.push_back(step_json(s));
      for (const std::string& name : s.writes) values.push_back(tensor_json(value_sig(*g.find(name))));
    }
    j["binding_constants"] = {{"values", values}, {"steps", steps}};
  }
  ojson steps = ojson::array();
  for (const Step& s : m.schedule->steps) steps.push_back(step_json(s));
  j["schedule"] = steps;
  j["fallback_copies"] = m.schedule->fallback_copies;
  return j;
}

// Streamed tensor by tensor: a GPT-2-sized model has hundreds of MB of weights.
void write_weights(const std::string& dir, const ModuleFacts& f) {
  std::string path = (fs::path(dir) / kWeightsFile).string();
  std::ofstream out(path, std::ios::binary);
  static const char zeros[kWeightAlignment] = {};
  int64_t at = 0;
  for (size_t i = 0; i < f.weights.size() && out; ++i) {
    out.write(zeros, f.weight_offsets[i] - at);
    const Tensor& t = f.weights[i].second;
    if (t.nbytes()) out.write(reinterpret_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
    at = f.weight_offsets[i] + static_cast<int64_t>(t.nbytes());
  }
  out.write(zeros, f.weights_bytes - at);
  if (!out.flush()) throw InputError(path + ": cannot write");
}

// The fallback nodes as a model of their own: every value they read that no
// earlier fallback node defines is a graph input (the runtime binds it from
// the schedule), and what they write are its outputs.
std::string fallback_tir(const ModuleContents& m) {
  const Graph& g = *m.graph;
  std::set<std::string> fallback_nodes;
  for (const Step& s : m.schedule->binding_steps) fallback_nodes.insert(s.node);
  for (const Step& s : m.schedule->steps)
    if (s.kind == Step::Kind::Fallback) fallback_nodes.insert(s.node);
  Model out;
  Graph& fg = *out.graph;
  fg.set_name("fallback");
  for (const auto& [domain, version] : g.opsets()) fg.set_opset(domain, version);
  std::unordered_map<const Value*, Value*> mapped;
  auto value_of = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = mapped.find(v);
    if (it != mapped.end()) return it->second;
    Value* in = fg.add_input(v->name(), v->type());
    mapped.emplace(v, in);
    return in;
  };
  for (const auto& n : g.nodes()) {
    if (!fallback_nodes.count(n->name())) continue;
    std::vector<Value*> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(value_of(v));
    for (const Value* v : n->captures()) value_of(v);
    std::vector<std::string> names;
    for (const Value* v : n->outputs()) names.push_back(v->name());
    Node* copy = fg.add_node(n->op_type(), inputs, names, n->domain(), n->name());
    for (const auto& [name, a] : n->attrs()) copy->set_attr(name, a);
    copy->set_source(n->source());
    for (size_t i = 0; i < n->num_outputs(); ++i) {
      copy->output(i)->set_type(n->output(i)->type());
      mapped.emplace(n->output(i), copy->output(i));
      fg.add_output(copy->output(i));
    }
  }
  return print_model(out);
}

// The symbols of the dims of main-graph values that are negative at `sizes`
// (an unknown dim, or one the sizes leave unbound, a size the data decides,
// is not checked).
std::set<std::string> symbols_of_negative_dims(const Graph& g, const std::map<std::string, int64_t>& sizes) {
  std::set<std::string> out;
  for (const auto& n : g.nodes())
    for (const Value* v : n->outputs()) {
      if (!v || !v->type().is_tensor() || !v->type().has_rank()) continue;
      for (const Dim& d : v->type().shape()) {
        if (d.is_unknown() || d.is_static()) continue;
        if (std::optional<int64_t> size = d.expr().evaluate(sizes); size && *size < 0) {
          std::set<std::string> symbols = d.expr().symbols();
          out.insert(symbols.begin(), symbols.end());
        }
      }
    }
  return out;
}

}  // namespace

std::map<std::string, int64_t> hinted_sizes(const Graph& g, const std::map<std::string, int64_t>& hints,
                                            int64_t unhinted, const std::string& flag,
                                            const std::vector<ShapeFact>& facts) {
  std::map<std::string, int64_t> sizes;
  for (const Value* in : g.inputs()) {
    if (!in->type().has_rank()) continue;
    for (const Dim& d : in->type().shape())
      if (d.is_symbolic())
        for (const std::string& s : d.expr().symbols()) sizes.emplace(s, unhinted);
  }
  for (const auto& [name, v] : hints) {
    if (!sizes.count(name)) {
      std::string known;
      for (const auto& [s, _] : sizes) known += (known.empty() ? "" : ", ") + s;
      throw InputError(flag + " " + name + ": the model has no symbol '" + name + "' (its symbols: " +
                       (known.empty() ? std::string("none") : known) + ")");
    }
    sizes[name] = v;
  }
  for (int doubling = 0; doubling < kMaxSizeDoublings; ++doubling) {
    bool doubled = false;
    std::set<std::string> short_symbols = symbols_of_negative_dims(g, sizes);
    for (const ShapeFact& f : facts)
      if (f.kind == ShapeFact::Kind::AtLeast && f.broken_at(sizes)) {
        std::set<std::string> symbols = f.expr.symbols();
        short_symbols.insert(symbols.begin(), symbols.end());
      }
    for (const std::string& s : short_symbols)
      if (auto it = sizes.find(s); it != sizes.end() && !hints.count(s)) {
        it->second *= 2;
        doubled = true;
      }
    if (!doubled) break;
  }
  return sizes;
}

namespace {

// Makes `dir` an empty module directory: creates it, or clears a previous module there.
void prepare_module_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p(dir);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw InputError(dir + ": exists and is not a directory");
    bool empty = fs::directory_iterator(p, ec) == fs::directory_iterator();
    if (!empty && !fs::exists(p / kManifestFile, ec))
      throw InputError(dir + ": not empty and not a tcc module; refusing to overwrite it");
    for (const auto& entry : fs::directory_iterator(p, ec)) fs::remove_all(entry.path(), ec);
    if (ec) throw InputError(dir + ": cannot clear the previous module: " + ec.message());
  } else if (!fs::create_directories(p, ec)) {
    throw InputError(dir + ": cannot create the module directory: " + ec.message());
  }
}

void write_module_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::string path = (fs::path(dir) / name).string();
  std::ofstream out(path, std::ios::binary);
  if (!out || !out.write(text.data(), static_cast<std::streamsize>(text.size())) || !out.flush())
    throw InputError(path + ": cannot write");
}

}  // namespace

void write_module_dir(const std::string& dir, const ModuleContents& m) {
  auto start = std::chrono::steady_clock::now();
  prepare_module_dir(dir);
  ModuleFacts facts = gather_module_facts(m);
  auto weights = std::async(std::launch::async, [&] { write_weights(dir, facts); });
  try {
    write_module_file(dir, kManifestFile, manifest_json(m, facts, dir).dump(2) + "\n");
    write_module_file(dir, kCudaSourceFile, m.cuda_source);
    for (const CudaBinary& b : m.binaries) write_module_file(dir, b.file, std::string(b.bytes.begin(), b.bytes.end()));
    if (m.options.host) {
      write_module_file(dir, kHostSourceFile, m.host_source);
      write_module_file(dir, kHostLibraryFile, std::string(m.host_library.begin(), m.host_library.end()));
    }
    if (!m.fallbacks.empty() || !m.schedule->binding_steps.empty())
      write_module_file(dir, kFallbackFile, fallback_tir(m));
  } catch (...) {
    weights.wait();
    throw;
  }
  weights.get();
  // The reports come last so that their timings include writing everything else.
  CompileTimings t = m.timings;
  t.write = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  t.total += t.write;
  write_module_file(dir, "report.json", report_json(m, facts, t).dump(2) + "\n");
  write_module_file(dir, "report.md", report_md(m, facts, t));
}

}  // namespace tcc
