// Control flow: If, Loop and Scan. Their bodies are regions (nested Graphs)
// that may read values of the enclosing graphs.
//
// Shape rules infer the regions and merge what differs: a dim two branches (or
// two loop iterations) disagree on becomes a fresh symbol, so the result stays
// ranked and as symbolic as the program allows. Kernels run the regions on the
// reference interpreter. Decompositions inline the regions into the main graph
// where the shapes allow it (an If of a constant condition, or of a computed
// one between branches that cannot fail; a Loop of a constant trip count; a
// Scan of a static length), so that their ops get kernels; elsewhere the node
// is a host step, which is what `tcc ops` reports.
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// A type both a and b fit: equal dims stay, differing dims become fresh symbols.
Type merge_types(InferContext& ctx, const Type& a, const Type& b, const std::string& what) {
  if (a.is_unknown()) return b;
  if (b.is_unknown() || a == b) return a;
  if (!a.is_tensor() || !b.is_tensor()) return a.kind() == b.kind() ? a : Type();
  if (a.dtype() != b.dtype())
    ctx.fail(what + ": expected the same element type, got " + a.str() + " and " + b.str());
  if (!a.has_rank() || !b.has_rank() || a.rank() != b.rank()) return Type::tensor_unranked(a.dtype());
  Dims d = a.shape();
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] != b.shape()[i]) d[i] = ctx.env().fresh("u");
  return Type::tensor(a.dtype(), d);
}

Graph& region(const InferContext& ctx, const char* name) {
  Graph* g = ctx.node().get_graph(name);
  if (!g) ctx.fail(std::string("expected a graph attribute '") + name + "'");
  return *g;
}

const Graph& region(const EvalContext& ctx, const char* name) {
  Graph* g = ctx.node().get_graph(name);
  if (!g) ctx.fail(std::string("expected a graph attribute '") + name + "'");
  return *g;
}

// Slices index `at` of `axis` out of t (the axis disappears).
Tensor take_slice(const Tensor& t, int64_t axis, int64_t at) {
  std::vector<int64_t> shape = t.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t len = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out(t.dtype(), shape);
  size_t row = static_cast<size_t>(inner) * dtype_size(t.dtype());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.raw_mut() + o * row, t.raw() + (o * len + at) * row, row);
  return out;
}

// Stacks equally shaped tensors along a new axis.
Tensor stack(const EvalContext& ctx, const std::vector<Tensor>& parts, int64_t axis, const std::string& what) {
  const Tensor& first = parts.front();
  for (const Tensor& p : parts)
    if (p.shape() != first.shape() || p.dtype() != first.dtype())
      ctx.fail(what + ": expected every iteration to produce the same shape, got " + shape_str(first.shape()) +
               " and " + shape_str(p.shape()));
  std::vector<int64_t> shape = first.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis; i < shape.size(); ++i) inner *= shape[i];
  shape.insert(shape.begin() + axis, static_cast<int64_t>(parts.size()));
  Tensor out(first.dtype(), shape);
  size_t row = static_cast<size_t>(inner) * dtype_size(first.dtype());
  int64_t n = static_cast<int64_t>(parts.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < n; ++k) std::memcpy(out.raw_mut() + (o * n + k) * row, parts[k].raw() + o * row, row);
  return out;
}

Tensor scalar_bool(bool v) {
  Tensor t(DType::Bool, {});
  t.set_i64(0, v ? 1 : 0);
  return t;
}

// A tensor with `len` at dim `axis` inserted into a per-iteration type.
Type with_axis(const Type& t, int64_t axis, const Dim& len) {
  if (!t.is_tensor() || !t.has_rank()) return t.is_tensor() ? Type::tensor_unranked(t.dtype()) : Type();
  Dims d = t.shape();
  d.insert(d.begin() + axis, len);
  return Type::tensor(t.dtype(), d);
}

// ---------------------------------------------------------------- If

