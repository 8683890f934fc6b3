/*
 * loss.cu — the BDQ / double-DQN loss of one batch and its gradient w.r.t. the head logits of
 * online(s) (DESIGN §5), fused in one kernel, one warp per sample.
 *
 * Per sample i (atoms > 1):
 *   a*_d   = argmax_a Q_online,d(s', a)                 (first max on ties)
 *   m      = mean_d softmax(target logits_d(s', a*_d))   (atoms)
 *   tgt    = C51 projection of m onto the support after ret_i + disc_i * z
 *   CE_d   = -sum_j tgt_j log softmax(online logits_d(s, a_d))_j
 *   loss_i = mean_d CE_d,  signal_i = sum_d CE_d,  wloss_i = w_i * loss_i
 * atoms == 1: y = ret + disc * mean_d Q_target,d(s', a*_d); Huber(y - Q_d(s, a_d)); signal = sum_d |TD|.
 *
 * Gradient of L = (1/B) sum_i w_i loss_i w.r.t. the logits (written with `=`, whole rows, pads 0):
 *   g_d,j = (w_i / (B nb)) (p_d,j - tgt_j)          (CE)   or  -(w_i / (B nb)) clip(td, ±delta)  (Huber)
 *   dV_j  = sum_d g_d,j;   dA_d(a, j) = g_d,j [a == a_d] - g_d,j / n_d       (dueling backward)
 *
 * The C51 projection is fh_c51_project_one (c51.cuh), the same code the CPU backend runs.
 * Launch: 128 threads (4 samples) per block; atoms <= 64; actions outside range are clamped.
 * C51 with branches of <= 8 actions (the reference: 3, 4, 3) runs a register kernel instead:
 *   fp32 mode (fp32 GEMM operands): fh_c51_loss_fast_kernel, the same math with everything in
 *     registers and the projection spread over the lanes (IEEE expf / logf / divisions);
 *   bf16 mode: fh_c51_loss_fastmath_kernel, the same loss with approximate math (ex2 / lg2 / rcp
 *     approximations, reciprocal-multiplies, halving warp all-reduces): about 40% fewer instructions,
 *     results within a few float ulps per operation of the exact kernels (bf16 mode is compared to
 *     the CPU only within bf16 tolerance). FH_LOSS_FAST=0 runs the exact kernel in bf16 mode too.
 *     The reference's branch sizes (3, 4, 3) run it as fh_c51_loss_half_kernel, a half-warp per sample
 *     (two samples per warp) with the sizes compiled in; FH_LOSS_HALF=0 keeps the warp per sample.
 * FH_LOSS_KERNEL=general selects fh_bdq_loss_kernel for every configuration.
 */
#include "net_kernels.cuh"
#include "net_device.cuh"
#include "c51.cuh"
#include "loss_math.cuh"

#include <float.h>
#include <stdlib.h>
#include <string.h>
#include <type_traits>

static constexpr int kLossMaxWarps = 4;

/* Branch d's advantage row `row` of view h; branch 0's where d >= nb (the register kernels' loads stay in
 * bounds there and their values are never used). */
template <typename L>
static __device__ __forceinline__ const L* fh_adv_row(const fh_heads_view_t<L>& h, int d, int nb, int64_t row) {
  return d < nb ? h.a[d] + row * h.lda[d] : h.a[0] + row * h.lda[0];
}
/* A row's values at this lane's columns jc (the register kernels' unconditional loads). */
template <int K, typename L>
static __device__ __forceinline__ void fh_load_cols(const L* row, const int (&jc)[K], float (&out)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) out[k] = fh_ldg_f32(row + jc[k]);
}

/* The largest branch's action count of view h. */
template <typename L>
static int fh_max_branch(const fh_heads_view_t<L>& h) {
  int maxn = 0;
  for (int d = 0; d < h.nb; ++d) maxn = h.n[d] > maxn ? h.n[d] : maxn;
  return maxn;
}

/* FH_LOSS_KERNEL=general forces the general (shared-memory, serial projection) kernel everywhere
 * (read at each launch, i.e. when a graph is captured; for comparisons). */
static bool fh_loss_general_forced() { return fh_env_is("FH_LOSS_KERNEL", "general"); }
/* FH_LOSS_FAST=0 keeps the exact (IEEE, fp32-mode) arithmetic of the register kernel in bf16 mode too
 * (read at each launch, like FH_LOSS_KERNEL; for A/B comparisons). */
static bool fh_loss_fast_math_allowed() { return !fh_env_is("FH_LOSS_FAST", "0"); }
/* The bf16-mode C51 kernel for branches of <= 4 actions: by default the half-warp kernel's instance with the
 * reference's branch sizes (3, 4, 3) compiled in where they match, else the warp-per-sample kernel.
 * FH_LOSS_HALF (read at each launch, like FH_LOSS_FAST; for A/B comparisons and tests): =0 the warp kernel
 * everywhere; =exact (or any value not named here) the default; =exact4 / =packed other instances for the
 * reference sizes (4 blocks per SM; the run-time sizes with the slots packed); =generic the run-time-size
 * instance for every shape. */
enum fh_loss_half_pick { FH_HALF_OFF, FH_HALF_EXACT, FH_HALF_EXACT4, FH_HALF_PACKED, FH_HALF_GENERIC };
static fh_loss_half_pick fh_loss_half_choice(bool reference_sizes) {
  const char* e = getenv("FH_LOSS_HALF");
  if (!e || !*e) return reference_sizes ? FH_HALF_EXACT : FH_HALF_OFF;
  if (!strcmp(e, "0")) return FH_HALF_OFF;
  if (!strcmp(e, "generic")) return FH_HALF_GENERIC;
  if (!reference_sizes) return FH_HALF_OFF;
  if (!strcmp(e, "exact4")) return FH_HALF_EXACT4;
  if (!strcmp(e, "packed")) return FH_HALF_PACKED;
  return FH_HALF_EXACT;
}

/* Per warp in dynamic shared memory: the three staged head rows (online(s), online(s'), target(s')),
 * then the mean target distribution m and its projection t (FH_MAX_ATOMS_GPU floats each). */
template <typename L>
__host__ __device__ static inline int fh_loss_warp_floats(const fh_heads_view_t<L>& h) {
  return 3 * fh_row_floats(h) + 2 * FH_MAX_ATOMS_GPU;
}

