// Fallback steps: one node of fallback.tir run by the reference interpreter on
// host copies of the values it reads, its results copied into the values it
// writes. Binding steps are fallback steps run once per binding, into the
// block of binding constants.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "module.h"
#include "src/interp/interpreter.h"
#include "src/ops/op_registry.h"

namespace tcc::runtime {

void run_fallback(const Module& m, const StepInfo& step, const Binding& b, const std::function<HostSpan(int)>& host,
                  const SizedValue& sized) {
  const Node& n = *step.fallback;
  const OpDef* def = OpRegistry::get().lookup(n);
  bool shape_only = def != nullptr && def->has(kShapeOnly);
  auto value = [&](const Value* v) {
    if (v->is_initializer()) return v->initializer();
    int id = m.value_ids.at(v->name());
    if (shape_only) return Tensor::shape_only(m.values[id].sig.dtype, b.shapes[id]);
    HostSpan span = host(id);
    return Tensor::from_bytes(m.values[id].sig.dtype, b.shapes[id],
                              std::vector<std::byte>(span.data, span.data + span.nbytes));
  };
  std::vector<Tensor> read(n.num_inputs());
  std::vector<const Tensor*> args(n.num_inputs(), nullptr);
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    if (!n.input(i)) continue;
    read[i] = value(n.input(i));
    args[i] = &read[i];
  }
  // What the node's regions read of fallback.tir (a Scan body's constants).
  std::unordered_map<const Value*, Tensor> captured;
  for (const Value* v : n.captures()) captured.emplace(v, value(v));
  Interpreter interp(b.symbols);
  interp.set_random_offset(m.random_offset);
  std::vector<Tensor> results = interp.eval_node(n, args, captured);
  for (int id : step.writes) {
    const ValueInfo& info = m.values[id];
    auto out = std::find_if(n.outputs().begin(), n.outputs().end(),
                            [&](const Value* v) { return v->name() == info.sig.name; });
    size_t j = static_cast<size_t>(out - n.outputs().begin());
    if (j >= results.size() || !results[j].defined())
      throw BadModule("fallback.tir: node '" + n.name() + "' did not produce '" + info.sig.name + "'");
    const Tensor& t = results[j];
    if (b.nbytes[id] < 0 && sized && t.dtype() == info.sig.dtype && t.rank() == info.sig.shape.size())
      sized(id, t.shape());
    if (t.dtype() != info.sig.dtype || t.shape() != b.shapes[id])
      throw BadModule("fallback.tir: node '" + n.name() + "' produced " + std::string(dtype_name(t.dtype())) +
                      shape_str(t.shape()) + " for '" + info.sig.name + "', the module planned " +
                      std::string(dtype_name(info.sig.dtype)) + shape_str(b.shapes[id]));
    HostSpan span = host(id);
    if (t.nbytes() > 0) std::memcpy(span.data, t.raw(), t.nbytes());
  }
}

AlignedBytes compute_binding_constants(const Module& m, const Binding& b) {
  AlignedBytes block(static_cast<size_t>(b.constant_bytes));
  auto host = [&](int id) {
    const ValueInfo& info = m.values[id];
    if (info.where == ValueInfo::Where::Weight)
      return HostSpan{m.weight_data.data() + m.weight_ranges[info.index].offset, b.nbytes[id]};
    if (info.where == ValueInfo::Where::BindingConstant)
      return HostSpan{block.data() + b.constant_offsets[info.index], b.nbytes[id]};
    throw BadModule("manifest.json: binding step reads '" + info.sig.name +
                    "', which is neither a weight nor a binding constant");
  };
  for (const StepInfo& step : m.binding_steps) run_fallback(m, step, b, host);
  return block;
}

}  // namespace tcc::runtime
