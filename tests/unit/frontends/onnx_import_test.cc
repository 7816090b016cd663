// ONNX importer: ModelProtos built here with the protobuf API, imported, and the
// resulting IR (or the error message) checked.
#include "frontends/onnx/onnx_importer.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/unit/support/input_error.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

onnx::ModelProto make_model(int64_t opset = 17) {
  onnx::ModelProto mp;
  mp.set_ir_version(8);
  auto* op = mp.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  mp.mutable_graph()->set_name("main");
  return mp;
}

// Dims spelled as text: "3" is a dim_value, "?" has neither field, anything
// else is a dim_param.
void set_tensor_type(onnx::TypeProto* t, int elem_type, const std::vector<std::string>& dims) {
  auto* tt = t->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (d == "?") continue;
    if (d.find_first_not_of("0123456789") == std::string::npos) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

onnx::ValueInfoProto* add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                                const std::string& name, int elem_type, const std::vector<std::string>& dims) {
  auto* vi = list->Add();
  vi->set_name(name);
  set_tensor_type(vi->mutable_type(), elem_type, dims);
  return vi;
}

onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& ins,
                          const std::vector<std::string>& outs, const std::string& name = "") {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : ins) n->add_input(i);
  for (const auto& o : outs) n->add_output(o);
  return n;
}

onnx::TensorProto* add_raw_f32(onnx::GraphProto* g, const std::string& name, const std::vector<float>& v,
                               const std::vector<int64_t>& dims) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  return t;
}

std::string bytes_of(const onnx::ModelProto& mp) {
  std::string s;
  EXPECT_TRUE(mp.SerializeToString(&s));
  return s;
}

std::unique_ptr<Model> import(const onnx::ModelProto& mp, const std::string& path = "m.onnx") {
  return import_onnx_bytes(bytes_of(mp), path);
}

// The InputError message importing these bytes gives.
std::string error_of_bytes(const std::string& bytes, const std::string& path = "m.onnx") {
  return input_error([&] { import_onnx_bytes(bytes, path); });
}
std::string error_of(const onnx::ModelProto& mp, const std::string& path = "m.onnx") {
  return error_of_bytes(bytes_of(mp), path);
}

// A Relu model y = relu(x) to start tests from.
onnx::ModelProto relu_model() {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {"batch", "4"});
  add_node(g, "Relu", {"x"}, {"y"}, "relu");
  add_value(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {"batch", "4"});
  return mp;
}

TEST(OnnxImport, ModelFieldsAndOpsets) {
  onnx::ModelProto mp = relu_model();
  mp.set_producer_name("pytorch");
  mp.set_producer_version("2.11");
  mp.set_ir_version(9);
  auto* md = mp.add_metadata_props();
  md->set_key("author");
  md->set_value("tcc");
  auto* ms = mp.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  auto m = import(mp);
  EXPECT_EQ(m->producer, "pytorch 2.11");
  EXPECT_EQ(m->ir_version, 9);
  EXPECT_EQ(m->metadata.at("author"), "tcc");
  EXPECT_EQ(m->path, "m.onnx");
  EXPECT_EQ(m->graph->file(), "m.onnx");
  EXPECT_EQ(m->graph->name(), "main");
  EXPECT_EQ(m->graph->opsets().at(""), 17);
  EXPECT_EQ(m->graph->opsets().at("com.microsoft"), 1);
}

TEST(OnnxImport, AiOnnxDomainIsTheDefaultDomain) {
  onnx::ModelProto mp = relu_model();
  mp.mutable_opset_import(0)->set_domain("ai.onnx");
  mp.mutable_graph()->mutable_node(0)->set_domain("ai.onnx");
  auto m = import(mp);
  EXPECT_EQ(m->graph->opsets().at(""), 17);
  EXPECT_EQ(m->graph->nodes()[0]->domain(), "");
  EXPECT_EQ(m->graph->nodes()[0]->opset(), 17);
}

