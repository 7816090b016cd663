// autocast: with --precision fp16 or bf16, the model computes its products in
// that dtype, by the rules torch.autocast applies on CUDA, read for ONNX ops.
//
// Each op's class is its OpDef's `autocast` (src/ops, beside the op):
//   - Matrix products (MatMul, Gemm, Conv, ConvTranspose) and attention
//     (ONNX's and the fused tcc::Attention, as torch's
//     scaled_dot_product_attention, and its backward's tcc::AttentionGrad,
//     whose row statistics stay f32) read their float operands in the low
//     dtype: f32 activations through a Cast, f32 constants (weights, biases)
//     converted once, here. Their results are low; the libraries and the
//     attention kernel accumulate in f32, and an attention that decomposes
//     computes its softmax in f32.
//   - Ops that need f32's range or precision (softmax, the normalizations,
//     sums and products over many elements, exp, log, pow and the other
//     functions autocast keeps in f32, the losses) read f32: low operands are
//     cast up.
//   - Every other op runs in the dtype of what it reads. When its operands
//     mix low and f32 the low ones are cast up (torch's type promotion); when
//     they are all low its f32 constants are converted down (in torch these
//     are Python scalars and a Linear's bias, which do not promote).
//   - The model keeps its signature: a graph output that became low is cast
//     back, and so are a node's operands when it holds regions (If, Loop,
//     Scan), whose bodies stay as they are.
//
// Only f32 values change dtype. The inputs an op's OpDef says autocast leaves
// (autocast_keeps: Resize's roi and scales, parameters rather than data; an
// attention's float mask, whose finfo(float32).min fill f16 and bf16 cannot
// hold; the attention backward's row statistics) keep theirs, and the outputs it says
// stay f32 (f32_output: an attention's log-sum-exp and row statistics) do.
// With fp32 and tf32 the pass changes nothing (tf32 is the libraries' math
// mode, codegen's business).
#include <map>
#include <unordered_map>

#include "passes/pass.h"
#include "src/ir/replace_nodes.h"
#include "src/ops/decomposition.h"  // constant_value
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// Whether input i of n keeps its dtype (OpDef::autocast_keeps).
bool keeps_dtype(const OpDef* def, const Node& n, size_t i) {
  return def && def->autocast_keeps && def->autocast_keeps(n, i);
}

// Whether output `out` of n stays f32 whatever the operands (OpDef::f32_output).
bool f32_output(const OpDef* def, const Node& n, size_t out) {
  return def && def->f32_output && def->f32_output(n, out);
}

// Whether the op's float output takes its dtype from a target (kTargetDType:
// Cast's `to`, CastLike's second input) or a *Like op's `dtype`, not from the
// data it reads.
bool output_dtype_is_set(const OpDef* def, const Node& n) {
  return (def && def->has(kTargetDType)) || n.has_attr("dtype");
}

class Autocast {
 public:
  Autocast(Graph& g, DType low, PassStats& stats) : g_(g), low_(low), stats_(stats) {}

  bool run() {
    for (Value* v : g_.outputs()) signature_.emplace(v, v->type().dtype());
    std::vector<Node*> nodes;
    for (const auto& n : g_.nodes()) nodes.push_back(n.get());
    for (Node* n : nodes) visit(*n);
    for (Value* v : std::vector<Value*>(g_.outputs())) restore_dtype(v);
    return changed_;
  }

 private:
  // The op's class (OpDef::autocast), but f32 for a node with regions or several outputs in the signature.
  AutocastClass rule(const OpDef* def, const Node& n) const {
    if (!n.regions().empty() || several_model_outputs(n)) return AutocastClass::F32;
    return def != nullptr ? def->autocast : AutocastClass::Follow;
  }

  // A node with more than one output in the signature is left in f32: the
  // signature is restored one output at a time (restore_dtype).
  bool several_model_outputs(const Node& n) const {
    int count = 0;
    for (const Value* v : n.outputs()) count += signature_.count(v) ? 1 : 0;
    return count > 1;
  }

