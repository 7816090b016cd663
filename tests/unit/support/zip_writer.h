// Entries written as a zip in memory through libzip, for the tests that build
// a .pt2 archive (or a torch.save zip inside one) and for the fuzzers, which
// have no gtest: a failure throws.
#pragma once

#include <zip.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tcc {

// (name, bytes), in the zip's order.
using ZipEntries = std::vector<std::pair<std::string, std::string>>;

// The entries as a zip, each stored, or deflated where `deflate` says.
inline std::string write_zip(const ZipEntries& entries,
                             const std::function<bool(const std::string&)>& deflate = nullptr) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = out ? zip_open_from_source(out, ZIP_TRUNCATE, &err) : nullptr;
  zip_error_fini(&err);
  if (z == nullptr) {
    if (out) zip_source_free(out);
    throw std::runtime_error("write_zip: cannot open a zip in memory");
  }
  zip_source_keep(out);
  for (const auto& [name, data] : entries) {
    zip_source_t* s = zip_source_buffer(z, data.data(), data.size(), 0);
    zip_int64_t i = s ? zip_file_add(z, name.c_str(), s, ZIP_FL_ENC_UTF_8) : -1;
    if (i < 0) {
      if (s) zip_source_free(s);
      zip_discard(z);
      zip_source_free(out);
      throw std::runtime_error("write_zip: cannot add " + name);
    }
    zip_set_file_compression(z, i, deflate && deflate(name) ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(z) != 0) {
    zip_discard(z);
    zip_source_free(out);
    throw std::runtime_error("write_zip: cannot write the zip");
  }
  std::string bytes;
  zip_stat_t st;
  if (zip_source_stat(out, &st) == 0 && zip_source_open(out) == 0) {
    bytes.resize(st.size);
    zip_source_read(out, bytes.data(), st.size);
    zip_source_close(out);
  }
  zip_source_free(out);
  return bytes;
}

}  // namespace tcc
