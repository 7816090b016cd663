#include "codegen/schedule.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "codegen/kernel_passes.h"
#include "codegen/lower.h"
#include "passes/binding_constants.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// Whether n's op reads only its inputs' shapes (kShapeOnly), which the host
// knows without a copy: the runtime's fallback copies nothing in for it.
bool reads_shape_only(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  return def != nullptr && def->has(kShapeOnly);
}

// Whether a and b are tensors of one dtype whose element counts are provably equal.
bool same_bytes(const Type& a, const Type& b) {
  if (!a.is_tensor() || !b.is_tensor() || !a.fully_shaped() || !b.fully_shaped() || a.dtype() != b.dtype())
    return false;
  return dims_product(a.shape()) == dims_product(b.shape());
}

// Whether fusion n only gives its first input a new shape: one reshape
// (is_reshape) or Identity of body input 0, whose output is the body's. A
// row-major tensor's bytes are the same under any shape of the same size.
bool only_reshapes(const Node& n) {
  const Graph& body = fusion_body(n);
  if (body.nodes().size() != 1 || body.outputs().size() != 1 || body.inputs().empty()) return false;
  const Node& v = *body.nodes().front();
  bool reshape = is_reshape(v) || (v.domain().empty() && v.op_type() == "Identity");
  return reshape && v.input(0) == body.inputs().front() && v.output(0) == body.outputs().front();
}

class Scheduler {
 public:
  Scheduler(const Graph& g, const DeviceProfile& device, kir::AfterKernelPass after, Precision precision)
      : g_(g),
        precision_(precision),
        users_(g.compute_users()),
        analysis_(analyze_constants(g)),
        kernel_passes_(kir::default_kernel_pipeline(), device, std::move(after)) {
    for (const Value* v : g.outputs()) graph_outputs_.insert(v);
  }

  Schedule run() {
    for (const auto& n : g_.nodes()) {
      if (analysis_.constant_nodes.count(n.get())) continue;
      if (analysis_.per_binding.count(n.get())) {
        s_.binding_steps.push_back(host_step(*n));
      } else if (is_fusion(*n)) {
        if (!view_alias(*n)) kernel_step(*n);
      } else {
        fallback_step(*n);
      }
    }
    s_.kernel_passes = kernel_passes_.records();
    return std::move(s_);
  }

 private:
  // Values a fallback reads without copying them from the device: the module's
  // constants, and those of the binding, which the runtime keeps on the host too.
  bool on_host_already(const Value* v) const {
    if (v == nullptr || analysis_.constants.count(v)) return true;
    const Node* p = v->producer();
    return p != nullptr && analysis_.per_binding.count(p);
  }

  // Records n as a view of its input when that input has a buffer of the plan
  // (a step wrote it, it is no graph output) and n's output is no graph output
  // (the caller's memory, which a kernel must fill).
  bool view_alias(const Node& n) {
    if (!only_reshapes(n) || graph_outputs_.count(n.output(0))) return false;
    const Value* in = n.input(0);
    if (graph_outputs_.count(in) || !same_bytes(in->type(), n.output(0)->type())) return false;
    auto source = planned_.find(in);
    if (source == planned_.end()) return false;
    s_.views.push_back({n.output(0)->name(), source->second->name(), fusion_body(n).nodes().front()->name()});
    planned_.emplace(n.output(0), source->second);
    return true;
  }

  void kernel_step(const Node& n) {
    kir::Kernel k = kernel_passes_.run(lower_fusion(n, n.name(), precision_));
    // The kernel's input buffers are n's inputs it reads (the attention
    // statistics pass reads no Q, K, V or mask), in its order.
    std::vector<std::string> reads;
    for (const kir::Buffer& b : k.buffers)
      if (!b.output) reads.push_back(b.name);
    std::string key = structural_key(k);
    auto [it, fresh] = kernel_of_key_.emplace(key, static_cast<int>(s_.kernels.size()));
    if (fresh) {
      k.name = "tcc_k" + std::to_string(s_.kernels.size()) + "_" + kir::kind_name(k.kind);
      s_.kernels.push_back(std::move(k));
    }
    Step step;
    step.kind = Step::Kind::Kernel;
    step.kernel = it->second;
    step.node = n.name();
    step.reads = std::move(reads);
    for (const Value* v : n.outputs()) {
      step.writes.push_back(v->name());
      planned_.emplace(v, v);
    }
    s_.steps.push_back(std::move(step));
  }

  // A value a fallback computed must go back to the device when a kernel reads
  // it or the caller receives it; fallbacks that read it use the host copy.
  bool needed_on_device(const Value* v) const {
    if (graph_outputs_.count(v)) return true;
    auto it = users_.find(v);
    if (it == users_.end()) return false;
    for (const auto& [user, index] : it->second)
      if (is_fusion(*user)) return true;
    return false;
  }

  // A node run by the reference implementation: what it reads (its regions'
  // captures too) and writes.
  Step host_step(const Node& n) const {
    Step step;
    step.kind = Step::Kind::Fallback;
    step.node = n.name();
    for (const Value* v : n.inputs())
      if (v) step.reads.push_back(v->name());
    for (const Value* v : n.captures())
      if (std::find(step.reads.begin(), step.reads.end(), v->name()) == step.reads.end())
        step.reads.push_back(v->name());
    for (const Value* v : n.outputs()) step.writes.push_back(v->name());
    return step;
  }

  void fallback_step(const Node& n) {
    Step step = host_step(n);
    for (const std::string& name : step.reads) {
      const Value* v = g_.find(name);
      if (on_host_already(v) || reads_shape_only(n) || on_host_.count(v)) continue;
      ++s_.fallback_copies;
      on_host_.insert(v);
    }
    for (const Value* v : n.outputs()) {
      planned_.emplace(v, v);
      on_host_.insert(v);
      if (needed_on_device(v)) ++s_.fallback_copies;
    }
    s_.steps.push_back(std::move(step));
  }

  const Graph& g_;
  Precision precision_;
  std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>> users_;
  ConstantAnalysis analysis_;
  kir::KernelPassRunner kernel_passes_;
  std::unordered_set<const Value*> graph_outputs_, on_host_;
  std::unordered_map<std::string, int> kernel_of_key_;
  // Values written by steps or views, each to the step-written value whose buffer holds it.
  std::unordered_map<const Value*, const Value*> planned_;
  Schedule s_;
};

}  // namespace

Schedule build_schedule(const Graph& g, const DeviceProfile& device, kir::AfterKernelPass after,
                        Precision precision) {
  return Scheduler(g, device, std::move(after), precision).run();
}

}  // namespace tcc
