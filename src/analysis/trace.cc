#include "src/analysis/trace.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "src/ops/op_helpers.h"

namespace tcc {

namespace {

// A call's grad mode, beside its inputs: `"$grad_mode": false` (default true).
constexpr std::string_view kGradModeKey = "$grad_mode";

// A JSON reader for the one shape of object a trace line has. Hand-written
// because a general JSON DOM costs more per line than the whole simulation;
// strings without escapes come back as views into the line, so a common line
// allocates nothing.
class LineParser {
 public:
  LineParser(std::string_view text, const std::string& file, size_t line) : s_(text), file_(file), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(file_ + ":" + std::to_string(line_) + ":" + std::to_string(pos_ + 1) + ": " + what);
  }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat(char c) {
    ws();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  // After a failed eat(c): the error, with `context` saying where c belongs.
  [[noreturn]] void missing(char c, std::string_view context) const {
    fail(std::string("expected '") + c + "' " + std::string(context) + ", got " + got());
  }
  void expect(char c, std::string_view context) {
    if (!eat(c)) missing(c, context);
  }
  std::string got() const {
    if (pos_ >= s_.size()) return "end of line";
    return "'" + std::string(s_.substr(pos_, std::min<size_t>(12, s_.size() - pos_))) + "'";
  }
  bool at_end() {
    ws();
    return pos_ >= s_.size();
  }

  // A string's text: a view into the line, or into `scratch` when it has escapes.
  std::string_view string(std::string& scratch) {
    ws();
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string, got " + got());
    size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\') ++pos_;
    if (pos_ < s_.size() && s_[pos_] == '"') return s_.substr(start, pos_++ - start);
    scratch.assign(s_.substr(start, pos_ - start));
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') {
        scratch += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': scratch += e; break;
        case 'n': scratch += '\n'; break;
        case 't': scratch += '\t'; break;
        default: fail(std::string("unsupported escape '\\") + e + "' in a string");
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return scratch;
  }

  // A number; `is_int` tells whether it was written without fraction or exponent.
  double number(bool& is_int, int64_t& as_int) {
    ws();
    size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+')) ++pos_;
    is_int = true;
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c >= '0' && c <= '9') {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && pos_ > start &&
                                                       (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))) {
        is_int = false;
        ++pos_;
      } else {
        break;
      }
    }
    const char* b = s_.data() + start + (start < s_.size() && s_[start] == '+' ? 1 : 0);
    const char* e = s_.data() + pos_;
    if (b == e) fail("expected a number, got " + got());
    double d = 0;
    if (is_int) {
      auto r = std::from_chars(b, e, as_int);
      if (r.ec != std::errc() || r.ptr != e) fail("bad integer '" + std::string(b, e) + "'");
      d = static_cast<double>(as_int);
    } else {
      auto r = std::from_chars(b, e, d);
      if (r.ec != std::errc() || r.ptr != e) fail("bad number '" + std::string(b, e) + "'");
    }
    return d;
  }

  bool literal(std::string_view word) {
    ws();
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

 private:
  std::string_view s_;
  const std::string& file_;
  size_t line_;
  size_t pos_ = 0;
};

// Open-addressing set of a trace's distinct rows, keyed by a hash of the
// row's fields, so that equal calls share one row however they are written.
class RowSet {
 public:
  // The row equal to the candidate (hash h, compared by `same(row)`), or -1.
  template <class Same>
  int64_t find(uint64_t h, Same&& same) const {
    if (slots_.empty()) return -1;
    for (size_t i = h & mask(); slots_[i]; i = (i + 1) & mask()) {
      uint32_t row = slots_[i] - 1;
      if (hashes_[row] == h && same(row)) return row;
    }
    return -1;
  }
  void insert(uint64_t h) {
    hashes_.push_back(h);
    if (hashes_.size() * 2 > slots_.size()) {
      slots_.assign(std::max<size_t>(64, slots_.size() * 2), 0);
      for (size_t r = 0; r < hashes_.size(); ++r) place(hashes_[r], static_cast<uint32_t>(r));
    } else {
      place(h, static_cast<uint32_t>(hashes_.size() - 1));
    }
  }

