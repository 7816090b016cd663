// Running a module's kernels on the fake driver (fake_cuda.h) as their host
// kernels: shared by the fake driver's tests.
#pragma once

#include <gtest/gtest.h>

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
// buffers. The kernel advancing the offset takes that address alone.
inline fake_cuda::KernelBinder host_kernel_binder(const runtime::Module& module) {
  std::map<std::string, const runtime::KernelInfo*> kernels;
  for (const runtime::KernelInfo& k : module.kernels) kernels[k.name] = &k;
  return [&module, kernels](const std::string& name, void** params) -> std::function<void()> {
    if (name == kRandomOffsetAdvance) {
      auto advance = reinterpret_cast<HostKernelFn>(module.host_library->symbol(kRandomOffsetAdvance));
      void* offset = nullptr;
      std::memcpy(&offset, params[0], sizeof offset);
      return [advance, offset] { advance(&offset, nullptr); };
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
