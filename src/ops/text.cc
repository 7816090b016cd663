// Text: TfIdfVectorizer over integer tokens (string tokens are outside tcc's
// scope: no kernel reads strings), and StringConcat, which the reference
// interpreter runs (a compiled module takes and returns no strings).
//
// On the GPU TfIdfVectorizer decomposes onto kernels (decompose_tfidf): in
// place of the reference's table lookup, each pooled n-gram is compared with
// every window of the row that could hold it; rows are token ids, short next
// to the models that read the output.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "src/ops/decomposition.h"
#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

enum class Weighting { TF, IDF, TFIDF };

// The node's attributes resolved: each pooled n-gram (its tokens) with the
// output column it counts into.
struct NgramTable {
  int64_t min_length, max_length, max_skip, columns;
  Weighting weighting;
  std::vector<float> weights;  // one per column, or empty (every weight 1)
  std::map<std::vector<int64_t>, int64_t> column_of;
};

NgramTable ngram_table(const Node& n) {
  NgramTable t;
  if (n.has_attr("pool_strings")) n.fail("pool_strings: tcc's TfIdfVectorizer reads integer tokens only");
  std::string mode = n.get_string("mode", "");
  if (mode == "TF") t.weighting = Weighting::TF;
  else if (mode == "IDF") t.weighting = Weighting::IDF;
  else if (mode == "TFIDF") t.weighting = Weighting::TFIDF;
  else n.fail("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  t.min_length = n.get_int("min_gram_length", 0);
  t.max_length = n.get_int("max_gram_length", 0);
  t.max_skip = n.get_int("max_skip_count", 0);
  if (t.min_length < 1 || t.max_length < t.min_length || t.max_skip < 0)
    n.fail("expected 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got " +
           std::to_string(t.min_length) + ", " + std::to_string(t.max_length) + " and " + std::to_string(t.max_skip));
  std::vector<int64_t> pool = n.get_ints("pool_int64s"), starts = n.get_ints("ngram_counts");
  std::vector<int64_t> indexes = n.get_ints("ngram_indexes");
  if (indexes.empty()) n.fail("ngram_indexes is required");
  for (int64_t i : indexes)
    if (i < 0) n.fail("ngram_indexes must not be negative, got " + std::to_string(i));
  t.columns = *std::max_element(indexes.begin(), indexes.end()) + 1;
  t.weights = n.get_floats("weights");
  if (!t.weights.empty() && static_cast<int64_t>(t.weights.size()) < t.columns)
    n.fail("weights holds " + std::to_string(t.weights.size()) + " values for " + std::to_string(t.columns) +
           " output columns");
  // ngram_counts[k] is where the (k + 1)-grams start in the pool; n-grams are
  // numbered in pool order, and the id-th one counts into ngram_indexes[id].
  size_t id = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    auto length = static_cast<int64_t>(k + 1);
    int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % length != 0)
      n.fail("ngram_counts does not split pool_int64s (" + std::to_string(pool.size()) + " tokens) into " +
             std::to_string(length) + "-grams at " + std::to_string(begin) + ".." + std::to_string(end));
    for (int64_t at = begin; at < end; at += length, ++id) {
      if (id >= indexes.size())
        n.fail("ngram_indexes holds " + std::to_string(indexes.size()) + " columns for more pooled n-grams");
      if (length >= t.min_length && length <= t.max_length)
        t.column_of[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + length)] = indexes[id];
    }
  }
  return t;
}

void infer_tfidf(InferContext& ctx) {
  const Node& n = ctx.node();
  NgramTable t = ngram_table(n);
  DType x = input_dtype(ctx, 0);
  if (x != DType::Undefined && x != DType::I32 && x != DType::I64)
    ctx.fail("expected i32 or i64 tokens, got " + std::string(dtype_name(x)) +
             (x == DType::String ? " (tcc reads integer tokens only)" : ""));
  if (!inputs_ranked(ctx, {0})) return;
  const Type& in = ctx.input_type(0);
  if (in.rank() != 1 && in.rank() != 2) ctx.fail("expected tokens [C] or [N, C], got " + in.str());
  ctx.set_output_type(0, Type::tensor(DType::F32, in.rank() == 1 ? Dims{t.columns} : Dims{in.shape()[0], t.columns}));
}

