#include "codegen/kernel_ir_tool.h"

#include "codegen/emit.h"
#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_passes.h"
#include "src/diag/errors.h"

namespace tcc::kir {

std::string run_kernel_tool(std::vector<Kernel> kernels, const std::string& passes, const std::string& emit,
                            const std::string& device) {
  // Flags are checked before any work, so a typo fails fast.
  if (emit != "ir" && emit != "cuda" && emit != "c")
    throw InputError("unknown --emit '" + emit + "' (known: ir, cuda, c)");
  KernelPassRunner runner(kernel_pipeline(passes), find_device(device));
  for (Kernel& k : kernels) k = runner.run(std::move(k));
  if (emit == "cuda") return emit_cuda(kernels);
  if (emit == "c") return emit_host(kernels);
  return print_kernels(kernels);
}

}  // namespace tcc::kir
