// Running a module's kernels on the fake driver (fake_cuda.h) as their host
// kernels: shared by the fake driver's tests.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "module.h"
#include "tests/fake_cuda/fake_cuda.h"

namespace tcc {

// A binder (fake_cuda::set_kernel_binder) that runs each launch of `module`'s
// kernels as its host kernel. cuLaunchKernel's parameters are the buffers'
// device pointers, then the sizes (codegen/emit_cuda.cc's order, which host
// kernels share), then a split reduction's workspace, which the host kernel
// does not take, then the random offset's address, which it takes after the
// buffers. The kernel advancing the offset takes that address alone; a conv
// epilogue takes three pointers and four sizes (src/module/kernel_abi.h).
inline fake_cuda::KernelBinder host_kernel_binder(const runtime::Module& module) {
  std::map<std::string, const runtime::KernelInfo*> kernels;
  std::map<std::string, HostKernelFn> helpers;
  for (const runtime::KernelInfo& k : module.kernels) {
    kernels[k.name] = &k;
    if (std::string name = k.conv_epilogue(); !name.empty())
      helpers[name] = reinterpret_cast<HostKernelFn>(module.host_library->symbol(name));
  }
  return [&module, kernels, helpers](const std::string& name, void** params) -> std::function<void()> {
    if (name == kRandomOffsetAdvance) {
      auto advance = reinterpret_cast<HostKernelFn>(module.host_library->symbol(kRandomOffsetAdvance));
      void* offset = nullptr;
      std::memcpy(&offset, params[0], sizeof offset);
      return [advance, offset] { advance(&offset, nullptr); };
    }
    if (auto helper = helpers.find(name); helper != helpers.end()) {
      std::array<void*, 3> pointers{};
      std::array<int64_t, 4> sizes{};
      for (size_t i = 0; i < pointers.size(); ++i) std::memcpy(&pointers[i], params[i], sizeof(void*));
      for (size_t i = 0; i < sizes.size(); ++i) std::memcpy(&sizes[i], params[pointers.size() + i], sizeof(int64_t));
      return [epilogue = helper->second, pointers, sizes] { epilogue(pointers.data(), sizes.data()); };
    }
    auto it = kernels.find(name);
    if (it == kernels.end()) {
      ADD_FAILURE() << "launch of '" << name << "', which the module does not declare";
      return nullptr;
    }
    const runtime::KernelInfo& k = *it->second;
    std::vector<void*> buffers(k.buffers.size());
    std::vector<int64_t> sizes(k.sizes.size());
    for (size_t i = 0; i < buffers.size(); ++i) std::memcpy(&buffers[i], params[i], sizeof(void*));
    for (size_t i = 0; i < sizes.size(); ++i) std::memcpy(&sizes[i], params[buffers.size() + i], sizeof(int64_t));
    if (k.launch.random_offset) {
      size_t at = buffers.size() + sizes.size() + (k.launch.workspace_bytes == SymExpr() ? 0 : 1);
      buffers.emplace_back();
      std::memcpy(&buffers.back(), params[at], sizeof(void*));
    }
    return [host = k.host, buffers, sizes] { host(buffers.data(), sizes.data()); };
  };
}

}  // namespace tcc
