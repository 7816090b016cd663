#include "src/autodiff/autodiff.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "src/autodiff/grad_rules.h"
#include "src/autodiff/loss.h"
#include "src/ir/emitter.h"
#include "src/ops/decomposition.h"
#include "src/ops/op_registry.h"
#include "src/shape/shape_inference.h"

namespace tcc {

void model_error(const Graph& g, const std::string& msg) {
  DiagLocation loc;
  loc.file = g.file();
  throw InputError(loc, msg);
}

// ---------------------------------------------------------------- training graph

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative matcher with one backtrack point for the last `*`.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

LossKind parse_loss_kind(const std::string& name) {
  if (name == "cross_entropy") return LossKind::CrossEntropy;
  if (name == "mse") return LossKind::Mse;
  throw InputError("unknown loss function '" + name + "' (expected cross_entropy or mse)");
}

namespace {

bool is_float_value(const Value* v) { return v && v->type().is_tensor() && is_float(v->type().dtype()); }

// Float values only configuring slots read: never parameters. A value that
// any data slot reads is not one.
std::unordered_set<const Value*> configuration_values(const Graph& g) {
  std::unordered_set<const Value*> config, data;
  for (const auto& n : g.nodes())
    for (size_t i = 0; i < n->num_inputs(); ++i) (config_input(*n, i) ? config : data).insert(n->input(i));
  for (const Value* v : data) config.erase(v);
  return config;
}

// The float values that depend on a parameter through float values.
std::unordered_set<const Value*> float_dependents(const Graph& g, const std::vector<Value*>& params) {
  std::unordered_set<const Value*> depends(params.begin(), params.end());
  for (const auto& n : g.nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (def != nullptr && def->has(kShapeOnly)) continue;  // reads its inputs' shapes, not their values
    bool any = false;
    for (Value* v : n->inputs()) any |= v && depends.count(v) && is_float_value(v);
    if (!any) continue;
    for (Value* o : n->outputs())
      if (is_float_value(o)) depends.insert(o);
  }
  return depends;
}

// Nodes whose op has no gradient rule, or a rule that does not cover them (a
// fused Attention whose float mask is trained), but a decomposition are
// replaced by their pieces, which have rules, so the backward differentiates
// through them. A node with no float output (NonZero's indices) passes no
// gradient and stays whole.
void expand_composites_without_rules(Graph& g, const std::vector<Value*>& params) {
  const std::unordered_set<const Value*> depends = float_dependents(g, params);
  std::vector<Node*> candidates;
  for (const auto& n : g.nodes()) candidates.push_back(n.get());
  std::unordered_set<const Node*> taken_over;
  for (Node* n : candidates) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (def == nullptr || !def->decompose) continue;
    if (def->grad) {
      std::vector<bool> wants;
      for (size_t i = 0; i < n->num_inputs(); ++i) wants.push_back(depends.count(n->input(i)) && !config_input(*n, i));
      if (!def->grad_applies || def->grad_applies(*n, wants)) continue;
    }
    if (std::none_of(n->outputs().begin(), n->outputs().end(), is_float_value)) continue;
    Expansion e(g, *n);
    e.for_autodiff();
    if (def->decompose(e) && !e.finished()) taken_over.insert(n);
  }
  if (!taken_over.empty()) g.erase_nodes_if([&](const Node& n) { return taken_over.count(&n) > 0; });
}

// Nodes whose gradient rule covers them and reads something the forward
// saves for it (OpDef::save_for_gradient: an Attention's log-sum-exp) are
// rewritten to output it, where they depend on a parameter.
void save_for_gradients(Graph& g, const std::vector<Value*>& params) {
  const std::unordered_set<const Value*> depends = float_dependents(g, params);
  std::vector<std::pair<Node*, const OpDef*>> saving;
  for (const auto& n : g.nodes()) {
    const OpDef* def = OpRegistry::get().lookup(*n);
    if (def == nullptr || !def->save_for_gradient) continue;
    std::vector<bool> wants;
    for (size_t i = 0; i < n->num_inputs(); ++i) wants.push_back(depends.count(n->input(i)) && !config_input(*n, i));
    if (std::find(wants.begin(), wants.end(), true) == wants.end()) continue;
    if (!def->grad_applies || def->grad_applies(*n, wants)) saving.emplace_back(n.get(), def);
  }
  for (const auto& [n, def] : saving) def->save_for_gradient(g, *n);
}

// Float initializers matching the patterns, in initializer order, but for
// configuration values (running statistics, Resize scales, ...) and, where the
// exporter marked its initializers' roles (Value::role: a .pt2's or the dynamo
// exporter's graph signature), those it does not mark parameters. A pattern
// that matches nothing is an error: it is almost certainly a typo. `from` says
// where the set came from.
std::vector<Value*> select_params(const Model& model, const std::vector<std::string>& patterns, std::string& from) {
  Graph& g = *model.graph;
  std::vector<Value*> params;
  std::vector<bool> pattern_used(patterns.size(), false);
  std::unordered_set<const Value*> configuration = configuration_values(g);
  const bool declared = std::any_of(g.initializers().begin(), g.initializers().end(),
                                    [](const Value* v) { return v->role() != InitializerRole::Unmarked; });
  const std::string candidates =
      declared ? "parameter of the exporter's graph signature (buffers and constants are not trained)"
               : "float initializer";
  for (Value* v : g.initializers()) {
    if (!is_float(v->initializer().dtype()) || configuration.count(v)) continue;
    if (declared && v->role() != InitializerRole::Parameter) continue;
    bool match = patterns.empty();
    for (size_t i = 0; i < patterns.size(); ++i)
      if (glob_match(patterns[i], v->name())) match = pattern_used[i] = true;
    if (match) params.push_back(v);
  }
  for (size_t i = 0; i < patterns.size(); ++i)
    if (!pattern_used[i])
      model_error(g, "--params '" + patterns[i] + "' matches no " + candidates);
  if (params.empty()) model_error(g, "the model has no " + candidates + " to train");
  from = patterns.empty() ? (declared ? "the exporter's graph signature" : "the float initializers")
                          : (declared ? "the exporter's graph signature, chosen by --params" : "--params");
  return params;
}

// Turns an initializer into a graph input of the same name whose default value
// is its data. The Graph API has no rename, so uses move to a stand-in while
// the name is released.
Value* promote_to_input(Graph& g, Value* init) {
  std::string name = init->name();
  Tensor data = init->initializer();
  Value* stand_in = g.add_initializer(g.fresh_name(name), data);
  g.replace_all_uses(init, stand_in);
  g.remove_unused_initializers();
  Value* input = g.add_input(name, Type::tensor(data.dtype(), Dims(data.shape().begin(), data.shape().end())));
  input->set_initializer(data);
  g.replace_all_uses(stand_in, input);
  g.remove_unused_initializers();
  return input;
}

Value* find_output(Graph& g, const std::string& name, const std::string& flag) {
  for (Value* v : g.outputs())
    if (v->name() == name) return v;
  std::string known;
  for (Value* v : g.outputs()) known += (known.empty() ? "" : ", ") + v->name();
  model_error(g, flag + " '" + name + "' is not an output of the model (outputs: " + known + ")");
}

// Backward pass over the forward nodes (those present when it starts).
class Backward {
 public:
  Backward(Graph& g, const ShapeInfo& info)
      : g_(g), constant_([&info](const Value* v) -> const Tensor* {
          auto it = info.consts.find(v);
          return it == info.consts.end() ? nullptr : &it->second;
        }) {}

