#include "frontends/pt2/aten_context.h"

#include <cmath>
#include <limits>

#include "src/diag/errors.h"

namespace tcc {

namespace {

using json = nlohmann::json;

// torch's ScalarType enum (torch/_export/serde/schema.py) -> DType.
std::optional<DType> dtype_from_scalar_type(int64_t t) {
  switch (t) {
    case 1: return DType::U8;
    case 2: return DType::I8;
    case 3: return DType::I16;
    case 4: return DType::I32;
    case 5: return DType::I64;
    case 6: return DType::F16;
    case 7: return DType::F32;
    case 8: return DType::F64;
    case 12: return DType::Bool;
    case 13: return DType::BF16;
    case 28: return DType::U16;
    case 34: return DType::U32;
    case 35: return DType::U64;
    default: return std::nullopt;
  }
}

// The one key of an Argument union ({"as_tensor": {...}}), or "".
std::string union_kind(const json& a) {
  if (!a.is_object() || a.size() != 1) return "";
  return a.begin().key();
}

}  // namespace

std::optional<DType> pt2_dtype(int64_t scalar_type) { return dtype_from_scalar_type(scalar_type); }

AtenNode::AtenNode(Pt2Program& p, const json& node, std::string target, std::string name, std::string source)
    : p_(p), node_(node), target_(std::move(target)), name_(std::move(name)), source_(std::move(source)) {
  const json& outs = node.at("outputs");
  for (const json& o : outs) {
    std::string kind = union_kind(o);
    if (kind == "as_tensor") {
      outputs_.push_back(o["as_tensor"].value("name", ""));
    } else if (kind == "as_tensors") {
      for (const json& t : o["as_tensors"]) outputs_.push_back(t.is_object() ? t.value("name", "") : "");
    } else {
      outputs_.push_back("");
    }
  }
}

void AtenNode::fail(const std::string& msg) const {
  DiagLocation loc;
  loc.file = p_.file;
  loc.node_name = name_;
  loc.op_type = target_;
  loc.source = source_;
  throw InputError(loc, msg);
}

void AtenNode::wrong_kind(const std::string& arg, const std::string& expected) const {
  const json* a = arg_json(arg);
  std::string got = a ? union_kind(*a) : "nothing";
  fail("argument '" + arg + "' must be " + expected + ", got " + (got.empty() ? "a malformed argument" : got));
}

const json* AtenNode::arg_json(const std::string& arg) const {
  for (const json& in : node_.at("inputs")) {
    if (!in.is_object() || in.value("name", "") != arg) continue;
    auto it = in.find("arg");
    if (it == in.end()) fail("argument '" + arg + "' has no value");
    return &*it;
  }
  return nullptr;
}

bool AtenNode::has(const std::string& arg) const {
  const json* a = arg_json(arg);
  return a && union_kind(*a) != "as_none" &&
         !(union_kind(*a) == "as_optional_tensor" && (*a)["as_optional_tensor"].contains("as_none"));
}

bool AtenNode::is_tensor(const std::string& arg) const {
  const json* a = arg_json(arg);
  return a && (union_kind(*a) == "as_tensor" || (union_kind(*a) == "as_optional_tensor" && has(arg)));
}

Value* AtenNode::tensor_named(const json& t, const std::string& arg) const {
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) wrong_kind(arg, "a tensor");
  std::string name = t["name"];
  auto it = p_.values.find(name);
  if (it == p_.values.end())
    fail("argument '" + arg + "' reads tensor '" + name + "', which no input or earlier node defines");
  return it->second;
}

Value* AtenNode::tensor(const std::string& arg) const {
  Value* v = opt_tensor(arg);
  if (!v) wrong_kind(arg, "a tensor");
  return v;
}

Value* AtenNode::opt_tensor(const std::string& arg) const {
  if (!has(arg)) return nullptr;
  const json& a = *arg_json(arg);
  std::string kind = union_kind(a);
  if (kind == "as_tensor") return tensor_named(a["as_tensor"], arg);
  if (kind == "as_optional_tensor" && a["as_optional_tensor"].contains("as_tensor"))
    return tensor_named(a["as_optional_tensor"]["as_tensor"], arg);
  wrong_kind(arg, "a tensor");
}

