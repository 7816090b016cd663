// tcc IR -> ONNX ModelProto (see onnx_exporter.h).
#include "frontends/onnx/onnx_exporter.h"

#include <onnx/onnx_pb.h>

#include <fstream>

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

void graph_to_proto(const Graph& g, onnx::GraphProto* gp);

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
  }
}

void graph_to_proto(const Graph& g, onnx::GraphProto* gp) {
  gp->set_name(g.name().empty() ? "main" : g.name());
  for (const Value* v : g.inputs()) {
    value_info(*v, gp->add_input());
    if (v->is_initializer()) tensor_to_proto(v->initializer(), v->name(), gp->add_initializer());
  }
  for (const Value* v : g.initializers())
    if (!v->is_graph_input()) tensor_to_proto(v->initializer(), v->name(), gp->add_initializer());
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
    // The importer reads a source location back from the doc string's first line.
    if (!n->source().empty()) np->set_doc_string(n->source());
  }
  for (const Value* v : g.outputs()) value_info(*v, gp->add_output());
}

}  // namespace

std::string export_onnx_bytes(const Model& model) {
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
  graph_to_proto(*model.graph, mp.mutable_graph());
  std::string bytes;
  TCC_CHECK(mp.SerializeToString(&bytes)) << "serializing the ModelProto failed";
  return bytes;
}

void export_onnx_file(const Model& model, const std::string& path) {
  std::string bytes = export_onnx_bytes(model);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open for writing (--emit-onnx)");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw InputError(path + ": writing the ONNX model failed");
}

}  // namespace tcc
