#include "src/autotune/tuning_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "codegen/gemm_template.h"
#include "src/diag/errors.h"

namespace tcc::autotune {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ojson = nlohmann::ordered_json;

// Why a field is unusable, thrown while reading one entry and caught per entry.
struct BadField {
  std::string what;
};

const json& member(const json& j, const std::string& key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw BadField{"'" + where + key + "' is missing"};
  return j.at(key);
}

std::string text_field(const json& j, const std::string& key, const std::string& where = "") {
  const json& v = member(j, key, where);
  if (!v.is_string() || v.get<std::string>().empty())
    throw BadField{"'" + where + key + "' must be a non-empty string"};
  return v.get<std::string>();
}

int int_field(const json& j, const std::string& key, int lo, int hi, const std::string& where = "") {
  const json& v = member(j, key, where);
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    throw BadField{"'" + where + key + "' must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi)};
  return v.get<int>();
}

double time_field(const json& j, const std::string& key) {
  const json& v = member(j, key, "");
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0)
    throw BadField{"'" + key + "' must be a positive number of microseconds"};
  return v.get<double>();
}

// Range checks only: whether a config fits a kernel is checked when it is
// applied (config_refusal, codegen/kernel_schedule.h), since the file does not hold the kernel.
CacheEntry read_entry(const json& j) {
  if (!j.is_object()) throw BadField{"not an object"};
  CacheEntry e;
  const json& d = member(j, "device", "");
  e.device.name = text_field(d, "name", "device.");
  e.device.arch = text_field(d, "arch", "device.");
  e.device.driver = text_field(d, "driver", "device.");
  e.device.cuda = text_field(d, "cuda", "device.");
  e.signature = text_field(j, "signature");
  e.op = text_field(j, "op");
  const json& c = member(j, "config", "");
  e.config.block = int_field(c, "block", 32, 1024, "config.");
  e.config.vector_width = int_field(c, "vector_width", 1, 4, "config.");
  e.config.rows_per_block = int_field(c, "rows_per_block", 1, 8, "config.");
  e.config.split = int_field(c, "split", 1, kMaxSplit, "config.");
  e.config.algo = int_field(c, "algo", 0, kLibraryAlgos - 1, "config.");
  // Caches written before the GEMM template have no tile: the library call.
  e.config.tile = c.contains("tile") ? int_field(c, "tile", 0, static_cast<int>(kGemmTiles.size()), "config.") : 0;
  // Nor, before the column schedule, columns: rows one per block.
  e.config.columns = c.contains("columns") && int_field(c, "columns", 0, 1, "config.") == 1;
  // Nor, before row caches, row_cache: every pass reads its row.
  e.config.row_cache = c.contains("row_cache") ? int_field(c, "row_cache", 0, kMaxRowCache, "config.") : 0;
  // Nor, before tiled transposes, tiled: element by element.
  e.config.tiled = c.contains("tiled") && int_field(c, "tiled", 0, 1, "config.") == 1;
  // Nor, before the attention kernel's split layout, lanes_per_row: the warp layout.
  e.config.lanes_per_row = c.contains("lanes_per_row") ? int_field(c, "lanes_per_row", 0, 8, "config.") : 0;
  // Nor, before its tensor-core layout, mma: the CUDA cores.
  e.config.mma = c.contains("mma") && int_field(c, "mma", 0, 1, "config.") == 1;
  e.time_us = time_field(j, "time_us");
  e.default_time_us = time_field(j, "default_time_us");
  e.candidates = int_field(j, "candidates", 1, 1 << 20);
  return e;
}

ojson entry_json(const CacheEntry& e) {
  ojson j;
  j["device"] = {{"name", e.device.name}, {"arch", e.device.arch}, {"driver", e.device.driver},
                 {"cuda", e.device.cuda}};
  j["signature"] = e.signature;
  j["op"] = e.op;
  j["config"] = {{"block", e.config.block},
                 {"vector_width", e.config.vector_width},
                 {"rows_per_block", e.config.rows_per_block},
                 {"split", e.config.split},
                 {"algo", e.config.algo},
                 {"tile", e.config.tile},
                 {"columns", e.config.columns ? 1 : 0},
                 {"row_cache", e.config.row_cache},
                 {"tiled", e.config.tiled ? 1 : 0},
                 {"lanes_per_row", e.config.lanes_per_row},
                 {"mma", e.config.mma ? 1 : 0}};
  j["time_us"] = e.time_us;
  j["default_time_us"] = e.default_time_us;
  j["candidates"] = e.candidates;
  return j;
}

auto key_of(const CacheEntry& e) {
  return std::tie(e.device.name, e.device.arch, e.device.driver, e.device.cuda, e.signature);
}

// Later entries replace earlier ones with the same key; the result is sorted.
std::vector<CacheEntry> merged(std::vector<CacheEntry> entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const CacheEntry& a, const CacheEntry& b) { return key_of(a) < key_of(b); });
  std::vector<CacheEntry> out;
  for (CacheEntry& e : entries) {
    if (!out.empty() && key_of(out.back()) == key_of(e))
      out.back() = std::move(e);
    else
      out.push_back(std::move(e));
  }
  return out;
}

