// Control flow: If, Loop and Scan. Their bodies are regions (nested Graphs)
// that may read values of the enclosing graphs.
//
// Shape rules infer the regions and merge what differs: a dim two branches (or
// two loop iterations) disagree on becomes a fresh symbol, so the result stays
// ranked and as symbolic as the program allows. Kernels run the regions on the
// reference interpreter.
#include <algorithm>
#include <cstring>
#include <limits>

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

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
  r.add(OpDef{"", "If", 11, kControlFlow, infer_if, eval_if, {}});
  r.add(OpDef{"", "Loop", 11, kControlFlow, infer_loop, eval_loop, {}});
  r.add(OpDef{"", "Scan", 9, kControlFlow, infer_scan, eval_scan, {}});
}

}  // namespace tcc