std::vector<Value*> AtenNode::tensors(const std::string& arg) const {
  const json* a = arg_json(arg);
  if (!a || union_kind(*a) != "as_tensors" || !(*a)["as_tensors"].is_array()) wrong_kind(arg, "a list of tensors");
  std::vector<Value*> out;
  for (const json& t : (*a)["as_tensors"]) out.push_back(tensor_named(t, arg));
  return out;
}

std::vector<Value*> AtenNode::opt_tensors(const std::string& arg) const {
  const json* a = arg_json(arg);
  // A list with no None in it is serialized as plain tensors.
  if (a && union_kind(*a) == "as_tensors") return tensors(arg);
  if (!a || union_kind(*a) != "as_optional_tensors" || !(*a)["as_optional_tensors"].is_array())
    wrong_kind(arg, "a list of optional tensors");
  std::vector<Value*> out;
  for (const json& t : (*a)["as_optional_tensors"]) {
    std::string kind = union_kind(t);
    if (kind == "as_none") out.push_back(nullptr);
    else if (kind == "as_tensor") out.push_back(tensor_named(t["as_tensor"], arg));
    else wrong_kind(arg, "a list of optional tensors");
  }
  return out;
}

int64_t AtenNode::i(const std::string& arg, std::optional<int64_t> def) const {
  if (!has(arg)) {
    if (def) return *def;
    wrong_kind(arg, "an int");
  }
  const json& a = *arg_json(arg);
  if (union_kind(a) == "as_int" && a["as_int"].is_number_integer()) return a["as_int"].get<int64_t>();
  if (union_kind(a) == "as_bool" && a["as_bool"].is_boolean()) return a["as_bool"].get<bool>() ? 1 : 0;
  wrong_kind(arg, "an int");
}

