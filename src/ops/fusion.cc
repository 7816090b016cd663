#include "src/ops/fusion.h"

#include <algorithm>
#include <array>

#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

constexpr std::array<std::pair<FusionKind, std::string_view>, 5> kKindNames = {{
    {FusionKind::Pointwise, "pointwise"},
    {FusionKind::Reduction, "reduction"},
    {FusionKind::Gemm, "gemm"},
    {FusionKind::Conv, "conv"},
    {FusionKind::Single, "single"},
}};

std::string who(const Node& n) { return "node '" + n.name() + "' (" + n.op_type() + ")"; }

bool reads_transposed(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  return def != nullptr && def->has(kTransposedOperands);
}

std::string check_reduction_body(const Graph& body) {
  const Node* first = nullptr;
  std::optional<std::vector<int64_t>> first_axes;
  for (const auto& n : body.nodes()) {
    if (kernel_role(*n) != KernelRole::Reduction) continue;
    std::optional<std::vector<int64_t>> axes = reduction_axes(*n);
    if (!axes) return who(*n) + " reduces over axes that are not constant";
    if (first == nullptr) {
      first = n.get();
      first_axes = axes;
      continue;
    }
    if (n->input(0)->type().shape() != first->input(0)->type().shape() || *axes != *first_axes)
      return who(*n) + " reduces " + n->input(0)->type().str() + " over other axes or another shape than " +
             who(*first) + " (" + first->input(0)->type().str() + ")";
  }
  if (first == nullptr) return "the body has no reduction";
  return "";
}

std::string check_gemm_body(const Graph& body) {
  size_t contractions = 0;
  for (const auto& n : body.nodes()) {
    if (kernel_role(*n) == KernelRole::Contraction) {
      ++contractions;
      continue;
    }
    if (swaps_last_two_axes(*n)) {
      // An operand read transposed: only a product that reads one in place (kTransposedOperands) may read it.
      for (const auto& r : body.nodes())
        for (const Value* in : r->inputs())
          if (in == n->output(0) && !reads_transposed(*r))
            return who(*n) + " transposes an operand, but " + who(*r) + " reads it";
      continue;
    }
    if (n->op_type() == "Add") continue;  // the bias or the residual
    if (std::string what = epilogue_refusal(*n, kGemmEpilogue); !what.empty()) return who(*n) + " is " + what;
    if (!library_epilogue(*n, kGemmEpilogue))
      return who(*n) + " is not an epilogue cuBLASLt applies (a bias or residual Add, or an activation: " +
             epilogue_ops(kGemmEpilogue) + ") nor a transposed operand";
  }
  if (contractions != 1) return "the body has " + std::to_string(contractions) + " MatMul/Gemm nodes, not one";
  return "";
}

std::string check_kind(FusionKind kind, const Graph& body) {
  size_t counts[static_cast<size_t>(KernelRole::RoiAlign) + 1] = {};
  for (const auto& n : body.nodes()) ++counts[static_cast<size_t>(kernel_role(*n))];
  size_t reductions = counts[static_cast<size_t>(KernelRole::Reduction)];
  size_t contractions = counts[static_cast<size_t>(KernelRole::Contraction)];
  switch (kind) {
    case FusionKind::Pointwise:
      if (reductions + contractions + counts[static_cast<size_t>(KernelRole::Convolution)] != 0)
        return "a pointwise body holds a reduction, a contraction or a convolution";
      return "";
    case FusionKind::Reduction:
      if (contractions + counts[static_cast<size_t>(KernelRole::Convolution)] != 0)
        return "a reduction body holds a contraction or a convolution";
      return check_reduction_body(body);
    case FusionKind::Gemm:
      return check_gemm_body(body);
    case FusionKind::Conv: {
      size_t convs = counts[static_cast<size_t>(KernelRole::Convolution)];
      if (convs != 1) return "a conv body holds " + std::to_string(convs) + " Conv nodes, not one";
      for (const auto& n : body.nodes())
        if (kernel_role(*n) != KernelRole::Convolution && n->op_type() != "Add" && !library_epilogue(*n, kConvEpilogue))
          return who(*n) + " is not an epilogue cuDNN applies (a bias or residual Add, or an activation: " +
                 epilogue_ops(kConvEpilogue) + ")";
      return "";
    }
    case FusionKind::Single: {
      const auto& nodes = body.nodes();
      // An attention's operands and output may be views (movement chains on
      // body inputs, and on its output).
      const size_t views = static_cast<size_t>(std::count_if(nodes.begin(), nodes.end(), [](const auto& n) {
        return kernel_role(*n) == KernelRole::Movement;
      }));
      const bool attention = std::any_of(nodes.begin(), nodes.end(), [](const auto& n) {
        return kernel_role(*n) == KernelRole::Attention;
      });
      if (views + 1 == nodes.size() && attention) return "";
      const KernelRole single = nodes.size() == 1 ? kernel_role(*nodes.front()) : KernelRole::None;
      if (single == KernelRole::Indexed || single == KernelRole::TopK ||
          single == KernelRole::Recurrence || single == KernelRole::Nms ||
          single == KernelRole::RoiAlign)
        return "";
      for (size_t i = 0; i < nodes.size(); ++i)
        if (kernel_role(*nodes[i]) != KernelRole::Movement || (i > 0 && nodes[i]->input(0) != nodes[i - 1]->output(0)))
          return "a single body is a chain of movement nodes (each reading the one before), one node of the "
                 "Indexed, Attention, TopK, Recurrence, Nms or RoiAlign kernel role, or an Attention node and "
                 "views of its operands and output";
      if (body.outputs().size() != 1 || body.outputs().front() != nodes.back()->output(0))
        return "a movement chain's one output is its last node's";
      return "";
    }
  }
  return "";
}

}  // namespace

