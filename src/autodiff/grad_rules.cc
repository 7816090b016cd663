#include "src/autodiff/grad_rules.h"

#include "src/ops/op_registry.h"

namespace tcc {

// An op tcc does not support at the node's opset (Gelu before 20) has no
// definition, so no rule: its output types are only what the model declares.
const GradRule* find_grad_rule(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  return def && def->grad ? &def->grad : nullptr;
}

std::string no_grad_rule_reason(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (!def) return OpRegistry::get().why_unsupported(n);
  if (def->has(kControlFlow)) return "tcc does not differentiate through control flow";
  return "";
}

}  // namespace tcc
