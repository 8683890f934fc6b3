/*
 * heads_mma.cuh — the head outputs of 16 rows by mma.sync with the weights in shared memory, shared by the kernels
 * that compute head outputs inside another kernel (heads_loss.cu: the fused head outputs + loss; sn_argmax.cu: the
 * double-DQN argmax of online(s')). bf16 mode, head hidden 128 (FH_HEADS_LOSS_K). Device code (sm_80 or newer), and in
 * fh_hm the layout's constants and host checks (weight_bytes, shapes_fit).
 *
 * Layout: one 56-row weight block per (head, action) (value: 1 block, branch d: n_d blocks; block 1 + sum_{d' < d} n_d'
 * + a), rows padded to 136 bf16 (ldmatrix without bank conflicts), the k order permuted so that a lane's A fragments
 * for two k-steps are one 16-byte load of its activation row; the biases as fp32, 56 a block, zero past the atoms.
 * A warp tile is 16 rows: lane = 4 g + t holds rows g and g + 8, and per n8 tile c the atoms 8 c + 2 t and
 * 8 c + 2 t + 1 (a row's 56 atom slots over the 4 lanes of a quad).
 *
 *   fh_hl_carve(p, smem, sW, sBias)                  the weight blocks' count and places in dynamic shared memory
 *   fh_hl_load_weights<THREADS>(p, nblk, atoms, sW, sBias)  p.W / p.bias into shared memory (the caller syncs)
 *   fh_hl_frags(af, ra, rb, t)                      A fragments of rows ra and rb of one head's activations
 *   fh_hl_gemm(acc, af, sW, sBias, blk, lane)        acc = A times weight block blk plus its bias
 *   fh_quad_sum / fh_quad_max                        over the 4 lanes of a quad (one row's atoms)
 *   fh_hl_softmax(x, mx, S)                          the lane's two rows: x := exp(x - max), mx the maxima, S the sums
 *   fh_bf16_round(x)                                 x rounded to bf16 (as a stored logit), back in fp32
 *   fh_hl_pick(x, bq, astar, a, d, t, vmin, dz)       one action's softmax and expected Q, a*_d where it is the best
 *   fh_hl_argmax_rows<ROUND, KEEP>(...)              online(s')'s double-DQN a*_d of the lane's two rows
 */
#ifndef FH_HEADS_MMA_CUH
#define FH_HEADS_MMA_CUH

#include "net_kernels.cuh"
#include "loss_math.cuh"
#include "mma.cuh"

namespace fh_hm {
constexpr int kK = FH_HEADS_LOSS_K;  /* head hidden (the GEMMs' K) */
constexpr int kRowS = kK + 8;        /* shared row of one output column: 272 bytes */
constexpr int kNT = 7;               /* n8 tiles per block */
constexpr int kCols = kNT * 8;       /* atom slots per block */
constexpr int kRows = 16;            /* samples per warp tile */
constexpr int kMaxN = 4;             /* actions per branch */

/* Shared bytes of nblk weight blocks and their biases. */
inline size_t weight_bytes(int nblk) { return (size_t)nblk * (kCols * kRowS * sizeof(fh_bf16) + kCols * sizeof(float)); }

/* The blocks of nblk = 1 + sum n_d; whether these shapes fit the layout (head hidden 128, 2..56 atoms, 1..3 branches
 * of 1..4 actions, ldh a multiple of 8). */
inline bool shapes_fit(int hh, int atoms, int nb, const int* n, int ldh, int* nblk) {
  if (hh != kK || atoms < 2 || atoms > kCols || nb < 1 || nb > FH_MAX_BRANCHES || ldh % 8) return false;
  int blocks = 1;
  for (int d = 0; d < nb; ++d) {
    if (n[d] < 1 || n[d] > kMaxN) return false;
    blocks += n[d];
  }
  *nblk = blocks;
  return true;
}
}  // namespace fh_hm

