// The tuning cache on disk: round trips, corruption of every kind skipped with
// a warning naming the file and the entry, several processes adding entries
// at once, and the lookups by device.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "src/autotune/tuning_cache.h"
#include "src/diag/errors.h"
#include "tests/unit/support/temp_dir.h"

namespace tcc::autotune {
namespace {

namespace fs = std::filesystem;

CacheEntry entry(const std::string& signature, int block = 128, const std::string& device = "NVIDIA H100 80GB HBM3",
                 const std::string& driver = "13.0") {
  CacheEntry e;
  e.device = {device, "sm_90", driver, "13.0"};
  e.signature = signature;
  e.op = "pointwise(f32[8,768]) -> f32[8,768]";
  e.config = {block, 1, 1};
  e.time_us = 3.5;
  e.default_time_us = 4.25;
  e.candidates = 12;
  return e;
}

bool same(const CacheEntry& a, const CacheEntry& b) {
  return a.device == b.device && a.signature == b.signature && a.op == b.op && a.config == b.config &&
         a.time_us == b.time_us && a.default_time_us == b.default_time_us && a.candidates == b.candidates;
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

class AutotuneCache : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    path_ = (dir_ / "tune.json").string();
  }
  std::string path_;
};

TEST_F(AutotuneCache, RoundTripsEntriesSortedAndDeterministic) {
  std::vector<CacheEntry> in = {entry("kernel b"), entry("kernel a", 256), entry("kernel a", 512, "NVIDIA H200")};
  std::string text = cache_text(in);
  EXPECT_EQ(text, cache_text({in[2], in[0], in[1]}));
  LoadedCache c = parse_cache(text, "t.json");
  EXPECT_EQ(c.status, LoadedCache::Status::Ok);
  EXPECT_TRUE(c.warnings.empty());
  ASSERT_EQ(c.entries.size(), 3u);
  EXPECT_TRUE(same(c.entries[0], in[1]));  // sorted by device name, then signature
  EXPECT_TRUE(same(c.entries[1], in[0]));
  EXPECT_TRUE(same(c.entries[2], in[2]));
  EXPECT_EQ(cache_text(c.entries), text);
}

// A gemm entry's template tile round-trips; entries written before the
// template existed have no tile and mean the library call; a tile past the
// table is a bad entry.
TEST_F(AutotuneCache, GemmTileRoundTripsAndDefaultsToTheLibraryCall) {
  CacheEntry tiled = entry("gemm a");
  tiled.config = KernelConfig{};
  tiled.config.tile = 3;
  LoadedCache c = parse_cache(cache_text({tiled}), "t.json");
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries[0].config.tile, 3);
  nlohmann::json j = nlohmann::json::parse(cache_text({tiled, entry("gemm b")}));
  j["entries"][0]["config"].erase("tile");
  j["entries"][1]["config"]["tile"] = 9;
  c = parse_cache(j.dump(), "t.json");
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries[0].config.tile, 0);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("'config.tile' must be an integer from 0 to 8"), std::string::npos) << c.warnings[0];
}

TEST_F(AutotuneCache, ColumnsRoundTripAndDefaultToRows) {
  CacheEntry columns = entry("reduction a");
  columns.config = KernelConfig{};
  columns.config.columns = true;
  columns.config.split = 4;
  LoadedCache c = parse_cache(cache_text({columns}), "t.json");
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_TRUE(c.entries[0].config.columns);
  EXPECT_EQ(c.entries[0].config.split, 4);
  nlohmann::json j = nlohmann::json::parse(cache_text({columns, entry("reduction b")}));
  j["entries"][0]["config"].erase("columns");
  j["entries"][1]["config"]["columns"] = 2;
  c = parse_cache(j.dump(), "t.json");
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_FALSE(c.entries[0].config.columns);
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_NE(c.warnings[0].find("'config.columns' must be an integer from 0 to 1"), std::string::npos) << c.warnings[0];
}

TEST_F(AutotuneCache, MissingFileIsAnEmptyCache) {
  LoadedCache c = load_cache(path_);
  EXPECT_EQ(c.status, LoadedCache::Status::Missing);
  EXPECT_TRUE(c.entries.empty());
  EXPECT_TRUE(c.warnings.empty());
}

TEST_F(AutotuneCache, TruncatedOrGarbageFileIsIgnoredWithAWarning) {
  std::string text = cache_text({entry("a"), entry("b")});
  for (const std::string& bad : {text.substr(0, text.size() / 2), std::string("\x7f" "ELF garbage"), std::string()}) {
    write(path_, bad);
    LoadedCache c = load_cache(path_);
    EXPECT_EQ(c.status, LoadedCache::Status::NotACache);
    EXPECT_TRUE(c.entries.empty());
    ASSERT_EQ(c.warnings.size(), 1u);
    EXPECT_EQ(c.warnings[0], path_ + ": not a tuning cache (not valid JSON; truncated or overwritten?); ignored");
  }
  LoadedCache other = parse_cache(R"({"format": "something-else", "version": 1, "entries": []})", "x.json");
  EXPECT_EQ(other.status, LoadedCache::Status::NotACache);
  EXPECT_NE(other.warnings.at(0).find("x.json: not a tuning cache (no \"format\""), std::string::npos);
}

