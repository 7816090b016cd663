/* tcc's runtime: load a compiled module (docs/MODULE.md) and run it.
 *
 * A C API so that C and C++ programs (and other languages' FFIs) can use it:
 *
 *   tcc_module* m;
 *   if (tcc_module_load("out/model", &m) != TCC_OK) { puts(tcc_last_error()); return 1; }
 *   tcc_tensor in = {x_data, TCC_F32, 2, shape};
 *   tcc_tensor out = {y_data, TCC_F32, 2, out_shape};
 *   tcc_module_run_host(m, &in, 1, &out, 1);
 *   tcc_module_free(m);
 *
 * The CUDA driver, cuBLASLt and cuDNN are loaded with dlopen the first time a
 * module runs on the device, so a program linked with this library starts on a
 * machine without a GPU and runs modules on the host.
 */
#ifndef TCC_RUNTIME_H_
#define TCC_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  TCC_OK = 0,
  TCC_ERROR_INVALID_ARGUMENT = 1, /* inputs that fail the module's guards, wrong counts or dtypes */
  TCC_ERROR_BAD_MODULE = 2,       /* a missing, truncated or inconsistent module directory */
  TCC_ERROR_NO_DEVICE = 3,        /* no CUDA driver or no GPU */
  TCC_ERROR_CUDA = 4,             /* a CUDA, cuBLASLt or cuDNN call failed */
  TCC_ERROR_INTERNAL = 5
} tcc_status;

/* Values match tcc's DType (and ONNX's TensorProto.DataType). */
typedef enum {
  TCC_F32 = 1, TCC_U8 = 2, TCC_I8 = 3, TCC_U16 = 4, TCC_I16 = 5, TCC_I32 = 6, TCC_I64 = 7,
  TCC_BOOL = 9, TCC_F16 = 10, TCC_F64 = 11, TCC_U32 = 12, TCC_U64 = 13, TCC_BF16 = 16,
  TCC_F8E4M3FN = 17, TCC_F8E4M3FNUZ = 18, TCC_F8E5M2 = 19, TCC_F8E5M2FNUZ = 20,
  TCC_U4 = 21, TCC_I4 = 22, TCC_F4E2M1 = 23 /* one byte an element, not packed (MODULE.md) */
} tcc_dtype;

/* A dense row-major tensor the caller owns: host memory for run_host, device memory for run_cuda. */
typedef struct {
  void* data;
  tcc_dtype dtype;
  int32_t rank;
  const int64_t* shape;
} tcc_tensor;

typedef struct tcc_module tcc_module;

/* The message of the last failing call on this thread ("" when none). */
const char* tcc_last_error(void);

tcc_status tcc_module_load(const char* module_dir, tcc_module** out);
void tcc_module_free(tcc_module* m);

size_t tcc_module_num_inputs(const tcc_module* m);
size_t tcc_module_num_outputs(const tcc_module* m);
const char* tcc_module_input_name(const tcc_module* m, size_t i);
const char* tcc_module_output_name(const tcc_module* m, size_t i);

/* The declared dtype, rank and dims of input i (of output i when `output` is nonzero), writing up to
 * max_rank dims into shape_out; a symbolic dim reads -1. Lets a caller build inputs it knows nothing of. */
tcc_status tcc_module_tensor_info(const tcc_module* m, int output, size_t i, tcc_dtype* dtype, int32_t* rank,
                                  int64_t* shape_out, int32_t max_rank);

/* Output shapes for the given inputs: fills rank and writes up to max_rank dims into shape_out.
 * Lets a caller size its output buffers before running. A dim that depends on the data (NonZero's count)
 * reads -1: pass that output with data NULL and set an output allocator. */
tcc_status tcc_module_output_shape(const tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, size_t output,
                                   int64_t* shape_out, int32_t max_rank, int32_t* rank_out);

/* Memory for outputs whose size depends on the data, which the caller passes with data NULL: the run calls
 * `allocate` once it knows such an output's shape, with the output's index, dims, rank and bytes, and writes the
 * output into the memory it returns (host memory for run_host, device memory for run_cuda; the caller owns it),
 * as TensorRT's output allocator does. NULL unsets it. */