// "13.0" < "13.1" < "13.10": numerically by dot-separated part.
std::vector<long> version_parts(const std::string& v) {
  std::vector<long> parts;
  std::istringstream in(v);
  std::string p;
  while (std::getline(in, p, '.')) parts.push_back(std::strtol(p.c_str(), nullptr, 10));
  return parts;
}

// Holds an exclusive flock on PATH.lock for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : path_(path + ".lock") {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(path_ + ": cannot open the tuning cache's lock file: " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd_);
      throw InputError(path_ + ": cannot lock: " + std::strerror(err));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

LoadedCache parse_cache(const std::string& text, const std::string& path) {
  LoadedCache c;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    c.status = LoadedCache::Status::NotACache;
    c.warnings.push_back(path + ": not a tuning cache (not valid JSON; truncated or overwritten?); ignored");
    return c;
  }
  if (!j.is_object() || !j.contains("format") || j["format"] != kCacheFormat) {
    c.status = LoadedCache::Status::NotACache;
    c.warnings.push_back(path + ": not a tuning cache (no \"format\": \"" + kCacheFormat + "\"); ignored");
    return c;
  }
  if (!j.contains("version") || j["version"] != kCacheVersion) {
    c.status = LoadedCache::Status::OtherVersion;
    c.warnings.push_back(path + ": tuning cache version " + (j.contains("version") ? j["version"].dump() : "(none)") +
                         ", this tcc reads version " + std::to_string(kCacheVersion) + "; ignored");
    return c;
  }
  if (!j.contains("entries") || !j["entries"].is_array()) {
    c.status = LoadedCache::Status::NotACache;
    c.warnings.push_back(path + ": tuning cache without an \"entries\" array; ignored");
    return c;
  }
  c.status = LoadedCache::Status::Ok;
  std::vector<CacheEntry> entries;
  const json& list = j["entries"];
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      entries.push_back(read_entry(list[i]));
    } catch (const BadField& bad) {
      std::string name = "entry " + std::to_string(i);
      if (list[i].is_object() && list[i].contains("op") && list[i]["op"].is_string())
        name += " (" + list[i]["op"].get<std::string>() + ")";
      c.warnings.push_back(path + ": " + name + ": " + bad.what + "; skipped");
    }
  }
  c.entries = merged(std::move(entries));
  return c;
}

LoadedCache load_cache(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return {};
  std::ifstream in(path, std::ios::binary);
  if (!fs::is_regular_file(path, ec) || !in) {
    LoadedCache c;
    c.status = LoadedCache::Status::NotACache;
    c.warnings.push_back(path + ": cannot read the tuning cache; ignored");
    return c;
  }
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return parse_cache(text, path);
}

std::string cache_text(std::vector<CacheEntry> entries) {
  ojson list = ojson::array();
  for (const CacheEntry& e : merged(std::move(entries))) list.push_back(entry_json(e));
  ojson j;
  j["format"] = kCacheFormat;
  j["version"] = kCacheVersion;
  j["entries"] = list;
  return j.dump(2) + "\n";
}

void write_cache(const std::string& path, const std::vector<CacheEntry>& entries) {
  // The temporary file is in the same directory, so the rename stays on one
  // file system and is atomic; the pid keeps concurrent writers apart.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string text = cache_text(entries);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path + ": cannot write the tuning cache: " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == text.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot write the tuning cache: " + std::strerror(err));
  }
}

std::vector<std::string> add_to_cache(const std::string& path, const std::vector<CacheEntry>& entries) {
  FileLock lock(path);
  LoadedCache old = load_cache(path);
  if (old.status == LoadedCache::Status::OtherVersion)
    throw InputError(old.warnings.front() + "; not overwriting it (use another --cache file)");
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
    throw InputError(path + ": not a file; the tuning cache must be one");
  if (old.status == LoadedCache::Status::NotACache) {
    std::string aside = path + ".corrupt";
    fs::rename(path, aside, ec);
    if (ec) throw InputError(path + ": not a tuning cache and cannot be moved aside: " + ec.message());
    old.warnings.push_back(path + ": moved aside to " + aside + "; starting a new cache");
  }
  std::vector<CacheEntry> all = old.entries;
  all.insert(all.end(), entries.begin(), entries.end());
  write_cache(path, all);
  return old.warnings;
}

const CacheEntry* find_entry(const std::vector<CacheEntry>& entries, const DeviceKey& device,
                             const std::string& signature) {
  for (const CacheEntry& e : entries)
    if (e.device == device && e.signature == signature) return &e;
  return nullptr;
}

const CacheEntry* find_entry_by_name(const std::vector<CacheEntry>& entries, const std::string& device_name,
                                     const std::string& signature) {
  const CacheEntry* best = nullptr;
  for (const CacheEntry& e : entries) {
    if (e.device.name != device_name || e.signature != signature) continue;
    if (!best || std::make_pair(version_parts(best->device.driver), version_parts(best->device.cuda)) <
                     std::make_pair(version_parts(e.device.driver), version_parts(e.device.cuda)))
      best = &e;
  }
  return best;
}

std::vector<std::string> device_names(const std::vector<CacheEntry>& entries) {
  std::vector<std::string> names;
  for (const CacheEntry& e : entries) names.push_back(e.device.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace tcc::autotune
