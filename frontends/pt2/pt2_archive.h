// The zip container of a torch.export.save archive (.pt2), or of a torch.save
// file inside one, read through libzip.
//
// Since torch 2.8, torch writes one top-level folder per archive ("<name>/"),
// holding archive_format ("pt2"), archive_version, models/<model>.json (the
// program), data/weights/ and data/constants/ (tensor storages); torch 2.7
// and earlier write their entries (serialized_exported_program.json, ...) at
// the top, with no folder; torch.save's zip has one folder too. This class
// only reads entries; what they mean is pt2_importer's business. Every entry
// name is checked when the archive is opened: none may be absolute, climb out
// with "..", or lie outside the top-level folder the first entry names (if it
// names one); declared sizes are capped (a zip bomb is refused before
// anything is inflated) and every read returns exactly the declared size.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tcc {

// Caps on what an archive may make tcc allocate.
struct Pt2Limits {
  uint64_t max_total_bytes = uint64_t{32} << 30;  // all entries, uncompressed
  uint64_t max_entries = 1 << 20;
  // A compressed entry may inflate to at most this many times its stored size
  // (entries under small_entry_bytes excepted): torch stores tensors without
  // compression, so a high ratio means a bomb, not a model.
  uint64_t max_ratio = 200;
  uint64_t small_entry_bytes = uint64_t{1} << 20;
};

class Pt2Archive {
 public:
  // Opens the archive held in `bytes` (kept alive by the archive); `file`
  // names it in diagnostics. Throws InputError for a corrupt or truncated zip,
  // an unsafe entry name or sizes over the limits.
  Pt2Archive(std::string bytes, std::string file, Pt2Limits limits = {});
  ~Pt2Archive();
  Pt2Archive(const Pt2Archive&) = delete;
  Pt2Archive& operator=(const Pt2Archive&) = delete;

  const std::string& file() const { return file_; }
  // The archive's top-level folder, with its trailing '/'; "" in an archive
  // with no folder.
  const std::string& root() const { return root_; }
  // Entry paths below root() (no root prefix).
  bool has(const std::string& path) const { return entries_.count(path) != 0; }
  uint64_t size(const std::string& path) const;
  std::vector<std::string> list(const std::string& folder) const;
  // The whole entry; a missing entry, a read error or a size different from
  // the declared one is an InputError naming the archive and the entry.
  std::string read(const std::string& path) const;

  // "ARCHIVE: entry 'ROOT/PATH': MSG".
  [[noreturn]] void fail(const std::string& path, const std::string& msg) const;

 private:
  struct Zip;
  std::string bytes_;
  std::string file_;
  std::string root_;
  std::map<std::string, uint64_t> entries_;  // path below root -> zip index
  std::unique_ptr<Zip> zip_;
};

}  // namespace tcc
