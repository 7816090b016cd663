#include "codegen/module_writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "src/interp/interpreter.h"
#include "src/ir/text.h"
#include "src/ops/fusion.h"

namespace tcc {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int64_t kWeightAlignment = 256;

// A size in the manifest: an integer when static, SymExpr text otherwise.
ojson size_json(const SymExpr& e) {
  if (e.is_constant()) return e.constant_value();
  return e.str();
}

ojson shape_json(const std::vector<SymExpr>& shape) {
  ojson a = ojson::array();
  for (const SymExpr& d : shape) a.push_back(size_json(d));
  return a;
}

ojson type_shape_json(const Type& t) {
  ojson a = ojson::array();
  if (!t.has_rank()) return a;
  for (const Dim& d : t.shape()) {
    if (d.is_unknown())
      a.push_back("?");
    else
      a.push_back(size_json(d.expr()));
  }
  return a;
}

ojson tensor_json(const Value& v) {
  return {{"name", v.name()}, {"dtype", dtype_name(v.type().dtype())}, {"shape", type_shape_json(v.type())}};
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (const std::string& x : items) s += (s.empty() ? "" : sep) + x;
  return s;
}

// What the report knows about one kernel at the hinted sizes.
struct KernelEstimate {
  int steps = 0;                   // schedule steps that run it (regional reuse)
  std::optional<int64_t> bytes, flop;
  double seconds = 0;              // one run, roofline: the slower of memory and compute
  bool compute_bound = false;
};

bool on_tensor_cores(const kir::Kernel& k) {
  if ((k.kind != kir::Kind::Gemm && k.kind != kir::Kind::Conv) || k.buffers.empty()) return false;
  DType t = k.buffers.front().dtype;
  return t == DType::F16 || t == DType::BF16;
}

KernelEstimate estimate(const kir::Kernel& k, const DeviceProfile& d, const std::map<std::string, int64_t>& sizes) {
  KernelEstimate e;
  e.bytes = kir::bytes_moved(k).evaluate(sizes);
  e.flop = kir::flop_count(k).evaluate(sizes);
  double memory = e.bytes ? static_cast<double>(*e.bytes) / d.bytes_per_s : 0;
  double compute =
      e.flop ? static_cast<double>(*e.flop) / (on_tensor_cores(k) ? d.tensor_flop_per_s : d.fp32_flop_per_s) : 0;
  e.seconds = std::max(memory, compute);
  e.compute_bound = compute > memory;
  return e;
}

}  // namespace

// Everything derived from the contents that more than one file needs.
struct ModuleFacts {
  std::map<std::string, std::pair<std::string, int>> symbols;  // symbol -> (input, axis), first occurrence
  // Data-dependent sizes (NonZero's count): symbol -> (the value a fallback step writes, axis), first occurrence.
  std::map<std::string, std::pair<std::string, int>> value_symbols;
  std::map<std::string, int64_t> sizes;                        // report sizes per symbol
  std::vector<std::pair<const Value*, Tensor>> weights;       // in first-read order
  std::vector<int64_t> weight_offsets;
  int64_t weights_bytes = 0;
  std::vector<KernelEstimate> kernels;
  std::vector<std::vector<std::string>> step_nodes;  // per step: the source nodes it runs
};

