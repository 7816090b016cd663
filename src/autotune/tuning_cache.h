// The tuning cache: measured kernel configurations on disk, so that the next
// compile on the same machine (or on one the file was copied to) skips the
// benchmarking. docs/AUTOTUNE.md describes the file.
//
// An entry is keyed by the device (name, SM architecture, driver and CUDA
// versions) and the kernel signature (src/autotune/signature.h). Several tcc
// processes may tune into one file at once: writers take an exclusive flock on
// FILE.lock, re-read the file, merge, and replace it by renaming a temporary
// file over it, so readers (who take no lock) see the old or the new file,
// never a mix. Nothing read from the file is trusted: a file that is not a
// cache and an entry with a missing or mistyped field are skipped with a
// warning naming the file and the entry.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"

namespace tcc::autotune {

inline constexpr const char* kCacheFormat = "tcc-tuning-cache";
inline constexpr int kCacheVersion = 1;

struct DeviceKey {
  std::string name;    // as the driver reports it: "NVIDIA H100 80GB HBM3"
  std::string arch;    // "sm_90"
  std::string driver;  // CUDA driver API version: "13.0"
  std::string cuda;    // CUDA toolkit (NVRTC) version tcc was built with: "13.0"
  bool operator==(const DeviceKey&) const = default;
};

struct CacheEntry {
  DeviceKey device;
  std::string signature;  // kernel_signature()
  std::string op;         // op_summary(), for people reading the file
  KernelConfig config;    // the fastest measured
  double time_us = 0;          // its median time
  double default_time_us = 0;  // default_config's median time, for the gain
  int candidates = 0;          // how many configs were measured
};

struct LoadedCache {
  enum class Status {
    Missing,       // no file: an empty cache
    Ok,            // a cache of this version (entries may still have been skipped)
    NotACache,     // unreadable, not JSON (truncated, garbage) or not tcc's format
    OtherVersion,  // a tcc tuning cache of a version this tcc does not read
  };
  Status status = Status::Missing;
  std::vector<CacheEntry> entries;    // the valid ones, sorted by device and signature
  std::vector<std::string> warnings;  // "FILE: entry 3 (op ...): 'time_us' must be a positive number; skipped"
};

// Reads `path`; never throws for what is in the file.
LoadedCache load_cache(const std::string& path);
// The same, from text (`path` only names it in warnings).
LoadedCache parse_cache(const std::string& text, const std::string& path);

// The file text for `entries`, sorted, so equal caches are equal files.
std::string cache_text(std::vector<CacheEntry> entries);

// Adds `entries` to the cache at `path` (an entry with the same device and
// signature is replaced) under the lock, atomically; creates the file. A file
// that is not a cache is moved aside to PATH.corrupt first (with a warning); a
// cache of another version is left alone and is an InputError. Returns the
// warnings of reading the old file.
std::vector<std::string> add_to_cache(const std::string& path, const std::vector<CacheEntry>& entries);

// Writes `entries` as a new cache file at `path` (temporary file + rename).
void write_cache(const std::string& path, const std::vector<CacheEntry>& entries);

// The entry for exactly this device and signature.
const CacheEntry* find_entry(const std::vector<CacheEntry>& entries, const DeviceKey& device,
                             const std::string& signature);
// Without a GPU there is no driver to ask: the entry for a device of this name
// measured with the newest driver and CUDA versions.
const CacheEntry* find_entry_by_name(const std::vector<CacheEntry>& entries, const std::string& device_name,
                                     const std::string& signature);
// The device names the entries were measured on, sorted, without repeats.
std::vector<std::string> device_names(const std::vector<CacheEntry>& entries);

}  // namespace tcc::autotune