typedef void* (*tcc_output_allocator)(void* ctx, size_t output, const int64_t* shape, int32_t rank, size_t nbytes);
tcc_status tcc_module_set_output_allocator(tcc_module* m, tcc_output_allocator allocate, void* ctx);

/* The random offset of the module's next call (docs/MODULE.md, "Random ops"): the random ops of call k of a
 * module draw from Philox counters whose upper words are k, so each call draws new values, reproducibly. A module
 * that draws random values starts at 0, and each call (tcc_module_run_host, tcc_module_run_cuda, the run that
 * tcc_module_capture_cuda makes first, each tcc_cuda_graph_launch, each tcc_module_run_cuda_graphs) draws at the
 * offset, then advances it by one; a replayed CUDA graph reads and advances it on the device. Setting it makes the
 * next call draw as call `offset` does, on the host or the device (as `tcc run --random-offset` does), to
 * reproduce a run. */
tcc_status tcc_module_random_offset(const tcc_module* m, uint64_t* out);
tcc_status tcc_module_set_random_offset(tcc_module* m, uint64_t offset);

/* Runs the module on the host (host.so and the reference implementation for fallbacks). */
tcc_status tcc_module_run_host(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                               size_t num_outputs);

/* Runs the module on the current CUDA device on `stream` (a CUstream; NULL for the default stream).
 * Tensors are device pointers. Returns TCC_ERROR_NO_DEVICE where there is no GPU. */
tcc_status tcc_module_run_cuda(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                               size_t num_outputs, void* stream);

/* One run captured as a CUDA graph (reduce-overhead): each launch replays it on the tensors given at capture,
 * so the caller copies new inputs into those (static) buffers before a launch and reads the outputs after.
 * Each launch is a call of the module (it advances the random offset), which must still be loaded. */
typedef struct tcc_cuda_graph tcc_cuda_graph;

/* Runs the module once on `stream`, then captures one run as a CUDA graph. `stream` must be a created stream,
 * not NULL. TCC_ERROR_INVALID_ARGUMENT, with the reason in tcc_last_error(), when the module cannot be captured
 * (host fallback steps, guards on input values). */
tcc_status tcc_module_capture_cuda(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs, tcc_tensor* outputs,
                                   size_t num_outputs, void* stream, tcc_cuda_graph** out);
tcc_status tcc_cuda_graph_launch(tcc_cuda_graph* g, void* stream);
void tcc_cuda_graph_free(tcc_cuda_graph* g);

/* reduce-overhead as torch's CUDA-graph trees run it: one CUDA graph per binding of the symbolic dims, captured
 * the first time a call meets those input shapes, on static input and output buffers the module owns, and
 * replayed by every later call at them; at most 8 are kept, the least recently used freed first. A call copies
 * the inputs into the binding's static buffers, replays, and copies the outputs out, all enqueued on `stream`
 * (a created stream, not NULL), and returns without waiting: the outputs are ready when the stream is. A module
 * that cannot be captured (host fallback steps, guards on input values) runs step by step, as
 * tcc_module_run_cuda does without its wait, and tcc_module_graph_stats says why. */
tcc_status tcc_module_run_cuda_graphs(tcc_module* m, const tcc_tensor* inputs, size_t num_inputs,
                                      tcc_tensor* outputs, size_t num_outputs, void* stream);

typedef struct {
  uint64_t captures;        /* graphs captured (one per new binding) */
  uint64_t replays;         /* calls that replayed a graph */
  uint64_t evictions;       /* graphs freed to keep at most 8 */
  uint64_t uncaptured_runs; /* calls run step by step, because of not_captured */
  const char* not_captured; /* why the module cannot be captured, or "" (valid until the module is freed) */
} tcc_graph_stats;

tcc_status tcc_module_graph_stats(const tcc_module* m, tcc_graph_stats* out);

/* Whether a CUDA device is usable from this process (loads the driver on first call). */
int tcc_cuda_available(void);

#ifdef __cplusplus
}
#endif

#endif /* TCC_RUNTIME_H_ */