TEST(OnnxImport, InputTypesWithSymbolicDims) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {"batch", "seq*2", "3", "?", "batch size"});
  add_value(g->mutable_input(), "ids", onnx::TensorProto::INT64, {"2*seq"});
  auto* unranked = g->add_input();
  unranked->set_name("u");
  unranked->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT16);
  auto* seq = g->add_input();
  seq->set_name("s");
  set_tensor_type(seq->mutable_type()->mutable_sequence_type()->mutable_elem_type(), onnx::TensorProto::INT32, {"n"});
  auto* opt = g->add_input();
  opt->set_name("o");
  set_tensor_type(opt->mutable_type()->mutable_optional_type()->mutable_elem_type(), onnx::TensorProto::BOOL, {});
  add_node(g, "Identity", {"x"}, {"y"});
  add_value(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {});

  auto m = import(mp);
  const auto& ins = m->graph->inputs();
  ASSERT_EQ(ins.size(), 5u);
  EXPECT_EQ(ins[0]->name(), "x");
  EXPECT_EQ(ins[0]->type().str(), "f32[batch, seq*2, 3, ?, batch_size]");
  EXPECT_TRUE(ins[0]->type().shape()[1].is_symbolic());
  EXPECT_TRUE(ins[0]->type().shape()[2].is_static());
  EXPECT_TRUE(ins[0]->type().shape()[3].is_unknown());
  EXPECT_EQ(ins[1]->type().shape()[0], ins[0]->type().shape()[1]);  // 2*seq == seq*2
  EXPECT_EQ(ins[2]->type().str(), "f16[*]");
  EXPECT_EQ(ins[3]->type().kind(), Type::Kind::Sequence);
  EXPECT_EQ(ins[3]->type().elem().str(), "i32[n]");
  EXPECT_EQ(ins[4]->type().kind(), Type::Kind::Optional);
  EXPECT_EQ(ins[4]->type().elem().str(), "bool[]");
  EXPECT_TRUE(ins[0]->is_graph_input());
}

