/*
 * loss_tile.cu — the bf16 mode's C51 loss of loss.cu (its approximate-math register kernel: the same
 * math, the same approximations, the same operation order inside each sum) as a block kernel that wastes
 * fewer instructions.
 *
 * The register kernel gives each sample a warp, a lane two atoms: 2-byte loads with 64-bit address
 * arithmetic for every value, 13 of 64 atom slots idle, two padding action slots per sample, and warp
 * all-reduces for every softmax. Under ncu it issued ~2 400 warp instructions per sample, most of them
 * address arithmetic, selects and shuffles (bench/RESULTS.md). Here a block of 288 threads takes 8
 * samples:
 *
 *   P0  all threads copy the 8 samples' three row sets (online(s'), target(s'), online(s); every head,
 *       padded rows, 16-byte loads) into shared memory, and the per-sample scalars.
 *   Then three groups of 96 threads, one per row set, each 24 quads = (sample, branch); a quad's thread q
 *   holds atoms q, q + 4, ... and reduces over its quad with two XOR shuffles (every lane ends with the
 *   same bits, so the argmax is the quad's):
 *   P1  online(s'): dueling logits of every action (kept in registers), max, exp, sums -> expected Q ->
 *       a*_d (first max). target(s'): the dueling means. online(s): logits of the taken action, its
 *       softmax parts (kept in registers until P4).
 *   P2  target(s'): softmax of the logits at a*_d.
 *   P3  every (sample, atom): m_j (the branch mean of the target distributions) and b_j; then every
 *       (sample, atom k): the C51 projection t_k (the register kernel's run search, its closed form for
 *       disc == 0, its NaN poisoning).
 *   P4  online(s): g = coef (p - t) and the cross-entropy.
 *   P5  all threads write the gradient rows (16-byte stores; the dueling backward, pads 0) and the loss.
 *
 * Sums over atoms run per quad thread in atom order, then over the quad; the register kernel sums per
 * lane, then by halving. So the two agree to float rounding, not bit for bit; the argmax can differ only
 * where two expected Qs tie to ~1e-6. Deterministic run to run.
 */
#include "loss_tile.cuh"

#include "fastmath.cuh"
#include "net_device.cuh"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#define LT_SPB 8                                  /* samples per block */
#define LT_GROUP (LT_SPB * FH_MAX_BRANCHES * 4)   /* threads per row set: a quad per (sample, branch) */
#define LT_THREADS (3 * LT_GROUP)
#define LT_ATOMS FH_MAX_ATOMS_GPU                 /* 64 */
#define LT_R (LT_ATOMS / 4)                       /* atoms per quad thread */
#define LT_MAXN 4                                 /* actions per branch */
#define LT_HEADS (FH_MAX_BRANCHES + 1)

static_assert(LT_GROUP == 96 && LT_THREADS % 32 == 0, "loss_tile: a group is whole warps of whole quads");

/* The row layout of one sample's head outputs, the same in the three views and the gradient. */
struct lt_shape {
  int nb, atoms, nh;         /* branches, atoms, heads (nb + 1) */
  int n[FH_MAX_BRANCHES];    /* branch sizes */
  int ld[LT_HEADS];          /* row width of head k (elements, a multiple of 8) */
  int off[LT_HEADS];         /* offset of head k in a staged row set */
  int vcum[LT_HEADS + 1];    /* 8-element vectors before head k (vcum[nh]: a row set's) */
  int rs;                    /* staged row-set width (elements) */
  unsigned div_mag;          /* e / atoms == (e * div_mag) >> 20 for e < 2^14 */
};

