// What several of a module's files are made from (see module_facts.h).
#include "codegen/module_facts.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "codegen/kernel_schedule.h"
#include "codegen/template_kernel.h"
#include "src/interp/interpreter.h"
#include "src/ops/fusion.h"

namespace tcc {

namespace {

// The peak rate of a kernel's arithmetic: tensor cores for f16 and bf16
// products, at half that rate for tf32 (as on Ampere and Hopper), else the f32 units.
double peak_flop_per_s(const std::string& precision, const DeviceProfile& d) {
  if (precision == "f16" || precision == "bf16") return d.tensor_flop_per_s;
  if (precision == "tf32") return d.tensor_flop_per_s / 2;
  return d.fp32_flop_per_s;
}

KernelEstimate estimate(const kir::Kernel& k, const KernelConfig& c, Precision precision, const DeviceProfile& d,
                        const std::map<std::string, int64_t>& sizes) {
  KernelEstimate e;
  e.precision = kernel_precision(k, c, precision);
  e.bytes = kir::bytes_moved(k).evaluate(sizes);
  e.flop = kir::flop_count(k).evaluate(sizes);
  double memory = e.bytes ? static_cast<double>(*e.bytes) / d.bytes_per_s : 0;
  double compute = e.flop ? static_cast<double>(*e.flop) / peak_flop_per_s(e.precision, d) : 0;
  e.seconds = std::max(memory, compute);
  e.compute_bound = compute > memory;
  return e;
}

}  // namespace

ModuleFacts gather_module_facts(const ModuleContents& m) {
  const Graph& g = *m.graph;
  ModuleFacts f;
  for (const Value* in : g.inputs()) {
    if (!in->type().has_rank()) continue;
    const Dims& dims = in->type().shape();
    for (size_t a = 0; a < dims.size(); ++a)
      if (auto scaled = dims[a].expr().scaled_symbol()) {
        auto [it, added] = f.symbols.try_emplace(scaled->first, SymbolSource{in->name(), static_cast<int>(a), scaled->second});
        if (!added && it->second.scale > 1 && scaled->second == 1) it->second = {in->name(), static_cast<int>(a), 1};
      }
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
    f.kernels[k] =
        estimate(m.schedule->kernels[k], config_of(m.schedule->kernels, m.configs, k), m.options.precision, *m.device,
                 f.sizes);
  std::unordered_map<std::string, const Node*> by_name;
  for (const auto& n : g.nodes()) by_name.emplace(n->name(), n.get());
  f.kernel_sources.resize(m.schedule->kernels.size());
  std::vector<std::unordered_set<std::string>> sources_seen(m.schedule->kernels.size());
  for (const Step& s : m.schedule->steps) {
    std::vector<const Node*> ran;
    std::vector<std::string> nodes;
    auto it = by_name.find(s.node);
    if (it != by_name.end() && is_fusion(*it->second)) {
      for (const auto& n : fusion_body(*it->second).nodes()) ran.push_back(n.get());
      for (const Node* n : ran) nodes.push_back(n->name());
    } else {
      if (it != by_name.end()) ran.push_back(it->second);
      nodes.push_back(s.node);
    }
    f.step_nodes.push_back(std::move(nodes));
    if (s.kind != Step::Kind::Kernel) continue;
    ++f.kernels.at(s.kernel).steps;
    for (const Node* n : ran)
      if (!n->source().empty() && sources_seen[s.kernel].insert(n->source()).second)
        f.kernel_sources[s.kernel].push_back(n->source());
  }
  return f;
}

std::string kernel_precision(const kir::Kernel& k, const KernelConfig& c, Precision precision) {
  if ((k.kind == kir::Kind::Gemm || k.kind == kir::Kind::Conv) && !k.buffers.empty()) {
    DType operand = k.buffers.front().dtype;
    // tcc's template (c.tile) splits each f32 operand into two TF32 parts (3xTF32), keeping f32's accuracy.
    const bool tf32 = operand == DType::F32 && precision == Precision::TF32 && c.tile == 0;
    return tf32 ? "tf32" : std::string(dtype_name(operand));
  }
  if (const TemplateKernel* t = template_kernel(k.kind)) return t->precision(k, c);
  bool any_float = false;
  for (const kir::Buffer& b : k.buffers) {
    if (b.dtype == DType::F64) return "f64";
    any_float |= is_float(b.dtype);
  }
  if (any_float) return "f32";
  return k.buffers.empty() ? "none" : std::string(dtype_name(k.buffers.back().dtype));
}

std::string schedule_text(const kir::Kernel& k, const KernelConfig& c) {
  if (c.tile > 0) return "tcc template " + gemm_template_text(c);
  if (k.kind == kir::Kind::Gemm) return "cuBLASLt algorithm #" + std::to_string(c.algo);
  if (k.kind == kir::Kind::Conv) return "cuDNN algorithm #" + std::to_string(c.algo);
  if (const TemplateKernel* t = template_kernel(k.kind)) return t->schedule(k, c);
  std::string s = "block " + std::to_string(c.block);
  if (k.kind == kir::Kind::Pointwise) return s + (c.tiled ? ", tiled" : ", vector " + std::to_string(c.vector_width));
  s += c.columns ? ", columns" : ", rows " + std::to_string(c.rows_per_block);
  if (c.split > 1) s += ", split " + std::to_string(c.split);
  if (c.row_cache > 0) s += ", row cache " + std::to_string(c.row_cache);
  return s;
}

}  // namespace tcc
