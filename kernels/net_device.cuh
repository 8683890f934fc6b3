/*
 * net_device.cuh — warp-cooperative device helpers for the dueling heads (used by net.cu and loss.cu).
 *
 * A warp handles one sample; lane l owns atoms l and l + 32 (so atoms <= 64 on the GPU; the trainer
 * rejects more at create). logit_d(s, a, j) = V(s, j) + A_d(s, a, j) - mean_a' A_d(s, a', j)
 * (DESIGN §5); atoms == 1 gives Q directly, atoms > 1 a softmax over j with Q = sum_j p_j z_j.
 */
#ifndef FH_NET_DEVICE_CUH
#define FH_NET_DEVICE_CUH

#include "net_kernels.cuh"
#include "c51.cuh"

/* One head-output element as float, through the read-only cache. */
__device__ __forceinline__ float fh_ldg_f32(const float* p) { return __ldg(p); }
__device__ __forceinline__ float fh_ldg_f32(const fh_bf16* p) { return __bfloat162float(__ldg(p)); }

#define FH_ATOMS_PER_LANE 2
#define FH_MAX_ATOMS_GPU (32 * FH_ATOMS_PER_LANE)

template <typename L>
__device__ __forceinline__ float fh_dev_support(const fh_heads_view_t<L>& h, int j) {
  return h.atoms <= 1 ? 0.0f : fh_c51_support(h.atoms, h.v_min, h.v_max, j);
}

/* Combined logits of action a of one branch for this lane's atoms, from the value row and the
 * branch's advantage row (n * atoms, action-major); invalid atoms get -inf. The rows are best in
 * shared memory (fh_dev_stage_row): every call re-reads the n advantage rows for the mean. */
__device__ __forceinline__ void fh_dev_logits_r(const float* vrow, const float* arow, int n, int atoms, int a, int lane,
                                                float out[FH_ATOMS_PER_LANE]) {
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < atoms) {
      float mean = 0.0f;
      for (int b = 0; b < n; ++b) mean += arow[b * atoms + j];
      mean /= (float)n;  /* as fh_dueling_combine */
      out[k] = vrow[j] + arow[a * atoms + j] - mean;
    } else {
      out[k] = -INFINITY;
    }
  }
}

/* Softmax over atoms in place (this lane's part); returns log-sum-exp (all lanes). */
__device__ __forceinline__ float fh_dev_softmax(int atoms, int lane, float x[FH_ATOMS_PER_LANE]) {
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) mx = fmaxf(mx, x[k]);
  mx = fh_warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    float e = j < atoms ? expf(x[k] - mx) : 0.0f;
    x[k] = e;
    sum += e;
  }
  sum = fh_warp_sum(sum);
  float inv = 1.0f / sum;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) x[k] *= inv;
  return mx + logf(sum);
}

/* Expected Q of action a of one branch (rows as fh_dev_logits_r); same value in every lane. */
__device__ __forceinline__ float fh_dev_expected_q_r(const float* vrow, const float* arow, int n, int atoms, float v_min,
                                                     float v_max, int a, int lane) {
  float x[FH_ATOMS_PER_LANE];
  fh_dev_logits_r(vrow, arow, n, atoms, a, lane, x);
  if (atoms <= 1) return __shfl_sync(0xffffffffu, x[0], 0);
  /* as fh_expected_q: sum e z / sum e with e = exp(x - max) */
  float mx = fmaxf(x[0], x[1]);
  mx = fh_warp_max(mx);
  float sum = 0.0f, acc = 0.0f;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < atoms) {
      float e = expf(x[k] - mx);
      sum += e;
      acc += e * fh_c51_support(atoms, v_min, v_max, j);
    }
  }
  return fh_warp_sum(acc) / fh_warp_sum(sum);
}

/* Floats of one sample's head outputs staged in shared memory: [value (ldv) | branch 0 (lda0) | ...]. */
template <typename L>
__host__ __device__ __forceinline__ int fh_row_floats(const fh_heads_view_t<L>& h) {
  int n = h.ldv;
  for (int d = 0; d < h.nb; ++d) n += h.lda[d];
  return n;
}

/* Warp-cooperative copy of sample i's head outputs into dst (fh_row_floats floats); all loads issued
 * before use. Ends with __syncwarp(). */
