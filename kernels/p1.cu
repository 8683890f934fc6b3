/*
 * p1.cu — the first layer's market part per bar (p1.cuh): the market-window gather of a bar range and
 * the first layer of a batch from its bars' P1 rows.
 *
 *   market_windows_kernel  one warp per row: fh_gather_obs_row with zero account features
 *   slot_states_kernel     one thread per (slot, account feature)
 *   layer1_p1_kernel       a thread owns 4 output columns and walks rows, 4 at a time with every load
 *                          issued first: per row one float4 of the P1 row, the row's 8 account
 *                          features (one 16-byte load where D % 8 == 0), one 8-byte store; W1's account
 *                          columns and b1 from shared memory
 */
#include "p1.cuh"

#include "cuda_env_gather.cuh"

#define FH_P1_THREADS 256
#define FH_P1_BLOCKS_PER_SM 3

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

/* Thread (g, roff) of a block owns the 4 output columns c0 = 4g of rows roff, roff + rpb, ... of the
 * block's rows and does FH_P1_UNROLL rows at a time (their loads issued before any use: random table rows
 * have a long latency, so many are kept in flight). W1's account columns and b1 sit in shared memory as
 * (8, h1) and (h1): a warp reads 32 consecutive float4s of a row of them (no bank conflicts). */
