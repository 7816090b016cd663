#include "codegen/kernel_passes.h"

#include <algorithm>

#include "codegen/collapse_axes.h"
#include "codegen/kernel_ir_verify.h"
#include "src/diag/errors.h"

namespace tcc::kir {

namespace {

void verify_after(const Kernel& k, const std::string& step) {
  if (std::optional<KernelProblem> p = verify_kernel(k))
    throw InternalError("kernel " + k.name + " after " + step + ": " +
                        (p->instr >= 0 ? "%" + std::to_string(p->instr) + ": " : "") + p->message + "\n" +
                        print_kernel(k));
}

}  // namespace

const std::vector<KernelPassInfo>& all_kernel_passes() {
  static const std::vector<KernelPassInfo> passes = {
      {"collapse_axes", "Merge neighbouring domain axes that every load and store steps through as one",
       collapse_axes},
  };
  return passes;
}

std::vector<const KernelPassInfo*> default_kernel_pipeline() {
  std::vector<const KernelPassInfo*> pipeline;
  for (const KernelPassInfo& p : all_kernel_passes()) pipeline.push_back(&p);
  return pipeline;
}

std::vector<const KernelPassInfo*> kernel_pipeline(const std::string& names) {
  std::vector<const KernelPassInfo*> pipeline;
  if (names.empty()) return pipeline;
  size_t start = 0;
  while (start <= names.size()) {
    size_t end = std::min(names.find(',', start), names.size());
    std::string name = names.substr(start, end - start);
    const KernelPassInfo* found = nullptr;
    for (const KernelPassInfo& p : all_kernel_passes())
      if (p.name == name) found = &p;
    if (found == nullptr) {
      std::string known;
      for (const KernelPassInfo& p : all_kernel_passes()) known += (known.empty() ? "" : ", ") + p.name;
      throw InputError("unknown kernel-IR pass '" + name + "' (known: " + known + ")");
    }
    pipeline.push_back(found);
    start = end + 1;
  }
  return pipeline;
}

Kernel run_kernel_passes(Kernel k, const std::vector<const KernelPassInfo*>& passes) {
  verify_after(k, "lowering");
  for (const KernelPassInfo* p : passes) {
    k = p->run(std::move(k));
    verify_after(k, p->name);
  }
  return k;
}

}  // namespace tcc::kir