template <typename T, typename L>
static __global__ void fh_bdq_loss_kernel(fh_heads_view_t<L> on_s, fh_heads_view_t<L> on_sn, fh_heads_view_t<L> tg_sn,
                                          const int32_t* __restrict__ act, const float* __restrict__ ret,
                                          const float* __restrict__ disc, const float* __restrict__ weight, int B,
                                          float huber_delta, float* __restrict__ wloss, float* __restrict__ signal,
                                          fh_heads_grad<T> grad) {
  extern __shared__ float s_loss[];
  const int warps = blockDim.x >> 5;
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * warps + w;
  if (i >= B) return;
  const int nb = on_s.nb, atoms = on_s.atoms;
  const float coef = weight[i] / ((float)B * (float)nb);
  const int rf = fh_row_floats(on_s);
  float* r_s = s_loss + (int64_t)w * fh_loss_warp_floats(on_s);
  float* r_sn = r_s + rf;
  float* r_tg = r_sn + rf;
  float* sm = r_tg + rf;
  float* st = sm + FH_MAX_ATOMS_GPU;
  fh_dev_stage_row(on_sn, i, lane, r_sn);
  fh_dev_stage_row(tg_sn, (int)fh_view_row(tg_sn, i), lane, r_tg);
  fh_dev_stage_row(on_s, i, lane, r_s);

  /* target distribution (or target value) from the double-DQN actions */
  float y = 0.0f;
  for (int k = lane; k < FH_MAX_ATOMS_GPU; k += 32) sm[k] = 0.0f;
  __syncwarp();
  for (int d = 0; d < nb; ++d) {
    const int n = on_s.n[d];
    const float* a_sn = fh_staged_a(on_sn, r_sn, d);
    int astar = 0;
    float bq = -INFINITY;
    for (int a = 0; a < n; ++a) {
      const float q = fh_dev_expected_q_r(r_sn, a_sn, n, atoms, on_s.v_min, on_s.v_max, a, lane);
      if (q > bq) {  /* first max on ties, as fh_argmax */
        bq = q;
        astar = a;
      }
    }
    const float* a_tg = fh_staged_a(tg_sn, r_tg, d);
    if (atoms <= 1) {
      y += fh_dev_expected_q_r(r_tg, a_tg, n, atoms, on_s.v_min, on_s.v_max, astar, lane);
    } else {
      float x[FH_ATOMS_PER_LANE];
      fh_dev_logits_r(r_tg, a_tg, n, atoms, astar, lane, x);
      fh_dev_softmax(atoms, lane, x);
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
        int j = lane + 32 * k;
        if (j < atoms) sm[j] += x[k];
      }
    }
  }
  __syncwarp();
  if (atoms > 1) {
    for (int j = lane; j < atoms; j += 32) sm[j] /= (float)nb;  /* as the CPU: sum over branches, then / nb */
    __syncwarp();
    if (lane == 0) fh_c51_project_one(atoms, on_s.v_min, on_s.v_max, sm, ret[i], disc[i], st);
  } else {
    y = ret[i] + disc[i] * (y / (float)nb);
  }
  __syncwarp();

  /* online(s): loss and gradient per branch */
  float dv[FH_ATOMS_PER_LANE] = {};
  float loss_sum = 0.0f, sig = 0.0f;
  for (int d = 0; d < nb; ++d) {
    const int n = on_s.n[d];
    int ad = act[(int64_t)i * 3 + d];
    ad = ad < 0 ? 0 : (ad >= n ? n - 1 : ad);
    float x[FH_ATOMS_PER_LANE];
    fh_dev_logits_r(r_s, fh_staged_a(on_s, r_s, d), n, atoms, ad, lane, x);
    float g[FH_ATOMS_PER_LANE];
    if (atoms > 1) {
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) mx = fmaxf(mx, x[k]);
      mx = fh_warp_max(mx);
      float se = 0.0f;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k)
        if (lane + 32 * k < atoms) se += expf(x[k] - mx);
      const float lse = mx + logf(fh_warp_sum(se));
      float ce = 0.0f;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
        int j = lane + 32 * k;
        if (j < atoms) {
          float logp = x[k] - lse;
          ce -= st[j] * logp;
          g[k] = coef * (expf(logp) - st[j]);
        } else {
          g[k] = 0.0f;
        }
      }
      ce = fh_warp_sum(ce);
      loss_sum += ce;
      sig += ce;
    } else {
      float q = __shfl_sync(0xffffffffu, x[0], 0);
      float td = y - q;
      float atd = fabsf(td);
      float l = atd <= huber_delta ? 0.5f * td * td : huber_delta * (atd - 0.5f * huber_delta);
      loss_sum += l;
      sig += atd;
      float c = fminf(fmaxf(td, -huber_delta), huber_delta);
      g[0] = lane == 0 ? -coef * c : 0.0f;
      g[1] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) dv[k] += g[k];
    /* dueling backward into this branch's advantage row (all actions), pads zero */
    T* arow = grad.a[d] + (int64_t)i * grad.lda[d];
#pragma unroll
    for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
      int j = lane + 32 * k;
      if (j < atoms) {
        const float mean_g = g[k] / (float)n;  /* as fh_dueling_backward: g(a) - mean_a' g(a') */
        for (int a = 0; a < n; ++a) arow[a * atoms + j] = fh_from_f32<T>((a == ad ? g[k] : 0.0f) - mean_g);
      }
    }
    for (int c = n * atoms + lane; c < grad.lda[d]; c += 32) arow[c] = fh_from_f32<T>(0.0f);
  }
  T* vrow = grad.v + (int64_t)i * grad.ldv;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < atoms) vrow[j] = fh_from_f32<T>(dv[k]);
  }
  for (int c = atoms + lane; c < grad.ldv; c += 32) vrow[c] = fh_from_f32<T>(0.0f);
  if (lane == 0) {
    float li = loss_sum / (float)nb;
    wloss[i] = weight[i] * li;
    signal[i] = sig;
  }
}

/* fh_c51_loss_fast_kernel's softmax parts of NB rows of this lane's two atoms (x is -inf where !ok[k] or
 * d >= nb): mx, on entry this lane's maxima of the rows, becomes the rows' maxima, and s the rows' sums
 * of e = exp(x - mx) (0 where masked), in every lane of the warp. e may be x itself. */
template <int NB>
static __device__ __forceinline__ void fh_exact_softmax_parts(const float (&x)[NB][2], const bool (&ok)[2], int nb,
                                                              float (&e)[NB][2], float (&mx)[NB], float (&s)[NB]) {
  fh_warp_max_n(mx);
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      e[d][k] = ok[k] && d < nb ? expf(x[d][k] - mx[d]) : 0.0f;
      sum += e[d][k];
    }
    s[d] = sum;
  }
  fh_warp_sum_n(s);
}

/* ---- the C51 loss for small branches (every n_d <= MAXN, atoms <= 64): everything in registers ----
 * Same math as fh_bdq_loss_kernel, organised for throughput: each lane loads its two atoms of every
 * head row straight from global memory (all loads issued first), the per-action reductions of the
 * double-DQN argmax run side by side (one butterfly for all actions), and the C51 projection is
 * computed by every lane for its own atoms as out_k = sum_j m_j max(0, 1 - |b_j - k|) over the
 * warp's shared m and b, the same split as fh_c51_project_one (all of m_j to b_j when b_j is an
 * integer, else (u - b) to l and (b - l) to u) with no serial lane. Results agree with the general
 * kernel to float rounding (the sums run in another order). XOR butterflies leave every lane
 * with the same bits, so argmax decisions agree across lanes. */
static constexpr int kFastWarps = 4;