#define FH_P1_UNROLL 4
template <bool VEC_ACC>
static __global__ void __launch_bounds__(FH_P1_THREADS, FH_P1_BLOCKS_PER_SM)
layer1_p1_kernel(const float* __restrict__ p1, int64_t bar0, int64_t n_p1, const int32_t* __restrict__ bars,
                 const fh_bf16* __restrict__ x, int32_t D, const fh_bf16* __restrict__ w1,
                 const fh_bf16* __restrict__ b1, int32_t h1, int32_t B, fh_bf16* __restrict__ a1) {
  extern __shared__ float4 sm4[];
  float* ws = reinterpret_cast<float*>(sm4);  /* (8, h1): ws[k * h1 + c] = W1[c, D-8+k] */
  float* bs = ws + FH_ENV_ACCOUNT * h1;       /* (h1) */
  const int32_t acc0 = D - FH_ENV_ACCOUNT;
  for (int32_t c = threadIdx.x; c < h1; c += blockDim.x) {
    const fh_bf16* wr = w1 + (int64_t)c * D + acc0;
#pragma unroll
    for (int k = 0; k < FH_ENV_ACCOUNT; ++k) ws[k * h1 + c] = __bfloat162float(wr[k]);
    bs[c] = __bfloat162float(b1[c]);
  }
  __syncthreads();
  const int32_t groups = h1 >> 2, rpb = FH_P1_THREADS / groups;
  const int32_t g = (int32_t)threadIdx.x % groups, roff = (int32_t)threadIdx.x / groups;
  if (roff >= rpb) return;
  const int32_t c0 = g * 4;
  const int64_t stride = (int64_t)gridDim.x * rpb;
  const float4 bias = *reinterpret_cast<const float4*>(bs + c0);
  for (int64_t r0 = (int64_t)blockIdx.x * rpb + roff; r0 < B; r0 += FH_P1_UNROLL * stride) {
    float4 pv[FH_P1_UNROLL];
    uint4 av[FH_P1_UNROLL];  /* the row's 8 account features, bf16 (converted at use: fewer registers) */
#pragma unroll
    for (int u = 0; u < FH_P1_UNROLL; ++u) {
      /* rows past B load row r0's inputs again (no branch: the loop stays unrolled, its arrays in registers) */
      const int64_t r = r0 + u * stride < B ? r0 + u * stride : r0;
      int64_t i = (int64_t)__ldg(bars + r) - bar0;
      i = i < 0 ? 0 : (i >= n_p1 ? n_p1 - 1 : i);
      pv[u] = __ldg(reinterpret_cast<const float4*>(p1 + i * h1 + c0));
      const fh_bf16* xa = x + r * D + acc0;
      if (VEC_ACC) {
        av[u] = __ldg(reinterpret_cast<const uint4*>(xa));
      } else {
        uint16_t e[FH_ENV_ACCOUNT];
#pragma unroll
        for (int k = 0; k < FH_ENV_ACCOUNT; ++k) e[k] = __bfloat16_as_ushort(xa[k]);
        av[u] = make_uint4(e[0] | (uint32_t)e[1] << 16, e[2] | (uint32_t)e[3] << 16, e[4] | (uint32_t)e[5] << 16,
                           e[6] | (uint32_t)e[7] << 16);
      }
    }
#pragma unroll
    for (int u = 0; u < FH_P1_UNROLL; ++u) {
      const int64_t r = r0 + u * stride;
      float v0 = pv[u].x + bias.x, v1 = pv[u].y + bias.y, v2 = pv[u].z + bias.z, v3 = pv[u].w + bias.w;
      const __nv_bfloat162* ah = reinterpret_cast<const __nv_bfloat162*>(&av[u]);
#pragma unroll
      for (int k = 0; k < FH_ENV_ACCOUNT; ++k) {
        const float2 a2 = __bfloat1622float2(ah[k >> 1]);
        const float a = (k & 1) ? a2.y : a2.x;
        const float4 w = *reinterpret_cast<const float4*>(ws + k * h1 + c0);
        v0 = fmaf(a, w.x, v0);
        v1 = fmaf(a, w.y, v1);
        v2 = fmaf(a, w.z, v2);
        v3 = fmaf(a, w.w, v3);
      }
      const __nv_bfloat162 lo = __floats2bfloat162_rn(fmaxf(v0, 0.0f), fmaxf(v1, 0.0f));
      const __nv_bfloat162 hi = __floats2bfloat162_rn(fmaxf(v2, 0.0f), fmaxf(v3, 0.0f));
      if (r < B)
        *reinterpret_cast<uint2*>(a1 + r * h1 + c0) =
            make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

fh_status fh_launch_layer1_p1(const float* p1, int64_t bar0, int64_t n_p1, const int32_t* bars, const fh_bf16* x,
                              int32_t D, const fh_bf16* w1, const fh_bf16* b1, int32_t h1, int32_t B, fh_bf16* a1,
                              cudaStream_t s) {
  if (B <= 0) return FH_OK;
  if (!p1 || n_p1 <= 0 || !bars || !x || !w1 || !b1 || !a1 || h1 <= 0 || h1 % 8 || D < FH_ENV_ACCOUNT)
    return FH_ERR_INVALID_ARGUMENT;
  if (h1 / 4 > FH_P1_THREADS) return FH_ERR_UNSUPPORTED; /* h1 > 1024 */
  const int32_t rpb = FH_P1_THREADS / (h1 / 4);
  /* a few blocks per SM, each walking many rows: every block first stages the weights (9 h1 floats) */
  int dev = 0, sms = 0;
  FH_CUDA_TRY(cudaGetDevice(&dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  int64_t blocks = CEIL_DIV((int64_t)B, (int64_t)rpb * FH_P1_UNROLL);
  if (blocks > (int64_t)sms * FH_P1_BLOCKS_PER_SM) blocks = (int64_t)sms * FH_P1_BLOCKS_PER_SM;
  const size_t smem = (size_t)h1 * (FH_ENV_ACCOUNT + 1) * sizeof(float);
  if (D % 8 == 0)
    layer1_p1_kernel<true><<<(unsigned)blocks, FH_P1_THREADS, smem, s>>>(p1, bar0, n_p1, bars, x, D, w1, b1, h1, B, a1);
  else
    layer1_p1_kernel<false><<<(unsigned)blocks, FH_P1_THREADS, smem, s>>>(p1, bar0, n_p1, bars, x, D, w1, b1, h1, B, a1);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

static __global__ void slot_states_kernel(const int32_t* __restrict__ bar, const float* __restrict__ account,
                                          int64_t slot0, int32_t n, int32_t* __restrict__ bars,
                                          fh_bf16* __restrict__ x, int32_t D) {
  const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= (int64_t)n * FH_ENV_ACCOUNT) return;
  const int64_t r = t / FH_ENV_ACCOUNT;
  const int k = (int)(t - r * FH_ENV_ACCOUNT);
  const int64_t slot = slot0 + r;
  if (k == 0) bars[r] = bar[slot];
  x[r * D + (D - FH_ENV_ACCOUNT) + k] = fh_from_f32<fh_bf16>(account[slot * FH_ENV_ACCOUNT + k]);
}

fh_status fh_launch_slot_states(const int32_t* bar, const float* account, int64_t slot0, int32_t n, int32_t* bars,
                                fh_bf16* x, int32_t D, cudaStream_t s) {
  if (n <= 0) return FH_OK;
  if (!bar || !account || !bars || !x || slot0 < 0 || D < FH_ENV_ACCOUNT) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_slot_states",
                      "null replay, output or input pointer, negative first slot, or D < 8");
    return FH_ERR_INVALID_ARGUMENT;
  }
  const int64_t threads = (int64_t)n * FH_ENV_ACCOUNT;
  slot_states_kernel<<<(unsigned)CEIL_DIV(threads, (int64_t)256), 256, 0, s>>>(bar, account, slot0, n, bars, x, D);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
