/* abi_math.cpp — the stateless math entry points of foxhunt.h: Philox KAT, C51 projection, Adam.
 * Each is a loop over the shared kernels/ header function, so tests check the exact code both
 * backends run. */
#include <math.h>

#include "adam.cuh"
#include "c51.cuh"
#include "foxhunt.h"
#include "philox.cuh"

extern "C" FH_API void fh_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  if (counter == NULL || key == NULL || out == NULL) return;
  fh_philox_block(counter, key, out);
}

extern "C" FH_API fh_status fh_c51_project(int32_t n, int32_t atoms, float v_min, float v_max, const float* probs,
                                           const float* ret, const float* disc, float* out) {
  if (n < 0 || atoms < 2 || atoms > 1024 || !(v_min < v_max) || !isfinite(v_min) || !isfinite(v_max))
    return FH_ERR_INVALID_ARGUMENT;
  if (n > 0 && (probs == NULL || ret == NULL || disc == NULL || out == NULL)) return FH_ERR_INVALID_ARGUMENT;
  for (int32_t i = 0; i < n; ++i)
    fh_c51_project_one(atoms, v_min, v_max, probs + (int64_t)i * atoms, ret[i], disc[i], out + (int64_t)i * atoms);
  return FH_OK;
}

extern "C" FH_API fh_status fh_adam_step(int64_t n, float* p, const float* g, float* m, float* v, float lr, float beta1,
                                         float beta2, float eps, int64_t step) {
  if (n < 0 || step < 1 || (n > 0 && (p == NULL || g == NULL || m == NULL || v == NULL))) return FH_ERR_INVALID_ARGUMENT;
  if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f) || !(eps > 0.0f) || !isfinite(lr))
    return FH_ERR_INVALID_ARGUMENT;
  const float bc1 = fh_adam_bias(beta1, step);
  const float bc2 = fh_adam_bias(beta2, step);
  for (int64_t i = 0; i < n; ++i) fh_adam_update(p[i], g[i], m[i], v[i], lr, beta1, beta2, eps, bc1, bc2);
  return FH_OK;
}
