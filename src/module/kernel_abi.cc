#include "src/module/kernel_abi.h"

#include "src/diag/errors.h"

namespace tcc {

namespace {
constexpr std::pair<KernelKind, const char*> kKindNames[] = {
    {KernelKind::Pointwise, "pointwise"}, {KernelKind::Reduction, "reduction"}, {KernelKind::Gemm, "gemm"},
    {KernelKind::Conv, "conv"}, {KernelKind::Attention, "attention"}, {KernelKind::TopK, "topk"},
    {KernelKind::Recurrence, "recurrence"}, {KernelKind::Nms, "nms"},
    {KernelKind::RoiAlign, "roi_align"}};
}  // namespace

const char* kernel_kind_name(KernelKind kind) {
  for (const auto& [k, name] : kKindNames)
    if (k == kind) return name;
  TCC_CHECK(false) << "unnamed kernel kind " << static_cast<int>(kind);
  return "";
}

std::string conv_epilogue_kernel(DType y) { return "tcc_conv_epilogue_" + std::string(dtype_name(y)); }

std::optional<KernelKind> parse_kernel_kind(std::string_view name) {
  for (const auto& [k, n] : kKindNames)
    if (name == n) return k;
  return std::nullopt;
}

}  // namespace tcc
