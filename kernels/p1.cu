/*
 * p1.cu — the first layer's market part per bar (p1.cuh): the market-window gather of a bar range and
 * the first layer of a batch from its bars' P1 rows.
 *
 *   market_windows_kernel  one warp per row: fh_gather_obs_row with zero account features
 *   layer1_p1_kernel       a thread owns 8 output columns (their 64 account weights and 8 biases in
 *                          registers) and walks rows: per row 2 float4 loads of the P1 row, the row's 8
 *                          account features (one 16-byte load where D % 8 == 0), one 16-byte store
 */
#include "p1.cuh"

#include "cuda_env_gather.cuh"

#define FH_P1_THREADS 256
#define FH_P1_MAX_BLOCKS 1024

template <bool VEC>
static __global__ void market_windows_kernel(fh_market_view m, int32_t window, int64_t begin, int64_t n, int32_t D,
                                             fh_bf16* __restrict__ out) {
  const int64_t v = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (v >= n) return;
  const float zero[FH_ENV_ACCOUNT] = {};
  fh_gather_obs_row<fh_bf16, VEC>(m.features, m.n_features, window, begin + v, zero, lane, out + v * D);
}

fh_status fh_launch_market_windows(const fh_market_view& m, int32_t window, int64_t begin, int64_t n, int32_t D,
                                   fh_bf16* out, cudaStream_t s) {
  if (n <= 0) return FH_OK;
  if (!out || begin < window - 1 || begin + n > m.n_bars || D != window * m.n_features + FH_ENV_ACCOUNT)
    return FH_ERR_INVALID_ARGUMENT;
  const unsigned blocks = (unsigned)CEIL_DIV(n * 32, 256);
  if (fh_gather_vec_ok(m.n_features, window, D))
    market_windows_kernel<true><<<blocks, 256, 0, s>>>(m, window, begin, n, D, out);
  else
    market_windows_kernel<false><<<blocks, 256, 0, s>>>(m, window, begin, n, D, out);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* Thread (g, roff) of a block: column group g (8 columns c0 = 8g) of rows roff, roff + rpb, ... of the
 * block's rows; its 64 account weights and 8 biases stay in registers for every row it does. */
template <bool VEC_ACC>
static __global__ void __launch_bounds__(FH_P1_THREADS)
layer1_p1_kernel(const float* __restrict__ p1, int64_t bar0, int64_t n_p1, const int32_t* __restrict__ bars,
                 const fh_bf16* __restrict__ x, int32_t D, const fh_bf16* __restrict__ w1,
                 const fh_bf16* __restrict__ b1, int32_t h1, int32_t B, fh_bf16* __restrict__ a1) {
  const int32_t groups = h1 >> 3, rpb = FH_P1_THREADS / groups;
  const int32_t g = (int32_t)threadIdx.x % groups, roff = (int32_t)threadIdx.x / groups;
  if (roff >= rpb) return;
  const int32_t c0 = g * 8, acc0 = D - FH_ENV_ACCOUNT;
  float w[8][FH_ENV_ACCOUNT], bias[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    bias[j] = __bfloat162float(b1[c0 + j]);
#pragma unroll
    for (int k = 0; k < FH_ENV_ACCOUNT; ++k) w[j][k] = __bfloat162float(w1[(int64_t)(c0 + j) * D + acc0 + k]);
  }
  for (int64_t r = (int64_t)blockIdx.x * rpb + roff; r < B; r += (int64_t)gridDim.x * rpb) {
    int64_t i = (int64_t)bars[r] - bar0;
    i = i < 0 ? 0 : (i >= n_p1 ? n_p1 - 1 : i);
    const float4* pr = reinterpret_cast<const float4*>(p1 + i * h1 + c0);
    const float4 pa = __ldg(pr), pb = __ldg(pr + 1);
    float acc[FH_ENV_ACCOUNT];
    const fh_bf16* xa = x + r * D + acc0;
    if (VEC_ACC) {
      const uint4 u = *reinterpret_cast<const uint4*>(xa);
      const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = __bfloat1622float2(h2[k]);
        acc[2 * k] = f.x;
        acc[2 * k + 1] = f.y;
      }
    } else {
#pragma unroll
      for (int k = 0; k < FH_ENV_ACCOUNT; ++k) acc[k] = __bfloat162float(xa[k]);
    }
    float v[8] = {pa.x, pa.y, pa.z, pa.w, pb.x, pb.y, pb.z, pb.w};
    uint32_t packed[4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      float s = v[j] + bias[j];
#pragma unroll
      for (int k = 0; k < FH_ENV_ACCOUNT; ++k) s = fmaf(acc[k], w[j][k], s);
      v[j] = fmaxf(s, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
      packed[k] = *reinterpret_cast<const uint32_t*>(&h);
    }
    *reinterpret_cast<uint4*>(a1 + r * h1 + c0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

fh_status fh_launch_layer1_p1(const float* p1, int64_t bar0, int64_t n_p1, const int32_t* bars, const fh_bf16* x,
                              int32_t D, const fh_bf16* w1, const fh_bf16* b1, int32_t h1, int32_t B, fh_bf16* a1,
                              cudaStream_t s) {
  if (B <= 0) return FH_OK;
  if (!p1 || n_p1 <= 0 || !bars || !x || !w1 || !b1 || !a1 || h1 <= 0 || h1 % 8 || D < FH_ENV_ACCOUNT)
    return FH_ERR_INVALID_ARGUMENT;
  if (h1 / 8 > FH_P1_THREADS) return FH_ERR_UNSUPPORTED; /* h1 > 2048 */
  const int32_t rpb = FH_P1_THREADS / (h1 / 8);
  int64_t blocks = CEIL_DIV((int64_t)B, rpb);
  if (blocks > FH_P1_MAX_BLOCKS) blocks = FH_P1_MAX_BLOCKS;
  if (D % 8 == 0)
    layer1_p1_kernel<true><<<(unsigned)blocks, FH_P1_THREADS, 0, s>>>(p1, bar0, n_p1, bars, x, D, w1, b1, h1, B, a1);
  else
    layer1_p1_kernel<false><<<(unsigned)blocks, FH_P1_THREADS, 0, s>>>(p1, bar0, n_p1, bars, x, D, w1, b1, h1, B, a1);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
