#include "frontends/pt2/pt2_importer.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "frontends/pt2/aten_context.h"
#include "frontends/pt2/pt2_storage.h"
#include "frontends/pt2/sym_text.h"
#include "frontends/pt2/torch_pickle.h"

namespace tcc {

namespace {

using json = nlohmann::json;

// The opset the ATen rules emit (Gelu's approximate, ReduceMean's axes input).
constexpr int64_t kPt2Opset = 20;
// Program schema majors tcc reads (torch/_export/serde/schema.py's
// SCHEMA_VERSION): 8 is torch 2.5 and later (8.7 in 2.7, 8.8 in 2.8).
constexpr int64_t kSchemaMajor = 8;
const char* const kArchiveVersions[] = {"0"};
// torch 2.7 and earlier: the program and torch.save'd dicts at the top of the zip.
const char* const kFlatProgram = "serialized_exported_program.json";
const char* const kFlatWeights = "serialized_state_dict.pt";
const char* const kFlatConstants = "serialized_constants.pt";
constexpr size_t kMaxSourceLength = 120;

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  return s.substr(b);
}

// A JSON object member, or an InputError naming where it was expected.
class JsonReader {
 public:
  JsonReader(const Pt2Archive& a, std::string entry) : a_(a), entry_(std::move(entry)) {}
  const json& get(const json& obj, const std::string& key, json::value_t type, const std::string& where) const {
    if (!obj.is_object()) fail(where + " is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(where + " has no '" + key + "'");
    bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_integer()) ||
              (type == json::value_t::number_float && it->is_number());
    if (!ok) fail(where + "'s '" + key + "' is a " + it->type_name() + ", expected " + json(type).type_name());
    return *it;
  }
  [[noreturn]] void fail(const std::string& msg) const { a_.fail(entry_, msg); }
  const std::string& entry() const { return entry_; }

 private:
  const Pt2Archive& a_;
  std::string entry_;
};

// torch 2.6 and earlier write a float that is not finite as Python's json
// module does, a bare NaN, Infinity or -Infinity, which JSON has not; later
// releases write the string, which the argument readers take. Quotes the bare
// ones (outside strings).
std::string quote_nonfinite(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool quoted = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"})
      if (text.compare(i, std::strlen(token), token) == 0) {
        out += std::string("\"") + token + "\"";
        i += std::strlen(token) - 1;
        quoted = true;
        break;
      }
    if (!quoted) out += c;
  }
  return out;
}

json parse_json(const Pt2Archive& a, const std::string& entry) {
  std::string text = quote_nonfinite(a.read(entry));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) a.fail(entry, "is not valid JSON");
  if (!j.is_object()) a.fail(entry, "is not a JSON object");
  return j;
}

// "File "m.py", line 12, in forward" frames: the last one outside torch's own
// package is where the user's code made the op.
std::string user_frame(const std::string& trace) {
  std::string last, last_user;
  const std::string file_tag = "File \"", line_tag = "\", line ";
  for (size_t p = trace.find(file_tag); p != std::string::npos; p = trace.find(file_tag, p + 1)) {
    size_t b = p + file_tag.size();
    size_t e = trace.find(line_tag, b);
    if (e == std::string::npos || trace.find('\n', b) < e) continue;
    size_t d = e + line_tag.size(), de = d;
    while (de < trace.size() && std::isdigit(static_cast<unsigned char>(trace[de]))) ++de;
    if (de == d) continue;
    std::string path = trace.substr(b, e - b);
    std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    last = base + ":" + trace.substr(d, de - d);
    if (path.find("/site-packages/torch/") == std::string::npos && path.find("/torch/nn/") == std::string::npos)
      last_user = last;
  }
  return last_user.empty() ? last : last_user;
}

// "L__self__,,__main__.M;L__self__blocks_0,blocks.0,Block" -> "blocks.0".
std::string module_path(const std::string& stack) {
  size_t b = stack.rfind(';');
  std::string last = stack.substr(b == std::string::npos ? 0 : b + 1);
  size_t c1 = last.find(',');
  if (c1 == std::string::npos) return "";
  size_t c2 = last.find(',', c1 + 1);
  return last.substr(c1 + 1, c2 == std::string::npos ? std::string::npos : c2 - c1 - 1);
}