 private:
  size_t mask() const { return slots_.size() - 1; }
  void place(uint64_t h, uint32_t row) {
    size_t i = h & mask();
    while (slots_[i]) i = (i + 1) & mask();
    slots_[i] = row + 1;
  }
  std::vector<uint32_t> slots_;  // row + 1; 0 is empty
  std::vector<uint64_t> hashes_;  // per row
};

// Parses a trace line by line into a Trace: each line into a scratch row,
// which is then either found among the distinct rows or appended to them.
class TraceBuilder {
 public:
  TraceBuilder(const std::string& file, const ModelSignature& sig) : sig_(sig) {
    trace_.file = file;
    trace_.num_inputs = sig.inputs.size();
    trace_.num_classes = static_cast<size_t>(sig.num_classes());
    kinds_.resize(trace_.num_inputs);
    dtypes_.resize(trace_.num_inputs);
    layouts_.resize(trace_.num_inputs);
    floats_.resize(trace_.num_inputs);
    values_.resize(trace_.num_classes);
    for (size_t i = 0; i < sig.inputs.size(); ++i) input_index_.emplace(sig.inputs[i].name, static_cast<int>(i));
  }

  void line(std::string_view text) {
    ++line_;
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    std::fill(kinds_.begin(), kinds_.end(), EntryKind::Absent);
    std::fill(dtypes_.begin(), dtypes_.end(), DType::Undefined);
    std::fill(layouts_.begin(), layouts_.end(), 0u);
    std::fill(floats_.begin(), floats_.end(), 0.0);
    std::fill(values_.begin(), values_.end(), -1);
    grad_mode_ = true;
    LineParser p(text, trace_.file, line_);
    parse(p);
    trace_.calls.push_back(intern());
  }

  Trace finish() {
    // A rank-0 input keeps one kind for the whole trace, as a Python program
    // passes either a float or a tensor there.
    const size_t n = trace_.num_inputs;
    for (size_t i = 0; i < n && !trace_.calls.empty(); ++i) {
      auto is_tensor = [&](uint32_t row) { return trace_.kinds[row * n + i] == EntryKind::Tensor; };
      bool first = is_tensor(trace_.calls[0]);
      bool consistent = true;
      for (uint32_t r = 0; r < trace_.distinct_count; ++r) consistent &= is_tensor(r) == first;
      for (size_t c = 0; !consistent && c < trace_.calls.size(); ++c)
        if (is_tensor(trace_.calls[c]) != first)
          throw InputError(trace_.file + ": call " + std::to_string(c) + ": input '" + sig_.inputs[i].name +
                           "' is a " + (first ? "scalar" : "tensor") + " here but a " +
                           (first ? "tensor" : "scalar") + " on the first call");
    }
    return std::move(trace_);
  }

 private:
  [[noreturn]] void fail(const std::string& input, const std::string& expected, const std::string& actual) const {
    throw InputError(where() + ": input '" + input + "': expected " + expected + ", actual " + actual);
  }
  std::string where() const { return trace_.file + ":" + std::to_string(line_); }

