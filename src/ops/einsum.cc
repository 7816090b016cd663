// Einsum: a sum of products over labelled operand dims, spelled by an
// equation ("bij,bjk->bik"), with repeated labels (diagonals), "..." (the
// broadcast dims) and ONNX's implicit output (the labels used once, sorted).
// Its kernel is a plain index loop accumulating in double (floats) or int64
// (integers); its gradient is Einsums of the other operands; its
// decomposition is the MatMul, Mul, reductions and movements it spells.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/ops/families.h"
#include "src/ops/op_helpers.h"
#include "src/ops/op_registry.h"

namespace tcc {
namespace {

// Label ids: a letter is its ASCII code (so sorting ids sorts labels as ONNX's
// implicit output does); dims covered by "..." get ids from kEllipsisBase up,
// aligned to the right across operands as in broadcasting.
constexpr int kEllipsisMark = -1;
constexpr int kEllipsisBase = 256;

struct Einsum {
  std::vector<std::vector<int>> inputs;  // per operand, one label id per dim
  std::vector<int> output;
  int64_t ellipsis_rank = 0;
};

std::vector<int> parse_term(const Node& n, const std::string& t) {
  std::vector<int> labels;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (t.compare(i, 3, "...") != 0 || seen_ellipsis)
        n.fail("invalid einsum term '" + t + "': expected at most one '...'");
      seen_ellipsis = true;
      labels.push_back(kEllipsisMark);
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(c)))
      n.fail("invalid einsum term '" + t + "': unexpected character '" + std::string(1, c) + "'");
    labels.push_back(c);
  }
  return labels;
}

// Parses the equation against the operand ranks and resolves ellipses and the
// implicit output.
Einsum parse_einsum(const Node& n, const std::vector<int64_t>& ranks) {
  if (!n.has_attr("equation")) n.fail("attribute 'equation' is required");
  std::string eq = n.get_string("equation", "");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parse_term(n, lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    n.fail("equation '" + eq + "' names " + std::to_string(terms.size()) + " operands but the node has " +
           std::to_string(ranks.size()) + " inputs");
  Einsum e;
  std::vector<int64_t> term_ellipsis(terms.size(), 0);
  for (size_t i = 0; i < terms.size(); ++i) {
    int64_t letters = std::count_if(terms[i].begin(), terms[i].end(), [](int l) { return l != kEllipsisMark; });
    bool has = letters != static_cast<int64_t>(terms[i].size());
    if ((!has && letters != ranks[i]) || (has && letters > ranks[i]))
      n.fail("einsum term " + std::to_string(i) + " of '" + eq + "' has " + std::to_string(letters) +
             " labels but input " + std::to_string(i) + " has rank " + std::to_string(ranks[i]));
    term_ellipsis[i] = has ? ranks[i] - letters : 0;
    e.ellipsis_rank = std::max(e.ellipsis_rank, term_ellipsis[i]);
  }
  auto expand = [&](const std::vector<int>& term, int64_t erank) {
    std::vector<int> out;
    for (int l : term) {
      if (l != kEllipsisMark) {
        out.push_back(l);
        continue;
      }
      for (int64_t k = 0; k < erank; ++k) out.push_back(static_cast<int>(kEllipsisBase + e.ellipsis_rank - erank + k));
    }
    return out;
  };
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    e.inputs.push_back(expand(terms[i], term_ellipsis[i]));
    for (int l : terms[i])
      if (l != kEllipsisMark) ++count[l];
  }
  if (arrow == std::string::npos) {
    for (int64_t k = 0; k < e.ellipsis_rank; ++k) e.output.push_back(static_cast<int>(kEllipsisBase + k));
    for (auto [l, c] : count)
      if (c == 1) e.output.push_back(l);
  } else {
    std::vector<int> out_term = parse_term(n, eq.substr(arrow + 2));
    std::set<int> seen;
    for (int l : out_term) {
      if (l == kEllipsisMark) continue;
      if (!count.count(l)) n.fail("output label '" + std::string(1, char(l)) + "' of '" + eq + "' is not in any input");
      if (!seen.insert(l).second) n.fail("output label '" + std::string(1, char(l)) + "' of '" + eq + "' is repeated");
    }
    e.output = expand(out_term, e.ellipsis_rank);
  }
  return e;
}