void infer_if(InferContext& ctx) {
  const Type& cond = ctx.input_type(0);
  if (cond.is_tensor() && cond.dtype() != DType::Bool) ctx.fail("expected a bool condition, got " + cond.str());
  // A constant condition (a shape test, folded) takes one branch: its types,
  // and only it is inferred, since the other may compute what this model
  // never does (ONNX's AffineGrid function splits a 2-D size 5 ways there).
  const Tensor* cond_value = ctx.input_const(0);
  if (cond_value && cond_value->numel() == 1) {
    const bool then = cond_value->get_i64(0) != 0;
    std::vector<Type> taken = ctx.infer_region(region(ctx, then ? "then_branch" : "else_branch"), {});
    if (taken.size() != ctx.num_outputs())
      ctx.fail("expected the " + std::string(then ? "then" : "else") + " branch to produce " +
               std::to_string(ctx.num_outputs()) + " outputs, got " + std::to_string(taken.size()));
    for (size_t i = 0; i < taken.size(); ++i) ctx.set_output_type(i, taken[i]);
    return;
  }
  std::vector<Type> then_t = ctx.infer_region(region(ctx, "then_branch"), {});
  std::vector<Type> else_t = ctx.infer_region(region(ctx, "else_branch"), {});
  if (then_t.size() != ctx.num_outputs() || else_t.size() != ctx.num_outputs())
    ctx.fail("expected both branches to produce " + std::to_string(ctx.num_outputs()) + " outputs, got " +
             std::to_string(then_t.size()) + " and " + std::to_string(else_t.size()));
  for (size_t i = 0; i < then_t.size(); ++i)
    ctx.set_output_type(i, merge_types(ctx, then_t[i], else_t[i], "output " + std::to_string(i) + " of the branches"));
}

std::vector<Tensor> eval_if(EvalContext& ctx) {
  const Tensor& cond = ctx.input(0);
  if (cond.numel() != 1) ctx.fail("expected a single-element condition, got shape " + shape_str(cond.shape()));
  return ctx.run_region(region(ctx, cond.get_i64(0) != 0 ? "then_branch" : "else_branch"), {});
}

// ---------------------------------------------------------------- Loop

// True when the body's condition output is provably always true (it passes
// the incoming condition through, or is a true constant), so only M ends the loop.
bool body_keeps_going(const Graph& body) {
  const Value* out = body.outputs().empty() ? nullptr : body.outputs()[0];
  while (out && out->producer() && out->producer()->op_type() == "Identity") out = out->producer()->input(0);
  if (!out) return false;
  if (body.inputs().size() > 1 && out == body.inputs()[1]) return true;
  const Tensor* c = nullptr;
  if (out->is_initializer()) c = &out->initializer();
  if (out->producer() && out->producer()->op_type() == "Constant") c = out->producer()->get_tensor("value");
  return c && c->numel() == 1 && c->get_i64(0) != 0;
}

void infer_loop(InferContext& ctx) {
  Graph& body = region(ctx, "body");
  size_t n_carried = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  if (body.inputs().size() != n_carried + 2)
    ctx.fail("expected the body to take " + std::to_string(n_carried + 2) +
             " inputs (iteration, condition, loop-carried values), got " + std::to_string(body.inputs().size()));
  if (body.outputs().size() < n_carried + 1)
    ctx.fail("expected the body to produce at least " + std::to_string(n_carried + 1) + " outputs, got " +
             std::to_string(body.outputs().size()));
  std::vector<Type> ins = {Type::tensor(DType::I64, {}), Type::tensor(DType::Bool, {})};
  for (size_t i = 0; i < n_carried; ++i) ins.push_back(ctx.input_type(2 + i));
  std::vector<Type> outs = ctx.infer_region(body, ins);
  // A loop-carried value whose type changes across iterations gets the merged
  // type; the body is inferred again under it so its own types stay valid.
  bool changed = false;
  for (size_t i = 0; i < n_carried; ++i) {
    Type merged = merge_types(ctx, ins[2 + i], outs[1 + i], "loop-carried value " + std::to_string(i));
    changed = changed || merged != ins[2 + i];
    ins[2 + i] = merged;
  }
  if (changed) outs = ctx.infer_region(body, ins);
  // The (merged) carried types describe every iteration, the last included.
  for (size_t i = 0; i < n_carried; ++i) ctx.set_output_type(i, ins[2 + i]);
  Dim trips = ctx.env().fresh("u");
  const Dims* m = ctx.has_input(0) ? ctx.input_values(0) : nullptr;
  const Tensor* cond = ctx.has_input(1) ? ctx.input_const(1) : nullptr;
  bool cond_true = !ctx.has_input(1) || (cond && cond->numel() == 1 && cond->get_i64(0) != 0);
  if (m && m->size() == 1 && !(*m)[0].is_unknown() && cond_true && body_keeps_going(body)) trips = (*m)[0];
  // Body output k (after the condition and the carried values) is node output k - 1.
  for (size_t k = 1 + n_carried; k < outs.size() && k - 1 < ctx.num_outputs(); ++k)
    ctx.set_output_type(k - 1, with_axis(outs[k], 0, trips));
}

