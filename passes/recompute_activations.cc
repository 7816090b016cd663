// recompute_activations: decides which forward values a training step's
// backward keeps from the forward pass and which it recomputes, by a minimum
// cut as AOTAutograd's partitioner does, and rewrites the graph accordingly.
//
// The backward (nodes named `grad/...`, and the optimizer's `optimizer/...`)
// reads forward values; kept as they are, each lives from the forward until its
// last backward reader. A value that a pointwise or movement node computes from
// other available values can instead be computed again just before the
// backward needs it, which is cheap (it fuses into the backward's kernels) and
// ends the forward copy's life at its last forward reader. The choice is a cut
// in a flow network over the forward values:
//   - each forward value v is an edge in(v) -> out(v) whose capacity is its
//     size in bytes: cutting it means v is saved;
//   - the outputs of nodes that must not be recomputed (contractions,
//     reductions, anything without a generated kernel) are fed from the source
//     with infinite capacity: they exist only if the forward saves them;
//   - a node's inputs feed its outputs with infinite capacity (out(u) -> in(v));
//   - every forward value the backward reads drains to the sink.
// Graph inputs, weights and constants are always available and cost nothing.
// A minimum cut is the cheapest set of saved values from which every value the
// backward reads can be recomputed by recomputable nodes. Of equally cheap cuts
// the one nearest the sink is taken: a Relu's output rather than the Gemm
// output it reads, which would otherwise be written only to be saved and would
// keep the Relu out of the Gemm's epilogue. Each value the backward reads and
// the cut does not save is recomputed by copies of its producers (named
// `recompute/<node>`, of part Backward), placed just before the first backward
// node that needs it; forward nodes left without readers are removed.
//
// Sizes of symbolic dims: every symbol counts as kRepresentativeSize, so the
// partition is a function of the graph alone (the same module whatever
// --shape-hint says) and a seq*seq attention matrix weighs more than a seq row.
//
// Expects: a training graph from src/autodiff, after the optimize passes (cse
// would merge the recomputed copies back into the originals). Leaves alone:
// graphs with no backward nodes, graphs with regions (whose reads of outer
// values the rewrite would have to follow).
#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "src/autodiff/autodiff.h"
#include "src/ops/kernel_roles.h"

namespace tcc {

namespace {

constexpr int64_t kRepresentativeSize = 128;
constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;
// What saving a value of unknown size costs: more than any real tensor, less
// than infinite, so the cut stays finite.
constexpr int64_t kUnknownBytes = int64_t{1} << 40;

bool is_backward(const Node& n) { return n.part() != StepPart::Forward; }

bool recomputable(const Node& n) {
  KernelRole r = kernel_role(n);
  return r == KernelRole::Pointwise || r == KernelRole::Movement;
}

int64_t size_in_bytes(const Value& v) {
  const Type& t = v.type();
  if (!t.is_tensor() || !t.has_rank() || !t.fully_shaped()) return kUnknownBytes;
  int64_t n = static_cast<int64_t>(dtype_size(t.dtype()));
  for (const Dim& d : t.shape()) {
    std::map<std::string, int64_t> env;
    for (const std::string& s : d.expr().symbols()) env[s] = kRepresentativeSize;
    std::optional<int64_t> size = d.expr().evaluate(env);
    if (!size) return kUnknownBytes;
    n = std::min(kUnknownBytes, n * std::max<int64_t>(*size, 1));
  }
  return n;
}

// Edmonds-Karp max flow; after run(), feeds_sink() holds for the sink side of
// the minimum cut nearest the sink: the vertices that still reach the sink
// through edges with capacity left.
class FlowNetwork {
 public:
  int add_vertex() {
    adj_.emplace_back();
    return static_cast<int>(adj_.size()) - 1;
  }
  void add_edge(int from, int to, int64_t capacity) {
    adj_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    adj_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }
  void run(int source, int sink) {
    for (;;) {
      std::vector<int> via(adj_.size(), -1);  // edge that reached each vertex
      std::queue<int> q;
      q.push(source);
      std::vector<bool> seen(adj_.size(), false);
      seen[source] = true;
      while (!q.empty() && !seen[sink]) {
        int u = q.front();
        q.pop();
        for (int e : adj_[u])
          if (edges_[e].capacity > 0 && !seen[edges_[e].to]) {
            seen[edges_[e].to] = true;
            via[edges_[e].to] = e;
            q.push(edges_[e].to);
          }
      }
      if (!seen[sink]) {
        mark_sink_side(sink);
        return;
      }
      int64_t push = kInfinite;
      for (int v = sink; v != source; v = edges_[via[v] ^ 1].to) push = std::min(push, edges_[via[v]].capacity);
      for (int v = sink; v != source; v = edges_[via[v] ^ 1].to) {
        edges_[via[v]].capacity -= push;
        edges_[via[v] ^ 1].capacity += push;
      }
    }
  }
  bool feeds_sink(int v) const { return sink_side_[v]; }

