#include "module.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <new>
#include <set>

#include <nlohmann/json.hpp>

#include "src/ir/text.h"
#include "src/ops/op_registry.h"

namespace tcc::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

AlignedBytes::AlignedBytes(size_t n)
    : data_(static_cast<std::byte*>(::operator new(std::max<size_t>(n, 1), std::align_val_t(kAlignment)))),
      size_(n) {}

void AlignedBytes::Free::operator()(std::byte* p) const { ::operator delete(p, std::align_val_t(kAlignment)); }

namespace {

// A file the manifest names, which must stay inside the module directory.
std::string module_file(const std::string& dir, const std::string& name, const ManifestField& f) {
  fs::path p(name);
  if (name.empty() || p.is_absolute()) f.fail("'" + name + "' is not a path relative to the module directory");
  for (const fs::path& part : p)
    if (part == "..") f.fail("'" + name + "' leaves the module directory");
  std::error_code ec;
  fs::path full = fs::path(dir) / p;
  fs::path real = fs::canonical(full, ec);
  if (ec) f.fail("'" + name + "' does not exist in " + dir);
  fs::path root = fs::canonical(dir);
  auto [end, _] = std::mismatch(root.begin(), root.end(), real.begin(), real.end());
  if (end != root.end()) f.fail("'" + name + "' leads outside the module directory");
  if (!fs::is_regular_file(real)) f.fail("'" + name + "' is not a regular file");
  return real.string();
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadModule(what + ": cannot read " + path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Loader {
 public:
  Loader(Module& m, const json& manifest) : m_(m), root_(manifest, "") {}

  void load() {
    check_module_format(root_);
    precision();
    signature();
    weights();
    memory();
    binding_constants();
    host_library();
    kernels();
    fallbacks();
    schedule();
    random();
    guards();
    cuda();
  }

 private:
  // Absent in modules older than --precision: fp32.
  void precision() {
    if (!root_.has("precision")) return;
    ManifestField p = root_["precision"];
    std::string name = p.str();
    if (name != "fp32" && name != "tf32" && name != "fp16" && name != "bf16")
      p.fail("unknown precision '" + name + "' (fp32, tf32, fp16 or bf16)");
    m_.tf32 = name == "tf32";
  }

  int add_value(const ManifestField& where, ValueInfo::Where kind, int index, const TensorSig& sig) {
    int id = static_cast<int>(m_.values.size());
    if (!m_.value_ids.emplace(sig.name, id).second) where.fail("value '" + sig.name + "' is declared twice");
    m_.values.push_back({kind, index, sig});
    return id;
  }

  // The inputs' shapes, read before the symbols they bind.
  const SizeCheck unchecked_ = [](const SymExpr&, const ManifestField&) {};
  const SizeCheck bound_ = [this](const SymExpr& e, const ManifestField& where) { check_bound(e, where); };

  // Symbols a size expression may mention: those the inputs bind.
  void check_bound(const SymExpr& e, const ManifestField& where) {
    for (const std::string& s : e.symbols())
      if (!m_.symbols.count(s) && !value_symbol_names_.count(s))
        where.fail("mentions symbol '" + s + "', which neither an input nor a fallback's value binds (see " +
                   "\"symbols\")");
  }
  void check_bound(const std::vector<SymExpr>& shape, const ManifestField& where) {
    for (const SymExpr& d : shape) check_bound(d, where);
  }

  void signature() {
    ManifestField ins = root_["inputs"];
    for (size_t i = 0; i < ins.size(); ++i) {
      TensorSig sig = read_tensor(ins[i], unchecked_);
      m_.inputs.push_back(sig);
      m_.input_names.push_back(sig.name);
      add_value(ins[i], ValueInfo::Where::Input, static_cast<int>(i), sig);
    }
    ManifestField syms = root_["symbols"];
    if (!syms.raw().is_object()) syms.fail("expected an object");
    for (const auto& [name, _] : syms.raw().items()) {
      ManifestField s = syms[name.c_str()];
      if (s.has("value")) {  // resolved once the schedule is loaded (value_symbols())
        value_symbol_names_.insert(name);
        continue;
      }
      std::string input = s["input"].str();
      auto it = std::find_if(m_.inputs.begin(), m_.inputs.end(), [&](const TensorSig& t) { return t.name == input; });
      if (it == m_.inputs.end()) s["input"].fail("'" + input + "' is not an input");
      int64_t axis = s["axis"].integer(0, static_cast<int64_t>(it->shape.size()) - 1);
      int64_t scale = s.has("scale") ? s["scale"].integer(1, INT32_MAX) : 1;
      m_.symbols[name] = {static_cast<int>(it - m_.inputs.begin()), static_cast<int>(axis), scale};
    }
    for (size_t i = 0; i < m_.inputs.size(); ++i) check_bound(m_.inputs[i].shape, ins[i]["shape"]);
    // Outputs are registered after the steps that write them are known; here only their signature.
    ManifestField outs = root_["outputs"];
    for (size_t i = 0; i < outs.size(); ++i) {
      TensorSig sig = read_tensor(outs[i], bound_);
      m_.outputs.push_back(sig);
      m_.output_names.push_back(sig.name);
    }
  }

  void weights() {
    ManifestField w = root_["weights"];
    ManifestField tensors = w["tensors"];
    std::string path = tensors.size() ? module_file(m_.dir, w["file"].str(), w["file"]) : std::string();
    std::string bytes = path.empty() ? std::string() : read_file(path, "weights");
    m_.weight_data = AlignedBytes(bytes.size());
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(m_.weight_data.data()));
    for (size_t i = 0; i < tensors.size(); ++i) {
      ManifestField t = tensors[i];
      PlacedTensor w = read_weight(t, AlignedBytes::kAlignment);
      const TensorSig& sig = w.sig;
      int64_t offset = w.offset.constant_value(), nbytes = w.nbytes.constant_value();
      if (offset > static_cast<int64_t>(bytes.size()) || nbytes > static_cast<int64_t>(bytes.size()) - offset)
        t.fail("weight '" + sig.name + "' (bytes " + std::to_string(offset) + ".." + std::to_string(offset + nbytes) +
               ") lies past the end of weights.bin (" + std::to_string(bytes.size()) + " bytes)");
      m_.weights.push_back(sig);
      m_.weight_ranges.push_back({offset, nbytes});
      add_value(t, ValueInfo::Where::Weight, static_cast<int>(i), sig);
    }
  }

  void memory() {
    ManifestField mem = root_["memory"];
    m_.arena_bytes = mem["arena_bytes"].expr();
    check_bound(m_.arena_bytes, mem["arena_bytes"]);
    ManifestField bufs = mem["buffers"];
    for (size_t i = 0; i < bufs.size(); ++i) {
      PlacedTensor b = read_placed(bufs[i], bound_);
      m_.buffers.push_back(b.sig);
      m_.buffer_ranges.push_back({b.offset, b.nbytes});
      add_value(bufs[i], ValueInfo::Where::Buffer, static_cast<int>(i), b.sig);
    }
  }

  // The values binding steps write (absent when there are none): registered
  // before the schedule, whose steps read them.
  void binding_constants() {
    if (!root_.has("binding_constants")) return;
    ManifestField values = root_["binding_constants"]["values"];
    for (size_t i = 0; i < values.size(); ++i) {
      TensorSig sig = read_tensor(values[i], bound_);
      m_.binding_constants.push_back(sig);
      add_value(values[i], ValueInfo::Where::BindingConstant, static_cast<int>(i), sig);
    }
  }

  // Absent from a module compiled with --no-host, which runs on a GPU only.
  void host_library() {
    if (!root_.has("host")) return;
    ManifestField host = root_["host"];
    std::string path = module_file(m_.dir, host["library"].str(), host["library"]);
    try {
      m_.host_library = std::make_unique<SharedLibrary>(path);
    } catch (const Error& e) {
      host["library"].fail(e.what());
    }
  }

  void kernels() {
    ManifestField ks = root_["kernels"];
    for (size_t i = 0; i < ks.size(); ++i) {
      ManifestField k = ks[i];
      KernelInfo info;
      info.name = k["name"].str();
      std::string kind = k["kind"].str();
      std::optional<KernelKind> parsed = parse_kernel_kind(kind);
      if (!parsed) k["kind"].fail("unknown kernel kind '" + kind + "'");
      info.kind = *parsed;
      ManifestField bufs = k["buffers"];
      bool seen_output = false;
      for (size_t b = 0; b < bufs.size(); ++b) {
        KernelParam param = read_param(bufs[b], bound_);
        if (seen_output && !param.output) bufs[b].fail("inputs must come before outputs");
        seen_output |= param.output;
        info.num_reads += param.output ? 0 : 1;
        info.buffers.push_back(std::move(param));
      }
      ManifestField sizes = k["sizes"];
      for (size_t s = 0; s < sizes.size(); ++s) {
        // Each is a symbol the kernel reads (kir::Kernel::size_params), which
        // keeps a kernel's sizes consistent with the buffer shapes checked at run time.
        SymExpr size = sizes[s].expr();
        if (!size.is_symbol()) sizes[s].fail("expected a symbol the kernel reads, got '" + size.str() + "'");
        check_bound(size, sizes[s]);
        info.sizes.push_back(size);
      }
      if (info.num_reads == static_cast<int>(info.buffers.size())) bufs.fail("the kernel writes no buffer");
      const int num_buffers = static_cast<int>(info.buffers.size());
      if (info.kind == KernelKind::Gemm) info.gemm = GemmInfo{read_gemm(k["gemm"], num_buffers, bound_), read_algo(k["gemm"])};
      if (info.kind == KernelKind::Conv)
        info.conv = ConvInfo{read_conv(k["conv"], info.buffers, info.num_reads, bound_), read_algo(k["conv"])};
      // A gemm kernel with a launch is tcc's template, in the cubin; without, a cuBLASLt call.
      info.library_call = info.kind == KernelKind::Conv || (info.kind == KernelKind::Gemm && !k.has("launch"));
      if (!info.library_call) info.launch = read_launch(k["launch"], info.kind, info.buffers, info.num_reads, bound_);
      if (m_.host_library) {
        info.host = reinterpret_cast<HostKernelFn>(m_.host_library->symbol(info.name));
        if (!info.host) k["name"].fail("'" + info.name + "' is not defined in host.so");
        std::string epilogue = info.conv_epilogue();
        if (!epilogue.empty() && !m_.host_library->symbol(epilogue))
          k["conv"].fail("'" + epilogue + "', its epilogue, is not defined in host.so");
      }
      m_.kernels.push_back(std::move(info));
    }
  }

  // Whether calls draw random values: true where a kernel reads the random
  // offset, which host.so's kRandomOffsetAdvance then advances, or a fallback
  // runs a random op.
  void random() {
    ManifestField flag = root_["random"];
    m_.random = flag.boolean();
    for (const KernelInfo& k : m_.kernels) {
      if (!k.launch.random_offset) continue;
      if (!m_.random) flag.fail("false, but kernel '" + k.name + "' reads the random offset");
      if (m_.host_library && !m_.host_library->symbol(kRandomOffsetAdvance))
        flag.fail(std::string("'") + kRandomOffsetAdvance + "' is not defined in host.so");
    }
    for (const StepInfo& step : m_.steps) {
      const OpDef* def = step.fallback ? OpRegistry::get().lookup(*step.fallback) : nullptr;
      if (def && def->has(kRandom) && !m_.random)
        flag.fail("false, but fallback node '" + step.node + "' draws random values");
    }
  }

  void fallbacks() {
    bool any = false;
    ManifestField steps = root_["schedule"];
    for (size_t i = 0; i < steps.size(); ++i) any |= steps[i].has("fallback");
    any |= root_.has("binding_constants") && root_["binding_constants"]["steps"].size() > 0;
    if (!any) return;
    std::string path = module_file(m_.dir, kFallbackFile, steps);
    try {
      m_.fallback_model = parse_model(read_file(path, kFallbackFile), path);
    } catch (const Error& e) {
      throw BadModule(std::string("fallback.tir: ") + e.what());
    }
  }

  const Node* fallback_node(const ManifestField& f) {
    std::string name = f.str();
    for (const auto& n : m_.fallback_model->graph->nodes())
      if (n->name() == name) return n.get();
    f.fail("no node '" + name + "' in fallback.tir");
  }

  int value_id(const ManifestField& f) {
    std::string name = f.str();
    auto it = m_.value_ids.find(name);
    if (it == m_.value_ids.end())
      f.fail("'" + name + "' is not an input, weight, planned buffer, binding constant or output");
    return it->second;
  }

  std::vector<int> value_list(const ManifestField& f) {
    std::vector<int> ids;
    for (size_t i = 0; i < f.size(); ++i) ids.push_back(value_id(f[i]));
    return ids;
  }

  void schedule() {
    // Outputs join the value table unless they name an input, a weight or a binding constant.
    ManifestField outs = root_["outputs"];
    for (size_t i = 0; i < m_.outputs.size(); ++i) {
      auto it = m_.value_ids.find(m_.outputs[i].name);
      if (it != m_.value_ids.end()) {
        const ValueInfo& v = m_.values[it->second];
        if (v.where == ValueInfo::Where::Buffer || v.where == ValueInfo::Where::Output)
          outs[i]["name"].fail("output '" + m_.outputs[i].name + "' is also a planned buffer or another output");
        m_.output_values.push_back(it->second);
      } else {
        m_.output_values.push_back(add_value(outs[i], ValueInfo::Where::Output, static_cast<int>(i), m_.outputs[i]));
      }
    }
    ManifestField steps = root_["schedule"];
    for (size_t i = 0; i < steps.size(); ++i) {
      ManifestField s = steps[i];
      StepInfo step;
      step.reads = value_list(s["reads"]);
      step.writes = value_list(s["writes"]);
      for (size_t w = 0; w < step.writes.size(); ++w) {
        ValueInfo::Where where = m_.values[step.writes[w]].where;
        if (where == ValueInfo::Where::Input || where == ValueInfo::Where::Weight ||
            where == ValueInfo::Where::BindingConstant)
          s["writes"][w].fail("a step may not write an input, a weight or a binding constant");
      }
      if (s.has("kernel")) {
        step.kernel = static_cast<int>(s["kernel"].integer(0, static_cast<int64_t>(m_.kernels.size()) - 1));
        step.node = s["node"].str();
        const KernelInfo& k = m_.kernels[step.kernel];
        if (step.reads.size() != static_cast<size_t>(k.num_reads) ||
            step.reads.size() + step.writes.size() != k.buffers.size())
          s.fail("binds " + std::to_string(step.reads.size()) + " reads and " + std::to_string(step.writes.size()) +
                 " writes to kernel '" + k.name + "', which reads " + std::to_string(k.num_reads) + " and writes " +
                 std::to_string(k.buffers.size() - k.num_reads) + " buffers");
        for (size_t b = 0; b < k.buffers.size(); ++b) {
          int id = b < step.reads.size() ? step.reads[b] : step.writes[b - step.reads.size()];
          if (m_.values[id].sig.dtype != k.buffers[b].dtype)
            s.fail("value '" + m_.values[id].sig.name + "' is " + std::string(dtype_name(m_.values[id].sig.dtype)) +
                   " but buffer " + std::to_string(b) + " of kernel '" + k.name + "' is " +
                   std::string(dtype_name(k.buffers[b].dtype)));
        }
      } else if (s.has("fallback")) {
        step.fallback = fallback_node(s["fallback"]);
        step.node = step.fallback->name();
        check_fallback(*step.fallback, step, s);
      } else {
        s.fail("neither a kernel nor a fallback step");
      }
      m_.steps.push_back(std::move(step));
    }
    binding_steps();
    value_symbols();
  }

  // A data-dependent size is the `axis` dim of a value a fallback step writes,
  // declared with that symbol alone there.
  void value_symbols() {
    ManifestField syms = root_["symbols"];
    for (const std::string& name : value_symbol_names_) {
      ManifestField s = syms[name.c_str()];
      int id = value_id(s["value"]);
      const TensorSig& sig = m_.values[id].sig;
      int64_t axis = s["axis"].integer(0, static_cast<int64_t>(sig.shape.size()) - 1);
      if (sig.shape[axis] != SymExpr::symbol(name)) s["axis"].fail("'" + sig.name + "' is not of size '" + name + "' there");
      bool by_fallback = std::any_of(m_.steps.begin(), m_.steps.end(), [&](const StepInfo& step) {
        return step.fallback && std::find(step.writes.begin(), step.writes.end(), id) != step.writes.end();
      });
      if (!by_fallback) s["value"].fail("no fallback step writes '" + sig.name + "'");
      m_.value_symbols[name] = {id, static_cast<int>(axis)};
    }
  }

  // Fallback nodes that write every binding constant once, each reading
  // weights, constants written before it, and, when it reads only shapes
  // (Shape, Size), any value.
  void binding_steps() {
    if (!root_.has("binding_constants")) return;
    ManifestField steps = root_["binding_constants"]["steps"];
    std::vector<bool> written(m_.binding_constants.size(), false);
    for (size_t i = 0; i < steps.size(); ++i) {
      ManifestField s = steps[i];
      StepInfo step;
      step.reads = value_list(s["reads"]);
      step.writes = value_list(s["writes"]);
      step.fallback = fallback_node(s["fallback"]);
      step.node = step.fallback->name();
      check_fallback(*step.fallback, step, s);
      const OpDef* def = OpRegistry::get().lookup(*step.fallback);
      bool shape_only = def != nullptr && def->has(kShapeOnly);
      for (size_t r = 0; r < step.reads.size(); ++r) {
        const ValueInfo& v = m_.values[step.reads[r]];
        bool ok = shape_only || v.where == ValueInfo::Where::Weight ||
                  (v.where == ValueInfo::Where::BindingConstant && written[v.index]);
        if (!ok) s["reads"][r].fail("a binding step reads weights and the binding constants earlier steps wrote");
      }
      for (size_t w = 0; w < step.writes.size(); ++w) {
        const ValueInfo& v = m_.values[step.writes[w]];
        if (v.where != ValueInfo::Where::BindingConstant || written[v.index])
          s["writes"][w].fail("a binding step writes binding constants no other step writes");
        written[v.index] = true;
      }
      m_.binding_steps.push_back(std::move(step));
    }
    for (size_t i = 0; i < written.size(); ++i)
      if (!written[i])
        root_["binding_constants"]["values"][i].fail("no binding step writes '" + m_.binding_constants[i].name + "'");
  }

  // A fallback node reads values of the schedule (by name) or constants of
  // fallback.tir, and writes values of the schedule.
  void check_fallback(const Node& n, const StepInfo& step, const ManifestField& s) {
    for (const Value* v : n.inputs()) {
      if (!v || v->is_initializer()) continue;
      auto it = m_.value_ids.find(v->name());
      if (it == m_.value_ids.end() || std::find(step.reads.begin(), step.reads.end(), it->second) == step.reads.end())
        s["reads"].fail("fallback node '" + n.name() + "' reads '" + v->name() + "', which the step does not list");
    }
    for (int id : step.writes) {
      const std::string& name = m_.values[id].sig.name;
      auto produced = std::find_if(n.outputs().begin(), n.outputs().end(),
                                   [&](const Value* v) { return v->name() == name; });
      if (produced == n.outputs().end())
        s["writes"].fail("fallback node '" + n.name() + "' has no output '" + name + "'");
    }
  }

  int input_index(const std::string& name) const {
    for (size_t i = 0; i < m_.inputs.size(); ++i)
      if (m_.inputs[i].name == name) return static_cast<int>(i);
    return -1;
  }

  // The guard set as explain prints it: TENSOR_MATCH (dtype, sizes),
  // EQUALS_MATCH (a scalar input's value) and SHAPE_ENV relations whose
  // operands are sizes spelled `x.size()[1]`, symbols sN introduced by a
  // floor (`1 <= sN`) with their sources, and the manifest's own symbols.
  void guards() {
    if (!root_.has("guards")) return;
    ManifestField gs = root_["guards"];
    std::map<std::string, SymExpr> shape_symbols;  // sN and source spellings -> placeholder symbols
    for (size_t i = 0; i < gs.size(); ++i) {
      ManifestField g = gs[i];
      std::string kind = g["kind"].str();
      if (kind == "TENSOR_MATCH") {
        int input = input_index(g["input"].str());
        if (input < 0) g["input"].fail("'" + g["input"].str() + "' is not an input");
        std::optional<DType> t = parse_torch_dtype(g["dtype"].str());
        if (!t || dtype_size(*t) == 0) g["dtype"].fail("unknown dtype '" + g["dtype"].str() + "'");
        Guard dtype_guard;
        dtype_guard.kind = Guard::Kind::Dtype;
        dtype_guard.input = input;
        dtype_guard.dtype = *t;
        dtype_guard.text = m_.inputs[input].name + " is " + g["dtype"].str();
        m_.guards.push_back(dtype_guard);
        ManifestField sizes = g["size"];
        if (sizes.size() != m_.inputs[input].shape.size())
          sizes.fail("rank " + std::to_string(sizes.size()) + " disagrees with input '" + m_.inputs[input].name + "'");
        for (size_t d = 0; d < sizes.size(); ++d) {
          if (sizes[d].raw().is_null()) continue;
          Guard size_guard;
          size_guard.kind = Guard::Kind::Size;
          size_guard.input = input;
          size_guard.axis = static_cast<int>(d);
          size_guard.size = sizes[d].integer();
          size_guard.text = m_.inputs[input].name + ".size()[" + std::to_string(d) + "] == " +
                            std::to_string(size_guard.size);
          m_.guards.push_back(size_guard);
        }
      } else if (kind == "EQUALS_MATCH") {
        int input = input_index(g["input"].str());
        if (input < 0) g["input"].fail("'" + g["input"].str() + "' is not an input");
        Guard eq;
        eq.kind = Guard::Kind::ValuesEqual;
        eq.input = input;
        // A scalar's "value", or the "values" of an input compiled for them (--specialize).
        if (g.has("values")) {
          ManifestField values = g["values"];
          for (size_t v = 0; v < values.size(); ++v) eq.values.push_back(values[v].number());
        } else {
          eq.values = {g["value"].number()};
        }
        eq.text = g["expr"].str();
        m_.guards.push_back(eq);
      } else if (kind == "SHAPE_ENV") {
        m_.guards.push_back(shape_guard(g));
      } else {
        g["kind"].fail("unknown guard kind '" + kind + "'");
      }
    }
  }

  // Rewrites the sources a SHAPE_ENV guard mentions into placeholder symbols
  // (`x.size()[1]` -> `__x_1`) bound from the input shapes at run time.
  Guard shape_guard(const ManifestField& g) {
    Guard guard;
    guard.text = g["expr"].str();
    std::string text = guard.text, needed_by;
    if (g.has("sources")) {
      ManifestField sources = g["sources"];
      // Each spelling with its placeholder; none for a node name (fact guards cite the node that needs them).
      std::vector<std::pair<std::string, std::optional<std::string>>> spellings;
      for (size_t s = 0; s < sources.size(); ++s) {
        const std::string src = sources[s].str();
        spellings.emplace_back(src, source_symbol(src));
        if (spellings.back().second) guard.sources.emplace_back(src, SymExpr::symbol(*spellings.back().second));
      }
      // `1 <= sN`: sN is the size of the first source.
      const std::optional<std::string> first = spellings.empty() ? std::nullopt : spellings.front().second;
      const std::string first_spelling = spellings.empty() ? "" : spellings.front().first;
      // Longest first, so `x.size()[1]` is not cut short by a shorter spelling inside it.
      std::sort(spellings.begin(), spellings.end(),
                [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
      for (const auto& [src, placeholder] : spellings) {
        if (!placeholder) {
          needed_by = src;
          continue;
        }
        for (size_t at = text.find(src); at != std::string::npos; at = text.find(src, at + placeholder->size()))
          text.replace(at, src.size(), *placeholder);
      }
      if (size_t le = text.find(" <= "); le != std::string::npos && first) {
        const std::string floor = text.substr(0, le), sym = text.substr(le + 4);
        if (!floor.empty() && std::all_of(floor.begin(), floor.end(), ::isdigit) && is_symbol_name(sym)) {
          shape_aliases_[sym] = SymExpr::symbol(*first);
          alias_spellings_[sym] = first_spelling;
        }
      }
    }
    auto side = [&](const std::string& s) {
      std::optional<SymExpr> e = SymExpr::parse(s);
      if (!e) g["expr"].fail("cannot read '" + guard.text + "'");
      return e->substitute(shape_aliases_);
    };
    static const std::pair<const char*, Guard::Cmp> kCmps[] = {
        {" == ", Guard::Cmp::Eq}, {" != ", Guard::Cmp::Ne}, {" <= ", Guard::Cmp::Le},
        {" >= ", Guard::Cmp::Ge}, {" < ", Guard::Cmp::Lt},  {" > ", Guard::Cmp::Gt}};
    for (auto [spelling, cmp] : kCmps) {
      size_t at = text.find(spelling);
      if (at == std::string::npos) continue;
      std::string lhs = text.substr(0, at);
      size_t mod = lhs.rfind(" % ");
      if (mod != std::string::npos) {
        std::optional<SymExpr> m = SymExpr::parse(lhs.substr(mod + 3));
        if (!m || !m->is_constant() || m->constant_value() <= 0) g["expr"].fail("cannot read '" + guard.text + "'");
        guard.modulus = m->constant_value();
        lhs = lhs.substr(0, mod);
      }
      const std::string rhs = text.substr(at + std::string(spelling).size());
      guard.lhs = side(lhs);
      guard.rhs = side(rhs);
      // A fact (a guard citing no size of its own) reports its sN as the sizes they stand for.
      if (guard.sources.empty())
        for (const std::string& side_text : {lhs, rhs})
          for (const std::string& s : SymExpr::parse(side_text)->symbols())
            if (auto alias = alias_spellings_.find(s); alias != alias_spellings_.end())
              guard.sources.emplace_back(s + " = " + alias->second, shape_aliases_.at(s));
      guard.cmp = cmp;
      for (const SymExpr* e : {&guard.lhs, &guard.rhs})
        for (const std::string& s : e->symbols())
          if (!m_.symbols.count(s) && !placeholders_.count(s))
            g["expr"].fail("'" + guard.text + "' mentions '" + s + "', which no input gives");
      guard.needed_by = needed_by;
      return guard;
    }
    g["expr"].fail("cannot read '" + guard.text + "'");
  }

  // `x.size()[1]` -> a placeholder symbol for dim 1 of input x (registered in
  // m_.symbols so that binding evaluates it); nullopt when it is not a size.
  std::optional<std::string> source_symbol(const std::string& src) {
    size_t at = src.rfind(".size()[");
    if (at == std::string::npos || src.back() != ']') return std::nullopt;
    int input = input_index(src.substr(0, at));
    if (input < 0) return std::nullopt;
    std::string digits = src.substr(at + 8, src.size() - at - 9);
    if (digits.empty() || digits.size() > 3 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
      return std::nullopt;
    int axis = std::stoi(digits);
    if (axis >= static_cast<int>(m_.inputs[input].shape.size())) return std::nullopt;
    std::string name = "__in" + std::to_string(input) + "_" + std::to_string(axis);
    m_.symbols.emplace(name, Module::SymbolSource{input, axis});
    placeholders_.insert(name);
    return name;
  }

  void cuda() {
    if (!root_.has("cuda")) return;
    ManifestField bins = root_["cuda"]["binaries"];
    for (size_t i = 0; i < bins.size(); ++i) {
      std::string arch = bins[i]["arch"].str();
      if (arch.rfind("sm_", 0) != 0 && arch.rfind("compute_", 0) != 0) bins[i]["arch"].fail("unknown arch '" + arch + "'");
      m_.cuda_binaries.push_back({arch, module_file(m_.dir, bins[i]["file"].str(), bins[i]["file"])});
    }
  }

  Module& m_;
  ManifestField root_;
  std::map<std::string, SymExpr> shape_aliases_;
  std::map<std::string, std::string> alias_spellings_;  // sN -> the size it stands for, "x.size()[1]"
  std::set<std::string> placeholders_;
  std::set<std::string> value_symbol_names_;  // symbols a fallback's value binds (value_symbols())
};

}  // namespace

std::unique_ptr<Module> load_module(const std::string& dir) {
  auto m = std::make_unique<Module>();
  m->dir = dir;
  if (!fs::is_directory(dir)) throw BadModule(dir + ": not a directory");
  std::string text = read_file((fs::path(dir) / kManifestFile).string(), kManifestFile);
  json manifest = json::parse(text, nullptr, false);
  if (manifest.is_discarded()) throw BadModule("manifest.json: not valid JSON");
  Loader(*m, manifest).load();
  return m;
}

void set_random_offset(Module& m, uint64_t offset) {
  m.random_offset = offset;
  m.random_offset_on_device = false;
}

}  // namespace tcc::runtime
