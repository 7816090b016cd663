// Binding a call's inputs to a module: symbols from input dims, the input
// signature and guard set checked, every value's shape and the arena layout
// evaluated. Shared by the host and CUDA runs.
#include <algorithm>

#include "module.h"

namespace tcc::runtime {

namespace {

std::string dims_text(const tcc_tensor& t) {
  std::string s = "[";
  for (int32_t d = 0; d < t.rank; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
  return s + "]";
}

std::string sig_text(const TensorSig& s) {
  std::string text = std::string(dtype_name(s.dtype)) + "[";
  for (size_t d = 0; d < s.shape.size(); ++d) text += (d ? ", " : "") + s.shape[d].str();
  return text + "]";
}

void check_tensor_arg(const tcc_tensor& t, const TensorSig& sig, const char* role) {
  auto what = [&] { return std::string(role) + " '" + sig.name + "'"; };
  if (t.rank < 0 || (t.rank > 0 && !t.shape))
    throw InvalidArgument(what() + ": rank " + std::to_string(t.rank) + " with no shape");
  if (static_cast<DType>(t.dtype) != sig.dtype || static_cast<size_t>(t.rank) != sig.shape.size()) {
    std::string given = t.rank > 0 ? dims_text(t) : "[]";
    throw InvalidArgument(what() + ": expected " + sig_text(sig) + ", got dtype " + std::to_string(t.dtype) + " rank " +
                          std::to_string(t.rank) + " " + given);
  }
  for (int32_t d = 0; d < t.rank; ++d)
    if (t.shape[d] < 0) throw InvalidArgument(what() + ": negative dim " + std::to_string(t.shape[d]));
}

bool compare(int64_t a, Guard::Cmp cmp, int64_t b) {
  switch (cmp) {
    case Guard::Cmp::Eq: return a == b;
    case Guard::Cmp::Ne: return a != b;
    case Guard::Cmp::Le: return a <= b;
    case Guard::Cmp::Lt: return a < b;
    case Guard::Cmp::Ge: return a >= b;
    case Guard::Cmp::Gt: return a > b;
  }
  return false;
}

// Whether input t holds value guard g's values (its element count alone
// without a reader).
bool values_equal(const Guard& g, const tcc_tensor& t, ValueReader read_values, void* ctx) {
  int64_t numel = 1;
  for (int32_t d = 0; d < t.rank; ++d) numel *= t.shape[d];
  if (numel != static_cast<int64_t>(g.values.size())) return false;
  if (!read_values) return true;
  DType dtype = static_cast<DType>(t.dtype);
  size_t bytes = static_cast<size_t>(numel) * dtype_size(dtype);
  Tensor v = Tensor::from_bytes(dtype, {numel}, read_values(t, bytes, ctx));
  for (int64_t i = 0; i < numel; ++i)
    if (v.get_f64(i) != g.values[static_cast<size_t>(i)]) return false;
  return true;
}

[[noreturn]] void guard_failed(const Guard& g, const std::string& values) {
  throw InvalidArgument("inputs fail the module's guard '" + g.text + "'" + values +
                        (g.needed_by.empty() ? "" : ", which " + g.needed_by + " relies on"));
}

void check_guards(const Module& m, const Binding& b, const tcc_tensor* inputs, ValueReader read_values, void* ctx) {
  for (const Guard& g : m.guards) {
    const tcc_tensor* t = g.input >= 0 ? &inputs[g.input] : nullptr;
    bool ok = true;
    std::string values;  // a failed Shape guard's sizes
    switch (g.kind) {
      case Guard::Kind::Dtype: ok = static_cast<DType>(t->dtype) == g.dtype; break;
      case Guard::Kind::Size: ok = t->shape[g.axis] == g.size; break;
      case Guard::Kind::ValuesEqual: ok = values_equal(g, *t, read_values, ctx); break;
      case Guard::Kind::Shape: {
        int64_t lhs = evaluate(g.lhs, b, "guard '" + g.text + "'");
        int64_t rhs = evaluate(g.rhs, b, "guard '" + g.text + "'");
        if (g.modulus > 0) lhs = ((lhs % g.modulus) + g.modulus) % g.modulus;
        ok = compare(lhs, g.cmp, rhs);
        for (size_t s = 0; !ok && s < g.sources.size(); ++s)
          values += (s == 0 ? " (" : ", ") + g.sources[s].first + " = " +
                    std::to_string(evaluate(g.sources[s].second, b, "guard '" + g.text + "'")) +
                    (s + 1 == g.sources.size() ? ")" : "");
        break;
      }
    }
    if (!ok) guard_failed(g, values);
  }
}

// Bytes of a value of this shape; InvalidArgument when they overflow.
int64_t value_bytes(const ValueInfo& info, const std::vector<int64_t>& shape) {
  int64_t numel = checked_numel(shape);
  int64_t size = static_cast<int64_t>(dtype_size(info.sig.dtype));
  if (numel < 0 || numel > INT64_MAX / size)
    throw InvalidArgument("these inputs make '" + info.sig.name + "' too large (" + shape_str(shape) + ")");
  return numel * size;
}

}  // namespace

int64_t evaluate(const SymExpr& e, const Binding& b, const std::string& what) {
  std::optional<int64_t> v = e.evaluate(b.symbols);
  if (!v) throw BadModule("manifest.json: " + what + ": '" + e.str() + "' does not evaluate");
  return *v;
}

int64_t evaluate(const SymExpr& e, const Binding& b, const KernelInfo& k, const char* field) {
  if (std::optional<int64_t> v = e.evaluate(b.symbols)) return *v;
  return evaluate(e, b, "kernel '" + k.name + "' " + field);
}

namespace {

// evaluate() for bind's expressions: `field` names the manifest field, built
// only for the message.
template <typename Field>
int64_t evaluate_field(const SymExpr& e, const Binding& b, const Field& field) {
  if (std::optional<int64_t> v = e.evaluate(b.symbols)) return *v;
  return evaluate(e, b, field());
}

// Whether e waits for a data-dependent size no step has produced yet.
bool pending(const Module& m, const Binding& b, const SymExpr& e) {
  for (const std::string& s : e.symbols())
    if (m.value_symbols.count(s) && !b.symbols.count(s)) return true;
  return false;
}

// Every value's shape and bytes but the inputs', the arena's layout and the
// binding constants' block, under the symbols bound so far. What waits for a
// data-dependent size is left unknown (shape empty, bytes and offset -1), and
// the arena is then the part the run can use before it: up to the end of the
// last buffer placed. Once every symbol is bound, all of it is evaluated.
void evaluate_sizes(const Module& m, Binding& b) {
  b.complete = true;
  for (size_t v = 0; v < m.values.size(); ++v) {
    const ValueInfo& info = m.values[v];
    if (info.where == ValueInfo::Where::Input) continue;
    std::vector<int64_t>& shape = b.shapes[v];
    shape.clear();
    b.nbytes[v] = -1;
    if (std::any_of(info.sig.shape.begin(), info.sig.shape.end(), [&](const SymExpr& d) { return pending(m, b, d); })) {
      b.complete = false;
      continue;
    }
    for (const SymExpr& d : info.sig.shape) {
      shape.push_back(evaluate_field(d, b, [&] { return "shape of '" + info.sig.name + "'"; }));
      if (shape.back() < 0)
        throw InvalidArgument("these inputs give '" + info.sig.name + "' a negative dim (" + d.str() + " = " +
                              std::to_string(shape.back()) + ")");
    }
    b.nbytes[v] = value_bytes(info, shape);
  }

  bool whole_arena = !pending(m, b, m.arena_bytes);
  b.arena_bytes = whole_arena ? evaluate(m.arena_bytes, b, "memory.arena_bytes") : 0;
  b.buffer_offsets.assign(m.buffers.size(), -1);
  for (size_t i = 0; i < m.buffers.size(); ++i) {
    const BufferInfo& range = m.buffer_ranges[i];
    if (pending(m, b, range.offset) || pending(m, b, range.nbytes)) continue;
    auto where = [&] { return "memory.buffers[" + std::to_string(i) + "]"; };
    int64_t offset = evaluate_field(range.offset, b, [&] { return where() + ".offset"; });
    int64_t nbytes = evaluate_field(range.nbytes, b, [&] { return where() + ".nbytes"; });
    int64_t need = b.nbytes[m.value_ids.at(m.buffers[i].name)];
    if (!whole_arena && offset >= 0 && nbytes >= 0 && offset <= INT64_MAX - nbytes)
      b.arena_bytes = std::max(b.arena_bytes, offset + nbytes);
    if (offset < 0 || offset % AlignedBytes::kAlignment != 0 || nbytes < need || offset > b.arena_bytes ||
        nbytes > b.arena_bytes - offset)
      throw BadModule("manifest.json: " + where() + " ('" + m.buffers[i].name + "'): " + std::to_string(nbytes) +
                      " bytes at offset " + std::to_string(offset) + " do not hold its " + std::to_string(need) +
                      " bytes inside the " + std::to_string(b.arena_bytes) + "-byte arena");
    b.buffer_offsets[i] = offset;
  }
  b.constant_offsets.clear();
  b.constant_bytes = 0;
  for (size_t v = 0; v < m.values.size(); ++v) {
    if (m.values[v].where != ValueInfo::Where::BindingConstant) continue;
    constexpr int64_t kAlign = AlignedBytes::kAlignment;
    b.constant_offsets.push_back(b.constant_bytes);
    b.constant_bytes += (b.nbytes[v] + kAlign - 1) / kAlign * kAlign;
  }
}

}  // namespace

Binding bind(const Module& m, const tcc_tensor* inputs, size_t num_inputs, ValueReader read_values, void* ctx) {
  if (num_inputs != m.inputs.size())
    throw InvalidArgument("expected " + std::to_string(m.inputs.size()) + " inputs, got " + std::to_string(num_inputs));
  if (num_inputs > 0 && !inputs) throw InvalidArgument("inputs is null");
  for (size_t i = 0; i < num_inputs; ++i) check_tensor_arg(inputs[i], m.inputs[i], "input");

  Binding b;
  // A derived dim that the scale does not divide then fails the input dims' check below.
  for (const auto& [name, source] : m.symbols) b.symbols[name] = inputs[source.input].shape[source.axis] / source.scale;
  for (size_t i = 0; i < num_inputs; ++i) {
    const TensorSig& sig = m.inputs[i];
    for (size_t d = 0; d < sig.shape.size(); ++d) {
      int64_t want = evaluate_field(sig.shape[d], b, [&] { return "inputs[" + std::to_string(i) + "].shape"; });
      if (want != inputs[i].shape[d])
        throw InvalidArgument("input '" + sig.name + "': dim " + std::to_string(d) + " is " +
                              std::to_string(inputs[i].shape[d]) + ", expected " + sig.shape[d].str() +
                              (sig.shape[d].is_constant() ? "" : " = " + std::to_string(want)) + " (" +
                              sig_text(sig) + ")");
    }
  }
  check_guards(m, b, inputs, read_values, ctx);

  b.shapes.resize(m.values.size());
  b.nbytes.resize(m.values.size());
  for (size_t i = 0; i < num_inputs; ++i) {
    int v = m.value_ids.at(m.inputs[i].name);
    b.shapes[v].assign(inputs[i].shape, inputs[i].shape + inputs[i].rank);
    b.nbytes[v] = value_bytes(m.values[v], b.shapes[v]);
    if (b.nbytes[v] > 0 && !inputs[i].data) throw InvalidArgument("input '" + m.inputs[i].name + "': data is null");
  }
  evaluate_sizes(m, b);
  return b;
}

void check_value_guards(const Module& m, const tcc_tensor* inputs, ValueReader read_values, void* ctx) {
  for (const Guard& g : m.guards)
    if (g.kind == Guard::Kind::ValuesEqual && !values_equal(g, inputs[g.input], read_values, ctx)) guard_failed(g, "");
}

void bind_value_symbols(const Module& m, Binding& b, int value, const std::vector<int64_t>& shape) {
  for (const auto& [name, source] : m.value_symbols)
    if (source.first == value && static_cast<size_t>(source.second) < shape.size())
      b.symbols[name] = shape[source.second];
  evaluate_sizes(m, b);
}

void check_outputs(const Module& m, const Binding& b, const tcc_tensor* outputs, size_t num_outputs) {
  if (num_outputs != m.outputs.size())
    throw InvalidArgument("expected " + std::to_string(m.outputs.size()) + " outputs, got " +
                          std::to_string(num_outputs));
  if (num_outputs > 0 && !outputs) throw InvalidArgument("outputs is null");
  for (size_t i = 0; i < num_outputs; ++i) {
    const tcc_tensor& t = outputs[i];
    if (b.nbytes[m.output_values[i]] < 0) {  // its dims are the allocator's to learn: dtype and rank only
      auto rank = static_cast<int32_t>(m.outputs[i].shape.size());
      if (static_cast<DType>(t.dtype) != m.outputs[i].dtype || t.rank != rank)
        throw InvalidArgument("output '" + m.outputs[i].name + "': expected " + sig_text(m.outputs[i]));
      if (t.data) throw InvalidArgument("output '" + m.outputs[i].name + "': its size depends on the data, so the "
                                        "run allocates it (pass data NULL and set an output allocator)");
      if (!m.output_allocator)
        throw InvalidArgument("output '" + m.outputs[i].name + "': its size depends on the data; set an output "
                              "allocator (tcc_module_set_output_allocator) for the run to ask for its memory");
      continue;
    }
    check_tensor_arg(t, m.outputs[i], "output");
    const std::vector<int64_t>& want = b.shapes[m.output_values[i]];
    if (!std::equal(want.begin(), want.end(), t.shape, t.shape + t.rank))
      throw InvalidArgument("output '" + m.outputs[i].name + "': shape " + dims_text(t) + ", expected " +
                            shape_str(want));
    if (!t.data && b.nbytes[m.output_values[i]] > 0)
      throw InvalidArgument("output '" + m.outputs[i].name + "': data is null");
  }
}

void allocate_sized_outputs(const Module& m, const Binding& b, const tcc_tensor* outputs,
                            std::vector<void*>& allocated) {
  allocated.resize(m.outputs.size(), nullptr);
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    int id = m.output_values[i];
    if (outputs[i].data || allocated[i] || b.nbytes[id] < 0 || m.values[id].where != ValueInfo::Where::Output) continue;
    allocated[i] = m.output_allocator(i, b.shapes[id], static_cast<size_t>(b.nbytes[id]));
    if (!allocated[i] && b.nbytes[id] > 0)
      throw InvalidArgument("output '" + m.outputs[i].name + "': the output allocator gave no memory for " +
                            shape_str(b.shapes[id]));
  }
}

void check_kernel_buffers(const Module& m, const StepInfo& step, const Binding& b) {
  const KernelInfo& k = m.kernels[step.kernel];
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    int id = i < step.reads.size() ? step.reads[i] : step.writes[i - step.reads.size()];
    std::vector<int64_t> shape;
    for (const SymExpr& d : k.buffers[i].shape) shape.push_back(evaluate(d, b, k, "buffers"));
    int64_t numel = checked_numel(shape);
    if (numel < 0 || numel > b.nbytes[id] / static_cast<int64_t>(dtype_size(k.buffers[i].dtype)))
      throw BadModule("manifest.json: kernel '" + k.name + "' buffer " + std::to_string(i) + " needs more than the " +
                      std::to_string(b.nbytes[id]) + " bytes of '" + m.values[id].sig.name + "' (step '" + step.node +
                      "')");
  }
}

}  // namespace tcc::runtime