void infer_einsum(InferContext& ctx) {
  // Inputs of unknown rank (an If whose branches disagree, say) make the result unranked.
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (!ctx.input_type(i).is_tensor() || !ctx.input_type(i).has_rank()) {
      ctx.set_output_type(0, Type::tensor_unranked(input_dtype(ctx, 0)));
      return;
    }
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ranks.push_back(static_cast<int64_t>(ctx.ranked_input(i).rank()));
  Einsum e = parse_einsum(ctx.node(), ranks);
  std::map<int, Dim> size;
  std::vector<Dims> ellipsis_shapes;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const Dims& shape = ctx.input_type(i).shape();
    Dims ell;
    for (size_t d = 0; d < shape.size(); ++d) {
      int l = e.inputs[i][d];
      if (l >= kEllipsisBase) {
        ell.push_back(shape[d]);
        continue;
      }
      auto [it, fresh] = size.emplace(l, shape[d]);
      if (!fresh && !ctx.env().unify(it->second, shape[d], &ctx.node()))
        ctx.fail("expected equal sizes for einsum label '" + std::string(1, char(l)) + "', got " + it->second.str() +
                 " and " + shape[d].str());
    }
    ellipsis_shapes.push_back(ell);
  }
  Dims ell = broadcast_dims(ctx, ellipsis_shapes);
  Dims out;
  for (int l : e.output) out.push_back(l >= kEllipsisBase ? ell[l - kEllipsisBase] : size.at(l));
  ctx.set_output_type(0, Type::tensor(ctx.input_type(0).dtype(), ctx.env().canonical(out)));
}

