// fuse: groups nodes into kernels, each group replaced by one tcc::Fusion node
// whose body holds the original nodes unchanged (src/ops/fusion.h).
//
// Greedy, in the spirit of Inductor's scheduler: what may join a kernel is
// src/ops/kernel_roles.h's kernel_role; groups form in this order, each step
// taking only nodes no earlier step took:
//   1. gemm and conv: each MatMul/Gemm with the epilogue chain cuBLASLt applies, every
//      link the only reader of the previous one: at most one Add of a bias
//      along the last axis ([N] or [1, .., N]), at most one Add of a residual of
//      the output's shape, then optionally Relu or tanh-Gelu, which ends it; a
//      MatMul also takes a Transpose of its last two axes that only it reads
//      (the operand is read transposed: swaps_last_two_axes);
//      conv: each Conv the same way with what cuDNN applies: a bias along the
//      channel axis (Conv's own B, or an Add of [K, 1, 1]), a residual, Relu;
//      an attention is a kernel of its own that also takes the Transpose of
//      its output back to [b, s, h, d] and the reshapes after it, storing
//      there (attach_output_view);
//   2. reduction: each reduction grows over its neighbours: pointwise nodes
//      computing over the reduced tensor's shape or the kept shape (prologue
//      and epilogue) and reductions of the same shape over the same axes
//      (softmax's max then sum, layernorm's two means);
//   3. pointwise: each remaining pointwise node grows over connected pointwise
//      nodes computing over the same output shape (inputs may broadcast), over
//      a Concat of that shape with the float pointwise chains that compute its
//      inputs (RoPE's rotate_half: Neg of a slice, Concat, then Mul and Add),
//      and over a pool or depthwise Conv of that output shape whose operands
//      come from outside the group (the window op leads; its epilogue follows);
//      a Concat whose inputs such chains compute (a chain may start at a
//      Concat: partial RoPE concatenates rotate_half's product with the
//      unrotated rest) and that no group took leads one of its own, as does
//      one reading a view that only it reads (torch.roll: two slices of one
//      tensor, swapped), which step 4 then brings in;
//   4. movement leaves: a movement node whose every reader is in one pointwise
//      or reduction group joins it (its data comes from outside, so its loads
//      stay affine; a movement op on an intermediate never joins), and so does
//      a view of an attention's Q, K or V that keeps each head's elements
//      contiguous (V's head split and transpose, GPT-2's slices of its fused
//      projection: views_attention_operand); visited
//      last to first, so a chain of them (Slice then Slice of a mask) joins
//      whole and its loads compose;
//   5. single: every Concat, Gather, ScatterAdd and pool that step 3 left is a
//      kernel of its own, and so is every other movement node, except that one reading the end of
//      such a chain, as its only reader, extends it (one copy kernel for a
//      Slice, a reshape that splits axes and a Transpose: split_axes says which
//      reshapes compose with strides). Before grouping, a movement node read
//      only by several movement nodes is copied for each (unshare_movement), so
//      each chain starts from the data.
// A merge that would put an outside node (or group) on a path between two
// members is refused, so the graph of groups stays acyclic. Nodes of role None
// stay as they are, and so do nodes that run once per binding of the symbols
// (passes/binding_constants.h: a causal mask's Shape -> ConstantOfShape ->
// Trilu), which kernels read as they read weights. A group formed wholly of
// nodes a binding determines, none of its values a graph output (RoPE's Range
// -> Mul -> Cos table), is not fused either: its nodes run once per binding too.
//
// A member's output read outside its group (or a graph output) becomes an
// output of the fusion node, which takes over the value's name, so graph
// outputs keep theirs; values inside bodies get fresh names. Small constant
// arguments (scalars, axes, shapes: anything a kernel needs as a literal) are
// copied into the body; other outside values, weights included, are body
// inputs. Constant nodes and initializers left without readers by that copy
// are removed. Fusion nodes are named fused_<N> in graph order.
//
// Without fusion (PassContext::fusion false, the eager mode) no merge is
// accepted: every node with a kernel role becomes a kernel of its own.
//
// Expects: a verified graph with types inferred (nodes without fully known
// tensor types have role None and are left alone).
// Leaves alone: nodes inside regions.
#include <algorithm>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "passes/binding_constants.h"
#include "passes/pass.h"
#include "src/ir/replace_nodes.h"
#include "passes/rewrite.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_registry.h"

