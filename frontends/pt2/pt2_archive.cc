#include "frontends/pt2/pt2_archive.h"

#include <zip.h>

#include "src/diag/errors.h"

namespace tcc {

struct Pt2Archive::Zip {
  zip_t* archive = nullptr;
  ~Zip() {
    if (archive) zip_discard(archive);
  }
};

namespace {

std::string zip_message(zip_error_t* e) { return zip_error_strerror(e); }

// Why a zip entry name is unsafe, or "" when it is a plain relative path.
std::string unsafe_name(const std::string& name) {
  if (name.empty()) return "has an empty name";
  if (name[0] == '/') return "is an absolute path";
  if (name.find('\\') != std::string::npos) return "contains a backslash";
  if (name.find('\0') != std::string::npos) return "contains a NUL byte";
  size_t b = 0;
  while (b <= name.size()) {
    size_t e = name.find('/', b);
    if (e == std::string::npos) e = name.size();
    std::string part = name.substr(b, e - b);
    if (part == "..") return "escapes the archive ('..')";
    if (part == "." || (part.empty() && e != name.size())) return "has an empty or '.' path component";
    b = e + 1;
  }
  return "";
}

}  // namespace

Pt2Archive::Pt2Archive(std::string bytes, std::string file, Pt2Limits limits)
    : bytes_(std::move(bytes)), file_(std::move(file)), zip_(std::make_unique<Zip>()) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes_.data(), bytes_.size(), 0, &err);
  if (!src) {
    std::string msg = zip_message(&err);
    zip_error_fini(&err);
    throw InputError(file_ + ": cannot read the .pt2 archive: " + msg);
  }
  // ZIP_CHECKCONS: the central directory must agree with the local headers,
  // which catches most truncations and splices up front.
  zip_->archive = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!zip_->archive) {
    std::string msg = zip_message(&err);
    zip_error_fini(&err);
    zip_source_free(src);
    throw InputError(file_ + ": not a valid .pt2 archive (a zip file): " + msg);
  }
  zip_error_fini(&err);

  zip_int64_t n = zip_get_num_entries(zip_->archive, 0);
  if (n <= 0) throw InputError(file_ + ": the .pt2 archive is empty");
  if (static_cast<uint64_t>(n) > limits.max_entries)
    throw InputError(file_ + ": the .pt2 archive has " + std::to_string(n) + " entries, more than tcc reads (" +
                     std::to_string(limits.max_entries) + ")");
  uint64_t total = 0;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip_->archive, static_cast<zip_uint64_t>(i), 0, &st) != 0 || !st.name ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
      throw InputError(file_ + ": entry " + std::to_string(i) + " of the .pt2 archive cannot be read");
    std::string name = st.name;
    if (std::string why = unsafe_name(name); !why.empty())
      throw InputError(file_ + ": entry '" + name + "' " + why);
    if (!name.empty() && name.back() == '/') continue;  // a folder
    size_t slash = name.find('/');
    std::string root = slash == std::string::npos ? "" : name.substr(0, slash + 1);
    if (entries_.empty()) root_ = root;
    if (root != root_ && !root_.empty())
      throw InputError(file_ + ": entries '" + root_ + "...' and '" + name +
                       "' lie in different top-level folders; a .pt2 archive has one, or none");
    if (st.size > limits.small_entry_bytes && st.size / std::max<uint64_t>(st.comp_size, 1) > limits.max_ratio)
      throw InputError(file_ + ": entry '" + name + "' would inflate from " + std::to_string(st.comp_size) +
                       " to " + std::to_string(st.size) + " bytes, more than " + std::to_string(limits.max_ratio) +
                       " times its stored size (a zip bomb?)");
    total += st.size;
    if (st.size > limits.max_total_bytes || total > limits.max_total_bytes)
      throw InputError(file_ + ": the .pt2 archive's entries add up to more than " +
                       std::to_string(limits.max_total_bytes >> 30) + " GiB uncompressed (at '" + name + "')");
    if (!entries_.emplace(name.substr(root_.size()), static_cast<uint64_t>(i)).second)
      throw InputError(file_ + ": entry '" + name + "' appears twice");
  }
  if (entries_.empty()) throw InputError(file_ + ": the .pt2 archive holds no files");
}

Pt2Archive::~Pt2Archive() = default;

void Pt2Archive::fail(const std::string& path, const std::string& msg) const {
  throw InputError(file_ + ": entry '" + root_ + path + "': " + msg);
}

uint64_t Pt2Archive::size(const std::string& path) const {
  auto it = entries_.find(path);
  if (it == entries_.end()) fail(path, "is missing from the archive");
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(zip_->archive, it->second, 0, &st) != 0) fail(path, "cannot be read");
  return st.size;
}

std::vector<std::string> Pt2Archive::list(const std::string& folder) const {
  std::vector<std::string> out;
  for (auto it = entries_.lower_bound(folder); it != entries_.end() && it->first.compare(0, folder.size(), folder) == 0;
       ++it)
    out.push_back(it->first);
  return out;
}

std::string Pt2Archive::read(const std::string& path) const {
  uint64_t expected = size(path);
  zip_file_t* f = zip_fopen_index(zip_->archive, entries_.at(path), 0);
  if (!f) fail(path, std::string("cannot be opened: ") + zip_error_strerror(zip_get_error(zip_->archive)));
  std::string data(expected, '\0');
  uint64_t got = 0;
  std::string error;
  while (got < expected) {
    zip_int64_t r = zip_fread(f, data.data() + got, expected - got);
    if (r < 0) {
      error = zip_error_strerror(zip_file_get_error(f));
      break;
    }
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  // One more byte must not come: the data may not outgrow its declared size.
  char extra;
  zip_int64_t more = error.empty() && got == expected ? zip_fread(f, &extra, 1) : 0;
  if (more < 0 && error.empty()) error = zip_error_strerror(zip_file_get_error(f));
  zip_fclose(f);
  if (!error.empty()) fail(path, "is corrupt: " + error);
  if (got != expected || more > 0)
    fail(path, "holds a different number of bytes than its header declares (" + std::to_string(expected) + ")");
  return data;
}

}  // namespace tcc
