// Liveness-based arena planning, greedy in schedule order.
//
// Every value a step writes that is not a graph output gets a buffer, live from
// the step that writes it to the last step that reads it (a value no step reads
// still needs somewhere to be written, for its own step only). Slots of the
// arena are created in order, so a slot's offset is the sum of the sizes before
// it and never changes; a buffer takes a free slot when its size is provably
// enough. Symbolic sizes are only compared for equality: `batch*seq*3072` and
// `batch*seq*768` are both sizes, but proving one >= the other for every value
// of the symbols is not worth the risk of an arena that overflows at run time.
// Equal-sized slots are exactly what repeated transformer layers produce, so
// the equality rule finds the reuse that matters. A view (Schedule::views) takes
// its source's offset, and a read of the view keeps the source's buffer live.
#include "codegen/memory_plan.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include "src/diag/errors.h"

namespace tcc {

namespace {

constexpr int64_t kAlignment = 256;

// Rounds a byte count up to the alignment. A symbolic count whose every term is
// already a multiple of 256 (the usual `batch*seq*3072`) stays as it is; others
// round through a floor division the runtime evaluates.
SymExpr align_bytes(const SymExpr& bytes) {
  if (bytes.is_constant()) {
    int64_t b = bytes.constant_value();
    return SymExpr::constant((b + kAlignment - 1) / kAlignment * kAlignment);
  }
  const SymExpr a = SymExpr::constant(kAlignment);
  if (bytes.exact_div(a)) return bytes;
  return (bytes + SymExpr::constant(kAlignment - 1)).floordiv(a) * a;
}

// Whether a slot of `have` bytes provably holds `need` bytes.
bool fits(const SymExpr& have, const SymExpr& need) {
  if (have == need) return true;
  return have.is_constant() && need.is_constant() && have.constant_value() >= need.constant_value();
}

struct Slot {
  SymExpr offset, size;
  bool free = false;
};

}  // namespace

PlannedBuffer buffer_of(const Value& v) {
  const Type& t = v.type();
  // Shape inference leaves a value unshaped only where its rank or dims
  // depend on input data it cannot see (an If on a computed condition whose
  // branches differ): a model the compiler cannot plan, not a compiler fault.
  if (!t.is_tensor() || !t.fully_shaped())
    v.fail("writes '" + v.name() + "' of type " + t.str() +
           ", whose shape depends on input data in a way tcc cannot express; tcc compile plans a buffer for every "
           "value and needs its rank and dims (as expressions of the input dims)");
  PlannedBuffer b;
  b.value = v.name();
  b.dtype = t.dtype();
  SymExpr numel = SymExpr::constant(1);
  for (const Dim& d : t.shape()) {
    b.shape.push_back(d.expr());
    numel = numel * d.expr();
  }
  b.nbytes = align_bytes(numel * SymExpr::constant(static_cast<int64_t>(dtype_size(t.dtype()))));
  return b;
}

MemoryPlan plan_memory(const Graph& g, const Schedule& s) {
  std::set<std::string> external;  // values with memory of their own
  for (const Value* v : g.inputs()) external.insert(v->name());
  for (const Value* v : g.outputs()) external.insert(v->name());
  for (const Value* v : g.initializers()) external.insert(v->name());
  std::unordered_map<std::string, std::string> source_of;  // view -> the value whose buffer it shares
  for (const ViewAlias& v : s.views) source_of.emplace(v.value, v.source);

  // Live ranges, in first-write order (which is the order buffers are listed in).
  MemoryPlan plan;
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& step = s.steps[i];
    for (const std::string& name : step.writes) {
      if (external.count(name)) continue;
      TCC_CHECK(!index.count(name)) << "value '" << name << "' is written by two schedule steps";
      const Value* v = g.find(name);
      TCC_CHECK(v != nullptr) << "schedule step '" << step.node << "' writes '" << name << "', not in the graph";
      PlannedBuffer b = buffer_of(*v);
      b.first_step = b.last_step = static_cast<int>(i);
      index[name] = plan.buffers.size();
      plan.buffers.push_back(std::move(b));
    }
    for (const std::string& name : step.reads) {
      auto view = source_of.find(name);
      auto it = index.find(view == source_of.end() ? name : view->second);
      if (it != index.end()) plan.buffers[it->second].last_step = static_cast<int>(i);
    }
  }

  // Buffers whose range ends at each step, released after that step so that a
  // step never writes over what it reads.
  std::vector<std::vector<size_t>> ends(s.steps.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) ends[plan.buffers[b].last_step].push_back(b);

  std::vector<Slot> slots;
  std::vector<size_t> slot_of(plan.buffers.size());
  SymExpr arena, unplanned;
  size_t next = 0;  // buffers are in first_step order
  for (size_t i = 0; i < s.steps.size(); ++i) {
    for (; next < plan.buffers.size() && plan.buffers[next].first_step == static_cast<int>(i); ++next) {
      PlannedBuffer& b = plan.buffers[next];
      unplanned = unplanned + b.nbytes;
      // The smallest free slot that fits; the first of equals, for determinism.
      std::optional<size_t> best;
      for (size_t k = 0; k < slots.size(); ++k) {
        if (!slots[k].free || !fits(slots[k].size, b.nbytes)) continue;
        if (!best || (slots[k].size.is_constant() && slots[*best].size.is_constant() &&
                      slots[k].size.constant_value() < slots[*best].size.constant_value()))
          best = k;
      }
      if (!best) {
        slots.push_back({arena, b.nbytes, false});
        arena = arena + b.nbytes;
        best = slots.size() - 1;
      }
      slots[*best].free = false;
      slot_of[next] = *best;
      b.offset = slots[*best].offset;
    }
    for (size_t b : ends[i]) slots[slot_of[b]].free = true;
  }
  for (const ViewAlias& view : s.views) {
    const Value* v = g.find(view.value);
    TCC_CHECK(v != nullptr) << "view '" << view.node << "' writes '" << view.value << "', not in the graph";
    auto source = index.find(view.source);
    TCC_CHECK(source != index.end() && !source_of.count(view.source))
        << "view '" << view.node << "' shares the buffer of '" << view.source << "', which no step writes";
    PlannedBuffer b = buffer_of(*v);
    const PlannedBuffer& from = plan.buffers[source->second];
    TCC_CHECK(b.nbytes == from.nbytes) << "view '" << view.node << "' has " << b.nbytes.str() << " bytes, its source '"
                                       << view.source << "' " << from.nbytes.str();
    b.offset = from.offset;
    b.first_step = from.first_step;
    b.last_step = from.last_step;
    plan.buffers.push_back(std::move(b));
  }
  plan.arena_bytes = arena;
  plan.unplanned_bytes = unplanned;
  return plan;
}

int64_t evaluate_bytes(const SymExpr& e, const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> all = sizes;
  for (const std::string& sym : e.symbols()) all.emplace(sym, 1);
  std::optional<int64_t> v = e.evaluate(all);
  if (!v) throw InputError("cannot evaluate " + e.str() + " at the given sizes");
  return *v;
}

}  // namespace tcc
