// The config of the templates that choose only their threads per block (the
// attention backward's passes, recurrence, NMS, RoiAlign) or that and their rows per block
// (TopK): KernelConfig's defaults but for those two knobs, one refusal and one
// candidate grid for all of them; and the block sizes every template takes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/kernel_config.h"

namespace tcc {

// "" where `block` is a multiple of 32 from kMinBlock to max_block; else why not.
std::string block_refusal(int block, int max_block);
// KernelConfig's defaults but for the block and the rows per block.
KernelConfig block_config(int block, int rows_per_block = 1);
// "" where c sets no knob but its block (and its rows per block where `rows`),
// a multiple of 32 from 32 to max_block; else why not, naming `kernels`
// ("recurrence kernels choose their threads per block, nothing else").
std::string block_config_refusal(const KernelConfig& c, const std::string& kernels, int max_block, bool rows = false);
// block_config(b, r) for b doubling from `first` to `last` and each r of
// `rows`, in that order, where `refusal` gives "".
std::vector<KernelConfig> block_configs(int first, int last, const std::vector<int>& rows,
                                        const std::function<std::string(const KernelConfig&)>& refusal);
// "block=128": c's block as autotuning's tables print it (TemplateKernel::config_text).
std::string block_config_text(const KernelConfig& c);

}  // namespace tcc
