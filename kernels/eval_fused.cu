/*
 * eval_fused.cu — the fused greedy evaluation (native/src/cuda/eval.h, fh_launch_eval_fused): one
 * kernel launch runs every evaluation step of every segment, instead of a cuBLASLt forward +
 * expected-Q + step launch sequence per step.
 *
 * The observation of a segment is [the W feature rows ending at its cursor t | 8 account features],
 * and the cursor of segment r at step i is known in advance: t = b_r + min(i, e_r - b_r - 1). So the
 * market part of the first layer does not depend on the policy: before the kernel, ONE cuBLASLt GEMM
 * computes P1 = Xval W1^T (fp32) for every validation bar (Xval: the bf16 market windows of every bar,
 * account columns zero, built once at setup). Per step only the 8 account features are new.
 *
 * Rows (segments) are independent through the whole network, so the S rows are cut into tiles of 16
 * and every tile is owned by one thread-block cluster of EF_C blocks (Hopper distributed shared
 * memory). The clusters never wait for each other. Per step, inside a cluster:
 *
 *   A   h1 = relu(P1[t] + b1 + acc W1acc^T)  every block, its own copy of the 16 x h1 tile (mma.sync
 *       m16n8k8 over the 8 account features, accumulator initialised with P1 + b1; P1's rows of the
 *       step were prefetched by bulk copies during the previous step)
 *       L2  a2 = relu(h1 W2^T + b2)   this block's 8-column units of a2, stored into EVERY block's
 *                                     a2 tile (st to distributed shared memory)
 *   B   LH  ah = relu(a2 WH^T + bH)   all heads' first layers, (1+nb)*hh columns, same
 *   C   LO  logits = ah_k WO_k^T + bO_k   every head's output layer (block diagonal: a unit of head k
 *                                     reads ah's columns of head k), fp32, stored into the shared
 *                                     memory of the block that owns the row (row j of the tile:
 *                                     block j % EF_C)
 *   D   per owned row: expected Q (fh_dev_expected_q_r of net_device.cuh), greedy argmax, env step
 *       and booking (eval_device.cuh), the new account features, stored into every block's tile.
 *       The env step is speculative (ef_speculate, P.spec): beside the expected Q, idle warps step
 *       each owned row with every class of actions (the step depends on the action only through
 *       (target, stop)) on bars t and t+1 loaded up front, and the greedy class is then only copied
 *       (ef_commit); FH_EVAL_PRELOAD=0 (read per launch): one thread per row steps after the
 *       expected Q, reading the market from global memory, as before. The same bits either way.
 *
 * After each phase (4 per step) a block waits for what the phase pushes into its shared memory: the pushes are
 * st.async stores that complete bytes on the receiving block's mbarrier of the phase, so a block waits only for its
 * own inputs and the senders fence nothing (ef_xwait). The kernel has four instances (its template arguments XA and
 * NS, picked at launch): the default, the exchange with trunk 2, the head layer and the head outputs split by units
 * over the warps (ef_layer_units_ns); FH_EVAL_NSPLIT=1 trunk 2 split by K (ef_layer_units); FH_EVAL_NSPLIT=0 all
 * three split by K (float rounding apart);
 * FH_EVAL_XASYNC=0 generic stores and a hardware cluster barrier after each phase, the layers split by K (the same
 * bits as NSPLIT=0). Every block keeps the bf16 weight
 * rows of its units of the three layers (and W1's account columns) in shared memory for the whole
 * evaluation. GEMMs: mma.sync m16n8k16 bf16 -> fp32, the K steps split over the block's 8 warps and
 * the partial tiles summed in a fixed order in shared memory; bias (+ ReLU) in fp32, as the cuBLASLt
 * epilogues do. Biases: bf16 shadow for the trunk and head first layers, fp32 master for the head
 * outputs, as fh_net_forward. Built with -fmad=false (the env money math); the GEMMs are
 * tensor-core instructions either way. The results agree with the cuBLASLt loop to float rounding
 * (the first layer's sums run in another order), not bit for bit.
 *
 * fh_eval_fused_setup checks the shapes (row widths multiples of 8, hh of 16, <= EF_MAXU units of 8
 * columns per block and layer, shared memory, cluster launch, the P1/Xval memory) and leaves the
 * fused path off with the reason otherwise.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cooperative_groups.h>

#include "cluster_addr.cuh"
#include "eval_device.cuh"
#include "mma.cuh"
#include "net_device.cuh"
#include "p1.cuh"
#include "../native/src/cuda/net.h"

namespace cg = cooperative_groups;

#define EF_THREADS 256
#define EF_WARPS (EF_THREADS / 32)
#define EF_MT 16              /* rows per tile (the mma M) */
/* Blocks per cluster: 8, the portable cluster size. A build with -DEF_C=16 (a non-portable size on Hopper, for
 * A/B: bench/gpu/evalc.sh) gives each block half the units of every layer and one owned row; a unit's sums run in
 * the same order whatever the cluster size, so the results are the same bits. */
#ifndef EF_C
#define EF_C 8
#endif
#define EF_OWN (EF_MT / EF_C) /* rows each block owns (phase D) */
#define EF_MAXU 12            /* 8-column units per block and layer */
#define EF_MAXSEG 4           /* column segments of a layer (the output layer: one per head) */
#define EF_MAXQ 64            /* expected-Q columns */
#define EF_MAXN 8             /* actions per branch */
#define EF_NPROF FH_EVAL_NPROF
#define EF_MAXCLS 32          /* speculative step classes (target, stop) per row: one lane each */

static_assert(FH_ENV_ACCOUNT == 8, "the first layer's account part is one m16n8k8 step");
static_assert(EF_C >= 1 && EF_C <= 16 && EF_MT % EF_C == 0, "a tile's rows split evenly over the cluster's blocks");

static __host__ __device__ __forceinline__ int32_t ef_pad16(int32_t n) { return (n + 15) / 16 * 16; }
static inline uint32_t ef_align16(uint32_t n) { return (n + 15u) / 16u * 16u; }

/* Columns [c0, c1) of a layer's output: weight rows W + (c - c0) * K, bias b16 or b32 at c - c0, input
 * columns a_off .. a_off + K of the input tile. */
struct ef_seg {
  int32_t c0, c1;
  const fh_bf16* W;
  const fh_bf16* b16;
  const float* b32;
  int32_t a_off;
};

struct ef_layer {
  int32_t K;          /* dot length (multiple of 8) */
  int32_t ksteps;     /* pad16(K) / 16 */
  int32_t ws;         /* shared-memory stride of a weight row (elements) = pad16(K) + 8 */
  int32_t U;          /* output units of 8 columns */
  int32_t NU;         /* units per block: ceil(U / EF_C) */
  int32_t nseg;
  ef_seg seg[EF_MAXSEG];
  uint32_t in_off;    /* input tile (bf16, 16 x in_s) in shared memory */
  int32_t in_s;
  uint32_t out_off;   /* relu: the next layer's input tile (bf16, 16 x out_s) in every block; else the logits rows */
  int32_t out_s;
  int32_t relu;
  uint32_t w_off, b_off;  /* shared-memory byte offsets of this block's weight rows and biases */
  uint32_t a_off_sm;      /* ... and of its units' input column offsets (NU ints) */
  int32_t xbar;           /* the mbarrier its output's pushes complete (EF_BAR_*; the XA instances) */
};

struct ef_params {
  fh_eval_args ea;
  fh_eval_q qa;
  int32_t S, n_tiles, max_steps;
  int32_t h1, D, wm;      /* first layer width, obs width, market columns (D - 8) */
  const float* p1;        /* (n_val, h1) fp32: market part of the first layer, no bias */
  const fh_bf16* w1;      /* (h1, D) bf16 shadow */
  const fh_bf16* b1;      /* (h1) bf16 shadow */
  int32_t p1s;            /* P1 tile stride (floats) */
  int32_t ps;             /* partial tile stride (floats) */
  uint32_t p1_off, wacc_off, b1_off, acc_off, part_off, log_off, q_off, st_off, seg_off;
  uint32_t bar_off;       /* EF_NBAR mbarriers (8 bytes each): the pushes of a2, ah, the logits and the accounts; P1 */
  ef_layer L[3];          /* L2, LH, LO */
  int32_t atoms, nb, nq, lot, maxn;
  int32_t n[FH_MAX_BRANCHES], abase[FH_MAX_BRANCHES];
  float v_min, v_max;
  float* q_log;
  unsigned long long* prof;  /* tests: NULL, or EF_NPROF counters (block 0's cycles per phase, see the kernel) */
  /* the speculative env step (ef_speculate / ef_commit) */
  int32_t spec_ok;           /* setup: the shapes allow it */
  int32_t spec;              /* this launch: spec_ok and FH_EVAL_PRELOAD is not "0" */
  int32_t n_cls;             /* classes: distinct targets x n_stop */
  int32_t cls_tgt[EF_MAXCLS];        /* class c: target */
  int8_t cls_a2[EF_MAXCLS];          /* ... and stop choice a2 */
  int8_t cls_of[EF_MAXN * EF_MAXN];  /* (a0 * EF_MAXN + a1): class of (a0, a1, a2 = 0); class = that + a2 */
  uint32_t spec_off;         /* ef_spec_area: aliases the partial tiles (free during phase D) */
};