template <typename T, typename L, int MAXN>
static __global__ void __launch_bounds__(kFastWarps * 32)
    fh_c51_loss_fast_kernel(fh_heads_view_t<L> on_s, fh_heads_view_t<L> on_sn, fh_heads_view_t<L> tg_sn,
                            const int32_t* __restrict__ act, const float* __restrict__ ret,
                            const float* __restrict__ disc, const float* __restrict__ weight, int B,
                            float* __restrict__ wloss, float* __restrict__ signal, fh_heads_grad<T> grad) {
  constexpr int NB = FH_MAX_BRANCHES;
  __shared__ float s_m[kFastWarps][FH_MAX_ATOMS_GPU];
  __shared__ float s_b[kFastWarps][FH_MAX_ATOMS_GPU];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * kFastWarps + w;
  if (i >= B) return;
  const int64_t ti = fh_view_row(tg_sn, i);  /* target(s')'s row: the sample's, or its slot's in the cache */
  const int nb = on_s.nb, atoms = on_s.atoms;
  const bool ok[2] = {lane < atoms, lane + 32 < atoms};
  const float vmin = on_s.v_min, vmax = on_s.v_max;

  /* double DQN: Q_online(s', a) of every action (fh_dev_q_all), then the values of target(s') and
   * online(s) for this lane's atoms */
  float qsn[NB * MAXN];
  fh_dev_q_all<MAXN>(on_sn, i, lane, qsn);
  float tv[2], ov[2];
  float ta[NB][MAXN][2], oa[NB][MAXN][2], osel[NB][2] = {};  /* osel: online(s) logits at the taken a_d */
  int ad[NB];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int j = lane + 32 * k;
    tv[k] = ok[k] ? fh_ldg_f32(tg_sn.v + ti * tg_sn.ldv + j) : 0.0f;
    ov[k] = ok[k] ? fh_ldg_f32(on_s.v + (int64_t)i * on_s.ldv + j) : 0.0f;
  }
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const int n = d < nb ? on_s.n[d] : 0;
    ad[d] = fh_taken_action(act, i, d, nb, n);
    const L* pt = d < nb ? tg_sn.a[d] + ti * tg_sn.lda[d] : nullptr;
    const L* po = d < nb ? on_s.a[d] + (int64_t)i * on_s.lda[d] : nullptr;
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const bool in = a < n && ok[k];
        ta[d][a][k] = in ? fh_ldg_f32(pt + a * atoms + lane + 32 * k) : 0.0f;
        oa[d][a][k] = in ? fh_ldg_f32(po + a * atoms + lane + 32 * k) : 0.0f;
        if (a == ad[d]) osel[d][k] = oa[d][a][k];
      }
  }

  /* dueling means over actions (as fh_dueling_combine: sum in action order, then / n) */
  float mt[NB][2], mo[NB][2];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const int n = d < nb ? on_s.n[d] : 1;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float y = 0.0f, z = 0.0f;
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
        if (a < n) {
          y += ta[d][a][k];
          z += oa[d][a][k];
        }
      mt[d][k] = y / (float)n;
      mo[d][k] = z / (float)n;
    }
  }

  /* target: mean over branches of softmax(target logits at a*_d) */
  float xt[NB][2], tm[NB];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const int n = d < nb ? on_s.n[d] : 0;
    /* a*_d and its target logits picked up as the argmax runs (unrolled selects stay in registers;
     * an index into ta would put the array in local memory) */
    float bq = -INFINITY, sel[2] = {0.0f, 0.0f};
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
      if (a < n) {
        const float q = qsn[d * MAXN + a];
        if (q > bq) {  /* first max on ties, as fh_argmax */
          bq = q;
          sel[0] = ta[d][a][0];
          sel[1] = ta[d][a][1];
        }
      }
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      xt[d][k] = ok[k] && d < nb ? tv[k] + sel[k] - mt[d][k] : -INFINITY;
      m = fmaxf(m, xt[d][k]);
    }
    tm[d] = m;
  }
  float ts[NB];
  fh_exact_softmax_parts(xt, ok, nb, xt, tm, ts);
  float mj[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < NB; ++d)
    if (d < nb) {
      const float inv = 1.0f / ts[d];
#pragma unroll
      for (int k = 0; k < 2; ++k) mj[k] += xt[d][k] * inv;
    }

  /* C51 projection of m after ret + disc z, every lane its own atoms */
  const float dz = (vmax - vmin) / (float)(atoms - 1);
  const float r = ret[i], g = disc[i];
  bool nan = false;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int j = lane + 32 * k;
    if (ok[k]) {
      float tz = r + g * (vmin + (float)j * dz);
      nan = nan || tz != tz;
      tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
      float b = (tz - vmin) / dz;
      if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
      if (b < 0.0f) b = 0.0f;
      s_m[w][j] = mj[k] / (float)nb;  /* as the CPU: sum over branches, then / nb */
      s_b[w][j] = b;
    }
  }
  nan = __any_sync(0xffffffffu, nan);
  __syncwarp();
  /* Atom kk receives mass from exactly the j with kk - 1 < b_j < kk + 1. With disc >= 0, b_j is
   * non-decreasing in j (every step of its computation is monotone), so those j form one run, found
   * by binary search; the loop over it adds the same terms in the same (increasing j) order as a
   * loop over every j, so the bits are those of fh_c51_project_one. disc < 0 (never in training) or
   * NaN scans every j. */
  float st[2] = {0.0f, 0.0f};
  const bool runs = g >= 0.0f;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int kk = lane + 32 * k;
    int j0 = 0, j1 = atoms;
    if (runs && ok[k]) {
      int lo = 0, hi = atoms;
      while (lo < hi) {  /* first j with b_j > kk - 1 */
        const int mid = (lo + hi) >> 1;
        if (s_b[w][mid] > (float)(kk - 1)) hi = mid; else lo = mid + 1;
      }
      j0 = lo;
      hi = atoms;
      while (lo < hi) {  /* first j with b_j >= kk + 1 */
        const int mid = (lo + hi) >> 1;
        if (s_b[w][mid] >= (float)(kk + 1)) hi = mid; else lo = mid + 1;
      }
      j1 = lo;
    } else if (!ok[k]) {
      j1 = 0;
    }
    float acc = 0.0f;
    for (int j = j0; j < j1; ++j) {
      const float b = s_b[w][j], m = s_m[w][j];
      const int l = (int)b;
      const int u = (float)l == b ? l : l + 1;
      if (u == l) {
        if (kk == l) acc += m;
      } else if (kk == l) {
        acc += m * ((float)u - b);
      } else if (kk == u) {
        acc += m * (b - (float)l);
      }
    }
    st[k] = acc;
  }
  if (nan) st[0] = st[1] = r + g * vmin + NAN;

  /* online(s): cross-entropy and gradient per branch */
  const float coef = weight[i] / ((float)B * (float)nb);
  float xo[NB][2], om[NB], os[NB], eo[NB][2];  /* eo: unused (logp below takes exp again) */
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      xo[d][k] = ok[k] && d < nb ? ov[k] + osel[d][k] - mo[d][k] : -INFINITY;
      m = fmaxf(m, xo[d][k]);
    }
    om[d] = m;
  }
  fh_exact_softmax_parts(xo, ok, nb, eo, om, os);
  float ce[NB], gk[NB][2];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const float lse = om[d] + logf(os[d]);
    float c = 0.0f;
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      if (ok[k] && d < nb) {
        const float logp = xo[d][k] - lse;
        c -= st[k] * logp;
        gk[d][k] = coef * (expf(logp) - st[k]);
      } else {
        gk[d][k] = 0.0f;
      }
    }
    ce[d] = c;
  }
  fh_warp_sum_n(ce);

  /* gradient rows: dueling backward of every branch, the value row, pads 0 */
  float dv[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    if (d < nb) {
    const int n = on_s.n[d];
    T* arow = grad.a[d] + (int64_t)i * grad.lda[d];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      dv[k] += gk[d][k];
      const int j = lane + 32 * k;
      if (ok[k]) {
        const float mean_g = gk[d][k] / (float)n;
#pragma unroll
        for (int a = 0; a < MAXN; ++a)
          if (a < n) arow[a * atoms + j] = fh_from_f32<T>((a == ad[d] ? gk[d][k] : 0.0f) - mean_g);
      }
    }
    for (int c = n * atoms + lane; c < grad.lda[d]; c += 32) arow[c] = fh_from_f32<T>(0.0f);
    }
  }
  T* vrow = grad.v + (int64_t)i * grad.ldv;
#pragma unroll
  for (int k = 0; k < 2; ++k)
    if (ok[k]) vrow[lane + 32 * k] = fh_from_f32<T>(dv[k]);
  for (int c = atoms + lane; c < grad.ldv; c += 32) vrow[c] = fh_from_f32<T>(0.0f);
  if (lane == 0) {
    float loss_sum = 0.0f;
#pragma unroll
    for (int d = 0; d < NB; ++d)
      if (d < nb) loss_sum += ce[d];
    wloss[i] = weight[i] * (loss_sum / (float)nb);
    signal[i] = loss_sum;
  }
}

/* ---- the same C51 loss with approximate math, for bf16 mode (FH_LOSS_FAST, on by default there) ----
 * bf16 mode compares to the CPU only within bf16 tolerance, so this variant trades IEEE-exact results
 * for instructions: exp as ex2.approx of a pre-scaled FMA, log as lg2.approx, a reciprocal-multiply for
 * every division (rcp.approx; plus one Newton step for the per-sample constants 1/n, 1/nb, dz and 1/dz,
 * whose errors would otherwise move every logit or every b_j), loads without branches (clamped
 * columns), and fewer warp shuffles:
 *   - multi-value warp reductions are all-reduces by halving (fh_warp_allreduce): at each XOR step a
 *     lane keeps half of its values and adds the partner's copy of that half, then the same steps run
 *     backwards swapping the halves, so N values cost about 2 N shuffles instead of 5 N, and every
 *     lane still ends with the same bits (no indexed shuffles: ptxas spent ~40 more registers on
 *     those); expected Q of s' divides A_c by S_c once, at the bottom (fh_warp_ratio_allreduce);
 *   - the online softmax reuses its exponentials for p (p = e / S, not exp(logp)), and the loss needs
 *     one reduction: sum_d CE_d = sum_j t_j (sum_d lse_d - sum_d x_d,j);
 *   - the C51 projection weights are max(0, 1 - |b_j - k|) (the same split as fh_c51_project_one); the
 *     run of j reaching atom k starts at a branchless binary search and ends at the first b_j >= k + 1;
 *     disc == 0 (every b_j equal) takes the closed form (sum_j m_j) max(0, 1 - |b - k|).
 * The clamps of the projection stay (b in [0, atoms - 1]; no atom index is derived from b), and a NaN
 * target (or a non-finite disc) still poisons the whole row. Results agree with the exact kernels to a
 * few float ulps per operation (the argmax can differ only where two expected Qs tie to ~1e-6);
 * deterministic run to run. */

/* All-reduce of N <= 32 values: the reduce-scatter steps, then the same steps backwards exchanging
 * the halves (XOR shuffles), so every lane ends with every total, bit-identical across lanes. */