std::vector<int64_t> AtenNode::ints(const std::string& arg, std::optional<std::vector<int64_t>> def) const {
  if (!has(arg)) {
    if (def) return *def;
    wrong_kind(arg, "a list of ints");
  }
  const json& a = *arg_json(arg);
  if (union_kind(a) == "as_int" && a["as_int"].is_number_integer()) return {a["as_int"].get<int64_t>()};
  std::vector<int64_t> out;
  if (union_kind(a) == "as_ints" && a["as_ints"].is_array()) {
    for (const json& v : a["as_ints"]) {
      if (!v.is_number_integer()) wrong_kind(arg, "a list of ints");
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  // A SymInt list whose entries are all static.
  for (const SymExpr& e : syms(arg)) {
    if (!e.is_constant()) fail("argument '" + arg + "' must be static, got the symbolic '" + e.str() + "'");
    out.push_back(e.constant_value());
  }
  return out;
}

double AtenNode::f(const std::string& arg, std::optional<double> def) const {
  if (!has(arg)) {
    if (def) return *def;
    wrong_kind(arg, "a float");
  }
  return scalar(arg).value();
}

bool AtenNode::b(const std::string& arg, std::optional<bool> def) const {
  if (!has(arg)) {
    if (def) return *def;
    wrong_kind(arg, "a bool");
  }
  const json& a = *arg_json(arg);
  if (union_kind(a) == "as_bool" && a["as_bool"].is_boolean()) return a["as_bool"].get<bool>();
  wrong_kind(arg, "a bool");
}

std::string AtenNode::s(const std::string& arg, std::optional<std::string> def) const {
  if (!has(arg)) {
    if (def) return *def;
    wrong_kind(arg, "a string");
  }
  const json& a = *arg_json(arg);
  if (union_kind(a) == "as_string" && a["as_string"].is_string()) return a["as_string"].get<std::string>();
  wrong_kind(arg, "a string");
}

Pt2Scalar AtenNode::scalar(const std::string& arg, std::optional<double> def) const {
  Pt2Scalar s;
  if (!has(arg)) {
    if (!def) wrong_kind(arg, "a number");
    s.kind = Pt2Scalar::Kind::Float;
    s.f = *def;
    return s;
  }
  const json& a = *arg_json(arg);
  std::string kind = union_kind(a);
  const json& v = kind.empty() ? a : a[kind];
  if (kind == "as_int" && v.is_number_integer()) {
    s.i = v.get<int64_t>();
  } else if (kind == "as_bool" && v.is_boolean()) {
    s.kind = Pt2Scalar::Kind::Bool;
    s.i = v.get<bool>() ? 1 : 0;
  } else if (kind == "as_float" && v.is_number()) {
    s.kind = Pt2Scalar::Kind::Float;
    s.f = v.get<double>();
  } else if (kind == "as_float" && v.is_string()) {
    // JSON has no infinities or NaN; torch writes them as strings.
    std::string t = v;
    s.kind = Pt2Scalar::Kind::Float;
    if (t == "Infinity" || t == "inf") s.f = std::numeric_limits<double>::infinity();
    else if (t == "-Infinity" || t == "-inf") s.f = -std::numeric_limits<double>::infinity();
    else if (t == "NaN" || t == "nan") s.f = std::numeric_limits<double>::quiet_NaN();
    else wrong_kind(arg, "a number");
  } else if (kind == "as_sym_int") {
    s.kind = Pt2Scalar::Kind::Sym;
    s.sym = sym_of(a, arg);
    if (s.sym.is_constant()) {
      s.kind = Pt2Scalar::Kind::Int;
      s.i = s.sym.constant_value();
    }
  } else {
    wrong_kind(arg, "a number");
  }
  return s;
}

SymExpr AtenNode::sym_of(const json& a, const std::string& arg) const {
  std::string kind = union_kind(a);
  if (kind == "as_int" && a["as_int"].is_number_integer()) return SymExpr::constant(a["as_int"].get<int64_t>());
  const json& v = kind == "as_sym_int" ? a["as_sym_int"] : a;
  if (union_kind(v) == "as_int" && v["as_int"].is_number_integer()) return SymExpr::constant(v["as_int"].get<int64_t>());
  if (union_kind(v) == "as_name" && v["as_name"].is_string()) {
    auto it = p_.syms.find(v["as_name"].get<std::string>());
    if (it == p_.syms.end())
      fail("argument '" + arg + "' reads the symbolic int '" + v["as_name"].get<std::string>() +
           "', which the program does not define");
    return it->second;
  }
  wrong_kind(arg, "an int or symbolic int");
}

SymExpr AtenNode::sym(const std::string& arg, std::optional<int64_t> def) const {
  if (!has(arg)) {
    if (def) return SymExpr::constant(*def);
    wrong_kind(arg, "an int");
  }
  return sym_of(*arg_json(arg), arg);
}

std::vector<SymExpr> AtenNode::syms(const std::string& arg) const {
  const json* a = arg_json(arg);
  if (!a) wrong_kind(arg, "a list of ints");
  std::string kind = union_kind(*a);
  std::vector<SymExpr> out;
  if (kind == "as_ints" && (*a)["as_ints"].is_array()) {
    for (const json& v : (*a)["as_ints"]) {
      if (!v.is_number_integer()) wrong_kind(arg, "a list of ints");
      out.push_back(SymExpr::constant(v.get<int64_t>()));
    }
  } else if (kind == "as_sym_ints" && (*a)["as_sym_ints"].is_array()) {
    for (const json& v : (*a)["as_sym_ints"]) out.push_back(sym_of(v, arg));
  } else {
    wrong_kind(arg, "a list of ints");
  }
  return out;
}

std::optional<DType> AtenNode::dtype_arg(const std::string& arg) const {
  if (!has(arg)) return std::nullopt;
  const json& a = *arg_json(arg);
  if (union_kind(a) != "as_scalar_type" || !a["as_scalar_type"].is_number_integer()) wrong_kind(arg, "a dtype");
  auto t = dtype_from_scalar_type(a["as_scalar_type"].get<int64_t>());
  if (!t) fail("argument '" + arg + "' is dtype " + a["as_scalar_type"].dump() + ", which tcc does not support");
  return t;
}

const Pt2TensorMeta& AtenNode::out_meta(size_t k) const {
  if (k >= outputs_.size() || outputs_[k].empty()) fail("expected a tensor as output " + std::to_string(k));
  auto it = p_.metas.find(outputs_[k]);
  if (it == p_.metas.end()) fail("output '" + outputs_[k] + "' has no entry in tensor_values");
  return it->second;
}

bool AtenNode::out_used(size_t k) const { return k < outputs_.size() && p_.used.count(outputs_[k]); }

const std::string& AtenNode::out_name(size_t k) const {
  if (k >= outputs_.size() || outputs_[k].empty()) fail("expected a tensor as output " + std::to_string(k));
  return outputs_[k];
}

void AtenNode::set_out(size_t k, Value* v) { p_.values[out_name(k)] = v; }

Value* AtenNode::op(const std::string& op_type, const std::vector<Value*>& inputs,
                    const std::map<std::string, Attribute>& attrs, const std::string& out, const std::string& domain) {
  std::string name = out.empty() ? p_.graph->fresh_name(name_ + "_" + op_type) : out;
  Node* n = p_.graph->add_node(op_type, inputs, {name}, domain, name);
  n->set_source(source_);
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  Value* v = n->output(0);
  if (!inputs.empty() && inputs[0]) dtypes_[v] = dtype(inputs[0]);
  return v;
}

std::vector<Value*> AtenNode::op_n(const std::string& op_type, const std::vector<Value*>& inputs, size_t n_outputs,
                                   const std::map<std::string, Attribute>& attrs) {
  std::vector<std::string> names;
  for (size_t k = 0; k < n_outputs; ++k)
    names.push_back(k < outputs_.size() && !outputs_[k].empty() ? outputs_[k]
                                                                 : p_.graph->fresh_name(name_ + "_" + op_type));
  Node* n = p_.graph->add_node(op_type, inputs, names, "", names[0]);
  n->set_source(source_);
  for (const auto& [k, a] : attrs) n->set_attr(k, a);
  std::vector<Value*> outs(n->outputs().begin(), n->outputs().end());
  for (size_t k = 0; k < outs.size(); ++k) {
    if (k < outputs_.size() && !outputs_[k].empty()) set_out(k, outs[k]);
    else if (!inputs.empty() && inputs[0]) dtypes_[outs[k]] = dtype(inputs[0]);
  }
  return outs;
}

void AtenNode::result(const std::string& op_type, const std::vector<Value*>& inputs,
                      const std::map<std::string, Attribute>& attrs) {
  set_out(0, op(op_type, inputs, attrs, out_name(0)));
}

Value* AtenNode::constant(Tensor t) {
  DType dt = t.dtype();
  std::vector<int64_t> shape = t.shape();
  Value* v = p_.graph->add_initializer(p_.graph->fresh_name(name_ + "_const"), std::move(t));
  v->set_type(Type::tensor(dt, Dims(shape.begin(), shape.end())));
  return v;
}

Value* AtenNode::ints_const(const std::vector<int64_t>& v) {
  return constant(Tensor::from_i64(v, {static_cast<int64_t>(v.size())}));
}

Value* AtenNode::scalar_const(double v, DType dtype) {
  Tensor t(dtype, {});
  if (dtype == DType::Bool) t.set_i64(0, v != 0);
  else if (is_float(dtype)) t.set_f64(0, v);
  else t.set_i64(0, static_cast<int64_t>(v));
  return constant(std::move(t));
}

Value* AtenNode::sym_scalar(const SymExpr& e) {
  if (e.is_constant()) return scalar_const(static_cast<double>(e.constant_value()), DType::I64);
  Value* v = op("Size", {}, {{"dims", Attribute::of_strings({e.str()})}}, "", "tcc");
  dtypes_[v] = DType::I64;
  return v;
}

Value* AtenNode::shape_tensor(const std::vector<SymExpr>& dims) {
  bool all_static = true;
  for (const SymExpr& d : dims) all_static = all_static && d.is_constant();
  if (all_static) {
    std::vector<int64_t> v;
    for (const SymExpr& d : dims) v.push_back(d.constant_value());
    return ints_const(v);
  }
  std::vector<Value*> parts;
  for (const SymExpr& d : dims)
    parts.push_back(d.is_constant() ? ints_const({d.constant_value()})
                                    : op("Unsqueeze", {sym_scalar(d), ints_const({0})}));
  Value* v = op("Concat", parts, {{"axis", Attribute::of_int(0)}});
  dtypes_[v] = DType::I64;
  return v;
}

Value* AtenNode::cast(Value* v, DType to) {
  if (dtype(v) == to) return v;
  Value* c = op("Cast", {v}, {{"to", Attribute::of_int(static_cast<int64_t>(to))}});
  dtypes_[c] = to;
  return c;
}

DType AtenNode::dtype(const Value* v) const {
  auto it = dtypes_.find(v);
  if (it != dtypes_.end()) return it->second;
  return v->type().is_tensor() ? v->type().dtype() : DType::Undefined;
}

const Dims* AtenNode::dims(const Value* v) const {
  if (v->type().is_tensor() && v->type().has_rank()) return &v->type().shape();
  return nullptr;
}

size_t AtenNode::rank(const Value* v) const {
  const Dims* d = dims(v);
  if (!d) fail("the rank of '" + v->name() + "' is not known");
  return d->size();
}

}  // namespace tcc