/* One speculative step of an owned row: the state after it (and the restart), its record and the
 * account features of that state (bf16, packed as the account tile). */
struct ef_spec {
  uint4 acc;
  fh_env_state s;
  fh_eval_rec rec;
};
static_assert(sizeof(fh_env_state) % 8 == 0 && sizeof(fh_eval_rec) % 8 == 0, "ef_commit copies 8-byte words");

/* At P.spec_off: the greedy action of each owned row's branches (from the expected-Q warps), then the
 * EF_OWN x n_cls slots. */
struct ef_spec_area {
  int32_t act[EF_OWN][4];
  ef_spec slot[1]; /* [EF_OWN * n_cls] */
};
static_assert(FH_MAX_BRANCHES <= 4, "ef_spec_area.act");

__device__ __forceinline__ uint32_t ef_lds32(const fh_bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

/* This block's units [u0, u0 + NU) of a layer, NU = ceil(U / EF_C) for every block (units past U are
 * padding: zero weight rows, never stored); nu = the real ones (may be <= 0). */
__device__ __forceinline__ void ef_units(const ef_layer& Ly, int rank, int& u0, int& nu) {
  u0 = rank * Ly.NU;
  nu = Ly.U - u0 < Ly.NU ? Ly.U - u0 : Ly.NU;
}

/* ---- the exchange between the cluster's blocks (the XA instances): every push is an st.async into the destination block's
 * shared memory that completes bytes on that block's mbarrier of the phase (EF_BAR_*); a block waits only for the
 * bytes it receives (ef_xwait), with no release fence on the sending side and no cluster-wide barrier. Each
 * mbarrier completes one phase per step. A block never overwrites data another block has still to read: it pushes
 * a step's a2, ah or logits only after the accounts of that step arrived from every row's owner, which each sent
 * only after the logits of the step before arrived from every block, which each sent after reading its a2 and ah
 * of that step (release on complete_tx, acquire in the wait, so the chain orders them). */
#define EF_BAR_A2 0
#define EF_BAR_AH 1
#define EF_BAR_LOG 2
#define EF_BAR_ACC 3
#define EF_NXBAR 4 /* the exchange's */
#define EF_BAR_P1 4 /* the P1 rows' bulk copies (every instance) */
#define EF_NBAR 5

__device__ __forceinline__ void ef_mbar_init(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
/* the phase's one arrival, expecting `bytes` of pushes */
__device__ __forceinline__ void ef_mbar_arm(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void ef_mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

/* 16 bytes at this block's shared address `local` into the same place of block k (XA: st.async completing on
 * block k's mbarrier `bar`; else a generic store, ordered by the cluster barrier after the phase). XA is the kernel's
 * template argument (FH_EVAL_XASYNC picks the instance at launch), so that neither instance carries the other's code. */
template <bool XA>
__device__ __forceinline__ void ef_push16(const ef_params& P, cg::cluster_group& cl, unsigned char* sm, void* local,
                                          int k, int bar, uint4 v) {
  if (XA) {
    const uint32_t dst = fh_mapa(fh_smem_addr(local), k), mb = fh_mapa(fh_smem_addr(sm + P.bar_off + 8 * bar), k);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(dst),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(mb)
                 : "memory");
  } else {
    *reinterpret_cast<uint4*>(cl.map_shared_rank(local, k)) = v;
  }
}

/* 8 bytes (two fp32) at this block's shared address `local` into the same place of block k, by st.async */
__device__ __forceinline__ void ef_push8(const ef_params& P, unsigned char* sm, float* local, int k, int bar, float x,
                                         float y) {
  const uint32_t dst = fh_mapa(fh_smem_addr(local), k), mb = fh_mapa(fh_smem_addr(sm + P.bar_off + 8 * bar), k);
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(dst), "f"(x),
               "f"(y), "r"(mb)
               : "memory");
}

/* Bytes a block receives per phase of mbarrier `bar` (XA): 16 rows of every real unit of a2 / ah from the
 * blocks that own the units; the logits of its owned rows that are segments; 8 bf16 account features of
 * every tile row that is a segment. Zero (the logits of a block whose owned rows are all past S): the block
 * neither arms nor waits on that mbarrier, whose phase would otherwise complete as it is armed, while the
 * block's other threads may still be waiting on the phase before (by parity). */
__device__ __forceinline__ uint32_t ef_bar_bytes(const ef_params& P, int m, int rank, int bar) {
  if (bar == EF_BAR_A2 || bar == EF_BAR_AH) return (uint32_t)(EF_MT * P.L[bar].U * 16);
  const int rows = P.S - m * EF_MT < EF_MT ? P.S - m * EF_MT : EF_MT;
  if (bar == EF_BAR_ACC) return (uint32_t)(rows * 16);
  int own = 0;
  for (int o = 0; o < EF_OWN; ++o) own += rank + EF_C * o < rows;
  return (uint32_t)(own * P.L[2].U * 32);
}

/* After a phase's pushes: XA: wait for this block's bytes of the phase (parity: the phase's, flipped here),
 * re-arm the mbarrier for the next step and join the block's threads (the partial tiles and the speculative
 * slots are reused in the next phase); else the cluster barrier. */
template <bool XA>
__device__ __forceinline__ void ef_xwait(const ef_params& P, cg::cluster_group& cl, unsigned char* sm, int m, int rank,
                                         int bar, uint32_t& parity) {
  if (!XA) {
    cl.sync();
    return;
  }
  const uint32_t mb = fh_smem_addr(sm + P.bar_off + 8 * bar), bytes = ef_bar_bytes(P, m, rank, bar);
  if (bytes) {
    ef_mbar_wait(mb, parity);
    parity ^= 1u;
    if (threadIdx.x == 0) ef_mbar_arm(mb, bytes);
  }
  __syncthreads();
}

__device__ __forceinline__ const ef_seg& ef_find_seg(const ef_layer& Ly, int c) {
  int s = 0;
  while (s + 1 < Ly.nseg && c >= Ly.seg[s].c1) ++s;
  return Ly.seg[s];
}

/* Once per kernel: this block's NU units' weight rows (zero-padded to pad16(K); zero rows past the
 * layer), fp32 biases and input column offsets. */
__device__ void ef_load_weights(const ef_layer& Ly, int rank, unsigned char* sm) {
  int u0, nu;
  ef_units(Ly, rank, u0, nu);
  fh_bf16* sw = reinterpret_cast<fh_bf16*>(sm + Ly.w_off);
  float* sb = reinterpret_cast<float*>(sm + Ly.b_off);
  int32_t* sa = reinterpret_cast<int32_t*>(sm + Ly.a_off_sm);
  const int rows = Ly.NU * 8, cpr = Ly.ws / 8;
  for (int idx = threadIdx.x; idx < rows * cpr; idx += EF_THREADS) {
    const int r = idx / cpr, k = (idx % cpr) * 8, c = u0 * 8 + r;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (k < Ly.K && r < nu * 8) {
      const ef_seg& sg = ef_find_seg(Ly, c);
      v = *reinterpret_cast<const uint4*>(sg.W + (int64_t)(c - sg.c0) * Ly.K + k);
    }
    *reinterpret_cast<uint4*>(sw + r * Ly.ws + k) = v;
  }
  for (int r = threadIdx.x; r < rows; r += EF_THREADS) {
    const int c = u0 * 8 + r;
    float b = 0.0f;
    if (r < nu * 8) {
      const ef_seg& sg = ef_find_seg(Ly, c);
      b = sg.b16 ? __bfloat162float(sg.b16[c - sg.c0]) : sg.b32[c - sg.c0];
    }
    sb[r] = b;
  }
  for (int u = threadIdx.x; u < Ly.NU; u += EF_THREADS) sa[u] = u < nu ? ef_find_seg(Ly, (u0 + u) * 8).a_off : 0;
}

/* Cursor of row r (< S) at step i. */
__device__ __forceinline__ int64_t ef_cursor(const int32_t* sseg, int j, int step) {
  const int32_t b = sseg[2 * j], len = sseg[2 * j + 1];
  return (int64_t)b + (step < len - 1 ? step : len - 1);
}

/* Tile m's P1 rows of step `step`, those that are segments: one bulk copy (cp.async.bulk, the copy engine) of a whole
 * row each, from lanes 0 .. 15 of warp 0, completing on the P1 mbarrier, which lane 0 arms first with their bytes
 * (rows past S keep the zeros of the kernel's start). The step's wait is ef_p1_wait's. Issued once every thread has
 * read the tile's rows of the step before (the block barrier after ef_build_h1). */
__device__ __forceinline__ void ef_prefetch_p1(const ef_params& P, int m, int step, const int32_t* sseg,
                                               unsigned char* sm) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x, rows = P.S - m * EF_MT < EF_MT ? P.S - m * EF_MT : EF_MT;
  const uint32_t bytes = (uint32_t)P.h1 * 4, mb = fh_smem_addr(sm + P.bar_off + 8 * EF_BAR_P1);
  if (lane == 0) ef_mbar_arm(mb, bytes * (uint32_t)rows);
  __syncwarp();
  if (lane < rows) {
    const float* src = P.p1 + (ef_cursor(sseg, lane, step) - P.ea.val_begin) * (int64_t)P.h1;
    const uint32_t dst = fh_smem_addr(sm + P.p1_off + (uint32_t)(lane * P.p1s) * 4);
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(mb)
                 : "memory");
  }
}

