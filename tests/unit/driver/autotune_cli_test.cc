// `tcc autotune` and `tcc compile --mode max-autotune` as users run them, on
// this machine without a GPU: heuristics and cache entries are applied and
// reported, nothing unmeasured reaches the cache, bad flags and files exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "codegen/emit.h"
#include "codegen/gemm_template.h"
#include "codegen/kernel_schedule.h"
#include "codegen/module_writer.h"
#include "codegen/toolchain.h"
#include "src/autotune/candidates.h"
#include "src/autotune/signature.h"
#include "src/autotune/tuning_cache.h"
#include "tests/unit/autotune/autotune_util.h"
#include "tests/unit/support/cli_util.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture(const std::string& name) { return std::string(TCC_SOURCE_DIR) + "/tests/fixtures/" + name; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class AutotuneCli : public TempDirTest {
 protected:
  std::string at(const std::string& name) const { return shell_quote((dir_ / name).string()); }

  // A cache with one entry per kernel of gpt2_block, each a valid config other
  // than the kernel's default (the last candidate: for a gemm, cuBLASLt's
  // eighth-ranked algorithm), as an H100 would have measured them.
  std::vector<autotune::CacheEntry> measured_entries(const std::string& device = "NVIDIA H100 80GB HBM3") {
    ScheduledModel s = schedule_model("tests/fixtures/gpt2_block.onnx");
    // The sizes tuning uses when no --shape-hint is given.
    std::map<std::string, int64_t> sizes = {{"batch", kUnhintedRunSize}, {"seq", kUnhintedRunSize}};
    return cache_entries(s.schedule, sizes, {device, "sm_90", "13.0", "13.0"},
                         [](const kir::Kernel& k) { return autotune::candidates(k).back(); });
  }
};

TEST_F(AutotuneCli, WithoutAGpuSaysSoPrintsTheTableAndWritesNothing) {
  CliResult r =
      run_tcc("autotune " + shell_quote(fixture("gpt2_block.onnx")) + " --cache " + at("tune.json"), kNoGpuEnv);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tcc autotune: no GPU present (")) << r.output;
  EXPECT_TRUE(contains(r.output, "configurations chosen by heuristics and from the cache (no tuning cache entries); "
                                 "nothing measured, nothing written to"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "AUTOTUNE tcc_k")) << r.output;
  EXPECT_TRUE(contains(r.output, "not measured  <- chosen (heuristic)  [default]")) << r.output;
  // A gemm's config column is as wide as its longest candidate, a three-stage template.
  EXPECT_TRUE(contains(r.output, "  cublaslt #0                    not measured  <- chosen (heuristic)  [default]"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "  cublaslt #7                    not measured\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "  tf32x3 128x64x16 2x2 stages=3  not measured\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "  block=1024 rows=1 cache=1  not measured\n")) << r.output;
  EXPECT_TRUE(contains(r.output, " measured, 0 from the cache, ")) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "tune.json"));
}

TEST_F(AutotuneCli, ImportedEntriesAreChosenWithoutAGpuAndNeverRewritten) {
  autotune::write_cache((dir_ / "h100.json").string(), measured_entries());
  CliResult imp = run_tcc("autotune --cache " + at("tune.json") + " --import " + at("h100.json"));
  ASSERT_EQ(imp.code, 0) << imp.output;
  std::string before = read_text(dir_ / "tune.json");
  CliResult r =
      run_tcc("autotune " + shell_quote(fixture("gpt2_block.onnx")) + " --cache " + at("tune.json"), kNoGpuEnv);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "cache entries of NVIDIA H100 80GB HBM3, the only device in the cache")) << r.output;
  EXPECT_TRUE(contains(r.output, "2.00 us  100.0%  <- chosen (cache)")) << r.output;
  EXPECT_TRUE(contains(r.output, " 0 by heuristics")) << r.output;
  EXPECT_EQ(read_text(dir_ / "tune.json"), before);
}

