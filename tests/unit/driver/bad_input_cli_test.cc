// Bad input given to the whole `tcc` tool (issue #2, "Bad input"): each case
// must end in one clear message and exit code 2 from `tcc opt`, `tcc run
// --reference` and `tcc explain` alike, never a crash, a hang or a read
// outside the model's folder. The importer's own checks are tested at the API
// level in onnx_import_test.cc; these tests prove the driver reports them.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
  ASSERT_TRUE(f.good()) << p;
}

const fs::path kMlp = fs::path(TCC_SOURCE_DIR) / "tests" / "fixtures" / "mlp.onnx";

// tests/fixtures/mlp.onnx: input[batch, 32] -> Gemm '/fc1/Gemm' -> Relu
// '/relu/Relu' -> Gemm '/fc2/Gemm' -> output, weights as raw_data initializers.
onnx::ModelProto mlp_model() {
  onnx::ModelProto mp;
  EXPECT_TRUE(mp.ParseFromString(read_text(kMlp)));
  return mp;
}

onnx::NodeProto* node_named(onnx::ModelProto& mp, const std::string& name) {
  for (auto& n : *mp.mutable_graph()->mutable_node())
    if (n.name() == name) return &n;
  ADD_FAILURE() << "mlp.onnx has no node " << name;
  return mp.mutable_graph()->mutable_node(0);
}

onnx::TensorProto* initializer_named(onnx::ModelProto& mp, const std::string& name) {
  for (auto& t : *mp.mutable_graph()->mutable_initializer())
    if (t.name() == name) return &t;
  ADD_FAILURE() << "mlp.onnx has no initializer " << name;
  return mp.mutable_graph()->mutable_initializer(0);
}

class BadInput : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "model");
  }

  std::string model_path(const std::string& file = "model.onnx") const { return (dir_ / "model" / file).string(); }

  std::string write_model(const onnx::ModelProto& mp) {
    std::string bytes;
    EXPECT_TRUE(mp.SerializeToString(&bytes));
    write_file(model_path(), bytes);
    return model_path();
  }

  // The three commands that read a model; `run` writes into the temporary
  // directory so a test that wrongly succeeds leaves nothing behind.
  std::vector<std::string> commands_on(const std::string& model) const {
    std::string m = shell_quote(model);
    return {"opt " + m, "run " + m + " --reference -o " + shell_quote((dir_ / "out").string()), "explain " + m};
  }

  // Runs `args`, expecting exit 2 and one message that starts by naming
  // `file` and contains every fragment.
  void expect_input_error(const std::string& args, const std::string& file,
                          const std::vector<std::string>& fragments) const {
    SCOPED_TRACE("tcc " + args);
    CliResult r = run_tcc(args);
    EXPECT_EQ(r.code, 2) << r.output;
    std::string head = "tcc: error: " + file;
    EXPECT_EQ(r.output.compare(0, head.size(), head), 0) << "expected a message starting with '" << head << "', got:\n"
                                                         << r.output;
    for (const auto& f : fragments) EXPECT_NE(r.output.find(f), std::string::npos) << f << "\n" << r.output;
  }

  void expect_input_error_everywhere(const std::string& model, const std::vector<std::string>& fragments) const {
    for (const auto& args : commands_on(model)) expect_input_error(args, model, fragments);
  }
};

TEST_F(BadInput, EmptyFile) {
  write_file(model_path(), "");
  expect_input_error_everywhere(model_path(), {"model file is empty"});
}

// A path that reads forever (a device) or is no file at all is refused before
// any read; a FIFO nobody writes to is tensor_io_test.cc's (it waits seconds).
TEST_F(BadInput, DevicesAndDirectoriesAreRefused) {
  expect_input_error_everywhere("/dev/zero", {"expected model file, found a device or socket"});
  expect_input_error_everywhere(dir_.string(), {"expected model file, found a directory"});
}

TEST_F(BadInput, TruncatedOnnx) {
  std::string full = read_text(kMlp);
  ASSERT_GT(full.size(), 1000u);
  for (int eighth = 1; eighth < 8; ++eighth) {
    SCOPED_TRACE(std::to_string(eighth) + "/8 of mlp.onnx");
    write_file(model_path(), full.substr(0, full.size() * eighth / 8));
    expect_input_error_everywhere(model_path(), {"not a valid ONNX model (protobuf parse failed)"});
  }
}

