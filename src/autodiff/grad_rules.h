// Which ops the backward can differentiate: an op's gradient rule is part of
// its definition (OpDef::grad, src/ops/gradient.h), registered in its family
// file under src/ops/.
#pragma once

#include <string>

#include "src/ir/graph.h"
#include "src/ops/gradient.h"

namespace tcc {

// The rule for a node's op, or null when there is none (or tcc does not
// support the op at the node's opset).
const GradRule* find_grad_rule(const Node& n);
// Why an op has no rule, for ops tcc does not support or knows it cannot
// differentiate yet; empty otherwise.
std::string no_grad_rule_reason(const Node& n);

}  // namespace tcc