std::string node_source(const json& node) {
  auto md = node.find("metadata");
  if (md == node.end() || !md->is_object()) return "";
  std::string frame, path;
  if (auto st = md->find("stack_trace"); st != md->end() && st->is_string()) frame = user_frame(*st);
  if (auto ms = md->find("nn_module_stack"); ms != md->end() && ms->is_string()) path = module_path(*ms);
  std::string s = frame.empty() ? path : path.empty() ? frame : frame + " (" + path + ")";
  return s.substr(0, kMaxSourceLength);
}

// The name of the archive at `file` ("a/mlp.core.pt2" -> "mlp.core").
std::string archive_stem(const std::string& file) {
  std::string base = file.substr(file.find_last_of('/') == std::string::npos ? 0 : file.find_last_of('/') + 1);
  return base.size() > 4 && base.compare(base.size() - 4, 4, ".pt2") == 0 ? base.substr(0, base.size() - 4) : base;
}

class Importer {
 public:
  Importer(Pt2Archive& a, Pt2Limits limits) : a_(a), limits_(limits), storages_(a) {}

  std::unique_ptr<Model> run() {
    std::string model_entry = a_.has(kFlatProgram) ? open_flat() : open_folder();
    json prog = parse_json(a_, model_entry);
    JsonReader r(a_, model_entry);
    check_schema(r, prog);

    auto m = std::make_unique<Model>();
    m->graph->set_file(a_.file());
    m->graph->set_opset("", kPt2Opset);
    m->graph->set_opset("tcc", 1);
    m->graph->set_opset("aten", 1);
    if (auto v = prog.find("torch_version"); v != prog.end() && v->is_string()) m->producer = "torch " + v->get<std::string>();
    p_.file = a_.file();
    p_.graph = m->graph.get();

    const json& gm = r.get(prog, "graph_module", json::value_t::object, "the program");
    const json& g = r.get(gm, "graph", json::value_t::object, "graph_module");
    const json& sig = r.get(gm, "signature", json::value_t::object, "graph_module");
    m->graph->set_name(a_.root().empty() ? archive_stem(a_.file()) : a_.root().substr(0, a_.root().size() - 1));
    read_ranges(r, prog, *m);
    read_metas(r, g);
    read_syms(r, g);
    const json& nodes = r.get(g, "nodes", json::value_t::array, "the graph");
    collect_uses(r, nodes, sig);
    read_inputs(r, sig);
    for (size_t i = 0; i < nodes.size(); ++i) import_node(r, nodes[i], i);
    read_outputs(r, sig);
    if (auto v = prog.find("verifiers"); v != prog.end() && v->is_array() && !v->empty() && (*v)[0].is_string())
      m->metadata["pt2.dialect"] = (*v)[0].get<std::string>();
    return m;
  }

 private:
  // torch 2.7 and earlier: the program, and the state dict and constants as
  // torch.save'd dicts, at the top of the zip. Returns the program's entry.
  std::string open_flat() {
    weights_entry_ = kFlatWeights;
    weights_ = std::make_unique<TorchSavedDict>(a_, kFlatWeights, limits_);
    if (a_.has(kFlatConstants)) constants_ = std::make_unique<TorchSavedDict>(a_, kFlatConstants, limits_);
    return kFlatProgram;
  }

  // torch 2.8 and later: one folder, the program in models/<name>.json, the
  // weights and constants torch.save'd dicts (2.8: data/weights/<name>.pt) or
  // raw storages listed in a JSON config (2.9 and later). Returns the program's entry.
  std::string open_folder() {
    check_format();
    std::string model_entry = find_model();
    model_name_ = model_entry.substr(7, model_entry.size() - 12);  // models/<name>.json
    if (std::string pickled = "data/weights/" + model_name_ + ".pt"; a_.has(pickled)) {
      weights_entry_ = pickled;
      weights_ = std::make_unique<TorchSavedDict>(a_, pickled, limits_);
      if (std::string c = "data/constants/" + model_name_ + ".pt"; a_.has(c))
        constants_ = std::make_unique<TorchSavedDict>(a_, c, limits_);
    }
    return model_entry;
  }