TEST_F(AutotuneCli, ImportExportRoundTrip) {
  std::vector<autotune::CacheEntry> entries = measured_entries();
  autotune::write_cache((dir_ / "in.json").string(), entries);
  CliResult imp = run_tcc("autotune --cache " + at("tune.json") + " --import " + at("in.json"));
  ASSERT_EQ(imp.code, 0) << imp.output;
  EXPECT_TRUE(contains(imp.output, "imported " + std::to_string(entries.size()) + " entries")) << imp.output;
  CliResult exp = run_tcc("autotune --cache " + at("tune.json") + " --export " + at("out.json"));
  ASSERT_EQ(exp.code, 0) << exp.output;
  EXPECT_EQ(read_text(dir_ / "out.json"), read_text(dir_ / "in.json"));
}

TEST_F(AutotuneCli, ImportSkipsInvalidEntriesWithAWarning) {
  json j = json::parse(autotune::cache_text(measured_entries()));
  size_t n = j["entries"].size();
  j["entries"][0]["config"]["vector_width"] = 3.5;
  std::ofstream(dir_ / "in.json") << j.dump();
  CliResult r = run_tcc("autotune --cache " + at("tune.json") + " --import " + at("in.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: " + (dir_ / "in.json").string() + ": entry 0 (")) << r.output;
  EXPECT_TRUE(contains(r.output, "'config.vector_width' must be an integer from 1 to 4; skipped")) << r.output;
  EXPECT_TRUE(contains(r.output, "imported " + std::to_string(n - 1) + " entries")) << r.output;
  EXPECT_EQ(autotune::load_cache((dir_ / "tune.json").string()).entries.size(), n - 1);
}

TEST_F(AutotuneCli, ConcurrentImportsAllSurvive) {
  std::vector<autotune::CacheEntry> entries = measured_entries();
  std::string cmd;
  for (int p = 0; p < 6; ++p) {
    std::vector<autotune::CacheEntry> mine = entries;
    for (autotune::CacheEntry& e : mine) e.device.name = "GPU " + std::to_string(p);
    autotune::write_cache((dir_ / ("in" + std::to_string(p) + ".json")).string(), mine);
    cmd += std::string(TCC_BINARY) + " autotune --cache " + at("tune.json") + " --import " +
           at("in" + std::to_string(p) + ".json") + " & ";
  }
  ASSERT_EQ(std::system(("timeout 60 sh -c " + shell_quote(cmd + "wait")).c_str()), 0);
  autotune::LoadedCache c = autotune::load_cache((dir_ / "tune.json").string());
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.entries.size(), 6 * entries.size());
}

TEST_F(AutotuneCli, BadFlagsAndFilesExitTwoWithAClearMessage) {
  std::string model = shell_quote(fixture("mlp.onnx"));
  struct Case {
    std::string args, message;
  };
  std::ofstream(dir_ / "garbage.json") << "not json {";
  std::ofstream(dir_ / "v9.json") << R"({"format": "tcc-tuning-cache", "version": 9, "entries": []})";
  autotune::write_cache((dir_ / "h100.json").string(), measured_entries());
  const Case cases[] = {
      {"autotune " + model, "--cache FILE is required"},
      {"autotune --cache " + at("t.json"), "a MODEL is required (or --import FILE / --export FILE)"},
      {"autotune " + model + " --cache " + at("t.json") + " --mode default",
       "--mode default does not autotune (use max-autotune or max-autotune-no-cudagraphs)"},
      {"autotune " + model + " --cache " + at("t.json") + " --mode fastest", "unknown mode 'fastest'"},
      {"autotune " + model + " --cache " + at("t.json") + " --import " + at("garbage.json"),
       "--import and --export work on the cache alone"},
      {"autotune --cache " + at("t.json") + " --import " + at("garbage.json"),
       "--import " + (dir_ / "garbage.json").string() + ": not a tuning cache (not valid JSON"},
      {"autotune --cache " + at("t.json") + " --import " + at("missing.json"),
       "--import " + (dir_ / "missing.json").string() + ": no such file"},
      {"autotune --cache " + at("garbage.json") + " --export " + at("out.json"), "not a tuning cache"},
      {"autotune --cache " + at("v9.json") + " --import " + at("v9.json"), "version 9, this tcc reads version 1"},
      {"autotune " + model + " --cache " + at("t.json") + " --shape-hint batch", "--shape-hint: expected"},
      {"autotune --cache " + at("") + " --import " + at("h100.json"), "not a file; the tuning cache must be one"},
      {"autotune " + model + " --cache " + at("t.json") + " --bogus", "bogus"},
      {"compile " + model + " -o " + at("m") + " --cache " + at("t.json"),
       "--cache and --device-name apply to modes that autotune"},
  };
  for (const Case& c : cases) {
    CliResult r = run_tcc(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, c.message)) << c.args << "\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "out.json"));
}