#if defined(__CUDACC__)

/* The weight blocks' count (1 + sum n_d) and their places at the start of the dynamic shared memory smem. */
template <typename A>
static __device__ __forceinline__ int fh_hl_carve(const A& p, unsigned char* smem, fh_bf16*& sW, float*& sBias) {
  int nblk = 1;
  for (int d = 0; d < p.nb; ++d) nblk += p.n[d];
  sW = reinterpret_cast<fh_bf16*>(smem);
  sBias = reinterpret_cast<float*>(sW + (size_t)nblk * fh_hm::kCols * fh_hm::kRowS);
  return nblk;
}

/* The weights: block 0 the value head, then branch d's actions (block 1 + sum_{d' < d} n_d' + a); every 4-byte word
 * (two k) its own asynchronous copy, all in flight at once: real k 32 kk + 8 tt + 4 h + 2 which (+0, 1) goes to the
 * shared position 16 (2 kk + h) + 8 which + 2 tt of its row (rows past the atoms zero) */
template <int THREADS, typename A>
static __device__ __forceinline__ void fh_hl_load_weights(const A& p, int nblk, int atoms, fh_bf16* sW, float* sBias) {
  using namespace fh_hm;
  int head = 0, a = 0;
  for (int blk = 0; blk < nblk; ++blk) {
    if (blk > 0) {
      if (blk == 1) {
        head = 1;
        a = 0;
      } else if (++a == p.n[head - 1]) {
        ++head;
        a = 0;
      }
    }
    const fh_bf16* wsrc = p.W[head] + (size_t)(blk > 0 ? a * atoms : 0) * kK;
    fh_bf16* wdst = sW + (size_t)blk * kCols * kRowS;
#pragma unroll 4
    for (int w = threadIdx.x; w < kCols * kK / 2; w += THREADS) {
      const int r = w / (kK / 2), pos = 2 * (w % (kK / 2));  /* shared position of the word in row r */
      const int ks = pos >> 4, which = (pos >> 3) & 1, tt = (pos & 7) >> 1;
      const int k = 32 * (ks >> 1) + 8 * tt + 4 * (ks & 1) + 2 * which;
      const bool ok = r < atoms;
      fh_cp4(wdst + r * kRowS + pos, ok ? wsrc + (size_t)r * kK + k : wsrc, ok);
    }
    if (threadIdx.x < kCols) {
      const int r = threadIdx.x;
      sBias[blk * kCols + r] = r < atoms ? __bfloat162float(p.bias[head][(blk > 0 ? a * atoms : 0) + r]) : 0.0f;
    }
  }
  fh_cp_commit();
  fh_cp_wait<0>();
}

static __device__ __forceinline__ float fh_bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

/* A fragments of 16 rows (lane: rows a and b) of one head's activations: k-steps 2 kk and 2 kk + 1 from one
 * 16-byte load per row (the permuted k order of the shared weights). */
static __device__ __forceinline__ void fh_hl_frags(uint32_t (&af)[8][4], const fh_bf16* ra, const fh_bf16* rb, int t) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint4 qa = __ldg(reinterpret_cast<const uint4*>(ra + 32 * kk + 8 * t));
    const uint4 qb = __ldg(reinterpret_cast<const uint4*>(rb + 32 * kk + 8 * t));
    af[2 * kk][0] = qa.x;
    af[2 * kk][1] = qb.x;
    af[2 * kk][2] = qa.y;
    af[2 * kk][3] = qb.y;
    af[2 * kk + 1][0] = qa.z;
    af[2 * kk + 1][1] = qb.z;
    af[2 * kk + 1][2] = qa.w;
    af[2 * kk + 1][3] = qb.w;
  }
}

