/*
 * gradnorm.cu — deterministic reductions over flat float vectors: sum, sum of squares, the global
 * gradient norm with its clip factor, and a mean (the batch loss).
 *
 * Two passes with a fixed grid (kSumBlocks blocks, grid-stride, double accumulators, tree reduce in
 * shared memory), then one block sums the partials in a fixed order: the same input gives the same
 * bits every run, in a graph or eagerly. Results stay on the device (graph-capturable). The mean of
 * up to 65 536 values (the batch loss) is one block's pass instead, in a fixed order too.
 *
 * The fused optimiser step (fh_launch_optimise_fused) is the squares pass plus one kernel whose every
 * block repeats that finish sum (same block size, same order, so the same norm and clip factor), then
 * runs Adam and the target update on its elements with adam.cuh's math (adam.cu's kernels use the
 * same): the bits of grad norm -> Adam -> step bump -> target update in 2 launches instead of 5.
 */
#include "net_kernels.cuh"
#include "adam.cuh"

#include <atomic>
#include <type_traits>

static constexpr int kSumBlocks = 264;   /* 2 x 132 SMs */
static constexpr int kSumThreads = 256;
static constexpr int kOptimMaxBlocks = 132 * 8;

int64_t fh_sum_partial_doubles(void) { return kSumBlocks; }

__device__ static double fh_block_sum_d(double v, double* sh) {
  v = fh_warp_sum_d(v);
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) sh[w] = v;
  __syncthreads();
  double t = 0.0;
  if (w == 0) {
    t = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0;
    t = fh_warp_sum_d(t);
  }
  __syncthreads();
  return t;  /* valid in thread 0 */
}

/* Partial vb (0 <= vb < kSumBlocks) of the sum (of squares) of x[0..n): the elements vb * kSumThreads + t + k *
 * kSumBlocks * kSumThreads summed by thread t in order, then the block's tree (valid in thread 0). Rounded
 * explicitly (no contraction), so that every kernel that computes a partial gets the same bits. */
__device__ static double fh_sum_partial_block(const float* __restrict__ x, int64_t n, int squares, int vb, double* sh) {
  double acc = 0.0;
  const int64_t stride = (int64_t)kSumBlocks * kSumThreads;
  for (int64_t i = (int64_t)vb * kSumThreads + threadIdx.x; i < n; i += stride) {
    const double v = (double)x[i];
    acc = __dadd_rn(acc, squares ? __dmul_rn(v, v) : v);
  }
  return fh_block_sum_d(acc, sh);
}

