/* run_module MODULE_DIR [DIM...]: runs a compiled module on the host with zero-filled inputs (their
 * symbolic dims taken from DIM..., in order) and prints the first values of output 0. */
#include <stdio.h>
#include <stdlib.h>

#include "tcc_runtime.h"

enum { MAX_TENSORS = 16, MAX_RANK = 8 };
#define CHECK(call) if ((call) != TCC_OK) { fprintf(stderr, "run_module: %s\n", tcc_last_error()); return 1; }

static int64_t numel(const tcc_tensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->rank; ++d) n *= t->shape[d];
  return n;
}

int main(int argc, char** argv) {
  tcc_module* m;
  tcc_tensor in[MAX_TENSORS], out[MAX_TENSORS];
  int64_t in_dims[MAX_TENSORS][MAX_RANK], out_dims[MAX_TENSORS][MAX_RANK];
  if (argc < 2) { fprintf(stderr, "usage: run_module MODULE_DIR [DIM...]\n"); return 1; }
  CHECK(tcc_module_load(argv[1], &m));
  size_t n_in = tcc_module_num_inputs(m), n_out = tcc_module_num_outputs(m);
  if (n_in > MAX_TENSORS || n_out > MAX_TENSORS) { fprintf(stderr, "run_module: too many tensors\n"); return 1; }
  for (size_t i = 0, next = 2; i < n_in; ++i) {
    in[i].shape = in_dims[i];
    CHECK(tcc_module_tensor_info(m, 0, i, &in[i].dtype, &in[i].rank, in_dims[i], MAX_RANK));
    for (int d = 0; d < in[i].rank; ++d)
      if (in_dims[i][d] < 0) in_dims[i][d] = next < (size_t)argc ? atoll(argv[next++]) : -1;
    in[i].data = calloc(numel(&in[i]) + 1, 8); /* 8 bytes: the widest element */
  }
  for (size_t i = 0; i < n_out; ++i) {
    out[i].shape = out_dims[i];
    CHECK(tcc_module_tensor_info(m, 1, i, &out[i].dtype, &out[i].rank, out_dims[i], MAX_RANK));
    CHECK(tcc_module_output_shape(m, in, n_in, i, out_dims[i], MAX_RANK, &out[i].rank));
    out[i].data = calloc(numel(&out[i]) + 1, 8);
  }
  CHECK(tcc_module_run_host(m, in, n_in, out, n_out));
  printf("%s:", tcc_module_output_name(m, 0));
  for (int64_t k = 0; k < numel(&out[0]) && k < 8; ++k)
    if (out[0].dtype == TCC_F32) printf(" %g", ((const float*)out[0].data)[k]);
  printf("\n");
  tcc_module_free(m);
  return 0;
}