TEST(OnnxImport, NodesAttributesAndNames) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {"2"});
  // Clip with an omitted min ("") and two nodes without names or output names.
  add_node(g, "Clip", {"x", "", "x"}, {"c"});
  auto* n = add_node(g, "Custom", {"c"}, {"", "d"});
  auto attr = [&](const std::string& name, onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  };
  attr("i", onnx::AttributeProto::INT)->set_i(-7);
  attr("f", onnx::AttributeProto::FLOAT)->set_f(0.5f);
  attr("s", onnx::AttributeProto::STRING)->set_s("NOTSET");
  auto* ints = attr("ints", onnx::AttributeProto::INTS);
  ints->add_ints(1);
  ints->add_ints(-1);
  auto* floats = attr("floats", onnx::AttributeProto::FLOATS);
  floats->add_floats(1.5f);
  auto* strings = attr("strings", onnx::AttributeProto::STRINGS);
  strings->add_strings("a");
  strings->add_strings("b");
  auto* t = attr("t", onnx::AttributeProto::TENSOR)->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(2);
  t->add_int64_data(3);
  t->add_int64_data(-4);
  n->set_domain("custom");
  auto* cd = mp.add_opset_import();
  cd->set_domain("custom");
  cd->set_version(1);
  add_value(g->mutable_output(), "d", onnx::TensorProto::FLOAT, {"2"});

  auto m = import(mp);
  const auto& nodes = m->graph->nodes();
  ASSERT_EQ(nodes.size(), 2u);
  const Node& clip = *nodes[0];
  EXPECT_EQ(clip.name(), "Clip_0");
  EXPECT_EQ(clip.num_inputs(), 3u);
  EXPECT_EQ(clip.input(0), m->graph->inputs()[0]);
  EXPECT_FALSE(clip.has_input(1));
  EXPECT_EQ(clip.input(2), m->graph->inputs()[0]);
  const Node& custom = *nodes[1];
  EXPECT_EQ(custom.name(), "Custom_1");
  EXPECT_EQ(custom.domain(), "custom");
  EXPECT_EQ(custom.input(0), clip.output(0));
  ASSERT_EQ(custom.num_outputs(), 2u);
  EXPECT_EQ(custom.output(0)->name(), "Custom_1.0");
  EXPECT_EQ(custom.output(1)->name(), "d");
  EXPECT_EQ(custom.get_int("i", 0), -7);
  EXPECT_EQ(custom.get_float("f", 0), 0.5f);
  EXPECT_EQ(custom.get_string("s", ""), "NOTSET");
  EXPECT_EQ(custom.get_ints("ints"), (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(custom.get_floats("floats"), (std::vector<float>{1.5f}));
  EXPECT_EQ(custom.attr("strings")->strings, (std::vector<std::string>{"a", "b"}));
  ASSERT_NE(custom.get_tensor("t"), nullptr);
  EXPECT_TRUE(custom.get_tensor("t")->identical(Tensor::from_i64({3, -4})));
  EXPECT_EQ(m->graph->outputs().at(0), custom.output(1));
}

TEST(OnnxImport, IfWithThenAndElseBranchesReadingOuterScope) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "cond", onnx::TensorProto::BOOL, {});
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {"n"});
  auto* node = add_node(g, "If", {"cond"}, {"y"}, "if");
  auto branch = [&](const std::string& attr_name, const std::string& op, const std::string& out) {
    auto* a = node->add_attribute();
    a->set_name(attr_name);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* b = a->mutable_g();
    b->set_name(attr_name);
    add_node(b, op, {"x"}, {out});
    add_value(b->mutable_output(), out, onnx::TensorProto::FLOAT, {"n"});
  };
  branch("then_branch", "Identity", "t_out");
  branch("else_branch", "Neg", "e_out");
  add_value(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {"n"});

  auto m = import(mp);
  const Graph& main = *m->graph;
  Value* x = main.inputs()[1];
  const Node& if_node = *main.nodes().at(0);
  std::vector<Graph*> regions = if_node.regions();
  ASSERT_EQ(regions.size(), 2u);  // attribute-name order: else, then
  Graph* then_g = if_node.get_graph("then_branch");
  Graph* else_g = if_node.get_graph("else_branch");
  ASSERT_TRUE(then_g && else_g);
  for (Graph* r : regions) {
    EXPECT_EQ(r->parent(), &main);
    EXPECT_EQ(r->parent_node(), &if_node);
    EXPECT_EQ(r->file(), "m.onnx");
    ASSERT_EQ(r->nodes().size(), 1u);
    EXPECT_EQ(r->nodes()[0]->input(0), x);  // the outer value itself
  }
  EXPECT_EQ(then_g->name(), "then_branch");
  EXPECT_EQ(then_g->nodes()[0]->op_type(), "Identity");
  EXPECT_EQ(else_g->nodes()[0]->op_type(), "Neg");
  EXPECT_EQ(then_g->outputs().at(0)->name(), "t_out");
  EXPECT_EQ(else_g->outputs().at(0)->type().str(), "f32[n]");
  EXPECT_EQ(main.find("t_out"), nullptr);  // region values stay in the region
}

