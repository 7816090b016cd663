// A fresh directory under the system's temporary directory, for tests that
// write files (modules, caches, reports).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tcc {

// A new directory named prefix_XXXXXX; the caller removes it.
inline std::filesystem::path make_temp_dir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "_XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  return tmpl;
}

// The bytes of a file a test wrote or reads (a report, a manifest, generated source); empty if it cannot be read.
inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fixture whose tests each get a fresh directory, dir_ (named after the
// test suite), removed after the test. Base: ::testing::Test, or a
// ::testing::TestWithParam<T> for a parameterized suite.
template <typename Base = ::testing::Test>
class TempDirFixture : public Base {
 protected:
  void SetUp() override {
    std::string suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    std::replace(suite.begin(), suite.end(), '/', '_');
    dir_ = make_temp_dir("tcc_" + suite);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

using TempDirTest = TempDirFixture<>;

// A fixture whose tests share one directory, suite_dir_ (named after the test
// suite), made before the suite's first test and removed after its last: for
// suites that build something once there (a host library). A suite that
// defines its own SetUpTestSuite calls this one first, and its
// TearDownTestSuite calls this one last.
class TempDirSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string suite = ::testing::UnitTest::GetInstance()->current_test_suite()->name();
    std::replace(suite.begin(), suite.end(), '/', '_');  // a parameterized suite's Prefix/Name
    suite_dir_ = make_temp_dir("tcc_" + suite);
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(suite_dir_); }

  static inline std::filesystem::path suite_dir_;
};

}  // namespace tcc