/* acc = A (16 x 128) times weight block blk (128 x 56) plus its bias. */
static __device__ __forceinline__ void fh_hl_gemm(float (&acc)[fh_hm::kNT][4], const uint32_t (&af)[8][4], const fh_bf16* sW,
                                                  const float* sBias, int blk, int lane) {
  const fh_bf16* base = sW + (size_t)blk * fh_hm::kCols * fh_hm::kRowS + (lane & 7) * fh_hm::kRowS + 8 * ((lane >> 3) & 1) + 16 * (lane >> 4);
  const float* bias = sBias + blk * fh_hm::kCols + 2 * (lane & 3);
#pragma unroll
  for (int c = 0; c < fh_hm::kNT; ++c) {
    const float b0 = bias[8 * c], b1 = bias[8 * c + 1];
    acc[c][0] = b0;
    acc[c][1] = b1;
    acc[c][2] = b0;
    acc[c][3] = b1;
  }
#pragma unroll
  for (int k2 = 0; k2 < 4; ++k2)
#pragma unroll
    for (int c = 0; c < fh_hm::kNT; ++c) {
      uint32_t b[4];
      fh_ldsm_x4(b, base + c * 8 * fh_hm::kRowS + 32 * k2);
      fh_mma_bf16(acc[c], af[2 * k2][0], af[2 * k2][1], af[2 * k2][2], af[2 * k2][3], b[0], b[1]);
      fh_mma_bf16(acc[c], af[2 * k2 + 1][0], af[2 * k2 + 1][1], af[2 * k2 + 1][2], af[2 * k2 + 1][3], b[2], b[3]);
    }
}

/* Sum / max over the 4 lanes of a quad (one row's atoms). */
static __device__ __forceinline__ float fh_quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
static __device__ __forceinline__ float fh_quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

/* Softmax parts of the lane's two rows of x (-inf outside the atoms): mx = the row maxima, x := exp(x - mx),
 * S = the row sums. */
static __device__ __forceinline__ void fh_hl_softmax(float (&x)[fh_hm::kNT][4], float (&mx)[2], float (&S)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float m = -INFINITY;
#pragma unroll
    for (int c = 0; c < fh_hm::kNT; ++c) m = fmaxf(m, fmaxf(x[c][2 * r], x[c][2 * r + 1]));
    mx[r] = fh_quad_max(m);
    const float mL = mx[r] * kLog2e;
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < fh_hm::kNT; ++c)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        x[c][2 * r + e] = fh_exp_shifted(x[c][2 * r + e], mL);
        s += x[c][2 * r + e];
      }
    S[r] = fh_quad_sum(s);
  }
}

/* Action a of branch d, the lane's two rows of logits x (-inf outside the atoms): their softmax and expected Q, and a*_d
 * (bits 2 (2 d + r) of astar) where it beats the best so far (bq; the first of equals stays). */
static __device__ __forceinline__ void fh_hl_pick(float (&x)[fh_hm::kNT][4], float (&bq)[2], uint32_t& astar, int a,
                                                  int d, int t, float vmin, float dz) {
  float mx[2], S[2];
  fh_hl_softmax(x, mx, S);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float az = 0.0f;
#pragma unroll
    for (int c = 0; c < fh_hm::kNT; ++c)
#pragma unroll
      for (int e = 0; e < 2; ++e) az = __fmaf_rn(x[c][2 * r + e], vmin + (float)(8 * c + 2 * t + e) * dz, az);
    const float q = fh_quad_sum(az) * fh_rcp_approx(S[r]);
    if (q > bq[r]) {
      bq[r] = q;
      astar = (astar & ~(3u << (2 * (2 * d + r)))) | ((uint32_t)a << (2 * (2 * d + r)));
    }
  }
}

