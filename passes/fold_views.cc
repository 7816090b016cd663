// fold_views: a chain of reshapes and transposes only rearranges its data's
// elements; where a chain merges axes and later splits them apart again, it
// is rewritten as a reshape that only splits its data's axes followed by one
// Transpose, the form a kernel reads through strides whatever its data is (a
// merge composes only with contiguous data; a split with any view).
//
// torch's MultiheadAttention views each of q, k and v, a slice of one packed
// projection, as [seq, batch * heads, size], transposes it and views the
// result as [batch, heads, seq, size]. Merged and split back, that chain cost
// a copy kernel per operand; folded, the attention reads the slice in place:
//
//   %a = Reshape(%q, [17, -1, 16])                 %a = tcc::Reshape(%q) {shape = [17, b, 4, 16]}
//   %t = Transpose(%a) {perm = [1, 0, 2]}    ->    %v = Transpose(%a) {perm = [1, 2, 0, 3]}
//   %v = Reshape(%t, [b, 4, 17, 16])
//
// The chain is followed as a list of atoms: its data's axes, cut wherever a
// reshape along the chain cuts them (64 = 4 * 16 above; 4*b is then the
// atoms b and 4), which a Transpose permutes and a reshape groups into axes.
// Extents are compared symbolically: an axis is cut only where the extents
// provably divide one another (SymExpr::exact_div). At the end, atoms cut from
// the same axis of the data that stay adjacent and in order within one result
// axis are one atom again.
//
// Rewrites a chain (its last node's output keeps its name) when the folded
// form needs no merge at its end, except of axes of extent 1, and has fewer
// nodes than the chain or the chain merges axes somewhere. A chain that
// composes to nothing is its data.
// Expects: types on the chain fully shaped. Runs after fuse_attention, whose
// patterns name the exporters' own spellings, and before fuse.
// Leaves alone: chains in regions, chains whose extents do not divide each
// other, chains whose atoms mention a symbol no graph input binds, a chain
// that composes to nothing whose output is a model output, and nodes whose
// outputs other nodes (or regions) also read, which end a chain.
#include <algorithm>
#include <functional>
#include <string_view>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "passes/pass.h"
#include "passes/rewrite.h"
#include "src/ir/replace_nodes.h"
#include "src/ops/fusion.h"
#include "src/ops/kernel_roles.h"
#include "src/ops/op_helpers.h"

namespace tcc {

namespace {

// A step of a chain: a reshape or a Transpose of the default domain, of fully
// shaped tensors.
bool is_step(const Node& n) {
  if (n.num_outputs() != 1 || !n.has_input(0)) return false;
  if (!is_reshape(n) && !(n.op_type() == "Transpose" && n.domain().empty())) return false;
  for (const Value* v : {n.input(0), n.output(0)})
    if (!v->type().is_tensor() || !v->type().fully_shaped()) return false;
  return true;
}

std::vector<SymExpr> extents(const Value* v) {
  std::vector<SymExpr> e;
  for (const Dim& d : v->type().shape()) e.push_back(d.expr());
  return e;
}

bool is_one(const SymExpr& e) { return e.is_constant() && e.constant_value() == 1; }

// A chain as atoms. Atom ids index `extent` and `origin` (the data's axis the
// atom was cut from); `data` lists the ids in the data's row-major order,
// `axes` the ids of each axis of the value reached so far, outermost first.
class Atoms {
 public:
  explicit Atoms(const std::vector<SymExpr>& shape) {
    for (size_t k = 0; k < shape.size(); ++k) {
      axes_.emplace_back();
      if (is_one(shape[k])) continue;
      axes_.back().push_back(add(shape[k], k));
      data_.push_back(axes_.back().back());
    }
  }

  void transpose(const std::vector<int64_t>& perm) {
    std::vector<std::vector<size_t>> out;
    for (int64_t p : perm) out.push_back(axes_.at(static_cast<size_t>(p)));
    axes_ = std::move(out);
  }