__device__ __forceinline__ const fh_bf16* lt_head(const fh_heads_view_t<fh_bf16>& h, int k) {
  return k == 0 ? h.v : (k == 1 ? h.a[0] : (k == 2 ? h.a[1] : h.a[2]));
}
__device__ __forceinline__ fh_bf16* lt_grad_head(const fh_heads_grad<fh_bf16>& g, int k) {
  return k == 0 ? g.v : (k == 1 ? g.a[0] : (k == 2 ? g.a[1] : g.a[2]));
}
__device__ __forceinline__ int lt_head_of(const lt_shape& sh, int v) {
  int k = 0;
  while (k + 1 < sh.nh && v >= sh.vcum[k + 1]) ++k;
  return k;
}
__device__ __forceinline__ float lt_ld(const fh_bf16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float lt_quad_max(float x, unsigned m) {
  x = fmaxf(x, __shfl_xor_sync(m, x, 1));
  return fmaxf(x, __shfl_xor_sync(m, x, 2));
}
__device__ __forceinline__ float lt_quad_sum(float x, unsigned m) {
  x += __shfl_xor_sync(m, x, 1);
  return x + __shfl_xor_sync(m, x, 2);
}

static __global__ void __launch_bounds__(LT_THREADS, 2)
    fh_c51_loss_tile_kernel(fh_heads_view_t<fh_bf16> on_s, fh_heads_view_t<fh_bf16> on_sn,
                            fh_heads_view_t<fh_bf16> tg_sn, lt_shape sh, const int32_t* __restrict__ act,
                            const float* __restrict__ ret, const float* __restrict__ disc,
                            const float* __restrict__ weight, int B, float* __restrict__ wloss,
                            float* __restrict__ signal, fh_heads_grad<fh_bf16> grad) {
  constexpr int NB = FH_MAX_BRANCHES;
  extern __shared__ __align__(16) unsigned char lt_dyn[];
  fh_bf16* raw = reinterpret_cast<fh_bf16*>(lt_dyn);  /* [LT_SPB][3 row sets][rs] */
  __shared__ float s_pe[LT_SPB][NB][LT_ATOMS];        /* P2: target exp; P4: the gradient g */
  __shared__ float s_m[LT_SPB][LT_ATOMS], s_b[LT_SPB][LT_ATOMS], s_t[LT_SPB][LT_ATOMS];
  __shared__ float s_pinv[LT_SPB][NB], s_ce[LT_SPB][NB];
  __shared__ float s_r[LT_SPB], s_g[LT_SPB], s_coef[LT_SPB];
  __shared__ int s_astar[LT_SPB][NB], s_ad[LT_SPB][NB], s_nan[LT_SPB];

  const int tid = threadIdx.x;
  const int i0 = blockIdx.x * LT_SPB;
  const int atoms = sh.atoms, nb = sh.nb, rs = sh.rs;
  const float vmin = on_s.v_min, vmax = on_s.v_max;
  const float inv_nb = fh_rcp_refined((float)nb);
  const float dz = (vmax - vmin) * fh_rcp_refined((float)(atoms - 1));

  /* P0: the scalars of the block's samples, and their three row sets */
  if (tid < LT_SPB) {
    const int i = i0 + tid;
    float r = 0.0f, g = 0.0f, c = 0.0f;
    int bad = 0;
    if (i < B) {
      r = ret[i];
      g = disc[i];
      c = weight[i] * fh_rcp_approx((float)B * (float)nb);
      bad = !(fabsf(g) <= FLT_MAX); /* a non-finite disc poisons the row, as in the register kernel */
    }
    s_r[tid] = r;
    s_g[tid] = g;
    s_coef[tid] = c;
    s_nan[tid] = bad;
#pragma unroll
    for (int d = 0; d < NB; ++d) {
      const int a0 = (i < B && d < nb) ? act[(int64_t)i * 3 + d] : 0;
      s_ad[tid][d] = a0 < 0 ? 0 : (d < nb && a0 >= sh.n[d] ? sh.n[d] - 1 : a0);
    }
  }
  {
    const int rv = sh.vcum[sh.nh], per_s = 3 * rv;
    for (int idx = tid; idx < LT_SPB * per_s; idx += LT_THREADS) {
      const int s = idx / per_s, rem = idx - s * per_s;
      const int set = rem / rv, v = rem - set * rv;
      const int i = i0 + s;
      if (i >= B) continue;
      const int k = lt_head_of(sh, v);
      const int e = (v - sh.vcum[k]) * 8;
      const fh_bf16* base;
      int64_t row = i;
      if (set == 0) {
        base = lt_head(on_sn, k);
      } else if (set == 1) {
        base = lt_head(tg_sn, k);
        row = fh_view_row(tg_sn, i);
      } else {
        base = lt_head(on_s, k);
      }
      const uint4 val = __ldg(reinterpret_cast<const uint4*>(base + row * sh.ld[k] + e));
      *reinterpret_cast<uint4*>(raw + (s * 3 + set) * rs + sh.off[k] + e) = val;
    }
  }
  __syncthreads();

  /* the quad of this thread: group grp (its row set), sample qs, branch qd; atoms q, q + 4, ... */
  const int grp = tid / LT_GROUP, quad = (tid - grp * LT_GROUP) >> 2, q = tid & 3;
  const int qs = quad / NB, qd = quad - qs * NB;
  const unsigned qmask = 0xFu << (tid & 28);
  const bool qon = qd < nb && i0 + qs < B;
  const int nd = qd < nb ? sh.n[qd] : 1;
  const float inv_n = fh_rcp_refined((float)nd);
  const fh_bf16* vrow = raw + (qs * 3 + grp) * rs;   /* head 0 (the value) of this quad's row set */
  const fh_bf16* arow = vrow + sh.off[qd + 1];      /* branch qd's actions, action-major */
  float x1[LT_R], e1[LT_R];                          /* G1: the target's means, then its logits; G2: online(s) */
  float lse = 0.0f, oinv = 0.0f;

  /* P1 */
  if (grp == 0 && qon) {
    /* expected Q of every action of branch qd of online(s'), a*: the first maximum */
    float x[LT_MAXN][LT_R], mx[LT_MAXN];
#pragma unroll
    for (int a = 0; a < LT_MAXN; ++a) mx[a] = -INFINITY;
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      if (j < atoms) {
        const float v = lt_ld(vrow + j);
        float A[LT_MAXN], sum = 0.0f;
#pragma unroll
        for (int a = 0; a < LT_MAXN; ++a)
          if (a < nd) {
            A[a] = lt_ld(arow + a * atoms + j);
            sum += A[a];
          }
        const float mean = sum * inv_n;
#pragma unroll
        for (int a = 0; a < LT_MAXN; ++a)
          if (a < nd) {
            x[a][r] = v + A[a] - mean;
            mx[a] = fmaxf(mx[a], x[a][r]);
          }
      }
    }
    float S[LT_MAXN], Ac[LT_MAXN];
#pragma unroll
    for (int a = 0; a < LT_MAXN; ++a) {
      mx[a] = lt_quad_max(mx[a], qmask) * kLog2e;
      S[a] = 0.0f;
      Ac[a] = 0.0f;
    }
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      if (j < atoms) {
        const float z = vmin + (float)j * dz;
#pragma unroll
        for (int a = 0; a < LT_MAXN; ++a)
          if (a < nd) {
            const float e = fh_exp_shifted(x[a][r], mx[a]);
            S[a] += e;
            Ac[a] = __fmaf_rn(e, z, Ac[a]);
          }
      }
    }
    float best = -INFINITY;
    int astar = 0;
#pragma unroll
    for (int a = 0; a < LT_MAXN; ++a)
      if (a < nd) {
        const float qa = lt_quad_sum(Ac[a], qmask) * fh_rcp_approx(lt_quad_sum(S[a], qmask));
        if (qa > best) {
          best = qa;
          astar = a;
        }
      }
    if (q == 0) s_astar[qs][qd] = astar;
  } else if (grp >= 1 && qon) {
    /* target(s'): the dueling means of branch qd; online(s): the logits of the taken action, softmax parts */
    const int ad = s_ad[qs][qd];
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      x1[r] = -INFINITY;
      if (j < atoms) {
        float sum = 0.0f, sel = 0.0f;
#pragma unroll
        for (int a = 0; a < LT_MAXN; ++a)
          if (a < nd) {
            const float A = lt_ld(arow + a * atoms + j);
            sum += A;
            if (a == ad) sel = A;
          }
        const float mean = sum * inv_n;
        if (grp == 1) {
          x1[r] = mean;
        } else {
          x1[r] = lt_ld(vrow + j) + sel - mean;
          mx = fmaxf(mx, x1[r]);
        }
      }
    }
    if (grp == 2) {
      mx = lt_quad_max(mx, qmask);
      const float mL = mx * kLog2e;
      float sum = 0.0f;
#pragma unroll
      for (int r = 0; r < LT_R; ++r) {
        e1[r] = 0.0f;
        if (q + 4 * r < atoms) {
          e1[r] = fh_exp_shifted(x1[r], mL);
          sum += e1[r];
        }
      }
      sum = lt_quad_sum(sum, qmask);
      lse = mx + fh_lg2_approx(sum) * kLn2;
      oinv = fh_rcp_approx(sum);
    }
  }
  __syncthreads();

  /* P2: target(s') at a*: softmax parts; exp and 1 / (sum * nb) to shared memory */
  if (grp == 1 && qon) {
    const int as = s_astar[qs][qd];
    float mx = -INFINITY;
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      if (j < atoms) {
        x1[r] = lt_ld(vrow + j) + lt_ld(arow + as * atoms + j) - x1[r];
        mx = fmaxf(mx, x1[r]);
      }
    }
    const float mL = lt_quad_max(mx, qmask) * kLog2e;
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      if (j < atoms) {
        const float e = fh_exp_shifted(x1[r], mL);
        sum += e;
        s_pe[qs][qd][j] = e;
      }
    }
    sum = lt_quad_sum(sum, qmask);
    if (q == 0) s_pinv[qs][qd] = fh_rcp_approx(sum) * inv_nb;  /* the mean over branches folded in */
  }
  __syncthreads();

  /* P3: m and b of every (sample, atom), then the projection t of every (sample, atom) */
  const float inv_dz = (float)(atoms - 1) * fh_rcp_refined(vmax - vmin);
  for (int it = tid; it < LT_SPB * atoms; it += LT_THREADS) {
    const int s = it / atoms, j = it - s * atoms;
    if (i0 + s >= B) continue;
    float m = 0.0f;
    for (int d = 0; d < nb; ++d) m = __fmaf_rn(s_pe[s][d][j], s_pinv[s][d], m);
    float tz = s_r[s] + s_g[s] * (vmin + (float)j * dz);
    if (tz != tz) atomicOr(&s_nan[s], 1);
    tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
    float b = (tz - vmin) * inv_dz;
    if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
    if (b < 0.0f) b = 0.0f;
    s_m[s][j] = m;
    s_b[s][j] = b;
  }
  __syncthreads();
  for (int it = tid; it < LT_SPB * atoms; it += LT_THREADS) {
    const int s = it / atoms, kk = it - s * atoms;
    if (i0 + s >= B) continue;
    const float g = s_g[s], fk = (float)kk;
    float st = 0.0f;
    if (g == 0.0f) {
      /* every b_j is the same: all of the mass goes to floor(b) and ceil(b) */
      float mass = 0.0f;
      for (int j = 0; j < atoms; ++j) mass += s_m[s][j];
      st = mass * fmaxf(0.0f, 1.0f - fabsf(s_b[s][0] - fk));
    } else {
      /* with disc >= 0, b_j is non-decreasing in j: the j reaching atom kk are one run (loss.cu) */
      const bool runs = g >= 0.0f;
      int j = 0;
      if (runs) {
#pragma unroll
        for (int w = LT_ATOMS / 2; w > 0; w >>= 1)
          if (j + w <= atoms && s_b[s][j + w - 1] <= fk - 1.0f) j += w;
      }
      for (; j < atoms; ++j) {
        const float b = s_b[s][j];
        if (runs && b >= fk + 1.0f) break;
        st = __fmaf_rn(s_m[s][j], fmaxf(0.0f, 1.0f - fabsf(b - fk)), st);
      }
    }
    if (s_nan[s]) st = s_r[s] + g * vmin + NAN;
    s_t[s][kk] = st;
  }
  __syncthreads();

  /* P4: online(s): the gradient of the taken action's logits (to s_pe) and the cross-entropy */
  if (grp == 2 && qon) {
    const float coef = s_coef[qs];
    float ce = 0.0f;
#pragma unroll
    for (int r = 0; r < LT_R; ++r) {
      const int j = q + 4 * r;
      if (j < atoms) {
        const float t = s_t[qs][j];
        s_pe[qs][qd][j] = coef * (e1[r] * oinv - t);
        ce = __fmaf_rn(t, lse - x1[r], ce);
      }
    }
    ce = lt_quad_sum(ce, qmask);
    if (q == 0) s_ce[qs][qd] = ce;
  }
  __syncthreads();

  /* P5: the gradient rows (dueling backward; the value row sums the branches; pads 0) and the loss */
  {
    const int rv = sh.vcum[sh.nh];
    for (int it = tid; it < LT_SPB * rv; it += LT_THREADS) {
      const int s = it / rv, v = it - s * rv;
      const int i = i0 + s;
      if (i >= B) continue;
      const int k = lt_head_of(sh, v);
      const int e0 = (v - sh.vcum[k]) * 8;
      alignas(16) fh_bf16 o[8];
      if (k == 0) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const int j = e0 + c;
          float dv = 0.0f;
          if (j < atoms)
            for (int d = 0; d < nb; ++d) dv += s_pe[s][d][j];
          o[c] = fh_from_f32<fh_bf16>(dv);
        }
      } else {
        const int d = k - 1, n = sh.n[d], ad = s_ad[s][d];
        const float in = fh_rcp_refined((float)n);
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          const int e = e0 + c;
          const int a = (int)(((unsigned)e * sh.div_mag) >> 20), j = e - a * atoms;
          float val = 0.0f;
          if (a < n) {
            const float g = s_pe[s][d][j];
            val = (a == ad ? g : 0.0f) - g * in;
          }
          o[c] = fh_from_f32<fh_bf16>(val);
        }
      }
      fh_bf16* dst = lt_grad_head(grad, k) + (int64_t)i * sh.ld[k] + e0;
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(o);
    }
    if (tid < LT_SPB && i0 + tid < B) {
      const int i = i0 + tid;
      float ce = 0.0f;
      for (int d = 0; d < nb; ++d) ce += s_ce[tid][d];
      wloss[i] = weight[i] * (ce * inv_nb);
      signal[i] = ce;
    }
  }
}

