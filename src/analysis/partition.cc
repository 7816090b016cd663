#include "src/analysis/partition.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tcc {

namespace {

// Whether the data decides the size of a node's outputs, whatever its inputs (NonZero's count).
bool data_sized(const OpDef* def) { return def && def->has(kDataDependentShape); }

std::string value_ref(const Value* v) { return "'%" + v->name() + "'"; }

class BreakClassifier {
 public:
  BreakClassifier(const ShapeInfo& info, const OpRegistry& registry) : info_(info), registry_(registry) {}

  GraphBreak classify(const Node& n) {
    GraphBreak b;
    b.node = &n;
    if (non_tensor(n, b)) return b;
    if (control_flow(n, b)) return b;
    if (data_dependent_shape(n, b)) return b;
    if (unsupported(n, b)) return b;
    b.node = nullptr;
    return b;
  }

  // Records which node outputs are computed from shapes and constants only.
  void note_outputs(const Node& n) {
    const OpDef* def = registry_.lookup(n);
    bool independent;
    if (def && def->has(kShapeOnly)) {
      independent = true;
    } else if (data_sized(def) || !n.regions().empty()) {
      independent = false;
    } else if (n.num_inputs() == 0) {
      independent = def && def->has(kConstant) && !def->has(kRandom);
    } else {
      independent = !(def && def->has(kRandom));
      for (const Value* in : n.inputs())
        if (in && !shape_derived(in)) independent = false;
    }
    if (independent)
      for (const Value* out : n.outputs()) shape_derived_.insert(out);
  }

 private:
  bool is_const(const Value* v) const { return v->is_initializer() || info_.consts.count(v); }

  // True when v is a function of shapes, constants and int scalar parameters
  // (rank-0 integer model inputs, which are guarded like sizes), not tensor data.
  bool shape_derived(const Value* v) const {
    if (is_const(v) || info_.values.count(v) || shape_derived_.count(v)) return true;
    if (v->is_graph_input() && v->graph()->parent() == nullptr) {
      const Type& t = v->type();
      return t.is_tensor() && t.has_rank() && t.rank() == 0 && is_integer(t.dtype());
    }
    return false;
  }

  bool non_tensor(const Node& n, GraphBreak& b) {
    auto bad_type = [](const Value* v) {
      const Type& t = v->type();
      return t.kind() == Type::Kind::Sequence || t.kind() == Type::Kind::Optional ||
             (t.is_tensor() && t.dtype() == DType::String);
    };
    const Value* culprit = nullptr;
    for (const Value* v : n.inputs())
      if (v && !culprit && bad_type(v)) culprit = v;
    for (const Value* v : n.outputs())
      if (!culprit && bad_type(v)) culprit = v;
    const OpDef* def = registry_.lookup(n);
    if (!culprit && !(def && def->has(kNonTensor))) return false;
    b.reason = "non_tensor_value";
    b.message = culprit ? n.op_type() + " handles " + value_ref(culprit) + " of type " + culprit->type().str() +
                              "; tcc compiles tensors only"
                        : n.op_type() + " works on sequence, optional or string values; tcc compiles tensors only";
    b.hint = "keep values as tensors (Concat/Split instead of sequence ops); the node runs eagerly";
    return true;
  }

  bool control_flow(const Node& n, GraphBreak& b) {
    const OpDef* def = registry_.lookup(n);
    if (!def || !def->region_choice) return false;
    const std::string& op = n.op_type();
    const RegionChoice& choice = *def->region_choice;
    if (const Value* data = choice.data_operand(n, [this](const Value* v) { return is_const(v); })) {
      b.reason = "data_dependent_control_flow";
      b.message = op + "'s " + choice.what + " " + value_ref(data) +
                  " comes from tensor data; tcc does not compile device-side control flow, so the node runs eagerly";
      b.hint = def->break_hint;
      return true;
    }
    // A constant condition or trip count is resolved at compile time; the
    // bodies still have to compile.
    for (const Graph* body : n.regions())
      for (const auto& inner : body->nodes()) {
        GraphBreak ib = classify(*inner);
        note_outputs(*inner);
        if (!ib.node) continue;
        b.reason = ib.reason;
        b.message = "in " + op + " region '" + body->name() + "', " + inner->op_type() + " '" + inner->name() +
                    "': " + ib.message;
        b.hint = ib.hint;
        return true;
      }
    return false;
  }

