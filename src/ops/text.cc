// Text featurization: TfIdfVectorizer over integer tokens (string tokens are
// outside tcc's scope: no kernel reads strings).
//
// TfIdfVectorizer stays a host step. Its work is a lookup of every n-gram of
// every row (with skips) in a table of pooled n-grams, then counts per
// output column: the table is a hash of token sequences, which none of the
// ops with GPU kernels express short of comparing every n-gram with every
// pooled one, and its inputs are token ids, small next to the models that
// read its output.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

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

}  // namespace

void register_text_ops(OpRegistry& r) {
  // Any element types: the tokens are i32 or i64 (infer_tfidf checks), the output f32.
  r.add(OpDef{"", "TfIdfVectorizer", 9, 0, infer_tfidf, eval_tfidf, {}});
}

}  // namespace tcc