template <bool MAX, int N, int O = 16>
__device__ __forceinline__ void fh_warp_allreduce(float (&v)[N], int lane) {
  if constexpr (N == 1) {
#pragma unroll
    for (int o = O; o > 0; o >>= 1) {
      const float p = __shfl_xor_sync(0xffffffffu, v[0], o);
      v[0] = MAX ? fmaxf(v[0], p) : v[0] + p;
    }
  } else if constexpr (O == 0) {
    /* more values than lanes (a 16-lane group of fh_c51_loss_half_kernel with > 16 action slots): the
     * N values a lane holds after the last step are totals already */
  } else {
    constexpr int H = (N + 1) / 2;
    const bool up = (lane & O) != 0;
    float h[H];
#pragma unroll
    for (int c = 0; c < H; ++c) {
      const float lo = v[c];
      float hi = MAX ? -INFINITY : 0.0f;
      if (c + H < N) hi = v[c + H];
      const float keep = up ? hi : lo, send = up ? lo : hi;
      const float p = __shfl_xor_sync(0xffffffffu, send, O);
      h[c] = MAX ? fmaxf(keep, p) : keep + p;
    }
    fh_warp_allreduce<MAX, H, O / 2>(h, lane);
#pragma unroll
    for (int c = 0; c < H; ++c) {
      const float p = __shfl_xor_sync(0xffffffffu, h[c], O);
      v[c] = up ? p : h[c];
      if (c + H < N) v[c + H] = up ? h[c] : p;
    }
  }
}

/* q_c = A_c / S_c of the warp totals of S_c and A_c (N <= 32 each), in every lane: the steps of
 * fh_warp_allreduce with the quotient taken once, where a lane is left with one S and its A. */
template <int N, int O = 16>
__device__ __forceinline__ void fh_warp_ratio_allreduce(const float (&S)[N], const float (&A)[N], float (&q)[N],
                                                        int lane) {
  if constexpr (N == 1) {
    float s = S[0], a = A[0];
#pragma unroll
    for (int o = O; o > 0; o >>= 1) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      a += __shfl_xor_sync(0xffffffffu, a, o);
    }
    q[0] = a * fh_rcp_approx(s);
  } else if constexpr (O == 0) {
    /* more pairs than lanes (as in fh_warp_allreduce): the pairs left are totals */
#pragma unroll
    for (int c = 0; c < N; ++c) q[c] = A[c] * fh_rcp_approx(S[c]);
  } else {
    constexpr int H = (N + 1) / 2;
    const bool up = (lane & O) != 0;
    float hs[H], ha[H], hq[H];
#pragma unroll
    for (int c = 0; c < H; ++c) {
      float s_hi = 0.0f, a_hi = 0.0f;
      if (c + H < N) {
        s_hi = S[c + H];
        a_hi = A[c + H];
      }
      hs[c] = (up ? s_hi : S[c]) + __shfl_xor_sync(0xffffffffu, up ? S[c] : s_hi, O);
      ha[c] = (up ? a_hi : A[c]) + __shfl_xor_sync(0xffffffffu, up ? A[c] : a_hi, O);
    }
    fh_warp_ratio_allreduce<H, O / 2>(hs, ha, hq, lane);
#pragma unroll
    for (int c = 0; c < H; ++c) {
      const float p = __shfl_xor_sync(0xffffffffu, hq[c], O);
      q[c] = up ? p : hq[c];
      if (c + H < N) q[c + H] = up ? hq[c] : p;
    }
  }
}

/* The softmax parts of NB rows of this lane's K atoms each: mx = the rows' maxima, e = exp(x - mx)
 * (e may be x itself), s = the rows' sums of e; every lane of the group (the warp, O = 16, or the
 * half-warp, O = 8) ends with the same mx and s. */
template <int NB, int K = 2, int O = 16>
static __device__ __forceinline__ void fh_fm_softmax_parts(const float (&x)[NB][K], float (&e)[NB][K],
                                                           float (&mx)[NB], float (&s)[NB], int lane) {
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    float m = x[d][0];
#pragma unroll
    for (int k = 1; k < K; ++k) m = fmaxf(m, x[d][k]);
    mx[d] = m;
  }
  fh_warp_allreduce<true, NB, O>(mx, lane);
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    const float mL = mx[d] * kLog2e;
#pragma unroll
    for (int k = 0; k < K; ++k) e[d][k] = fh_exp_shifted(x[d][k], mL);
    float sum = e[d][0];
#pragma unroll
    for (int k = 1; k < K; ++k) sum += e[d][k];
    s[d] = sum;
  }
  fh_warp_allreduce<false, NB, O>(s, lane);
}

template <typename T, typename L, int MAXN>
static __global__ void __launch_bounds__(kFastWarps * 32)
    fh_c51_loss_fastmath_kernel(fh_heads_view_t<L> on_s, fh_heads_view_t<L> on_sn, fh_heads_view_t<L> tg_sn,
                                const int32_t* __restrict__ act, const float* __restrict__ ret,
                                const float* __restrict__ disc, const float* __restrict__ weight, int B,
                                float* __restrict__ wloss, float* __restrict__ signal, fh_heads_grad<T> grad) {
  constexpr int NB = FH_MAX_BRANCHES, NA = NB * MAXN;
  static_assert(NA <= 32, "fh_c51_loss_fastmath_kernel: at most 32 action slots");
  __shared__ float s_m[kFastWarps][FH_MAX_ATOMS_GPU];
  __shared__ float s_b[kFastWarps][FH_MAX_ATOMS_GPU];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * kFastWarps + w;
  if (i >= B) return;
  const int64_t ti = fh_view_row(tg_sn, i);  /* target(s')'s row: the sample's, or its slot's in the cache */
  const int nb = on_s.nb, atoms = on_s.atoms;
  const bool ok[2] = {lane < atoms, lane + 32 < atoms};
  /* in-row columns of this lane's atoms: loads are unconditional (values past the end unused) */
  const int jc[2] = {lane < atoms ? lane : atoms - 1, lane + 32 < atoms ? lane + 32 : atoms - 1};
  const float vmin = on_s.v_min, vmax = on_s.v_max;
  const float inv_nb = fh_rcp_refined((float)nb);
  int n[NB], nl[NB];  /* nl: the last action whose row is read (slots past it re-read it, unused) */
  float inv_n[NB];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    n[d] = d < nb ? on_s.n[d] : 0;
    nl[d] = (d < nb ? n[d] : on_s.n[0]) - 1;
    inv_n[d] = fh_rcp_refined(n[d] > 0 ? (float)n[d] : 1.0f);
  }

  /* double DQN: expected Q of every action of online(s'): q_c = A_c / S_c, S_c = sum_j e_j,
   * A_c = sum_j e_j z_j, e_j = exp(x_j - max_j x_j) over this action's atoms (c = d * MAXN + a).
   * Its rows are loaded (all loads first) and used up before those of target(s') and online(s). */
  const float dz = (vmax - vmin) * fh_rcp_refined((float)(atoms - 1));
  float zk[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) zk[k] = vmin + (float)(lane + 32 * k) * dz;
  float q[NA];
  {
    float nv[2], xn[NA][2], mn[NB][2], mx[NA];
#pragma unroll
    for (int k = 0; k < 2; ++k) nv[k] = fh_ldg_f32(on_sn.v + (int64_t)i * on_sn.ldv + jc[k]);
#pragma unroll
    for (int d = 0; d < NB; ++d) {
      const L* p = fh_adv_row(on_sn, d, nb, i);
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
#pragma unroll
        for (int k = 0; k < 2; ++k)
          xn[d * MAXN + a][k] = fh_ldg_f32(p + (a < nl[d] ? a : nl[d]) * atoms + jc[k]);
    }
    /* dueling means over actions (sum in action order, times 1/n) */
#pragma unroll
    for (int d = 0; d < NB; ++d)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        float sum = 0.0f;
#pragma unroll
        for (int a = 0; a < MAXN; ++a)
          if (a < n[d]) sum += xn[d * MAXN + a][k];
        mn[d][k] = sum * inv_n[d];
      }
#pragma unroll
    for (int d = 0; d < NB; ++d)
#pragma unroll
      for (int a = 0; a < MAXN; ++a) {
        const int c = d * MAXN + a;
#pragma unroll
        for (int k = 0; k < 2; ++k) xn[c][k] = ok[k] ? nv[k] + xn[c][k] - mn[d][k] : -INFINITY;
        mx[c] = fmaxf(xn[c][0], xn[c][1]);
      }
    fh_warp_allreduce<true>(mx, lane);
    float S[NA], A[NA];
