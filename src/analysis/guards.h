// GuardSet: what one compiled variant of a graph assumes about its inputs,
// in torch.compile's terms:
//  - TENSOR_MATCH per tensor input: dtype, device, requires_grad, every
//    static size, and strides (the trace's, or contiguous);
//  - EQUALS_MATCH per scalar input guarded by value (float scalars always,
//    int scalars while static);
//  - SHAPE_ENV relations over the variant's symbols s0, s1, ...: `2 <= s0`
//    (0 and 1 are specialized; a module's floor is `1 <= s0`, its
//    signature's least_size), `s1 == s0` (sizes that were equal when the
//    variant was compiled share a guard, as torch's duck sizing), dims the
//    model names alike, and divisibility an op relies on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/analysis/torch_rules.h"
#include "src/analysis/trace.h"

namespace tcc {

class GuardSet {
 public:
  // Per class: its guarded value, a symbol, or not read by this graph.
  struct ClassGuard {
    enum Kind : uint8_t { Unguarded, Static, Symbolic } kind = Unguarded;
    int64_t value = 0;  // Static
    int symbol = -1;    // Symbolic: index n of sN
    bool unbacked = false;  // Symbolic without 0/1 specialization (mark_unbacked): no `2 <= sN`
  };
  struct Relation {  // class a == class b (both symbolic)
    int a = 0, b = 0;
  };

  GuardSet(const ModelSignature& sig, std::string compile_id) : sig_(&sig), compile_id_(std::move(compile_id)) {}

  const std::string& compile_id() const { return compile_id_; }
  // The release whose wording failures() uses (default: the newest modelled).
  void set_rules(const TorchRules& rules) { rules_ = rules; }
  std::vector<int>& inputs() { return inputs_; }  // model inputs this graph reads
  std::vector<ClassGuard>& classes() { return classes_; }
  std::vector<DType>& dtypes() { return dtypes_; }      // per input; Undefined: not guarded
  std::vector<bool>& float_guarded() { return float_guarded_; }
  std::vector<double>& float_values() { return float_values_; }
  std::vector<Relation>& relations() { return relations_; }
  // The grad mode the variant was compiled under (GLOBAL_STATE); nullopt: not guarded.
  std::optional<bool>& grad_mode() { return grad_mode_; }
  // Per input: the layout a tensor input had when the variant was compiled
  // (TENSOR_MATCH's device, requires_grad and strides); nullopt: not a tensor the graph reads.
  std::vector<std::optional<TensorLayout>>& layouts() { return layouts_; }
  const std::vector<ClassGuard>& classes() const { return classes_; }
  const std::vector<bool>& float_guarded() const { return float_guarded_; }
  const std::vector<double>& float_values() const { return float_values_; }

  // `values` are the call's class values after any padding the simulation applies.
  bool check(const CallRecord& call, const int64_t* values) const;
  // Each guard the call fails, in torch's words.
  std::vector<std::string> failures(const CallRecord& call, const int64_t* values) const;

  // The tree TORCH_LOGS=guards prints, one guard per line.
  std::vector<std::string> tree_lines() const;
  nlohmann::json to_json() const;

  // Whether the call's class values break an AtLeast fact (a Slice bound) that
  // this variant's symbolic classes carry; `fact_text` set to the first.
  bool breaks_fact(const int64_t* values, std::string* fact_text = nullptr) const;

 private:
  // A class's declared range (ModelSignature::class_ranges) as guards on one
  // of its sources: `source >= MIN` where MIN is above 2 (below, the program
  // accepts 0 and 1 too: SizeRange::admits), `source <= MAX` where bounded.
  struct RangeBound {
    bool upper = false;
    int64_t bound = 0;
    bool holds(int64_t v) const { return upper ? v <= bound : v >= bound; }
    std::string text(const std::string& source) const {
      return source + (upper ? " <= " : " >= ") + std::to_string(bound);
    }
  };
  std::vector<RangeBound> range_bounds(int cls) const;
  std::string symbol_name(int cls) const;
  // A tensor input's first failed size or stride, dim by dim as releases before
  // 2.6 check them (size then stride of each dim); "" when none fails here.
  std::string legacy_tensor_failure(int input, const CallRecord& call, const int64_t* values) const;
  // An input as the release's guard failures spell it: x, or L['x'].
  std::string spelled(const std::string& input) const;
  // Input i as torch's guards name it: its source where it has one, its name otherwise.
  std::string spelled_input(int input) const;
  // "x.size()[1]" (or "L['x'].size()[1]"), a scalar's own name.
  std::string spelled_source(int input, int dim) const;
  bool stride_guarded(int input, int dim) const;
  bool zero_breaks_stride(int cls) const;
  std::pair<int, int> last_read_source(int cls) const;  // (input, dim)  // a size of 0 in this symbolic class fails a stride guard
  // The fact's expression over this variant's symbols (sN) and static values;
  // nullopt when it mentions no symbolic class, so the variant's sizes decide it.
  std::optional<SymExpr> fact_expr(const ShapeFact& f) const;
  std::vector<std::optional<int64_t>> sizes(int input) const;    // nullopt: symbolic
  std::vector<std::optional<int64_t>> strides(int input) const;
  // Where input i's device type differs from the call's: torch checks a
  // tensor's dispatch key set first, which names the backend; "" when the type
  // matches or is one tcc cannot name.
  std::string dispatch_key_failure(int input, const CallRecord& call) const;
  // Where input i's device (the same type, another index) or requires_grad
  // differs from the call's, in torch's words (without the compile id); "" when both match.
  std::string placement_failure(int input, const CallRecord& call) const;
  // Where the call's strides of input i differ (torch checks them after the sizes); "" when they match.
  std::string stride_failure(int input, const CallRecord& call, const int64_t* values) const;

  const ModelSignature* sig_;
  std::string compile_id_;
  std::vector<int> inputs_;
  std::vector<ClassGuard> classes_;
  std::vector<DType> dtypes_;
  std::vector<bool> float_guarded_;
  std::vector<double> float_values_;
  std::vector<Relation> relations_;
  std::vector<std::optional<TensorLayout>> layouts_;
  std::optional<bool> grad_mode_;
  TorchRules rules_;
};

}  // namespace tcc