namespace {


ModuleFacts gather(const ModuleContents& m) {
  const Graph& g = *m.graph;
  ModuleFacts f;
  for (const Value* in : g.inputs()) {
    if (!in->type().has_rank()) continue;
    const Dims& dims = in->type().shape();
    for (size_t a = 0; a < dims.size(); ++a)
      if (dims[a].is_symbolic() && dims[a].expr().is_symbol())
        f.symbols.emplace(dims[a].expr().symbol_name(), std::make_pair(in->name(), static_cast<int>(a)));
  }
  for (const Step& s : m.schedule->steps) {
    if (s.kind != Step::Kind::Fallback) continue;
    for (const std::string& name : s.writes) {
      const Type& t = g.find(name)->type();
      if (!t.is_tensor() || !t.has_rank()) continue;
      for (size_t a = 0; a < t.shape().size(); ++a) {
        const Dim& d = t.shape()[a];
        if (d.is_symbolic() && d.expr().is_symbol() && !f.symbols.count(d.expr().symbol_name()))
          f.value_symbols.emplace(d.expr().symbol_name(), std::make_pair(name, static_cast<int>(a)));
      }
    }
  }
  f.sizes = hinted_sizes(g, m.options.shape_hints);

  // Weights are the initializers the steps read, and the values of constant
  // nodes, which the schedule gives no step: the module carries them, evaluated
  // here by the reference interpreter.
  std::set<std::string> written;
  for (const Step& s : m.schedule->steps) written.insert(s.writes.begin(), s.writes.end());
  for (const Step& s : m.schedule->binding_steps) written.insert(s.writes.begin(), s.writes.end());
  for (const ViewAlias& v : m.schedule->views) written.insert(v.value);
  Interpreter interp;
  std::unordered_map<const Value*, Tensor> constants;
  std::function<Tensor(const Value*)> constant = [&](const Value* v) -> Tensor {
    if (v->is_initializer()) return v->initializer();
    auto it = constants.find(v);
    if (it != constants.end()) return it->second;
    const Node* n = v->producer();
    TCC_CHECK(n != nullptr) << "value '" << v->name() << "' is read by the schedule but has no producer";
    std::vector<Tensor> ins;
    for (const Value* in : n->inputs()) ins.push_back(in ? constant(in) : Tensor());
    std::vector<const Tensor*> ptrs;
    for (size_t i = 0; i < ins.size(); ++i) ptrs.push_back(n->input(i) ? &ins[i] : nullptr);
    std::vector<Tensor> outs = interp.eval_node(*n, ptrs);
    for (size_t i = 0; i < outs.size() && i < n->num_outputs(); ++i) constants[n->output(i)] = outs[i];
    return constants.at(v);
  };
  std::set<const Value*> seen;
  auto add_weight = [&](const Value* v) {
    if (!v || v->is_graph_input() || written.count(v->name()) || !seen.insert(v).second) return;
    f.weights.emplace_back(v, constant(v));
  };
  for (const Step& s : m.schedule->binding_steps)
    for (const std::string& name : s.reads) add_weight(g.find(name));
  for (const Step& s : m.schedule->steps)
    for (const std::string& name : s.reads) add_weight(g.find(name));
  for (const Value* v : g.outputs()) add_weight(v);
  for (const auto& [v, t] : f.weights) {
    f.weight_offsets.push_back(f.weights_bytes);
    int64_t n = static_cast<int64_t>(t.nbytes());
    f.weights_bytes += (n + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  }

  f.kernels.resize(m.schedule->kernels.size());
  for (size_t k = 0; k < m.schedule->kernels.size(); ++k)
    f.kernels[k] = estimate(m.schedule->kernels[k], *m.device, f.sizes);
  std::unordered_map<std::string, const Node*> by_name;
  for (const auto& n : g.nodes()) by_name.emplace(n->name(), n.get());
  for (const Step& s : m.schedule->steps) {
    if (s.kind == Step::Kind::Kernel) ++f.kernels.at(s.kernel).steps;
    std::vector<std::string> nodes;
    auto it = by_name.find(s.node);
    if (it != by_name.end() && is_fusion(*it->second)) {
      for (const auto& n : fusion_body(*it->second).nodes()) nodes.push_back(n->name());
    } else {
      nodes.push_back(s.node);
    }
    f.step_nodes.push_back(std::move(nodes));
  }
  return f;
}

ojson gemm_json(const kir::GemmDesc& g) {
  auto s = [](const SymExpr& e) { return e.str(); };
  return {{"a", g.a},
          {"b", g.b},
          {"trans_a", g.trans_a},
          {"trans_b", g.trans_b},
          {"batch", s(g.batch)},
          {"m", s(g.m)},
          {"n", s(g.n)},
          {"k", s(g.k)},
          {"lda", s(g.lda)},
          {"ldb", s(g.ldb)},
          {"ldd", s(g.ldd)},
          {"stride_a", s(g.stride_a)},
          {"stride_b", s(g.stride_b)},
          {"stride_d", s(g.stride_d)},
          {"alpha", g.alpha},
          {"beta", g.beta},
          {"bias", g.bias},
          {"residual", g.residual},
          {"activation", g.activation}};
}

ojson conv_json(const kir::ConvDesc& c) {
  return {{"x", c.x},
          {"w", c.w},
          {"n", size_json(c.n)},
          {"c", size_json(c.c)},
          {"k", size_json(c.k)},
          {"in", shape_json(c.in)},
          {"out", shape_json(c.out)},
          {"kernel", c.kernel},
          {"strides", c.strides},
          {"dilations", c.dilations},
          {"pads", c.pads},
          {"groups", c.groups},
          {"bias", c.bias},
          {"residual", c.residual},
          {"activation", c.activation}};
}

// How a kernel runs on the GPU: its library and algorithm, or its generated
// schedule ("block 64, rows 1, row cache 8", "block 256, tiled").
std::string schedule_text(const kir::Kernel& k, const KernelConfig& c) {
  if (c.tile > 0) return "tcc template " + gemm_template_text(c);
  if (k.kind == kir::Kind::Gemm) return "cuBLASLt algorithm #" + std::to_string(c.algo);
  if (k.kind == kir::Kind::Conv) return "cuDNN algorithm #" + std::to_string(c.algo);
  std::string s = "block " + std::to_string(c.block);
  if (k.kind == kir::Kind::Pointwise) return s + (c.tiled ? ", tiled" : ", vector " + std::to_string(c.vector_width));
  s += c.columns ? ", columns" : ", rows " + std::to_string(c.rows_per_block);
  if (c.split > 1) s += ", split " + std::to_string(c.split);
  if (c.row_cache > 0) s += ", row cache " + std::to_string(c.row_cache);
  return s;
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
  for (const kir::Buffer& b : k.buffers)
    bufs.push_back({{"dtype", dtype_name(b.dtype)}, {"shape", shape_json(b.shape)}, {"output", b.output}});
  j["buffers"] = bufs;
  j["sizes"] = k.size_params;
  if (k.kind == kir::Kind::Gemm) {
    j["gemm"] = gemm_json(*k.gemm);
    j["gemm"]["algo"] = config.algo;
  } else if (k.kind == kir::Kind::Conv) {
    j["conv"] = conv_json(*k.conv);
    j["conv"]["algo"] = config.algo;
  }
  if (!runs_library(k, config)) {
    LaunchConfig l = launch_config(k, config);
    j["launch"] = {{"grid", {l.grid[0].str(), l.grid[1].str(), l.grid[2].str()}},
                   {"block", {l.block[0], l.block[1], l.block[2]}},
                   {"shared_bytes", l.shared_bytes}};
    if (l.workspace_bytes != SymExpr()) j["launch"]["workspace_bytes"] = size_json(l.workspace_bytes);
    if (k.zero_outputs) j["launch"]["zero_outputs"] = true;
  }
  if (m.autotune) {
    ojson t = {{"source", m.autotune->sources.at(index)}};
    if (k.kind == kir::Kind::Gemm)
      t["config"] = {{"algo", config.algo}, {"tile", config.tile}, {"split", config.split}};
    else if (k.kind == kir::Kind::Conv)
      t["config"] = {{"algo", config.algo}};
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

ojson manifest_json(const ModuleContents& m, const ModuleFacts& f, const std::string& dir) {
  const Graph& g = *m.graph;
  ojson j;
  j["format"] = "tcc-module";
  j["format_version"] = 1;
  j["tcc_version"] = TCC_VERSION;
  j["model"] = fs::path(m.model).filename().string();
  if (!m.reference.empty()) {
    std::error_code ec;
    fs::path rel = fs::relative(fs::absolute(m.reference), fs::absolute(dir), ec);
    if (!ec && !rel.empty()) j["model_path"] = rel.generic_string();
  }
  j["mode"] = m.mode->name;
  j["options"] = {{"arch", m.options.archs}, {"ptx", m.options.ptx}, {"host", m.options.host}};
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
  for (const Value* v : g.inputs()) inputs.push_back(tensor_json(*v));
  for (const Value* v : g.outputs()) outputs.push_back(tensor_json(*v));
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  ojson symbols = ojson::object();
  for (const auto& [name, where] : f.symbols) symbols[name] = {{"input", where.first}, {"axis", where.second}};
  for (const auto& [name, where] : f.value_symbols) symbols[name] = {{"value", where.first}, {"axis", where.second}};
  j["symbols"] = symbols;
  // The guard set is explain's JSON; re-parsed so its objects keep their (sorted) key order.
  j["guards"] = ojson::parse(m.guards->to_json().dump());

  ojson tensors = ojson::array();
  for (size_t i = 0; i < f.weights.size(); ++i) {
    const auto& [v, data] = f.weights[i];
    ojson shape = ojson::array();
    for (int64_t d : data.shape()) shape.push_back(d);
    tensors.push_back({{"name", v->name()},
                       {"dtype", dtype_name(data.dtype())},
                       {"shape", shape},
                       {"offset", f.weight_offsets[i]},
                       {"nbytes", static_cast<int64_t>(data.nbytes())}});
  }
  j["weights"] = {{"file", "weights.bin"}, {"tensors", tensors}};

  ojson buffers = ojson::array();
  for (const PlannedBuffer& b : m.memory->buffers)
    buffers.push_back({{"name", b.value},
                       {"dtype", dtype_name(b.dtype)},
                       {"shape", shape_json(b.shape)},
                       {"offset", size_json(b.offset)},
                       {"nbytes", size_json(b.nbytes)}});
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
      for (const std::string& name : s.writes) values.push_back(tensor_json(*g.find(name)));
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
  std::string path = (fs::path(dir) / "weights.bin").string();
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

std::string bytes_text(std::optional<int64_t> b) {
  if (!b) return "?";
  if (*b < 1024) return std::to_string(*b) + " B";
  if (*b < 1024 * 1024) return fmt("%.1f KiB", *b / 1024.0);
  return fmt("%.1f MiB", *b / (1024.0 * 1024.0));
}

std::string sizes_text(const std::map<std::string, int64_t>& sizes) {
  std::vector<std::string> parts;
  for (const auto& [s, v] : sizes) parts.push_back(s + "=" + std::to_string(v));
  return parts.empty() ? "static shapes" : join(parts, ", ");
}

double total_estimate_us(const ModuleContents& m, const ModuleFacts& f) {
  double us = 0;
  for (const KernelEstimate& e : f.kernels) us += e.seconds * 1e6 * e.steps;
  return us;
}

ojson report_json(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t) {
  const DeviceProfile& d = *m.device;
  ojson j;
  j["model"] = fs::path(m.model).filename().string();
  j["mode"] = m.mode->name;
  j["device"] = {{"name", d.name},
                 {"description", d.description},
                 {"bytes_per_s", d.bytes_per_s},
                 {"tensor_flop_per_s", d.tensor_flop_per_s},
                 {"fp32_flop_per_s", d.fp32_flop_per_s}};
  j["sizes"] = f.sizes;
  size_t kernel_steps = 0;
  for (const KernelEstimate& e : f.kernels) kernel_steps += e.steps;
  j["summary"] = {{"kernels", m.schedule->kernels.size()},
                  {"kernel_steps", kernel_steps},
                  {"fallback_steps", m.fallbacks.size()},
                  {"binding_steps", m.schedule->binding_steps.size()},
                  {"fallback_copies", m.schedule->fallback_copies},
                  {"views", m.schedule->views.size()},
                  {"estimated_us", std::round(total_estimate_us(m, f) * 1000) / 1000}};
  ojson kernels = ojson::array();
  for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
    const kir::Kernel& k = m.schedule->kernels[i];
    const KernelEstimate& e = f.kernels[i];
    kernels.push_back({{"name", k.name},
                       {"kind", kir::kind_name(k.kind)},
                       {"steps", e.steps},
                       {"nodes", k.nodes},
                       {"bytes_moved", size_json(kir::bytes_moved(k))},
                       {"flop", size_json(kir::flop_count(k))},
                       {"bytes_at_sizes", e.bytes ? ojson(*e.bytes) : ojson(nullptr)},
                       {"flop_at_sizes", e.flop ? ojson(*e.flop) : ojson(nullptr)},
                       {"estimated_us", std::round(e.seconds * 1e9) / 1000},
                       {"bound", e.compute_bound ? "compute" : "memory"}});
  }
  j["kernels"] = kernels;
  ojson steps = ojson::array();
  for (size_t i = 0; i < m.schedule->steps.size(); ++i) {
    const Step& s = m.schedule->steps[i];
    ojson e = {{"node", s.node}};
    if (s.kind == Step::Kind::Kernel)
      e["kernel"] = m.schedule->kernels[s.kernel].name;
    else
      e["fallback"] = true;
    e["source_nodes"] = f.step_nodes[i];
    steps.push_back(e);
  }
  j["steps"] = steps;
  ojson views = ojson::array();
  for (const ViewAlias& v : m.schedule->views)
    views.push_back({{"node", v.node}, {"value", v.value}, {"source", v.source}});
  j["views"] = views;
  ojson fallbacks = ojson::array();
  for (const FallbackReason& r : m.fallbacks)
    fallbacks.push_back({{"node", r.node}, {"op_type", r.op_type}, {"reason", r.reason}, {"message", r.message}});
  j["fallbacks"] = fallbacks;
  auto at_sizes = [&](const SymExpr& e) {
    std::optional<int64_t> v = e.evaluate(f.sizes);
    return v ? ojson(*v) : ojson(nullptr);
  };
  j["memory"] = {{"arena_bytes", size_json(m.memory->arena_bytes)},
                 {"unplanned_bytes", size_json(m.memory->unplanned_bytes)},
                 {"arena_bytes_at_sizes", at_sizes(m.memory->arena_bytes)},
                 {"unplanned_bytes_at_sizes", at_sizes(m.memory->unplanned_bytes)},
                 {"buffers", m.memory->buffers.size()},
                 {"weights_bytes", f.weights_bytes}};
  ojson passes = ojson::array();
  for (const PassRecord& p : m.passes) passes.push_back({{"name", p.name}, {"changed", p.changed},
                                                         {"counters", p.stats.counters}});
  j["passes"] = passes;

  ojson pass_ms = ojson::array();
  for (const PassRecord& p : m.passes) pass_ms.push_back({{"name", p.name}, {"ms", p.wall_ms}});
  j["timings"] = {{"load_ms", t.load},     {"shapes_ms", t.shapes}, {"passes_ms", t.passes},
                  {"schedule_ms", t.schedule}, {"memory_ms", t.memory}, {"emit_ms", t.emit},
                  {"nvrtc_ms", t.nvrtc},   {"host_compile_ms", t.host}, {"write_ms", t.write}, {"total_ms", t.total},
                  {"passes", pass_ms}};
  return j;
}

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string report_md(const ModuleContents& m, const ModuleFacts& f, const CompileTimings& t) {
  const DeviceProfile& d = *m.device;
  std::ostringstream os;
  os << "# tcc compile report: " << fs::path(m.model).filename().string() << "\n\n";
  os << "Mode `" << m.mode->name << "`. Estimates for " << d.description << " (" << fmt("%g", d.bytes_per_s / 1e12)
     << " TB/s, " << fmt("%g", d.tensor_flop_per_s / 1e12) << " TFLOP/s f16 tensor core, "
     << fmt("%g", d.fp32_flop_per_s / 1e12) << " TFLOP/s f32) at " << sizes_text(f.sizes)
     << "; each kernel takes the longer of its bytes at peak bandwidth and its FLOP at peak rate.\n\n";

  size_t kernel_steps = 0;
  for (const KernelEstimate& e : f.kernels) kernel_steps += e.steps;
  auto at_sizes = [&](const SymExpr& e) { return bytes_text(e.evaluate(f.sizes)); };
  os << "## Summary\n\n| | |\n|---|---|\n";
  os << "| kernels | " << m.schedule->kernels.size() << " compiled, run by " << kernel_steps << " steps |\n";
  os << "| fallbacks | " << m.fallbacks.size() << " nodes on the host, " << m.schedule->fallback_copies
     << " tensor copies |\n";
  os << "| views | " << m.schedule->views.size() << " (reshapes that share their input's buffer: no kernel) |\n";
  os << "| binding constants | " << m.schedule->binding_steps.size()
     << " nodes computed once per binding of the symbols, kept on the device |\n";
  os << "| peak memory | " << at_sizes(m.memory->arena_bytes) << " planned (`" << m.memory->arena_bytes.str()
     << "`), " << at_sizes(m.memory->unplanned_bytes) << " unplanned (`" << m.memory->unplanned_bytes.str()
     << "`) |\n";
  os << "| weights | " << bytes_text(f.weights_bytes) << " in " << f.weights.size() << " tensors |\n";
  os << "| estimated time | " << fmt("%.2f", total_estimate_us(m, f)) << " us |\n\n";

  os << "## Kernels\n\n| kernel | kind | schedule | steps | bytes | FLOP | est. us | bound | nodes |\n"
        "|---|---|---|---:|---:|---:|---:|---|---|\n";
  for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
    const kir::Kernel& k = m.schedule->kernels[i];
    const KernelEstimate& e = f.kernels[i];
    os << "| " << k.name << " | " << kir::kind_name(k.kind) << " | "
       << schedule_text(k, config_of(m.schedule->kernels, m.configs, i)) << " | " << e.steps << " | "
       << bytes_text(e.bytes) << " | " << (e.flop ? std::to_string(*e.flop) : "?") << " | "
       << fmt("%.2f", e.seconds * 1e6) << " | " << (e.compute_bound ? "compute" : "memory") << " | "
       << md_escape(join(k.nodes, ", ")) << " |\n";
  }
  os << "\n## Nodes -> kernels\n\n| step | kernel | source nodes |\n|---:|---|---|\n";
  for (size_t i = 0; i < m.schedule->steps.size(); ++i) {
    const Step& s = m.schedule->steps[i];
    os << "| " << i << " | "
       << (s.kind == Step::Kind::Kernel ? m.schedule->kernels[s.kernel].name : std::string("fallback (host)")) << " | "
       << md_escape(join(f.step_nodes[i], ", ")) << " |\n";
  }
  if (!m.schedule->views.empty()) {
    os << "\n## Views (no kernel)\n\n| node | value | shares the buffer of |\n|---|---|---|\n";
    for (const ViewAlias& v : m.schedule->views)
      os << "| " << md_escape(v.node) << " | " << md_escape(v.value) << " | " << md_escape(v.source) << " |\n";
  }
  if (!m.schedule->binding_steps.empty()) {
    os << "\n## Binding constants\n\nComputed on the host when a run first sees a binding of the symbols, then read "
          "by kernels as weights are.\n\n| node | op | writes |\n|---|---|---|\n";
    for (const Step& s : m.schedule->binding_steps) {
      const Node* n = m.graph->find(s.writes.front())->producer();
      os << "| " << md_escape(s.node) << " | " << n->op_type() << " | " << md_escape(join(s.writes, ", ")) << " |\n";
    }
  }
  if (!m.fallbacks.empty()) {
    os << "\n## Fallbacks\n\n| node | op | reason | why |\n|---|---|---|---|\n";
    for (const FallbackReason& r : m.fallbacks)
      os << "| " << md_escape(r.node) << " | " << r.op_type << " | " << r.reason << " | " << md_escape(r.message)
         << " |\n";
  }
  os << "\n## Memory plan\n\n| buffer | dtype | shape | offset | bytes | steps |\n|---|---|---|---|---|---|\n";
  for (const PlannedBuffer& b : m.memory->buffers) {
    std::vector<std::string> dims;
    for (const SymExpr& e : b.shape) dims.push_back(e.str());
    os << "| " << md_escape(b.value) << " | " << dtype_name(b.dtype) << " | [" << join(dims, ", ") << "] | `"
       << b.offset.str() << "` | `" << b.nbytes.str() << "` | " << b.first_step << "-" << b.last_step << " |\n";
  }
  os << "\n## Mode features\n\n| feature | status | |\n|---|---|---|\n";
  for (const Feature* feat : m.mode->features)
    os << "| " << feat->name << " | " << (feat->built ? "built" : "unbuilt") << " | "
       << (feat->built ? feat->description : feat->why) << " |\n";
  if (m.autotune) {
    const AutotuneSummary& a = *m.autotune;
    os << "\n## Autotuning\n\n" << a.measured << " kernels measured, " << a.from_cache << " from the tuning cache, "
       << a.heuristic << " by heuristics: " << md_escape(a.note)
       << ".\n\n| kernel | config | source |\n|---|---|---|\n";
    for (size_t i = 0; i < m.schedule->kernels.size(); ++i) {
      const kir::Kernel& k = m.schedule->kernels[i];
      os << "| " << k.name << " | " << schedule_text(k, config_of(m.schedule->kernels, m.configs, i)) << " | "
         << a.sources.at(i) << " |\n";
    }
  }

  // Timings last: the only part of the module that differs between two compiles.
  os << "\n## Compile time\n\n| stage | ms |\n|---|---:|\n";
  const std::pair<const char*, double> stages[] = {
      {"load", t.load},       {"shape inference", t.shapes}, {"passes", t.passes},
      {"lowering (schedule)", t.schedule}, {"memory planning", t.memory}, {"emit CUDA + host", t.emit},
      {"NVRTC", t.nvrtc},     {"host compiler", t.host},     {"write module", t.write}, {"total", t.total}};
  for (const auto& [name, ms] : stages) os << "| " << name << " | " << fmt("%.1f", ms) << " |\n";
  os << "\n| pass | ms | changed |\n|---|---:|---|\n";
  for (const PassRecord& p : m.passes)
    os << "| " << p.name << " | " << fmt("%.2f", p.wall_ms) << " | " << (p.changed ? "yes" : "no") << " |\n";
  return os.str();
}

}  // namespace

std::map<std::string, int64_t> hinted_sizes(const Graph& g, const std::map<std::string, int64_t>& hints,
                                            int64_t unhinted) {
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
      throw InputError("--shape-hint " + name + ": the model has no symbol '" + name + "' (its symbols: " +
                       (known.empty() ? std::string("none") : known) + ")");
    }
    sizes[name] = v;
  }
  return sizes;
}

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