// Compiles as a machine without a GPU does (a GPU would tune what the cache lacks).
class AutotuneCompile : public AutotuneCli {
 protected:
  // Cached configs may make the block's gemms tcc's templates, a few seconds of NVRTC on a
  // busy two-core machine: the time limit is for hangs, well above that.
  CliResult compile(const std::string& out, const std::string& flags) {
    return run_tcc("compile " + shell_quote(fixture("gpt2_block.onnx")) + " -o " + at(out) +
                       " --arch sm_90 --no-ptx " + flags,
                   kNoGpuEnv, 120);
  }
  json manifest(const std::string& out) { return json::parse(read_text(dir_ / out / "manifest.json")); }
  static const json& feature(const json& m, const std::string& name) {
    for (const json& f : m["features"])
      if (f["name"] == name) return f;
    throw std::runtime_error("no feature " + name);
  }
};

TEST_F(AutotuneCompile, WithoutGpuOrCacheFallsBackToTheDefaultKernelsAndSaysSo) {
  ASSERT_EQ(compile("default", "").code, 0);
  CliResult r = compile("tuned", "--mode max-autotune");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "autotune:  0 kernels measured, 0 from the cache,")) << r.output;
  EXPECT_TRUE(contains(r.output, "and no --cache: heuristic configurations")) << r.output;
  EXPECT_EQ(read_text(dir_ / "tuned" / "kernels.cu"), read_text(dir_ / "default" / "kernels.cu"));
  json m = manifest("tuned");
  const json& f = feature(m, "autotune_kernels");
  EXPECT_EQ(f["status"], "built");
  for (const json& k : m["kernels"]) {
    ASSERT_TRUE(k.contains("autotune")) << k.dump();
    EXPECT_EQ(k["autotune"]["source"], "heuristic");
    if (k["kind"] == "gemm") {
      EXPECT_EQ(k["gemm"]["algo"], 0);  // cuBLASLt's first choice
    }
  }
  EXPECT_EQ(f["kernels"], (json{{"measured", 0}, {"cache", 0}, {"heuristic", m["kernels"].size()}}));
  EXPECT_EQ(feature(m, "autotune_gemm_templates")["status"], "built");
  EXPECT_FALSE(manifest("default")["kernels"][0].contains("autotune"));
  EXPECT_TRUE(contains(read_text(dir_ / "tuned" / "report.md"), "## Autotuning"));
}