namespace tcc {

namespace {

// Constant arguments a kernel reads as literals rather than from a buffer.
std::optional<Tensor> literal_argument(const Value* v) {
  std::optional<Tensor> t = constant_value(v);
  if (!t || !is_literal(t->dtype(), static_cast<int64_t>(t->rank()), t->numel())) return std::nullopt;
  return t;
}

const Dims& shape_of(const Value* v) { return v->type().shape(); }

// How many of v's dims are symbolic (0 for a value of unknown rank).
size_t symbolic_dims(const Value* v) {
  if (!v->type().is_tensor() || !v->type().has_rank()) return 0;
  return static_cast<size_t>(std::count_if(shape_of(v).begin(), shape_of(v).end(),
                                           [](const Dim& d) { return !d.is_static(); }));
}

// Whether reshape n only splits its input's axes, so it composes with the
// strides of a chain before it (split_axes).
bool splits_axes(const Node& n) {
  std::vector<SymExpr> from, to;
  for (const Dim& d : shape_of(n.input(0))) from.push_back(d.expr());
  for (const Dim& d : shape_of(n.output(0))) to.push_back(d.expr());
  return split_axes(from, to).has_value();
}

// Whether n is a Slice that steps by 1 along every axis it slices (its
// strides are its input's, from an offset).
bool slices_by_unit_steps(const Node& n) {
  if (n.op_type() != "Slice") return false;
  std::vector<int64_t> steps;
  if (n.domain() == kTccDomain) {
    steps = n.get_ints("steps");
  } else if (n.opset() >= 10 && n.has_input(4)) {
    const std::optional<Tensor> t = literal_argument(n.input(4));
    if (!t) return false;
    steps = t->to_i64_vector();
  }
  return std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; });
}

struct Group {
  FusionKind kind = FusionKind::Single;
  bool fused = false;               // false: a lone node not (yet) in any kernel
  std::vector<Node*> members;       // kept in graph order when materialized
  // Reduction groups: the reduced shape, axes and kept shape; pointwise groups: the output shape in `full`.
  Dims full, kept;
  std::vector<int64_t> axes;
};

class Fuser {
 public:
  Fuser(Graph& g, bool merge) : g_(g), merge_(merge) {
    const ConstantAnalysis constants = analyze_constants(g);
    determined_ = constants.determined;
    for (const auto& n : g.nodes()) {
      size_t i = order_.size();
      order_.push_back(n.get());
      index_[n.get()] = i;
      role_[n.get()] = constants.per_binding.count(n.get()) ? KernelRole::None : kernel_role(*n);
      Group lone;
      lone.members = {n.get()};
      groups_.push_back(std::move(lone));
      group_of_[n.get()] = i;
      collect_reads(*n, *n);
    }
    for (const Value* out : g.outputs()) graph_outputs_.insert(out);
    for (const Value* in : g.inputs())
      if (!in->is_initializer()) widest_input_ = std::max(widest_input_, symbolic_dims(in));
  }

  // Forms the groups (steps 1-5) and returns the fused ones, each with at least one member.
  std::vector<Group*> partition() {
    for (Node* n : order_)
      if (role(n) == KernelRole::Contraction) grow_gemm(*n);
      else if (role(n) == KernelRole::Convolution) grow_conv(*n);
    for (Node* n : order_)
      if (role(n) == KernelRole::Attention || role(n) == KernelRole::TopK || role(n) == KernelRole::Recurrence ||
          role(n) == KernelRole::Nms || role(n) == KernelRole::RoiAlign)
        start(*n, FusionKind::Single);
    for (Node* n : order_)
      if (role(n) == KernelRole::Attention) attach_output_view(*n);
    for (Node* n : order_)
      if (role(n) == KernelRole::Reduction && !taken(n)) grow_reduction(*n);
    // A pointwise node (or Concat) that computes a Concat's input waits for a
    // group the Concat joins, then for one the outermost Concat leads.
    for (Node* n : order_)
      if (role(n) == KernelRole::Pointwise && !taken(n) && fed_concat(*n) == nullptr) grow_pointwise(*n);
    for (Node* n : order_)
      if (is_concat(*n) && !taken(n) && fed_concat(*n) == nullptr && computes_an_operand(*n)) grow_pointwise(*n);
    for (Node* n : order_)
      if (role(n) == KernelRole::Pointwise && !taken(n)) grow_pointwise(*n);
    // A Concat of views (torch.roll) leads a pointwise kernel, which its views then join as loads.
    for (Node* n : order_)
      if (is_concat(*n) && !taken(n) && reads_a_leaf(*n)) grow_pointwise(*n);
    // Last to first, so a chain of leaves (a mask's two slices) joins from its reader's end.
    for (auto it = order_.rbegin(); it != order_.rend(); ++it)
      if (role(*it) == KernelRole::Movement && !taken(*it)) attach_leaf(**it);
    for (Node* n : order_)
      if ((role(n) == KernelRole::Movement || role(n) == KernelRole::Indexed) && !taken(n) && !extend_chain(*n))
        start(*n, FusionKind::Single);
    std::vector<Group*> fused;
    for (Group& gr : groups_) {
      if (!gr.fused || gr.members.empty()) continue;
      std::sort(gr.members.begin(), gr.members.end(),
                [&](const Node* a, const Node* b) { return index_.at(a) < index_.at(b); });
      fused.push_back(&gr);
    }
    return fused;
  }

  // Outputs of gr's members read outside gr, or graph outputs, in member order.
  std::vector<Value*> exported(const Group& gr) const {
    std::vector<Value*> out;
    for (const Node* m : gr.members)
      for (Value* v : m->outputs()) {
        bool outside = is_graph_output(v);
        for (const Node* r : readers(v)) outside |= &groups_[group_of_.at(r)] != &gr;
        if (outside) out.push_back(v);
      }
    return out;
  }

