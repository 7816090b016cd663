#include "src/autodiff/optimizer.h"

#include "src/ir/emitter.h"

namespace tcc {

std::optional<OptimizerKind> parse_optimizer(const std::string& name) {
  if (name == "none") return OptimizerKind::None;
  if (name == "sgd") return OptimizerKind::Sgd;
  if (name == "momentum") return OptimizerKind::Momentum;
  if (name == "adam") return OptimizerKind::Adam;
  if (name == "adamw") return OptimizerKind::AdamW;
  return std::nullopt;
}

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::None: return "none";
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Momentum: return "momentum";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

namespace {

// A 0-d f32 input; named `name` unless the model already uses that name.
Value* scalar_input(Graph& g, const std::string& name) {
  return g.add_input(g.find(name) ? g.fresh_name(name) : name, Type::tensor(DType::F32, {}));
}

// Optimizer state: an input shaped like the parameter whose default is zero.
Value* state_input(Graph& g, Value* param, const std::string& suffix) {
  const Type& t = param->type();
  Tensor zeros(t.dtype(), param->initializer().shape());
  Value* v = g.add_input(param->name() + suffix, t);
  v->set_initializer(std::move(zeros));
  return v;
}

}  // namespace

// The updates follow torch.optim's single-tensor code paths:
//   sgd:      p -= lr * g
//   momentum: b = momentum * b + g;  p -= lr * b
//   adam:     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
//             p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//   adamw:    p *= 1 - lr * weight_decay, then adam
// where the L2 weight decay of sgd/momentum/adam is g += weight_decay * p.
// lr, t, the bias corrections and adamw's decay factor are f32; for a parameter of another
// float type they are cast once per parameter.
OptimizerIO append_optimizer_step(Graph& g, const std::vector<Value*>& params, const std::vector<Value*>& grads,
                                  const OptimizerOptions& opts) {
  OptimizerIO io;
  bool adam = opts.kind == OptimizerKind::Adam || opts.kind == OptimizerKind::AdamW;
  io.lr = scalar_input(g, "lr");
  if (adam) io.step = scalar_input(g, "step");
  double wd = opts.weight_decay >= 0 ? opts.weight_decay : opts.kind == OptimizerKind::AdamW ? 0.01 : 0.0;
  // Adam's bias corrections depend on the step alone: computed once for every
  // parameter, so the update of same-shaped parameters is one kernel
  // (passes/fuse_multi_tensor) and not one small scalar kernel per parameter.
  Value* bias_correction1 = nullptr;
  Value* bias_correction2 = nullptr;
  Value* decay = nullptr;  // adamw: 1 - lr * weight_decay, likewise shared
  if (opts.kind == OptimizerKind::AdamW && wd != 0) {
    Emitter e(g, "optimizer/decay", StepPart::Optimizer);
    decay = e.op("Sub", {e.scalar(1.0, DType::F32), e.op("Mul", {io.lr, e.scalar(wd, DType::F32)})});
  }
  if (adam) {
    Emitter e(g, "optimizer/bias_correction", StepPart::Optimizer);
    bias_correction1 = e.op("Sub", {e.scalar(1.0, DType::F32), e.op("Pow", {e.scalar(opts.beta1, DType::F32), io.step})});
    bias_correction2 = e.op("Sub", {e.scalar(1.0, DType::F32), e.op("Pow", {e.scalar(opts.beta2, DType::F32), io.step})});
  }

  for (size_t i = 0; i < params.size(); ++i) {
    Value* p = params[i];
    Value* grad = grads[i];
    DType dt = p->type().dtype();
    Emitter e(g, "optimizer/" + p->name(), StepPart::Optimizer);
    auto c = [&](double v) { return e.scalar(v, dt); };
    auto as_dtype = [&](Value* v) {
      return dt == DType::F32 ? v : e.op("Cast", {v}, {{"to", Attribute::of_int(static_cast<int64_t>(dt))}});
    };
    Value* lr = as_dtype(io.lr);
    if (wd != 0 && opts.kind != OptimizerKind::AdamW)
      grad = e.op("Add", {grad, e.op("Mul", {p, c(wd)})});
    Value* update = nullptr;  // subtracted from p
    Value* base = p;
    std::vector<Value*> outputs;
    switch (opts.kind) {
      case OptimizerKind::None: TCC_CHECK(false) << "append_optimizer_step without an optimizer"; break;
      case OptimizerKind::Sgd: update = e.op("Mul", {grad, lr}); break;
      case OptimizerKind::Momentum: {
        Value* buf = state_input(g, p, ".m");
        io.state_inputs.push_back(buf->name());
        Value* next = e.named(buf->name() + ".updated", "Add", {e.op("Mul", {buf, c(opts.momentum)}), grad});
        outputs.push_back(next);
        update = e.op("Mul", {next, lr});
        break;
      }
      case OptimizerKind::Adam:
      case OptimizerKind::AdamW: {
        if (decay) base = e.op("Mul", {p, as_dtype(decay)});
        Value* m = state_input(g, p, ".m");
        Value* v = state_input(g, p, ".v");
        io.state_inputs.push_back(m->name());
        io.state_inputs.push_back(v->name());
        Value* m_next = e.named(m->name() + ".updated", "Add",
                                {e.op("Mul", {m, c(opts.beta1)}), e.op("Mul", {grad, c(1 - opts.beta1)})});
        Value* g2 = e.op("Mul", {grad, grad});
        Value* v_next = e.named(v->name() + ".updated", "Add",
                                {e.op("Mul", {v, c(opts.beta2)}), e.op("Mul", {g2, c(1 - opts.beta2)})});
        outputs.push_back(m_next);
        outputs.push_back(v_next);
        Value* bc1 = as_dtype(bias_correction1);
        Value* bc2 = as_dtype(bias_correction2);
        Value* denom = e.op("Add", {e.op("Sqrt", {e.op("Div", {v_next, bc2})}), c(opts.eps)});
        Value* direction = e.op("Div", {e.op("Div", {m_next, bc1}), denom});
        update = e.op("Mul", {direction, lr});
        break;
      }
    }
    g.add_output(e.named(p->name() + ".updated", "Sub", {base, update}));
    for (Value* o : outputs) g.add_output(o);
  }
  return io;
}

}  // namespace tcc