  // Gradient of `loss` with respect to each param (null where there is no path).
  std::vector<Value*> run(Value* loss, const std::vector<Value*>& params) {
    std::vector<Node*> forward;
    for (const auto& n : g_.nodes()) forward.push_back(n.get());

    depends_ = float_dependents(g_, params);
    // Of those, the ones the loss depends on.
    std::unordered_set<const Value*> needed{loss};
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      Node* n = *it;
      bool out_needed = false;
      for (Value* o : n->outputs()) out_needed |= needed.count(o) != 0;
      if (!out_needed) continue;
      for (Value* v : n->inputs())
        if (v && depends_.count(v) && is_float_value(v)) needed.insert(v);
    }
    if (!depends_.count(loss))
      model_error(g_, "the loss '" + loss->name() + "' does not depend on any parameter");

    Emitter seed_e(g_, "grad/seed", StepPart::Backward);
    add_contribution(loss, seed_e.op("ConstantOfShape", {seed_e.shape_of(loss)},
                                     {{"value", Attribute::of_tensor(one(loss->type().dtype()))}}));
    for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
      Node* n = *it;
      std::vector<Value*> dys;
      bool any_dy = false;
      for (Value* o : n->outputs()) {
        dys.push_back(needed.count(o) ? take_grad(o, n) : nullptr);
        any_dy |= dys.back() != nullptr;
      }
      if (!any_dy) continue;
      // A configuring slot passes no gradient back, whatever reads its value elsewhere.
      std::vector<bool> wants;
      for (size_t i = 0; i < n->num_inputs(); ++i) {
        Value* v = n->input(i);
        wants.push_back(v && needed.count(v) && depends_.count(v) && !config_input(*n, i));
      }
      differentiate(*n, std::move(dys), std::move(wants));
    }
    std::vector<Value*> grads;
    for (Value* p : params) grads.push_back(needed.count(p) ? take_grad(p, nullptr) : nullptr);
    return grads;
  }

 private:
  static Tensor one(DType dt) {
    Tensor t(dt, {1});
    t.set_f64(0, 1.0);
    return t;
  }

  void differentiate(const Node& n, std::vector<Value*> dys, std::vector<bool> wants) {
    const GradRule* rule = find_grad_rule(n);
    if (!rule) {
      std::string why = no_grad_rule_reason(n);
      n.fail("tcc has no gradient rule for " + (n.domain().empty() ? "" : n.domain() + "::") + n.op_type() +
             ", which lies between a parameter and the loss" + (why.empty() ? "" : " (" + why + ")"));
    }
    std::string label = n.name().empty() ? n.op_type() : n.name();
    if (!label.empty() && label.front() == '/') label.erase(0, 1);
    Emitter e(g_, "grad/" + label, StepPart::Backward);
    GradContext ctx(n, e, constant_, std::move(dys), wants);
    (*rule)(ctx);
    for (size_t i = 0; i < wants.size(); ++i) {
      if (!wants[i]) continue;
      Value* dx = ctx.results()[i];
      // A rule may leave an input without gradient only when it has none
      // (Where's condition); anything else is a bug in the rule.
      TCC_CHECK(dx) << "gradient rule for " << n.op_type() << " gave no gradient for input " << i;
      add_contribution(n.input(i), dx);
    }
  }

  void add_contribution(Value* v, Value* g) { pending_[v].push_back(g); }

  // The summed gradient of v, once all of its users have contributed.
  Value* take_grad(Value* v, const Node* user) {
    auto it = pending_.find(v);
    if (it == pending_.end()) return nullptr;
    std::vector<Value*> parts = std::move(it->second);
    pending_.erase(it);
    if (parts.size() == 1) return parts.front();
    std::string label = user && !user->name().empty() ? user->name() : v->name();
    if (!label.empty() && label.front() == '/') label.erase(0, 1);
    Emitter e(g_, "grad/" + label + "/accumulate", StepPart::Backward);
    Value* sum = parts.front();
    for (size_t i = 1; i < parts.size(); ++i) sum = e.op("Add", {sum, parts[i]});
    return sum;
  }

  Graph& g_;
  GradContext::ConstantFn constant_;  // shape inference's folded constants
  std::unordered_set<const Value*> depends_;
  std::unordered_map<const Value*, std::vector<Value*>> pending_;
};

