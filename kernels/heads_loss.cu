/*
 * heads_loss.cu — the training step's head outputs and its C51 BDQ loss as one kernel (bf16 mode).
 *
 * Unfused, the four head-output GEMMs write the logits of online(s) and online(s') (2B rows of
 * 51 x (1 + 3 + 4 + 3) bf16 at the reference: 37 MB a step) and the loss kernel reads them back. Here
 * each warp takes 16 samples, multiplies their head-layer activations (pass 0's `ah`, s rows 0..B-1,
 * s' rows B..2B-1) by the head-output weights with mma.sync, and runs the loss of fh_launch_bdq_loss
 * (loss.cu) on the fragments: the logits never leave the registers. Reads: the activations, the
 * target(s') rows (the target cache), act / ret / disc / weight; writes: the gradient rows, wloss, signal.
 *
 * Per warp and tile of 16 samples (lane = 4 g + t holds rows g and g + 8, and per n8 tile c the atoms
 * 8 c + 2 t and 8 c + 2 t + 1; a row's 56 atom slots are spread over the 4 lanes of a quad, so every
 * reduction over atoms is the lane's own 14 values and two XOR shuffles):
 *   1. online(s'): V = h_v W_v + b_v; per branch the dueling mean M = mean_a (h_d W_a + b_a), then per
 *      action the logits V + A_a - M, their softmax and Q_a = sum_j p_j z_j; a*_d = the first argmax;
 *   2. target: the mean over branches of softmax(target logits at a*_d) from the target(s') rows, its
 *      C51 projection after ret + disc z (fh_c51_run_start / fh_c51_run_sum over the row in shared memory);
 *   3. online(s): x_d = V + sum_a ([a == a_d] - 1/n) (h_d W_a + b_a), its softmax, CE and gradient
 *      g = coef (p - tgt); the dueling backward writes dA_d(a) = [a == a_d] g - g/n and dV = sum_d g.
 * The math is the approximate-math kernels' (ex2 / lg2 / rcp approximations; results differ from the
 * unfused path by the bf16 rounding of its stored logits and the order of sums). Deterministic.
 *
 * Weights: each CTA copies the head outputs' weights into shared memory once (4-byte cp.async), one 56-row
 * block per (head, action) (value: 1, branch d: n_d), rows padded to 136 bf16 (ldmatrix without bank
 * conflicts), the k order permuted so that a lane's A fragments for two k-steps are one 16-byte load of
 * its activation row. Limits (fh_heads_loss_supported): head hidden 128, 2 <= atoms <= 56, nb <= 3,
 * n_d <= 4, 1 + sum n_d <= 11 blocks (the reference: 11, 227 KB of shared memory with the warps' scratch).
 *
 * Status: opt-in (FH_HEADS_LOSS=1). Correct against the unfused path (test/gpu/net.test.ts), but on an H100 the
 * reference train step was ~115 us slower with it (bench/RESULTS.md, twenty-seventh session): one wave of warps, each
 * working through its tile's chain of loads and mma passes alone, 8 warps an SM.
 */
#include "heads_mma.cuh"

#include <float.h>
#include <mutex>

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
using namespace fh_hm;
constexpr int kScratch = 2 * kRows * kCols;  /* floats per warp: the projection's masses and positions, then the
                                                projected target and dV's sum over branches */

/* Shared memory of a launch with nblk weight blocks. */
size_t smem_bytes(int nblk) { return weight_bytes(nblk) + (size_t)kWarps * kScratch * sizeof(float); }

}  // namespace