TEST_F(BadInput, RandomBytes) {
  std::mt19937 rng(2024);
  for (size_t size : {1, 7, 256, 4096}) {
    SCOPED_TRACE(std::to_string(size) + " random bytes");
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    write_file(model_path(), bytes);
    expect_input_error_everywhere(model_path(), {"not a valid ONNX model"});
  }
}

TEST_F(BadInput, Cycle) {
  // Relu reads the output of the Gemm that reads Relu.
  onnx::ModelProto mp = mlp_model();
  node_named(mp, "/relu/Relu")->set_input(0, "output");
  std::string model = write_model(mp);
  for (const auto& args : commands_on(model)) {
    SCOPED_TRACE("tcc " + args);
    CliResult r = run_tcc(args);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(r.output == "tcc: error: " + model + ": the graph has a cycle through node '/relu/Relu' (Relu)\n" ||
                r.output == "tcc: error: " + model + ": the graph has a cycle through node '/fc2/Gemm' (Gemm)\n")
        << r.output;
  }
}

TEST_F(BadInput, UndefinedValue) {
  onnx::ModelProto mp = mlp_model();
  node_named(mp, "/relu/Relu")->set_input(0, "ghost");
  expect_input_error_everywhere(write_model(mp),
                                {"node '/relu/Relu' (Relu) at mlp.py:9: input 'ghost' is never defined"});
}

TEST_F(BadInput, FutureOpset) {
  onnx::ModelProto mp = mlp_model();
  mp.mutable_opset_import(0)->set_version(24);
  expect_input_error_everywhere(write_model(mp), {"default-domain opset 24, which is from the future"});
  // The text IR too (a fuzzed 2^31 went past the schema checks, whose lookup takes an int).
  std::string model = model_path("model.tir");
  write_file(model, "graph g opset(ai.onnx: 2147483648) {\n  input %x: f32[2]\n  %y: f32[2] = Pow(%x) name(\"p\")\n"
                    "  output %y\n}\n");
  expect_input_error_everywhere(model, {"default-domain opset 2147483648 is from the future: tcc reads up to 23"});
}

TEST_F(BadInput, DuplicateValueNames) {
  onnx::ModelProto mp = mlp_model();
  auto* dup = mp.mutable_graph()->add_node();
  dup->set_name("dup");
  dup->set_op_type("Neg");
  dup->add_input("input");
  dup->add_output("/relu/Relu_output_0");
  expect_input_error_everywhere(write_model(mp),
                                {"node 'dup' (Neg) output '/relu/Relu_output_0' is already defined by node "
                                 "'/relu/Relu'"});
}

TEST_F(BadInput, InitializerDimsOverflowInt64) {
  onnx::ModelProto mp = mlp_model();
  auto* bias = initializer_named(mp, "fc1.bias");
  bias->clear_dims();
  bias->add_dims(int64_t{1} << 40);
  bias->add_dims(int64_t{1} << 40);
  expect_input_error_everywhere(write_model(mp),
                                {"tensor 'fc1.bias' has shape [1099511627776, 1099511627776], whose element "
                                 "count overflows int64"});
}

TEST_F(BadInput, GraphInputDimsOverflowInt64) {
  onnx::ModelProto mp = mlp_model();
  auto* shape = mp.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->set_dim_value(int64_t{1} << 62);
  expect_input_error_everywhere(write_model(mp),
                                {"value 'input' has type f32[4611686018427387904, 32] whose element count "
                                 "overflows a 64-bit integer"});
}

// fc1.weight (64x32 f32) moved to an external file named by `location`.
class BadInputExternalData : public BadInput {
 protected:
  std::string model_with_external_weight(const std::string& location) {
    onnx::ModelProto mp = mlp_model();
    auto* w = initializer_named(mp, "fc1.weight");
    // The refused file holds exactly the bytes the tensor needs, so only the
    // folder check can stop the read.
    write_file(outside(), w->raw_data());
    w->clear_raw_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = w->add_external_data();
    e->set_key("location");
    e->set_value(location);
    return write_model(mp);
  }
  fs::path outside() const { return dir_ / "outside.bin"; }
};

TEST_F(BadInputExternalData, AbsolutePathIsRefused) {
  std::string abs = outside().string();
  expect_input_error_everywhere(model_with_external_weight(abs),
                                {"tensor 'fc1.weight' has external data path '" + abs + "', which is absolute"});
}