/* Every thread: the P1 rows of this step have landed (the parity of the step's phase, flipped here). */
__device__ __forceinline__ void ef_p1_wait(const ef_params& P, unsigned char* sm, uint32_t& parity) {
  ef_mbar_wait(fh_smem_addr(sm + P.bar_off + 8 * EF_BAR_P1), parity);
  parity ^= 1u;
}

/* Phase A's first half: the 16 x h1 tile of layer 1 (all threads; P1 landed, accounts in place). */
__device__ void ef_build_h1(const ef_params& P, unsigned char* sm) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float* p1 = reinterpret_cast<const float*>(sm + P.p1_off);
  const fh_bf16* wacc = reinterpret_cast<const fh_bf16*>(sm + P.wacc_off);
  const float* b1 = reinterpret_cast<const float*>(sm + P.b1_off);
  const fh_bf16* acc = reinterpret_cast<const fh_bf16*>(sm + P.acc_off);
  fh_bf16* h1 = reinterpret_cast<fh_bf16*>(sm + P.L[0].in_off);
  const int hs = P.L[0].in_s;
  const uint32_t a0 = ef_lds32(acc + g * 8 + 2 * t), a1 = ef_lds32(acc + (g + 8) * 8 + 2 * t);
  for (int u = warp; u < P.h1 / 8; u += EF_WARPS) {
    const int c = u * 8 + 2 * t;
    float d[4];
    d[0] = p1[g * P.p1s + c] + b1[c];
    d[1] = p1[g * P.p1s + c + 1] + b1[c + 1];
    d[2] = p1[(g + 8) * P.p1s + c] + b1[c];
    d[3] = p1[(g + 8) * P.p1s + c + 1] + b1[c + 1];
    fh_mma_bf16_k8(d, a0, a1, ef_lds32(wacc + (u * 8 + g) * 8 + 2 * t));
    *reinterpret_cast<uint32_t*>(h1 + g * hs + c) = fh_pack_bf16x2(fmaxf(d[0], 0.0f), fmaxf(d[1], 0.0f));
    *reinterpret_cast<uint32_t*>(h1 + (g + 8) * hs + c) = fh_pack_bf16x2(fmaxf(d[2], 0.0f), fmaxf(d[3], 0.0f));
  }
}

/* One layer on tile m: this block's NU units of every tile row, from the input tile in this block's
 * shared memory, into the next layer's tile of every block of the cluster (relu) or into the
 * logits rows of the rows' owners (all threads of the block). NU is a compile-time count; SEG: the
 * units read different input columns (the block-diagonal output layer). */
template <int NU, bool SEG, bool XA>
__device__ void ef_layer_units(const ef_params& P, const ef_layer& Ly, int m, int rank, unsigned char* sm,
                               cg::cluster_group& cl) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int u0, nu;
  ef_units(Ly, rank, u0, nu);
  if (nu <= 0) return; /* uniform over the block; the caller's barrier follows */
  const fh_bf16* sA = reinterpret_cast<const fh_bf16*>(sm + Ly.in_off);
  const int as = Ly.in_s, ws = Ly.ws;
  const fh_bf16* sW = reinterpret_cast<const fh_bf16*>(sm + Ly.w_off);
  const int32_t* sa = reinterpret_cast<const int32_t*>(sm + Ly.a_off_sm);
  float acc[NU][4];
  int aoff[NU];
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
    aoff[u] = SEG ? sa[u] : 0;
  }
  for (int ks = warp; ks < Ly.ksteps; ks += EF_WARPS) {
    const int k0 = ks * 16 + 2 * t;
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      if (u == 0 || SEG) {
        const fh_bf16* pa = sA + aoff[u] + k0;
        a0 = ef_lds32(pa + g * as);
        a1 = ef_lds32(pa + (g + 8) * as);
        a2 = ef_lds32(pa + g * as + 8);
        a3 = ef_lds32(pa + (g + 8) * as + 8);
      }
      const fh_bf16* pb = sW + (u * 8 + g) * ws + k0;
      fh_mma_bf16(acc[u], a0, a1, a2, a3, ef_lds32(pb), ef_lds32(pb + 8));
    }
  }
  float* part = reinterpret_cast<float*>(sm + P.part_off);
  float* mine = part + warp * EF_MT * P.ps;
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    const int c = u * 8 + 2 * t;
    *reinterpret_cast<float2*>(mine + g * P.ps + c) = make_float2(acc[u][0], acc[u][1]);
    *reinterpret_cast<float2*>(mine + (g + 8) * P.ps + c) = make_float2(acc[u][2], acc[u][3]);
  }
  __syncthreads();
  /* epilogue: one (row, unit of 8 columns) per thread; partials summed in warp order, then the bias;
   * 16-byte stores into the destination blocks' shared memory */
  const float* sb = reinterpret_cast<const float*>(sm + Ly.b_off);
  for (int idx = tid; idx < EF_MT * NU; idx += EF_THREADS) {
    const int r = idx / NU, u = idx % NU;
    if (u >= nu) continue;
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < EF_WARPS; ++w) {
      const float4* pw = reinterpret_cast<const float4*>(part + (w * EF_MT + r) * P.ps + u * 8);
      const float4 x = pw[0], y = pw[1];
      v[0] += x.x; v[1] += x.y; v[2] += x.z; v[3] += x.w;
      v[4] += y.x; v[5] += y.y; v[6] += y.z; v[7] += y.w;
    }
    const float4 b0 = *reinterpret_cast<const float4*>(sb + u * 8), b1 = *reinterpret_cast<const float4*>(sb + u * 8 + 4);
    v[0] += b0.x; v[1] += b0.y; v[2] += b0.z; v[3] += b0.w;
    v[4] += b1.x; v[5] += b1.y; v[6] += b1.z; v[7] += b1.w;
    const int col = (u0 + u) * 8;
    if (Ly.relu) {
      uint4 h;
      h.x = fh_pack_bf16x2(fmaxf(v[0], 0.0f), fmaxf(v[1], 0.0f));
      h.y = fh_pack_bf16x2(fmaxf(v[2], 0.0f), fmaxf(v[3], 0.0f));
      h.z = fh_pack_bf16x2(fmaxf(v[4], 0.0f), fmaxf(v[5], 0.0f));
      h.w = fh_pack_bf16x2(fmaxf(v[6], 0.0f), fmaxf(v[7], 0.0f));
      fh_bf16* local = reinterpret_cast<fh_bf16*>(sm + Ly.out_off) + r * Ly.out_s + col;
#pragma unroll
      for (int k = 0; k < EF_C; ++k) ef_push16<XA>(P, cl, sm, local, k, Ly.xbar, h);
    } else if (m * EF_MT + r < P.S) {
      float* local = reinterpret_cast<float*>(sm + Ly.out_off) + (r / EF_C) * Ly.out_s + col;
      ef_push16<XA>(P, cl, sm, local, r % EF_C, Ly.xbar,
                make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
      ef_push16<XA>(P, cl, sm, local + 4, r % EF_C, Ly.xbar,
                make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7])));
    }
  }
}