#pragma unroll
    for (int c = 0; c < NA; ++c) {
      const float mL = mx[c] * kLog2e;
      float sum = 0.0f, acc = 0.0f;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float e = fh_exp_shifted(xn[c][k], mL);  /* 0 for the -inf of atoms past the end */
        sum += e;
        acc = __fmaf_rn(e, zk[k], acc);
      }
      S[c] = sum;
      A[c] = acc;
    }
    fh_warp_ratio_allreduce(S, A, q, lane);
  }

  /* the value and advantage rows of target(s') and online(s) (all loads first), their dueling means */
  float tv[2], ov[2];
  float ta[NB][MAXN][2], oa[NB][MAXN][2], osel[NB][2] = {};
  int ad[NB];
  fh_load_cols(tg_sn.v + ti * tg_sn.ldv, jc, tv);
  fh_load_cols(on_s.v + (int64_t)i * on_s.ldv, jc, ov);
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    ad[d] = fh_taken_action(act, i, d, nb, n[d]);
    const L* pt = fh_adv_row(tg_sn, d, nb, ti);
    const L* po = fh_adv_row(on_s, d, nb, i);
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int c = (a < nl[d] ? a : nl[d]) * atoms + jc[k];
        ta[d][a][k] = fh_ldg_f32(pt + c);
        oa[d][a][k] = fh_ldg_f32(po + c);
        if (a == ad[d]) osel[d][k] = oa[d][a][k];
      }
  }
  float mt[NB][2], mo[NB][2];
#pragma unroll
  for (int d = 0; d < NB; ++d)
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      float y = 0.0f, z = 0.0f;
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
        if (a < n[d]) {
          y += ta[d][a][k];
          z += oa[d][a][k];
        }
      mt[d][k] = y * inv_n[d];
      mo[d][k] = z * inv_n[d];
    }

  /* target: mean over branches of softmax(target logits at a*_d) (first max on ties, as fh_argmax);
   * the chosen row is read again (an L1 hit) rather than kept in registers through the argmax */
  float xt[NB][2], tm[NB];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    float bq = -INFINITY;
    int astar = 0;
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
      if (a < n[d]) {
        const float qa = q[d * MAXN + a];
        if (qa > bq) {
          bq = qa;
          astar = a;
        }
      }
    const L* pt = d < nb ? tg_sn.a[d] + ti * tg_sn.lda[d] + astar * atoms : nullptr;
#pragma unroll
    for (int k = 0; k < 2; ++k)
      xt[d][k] = ok[k] && d < nb ? tv[k] + fh_ldg_f32(pt + jc[k]) - mt[d][k] : -INFINITY;
  }
  float ts[NB];
  fh_fm_softmax_parts<NB>(xt, xt, tm, ts, lane);
  float mj[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < NB; ++d)
    if (d < nb) {
      const float inv = fh_rcp_approx(ts[d]) * inv_nb;  /* the mean over branches folded in */
#pragma unroll
      for (int k = 0; k < 2; ++k) mj[k] = __fmaf_rn(xt[d][k], inv, mj[k]);
    }

  /* C51 projection of m after ret + disc z, every lane its own atoms */
  const float inv_dz = (float)(atoms - 1) * fh_rcp_refined(vmax - vmin);
  const float r = ret[i], g = disc[i];
  bool nan = false;
  float b_own = 0.0f;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int j = lane + 32 * k;
    if (ok[k]) {
      float tz = r + g * zk[k];
      nan = nan || tz != tz;
      tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
      float b = (tz - vmin) * inv_dz;
      if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
      if (b < 0.0f) b = 0.0f;
      s_m[w][j] = mj[k];
      s_b[w][j] = b;
      if (k == 0) b_own = b;
    }
  }
  /* a non-finite disc poisons too (the exact kernels get NaN from inf * 0 only where some z_j is 0) */
  nan = __any_sync(0xffffffffu, nan) || !(fabsf(g) <= FLT_MAX);
  __syncwarp();
  float st[2] = {0.0f, 0.0f};
  if (g == 0.0f) {
    /* every b_j is the same (lane 0's): all of the mass, exactly 1, goes to floor(b) and ceil(b). The target is
     * the return's delta and reads nothing of s' (not even the rounding of sum_j m_j), which the paired batch
     * layout relies on: its s' rows are not the stored s' when an episode ended (replay_gather_pair) */
    const float b = __shfl_sync(0xffffffffu, b_own, 0);
#pragma unroll
    for (int k = 0; k < 2; ++k) st[k] = ok[k] ? fmaxf(0.0f, 1.0f - fabsf(b - (float)(lane + 32 * k))) : 0.0f;
  } else {
    /* atom kk receives m_j max(0, 1 - |b_j - kk|) from each j (fh_c51_project_atom) */
    const bool runs = g >= 0.0f;
#pragma unroll
    for (int k = 0; k < 2; ++k)
      st[k] = ok[k] ? fh_c51_project_atom(s_b[w], s_m[w], atoms, (float)(lane + 32 * k), runs) : 0.0f;
  }
  if (nan) st[0] = st[1] = r + g * vmin + NAN;

  /* online(s): cross-entropy and gradient per branch */
  const float coef = weight[i] * fh_rcp_approx((float)B * (float)nb);
  float xo[NB][2], om[NB];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
#pragma unroll
    for (int k = 0; k < 2; ++k) xo[d][k] = ok[k] && d < nb ? ov[k] + osel[d][k] - mo[d][k] : -INFINITY;
  }
  float eo[NB][2], os[NB];
  fh_fm_softmax_parts<NB>(xo, eo, om, os, lane);
  /* sum_d CE_d = sum_j t_j (sum_d lse_d - sum_d x_d,j) */
  float lse_sum = 0.0f, xsum[2] = {0.0f, 0.0f}, gk[NB][2];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    if (d < nb) {
      lse_sum += om[d] + fh_lg2_approx(os[d]) * kLn2;
      const float inv = fh_rcp_approx(os[d]);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        if (ok[k]) xsum[k] += xo[d][k];
        gk[d][k] = ok[k] ? coef * (eo[d][k] * inv - st[k]) : 0.0f;
      }
    } else {
      gk[d][0] = gk[d][1] = 0.0f;
    }
  }
  float ce = 0.0f;
#pragma unroll
  for (int k = 0; k < 2; ++k)
    if (ok[k]) ce = __fmaf_rn(st[k], lse_sum - xsum[k], ce);
  ce = fh_warp_sum(ce);

  /* gradient rows: dueling backward of every branch, the value row, pads 0 */
  float dv[2] = {0.0f, 0.0f};
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    if (d < nb) {
      T* arow = grad.a[d] + (int64_t)i * grad.lda[d];
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        dv[k] += gk[d][k];
        const int j = lane + 32 * k;
        if (ok[k]) {
          const float mean_g = gk[d][k] * inv_n[d];
#pragma unroll
          for (int a = 0; a < MAXN; ++a)
            if (a < n[d]) arow[a * atoms + j] = fh_from_f32<T>((a == ad[d] ? gk[d][k] : 0.0f) - mean_g);
        }
      }
      for (int c = n[d] * atoms + lane; c < grad.lda[d]; c += 32) arow[c] = fh_from_f32<T>(0.0f);
    }
  }
  T* vrow = grad.v + (int64_t)i * grad.ldv;
#pragma unroll
  for (int k = 0; k < 2; ++k)
    if (ok[k]) vrow[lane + 32 * k] = fh_from_f32<T>(dv[k]);
  for (int c = atoms + lane; c < grad.ldv; c += 32) vrow[c] = fh_from_f32<T>(0.0f);
  if (lane == 0) {
    wloss[i] = weight[i] * (ce * inv_nb);
    signal[i] = ce;
  }
}

/* ---- the approximate-math C51 loss, two samples per warp, for bf16 mode (the reference's branch sizes; FH_LOSS_HALF) ----
 * fh_c51_loss_fastmath_kernel's math with a half-warp (16 lanes) per sample, lane l16 owning atoms
 * l16 + 16 k (k < 4). The elementwise work per sample is the same (64 atom slots either way); what
 * shrinks is the rest:
 *   - every reduction (the all-reduces over the action slots, the softmax maxima and sums, the loss sum)
 *     runs 4 XOR steps instead of 5, with offsets below 16 so the halves never mix, and each shuffle and
 *     each select around it serves two samples; so does the per-sample scalar work (row addresses, act,
 *     the constants 1/n, dz, 1/dz, the argmax, the outputs);
 *   - the action slots are packed to the branch sizes N0 + N1 + N2 (10 for the reference's 3, 4, 3, not
 *     3 x 4 = 12), so no load, exp or shuffle goes to a slot past a branch's end. EXACT kernels know nb
 *     at compile time and that n_d = N_d (n_d itself is kept opaque, as the load predicates: a ptxas
 *     miscompile, see below), which drops the per-branch row selects and the run-time loops over branches;
 *     the others take any n_d <= N_d at run time (slots past n_d load nothing and are never chosen).
 * Registers: the arrays indexed by atom double, all statically indexed; launch bounds keep the exact
 * instance at the warp kernel's 80 registers (6 blocks per SM; ptxas spills 20 bytes) and the others at 128
 * (4 blocks; the generic one without spills, odd as it is, the 3, 4, 3 ones spill more there). Branches of 5..8 actions stay on fh_c51_loss_fastmath_kernel (N_d = 8 spills).
 * The reductions add in another order than the warp kernel's, so results agree with it to float
 * rounding; deterministic run to run. B odd: the second half of the last warp computes sample B - 1 again
 * (its loads stay in bounds and its lanes take part in every full-warp shuffle) and writes nothing. */