TEST(OnnxImport, InitializersRawAndTypedFields) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_raw_f32(g, "w_raw", {1.f, 2.f, 3.f, 4.f}, {2, 2});
  // Old IR versions list weights as inputs too.
  add_value(g->mutable_input(), "w_raw", onnx::TensorProto::FLOAT, {"2", "2"});
  auto typed = [&](const std::string& name, int dt, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(dt);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  };
  auto* wf = typed("w_f32", onnx::TensorProto::FLOAT, {2});
  wf->add_float_data(0.25f);
  wf->add_float_data(-8.f);
  auto* wh = typed("w_f16", onnx::TensorProto::FLOAT16, {2});
  wh->add_int32_data(0x3C00);  // 1.0
  wh->add_int32_data(0xC000);  // -2.0
  auto* wb = typed("w_bf16", onnx::TensorProto::BFLOAT16, {1});
  wb->add_int32_data(0x4040);  // 3.0
  auto* wi = typed("w_i64", onnx::TensorProto::INT64, {3});
  for (int64_t v : {int64_t{-1}, int64_t{0}, int64_t{1} << 40}) wi->add_int64_data(v);
  auto* wi8 = typed("w_i8", onnx::TensorProto::INT8, {2});
  wi8->add_int32_data(-128);
  wi8->add_int32_data(127);
  auto* wbool = typed("w_bool", onnx::TensorProto::BOOL, {2});
  wbool->add_int32_data(1);
  wbool->add_int32_data(0);
  auto* wd = typed("w_f64", onnx::TensorProto::DOUBLE, {});
  wd->add_double_data(0.1);
  auto* wu = typed("w_u32", onnx::TensorProto::UINT32, {1});
  wu->add_uint64_data(4000000000u);
  auto* ws = typed("w_str", onnx::TensorProto::STRING, {2});
  ws->add_string_data("hello");
  ws->add_string_data("");
  typed("w_empty", onnx::TensorProto::FLOAT, {0, 3});
  add_node(g, "Identity", {"w_raw"}, {"y"});
  add_value(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {});

  auto m = import(mp);
  const Graph& gr = *m->graph;
  EXPECT_TRUE(gr.inputs().empty());  // w_raw is an initializer, not an input
  ASSERT_EQ(gr.initializers().size(), 11u);
  auto init = [&](const std::string& n) -> const Tensor& {
    Value* v = gr.find(n);
    EXPECT_TRUE(v && v->is_initializer()) << n;
    return v->initializer();
  };
  EXPECT_TRUE(init("w_raw").identical(Tensor::from_f32({1, 2, 3, 4}, {2, 2})));
  EXPECT_EQ(gr.find("w_raw")->type().str(), "f32[2, 2]");
  EXPECT_TRUE(init("w_f32").identical(Tensor::from_f32({0.25f, -8.f})));
  EXPECT_EQ(init("w_f16").dtype(), DType::F16);
  EXPECT_EQ(init("w_f16").get_f64(0), 1.0);
  EXPECT_EQ(init("w_f16").get_f64(1), -2.0);
  EXPECT_EQ(init("w_bf16").get_f64(0), 3.0);
  EXPECT_EQ(init("w_i64").to_i64_vector(), (std::vector<int64_t>{-1, 0, int64_t{1} << 40}));
  EXPECT_EQ(init("w_i8").to_i64_vector(), (std::vector<int64_t>{-128, 127}));
  EXPECT_EQ(init("w_bool").dtype(), DType::Bool);
  EXPECT_EQ(init("w_bool").to_i64_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(init("w_f64").get_f64(0), 0.1);
  EXPECT_EQ(init("w_f64").rank(), 0u);
  EXPECT_EQ(init("w_u32").get_f64(0), 4000000000.0);
  EXPECT_EQ(init("w_str").strings(), (std::vector<std::string>{"hello", ""}));
  EXPECT_EQ(init("w_empty").numel(), 0);
  EXPECT_EQ(init("w_empty").shape(), (std::vector<int64_t>{0, 3}));
}

TEST(OnnxImport, DeclaredOutputAndValueInfoTypesAreSet) {
  onnx::ModelProto mp = relu_model();
  auto* g = mp.mutable_graph();
  add_node(g, "Neg", {"y"}, {"z"}, "neg");
  add_value(g->mutable_value_info(), "z", onnx::TensorProto::FLOAT, {"batch", "4"});
  add_value(g->mutable_value_info(), "stale", onnx::TensorProto::FLOAT, {});  // names nothing: ignored
  auto m = import(mp);
  EXPECT_EQ(m->graph->find("y")->type().str(), "f32[batch, 4]");
  EXPECT_EQ(m->graph->find("z")->type().str(), "f32[batch, 4]");
}

TEST(OnnxImport, OutOfOrderNodesAreSorted) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {});
  add_node(g, "Neg", {"a"}, {"b"}, "second");
  add_node(g, "Relu", {"x"}, {"a"}, "first");
  add_value(g->mutable_output(), "b", onnx::TensorProto::FLOAT, {});
  auto m = import(mp);
  ASSERT_EQ(m->graph->nodes().size(), 2u);
  EXPECT_EQ(m->graph->nodes()[0]->name(), "first");
  EXPECT_EQ(m->graph->nodes()[1]->name(), "second");
  EXPECT_EQ(m->graph->nodes()[1]->input(0), m->graph->nodes()[0]->output(0));
}

