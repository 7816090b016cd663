#include "src/autotune/signature.h"

namespace tcc::autotune {

namespace {

std::map<std::string, int64_t> kernel_sizes(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> out;
  for (const std::string& s : k.size_params) {
    auto it = sizes.find(s);
    out[s] = it == sizes.end() ? 1 : it->second;
  }
  return out;
}

std::string buffer_text(const kir::Buffer& b, const std::map<std::string, int64_t>& sizes) {
  std::string s = std::string(dtype_name(b.dtype)) + "[";
  for (size_t d = 0; d < b.shape.size(); ++d) {
    std::optional<int64_t> v = b.shape[d].evaluate(sizes);
    s += (d ? "," : "") + (v ? std::to_string(*v) : b.shape[d].str());
  }
  return s + "]";
}

}  // namespace

std::string kernel_signature(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
  std::string s = kir::structural_key(k);
  std::string at;
  for (const auto& [name, v] : kernel_sizes(k, sizes)) at += (at.empty() ? "at " : ", ") + name + "=" + std::to_string(v);
  return at.empty() ? s : s + at + "\n";
}

std::string op_summary(const kir::Kernel& k, const std::map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> at = kernel_sizes(k, sizes);
  std::string ins, outs;
  for (const kir::Buffer& b : k.buffers) {
    std::string& list = b.output ? outs : ins;
    list += (list.empty() ? "" : ", ") + buffer_text(b, at);
  }
  std::string s = std::string(kir::kind_name(k.kind)) + "(" + ins + ") -> " + outs;
  if (k.gemm && k.gemm->activation != "none") s += " +" + k.gemm->activation;
  return s;
}

}  // namespace tcc::autotune