static constexpr int kHalfWarps = 4;  /* 8 samples per 128-thread block */
#ifdef FH_LOSS_HALF_DEBUG
__device__ float fh_loss_half_dbg[32 * 64];
#endif

/* FH_HN(bit, d): n_d at one kind of use. With n_d a compile-time constant everywhere, ptxas (CUDA 13.0, sm_90, at -O3
 * and -O1; -O0 is right) miscompiles the compiled-in instances of this kernel: the online(s) rows' taken-action
 * logits come out wrong (bench/gpu/loss_probe.cu finds it, with the first warp's intermediates;
 * -DFH_LOSS_HALF_NO_N_FENCE reproduces it). The workaround: the uses whose bit is in FH_LOSS_HALF_FENCE_MASK read
 * nf[d], a copy of n[d] made opaque to the optimisers, and the others keep the constant. The uses: 0x1 online(s')
 * loads, 0x2 their dueling sums, 0x4 the taken action's clamp, 0x8 target(s') row loads, 0x10 online(s) row loads,
 * 0x20 their sums and the taken action's select, 0x40 the target's argmax, 0x80 the gradient rows, 0x100 1/n_d.
 * The library's mask is 0x4, the taken action's clamp alone: the smallest that compiles right (loss_probe.sh's fm
 * runs on the H200: every other single bit but 0x4 is miscompiled; 0x4 is right on the three probe shapes and runs
 * the reference shape's instance in 41.3 us against 48.5 us with all uses opaque, 0x1ff). */
#if !defined(FH_LOSS_HALF_FENCE_MASK) && !defined(FH_LOSS_HALF_NO_N_FENCE)
#define FH_LOSS_HALF_FENCE_MASK 0x4
#endif
#ifdef FH_LOSS_HALF_FENCE_MASK
#define FH_HN(bit, d) ((FH_LOSS_HALF_FENCE_MASK & (bit)) ? nf[d] : n[d])
#else
#define FH_HN(bit, d) n[d]
#endif

template <typename T, typename L, int N0, int N1, int N2, bool EXACT, int MINB, bool QIN = false>
static __global__ void __launch_bounds__(kHalfWarps * 32, MINB)
    fh_c51_loss_half_kernel(fh_heads_view_t<L> on_s, fh_heads_view_t<L> on_sn, fh_heads_view_t<L> tg_sn,
                            const int32_t* __restrict__ act, const float* __restrict__ ret,
                            const float* __restrict__ disc, const float* __restrict__ weight, int B,
                            float* __restrict__ wloss, float* __restrict__ signal, fh_heads_grad<T> grad,
                            const uint8_t* __restrict__ astar_in) {
  static_assert(FH_MAX_BRANCHES == 3, "fh_c51_loss_half_kernel: one slot count per branch, for three branches");
  constexpr int NB = FH_MAX_BRANCHES;
  constexpr int K = 4, O = 8;               /* atoms per lane; the first XOR step (16-lane groups) */
  constexpr int NS[NB] = {N0, N1, N2};      /* action slots of each branch */
  constexpr int SO[NB] = {0, N0, N0 + N1};  /* each branch's first slot */
  constexpr int NA = N0 + N1 + N2;
  constexpr int MS = N0 > N1 ? (N0 > N2 ? N0 : N2) : (N1 > N2 ? N1 : N2);
  constexpr int NBX = N0 == 0 ? 0 : (N1 == 0 ? 1 : (N2 == 0 ? 2 : 3));  /* EXACT: the branches */
  static_assert(N0 > 0 && (!EXACT || N1 > 0 || N2 == 0), "fh_c51_loss_half_kernel: exact branches are a prefix");
  __shared__ float s_m[2 * kHalfWarps][FH_MAX_ATOMS_GPU];
  __shared__ float s_b[2 * kHalfWarps][FH_MAX_ATOMS_GPU];
  const int lane = threadIdx.x & 31, l16 = lane & 15, hw = threadIdx.x >> 4;  /* hw: the block's half-warp */
  const int i0 = (blockIdx.x * kHalfWarps + (threadIdx.x >> 5)) * 2;
  if (i0 >= B) return;  /* the whole warp: no sample in either half */
  const bool live = i0 + (lane >> 4) < B;
  const int i = live ? i0 + (lane >> 4) : B - 1;
  const int64_t ti = fh_view_row(tg_sn, i);  /* target(s')'s row: the sample's, or its slot's in the cache */
  const int nb = EXACT ? NBX : on_s.nb, atoms = on_s.atoms;
  bool ok[K];
  int jc[K];  /* in-row columns of this lane's atoms: loads are unconditional (values past the end unused) */
#pragma unroll
  for (int k = 0; k < K; ++k) {
    ok[k] = l16 + 16 * k < atoms;
    jc[k] = ok[k] ? l16 + 16 * k : atoms - 1;
  }
  const float vmin = on_s.v_min, vmax = on_s.v_max;
  const float inv_nb = fh_rcp_refined((float)nb);
  int n[NB];  /* <= NS[d]; 0 past nb */
  float inv_n[NB];
#ifdef FH_LOSS_HALF_FENCE_MASK
  int nf[NB];  /* the opaque copy of n the mask's uses read (FH_HN) */
#endif
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    n[d] = EXACT ? NS[d] : (d < nb ? on_s.n[d] : 0);
#ifdef FH_LOSS_HALF_FENCE_MASK
    nf[d] = n[d];
    if constexpr (EXACT) asm volatile("" : "+r"(nf[d]));
#endif
    inv_n[d] = fh_rcp_refined(FH_HN(0x100, d) > 0 ? (float)FH_HN(0x100, d) : 1.0f);
  }

  /* double DQN: expected Q of every action slot of online(s') (c = SO[d] + a), q_c = A_c / S_c as in
   * fh_c51_loss_fastmath_kernel; its rows are loaded (all loads first) and used up before the others */
  const float dz = (vmax - vmin) * fh_rcp_refined((float)(atoms - 1));
  float zk[K];
#pragma unroll
  for (int k = 0; k < K; ++k) zk[k] = vmin + (float)(l16 + 16 * k) * dz;
  float q[NA];
  if constexpr (!QIN) {
    float nv[K], xn[NA][K], mn[NB][K], mx[NA];
#pragma unroll
    for (int k = 0; k < K; ++k) nv[k] = fh_ldg_f32(on_sn.v + (int64_t)i * on_sn.ldv + jc[k]);
#pragma unroll
    for (int d = 0; d < NB; ++d) {
      const L* p = fh_adv_row(on_sn, d, nb, i);
#pragma unroll
      for (int a = 0; a < MS; ++a)
        if (a < NS[d]) {
#pragma unroll
          for (int k = 0; k < K; ++k) xn[SO[d] + a][k] = a < FH_HN(0x1, d) ? fh_ldg_f32(p + a * atoms + jc[k]) : 0.0f;
        }
    }
    /* dueling means over actions (sum in action order, times 1/n) */
#pragma unroll
    for (int d = 0; d < NB; ++d)
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float sum = 0.0f;
#pragma unroll
        for (int a = 0; a < MS; ++a)
          if (a < NS[d] && a < FH_HN(0x2, d)) sum += xn[SO[d] + a][k];
        mn[d][k] = sum * inv_n[d];
      }
#pragma unroll
    for (int d = 0; d < NB; ++d)
#pragma unroll
      for (int a = 0; a < MS; ++a)
        if (a < NS[d]) {
          const int c = SO[d] + a;
          float m = -INFINITY;
#pragma unroll
          for (int k = 0; k < K; ++k) {
            xn[c][k] = ok[k] ? nv[k] + xn[c][k] - mn[d][k] : -INFINITY;
            m = fmaxf(m, xn[c][k]);
          }
          mx[c] = m;
        }
    fh_warp_allreduce<true, NA, O>(mx, lane);
    float S[NA], A[NA];