std::vector<Tensor> eval_loop(EvalContext& ctx) {
  const Graph& body = region(ctx, "body");
  size_t n_carried = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  if (body.inputs().size() != n_carried + 2 || body.outputs().size() < n_carried + 1)
    ctx.fail("expected the body to take " + std::to_string(n_carried + 2) + " inputs and produce at least " +
             std::to_string(n_carried + 1) + " outputs");
  size_t n_scan = body.outputs().size() - 1 - n_carried;
  int64_t max_trips = ctx.has_input(0) ? ctx.input(0).get_i64(0) : std::numeric_limits<int64_t>::max();
  bool cond = ctx.has_input(1) ? ctx.input(1).get_i64(0) != 0 : true;
  std::vector<Tensor> carried;
  for (size_t i = 0; i < n_carried; ++i) carried.push_back(ctx.input(2 + i));
  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t it = 0; it < max_trips && cond; ++it) {
    std::vector<Tensor> ins = {Tensor::scalar_i64(it), scalar_bool(cond)};
    ins.insert(ins.end(), carried.begin(), carried.end());
    std::vector<Tensor> outs = ctx.run_region(body, ins);
    cond = outs[0].get_i64(0) != 0;
    for (size_t i = 0; i < n_carried; ++i) carried[i] = outs[1 + i];
    for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(outs[1 + n_carried + k]);
  }
  std::vector<Tensor> results = carried;
  for (size_t k = 0; k < n_scan; ++k) {
    if (!scans[k].empty()) {
      results.push_back(stack(ctx, scans[k], 0, "scan output " + std::to_string(k)));
      continue;
    }
    // No iteration ran: an empty stack shaped by the static per-iteration dims.
    const Type& t = ctx.node().output(n_carried + k)->type();
    std::vector<int64_t> shape = {0};
    DType dt = t.is_tensor() ? t.dtype() : DType::F32;
    if (t.is_tensor() && t.has_rank())
      for (size_t i = 1; i < t.rank(); ++i) shape.push_back(t.shape()[i].is_static() ? t.shape()[i].value() : 0);
    results.push_back(Tensor(dt, shape));
  }
  return results;
}

// ---------------------------------------------------------------- Scan