TEST_F(AutotuneCache, WrongVersionIsIgnoredAndNeverOverwritten) {
  std::string newer = R"({"format": "tcc-tuning-cache", "version": 2, "entries": []})";
  write(path_, newer);
  LoadedCache c = load_cache(path_);
  EXPECT_EQ(c.status, LoadedCache::Status::OtherVersion);
  EXPECT_EQ(c.warnings.at(0), path_ + ": tuning cache version 2, this tcc reads version 1; ignored");
  EXPECT_THROW(add_to_cache(path_, {entry("a")}), InputError);
  EXPECT_EQ(read_text(path_), newer);
}

TEST_F(AutotuneCache, BadEntriesAreSkippedNamingTheEntryAndTheRestKept) {
  nlohmann::json j = nlohmann::json::parse(cache_text({entry("a"), entry("b"), entry("c"), entry("d"), entry("e")}));
  j["entries"][0]["config"]["block"] = "256";           // wrong type
  j["entries"][1]["time_us"] = -1;                        // out of range
  j["entries"][2].erase("device");                        // missing
  j["entries"][3] = 42;                                   // not an object
  LoadedCache c = parse_cache(j.dump(), "t.json");
  EXPECT_EQ(c.status, LoadedCache::Status::Ok);
  ASSERT_EQ(c.entries.size(), 1u);
  EXPECT_EQ(c.entries[0].signature, "e");
  ASSERT_EQ(c.warnings.size(), 4u);
  std::string op = " (pointwise(f32[8,768]) -> f32[8,768])";
  EXPECT_EQ(c.warnings[0], "t.json: entry 0" + op + ": 'config.block' must be an integer from 32 to 1024; skipped");
  EXPECT_EQ(c.warnings[1], "t.json: entry 1" + op + ": 'time_us' must be a positive number of microseconds; skipped");
  EXPECT_EQ(c.warnings[2], "t.json: entry 2" + op + ": 'device' is missing; skipped");
  EXPECT_EQ(c.warnings[3], "t.json: entry 3: not an object; skipped");
}

TEST_F(AutotuneCache, AddingMergesReplacesAndMovesACorruptFileAside) {
  add_to_cache(path_, {entry("a", 128), entry("b")});
  add_to_cache(path_, {entry("a", 512), entry("c")});
  LoadedCache c = load_cache(path_);
  ASSERT_EQ(c.entries.size(), 3u);
  EXPECT_EQ(c.entries[0].config.block, 512);  // the newer measurement of "a" replaced the older
  EXPECT_FALSE(fs::exists(path_ + ".tmp." + std::to_string(getpid())));

  write(path_, "{\"format\": \"tcc-tuning");
  std::vector<std::string> w = add_to_cache(path_, {entry("d")});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1], path_ + ": moved aside to " + path_ + ".corrupt; starting a new cache");
  EXPECT_EQ(read_text(path_ + ".corrupt"), "{\"format\": \"tcc-tuning");
  LoadedCache fresh = load_cache(path_);
  ASSERT_EQ(fresh.entries.size(), 1u);
  EXPECT_EQ(fresh.entries[0].signature, "d");
}

TEST_F(AutotuneCache, ConcurrentWritersAllSurvive) {
  // Each child adds its own entries one at a time, so the processes interleave.
  constexpr int kProcesses = 6, kEach = 5;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        for (int i = 0; i < kEach; ++i)
          add_to_cache(path_, {entry("kernel " + std::to_string(p) + "." + std::to_string(i))});
      } catch (...) {
        rc = 1;
      }
      _exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  LoadedCache c = load_cache(path_);
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.entries.size(), static_cast<size_t>(kProcesses * kEach));
}

TEST_F(AutotuneCache, LookupsByExactDeviceAndByName) {
  std::vector<CacheEntry> es = {entry("k", 128, "NVIDIA H100 80GB HBM3", "12.8"),
                                entry("k", 512, "NVIDIA H100 80GB HBM3", "13.0"), entry("k", 64, "NVIDIA H200")};
  DeviceKey h100_128 = es[0].device;
  ASSERT_NE(find_entry(es, h100_128, "k"), nullptr);
  EXPECT_EQ(find_entry(es, h100_128, "k")->config.block, 128);
  EXPECT_EQ(find_entry(es, h100_128, "other"), nullptr);
  DeviceKey unknown = h100_128;
  unknown.driver = "13.1";
  EXPECT_EQ(find_entry(es, unknown, "k"), nullptr);
  EXPECT_EQ(find_entry_by_name(es, "NVIDIA H100 80GB HBM3", "k")->config.block, 512);  // newest driver
  EXPECT_EQ(find_entry_by_name(es, "NVIDIA A100", "k"), nullptr);
  EXPECT_EQ(device_names(es), (std::vector<std::string>{"NVIDIA H100 80GB HBM3", "NVIDIA H200"}));
}

}  // namespace
}  // namespace tcc::autotune
