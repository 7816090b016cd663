// A zip's entries in memory, read through libzip and written with
// zip_writer.h: tests that take a .pt2 archive (or a torch.save zip inside
// one) apart, change one entry and put it back together.
#pragma once

#include <gtest/gtest.h>
#include <zip.h>

#include <string>

#include "tests/unit/support/zip_writer.h"

namespace tcc {

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

}  // namespace tcc