  bool data_dependent_shape(const Node& n, GraphBreak& b) {
    const std::string& op = n.op_type();
    const OpDef* def = registry_.lookup(n);
    if (data_sized(def)) {
      b.reason = "data_dependent_shape";
      b.message = op + "'s output size depends on the values of its input, not only on shapes";
      b.hint = def->break_hint.empty() ? "keep shapes static (pad to a fixed size), or accept an eager step here"
                                       : def->break_hint;
      return true;
    }
    if (!def) return false;
    for (size_t i : def->shape_inputs) {
      if (!n.has_input(i) || shape_derived(n.input(i))) continue;
      b.reason = "data_dependent_shape";
      b.message = op + "'s input " + std::to_string(i) + " " + value_ref(n.input(i)) +
                  " comes from tensor data, not from shapes or constants, so the output shape depends on data";
      const Value* v = n.input(i);
      b.hint = v->is_graph_input() && !v->is_initializer()
                   ? "compile for its values with `tcc compile --specialize " + v->name() +
                         "=...` (the module guards them), or compute it from Shape ops or constants"
                   : "compute it from Shape ops or constants (exporters' shape chains compile)";
      return true;
    }
    return false;
  }

  bool unsupported(const Node& n, GraphBreak& b) {
    const OpDef* def = registry_.lookup(n);
    if (!def) {
      b.reason = "unsupported_op";
      b.message = registry_.why_unsupported(n);
      b.hint = "export with ops tcc supports (tcc explain lists breaks; the node runs eagerly)";
      return true;
    }
    if (def->dtypes.empty()) return false;
    for (const Value* v : n.inputs()) {
      if (!v || !v->type().is_tensor() || v->type().dtype() == DType::Undefined) continue;
      DType t = v->type().dtype();
      if (std::find(def->dtypes.begin(), def->dtypes.end(), t) != def->dtypes.end()) continue;
      std::string supported;
      for (DType d : def->dtypes) supported += (supported.empty() ? "" : ", ") + std::string(dtype_name(d));
      b.reason = "unsupported_op";
      b.message = n.op_type() + " does not support dtype " + std::string(dtype_name(t)) + " (input " +
                  value_ref(v) + "); supported: " + supported;
      b.hint = "cast the input to a supported dtype before this node";
      return true;
    }
    return false;
  }

  const ShapeInfo& info_;
  const OpRegistry& registry_;
  std::unordered_set<const Value*> shape_derived_;
};

// Values a node reads, including those its regions read from the main graph.
void collect_reads(const Node& n, const Graph& main, std::vector<const Value*>& out) {
  for (const Value* v : n.inputs())
    if (v && v->graph() == &main) out.push_back(v);
  for (const Graph* r : n.regions())
    for (const auto& inner : r->nodes()) collect_reads(*inner, main, out);
}

}  // namespace

Partition partition_graph(const Graph& g, const ShapeInfo& info, const OpRegistry& registry) {
  Partition p;
  BreakClassifier classifier(info, registry);
  // Level of a value: the first region index that may read it. A break node
  // at level L reads from regions <= L and feeds regions >= L+1, and a
  // compiled node never sits below its inputs, so every edge between regions
  // points forward: no cycles.
  std::unordered_map<const Value*, int> avail;
  std::vector<int> node_level(g.nodes().size());
  std::vector<bool> is_break(g.nodes().size());
  std::vector<const Value*> reads;
  int max_level = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = *g.nodes()[i];
    GraphBreak b = classifier.classify(n);
    classifier.note_outputs(n);
    reads.clear();
    collect_reads(n, g, reads);
    int level = 0;
    for (const Value* v : reads) {
      auto it = avail.find(v);
      if (it != avail.end()) level = std::max(level, it->second);
    }
    node_level[i] = level;
    is_break[i] = b.node != nullptr;
    for (const Value* out : n.outputs()) avail[out] = b.node ? level + 1 : level;
    max_level = std::max(max_level, level);
    if (b.node) p.breaks.push_back(std::move(b));
  }
  // Regions are numbered in level order, which is the order they run in.
  std::vector<int> region_of_level(max_level + 1, -1);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (!is_break[i]) region_of_level[node_level[i]] = 0;
  for (int& r : region_of_level)
    if (r >= 0) {
      r = static_cast<int>(p.regions.size());
      p.regions.push_back(CompiledRegion{r, {}, {}, {}});
    }
  std::vector<std::unordered_set<const Value*>> region_reads(p.regions.size());
  std::unordered_set<const Value*> data_dependent;  // outputs of breaks whose sizes the data sets
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = *g.nodes()[i];
    if (is_break[i]) {
      if (data_sized(registry.lookup(n))) data_dependent.insert(n.outputs().begin(), n.outputs().end());
      continue;
    }
    int r = region_of_level[node_level[i]];
    p.regions[r].nodes.push_back(&n);
    reads.clear();
    collect_reads(n, g, reads);
    std::vector<const Value*>& dd = p.regions[r].data_dependent_inputs;
    for (const Value* v : reads) {
      if (v->is_graph_input() && !v->is_initializer()) region_reads[r].insert(v);
      if (data_dependent.count(v) && std::find(dd.begin(), dd.end(), v) == dd.end()) dd.push_back(v);
    }
  }
  for (auto& r : p.regions)
    for (const Value* in : g.inputs())
      if (region_reads[r.id].count(in)) r.graph_inputs.push_back(in);
  return p;
}

}  // namespace tcc