std::vector<Tensor> eval_tfidf(EvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  NgramTable t = ngram_table(ctx.node());
  if (x.rank() != 1 && x.rank() != 2) ctx.fail("expected tokens [C] or [N, C], got shape " + shape_str(x.shape()));
  int64_t rows = x.rank() == 1 ? 1 : x.shape()[0], len = x.shape().back();
  std::vector<int64_t> counts(static_cast<size_t>(rows * t.columns), 0);
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t length = t.min_length; length <= t.max_length; ++length)
      // A unigram is counted once, not once per skip.
      for (int64_t skip = 0; skip <= (length == 1 ? 0 : t.max_skip); ++skip)
        for (int64_t start = 0; start + (length - 1) * (skip + 1) < len; ++start) {
          gram.clear();
          for (int64_t k = 0; k < length; ++k) gram.push_back(x.get_i64(r * len + start + k * (skip + 1)));
          auto hit = t.column_of.find(gram);
          if (hit != t.column_of.end()) ++counts[static_cast<size_t>(r * t.columns + hit->second)];
        }
  Tensor y(DType::F32, x.rank() == 1 ? std::vector<int64_t>{t.columns} : std::vector<int64_t>{rows, t.columns});
  for (int64_t i = 0; i < y.numel(); ++i) {
    auto count = static_cast<double>(counts[static_cast<size_t>(i)]);
    double weight = t.weights.empty() ? 1.0 : t.weights[static_cast<size_t>(i % t.columns)];
    switch (t.weighting) {
      case Weighting::TF: y.set_f64(i, count); break;
      case Weighting::IDF: y.set_f64(i, count > 0 ? weight : 0); break;
      case Weighting::TFIDF: y.set_f64(i, weight * count); break;
    }
  }
  return {y};
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// TfIdfVectorizer -> per n-gram length L, the row's windows of L tokens at
// every skip (a Gather of a constant table of their positions; a unigram's
// once) compared with each pooled L-gram (Equal), a window matching where all
// L tokens do (ReduceMin), the matches summed over the windows (ReduceSum):
// each pooled n-gram's count, exact in f32. A Gather of the counts (and a
// zero for a column no n-gram counts into, or whose n-grams the row is too
// short for) puts each column's n-grams in place, summed where several share
// a column; the weighting is pointwise. Declines a symbolic row length and a
// table without n-grams in range.
bool decompose_tfidf(Expansion& e) {
  const Node& n = e.node();
  const Type& x = n.input(0)->type();
  if (!x.is_tensor() || !x.fully_shaped() || !x.shape().back().is_static()) return false;
  const NgramTable t = ngram_table(n);
  if (t.column_of.empty()) return false;
  const int64_t len = x.shape().back().value();
  const Dim rows = x.rank() == 1 ? Dim(1) : x.shape()[0];
  Value* tokens = e.reshape("Reshape_x", n.input(0), {rows, Dim(len)});
  auto f32 = [](const Dims& d) { return Type::tensor(DType::F32, d); };
  // Pooled n-grams in the table's order, by length; each one's column.
  std::vector<std::vector<int64_t>> sources(static_cast<size_t>(t.columns));
  std::vector<Value*> counts;
  int64_t pooled = 0;
  for (int64_t length = t.min_length; length <= t.max_length; ++length) {
    std::vector<int64_t> positions;
    for (int64_t skip = 0; skip <= (length == 1 ? 0 : t.max_skip); ++skip)
      for (int64_t start = 0; start + (length - 1) * (skip + 1) < len; ++start)
        for (int64_t k = 0; k < length; ++k) positions.push_back(start + k * (skip + 1));
    const auto windows = static_cast<int64_t>(positions.size()) / length;
    if (windows == 0) continue;  // longer than the row: its n-grams' columns read the zero
    std::vector<double> pool;
    int64_t grams = 0;
    for (const auto& [gram, column] : t.column_of)
      if (static_cast<int64_t>(gram.size()) == length) {
        pool.insert(pool.end(), gram.begin(), gram.end());
        sources[static_cast<size_t>(column)].push_back(pooled + grams++);
      }
    if (grams == 0) continue;
    const std::string l = std::to_string(length);
    Tensor table(DType::I64, {windows, length});
    for (size_t i = 0; i < positions.size(); ++i) table.set_i64(static_cast<int64_t>(i), positions[i]);
    Value* read = e.add("Gather_windows" + l, "Gather", {tokens, e.constant("windows" + l, table)},
                        Type::tensor(x.dtype(), {rows, Dim(windows), Dim(length)}), {{"axis", Attribute::of_int(1)}});
    read = e.reshape("Reshape_windows" + l, read, {rows, Dim(windows), Dim(1), Dim(length)});
    const Dims pairs = {rows, Dim(windows), Dim(grams), Dim(length)};
    Value* equal = e.add("Equal" + l, "Equal", {read, e.numbers("pool" + l, pool, {grams, length}, x.dtype())},
                         Type::tensor(DType::Bool, pairs));
    Value* match = e.cast("Cast_match" + l, equal, DType::F32);
    if (length > 1)
      match = e.reduce("ReduceMin" + l, "ReduceMin", match, {3}, f32({rows, Dim(windows), Dim(grams), Dim(1)}));
    Value* count = e.reduce("ReduceSum" + l, "ReduceSum", match, {1}, f32({rows, Dim(1), Dim(grams), Dim(1)}));
    counts.push_back(e.reshape("Reshape_count" + l, count, {rows, Dim(grams)}));
    pooled += grams;
  }
  // The last slot is a zero, read by columns no n-gram counts into.
  counts.push_back(e.expand("Expand_zero", e.scalar("zero", 0, DType::F32), {rows, Dim(1)}));
  Value* all = e.add("Concat_counts", "Concat", counts, f32({rows, Dim(pooled + 1)}), {{"axis", Attribute::of_int(1)}});
  size_t shared = 1;
  for (const auto& s : sources) shared = std::max(shared, s.size());
  const Dims out = {rows, Dim(t.columns)};
  Value* tf = nullptr;
  for (size_t j = 0; j < shared; ++j) {
    Tensor from(DType::I64, {t.columns});
    for (size_t c = 0; c < sources.size(); ++c)
      from.set_i64(static_cast<int64_t>(c), j < sources[c].size() ? sources[c][j] : pooled);
    const std::string s = std::to_string(j);
    Value* placed = e.add("Gather_columns" + s, "Gather", {all, e.constant("columns" + s, from)}, f32(out),
                          {{"axis", Attribute::of_int(1)}});
    tf = tf ? e.add("Add_columns" + s, "Add", {tf, placed}, f32(out)) : placed;
  }
  std::vector<double> weights(t.weights.begin(), t.weights.begin() + (t.weights.empty() ? 0 : t.columns));
  Value* weighted = tf;
  if (t.weighting == Weighting::IDF)
    weighted = e.add("Min_seen", "Min", {tf, e.scalar("one", 1, DType::F32)}, f32(out));
  if (t.weighting != Weighting::TF && !weights.empty())
    weighted = e.add("Mul_weights", "Mul", {weighted, e.numbers("weights", weights, {t.columns}, DType::F32)},
                     f32(out));
  e.finish_reshape("Reshape_y", weighted);
  return true;
}

