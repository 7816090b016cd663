// tcc IR -> ONNX ModelProto (see onnx_exporter.h).
#include "frontends/onnx/onnx_exporter.h"

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "frontends/onnx/metadata_props.h"
#include "frontends/onnx/tensor_proto.h"

namespace tcc {

namespace {

// IR version 8 (ONNX 1.10): inputs with defaults, and what onnxruntime and the
// checker of the protobuf classes tcc links accept for opsets up to 23.
constexpr int64_t kIrVersion = 8;

void type_to_proto(const Type& t, onnx::TypeProto* p) {
  switch (t.kind()) {
    case Type::Kind::Unknown: return;
    case Type::Kind::Sequence: type_to_proto(t.elem(), p->mutable_sequence_type()->mutable_elem_type()); return;
    case Type::Kind::Optional: type_to_proto(t.elem(), p->mutable_optional_type()->mutable_elem_type()); return;
    case Type::Kind::Tensor: break;
  }
  onnx::TypeProto::Tensor* tt = p->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype()));
  if (!t.has_rank()) return;
  onnx::TensorShapeProto* shape = tt->mutable_shape();
  for (const Dim& d : t.shape()) {
    onnx::TensorShapeProto::Dimension* dp = shape->add_dim();
    if (d.is_static())
      dp->set_dim_value(d.value());
    else if (d.is_symbolic())
      dp->set_dim_param(d.expr().str());
  }
}

void value_info(const Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name());
  type_to_proto(v.type(), p->mutable_type());
}

// With `weights`, the graph's initializers are listed there (in the order they
// would take in gp) instead of being encoded: the writer streams their bytes.
void graph_to_proto(const Graph& g, onnx::GraphProto* gp, std::vector<const Value*>* weights = nullptr);

void attribute_to_proto(const std::string& name, const Attribute& a, onnx::AttributeProto* p) {
  p->set_name(name);
  switch (a.kind) {
    case Attribute::Kind::Int:
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(a.i);
      break;
    case Attribute::Kind::Float:
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(a.f);
      break;
    case Attribute::Kind::String:
      p->set_type(onnx::AttributeProto::STRING);
      p->set_s(a.s);
      break;
    case Attribute::Kind::Ints:
      p->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : a.ints) p->add_ints(v);
      break;
    case Attribute::Kind::Floats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (float v : a.floats) p->add_floats(v);
      break;
    case Attribute::Kind::Strings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const std::string& v : a.strings) p->add_strings(v);
      break;
    case Attribute::Kind::Tensor:
      p->set_type(onnx::AttributeProto::TENSOR);
      tensor_to_proto(a.t, "", p->mutable_t());
      break;
    case Attribute::Kind::Graph:
      p->set_type(onnx::AttributeProto::GRAPH);
      graph_to_proto(*a.g, p->mutable_g());
      break;
    case Attribute::Kind::Type:
      p->set_type(onnx::AttributeProto::TYPE_PROTO);
      type_to_proto(a.type, p->mutable_tp());
      break;
  }
}

void graph_to_proto(const Graph& g, onnx::GraphProto* gp, std::vector<const Value*>* weights) {
  gp->set_name(g.name().empty() ? "main" : g.name());
  auto add_initializer = [&](const Value* v) {
    if (weights) weights->push_back(v);
    else tensor_to_proto(v->initializer(), v->name(), gp->add_initializer());
  };
  for (const Value* v : g.inputs()) {
    value_info(*v, gp->add_input());
    if (v->is_initializer()) add_initializer(v);
  }
  for (const Value* v : g.initializers())
    if (!v->is_graph_input()) add_initializer(v);
  for (const auto& n : g.nodes()) {
    onnx::NodeProto* np = gp->add_node();
    np->set_name(n->name());
    np->set_op_type(n->op_type());
    if (!n->domain().empty()) np->set_domain(n->domain());
    for (const Value* in : n->inputs()) np->add_input(in ? in->name() : "");
    for (const Value* out : n->outputs()) {
      np->add_output(out->name());
      if (!out->type().is_unknown()) value_info(*out, gp->add_value_info());
    }
    for (const auto& [name, a] : n->attrs()) attribute_to_proto(name, a, np->add_attribute());
    // The importer reads a source location back from the doc string's first line, a training step's part
    // from the node's metadata.
    if (!n->source().empty()) np->set_doc_string(n->source());
    if (n->part() != StepPart::Forward) add_node_metadata(np, kStepPartKey, step_part_name(n->part()));
  }
  for (const Value* v : g.outputs()) value_info(*v, gp->add_output());
}