  void parse(LineParser& p) {
    p.expect('{', "at the start of a call");
    if (!p.eat('}')) {
      int previous = -1;
      do {
        std::string_view name = p.string(name_scratch_);
        p.expect(':', "after an input name");
        if (name == kGradModeKey) {
          grad_mode_ = p.literal("true");
          if (!grad_mode_ && !p.literal("false")) p.fail("\"$grad_mode\" must be true or false");
          continue;
        }
        int idx = find_input(name, previous);
        if (idx < 0) {
          std::string known;
          for (const auto& in : sig_.inputs) known += (known.empty() ? "" : ", ") + in.name;
          throw InputError(where() + ": unknown input '" + std::string(name) + "' (the model's inputs: " + known +
                           ")");
        }
        if (kinds_[idx] != EntryKind::Absent)
          throw InputError(where() + ": input '" + std::string(name) + "' given twice");
        entry(p, idx);
        previous = idx;
      } while (p.eat(','));
      p.expect('}', "after the last input");
    }
    if (!p.at_end()) p.fail("unexpected text after the call: " + p.got());
    for (size_t i = 0; i < sig_.inputs.size(); ++i)
      if (kinds_[i] == EntryKind::Absent)
        throw InputError(where() + ": input '" + sig_.inputs[i].name + "' is missing");
  }

  // Lines usually list the inputs in the model's order: try the one after the
  // previous entry's before hashing the name.
  int find_input(std::string_view name, int previous) const {
    size_t next = static_cast<size_t>(previous + 1);
    if (next < sig_.inputs.size() && sig_.inputs[next].name == name) return static_cast<int>(next);
    auto it = input_index_.find(name);
    return it == input_index_.end() ? -1 : it->second;
  }

  void entry(LineParser& p, int idx) {
    const InputSignature& in = sig_.inputs[idx];
    if (!p.eat('{')) p.missing('{', "to open the entry of input '" + in.name + "'");
    bool has_shape = false, has_layout = false;
    std::optional<std::string_view> dtype;
    bool has_scalar = false;
    TensorLayout layout;
    do {
      std::string_view key = p.string(key_scratch_);
      if (!p.eat(':')) p.missing(':', "after \"" + std::string(key) + "\"");
      if (key == "shape") {
        has_shape = true;
        shape_.clear();
        p.expect('[', "to open \"shape\"");
        if (!p.eat(']')) {
          do {
            bool is_int;
            int64_t v = 0;
            p.number(is_int, v);
            if (!is_int || v < 0) p.fail("a size in \"shape\" must be a non-negative integer");
            shape_.push_back(v);
          } while (p.eat(','));
          p.expect(']', "to close \"shape\"");
        }
      } else if (key == "dtype") {
        dtype = p.string(dtype_scratch_);
      } else if (key == "scalar") {
        has_scalar = true;
        scalar(p, idx);
      } else if (key == "requires_grad") {
        has_layout = true;
        layout.requires_grad = p.literal("true");
        if (!layout.requires_grad && !p.literal("false")) p.fail("\"requires_grad\" must be true or false");
      } else if (key == "device") {
        has_layout = true;
        layout.device = std::string(p.string(key_scratch_));
      } else if (key == "stride") {
        has_layout = true;
        p.expect('[', "to open \"stride\"");
        if (!p.eat(']')) {
          do {
            bool is_int;
            int64_t v = 0;
            p.number(is_int, v);
            if (!is_int || v < 0) p.fail("a stride must be a non-negative integer");
            layout.strides.push_back(v);
          } while (p.eat(','));
          p.expect(']', "to close \"stride\"");
        }
      } else {
        p.fail("unknown key \"" + std::string(key) +
               "\" (expected \"shape\", \"dtype\", \"requires_grad\", \"device\", \"stride\" or \"scalar\")");
      }
    } while (p.eat(','));
    if (!p.eat('}')) p.missing('}', "to close the entry of input '" + in.name + "'");
    if (has_scalar) {
      if (has_shape || dtype || has_layout)
        fail(in.name, "either {\"scalar\": v} or a tensor's {\"shape\", \"dtype\", ...}", "both");
      return;
    }
    if (!has_shape || !dtype) fail(in.name, "{\"shape\": [...], \"dtype\": ...}", has_shape ? "no dtype" : "no shape");
    tensor(idx, *dtype);
    if (!layout.strides.empty() && layout.strides.size() != shape_.size())
      fail(in.name, "one stride per dim (" + std::to_string(shape_.size()) + ")",
           std::to_string(layout.strides.size()) + " strides");
    if (has_layout) layouts_[idx] = intern_layout(std::move(layout));
  }