Tensor einsum_kernel(const EvalContext& ctx) {
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ranks.push_back(static_cast<int64_t>(ctx.input(i).rank()));
  const Node& n = ctx.node();
  Einsum e = parse_einsum(n, ranks);
  // Every label's size; ellipsis dims broadcast, letters must agree.
  std::map<int, int64_t> size;
  for (size_t i = 0; i < e.inputs.size(); ++i)
    for (size_t d = 0; d < e.inputs[i].size(); ++d) {
      int l = e.inputs[i][d];
      int64_t s = ctx.input(i).shape()[d];
      auto [it, fresh] = size.emplace(l, s);
      if (fresh || it->second == s) continue;
      if (l >= kEllipsisBase && (s == 1 || it->second == 1)) {
        it->second = std::max(it->second, s);
        continue;
      }
      n.fail("einsum label sizes disagree: " + std::to_string(it->second) + " and " + std::to_string(s) +
             " (input " + std::to_string(i) + ", dim " + std::to_string(d) + ")");
    }
  // Loop order: output labels, then the summed ones.
  std::vector<int> loop = e.output;
  for (auto [l, s] : size)
    if (std::find(e.output.begin(), e.output.end(), l) == e.output.end()) loop.push_back(l);
  std::vector<int64_t> extent;
  for (int l : loop) extent.push_back(size.at(l));
  // Per operand, the element stride of each loop label (repeated labels add
  // up: that is a diagonal; a broadcast ellipsis dim of size 1 has stride 0).
  std::vector<std::vector<int64_t>> stride(e.inputs.size(), std::vector<int64_t>(loop.size(), 0));
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    std::vector<int64_t> st = row_major_strides(ctx.input(i).shape());
    for (size_t d = 0; d < e.inputs[i].size(); ++d) {
      if (ctx.input(i).shape()[d] == 1 && size.at(e.inputs[i][d]) != 1) continue;
      size_t pos = std::find(loop.begin(), loop.end(), e.inputs[i][d]) - loop.begin();
      stride[i][pos] += st[d];
    }
  }
  std::vector<int64_t> out_shape(extent.begin(), extent.begin() + e.output.size());
  Tensor out(ctx.input(0).dtype(), out_shape);
  int64_t out_numel = out.numel();
  int64_t inner = checked_numel(std::vector<int64_t>(extent.begin() + e.output.size(), extent.end()));
  bool exact_int = !is_float(out.dtype());
  std::vector<int64_t> coord(loop.size(), 0);
  for (int64_t o = 0; o < out_numel; ++o) {
    double facc = 0;
    int64_t iacc = 0;
    for (int64_t s = 0; s < inner; ++s) {
      // Decode the combined index (o, s) into per-label coordinates.
      int64_t flat = s;
      for (size_t k = loop.size(); k-- > e.output.size();) {
        coord[k] = flat % extent[k];
        flat /= extent[k];
      }
      flat = o;
      for (size_t k = e.output.size(); k-- > 0;) {
        coord[k] = flat % extent[k];
        flat /= extent[k];
      }
      double fp = 1;
      int64_t ip = 1;
      for (size_t i = 0; i < e.inputs.size(); ++i) {
        int64_t off = 0;
        for (size_t k = 0; k < loop.size(); ++k) off += coord[k] * stride[i][k];
        if (exact_int) ip *= ctx.input(i).get_i64(off);
        else fp *= ctx.input(i).get_f64(off);
      }
      facc += fp;
      iacc += ip;
    }
    if (exact_int) out.set_i64(o, iacc);
    else out.set_f64(o, facc);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Gradients (gradient.h)

// Writes each "..." of an Einsum's terms and output in letters the equation
// does not use: the output's covers the operands' broadcast dims, right-aligned
// as they are. An operand's dim of static size 1 under "..." that is broadcast
// against a larger one gets a letter of its own, which the einsums of the
// gradient then sum over (its size is 1) as they do over any label of one operand.
void spell_out_ellipses(GradContext& c, std::vector<std::string>& terms, std::string& out) {
  std::string unused;
  for (char l : std::string("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if (out.find(l) == std::string::npos &&
        std::none_of(terms.begin(), terms.end(), [l](const std::string& t) { return t.find(l) != std::string::npos; }))
      unused += l;
  auto take = [&] {
    if (unused.empty()) c.fail("tcc cannot spell out this Einsum's '...' in letters the equation leaves unused");
    char l = unused.back();
    unused.pop_back();
    return l;
  };
  // Where each term's "..." starts and how many dims it covers; the output's covers the most.
  std::vector<size_t> at(terms.size()), covered(terms.size(), 0);
  size_t longest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    at[i] = terms[i].find("...");
    if (at[i] == std::string::npos) continue;
    covered[i] = c.dims(c.in(i)).size() - (terms[i].size() - 3);
    longest = std::max(longest, covered[i]);
  }
  auto is_one = [&](size_t i, size_t k) {
    const Dim& d = c.dims(c.in(i))[at[i] + k];
    return d.is_static() && d.value() == 1;
  };
  // Whether dim j of the output's "..." is broadcast beyond 1 (a symbolic dim is taken as not 1).
  std::vector<bool> wide(longest, false);
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t k = 0; k < covered[i]; ++k)
      if (!is_one(i, k)) wide[longest - covered[i] + k] = true;
  std::string shared;
  for (size_t j = 0; j < longest; ++j) shared += take();
  for (size_t i = 0; i < terms.size(); ++i) {
    if (at[i] == std::string::npos) continue;
    std::string letters;
    for (size_t k = 0; k < covered[i]; ++k) {
      size_t j = longest - covered[i] + k;
      letters += wide[j] && is_one(i, k) ? take() : shared[j];
    }
    terms[i].replace(at[i], 3, letters);
  }
  if (size_t at = out.find("..."); at != std::string::npos) out.replace(at, 3, shared);
}

// d, the gradient of x's diagonal along `term`'s repeated labels (x read with
// each label once, at its first occurrence: "iij" reads x[i, i, j] as d[i, j]),
// put back on that diagonal: d with axes inserted at the repeated occurrences,
// where each repeated occurrence's index equals its first's, 0 elsewhere.
Value* onto_diagonal(GradContext& c, Value* d, const std::string& term, Value* x) {
  Emitter& e = c.e();
  int64_t rank = static_cast<int64_t>(term.size());
  Value* xs = e.shape_of(x);
  // 0, 1, ... along `axis` (of `rank`), as many as x's dim `first`.
  auto along = [&](int64_t axis, int64_t first) {
    Value* count = e.op("Gather", {xs, e.scalar(static_cast<double>(first), DType::I64)});
    Value* range = e.op("Range", {e.scalar(0, DType::I64), count, e.scalar(1, DType::I64)});
    std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
    shape[static_cast<size_t>(axis)] = -1;
    return e.op("Reshape", {range, e.ints(shape)});
  };
  std::vector<int64_t> repeated;
  Value* on = nullptr;
  for (int64_t a = 0; a < rank; ++a) {
    int64_t first = static_cast<int64_t>(term.find(term[static_cast<size_t>(a)]));
    if (first == a) continue;
    repeated.push_back(a);
    Value* same = e.op("Equal", {along(first, first), along(a, first)});
    on = on ? e.op("And", {on, same}) : same;
  }
  return e.op("Where", {on, e.unsqueeze(d, repeated), scalar(c, 0.0)});
}