static __global__ void __launch_bounds__(kThreads, 1) fh_heads_loss_kernel(const fh_heads_loss_args p) {
  extern __shared__ __align__(16) unsigned char fh_hl_smem[];
  const int nb = p.nb, atoms = p.atoms;
  fh_bf16* sW;
  float* sBias;
  const int nblk = fh_hl_carve(p, fh_hl_smem, sW, sBias);
  float* sScr = sBias + nblk * kCols;

  fh_hl_load_weights<kThreads>(p, nblk, atoms, sW, sBias);
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  float* sm = sScr + warp * kScratch;  /* [16][56] masses, then [16][56] positions */
  float* sb = sm + kRows * kCols;
  const float vmin = p.v_min, vmax = p.v_max;
  const float inv_nb = fh_rcp_refined((float)nb);
  const float dz = (vmax - vmin) * fh_rcp_refined((float)(atoms - 1));
  const float inv_dz = (float)(atoms - 1) * fh_rcp_refined(vmax - vmin);
  /* this lane's atoms: j = 8 c + 2 t + e; ok when j < atoms; z_j the support */
  bool ok[kNT][2];
  float zj[kNT][2];
#pragma unroll
  for (int c = 0; c < kNT; ++c)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int j = 8 * c + 2 * t + e;
      ok[c][e] = j < atoms;
      zj[c][e] = vmin + (float)j * dz;
    }
  const int B = p.B, tiles = (B + kRows - 1) / kRows;
  const float coef0 = fh_rcp_approx((float)B * (float)nb);

  for (int tile = blockIdx.x * kWarps + warp; tile < tiles; tile += gridDim.x * kWarps) {
    const int i0 = tile * kRows;
    const int ir[2] = {i0 + g < B ? i0 + g : B - 1, i0 + g + 8 < B ? i0 + g + 8 : B - 1};
    const bool live[2] = {i0 + g < B, i0 + g + 8 < B};

    /* The branch loops (below and in fh_hl_argmax_rows) run once per branch (not unrolled: one copy of their GEMM
     * passes); a branch's first weight block and 1/n are computed in them, the argmaxes kept as 2-bit fields. */
    /* ---- 1. online(s'): the double-DQN argmax of every branch ---- */
    const uint32_t astar = fh_hl_argmax_rows<false, false>(p.H + (int64_t)(B + ir[0]) * p.ldh,
                                                           p.H + (int64_t)(B + ir[1]) * p.ldh, p.n, nb, ok, sW, sBias,
                                                           nullptr, lane, t, vmin, dz);  /* a*_d of row r: bits 2 (2 d + r) */

    /* ---- 2. the target distribution and its projection (the rows' masses and positions in shared memory); the
     * projected target tgt then replaces the lane's own masses there, for phase 3 ---- */
    {
      int64_t ti[2];
      float r_[2], g_[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        ti[r] = fh_view_row(p.tg, ir[r]);
        r_[r] = p.ret[ir[r]];
        g_[r] = p.disc[ir[r]];
      }
      float mj[kNT][4];
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) mj[c][e] = 0.0f;
#pragma unroll 1
      for (int d = 0; d < nb; ++d) {
        const int n = p.n[d];
        const float inv_n = fh_rcp_refined((float)n);
        /* per row (the action loop unrolled to its bound, n at run time, so that the loads issue together) */
        float xt[kNT][4];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const fh_bf16* row = p.tg.a[d] + ti[r] * p.tg.lda[d] + 2 * t;
          const fh_bf16* vrow = p.tg.v + ti[r] * p.tg.ldv + 2 * t;  /* the value row, again per branch (L1) */
          const int as = (int)((astar >> (2 * (2 * d + r))) & 3u);
#pragma unroll
          for (int c = 0; c < kNT; ++c)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float y = 0.0f, sel = 0.0f;
#pragma unroll
              for (int a = 0; a < kMaxN; ++a) {
                const float v = a < n && ok[c][e] ? fh_ldg_f32(row + a * atoms + 8 * c + e) : 0.0f;
                y += v;  /* 0 past n */
                sel = a == as ? v : sel;
              }
              xt[c][2 * r + e] = ok[c][e] ? fh_ldg_f32(vrow + 8 * c + e) + sel - y * inv_n : -INFINITY;
            }
        }
        float mx[2], S[2];
        fh_hl_softmax(xt, mx, S);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float inv = fh_rcp_approx(S[r]) * inv_nb;
#pragma unroll
          for (int c = 0; c < kNT; ++c)