  void scalar(LineParser& p, int idx) {
    const InputSignature& in = sig_.inputs[idx];
    if (!in.scalar_slot)
      fail(in.name, "a tensor of rank " + std::to_string(in.fixed.size()), "a scalar");
    bool is_true = p.literal("true");
    if (is_true || p.literal("false")) {
      kinds_[idx] = EntryKind::BoolScalar;
      floats_[idx] = is_true ? 1.0 : 0.0;
      return;
    }
    bool is_int;
    int64_t iv = 0;
    double v = p.number(is_int, iv);
    bool int_input = is_integer(in.dtype);
    if (int_input && !is_int) fail(in.name, "an int scalar (" + torch_dtype_name(in.dtype) + ")", format_float(v));
    if (int_input) {
      kinds_[idx] = EntryKind::IntScalar;
      values_[in.scalar_class] = iv;
    } else {
      kinds_[idx] = EntryKind::FloatScalar;
      floats_[idx] = v;
    }
  }

  void tensor(int idx, std::string_view dtype_text) {
    const InputSignature& in = sig_.inputs[idx];
    auto dt = parse_torch_dtype(dtype_text);
    if (!dt) throw InputError(where() + ": input '" + in.name + "': unknown dtype '" + std::string(dtype_text) + "'");
    // A float input may arrive in another float dtype (torch retraces; the guards see the change):
    // the graph's breaks do not depend on which. Anything else must be the model's dtype.
    if (in.dtype != DType::Undefined && *dt != in.dtype && !(is_float(in.dtype) && is_float(*dt)))
      fail(in.name, "dtype " + torch_dtype_name(in.dtype) + " (or another float dtype)", torch_dtype_name(*dt));
    if (shape_.size() != in.fixed.size())
      fail(in.name, "rank " + std::to_string(in.fixed.size()), "rank " + std::to_string(shape_.size()) + " " +
                                                                     shape_text(shape_));
    kinds_[idx] = EntryKind::Tensor;
    dtypes_[idx] = *dt;
    for (size_t d = 0; d < shape_.size(); ++d) {
      if (in.fixed[d] && *in.fixed[d] != shape_[d])
        fail(in.name, "size " + std::to_string(*in.fixed[d]) + " at dim " + std::to_string(d) + " (fixed by the model)",
             std::to_string(shape_[d]));
      int c = in.dim_class[d];
      if (c < 0) continue;
      int64_t& slot = values_[c];
      if (slot >= 0 && slot != shape_[d]) {
        auto [oi, od] = first_source(c);
        fail(in.name, "size " + std::to_string(slot) + " at dim " + std::to_string(d) + " (the model names it '" +
                          sig_.class_symbol[c] + "', like " + sig_.source_str(oi, od) + ")",
             std::to_string(shape_[d]));
      }
      slot = shape_[d];
    }
  }

  uint32_t intern_layout(TensorLayout layout) {
    std::vector<TensorLayout>& table = trace_.layout_table;
    auto it = std::find(table.begin(), table.end(), layout);
    if (it != table.end()) return static_cast<uint32_t>(it - table.begin());
    table.push_back(std::move(layout));
    return static_cast<uint32_t>(table.size() - 1);
  }

  std::pair<int, int> first_source(int c) const {
    for (auto [i, d] : sig_.class_sources[c])
      if (kinds_[i] != EntryKind::Absent) return {i, d};
    return sig_.class_sources[c].front();
  }

  static std::string shape_text(const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  }

  // Facts are checked once per distinct call: a call that fails one is never stored.
  void check_facts() const {
    if (sig_.facts.empty()) return;
    std::map<std::string, int64_t> env = sig_.symbol_values(values_.data());
    for (const auto& f : sig_.facts) {
      if (f.kind != ShapeFact::Kind::Divisible) continue;
      if (std::optional<int64_t> v = f.broken_at(env))
        throw InputError(where() + ": " + f.node + " needs (" + f.expr.str() + ") % " + std::to_string(f.value) +
                         " == 0, actual " + f.expr.str() + " = " + std::to_string(*v));
    }
  }

