#include "src/analysis/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

namespace tcc {

namespace {

struct DTypeSpelling {
  const char* name;
  DType type;
};

// torch's names first: they are what the trace writer (a training loop) prints.
constexpr DTypeSpelling kDTypes[] = {
    {"float32", DType::F32}, {"float16", DType::F16}, {"bfloat16", DType::BF16}, {"float64", DType::F64},
    {"int64", DType::I64},   {"int32", DType::I32},   {"int16", DType::I16},     {"int8", DType::I8},
    {"uint8", DType::U8},    {"uint16", DType::U16},  {"uint32", DType::U32},    {"uint64", DType::U64},
    {"bool", DType::Bool},   {"float", DType::F32},   {"half", DType::F16},      {"double", DType::F64},
    {"long", DType::I64},    {"int", DType::I32}};

std::optional<DType> trace_dtype(std::string_view s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return d.type;
  return parse_dtype(s);
}

// A JSON reader for the one shape of object a trace line has. Hand-written
// because a general JSON DOM costs more per line than the whole simulation.
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
  void expect(char c, const std::string& context) {
    if (!eat(c)) fail(std::string("expected '") + c + "' " + context + ", got " + got());
  }
  std::string got() const {
    if (pos_ >= s_.size()) return "end of line";
    return "'" + std::string(s_.substr(pos_, std::min<size_t>(12, s_.size() - pos_))) + "'";
  }
  bool at_end() {
    ws();
    return pos_ >= s_.size();
  }

  std::string string() {
    ws();
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string, got " + got());
    ++pos_;
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: fail(std::string("unsupported escape '\\") + e + "' in a string");
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
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
    const char* b = s_.data() + start + (s_[start] == '+' ? 1 : 0);
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

class CallBuilder {
 public:
  CallBuilder(const ModelSignature& sig, const std::string& file, size_t line) : sig_(sig), file_(file), line_(line) {
    size_t n = sig.inputs.size();
    rec_.kinds.assign(n, EntryKind::Absent);
    rec_.dtypes.assign(n, DType::Undefined);
    rec_.floats.assign(n, 0.0);
    rec_.class_values.assign(sig.num_classes(), -1);
  }

  [[noreturn]] void fail(const std::string& input, const std::string& expected, const std::string& actual) const {
    throw InputError(file_ + ":" + std::to_string(line_) + ": input '" + input + "': expected " + expected +
                     ", actual " + actual);
  }

  void parse(LineParser& p) {
    p.expect('{', "at the start of a call");
    if (!p.eat('}')) {
      do {
        std::string name = p.string();
        p.expect(':', "after an input name");
        int idx = sig_.find_input(name);
        if (idx < 0) {
          std::string known;
          for (const auto& in : sig_.inputs) known += (known.empty() ? "" : ", ") + in.name;
          throw InputError(file_ + ":" + std::to_string(line_) + ": unknown input '" + name +
                           "' (the model's inputs: " + known + ")");
        }
        if (rec_.kinds[idx] != EntryKind::Absent)
          throw InputError(file_ + ":" + std::to_string(line_) + ": input '" + name + "' given twice");
        entry(p, idx);
      } while (p.eat(','));
      p.expect('}', "after the last input");
    }
    if (!p.at_end()) p.fail("unexpected text after the call: " + p.got());
    for (size_t i = 0; i < sig_.inputs.size(); ++i)
      if (rec_.kinds[i] == EntryKind::Absent)
        throw InputError(file_ + ":" + std::to_string(line_) + ": input '" + sig_.inputs[i].name +
                         "' is missing");
    check_facts();
  }

  CallRecord take() { return std::move(rec_); }

 private:
  void entry(LineParser& p, int idx) {
    const InputSignature& in = sig_.inputs[idx];
    p.expect('{', "to open the entry of input '" + in.name + "'");
    std::optional<std::vector<int64_t>> shape;
    std::optional<std::string> dtype;
    bool has_scalar = false;
    do {
      std::string key = p.string();
      p.expect(':', "after \"" + key + "\"");
      if (key == "shape") {
        shape.emplace();
        p.expect('[', "to open \"shape\"");
        if (!p.eat(']')) {
          do {
            bool is_int;
            int64_t v = 0;
            p.number(is_int, v);
            if (!is_int || v < 0) p.fail("a size in \"shape\" must be a non-negative integer");
            shape->push_back(v);
          } while (p.eat(','));
          p.expect(']', "to close \"shape\"");
        }
      } else if (key == "dtype") {
        dtype = p.string();
      } else if (key == "scalar") {
        has_scalar = true;
        scalar(p, idx);
      } else {
        p.fail("unknown key \"" + key + "\" (expected \"shape\", \"dtype\" or \"scalar\")");
      }
    } while (p.eat(','));
    p.expect('}', "to close the entry of input '" + in.name + "'");
    if (has_scalar) {
      if (shape || dtype) fail(in.name, "either {\"scalar\": v} or {\"shape\", \"dtype\"}", "both");
      return;
    }
    if (!shape || !dtype) fail(in.name, "{\"shape\": [...], \"dtype\": ...}", shape ? "no dtype" : "no shape");
    tensor(idx, *shape, *dtype);
  }

  void scalar(LineParser& p, int idx) {
    const InputSignature& in = sig_.inputs[idx];
    if (!in.scalar_slot)
      fail(in.name, "a tensor of rank " + std::to_string(in.fixed.size()), "a scalar");
    bool is_true = p.literal("true");
    if (is_true || p.literal("false")) {
      rec_.kinds[idx] = EntryKind::BoolScalar;
      rec_.floats[idx] = is_true ? 1.0 : 0.0;
      return;
    }
    bool is_int;
    int64_t iv = 0;
    double v = p.number(is_int, iv);
    bool int_input = is_integer(in.dtype);
    if (int_input && !is_int) fail(in.name, "an int scalar (" + torch_dtype_name(in.dtype) + ")", format_float(v));
    if (int_input) {
      rec_.kinds[idx] = EntryKind::IntScalar;
      rec_.class_values[in.scalar_class] = iv;
    } else {
      rec_.kinds[idx] = EntryKind::FloatScalar;
      rec_.floats[idx] = v;
    }
  }

  void tensor(int idx, const std::vector<int64_t>& shape, const std::string& dtype_text) {
    const InputSignature& in = sig_.inputs[idx];
    auto dt = trace_dtype(dtype_text);
    if (!dt) throw InputError(file_ + ":" + std::to_string(line_) + ": input '" + in.name + "': unknown dtype '" +
                              dtype_text + "'");
    if (in.dtype != DType::Undefined && *dt != in.dtype)
      fail(in.name, "dtype " + torch_dtype_name(in.dtype), torch_dtype_name(*dt));
    if (shape.size() != in.fixed.size())
      fail(in.name, "rank " + std::to_string(in.fixed.size()), "rank " + std::to_string(shape.size()) + " " +
                                                                     shape_text(shape));
    rec_.kinds[idx] = EntryKind::Tensor;
    rec_.dtypes[idx] = *dt;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (in.fixed[d] && *in.fixed[d] != shape[d])
        fail(in.name, "size " + std::to_string(*in.fixed[d]) + " at dim " + std::to_string(d) + " (fixed by the model)",
             std::to_string(shape[d]));
      int c = in.dim_class[d];
      if (c < 0) continue;
      int64_t& slot = rec_.class_values[c];
      if (slot >= 0 && slot != shape[d]) {
        auto [oi, od] = first_source(c);
        fail(in.name, "size " + std::to_string(slot) + " at dim " + std::to_string(d) + " (the model names it '" +
                          sig_.class_symbol[c] + "', like " + sig_.source_str(oi, od) + ")",
             std::to_string(shape[d]));
      }
      slot = shape[d];
    }
  }

  std::pair<int, int> first_source(int c) const {
    for (auto [i, d] : sig_.class_sources[c])
      if (rec_.kinds[i] != EntryKind::Absent) return {i, d};
    return sig_.class_sources[c].front();
  }

  static std::string shape_text(const std::vector<int64_t>& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
    return t + "]";
  }

  void check_facts() const {
    if (sig_.facts.empty()) return;
    std::map<std::string, int64_t> env;
    for (int c = 0; c < sig_.num_classes(); ++c) env[sig_.class_symbol[c]] = rec_.class_values[c];
    for (const auto& f : sig_.facts) {
      auto v = f.expr.evaluate(env);
      if (v && *v % f.modulus != 0)
        throw InputError(file_ + ":" + std::to_string(line_) + ": " + f.node + " needs (" + f.expr.str() + ") % " +
                         std::to_string(f.modulus) + " == 0, actual " + f.expr.str() + " = " + std::to_string(*v));
    }
  }

  const ModelSignature& sig_;
  const std::string& file_;
  size_t line_;
  CallRecord rec_;
};

// Divisibility a Reshape with an inferred (-1) dim needs from its input's size.
void reshape_facts(const Graph& g, const ShapeInfo& info, std::vector<DivisibilityFact>& out) {
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
    out.push_back({numel, known, "Reshape '" + n->name() + "'"});
  }
}

}  // namespace

