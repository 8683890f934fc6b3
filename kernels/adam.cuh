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

FH_HD float fh_target_mix(float tau, int32_t every, int64_t t) {
  if (tau > 0.0f) return tau;
  return every > 0 && t % every == 0 ? 1.0f : 0.0f;
}

FH_HD float fh_target_blend(float online, float tgt, float mix) { return mix * online + (1.0f - mix) * tgt; }

#endif /* FOXHUNT_KERNELS_ADAM_CUH */
