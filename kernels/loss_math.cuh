/*
 * loss_math.cuh — device helpers shared by the C51 loss kernels (loss.cu) and the fused head outputs + loss
 * (heads_loss.cu):
 *
 *   fh_taken_action(act, i, d, nb, n)       branch d's taken action of sample i, clamped into [0, n)
 *   fh_c51_project_atom(b, m, atoms, k, runs)  the projected mass at atom k (gather form of fh_c51_project_one),
 *                                            as fh_c51_run_sum(.., fh_c51_run_start(..)) (the search, then the run)
 *   fh_ex2_approx / fh_lg2_approx / fh_rcp_approx   the approximate-math unit's exp2, log2 and 1/x
 *   fh_rcp_refined(x)                        1/x to about half an ulp (rcp.approx and one Newton step)
 *   fh_exp_shifted(x, mL)                    exp(x - m) given mL = m log2(e)
 */
#ifndef FOXHUNT_KERNELS_LOSS_MATH_CUH
#define FOXHUNT_KERNELS_LOSS_MATH_CUH

#include "net_device.cuh"  /* FH_MAX_ATOMS_GPU */

#ifdef __CUDACC__

/* Branch d's taken action of sample i (act is (B, 3)), clamped into the branch's n actions; 0 past nb. */
static __device__ __forceinline__ int fh_taken_action(const int32_t* __restrict__ act, int64_t i, int d, int nb, int n) {
  const int a = d < nb ? act[i * 3 + d] : 0;
  return a < 0 ? 0 : (a >= n ? n - 1 : a);
}
/* The projected mass at atom fk: sum_j m_j max(0, 1 - |b_j - fk|) over the atoms' positions b and masses m (shared
 * memory). With runs (disc >= 0) b is non-decreasing, so the j with b_j in (fk - 1, fk + 1) are one run: it starts
 * at or after the last b_j <= fk - 1 (a branchless binary search, fh_c51_run_start; any j before the run adds 0) and
 * ends before the first b_j >= fk + 1 (fh_c51_run_sum); without (disc < 0, never in training, or NaN) every j is
 * scanned. A caller with several atoms may run every search first (they are independent), then the sums. */
static __device__ __forceinline__ int fh_c51_run_start(const float* b, int atoms, float fk, bool runs) {
  int j = 0;
  if (runs) {
#pragma unroll
    for (int s = FH_MAX_ATOMS_GPU / 2; s > 0; s >>= 1)
      if (j + s <= atoms && b[j + s - 1] <= fk - 1.0f) j += s;
  }
  return j;
}
static __device__ __forceinline__ float fh_c51_run_sum(const float* b, const float* m, int atoms, float fk, int j,
                                                       bool runs) {
  float acc = 0.0f;
  for (; j < atoms; ++j) {
    const float bj = b[j];
    if (runs && bj >= fk + 1.0f) break;
    acc = __fmaf_rn(m[j], fmaxf(0.0f, 1.0f - fabsf(bj - fk)), acc);
  }
  return acc;
}
static __device__ __forceinline__ float fh_c51_project_atom(const float* b, const float* m, int atoms, float fk,
                                                            bool runs) {
  return fh_c51_run_sum(b, m, atoms, fk, fh_c51_run_start(b, atoms, fk, runs), runs);
}
static constexpr float kLog2e = 1.4426950408889634f;
static constexpr float kLn2 = 0.6931471805599453f;

static __device__ __forceinline__ float fh_ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
static __device__ __forceinline__ float fh_lg2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
static __device__ __forceinline__ float fh_rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/* 1/x to within about half an ulp: rcp.approx and one Newton step (for the constants of a sample:
 * 1/n of the dueling means, the support spacing; their errors would move every logit or every b_j) */
static __device__ __forceinline__ float fh_rcp_refined(float x) {
  const float r = fh_rcp_approx(x);
  return __fmaf_rn(r, __fmaf_rn(-x, r, 1.0f), r);
}
/* exp(x - m) given mL = m * log2(e) */
static __device__ __forceinline__ float fh_exp_shifted(float x, float mL) { return fh_ex2_approx(__fmaf_rn(x, kLog2e, -mL)); }

#endif /* __CUDACC__ */

#endif /* FOXHUNT_KERNELS_LOSS_MATH_CUH */
