/*
 * heads_mma.cuh — the head outputs of 16 rows by mma.sync with the weights in shared memory, shared by the kernels
 * that compute head outputs inside another kernel (heads_loss.cu: the fused head outputs + loss; sn_argmax.cu: the
 * double-DQN argmax of online(s')). bf16 mode, head hidden 128 (FH_HEADS_LOSS_K). Device code only; sm_80 or newer.
 *
 * Layout: one 56-row weight block per (head, action) (value: 1 block, branch d: n_d blocks; block 1 + sum_{d' < d} n_d'
 * + a), rows padded to 136 bf16 (ldmatrix without bank conflicts), the k order permuted so that a lane's A fragments
 * for two k-steps are one 16-byte load of its activation row; the biases as fp32, 56 a block, zero past the atoms.
 * A warp tile is 16 rows: lane = 4 g + t holds rows g and g + 8, and per n8 tile c the atoms 8 c + 2 t and
 * 8 c + 2 t + 1 (a row's 56 atom slots over the 4 lanes of a quad).
 *
 *   fh_hl_load_weights<THREADS>(p, nblk, atoms, sW, sBias)  p.W / p.bias into shared memory (the caller syncs)
 *   fh_hl_frags(af, ra, rb, t)                      A fragments of rows ra and rb of one head's activations
 *   fh_hl_gemm(acc, af, sW, sBias, blk, lane)        acc = A times weight block blk plus its bias
 *   fh_quad_sum / fh_quad_max                        over the 4 lanes of a quad (one row's atoms)
 *   fh_hl_softmax(x, mx, S)                          the lane's two rows: x := exp(x - max), mx the maxima, S the sums
 *   fh_bf16_round(x)                                 x rounded to bf16 (as a stored logit), back in fp32
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

#endif /* __CUDACC__ */
#endif /* FH_HEADS_MMA_CUH */