  // The row of the scratch call, appended when it is new. Floats compare
  // bitwise, so the row set never merges calls the guards could tell apart.
  uint32_t intern() {
    uint64_t h = 0x243F6A8885A308D3ull;
    auto mix = [&h](uint64_t x) {
      h = (h ^ x) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 29;
    };
    for (size_t i = 0; i < kinds_.size(); ++i) {
      mix(static_cast<uint64_t>(kinds_[i]) | static_cast<uint64_t>(static_cast<uint32_t>(dtypes_[i])) << 8 |
          static_cast<uint64_t>(layouts_[i]) << 32);
      mix(std::bit_cast<uint64_t>(floats_[i]));
    }
    for (int64_t v : values_) mix(static_cast<uint64_t>(v));
    mix(grad_mode_);
    const size_t n = trace_.num_inputs, k = trace_.num_classes;
    int64_t found = rows_.find(h, [&](uint32_t row) {
      return std::equal(kinds_.begin(), kinds_.end(), trace_.kinds.begin() + row * n) &&
             std::equal(dtypes_.begin(), dtypes_.end(), trace_.dtypes.begin() + row * n) &&
             std::equal(layouts_.begin(), layouts_.end(), trace_.layouts.begin() + row * n) &&
             (n == 0 || std::memcmp(floats_.data(), trace_.floats.data() + row * n, n * sizeof(double)) == 0) &&
             std::equal(values_.begin(), values_.end(), trace_.class_values.begin() + row * k) &&
             (trace_.grad_modes[row] != 0) == grad_mode_;
    });
    if (found >= 0) return static_cast<uint32_t>(found);
    check_facts();
    trace_.kinds.insert(trace_.kinds.end(), kinds_.begin(), kinds_.end());
    trace_.dtypes.insert(trace_.dtypes.end(), dtypes_.begin(), dtypes_.end());
    trace_.layouts.insert(trace_.layouts.end(), layouts_.begin(), layouts_.end());
    trace_.floats.insert(trace_.floats.end(), floats_.begin(), floats_.end());
    trace_.class_values.insert(trace_.class_values.end(), values_.begin(), values_.end());
    trace_.grad_modes.push_back(grad_mode_);
    rows_.insert(h);
    return static_cast<uint32_t>(trace_.distinct_count++);
  }

  const ModelSignature& sig_;
  Trace trace_;
  size_t line_ = 0;
  std::unordered_map<std::string_view, int> input_index_;
  RowSet rows_;
  // The line being parsed: its row and the strings that needed unescaping.
  std::vector<EntryKind> kinds_;
  std::vector<DType> dtypes_;
  std::vector<uint32_t> layouts_;
  bool grad_mode_ = true;
  std::vector<double> floats_;
  std::vector<int64_t> values_;
  std::vector<int64_t> shape_;
  std::string name_scratch_, key_scratch_, dtype_scratch_;
};

// Divisibility a Reshape with an inferred (-1) dim needs from its input's size.
void reshape_facts(const Graph& g, const ShapeInfo& info, std::vector<ShapeFact>& out) {
  for (const auto& n : g.nodes()) {
    if (n->op_type() != "Reshape" || !n->has_input(1)) continue;
    const Type& t = n->input(0)->type();
    if (!t.is_tensor() || !t.has_rank() || !t.fully_shaped() || t.fully_static()) continue;
    std::vector<int64_t> target;
    auto c = info.consts.find(n->input(1));
    if (c != info.consts.end()) {
      target = c->second.to_i64_vector();
    } else if (auto v = info.values.find(n->input(1)); v != info.values.end()) {
      for (const Dim& d : v->second) target.push_back(d.is_static() ? d.value() : 1);
    } else {
      continue;
    }
    int64_t known = 1;
    bool inferred = false;
    for (int64_t d : target) {
      if (d == -1) inferred = true;
      else if (d == 0) known = 0;
      else known *= d;
    }
    if (!inferred || known <= 1) continue;
    SymExpr numel = dims_product(t.shape()).expr();
    if (numel.exact_div(SymExpr::constant(known))) continue;
    out.push_back({ShapeFact::Kind::Divisible, numel, known, "Reshape '" + n->name() + "'"});
  }
}

