/*
 * fastmath.cuh — the approximate-math helpers of the bf16 mode's C51 loss kernels (loss.cu's register
 * kernel, loss_tile.cu's block kernel): ex2 / lg2 / rcp approximations (PTX .approx.ftz), a reciprocal with
 * one Newton step for the per-sample constants, and exp(x - m) as one FMA + ex2.
 */
#ifndef FH_FASTMATH_CUH
#define FH_FASTMATH_CUH

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

#endif /* FH_FASTMATH_CUH */
