// The values an attention mask holds, as fuse_attention needs to know them:
// whether a fill hides a key, whether a float mask is finite, and whether a
// mask is causal, each decided from the graph that computes the mask.
//
// Causal masks, [..., Sq, Skv] true or nonzero exactly where key j <= query i
// (or exactly where j > i, negated): constants checked element by element;
// Trilu of all-nonzero values (lower with k = 0, upper with k = 1); ranges
// compared (j - i <= 0, i - j < 0 and the like); through Not, Equal to 0,
// Cast, And with all-true values, slices that start at 0 and broadcasts that
// keep the last two axes.
#pragma once

#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/ir/graph.h"

namespace tcc::attention_masks {

// n is `op` in the ONNX domain, or tcc's attribute-shaped twin (tcc::Reshape, Expand, Slice, Range).
bool is_op(const Node* n, std::string_view op);
bool is_onnx(const Node* n, std::string_view op);
// v is a tensor whose every dim is known (symbolic or static).
bool known(const Value* v);
inline const Dims& dims(const Value* v) { return v->type().shape(); }

// Readers of each value of a graph: node inputs, region captures, graph outputs.
class Readers {
 public:
  explicit Readers(const Graph& g);
  // The nodes reading v; null when something other than a node input reads it.
  const std::vector<std::pair<Node*, size_t>>* nodes_only(const Value* v) const;
  size_t count(const Value* v) const;

 private:
  std::unordered_map<const Value*, std::vector<std::pair<Node*, size_t>>> users_;
  std::unordered_map<const Value*, size_t> extra_;
  std::vector<std::pair<Node*, size_t>> none_;
};

// The only node reading v (as a node input, and nothing else reading it), else null.
Node* sole_reader(const Readers& r, const Value* v);
inline bool rank_is(const Value* v, size_t r) { return known(v) && v->type().rank() == r; }

// A fill at or below -1e30, which hides a key as -inf does.
bool hides(double x);
// Every element is 0: a constant, its broadcast, or a ConstantOfShape's value.
bool is_zeros(const Value* v);
// A float mask whose elements are finite whatever the inputs: constants,
// Where of such, bools cast, movement of those, and values bounded within
// the dtype's range (sums and products of constants and sigmoids).
bool finite_mask(const Value* v, int depth = 0);
// A float bias finite wherever the values it is computed from are: products
// (MatMul, Mul), sums, differences and running sums (CumSum) of such values,
// divisions by finite constants, and elements moved or gathered from those
// (DeBERTa's relative-position scores, BLOOM's ALiBi), or a finite mask. A row
// of such a bias is -inf only where its inputs held infinities or overflowed,
// as with a guard.
bool finite_from_finite(const Value* v, int depth = 0);
// +1: v is true (nonzero) exactly where its column j <= its row i over its
// last two axes; -1: exactly where j > i; 0: not known.
int causal_pattern(const Value* v, int depth = 0);
// v's last two axes are [rows, cols] exactly (a causal proof needs the whole grid).
bool grid_is(const Value* v, const Dim& rows, const Dim& cols);
// An additive mask that is 0 where j <= i and hides the rest.
bool causal_additive(const Value* m, const Dim& rows, const Dim& cols, int depth = 0);
// The mask broadcasts onto the scores [B, Hq, Sq, Skv], keys along its last axis.
bool broadcasts_onto(const Value* m, const Dims& scores);

}  // namespace tcc::attention_masks