/* ef_layer_units with the block's unit count (1 .. EF_MAXU) as a compile-time constant. */
template <bool SEG, bool XA>
__device__ void ef_layer_tile(const ef_params& P, const ef_layer& Ly, int m, int rank, unsigned char* sm,
                              cg::cluster_group& cl) {
  switch (Ly.NU) {
#define EF_CASE(n) \
  case n:          \
    ef_layer_units<n, SEG, XA>(P, Ly, m, rank, sm, cl); \
    break;
    EF_CASE(1) EF_CASE(2) EF_CASE(3) EF_CASE(4) EF_CASE(5) EF_CASE(6)
    EF_CASE(7) EF_CASE(8) EF_CASE(9) EF_CASE(10) EF_CASE(11) EF_CASE(12)
#undef EF_CASE
    default: break; /* setup keeps NU in 1 .. EF_MAXU */
  }
}

/* One layer on tile m split by this block's units over the warps instead of by K (NS, with the st.async exchange):
 * warp w computes units w, w + EF_WARPS, ... over the whole K, the mma accumulating in K order, so there are no
 * partial tiles, no block barrier and no summing pass; the bias (+ ReLU) is added in registers and the pushes go
 * straight from the fragments. relu: a quad of lanes gathers each of its two rows' 8 bf16 columns (16 bytes) by
 * shuffles and its lanes push them to blocks t, t + 4, ...; logits: each lane pushes its two fp32 columns of rows g
 * and g + 8 (8 bytes) to the row's owner. The same bytes as ef_layer_units, so the same mbarrier counts; the sums run
 * in another order (the mma's accumulation instead of the warp-ordered partial tiles), so the results agree with it
 * to float rounding, not bit for bit.
 * KS = 2 (a block with at most EF_WARPS / 2 units, trunk 2 at the reference: 4 units over a K of 512): the units over
 * warps 0 .. 3 and K's two halves over warps w and w + 4; the second half's fragments go through the partial area
 * (free here: the speculative slots alias it only in phase D) to warp w, joined by a named barrier of the warps that
 * have a unit, and warp w adds them to its own and finishes the unit. */
template <bool SEG, int KS>
__device__ void ef_layer_units_ns(const ef_params& P, const ef_layer& Ly, int m, int rank, unsigned char* sm) {
  static_assert(KS == 1 || KS == 2, "K in one part or two halves");
  constexpr int NW = EF_WARPS / KS; /* warps per part of K */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int half = warp / NW, w = warp % NW;
  int u0, nu;
  ef_units(Ly, rank, u0, nu);
  const fh_bf16* sA = reinterpret_cast<const fh_bf16*>(sm + Ly.in_off);
  const fh_bf16* sW = reinterpret_cast<const fh_bf16*>(sm + Ly.w_off);
  const int32_t* sa = reinterpret_cast<const int32_t*>(sm + Ly.a_off_sm);
  const float* sb = reinterpret_cast<const float*>(sm + Ly.b_off);
  const int as = Ly.in_s, ws = Ly.ws;
  const int kb = KS == 1 ? 0 : half * (Ly.ksteps / 2), ke = KS == 1 || half ? Ly.ksteps : Ly.ksteps / 2;
  for (int u = w; u < nu; u += NW) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const fh_bf16* pa = sA + (SEG ? sa[u] : 0) + 2 * t;
    const fh_bf16* pb = sW + (u * 8 + g) * ws + 2 * t;
#pragma unroll 4
    for (int ks = kb; ks < ke; ++ks) {
      const int k0 = ks * 16;
      fh_mma_bf16(acc, ef_lds32(pa + g * as + k0), ef_lds32(pa + (g + 8) * as + k0), ef_lds32(pa + g * as + k0 + 8),
                  ef_lds32(pa + (g + 8) * as + k0 + 8), ef_lds32(pb + k0), ef_lds32(pb + k0 + 8));
    }
    if (KS == 2) {
      float4* xp = reinterpret_cast<float4*>(sm + P.part_off) + w * 32 + lane;
      if (half) *xp = make_float4(acc[0], acc[1], acc[2], acc[3]);
      /* the warps with a unit, both halves (nu <= NW: one unit each, so every one arrives once) */
      asm volatile("bar.sync 1, %0;" ::"r"(2 * 32 * nu) : "memory");
      if (half) continue;
      const float4 x = *xp;
      acc[0] += x.x;
      acc[1] += x.y;
      acc[2] += x.z;
      acc[3] += x.w;
    }
    const float b0 = sb[u * 8 + 2 * t], b1 = sb[u * 8 + 2 * t + 1];
    const float v0 = acc[0] + b0, v1 = acc[1] + b1, v2 = acc[2] + b0, v3 = acc[3] + b1;
    const int col = (u0 + u) * 8;
    if (Ly.relu) {
      const uint32_t lo = fh_pack_bf16x2(fmaxf(v0, 0.0f), fmaxf(v1, 0.0f));
      const uint32_t hi = fh_pack_bf16x2(fmaxf(v2, 0.0f), fmaxf(v3, 0.0f));
      uint32_t x[4], y[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        x[j] = __shfl_sync(0xffffffffu, lo, (lane & ~3) | j);
        y[j] = __shfl_sync(0xffffffffu, hi, (lane & ~3) | j);
      }
      const uint4 rg = make_uint4(x[0], x[1], x[2], x[3]), rg8 = make_uint4(y[0], y[1], y[2], y[3]);
      fh_bf16* out = reinterpret_cast<fh_bf16*>(sm + Ly.out_off) + col;
      cg::cluster_group cl = cg::this_cluster();
      for (int k = t; k < EF_C; k += 4) {
        ef_push16<true>(P, cl, sm, out + g * Ly.out_s, k, Ly.xbar, rg);
        ef_push16<true>(P, cl, sm, out + (g + 8) * Ly.out_s, k, Ly.xbar, rg8);
      }
    } else {
      float* out = reinterpret_cast<float*>(sm + Ly.out_off) + col + 2 * t;
      if (m * EF_MT + g < P.S) ef_push8(P, sm, out + (g / EF_C) * Ly.out_s, g % EF_C, Ly.xbar, v0, v1);
      if (m * EF_MT + g + 8 < P.S)
        ef_push8(P, sm, out + ((g + 8) / EF_C) * Ly.out_s, (g + 8) % EF_C, Ly.xbar, v2, v3);
    }
  }
}

/* fh_eval_greedy's argmax of one branch (lowest index on ties) over the n (>= 1) values it would read
 * back from shared memory: the same comparisons on the same floats. */
template <int MAXN>
__device__ __forceinline__ int32_t ef_argmax(const float* v, int n) {
  int32_t best_a = 0;
  float best = v[0];
#pragma unroll
  for (int a = 1; a < MAXN; ++a)
    if (a < n && v[a] > best) {
      best = v[a];
      best_a = a;
    }
  return best_a;
}

/* Expected Q of every action of one branch of one row from its logits in shared memory (value row
 * vrow, advantage rows arow: n x atoms), one warp, the reductions of all actions side by side: the
 * math of fh_dev_expected_q_r (net_device.cuh) per action with fast exp / FMA / division (the fused path
 * agrees with the cuBLASLt loop to float rounding anyway, not bit for bit). Lane 0 writes q[a] (and, when
 * amax is not NULL, the branch's greedy action). */
template <int MAXN>
__device__ __forceinline__ void ef_branch_q(const float* vrow, const float* arow, int n, int atoms, float v_min,
                                            float v_max, int lane, float* q, float* q_log, int32_t* amax) {
  float x[MAXN][FH_ATOMS_PER_LANE];
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    const int j = lane + 32 * k;
    float mean = 0.0f, v = 0.0f;
    if (j < atoms) {
      for (int b = 0; b < n; ++b) mean += arow[b * atoms + j];
      mean /= (float)n; /* as fh_dueling_combine */
      v = vrow[j];
    }
#pragma unroll
    for (int a = 0; a < MAXN; ++a) x[a][k] = j < atoms && a < n ? v + arow[a * atoms + j] - mean : -INFINITY;
  }
  float mx[MAXN], se[MAXN], sa[MAXN];