template <typename L>
__device__ __forceinline__ void fh_dev_stage_row(const fh_heads_view_t<L>& h, int i, int lane, float* dst) {
  const L* v = h.v + (int64_t)i * h.ldv;
#pragma unroll 4
  for (int c = lane; c < h.ldv; c += 32) dst[c] = fh_ldg_f32(v + c);
  int off = h.ldv;
  for (int d = 0; d < h.nb; ++d) {
    const L* a = h.a[d] + (int64_t)i * h.lda[d];
#pragma unroll 4
    for (int c = lane; c < h.lda[d]; c += 32) dst[off + c] = fh_ldg_f32(a + c);
    off += h.lda[d];
  }
  __syncwarp();
}

/* Pointer to branch d's advantage row inside a staged row. */
template <typename L>
__device__ __forceinline__ const float* fh_staged_a(const fh_heads_view_t<L>& h, const float* row, int d) {
  int off = h.ldv;
  for (int b = 0; b < d; ++b) off += h.lda[b];
  return row + off;
}

/* ---- all actions at once (branches of <= MAXN actions) ---- */

template <int NV>
__device__ __forceinline__ void fh_warp_max_n(float (&v)[NV]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int q = 0; q < NV; ++q) v[q] = fmaxf(v[q], __shfl_xor_sync(0xffffffffu, v[q], o));
  }
}
template <int NV>
__device__ __forceinline__ void fh_warp_sum_n(float (&v)[NV]) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
    for (int q = 0; q < NV; ++q) v[q] += __shfl_xor_sync(0xffffffffu, v[q], o);
  }
}

/* Q(s_i, a) of every action of every branch of row i, in every lane: q[d * MAXN + a] (a < n_d; the
 * other entries are unspecified). Each lane loads its two atoms of the row straight from global
 * memory (all loads first), and the reductions of all actions run side by side in one butterfly.
 * The same arithmetic in the same order as fh_dev_expected_q_r, so the same bits. Every n_d <= MAXN;
 * XOR butterflies leave every lane with the same bits. */
template <int MAXN, typename L>
__device__ __forceinline__ void fh_dev_q_all(const fh_heads_view_t<L>& h, int64_t i, int lane,
                                             float (&q)[FH_MAX_BRANCHES * MAXN]) {
  constexpr int NB = FH_MAX_BRANCHES;
  const int atoms = h.atoms;
  const bool ok[2] = {lane < atoms, lane + 32 < atoms};
  float v[2], x[NB][MAXN][2], mean[NB][2];
#pragma unroll
  for (int k = 0; k < 2; ++k) v[k] = ok[k] ? fh_ldg_f32(h.v + i * h.ldv + lane + 32 * k) : 0.0f;
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const int n = d < h.nb ? h.n[d] : 0;
    const L* p = d < h.nb ? h.a[d] + i * h.lda[d] : nullptr;
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
#pragma unroll
      for (int k = 0; k < 2; ++k) x[d][a][k] = a < n && ok[k] ? fh_ldg_f32(p + a * atoms + lane + 32 * k) : 0.0f;
  }
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const int n = d < h.nb ? h.n[d] : 1;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float sum = 0.0f;
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
        if (a < n) sum += x[d][a][k];
      mean[d][k] = sum / (float)n; /* as fh_dueling_combine */
    }
  }
  float mx[NB * MAXN];
#pragma unroll
  for (int d = 0; d < NB; ++d)
#pragma unroll
    for (int a = 0; a < MAXN; ++a) {
      float m = -INFINITY;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        x[d][a][k] = ok[k] ? v[k] + x[d][a][k] - mean[d][k] : -INFINITY;
        m = fmaxf(m, x[d][a][k]);
      }
      mx[d * MAXN + a] = m;
    }
  fh_warp_max_n(mx);
  if (atoms <= 1) {
#pragma unroll
    for (int c = 0; c < NB * MAXN; ++c) q[c] = mx[c];
    return;
  }
  float zk[2], se[NB * MAXN];
#pragma unroll
  for (int k = 0; k < 2; ++k) zk[k] = fh_c51_support(atoms, h.v_min, h.v_max, lane + 32 * k);
#pragma unroll
  for (int d = 0; d < NB; ++d)
#pragma unroll
    for (int a = 0; a < MAXN; ++a) {
      float sum = 0.0f, acc = 0.0f;
#pragma unroll
      for (int k = 0; k < 2; ++k)
        if (ok[k]) {
          const float e = expf(x[d][a][k] - mx[d * MAXN + a]);
          sum += e;
          acc += e * zk[k];
        }
      se[d * MAXN + a] = sum;
      q[d * MAXN + a] = acc;
    }
  fh_warp_sum_n(se);
  fh_warp_sum_n(q);
#pragma unroll
  for (int c = 0; c < NB * MAXN; ++c) q[c] /= se[c];
}

#endif /* FH_NET_DEVICE_CUH */
