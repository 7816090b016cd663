// Template kernel kinds: the kernel kinds whose whole CUDA and host function a
// template file writes (codegen/<kind>_template.{h,cc}: attention with its
// backward's passes, TopK, recurrence, NMS, RoiAlign), where emit_cuda.cc and
// emit_host.cc print the pointwise and reduction kinds instruction by
// instruction and gemm and conv are library calls. Each template kind declares
// its hooks once, as a TemplateKernel its template file defines, and every
// consumer finds them through template_kernel(kind): choose_schedule and
// config_refusal (kernel_schedule.cc), emit_cuda, emit_host and launch_config,
// the manifest's and report's facts (module_facts.cc), and autotuning's
// candidates (src/autotune/candidates.cc).
//
// A new template kind is its Kind (src/module/kernel_abi.h) and descriptor
// (kernel_ir.h) with their text and verifier (kernel_ir_text.cc,
// kernel_ir_verify.cc), its lowering (lower_<kind>.cc), its template file pair
// defining a TemplateKernel, and its line in template_kernel (template_kernel.cc).
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_config.h"
#include "codegen/kernel_ir.h"
#include "src/module/manifest_records.h"

namespace tcc {

struct TemplateKernel {
  // The config without tuning, which choose_schedule gives the kind's kernels.
  KernelConfig (*default_config)(const kir::Kernel& k);
  // Why config c cannot run k ("" where it can): config_refusal for the kind.
  std::string (*refusal)(const kir::Kernel& k, const KernelConfig& c);
  // Every config autotuning measures beside the default, each one refusal takes.
  std::vector<KernelConfig> (*configs)(const kir::Kernel& k);
  // Config c's CUDA function (`extern "C" __global__` named k.name with
  // emit_cuda's parameter convention); c must pass refusal.
  std::string (*emit_cuda)(const kir::Kernel& k, const KernelConfig& c);
  // The kernel's host function, with emit_host's convention.
  std::string (*emit_host)(const kir::Kernel& k);
  // The grid, block and workspace of k under c (launch_config adds what every kind's launch shares).
  KernelLaunch (*launch)(const kir::Kernel& k, const KernelConfig& c);
  // The precision of k's arithmetic under c, for the report's roofline (kernel_precision).
  std::string (*precision)(const kir::Kernel& k, const KernelConfig& c);
  // The layout in words, for the manifest and reports (schedule_text): "block 256 a class".
  std::string (*schedule)(const kir::Kernel& k, const KernelConfig& c);
  // The knobs c sets, as autotuning's tables print them (config_text): "block=128 rows=4".
  std::string (*config_text)(const KernelConfig& c);
};

// The hooks of kind's template, or nullptr for the kinds without one
// (pointwise, reduction, gemm, conv).
const TemplateKernel* template_kernel(kir::Kind kind);

}  // namespace tcc
