/*
 * adam.cu — Adam on the flat fp32 parameter vector and the target-network update, one flat
 * kernel each (all parameters live in one allocation carved by native/src/common/layout.h).
 *
 *   fh_adam_kernel     g' = g * (*grad_scale); m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
 *                      p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps); shadow = (T) p.
 *                      t = *step + 1 comes from a device counter so a captured graph replays
 *                      correctly (read, with the bias corrections, once per block); a 1-thread
 *                      kernel launched after it bumps the counter. 16-byte groups per thread.
 *   fh_target_kernel   hard copy every K steps (step read on the device) or Polyak tau each step.
 *
 * The element math is adam.cuh's, shared with the fused optimiser (gradnorm.cu,
 * fh_launch_optimise_fused), which gives the same bits as grad norm -> Adam -> bump -> target.
 *
 * Pad rows of the layout have zero gradient, so they stay zero (m = v = 0, update 0).
 */
#include "net_kernels.cuh"
#include "adam.cuh"

static constexpr int kAdamBlock = 256;
static constexpr int kAdamMaxBlocks = 132 * 8;

template <typename T>
static __global__ void fh_adam_kernel(int64_t n, float* __restrict__ p, T* __restrict__ shadow,
                                      const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                                      const float* __restrict__ grad_scale, const int64_t* __restrict__ step,
                                      float lr, float b1, float b2, float eps) {
  /* the bias corrections (float64 pow) and the clip factor once per block */
  __shared__ float s_c[3];
  if (threadIdx.x == 0) {
    const int64_t t = *step + 1;
    s_c[0] = fh_adam_bias(b1, t);
    s_c[1] = fh_adam_bias(b2, t);
    s_c[2] = grad_scale ? *grad_scale : 1.0f;
  }
  __syncthreads();
  const float bc1 = s_c[0], bc2 = s_c[1], sc = s_c[2];
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  /* 16-byte groups (the flat vectors and the shadow are separate allocations, so aligned), then the tail */
  const int64_t n4 = n / 4;
  for (int64_t i = first; i < n4; i += stride) {
    const float4 pi = fh_adam_group4(i, p, g, m, v, sc, lr, b1, b2, eps, bc1, bc2);
    if (shadow) fh_store_quad(shadow, i, pi);
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    const float pi = fh_adam_elem(i, p, g, m, v, sc, lr, b1, b2, eps, bc1, bc2);
    if (shadow) shadow[i] = fh_from_f32<T>(pi);
  }
}

static __global__ void fh_step_bump_kernel(int64_t* step) { *step += 1; }

fh_status fh_launch_step_bump(int64_t* step, cudaStream_t s) {
  fh_step_bump_kernel<<<1, 1, 0, s>>>(step);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
fh_status fh_launch_adam(int64_t n, float* p, T* shadow, const float* g, float* m, float* v, const float* grad_scale,
                         int64_t* step, float lr, float beta1, float beta2, float eps, cudaStream_t s) {
  int64_t blocks = CEIL_DIV(CEIL_DIV(n, (int64_t)4), (int64_t)kAdamBlock);  /* a 16-byte group per thread */
  if (blocks > kAdamMaxBlocks) blocks = kAdamMaxBlocks;
  if (blocks < 1) blocks = 1;
  fh_adam_kernel<T><<<(unsigned)blocks, kAdamBlock, 0, s>>>(n, p, shadow, g, m, v, grad_scale, step, lr, beta1, beta2,
                                                           eps);
  FH_LAUNCH_CHECK();
  fh_step_bump_kernel<<<1, 1, 0, s>>>(step);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

static __global__ void fh_adam_plain_kernel(int64_t n, float* __restrict__ p, const float* __restrict__ g,
                                            float* __restrict__ m, float* __restrict__ v, float lr, float b1,
                                            float b2, float eps, float bc1, float bc2) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float mi = m[i], vi = v[i], pi = p[i];
    fh_adam_update(pi, g[i], mi, vi, lr, b1, b2, eps, bc1, bc2);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

fh_status fh_launch_adam_plain(int64_t n, float* p, const float* g, float* m, float* v, float lr, float beta1,
                               float beta2, float eps, int64_t step, cudaStream_t s) {
  if (n <= 0) return FH_OK;
  int64_t blocks = CEIL_DIV(n, (int64_t)kAdamBlock);
  if (blocks > kAdamMaxBlocks) blocks = kAdamMaxBlocks;
  const float bc1 = fh_adam_bias(beta1, step);
  const float bc2 = fh_adam_bias(beta2, step);
  fh_adam_plain_kernel<<<(unsigned)blocks, kAdamBlock, 0, s>>>(n, p, g, m, v, lr, beta1, beta2, eps, bc1, bc2);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static __global__ void fh_target_kernel(int64_t n, const float* __restrict__ online, float* __restrict__ tgt,
                                        T* __restrict__ shadow, const int64_t* __restrict__ step, int every,
                                        float tau) {
  /* *step is the number of optimiser steps taken so far (already bumped by Adam): the t Adam used */
  const float mix = fh_target_mix(tau, every, *step);
  if (mix == 0.0f) return;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float x = mix == 1.0f ? online[i] : fh_target_blend(online[i], tgt[i], mix);
    tgt[i] = x;
    if (shadow) shadow[i] = fh_from_f32<T>(x);
  }
}

template <typename T>
fh_status fh_launch_target_update(int64_t n, const float* online, float* tgt, T* shadow, const int64_t* step,
                                  int every, float tau, cudaStream_t s) {
  int64_t blocks = CEIL_DIV(n, (int64_t)kAdamBlock);
  if (blocks > kAdamMaxBlocks) blocks = kAdamMaxBlocks;
  if (blocks < 1) blocks = 1;
  fh_target_kernel<T><<<(unsigned)blocks, kAdamBlock, 0, s>>>(n, online, tgt, shadow, step, every, tau);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template fh_status fh_launch_adam<float>(int64_t, float*, float*, const float*, float*, float*, const float*, int64_t*,
                                         float, float, float, float, cudaStream_t);
template fh_status fh_launch_adam<fh_bf16>(int64_t, float*, fh_bf16*, const float*, float*, float*, const float*,
                                           int64_t*, float, float, float, float, cudaStream_t);
template fh_status fh_launch_target_update<float>(int64_t, const float*, float*, float*, const int64_t*, int, float,
                                                  cudaStream_t);
template fh_status fh_launch_target_update<fh_bf16>(int64_t, const float*, float*, fh_bf16*, const int64_t*, int,
                                                    float, cudaStream_t);
