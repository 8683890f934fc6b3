/*
 * qstats.cu — Q statistics of a batch of expected Q values q (B, ldq), branches laid side by side
 * (n[0] + n[1] + ... columns):
 *   out[0] avg max Q (mean over samples and branches of max_a Q_d), out[1] min, out[2] max,
 *   out[3] mean, out[4] population variance over all B * sum(n) values.
 * Deterministic: fixed grid of per-block partials (doubles), one block sums them in order.
 */
#include "net_kernels.cuh"

static constexpr int kQsBlocks = 64;
static constexpr int kQsThreads = 256;
static constexpr int kQsFields = 5;  /* sum_max, min, max, sum, sum_sq */

int64_t fh_qstats_partial_doubles(void) { return (int64_t)kQsBlocks * kQsFields; }

struct fh_qs_acc {
  double smax, mn, mx, s, ss;
};

__device__ static void fh_qs_block_reduce(fh_qs_acc& a, fh_qs_acc* sh) {
  sh[threadIdx.x] = a;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if ((int)threadIdx.x < o) {
      fh_qs_acc& x = sh[threadIdx.x];
      const fh_qs_acc& y = sh[threadIdx.x + o];
      x.smax += y.smax;
      x.mn = fmin(x.mn, y.mn);
      x.mx = fmax(x.mx, y.mx);
      x.s += y.s;
      x.ss += y.ss;
    }
    __syncthreads();
  }
  a = sh[0];
}

struct fh_qs_branches {
  int n[FH_MAX_BRANCHES];
  int nb;
};

static __global__ void fh_qstats_partial_kernel(const float* __restrict__ q, int ldq, int B, fh_qs_branches br,
                                                double* __restrict__ partial) {
  __shared__ fh_qs_acc sh[kQsThreads];
  fh_qs_acc a{0.0, INFINITY, -INFINITY, 0.0, 0.0};
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < B; i += gridDim.x * blockDim.x) {
    const float* row = q + (int64_t)i * ldq;
    int col = 0;
    for (int d = 0; d < br.nb; ++d) {
      float m = -INFINITY;
      for (int k = 0; k < br.n[d]; ++k) {
        double v = row[col + k];
        m = fmaxf(m, (float)v);
        a.mn = fmin(a.mn, v);
        a.mx = fmax(a.mx, v);
        a.s += v;
        a.ss += v * v;
      }
      a.smax += m;
      col += br.n[d];
    }
  }
  fh_qs_block_reduce(a, sh);
  if (threadIdx.x == 0) {
    double* p = partial + (int64_t)blockIdx.x * kQsFields;
    p[0] = a.smax; p[1] = a.mn; p[2] = a.mx; p[3] = a.s; p[4] = a.ss;
  }
}

static __global__ void fh_qstats_finish_kernel(const double* __restrict__ partial, int B, int nq, int nb,
                                               double* __restrict__ out) {
  if (threadIdx.x != 0) return;
  fh_qs_acc a{0.0, INFINITY, -INFINITY, 0.0, 0.0};
  for (int b = 0; b < kQsBlocks; ++b) {
    const double* p = partial + (int64_t)b * kQsFields;
    a.smax += p[0]; a.mn = fmin(a.mn, p[1]); a.mx = fmax(a.mx, p[2]); a.s += p[3]; a.ss += p[4];
  }
  double cnt = (double)B * nq;
  double mean = cnt > 0 ? a.s / cnt : 0.0;
  out[0] = B > 0 ? a.smax / ((double)B * nb) : 0.0;
  out[1] = a.mn;
  out[2] = a.mx;
  out[3] = mean;
  out[4] = cnt > 0 ? fmax(0.0, a.ss / cnt - mean * mean) : 0.0;
}

fh_status fh_launch_qstats(const float* q, int ldq, int B, const int* n, int nb, double* partial, double* out,
                           cudaStream_t s) {
  fh_qs_branches br{};
  int nq = 0;
  for (int d = 0; d < nb && d < FH_MAX_BRANCHES; ++d) {
    br.n[d] = n[d];
    nq += n[d];
  }
  br.nb = nb;
  fh_qstats_partial_kernel<<<kQsBlocks, kQsThreads, 0, s>>>(q, ldq, B, br, partial);
  FH_LAUNCH_CHECK();
  fh_qstats_finish_kernel<<<1, 32, 0, s>>>(partial, B, nq, nb, out);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