std::string_view fusion_kind_name(FusionKind k) {
  for (const auto& [kind, name] : kKindNames)
    if (kind == k) return name;
  TCC_CHECK(false) << "unnamed fusion kind " << static_cast<int>(k);
  return "";
}

std::optional<FusionKind> parse_fusion_kind(std::string_view name) {
  for (const auto& [kind, n] : kKindNames)
    if (n == name) return kind;
  return std::nullopt;
}

FusionKind fusion_kind(const Node& n) {
  if (!n.has_attr("kind")) n.fail("a fusion node needs a kind attribute");
  std::string name = n.get_string("kind", "");
  if (auto k = parse_fusion_kind(name)) return *k;
  n.fail("unknown fusion kind '" + name + "' (expected pointwise, reduction, gemm, conv or single)");
}

Graph& fusion_body(const Node& n) {
  Graph* body = n.get_graph("body");
  if (body == nullptr) n.fail("a fusion node needs a body region");
  return *body;
}

std::optional<std::vector<int64_t>> reduction_axes(const Node& n) {
  const Type& in = n.input(0)->type();
  if (!in.is_tensor() || !in.has_rank()) return std::nullopt;
  auto rank = static_cast<int64_t>(in.rank());
  std::vector<int64_t> axes;
  if (n.opset() >= (n.op_type() == "ReduceSum" ? 13 : 18)) {
    if (n.has_input(1)) {
      const Tensor* c = constant_of(n.input(1));
      if (c == nullptr) return std::nullopt;
      axes = c->to_i64_vector();
    }
    if (axes.empty() && n.get_int("noop_with_empty_axes", 0) != 0) return std::vector<int64_t>{};
  } else {
    axes = n.get_ints("axes");
  }
  if (axes.empty())
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

const Tensor* constant_of(const Value* v) {
  if (v == nullptr) return nullptr;
  if (v->is_initializer() && !v->is_graph_input()) return &v->initializer();
  const Node* p = v->producer();
  if (p != nullptr && p->op_type() == "Constant" && p->domain().empty()) return p->get_tensor("value");
  return nullptr;
}

std::string verify_fusion(const Node& n) {
  std::string prefix = "fusion " + who(n) + ": ";
  if (!is_fusion(n)) return prefix + "is not a tcc::Fusion node";
  std::string kind_name = n.get_string("kind", "");
  std::optional<FusionKind> kind = parse_fusion_kind(kind_name);
  if (!kind) return prefix + "unknown kind '" + kind_name + "'";
  const Graph* body = n.get_graph("body");
  if (body == nullptr) return prefix + "has no body";
  if (body->inputs().size() != n.num_inputs())
    return prefix + "has " + std::to_string(n.num_inputs()) + " inputs but its body " +
           std::to_string(body->inputs().size());
  if (body->outputs().size() != n.num_outputs())
    return prefix + "has " + std::to_string(n.num_outputs()) + " outputs but its body " +
           std::to_string(body->outputs().size());
  for (size_t i = 0; i < n.num_inputs(); ++i) {
    if (n.input(i) == nullptr) return prefix + "input " + std::to_string(i) + " is absent";
    if (n.input(i)->type() != body->inputs()[i]->type())
      return prefix + "input " + std::to_string(i) + " has type " + n.input(i)->type().str() + " but body input '" +
             body->inputs()[i]->name() + "' " + body->inputs()[i]->type().str();
  }
  for (size_t i = 0; i < n.num_outputs(); ++i)
    if (n.output(i)->type() != body->outputs()[i]->type())
      return prefix + "output '" + n.output(i)->name() + "' has type " + n.output(i)->type().str() +
             " but body output '" + body->outputs()[i]->name() + "' " + body->outputs()[i]->type().str();
  if (body->nodes().empty()) return prefix + "has an empty body";
  for (const auto& b : body->nodes()) {
    for (const Value* in : b->inputs())
      if (in != nullptr && in->graph() != body)
        return prefix + "body " + who(*b) + " reads '" + in->name() + "' from outside the body";
    KernelRole role = kernel_role(*b);
    if (role == KernelRole::None) return prefix + "body " + who(*b) + " is not an op generated kernels compute";
    const Node* from = b->input(0) == nullptr ? nullptr : b->input(0)->producer();
    // A chain of movement ops composes into one load (copy kernels, and the
    // leaves pointwise and reduction kernels read), or, on an attention's
    // output, into its store; each link is checked in turn.
    bool composes = *kind == FusionKind::Single || *kind == FusionKind::Pointwise || *kind == FusionKind::Reduction;
    bool chained = composes && from != nullptr && kernel_role(*from) == KernelRole::Movement;
    bool output_view = *kind == FusionKind::Single && from != nullptr && kernel_role(*from) == KernelRole::Attention;
    if (role == KernelRole::Movement && !b->input(0)->is_graph_input() && !chained && !output_view)
      return prefix + "body " + who(*b) + " moves '" + b->input(0)->name() +
             "', which is computed in the body; movement ops may only read body inputs (or, in a single, "
             "pointwise or reduction body, the movement op before them; in a single body, an attention's output)";
  }
  for (const Value* out : body->outputs())
    if (out->graph() != body) return prefix + "body output '" + out->name() + "' is not a body value";
  std::string why = check_kind(*kind, *body);
  return why.empty() ? "" : prefix + why;
}

}  // namespace tcc