#pragma unroll
  for (int a = 0; a < MAXN; ++a) mx[a] = fmaxf(x[a][0], x[a][1]);
#pragma unroll
  for (int a = 0; a < MAXN; ++a) mx[a] = fh_warp_max(mx[a]);
  if (atoms <= 1) {
#pragma unroll
    for (int a = 0; a < MAXN; ++a) se[a] = __shfl_sync(0xffffffffu, x[a][0], 0);
    if (lane == 0) {
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
        if (a < n) {
          q[a] = se[a];
          if (q_log) q_log[a] = se[a];
        }
      if (amax) *amax = ef_argmax<MAXN>(se, n);
    }
    return;
  }
  float z[FH_ATOMS_PER_LANE];
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) z[k] = fh_c51_support(atoms, v_min, v_max, lane + 32 * k);
#pragma unroll
  for (int a = 0; a < MAXN; ++a) {
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int k = 0; k < FH_ATOMS_PER_LANE; ++k)
      if (lane + 32 * k < atoms) {
        const float e = __expf(x[a][k] - mx[a]);
        sum += e;
        acc = __fmaf_rn(e, z[k], acc);
      }
    se[a] = sum;
    sa[a] = acc;
  }
#pragma unroll
  for (int a = 0; a < MAXN; ++a) {
    sa[a] = fh_warp_sum(sa[a]);
    se[a] = fh_warp_sum(se[a]);
  }
  if (lane == 0) {
    float qv[MAXN];
#pragma unroll
    for (int a = 0; a < MAXN; ++a)
      if (a < n) {
        qv[a] = __fdividef(sa[a], se[a]);
        q[a] = qv[a];
        if (q_log) q_log[a] = qv[a];
      }
    if (amax) *amax = ef_argmax<MAXN>(qv, n);
  }
}

/* The speculative env step (P.spec), beside the expected Q: warp EF_OWN * nb + o (idle otherwise: the
 * expected Q has EF_OWN * nb warp tasks) steps owned row o from its state with every class c of actions,
 * lane c: the step depends on the action only through (target, a2), so the classes are the distinct
 * targets of (a0, a1) times the n_stop stop choices (9 at the reference). The lanes share one round of
 * loads of bars t and t+1 (fh_eval_bars) instead of the step's chain of dependent global loads, run
 * fh_eval_step_one's arithmetic (fh_eval_step_rec) and the account features, and leave state, record
 * and packed account in slot c; nothing global is written (ef_commit books the greedy class). A row that
 * does not step this time (its segment has ended) gets the account of its unchanged state in slot 0. */
__device__ void ef_speculate(const ef_params& P, int m, int rank, int step, unsigned char* sm) {
  const int lane = threadIdx.x & 31, o = (threadIdx.x >> 5) - EF_OWN * P.nb;
  if (o < 0 || o >= EF_OWN) return;
  const int j = rank + EF_C * o;
  if (m * EF_MT + j >= P.S) return;
  const fh_eval_args& a = P.ea;
  const fh_env_state s0 = reinterpret_cast<const fh_env_state*>(sm + P.st_off)[o];
  const int32_t* sseg = reinterpret_cast<const int32_t*>(sm + P.seg_off);
  ef_spec* slot = reinterpret_cast<ef_spec_area*>(sm + P.spec_off)->slot + o * P.n_cls;
  float f[FH_ENV_ACCOUNT];
  if (step < sseg[2 * j + 1] - 1) {
    const fh_eval_bars bars = fh_eval_load_bars(a.m, s0.t);
    if (lane < P.n_cls) {
      fh_env_state s = s0;
      fh_eval_rec rec;
      fh_eval_step_rec(bars, a.p, s, P.cls_tgt[lane], P.cls_a2[lane], rec);
      fh_env_account_at(bars, a.p, s, f);
      slot[lane].acc = fh_pack_bf16x8(f);
      slot[lane].s = s;
      slot[lane].rec = rec;
    }
  } else if (lane == 0) {
    fh_env_account(a.m, a.p, s0, f);
    slot[0].acc = fh_pack_bf16x8(f);
  }
}

/* Phase D's booking with P.spec (after the block barrier): warp o books owned row o's greedy step from
 * its slot: the class of the greedy actions (ef_branch_q's argmax per branch), then lanes copy the state
 * (8-byte words), store the record to bar t+1 and the account features into block `lane`'s tile. */
template <bool XA>
__device__ void ef_commit(const ef_params& P, int m, int rank, int step, unsigned char* sm, cg::cluster_group& cl) {
  constexpr int NS = (int)sizeof(fh_env_state) / 8, NR = (int)sizeof(fh_eval_rec) / 8;
  static_assert(EF_C + NS + NR <= 32, "one warp copies a slot");
  const int lane = threadIdx.x & 31, o = threadIdx.x >> 5;
  if (o >= EF_OWN) return;
  const int j = rank + EF_C * o;
  if (m * EF_MT + j >= P.S) return;
  const int32_t* sseg = reinterpret_cast<const int32_t*>(sm + P.seg_off);
  const ef_spec_area* ar = reinterpret_cast<const ef_spec_area*>(sm + P.spec_off);
  const bool stepped = step < sseg[2 * j + 1] - 1;
  int c = 0;
  if (stepped) c = P.cls_of[ar->act[o][0] * EF_MAXN + ar->act[o][1]] + ar->act[o][2];
  const ef_spec& sp = ar->slot[o * P.n_cls + c];
  if (lane < EF_C) {
    fh_bf16* local = reinterpret_cast<fh_bf16*>(sm + P.acc_off) + j * FH_ENV_ACCOUNT;
    ef_push16<XA>(P, cl, sm, local, lane, EF_BAR_ACC, sp.acc);
  } else if (stepped && lane < EF_C + NS) {
    fh_env_state* st = reinterpret_cast<fh_env_state*>(sm + P.st_off) + o;
    reinterpret_cast<uint64_t*>(st)[lane - EF_C] = reinterpret_cast<const uint64_t*>(&sp.s)[lane - EF_C];
  } else if (stepped && lane < EF_C + NS + NR) {
    fh_eval_rec* dst = P.ea.bar_rec + (sp.s.t - P.ea.val_begin);
    reinterpret_cast<uint64_t*>(dst)[lane - EF_C - NS] = reinterpret_cast<const uint64_t*>(&sp.rec)[lane - EF_C - NS];
  }
}

/* Phase D for this block's rows of tile m: expected Q, greedy step `step` (step < 0: none, the
 * prologue), and the new account features into every block's account tile. P.spec: the step is
 * ef_speculate's beside the expected Q and ef_commit's copy; else one thread per row steps after it. */