/* kSumBlocks blocks of kSumThreads threads */
static __global__ void __launch_bounds__(kSumThreads)
fh_sum_partial_kernel(const float* __restrict__ x, int64_t n, int squares, double* __restrict__ partial) {
  __shared__ double sh[32];
  const double t = fh_sum_partial_block(x, n, squares, blockIdx.x, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

/* The nparts partials summed by one block of kSumThreads threads in a fixed order (valid in thread 0); read past
 * L1 (__ldcg), as the one-launch optimiser reads partials that other blocks of its grid wrote. */
__device__ static double fh_sum_partials_d(const double* partial, int nparts, double* sh) {
  double acc = 0.0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += __ldcg(partial + i);
  return fh_block_sum_d(acc, sh);
}

/* (norm, clip factor) from the sum of squares. */
__device__ static float2 fh_norm_clip(double sumsq, float clip) {
  const float norm = (float)sqrt(sumsq);
  float scale = 1.0f;
  if (clip > 0.0f && norm > clip) scale = clip / (norm + 1e-6f);
  if (!isfinite(norm)) scale = 0.0f;  /* finite gradients are dropped; NaN/Inf ones still poison their
                                         elements (x * 0), and the trainer stops at the non-finite norm */
  return make_float2(norm, scale);
}

/* mode 0: out_d = sum; mode 1: norm/scale; mode 2: mean as float */
static __global__ void fh_sum_finish_kernel(const double* __restrict__ partial, int nparts, int mode, int64_t n,
                                            float clip, double* out_d, float* out_a, float* out_b) {
  __shared__ double sh[32];
  double t = fh_sum_partials_d(partial, nparts, sh);
  if (threadIdx.x != 0) return;
  if (mode == 0) {
    *out_d = t;
  } else if (mode == 1) {
    const float2 ns = fh_norm_clip(t, clip);
    *out_a = ns.x;
    *out_b = ns.y;
  } else {
    *out_a = n > 0 ? (float)(t / (double)n) : 0.0f;
  }
}

fh_status fh_launch_sum(const float* x, int64_t n, int squares, double* partial, double* out, cudaStream_t s) {
  fh_sum_partial_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(x, n, squares, partial);
  FH_LAUNCH_CHECK();
  fh_sum_finish_kernel<<<1, kSumThreads, 0, s>>>(partial, kSumBlocks, 0, n, 0.0f, out, nullptr, nullptr);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_grad_norm(const float* g, int64_t n, float clip, double* partial, float* norm_out,
                              float* scale_out, cudaStream_t s) {
  fh_sum_partial_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(g, n, 1, partial);
  FH_LAUNCH_CHECK();
  fh_sum_finish_kernel<<<1, kSumThreads, 0, s>>>(partial, kSumBlocks, 1, n, clip, nullptr, norm_out, scale_out);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* The mean of a short vector (the batch loss: B values) in one block of kMeanThreads: each thread's grid-stride
 * sum, then the block's tree; one launch instead of the partials' and the finish's. */
static constexpr int kMeanThreads = 1024;
static constexpr int64_t kMeanOneBlock = 1 << 16;

static __global__ void __launch_bounds__(kMeanThreads) fh_mean_block_kernel(const float* __restrict__ x, int64_t n,
                                                                            float* __restrict__ out,
                                                                            const int64_t* __restrict__ copy_src,
                                                                            int64_t* __restrict__ copy_dst) {
  __shared__ double sh[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kMeanThreads) acc += (double)x[i];
  const double t = fh_block_sum_d(acc, sh);
  if (threadIdx.x == 0) {
    *out = n > 0 ? (float)(t / (double)n) : 0.0f;
    if (copy_dst) *copy_dst = *copy_src;
  }
}

fh_status fh_launch_mean(const float* x, int64_t n, double* partial, float* out, cudaStream_t s,
                         const int64_t* copy_src, int64_t* copy_dst) {
  if (!copy_src != !copy_dst) return FH_ERR_INVALID_ARGUMENT;
  if (n <= kMeanOneBlock && !fh_env_is("FH_MEAN_ONE_BLOCK", "0")) { /* "0": partials + finish (A/B) */
    fh_mean_block_kernel<<<1, kMeanThreads, 0, s>>>(x, n, out, copy_src, copy_dst);
    FH_LAUNCH_CHECK();
    return FH_OK;
  }
  fh_sum_partial_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(x, n, 0, partial);
  FH_LAUNCH_CHECK();
  fh_sum_finish_kernel<<<1, kSumThreads, 0, s>>>(partial, kSumBlocks, 2, n, 0.0f, nullptr, out, nullptr);
  FH_LAUNCH_CHECK();
  if (copy_dst) FH_CUDA_TRY(cudaMemcpyAsync(copy_dst, copy_src, sizeof(int64_t), cudaMemcpyDeviceToDevice, s));
  return FH_OK;
}

/* Per-epoch history of the train step scalars: slot k = (*step - 1) % cap (every trained epoch runs
 * exactly `cap` steps, so slot = step in epoch). The history may be mapped pinned host memory: the
 * values go straight to the host, then (after a system-wide fence) *done = *step tells the host
 * which steps it can read without synchronising. */
__device__ static void fh_write_step_record(float loss, float gnorm, int64_t step, int cap, float* loss_hist,
                                            float* gnorm_hist, int64_t* done) {
  const int64_t k = (step - 1) % cap;
  loss_hist[k] = loss;
  gnorm_hist[k] = gnorm;
  if (done) {
    __threadfence_system();
    *reinterpret_cast<volatile int64_t*>(done) = step;
  }
}

static __global__ void fh_record_step_kernel(const float* loss, const float* gnorm, const int64_t* step, int cap,
                                             float* loss_hist, float* gnorm_hist, int64_t* done) {
  fh_write_step_record(*loss, *gnorm, *step, cap, loss_hist, gnorm_hist, done);
}

fh_status fh_launch_record_step(const float* loss, const float* gnorm, const int64_t* step, int cap, float* loss_hist,
                                float* gnorm_hist, int64_t* done, cudaStream_t s) {
  fh_record_step_kernel<<<1, 1, 0, s>>>(loss, gnorm, step, cap, loss_hist, gnorm_hist, done);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* Where W1's element e (0 <= e < rows * cols, row-major) goes in w1s and in w1n. */
__device__ __forceinline__ int64_t fh_w1s_index(const fh_w1_pair& w, int64_t e) {
  const int64_t row = e / w.cols;
  const int32_t c = (int32_t)(e - row * w.cols);
  return row * w.l.K + (c < w.l.WF ? w.l.mkt + c : c - w.l.WF);
}
__device__ __forceinline__ int64_t fh_w1n_index(const fh_w1_pair& w, int64_t e) {
  const int64_t row = e / w.cols;
  return row * w.l.K + w.l.nF + (e - row * w.cols);
}

static __global__ void fh_w1_pair_kernel(const fh_bf16* __restrict__ shadow, fh_w1_pair w) {
  const int64_t n = (int64_t)w.rows * w.cols;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    const fh_bf16 v = shadow[w.off + e];
    w.s[fh_w1s_index(w, e)] = v;
    w.n[fh_w1n_index(w, e)] = v;
  }
}

static bool fh_w1_pair_ok(const fh_w1_pair& w) {
  const fh_pair_layout& l = w.l;
  return w.s && w.n && w.rows > 0 && w.cols == l.WF + 8 && l.K == l.mkt + l.WF && l.mkt >= 8 + l.nF && l.nF >= 0 &&
         l.WF % 4 == 0 && l.nF % 4 == 0 && l.mkt % 4 == 0 && w.off % 4 == 0;
}

fh_status fh_launch_w1_pair(const fh_bf16* shadow, const fh_w1_pair& w, cudaStream_t s) {
  if (!w.s) return FH_OK;
  if (!shadow || !fh_w1_pair_ok(w)) return FH_ERR_INVALID_ARGUMENT;
  const int64_t n = (int64_t)w.rows * w.cols;
  int64_t blocks = CEIL_DIV(n, (int64_t)256);
  if (blocks > 1024) blocks = 1024;
  fh_w1_pair_kernel<<<(unsigned)blocks, 256, 0, s>>>(shadow, w);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* A barrier of the whole grid (every block resident: the launcher caps the grid at what fits the device).
 * bar[0] counts the blocks in, bar[1] is the generation: a block reads the generation before it counts itself, the
 * last one resets the count and bumps the generation, the others wait for the bump. bar[0] is 0 between launches;
 * the writes of every block before the barrier are visible to every block after it. */
__device__ static void fh_grid_barrier(unsigned int* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    volatile unsigned int* gen = bar + 1;
    const unsigned int g0 = *gen;
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x - 1) {
      atomicExch(bar, 0u);
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (*gen == g0) __nanosleep(64);
    }
    __threadfence();
  }
  __syncthreads();
}

/* The fused optimiser step's kernel, kSumThreads threads per block. Every block: the finish sum of the squares
 * partials -> norm and clip factor (fh_sum_finish_kernel's code), t = *step + 1 with the bias corrections and the
 * target mix (fh_adam_kernel's, fh_target_kernel's decision for the bumped counter), then per element Adam, the
 * shadow, and the target update from the new p (the value fh_target_kernel would read back).
 *   kOne = false (launch 2 of 2, after fh_sum_partial_kernel; any grid): thread 0 of each block takes a ticket after
 *     its read of *step; the block with the last one (every block has read *step by then) writes *step = t, the norm
 *     and the clip factor (and the step record when rec has one), and atomicInc wraps the ticket back to 0.
 *   kOne = true (the only launch; any grid whose blocks are all resident): the blocks first compute the squares
 *     partials of fh_sum_partial_kernel's blocks blockIdx.x, + gridDim.x, ... (the same bits), read *step, and meet
 *     at a grid barrier on ticket[0..1]; block 0 then writes *step = t, the norm, the clip factor and the record. */
template <typename T, bool kOne>
static __global__ void __launch_bounds__(kSumThreads)
fh_optimise_kernel(int64_t n, float* __restrict__ p, T* __restrict__ shadow, const float* __restrict__ g,
                   float* __restrict__ m, float* __restrict__ v, float* __restrict__ tgt, T* __restrict__ tgt_shadow,
                   double* __restrict__ partial, float* __restrict__ norm_out, float* __restrict__ scale_out,
                   int64_t* step, unsigned int* ticket, float clip, float lr, float b1, float b2, float eps,
                   int every, float tau, fh_step_record rec, fh_w1_pair w1p) {
  __shared__ double sh[32];
  __shared__ float s_c[4];
  int64_t t = 0;
  if (threadIdx.x == 0) {
    t = *step + 1;
    s_c[0] = fh_adam_bias(b1, t);
    s_c[1] = fh_adam_bias(b2, t);
    s_c[3] = fh_target_mix(tau, every, t);
  }
  if constexpr (kOne) {
    for (int vb = blockIdx.x; vb < kSumBlocks; vb += gridDim.x) {
      const double part = fh_sum_partial_block(g, n, 1, vb, sh);
      if (threadIdx.x == 0) partial[vb] = part;
    }
    fh_grid_barrier(ticket);
  }
  const double sumsq = fh_sum_partials_d(partial, kSumBlocks, sh);
  float2 ns = make_float2(0.0f, 0.0f);
  if (threadIdx.x == 0) {
    ns = fh_norm_clip(sumsq, clip);
    s_c[2] = ns.y;
  }
  __syncthreads();
  const float bc1 = s_c[0], bc2 = s_c[1], sc = s_c[2], mix = s_c[3];
  const int64_t stride = (int64_t)gridDim.x * blockDim.x, first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  /* 16-byte groups, then the tail (as fh_adam_kernel) */
  const int64_t n4 = n / 4;
  for (int64_t i = first; i < n4; i += stride) {
    const float4 pi = fh_adam_group4(i, p, g, m, v, sc, lr, b1, b2, eps, bc1, bc2);
    if (shadow) fh_store_quad(shadow, i, pi);
    if constexpr (std::is_same<T, fh_bf16>::value) {
      /* W1 placed for the paired layout: a quad never straddles a row or the market/account split (the launcher
       * checks the multiples of 4), so it lands as a quad in both copies */
      const int64_t e = 4 * i - w1p.off;
      if (w1p.s && e >= 0 && e < (int64_t)w1p.rows * w1p.cols) {
        fh_store_quad(w1p.s, fh_w1s_index(w1p, e) / 4, pi);
        fh_store_quad(w1p.n, fh_w1n_index(w1p, e) / 4, pi);
      }
    }
    if (mix != 0.0f) {
      float4 ti = pi;
      if (mix != 1.0f) {
        const float4 to = reinterpret_cast<const float4*>(tgt)[i];
        ti = make_float4(fh_target_blend(pi.x, to.x, mix), fh_target_blend(pi.y, to.y, mix),
                         fh_target_blend(pi.z, to.z, mix), fh_target_blend(pi.w, to.w, mix));
      }
      reinterpret_cast<float4*>(tgt)[i] = ti;
      if (tgt_shadow) fh_store_quad(tgt_shadow, i, ti);
    }
  }
  for (int64_t i = 4 * n4 + first; i < n; i += stride) {
    const float pi = fh_adam_elem(i, p, g, m, v, sc, lr, b1, b2, eps, bc1, bc2);
    if (shadow) shadow[i] = fh_from_f32<T>(pi);
    if constexpr (std::is_same<T, fh_bf16>::value) {
      const int64_t e = i - w1p.off;
      if (w1p.s && e >= 0 && e < (int64_t)w1p.rows * w1p.cols) {
        w1p.s[fh_w1s_index(w1p, e)] = fh_from_f32<T>(pi);
        w1p.n[fh_w1n_index(w1p, e)] = fh_from_f32<T>(pi);
      }
    }
    if (mix != 0.0f) {
      const float x = mix == 1.0f ? pi : fh_target_blend(pi, tgt[i], mix);
      tgt[i] = x;
      if (tgt_shadow) tgt_shadow[i] = fh_from_f32<T>(x);
    }
  }
  if (threadIdx.x == 0) {
    bool last;
    if constexpr (kOne) {
      last = blockIdx.x == 0; /* every block read *step before the barrier */
    } else {
      __threadfence();  /* this block's read of *step before its ticket */
      last = atomicInc(ticket, gridDim.x - 1) == gridDim.x - 1;
      if (last) __threadfence();  /* every block's read of *step before the write */
    }
    if (last) {
      *step = t;
      *norm_out = ns.x;
      *scale_out = ns.y;
      if (rec.loss_hist) fh_write_step_record(*rec.loss, ns.x, t, rec.cap, rec.loss_hist, rec.gnorm_hist, rec.done);
    }
  }
}

/* The one-launch optimiser's grid: 2 kSumBlocks (4 blocks an SM on 132 SMs; the reference epoch -0.5 ms on an H100
 * against kSumBlocks, +1.2 ms at 4 kSumBlocks, bench/RESULTS.md; FH_OPTIM_ONE_BLOCKS=<count> for A/B), and no more
 * than the device holds at once (0: unknown). */
template <typename T>
static int fh_optimise_one_blocks() {
  static std::atomic<int> cached{-1};
  int b = cached.load();
  if (b >= 0) return b;
  int dev = 0, sms = 0, per_sm = 0;
  b = 0;
  if (cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fh_optimise_kernel<T, true>, kSumThreads, 0) ==
          cudaSuccess) {
    const int64_t fit = (int64_t)sms * per_sm, want = fh_env_int("FH_OPTIM_ONE_BLOCKS", 1, 1 << 16, 2 * kSumBlocks);
    b = (int)(fit < want ? fit : want);
  }
  cached.store(b);
  return b;
}

template <typename T>
fh_status fh_launch_optimise_fused(int64_t n, float* p, T* shadow, const float* g, float* m, float* v, float* tgt,
                                   T* tgt_shadow, double* partial, float* norm_out, float* scale_out, int64_t* step,
                                   unsigned int* ticket, float clip, float lr, float beta1, float beta2, float eps,
                                   int target_every, float tau, cudaStream_t s, const fh_step_record* rec,
                                   const fh_w1_pair* w1p, int launches) {
  /* 16-byte groups of the fp32 vectors, 4-element groups of the shadows */
  const fh_w1_pair wp = w1p && std::is_same<T, fh_bf16>::value ? *w1p : fh_w1_pair{};
  if (wp.s && (!fh_w1_pair_ok(wp) || ((uintptr_t)wp.s & 7) || ((uintptr_t)wp.n & 7) ||
               wp.off + (int64_t)wp.rows * wp.cols > n))
    return FH_ERR_INVALID_ARGUMENT;
  const uintptr_t f32 = (uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v | (uintptr_t)tgt;
  const uintptr_t sh = (uintptr_t)shadow | (uintptr_t)tgt_shadow;
  if ((f32 & 15) || (sh & (4 * sizeof(T) - 1)) || launches < 0 || launches > 2) return FH_ERR_INVALID_ARGUMENT;
  const fh_step_record r = rec ? *rec : fh_step_record{};
  const int one = launches != 2 ? fh_optimise_one_blocks<T>() : 0;  /* 0: as 1 */
  if (one > 0) {
    fh_optimise_kernel<T, true><<<(unsigned)one, kSumThreads, 0, s>>>(n, p, shadow, g, m, v, tgt, tgt_shadow, partial,
                                                                      norm_out, scale_out, step, ticket, clip, lr,
                                                                      beta1, beta2, eps, target_every, tau, r, wp);
    FH_LAUNCH_CHECK();
    return FH_OK;
  }
  fh_sum_partial_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(g, n, 1, partial);
  FH_LAUNCH_CHECK();
  int64_t blocks = CEIL_DIV(CEIL_DIV(n, (int64_t)4), (int64_t)kSumThreads);  /* a 16-byte group per thread */
  if (blocks > kOptimMaxBlocks) blocks = kOptimMaxBlocks;
  if (blocks < 1) blocks = 1;
  fh_optimise_kernel<T, false><<<(unsigned)blocks, kSumThreads, 0, s>>>(n, p, shadow, g, m, v, tgt, tgt_shadow,
                                                                        partial, norm_out, scale_out, step, ticket,
                                                                        clip, lr, beta1, beta2, eps, target_every,
                                                                        tau, r, wp);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template fh_status fh_launch_optimise_fused<float>(int64_t, float*, float*, const float*, float*, float*, float*,
                                                   float*, double*, float*, float*, int64_t*, unsigned int*, float,
                                                   float, float, float, float, int, float, cudaStream_t,
                                                   const fh_step_record*, const fh_w1_pair*, int);
template fh_status fh_launch_optimise_fused<fh_bf16>(int64_t, float*, fh_bf16*, const float*, float*, float*, float*,
                                                     fh_bf16*, double*, float*, float*, int64_t*, unsigned int*,
                                                     float, float, float, float, float, int, float, cudaStream_t,
                                                     const fh_step_record*, const fh_w1_pair*, int);
