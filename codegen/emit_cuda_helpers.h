// Device functions of the CUDA emitter's split and column reductions
// (codegen/emit_cuda.cc), which a module includes only where a kernel needs
// them. Internal to codegen.
#pragma once

#include <string_view>

namespace tcc {

// The split kernels' device functions (after emitc's prelude, which defines
// tcc_block_reduce; their 8 is kPartialBytes); a module without split kernels
// does not include them. The _row forms are one thread's, for column
// reductions, whose threads along x finish different rows.
constexpr std::string_view kCudaSplit = R"(template <class T> __device__ bool tcc_split_arrive_row(void* ws, int64_t rows, int64_t row, int64_t split, T partial) {
  *(volatile T*)((char*)ws + 8 * (row * gridDim.y + blockIdx.y)) = partial;
  __threadfence();
  unsigned int* count = (unsigned int*)((char*)ws + 8 * rows * gridDim.y) + row;
  bool last = atomicAdd(count, 1u) == split - 1;
  if (last) *count = 0;
  return last;
}
template <class T> __device__ bool tcc_split_arrive(void* ws, int64_t rows, int64_t row, int64_t split, T partial) {
  __shared__ bool last;
  if (threadIdx.x == 0) last = tcc_split_arrive_row(ws, rows, row, split, partial);
  __syncthreads();
  return last;
}
template <class T, class Op> __device__ T tcc_split_combine_row(const void* ws, int64_t row, int64_t split, Op op, T identity) {
  T v = identity;
  for (int64_t i = 0; i < split; ++i) v = op(v, *(const volatile T*)((const char*)ws + 8 * (row * gridDim.y + i)));
  return v;
}
template <class T, class Op> __device__ T tcc_split_combine(const void* ws, int64_t row, int64_t split, Op op, T identity) {
  T v = identity;
  for (int64_t i = threadIdx.x; i < split; i += blockDim.x)
    v = op(v, *(const volatile T*)((const char*)ws + 8 * (row * gridDim.y + i)));
  return tcc_block_reduce<T>(v, op, identity);
}
)";

// Column reductions' combine across a block's y threads: every thread gets
// its column's result. The first barrier keeps a previous call's readers
// ahead of this call's writers.
constexpr std::string_view kCudaColumns = R"(template <class T, class Op> __device__ T tcc_column_reduce(T v, Op op) {
  __shared__ T partial[32][32];
  __syncthreads();
  partial[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  T total = partial[0][threadIdx.x];
  for (unsigned y = 1; y < blockDim.y; ++y) total = op(total, partial[y][threadIdx.x]);
  return total;
}
)";

}  // namespace tcc