  // Whether gr's kernel would compute from a binding of the symbols alone,
  // none of its values a graph output, and none of those it exports having
  // more symbolic dims than some graph input: its nodes then run once per
  // binding (binding_constants.h) rather than every step. The module keeps a
  // binding's values for as long as it keeps the binding, so one that grows
  // faster than the inputs (a [b, 1, s, s] mask of [b, s] ids) is computed in
  // its step instead.
  bool binding_determined(const Group& gr, const std::vector<Value*>& exported) const {
    for (const Node* m : gr.members) {
      if (!determined_.count(m)) return false;
      for (const Value* v : m->outputs())
        if (is_graph_output(v)) return false;
    }
    return std::all_of(exported.begin(), exported.end(),
                       [&](const Value* v) { return symbolic_dims(v) <= widest_input_; });
  }

  // Nodes of the main graph that read v (directly or in their regions).
  const std::vector<Node*>& readers(const Value* v) const {
    static const std::vector<Node*> kNone;
    auto it = readers_.find(v);
    return it == readers_.end() ? kNone : it->second;
  }
  bool is_graph_output(const Value* v) const { return graph_outputs_.count(v) != 0; }

 private:
  void collect_reads(const Node& in, Node& reader) {
    for (const Value* v : in.inputs())
      if (v != nullptr) {
        auto& rs = readers_[v];
        if (rs.empty() || rs.back() != &reader) rs.push_back(&reader);
      }
    for (const Graph* r : in.regions())
      for (const auto& inner : r->nodes()) collect_reads(*inner, reader);
    for (const Graph* r : in.regions())
      for (const Value* out : r->outputs()) readers_[out].push_back(&reader);
  }

  KernelRole role(const Node* n) const { return role_.at(n); }
  Group& group(const Node* n) { return groups_[group_of_.at(n)]; }
  const Group& group(const Node* n) const { return groups_[group_of_.at(n)]; }
  bool taken(const Node* n) { return group(n).fused; }

  Group& start(Node& n, FusionKind kind) {
    Group& gr = group(&n);
    gr.fused = true;
    gr.kind = kind;
    return gr;
  }

  // Units (groups or lone nodes) that read an output of some member of gr.
  std::vector<size_t> successors(const Group& gr) const {
    std::vector<size_t> out;
    for (const Node* m : gr.members)
      for (const Value* v : m->outputs())
        for (const Node* r : readers(v)) out.push_back(group_of_.at(r));
    return out;
  }

  // Whether merging units a and b would put another unit on a path between
  // them. The walk visits every unit downstream of a and b: one whose members
  // all come after both in graph order may still lead back through a group that
  // holds earlier and later nodes (training graphs join a forward reduction with
  // its backward epilogue), so graph order cannot cut it short.
  bool creates_cycle(size_t a, size_t b) const {
    std::vector<char> seen(groups_.size(), 0);
    std::vector<size_t> work;
    for (size_t u : {a, b})
      for (size_t s : successors(groups_[u]))
        if (s != a && s != b && !seen[s]) {
          seen[s] = 1;
          work.push_back(s);
        }
    while (!work.empty()) {
      size_t u = work.back();
      work.pop_back();
      for (size_t s : successors(groups_[u])) {
        if (s == a || s == b) return true;
        if (!seen[s]) {
          seen[s] = 1;
          work.push_back(s);
        }
      }
    }
    return false;
  }

  // Moves the lone node n into gr when that keeps the groups acyclic.
  bool try_merge(Group& gr, Node& n) {
    size_t a = static_cast<size_t>(&gr - groups_.data()), b = group_of_.at(&n);
    if (!merge_ || a == b || groups_[b].fused || creates_cycle(a, b)) return false;
    gr.members.push_back(&n);
    groups_[b].members.clear();
    group_of_[&n] = a;
    return true;
  }

  // The one node reading v, when there is exactly one and v is not a graph output.
  Node* only_reader(const Value* v) const {
    const auto& rs = readers(v);
    if (rs.size() != 1 || is_graph_output(v)) return nullptr;
    size_t uses = 0;
    for (const Value* in : rs[0]->inputs()) uses += in == v;
    return uses == 1 ? rs[0] : nullptr;
  }

  // ---- 1. gemm and conv ------------------------------------------------------

  // A bias broadcast along the last axis of out: [N] or [1, .., 1, N].
  static bool is_bias_shape(const Dims& bias, const Dims& out) {
    if (bias.empty() || out.empty() || bias.size() > out.size() || bias.back() != out.back()) return false;
    return std::all_of(bias.begin(), bias.end() - 1, [](const Dim& d) { return d == Dim(1); });
  }

  // A bias broadcast along the channel axis (1) of a convolution's out: [K, 1, .., 1] or [1, K, 1, .., 1].
  static bool is_channel_bias_shape(const Dims& bias, const Dims& out) {
    if (out.size() < 2 || bias.size() + 1 < out.size() || bias.size() > out.size()) return false;
    size_t lead = out.size() - bias.size();
    for (size_t k = 0; k < bias.size(); ++k)
      if (bias[k] != (lead + k == 1 ? out[1] : Dim(1))) return false;
    return true;
  }

