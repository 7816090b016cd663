#include "src/ops/op_registry.h"

#include <algorithm>

#include "src/interp/interpreter.h"
#include "src/ops/families.h"

namespace tcc {

InferContext::InferContext(const Node& node, ShapeEnv& env, std::vector<Type> input_types,
                           std::vector<const Tensor*> input_consts, std::vector<const Dims*> input_values,
                           std::function<std::vector<Type>(const Graph&, const std::vector<Type>&)> infer_region)
    : out_types(node.num_outputs()),
      out_values(node.num_outputs()),
      out_consts(node.num_outputs()),
      node_(node),
      env_(env),
      input_types_(std::move(input_types)),
      input_consts_(std::move(input_consts)),
      input_values_(std::move(input_values)),
      derived_values_(input_types_.size()),
      infer_region_(std::move(infer_region)) {}

const Type& InferContext::input_type(size_t i) const {
  static const Type kUnknown;
  return i < input_types_.size() ? input_types_[i] : kUnknown;
}

const Type& InferContext::ranked_input(size_t i) const {
  const Type& t = input_type(i);
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  if (!t.is_tensor() || !t.has_rank())
    fail("input " + std::to_string(i) + " ('" + node_.input(i)->name() +
         "') needs a tensor type of known rank, got " + t.str());
  return t;
}

const Tensor* InferContext::input_const(size_t i) const {
  return i < input_consts_.size() ? input_consts_[i] : nullptr;
}

const Dims* InferContext::input_values(size_t i) const {
  if (i >= input_values_.size()) return nullptr;
  if (input_values_[i]) return input_values_[i];
  if (derived_values_[i]) return derived_values_[i].get();
  const Tensor* c = input_const(i);
  // Only small integer tensors carry shape-like values.
  if (!c || !is_integer(c->dtype()) || c->rank() > 1 || c->numel() > 64) return nullptr;
  auto d = std::make_unique<Dims>();
  for (int64_t k = 0; k < c->numel(); ++k) d->push_back(Dim(c->get_i64(k)));
  derived_values_[i] = std::move(d);
  return derived_values_[i].get();
}

void InferContext::set_output_type(size_t i, Type t) {
  TCC_CHECK(i < out_types.size()) << node_.op_type() << " has no output " << i;
  out_types[i] = std::move(t);
}

void InferContext::set_output_values(size_t i, Dims v) {
  TCC_CHECK(i < out_values.size()) << node_.op_type() << " has no output " << i;
  out_values[i] = std::make_unique<Dims>(std::move(v));
}

void InferContext::set_output_const(size_t i, Tensor t) {
  TCC_CHECK(i < out_consts.size()) << node_.op_type() << " has no output " << i;
  out_consts[i] = std::make_unique<Tensor>(std::move(t));
}

const Tensor& EvalContext::input(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required");
  return *inputs_[i];
}

std::vector<Tensor> EvalContext::run_region(const Graph& g, const std::vector<Tensor>& inputs) {
  return interp_.run_region(g, inputs);
}

const std::map<std::string, int64_t>& EvalContext::symbols() const { return interp_.symbols(); }

uint64_t EvalContext::random_offset() const { return interp_.random_offset(); }

const OpRegistry& OpRegistry::get() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_unary_float_ops(r);
    register_bitwise_ops(r);
    register_reduce_ops(r);
    register_reduction_ops(r);
    register_linalg_ops(r);
    register_einsum_ops(r);
    register_attention_ops(r);
    register_attention_grad_ops(r);
    register_rotary_embedding_ops(r);
    register_shape_ops(r);
    register_movement_ops(r);
    register_rearrange_ops(r);
    register_gather_scatter_ops(r);
    register_conv_pool_ops(r);
    register_conv_transpose_ops(r);
    register_normalization_ops(r);
    register_resize_ops(r);
    register_loss_ops(r);
    register_data_dependent_ops(r);
    register_control_flow_ops(r);
    register_recurrent_ops(r);
    register_signal_ops(r);
    register_quantization_ops(r);
    register_spatial_ops(r);
    register_sampling_ops(r);
    register_detection_ops(r);
    register_tcc_ops(r);
    register_sequence_ops(r);
    register_generator_ops(r);
    register_text_ops(r);
    return r;
  }();
  return registry;
}

OpDef& OpRegistry::add(OpDef def) {
  std::string key = def.domain + "::" + def.op_type;
  TCC_CHECK(!defs_.count(key)) << "op registered twice: " << key;
  return defs_.emplace(std::move(key), std::move(def)).first->second;
}

OpDef& OpDef::kernel_role(KernelRole role, std::function<bool(const Node&)> applies) {
  if (!applies) return kernel_role(role, [role](const Node&) { return role; });
  return kernel_role(role, [role, applies = std::move(applies)](const Node& n) {
    return applies(n) ? role : KernelRole::None;
  });
}

OpDef& OpDef::kernel_role(KernelRole declared, std::function<KernelRole(const Node&)> role) {
  declared_role = declared;
  kernel = std::move(role);
  return *this;
}

OpDef& OpDef::kernel_unless(KernelRole role, KernelRefusal why, std::function<bool(const Node&)> applies) {
  refusal = why;
  return kernel_role(role, [why = std::move(why), applies = std::move(applies)](const Node& n) {
    return why(n).empty() && (!applies || applies(n));
  });
}