  // Groups the atoms, in their current order, into axes of `shape`, cutting an
  // atom where an axis ends inside it. False where the extents do not divide.
  bool reshape(const std::vector<SymExpr>& shape) {
    std::vector<size_t> order = flattened();
    std::vector<std::vector<size_t>> out;
    size_t i = 0;
    for (const SymExpr& s : shape) {
      out.emplace_back();
      if (is_one(s)) continue;
      SymExpr need = s;
      for (;;) {
        if (i == order.size()) return false;
        const size_t a = order[i];
        if (extent_[a] == need) {
          out.back().push_back(a);
          ++i;
          break;
        }
        if (std::optional<SymExpr> rest = need.exact_div(extent_[a])) {
          out.back().push_back(a);
          ++i;
          need = *rest;
          continue;
        }
        std::optional<SymExpr> inner = extent_[a].exact_div(need);
        if (!inner) return false;
        // Atom a keeps its outer part, which ends this axis; its inner part
        // follows it in the data and in the current order.
        extent_[a] = need;
        const size_t b = add(*inner, origin_[a]);
        data_.insert(std::find(data_.begin(), data_.end(), a) + 1, b);
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(i) + 1, b);
        out.back().push_back(a);
        ++i;
        break;
      }
    }
    if (i != order.size()) return false;
    axes_ = std::move(out);
    return true;
  }

  // Joins the atoms cut from one axis of the data that follow each other both
  // in the data and within one axis of the result.
  void coarsen() {
    for (std::vector<size_t>& axis : axes_)
      for (size_t j = 0; j + 1 < axis.size();) {
        const size_t a = axis[j], b = axis[j + 1];
        auto at = std::find(data_.begin(), data_.end(), a);
        if (origin_[a] != origin_[b] || at + 1 == data_.end() || at[1] != b) {
          ++j;
          continue;
        }
        extent_[a] = extent_[a] * extent_[b];
        data_.erase(at + 1);
        axis.erase(axis.begin() + static_cast<std::ptrdiff_t>(j) + 1);
      }
  }

  // The data's axes cut into atoms, in the data's order.
  std::vector<SymExpr> split_shape() const {
    std::vector<SymExpr> s;
    for (size_t a : data_) s.push_back(extent_[a]);
    return s;
  }
  // The permutation of split_shape() whose result lists the atoms in the
  // result's order.
  std::vector<int64_t> perm() const {
    std::vector<int64_t> p;
    for (size_t a : flattened())
      p.push_back(static_cast<int64_t>(std::find(data_.begin(), data_.end(), a) - data_.begin()));
    return p;
  }
  // Whether every axis of the result is at most one atom.
  bool needs_no_merge() const {
    return std::all_of(axes_.begin(), axes_.end(), [](const auto& axis) { return axis.size() <= 1; });
  }

 private:
  size_t add(const SymExpr& e, size_t origin) {
    extent_.push_back(e);
    origin_.push_back(origin);
    return extent_.size() - 1;
  }
  std::vector<size_t> flattened() const {
    std::vector<size_t> order;
    for (const auto& axis : axes_) order.insert(order.end(), axis.begin(), axis.end());
    return order;
  }