  void grow_gemm(Node& mm) {
    Group& gr = start(mm, FusionKind::Gemm);
    // A MatMul reads an operand that only it reads transposed, in place (kTransposedOperands).
    const OpDef* def = OpRegistry::get().lookup(mm);
    const bool int8 = mm.op_type() == "MatMulInteger";
    if (def != nullptr && def->has(kTransposedOperands))
      for (Value* operand : {mm.input(0), mm.input(1)}) {
        Node* t = operand->producer();
        if (t != nullptr && t->graph() == &g_ && swaps_last_two_axes(*t) && only_reader(operand) == &mm &&
            !taken(t) && !operand->type().shape().empty())
          try_merge(gr, *t);
      }
    // The int8 product's corrections and requantization are int32 and f64
    // pointwise work of their own: cuBLASLt's epilogues are float.
    if (int8) return;
    const Dims& out = shape_of(mm.output(0));
    bool bias = false, residual = false;
    if (mm.op_type() == "Gemm" && mm.has_input(2)) {
      // Gemm's own C takes the slot its shape fits; any other broadcast takes both.
      const Dims& c = shape_of(mm.input(2));
      residual = c == out;
      bias = !residual && is_bias_shape(c, out);
      if (!bias && !residual) bias = residual = true;
    }
    // A MatMul by a vector drops N: its output's last axis is M, so nothing
    // added along it is cuBLASLt's bias (one value per column).
    bool drops_n = mm.op_type() == "MatMul" && shape_of(mm.input(1)).size() == 1;
    auto bias_along_n = [drops_n](const Dims& b, const Dims& o) { return !drops_n && is_bias_shape(b, o); };
    grow_epilogue(gr, mm, bias, residual, bias_along_n, kGemmEpilogue);
  }

  // Conv's own B is the bias; cuDNN adds a residual and applies its activation.
  void grow_conv(Node& conv) {
    Group& gr = start(conv, FusionKind::Conv);
    grow_epilogue(gr, conv, conv.has_input(2), false, is_channel_bias_shape, kConvEpilogue);
  }

  // Grows a library call's group along its only-reader chain: at most one bias
  // Add (shape per `is_bias`), at most one residual Add of the output's shape,
  // then optionally an activation the `library`'s epilogue applies (OpDef::epilogues),
  // which ends it. `bias` / `residual` say which slots the call itself already fills.
  template <typename IsBias>
  void grow_epilogue(Group& gr, const Node& op, bool bias, bool residual, IsBias is_bias, LibraryEpilogue library) {
    const Dims& out = shape_of(op.output(0));
    DType dtype = op.output(0)->type().dtype();
    const Node* tail = &op;
    for (;;) {
      Node* r = only_reader(tail->output(0));
      if (r == nullptr || role(r) != KernelRole::Pointwise || taken(r)) return;
      if (r->output(0)->type().dtype() != dtype) return;
      bool activation = library_epilogue(*r, library);
      if (r->op_type() == "Add" && r->num_inputs() == 2) {
        const Value* other = r->input(0) == tail->output(0) ? r->input(1) : r->input(0);
        if (other->type().dtype() != dtype) return;
        if (!residual && shape_of(other) == out) residual = true;
        else if (!bias && is_bias(shape_of(other), out)) bias = true;
        else return;
      } else if (!activation) {
        return;
      }
      if (!try_merge(gr, *r)) return;
      if (activation) return;
      tail = r;
    }
  }

  // ---- 2. reduction ---------------------------------------------------------

  // Whether a value of the kept shape, broadcast over the full shape, lines up
  // with the kept axes. Always with keepdims=1; with keepdims=0 broadcasting
  // right-aligns it, so its axes fall on the trailing ones (or on ones of extent
  // 1): x - max(x) over every axis or over the leading ones lines up, over
  // axis 1 of [n, n] it would read another row's result, which the row's
  // kernel never computes.
  static bool kept_lines_up(const Group& gr) {
    size_t lead = gr.full.size() - gr.kept.size();
    if (lead == 0) return true;
    size_t k = 0;  // the kept value's axis that full axis a is
    for (size_t a = 0; a < gr.full.size(); ++a) {
      if (std::binary_search(gr.axes.begin(), gr.axes.end(), static_cast<int64_t>(a))) continue;
      const Dim& d = gr.kept[k];
      if (a != lead + k && !(d.is_static() && d.value() == 1)) return false;
      ++k;
    }
    return true;
  }