  void check_format() {
    if (!a_.has("archive_format")) a_.fail("archive_format", "is missing: not a torch.export.save archive");
    std::string format = trim(a_.read("archive_format"));
    if (format != "pt2") a_.fail("archive_format", "says '" + format.substr(0, 40) + "', expected 'pt2'");
    if (a_.has("archive_version")) {
      std::string version = trim(a_.read("archive_version"));
      bool known = false;
      for (const char* v : kArchiveVersions) known = known || version == v;
      if (!known)
        a_.fail("archive_version", "is '" + version.substr(0, 40) + "', which tcc does not know (it reads version 0)");
    }
    if (a_.has("byteorder") && trim(a_.read("byteorder")) != "little")
      a_.fail("byteorder", "is not 'little'; tcc reads little-endian weights only");
  }

  std::string find_model() {
    std::vector<std::string> models;
    for (const std::string& e : a_.list("models/"))
      if (e.size() > 5 && e.compare(e.size() - 5, 5, ".json") == 0 && e.find('/', 7) == std::string::npos)
        models.push_back(e);
    if (models.empty()) a_.fail("models/", "holds no program (models/<name>.json)");
    for (const std::string& e : models)
      if (e == "models/model.json") return e;
    if (models.size() > 1) {
      std::string names;
      for (const std::string& e : models) names += (names.empty() ? "" : ", ") + e;
      a_.fail("models/", "holds several programs (" + names + "); tcc reads an archive with one, or with models/model.json");
    }
    return models[0];
  }

  void check_schema(const JsonReader& r, const json& prog) {
    const json& v = r.get(prog, "schema_version", json::value_t::object, "the program");
    int64_t major = r.get(v, "major", json::value_t::number_integer, "schema_version").get<int64_t>();
    int64_t minor = v.value("minor", int64_t{0});
    if (major != kSchemaMajor)
      r.fail("has schema version " + std::to_string(major) + "." + std::to_string(minor) +
             ", which tcc does not read (it reads " + std::to_string(kSchemaMajor) + ".x)");
  }

  SymExpr sym_text(const JsonReader& r, const std::string& text, const std::string& what) {
    auto e = parse_torch_sym(text);
    if (!e) r.fail(what + " has the symbolic size '" + text.substr(0, 80) + "', which tcc cannot read");
    return *e;
  }

  // A SymInt as the schema writes it: {"as_int": 3} or {"as_expr": {"expr_str": ...}}.
  SymExpr sym_value(const JsonReader& r, const json& v, const std::string& what) {
    if (v.is_object() && v.contains("as_int") && v["as_int"].is_number_integer())
      return SymExpr::constant(v["as_int"].get<int64_t>());
    if (v.is_object() && v.contains("as_expr") && v["as_expr"].is_object() && v["as_expr"].contains("expr_str") &&
        v["as_expr"]["expr_str"].is_string())
      return sym_text(r, v["as_expr"]["expr_str"], what);
    r.fail(what + " is not an int or a symbolic expression");
  }

  Pt2TensorMeta meta(const JsonReader& r, const json& t, const std::string& what) {
    Pt2TensorMeta m;
    int64_t st = r.get(t, "dtype", json::value_t::number_integer, what).get<int64_t>();
    auto dt = pt2_dtype(st);
    if (!dt) r.fail(what + " has dtype " + std::to_string(st) + " (torch ScalarType), which tcc does not support");
    m.dtype = *dt;
    for (const json& d : r.get(t, "sizes", json::value_t::array, what)) {
      SymExpr e = sym_value(r, d, what + "'s size");
      if (e.is_constant() && e.constant_value() < 0) r.fail(what + " has a negative size");
      m.dims.push_back(Dim(e));
    }
    if (t.contains("layout") && t["layout"].is_number_integer() && t["layout"].get<int64_t>() != 7)
      r.fail(what + " is not a strided (dense) tensor");
    return m;
  }