TEST(OnnxImport, SourceLocationsFromMetadataAndDocString) {
  onnx::ModelProto mp = relu_model();
  auto* g = mp.mutable_graph();
  // NodeProto.metadata_props (field 9) is newer than the linked ONNX classes: write it as raw fields.
  auto add_meta = [](onnx::NodeProto* n, const std::string& key, const std::string& value) {
    onnx::StringStringEntryProto e;
    e.set_key(key);
    e.set_value(value);
    n->mutable_unknown_fields()->AddLengthDelimited(9, e.SerializeAsString());
  };
  add_meta(g->mutable_node(0), "pkg.torch.onnx.stack_trace",
           "File \"/lib/torch/nn/module.py\", line 1700, in _call_impl\n"
           "File \"model.py\", line 42, in forward\n    return self.relu(x)\n");
  auto* n2 = add_node(g, "Neg", {"y"}, {"z"}, "neg");
  n2->set_doc_string("  blocks.0.mlp: Linear\nmore detail");
  auto* n3 = add_node(g, "Neg", {"z"}, {"w"}, "neg2");
  add_meta(n3, "source", "layers.py:7");
  auto m = import(mp);
  EXPECT_EQ(m->graph->nodes()[0]->source(), "model.py:42");
  EXPECT_EQ(m->graph->nodes()[1]->source(), "blocks.0.mlp: Linear");
  EXPECT_EQ(m->graph->nodes()[2]->source(), "layers.py:7");
}

// A model folder holding weights/w.bin (3 floats after a 6-byte header) and a
// file outside the folder, for the external-data rules.
class OnnxExternalData : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "model" / "weights");
    write(dir_ / "model" / "weights" / "w.bin");
    write(dir_ / "outside.bin");
  }

  void write(const fs::path& p) {
    std::ofstream f(p, std::ios::binary);
    f.write("HEADER", 6);
    f.write(reinterpret_cast<const char*>(w_.data()), 12);
  }

  onnx::ModelProto model(const std::string& location, const std::string& offset = "6",
                         const std::string& length = "12") {
    onnx::ModelProto mp = relu_model();
    auto* t = mp.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(3);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair{"location", location}, std::pair{"offset", offset}, std::pair{"length", length}}) {
      if (v.empty()) continue;
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    return mp;
  }
  std::string model_path() const { return (dir_ / "model" / "model.onnx").string(); }
  std::vector<float> w_ = {1.5f, -2.f, 3.f};
};

TEST_F(OnnxExternalData, FileInsideTheFolderIsRead) {
  {
    std::ofstream f(model_path(), std::ios::binary);
    f << bytes_of(model("weights/w.bin"));
  }
  auto m = import_onnx_file(model_path());
  EXPECT_TRUE(m->graph->find("w")->initializer().identical(Tensor::from_f32(w_)));
  // Without length the data runs to the end of the file.
  auto m2 = import(model("weights/w.bin", "6", ""), model_path());
  EXPECT_TRUE(m2->graph->find("w")->initializer().identical(Tensor::from_f32(w_)));
}

