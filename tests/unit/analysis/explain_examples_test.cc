// The examples/ scenarios through the `tcc explain` binary: the counts the
// recompile rules imply (examples/expected.txt), the JSON's documented
// top-level keys, and the CI gates' exit codes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct CliRun {
  int rc;
  std::string out;
};

CliRun tcc(const std::string& args) {
  std::string cmd = std::string("cd ") + TCC_SOURCE_DIR + " && " + TCC_BINARY + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

TEST(ExplainExamples, CountsMatchExpected) {
  std::ifstream f(std::string(TCC_SOURCE_DIR) + "/examples/expected.txt");
  std::string line;
  int cases = 0;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t arrow = line.find(" -> ");
    std::istringstream lhs(line.substr(0, arrow)), rhs(line.substr(arrow + 4));
    std::string model, trace, flags, w;
    lhs >> model >> trace;
    while (lhs >> w) flags += " " + w;
    size_t compiles, recompiles, eager, breaks;
    rhs >> compiles >> recompiles >> eager >> breaks;
    CliRun r = tcc("explain examples/" + model + " --trace examples/" + trace + flags + " --format json");
    ASSERT_EQ(r.rc, 0) << line << "\n" << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["compiles"], compiles) << line;
    EXPECT_EQ(j["recompile_count"], recompiles) << line;
    EXPECT_EQ(j["eager_fallback_calls"], eager) << line;
    EXPECT_EQ(j["graph_break_count"], breaks) << line;
    for (const char* key : {"graph_count", "graph_breaks", "graphs", "calls", "recompiles", "advice"})
      EXPECT_TRUE(j.contains(key)) << key;
    ++cases;
  }
  EXPECT_EQ(cases, 14);
}

TEST(ExplainExamples, AdviceAndGates) {
  CliRun r = tcc("explain examples/adam_lr_schedule/model.tir --trace examples/adam_lr_schedule/scalar.jsonl");
  EXPECT_EQ(r.rc, 0);
  // Current torch: the float lr becomes a graph input at its first change (2 compiles), so holding it in a
  // tensor saves one compile, not five; under 2.3's rules (specialize_float=True) it saves five.
  EXPECT_NE(r.out.find("hold 'lr' in a tensor input: 1 compile instead of 2 compiles"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("- 0/0: lr == 0.003333333333333333 (now 0.004666666666666667)"), std::string::npos);
  CliRun legacy = tcc("explain examples/adam_lr_schedule/model.tir --trace examples/adam_lr_schedule/scalar.jsonl "
                      "--torch-version 2.3");
  EXPECT_NE(legacy.out.find("hold 'lr' in a tensor input: 1 compile instead of 6 compiles"), std::string::npos)
      << legacy.out;
  EXPECT_NE(legacy.out.find("Torch rules: 2.3 (cache_size_limit 8, specialize_float True)"), std::string::npos);
  EXPECT_EQ(tcc("explain examples/adam_lr_schedule/model.tir --torch-version 2.99").rc, 2);
  CliRun gate = tcc("explain examples/adam_lr_schedule/model.tir --trace examples/adam_lr_schedule/scalar.jsonl "
                 "--fail-on-recompile -o /dev/null");
  EXPECT_EQ(gate.rc, 1);
  EXPECT_NE(gate.out.find("--fail-on-recompile: call 1 recompiles [0/1]: 0/0: lr == 0.003333333333333333"),
            std::string::npos) << gate.out;
  EXPECT_EQ(tcc("explain examples/bool_mask_selection/model.tir --max-graph-breaks 1 -o /dev/null").rc, 0);
  EXPECT_EQ(tcc("explain examples/bool_mask_selection/model.tir --max-graph-breaks 0 -o /dev/null").rc, 1);
  CliRun pad = tcc("explain examples/caption_padding/model.tir --trace examples/caption_padding/longest.jsonl "
                "--dynamic false --max-recompiles 7");
  EXPECT_EQ(pad.rc, 0);
  EXPECT_NE(pad.out.find("pad input_ids:1 to a multiple of 32: 8 compiles, no eager calls instead of 8 compiles "
                         "and 898 eager calls"), std::string::npos) << pad.out;
  CliRun bad = tcc("explain examples/caption_padding/model.tir --trace examples/adam_lr_schedule/tensor.jsonl");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("tensor.jsonl:1: unknown input 'param'"), std::string::npos) << bad.out;
}

// The training examples' reports: torch's frames around a forward graph break
// (two forward graphs, as many backward graphs, the optimizer step's frame after
// its wrapper's), the saved-activation comparison, and the captioning model's
// padding advice for its training step.
TEST(ExplainExamples, TrainingSteps) {
  CliRun brk = tcc("explain examples/train_graph_break/model.tir --train --loss-fn mse --loss-on out --label target "
                   "--optimizer adam");
  ASSERT_EQ(brk.rc, 0) << brk.out;
  for (const char* line : {"torch's frames: torch.compile(model) (the loss eager), the backward, a compiled opt.step()",
                           "graph 0: forward, 4 nodes", "graph 1: forward, 4 nodes",
                           "graph 3: the optimizer step, 32 nodes (frame 2, opt.step's wrapper",
                           "AOTAutograd compiles 2 graphs, one per forward graph", "break /NonZero is in the forward",
                           "is in the optimizer", "[optimizer_step]"})
    EXPECT_NE(brk.out.find(line), std::string::npos) << line << "\n" << brk.out;

  CliRun cap = tcc("explain examples/train_captioning/model.onnx --train --loss loss --optimizer adamw --trace "
                   "examples/train_captioning/longest.jsonl --dynamic false --shape-hint batch=8,seq=64 --format json");
  ASSERT_EQ(cap.rc, 0) << cap.out;
  auto j = nlohmann::json::parse(cap.out);
  const auto& saved = j["training"]["saved_activations"];
  EXPECT_GT(saved["save_all_peak_bytes"].get<int64_t>(), 0);
  EXPECT_LT(saved["min_cut_peak_bytes"].get<int64_t>(), saved["save_all_peak_bytes"].get<int64_t>());
  EXPECT_EQ(saved["sizes"]["seq"], 64);
  bool pad = false;
  for (const auto& a : j["advice"]) pad |= a["text"].get<std::string>().rfind("pad decoder_input_ids:1 to a multiple of 32", 0) == 0;
  EXPECT_TRUE(pad) << j["advice"].dump();

  CliRun hint = tcc("explain examples/train_graph_break/model.tir --shape-hint batch=8");
  EXPECT_EQ(hint.rc, 2);
  EXPECT_NE(hint.out.find("--shape-hint needs --train"), std::string::npos) << hint.out;
}

}  // namespace