  void read_ranges(const JsonReader& r, const json& prog, Model& m) {
    auto rc = prog.find("range_constraints");
    if (rc == prog.end()) return;
    if (!rc->is_object()) r.fail("range_constraints is not an object");
    for (auto it = rc->begin(); it != rc->end(); ++it) {
      const json& c = it.value();
      auto bound = [&](const char* k) -> std::string {
        if (!c.is_object() || !c.contains(k)) r.fail("range_constraints['" + it.key() + "'] has no " + k);
        return c[k].is_number_integer() ? std::to_string(c[k].get<int64_t>()) : "inf";
      };
      m.metadata["pt2.range." + it.key()] = "[" + bound("min_val") + ", " + bound("max_val") + "]";
    }
  }

  void read_metas(const JsonReader& r, const json& g) {
    const json& tv = r.get(g, "tensor_values", json::value_t::object, "the graph");
    for (auto it = tv.begin(); it != tv.end(); ++it)
      p_.metas[it.key()] = meta(r, it.value(), "tensor '" + it.key() + "'");
  }

  void read_syms(const JsonReader& r, const json& g) {
    auto sv = g.find("sym_int_values");
    if (sv == g.end()) return;
    if (!sv->is_object()) r.fail("the graph's sym_int_values is not an object");
    for (auto it = sv->begin(); it != sv->end(); ++it)
      p_.syms[it.key()] = sym_value(r, it.value(), "symbolic int '" + it.key() + "'");
  }

  // Every tensor name some node argument or output spec mentions, and the last
  // node that reads it.
  void collect_uses(const JsonReader& r, const json& nodes, const json& sig) {
    size_t reader = 0;
    std::function<void(const json&)> walk = [&](const json& j) {
      if (j.is_object()) {
        if (j.size() == 1 && j.contains("name") && j["name"].is_string()) {
          p_.used.insert(j["name"].get<std::string>());
          p_.last_reader[j["name"].get<std::string>()] = reader;
        }
        for (auto it = j.begin(); it != j.end(); ++it) walk(it.value());
      } else if (j.is_array()) {
        for (const json& e : j) walk(e);
      }
    };
    for (const json& n : nodes) {
      if (!n.is_object() || !n.contains("inputs")) r.fail("a node of the graph has no inputs list");
      walk(n["inputs"]);
      ++reader;
    }
    if (sig.contains("output_specs")) walk(sig["output_specs"]);
  }

  // An in-place op (relu_, add_.Tensor: the op's name ends in '_') writes its
  // first operand; it maps as its functional form only where no later node
  // reads that operand, else it stays opaque. detach_ writes no values.
  bool writes_a_read_operand(const json& node, const std::string& target, size_t index) const {
    size_t dot = target.find('.'), end = target.find('.', dot + 1);
    std::string op = target.substr(dot + 1, end == std::string::npos ? std::string::npos : end - dot - 1);
    if (op.empty() || op.back() != '_' || op == "detach_") return false;
    const json& ins = node["inputs"];
    if (!ins.is_array() || ins.empty() || !ins[0].is_object() || !ins[0].contains("arg")) return false;
    const json& arg = ins[0]["arg"];
    if (!arg.is_object() || !arg.contains("as_tensor") || !arg["as_tensor"].contains("name") ||
        !arg["as_tensor"]["name"].is_string())
      return false;
    auto it = p_.last_reader.find(arg["as_tensor"]["name"].get<std::string>());
    return it != p_.last_reader.end() && it->second != index;
  }

  // ---- weights ----------------------------------------------------------------

  struct Payload {
    std::string folder;  // "data/weights/" or "data/constants/"
    json config;
  };

  // "data/weights/model_weights_config.json" for the program "model".
  std::string config_entry(const std::string& folder) const {
    return folder + model_name_ + (folder == "data/weights/" ? "_weights_config.json" : "_constants_config.json");
  }

  const Payload* payload(const std::string& folder) {
    auto it = payloads_.find(folder);
    if (it != payloads_.end()) return &it->second;
    Payload p{folder, json::object()};
    if (a_.has(config_entry(folder))) {
      json j = parse_json(a_, config_entry(folder));
      JsonReader r(a_, config_entry(folder));
      p.config = r.get(j, "config", json::value_t::object, "the config");
    }
    return &payloads_.emplace(folder, std::move(p)).first->second;
  }

