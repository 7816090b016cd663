// The kernel IR's text form: what print_kernel (codegen/kernel_ir.h) writes,
// read back. print_kernel(parse_kernels(t)[0]) == t for every kernel text the
// printer produced; the grammar is in docs/KERNEL_IR.md. `tcc kir` reads it,
// and it is the language of the kernel-IR tests (tests/kernel_ir/).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_ir.h"

namespace tcc::kir {

// The op that op_name spells `name`, or nullopt: the one place the parser
// reads op names, so the op list may move without the parser changing.
std::optional<Op> op_by_name(std::string_view name);

// The kernels of `text`, in order (their names unique), each checked by verify_kernel
// (codegen/kernel_ir_verify.h). Malformed text, and a kernel that breaks an
// invariant, is an InputError "FILE:LINE:COL: ..." pointing at the
// instruction (or the kernel) at fault. A store's dtype, which the text does
// not spell, is its value's.
std::vector<Kernel> parse_kernels(const std::string& text, const std::string& file = "<text>");

// The kernels printed one after the other: what parse_kernels reads.
std::string print_kernels(const std::vector<Kernel>& kernels);

}  // namespace tcc::kir