// Einsum: operand i's gradient is the einsum of g with the other operands
// into operand i's labels ("ab,bc->ac": dA = "ac,bc->ab"). Labels only operand
// i has were summed away: the einsum leaves them out and g is broadcast back
// along them. "..." is first written out in letters (spell_out_ellipses). An
// operand with a label repeated reads its diagonal ("ii->i"): the gradient is
// that of the diagonal, each label once, put back on it (onto_diagonal).
void einsum_rule(GradContext& c) {
  std::string eq;
  for (char ch : c.node().get_string("equation", ""))
    if (ch != ' ') eq += ch;
  size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  bool ellipsis = lhs.find("...") != std::string::npos;
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {
    // Implicit output: "..." first, then the letters that appear once, sorted.
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char l : t)
        if (l != '.') ++count[l];
    if (ellipsis) out = "...";
    for (auto [l, n] : count)
      if (n == 1) out += l;
  }
  if (ellipsis) spell_out_ellipses(c, terms, out);
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!c.wants(i)) continue;
    std::string others = out, labels, kept;  // labels: operand i's, each once
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) others += terms[j];
    std::vector<int64_t> summed, firsts;  // firsts: where each label first occurs
    for (size_t a = 0; a < terms[i].size(); ++a) {
      char l = terms[i][a];
      if (labels.find(l) != std::string::npos) continue;
      if (others.find(l) == std::string::npos) summed.push_back(static_cast<int64_t>(labels.size()));
      else kept += l;
      labels += l;
      firsts.push_back(static_cast<int64_t>(a));
    }
    bool diagonal = labels.size() < terms[i].size();
    std::vector<Value*> ins = {c.dy()};
    std::string sub = out;
    for (size_t j = 0; j < terms.size(); ++j)
      if (j != i) {
        ins.push_back(c.in(j));
        sub += "," + terms[j];
      }
    Value* d = c.e().op("Einsum", ins, {{"equation", Attribute::of_string(sub + "->" + kept)}});
    if (!summed.empty()) {
      Value* shape = c.e().shape_of(c.in(i));
      if (diagonal) shape = c.e().op("Gather", {shape, c.e().ints(firsts)});
      d = c.e().op("Expand", {c.e().unsqueeze(d, summed), shape});
    }
    c.set(i, diagonal ? onto_diagonal(c, d, terms[i], c.in(i)) : d);
  }
}

// ---------------------------------------------------------------------------
// Decompositions (decomposition.h)

// An Einsum operand as its decomposition has it: a value with one label per
// dim, kGone where a dim of size 1 is left by a label summed away.
constexpr int kGone = -2;
struct Labelled {
  Value* v;
  std::vector<int> labels;
};

