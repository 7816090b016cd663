#include "codegen/kernel_ir_tool.h"

#include "codegen/emit.h"
#include "codegen/kernel_ir_text.h"
#include "codegen/kernel_passes.h"
#include "src/diag/errors.h"

namespace tcc::kir {

std::string run_kernel_tool(std::vector<Kernel> kernels, const KernelToolOptions& o, std::ostream& report) {
  // Flags are checked before any work, so a typo fails fast.
  if (o.emit != "ir" && o.emit != "cuda" && o.emit != "c")
    throw InputError("unknown --emit '" + o.emit + "' (known: ir, cuda, c)");
  AfterKernelPass print;
  if (o.print_ir_after_all || o.print_ir_after_change)
    print = [&](const KernelPassInfo& pass, const Kernel& k, bool changed) {
      if (o.print_ir_after_all || changed)
        report << "// ----- kernel IR of " << k.name << " after " << pass.name << (changed ? "" : " (unchanged)")
               << " -----\n"
               << print_kernel(k);
    };
  KernelPassRunner runner(kernel_pipeline(o.passes), find_device(o.device), print);
  for (Kernel& k : kernels) k = runner.run(std::move(k));
  if (o.time_passes) report << timing_table(runner.records());
  if (o.emit == "cuda") return emit_cuda(kernels);
  if (o.emit == "c") return emit_host(kernels);
  return print_kernels(kernels);
}

}  // namespace tcc::kir