OpDef& OpDef::kernel_unless(KernelRole declared, KernelRefusal why, std::function<KernelRole(const Node&)> role) {
  refusal = why;
  return kernel_role(declared, [why = std::move(why), role = std::move(role)](const Node& n) {
    return why(n).empty() ? role(n) : KernelRole::None;
  });
}

OpDef& OpDef::library_epilogue(uint32_t libraries, std::string name, KernelRefusal why) {
  epilogues = libraries;
  activation = std::move(name);
  epilogue_refusal = std::move(why);
  return *this;
}

OpDef& OpDef::with_trait(OpTrait t) {
  traits |= t;
  return *this;
}

OpDef& OpDef::shape_from_inputs(std::vector<size_t> inputs) {
  shape_inputs = std::move(inputs);
  return *this;
}

OpDef& OpDef::regions_chosen_by(RegionChoice choice) {
  region_choice = std::move(choice);
  return *this;
}

OpDef& OpDef::hint_at_break(std::string hint) {
  break_hint = std::move(hint);
  return *this;
}

OpDef& OpDef::under_autocast(AutocastClass a) {
  autocast = a;
  return *this;
}

OpDef& OpDef::keeps_under_autocast(std::function<bool(const Node&, size_t)> inputs,
                                   std::function<bool(const Node&, size_t)> f32_outputs) {
  autocast_keeps = std::move(inputs);
  f32_output = std::move(f32_outputs);
  return *this;
}

OpDef& OpDef::configured_by(std::vector<size_t> inputs) {
  config_inputs = std::move(inputs);
  return *this;
}

OpDef& OpDef::literals_at(std::vector<size_t> inputs) {
  literal_inputs = std::move(inputs);
  return *this;
}

OpDef& OpDef::commutes() {
  commutative = true;
  return *this;
}

OpDef& OpDef::pointwise_kernel(PointwiseFn f, std::function<bool(const Node&)> applies) {
  pointwise = std::move(f);
  return kernel_role(KernelRole::Pointwise, std::move(applies));
}

OpDef& OpDef::gradient(GradRule rule, GradApplies applies, SaveForGradient save) {
  grad = std::move(rule);
  grad_applies = std::move(applies);
  save_for_gradient = std::move(save);
  return *this;
}

OpDef& OpDef::decomposition(DecomposeFn f) {
  decompose = std::move(f);
  return *this;
}

OpDef& OpDef::trains_through_decomposition() {
  grad_by_decomposition = true;
  return *this;
}

const char* gpu_path(const OpDef& def) {
  if (def.declared_role == KernelRole::Contraction || def.declared_role == KernelRole::Convolution) return "library";
  // Control flow decomposes only where a node's shapes and constants allow it
  // (control_flow.cc), which the common node does not meet: the host. The
  // sequence ops, SequenceMap among them, decompose wherever their sequences'
  // structure is known at compile time (sequence.cc), as a module's inputs fix it.
  if (def.has(kControlFlow) && !def.has(kNonTensor)) return "host";
  if (def.declared_role != KernelRole::None || def.decompose) return "kernel";
  return "host";
}

const OpDef* OpRegistry::lookup(const std::string& domain, const std::string& op_type, int64_t opset) const {
  auto it = defs_.find((domain == "ai.onnx" ? "" : domain) + "::" + op_type);
  if (it == defs_.end() || opset < it->second.since_version) return nullptr;
  return &it->second;
}

std::string OpRegistry::why_unsupported(const Node& n) const {
  auto it = defs_.find(n.domain() + "::" + n.op_type());
  std::string dom = n.domain().empty() ? "ai.onnx" : n.domain();
  if (it == defs_.end()) {
    for (const auto& [k, d] : defs_)
      if (d.op_type == n.op_type())
        return "op '" + n.op_type() + "' is not supported in domain '" + dom + "' (tcc knows it in '" +
               (d.domain.empty() ? "ai.onnx" : d.domain) + "')";
    return "op '" + n.op_type() + "' (domain '" + dom + "') is not supported by tcc";
  }
  return "op '" + n.op_type() + "' at opset " + std::to_string(n.opset()) + " is older than tcc supports (" +
         std::to_string(it->second.since_version) + ")";
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> v;
  for (const auto& [k, d] : defs_) v.push_back(&d);
  std::sort(v.begin(), v.end(), [](auto* a, auto* b) {
    return std::tie(a->domain, a->op_type) < std::tie(b->domain, b->op_type);
  });
  return v;
}

namespace {

// Whether n's op lists input i in `inputs` (one of OpDef's input lists).
bool listed(const Node& n, std::vector<size_t> OpDef::*inputs, size_t i) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (def == nullptr) return false;
  const std::vector<size_t>& in = def->*inputs;
  return std::find(in.begin(), in.end(), i) != in.end();
}

}  // namespace

bool config_input(const Node& n, size_t i) { return listed(n, &OpDef::config_inputs, i); }

bool kernel_literal_input(const Node& n, size_t i) { return listed(n, &OpDef::literal_inputs, i); }

}  // namespace tcc