// Whether e >= 0 wherever the symbols' own guards hold: each symbol is at
// least `least` (`2 <= sN` where 0 and 1 are specialized).
bool holds_at_guarded_sizes(const SymExpr& e, int64_t least) {
  std::map<std::string, SymExpr> at_least;
  for (const std::string& s : e.symbols()) at_least[s] = SymExpr::symbol(s) + SymExpr::constant(least);
  return e.substitute(at_least).provably_nonnegative();
}

// The bounds of a Slice that are plain indices (not the sentinels) on a
// symbolic dim: shape inference and the kernels that read the slice take each
// to lie within the dim, a start s >= 0 as dim >= s (dim > s stepping
// backwards), an end e >= 0 as dim >= e, a negative bound b as dim >= -b. A
// bound computed from the shapes (seq // 2, stepping forwards) is taken to lie
// in [0, dim] unless it is shown to lie at or past the end, where it clamps.
// Facts that hold wherever the symbols' own guards do are left out.
void slice_facts(const Graph& g, const ShapeInfo& info, int64_t least, std::vector<ShapeFact>& out) {
  for (const auto& n : g.nodes()) {
    if (n->op_type() != "Slice" || !n->domain().empty()) continue;
    const Type& t = n->input(0)->type();
    if (!t.is_tensor() || !t.has_rank()) continue;
    const std::string who = "Slice '" + n->name() + "'";
    // Input i's contents: constants, or shape values (symbolic where computed from the shapes).
    auto contents = [&](size_t i) -> std::optional<Dims> {
      if (!n->has_input(i)) return Dims{};
      if (auto c = info.consts.find(n->input(i)); c != info.consts.end()) {
        Dims d;
        for (int64_t v : c->second.to_i64_vector()) d.push_back(Dim(v));
        return d;
      }
      if (auto v = info.values.find(n->input(i)); v != info.values.end()) return v->second;
      return std::nullopt;
    };
    auto ints = [](const Dims& d) -> std::optional<std::vector<int64_t>> {
      std::vector<int64_t> v;
      for (const Dim& x : d) {
        if (!x.is_static()) return std::nullopt;
        v.push_back(x.value());
      }
      return v;
    };
    std::optional<Dims> starts, ends;
    std::optional<std::vector<int64_t>> axes, steps;
    if (n->opset() < 10) {
      starts = Dims{}, ends = Dims{};
      for (int64_t v : n->get_ints("starts", {})) starts->push_back(Dim(v));
      for (int64_t v : n->get_ints("ends", {})) ends->push_back(Dim(v));
      axes = n->get_ints("axes", {});
      steps = std::vector<int64_t>{};
    } else {
      starts = contents(1), ends = contents(2);
      if (auto a = contents(3)) axes = ints(*a);
      if (auto k = contents(4)) steps = ints(*k);
    }
    if (!starts || !ends || !axes || !steps || starts->size() != ends->size()) continue;
    int64_t rank = t.rank();
    for (size_t i = 0; i < starts->size(); ++i) {
      int64_t axis = i < axes->size() ? (*axes)[i] : static_cast<int64_t>(i);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank || !t.shape()[axis].is_symbolic()) continue;
      const SymExpr& dim = t.shape()[axis].expr();
      bool backwards = i < steps->size() && (*steps)[i] < 0;
      int64_t need = 0;
      for (bool is_start : {true, false}) {
        const Dim& b = is_start ? (*starts)[i] : (*ends)[i];
        if (b.is_unknown()) continue;
        if (!b.is_static()) {
          if (backwards || (b.expr() - dim).provably_nonnegative()) continue;
          if (!holds_at_guarded_sizes(b.expr(), least)) out.push_back({ShapeFact::Kind::AtLeast, b.expr(), 0, who});
          if (!holds_at_guarded_sizes(dim - b.expr(), least))
            out.push_back({ShapeFact::Kind::AtLeast, dim - b.expr(), 0, who});
          continue;
        }
        int64_t v = b.value();
        if (v >= kSliceSentinel || v <= -kSliceSentinel) continue;
        need = std::max(need, v < 0 ? -v : v + (backwards && is_start ? 1 : 0));
      }
      if (!holds_at_guarded_sizes(dim - SymExpr::constant(need), least))
        out.push_back({ShapeFact::Kind::AtLeast, dim, need, who});
    }
  }
}