TEST_F(OnnxExternalData, AbsolutePathIsRefused) {
  std::string abs = (dir_ / "model" / "weights" / "w.bin").string();
  std::string e = error_of(model(abs), model_path());
  EXPECT_NE(e.find(model_path() + ": tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("'" + abs + "', which is absolute"), std::string::npos) << e;
}

TEST_F(OnnxExternalData, DotDotIsRefused) {
  std::string e = error_of(model("../outside.bin"), model_path());
  EXPECT_NE(e.find("tensor 'w' has external data path '../outside.bin', which contains '..'"), std::string::npos)
      << e;
}

TEST_F(OnnxExternalData, SymlinkLeadingOutsideIsRefused) {
  fs::create_symlink(dir_ / "outside.bin", dir_ / "model" / "link.bin");
  std::string e = error_of(model("link.bin"), model_path());
  EXPECT_NE(e.find("tensor 'w' has external data path 'link.bin', which resolves to '" +
                   fs::weakly_canonical(dir_ / "outside.bin").string() + "', outside the model's folder"),
            std::string::npos)
      << e;
}

TEST_F(OnnxExternalData, RangeOutsideTheFileIsRefused) {
  std::string past = error_of(model("weights/w.bin", "100", "12"), model_path());
  EXPECT_NE(past.find("tensor 'w' has external data offset 100, past the end of"), std::string::npos) << past;
  EXPECT_NE(past.find("w.bin' (18 bytes)"), std::string::npos) << past;
  std::string longer = error_of(model("weights/w.bin", "6", "16"), model_path());
  EXPECT_NE(longer.find("tensor 'w' has external data range [6, 6+16) outside"), std::string::npos) << longer;
  std::string shorter = error_of(model("weights/w.bin", "6", "8"), model_path());
  EXPECT_NE(shorter.find("has 8 bytes of external data"), std::string::npos) << shorter;
  EXPECT_NE(shorter.find("shape [3] of f32 needs 12 bytes"), std::string::npos) << shorter;
  std::string missing = error_of(model("weights/none.bin"), model_path());
  EXPECT_NE(missing.find("does not exist"), std::string::npos) << missing;
  std::string garbage = error_of(model("weights/w.bin", "-1"), model_path());
  EXPECT_NE(garbage.find("offset '-1', which is not a non-negative integer"), std::string::npos) << garbage;
}

TEST_F(OnnxExternalData, RefusedWithoutAModelPath) {
  std::string e = error_of(model("weights/w.bin"), "");
  EXPECT_EQ(e, "<memory>: tensor 'w' is stored in external file 'weights/w.bin', but the model was not read "
               "from a file; external data is read only from the model's folder");
}

// ---- malformed models --------------------------------------------------------

TEST(OnnxImportErrors, EmptyTruncatedAndRandomBytes) {
  EXPECT_EQ(error_of_bytes("", "e.onnx"), "e.onnx: not a valid ONNX model (the file is empty)");
  onnx::ModelProto mp = relu_model();
  add_raw_f32(mp.mutable_graph(), "w", std::vector<float>(64, 1.f), {64});
  std::string full = bytes_of(mp);
  EXPECT_EQ(error_of_bytes(full.substr(0, full.size() - 100), "t.onnx"),
            "t.onnx: not a valid ONNX model (protobuf parse failed)");
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 20; ++trial) {
    std::string random(256, '\0');
    for (char& c : random) c = static_cast<char>(rng());
    EXPECT_EQ(error_of_bytes(random, "r.onnx"), "r.onnx: not a valid ONNX model (protobuf parse failed)");
  }
}

TEST(OnnxImportErrors, OpsetOutsideTheSupportedRange) {
  EXPECT_EQ(error_of(make_model(24)),
            "m.onnx: the model imports default-domain opset 24, which is from the future: tcc reads opset 13 to 23");
  std::string old = error_of(make_model(11));
  EXPECT_NE(old.find("m.onnx: the model imports default-domain opset 11, but tcc reads opset 13 to 23"),
            std::string::npos)
      << old;
  onnx::ModelProto none = relu_model();
  none.clear_opset_import();
  EXPECT_EQ(error_of(none),
            "m.onnx: node 'relu' (Relu) is in domain 'ai.onnx', which the model does not import an opset for");
}

TEST(OnnxImportErrors, CycleIsReported) {
  onnx::ModelProto mp = make_model();
  auto* g = mp.mutable_graph();
  add_value(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {});
  add_node(g, "Add", {"x", "b"}, {"a"}, "n_a");
  add_node(g, "Relu", {"a"}, {"b"}, "n_b");
  add_value(g->mutable_output(), "b", onnx::TensorProto::FLOAT, {});
  std::string e = error_of(mp);
  EXPECT_TRUE(e == "m.onnx: the graph has a cycle through node 'n_a' (Add)" ||
              e == "m.onnx: the graph has a cycle through node 'n_b' (Relu)")
      << e;
  onnx::ModelProto self = relu_model();
  self.mutable_graph()->mutable_node(0)->set_input(0, "y");
  EXPECT_EQ(error_of(self), "m.onnx: the graph has a cycle through node 'relu' (Relu)");
}

TEST(OnnxImportErrors, UndefinedValue) {
  onnx::ModelProto mp = relu_model();
  mp.mutable_graph()->mutable_node(0)->set_input(0, "ghost");
  EXPECT_EQ(error_of(mp), "m.onnx: node 'relu' (Relu): input 'ghost' is never defined (no graph input, "
                          "initializer or node output has that name)");
  onnx::ModelProto out = relu_model();
  out.mutable_graph()->mutable_output(0)->set_name("nothing");
  EXPECT_EQ(error_of(out), "m.onnx: graph 'main' output 'nothing' is never defined");
}

TEST(OnnxImportErrors, DuplicateNames) {
  onnx::ModelProto mp = relu_model();
  add_node(mp.mutable_graph(), "Neg", {"x"}, {"y"}, "neg");
  EXPECT_EQ(error_of(mp), "m.onnx: node 'neg' (Neg) output 'y' is already defined by node 'relu'");
  onnx::ModelProto inputs = relu_model();
  add_value(inputs.mutable_graph()->mutable_input(), "x", onnx::TensorProto::FLOAT, {});
  EXPECT_EQ(error_of(inputs), "m.onnx: value name 'x' is defined more than once");
  onnx::ModelProto shadow = relu_model();
  add_node(shadow.mutable_graph(), "Neg", {"y"}, {"x"}, "neg");
  EXPECT_EQ(error_of(shadow), "m.onnx: node 'neg' (Neg) output 'x' is already defined as a graph input or initializer");
}

TEST(OnnxImportErrors, InitializerSizes) {
  onnx::ModelProto huge = relu_model();
  auto* t = huge.mutable_graph()->add_initializer();
  t->set_name("big");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(int64_t{1} << 40);
  t->add_dims(int64_t{1} << 40);
  t->add_float_data(1.f);
  EXPECT_EQ(error_of(huge),
            "m.onnx: tensor 'big' has shape [1099511627776, 1099511627776], whose element count overflows int64");
  // A large but countable shape with too little data is refused before anything is allocated.
  t->set_dims(1, 1 << 20);
  EXPECT_EQ(error_of(huge),
            "m.onnx: tensor 'big' has 1 elements in float_data but shape [1099511627776, 1048576] has "
            "1152921504606846976");
  onnx::ModelProto raw = relu_model();
  add_raw_f32(raw.mutable_graph(), "w", {1.f, 2.f}, {3});
  EXPECT_EQ(error_of(raw), "m.onnx: tensor 'w' has 8 bytes of raw_data but shape [3] of f32 needs 12 bytes");
  onnx::ModelProto neg = relu_model();
  add_raw_f32(neg.mutable_graph(), "w", {}, {-1});
  EXPECT_EQ(error_of(neg), "m.onnx: tensor 'w' has a negative dimension in shape [-1]");
  onnx::ModelProto complex = relu_model();
  auto* c = complex.mutable_graph()->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::COMPLEX64);
  EXPECT_EQ(error_of(complex), "m.onnx: tensor 'c' has data type 14 (COMPLEX64), which tcc does not support");
}

TEST(OnnxImportErrors, UnsupportedAttributeAndTypeKinds) {
  onnx::ModelProto ref = relu_model();
  auto* a = ref.mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("alpha");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_ref_attr_name("outer_alpha");
  EXPECT_EQ(error_of(ref), "m.onnx: node 'relu' (Relu): attribute 'alpha' refers to function attribute "
                           "'outer_alpha'; tcc does not import ONNX functions");
  onnx::ModelProto bad_tensor = relu_model();
  auto* at = bad_tensor.mutable_graph()->mutable_node(0)->add_attribute();
  at->set_name("value");
  at->set_type(onnx::AttributeProto::TENSOR);
  at->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  at->mutable_t()->add_dims(2);
  EXPECT_EQ(error_of(bad_tensor),
            "m.onnx: node 'relu' (Relu) attribute 'value': tensor has 0 elements in float_data but shape [2] has 2");
  onnx::ModelProto map = relu_model();
  map.mutable_graph()->mutable_input(0)->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::INT64);
  EXPECT_EQ(error_of(map), "m.onnx: value 'x' has a map, sparse or opaque type, which tcc does not support");
}

}  // namespace
}  // namespace tcc