TEST_F(AutotuneCompile, CachedConfigsAreAppliedReportedAndDeterministic) {
  std::vector<autotune::CacheEntry> entries = measured_entries();
  entries.pop_back();  // one kernel without an entry: heuristics
  autotune::write_cache((dir_ / "tune.json").string(), entries);
  CliResult r = compile("a", "--mode max-autotune --cache " + at("tune.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "autotune:  0 kernels measured, " + std::to_string(entries.size()) +
                                     " from the cache, 1 by heuristics"))
      << r.output;
  json m = manifest("a");
  EXPECT_EQ(feature(m, "autotune_kernels")["kernels"]["cache"], entries.size());
  ScheduledModel s = schedule_model("tests/fixtures/gpt2_block.onnx");
  int from_cache = 0;
  for (size_t i = 0; i < s.schedule.kernels.size(); ++i) {
    const kir::Kernel& k = s.schedule.kernels[i];
    const json& mk = m["kernels"][i];
    if (mk["autotune"]["source"] != "cache") continue;
    ++from_cache;
    KernelConfig want = autotune::candidates(k).back();
    if (k.kind == kir::Kind::Gemm) {
      // The last gemm candidate is tcc's template at the last tile, split along K: a
      // generated kernel in the cubin, with a workspace for its slices' partials.
      ASSERT_GT(want.tile, 0);
      ASSERT_GT(want.split, 1);
      EXPECT_EQ(mk["autotune"]["config"]["tile"], want.tile);
      EXPECT_EQ(mk["autotune"]["config"]["split"], want.split);
      EXPECT_EQ(mk["template"], gemm_template_text(want));
      EXPECT_FALSE(mk.contains("library"));
      EXPECT_EQ(mk["launch"]["block"][0], kGemmTiles[static_cast<size_t>(want.tile - 1)].threads());
      KernelLaunch l = launch_config(k, want);
      EXPECT_EQ(mk["launch"]["grid"][2], l.grid[2].str());
      EXPECT_TRUE(mk["launch"].contains("workspace_bytes")) << mk.dump();
      std::string cubin = read_text(dir_ / "a" / "kernels.sm_90.cubin");
      std::vector<std::string> syms = cubin_symbols(std::vector<char>(cubin.begin(), cubin.end()));
      EXPECT_NE(std::find(syms.begin(), syms.end(), k.name), syms.end()) << k.name << " is not in the cubin";
      continue;
    }
    EXPECT_EQ(mk["autotune"]["config"]["block"], want.block);
    if (k.kind == kir::Kind::Attention) {
      // The last attention candidate: the split layout, eight lanes to a row, 256 threads.
      EXPECT_EQ(want.lanes_per_row, 8);
      EXPECT_EQ(mk["autotune"]["config"]["lanes_per_row"], want.lanes_per_row);
      EXPECT_EQ(mk["schedule"], "split layout, block 256, rows 32, 8 lanes a row");
    } else {
      EXPECT_EQ(mk["autotune"]["config"]["vector_width"], want.vector_width);
    }
    EXPECT_EQ(mk["launch"]["block"][0], want.block);
    EXPECT_EQ(mk["launch"]["grid"][0], launch_config(k, want).grid[0].str());
    EXPECT_EQ(mk["launch"]["grid"][1], launch_config(k, want).grid[1].str());
  }
  EXPECT_EQ(from_cache, static_cast<int>(entries.size()));
  // The runtime reads a template gemm's manifest entry (a launch, no library) and runs the module.
  CliResult run = run_tcc("run " + at("a") + " --host --check --model " + shell_quote(fixture("gpt2_block.onnx")));
  EXPECT_EQ(run.code, 0) << run.output;
  ASSERT_EQ(compile("b", "--mode max-autotune --cache " + at("tune.json")).code, 0);
  for (const char* f : {"manifest.json", "kernels.cu", "kernels.sm_90.cubin"})
    EXPECT_TRUE(read_text(dir_ / "a" / f) == read_text(dir_ / "b" / f)) << f << " differs between two compiles";
  std::string report = read_text(dir_ / "a" / "report.md");
  EXPECT_TRUE(contains(report, std::to_string(entries.size()) + " from the tuning cache, 1 by heuristics")) << report;
}