#pragma unroll
            for (int e = 0; e < 2; ++e) mj[c][2 * r + e] = __fmaf_rn(xt[c][2 * r + e], inv, mj[c][2 * r + e]);
        }
      }
      /* C51 projection after ret + disc z, as the loss kernels (a NaN target or a non-finite disc poisons the row;
       * disc == 0 puts all of the mass on b of ret alone) */
      bool nan[2] = {false, false};
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, j = 8 * c + 2 * t + (e & 1), row = g + 8 * r;
          if (ok[c][e & 1]) {
            float tz = r_[r] + g_[r] * zj[c][e & 1];
            nan[r] = nan[r] || tz != tz;
            tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
            float b = (tz - vmin) * inv_dz;
            if (b > (float)(atoms - 1)) b = (float)(atoms - 1);
            if (b < 0.0f) b = 0.0f;
            sm[row * kCols + j] = mj[c][e];
            sb[row * kCols + j] = b;
          }
        }
      __syncwarp();
      float st[kNT][4];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const bool bad = fh_quad_max(nan[r] ? 1.0f : 0.0f) > 0.0f || !(fabsf(g_[r]) <= FLT_MAX);
        const int row = g + 8 * r;
        float b_own = 0.0f;
        if (g_[r] == 0.0f) {
          float tz = r_[r];
          tz = tz < vmin ? vmin : (tz > vmax ? vmax : tz);
          b_own = (tz - vmin) * inv_dz;
          if (b_own > (float)(atoms - 1)) b_own = (float)(atoms - 1);
          if (b_own < 0.0f) b_own = 0.0f;
        }
        /* the lane's 14 run searches first (independent: their shared loads overlap), then the runs */
        const bool runs = g_[r] >= 0.0f, closed = g_[r] == 0.0f;
        int j0[kNT][2];
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            j0[c][e] = closed ? atoms : fh_c51_run_start(sb + row * kCols, atoms, (float)(8 * c + 2 * t + e), runs);
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float fk = (float)(8 * c + 2 * t + e);
            float v = 0.0f;
            if (ok[c][e])
              v = closed ? fmaxf(0.0f, 1.0f - fabsf(b_own - fk))
                         : fh_c51_run_sum(sb + row * kCols, sm + row * kCols, atoms, fk, j0[c][e], runs);
            st[c][2 * r + e] = bad ? r_[r] + g_[r] * vmin + NAN : v;
          }
      }
      __syncwarp();  /* every lane's projection read the rows: each lane's own slots are its own again */
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = 8 * c + 2 * t + (e & 1), row = g + 8 * (e >> 1);
          sm[row * kCols + j] = st[c][e];
          sb[row * kCols + j] = 0.0f;  /* dV's sum over branches */
        }
    }

    /* ---- 3. online(s): cross-entropy, its gradient and the dueling backward ---- */
    {
      const fh_bf16* h0 = p.H + (int64_t)ir[0] * p.ldh;
      const fh_bf16* h1 = p.H + (int64_t)ir[1] * p.ldh;
      float V[kNT][4];
      {
        uint32_t af[8][4];
        fh_hl_frags(af, h0, h1, t);
        fh_hl_gemm(V, af, sW, sBias, 0, lane);
      }
      float coef[2], ce[2] = {0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < 2; ++r) coef[r] = p.weight[ir[r]] * coef0;
#pragma unroll 1
      for (int d = 0, so = 1; d < nb; so += p.n[d], ++d) {
        const int n = p.n[d];
        const float inv_n = fh_rcp_refined((float)n);
        const int ad[2] = {fh_taken_action(p.act, ir[0], d, nb, n), fh_taken_action(p.act, ir[1], d, nb, n)};
        uint32_t af[8][4];
        fh_hl_frags(af, h0 + (d + 1) * kK, h1 + (d + 1) * kK, t);
        float x[kNT][4];
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e) x[c][e] = V[c][e];
        for (int a = 0; a < n; ++a) {
          float acc[kNT][4];
          fh_hl_gemm(acc, af, sW, sBias, so + a, lane);
          const float w0 = (a == ad[0] ? 1.0f : 0.0f) - inv_n, w1 = (a == ad[1] ? 1.0f : 0.0f) - inv_n;
#pragma unroll
          for (int c = 0; c < kNT; ++c) {
            x[c][0] = __fmaf_rn(w0, acc[c][0], x[c][0]);
            x[c][1] = __fmaf_rn(w0, acc[c][1], x[c][1]);
            x[c][2] = __fmaf_rn(w1, acc[c][2], x[c][2]);
            x[c][3] = __fmaf_rn(w1, acc[c][3], x[c][3]);
          }
        }
        /* CE_d = sum_j tgt_j (lse - x_j) = lse sum_j tgt_j - sum_j tgt_j x_j (the lane's parts, summed over the
         * quad with the other branches' at the end) */
        float sx[2] = {0.0f, 0.0f}, sst[2] = {0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (ok[c][e & 1]) {
              const float tj = sm[(g + 8 * (e >> 1)) * kCols + 8 * c + 2 * t + (e & 1)];
              sx[e >> 1] = __fmaf_rn(tj, x[c][e], sx[e >> 1]);
              sst[e >> 1] += tj;
            }
            x[c][e] = ok[c][e & 1] ? x[c][e] : -INFINITY;
          }
        float mx[2], S[2];
        fh_hl_softmax(x, mx, S);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float lse = mx[r] + fh_lg2_approx(S[r]) * kLn2, inv = fh_rcp_approx(S[r]);
          ce[r] += __fmaf_rn(lse, sst[r], -sx[r]);
#pragma unroll
          for (int c = 0; c < kNT; ++c)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int k = 2 * r + e, at = (g + 8 * r) * kCols + 8 * c + 2 * t + e;
              x[c][k] = ok[c][e] ? coef[r] * (x[c][k] * inv - sm[at]) : 0.0f; /* x := the gradient g */
              if (ok[c][e]) sb[at] += x[c][k];
            }
        }
        /* dA_d(a, j) = [a == a_d] g_j - g_j / n, pads 0 */
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (!live[r]) continue;
          fh_bf16* arow = p.grad.a[d] + (int64_t)ir[r] * p.grad.lda[d];
          for (int a = 0; a < n; ++a)
