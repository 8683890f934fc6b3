/*
 * gradnorm.cu — deterministic reductions over flat float vectors: sum, sum of squares, the global
 * gradient norm with its clip factor, and a mean (the batch loss).
 *
 * Two passes with a fixed grid (kSumBlocks blocks, grid-stride, double accumulators, tree reduce in
 * shared memory), then one block sums the partials in a fixed order: the same input gives the same
 * bits every run, in a graph or eagerly. Results stay on the device (graph-capturable).
 */
#include "net_kernels.cuh"

static constexpr int kSumBlocks = 264;   /* 2 x 132 SMs */
static constexpr int kSumThreads = 256;

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

static __global__ void fh_sum_partial_kernel(const float* __restrict__ x, int64_t n, int squares,
                                             double* __restrict__ partial) {
  __shared__ double sh[32];
  double acc = 0.0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double v = (double)x[i];
    acc += squares ? v * v : v;
  }
  double t = fh_block_sum_d(acc, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

/* mode 0: out_d = sum; mode 1: norm/scale; mode 2: mean as float */
static __global__ void fh_sum_finish_kernel(const double* __restrict__ partial, int nparts, int mode, int64_t n,
                                            float clip, double* out_d, float* out_a, float* out_b) {
  __shared__ double sh[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < nparts; i += blockDim.x) acc += partial[i];
  double t = fh_block_sum_d(acc, sh);
  if (threadIdx.x != 0) return;
  if (mode == 0) {
    *out_d = t;
  } else if (mode == 1) {
    float norm = (float)sqrt(t);
    *out_a = norm;
    float scale = 1.0f;
    if (clip > 0.0f && norm > clip) scale = clip / (norm + 1e-6f);
    if (!isfinite(norm)) scale = 0.0f;  /* a non-finite gradient never reaches the weights */
    *out_b = scale;
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

fh_status fh_launch_mean(const float* x, int64_t n, double* partial, float* out, cudaStream_t s) {
  fh_sum_partial_kernel<<<kSumBlocks, kSumThreads, 0, s>>>(x, n, 0, partial);
  FH_LAUNCH_CHECK();
  fh_sum_finish_kernel<<<1, kSumThreads, 0, s>>>(partial, kSumBlocks, 2, n, 0.0f, nullptr, out, nullptr);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* Per-epoch history of the train step scalars: slot k = (*step - 1) % cap (every trained epoch runs
 * exactly `cap` steps, so slot = step in epoch). The history may be mapped pinned host memory: the
 * values go straight to the host, then (after a system-wide fence) *done = *step tells the host
 * which steps it can read without synchronising. */
static __global__ void fh_record_step_kernel(const float* loss, const float* gnorm, const int64_t* step, int cap,
                                             float* loss_hist, float* gnorm_hist, int64_t* done) {
  const int64_t k = (*step - 1) % cap;
  loss_hist[k] = *loss;
  gnorm_hist[k] = *gnorm;
  if (done) {
    __threadfence_system();
    *reinterpret_cast<volatile int64_t*>(done) = *step;
  }
}

fh_status fh_launch_record_step(const float* loss, const float* gnorm, const int64_t* step, int cap, float* loss_hist,
                                float* gnorm_hist, int64_t* done, cudaStream_t s) {
  fh_record_step_kernel<<<1, 1, 0, s>>>(loss, gnorm, step, cap, loss_hist, gnorm_hist, done);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