// A Squeeze without axes drops the dims of size 1; shape inference keeps
// each symbolic dim, taking it to be at least 2.
void squeeze_facts(const Graph& g, int64_t least, std::vector<ShapeFact>& out) {
  for (const auto& n : g.nodes()) {
    if (n->op_type() != "Squeeze" || !n->domain().empty()) continue;
    if (n->opset() < 13 ? n->has_attr("axes") : n->has_input(1)) continue;
    const Type& t = n->input(0)->type();
    if (!t.is_tensor() || !t.has_rank()) continue;
    for (const Dim& d : t.shape())
      if (d.is_symbolic() && !holds_at_guarded_sizes(d.expr() - SymExpr::constant(2), least))
        out.push_back({ShapeFact::Kind::AtLeast, d.expr(), 2, "Squeeze '" + n->name() + "'"});
  }
}

}  // namespace

std::optional<int64_t> ShapeFact::broken_at(const std::map<std::string, int64_t>& symbols) const {
  std::optional<int64_t> v = expr.evaluate(symbols);
  if (!v) return std::nullopt;
  bool holds = kind == Kind::Divisible ? *v % value == 0 : *v >= value;
  return holds ? std::nullopt : v;
}

std::map<std::string, int64_t> ModelSignature::symbol_values(const int64_t* class_values) const {
  std::map<std::string, int64_t> out;
  for (int c = 0; c < num_classes(); ++c) out[class_symbol[c]] = class_values[c];
  return out;
}

