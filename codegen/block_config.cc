#include "codegen/block_config.h"

namespace tcc {

std::string block_refusal(int block, int max_block) {
  if (block >= kMinBlock && block <= max_block && block % 32 == 0) return "";
  return "block " + std::to_string(block) + " is not a multiple of 32 from " + std::to_string(kMinBlock) + " to " +
         std::to_string(max_block);
}

KernelConfig block_config(int block, int rows_per_block) {
  KernelConfig c;
  c.block = block;
  c.rows_per_block = rows_per_block;
  return c;
}

std::string block_config_refusal(const KernelConfig& c, const std::string& kernels, int max_block, bool rows) {
  if (c != block_config(c.block, rows ? c.rows_per_block : 1))
    return kernels + " choose their threads per block" + (rows ? " and rows per block" : "") + ", nothing else";
  return block_refusal(c.block, max_block);
}

std::vector<KernelConfig> block_configs(int first, int last, const std::vector<int>& rows,
                                        const std::function<std::string(const KernelConfig&)>& refusal) {
  std::vector<KernelConfig> out;
  for (int block = first; block <= last; block *= 2)
    for (int r : rows)
      if (refusal(block_config(block, r)).empty()) out.push_back(block_config(block, r));
  return out;
}

std::string block_config_text(const KernelConfig& c) { return "block=" + std::to_string(c.block); }

}  // namespace tcc