  // Whether n computes over the group's shapes: a pointwise node producing the
  // full or the kept shape, or a reduction like the group's. A full-shaped node
  // reading a kept-shaped value stays out where that value would not line up
  // (kept_lines_up); whether the value is the group's result or comes from
  // outside, since the node that computes it may join after n.
  bool fits_reduction(const Group& gr, const Node& n) const {
    if (role(&n) == KernelRole::Pointwise) {
      const Dims& s = shape_of(n.output(0));
      if (s == gr.kept) return true;
      if (s != gr.full) return false;
      return kept_lines_up(gr) || std::none_of(n.inputs().begin(), n.inputs().end(), [&](const Value* in) {
               return in != nullptr && shape_of(in) == gr.kept;
             });
    }
    if (role(&n) != KernelRole::Reduction) return false;
    std::optional<std::vector<int64_t>> axes = reduction_axes(n);
    return axes && *axes == gr.axes && shape_of(n.input(0)) == gr.full && shape_of(n.output(0)) == gr.kept;
  }

  // Grows gr from its members to neighbours that `fits` accepts, breadth first.
  template <typename Fits>
  void grow(Group& gr, Fits fits) {
    std::queue<Node*> work;
    for (Node* m : gr.members) work.push(m);
    while (!work.empty()) {
      Node* m = work.front();
      work.pop();
      std::vector<Node*> next;
      for (const Value* in : m->inputs())
        if (in != nullptr && in->producer() != nullptr && in->producer()->graph() == &g_) next.push_back(in->producer());
      for (const Value* out : m->outputs())
        for (Node* r : readers(out)) next.push_back(r);
      for (Node* c : next)
        if (!taken(c) && fits(*c) && try_merge(gr, *c)) work.push(c);
    }
  }

  void grow_reduction(Node& rd) {
    std::optional<std::vector<int64_t>> axes = reduction_axes(rd);
    if (!axes) return;
    Group& gr = start(rd, FusionKind::Reduction);
    gr.full = shape_of(rd.input(0));
    gr.kept = shape_of(rd.output(0));
    gr.axes = *axes;
    grow(gr, [&](const Node& n) { return fits_reduction(gr, n); });
  }

  // ---- 3. pointwise ---------------------------------------------------------

  // A pool or depthwise Conv (kWindow, role Indexed: lowered by its unrolled
  // window): it may lead a pointwise kernel whose shape is its output's,
  // reading its operands from buffers.
  bool is_window(const Node& n) const {
    const OpDef* def = OpRegistry::get().lookup(n);
    return role(&n) == KernelRole::Indexed && def != nullptr && def->has(kWindow);
  }

  // Whether a node of group gr computes one of `window`'s operands.
  bool feeds_window(const Group& gr, const Node& window) const {
    for (const Value* in : window.inputs())
      if (in != nullptr && in->producer() != nullptr && in->producer()->graph() == &g_ &&
          &group(in->producer()) == &gr)
        return true;
    return false;
  }

  // An ONNX Concat a kernel computes (lower_concat).
  bool is_concat(const Node& n) const {
    return role(&n) == KernelRole::Indexed && n.op_type() == "Concat" && n.domain().empty();
  }

  // The Concat whose input n computes, through a chain of pointwise nodes of
  // n's shape, each the only reader of the one before, or null; n may be a
  // Concat itself (partial RoPE: the Concat of the rotated part and the rest
  // reads a chain that reads rotate_half's Concat). The lowering computes
  // such a chain at the input's own coordinates where the Concat takes that
  // input, its loads guarded by the input's range, so values of the lanes it
  // does not take are computed and dropped: float ones only (an integer
  // division of a dropped lane could trap).
  const Node* fed_concat(const Node& n) const {
    const Node* cur = &n;
    for (;;) {
      const bool computed = role(cur) == KernelRole::Pointwise || (cur == &n && is_concat(n));
      if (!computed || cur->num_outputs() != 1 || !is_float(cur->output(0)->type().dtype())) return nullptr;
      const Node* r = only_reader(cur->output(0));
      if (r == nullptr) return nullptr;
      if (is_concat(*r)) return r;
      if (shape_of(r->output(0)) != shape_of(cur->output(0))) return nullptr;
      cur = r;
    }
  }

  // Whether a pointwise node computes one of Concat c's inputs.
  bool computes_an_operand(const Node& c) const {
    return std::any_of(c.inputs().begin(), c.inputs().end(), [&](const Value* in) {
      return in != nullptr && in->producer() != nullptr && in->producer()->graph() == &g_ &&
             fed_concat(*in->producer()) == &c;
    });
  }

  // Whether a movement node that only Concat c reads computes one of c's inputs.
  bool reads_a_leaf(const Node& c) const {
    return std::any_of(c.inputs().begin(), c.inputs().end(), [&](const Value* in) {
      const Node* p = in == nullptr ? nullptr : in->producer();
      return p != nullptr && p->graph() == &g_ && role(p) == KernelRole::Movement && only_reader(in) == &c;
    });
  }