#pragma unroll
            for (int c = 0; c < kNT; ++c)
#pragma unroll
              for (int e = 0; e < 2; ++e)
                if (ok[c][e]) {
                  const float gk = x[c][2 * r + e];
                  arow[a * atoms + 8 * c + 2 * t + e] = __float2bfloat16_rn((a == ad[r] ? gk : 0.0f) - gk * inv_n);
                }
          for (int col = n * atoms + t; col < p.grad.lda[d]; col += 4) arow[col] = __float2bfloat16_rn(0.0f);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float cer = fh_quad_sum(ce[r]);
        if (!live[r]) continue;
        fh_bf16* vrow = p.grad.v + (int64_t)ir[r] * p.grad.ldv;
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (ok[c][e]) vrow[8 * c + 2 * t + e] = __float2bfloat16_rn(sb[(g + 8 * r) * kCols + 8 * c + 2 * t + e]);
        for (int col = atoms + t; col < p.grad.ldv; col += 4) vrow[col] = __float2bfloat16_rn(0.0f);
        if (t == 0) {
          p.wloss[ir[r]] = p.weight[ir[r]] * (cer * inv_nb);
          p.signal[ir[r]] = cer;
        }
      }
    }
  }
}

bool fh_heads_loss_supported(int hh, int atoms, int nb, const int* n, int ldh, int smem_optin) {
  int nblk = 0;
  return shapes_fit(hh, atoms, nb, n, ldh, &nblk) && smem_bytes(nblk) <= FH_HEADS_LOSS_SMEM_MAX &&
         smem_bytes(nblk) <= (size_t)smem_optin;
}

fh_status fh_heads_loss_setup() {
  /* the attribute is the function's: set once, to the most any supported shape takes */
  static std::once_flag once;
  static cudaError_t attr = cudaSuccess;
  std::call_once(once, [] {
    attr = cudaFuncSetAttribute(fh_heads_loss_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                FH_HEADS_LOSS_SMEM_MAX);
  });
  if (attr != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_heads_loss_setup", cudaGetErrorString(attr));
    return FH_ERR_DEVICE;
  }
  return FH_OK;
}

fh_status fh_launch_heads_loss(const fh_heads_loss_args& a, cudaStream_t s) {
  if (a.B <= 0) return FH_OK;
  if (!fh_heads_loss_supported(kK, a.atoms, a.nb, a.n, a.ldh, FH_HEADS_LOSS_SMEM_MAX) || !a.H || !a.tg.v) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_heads_loss", "shapes outside the fused head outputs + loss");
    return FH_ERR_INVALID_ARGUMENT;
  }
  int nblk = 1;
  for (int d = 0; d < a.nb; ++d) nblk += a.n[d];
  const size_t smem = smem_bytes(nblk);
  FH_TRY(fh_heads_loss_setup());
  const int tiles = (a.B + kRows - 1) / kRows;
  fh_heads_loss_kernel<<<(tiles + kWarps - 1) / kWarps, kThreads, smem, s>>>(a);
  FH_LAUNCH_CHECK();
  return FH_OK;
}
