// A stand-in for the CUDA driver (libcuda.so.1) for machines without a GPU.
//
// The runtime reaches the driver through dlopen("libcuda.so.1"); a program
// linked against this library has it loaded under that soname already, so the
// runtime's dlopen finds it and the whole host path runs: module loading,
// binding, the memory plan, launches, host fallbacks with their copies, and
// CUDA Graph capture and replay. A launch is checked against the device's
// limits and logged; the kernel itself runs only through a binder the program
// sets (a test runs the module's host kernels). Device memory is host memory, so
// copies and memsets are real and checked to stay inside live allocations;
// operations a capture would reject (synchronizing a capturing stream,
// allocating while a capture is active) fail as the driver fails them.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tcc::fake_cuda {

struct Launch {
  std::string kernel;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  bool from_graph;  // replayed by cuGraphLaunch rather than launched directly
};

// Launches since the last clear_log(), in order.
std::vector<Launch> launches();
void clear_log();
// Calls of cuMemcpyBatchAsync since the last clear_log().
size_t copy_batches();
// Copies between host and device memory (cuMemcpyHtoD / DtoH, async or not)
// and calls of cuStreamSynchronize since the last clear_log().
size_t host_transfers();
size_t stream_syncs();

// Given a launch's kernel name and cuLaunchKernel's parameter list, returns
// the work the kernel does with its arguments copied out (the list is only
// valid during the call); the work runs when the launch would run on the
// device, and again at each replay of a graph that captured it. An empty
// binder (the default) runs nothing.
using KernelBinder = std::function<std::function<void()>(const std::string& kernel, void** params)>;
void set_kernel_binder(KernelBinder binder);

// Enqueues a library's work on `stream` (a CUstream) as a launch named
// `name`: it runs at once, or a capture records it and each replay runs it
// again. The fake cuDNN (fake_cudnn.h) runs its executions so.
void enqueue(void* stream, const std::string& name, std::function<void()> work);

// Whether copies, memsets and bound kernels do their work (the default) or
// are only checked and logged: a benchmark of the host path turns the work
// off, which a device would do asynchronously.
void set_device_work(bool on);

// Device allocations not yet freed.
size_t live_allocations();

}  // namespace tcc::fake_cuda
