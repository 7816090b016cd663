// A zip's entries in memory, read and written through libzip: tests that take
// a .pt2 archive (or a torch.save zip inside one) apart, change one entry and
// put it back together.
#pragma once

#include <gtest/gtest.h>
#include <zip.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tcc {

// (name, bytes), in the zip's order.
using ZipEntries = std::vector<std::pair<std::string, std::string>>;

inline ZipEntries read_zip(const std::string& bytes) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(bytes.data(), bytes.size(), 0, &err);
  zip_t* z = src ? zip_open_from_source(src, ZIP_RDONLY, &err) : nullptr;
  zip_error_fini(&err);
  EXPECT_NE(z, nullptr) << "not a zip";
  ZipEntries out;
  if (!z) return out;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    zip_stat_index(z, i, 0, &st);
    std::string data(st.size, '\0');
    zip_file_t* f = zip_fopen_index(z, i, 0);
    zip_fread(f, data.data(), st.size);
    zip_fclose(f);
    out.emplace_back(st.name, data);
  }
  zip_discard(z);
  return out;
}

// The entries as a zip, each stored, or deflated where `deflate` says.
inline std::string write_zip(const ZipEntries& entries,
                             const std::function<bool(const std::string&)>& deflate = nullptr) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* out = zip_source_buffer_create(nullptr, 0, 0, &err);
  zip_t* z = zip_open_from_source(out, ZIP_TRUNCATE, &err);
  zip_error_fini(&err);
  zip_source_keep(out);
  for (const auto& [name, data] : entries) {
    zip_source_t* s = zip_source_buffer(z, data.data(), data.size(), 0);
    zip_int64_t i = zip_file_add(z, name.c_str(), s, ZIP_FL_ENC_UTF_8);
    EXPECT_GE(i, 0) << name;
    zip_set_file_compression(z, i, deflate && deflate(name) ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  EXPECT_EQ(zip_close(z), 0);
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