// Operand x (labelled `labels`) with each repeated label read once, on its
// diagonal ("ii": Where(i == i', x, 0) summed over i'), and the labels not in
// `keep` summed away; `tag` tells its pieces from the other operand's.
Labelled reduce_operand(Expansion& e, const std::string& tag, Value* x, const std::vector<int>& labels,
                        const std::set<int>& keep) {
  const Type& t = x->type();
  size_t rank = labels.size();
  // 0, 1, ... along `axis` (one tcc::Range per repeated label).
  std::map<size_t, Value*> ranges, indices;
  auto along = [&](size_t axis, size_t first) {
    std::string at = tag + "_" + std::to_string(axis);
    Value*& r = ranges[first];
    if (!r) r = e.range("Range" + at, 0, t.shape()[first]);
    Value*& v = indices[axis];
    Dims dims(rank, Dim(1));
    dims[axis] = t.shape()[axis];
    if (!v) v = e.reshape("Reshape" + at, r, dims);
    return v;
  };
  Value* on = nullptr;
  Dims on_dims(rank, Dim(1));
  std::vector<int64_t> summed;
  Labelled out{x, {}};
  for (size_t a = 0; a < rank; ++a) {
    size_t first = static_cast<size_t>(std::find(labels.begin(), labels.end(), labels[a]) - labels.begin());
    bool kept = first == a && keep.count(labels[a]) > 0;
    out.labels.push_back(kept ? labels[a] : kGone);
    if (!kept) summed.push_back(static_cast<int64_t>(a));
    if (first == a) continue;
    Dims pair(rank, Dim(1));
    pair[first] = pair[a] = on_dims[first] = on_dims[a] = t.shape()[a];
    std::string at = tag + "_" + std::to_string(a);
    Value* same =
        e.add("Equal" + at, "Equal", {along(first, first), along(a, first)}, Type::tensor(DType::Bool, pair));
    on = on ? e.add("And" + at, "And", {on, same}, Type::tensor(DType::Bool, on_dims)) : same;
  }
  if (on) out.v = e.add("Where" + tag, "Where", {on, x, e.scalar("zero", 0, t.dtype())}, t);
  if (!summed.empty()) out.v = e.reduce("ReduceSum" + tag, "ReduceSum", out.v, summed, Expansion::kept_type(t, summed));
  return out;
}

// Where each of `to`'s labels is in `from`: the perm of a Transpose from one to the other.
std::vector<int64_t> positions(const std::vector<int>& from, const std::vector<int>& to) {
  std::vector<int64_t> perm;
  for (int l : to) perm.push_back(std::find(from.begin(), from.end(), l) - from.begin());
  return perm;
}

// The labels of `x` but kGone, in order.
std::vector<int> present(const Labelled& x) {
  std::vector<int> have;
  for (int l : x.labels)
    if (l != kGone) have.push_back(l);
  return have;
}

// x with its labels in the order they have in `order` (a superset), viewed as `dims`.
Value* arranged(Expansion& e, const std::string& tag, const Labelled& x, const std::vector<int>& order,
                const Dims& dims) {
  std::vector<int> have = present(x), want;
  for (int l : order)
    if (std::find(have.begin(), have.end(), l) != have.end()) want.push_back(l);
  Value* v = x.v;
  const Dims& shape = v->type().shape();
  if (have != want) {
    Dims squeezed, moved;
    for (size_t a = 0; a < x.labels.size(); ++a)
      if (x.labels[a] != kGone) squeezed.push_back(shape[a]);
    std::vector<int64_t> perm = positions(have, want);
    for (int64_t p : perm) moved.push_back(squeezed[static_cast<size_t>(p)]);
    if (squeezed != shape) v = e.reshape("Squeeze" + tag, v, squeezed);
    v = e.add("Transpose" + tag, "Transpose", {v}, Type::tensor(v->type().dtype(), moved),
              {{"perm", Attribute::of_ints(perm)}});
  }
  return v->type().shape() == dims ? v : e.reshape("Reshape" + tag, v, dims);
}