  // Pointwise nodes over the same output shape; a Concat of that shape (each
  // point reads the input whose range holds it) with the pointwise chains that
  // compute its inputs (fed_concat); and a window op whose operands come from
  // outside the group (its epilogue: a bias, an activation) -- never a
  // pointwise node that computes a window member's operand.
  void grow_pointwise(Node& p) {
    Group& gr = start(p, FusionKind::Pointwise);
    gr.full = shape_of(p.output(0));
    grow(gr, [&](const Node& n) {
      if (const Node* c = fed_concat(n); c != nullptr && taken(c) && &group(c) == &gr) return true;
      if (shape_of(n.output(0)) != gr.full) return false;
      if (is_concat(n)) return true;
      if (is_window(n)) return !feeds_window(gr, n);
      if (role(&n) != KernelRole::Pointwise) return false;
      for (const Value* out : n.outputs())
        for (const Node* r : readers(out))
          if (&group(r) == &gr && is_window(*r)) return false;
      return true;
    });
  }

  // ---- an attention's output view -------------------------------------------

  // A forward attention over 4-D operands whose Y only a Transpose reads that
  // keeps the last axis last (heads merged back: [b, s, h, d]) takes that
  // Transpose and the reshapes after it, each the only reader of the one
  // before: the kernel stores Y at its transposed places and no copy kernel
  // moves it (Lowering::store_strides).
  void attach_output_view(Node& a) {
    if (a.op_type() == "AttentionGrad" || shape_of(a.input(0)).size() != 4) return;
    Node* t = only_reader(a.output(0));
    if (t == nullptr || role(t) != KernelRole::Movement || t->op_type() != "Transpose") return;
    const std::vector<int64_t> perm = t->get_ints("perm");
    if (perm.size() != 4 || perm[3] != 3 || !try_merge(group(&a), *t)) return;
    for (Node* last = t; Node* r = only_reader(last->output(0)); last = r)
      if (role(r) != KernelRole::Movement || !is_reshape(*r) || !try_merge(group(&a), *r)) return;
  }

  // ---- 4. movement leaves ---------------------------------------------------

  // Whether movement node m may join gr, an attention's group, as a view of
  // its Q, K or V, which the attention kernel reads from an offset through
  // strides per batch, head and row: a forward Attention over 4-D operands, m
  // a Transpose that keeps the last axis last, a reshape that splits axes or a
  // Slice by unit steps (so every element of a head stays contiguous; GPT-2's
  // q, k and v are slices of one projection), read by the attention as Q, K
  // or V or by such a view already in gr (V's head split and transpose).
  bool views_attention_operand(const Group& gr, const Node& m) const {
    const Node* a = gr.members.front();
    if (role(a) != KernelRole::Attention || a->op_type() == "AttentionGrad" || shape_of(a->input(0)).size() != 4)
      return false;
    const size_t rank = shape_of(m.output(0)).size();
    std::vector<int64_t> perm = m.op_type() == "Transpose" ? m.get_ints("perm") : std::vector<int64_t>{};
    bool keeps_last = !perm.empty() && perm.back() == static_cast<int64_t>(rank) - 1;
    if (!keeps_last && !(is_reshape(m) && splits_axes(m)) && !slices_by_unit_steps(m)) return false;
    for (const Node* r : readers(m.output(0))) {
      if (r == a) {
        for (size_t i = 3; i < a->num_inputs(); ++i)
          if (a->input(i) == m.output(0)) return false;
      } else if (role(r) != KernelRole::Movement) {
        return false;
      }
    }
    return true;
  }

  void attach_leaf(Node& m) {
    const Value* out = m.output(0);
    const auto& rs = readers(out);
    if (rs.empty() || is_graph_output(out)) return;
    Group& gr = group(rs[0]);
    if (!gr.fused) return;
    if (gr.kind == FusionKind::Single ? !views_attention_operand(gr, m)
                                      : gr.kind != FusionKind::Pointwise && gr.kind != FusionKind::Reduction)
      return;
    for (const Node* r : rs)
      if (&group(r) != &gr) return;
    // A reader that is itself a leaf now reads m's view, which may be strided:
    // only a reshape that splits axes composes with any strides.
    for (const Node* r : rs)
      if (role(r) == KernelRole::Movement && is_reshape(*r) && !splits_axes(*r)) return;
    for (const Value* in : m.inputs())
      if (in != nullptr && in->producer() != nullptr && in->producer()->graph() == &g_ && &group(in->producer()) == &gr)
        return;
    try_merge(gr, m);
  }

  // ---- 5. single -------------------------------------------------------------

  // Appends movement node m to the movement chain whose last node computes its
  // data input, when m is that value's only reader and the view composes.
  bool extend_chain(Node& m) {
    if (role(&m) != KernelRole::Movement) return false;
    Value* in = m.input(0);
    Node* p = in->producer();
    if (p == nullptr || p->graph() != &g_ || role(p) != KernelRole::Movement || !taken(p)) return false;
    Group& gr = group(p);
    if (gr.kind != FusionKind::Single || gr.members.back() != p || only_reader(in) != &m) return false;
    if (is_reshape(m) && !splits_axes(m)) return false;
    return try_merge(gr, m);
  }