int ModelSignature::find_input(std::string_view name) const {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].name == name) return static_cast<int>(i);
  return -1;
}

std::string ModelSignature::source_str(int input, int dim) const {
  if (dim < 0) return inputs[input].name;
  return inputs[input].name + ".size()[" + std::to_string(dim) + "]";
}

ModelSignature build_signature(const Graph& g, const ShapeInfo& info) {
  ModelSignature sig;
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
  return sig;
}

Trace parse_trace(std::string_view text, const std::string& file, const ModelSignature& sig) {
  Trace trace;
  trace.file = file;
  std::unordered_map<std::string_view, uint32_t> seen;
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  seen.reserve(lines);
  trace.calls.reserve(lines);
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    auto [it, fresh] = seen.emplace(line, static_cast<uint32_t>(trace.distinct.size()));
    if (fresh) {
      LineParser p(line, file, line_no);
      CallBuilder b(sig, file, line_no);
      b.parse(p);
      trace.distinct.push_back(b.take());
    }
    trace.calls.push_back(it->second);
  }
  // A rank-0 input keeps one kind for the whole trace, as a Python program
  // passes either a float or a tensor there.
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    if (trace.distinct.empty()) break;
    EntryKind first = trace.distinct[trace.calls[0]].kinds[i];
    bool consistent = true;
    for (const CallRecord& rec : trace.distinct)
      consistent &= (rec.kinds[i] == EntryKind::Tensor) == (first == EntryKind::Tensor);
    for (size_t c = 0; !consistent && c < trace.calls.size(); ++c) {
      EntryKind k = trace.distinct[trace.calls[c]].kinds[i];
      if ((k == EntryKind::Tensor) != (first == EntryKind::Tensor))
        throw InputError(file + ": call " + std::to_string(c) + ": input '" + sig.inputs[i].name + "' is a " +
                         (k == EntryKind::Tensor ? "tensor" : "scalar") + " here but a " +
                         (first == EntryKind::Tensor ? "tensor" : "scalar") + " on the first call");
    }
  }
  return trace;
}

Trace read_trace(const std::string& path, const ModelSignature& sig) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open trace file");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_trace(text, path, sig);
}

std::string torch_dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return std::string(dtype_name(t));
}

std::string format_float(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace tcc