// Einsum -> the movements, reductions and product it spells. Each operand
// first reads its repeated labels on their diagonal and sums away the labels
// nothing else has (reduce_operand). One operand is then viewed and
// transposed as the output. Two are a MatMul of [batch..., M, K] by
// [batch..., K, N] (M and N: the output's labels only the first or only the
// second has; K: the labels both have and the output lacks), viewed and
// transposed as the output; or, with no K, a broadcast Mul. Needs one or two
// operands of known shapes, each label one size wherever it occurs ("..."
// broadcast against 1 is left alone) and, for a MatMul, floats.
bool decompose_einsum(Expansion& e) {
  const Node& n = e.node();
  size_t count = n.num_inputs();
  const Type& y = n.output(0)->type();
  if (count < 1 || count > 2 || !y.is_tensor() || !y.has_rank()) return false;
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < count; ++i) {
    const Type& t = n.input(i)->type();
    if (!t.is_tensor() || !t.has_rank() || !t.fully_shaped()) return false;
    ranks.push_back(static_cast<int64_t>(t.rank()));
  }
  Einsum eq = parse_einsum(n, ranks);
  std::map<int, Dim> size;
  for (size_t i = 0; i < count; ++i)
    for (size_t d = 0; d < eq.inputs[i].size(); ++d) {
      auto [it, fresh] = size.emplace(eq.inputs[i][d], n.input(i)->type().shape()[d]);
      if (!fresh && it->second != n.input(i)->type().shape()[d]) return false;
    }
  const std::vector<int>& out = eq.output;
  auto has = [](const std::vector<int>& labels, int l) {
    return std::find(labels.begin(), labels.end(), l) != labels.end();
  };
  std::vector<int> batch, m, k, nn;
  if (count == 2) {
    for (int l : out) {
      if (has(eq.inputs[0], l) && has(eq.inputs[1], l)) batch.push_back(l);
      else (has(eq.inputs[0], l) ? m : nn).push_back(l);
    }
    for (int l : eq.inputs[0])
      if (has(eq.inputs[1], l) && !has(out, l) && !has(k, l)) k.push_back(l);
    if (!k.empty() && !is_float(y.dtype())) return false;
  }
  std::vector<Labelled> terms;
  for (size_t i = 0; i < count; ++i) {
    std::set<int> keep(out.begin(), out.end());
    if (count == 2) keep.insert(eq.inputs[1 - i].begin(), eq.inputs[1 - i].end());
    terms.push_back(reduce_operand(e, "_" + std::to_string(i), n.input(i), eq.inputs[i], keep));
  }
  auto dims_of_labels = [&](const std::vector<int>& labels) {
    Dims dims;
    for (int l : labels) dims.push_back(size.at(l));
    return dims;
  };
  if (count == 1) {
    const Labelled& x = terms[0];
    if (present(x) == out) {
      if (x.v == n.input(0)) e.finish("Identity", "Identity", {x.v});
      else e.finish_reshape("Reshape", x.v);
    } else {
      e.finish("Transpose", "Transpose", {arranged(e, "_0", x, present(x), dims_of_labels(present(x)))},
               {{"perm", Attribute::of_ints(positions(present(x), out))}});
    }
    return true;
  }
  if (k.empty()) {
    std::vector<Value*> factors;
    for (size_t i = 0; i < 2; ++i) {
      Dims dims;
      for (int l : out) dims.push_back(has(present(terms[i]), l) ? size.at(l) : Dim(1));
      factors.push_back(arranged(e, "_" + std::to_string(i), terms[i], out, dims));
    }
    e.finish("Mul", "Mul", factors);
    return true;
  }
  Dims batch_dims = dims_of_labels(batch);
  Dim rows = dims_product(dims_of_labels(m)), inner = dims_product(dims_of_labels(k)),
      cols = dims_product(dims_of_labels(nn));
  auto joined = [](std::vector<int> a, const std::vector<int>& b, const std::vector<int>& c) {
    a.insert(a.end(), b.begin(), b.end());
    a.insert(a.end(), c.begin(), c.end());
    return a;
  };
  auto matrices = [&](const Dim& r, const Dim& c) {
    Dims dims = batch_dims;
    dims.push_back(r);
    dims.push_back(c);
    return dims;
  };
  Value* a = arranged(e, "_0", terms[0], joined(batch, m, k), matrices(rows, inner));
  Value* b = arranged(e, "_1", terms[1], joined(batch, k, nn), matrices(inner, cols));
  std::vector<int> product = joined(batch, m, nn);
  Dims grouped = matrices(rows, cols), split = dims_of_labels(product);
  if (product == out && grouped == split) {
    e.finish("MatMul", "MatMul", {a, b});
    return true;
  }
  Value* p = e.add("MatMul", "MatMul", {a, b}, Type::tensor(y.dtype(), grouped));
  if (product == out) {
    e.finish_reshape("Reshape", p);
    return true;
  }
  if (grouped != split) p = e.reshape("Reshape", p, split);
  e.finish("Transpose", "Transpose", {p}, {{"perm", Attribute::of_ints(positions(product, out))}});
  return true;
}

}  // namespace

void register_einsum_ops(OpRegistry& r) {
  r.add(OpDef{"", "Einsum", 12, kContraction, infer_einsum,
              [](EvalContext& ctx) { return std::vector<Tensor>{einsum_kernel(ctx)}; }, kNumeric})
      .gradient(einsum_rule)
      .decomposition(decompose_einsum);
}

}  // namespace tcc