 private:
  // Edge e + (e ^ 1) pairs an edge with its reverse: e in adj_[w] goes from w,
  // so e ^ 1 comes into w from edges_[e].to.
  void mark_sink_side(int sink) {
    sink_side_.assign(adj_.size(), false);
    sink_side_[sink] = true;
    std::queue<int> q;
    q.push(sink);
    while (!q.empty()) {
      int w = q.front();
      q.pop();
      for (int e : adj_[w])
        if (edges_[e ^ 1].capacity > 0 && !sink_side_[edges_[e].to]) {
          sink_side_[edges_[e].to] = true;
          q.push(edges_[e].to);
        }
    }
  }

  struct Edge {
    int to;
    int64_t capacity;
  };
  std::vector<Edge> edges_;
  std::vector<std::vector<int>> adj_;
  std::vector<bool> sink_side_;
};

}  // namespace

bool recompute_activations(Graph& g, PassContext& ctx) {
  // Forward values: outputs of forward nodes (constants excluded: always available).
  std::unordered_map<const Value*, std::pair<int, int>> ends;  // value -> (in, out) vertices
  FlowNetwork net;
  int source = net.add_vertex(), sink = net.add_vertex();
  bool has_backward = false;
  for (const auto& n : g.nodes())
    if (!n->regions().empty()) return false;
  for (const auto& n : g.nodes()) {
    if (is_backward(*n)) {
      has_backward = true;
      continue;
    }
    if (n->num_inputs() == 0) continue;
    for (const Value* v : n->outputs()) {
      int in = net.add_vertex(), out = net.add_vertex();
      ends[v] = {in, out};
      net.add_edge(in, out, size_in_bytes(*v));
      if (!recomputable(*n)) net.add_edge(source, in, kInfinite);
      for (const Value* u : n->inputs()) {
        auto it = u ? ends.find(u) : ends.end();
        if (it != ends.end()) net.add_edge(it->second.second, in, kInfinite);
      }
    }
  }
  if (!has_backward) return false;
  std::unordered_set<const Value*> needed;
  for (const auto& n : g.nodes())
    if (is_backward(*n))
      for (const Value* u : n->inputs())
        if (u && ends.count(u) && needed.insert(u).second) net.add_edge(ends.at(u).second, sink, kInfinite);
  net.run(source, sink);

  auto saved = [&](const Value* v) {
    auto it = ends.find(v);
    return it == ends.end() || (!net.feeds_sink(it->second.first) && net.feeds_sink(it->second.second));
  };
  ctx.stats.add("backward_reads", static_cast<int64_t>(needed.size()));
  int64_t saved_count = 0;
  for (const Value* v : needed) saved_count += saved(v);
  ctx.stats.add("saved_values", saved_count);
  if (saved_count == static_cast<int64_t>(needed.size())) return false;

  // Copies of forward nodes, made on first need, before the backward node that needs them.
  std::unordered_map<const Value*, Value*> copy_of;
  std::function<Value*(Value*, Node*)> recomputed = [&](Value* v, Node* before) -> Value* {
    if (saved(v)) return v;
    auto it = copy_of.find(v);
    if (it != copy_of.end()) return it->second;
    const Node* p = v->producer();
    TCC_CHECK(recomputable(*p)) << "the cut recomputes '" << v->name() << "' through " << p->op_type();
    std::vector<Value*> ins;
    for (Value* u : p->inputs()) ins.push_back(u ? recomputed(u, before) : nullptr);
    std::vector<std::string> names;
    for (const Value* out : p->outputs()) names.push_back(g.fresh_name(out->name()));
    Node* copy = g.insert_node(before, p->op_type(), ins, names, p->domain(), "recompute/" + p->name());
    copy->set_source(p->source());
    for (const auto& [k, a] : p->attrs()) copy->set_attr(k, a);
    for (size_t i = 0; i < p->num_outputs(); ++i) {
      copy->output(i)->set_type(p->output(i)->type());
      copy_of[p->output(i)] = copy->output(i);
    }
    ctx.stats.add("recomputed_nodes");
    return copy_of.at(v);
  };
  std::vector<Node*> backward;
  for (const auto& n : g.nodes())
    if (is_backward(*n)) backward.push_back(n.get());
  for (Node* n : backward)
    for (size_t i = 0; i < n->num_inputs(); ++i)
      if (Value* u = n->input(i); u && needed.count(u)) n->set_input(i, recomputed(u, n));

  // Originals of recomputed values that only the backward read are now dead.
  std::unordered_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  for (bool erased = true; erased;) {
    auto users = g.compute_users();
    size_t before = g.nodes().size();
    g.erase_nodes_if([&](const Node& n) {
      for (const Value* v : n.outputs())
        if (!copy_of.count(v) || outputs.count(v) || !users[v].empty()) return false;
      return true;
    });
    erased = g.nodes().size() != before;
  }
  return true;
}

}  // namespace tcc