struct ScanAttrs {
  size_t n_state = 0, n_in = 0, n_out = 0;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

// Reads and checks Scan's attributes; ranks give the scan inputs' ranks and
// the body outputs' per-iteration ranks (-1 when unknown) for axis normalization.
ScanAttrs read_scan(const Node& n, const Graph& body, const std::vector<int64_t>& in_ranks,
                    const std::vector<int64_t>& out_ranks) {
  ScanAttrs a;
  int64_t m = n.get_int("num_scan_inputs", -1);
  if (m < 1 || static_cast<size_t>(m) > n.num_inputs())
    n.fail("expected num_scan_inputs in [1, " + std::to_string(n.num_inputs()) + "], got " + std::to_string(m));
  a.n_in = static_cast<size_t>(m);
  a.n_state = n.num_inputs() - a.n_in;
  if (body.inputs().size() != n.num_inputs())
    n.fail("expected the body to take " + std::to_string(n.num_inputs()) + " inputs, got " +
           std::to_string(body.inputs().size()));
  if (body.outputs().size() < a.n_state || body.outputs().size() != n.num_outputs())
    n.fail("expected the body to produce " + std::to_string(n.num_outputs()) + " outputs, got " +
           std::to_string(body.outputs().size()));
  a.n_out = n.num_outputs() - a.n_state;
  auto read = [&](const char* name, size_t count) {
    std::vector<int64_t> v = n.get_ints(name, std::vector<int64_t>(count, 0));
    if (v.size() != count)
      n.fail(std::string("expected ") + name + " to have " + std::to_string(count) + " values, got " +
             std::to_string(v.size()));
    return v;
  };
  a.in_axes = read("scan_input_axes", a.n_in);
  a.in_dirs = read("scan_input_directions", a.n_in);
  a.out_axes = read("scan_output_axes", a.n_out);
  a.out_dirs = read("scan_output_directions", a.n_out);
  for (size_t j = 0; j < a.n_in; ++j)
    if (in_ranks[j] >= 0) a.in_axes[j] = normalize_axis(n, a.in_axes[j], in_ranks[j]);
  for (size_t k = 0; k < a.n_out; ++k)
    if (out_ranks[k] >= 0) a.out_axes[k] = normalize_axis(n, a.out_axes[k], out_ranks[k] + 1);
  return a;
}

void infer_scan(InferContext& ctx) {
  const Node& n = ctx.node();
  Graph& body = region(ctx, "body");
  size_t m = static_cast<size_t>(std::max<int64_t>(0, n.get_int("num_scan_inputs", 0)));
  size_t n_state = m <= ctx.num_inputs() ? ctx.num_inputs() - m : 0;
  std::vector<int64_t> in_ranks;
  for (size_t j = n_state; j < ctx.num_inputs(); ++j) in_ranks.push_back(ctx.ranked_input(j).rank());
  // Output axes are normalized after the body is inferred; pass unknown ranks first.
  ScanAttrs a = read_scan(n, body, in_ranks, std::vector<int64_t>(ctx.num_outputs(), -1));
  std::vector<Type> ins;
  for (size_t i = 0; i < a.n_state; ++i) ins.push_back(ctx.input_type(i));
  Dim len;
  for (size_t j = 0; j < a.n_in; ++j) {
    const Type& t = ctx.input_type(a.n_state + j);
    Dims d = t.shape();
    const Dim& l = d[a.in_axes[j]];
    if (len.is_unknown()) {
      len = l;
    } else if (!l.is_unknown() && !ctx.env().unify(len, l, &n)) {
      ctx.fail("expected every scan input to have the same length along its scan axis, got " + len.str() + " and " +
               l.str());
    }
    d.erase(d.begin() + a.in_axes[j]);
    ins.push_back(Type::tensor(t.dtype(), d));
  }
  if (len.is_unknown()) len = ctx.env().fresh("u");
  len = ctx.env().canonical(len);
  std::vector<Type> outs = ctx.infer_region(body, ins);
  bool changed = false;
  for (size_t i = 0; i < a.n_state; ++i) {
    Type merged = merge_types(ctx, ins[i], outs[i], "scan state " + std::to_string(i));
    changed = changed || merged != ins[i];
    ins[i] = merged;
  }
  if (changed) outs = ctx.infer_region(body, ins);
  for (size_t i = 0; i < a.n_state; ++i) ctx.set_output_type(i, ins[i]);
  for (size_t k = 0; k < a.n_out; ++k) {
    const Type& t = outs[a.n_state + k];
    if (!t.is_tensor() || !t.has_rank()) {
      ctx.set_output_type(a.n_state + k, t.is_tensor() ? Type::tensor_unranked(t.dtype()) : Type());
      continue;
    }
    int64_t axis = normalize_axis(n, a.out_axes[k], static_cast<int64_t>(t.rank()) + 1);
    ctx.set_output_type(a.n_state + k, with_axis(t, axis, len));
  }
}

std::vector<Tensor> eval_scan(EvalContext& ctx) {
  const Node& n = ctx.node();
  const Graph& body = region(ctx, "body");
  size_t m = static_cast<size_t>(std::max<int64_t>(0, n.get_int("num_scan_inputs", 0)));
  size_t n_state = m <= ctx.num_inputs() ? ctx.num_inputs() - m : 0;
  std::vector<int64_t> in_ranks;
  for (size_t j = n_state; j < ctx.num_inputs(); ++j) in_ranks.push_back(static_cast<int64_t>(ctx.input(j).rank()));
  ScanAttrs a = read_scan(n, body, in_ranks, std::vector<int64_t>(ctx.num_outputs(), -1));
  int64_t len = -1;
  for (size_t j = 0; j < a.n_in; ++j) {
    int64_t l = ctx.input(a.n_state + j).shape()[a.in_axes[j]];
    if (len >= 0 && l != len)
      ctx.fail("expected every scan input to have the same length along its scan axis, got " + std::to_string(len) +
               " and " + std::to_string(l));
    len = l;
  }
  std::vector<Tensor> state;
  for (size_t i = 0; i < a.n_state; ++i) state.push_back(ctx.input(i));
  std::vector<std::vector<Tensor>> parts(a.n_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> ins = state;
    for (size_t j = 0; j < a.n_in; ++j)
      ins.push_back(take_slice(ctx.input(a.n_state + j), a.in_axes[j], a.in_dirs[j] ? len - 1 - t : t));
    std::vector<Tensor> outs = ctx.run_region(body, ins);
    for (size_t i = 0; i < a.n_state; ++i) state[i] = outs[i];
    for (size_t k = 0; k < a.n_out; ++k) parts[k].push_back(outs[a.n_state + k]);
  }
  std::vector<Tensor> results = state;
  for (size_t k = 0; k < a.n_out; ++k) {
    if (parts[k].empty()) ctx.fail("cannot build scan output " + std::to_string(k) + " from zero iterations");
    if (a.out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
    int64_t axis = normalize_axis(n, a.out_axes[k], static_cast<int64_t>(parts[k][0].rank()) + 1);
    results.push_back(stack(ctx, parts[k], axis, "scan output " + std::to_string(k)));
  }
  return results;
}

// ---------------------------------------------------------------- Decompositions

// The most nodes the copies of a Loop's or Scan's body may add, every
// iteration together; a longer unrolling stays a host step.
constexpr size_t kMaxUnrolledNodes = 256;

// Whether running n cannot fail, whatever the data, once inference has checked
// its static shapes: an If evaluates both branches when it decomposes. Random
// ops, data-sized outputs, strings and the indexed ops (an index out of range
// fails) may; movement ops and reductions only with constant arguments past
// their data (Concat's are all data). Pointwise ops never do (an integer
// division by zero gives 0).
bool cannot_fail(const Node& n) {
  const OpDef* def = OpRegistry::get().lookup(n);
  if (!def || def->has(kRandom) || def->has(kDataDependentShape) || def->has(kControlFlow)) return false;
  for (const auto* vs : {&n.inputs(), &n.outputs()})
    for (const Value* v : *vs)
      if (v && (!v->type().is_tensor() || v->type().dtype() == DType::String)) return false;
  const std::string& op = n.op_type();
  if (def->has(kPointwise) || def->has(kShapeOnly) || def->has(kConstant) || def->has(kContraction)) return true;
  if (!def->has(kMovement) && !def->has(kReduction)) return false;
  if (op.rfind("Gather", 0) == 0 || op.rfind("Scatter", 0) == 0 || op == "Compress") return false;
  if (op == "Concat") return true;
  for (size_t i = 1; i < n.num_inputs(); ++i)
    if (n.has_input(i) && !constant_value(n.input(i))) return false;
  return true;
}

// parts (each of the same type) stacked along a new axis `axis`: each viewed
// with a 1 there, then one Concat.
Value* stack_values(Expansion& e, const std::string& piece, const std::vector<Value*>& parts, int64_t axis,
                    const Type& type) {
  std::vector<Value*> views;
  for (size_t i = 0; i < parts.size(); ++i) {
    Dims d = parts[i]->type().shape();
    d.insert(d.begin() + axis, Dim(1));
    views.push_back(e.reshape(piece + "_" + std::to_string(i), parts[i], d));
  }
  return e.add(piece, "Concat", views, type, {{"axis", Attribute::of_int(axis)}});
}

// Whether t is a tensor of one element and static dims (a scalar or [1]).
bool single_static_element(const Type& t) {
  return t.is_tensor() && t.fully_static() && dims_product(t.shape()) == Dim(1);
}

// If of a constant condition -> the taken branch's nodes. If of a computed
// one-element condition -> both branches' nodes and Where(condition, then,
// else) per output, where the branches' outputs have one plannable type each
// and every node of both cannot fail (cannot_fail), since the branch the
// condition rejects runs too. Otherwise the host runs the If.
bool decompose_if(Expansion& e) {
  const Node& n = e.node();
  const Graph* then_g = n.get_graph("then_branch");
  const Graph* else_g = n.get_graph("else_branch");
  if (!then_g || !else_g || then_g->outputs().size() != n.num_outputs() ||
      else_g->outputs().size() != n.num_outputs())
    return false;
  if (std::optional<double> cond = scalar_constant(n.input(0))) {
    const Graph& taken = *cond != 0 ? *then_g : *else_g;
    if (!inlinable(e, taken, false)) return false;
    std::vector<Value*> outs = inline_region(e, taken, {}, *cond != 0 ? "then" : "else");
    for (size_t i = 0; i < outs.size(); ++i) e.take_over(i, outs[i]);
    e.leaves_dead_inputs();
    return true;
  }
  const Type& cond_t = n.input(0)->type();
  if (!single_static_element(cond_t)) return false;
  for (const Graph* g : {then_g, else_g}) {
    if (!inlinable(e, *g, true)) return false;
    for (const auto& node : g->nodes())
      if (!cannot_fail(*node)) return false;
  }
  for (size_t i = 0; i < n.num_outputs(); ++i) {
    const Type& t = then_g->outputs()[i]->type();
    if (!t.is_tensor() || !plannable(e, t) || t != else_g->outputs()[i]->type() || t != n.output(i)->type())
      return false;
  }
  Value* cond = cond_t.rank() == 0 ? n.input(0) : e.reshape("condition", n.input(0), {});
  std::vector<Value*> then_outs = inline_region(e, *then_g, {}, "then");
  std::vector<Value*> else_outs = inline_region(e, *else_g, {}, "else");
  for (size_t i = 0; i < n.num_outputs(); ++i)
    e.take_over(i, e.add("Where_" + std::to_string(i), "Where", {cond, then_outs[i], else_outs[i]},
                         n.output(i)->type()));
  return true;
}

// A one-element constant of the type of region input v (a scalar or [1]).
Value* constant_like(Expansion& e, const std::string& hint, const Value* v, int64_t value) {
  const Type& t = v->type();
  std::vector<int64_t> shape;
  for (const Dim& d : t.shape()) shape.push_back(d.value());
  Tensor c(t.dtype(), shape);
  c.set_i64(0, value);
  return e.constant(hint, std::move(c));
}

// Whether the region inputs `ins` and outputs `outs` of carried values have
// the carried values' own plannable types: no iteration changes them.
bool carried_types_hold(const Expansion& e, const std::vector<Value*>& carried, const std::vector<Value*>& ins,
                        const std::vector<Value*>& outs) {
  for (size_t i = 0; i < carried.size(); ++i) {
    const Type& t = carried[i]->type();
    if (!plannable(e, t) || ins[i]->type() != t || outs[i]->type() != t) return false;
  }
  return true;
}

// Whether the Loop n runs over sequences of known structure: it carries or
// its body reads one, and every such value outside the body is known
// (known_sequence). ONNX's SequenceMap expanded into a Loop is one: the
// copies' SequenceAt at each iteration's constant number and SequenceInsert
// resolve, so the body's values may have the dims the elements differ in.
bool over_known_sequences(const Node& n, const Graph& body) {
  bool any = false;
  for (size_t i = 2; i < n.num_inputs(); ++i) {
    if (n.input(i)->type().kind() != Type::Kind::Sequence) continue;
    if (!known_sequence(n.input(i))) return false;
    any = true;
  }
  for (const auto& node : body.nodes())
    for (const Value* v : node->inputs()) {
      if (!v || v->graph() == &body || v->type().kind() != Type::Kind::Sequence) continue;
      if (!known_sequence(v)) return false;
      any = true;
    }
  return any;
}

// Loop of a constant trip count M >= 1 and a condition that stays true (absent
// or constant true, the body passing it through or returning a true constant)
// -> the body copied M times, iteration k reading the constant k and the
// carried values of iteration k - 1; each scan output the iterations' values
// stacked. Only where the carried values keep their types and the copies stay
// within kMaxUnrolledNodes; otherwise the host runs the Loop.
bool decompose_loop(Expansion& e) {
  const Node& n = e.node();
  const Graph* body = n.get_graph("body");
  size_t n_carried = n.num_inputs() > 2 ? n.num_inputs() - 2 : 0;
  if (!body || body->inputs().size() != n_carried + 2 || body->outputs().size() != n.num_outputs() + 1 ||
      !n.has_input(0))
    return false;
  std::optional<double> trips = scalar_constant(n.input(0));
  std::optional<double> cond = n.has_input(1) ? scalar_constant(n.input(1)) : 1.0;
  if (!trips || *trips < 1 || !cond || *cond == 0 || !body_keeps_going(*body) ||
      *trips * static_cast<double>(body->nodes().size()) > kMaxUnrolledNodes ||
      !inlinable(e, *body, true, over_known_sequences(n, *body)))
    return false;
  const auto trip_count = static_cast<int64_t>(*trips);
  std::vector<Value*> carried(n.inputs().begin() + 2, n.inputs().end());
  const std::vector<Value*>& ins = body->inputs();
  const std::vector<Value*>& outs = body->outputs();
  if (!carried_types_hold(e, carried, {ins.begin() + 2, ins.end()}, {outs.begin() + 1, outs.begin() + 1 + n_carried}) ||
      !single_static_element(ins[0]->type()) || !single_static_element(ins[1]->type()))
    return false;
  for (size_t k = n_carried; k < n.num_outputs(); ++k)
    if (!plannable(e, n.output(k)->type())) return false;
  Value* keep_going = constant_like(e, "condition", ins[1], 1);
  std::vector<std::vector<Value*>> scans(n.num_outputs() - n_carried);
  for (int64_t it = 0; it < trip_count; ++it) {
    std::string tag = "iteration" + std::to_string(it);
    std::map<const Value*, Value*> env = {{ins[0], constant_like(e, tag + "/number", ins[0], it)}, {ins[1], keep_going}};
    for (size_t i = 0; i < n_carried; ++i) env[ins[2 + i]] = carried[i];
    std::vector<Value*> results = inline_region(e, *body, env, tag);
    for (size_t i = 0; i < n_carried; ++i) carried[i] = results[1 + i];
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(results[1 + n_carried + k]);
  }
  // The copies of what computes the condition are left unread, as are M and
  // the condition themselves.
  e.leaves_dead_inputs();
  for (size_t i = 0; i < n_carried; ++i) e.take_over(i, carried[i]);
  for (size_t k = 0; k < scans.size(); ++k)
    e.take_over(n_carried + k, stack_values(e, "scan_output" + std::to_string(k), scans[k], 0,
                                            n.output(n_carried + k)->type()));
  return true;
}

// Scan of a static length L >= 1 -> the body copied L times, iteration t
// reading each scan input's slice t (L - 1 - t when reversed, a Gather of one
// constant index) and the state of iteration t - 1; each scan output the
// iterations' values stacked along its axis (in reverse order when
// reversed). Only where the state keeps its types and the copies stay within
// kMaxUnrolledNodes; otherwise the host runs the Scan.
bool decompose_scan(Expansion& e) {
  const Node& n = e.node();
  const Graph* body = n.get_graph("body");
  if (!body || !inlinable(e, *body, true)) return false;
  int64_t m = n.get_int("num_scan_inputs", 0);
  if (m < 1 || static_cast<size_t>(m) > n.num_inputs() || body->outputs().size() != n.num_outputs()) return false;
  size_t n_state = n.num_inputs() - static_cast<size_t>(m);
  if (n_state > n.num_outputs()) return false;
  std::vector<int64_t> in_ranks, out_ranks;
  for (size_t j = n_state; j < n.num_inputs(); ++j) {
    const Type& t = n.input(j)->type();
    if (!plannable(e, t)) return false;
    in_ranks.push_back(static_cast<int64_t>(t.rank()));
  }
  for (size_t k = n_state; k < body->outputs().size(); ++k) {
    const Type& t = body->outputs()[k]->type();
    out_ranks.push_back(t.has_rank() ? static_cast<int64_t>(t.rank()) : -1);
  }
  ScanAttrs a = read_scan(n, *body, in_ranks, out_ranks);
  const Dim& len = n.input(a.n_state)->type().shape()[a.in_axes[0]];
  if (!len.is_static() || len.value() < 1 ||
      len.value() * static_cast<int64_t>(body->nodes().size()) > static_cast<int64_t>(kMaxUnrolledNodes))
    return false;
  const std::vector<Value*>& ins = body->inputs();
  const std::vector<Value*>& outs = body->outputs();
  std::vector<Value*> state(n.inputs().begin(), n.inputs().begin() + a.n_state);
  if (!carried_types_hold(e, state, {ins.begin(), ins.begin() + a.n_state}, {outs.begin(), outs.begin() + a.n_state}))
    return false;
  for (size_t j = 0; j < a.n_in; ++j)
    if (!plannable(e, ins[a.n_state + j]->type())) return false;
  for (size_t k = 0; k < a.n_out; ++k)
    if (!plannable(e, n.output(a.n_state + k)->type())) return false;
  int64_t steps = len.value();
  std::vector<std::vector<Value*>> parts(a.n_out);
  for (int64_t t = 0; t < steps; ++t) {
    std::string tag = "iteration" + std::to_string(t);
    std::map<const Value*, Value*> env;
    for (size_t i = 0; i < a.n_state; ++i) env[ins[i]] = state[i];
    for (size_t j = 0; j < a.n_in; ++j) {
      int64_t at = a.in_dirs[j] ? steps - 1 - t : t;
      Tensor index = Tensor::scalar_i64(at);
      env[ins[a.n_state + j]] =
          e.add(tag + "/slice" + std::to_string(j), "Gather",
                {n.input(a.n_state + j), e.constant(tag + "/at" + std::to_string(j), std::move(index))},
                ins[a.n_state + j]->type(), {{"axis", Attribute::of_int(a.in_axes[j])}});
    }
    std::vector<Value*> results = inline_region(e, *body, env, tag);
    for (size_t i = 0; i < a.n_state; ++i) state[i] = results[i];
    for (size_t k = 0; k < a.n_out; ++k) parts[k].push_back(results[a.n_state + k]);
  }
  // Each Gather's constant index is left unread once the Gather becomes a Slice.
  e.leaves_dead_inputs();
  for (size_t i = 0; i < a.n_state; ++i) e.take_over(i, state[i]);
  for (size_t k = 0; k < a.n_out; ++k) {
    if (a.out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
    e.take_over(a.n_state + k, stack_values(e, "scan_output" + std::to_string(k), parts[k], a.out_axes[k],
                                            n.output(a.n_state + k)->type()));
  }
  return true;
}

// ---------------------------------------------------------------- What data decides

using Known = std::function<bool(const Value*)>;

// If's condition, where it is not known.
const Value* if_data_operand(const Node& n, const Known& known) {
  return n.has_input(0) && !known(n.input(0)) ? n.input(0) : nullptr;
}

// Whether the Loop body's condition output is the condition it was given, or known.
bool loop_condition_fixed(const Node& n, const Known& known) {
  const Graph* body = n.get_graph("body");
  if (!body || body->outputs().empty()) return false;
  const Value* cond_out = body->outputs()[0];
  if (known(cond_out)) return true;
  return body->inputs().size() > 1 && cond_out == body->inputs()[1];
}

// Loop's trip count or condition where one is not known, the body's condition
// output where it computes a new one, or with no trip count the condition,
// which alone ends the loop.
const Value* loop_data_operand(const Node& n, const Known& known) {
  if (n.has_input(0) && !known(n.input(0))) return n.input(0);
  if (n.has_input(1) && !known(n.input(1))) return n.input(1);
  if (!loop_condition_fixed(n, known)) return n.get_graph("body")->outputs().at(0);
  return n.has_input(0) ? nullptr : n.input(1);
}

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
  r.add(OpDef{"", "If", 11, kControlFlow, infer_if, eval_if, {}})
      .regions_chosen_by({"condition", if_data_operand})
      .hint_at_break("compute both branches and pick with Where, or make the condition a constant")
      .decomposition(decompose_if);
  r.add(OpDef{"", "Loop", 11, kControlFlow, infer_loop, eval_loop, {}})
      .regions_chosen_by({"trip count or condition", loop_data_operand})
      .hint_at_break("give the loop a constant trip count (tcc then unrolls it)")
      .decomposition(decompose_loop);
  r.add(OpDef{"", "Scan", 9, kControlFlow, infer_scan, eval_scan, {}}).decomposition(decompose_scan);
}

}  // namespace tcc
