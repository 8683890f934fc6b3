/*
 * probe_check.cuh — what the GPU probes (bench/gpu/*_probe.cu) share: FH_PROBE_CK(call, rc) prints the failed call
 * with its file, line and CUDA's message and returns rc from the enclosing function (main); fh_probe_bf16_buffer
 * fills a device buffer with reproducible bf16 values; fh_probe_best_us times back-to-back launches.
 */
#ifndef FH_PROBE_CHECK_CUH
#define FH_PROBE_CHECK_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include <vector>

#define FH_PROBE_CK(x, rc)                                                                 \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return rc;                                                                           \
    }                                                                                      \
  } while (0)

/* a device buffer of n bf16 values, uniform in [-amp, amp] from a linear congruential sequence seeded by `seed`;
 * nullptr when the allocation fails */
static inline void* fh_probe_bf16_buffer(size_t n, float amp, unsigned seed) {
  std::vector<__nv_bfloat16> h(n);
  unsigned s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    h[i] = __float2bfloat16(amp * ((float)(s >> 8) / 8388608.0f - 1.0f));
  }
  void* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(__nv_bfloat16)) != cudaSuccess) return nullptr;
  if (cudaMemcpy(d, h.data(), n * sizeof(__nv_bfloat16), cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return nullptr;
  }
  return d;
}

/* µs per launch of fn() on stream s: the best of `rounds` rounds of `reps` back-to-back launches, timed with events
 * (inputs stay warm in L2 where they fit, as in a graph replay). The caller warms up and checks the launches. */
template <typename Fn>
double fh_probe_best_us(cudaStream_t s, const Fn& fn, int reps, int rounds = 3) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    cudaEventRecord(e0, s);
    for (int i = 0; i < reps; ++i) fn();
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms * 1e3 / reps < best) best = ms * 1e3 / reps;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

#endif /* FH_PROBE_CHECK_CUH */
