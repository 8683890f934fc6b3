/*
 * probe_check.cuh — the GPU probes' CUDA error check (bench/gpu/*_probe.cu): FH_PROBE_CK(call, rc) prints the failed
 * call with its file, line and CUDA's message and returns rc from the enclosing function (main).
 */
#ifndef FH_PROBE_CHECK_CUH
#define FH_PROBE_CHECK_CUH

#include <cuda_runtime.h>
#include <stdio.h>

#define FH_PROBE_CK(x, rc)                                                                 \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return rc;                                                                           \
    }                                                                                      \
  } while (0)

#endif /* FH_PROBE_CHECK_CUH */