  void visit(Node& n) {
    const OpDef* def = OpRegistry::get().lookup(n);
    std::vector<size_t> floats;
    for (size_t i = 0; i < n.num_inputs(); ++i) {
      const Value* v = n.input(i);
      if (v && !keeps_dtype(def, n, i) && v->type().is_tensor() &&
          (v->type().dtype() == DType::F32 || v->type().dtype() == low_))
        floats.push_back(i);
    }
    switch (rule(def, n)) {
      case AutocastClass::Low:
        for (size_t i : floats) set_dtype(n, i, low_);
        lower_outputs(def, n);
        break;
      case AutocastClass::F32:
        for (size_t i : floats) set_dtype(n, i, DType::F32);
        for (const Value* read : n.captures())
          if (read->type().is_tensor() && read->type().dtype() == low_) {
            Value* c = g_.find(read->name());
            Value* up = cast(c, DType::F32, n);
            for (Graph* r : n.regions()) r->replace_all_uses(c, up);
          }
        break;
      case AutocastClass::Follow: {
        bool any_low = false, any_f32 = false;
        for (size_t i : floats)
          if (!constant_value(n.input(i))) (n.input(i)->type().dtype() == low_ ? any_low : any_f32) = true;
        if (any_low && any_f32) {
          for (size_t i : floats) set_dtype(n, i, DType::F32);
        } else if (any_low) {
          for (size_t i : floats) set_dtype(n, i, low_);
          if (!output_dtype_is_set(def, n)) lower_outputs(def, n);
        }
        break;
      }
    }
  }

  void set_dtype(Node& n, size_t i, DType to) {
    if (n.input(i)->type().dtype() == to) return;
    n.set_input(i, cast(n.input(i), to, n));
    changed_ = true;
  }

  void lower_outputs(const OpDef* def, Node& n) {
    for (size_t o = 0; o < n.num_outputs(); ++o)
      if (Value* v = n.output(o); !f32_output(def, n, o) && v->type().is_tensor() && v->type().dtype() == DType::F32) {
        v->set_type(Type::tensor(low_, v->type().shape()));
        changed_ = true;
      }
  }

  // v in dtype `to`: a constant converted now, anything else through one Cast
  // (before `user`, the first node that asks for it), each made once.
  Value* cast(Value* v, DType to, Node& user) {
    auto key = std::make_pair(v, to);
    auto it = casts_.find(key);
    if (it != casts_.end()) return it->second;
    std::string name = g_.fresh_name(v->name() + "/" + std::string(dtype_name(to)));
    Value* out;
    if (std::optional<Tensor> t = constant_value(v)) {
      out = g_.add_initializer(name, t->cast(to));
      stats_.add("constants_converted");
    } else {
      Node* c = g_.insert_node(&user, "Cast", {v}, {name}, "", name);
      c->set_attr("to", Attribute::of_int(static_cast<int64_t>(to)));
      c->set_source(user.source());
      out = c->output(0);
      out->set_type(Type::tensor(to, v->type().shape()));
      stats_.add("casts_inserted");
    }
    casts_.emplace(key, out);
    return out;
  }

  // A graph output that became low gets its dtype back: its producer is
  // rebuilt under a fresh output name and a Cast takes over the output's name.
  void restore_dtype(Value* v) {
    DType want = signature_.at(v);
    Node* p = v->producer();
    if (!p || v->type().dtype() == want) return;
    std::string low_name = g_.fresh_name(v->name() + "/" + std::string(dtype_name(low_)));
    Node* low = g_.insert_node(p, p->op_type(), p->inputs(), {low_name}, p->domain(), p->name());
    for (const auto& [key, a] : p->attrs()) low->set_attr(key, a);
    low->set_source(p->source());
    low->output(0)->set_type(v->type());
    replace_nodes(g_, {p}, {v}, [&](Node* before, const std::vector<std::string>& names) {
      Node* c = g_.insert_node(before, "Cast", {low->output(0)}, names, "", p->name() + "/Cast");
      c->set_attr("to", Attribute::of_int(static_cast<int64_t>(want)));
      c->set_source(low->source());
      c->output(0)->set_type(Type::tensor(want, low->output(0)->type().shape()));
      return c;
    });
    stats_.add("outputs_cast_back");
  }

  Graph& g_;
  DType low_;
  PassStats& stats_;
  std::unordered_map<const Value*, DType> signature_;
  std::map<std::pair<Value*, DType>, Value*> casts_;
  bool changed_ = false;
};

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::FP32: return "fp32";
    case Precision::TF32: return "tf32";
    case Precision::FP16: return "fp16";
    case Precision::BF16: return "bf16";
  }
  return "fp32";
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (Precision p : kPrecisions)
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

bool autocast(Graph& g, PassContext& ctx) {
  if (ctx.precision != Precision::FP16 && ctx.precision != Precision::BF16) return false;
  return Autocast(g, ctx.precision == Precision::FP16 ? DType::F16 : DType::BF16, ctx.stats).run();
}

}  // namespace tcc