/* The double-DQN argmax of the lane's two rows h0, h1 of online(s')'s head activations (head k at columns k * 128): the
 * value head V, then per branch the dueling mean M = mean_a (h_d W_a + b_a) and per action the logits V + A_a - M, their
 * softmax and expected Q (fh_hl_pick). Returns a*_d of row r in bits 2 (2 d + r) .. +1. ROUND: each logit rounded to
 * bf16 first, as a stored one. Without KEEP each action's GEMM runs twice, for M and for its logits; KEEP (ROUND only)
 * runs it once and keeps the rounded logits as bf16 pairs in keep, the warp's kMaxN x kKeepWords words of shared memory
 * (each lane its own words, lane-contiguous). n: the branch sizes, nb branches; ok: the lane's atoms inside the row. */
constexpr int kHlKeepWords = fh_hm::kNT * 2 * 32;  /* a warp's words of one action's rounded logits (bf16 pairs) */
template <bool ROUND, bool KEEP>
static __device__ __forceinline__ uint32_t fh_hl_argmax_rows(const fh_bf16* h0, const fh_bf16* h1, const int* n_, int nb,
                                                             const bool (&ok)[fh_hm::kNT][2], const fh_bf16* sW,
                                                             const float* sBias, uint32_t* keep, int lane, int t,
                                                             float vmin, float dz) {
  using namespace fh_hm;
  static_assert(ROUND || !KEEP, "fh_hl_argmax_rows: kept logits are rounded");
  const auto rd = [](float v) { return ROUND ? fh_bf16_round(v) : v; };
  uint32_t astar = 0u;
  float V[kNT][4];
  {
    uint32_t af[8][4];
    fh_hl_frags(af, h0, h1, t);
    fh_hl_gemm(V, af, sW, sBias, 0, lane);
#pragma unroll
    for (int c = 0; c < kNT; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) V[c][e] = rd(V[c][e]);
  }
#pragma unroll 1
  for (int d = 0, so = 1; d < nb; so += n_[d], ++d) {
    uint32_t af[8][4];
    fh_hl_frags(af, h0 + (d + 1) * kK, h1 + (d + 1) * kK, t);
    const int n = n_[d];
    const float inv_n = fh_rcp_refined((float)n);
    float M[kNT][4];
    for (int a = 0; a < n; ++a) {
      float acc[kNT][4];
      fh_hl_gemm(acc, af, sW, sBias, so + a, lane);
      if constexpr (KEEP) {
        uint32_t* kp = keep + a * kHlKeepWords + lane;
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const __nv_bfloat162 v = __floats2bfloat162_rn(acc[c][2 * h], acc[c][2 * h + 1]);
            kp[(2 * c + h) * 32] = *reinterpret_cast<const uint32_t*>(&v);
            const float2 f = __bfloat1622float2(v);
            acc[c][2 * h] = f.x;
            acc[c][2 * h + 1] = f.y;
          }
      }
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float v = KEEP ? acc[c][e] : rd(acc[c][e]);
          M[c][e] = a == 0 ? v : M[c][e] + v;
        }
    }
#pragma unroll
    for (int c = 0; c < kNT; ++c)
#pragma unroll
      for (int e = 0; e < 4; ++e) M[c][e] *= inv_n;
    float bq[2] = {-INFINITY, -INFINITY};
    for (int a = 0; a < n; ++a) {
      float x[kNT][4];
      if constexpr (KEEP) {
        const uint32_t* kp = keep + a * kHlKeepWords + lane;
#pragma unroll
        for (int c = 0; c < kNT; ++c)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint32_t wv = kp[(2 * c + h) * 32];
            const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&wv));
            x[c][2 * h] = f.x;
            x[c][2 * h + 1] = f.y;
          }
      } else {
        fh_hl_gemm(x, af, sW, sBias, so + a, lane);
      }
#pragma unroll
      for (int c = 0; c < kNT; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) x[c][e] = ok[c][e & 1] ? V[c][e] + (KEEP ? x[c][e] : rd(x[c][e])) - M[c][e] : -INFINITY;
      fh_hl_pick(x, bq, astar, a, d, t, vmin, dz);
    }
  }
  return astar;
}

#endif /* __CUDACC__ */
#endif /* FH_HEADS_MMA_CUH */