// Drops nodes and initializers that no output needs (the forward model's
// other outputs, and what only they used).
void remove_dead_nodes(Graph& g) {
  std::unordered_set<const Value*> live(g.outputs().begin(), g.outputs().end());
  std::unordered_set<const Node*> keep;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    const Node* n = it->get();
    bool used = false;
    for (Value* o : n->outputs()) used |= live.count(o) != 0;
    if (!used) continue;
    keep.insert(n);
    live.insert(n->inputs().begin(), n->inputs().end());
    for (Graph* r : n->regions())
      for (const auto& rn : r->nodes()) live.insert(rn->inputs().begin(), rn->inputs().end());
  }
  g.erase_nodes_if([&](const Node& n) { return !keep.count(&n); });
  g.remove_unused_initializers();
}

}  // namespace

TrainingGraph build_training_graph(Model& model, const TrainOptions& opts) {
  Graph& g = *model.graph;
  if (opts.loss_output.empty() == !opts.builtin_loss)
    throw InputError("--train needs a loss: either --loss OUTPUT, or --loss-fn, --loss-on and --label");
  auto opset = g.opsets().find("");
  if (opset == g.opsets().end() || opset->second < 13)
    model_error(g, "training graphs need a model at ONNX opset 13 or newer");

  // The attention an exporter spells out becomes one tcc::Attention first, so
  // that the backward is the fused one, not the pieces' around a [batch,
  // heads, seq, seq] softmax. Each promotion below drops the initializers
  // nothing reads (the fused pattern's constants among them): none may be
  // among those selected.
  infer_shapes(g);
  PassContext fusing;
  fuse_attention(g, fusing);
  g.remove_unused_initializers();
  std::vector<Value*> params;
  std::string params_from;
  for (Value* p : select_params(model, opts.param_patterns, params_from)) params.push_back(promote_to_input(g, p));

  Value* loss = opts.builtin_loss ? build_builtin_loss(g, *opts.builtin_loss)
                                  : find_output(g, opts.loss_output, "--loss");
  infer_shapes(g);
  expand_composites_without_rules(g, params);
  save_for_gradients(g, params);
  ShapeInfo info = infer_shapes(g);
  const Type& lt = loss->type();
  bool scalar = lt.is_tensor() && lt.has_rank() &&
                std::all_of(lt.shape().begin(), lt.shape().end(),
                            [](const Dim& d) { return d.is_static() && d.value() == 1; });
  if (!scalar || !is_float(lt.dtype()))
    model_error(g, "the loss '" + loss->name() + "' must be a float scalar, got " + lt.str());

  std::vector<Value*> grads = Backward(g, info).run(loss, params);

  TrainingGraph out;
  out.loss = loss->name();
  out.params_from = params_from;
  std::vector<Value*> trained, trained_grads;
  for (size_t i = 0; i < params.size(); ++i) {
    if (grads[i]) {
      trained.push_back(params[i]);
      trained_grads.push_back(grads[i]);
      out.params.push_back(params[i]->name());
    } else {
      out.frozen.push_back(params[i]->name());
    }
  }
  g.set_outputs({loss});
  if (opts.optimizer.kind == OptimizerKind::None) {
    for (size_t i = 0; i < trained.size(); ++i) {
      Emitter e(g, "grad/" + trained[i]->name(), StepPart::Backward);
      g.add_output(e.named("grad_" + trained[i]->name(), "Identity", {trained_grads[i]}));
    }
  } else {
    OptimizerIO io = append_optimizer_step(g, trained, trained_grads, opts.optimizer);
    out.lr = io.lr ? io.lr->name() : "";
    out.step = io.step ? io.step->name() : "";
  }
  remove_dead_nodes(g);
  infer_shapes(g);
  return out;
}

}  // namespace tcc
