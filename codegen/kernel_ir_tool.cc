#include "codegen/kernel_ir_tool.h"

#include "codegen/emit.h"
#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_passes.h"
#include "src/diag/errors.h"

namespace tcc::kir {

std::string run_kernel_tool(std::vector<Kernel> kernels, const std::string& passes, const std::string& emit) {
  // Flags are checked before any work, so a typo fails fast.
  if (emit != "ir" && emit != "cuda" && emit != "c")
    throw InputError("unknown --emit '" + emit + "' (known: ir, cuda, c)");
  std::vector<const KernelPassInfo*> pipeline = kernel_pipeline(passes);
  for (Kernel& k : kernels) k = run_kernel_passes(std::move(k), pipeline);
  if (emit == "cuda") return emit_cuda(kernels);
  if (emit == "c") return emit_host(kernels);
  return print_kernels(kernels);
}

}  // namespace tcc::kir