int ModelSignature::find_input(std::string_view name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string size_source(const std::string& name, int dim) {
  return dim < 0 ? name : name + ".size()[" + std::to_string(dim) + "]";
}

std::string ModelSignature::source_str(int input, int dim) const { return size_source(inputs[input].name, dim); }

ModelSignature build_signature(const Graph& g, const ShapeInfo& info, int64_t least_size) {
  ModelSignature sig;
  sig.least_size = least_size;
  std::map<std::string, int> class_of_symbol;
  auto class_for = [&](const std::string& symbol) {
    auto [it, fresh] = class_of_symbol.emplace(symbol, sig.num_classes());
    if (fresh) {
      sig.class_symbol.push_back(symbol);
      sig.class_sources.emplace_back();
    }
    return it->second;
  };
  for (const Value* v : g.inputs()) {
    if (v->is_initializer()) continue;
    const Type& t = v->type();
    if (!t.is_tensor() || !t.has_rank())
      throw InputError(g.file() + ": input '" + v->name() + "' has type " + t.str() +
                       "; tcc explain needs a tensor type of known rank for every model input");
    InputSignature in;
    in.name = v->name();
    in.dtype = t.dtype();
    int idx = static_cast<int>(sig.inputs.size());
    in.scalar_slot = t.rank() == 0;
    for (size_t d = 0; d < t.rank(); ++d) {
      const Dim& dim = t.shape()[d];
      if (dim.is_static()) {
        in.fixed.push_back(dim.value());
        in.dim_class.push_back(-1);
        continue;
      }
      in.fixed.push_back(std::nullopt);
      // Dims the model names alike are one class; a compound expression
      // (seq*2) is tracked as its own size.
      std::string symbol = dim.expr().str();
      int c = class_for(symbol);
      sig.class_sources[c].push_back({idx, static_cast<int>(d)});
      in.dim_class.push_back(c);
    }
    if (in.scalar_slot && is_integer(t.dtype())) {
      in.scalar_class = class_for(in.name);
      sig.class_sources[in.scalar_class].push_back({idx, -1});
    }
    sig.inputs.push_back(std::move(in));
  }
  reshape_facts(g, info, sig.facts);
  slice_facts(g, info, least_size, sig.facts);
  squeeze_facts(g, least_size, sig.facts);
  return sig;
}

void read_size_ranges(ModelSignature& sig, const std::map<std::string, std::string>& metadata,
                      const std::string& file) {
  constexpr std::string_view kPrefix = "pt2.range.";
  for (int c = 0; c < sig.num_classes(); ++c) {
    auto it = metadata.find(std::string(kPrefix) + sig.class_symbol[c]);
    if (it == metadata.end()) continue;
    const std::string& text = it->second;
    auto fail = [&]() {
      throw InputError(file + ": the range of symbol '" + sig.class_symbol[c] + "' is '" + text +
                       "'; expected [MIN, MAX] with MAX an integer or inf");
    };
    size_t comma = text.find(", ");
    if (text.size() < 6 || text.front() != '[' || text.back() != ']' || comma == std::string::npos) fail();
    std::string lo = text.substr(1, comma - 1), hi = text.substr(comma + 2, text.size() - comma - 3);
    SizeRange r;
    auto integer = [&](const std::string& s) {
      size_t used = 0;
      int64_t v = 0;
      try {
        v = std::stoll(s, &used);
      } catch (const std::exception&) {
        fail();
      }
      if (used != s.size() || v < 0) fail();
      return v;
    };
    r.min = integer(lo);
    if (hi != "inf") r.max = integer(hi);
    if (r.max && *r.max < r.min) fail();
    sig.class_ranges[c] = r;
  }
}

Trace parse_trace(std::string_view text, const std::string& file, const ModelSignature& sig) {
  TraceBuilder builder(file, sig);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    builder.line(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return builder.finish();
}

Trace read_trace(const std::string& path, const ModelSignature& sig) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw InputError(path + ": cannot open trace file");
  TraceBuilder builder(path, sig);
  // Read in blocks, so a trace of any length takes one block of memory, not its size.
  std::vector<char> buf(size_t{1} << 20);
  size_t held = 0;  // bytes of an unfinished line at the front of buf
  while (true) {
    if (held == buf.size()) buf.resize(buf.size() * 2);
    size_t got = std::fread(buf.data() + held, 1, buf.size() - held, f.get());
    if (got == 0) break;
    std::string_view text(buf.data(), held + got);
    size_t pos = 0;
    for (size_t end; (end = text.find('\n', pos)) != std::string_view::npos; pos = end + 1)
      builder.line(text.substr(pos, end - pos));
    held = text.size() - pos;
    std::memmove(buf.data(), buf.data() + pos, held);
  }
  if (std::ferror(f.get())) throw InputError(path + ": cannot read trace file");
  if (held) builder.line(std::string_view(buf.data(), held));
  return builder.finish();
}

std::string format_float(double v) {
  // Python's repr: the shortest round-trip digits, positional from 1e-4 up to 1e16, else scientific.
  char buf[64];
  const double mag = std::fabs(v);
  const bool positional = v == 0 || !std::isfinite(v) || (mag >= 1e-4 && mag < 1e16);
  auto r = std::to_chars(buf, buf + sizeof buf, v, positional ? std::chars_format::fixed : std::chars_format::scientific);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace tcc
