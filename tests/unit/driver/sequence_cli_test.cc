// A model with a sequence input and sequence outputs as users compile and run
// it: `tcc compile --shape-hint xs=seq(N)` flattens it into tensors the
// manifest records, `tcc run --host --check` feeds a SequenceProto and
// compares each element with the interpreter, and a sequence input without
// a length is refused with exit 2 saying what to write (an output of
// data-dependent length: bad_input_cli_test).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/onnx/value_io.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Each element scaled by w (SequenceMap), the scaled elements returned and
// concatenated, and the second one read back (SequenceAt at -2).
constexpr const char* kModel = R"(graph main opset(ai.onnx: 17) {
  input %xs: seq<f32[?, 3]>
  input %w: f32[3]
  const %at: i64[] = [-2]
  %m: seq<f32[?, 3]> = SequenceMap(%xs, %w) {body = graph body {
      input %e: f32[?, 3]
      input %v: f32[3]
      %o: f32[?, 3] = Mul(%e, %v) name("scale")
      output %o
    }} name("map")
  %c: f32[?, 3] = ConcatFromSequence(%m) {axis = 0} name("concat")
  %s: f32[?, 3] = SequenceAt(%m, %at) name("second")
  output %m
  output %c
  output %s
}
)";

class SequenceCli : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(dir_ / "model.tir") << kModel;
    fs::create_directories(dir_ / "inputs");
    Tensor a = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor b = Tensor::from_f32({-1, 0.5, 2}, {1, 3});
    Tensor c = Tensor::from_f32({7, 8, 9, 10, 11, 12, 13, 14, 15}, {3, 3});
    write_value_pb((dir_ / "inputs/input_0.pb").string(), Tensor::sequence(DType::F32, {a, b, c}), "xs");
    write_value_pb((dir_ / "inputs/input_1.pb").string(), Tensor::from_f32({2, -1, 0.5}, {3}), "w");
  }
  std::string at(const std::string& name) const { return shell_quote((dir_ / name).string()); }
};

TEST_F(SequenceCli, CompilesASequenceForItsLengthAndRunsItAgainstTheInterpreter) {
  CliResult c = run_tcc("compile " + at("model.tir") + " -o " + at("module") +
                            " --no-ptx --arch sm_90 --shape-hint 'xs=seq(3),xs.0=[2x3],xs.1=[1x3],xs.2=[3x3]'",
                        "", 120);
  ASSERT_EQ(c.code, 0) << c.output;
  std::ifstream in(dir_ / "module/manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<std::string> inputs, outputs;
  for (const auto& v : manifest["inputs"]) inputs.push_back(v["name"]);
  for (const auto& v : manifest["outputs"]) outputs.push_back(v["name"]);
  EXPECT_EQ(inputs, (std::vector<std::string>{"xs.0", "xs.1", "xs.2", "w"}));
  EXPECT_EQ(outputs, (std::vector<std::string>{"m.0", "m.1", "m.2", "c", "s"}));
  EXPECT_EQ(manifest["structured_inputs"],
            nlohmann::json::parse(R"([{"name": "xs", "kind": "sequence", "length": 3,
                                       "elements": ["xs.0", "xs.1", "xs.2"]}])"));
  EXPECT_EQ(manifest["structured_outputs"],
            nlohmann::json::parse(R"([{"name": "m", "kind": "sequence", "length": 3,
                                       "elements": ["m.0", "m.1", "m.2"]}])"));
  // Every sequence op resolved into tensor ops: no host step.
  EXPECT_FALSE(manifest.contains("binding_constants")) << manifest.dump(2);
  for (const auto& step : manifest["schedule"]) EXPECT_FALSE(step.contains("fallback")) << step.dump();

  CliResult r = run_tcc("run " + at("module") + " --host --check --inputs " + at("inputs"), "", 60);
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* name : {"m.0: ok", "m.1: ok", "m.2: ok", "c: ok", "s: ok", "outputs match the reference interpreter"})
    EXPECT_TRUE(contains(r.output, name)) << r.output;

  // Written back as the model's values: the sequence a SequenceProto.
  CliResult w = run_tcc("run " + at("module") + " --host --inputs " + at("inputs") + " -o " + at("out"), "", 60);
  ASSERT_EQ(w.code, 0) << w.output;
  Tensor m = read_value_pb((dir_ / "out/output_0.pb").string(), Type::sequence(Type::tensor_unranked(DType::F32)));
  ASSERT_TRUE(m.is_sequence());
  ASSERT_EQ(m.elements().size(), 3u);
  EXPECT_EQ(m.elements()[1].shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(m.elements()[1].get_f64(0), -2);
}

TEST_F(SequenceCli, RunCompilesAModelForItsInputsStructure) {
  CliResult r = run_tcc("run " + at("model.tir") + " --host --check --inputs " + at("inputs"), "", 120);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "outputs match the reference interpreter")) << r.output;
}

TEST_F(SequenceCli, ASequenceInputWithoutALengthIsRefused) {
  CliResult c = run_tcc("compile " + at("model.tir") + " -o " + at("module"));
  EXPECT_EQ(c.code, 2) << c.output;
  EXPECT_TRUE(contains(c.output, "input 'xs' is a sequence (seq<f32[?, 3]>); a compiled module's inputs are tensors, "
                                 "so tcc compiles it for a structure fixed now: give its length, e.g. --shape-hint "
                                 "xs=seq(2)"))
      << c.output;
}

}  // namespace
}  // namespace tcc
