// What the rewrite-table passes share (canonicalize, simplify_algebra,
// fold_transpose_matmul, fold_batchnorm_conv): a table of local rules keyed by
// op type, a driver that applies them until nothing fires, and a Rewriter
// through which rules change the graph, so that the two guarantees every
// rewrite needs live in one place:
//   - a main-graph output is never replaced (its name is the model's
//     signature), and a value is only replaced by one of the same type;
//   - nodes a rewrite left without users are erased, and only those (dead
//     code that was there before is dce's business).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "passes/pass.h"
#include "src/ops/decomposition.h"  // constant_value, scalar_constant

namespace tcc {

// True when v is an output of the main graph.
bool is_model_output(const Value* v);

// The perm Transpose n applies (its default reverses the dims); nullopt when
// it has none and its input's rank is unknown.
std::optional<std::vector<int64_t>> transpose_perm(const Node& n);
bool is_identity_perm(const std::vector<int64_t>& perm);

// A new i64 initializer of g holding `values` (a shape operand), named from `name`.
Value* add_i64_constant(Graph& g, const std::string& name, const std::vector<int64_t>& values);

// A Reshape of v to `target` (0 keeps v's dim, -1 takes the rest), of type t, inserted into g before `before`
// (at the end when null) as node `name` from `source`; v itself where it has type t already.
Value* insert_reshape(Graph& g, Node* before, Value* v, const std::vector<int64_t>& target, const Type& t,
                      const std::string& name, const std::string& source);

// A tcc::Reshape of v to `dims` (symbolic or static: a view of v's buffer), named `value_name` (made fresh),
// inserted into g before `before` as node `node_name` from `source`; v itself where it has those dims already.
// The graph imports tcc's opset.
Value* insert_view(Graph& g, Node* before, Value* v, const Dims& dims, const std::string& value_name,
                   const std::string& node_name, const std::string& source);

class Rewriter {
 public:
  explicit Rewriter(PassStats& stats) : stats_(stats) {}

  // Redirects every read of `from` (node inputs, region reads, region
  // outputs) to `to`. Refuses, changing nothing, when `from` is a main-graph
  // output or the two types differ.
  bool replace(Value* from, Value* to);
  // n's input i becomes v; the old input's producer may become dead.
  void set_input(Node& n, size_t i, Value* v);
  // Reads of v: node inputs in v's graph and the regions under it, and graph
  // outputs. Recounted on each call (rules ask rarely, graphs are small).
  size_t num_uses(const Value* v) const;
  // The rule fired: bumps its counter.
  void count(std::string_view counter) { stats_.add(std::string(counter)); }

  // Driver bookkeeping: nodes that may have lost their last user, and values
  // already replaced (their producer is dead and no rule should match it).
  std::unordered_set<Node*> maybe_dead;
  std::unordered_set<const Value*> replaced;

 private:
  PassStats& stats_;
};

struct RewriteRule {
  std::string_view op_type;
  std::string_view counter;  // bumped each time the rule fires
  // Rewrites the graph around n and returns true when its pattern matches.
  bool (*apply)(Node& n, Rewriter& rw);
};

// Applies the rules to every node of g and its regions, in order, sweep after
// sweep until none fires (at most kMaxSweeps), erasing after each sweep the
// nodes the rewrites left unused. Returns whether anything changed.
bool apply_rewrites(Graph& g, const std::vector<RewriteRule>& rules, PassStats& stats);

}  // namespace tcc