  Graph& g_;
  bool merge_;
  std::vector<Node*> order_;
  std::unordered_map<const Node*, size_t> index_;
  std::unordered_map<const Node*, KernelRole> role_;
  std::vector<Group> groups_;
  std::unordered_map<const Node*, size_t> group_of_;
  std::unordered_map<const Value*, std::vector<Node*>> readers_;
  std::unordered_set<const Value*> graph_outputs_;
  std::unordered_set<const Node*> determined_;  // binding_constants.h's: nodes a binding determines
  size_t widest_input_ = 0;                      // the most symbolic dims of a graph input
};

// Replaces the members of one group (in graph order) by a tcc::Fusion node
// whose outputs take over `exported`. `copied` collects the outside
// constants copied into the body.
void materialize(Graph& g, const Group& gr, const std::vector<Value*>& exported,
                  std::unordered_set<const Value*>& copied) {
  std::unordered_set<const Node*> members(gr.members.begin(), gr.members.end());
  auto inside = [&](const Value* v) { return v->producer() != nullptr && members.count(v->producer()); };

  auto body = std::make_shared<Graph>();
  body->set_parent(&g, nullptr);
  std::unordered_map<const Value*, Value*> in_body;
  std::vector<Value*> node_inputs;
  // Data a kernel loads element by element (every operand of a pointwise op,
  // the tensor a reduction reduces) is a buffer even when small and constant,
  // unless it is one value: a folded Range that an Add reads has an element
  // per coordinate. A movement op's data is always a buffer its load indexes.
  // Small integer constants elsewhere (shapes, axes, slice bounds, pads) are
  // literals. A library call's operands (a GEMM's matrices, a convolution's
  // tensors), an attention's, a recurrence's, an NMS's and a RoiAlign's are buffers it is handed, whatever their size.
  std::unordered_set<const Value*> data, buffers;
  for (const Node* m : gr.members) {
    KernelRole role = kernel_role(*m);
    if (role == KernelRole::Pointwise)
      data.insert(m->inputs().begin(), m->inputs().end());
    else if (role == KernelRole::Reduction)
      data.insert(m->input(0));
    else if (role == KernelRole::Movement || role == KernelRole::TopK)
      buffers.insert(m->input(0));  // TopK's k is a literal
    else if (role == KernelRole::Contraction || role == KernelRole::Convolution || role == KernelRole::Attention ||
             role == KernelRole::Recurrence || role == KernelRole::Nms || role == KernelRole::RoiAlign)
      buffers.insert(m->inputs().begin(), m->inputs().end());
    else if (role == KernelRole::Indexed)
      // All but the literals its op names (literal_inputs: Pad's pads, fill and
      // axes, CumSum's axis); a few integers too: tables, indices, parts.
      for (size_t i = 0; i < m->num_inputs(); ++i)
        if (!kernel_literal_input(*m, i)) buffers.insert(m->input(i));
  }
  for (const Node* m : gr.members)
    for (Value* v : m->inputs()) {
      if (v == nullptr || inside(v) || in_body.count(v)) continue;
      std::optional<Tensor> lit = buffers.count(v) ? std::nullopt : literal_argument(v);
      if (lit && lit->numel() != 1 && data.count(v)) lit.reset();
      if (lit) {
        in_body[v] = body->add_initializer(g.fresh_name(v->name()), *lit);
        copied.insert(v);
      } else {
        in_body[v] = body->add_input(g.fresh_name(v->name()), v->type());
        node_inputs.push_back(v);
      }
    }
  for (const Node* m : gr.members) {
    std::vector<Value*> ins;
    for (Value* v : m->inputs()) ins.push_back(v == nullptr ? nullptr : in_body.at(v));
    std::vector<std::string> names;
    for (const Value* out : m->outputs()) names.push_back(g.fresh_name(out->name()));
    Node* copy = body->add_node(m->op_type(), ins, names, m->domain(), m->name());
    copy->set_source(m->source());
    copy->set_part(m->part());
    for (const auto& [k, a] : m->attrs()) copy->set_attr(k, a);
    for (size_t i = 0; i < m->num_outputs(); ++i) {
      Value* out = m->output(i);
      copy->output(i)->set_type(out->type());
      in_body[out] = copy->output(i);
    }
  }
  std::vector<Value*> body_outputs;
  std::vector<Type> types;
  for (Value* v : exported) {
    body_outputs.push_back(in_body.at(v));
    types.push_back(v->type());
  }
  body->set_outputs(body_outputs);

  replace_nodes(g, members, exported, [&](Node* before, const std::vector<std::string>& names) {
    Node* f = g.insert_node(before, std::string(kFusionOp), node_inputs, names, std::string(kTccDomain));
    for (size_t i = 0; i < types.size(); ++i) f->output(i)->set_type(types[i]);
    f->set_attr("kind", Attribute::of_string(std::string(fusion_kind_name(gr.kind))));
    body->set_parent(&g, f);
    f->set_attr("body", Attribute::of_graph(body));
    return f;
  });
}

