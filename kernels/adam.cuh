/*
 * adam.cuh — one element of Adam with bias correction (Kingma & Ba), float32.
 *
 *   fh_adam_bias(beta, step)           1 - beta^step (step 1-based), computed in float64, rounded once
 *   fh_adam_update(p, g, m, v, lr, b1, b2, eps, bc1, bc2)   in place:
 *       m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
 *       p -= lr * (m/bc1) / (sqrt(v/bc2) + eps)
 *   fh_target_mix(tau, every, t)       the target update after optimiser step t (the t Adam used):
 *                                      tau (Polyak, every step) when tau > 0, else 1 (hard copy) when
 *                                      every > 0 and t % every == 0, else 0 (no update)
 *   fh_target_blend(online, tgt, mix)  mix*online + (1-mix)*tgt (callers copy online when mix == 1)
 *   fh_adam_group4(i, p, g, m, v, ...) (device) Adam on the 16-byte group i of the flat vectors;
 *   fh_adam_elem (one element, the tail) and fh_store_quad (4 shadow values in one store) likewise
 *
 * The gradient g is the one after global-norm clipping. Launch/loop over all n_params elements; pad
 * rows of the layout have g == 0 and p == 0 and stay 0.
 */
#ifndef FOXHUNT_KERNELS_ADAM_CUH
#define FOXHUNT_KERNELS_ADAM_CUH

#include "hd.cuh"

#if !defined(__CUDACC__)
#include <cmath>
#endif

FH_HD float fh_adam_bias(float beta, int64_t step) { return (float)(1.0 - pow((double)beta, (double)step)); }

FH_HD void fh_adam_update(float& p, float g, float& m, float& v, float lr, float b1, float b2, float eps, float bc1,
                          float bc2) {
  m = b1 * m + (1.0f - b1) * g;
  v = b2 * v + (1.0f - b2) * g * g;
  const float mhat = m / bc1;
  const float vhat = v / bc2;
  p -= lr * mhat / (sqrtf(vhat) + eps);
}

#if defined(__CUDACC__)
#include "cuda_common.cuh"

/* Adam on element i of the flat fp32 vectors (the tail after the 16-byte groups); the new p returned. */
__device__ __forceinline__ float fh_adam_elem(int64_t i, float* __restrict__ p, const float* __restrict__ g,
                                             float* __restrict__ m, float* __restrict__ v, float sc, float lr, float b1,
                                             float b2, float eps, float bc1, float bc2) {
  float mi = m[i], vi = v[i], pi = p[i];
  fh_adam_update(pi, g[i] * sc, mi, vi, lr, b1, b2, eps, bc1, bc2);
  m[i] = mi;
  v[i] = vi;
  p[i] = pi;
  return pi;
}

/* Four values rounded to T into dst[4i..4i+3] in one store (dst aligned to 4 * sizeof(T)). */
template <typename T>
struct alignas(4 * sizeof(T)) fh_quad {
  T x, y, z, w;
};
template <typename T>
__device__ __forceinline__ void fh_store_quad(T* dst, int64_t i, const float4& a) {
  reinterpret_cast<fh_quad<T>*>(dst)[i] =
      fh_quad<T>{fh_from_f32<T>(a.x), fh_from_f32<T>(a.y), fh_from_f32<T>(a.z), fh_from_f32<T>(a.w)};
}

/* Adam on the 16-byte group i of the flat fp32 vectors (16-byte aligned), the gradient times the clip
 * factor sc: m, v and p written back, the new p group returned (for shadows and the target). */
__device__ __forceinline__ float4 fh_adam_group4(int64_t i, float* __restrict__ p, const float* __restrict__ g,
                                                 float* __restrict__ m, float* __restrict__ v, float sc, float lr,
                                                 float b1, float b2, float eps, float bc1, float bc2) {
  float4 mi = reinterpret_cast<const float4*>(m)[i], vi = reinterpret_cast<const float4*>(v)[i];
  float4 pi = reinterpret_cast<const float4*>(p)[i];
  const float4 gi = reinterpret_cast<const float4*>(g)[i];
  fh_adam_update(pi.x, gi.x * sc, mi.x, vi.x, lr, b1, b2, eps, bc1, bc2);
  fh_adam_update(pi.y, gi.y * sc, mi.y, vi.y, lr, b1, b2, eps, bc1, bc2);
  fh_adam_update(pi.z, gi.z * sc, mi.z, vi.z, lr, b1, b2, eps, bc1, bc2);
  fh_adam_update(pi.w, gi.w * sc, mi.w, vi.w, lr, b1, b2, eps, bc1, bc2);
  reinterpret_cast<float4*>(m)[i] = mi;
  reinterpret_cast<float4*>(v)[i] = vi;
  reinterpret_cast<float4*>(p)[i] = pi;
  return pi;
}
#endif

FH_HD float fh_target_mix(float tau, int32_t every, int64_t t) {
  if (tau > 0.0f) return tau;
  return every > 0 && t % every == 0 ? 1.0f : 0.0f;
}

FH_HD float fh_target_blend(float online, float tgt, float mix) { return mix * online + (1.0f - mix) * tgt; }

#endif /* FOXHUNT_KERNELS_ADAM_CUH */