// StringConcat: each element A's followed by B's, broadcast as NumPy does.
void infer_string_concat(InferContext& ctx) {
  for (size_t i = 0; i < 2; ++i)
    if (ctx.ranked_input(i).dtype() != DType::String)
      ctx.fail("expected string operands, got " + std::string(dtype_name(ctx.ranked_input(i).dtype())));
  ctx.set_output_type(0, Type::tensor(DType::String, broadcast_dims(ctx, {ctx.ranked_input(0).shape(),
                                                                          ctx.ranked_input(1).shape()})));
}

std::vector<Tensor> eval_string_concat(EvalContext& ctx) {
  const Tensor &a = ctx.input(0), &b = ctx.input(1);
  Tensor y(DType::String, broadcast_shapes(ctx.node(), {a.shape(), b.shape()}));
  BroadcastIndexer from_a(y.shape(), a.shape()), from_b(y.shape(), b.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y.strings_mut()[i] = a.strings()[from_a(i)] + b.strings()[from_b(i)];
  return {y};
}

}  // namespace

void register_text_ops(OpRegistry& r) {
  // Any element types: the tokens are i32 or i64 (infer_tfidf checks), the output f32.
  r.add(OpDef{"", "TfIdfVectorizer", 9, 0, infer_tfidf, eval_tfidf, {}}).decomposition(decompose_tfidf);
  r.add(OpDef{"", "StringConcat", 20, 0, infer_string_concat, eval_string_concat, {DType::String}});
}

}  // namespace tcc