  // The tensor torch saved under `fqn` (its storage, viewed with its sizes,
  // strides and offset), from the weights and then the constants.
  Tensor saved_tensor(const std::string& fqn, const Pt2TensorMeta& graph_meta) {
    if (weights_) return pickled_tensor(fqn, graph_meta);
    for (const char* folder : {"data/weights/", "data/constants/"}) {
      const Payload* p = payload(folder);
      auto it = p->config.find(fqn);
      if (it == p->config.end()) continue;
      return read_payload(*p, fqn, *it, graph_meta);
    }
    a_.fail(config_entry("data/weights/"), "has no tensor '" + fqn + "' (nor do the constants)");
  }

  Tensor pickled_tensor(const std::string& fqn, const Pt2TensorMeta& graph_meta) {
    for (TorchSavedDict* d : {weights_.get(), constants_.get()}) {
      if (!d || !d->has(fqn)) continue;
      Tensor t = d->tensor(fqn);
      std::vector<Dim> dims(t.shape().begin(), t.shape().end());
      if (t.dtype() != graph_meta.dtype || dims != graph_meta.dims)
        d->archive().fail("data.pkl", "tensor '" + fqn + "' is " + Type::tensor(t.dtype(), dims).str() +
                                          " but the graph reads it as " +
                                          Type::tensor(graph_meta.dtype, graph_meta.dims).str());
      return t;
    }
    a_.fail(weights_entry_, "has no tensor '" + fqn + "' (nor do the constants)");
  }