#pragma unroll
    for (int c = 0; c < NA; ++c) {
      const float mL = mx[c] * kLog2e;
      float sum = 0.0f, acc = 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const float e = fh_exp_shifted(xn[c][k], mL);  /* 0 for the -inf of atoms past the end */
        sum += e;
        acc = __fmaf_rn(e, zk[k], acc);
      }
      S[c] = sum;
      A[c] = acc;
    }
    fh_warp_ratio_allreduce<NA, O>(S, A, q, lane);
  }

  /* the value and advantage rows of target(s') and online(s), their dueling means; of online(s) only
   * the taken action's row is kept (osel), of target(s') nothing (the chosen row is read again below) */
  float tv[K], ov[K], mt[NB][K], mo[NB][K], osel[NB][K];
  int ad[NB];
  fh_load_cols(tg_sn.v + ti * tg_sn.ldv, jc, tv);
  fh_load_cols(on_s.v + (int64_t)i * on_s.ldv, jc, ov);
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    ad[d] = fh_taken_action(act, i, d, nb, FH_HN(0x4, d));
    const L* pt = fh_adv_row(tg_sn, d, nb, ti);
    const L* po = fh_adv_row(on_s, d, nb, i);
    float ta[MS][K], oa[MS][K];
#pragma unroll
    for (int a = 0; a < MS; ++a)
      if (a < NS[d]) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          ta[a][k] = a < FH_HN(0x8, d) ? fh_ldg_f32(pt + a * atoms + jc[k]) : 0.0f;
          oa[a][k] = a < FH_HN(0x10, d) ? fh_ldg_f32(po + a * atoms + jc[k]) : 0.0f;
        }
      }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float y = 0.0f, z = 0.0f, o = 0.0f;
#pragma unroll
      for (int a = 0; a < MS; ++a)
        if (a < NS[d] && a < FH_HN(0x20, d)) {
          y += ta[a][k];
          z += oa[a][k];
          if (a == ad[d]) o = oa[a][k];
        }
      mt[d][k] = y * inv_n[d];
      mo[d][k] = z * inv_n[d];
      osel[d][k] = o;
    }
  }

  /* target: mean over branches of softmax(target logits at a*_d) (first max on ties, as fh_argmax);
   * the chosen row is read again (an L1 hit) rather than kept in registers through the argmax */
  float xt[NB][K], tm[NB];
  const uint32_t aq = QIN ? (uint32_t)astar_in[i] : 0u;  /* QIN: a*_d in bits 2 d .. 2 d + 1 */
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    float bq = -INFINITY;
    int astar = 0;
    if constexpr (QIN) {
      astar = (int)((aq >> (2 * d)) & 3u);
      (void)bq;
    } else {
#pragma unroll
      for (int a = 0; a < MS; ++a)
        if (a < NS[d] && a < FH_HN(0x40, d)) {
          const float qa = q[SO[d] + a];
          if (qa > bq) {
            bq = qa;
            astar = a;
          }
        }
    }
    const L* pt = d < nb ? tg_sn.a[d] + ti * tg_sn.lda[d] + astar * atoms : nullptr;
#pragma unroll
    for (int k = 0; k < K; ++k)
      xt[d][k] = ok[k] && d < nb ? tv[k] + fh_ldg_f32(pt + jc[k]) - mt[d][k] : -INFINITY;
  }
  float ts[NB];
  fh_fm_softmax_parts<NB, K, O>(xt, xt, tm, ts, lane);
  float mj[K] = {};
#pragma unroll
  for (int d = 0; d < NB; ++d)
    if (d < nb) {
      const float inv = fh_rcp_approx(ts[d]) * inv_nb;  /* the mean over branches folded in */
#pragma unroll
      for (int k = 0; k < K; ++k) mj[k] = __fmaf_rn(xt[d][k], inv, mj[k]);
    }

  /* C51 projection of m after ret + disc z, every lane its own atoms (the half-warp's m and b in shared
   * memory) */
  const float inv_dz = (float)(atoms - 1) * fh_rcp_refined(vmax - vmin);
  const float r = ret[i], g = disc[i];
  float* const sm = s_m[hw];
  float* const sb = s_b[hw];
  bool nan = false;
  float b_own = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int j = l16 + 16 * k;
    if (ok[k]) {
      float tz = r + g * zk[k];
      nan = nan || tz != tz;
      tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
      float b = (tz - vmin) * inv_dz;
      if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
      if (b < 0.0f) b = 0.0f;
      sm[j] = mj[k];
      sb[j] = b;
      if (k == 0) b_own = b;
    }
  }
  /* the half's lanes only (a ballot of the whole warp, masked: both halves take part); a non-finite
   * disc poisons too, as in fh_c51_loss_fastmath_kernel */
  nan = (__ballot_sync(0xffffffffu, nan) & (0xffffu << (lane & 16))) != 0u || !(fabsf(g) <= FLT_MAX);
  __syncwarp();
  float st[K] = {};
  if (g == 0.0f) {
    /* every b_j is the same, r's (g z_j is a zero for every finite z_j), so this lane's own b_0 serves
     * (a lane without atoms has none and needs none): all of the mass, exactly 1, goes to floor(b) and
     * ceil(b), and nothing of s' is read (the paired batch layout relies on it, see the warp kernel).
     * Taken per half: the halves may branch apart here (no shuffle inside). */
#pragma unroll
    for (int k = 0; k < K; ++k) st[k] = ok[k] ? fmaxf(0.0f, 1.0f - fabsf(b_own - (float)(l16 + 16 * k))) : 0.0f;
  } else {
    /* as fh_c51_loss_fastmath_kernel (fh_c51_project_atom) */
    const bool runs = g >= 0.0f;
#pragma unroll
    for (int k = 0; k < K; ++k) st[k] = ok[k] ? fh_c51_project_atom(sb, sm, atoms, (float)(l16 + 16 * k), runs) : 0.0f;
  }
  if (nan) {
#pragma unroll
    for (int k = 0; k < K; ++k) st[k] = r + g * vmin + NAN;
  }

  /* online(s): cross-entropy and gradient per branch; sum_d CE_d = sum_j t_j (sum_d lse_d - sum_d x_d,j) */
  const float coef = weight[i] * fh_rcp_approx((float)B * (float)nb);
  float xo[NB][K], eo[NB][K], om[NB], os[NB];
#pragma unroll
  for (int d = 0; d < NB; ++d)
#pragma unroll
    for (int k = 0; k < K; ++k) xo[d][k] = ok[k] && d < nb ? ov[k] + osel[d][k] - mo[d][k] : -INFINITY;
  fh_fm_softmax_parts<NB, K, O>(xo, eo, om, os, lane);
  float lse_sum = 0.0f, xsum[K] = {}, gk[NB][K];
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    if (d < nb) {
      lse_sum += om[d] + fh_lg2_approx(os[d]) * kLn2;
      const float inv = fh_rcp_approx(os[d]);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        if (ok[k]) xsum[k] += xo[d][k];
        gk[d][k] = ok[k] ? coef * (eo[d][k] * inv - st[k]) : 0.0f;
      }
    } else {
#pragma unroll
      for (int k = 0; k < K; ++k) gk[d][k] = 0.0f;
    }
  }
  float ce[1] = {0.0f};
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (ok[k]) ce[0] = __fmaf_rn(st[k], lse_sum - xsum[k], ce[0]);
  fh_warp_allreduce<false, 1, O>(ce, lane);
#ifdef FH_LOSS_HALF_DEBUG /* bench/gpu/loss_probe.cu: the first warp's intermediates, 64 slots a lane */
  if (blockIdx.x == 0 && threadIdx.x < 32) {
    float* o = fh_loss_half_dbg + lane * 64;
    for (int c = 0; c < NA; ++c) o[c] = q[c];
    for (int d = 0; d < NB; ++d) {
      o[10 + d] = tm[d];
      o[13 + d] = ts[d];
      o[24 + d] = om[d];
      o[27 + d] = os[d];
      o[36 + d] = mo[d][0];
      o[39 + d] = osel[d][0];
      o[42 + d] = mt[d][0];
      o[45 + d] = (float)ad[d];
      o[53 + d] = (float)n[d];
    }
    for (int k = 0; k < K; ++k) {
      o[16 + k] = mj[k];
      o[20 + k] = st[k];
      o[31 + k] = xsum[k];
      o[49 + k] = xo[0][k];
      o[57 + k] = ov[k];
    }
    o[30] = lse_sum;
    o[35] = ce[0];
    o[48] = b_own;
    o[56] = (float)nb;
    o[61] = tv[0];
    o[62] = inv_n[1];
    o[63] = coef;
  }