template <bool XA>
__device__ void ef_rows(const ef_params& P, int m, int rank, int step, unsigned char* sm, cg::cluster_group& cl,
                        long long* prof) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const fh_eval_args& a = P.ea;
  const float* logits = reinterpret_cast<const float*>(sm + P.log_off);
  float* sq = reinterpret_cast<float*>(sm + P.q_off);
  fh_env_state* st = reinterpret_cast<fh_env_state*>(sm + P.st_off);
  const int32_t* sseg = reinterpret_cast<const int32_t*>(sm + P.seg_off);
  const bool spec = P.spec && step >= 0;
  if (step >= 0) {
    /* P.prof: block 0's thread 0 times the phase up to the block barrier (slot 9), lane 0 of warp 0 its own
     * expected-Q task (10) and lane 0 of the first speculating warp its speculative steps (11) */
    const bool pb = prof != nullptr && blockIdx.x == 0 && lane == 0;
    const long long t0 = pb ? clock64() : 0;
    ef_spec_area* ar = reinterpret_cast<ef_spec_area*>(sm + P.spec_off);
    for (int task = warp; task < EF_OWN * P.nb; task += EF_WARPS) {
      const int o = task / P.nb, d = task % P.nb, j = rank + EF_C * o, r = m * EF_MT + j;
      if (r >= P.S) continue;
      const float* srow = logits + o * P.lot;
      const int q0 = P.qa.q_off[d];
      float* ql = P.q_log ? P.q_log + ((int64_t)step * P.S + r) * P.nq + q0 : nullptr;
      int32_t* amax = spec ? &ar->act[o][d] : nullptr;
      if (P.maxn <= 4)
        ef_branch_q<4>(srow, srow + P.abase[d], P.n[d], P.atoms, P.v_min, P.v_max, lane, sq + o * EF_MAXQ + q0, ql,
                       amax);
      else
        ef_branch_q<EF_MAXN>(srow, srow + P.abase[d], P.n[d], P.atoms, P.v_min, P.v_max, lane, sq + o * EF_MAXQ + q0,
                             ql, amax);
    }
    if (pb && warp == 0) prof[10] += clock64() - t0;
    if (spec) {
      ef_speculate(P, m, rank, step, sm);
      if (pb && warp == EF_OWN * P.nb) prof[11] += clock64() - t0;
    }
    __syncthreads();
    if (pb && warp == 0) prof[9] += clock64() - t0;
  }
  if (spec) {
    ef_commit<XA>(P, m, rank, step, sm, cl);
    return;
  }
  if (lane == 0 && warp < EF_OWN) {
    const int o = warp, j = rank + EF_C * o, r = m * EF_MT + j;
    if (r < P.S) {
      fh_env_state s = st[o];
      if (step >= 0 && step < sseg[2 * j + 1] - 1) {
        int32_t act[FH_MAX_BRANCHES];
        fh_eval_greedy(P.qa, sq + o * EF_MAXQ, act);
        fh_eval_step_one(a, s, act[0], act[1], act[2]);
        st[o] = s;
      }
      float f[FH_ENV_ACCOUNT];
      fh_env_account(a.m, a.p, s, f);
      const uint4 v = fh_pack_bf16x8(f);
      fh_bf16* local = reinterpret_cast<fh_bf16*>(sm + P.acc_off) + j * FH_ENV_ACCOUNT;
#pragma unroll
      for (int k = 0; k < EF_C; ++k) ef_push16<XA>(P, cl, sm, local, k, EF_BAR_ACC, v);
    }
  }
}

/* P.prof (tests): block 0's thread 0 adds the cycles of each phase: 0 = P1 wait + h1, 1 = L2, 2 = the
 * barrier after it, 3/4 = LH, 5/6 = LO, 7/8 = expected Q + step, 9 = the expected-Q part of 7 (to the block
 * barrier), 10 = warp 0's own expected-Q task, 11 = the first speculating warp's steps (ef_rows). */
template <bool XA, int NS>
static __global__ void __launch_bounds__(EF_THREADS, 1) eval_fused_kernel(const __grid_constant__ ef_params P) {
  static_assert(XA || NS == 0, "the units split pushes by st.async");
  extern __shared__ __align__(16) unsigned char sm[];
  __shared__ long long s_prof[EF_NPROF];
  cg::cluster_group cl = cg::this_cluster();
  const int rank = (int)cl.block_rank(), m = blockIdx.x / EF_C;
  const bool prof = P.prof != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  if (threadIdx.x < EF_NPROF) s_prof[threadIdx.x] = 0;
  /* weights, W1's account columns, b1, the tile's segments, the owned rows' states, zero accounts */
  for (int l = 0; l < 3; ++l) ef_load_weights(P.L[l], rank, sm);
  {
    fh_bf16* wacc = reinterpret_cast<fh_bf16*>(sm + P.wacc_off);
    float* b1 = reinterpret_cast<float*>(sm + P.b1_off);
    for (int c = threadIdx.x; c < P.h1; c += EF_THREADS) {
      *reinterpret_cast<uint4*>(wacc + c * 8) = *reinterpret_cast<const uint4*>(P.w1 + (int64_t)c * P.D + P.wm);
      b1[c] = __bfloat162float(P.b1[c]);
    }
    int32_t* sseg = reinterpret_cast<int32_t*>(sm + P.seg_off);
    for (int j = threadIdx.x; j < EF_MT; j += EF_THREADS) {
      const int r = m * EF_MT + j;
      sseg[2 * j] = r < P.S ? P.ea.seg_begin[r] : 0;
      sseg[2 * j + 1] = r < P.S ? P.ea.seg_end[r] - P.ea.seg_begin[r] : 1;
    }
    fh_bf16* acc = reinterpret_cast<fh_bf16*>(sm + P.acc_off);
    for (int i = threadIdx.x; i < EF_MT * FH_ENV_ACCOUNT; i += EF_THREADS) acc[i] = __float2bfloat16_rn(0.0f);
    float* p1 = reinterpret_cast<float*>(sm + P.p1_off);
    for (int i = threadIdx.x; i < EF_MT * P.p1s; i += EF_THREADS) p1[i] = 0.0f;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* the zeros before the bulk copies' writes */
    fh_env_state* st = reinterpret_cast<fh_env_state*>(sm + P.st_off);
    if (threadIdx.x < EF_OWN) {
      const int r = m * EF_MT + rank + EF_C * threadIdx.x;
      if (r < P.S) st[threadIdx.x] = P.ea.state[r];
    }
    if (threadIdx.x == 0) {
      for (int b = 0; b < EF_NBAR; ++b) ef_mbar_init(fh_smem_addr(sm + P.bar_off + 8 * b));
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      for (int b = 0; b < (XA ? EF_NXBAR : 0); ++b) {
        const uint32_t bytes = ef_bar_bytes(P, m, rank, b);
        if (bytes) ef_mbar_arm(fh_smem_addr(sm + P.bar_off + 8 * b), bytes);
      }
    }
  }
  __syncthreads();
  const int32_t* sseg = reinterpret_cast<const int32_t*>(sm + P.seg_off);
  if (P.max_steps > 0) ef_prefetch_p1(P, m, 0, sseg, sm);
  cl.sync(); /* every block of the cluster runs, has zeroed its account tile and armed its mbarriers */
  uint32_t par[EF_NBAR] = {}; /* the parity of each mbarrier's phase to wait for (the exchange's: XA) */
  ef_rows<XA>(P, m, rank, -1, sm, cl, nullptr);
  ef_xwait<XA>(P, cl, sm, m, rank, EF_BAR_ACC, par[EF_BAR_ACC]);
  long long tp = clock64();
#define EF_MARK(slot)                  \
  if (prof) {                          \
    const long long now_ = clock64();  \
    s_prof[slot] += now_ - tp;         \
    tp = now_;                         \
  }
  for (int step = 0; step < P.max_steps; ++step) {
    ef_p1_wait(P, sm, par[EF_BAR_P1]);
    ef_build_h1(P, sm);
    __syncthreads();
    EF_MARK(0);
    if (step + 1 < P.max_steps) ef_prefetch_p1(P, m, step + 1, sseg, sm);
    if (NS == 2 && P.L[0].NU * 2 <= EF_WARPS)
      ef_layer_units_ns<false, 2>(P, P.L[0], m, rank, sm);
    else if (NS == 2)
      ef_layer_units_ns<false, 1>(P, P.L[0], m, rank, sm);
    else
      ef_layer_tile<false, XA>(P, P.L[0], m, rank, sm, cl);
    EF_MARK(1);
    ef_xwait<XA>(P, cl, sm, m, rank, EF_BAR_A2, par[EF_BAR_A2]);
    EF_MARK(2);
    if (NS)
      ef_layer_units_ns<false, 1>(P, P.L[1], m, rank, sm);
    else
      ef_layer_tile<false, XA>(P, P.L[1], m, rank, sm, cl);
    EF_MARK(3);
    ef_xwait<XA>(P, cl, sm, m, rank, EF_BAR_AH, par[EF_BAR_AH]);
    EF_MARK(4);
    if (NS)
      ef_layer_units_ns<true, 1>(P, P.L[2], m, rank, sm);
    else
      ef_layer_tile<true, XA>(P, P.L[2], m, rank, sm, cl);
    EF_MARK(5);
    ef_xwait<XA>(P, cl, sm, m, rank, EF_BAR_LOG, par[EF_BAR_LOG]);
    EF_MARK(6);
    ef_rows<XA>(P, m, rank, step, sm, cl, P.prof ? s_prof : nullptr);
    EF_MARK(7);
    ef_xwait<XA>(P, cl, sm, m, rank, EF_BAR_ACC, par[EF_BAR_ACC]);
    EF_MARK(8);
  }
#undef EF_MARK
  /* XA: every block has received all it waits for; none leaves while another's pushes may still be in flight */
  if (XA) cl.sync();
  if (threadIdx.x < EF_OWN) {
    const int r = m * EF_MT + rank + EF_C * threadIdx.x;
    if (r < P.S) P.ea.state[r] = reinterpret_cast<const fh_env_state*>(sm + P.st_off)[threadIdx.x];
  }
  if (prof)
    for (int i = 0; i < EF_NPROF; ++i) P.prof[i] = (unsigned long long)s_prof[i];
}