  Tensor read_payload(const Payload& p, const std::string& fqn, const json& e, const Pt2TensorMeta& graph_meta) {
    JsonReader r(a_, config_entry(p.folder));
    std::string what = "tensor '" + fqn + "'";
    std::string file = r.get(e, "path_name", json::value_t::string, what).get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file.find('\\') != std::string::npos || file == ".." ||
        file == ".")
      r.fail(what + " names the file '" + file + "', which escapes its folder");
    if (e.value("use_pickle", false)) r.fail(what + " is pickled; tcc reads raw tensor storages only");
    const json& tm = r.get(e, "tensor_meta", json::value_t::object, what);
    Pt2TensorMeta m = meta(r, tm, what);
    StorageView view{m.dtype, {}, {}, 0};
    for (const Dim& d : m.dims) {
      if (!d.is_static()) r.fail(what + " has a symbolic size");
      view.sizes.push_back(d.value());
    }
    if (m.dtype != graph_meta.dtype || m.dims != graph_meta.dims)
      r.fail(what + " is " + Type::tensor(m.dtype, m.dims).str() + " but the graph reads it as " +
             Type::tensor(graph_meta.dtype, graph_meta.dims).str());
    if (tm.contains("strides"))
      for (const json& s : r.get(tm, "strides", json::value_t::array, what)) {
        SymExpr v = sym_value(r, s, what + "'s stride");
        if (!v.is_constant() || v.constant_value() < 0) r.fail(what + " has a symbolic or negative stride");
        view.strides.push_back(v.constant_value());
      }
    if (tm.contains("storage_offset")) {
      SymExpr o = sym_value(r, tm["storage_offset"], what + "'s storage_offset");
      if (!o.is_constant() || o.constant_value() < 0) r.fail(what + " has a symbolic or negative storage offset");
      view.offset = o.constant_value();
    }
    return storages_.view(p.folder + file, view, what, true);
  }

  // ---- signature -----------------------------------------------------------------

  const Pt2TensorMeta& meta_of(const JsonReader& r, const std::string& name, const std::string& what) {
    auto it = p_.metas.find(name);
    if (it == p_.metas.end()) r.fail(what + " '" + name + "' has no entry in tensor_values");
    return it->second;
  }

  // User inputs become graph inputs; parameters, buffers and lifted constants
  // initializers of that role (Value::role), the parameters the model's
  // trainable ones.
  void read_inputs(const JsonReader& r, const json& sig) {
    const json& specs = r.get(sig, "input_specs", json::value_t::array, "the signature");
    for (size_t i = 0; i < specs.size(); ++i) {
      const json& s = specs[i];
      std::string where = "input spec " + std::to_string(i);
      if (!s.is_object() || s.size() != 1) r.fail(where + " is not a one-key object");
      std::string kind = s.begin().key();
      const json& body = s.begin().value();
      if (kind == "user_input") {
        const json& arg = r.get(body, "arg", json::value_t::object, where);
        if (!arg.contains("as_tensor"))
          r.fail(where + " is a user input that is not a tensor (" + (arg.empty() ? "empty" : arg.begin().key()) +
                 "); tcc reads tensor inputs only");
        std::string name = r.get(arg["as_tensor"], "name", json::value_t::string, where).get<std::string>();
        const Pt2TensorMeta& m = meta_of(r, name, "user input");
        p_.values[name] = p_.graph->add_input(name, Type::tensor(m.dtype, m.dims));
      } else if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
        const json& arg = r.get(body, "arg", json::value_t::object, where);
        std::string name = r.get(arg, "name", json::value_t::string, where).get<std::string>();
        std::string key = kind == "tensor_constant" ? "tensor_constant_name" : kind + "_name";
        std::string fqn = r.get(body, key, json::value_t::string, where).get<std::string>();
        const Pt2TensorMeta& m = meta_of(r, name, kind);
        Value* v = p_.graph->add_initializer(fqn, saved_tensor(fqn, m));
        v->set_type(Type::tensor(m.dtype, m.dims));
        p_.values[name] = v;
        v->set_role(kind == "parameter" ? InitializerRole::Parameter
                    : kind == "buffer"  ? InitializerRole::Buffer
                                        : InitializerRole::Constant);
      } else {
        r.fail(where + " is a '" + kind + "' input, which tcc does not read");
      }
    }
  }

  void read_outputs(const JsonReader& r, const json& sig) {
    const json& specs = r.get(sig, "output_specs", json::value_t::array, "the signature");
    for (size_t i = 0; i < specs.size(); ++i) {
      const json& s = specs[i];
      std::string where = "output spec " + std::to_string(i);
      if (!s.is_object() || s.size() != 1) r.fail(where + " is not a one-key object");
      std::string kind = s.begin().key();
      if (kind == "buffer_mutation" || kind == "user_input_mutation")
        r.fail(where + " mutates a " + (kind == "buffer_mutation" ? "buffer" : "user input") +
               "; tcc reads programs without mutation (export the model in eval mode)");
      if (kind != "user_output" && kind != "loss_output") r.fail(where + " is a '" + kind + "' output, which tcc does not read");
      const json& arg = r.get(s.begin().value(), "arg", json::value_t::object, where);
      if (!arg.contains("as_tensor")) r.fail(where + " is not a tensor; tcc reads programs with tensor outputs only");
      std::string name = r.get(arg["as_tensor"], "name", json::value_t::string, where).get<std::string>();
      auto it = p_.values.find(name);
      if (it == p_.values.end()) r.fail(where + " names '" + name + "', which nothing defines");
      Value* v = it->second;
      // An output must be a computed value of its own name.
      bool repeated = std::find(p_.graph->outputs().begin(), p_.graph->outputs().end(), v) != p_.graph->outputs().end();
      if (!v->producer() || repeated || v->name() != name) {
        std::string out = p_.graph->find(name) ? p_.graph->fresh_name(name) : name;
        Node* n = p_.graph->add_node("Identity", {v}, {out}, "", out);
        n->output(0)->set_type(v->type());
        v = n->output(0);
      }
      p_.graph->add_output(v);
    }
  }

  // ---- nodes ------------------------------------------------------------------------

  void import_node(const JsonReader& r, const json& node, size_t index) {
    std::string where = "node " + std::to_string(index);
    std::string target = r.get(node, "target", json::value_t::string, where).get<std::string>();
    if (target.rfind("torch.ops.", 0) == 0) target = target.substr(10);
    std::string name = node.contains("name") && node["name"].is_string() ? node["name"].get<std::string>() : "";
    if (name.empty()) name = p_.graph->fresh_name("node");
    r.get(node, "inputs", json::value_t::array, where);
    r.get(node, "outputs", json::value_t::array, where);
    if (is_aten_noop(target)) return;
    AtenNode n(p_, node, target, name, node_source(node));
    size_t first_new = p_.graph->nodes().size();
    if (writes_a_read_operand(node, target, index) || !lower_aten_node(n)) opaque(n, node);
    std::set<const Node*> emitted;
    for (size_t i = first_new; i < p_.graph->nodes().size(); ++i) emitted.insert(p_.graph->nodes()[i].get());
    for (size_t k = 0; k < n.num_outputs(); ++k) {
      std::string out = outputs_name(node, k);
      if (out.empty()) continue;
      auto it = p_.values.find(out);
      if (it == p_.values.end()) {
        if (p_.used.count(out)) n.fail("output '" + out + "' is read later, but tcc does not compute it");
        continue;
      }
      // Torch's recorded type of what this node computed (not of an alias).
      if (emitted.count(it->second->producer())) {
        const Pt2TensorMeta& m = n.out_meta(k);
        it->second->set_type(Type::tensor(m.dtype, m.dims));
      }
    }
  }

  static std::string outputs_name(const json& node, size_t k) {
    size_t i = 0;
    for (const json& o : node["outputs"]) {
      if (o.is_object() && o.contains("as_tensors") && o["as_tensors"].is_array()) {
        for (const json& t : o["as_tensors"]) {
          if (i++ == k) return t.is_object() ? t.value("name", "") : "";
        }
        continue;
      }
      if (i++ == k) return o.is_object() && o.contains("as_tensor") && o["as_tensor"].is_object()
                               ? o["as_tensor"].value("name", "")
                               : "";
    }
    return "";
  }

  // A node tcc has no rule for: kept as an op of domain "aten" with its tensor
  // inputs and outputs, so explain names it as a graph break.
  void opaque(AtenNode& n, const json& node) {
    std::vector<Value*> inputs;
    std::map<std::string, Attribute> attrs;
    for (const json& in : node["inputs"]) {
      if (!in.is_object() || !in.contains("name") || !in["name"].is_string()) continue;
      std::string arg = in["name"];
      if (n.is_tensor(arg)) {
        inputs.push_back(n.tensor(arg));
      } else if (in.contains("arg") && in["arg"].is_object() && in["arg"].contains("as_tensors")) {
        for (Value* v : n.tensors(arg)) inputs.push_back(v);
      }
    }
    std::vector<std::string> outs;
    for (size_t k = 0; k < n.num_outputs(); ++k) {
      std::string o = outputs_name(node, k);
      outs.push_back(o.empty() || p_.graph->find(o) ? p_.graph->fresh_name(n.name() + "_out") : o);
    }
    if (outs.empty()) outs.push_back(p_.graph->fresh_name(n.name() + "_out"));
    Node* op = p_.graph->add_node(n.target(), inputs, outs, "aten", n.name());
    op->set_source(n.source());
    for (size_t k = 0; k < n.num_outputs(); ++k) {
      std::string o = outputs_name(node, k);
      if (o.empty()) continue;
      auto m = p_.metas.find(o);
      if (m != p_.metas.end()) op->output(k)->set_type(Type::tensor(m->second.dtype, m->second.dims));
      p_.values[o] = op->output(k);
    }
  }

  Pt2Archive& a_;
  Pt2Limits limits_;
  std::string model_name_;  // "model": the program's entry is models/model.json
  Pt2Program p_;
  // Raw storages (torch 2.9 and later), by their configs.
  std::map<std::string, Payload> payloads_;
  StorageReader storages_;
  // torch.save'd dicts (torch 2.8 and earlier); weights_entry_ holds weights_.
  std::string weights_entry_;
  std::unique_ptr<TorchSavedDict> weights_, constants_;
};

}  // namespace

bool looks_like_zip(const std::string& bytes) { return bytes.size() >= 4 && bytes.compare(0, 4, "PK\x03\x04", 4) == 0; }

std::unique_ptr<Model> import_pt2_bytes(std::string bytes, const std::string& path, Pt2Limits limits) {
  std::string file = path.empty() ? "<memory>" : path;
  Pt2Archive archive(std::move(bytes), file, limits);
  std::unique_ptr<Model> m;
  try {
    m = Importer(archive, limits).run();
  } catch (const nlohmann::json::exception& e) {
    // Accessors check types before reading, so this is a shape they missed.
    throw InputError(file + ": the program's JSON has an unexpected shape: " + e.what());
  }
  m->path = path;
  return m;
}

}  // namespace tcc