bool used_anywhere(const Graph& g, const Value* v) {
  for (const auto& n : g.nodes()) {
    for (const Value* in : n->inputs())
      if (in == v) return true;
    for (const Graph* r : n->regions())
      if (used_anywhere(*r, v)) return true;
  }
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// A movement node whose value several movement nodes read, and nothing else
// (attention's q slice, read by the forward's head split and by the one the
// backward recomputes), gets a copy per reader after the first, so each
// reader's chain starts from the data and copies it once (step 5) where the
// shared value would be a copy kernel of its own that each chain copies again.
// A copy of a movement node is index arithmetic in the chain's one load.
// Repeated until nothing is shared, since a copy adds a reader to the node
// before it (the slice that attention's head splits read, forward and
// backward): returns whether it copied anything.
bool unshare_movement_once(Graph& g) {
  std::unordered_map<const Value*, std::vector<Node*>> readers;
  std::unordered_set<const Value*> read_otherwise;  // by a region, a graph output, or not as data
  for (const Value* v : g.outputs()) read_otherwise.insert(v);
  for (const auto& n : g.nodes()) {
    for (size_t i = 0; i < n->num_inputs(); ++i) {
      const Value* v = n->input(i);
      if (v == nullptr) continue;
      if (i == 0 && kernel_role(*n) == KernelRole::Movement) readers[v].push_back(n.get());
      else read_otherwise.insert(v);
    }
    for (const Graph* r : n->regions())
      for (const auto& inner : r->nodes())
        for (const Value* v : inner->inputs()) read_otherwise.insert(v);
  }
  // A reader whose chain ends in a copy anyway: a Transpose, Slice or Expand,
  // or a reshape that splits axes whose one reader is one of those. (A lone
  // reshape is a view of the shared value, no copy: better left reading it.)
  auto ends_in_copy = [&](const Node& r) {
    if (!is_reshape(r)) return true;
    auto it = readers.find(r.output(0));
    return splits_axes(r) && it != readers.end() && it->second.size() == 1 && !read_otherwise.count(r.output(0)) &&
           !is_reshape(*it->second.front());
  };
  std::vector<Node*> shared;
  for (const auto& n : g.nodes()) {
    if (n->num_outputs() != 1 || kernel_role(*n) != KernelRole::Movement || read_otherwise.count(n->output(0)))
      continue;
    const std::vector<Node*>& rs = readers[n->output(0)];
    if (rs.size() > 1 && std::all_of(rs.begin(), rs.end(), [&](const Node* r) { return ends_in_copy(*r); }))
      shared.push_back(n.get());
  }
  for (Node* n : shared) {
    const std::vector<Node*>& rs = readers[n->output(0)];
    for (size_t k = 1; k < rs.size(); ++k) {
      std::vector<Value*> ins(n->inputs().begin(), n->inputs().end());
      std::string name = n->name() + "/copy" + std::to_string(k);
      Node* copy = g.insert_node(rs[k], n->op_type(), ins, {g.fresh_name(n->output(0)->name())}, n->domain(), name);
      copy->set_source(n->source());
      for (const auto& [key, a] : n->attrs()) copy->set_attr(key, a);
      copy->output(0)->set_type(n->output(0)->type());
      rs[k]->set_input(0, copy->output(0));
    }
  }
  return !shared.empty();
}

void unshare_movement(Graph& g) {
  while (unshare_movement_once(g)) {
  }
}

}  // namespace

bool fuse(Graph& g, PassContext& ctx) {
  if (ctx.fusion) unshare_movement(g);
  Fuser fuser(g, ctx.fusion);
  std::vector<Group*> groups = fuser.partition();
  // Decided on the graph as it was, before any group is replaced.
  std::vector<std::vector<Value*>> exported;
  for (const Group* gr : groups) exported.push_back(fuser.exported(*gr));
  std::unordered_set<const Value*> copied;
  size_t fused_groups = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (exported[i].empty()) continue;  // dead code, dce's business
    if (fuser.binding_determined(*groups[i], exported[i])) continue;
    ctx.stats.add("groups_" + std::string(fusion_kind_name(groups[i]->kind)));
    ctx.stats.add("nodes_fused", static_cast<int64_t>(groups[i]->members.size()));
    materialize(g, *groups[i], exported[i], copied);
    ++fused_groups;
  }
  if (fused_groups == 0) return false;
  // Outside readers of an early member may sit before the fusion node.
  TCC_CHECK(g.topo_sort()) << "fuse created a cycle";

  bool copied_initializer = false;
  std::unordered_set<const Node*> dead_constants;
  for (const Value* v : copied) {
    if (used_anywhere(g, v)) continue;
    if (v->is_initializer()) copied_initializer = true;
    else dead_constants.insert(v->producer());
  }
  g.erase_nodes_if([&](const Node& n) { return dead_constants.count(&n) != 0; });
  if (copied_initializer) g.remove_unused_initializers();

  // Numbered over every fusion node, so a second run (fusing what a first left) keeps names unique.
  size_t next = 0;
  for (const auto& n : g.nodes()) {
    if (!is_fusion(*n)) continue;
    std::string name = "fused_" + std::to_string(next++);
    n->set_name(name);
    fusion_body(*n).set_name(name);
  }
  g.set_opset(std::string(kTccDomain), 1);
  return true;
}

}  // namespace tcc
