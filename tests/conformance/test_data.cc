// Reading a node test's data sets and comparing outputs with what they expect.
#include "tests/conformance/test_data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>


namespace tcc::conformance {

namespace fs = std::filesystem;

namespace {

std::string multi_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] > 0) {
      idx[i] = flat % shape[i];
      flat /= shape[i];
    }
  }
  return shape_str(idx);
}

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string kind_name(const Tensor& t) {
  return t.is_sequence() ? "a sequence" : t.is_optional() ? "an optional" : "a tensor";
}

}  // namespace

// Sequences and optionals match element by element.
std::string compare(const Tensor& expected, const Tensor& actual) {
  if (expected.kind() != actual.kind()) return kind_name(actual) + ", expected " + kind_name(expected);
  if (expected.kind() != Tensor::Kind::Tensor) {
    const std::vector<Tensor>& e = expected.elements();
    const std::vector<Tensor>& a = actual.elements();
    if (e.size() != a.size())
      return std::to_string(a.size()) + " elements, expected " + std::to_string(e.size());
    for (size_t i = 0; i < e.size(); ++i) {
      std::string mismatch = compare(e[i], a[i]);
      if (!mismatch.empty()) return "element " + std::to_string(i) + ": " + mismatch;
    }
    return "";
  }
  if (expected.dtype() != actual.dtype())
    return "dtype " + std::string(dtype_name(actual.dtype())) + ", expected " + std::string(dtype_name(expected.dtype()));
  if (expected.shape() != actual.shape())
    return "shape " + shape_str(actual.shape()) + ", expected " + shape_str(expected.shape());
  if (expected.dtype() == DType::String) {
    for (int64_t i = 0; i < expected.numel(); ++i)
      if (expected.strings()[i] != actual.strings()[i])
        return "index " + multi_index(i, expected.shape()) + ": expected \"" + expected.strings()[i] +
               "\", actual \"" + actual.strings()[i] + "\"";
    return "";
  }
  bool exact = !is_float(expected.dtype());
  for (int64_t i = 0; i < expected.numel(); ++i) {
    bool ok;
    std::string e, a;
    if (exact) {
      int64_t x = expected.get_i64(i), y = actual.get_i64(i);
      ok = x == y;
      e = std::to_string(x), a = std::to_string(y);
    } else {
      double x = expected.get_f64(i), y = actual.get_f64(i);
      if (std::isnan(x) || std::isnan(y))
        ok = std::isnan(x) && std::isnan(y);
      else if (std::isinf(x) || std::isinf(y))
        ok = x == y;
      else
        ok = std::fabs(y - x) <= kAtol + kRtol * std::fabs(x);
      e = format_number(x), a = format_number(y);
    }
    if (!ok) return "index " + multi_index(i, expected.shape()) + ": expected " + e + ", actual " + a;
  }
  return "";
}

std::vector<fs::path> data_sets(const fs::path& test_dir) {
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(test_dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

std::vector<fs::path> numbered_files(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

}  // namespace tcc::conformance