// Under --precision tf32 the report names the precision of the config each kernel is emitted with: the attention's
// heuristic tensor-core layout is tf32, but a cached split layout computes it exactly (f32), as tcc's 3xTF32
// template does a gemm's products, while the gemms left on cuBLASLt run in its TF32 mode.
TEST_F(AutotuneCompile, TunedExactLayoutsReportF32UnderTf32) {
  auto precisions = [&](const std::string& out) {
    json report = json::parse(read_text(dir_ / out / "report.json"));
    std::vector<std::string> p;
    for (const json& k : report["kernels"]) p.push_back(k["precision"]);
    return p;
  };
  ScheduledModel s = schedule_model("tests/fixtures/gpt2_block.onnx", Precision::TF32);
  ASSERT_EQ(compile("heuristic", "--precision tf32 --mode max-autotune").code, 0);
  std::vector<std::string> heuristic = precisions("heuristic");
  ASSERT_EQ(heuristic.size(), s.schedule.kernels.size());
  std::map<std::string, int64_t> sizes = {{"batch", kUnhintedRunSize}, {"seq", kUnhintedRunSize}};
  const kir::Kernel* templated = first_kernel(s.schedule, kir::Kind::Gemm);
  ASSERT_NE(templated, nullptr);
  std::vector<autotune::CacheEntry> entries =
      cache_entries(s.schedule, sizes, {"NVIDIA H100 80GB HBM3", "sm_90", "13.0", "13.0"}, [&](const kir::Kernel& k) {
        // The last attention candidate is the split layout; a gemm's first template candidate is a whole tile.
        if (k.kind == kir::Kind::Attention) return autotune::candidates(k).back();
        if (&k != templated) return default_config(k);
        for (const KernelConfig& c : autotune::candidates(k))
          if (c.tile > 0) return c;
        return default_config(k);
      });
  autotune::write_cache((dir_ / "tune.json").string(), entries);
  CliResult r = compile("tuned", "--precision tf32 --mode max-autotune --cache " + at("tune.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  std::vector<std::string> tuned = precisions("tuned");
  ASSERT_EQ(tuned.size(), s.schedule.kernels.size());
  int attention = 0, library_gemms = 0;
  for (size_t i = 0; i < s.schedule.kernels.size(); ++i) {
    const kir::Kernel& k = s.schedule.kernels[i];
    if (k.kind == kir::Kind::Attention) {
      ++attention;
      EXPECT_EQ(heuristic[i], "tf32") << k.name;
      EXPECT_EQ(tuned[i], "f32") << k.name;
    } else if (k.kind == kir::Kind::Gemm) {
      EXPECT_EQ(heuristic[i], "tf32") << k.name;
      EXPECT_EQ(tuned[i], &k == templated ? "f32" : "tf32") << k.name;
      library_gemms += &k != templated;
    } else {
      EXPECT_EQ(tuned[i], heuristic[i]) << k.name;
    }
  }
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(library_gemms, 3);
  const std::string cu = read_text(dir_ / "tuned" / "kernels.cu");
  EXPECT_EQ(cu.find("uint32_t tcc_tf32(float x)"), std::string::npos) << "no TF32 attention helper";
}

TEST_F(AutotuneCompile, CacheOfSeveralDevicesNeedsADeviceName) {
  std::vector<autotune::CacheEntry> entries = measured_entries("NVIDIA H100 80GB HBM3");
  for (const autotune::CacheEntry& e : measured_entries("NVIDIA H200")) entries.push_back(e);
  autotune::write_cache((dir_ / "tune.json").string(), entries);
  CliResult r = compile("a", "--mode max-autotune --cache " + at("tune.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "0 from the cache")) << r.output;
  EXPECT_TRUE(contains(r.output, "the cache holds several devices (NVIDIA H100 80GB HBM3, NVIDIA H200); choose one "
                                 "with --device-name"))
      << r.output;
  r = compile("b", "--mode max-autotune --cache " + at("tune.json") + " --device-name 'NVIDIA H200'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, std::to_string(entries.size() / 2) + " from the cache")) << r.output;
  r = compile("c", "--mode max-autotune --cache " + at("tune.json") + " --device-name 'NVIDIA A100'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "the cache has no entries for device 'NVIDIA A100'")) << r.output;
}

TEST_F(AutotuneCompile, CorruptCacheIsSkippedWithAWarningNotTrusted) {
  std::ofstream(dir_ / "tune.json") << "{\"format\": \"tcc-tuning-cache\", \"version\": 1, \"entr";
  CliResult r = compile("a", "--mode max-autotune --cache " + at("tune.json"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tcc compile: warning: " + (dir_ / "tune.json").string() +
                                     ": not a tuning cache (not valid JSON; truncated or overwritten?); ignored"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "0 from the cache")) << r.output;
}

}  // namespace
}  // namespace tcc