static bool lt_aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

fh_status fh_launch_c51_loss_tile(const fh_heads_view_t<fh_bf16>& on_s, const fh_heads_view_t<fh_bf16>& on_sn,
                                  const fh_heads_view_t<fh_bf16>& tg_sn, const int32_t* act, const float* ret,
                                  const float* disc, const float* weight, int B, float* wloss, float* signal,
                                  const fh_heads_grad<fh_bf16>& grad, cudaStream_t s) {
  const char* e = getenv("FH_LOSS_TILE");
  if (e && strcmp(e, "0") == 0) return FH_ERR_UNSUPPORTED;
  const int nb = on_s.nb, atoms = on_s.atoms;
  if (nb < 1 || nb > FH_MAX_BRANCHES || atoms < 2 || atoms > LT_ATOMS) return FH_ERR_UNSUPPORTED;
  lt_shape sh{};
  sh.nb = nb;
  sh.atoms = atoms;
  sh.nh = nb + 1;
  const fh_heads_view_t<fh_bf16>* views[3] = {&on_s, &on_sn, &tg_sn};
  int off = 0;
  for (int k = 0; k < sh.nh; ++k) {
    const int ld = k == 0 ? on_s.ldv : on_s.lda[k - 1];
    const int used = k == 0 ? atoms : on_s.n[k - 1] * atoms;
    if (k > 0 && (on_s.n[k - 1] < 1 || on_s.n[k - 1] > LT_MAXN)) return FH_ERR_UNSUPPORTED;
    if (ld % 8 || used > ld || (k == 0 ? grad.ldv : grad.lda[k - 1]) != ld) return FH_ERR_UNSUPPORTED;
    for (const auto* h : views) {
      if ((k == 0 ? h->ldv : h->lda[k - 1]) != ld || h->nb != nb || h->atoms != atoms) return FH_ERR_UNSUPPORTED;
      if (k > 0 && h->n[k - 1] != on_s.n[k - 1]) return FH_ERR_UNSUPPORTED;
      if (!lt_aligned(k == 0 ? h->v : h->a[k - 1])) return FH_ERR_UNSUPPORTED;
    }
    if (!lt_aligned(k == 0 ? grad.v : grad.a[k - 1])) return FH_ERR_UNSUPPORTED;
    if (k > 0) sh.n[k - 1] = on_s.n[k - 1];
    sh.ld[k] = ld;
    sh.off[k] = off;
    sh.vcum[k] = off / 8;
    off += ld;
  }
  sh.vcum[sh.nh] = off / 8;
  sh.rs = off;
  sh.div_mag = ((1u << 20) + (unsigned)atoms - 1u) / (unsigned)atoms;
  const size_t dyn = (size_t)LT_SPB * 3 * (size_t)off * sizeof(fh_bf16);
  /* static shared memory is ~13 KB: stay under the 48 KB that needs no opt-in */
  if (dyn > 34 * 1024) return FH_ERR_UNSUPPORTED;
  if (B <= 0) return FH_OK;
  fh_c51_loss_tile_kernel<<<(unsigned)CEIL_DIV(B, LT_SPB), LT_THREADS, dyn, s>>>(on_s, on_sn, tg_sn, sh, act, ret, disc,
                                                                               weight, B, wloss, signal, grad);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