/* ---------------------------------------------------------------- host */

/* The kernel's instances, in one place for setup (attributes) and launch: [ns] with the exchange (XA), [3] the
 * barrier instance. */
typedef void (*ef_kernel_fn)(ef_params);
static const ef_kernel_fn EF_KERNELS[4] = {eval_fused_kernel<true, 0>, eval_fused_kernel<true, 1>,
                                           eval_fused_kernel<true, 2>, eval_fused_kernel<false, 0>};

void fh_eval_fused_free(fh_eval_fused* f) {
  if (!f) return;
  if (f->xval) cudaFree(f->xval);
  if (f->p1) cudaFree(f->p1);
  if (f->prof) cudaFree(f->prof);
  free(f->params);
  memset(f, 0, sizeof *f);
}

static fh_status ef_off(fh_eval_fused* f, const char* fmt, int a = 0, int b = 0) {
  snprintf(f->why, sizeof f->why, fmt, a, b);
  f->on = 0;
  return FH_OK;
}

static const fh_bf16* ef_sh(const fh_net* net, int64_t off) { return static_cast<const fh_bf16*>(net->online_sh) + off; }

static void ef_dense(ef_layer& Ly, int K, int N, const fh_bf16* W, const fh_bf16* b) {
  memset(&Ly, 0, sizeof Ly);
  Ly.K = K;
  Ly.U = N / 8;
  Ly.nseg = 1;
  Ly.seg[0].c0 = 0;
  Ly.seg[0].c1 = N;
  Ly.seg[0].W = W;
  Ly.seg[0].b16 = b;
  Ly.relu = 1;
}

/* Launch configuration of `clusters` clusters of EF_C blocks (attr: the caller's storage for the
 * cluster-dimension attribute the configuration points to). */
static cudaLaunchConfig_t ef_launch_config(int clusters, size_t smem, cudaStream_t s, cudaLaunchAttribute* attr) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = EF_C;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(clusters * EF_C));
  cfg.blockDim = dim3(EF_THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

fh_status fh_eval_fused_setup(fh_cuda_eval* ev, const fh_net* net, int want) {
  fh_eval_fused* f = &ev->fused;
  fh_eval_fused_free(f);
  if (want < 0) {
    const char* e = getenv("FH_EVAL_FUSED");
    want = !(e && strcmp(e, "0") == 0);
  }
  if (!want || ev->n_seg <= 0) return FH_OK;
  const fh_layout& L = net->L;
  if (net->op != FH_BF16) return ef_off(f, "deterministic (fp32) mode uses the cuBLASLt path");
  if (L.D % 8 || L.h1 % 8 || L.h2 % 8) return ef_off(f, "obs_dim, hidden1 and hidden2 must be multiples of 8");
  if (L.D - FH_ENV_ACCOUNT != ev->p.window * ev->view.n_features) return ef_off(f, "observation layout");
  if (L.hh % 16) return ef_off(f, "head_hidden must be a multiple of 16");
  if (L.atoms > FH_MAX_ATOMS_GPU) return ef_off(f, "atoms > %d", FH_MAX_ATOMS_GPU);
  if (net->nq > EF_MAXQ || L.n_branches != FH_MAX_BRANCHES) return ef_off(f, "more than %d actions or not 3 branches", EF_MAXQ);
  int dev = 0, smem_max = 0, major = 0;
  FH_CUDA_TRY(cudaGetDevice(&dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 9) return ef_off(f, "thread-block clusters need compute capability 9.0 or newer (this device: %d)", major);

  ef_params* P = static_cast<ef_params*>(calloc(1, sizeof(ef_params)));
  if (!P) return FH_ERR_OUT_OF_MEMORY;
  f->params = P;
  const int S = ev->n_seg;
  P->S = S;
  P->n_tiles = CEIL_DIV(S, EF_MT);
  P->max_steps = ev->max_steps;
  P->ea = fh_eval_make_args(*ev);
  P->qa = fh_eval_make_q(*ev);
  P->h1 = L.h1;
  P->D = L.D;
  P->wm = L.D - FH_ENV_ACCOUNT;
  P->w1 = ef_sh(net, L.W1);
  P->b1 = ef_sh(net, L.b1);

  const int HH = L.n_heads * L.hh;
  ef_dense(P->L[0], L.h1, L.h2, ef_sh(net, L.W2), ef_sh(net, L.b2));
  ef_dense(P->L[1], L.h2, HH, ef_sh(net, L.WH), ef_sh(net, L.bH));
  int lot = 0;
  for (int k = 0; k < L.n_heads; ++k) lot += L.out_pad[k];
  P->lot = lot;
  {
    ef_layer& Ly = P->L[2];
    memset(&Ly, 0, sizeof Ly);
    Ly.K = L.hh;
    Ly.U = lot / 8;
    Ly.nseg = L.n_heads;
    int c = 0;
    for (int k = 0; k < L.n_heads; ++k) {
      Ly.seg[k].c0 = c;
      Ly.seg[k].c1 = c + L.out_pad[k];
      Ly.seg[k].W = ef_sh(net, L.WO[k]);
      Ly.seg[k].b32 = net->online + L.bO[k];
      Ly.seg[k].a_off = k * L.hh;
      if (k > 0) P->abase[k - 1] = c;
      c += L.out_pad[k];
    }
    Ly.relu = 0;
  }
  /* shared memory: per layer this block's weight rows and biases, W1's account columns and b1, the
   * P1 tile (fp32), the three input tiles (bf16), the account tile, per-warp partial tiles, the owned
   * rows' logits, Q and states, the tile's segments */
  uint32_t off = 0;
  int maxu = 1;
  for (int l = 0; l < 3; ++l) {
    ef_layer& Ly = P->L[l];
    Ly.ksteps = ef_pad16(Ly.K) / 16;
    Ly.ws = ef_pad16(Ly.K) + 8;
    const int nu = CEIL_DIV(Ly.U, EF_C);
    if (nu > EF_MAXU || nu < 1) return ef_off(f, "layer %d needs %d units of 8 columns per block (1 .. 12)", l + 2, nu);
    Ly.NU = nu;
    if (nu > maxu) maxu = nu;
    Ly.w_off = off;
    off = ef_align16(off + (uint32_t)(nu * 8 * Ly.ws * 2));
    Ly.b_off = off;
    off = ef_align16(off + (uint32_t)(nu * 8 * 4));
    Ly.a_off_sm = off;
    off = ef_align16(off + (uint32_t)(nu * 4));
  }
  P->wacc_off = off;
  off = ef_align16(off + (uint32_t)(L.h1 * FH_ENV_ACCOUNT * 2));
  P->b1_off = off;
  off = ef_align16(off + (uint32_t)(L.h1 * 4));
  P->p1s = L.h1 + 8;
  P->p1_off = off;
  off = ef_align16(off + (uint32_t)(EF_MT * P->p1s * 4));
  const int in_w[3] = {L.h1, L.h2, HH};
  for (int l = 0; l < 3; ++l) {
    P->L[l].in_s = ef_pad16(in_w[l]) + 8;
    P->L[l].in_off = off;
    off = ef_align16(off + (uint32_t)(EF_MT * P->L[l].in_s * 2));
  }
  P->acc_off = off;
  off = ef_align16(off + EF_MT * FH_ENV_ACCOUNT * 2);
  P->ps = maxu * 8 + 4;
  P->part_off = off;
  off = ef_align16(off + (uint32_t)(EF_WARPS * EF_MT * P->ps * 4));
  /* the speculative step's slots (ef_spec_area) reuse the partial tiles: those are written and read only
   * inside a layer (ef_layer_units), and phase D lies between two cluster barriers with no layer in it */
  P->spec_off = P->part_off;
  P->log_off = off;
  off = ef_align16(off + (uint32_t)(EF_OWN * lot * 4));
  P->q_off = off;
  off = ef_align16(off + EF_OWN * EF_MAXQ * 4);
  P->st_off = off;
  off = ef_align16(off + EF_OWN * (uint32_t)sizeof(fh_env_state));
  P->seg_off = off;
  off = ef_align16(off + EF_MT * 2 * 4);
  P->bar_off = off;
  off = ef_align16(off + EF_NBAR * 8);
  for (int l = 0; l < 2; ++l) {
    P->L[l].out_off = P->L[l + 1].in_off;
    P->L[l].out_s = P->L[l + 1].in_s;
  }
  P->L[2].out_off = P->log_off;
  P->L[2].out_s = lot;
  P->L[0].xbar = EF_BAR_A2;
  P->L[1].xbar = EF_BAR_AH;
  P->L[2].xbar = EF_BAR_LOG;
  f->smem = off;
  if ((int)off > smem_max) return ef_off(f, "needs %d bytes of shared memory per block (the device has %d)", (int)off, smem_max);
  /* allowed up to the most a block may take (less the kernel's static shared memory): the trainer launches it
   * with all of it beside other work */
  cudaFuncAttributes fa;
  FH_CUDA_TRY(cudaFuncGetAttributes(&fa, EF_KERNELS[0]));
  for (int i = 1; i < 4; ++i) {
    cudaFuncAttributes fb;
    FH_CUDA_TRY(cudaFuncGetAttributes(&fb, EF_KERNELS[i]));
    if (fb.sharedSizeBytes > fa.sharedSizeBytes) fa.sharedSizeBytes = fb.sharedSizeBytes;
  }
  const int whole = smem_max - (int)fa.sharedSizeBytes;
  f->smem_whole = whole > (int)off ? (size_t)whole : (size_t)off;
  for (ef_kernel_fn kern : EF_KERNELS) {
    FH_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)f->smem_whole));
    if (EF_C > 8) FH_CUDA_TRY(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  if (fa.ptxVersion < 90)
    return ef_off(f, "the kernel was built for compute_%d (clusters need 90 or newer: build with sm_90)", fa.ptxVersion);
  {
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = ef_launch_config(P->n_tiles, off, nullptr, attr);
    int clusters = 0;
    FH_CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, (const void*)EF_KERNELS[0], &cfg));
    if (clusters < 1) return ef_off(f, "no cluster of %d blocks with %d bytes of shared memory fits", EF_C, (int)off);
    const cudaLaunchConfig_t cw = ef_launch_config(P->n_tiles, f->smem_whole, nullptr, attr);
    int whole_clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&whole_clusters, (const void*)EF_KERNELS[0], &cw) != cudaSuccess ||
        whole_clusters < 1) {
      cudaGetLastError(); /* not sticky: clear it */
      f->smem_whole = off; /* no whole-SM blocks: launched with what it uses */
    }
    if (getenv("FH_EVAL_FUSED_VERBOSE")) /* A/B runs (bench/gpu/evalc.sh): how many of the tiles' clusters fit */
      fprintf(stderr, "eval_fused: %d tiles, clusters of %d blocks, %u bytes of shared memory a block: %d clusters fit "
              "(%d with whole-SM blocks)\n", P->n_tiles, EF_C, off, clusters, whole_clusters);
  }

  /* Xval (built once: the features never change) and the P1 buffer of every evaluation */
  const size_t xbytes = (size_t)ev->n_val * L.D * 2, pbytes = (size_t)ev->n_val * L.h1 * 4;
  if (cudaMalloc(&f->xval, xbytes) != cudaSuccess || cudaMalloc(&f->p1, pbytes) != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it */
    return ef_off(f, "no device memory for the first layer's market part (%d MiB)", (int)((xbytes + pbytes) >> 20));
  }
  FH_TRY(fh_launch_market_windows(ev->view, ev->p.window, ev->val_begin, ev->n_val, L.D,
                                  static_cast<fh_bf16*>(f->xval), 0));
  FH_CUDA_TRY(cudaDeviceSynchronize());

  P->atoms = L.atoms;
  P->nb = L.n_branches;
  P->nq = net->nq;
  P->maxn = 1;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) {
    P->n[d] = d < L.n_branches ? L.branch_sizes[d] : 0;
    if (P->n[d] > P->maxn) P->maxn = P->n[d];
  }
  if (P->maxn > EF_MAXN) return ef_off(f, "a branch has %d actions (the fused evaluation takes <= %d)", P->maxn, EF_MAXN);
  P->v_min = net->v_min;
  P->v_max = net->v_max;
  P->p1 = f->p1;
  {
    /* the speculative env step: the distinct targets of the (a0, a1) pairs (first-seen order), times
     * n_stop classes, one lane each; it needs an idle warp per owned row beside the expected Q's tasks
     * and its slots inside the partial tiles. Otherwise (or FH_EVAL_PRELOAD=0) the one-thread step. */
    const int na0 = P->qa.n_act[0], na1 = P->qa.n_act[1], na2 = P->qa.n_act[2];
    int32_t tgt[EF_MAXCLS];
    int n_tgt = 0;
    bool ok = na0 <= EF_MAXN && na1 <= EF_MAXN && na2 <= EF_MAXN;
    for (int a0 = 0; ok && a0 < na0; ++a0)
      for (int a1 = 0; ok && a1 < na1; ++a1) {
        const int32_t t = fh_env_target(ev->p, a0, a1);
        int i = 0;
        while (i < n_tgt && tgt[i] != t) ++i;
        if (i == n_tgt) {
          if (n_tgt == EF_MAXCLS) {
            ok = false;
            break;
          }
          tgt[n_tgt++] = t;
        }
        P->cls_of[a0 * EF_MAXN + a1] = (int8_t)(i * na2);
      }
    P->n_cls = n_tgt * na2;
    const size_t need = offsetof(ef_spec_area, slot) + sizeof(ef_spec) * (size_t)(EF_OWN * P->n_cls);
    ok = ok && P->n_cls <= EF_MAXCLS && EF_OWN * (P->nb + 1) <= EF_WARPS &&
         need <= (size_t)EF_WARPS * EF_MT * P->ps * 4;
    for (int c = 0; ok && c < P->n_cls; ++c) {
      P->cls_tgt[c] = tgt[c / na2];
      P->cls_a2[c] = (int8_t)(c % na2);
    }
    P->spec_ok = ok ? 1 : 0;
  }
  f->clusters = P->n_tiles;
  /* FH_EVAL_FUSED_PROFILE=1 (measurement): the counters of block 0's phase cycles (fh_eval_fused_profile_print) */
  if (!f->prof && fh_env_is("FH_EVAL_FUSED_PROFILE", "1"))
    FH_CUDA_TRY(cudaMalloc(&f->prof, FH_EVAL_NPROF * sizeof(unsigned long long)));
  f->why[0] = 0;
  f->on = 1;
  return FH_OK;
}