namespace pb = google::protobuf;

// The key and length that start a length-delimited field.
std::string field_prefix(int field, uint64_t length) {
  uint8_t buf[20];  // two varints of at most 10 bytes each
  uint8_t* end = pb::io::CodedOutputStream::WriteVarint32ToArray(
      pb::internal::WireFormatLite::MakeTag(field, pb::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED), buf);
  end = pb::io::CodedOutputStream::WriteVarint64ToArray(length, end);
  return std::string(reinterpret_cast<const char*>(buf), end - buf);
}

// One main-graph initializer as GraphProto.initializer bytes: the TensorProto
// without its data, then raw_data written straight from the tensor.
struct Weight {
  std::string head;            // the initializer field's prefix and the TensorProto's other fields
  std::string data_prefix;     // raw_data's key and length (empty for strings and 4-bit types, encoded in head)
  const Tensor* data = nullptr;
  uint64_t size() const { return head.size() + data_prefix.size() + (data ? data->nbytes() : 0); }
};

Weight encode_weight(const Value& v) {
  onnx::TensorProto p;
  Weight w;
  const Tensor& t = v.initializer();
  if (t.dtype() == DType::String || is_4bit(t.dtype())) {  // no byte-for-byte raw_data
    tensor_to_proto(t, v.name(), &p);
  } else {
    tensor_header_to_proto(t, v.name(), &p);
    w.data_prefix = field_prefix(onnx::TensorProto::kRawDataFieldNumber, t.nbytes());
    w.data = &t;
  }
  std::string fields = p.SerializeAsString();
  w.head = field_prefix(onnx::GraphProto::kInitializerFieldNumber,
                        fields.size() + w.data_prefix.size() + (w.data ? t.nbytes() : 0)) +
           fields;
  return w;
}

// Writes the ModelProto to `out` without building it whole in memory: the
// model's fields, then the graph field whose initializers' bytes come straight
// from the tensors, so a model's weights are copied once, into the stream.
void write_model(const Model& model, std::ostream& out, const std::string& path) {
  onnx::ModelProto mp;
  mp.set_ir_version(kIrVersion);
  mp.set_producer_name("tcc");
  for (const auto& [domain, version] : model.graph->opsets()) {
    onnx::OperatorSetIdProto* op = mp.add_opset_import();
    op->set_domain(domain);
    op->set_version(version);
  }
  for (const auto& [key, value] : model.metadata) {
    onnx::StringStringEntryProto* e = mp.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  }
  onnx::GraphProto graph;
  std::vector<const Value*> initializers;
  graph_to_proto(*model.graph, &graph, &initializers);
  std::vector<Weight> weights;
  std::string graph_fields = graph.SerializeAsString();
  uint64_t graph_size = graph_fields.size();
  for (const Value* v : initializers) {
    weights.push_back(encode_weight(*v));
    graph_size += weights.back().size();
  }
  std::string model_fields = mp.SerializeAsString();
  std::string graph_prefix = field_prefix(onnx::ModelProto::kGraphFieldNumber, graph_size);
  // protobuf reads no message of 2 GiB or more, so neither would any ONNX reader.
  uint64_t total = model_fields.size() + graph_prefix.size() + graph_size;
  if (total > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    throw InputError(path + ": the ONNX model would take " + std::to_string(total) +
                     " bytes, over protobuf's 2 GiB limit on one message");
  out << model_fields << graph_prefix << graph_fields;
  for (const Weight& w : weights) {
    out << w.head << w.data_prefix;
    if (w.data) out.write(reinterpret_cast<const char*>(w.data->raw()), static_cast<std::streamsize>(w.data->nbytes()));
  }
}

}  // namespace

std::string export_onnx_bytes(const Model& model) {
  std::ostringstream out;
  write_model(model, out, "<memory>");
  return std::move(out).str();
}

void export_onnx_file(const Model& model, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open for writing (--emit-onnx)");
  write_model(model, f, path);
  f.close();
  if (!f) throw InputError(path + ": writing the ONNX model failed");
}

}  // namespace tcc
