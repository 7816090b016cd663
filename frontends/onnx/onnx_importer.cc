#include "frontends/onnx/onnx_importer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <filesystem>
#include <unordered_set>

#include "frontends/onnx/graph_signature.h"
#include "frontends/onnx/metadata_props.h"
#include "frontends/onnx/tensor_proto.h"
#include "frontends/read_file.h"

namespace tcc {

namespace {

constexpr int64_t kMinOpset = 13;
// Longer dim_params are names, not expressions; the bound also keeps symbolic
// expansion of hostile text cheap.
constexpr size_t kMaxDimExprLength = 64;
constexpr size_t kMaxDocSourceLength = 80;

std::string opset_range_text() {
  return "tcc reads opset " + std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset);
}

// "File "m.py", line 12, in forward" frames: the last one is where the user's
// code created the op.
std::string last_stack_frame(const std::string& trace) {
  std::string found;
  const std::string file_tag = "File \"";
  const std::string line_tag = "\", line ";
  for (size_t p = trace.find(file_tag); p != std::string::npos; p = trace.find(file_tag, p + 1)) {
    size_t name_begin = p + file_tag.size();
    size_t name_end = trace.find(line_tag, name_begin);
    if (name_end == std::string::npos) break;
    if (trace.find('\n', name_begin) < name_end) continue;
    size_t digits = name_end + line_tag.size();
    size_t digits_end = digits;
    while (digits_end < trace.size() && std::isdigit(static_cast<unsigned char>(trace[digits_end]))) ++digits_end;
    if (digits_end == digits) continue;
    found = trace.substr(name_begin, name_end - name_begin) + ":" + trace.substr(digits, digits_end - digits);
  }
  return found;
}

std::string first_line(const std::string& text, size_t max_len) {
  size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = text.find_first_of("\r\n", b);
  std::string line = text.substr(b, std::min(e == std::string::npos ? text.size() : e, b + max_len) - b);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.pop_back();
  return line;
}

// Where the exporter says the node came from: a stack frame ("m.py:12") when
// one was recorded, else an explicit source, else the module namespace, else
// the first line of the doc string.
std::string node_source(const onnx::NodeProto& np) {
  std::string explicit_source, name_scope;
  for (const auto& [key, value] : node_metadata(np)) {
    if (key == "pkg.torch.onnx.stack_trace") {
      std::string frame = last_stack_frame(value);
      if (!frame.empty()) return frame;
    } else if (key == "source") {
      explicit_source = first_line(value, kMaxDocSourceLength);
    } else if (key == "namespace" || key == "pkg.torch.onnx.name_scopes") {
      name_scope = first_line(value, kMaxDocSourceLength);
    }
  }
  std::string doc_frame = last_stack_frame(np.doc_string());
  if (!doc_frame.empty()) return doc_frame;
  if (!explicit_source.empty()) return explicit_source;
  if (!name_scope.empty()) return name_scope;
  return first_line(np.doc_string(), kMaxDocSourceLength);
}

// A dim_param that is not an expression becomes a symbol: invalid characters
// turn into '_' ("batch size" -> "batch_size").
std::string sanitize_symbol(const std::string& text) {
  std::string s;
  for (char c : text) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

class Importer {
 public:
  Importer(std::string file, std::string data_dir) : file_(std::move(file)), data_dir_(std::move(data_dir)) {}

  // Consumes mp: initializer and tensor-attribute bytes move into the IR.
  std::unique_ptr<Model> run(onnx::ModelProto& mp) {
    auto m = std::make_unique<Model>();
    m->graph->set_file(file_);
    m->producer = mp.producer_name();
    if (!mp.producer_version().empty()) m->producer += (m->producer.empty() ? "" : " ") + mp.producer_version();
    m->ir_version = mp.ir_version();
    for (const auto& kv : mp.metadata_props()) m->metadata[kv.key()] = kv.value();
    for (const auto& op : mp.opset_import()) {
      std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
      if (domain.empty() && op.version() > kMaxOpset)
        fail("the model imports default-domain opset " + std::to_string(op.version()) +
             ", which is from the future: " + opset_range_text());
      if (domain.empty() && op.version() < kMinOpset)
        fail("the model imports default-domain opset " + std::to_string(op.version()) + ", but " +
             opset_range_text() + " (convert it with onnx.version_converter)");
      m->graph->set_opset(domain, op.version());
    }
    if (!mp.has_graph()) fail("the model has no graph");
    reserve_names(mp.graph());
    import_graph(*mp.mutable_graph(), *m->graph);
    mark_initializer_roles(mp.graph(), *m->graph);
    return m;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw InputError(file_ + ": " + msg); }

  // Every value name in the model, so that names made up for unnamed outputs
  // never collide with a name defined later in the file.
  void reserve_names(const onnx::GraphProto& gp) {
    for (const auto& v : gp.input()) reserved_.insert(v.name());
    for (const auto& t : gp.initializer()) reserved_.insert(t.name());
    for (const auto& n : gp.node()) {
      reserved_.insert(n.output().begin(), n.output().end());
      for (const auto& a : n.attribute()) {
        if (a.has_g()) reserve_names(a.g());
        for (const auto& g : a.graphs()) reserve_names(g);
      }
    }
  }

  std::string fresh_name(Graph& g, const std::string& hint) {
    std::string n;
    do n = g.fresh_name(hint);
    while (reserved_.count(n));
    return n;
  }

  Dim dim_from_proto(const onnx::TensorShapeProto::Dimension& d, const std::string& value) const {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        fail("value '" + value + "' has negative dimension " + std::to_string(d.dim_value()));
      return Dim(d.dim_value());
    }
    const std::string& text = d.dim_param();
    if (text.empty()) return Dim::unknown();
    if (text.size() <= kMaxDimExprLength)
      if (auto e = SymExpr::parse(text)) {
        if (e->is_constant() && e->constant_value() < 0)
          fail("value '" + value + "' has dimension '" + text + "', which is negative");
        return Dim(*e);
      }
    return Dim::symbol(sanitize_symbol(text));
  }

  Type type_from_proto(const onnx::TypeProto& tp, const std::string& value) const {
    switch (tp.value_case()) {
      case onnx::TypeProto::kTensorType: {
        const auto& tt = tp.tensor_type();
        if (tt.elem_type() == onnx::TensorProto_DataType_UNDEFINED) return Type();
        std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
        if (!dt) {
          std::string type_name = onnx::TensorProto_DataType_IsValid(tt.elem_type())
                                      ? onnx::TensorProto_DataType_Name(tt.elem_type())
                                      : "unknown";
          fail("value '" + value + "' has element type " + std::to_string(tt.elem_type()) + " (" + type_name +
               "), which tcc does not support");
        }
        if (!tt.has_shape()) return Type::tensor_unranked(*dt);
        Dims dims;
        for (const auto& d : tt.shape().dim()) dims.push_back(dim_from_proto(d, value));
        return Type::tensor(*dt, std::move(dims));
      }
      case onnx::TypeProto::kSequenceType:
        return Type::sequence(type_from_proto(tp.sequence_type().elem_type(), value));
      case onnx::TypeProto::kOptionalType:
        return Type::optional(type_from_proto(tp.optional_type().elem_type(), value));
      case onnx::TypeProto::VALUE_NOT_SET: return Type();
      default: fail("value '" + value + "' has a map, sparse or opaque type, which tcc does not support");
    }
  }

  void import_graph(onnx::GraphProto& gp, Graph& g) {
    g.set_name(gp.name());
    if (gp.sparse_initializer_size() > 0)
      fail("graph '" + gp.name() + "' has sparse initializers, which tcc does not read");
    std::unordered_set<std::string> initializer_names;
    for (auto& tp : *gp.mutable_initializer()) {
      if (tp.name().empty()) fail("graph '" + gp.name() + "' has an initializer without a name");
      std::string name = tp.name();
      g.add_initializer(name, tensor_from_proto(std::move(tp), {file_, data_dir_, ""}));
      initializer_names.insert(std::move(name));
    }
    // Old IR versions list weights as graph inputs too; they are initializers.
    for (const auto& vi : gp.input()) {
      if (vi.name().empty()) fail("graph '" + gp.name() + "' has an input without a name");
      if (!initializer_names.count(vi.name())) g.add_input(vi.name(), type_from_proto(vi.type(), vi.name()));
    }

    // Outputs first, inputs second, so nodes listed out of order still link.
    std::vector<Node*> nodes;
    for (int i = 0; i < gp.node_size(); ++i) nodes.push_back(add_node(gp.node(i), i, g));
    for (int i = 0; i < gp.node_size(); ++i) link_node(*gp.mutable_node(i), *nodes[i], g);

    for (const auto& vi : gp.output()) {
      Value* v = g.find(vi.name());
      if (!v) fail("graph '" + gp.name() + "' output '" + vi.name() + "' is never defined");
      g.add_output(v);
      declare_type(v, vi);
    }
    for (const auto& vi : gp.value_info())
      if (Value* v = g.find_local(vi.name())) declare_type(v, vi);
    ensure_topological_order(g);
  }

  // Declared types of computed values; inputs and initializers keep their own.
  void declare_type(Value* v, const onnx::ValueInfoProto& vi) const {
    if (!v->producer() || !vi.has_type()) return;
    Type t = type_from_proto(vi.type(), vi.name());
    if (!t.is_unknown()) v->set_type(std::move(t));
  }

  Node* add_node(const onnx::NodeProto& np, int index, Graph& g) {
    std::string name = np.name().empty() ? np.op_type() + "_" + std::to_string(index) : np.name();
    std::string where = "node '" + name + "' (" + np.op_type() + ")";
    if (np.op_type().empty()) fail("node '" + name + "' has no op_type");
    std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    if (!g.opsets().count(domain))
      fail(where + " is in domain '" + (domain.empty() ? "ai.onnx" : domain) +
           "', which the model does not import an opset for");
    std::vector<std::string> outs;
    std::unordered_set<std::string> seen;
    for (const auto& o : np.output()) {
      if (o.empty()) {
        outs.push_back(fresh_name(g, name));
        continue;
      }
      if (Value* prev = g.find(o))
        fail(where + " output '" + o + "' is already defined" +
             (prev->producer() ? " by node '" + prev->producer()->name() + "'" : " as a graph input or initializer"));
      if (!seen.insert(o).second) fail(where + " lists output '" + o + "' twice");
      outs.push_back(o);
    }
    return g.add_node(np.op_type(), {}, outs, domain, name);
  }

  void link_node(onnx::NodeProto& np, Node& n, Graph& g) {
    n.set_source(node_source(np));
    for (const auto& entry : node_metadata(np)) {
      if (entry.first != kStepPartKey) continue;
      const std::string& name = entry.second;
      auto part = std::find_if(std::begin(kStepParts), std::end(kStepParts),
                               [&](StepPart p) { return name == step_part_name(p); });
      if (part == std::end(kStepParts))
        fail("node '" + n.name() + "' (" + n.op_type() + ") has " + kStepPartKey + " '" + name +
             "', expected forward, backward or optimizer");
      n.set_part(*part);
    }
    for (int i = 0; i < np.input_size(); ++i) {
      const std::string& in = np.input(i);
      if (in.empty()) {
        n.set_input(i, nullptr);  // an omitted optional input
        continue;
      }
      Value* v = g.find(in);
      if (!v) n.fail("input '" + in + "' is never defined (no graph input, initializer or node output has that name)");
      n.set_input(i, v);
    }
    for (auto& a : *np.mutable_attribute()) {
      if (a.name().empty()) n.fail("has an attribute without a name");
      if (n.has_attr(a.name())) n.fail("has attribute '" + a.name() + "' twice");
      n.set_attr(a.name(), attribute_from_proto(a, n, g));
    }
  }

  Attribute attribute_from_proto(onnx::AttributeProto& a, Node& n, Graph& g) {
    if (!a.ref_attr_name().empty())
      n.fail("attribute '" + a.name() + "' refers to function attribute '" + a.ref_attr_name() +
             "'; tcc does not import ONNX functions");
    switch (attribute_type(a)) {
      case onnx::AttributeProto::INT: return Attribute::of_int(a.i());
      case onnx::AttributeProto::FLOAT: return Attribute::of_float(a.f());
      case onnx::AttributeProto::STRING: return Attribute::of_string(a.s());
      case onnx::AttributeProto::INTS: return Attribute::of_ints({a.ints().begin(), a.ints().end()});
      case onnx::AttributeProto::FLOATS: return Attribute::of_floats({a.floats().begin(), a.floats().end()});
      case onnx::AttributeProto::STRINGS: return Attribute::of_strings({a.strings().begin(), a.strings().end()});
      case onnx::AttributeProto::TENSOR: {
        std::string context = "node '" + n.name() + "' (" + n.op_type() + ") attribute '" + a.name() + "': ";
        return Attribute::of_tensor(tensor_from_proto(std::move(*a.mutable_t()), {file_, data_dir_, context}));
      }
      case onnx::AttributeProto::GRAPH: {
        auto region = std::make_shared<Graph>();
        region->set_parent(&g, &n);
        import_graph(*a.mutable_g(), *region);
        return Attribute::of_graph(std::move(region));
      }
      case onnx::AttributeProto::TYPE_PROTO: return Attribute::of_type(type_from_proto(a.tp(), a.name()));
      default:
        n.fail("attribute '" + a.name() + "' has type " + onnx::AttributeProto_AttributeType_Name(a.type()) +
               ", which tcc does not support");
    }
  }

  // Producers from before IR version 2 leave `type` unset; the field present tells.
  static onnx::AttributeProto::AttributeType attribute_type(const onnx::AttributeProto& a) {
    if (a.type() != onnx::AttributeProto::UNDEFINED) return a.type();
    if (a.has_g()) return onnx::AttributeProto::GRAPH;
    if (a.has_tp()) return onnx::AttributeProto::TYPE_PROTO;
    if (a.has_t()) return onnx::AttributeProto::TENSOR;
    if (a.has_f()) return onnx::AttributeProto::FLOAT;
    if (a.has_i()) return onnx::AttributeProto::INT;
    if (a.has_s()) return onnx::AttributeProto::STRING;
    if (a.floats_size()) return onnx::AttributeProto::FLOATS;
    if (a.ints_size()) return onnx::AttributeProto::INTS;
    if (a.strings_size()) return onnx::AttributeProto::STRINGS;
    return onnx::AttributeProto::UNDEFINED;
  }

  // ONNX requires topological order but some producers do not honour it: sort
  // when needed, and name a node on the cycle when there is one.
  void ensure_topological_order(Graph& g) const {
    std::unordered_map<const Node*, size_t> index;
    for (size_t i = 0; i < g.nodes().size(); ++i) index[g.nodes()[i].get()] = i;
    std::unordered_map<const Node*, std::vector<const Node*>> deps;
    bool ordered = true;
    for (const auto& up : g.nodes()) {
      const Node* n = up.get();
      std::vector<const Node*>& d = deps[n];
      collect_deps(*n, g, d);
      for (const Node* p : d) ordered = ordered && index[p] < index[n];
    }
    if (ordered) return;
    if (const Node* c = node_on_cycle(g, deps))
      fail("the graph has a cycle through node '" + c->name() + "' (" + c->op_type() + ")");
    TCC_CHECK(g.topo_sort()) << "topo_sort failed on an acyclic graph";
  }

  // Nodes of `g` whose outputs `n` or its regions read.
  static void collect_deps(const Node& n, const Graph& g, std::vector<const Node*>& out) {
    for (const Value* v : n.inputs())
      if (v && v->producer() && v->producer()->graph() == &g) out.push_back(v->producer());
    for (const Graph* r : n.regions())
      for (const auto& rn : r->nodes()) collect_deps(*rn, g, out);
  }

  // Iterative depth-first search (graphs can be deep chains): a node reached
  // again while still on the path lies on a cycle.
  static const Node* node_on_cycle(const Graph& g,
                                   const std::unordered_map<const Node*, std::vector<const Node*>>& deps) {
    enum class Mark { None, OnPath, Done };
    std::unordered_map<const Node*, Mark> mark;
    for (const auto& root : g.nodes()) {
      if (mark[root.get()] != Mark::None) continue;
      std::vector<std::pair<const Node*, size_t>> stack{{root.get(), 0}};
      mark[root.get()] = Mark::OnPath;
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        const auto& d = deps.at(n);
        if (next == d.size()) {
          mark[n] = Mark::Done;
          stack.pop_back();
          continue;
        }
        const Node* p = d[next++];
        if (mark[p] == Mark::OnPath) return p;
        if (mark[p] == Mark::None) {
          mark[p] = Mark::OnPath;
          stack.emplace_back(p, 0);
        }
      }
    }
    return nullptr;
  }

  std::string file_;
  std::string data_dir_;
  std::unordered_set<std::string> reserved_;
};

}  // namespace

std::unique_ptr<Model> import_onnx_bytes(const std::string& bytes, const std::string& path) {
  std::string file = path.empty() ? "<memory>" : path;
  if (bytes.empty()) throw InputError(file + ": not a valid ONNX model (the file is empty)");
  onnx::ModelProto mp;
  if (!mp.ParseFromString(bytes)) throw InputError(file + ": not a valid ONNX model (protobuf parse failed)");
  std::string data_dir;
  if (!path.empty()) {
    data_dir = std::filesystem::path(path).parent_path().string();
    if (data_dir.empty()) data_dir = ".";
  }
  auto m = Importer(file, data_dir).run(mp);
  m->path = path;
  return m;
}

std::unique_ptr<Model> import_onnx_file(const std::string& path) {
  return import_onnx_bytes(read_file_bytes(path, "model file"), path);
}

}  // namespace tcc