ModuleWriter::ModuleWriter(std::string dir, const ModuleContents& m)
    : dir_(std::move(dir)), m_(m), facts_(std::make_unique<ModuleFacts>(gather(m))) {
  weights_ = std::async(std::launch::async, [this] { write_weights(dir_, *facts_); });
}

ModuleWriter::~ModuleWriter() {
  if (weights_.valid()) weights_.wait();
}

void ModuleWriter::finish() {
  auto start = std::chrono::steady_clock::now();
  write_module_file(dir_, kManifestFile, manifest_json(m_, *facts_, dir_).dump(2) + "\n");
  write_module_file(dir_, kCudaSourceFile, m_.cuda_source);
  for (const CudaBinary& b : m_.binaries) write_module_file(dir_, b.file, std::string(b.bytes.begin(), b.bytes.end()));
  if (!m_.fallbacks.empty() || !m_.schedule->binding_steps.empty())
    write_module_file(dir_, "fallback.tir", fallback_tir(m_));
  weights_.get();
  // The reports come last so that their timings include writing everything else.
  CompileTimings t = m_.timings;
  t.write = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  t.total += t.write;
  write_module_file(dir_, "report.json", report_json(m_, *facts_, t).dump(2) + "\n");
  write_module_file(dir_, "report.md", report_md(m_, *facts_, t));
}

}  // namespace tcc
