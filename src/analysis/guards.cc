#include "src/analysis/guards.h"

#include <algorithm>
#include <map>

namespace tcc {

namespace {

// c10's ScalarType name of a dtype ("Float", "Double", "Half", "Long"), as
// TENSOR_MATCH's dtype failures write it.
std::string scalar_type_name(DType t) {
  switch (t) {
    case DType::F16: return "Half";
    case DType::BF16: return "BFloat16";
    case DType::F32: return "Float";
    case DType::F64: return "Double";
    case DType::I8: return "Char";
    case DType::U8: return "Byte";
    case DType::I16: return "Short";
    case DType::I32: return "Int";
    case DType::I64: return "Long";
    case DType::Bool: return "Bool";
    case DType::F8E4M3FN: return "Float8_e4m3fn";
    case DType::F8E4M3FNUZ: return "Float8_e4m3fnuz";
    case DType::F8E5M2: return "Float8_e5m2";
    case DType::F8E5M2FNUZ: return "Float8_e5m2fnuz";
    default: return torch_dtype_name(t);
  }
}

}  // namespace

// Whether dim d of input i is the innermost dim of a tensor of rank 2 or more:
// a symbolic size there is also guarded through the outer dim's stride
// (`x.stride()[d-1] == x.size()[d]`), which a size of 0 breaks (torch makes
// the stride of a dim before a 0-sized one 1, not 0), unbacked or not.
bool GuardSet::stride_guarded(int i, int d) const {
  const InputSignature& in = sig_->inputs[i];
  return d > 0 && d + 1 == static_cast<int>(in.dim_class.size());
}

bool GuardSet::zero_breaks_stride(int c) const {
  for (auto [i, d] : sig_->class_sources[c])
    if (d >= 0 && std::find(inputs_.begin(), inputs_.end(), i) != inputs_.end() && stride_guarded(i, d)) return true;
  return false;
}

std::pair<int, int> GuardSet::last_read_source(int c) const {
  std::pair<int, int> last{-1, -1};
  for (auto src : sig_->class_sources[c])
    if (std::find(inputs_.begin(), inputs_.end(), src.first) != inputs_.end()) last = src;
  return last;
}

namespace {

// torch's backend dispatch key of a device type ("cuda:1" -> "CUDA"); "" for
// the default device (the CPU) and types tcc does not know.
std::string backend_key(const std::string& device) {
  static const std::map<std::string, std::string> keys = {
      {"", "CPU"}, {"cpu", "CPU"}, {"cuda", "CUDA"}, {"meta", "Meta"}, {"mps", "MPS"}, {"xpu", "XPU"}};
  auto it = keys.find(device.substr(0, device.find(':')));
  return it == keys.end() ? "" : it->second;
}

std::string dispatch_key_set(const std::string& backend) {
  return "DispatchKeySet(" + backend + ", BackendSelect, ADInplaceOrView, Autograd" + backend + ")";
}

}  // namespace

std::string GuardSet::dispatch_key_failure(int i, const CallRecord& call) const {
  if (i >= static_cast<int>(layouts_.size()) || !layouts_[i]) return "";
  const std::string want = backend_key(layouts_[i]->device), got = backend_key(call.layout(i).device);
  if (want.empty() || got.empty() || want == got) return "";
  return "tensor '" + spelled_input(i) + "' dispatch key set mismatch. expected " +
         dispatch_key_set(want) + ", actual " + dispatch_key_set(got);
}

std::string GuardSet::placement_failure(int i, const CallRecord& call) const {
  if (i >= static_cast<int>(layouts_.size()) || !layouts_[i]) return "";
  const TensorLayout& want = *layouts_[i];
  const TensorLayout& got = call.layout(i);
  const std::string name = "tensor '" + spelled_input(i) + "' ";
  if (want.device != got.device && dispatch_key_failure(i, call).empty())
    return name + "device mismatch. expected " + (want.device.empty() ? "the default device" : want.device) +
           ", actual " + (got.device.empty() ? "the default device" : got.device);
  if (want.requires_grad != got.requires_grad)
    return name + "requires_grad mismatch. expected requires_grad=" + (want.requires_grad ? "1" : "0");
  return "";
}

std::string GuardSet::stride_failure(int i, const CallRecord& call, const int64_t* values) const {
  if (i >= static_cast<int>(layouts_.size()) || !layouts_[i]) return "";
  const TensorLayout& want = *layouts_[i];
  const TensorLayout& got = call.layout(i);
  const std::string name = "tensor '" + spelled_input(i) + "' ";
  // Row-major on both sides: the sizes' own guards decide (0-sized dims included).
  if (want.strides.empty() && got.strides.empty()) return "";
  // The call's strides: the trace's, or row-major over its sizes.
  const InputSignature& in = sig_->inputs[i];
  std::vector<int64_t> contiguous(in.fixed.size());
  int64_t acc = 1;
  for (size_t d = contiguous.size(); d-- > 0;) {
    contiguous[d] = acc;
    acc *= in.fixed[d] ? *in.fixed[d] : values[in.dim_class[d]];
  }
  const std::vector<int64_t>& actual = got.strides.empty() ? contiguous : got.strides;
  std::vector<std::optional<int64_t>> expected = strides(i);
  if (!want.strides.empty()) expected.assign(want.strides.begin(), want.strides.end());
  for (size_t d = 0; d < actual.size(); ++d) {
    // A stride over symbolic sizes is an expression torch evaluates: row-major here.
    int64_t e = expected[d] ? *expected[d] : contiguous[d];
    if (actual[d] != e)
      return name + "stride mismatch at index " + std::to_string(d) + ". expected " + std::to_string(e) +
             ", actual " + std::to_string(actual[d]);
  }
  return "";
}

bool GuardSet::check(const CallRecord& call, const int64_t* values) const {
  if (grad_mode_ && call.grad_mode != *grad_mode_) return false;
  for (int i : inputs_) {
    if (dtypes_[i] != DType::Undefined && call.dtypes[i] != dtypes_[i]) return false;
    if (float_guarded_[i] && call.floats[i] != float_values_[i]) return false;
    if (!dispatch_key_failure(i, call).empty() || !placement_failure(i, call).empty() ||
        !stride_failure(i, call, values).empty())
      return false;
  }
  for (size_t c = 0; c < classes_.size(); ++c) {
    const ClassGuard& g = classes_[c];
    if (g.kind == ClassGuard::Static && values[c] != g.value) return false;
    if (g.kind == ClassGuard::Symbolic && !g.unbacked && values[c] < sig_->least_size) return false;
    if (g.kind == ClassGuard::Symbolic && values[c] == 0 && zero_breaks_stride(static_cast<int>(c))) return false;
    if (g.kind == ClassGuard::Symbolic)
      for (const RangeBound& b : range_bounds(static_cast<int>(c)))
        if (!b.holds(values[c])) return false;
  }
  for (const Relation& r : relations_)
    if (values[r.a] != values[r.b]) return false;
  return !breaks_fact(values);
}

std::optional<SymExpr> GuardSet::fact_expr(const ShapeFact& f) const {
  std::map<std::string, SymExpr> rename;
  bool symbolic = false;
  for (int c = 0; c < static_cast<int>(classes_.size()); ++c) {
    if (!f.expr.symbols().count(sig_->class_symbol[c])) continue;
    if (classes_[c].kind == ClassGuard::Symbolic) {
      symbolic = true;
      rename[sig_->class_symbol[c]] = SymExpr::symbol(symbol_name(c));
    } else if (classes_[c].kind == ClassGuard::Static) {
      rename[sig_->class_symbol[c]] = SymExpr::constant(classes_[c].value);
    }
  }
  if (!symbolic) return std::nullopt;
  return f.expr.substitute(rename);
}

bool GuardSet::breaks_fact(const int64_t* values, std::string* fact_text) const {
  std::optional<std::map<std::string, int64_t>> symbols;  // bound only where a fact applies
  for (const ShapeFact& f : sig_->facts) {
    if (f.kind != ShapeFact::Kind::AtLeast) continue;
    std::optional<SymExpr> e = fact_expr(f);
    if (!e) continue;
    if (!symbols) symbols = sig_->symbol_values(values);
    std::optional<int64_t> v = f.broken_at(*symbols);
    if (!v) continue;
    if (fact_text)
      *fact_text = e->str() + " >= " + std::to_string(f.value) + " (actual " + std::to_string(*v) + "), which " +
                   f.node + " relies on";
    return true;
  }
  return false;
}

std::vector<std::string> GuardSet::failures(const CallRecord& call, const int64_t* values) const {
  std::vector<std::string> out;
  const std::string prefix = compile_id_ + ": ";
  // The global state guard comes first.
  if (grad_mode_ && call.grad_mode != *grad_mode_)
    out.push_back(prefix + (rules_.legacy_guard_failures ? "___check_global_state()" : "GLOBAL_STATE changed: grad_mode"));
  for (int i : inputs_) {
    const InputSignature& in = sig_->inputs[i];
    // torch checks a tensor's dispatch key set (its backend) first, then dtype, device and requires_grad.
    if (std::string keys = dispatch_key_failure(i, call); !keys.empty()) out.push_back(prefix + keys);
    if (dtypes_[i] != DType::Undefined && call.dtypes[i] != dtypes_[i])
      out.push_back(prefix + "tensor '" + spelled_input(i) + "' dtype mismatch. expected " + scalar_type_name(dtypes_[i]) +
                    ", actual " + scalar_type_name(call.dtypes[i]));
    // torch checks a tensor's device and requires_grad before its sizes, its strides after them.
    if (std::string placement = placement_failure(i, call); !placement.empty()) out.push_back(prefix + placement);
    const size_t reasons_before_sizes = out.size();
    if (rules_.legacy_guard_failures && dtypes_[i] != DType::Undefined)
      if (std::string first = legacy_tensor_failure(i, call, values); !first.empty()) {
        out.push_back(prefix + first);
        continue;
      }
    if (float_guarded_[i] && call.floats[i] != float_values_[i])
      out.push_back(prefix + spelled_input(i) + " == " + format_float(float_values_[i]) + " (now " +
                    format_float(call.floats[i]) + ")");
    if (in.scalar_class >= 0) {
      const ClassGuard& g = classes_[in.scalar_class];
      int64_t v = values[in.scalar_class];
      if (g.kind == ClassGuard::Static && v != g.value)
        out.push_back(prefix + spelled_input(i) + " == " + std::to_string(g.value) + " (now " + std::to_string(v) +
                      ")");
      if (g.kind == ClassGuard::Symbolic && !g.unbacked && v < sig_->least_size)
        out.push_back(prefix + std::to_string(sig_->least_size) + " <= " + spelled_input(i) + " (now " +
                      std::to_string(v) + ")");
    }
    for (size_t d = 0; d < in.dim_class.size(); ++d) {
      int c = in.dim_class[d];
      if (c < 0) continue;
      const ClassGuard& g = classes_[c];
      int64_t v = values[c];
      // A class shared by several inputs is reported once, at the last source
      // this graph reads, as torch 2.15 reports the last of the tensors that
      // share a size (tests/fidelity/2.15/example_captions_*: 'labels', not 'input_ids').
      if (last_read_source(c) != std::pair<int, int>{i, static_cast<int>(d)}) continue;
      if (g.kind == ClassGuard::Static && v != g.value)
        out.push_back(prefix + "tensor '" + spelled_input(i) + "' size mismatch at index " + std::to_string(d) +
                      ". expected " + std::to_string(g.value) + ", actual " + std::to_string(v));
      if (g.kind == ClassGuard::Symbolic && v == 0 && zero_breaks_stride(c)) {
        // Reported at the source whose stride carries it.
        for (auto [si, sd] : sig_->class_sources[c])
          if (std::find(inputs_.begin(), inputs_.end(), si) != inputs_.end() && stride_guarded(si, sd)) {
            const std::string name = spelled_input(si);
            out.push_back(prefix + name + ".stride()[" + std::to_string(sd - 1) + "] == " + name + ".size()[" +
                          std::to_string(sd) + "] (actual 0)");
            break;
          }
        continue;
      }
      if (g.kind == ClassGuard::Symbolic && !g.unbacked && v < sig_->least_size)
        out.push_back(prefix + std::to_string(sig_->least_size) + " <= " + spelled_source(i, static_cast<int>(d)) +
                      " (actual " + std::to_string(v) + ")");
      if (g.kind == ClassGuard::Symbolic)
        for (const RangeBound& b : range_bounds(c))
          if (!b.holds(v))
            out.push_back(prefix + b.text(spelled_source(i, static_cast<int>(d))) + " (actual " +
                          std::to_string(v) + ")");
    }
    // A stride differs only where the sizes agreed: torch words a tensor's first failure.
    if (out.size() == reasons_before_sizes && !rules_.legacy_guard_failures)
      if (std::string strides = stride_failure(i, call, values); !strides.empty()) out.push_back(prefix + strides);
  }
  for (const Relation& r : relations_)
    if (values[r.a] != values[r.b]) {
      auto [ia, da] = sig_->class_sources[r.a].front();
      auto [ib, db] = sig_->class_sources[r.b].front();
      out.push_back(prefix + spelled_source(ib, db) + " == " + spelled_source(ia, da) + " (" +
                    std::to_string(values[r.b]) + " vs " + std::to_string(values[r.a]) + ")");
    }
  if (std::string fact; breaks_fact(values, &fact)) out.push_back(prefix + fact);
  return out;
}

std::vector<GuardSet::RangeBound> GuardSet::range_bounds(int cls) const {
  auto it = sig_->class_ranges.find(cls);
  if (it == sig_->class_ranges.end()) return {};
  std::vector<RangeBound> out;
  if (it->second.min > 2) out.push_back({false, it->second.min});
  if (it->second.max) out.push_back({true, *it->second.max});
  return out;
}

std::string GuardSet::symbol_name(int cls) const { return "s" + std::to_string(classes_[cls].symbol); }

std::string GuardSet::legacy_tensor_failure(int i, const CallRecord& call, const int64_t* values) const {
  const InputSignature& in = sig_->inputs[i];
  const std::vector<std::optional<int64_t>> want = sizes(i);
  const size_t rank = want.size();
  std::vector<int64_t> got(rank);
  for (size_t d = 0; d < rank; ++d) got[d] = in.fixed[d] ? *in.fixed[d] : values[in.dim_class[d]];
  // A size this input reports: static here and, where its class is shared, read last here.
  auto reported_here = [&](size_t d) {
    int c = in.dim_class[d];
    return c < 0 || last_read_source(c) == std::pair<int, int>{i, static_cast<int>(d)};
  };
  auto mismatched = [&](size_t d) { return want[d] && *want[d] != got[d]; };
  const TensorLayout& layout = call.layout(i);
  for (size_t d = 0; d < rank; ++d) {
    if (mismatched(d)) {
      if (!reported_here(d)) return "";
      return "tensor '" + spelled_input(i) + "' size mismatch at index " + std::to_string(d) + ". expected " +
             std::to_string(*want[d]) + ", actual " + std::to_string(got[d]);
    }
    // The stride of d is the product of the sizes after it (row-major on both sides, unless the call says).
    int64_t expected = 1, actual = 1;
    bool known = true, owned = true;
    for (size_t k = d + 1; k < rank; ++k) {  // torch's contiguous strides: a 0-sized dim counts as 1
      if (!want[k]) known = false;
      else expected *= std::max<int64_t>(*want[k], 1);
      actual *= std::max<int64_t>(got[k], 1);
      if (mismatched(k) && !reported_here(k)) owned = false;
    }
    if (!layout.strides.empty()) actual = layout.strides[d];
    if (known && owned && expected != actual)
      return "tensor '" + spelled_input(i) + "' stride mismatch at index " + std::to_string(d) + ". expected " +
             std::to_string(expected) + ", actual " + std::to_string(actual);
  }
  return "";
}

std::string GuardSet::spelled(const std::string& input) const {
  return rules_.local_source_names ? "L['" + input + "']" : input;
}

std::string GuardSet::spelled_input(int input) const {
  const InputSignature& in = sig_->inputs[input];
  if (in.source.empty()) return spelled(in.name);
  // The frame's local is the source's head: L['self'].param_groups[0]['lr'] where locals are spelled so.
  size_t tail = in.source.find_first_of(".[");
  return spelled(in.source.substr(0, tail)) + (tail == std::string::npos ? "" : in.source.substr(tail));
}

std::string GuardSet::spelled_source(int input, int dim) const {
  return size_source(spelled_input(input), dim);
}

std::vector<std::optional<int64_t>> GuardSet::sizes(int input) const {
  const InputSignature& in = sig_->inputs[input];
  std::vector<std::optional<int64_t>> out;
  for (size_t d = 0; d < in.fixed.size(); ++d) {
    if (in.fixed[d]) out.push_back(in.fixed[d]);
    else if (classes_[in.dim_class[d]].kind == ClassGuard::Static) out.push_back(classes_[in.dim_class[d]].value);
    else out.push_back(std::nullopt);
  }
  return out;
}

// Row-major strides; a stride that depends on a symbolic size is unknown.
std::vector<std::optional<int64_t>> GuardSet::strides(int input) const {
  std::vector<std::optional<int64_t>> sz = sizes(input), out(sz.size());
  std::optional<int64_t> acc = 1;
  for (size_t k = sz.size(); k-- > 0;) {
    out[k] = acc;
    acc = acc && sz[k] ? std::optional<int64_t>(*acc * *sz[k]) : std::nullopt;
  }
  return out;
}

namespace {
std::string list_text(const std::vector<std::optional<int64_t>>& v) {
  std::string s = "[";
  for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + (v[k] ? std::to_string(*v[k]) : "None");
  return s + "]";
}
nlohmann::json list_json(const std::vector<std::optional<int64_t>>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& x : v) j.push_back(x ? nlohmann::json(*x) : nlohmann::json(nullptr));
  return j;
}
}  // namespace

