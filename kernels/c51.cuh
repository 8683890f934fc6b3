/*
 * c51.cuh — categorical (C51) projection of one sample's target distribution onto the support.
 *
 *   fh_c51_project_one(atoms, v_min, v_max, probs[atoms], ret, disc, out[atoms])   out =
 *   fh_c51_support(atoms, v_min, v_max, j)                                            z_j
 *
 * Support z_j = v_min + j*dz, dz = (v_max - v_min)/(atoms - 1). Each atom j of `probs` moves to
 * Tz = clamp(ret + disc*z_j, v_min, v_max), b = (Tz - v_min)/dz, and its mass is split between
 * floor(b) and ceil(b) by distance (all of it to b when b is an integer). Float32, sequential over j,
 * so host and device give the same bits (compile without FMA contraction). A NaN target yields an
 * all-NaN row (never an out-of-range atom index), which the loss turns into FH_ERR_DIVERGED.
 */
#ifndef FOXHUNT_KERNELS_C51_CUH
#define FOXHUNT_KERNELS_C51_CUH

#include "hd.cuh"

FH_HD float fh_c51_support(int32_t atoms, float v_min, float v_max, int32_t j) {
  const float dz = (v_max - v_min) / (float)(atoms - 1);
  return v_min + (float)j * dz;
}

FH_HD void fh_c51_project_one(int32_t atoms, float v_min, float v_max, const float* probs, float ret, float disc,
                              float* out) {
  const float dz = (v_max - v_min) / (float)(atoms - 1);
  for (int32_t j = 0; j < atoms; ++j) out[j] = 0.0f;
  for (int32_t j = 0; j < atoms; ++j) {
    const float z = v_min + (float)j * dz;
    float tz = ret + disc * z;
    if (tz != tz) { /* NaN target: poison the whole row so the loss reports divergence (no bad index) */
      for (int32_t k = 0; k < atoms; ++k) out[k] = tz;
      return;
    }
    tz = tz < v_min ? v_min : (tz > v_max ? v_max : tz);
    float b = (tz - v_min) / dz;
    if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
    if (b < 0.0f) b = 0.0f;
    const int32_t l = (int32_t)b; /* b >= 0: truncation is floor */
    const int32_t u = (float)l == b ? l : l + 1;
    if (u == l) {
      out[l] += probs[j];
    } else {
      out[l] += probs[j] * ((float)u - b);
      out[u] += probs[j] * (b - (float)l);
    }
  }
}

#endif /* FOXHUNT_KERNELS_C51_CUH */
