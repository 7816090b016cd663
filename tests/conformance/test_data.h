// A node test's data: its data sets (test_data_set_N/input_K.pb and
// output_K.pb), read as the graph's value types say, and the comparison with
// the ONNX backend tolerances (|actual - expected| <= atol + rtol * |expected|,
// rtol 1e-3, atol 1e-7; exact for integers, bools and strings; NaN equals NaN).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "frontends/onnx/value_io.h"
#include "src/ir/tensor.h"

namespace tcc::conformance {

using tcc::read_value_pb;

// The default-domain opsets the suite runs.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 23;

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

// The test's data set folders, in name order.
std::vector<std::filesystem::path> data_sets(const std::filesystem::path& test_dir);
// dir/<prefix>0.pb, dir/<prefix>1.pb, ... up to the first missing one.
std::vector<std::filesystem::path> numbered_files(const std::filesystem::path& dir, const std::string& prefix);
// Empty when `actual` matches `expected`; otherwise the first mismatch.
std::string compare(const Tensor& expected, const Tensor& actual);

}  // namespace tcc::conformance