std::vector<std::string> GuardSet::tree_lines() const {
  std::vector<std::string> lines;
  for (const nlohmann::json& g : to_json()) {
    std::string kind = g["kind"];
    std::string line = kind + ": ";
    if (kind == "TENSOR_MATCH") {
      int input = sig_->find_input(g["input"].get<std::string>());
      line += "check_tensor(" + g["input"].get<std::string>() + ", " + g["dtype"].get<std::string>() +
              ", size=" + list_text(sizes(input)) + ", stride=" + list_text(strides(input)) + ", contiguous)";
    } else {
      line += g["expr"].get<std::string>();
      if (g.contains("sources")) {
        std::string src;
        for (const auto& s : g["sources"]) src += (src.empty() ? "" : ", ") + s.get<std::string>();
        line += "  # " + src;
      }
    }
    lines.push_back(line);
  }
  return lines;
}

nlohmann::json GuardSet::to_json() const {
  using nlohmann::json;
  json guards = json::array();
  for (int i : inputs_) {
    const InputSignature& in = sig_->inputs[i];
    if (float_guarded_[i]) {
      guards.push_back({{"kind", "EQUALS_MATCH"}, {"input", in.name},
                        {"expr", in.name + " == " + format_float(float_values_[i])},
                        {"value", float_values_[i]}});
      continue;
    }
    if (in.scalar_class >= 0 && dtypes_[i] == DType::Undefined) {
      const ClassGuard& g = classes_[in.scalar_class];
      if (g.kind == ClassGuard::Static)
        guards.push_back({{"kind", "EQUALS_MATCH"}, {"input", in.name},
                          {"expr", in.name + " == " + std::to_string(g.value)}, {"value", g.value}});
      continue;
    }
    if (in.scalar_slot && dtypes_[i] == DType::Undefined) continue;  // a float that is a graph input: no guard
    json entry = {{"kind", "TENSOR_MATCH"}, {"input", in.name},
                  {"dtype", torch_dtype_name(dtypes_[i] == DType::Undefined ? in.dtype : dtypes_[i])},
                  {"size", list_json(sizes(i))}, {"stride", list_json(strides(i))}, {"contiguous", true}};
    guards.push_back(entry);
  }
  // Shape-env relations, in symbol order.
  std::map<int, int> class_of_symbol;
  for (size_t c = 0; c < classes_.size(); ++c)
    if (classes_[c].kind == ClassGuard::Symbolic) class_of_symbol[classes_[c].symbol] = static_cast<int>(c);
  for (auto [sym, c] : class_of_symbol) {
    json sources = json::array();
    for (auto [i, d] : sig_->class_sources[c])
      if (std::find(inputs_.begin(), inputs_.end(), i) != inputs_.end()) sources.push_back(sig_->source_str(i, d));
    if (!classes_[c].unbacked)
      guards.push_back({{"kind", "SHAPE_ENV"},
                        {"expr", std::to_string(sig_->least_size) + " <= " + symbol_name(c)},
                        {"sources", sources}});
    if (!sources.empty())
      for (const RangeBound& b : range_bounds(c))
        guards.push_back({{"kind", "SHAPE_ENV"},
                          {"expr", b.text(sources[0].get<std::string>())},
                          {"sources", json::array({sources[0]})}});
    for (size_t k = 1; k < sources.size(); ++k)
      guards.push_back({{"kind", "SHAPE_ENV"},
                        {"expr", sources[k].get<std::string>() + " == " + sources[0].get<std::string>()},
                        {"sources", json::array({sources[k], sources[0]})}});
  }
  for (const Relation& r : relations_) {
    auto [ia, da] = sig_->class_sources[r.a].front();
    auto [ib, db] = sig_->class_sources[r.b].front();
    guards.push_back({{"kind", "SHAPE_ENV"},
                      {"expr", symbol_name(r.b) + " == " + symbol_name(r.a)},
                      {"sources", json::array({sig_->source_str(ib, db), sig_->source_str(ia, da)})}});
  }
  for (const ShapeFact& f : sig_->facts) {
    std::optional<SymExpr> e = fact_expr(f);
    if (!e) continue;
    guards.push_back({{"kind", "SHAPE_ENV"},
                      {"expr", f.kind == ShapeFact::Kind::Divisible
                                   ? "(" + e->str() + ") % " + std::to_string(f.value) + " == 0"
                                   : e->str() + " >= " + std::to_string(f.value)},
                      {"sources", json::array({f.node})}});
  }
  return guards;
}

}  // namespace tcc