TEST_F(BadInputExternalData, DotDotPathIsRefused) {
  expect_input_error_everywhere(model_with_external_weight("../outside.bin"),
                                {"tensor 'fc1.weight' has external data path '../outside.bin', which contains '..'"});
}

TEST_F(BadInputExternalData, SymlinkOutOfTheFolderIsRefused) {
  fs::create_symlink(outside(), dir_ / "model" / "link.bin");
  expect_input_error_everywhere(model_with_external_weight("link.bin"),
                                {"tensor 'fc1.weight' has external data path 'link.bin', which resolves to '" +
                                 fs::weakly_canonical(outside()).string() + "', outside the model's folder"});
}

// The MLP fixture with its Relu replaced by `op` of another domain, which tcc does not know.
onnx::ModelProto mlp_with_foreign_relu(const std::string& op, const std::string& domain) {
  onnx::ModelProto mp = mlp_model();
  auto* relu = node_named(mp, "/relu/Relu");
  relu->set_op_type(op);
  relu->set_domain(domain);
  auto* opset = mp.add_opset_import();
  opset->set_domain(domain);
  opset->set_version(1);
  return mp;
}

TEST_F(BadInput, UnsupportedOpInReferenceRunNamesTheNode) {
  // An op tcc does not know loads as an opaque node; only running it fails.
  std::string model = write_model(mlp_with_foreign_relu("Frobnicate", "com.example"));
  std::string inputs = (fs::path(TCC_SOURCE_DIR) / "tests" / "fixtures" / "mlp").string();
  expect_input_error(
      "run " + shell_quote(model) + " --reference --inputs " + shell_quote(inputs) + " -o " +
          shell_quote((dir_ / "out").string()),
      model,
      {"node '/relu/Relu' (Frobnicate) at mlp.py:9: op 'Frobnicate' (domain 'com.example') is not supported by "
       "tcc; the reference interpreter cannot run it"});
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(BadInput, UnsupportedOpInCompileNamesTheNode) {
  // An op of another domain (a training graph another exporter wrote, say) is
  // a named graph break in explain, and compile refuses it by name: no module
  // could run it.
  std::string model = write_model(mlp_with_foreign_relu("ReluGrad", "com.microsoft"));
  expect_input_error("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "module").string()), model,
                     {"node '/relu/Relu' (ReluGrad) at mlp.py:9: op 'ReluGrad' (domain 'com.microsoft') is not "
                      "supported by tcc; tcc has no implementation of it, on the GPU or the host, so a compiled "
                      "module could not run"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
  CliResult r = run_tcc("explain " + shell_quote(model));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("[unsupported_op] /relu/Relu (ReluGrad)"), std::string::npos) << r.output;
}

TEST_F(BadInput, CompileRefusesAnOutputWhoseSizeIsUnknown) {
  // An Expand to a shape read from tensor data has dims no rule can name; an
  // output of such dims used to crash compile as it looked for their symbols.
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %x: f32[2]\n"
             "  input %s: i64[2]\n"
             "  %y = Expand(%x, %s) name(\"expand\")\n"
             "  %z = Neg(%y) name(\"negate\")\n"
             "  output %z\n"
             "}\n");
  expect_input_error("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "module").string()), model,
                     {"node 'negate' (Neg): output 'z' has type f32[?, ?], whose size along axis 0 neither the "
                      "inputs' shapes nor a node's output give, so a compiled module cannot size it"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
}

TEST_F(BadInput, CompileRefusesAValueWhoseRankDependsOnData) {
  // The branches of an If on an input's value return different ranks, so the
  // output's rank is known only at run time: explain and the interpreter take
  // it, compile (which plans a buffer for every value) names it and refuses.
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %c: bool[]\n"
             "  input %x: f32[2, 3]\n"
             "  const %flat: i64[1] = [6]\n"
             "  %y: f32[*] = If(%c) {else_branch = graph e {\n"
             "      %f: f32[6] = Reshape(%x, %flat) name(\"flatten\")\n"
             "      output %f\n"
             "    }, then_branch = graph t {\n"
             "      output %x\n"
             "    }} name(\"pick\")\n"
             "  %z: f32[*] = Neg(%y) name(\"negate\")\n"
             "  output %z\n"
             "}\n");
  expect_input_error("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "module").string()), model,
                     {"node 'pick' (If): writes 'y' of type f32[*], whose shape depends on input data"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
  EXPECT_EQ(run_tcc("explain " + shell_quote(model)).code, 0);
}

TEST_F(BadInput, CompileRefusesASequenceOutputOfDataDependentLength) {
  // A module's outputs are tensors: a sequence output is flattened into its
  // elements, which a split by a size read from an input leaves unknown.
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %x: f32[4, 2]\n"
             "  input %k: i64[]\n"
             "  %s = SplitToSequence(%x, %k) name(\"split\")\n"
             "  output %s\n"
             "}\n");
  expect_input_error("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "module").string()), model,
                     {"node 'split' (SplitToSequence): output 's' is of type seq<f32[?, 2]> and its structure (length, "
                      "or whether it holds a value) depends on the data: this node computes it on the host"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
}

TEST_F(BadInput, NodeArityIsCheckedAgainstOnnxSchemas) {
  // A node missing a required input, with none in its place, or with more
  // inputs or fewer outputs than its op has: named before any rule reads it.
  struct Case {
    const char* body;
    const char* message;
  } cases[] = {
      {"  %y: f32[2] = Less() name(\"less\")\n", "node 'less' (Less): ONNX's Less-13 takes 2 inputs; input 0 is missing"},
      {"  const %s: i64[1] = [2]\n  %y: f32[2] = Reshape(none, %s) name(\"reshape\")\n",
       "node 'reshape' (Reshape): ONNX's Reshape-14 takes 2 inputs; input 0 is none"},
      {"  %y: f32[2] = Softmax(%x, %x) name(\"softmax\")\n",
       "node 'softmax' (Softmax): ONNX's Softmax-13 takes 1 input, the node has 2"},
      {"  const %k: i64[1] = [1]\n  %y: f32[1] = TopK(%x, %k) name(\"topk\")\n",
       "node 'topk' (TopK): ONNX's TopK-11 has 2 outputs, the node has 1"},
  };
  for (const Case& c : cases) {
    std::string model = model_path("model.tir");
    write_file(model, std::string("graph g opset(ai.onnx: 17) {\n  input %x: f32[2]\n") + c.body +
                          "  output %y\n}\n");
    expect_input_error_everywhere(model, {c.message});
  }
}

TEST_F(BadInput, InputTypesAreCheckedAgainstOnnxSchemas) {
  // Slice's starts and ends are integers: a float tensor there (a fuzzed
  // Gemm turned Slice, reading its weights) used to reach fusion, which put the
  // node in a kernel that then could not compute it (an internal error).
  struct Case {
    const char* body;
    const char* message;
  } cases[] = {
      {"  const %s: f32[1] = [0.0]\n  %y: f32[2] = Slice(%x, %s, %s) name(\"slice\")\n",
       "node 'slice' (Slice): ONNX's Slice-13 takes input 1 ('starts') of tensor(int32), tensor(int64); 's' is "
       "tensor(float)"},
      {"  const %i: i64[2] = [1, 2]\n  %y: f32[2] = Sqrt(%i) name(\"sqrt\")\n",
       "node 'sqrt' (Sqrt): ONNX's Sqrt-13 takes input 0 ('X') of tensor(bfloat16), tensor(double), tensor(float), "
       "tensor(float16); 'i' is tensor(int64)"},
      // Each allowed alone, but A, B and C are one type T.
      {"  const %w: f32[2, 2] = [1.0, 0.0, 0.0, 1.0]\n  const %c: i32[2] = [1, 2]\n"
       "  %x2: f32[1, 2] = Unsqueeze(%x, %zero) name(\"unsqueeze\")\n"
       "  %y: f32[1, 2] = Gemm(%x2, %w, %c) name(\"gemm\")\n",
       "node 'gemm' (Gemm): ONNX's Gemm-13 takes inputs 0 and 2 of one type T; 'x2' is f32, 'c' i32"},
  };
  for (const Case& c : cases) {
    std::string model = model_path("model.tir");
    write_file(model, std::string("graph g opset(ai.onnx: 17) {\n  input %x: f32[2]\n  const %zero: i64[1] = [0]\n") +
                          c.body + "  output %y\n}\n");
    expect_input_error_everywhere(model, {c.message});
  }
  // Above opset 17 the library's schemas are older than the node's, but a
  // single-output op still has one output (a fuzzed Tanh with two reached the
  // lowering).
  std::string model = model_path("model.tir");
  write_file(model, "graph g opset(ai.onnx: 19) {\n  input %x: f32[2]\n  %y: f32[2], %z: f32[2] = Tanh(%x) name(\"tanh\")\n"
                    "  output %y\n  output %z\n}\n");
  expect_input_error_everywhere(model, {"node 'tanh' (Tanh): ONNX's Tanh-13 has 1 output, the node has 2"});
  // ... and only the few ops that gained inputs since take more than the
  // library's schema (a fuzzed Sigmoid with two broadcast the second into its
  // result and stopped the backward); ReduceMean-18's axes input is one of them.
  write_file(model, "graph g opset(ai.onnx: 20) {\n  input %x: f32[2]\n  input %w: f32[3, 2]\n"
                    "  %y: f32[3, 2] = Sigmoid(%x, %w) name(\"sig\")\n  output %y\n}\n");
  expect_input_error_everywhere(model, {"node 'sig' (Sigmoid): ONNX's Sigmoid-13 takes 1 input, the node has 2"});
  write_file(model, "graph g opset(ai.onnx: 18) {\n  input %x: f32[3, 2]\n  const %axes: i64[1] = [1]\n"
                    "  %y: f32[3, 1] = ReduceMean(%x, %axes) name(\"mean\")\n  output %y\n}\n");
  CliResult r = run_tcc("explain " + shell_quote(model));
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(BadInput, AxisOpsOnRankZeroAreRefused) {
  const char* ops[][2] = {{"%a, %b = Split(%x) name(\"op\")", "cannot split a rank-0 tensor"},
                          {"%a = Squeeze(%x, %k) name(\"op\")", "cannot squeeze a rank-0 tensor"},
                          {"%a = Slice(%x, %k, %k) name(\"op\")", "cannot slice a rank-0 tensor"},
                          {"%a = Concat(%x, %x) {axis = 0} name(\"op\")", "cannot concatenate rank-0 tensors"}};
  for (const auto& [op, message] : ops) {
    std::string model = model_path("model.tir");
    write_file(model, std::string("graph g opset(ai.onnx: 17) {\n  input %x: f32[]\n  const %k: i64[1] = [0]\n  ") +
                          op + "\n  output %a\n}\n");
    expect_input_error_everywhere(model, {message});
  }
}

TEST_F(BadInput, ShapeRulesRefuseContradictoryOperands) {
  // Models whose operands contradict their op's contract, each named by the
  // shape rule before fusion or lowering could meet them.
  struct Case {
    const char* body;
    const char* message;
    int opset = 17;
  } cases[] = {
      {"  input %x: f32[3, 2]\n  input %i: i64[2, 2]\n  input %u: f32[2, 2]\n"
       "  %y: f32[3, 2] = ScatterElements(%x, %i, %u) {axis = 2} name(\"op\")\n",
       "axis 2 is out of range for rank 2"},
      {"  input %x: f32[3, 2]\n  input %i: i64[2, 2]\n  input %u: f32[2, 5]\n"
       "  %y: f32[3, 2] = ScatterElements(%x, %i, %u) name(\"op\")\n",
       "indices i64[2, 2] and updates f32[2, 5] must have one shape"},
      {"  input %x: f32[2]\n  input %z: i64[2]\n  %y: f32[2] = Max(%x, %z) name(\"op\")\n",
       "ONNX's Max-13 takes inputs 0 and 1 of one type T; 'x' is f32, 'z' i64"},
      {"  input %x: f32[2]\n  const %hi: f32[2] = [1.0, 2.0]\n  %y: f32[2] = Clip(%x, none, %hi) name(\"op\")\n",
       "max must be a scalar, got f32[2]"},
      {"  input %x: f32[2, 4]\n  const %g: f32[2, 4] = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n"
       "  %y: f32[2, 4] = LayerNormalization(%x, %g) name(\"op\")\n",
       "Scale f32[2, 4] has more axes than the 1 it normalizes over"},
      {"  input %x: f32[2, 4]\n  const %a: i64[1, 1] = [1]\n  %y: f32[2, 1] = ReduceSum(%x, %a) name(\"op\")\n",
       "axes must be a 1-D integer tensor, got i64[1, 1]"},
      {"  const %s: f32[] = [0.0]\n  const %l: f32[] = [inf]\n  const %d: f32[] = [1.0]\n"
       "  %y: f32[3] = Range(%s, %l, %d) name(\"op\")\n",
       "give no countable number of elements"},
      {"  input %x: f32[1]\n  const %s: i64[3] = [4000000, 4000000, 4000000]\n"
       "  %y = Expand(%x, %s) name(\"op\")\n",
       "whose element count overflows a 64-bit integer"},
      // Broadcast with X, the scale would widen its last axis; LayerNormalization's output is X's shape.
      {"  input %x: f32[2, 1]\n  const %g: f32[4] = [1.0, 1.0, 1.0, 1.0]\n"
       "  %y: f32[2, 1] = LayerNormalization(%x, %g) name(\"op\")\n",
       "Scale f32[4] does not broadcast onto X f32[2, 1] (axis 1)"},
      {"  input %x: f32[1, 3, 4, 4]\n"
       "  %y = AveragePool(%x) {kernel_shape = [3, 2147483648]} name(\"op\")\n",
       "expected kernel_shape values from 1 to 2^31 - 1, got 2147483648"},
      {"  input %x: f32[1, 3, 4, 4]\n  %y = MaxPool(%x) {kernel_shape = [3, 6]} name(\"op\")\n",
       "output 'y' would have type f32[1, 3, 2, -1], with a negative extent"},
      // Above opset 17, where ONNX's schemas in the library are older than the
      // node, the rules themselves check their operands' types (fuzzed models
      // reached the lowering with these).
      {"  input %x: f32[2, 4]\n  const %s: f32[2] = [2.0, 4.0]\n  %y: f32[2, 4] = Expand(%x, %s) name(\"op\")\n",
       "shape must be a 1-D integer tensor, got f32[2]", 18},
      {"  input %x: f32[2, 4]\n  const %w: i64[4] = [1, 2, 3, 4]\n  %y: f32[2] = MatMul(%x, %w) name(\"op\")\n",
       "inputs must have one element type: input 0 is f32, input 1 is i64", 18},
  };
  for (const Case& c : cases) {
    std::string model = model_path("model.tir");
    write_file(model, "graph g opset(ai.onnx: " + std::to_string(c.opset) + ") {\n" + c.body + "  output %y\n}\n");
    expect_input_error_everywhere(model, {"node 'op' (", c.message});
  }
}

TEST_F(BadInput, CompileRefusesNamesThatAreNotUtf8) {
  // The text IR (like ONNX's proto2 strings) can spell any bytes; the
  // manifest is JSON, which holds UTF-8 only.
  std::string model = model_path("model.tir");
  write_file(model, "graph g opset(ai.onnx: 17) {\n  input %x: f32[4]\n  %\"y\\xff\" = Neg(%x)\n  output %\"y\\xff\"\n}\n");
  expect_input_error("compile " + shell_quote(model) + " -o " + shell_quote((dir_ / "module").string()), model,
                     {"' is not valid UTF-8; a compiled module's manifest is JSON"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
  EXPECT_EQ(run_tcc("explain " + shell_quote(model)).code, 0);
}

TEST_F(BadInput, DimsEqualToAStaticSizeMustFixASymbol) {
  // A broadcast that makes b+1 equal 24 fixes b at 23, and the module
  // compiles; b*b fixes nothing, so compile names the node that asked for
  // the equality; 2*b can never be 23.
  std::string model = model_path("model.tir");
  auto write = [&](const char* bias, int width) {
    write_file(model, std::string("graph g opset(ai.onnx: 17) {\n  input %x: f32[s, ") + std::to_string(width) +
                          "]\n  input %bias: f32[" + bias +
                          "]\n  %y = Add(%x, %bias) name(\"op\")\n  output %y\n}\n");
  };
  const std::string out = " -o " + shell_quote((dir_ / "module").string()) + " --no-host --arch sm_90 --no-ptx";
  write("b+1", 24);
  CliResult r = run_tcc("compile " + shell_quote(model) + out);
  EXPECT_EQ(r.code, 0) << r.output;
  fs::remove_all(dir_ / "module");
  write("b*b", 24);
  expect_input_error("compile " + shell_quote(model) + out, model,
                     {"node 'op' (Add): its dims '24' and 'b*b' must be equal, which fixes no symbol"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
  EXPECT_EQ(run_tcc("explain " + shell_quote(model)).code, 0);
  write("b*2", 23);
  expect_input_error_everywhere(model, {"node 'op' (Add): cannot broadcast dimension 23 with b*2"});
}

TEST_F(BadInput, SizesThatAgreeForSomeBindingsOnlyAreRefused) {
  // torch.chunk(x, 2, 1) of a symbolic seq, as the legacy exporter writes it: pieces of (seq+1)//2 and
  // seq-(seq+1)//2, equal for even seq only. Multiplying them is refused by name instead of reaching the
  // kernels; the first piece times x[:, ::2], also (seq+1)//2 long, compiles.
  std::string model = model_path("model.tir");
  auto write = [&](const char* second_start, const char* combine) {
    write_file(model, std::string("graph g opset(ai.onnx: 18) {\n  input %x: f32[2, seq]\n"
                                  "  const %zero1: i64[1] = [0]\n  const %one: i64[] = [1]\n"
                                  "  const %two: i64[] = [2]\n  const %one1: i64[1] = [1]\n"
                                  "  const %two1: i64[1] = [2]\n  const %end: i64[1] = [9223372036854775807]\n"
                                  "  %shape: i64[2] = Shape(%x)\n  %seq: i64[] = Gather(%shape, %one) {axis = 0}\n"
                                  "  %up: i64[] = Add(%seq, %one)\n  %k: i64[] = Div(%up, %two)\n"
                                  "  %k1: i64[1] = Unsqueeze(%k, %zero1)\n"
                                  "  %a = Slice(%x, %zero1, %k1, %one1)\n") +
                          "  %b = Slice(%x, " + second_start + ")\n  %y = " + combine + "(%a, %b) name(\"op\")\n" +
                          "  output %y\n}\n");
  };
  const std::string out = " -o " + shell_quote((dir_ / "module").string()) + " --no-host --arch sm_90 --no-ptx";
  write("%k1, %end, %one1", "Mul");
  expect_input_error("compile " + shell_quote(model) + out, model,
                     {"node 'op' (Mul): its dims '(seq+1)//(2)' and '-((seq+1)//(2))+seq' must be equal, which "
                      "fixes no symbol"});
  EXPECT_FALSE(fs::exists(dir_ / "module"));
  write("%zero1, %end, %one1, %two1", "Mul");
  CliResult r = run_tcc("compile " + shell_quote(model) + out);
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST_F(BadInput, TrainingRefusesToDifferentiateAnOpTccDoesNotSupport) {
  // Gelu before opset 20 is no ONNX op: its declared output type is all tcc
  // knows of it, so the backward names it instead of using opset 20's rule.
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %x: f32[b, 3]\n"
             "  const %w: f32[3, 3] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]\n"
             "  %p = MatMul(%x, %w)\n"
             "  %y: f32[b, b+1, 3] = Gelu(%p) name(\"act\")\n"
             "  output %y\n"
             "}\n");
  expect_input_error("explain " + shell_quote(model) + " --train --loss-fn mse --loss-on y --label target", model,
                     {"node 'act' (Gelu): tcc has no gradient rule for Gelu", "older than tcc supports (20)"});
  EXPECT_EQ(run_tcc("explain " + shell_quote(model)).code, 0);
}

TEST_F(BadInput, TextIrSyntaxError) {
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %x: f32[2]\n"
             "  %y: f32[2] = Relu(%x\n"
             "  output %y\n"
             "}\n");
  expect_input_error_everywhere(model, {model + ":4:3: expected ')', got 'output'"});
}

TEST_F(BadInput, TextIrUseBeforeDefinition) {
  std::string model = model_path("model.tir");
  write_file(model,
             "graph g opset(ai.onnx: 17) {\n"
             "  input %x: f32[2]\n"
             "  %y: f32[2] = Relu(%z)\n"
             "  %z: f32[2] = Neg(%x)\n"
             "  output %y\n"
             "}\n");
  expect_input_error_everywhere(model,
                                {model + ":3:21: undefined value '%z' (values must be defined before they are used)"});
}

TEST_F(BadInput, MalformedTraceLineNamesTheLine) {
  std::string trace = (dir_ / "calls.jsonl").string();
  write_file(trace,
             "{\"input\": {\"shape\": [8, 32], \"dtype\": \"float32\"}}\n"
             "{\"input\": {\"shape\": [8, 32], \"dtype\": \"float32\"}\n");
  expect_input_error("explain " + shell_quote(kMlp.string()) + " --trace " + shell_quote(trace), trace,
                     {trace + ":2:49: expected '}' after the last input"});
}

}  // namespace
}  // namespace tcc
