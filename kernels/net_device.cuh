/*
 * net_device.cuh — warp-cooperative device helpers for the dueling heads (used by net.cu and loss.cu).
 *
 * A warp handles one sample; lane l owns atoms l and l + 32 (so atoms <= 64 on the GPU; the trainer
 * rejects more at create). logit_d(s, a, j) = V(s, j) + A_d(s, a, j) - mean_a' A_d(s, a', j)
 * (DESIGN §5); atoms == 1 gives Q directly, atoms > 1 a softmax over j with Q = sum_j p_j z_j.
 */
#ifndef FH_NET_DEVICE_CUH
#define FH_NET_DEVICE_CUH

#include "net_kernels.cuh"
#include "c51.cuh"

#define FH_ATOMS_PER_LANE 2
#define FH_MAX_ATOMS_GPU (32 * FH_ATOMS_PER_LANE)

__device__ __forceinline__ float fh_dev_support(const fh_heads_view& h, int j) {
  return h.atoms <= 1 ? 0.0f : fh_c51_support(h.atoms, h.v_min, h.v_max, j);
}

/* Combined logits of (sample i, branch d, action a) for this lane's atoms; invalid atoms get -inf. */
__device__ __forceinline__ void fh_dev_logits(const fh_heads_view& h, int i, int d, int a, int lane,
                                              float out[FH_ATOMS_PER_LANE]) {
  const float* vrow = h.v + (int64_t)i * h.ldv;
  const float* arow = h.a[d] + (int64_t)i * h.lda[d];
  const int n = h.n[d];
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < h.atoms) {
      float mean = 0.0f;
      for (int b = 0; b < n; ++b) mean += arow[b * h.atoms + j];
      mean /= (float)n;  /* as fh_dueling_combine */
      out[k] = vrow[j] + arow[a * h.atoms + j] - mean;
    } else {
      out[k] = -INFINITY;
    }
  }
}

/* Softmax over atoms in place (this lane's part); returns log-sum-exp (all lanes). */
__device__ __forceinline__ float fh_dev_softmax(const fh_heads_view& h, int lane, float x[FH_ATOMS_PER_LANE]) {
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) mx = fmaxf(mx, x[k]);
  mx = fh_warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    float e = j < h.atoms ? expf(x[k] - mx) : 0.0f;
    x[k] = e;
    sum += e;
  }
  sum = fh_warp_sum(sum);
  float inv = 1.0f / sum;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) x[k] *= inv;
  return mx + logf(sum);
}

/* Expected Q of (i, d, a); same value in every lane. */
__device__ __forceinline__ float fh_dev_expected_q(const fh_heads_view& h, int i, int d, int a, int lane) {
  float x[FH_ATOMS_PER_LANE];
  fh_dev_logits(h, i, d, a, lane, x);
  if (h.atoms <= 1) return __shfl_sync(0xffffffffu, x[0], 0);
  /* as fh_expected_q: sum e z / sum e with e = exp(x - max) */
  float mx = fmaxf(x[0], x[1]);
  mx = fh_warp_max(mx);
  float sum = 0.0f, acc = 0.0f;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < h.atoms) {
      float e = expf(x[k] - mx);
      sum += e;
      acc += e * fh_dev_support(h, j);
    }
  }
  return fh_warp_sum(acc) / fh_warp_sum(sum);
}

#endif /* FH_NET_DEVICE_CUH */