#endif

  /* gradient rows: dueling backward of every branch, the value row, pads 0 (a half without a sample
   * writes nothing) */
  if (!live) return;
  float dv[K] = {};
#pragma unroll
  for (int d = 0; d < NB; ++d) {
    if (d < nb) {
      T* arow = grad.a[d] + (int64_t)i * grad.lda[d];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        dv[k] += gk[d][k];
        const int j = l16 + 16 * k;
        if (ok[k]) {
          const float mean_g = gk[d][k] * inv_n[d];
#pragma unroll
          for (int a = 0; a < MS; ++a)
            if (a < NS[d] && a < FH_HN(0x80, d)) arow[a * atoms + j] = fh_from_f32<T>((a == ad[d] ? gk[d][k] : 0.0f) - mean_g);
        }
      }
      for (int c = FH_HN(0x80, d) * atoms + l16; c < grad.lda[d]; c += 16) arow[c] = fh_from_f32<T>(0.0f);
    }
  }
  T* vrow = grad.v + (int64_t)i * grad.ldv;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (ok[k]) vrow[l16 + 16 * k] = fh_from_f32<T>(dv[k]);
  for (int c = atoms + l16; c < grad.ldv; c += 16) vrow[c] = fh_from_f32<T>(0.0f);
  if (l16 == 0) {
    wloss[i] = weight[i] * (ce[0] * inv_nb);
    signal[i] = ce[0];
  }
}

#undef FH_HN

template <typename T, typename L>
fh_status fh_launch_bdq_loss(const fh_heads_view_t<L>& on_s, const fh_heads_view_t<L>& on_sn, const fh_heads_view_t<L>& tg_sn,
                             const int32_t* act, const float* ret, const float* disc, const float* weight, int B,
                             float huber_delta, float* wloss, float* signal, fh_heads_grad<T> grad, cudaStream_t s) {
  if (B <= 0) return FH_OK;
  const int maxn = fh_max_branch(on_s);
  if (on_s.atoms > 1 && on_s.atoms <= FH_MAX_ATOMS_GPU && on_s.nb <= FH_MAX_BRANCHES && maxn <= 8 &&
      !fh_loss_general_forced()) {
    const unsigned blocks = (unsigned)CEIL_DIV(B, kFastWarps);
    /* bf16 mode (bf16 GEMM operands): approximate math; fp32 mode: the exact kernel, always */
    if constexpr (std::is_same<T, fh_bf16>::value) {
      if (fh_loss_fast_math_allowed()) {
        const bool ref = on_s.nb == 3 && on_s.n[0] == 3 && on_s.n[1] == 4 && on_s.n[2] == 3;
        const fh_loss_half_pick pick = maxn <= 4 ? fh_loss_half_choice(ref) : FH_HALF_OFF;
        if (pick != FH_HALF_OFF) {
          const unsigned hblocks = (unsigned)CEIL_DIV(B, 2 * kHalfWarps);
          if (pick == FH_HALF_EXACT)
            fh_c51_loss_half_kernel<T, L, 3, 4, 3, true, 6><<<hblocks, kHalfWarps * 32, 0, s>>>(
                on_s, on_sn, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, nullptr);
          else if (pick == FH_HALF_EXACT4)
            fh_c51_loss_half_kernel<T, L, 3, 4, 3, true, 4><<<hblocks, kHalfWarps * 32, 0, s>>>(
                on_s, on_sn, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, nullptr);
          else if (pick == FH_HALF_PACKED)
            fh_c51_loss_half_kernel<T, L, 3, 4, 3, false, 4><<<hblocks, kHalfWarps * 32, 0, s>>>(
                on_s, on_sn, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, nullptr);
          else
            fh_c51_loss_half_kernel<T, L, 4, 4, 4, false, 4><<<hblocks, kHalfWarps * 32, 0, s>>>(
                on_s, on_sn, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, nullptr);
        } else if (maxn <= 4)
          fh_c51_loss_fastmath_kernel<T, L, 4><<<blocks, kFastWarps * 32, 0, s>>>(on_s, on_sn, tg_sn, act, ret, disc,
                                                                               weight, B, wloss, signal, grad);
        else
          fh_c51_loss_fastmath_kernel<T, L, 8><<<blocks, kFastWarps * 32, 0, s>>>(on_s, on_sn, tg_sn, act, ret, disc,
                                                                               weight, B, wloss, signal, grad);
        FH_LAUNCH_CHECK();
        return FH_OK;
      }
    }
    if (maxn <= 4)
      fh_c51_loss_fast_kernel<T, L, 4><<<blocks, kFastWarps * 32, 0, s>>>(on_s, on_sn, tg_sn, act, ret, disc, weight, B,
                                                                       wloss, signal, grad);
    else
      fh_c51_loss_fast_kernel<T, L, 8><<<blocks, kFastWarps * 32, 0, s>>>(on_s, on_sn, tg_sn, act, ret, disc, weight, B,
                                                                       wloss, signal, grad);
    FH_LAUNCH_CHECK();
    return FH_OK;
  }
  const size_t per_warp = (size_t)fh_loss_warp_floats(on_s) * sizeof(float);
  int warps = kLossMaxWarps;
  while (warps > 1 && per_warp * warps > 48 * 1024) --warps;
  if (per_warp > 48 * 1024) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_bdq_loss", "head outputs too wide for shared memory");
    return FH_ERR_INVALID_CONFIG;
  }
  fh_bdq_loss_kernel<T, L><<<CEIL_DIV(B, warps), warps * 32, per_warp * warps, s>>>(
      on_s, on_sn, tg_sn, act, ret, disc, weight, B, huber_delta, wloss, signal, grad);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

fh_status fh_launch_bdq_loss_astar(const fh_heads_view_t<fh_bf16>& on_s, const fh_heads_view_t<fh_bf16>& tg_sn,
                                   const uint8_t* astar, const int32_t* act, const float* ret, const float* disc,
                                   const float* weight, int B, float* wloss, float* signal,
                                   fh_heads_grad<fh_bf16> grad, cudaStream_t s) {
  if (B <= 0) return FH_OK;
  const int maxn = fh_max_branch(on_s);
  if (!astar || on_s.atoms < 2 || on_s.atoms > FH_MAX_ATOMS_GPU || on_s.nb < 1 || on_s.nb > FH_MAX_BRANCHES ||
      maxn > 4) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_bdq_loss_astar",
                      "a given a*_d needs C51 (2..64 atoms) and at most 3 branches of at most 4 actions");
    return FH_ERR_INVALID_ARGUMENT;
  }
  /* the reference's sizes compiled in (FH_LOSS_HALF=generic: the run-time-size instance, as fh_launch_bdq_loss) */
  const bool ref = on_s.nb == 3 && on_s.n[0] == 3 && on_s.n[1] == 4 && on_s.n[2] == 3;
  const unsigned hblocks = (unsigned)CEIL_DIV(B, 2 * kHalfWarps);
  if (ref && !fh_env_is("FH_LOSS_HALF", "generic"))
    fh_c51_loss_half_kernel<fh_bf16, fh_bf16, 3, 4, 3, true, 6, true><<<hblocks, kHalfWarps * 32, 0, s>>>(
        on_s, on_s, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, astar);
  else
    fh_c51_loss_half_kernel<fh_bf16, fh_bf16, 4, 4, 4, false, 4, true><<<hblocks, kHalfWarps * 32, 0, s>>>(
        on_s, on_s, tg_sn, act, ret, disc, weight, B, wloss, signal, grad, astar);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

#define FH_LOSS_INST(T, L)                                                                                      \
  template fh_status fh_launch_bdq_loss<T, L>(const fh_heads_view_t<L>&, const fh_heads_view_t<L>&,                 \
                                              const fh_heads_view_t<L>&, const int32_t*, const float*, const float*, \
                                              const float*, int, float, float*, float*, fh_heads_grad<T>, cudaStream_t);
FH_LOSS_INST(float, float)
FH_LOSS_INST(float, fh_bf16)  /* referenced by the fp32 mode's dispatch (which never takes it) */
FH_LOSS_INST(fh_bf16, float)
FH_LOSS_INST(fh_bf16, fh_bf16)