  std::vector<SymExpr> extent_;
  std::vector<size_t> origin_;
  std::vector<size_t> data_;
  std::vector<std::vector<size_t>> axes_;
};

// How many reads each value of g has: node inputs, reads inside regions and
// graph outputs (what Rewriter::num_uses counts, for every value at once).
std::unordered_map<const Value*, size_t> count_readers(const Graph& g) {
  std::unordered_map<const Value*, size_t> readers;
  std::function<void(const Graph&)> reads = [&](const Graph& r) {
    for (const auto& n : r.nodes()) {
      for (const Value* in : n->inputs()) ++readers[in];
      for (const Graph* sub : n->regions()) reads(*sub);
    }
    for (const Value* out : r.outputs()) ++readers[out];
  };
  reads(g);
  return readers;
}

Dims dims_of(const std::vector<SymExpr>& es) {
  Dims d;
  for (const SymExpr& e : es) d.push_back(Dim(e));
  return d;
}

// Folds the chain `steps` (in order; the last one's output is kept) if it
// pays, per the header. Returns whether it did.
bool fold(Graph& g, const std::vector<Node*>& steps, const std::set<std::string>& bound, PassStats& stats) {
  Value* x = steps.front()->input(0);
  Value* y = steps.back()->output(0);
  Atoms atoms(extents(x));
  bool merges = false;
  for (const Node* n : steps) {
    if (n->op_type() == "Transpose") {
      atoms.transpose(*transpose_perm(*n));
      continue;
    }
    merges |= !split_axes(extents(n->input(0)), extents(n->output(0)));
    if (!atoms.reshape(extents(n->output(0)))) return false;
  }
  atoms.coarsen();
  if (!atoms.needs_no_merge()) return false;
  const std::vector<SymExpr> split = atoms.split_shape();
  const std::vector<int64_t> perm = atoms.perm();
  std::vector<SymExpr> transposed;
  for (int64_t p : perm) transposed.push_back(split[static_cast<size_t>(p)]);
  const bool splits = split != extents(x), transposes = !is_identity_perm(perm), reshapes = transposed != extents(y);
  const size_t nodes = size_t{splits} + size_t{transposes} + size_t{reshapes};
  if (nodes >= steps.size() && !merges) return false;
  for (const SymExpr& e : split)
    for (const std::string& s : e.symbols())
      if (!bound.count(s)) return false;

  if (nodes == 0) {
    if (is_model_output(y)) return false;
    g.replace_all_uses(y, x);
  } else {
    // y goes with the chain: what the new nodes need of it is copied first.
    Node* last = steps.back();
    const std::string name = last->name().empty() ? y->name() : last->name(), source = last->source();
    const Type y_type = y->type();
    // The folded form's nodes, in order: each but the last is inserted before
    // the chain's last node; the last takes over y's name once the chain is
    // erased.
    struct Piece {
      const char* op;
      std::string suffix;
      Type type;
    };
    const DType dtype = x->type().dtype();
    std::vector<Piece> pieces;
    if (splits) pieces.push_back({"Reshape", "/split", Type::tensor(dtype, dims_of(split))});
    if (transposes) pieces.push_back({"Transpose", "/transpose", Type::tensor(dtype, dims_of(transposed))});
    if (reshapes) pieces.push_back({"Reshape", "/units", y_type});
    auto make = [&](const Piece& p, Node* before, Value* in, const std::string& out) {
      const bool reshape = std::string_view(p.op) == "Reshape";
      Node* m = g.insert_node(before, p.op, {in}, {out}, reshape ? std::string(kTccDomain) : "", name + p.suffix);
      m->set_source(source);
      if (reshape) m->set_attr("shape", shape_attr(p.type.shape()));
      else m->set_attr("perm", Attribute::of_ints(perm));
      m->output(0)->set_type(p.type);
      return m;
    };
    Value* v = x;
    for (size_t i = 0; i + 1 < pieces.size(); ++i) v = make(pieces[i], last, v, g.fresh_name(y->name() + ".view"))->output(0);
    std::unordered_set<const Node*> chain(steps.begin(), steps.end());
    replace_nodes(g, chain, {y}, [&](Node* before, const std::vector<std::string>& names) {
      return make(pieces.back(), before, v, names[0]);
    });
    g.set_opset(std::string(kTccDomain), 1);
  }
  if (nodes == 0) g.erase_nodes_if([&](const Node& n) { return std::find(steps.begin(), steps.end(), &n) != steps.end(); });
  stats.add("view_chains_folded");
  stats.add("view_nodes_removed", static_cast<int64_t>(steps.size()) - static_cast<int64_t>(nodes));
  return true;
}

}  // namespace

bool fold_views(Graph& g, PassContext& ctx) {
  const std::set<std::string> bound = g.bound_symbols();
  std::unordered_map<const Value*, size_t> readers = count_readers(g);
  std::unordered_map<const Value*, const Node*> reader;
  for (const auto& n : g.nodes())
    for (const Value* in : n->inputs()) reader[in] = n.get();
  // A step whose output feeds only the next step continues a chain; any other
  // step ends one, which is then followed back to its first step.
  auto continues = [&](const Node& n) {
    const Value* out = n.output(0);
    return readers[out] == 1 && reader.count(out) && reader[out]->input(0) == out && is_step(*reader[out]);
  };
  std::vector<std::vector<Node*>> chains;
  for (const auto& up : g.nodes()) {
    Node* n = up.get();
    if (!is_step(*n) || continues(*n)) continue;
    std::vector<Node*> chain = {n};
    for (Node* p = n->input(0)->producer(); p != nullptr && p->graph() == &g && is_step(*p) && continues(*p);
         p = p->input(0)->producer())
      chain.insert(chain.begin(), p);
    if (chain.size() > 1) chains.push_back(std::move(chain));
  }
  bool changed = false;
  for (const std::vector<Node*>& chain : chains) changed |= fold(g, chain, bound, ctx.stats);
  if (changed) g.remove_unused_initializers();  // the reshapes' shape operands
  return changed;
}

}  // namespace tcc