fh_status fh_launch_eval_fused(const fh_cuda_eval& ev, fh_net* net, cudaStream_t s, void* ws, bool whole_sm) {
  const fh_eval_fused& f = ev.fused;
  if (!f.on || !f.params) return FH_ERR_INVALID_ARGUMENT;
  if (ev.max_steps <= 0) return FH_OK;
  const fh_layout& L = net->L;
  /* P1 = Xval W1^T over every validation bar (account columns of Xval are zero), fp32, no bias */
  FH_TRY(fh_gemm_fwd(net->gemm, s, ws, FH_BF16, (int)ev.n_val, L.h1, L.D, f.xval, L.D,
                     ef_sh(net, L.W1), nullptr, FH_EPI_NONE, f.p1, FH_F32, L.h1));
  ef_params P = *static_cast<const ef_params*>(f.params);
  P.q_log = ev.q_log;
  P.prof = f.prof;
  /* FH_EVAL_PRELOAD=0: the one-thread env step after the expected Q (A/B; the same bits) */
  P.spec = P.spec_ok && !fh_env_is("FH_EVAL_PRELOAD", "0");
  /* the instance: FH_EVAL_XASYNC=0 the pushes as generic stores and a cluster barrier after each phase (A/B; the
   * same bits); with the exchange, trunk 2, the head layer and the head outputs split by units over the warps (trunk
   * 2's K in two halves), FH_EVAL_NSPLIT=1 trunk 2 by K, =0 all three by K (A/B; float rounding apart) */
  const bool xa = !fh_env_is("FH_EVAL_XASYNC", "0");
  const int ns = fh_env_is("FH_EVAL_NSPLIT", "0") ? 0 : fh_env_is("FH_EVAL_NSPLIT", "1") ? 1 : 2;
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = ef_launch_config(f.clusters, whole_sm ? f.smem_whole : f.smem, s, attr);
  FH_CUDA_TRY(cudaLaunchKernelEx(&cfg, xa ? EF_KERNELS[ns] : EF_KERNELS[3], P));
  return FH_OK;
}
