/*
 * per.cuh — prioritised replay math on a flat sum tree (DESIGN §6).
 *
 * Tree: double tree[2*L], L = leaves (a power of two >= capacity), root at 1, leaf i at L + i,
 * node k = tree[2k] + tree[2k+1], always recomputed from the children (never delta-updated), so the
 * sums cannot drift. Leaves hold stored priorities (signal + eps)^alpha, 0 = not sampleable.
 *
 *   fh_per_priority(signal, eps, alpha)        stored leaf value, float64 pow rounded to float
 *   fh_per_stratum_u(total, j, B, w)           u for sample j: ((j + u01(w)) / B) * total, < total
 *   fh_per_descend(tree, L, u)                 leaf index i with prefix(i) <= u < prefix(i+1); never
 *                                              lands on a zero leaf (rounding guarded)
 *   fh_per_weight(size, p_i, total, beta)      (size * p_i/total)^-beta, normalised later by the batch max
 *   fh_per_beta(start, end, steps, step)       linear anneal of beta
 *   fh_per_recompute_up(tree, L, leaf)         recompute the ancestors of one leaf from their children
 */
#ifndef FOXHUNT_KERNELS_PER_CUH
#define FOXHUNT_KERNELS_PER_CUH

#include "hd.cuh"
#include "philox.cuh"

#if !defined(__CUDACC__)
#include <cmath>
#endif

FH_HD float fh_per_priority(float signal, float eps, float alpha) {
  return (float)pow((double)signal + (double)eps, (double)alpha);
}

FH_HD double fh_per_stratum_u(double total, int32_t j, int32_t B, uint32_t w) {
  double u = ((double)j + (double)fh_u01(w)) / (double)B * total;
  if (u >= total) u = total * (1.0 - 1e-12);
  if (u < 0.0) u = 0.0;
  return u;
}

FH_HD int64_t fh_per_descend(const double* tree, int64_t L, double u) {
  int64_t k = 1;
  while (k < L) {
    const double left = tree[2 * k];
    const double right = tree[2 * k + 1];
    if ((u < left && left > 0.0) || right <= 0.0) {
      k = 2 * k;
    } else {
      u -= left;
      k = 2 * k + 1;
    }
  }
  return k - L;
}

FH_HD double fh_per_weight(double size, double p_i, double total, double beta) {
  return pow(size * (p_i / total), -beta);
}

/* beta annealed linearly from beta_start to beta_end over beta_steps train steps. */
FH_HD float fh_per_beta(float beta_start, float beta_end, int64_t beta_steps, int64_t step) {
  const double f = step >= beta_steps ? 1.0 : (double)step / (double)beta_steps;
  return (float)((double)beta_start + ((double)beta_end - (double)beta_start) * f);
}

FH_HD void fh_per_recompute_up(double* tree, int64_t L, int64_t leaf) {
  int64_t k = (L + leaf) >> 1;
  while (k >= 1) {
    tree[k] = tree[2 * k] + tree[2 * k + 1];
    k >>= 1;
  }
}

#endif /* FOXHUNT_KERNELS_PER_CUH */
