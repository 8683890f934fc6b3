/*
 * eval_fused.cu — the fused greedy evaluation (native/src/cuda/eval.h, fh_launch_eval_fused): one
 * persistent cooperative kernel runs every evaluation step of every segment, instead of a cuBLASLt
 * forward + expected-Q + step launch sequence per step.
 *
 * Rows (segments) are independent through the whole network, so the S rows are cut into tiles of 16
 * and the grid into `teams` of G blocks; team j owns row tiles j, j + teams, ... and only its own G
 * blocks ever wait for each other (a counter per team in global memory, release/acquire). Per step:
 *
 *   L1  a1 = relu(obs W1^T + b1)        (16-row tile) x (this block's 8-column units of h1)
 *   L2  a2 = relu(a1 W2^T + b2)          same for h2
 *   LH  ah = relu(a2 WH^T + bH)          all heads' first layers, (1+nb)*hh columns
 *   LO  logits = ah_k WO_k^T + bO_k      every head's output layer (block diagonal: a unit of head k
 *                                        reads ah's columns of head k), fp32, heads side by side
 *   EQ  per row (one block each): expected Q (fh_dev_expected_q_r of net_device.cuh), greedy argmax,
 *       env step and booking (eval_device.cuh), observation of the new state (cuda_env_gather.cuh)
 *
 * with a team barrier after each phase (5 per step). Every block keeps the bf16 weight rows of its
 * units of all four layers in shared memory for the whole evaluation (loaded once at the start);
 * activations go through global memory/L2 (read with ld.global.cg: written by other blocks during
 * this kernel, so never through L1). GEMMs: mma.sync m16n8k16 bf16 -> fp32, the K steps split over
 * the block's 8 warps and the partial tiles summed in a fixed order in shared memory; bias (+ ReLU)
 * in fp32, as the cuBLASLt epilogues do. Biases: bf16 shadow for the trunk and head first layers,
 * fp32 master for the head outputs, as fh_net_forward. Built with -fmad=false (the env money math);
 * the GEMMs are tensor-core instructions either way.
 *
 * fh_eval_fused_setup checks the shapes (row widths multiples of 8, hh of 16, <= EF_MAXU units of 8
 * columns per block and layer, shared memory, co-residency of all blocks) and leaves the fused path
 * off with the reason otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_device.cuh"
#include "net_device.cuh"
#include "../native/src/cuda/net.h"

#define EF_THREADS 256
#define EF_WARPS (EF_THREADS / 32)
#define EF_MT 16      /* rows per tile (the mma M) */
#define EF_MAXU 8     /* 8-column units per block and layer */
#define EF_MAXSEG 4   /* column segments of a layer (the output layer: one per head) */
#define EF_MAXQ 64    /* expected-Q columns */
#define EF_BATCH 8    /* 16-byte loads in flight per thread when staging an input tile */

static __host__ __device__ __forceinline__ int32_t ef_pad16(int32_t n) { return (n + 15) / 16 * 16; }
static inline uint32_t ef_align16(uint32_t n) { return (n + 15u) / 16u * 16u; }

/* Columns [c0, c1) of a layer's output: weight rows W + (c - c0) * K, bias b16 or b32 at c - c0, input
 * columns a_off .. a_off + K of the staged tile. */
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
  int32_t Kin;        /* staged input width (elements, multiple of 8) */
  int32_t nseg;
  ef_seg seg[EF_MAXSEG];
  const fh_bf16* in;  /* (S, ld_in) */
  int32_t ld_in;
  void* out;          /* relu: bf16 (S, ld_out) after ReLU; else fp32 (S, ld_out) */
  int32_t ld_out;
  int32_t relu;
  uint32_t w_off, b_off;  /* shared-memory byte offsets of this block's weight rows and biases */
};

struct ef_params {
  fh_eval_args ea;
  fh_eval_q qa;
  int32_t S, n_tiles, teams, G, max_steps;
  int32_t as;             /* staged input tile stride (elements) */
  int32_t ps;             /* partial tile stride (floats) */
  uint32_t a_off, part_off, row_off, q_off, acc_off;
  ef_layer L[4];
  int32_t atoms, nb, nq, lot;
  int32_t n[FH_MAX_BRANCHES], abase[FH_MAX_BRANCHES];
  float v_min, v_max;
  const float* logits;    /* (S, lot) */
  fh_bf16* obs;           /* (S, ld_obs) */
  int32_t ld_obs;
  int32_t vec;
  unsigned* bar;
  float* q_log;
  unsigned long long* prof;  /* tests: NULL, or 10 counters (block 0's cycles per phase, see the kernel) */
};

__device__ __forceinline__ uint32_t ef_lds32(const fh_bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ void ef_mma(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  /* never launched from code built below sm_80 (fh_eval_fused_setup checks the kernel's PTX version);
   * NaN, not silence, if it ever were */
  (void)a0; (void)a1; (void)a2; (void)a3; (void)b0; (void)b1;
  c[0] = c[1] = c[2] = c[3] = __int_as_float(0x7fc00000);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/* Barrier of the G blocks of one team: monotonic counter, target advanced by G per barrier. Thread 0
 * publishes the block's writes with a gpu-scope release reduction and waits with acquire loads; the
 * CTA barriers around it order the other threads' accesses (the pattern of CUTLASS's grid barrier). */
__device__ __forceinline__ void ef_team_barrier(unsigned* ctr, unsigned& target, unsigned G) {
  __syncthreads();
  target += G;
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(ctr), "r"(1u) : "memory");
    unsigned v;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(ctr) : "memory");
    } while (v < target);
  }
  __syncthreads();
}

__device__ __forceinline__ const ef_seg& ef_find_seg(const ef_layer& Ly, int32_t c) {
  int s = 0;
  while (s + 1 < Ly.nseg && c >= Ly.seg[s].c1) ++s;
  return Ly.seg[s];
}

/* This block's units [u0, u0 + nu) of a layer. */
__device__ __forceinline__ void ef_units(const ef_layer& Ly, int b, int G, int& u0, int& nu) {
  u0 = b * Ly.U / G;
  nu = (b + 1) * Ly.U / G - u0;
}

/* Once per kernel: this block's weight rows (zero-padded to pad16(K)) and fp32 biases. */
__device__ void ef_load_weights(const ef_params& P, const ef_layer& Ly, int b, unsigned char* sm) {
  int u0, nu;
  ef_units(Ly, b, P.G, u0, nu);
  fh_bf16* sw = reinterpret_cast<fh_bf16*>(sm + Ly.w_off);
  float* sb = reinterpret_cast<float*>(sm + Ly.b_off);
  const int rows = nu * 8, cpr = Ly.ws / 8;
  for (int idx = threadIdx.x; idx < rows * cpr; idx += EF_THREADS) {
    const int r = idx / cpr, k = (idx % cpr) * 8, c = u0 * 8 + r;
    const ef_seg& sg = ef_find_seg(Ly, c);
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (k < Ly.K) v = *reinterpret_cast<const uint4*>(sg.W + (int64_t)(c - sg.c0) * Ly.K + k);
    *reinterpret_cast<uint4*>(sw + r * Ly.ws + k) = v;
  }
  for (int r = threadIdx.x; r < rows; r += EF_THREADS) {
    const int c = u0 * 8 + r;
    const ef_seg& sg = ef_find_seg(Ly, c);
    sb[r] = sg.b16 ? __bfloat162float(sg.b16[c - sg.c0]) : sg.b32[c - sg.c0];
  }
}

/* One layer on row tile m: out[rows of m, this block's columns] (all threads of the block). */
__device__ void ef_gemm_tile(const ef_params& P, const ef_layer& Ly, int m, int b, unsigned char* sm) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  int u0, nu;
  ef_units(Ly, b, P.G, u0, nu);
  fh_bf16* sA = reinterpret_cast<fh_bf16*>(sm + P.a_off);
  /* stage the 16 input rows (zeros past S and past Kin up to pad16(Kin)); EF_BATCH loads in flight
   * per thread before their stores */
  const int kin8 = ef_pad16(Ly.Kin) / 8, total = EF_MT * kin8;
  for (int base = tid; base < total; base += EF_THREADS * EF_BATCH) {
    uint4 v[EF_BATCH];
#pragma unroll
    for (int j = 0; j < EF_BATCH; ++j) {
      const int idx = base + j * EF_THREADS;
      const int r = idx / kin8, k = (idx % kin8) * 8, row = m * EF_MT + r;
      v[j] = make_uint4(0u, 0u, 0u, 0u);
      if (idx < total && row < P.S && k < Ly.Kin)
        v[j] = __ldcg(reinterpret_cast<const uint4*>(Ly.in + (int64_t)row * Ly.ld_in + k));
    }
#pragma unroll
    for (int j = 0; j < EF_BATCH; ++j) {
      const int idx = base + j * EF_THREADS;
      if (idx < total) *reinterpret_cast<uint4*>(sA + (idx / kin8) * P.as + (idx % kin8) * 8) = v[j];
    }
  }
  __syncthreads();
  if (nu <= 0) return;  /* uniform over the block; the caller's barrier follows */
  const fh_bf16* sW = reinterpret_cast<const fh_bf16*>(sm + Ly.w_off);
  float acc[EF_MAXU][4];
  int aoff[EF_MAXU];
#pragma unroll
  for (int u = 0; u < EF_MAXU; ++u) {
    acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
    aoff[u] = u < nu ? ef_find_seg(Ly, (u0 + u) * 8).a_off : 0;
  }
  for (int ks = warp; ks < Ly.ksteps; ks += EF_WARPS) {
    const int k0 = ks * 16 + 2 * t;
    int cur = -1;
    uint32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma unroll
    for (int u = 0; u < EF_MAXU; ++u) {
      if (u < nu) {
        if (aoff[u] != cur) {
          cur = aoff[u];
          const fh_bf16* pa = sA + cur + k0;
          a0 = ef_lds32(pa + g * P.as);
          a1 = ef_lds32(pa + (g + 8) * P.as);
          a2 = ef_lds32(pa + g * P.as + 8);
          a3 = ef_lds32(pa + (g + 8) * P.as + 8);
        }
        const fh_bf16* pb = sW + (u * 8 + g) * Ly.ws + k0;
        ef_mma(acc[u], a0, a1, a2, a3, ef_lds32(pb), ef_lds32(pb + 8));
      }
    }
  }
  float* part = reinterpret_cast<float*>(sm + P.part_off);
  float* mine = part + warp * EF_MT * P.ps;
#pragma unroll
  for (int u = 0; u < EF_MAXU; ++u) {
    if (u < nu) {
      const int c = u * 8 + 2 * t;
      mine[g * P.ps + c] = acc[u][0];
      mine[g * P.ps + c + 1] = acc[u][1];
      mine[(g + 8) * P.ps + c] = acc[u][2];
      mine[(g + 8) * P.ps + c + 1] = acc[u][3];
    }
  }
  __syncthreads();
  const float* sb = reinterpret_cast<const float*>(sm + Ly.b_off);
  const int ncol = nu * 8;
  for (int idx = tid; idx < EF_MT * ncol; idx += EF_THREADS) {
    const int r = idx / ncol, c = idx % ncol, row = m * EF_MT + r;
    if (row >= P.S) continue;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < EF_WARPS; ++w) v += part[(w * EF_MT + r) * P.ps + c];
    v += sb[c];
    const int64_t o = (int64_t)row * Ly.ld_out + u0 * 8 + c;
    if (Ly.relu)
      static_cast<fh_bf16*>(Ly.out)[o] = __float2bfloat16_rn(fmaxf(v, 0.0f));
    else
      static_cast<float*>(Ly.out)[o] = v;
  }
}

/* Expected Q, greedy step i and the new observation of row (segment) r (all threads of the block).
 * The new cursor is known before the step (t + 1 when the segment steps, else t), so the last warp
 * gathers the observation's feature rows while the others compute the expected Q; the 8 account
 * features (which need the stepped state) are written over last. */
__device__ void ef_row_step(const ef_params& P, int r, int step, unsigned char* sm) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const fh_eval_args& a = P.ea;
  float* srow = reinterpret_cast<float*>(sm + P.row_off);
  float* sq = reinterpret_cast<float*>(sm + P.q_off);
  float* sacc = reinterpret_cast<float*>(sm + P.acc_off);
  const bool stepping = step < a.seg_end[r] - a.seg_begin[r] - 1;
  fh_bf16* dst = P.obs + (int64_t)r * P.ld_obs;
  if (warp == EF_WARPS - 1) {
    const int64_t t_new = a.state[r].t + (stepping ? 1 : 0);
    if (P.vec)
      fh_gather_obs_row<fh_bf16, true>(a.m.features, a.m.n_features, a.p.window, t_new, sacc, lane, dst);
    else
      fh_gather_obs_row<fh_bf16, false>(a.m.features, a.m.n_features, a.p.window, t_new, sacc, lane, dst);
  } else {
    for (int c = tid; c < P.lot; c += EF_THREADS - 32) srow[c] = __ldcg(P.logits + (int64_t)r * P.lot + c);
    asm volatile("bar.sync 1, %0;" ::"r"(EF_THREADS - 32) : "memory");
    for (int p = warp; p < P.nq; p += EF_WARPS - 1) {
      int d = 0;
      while (d + 1 < P.nb && p >= P.qa.q_off[d + 1]) ++d;
      const float q = fh_dev_expected_q_r(srow, srow + P.abase[d], P.n[d], P.atoms, P.v_min, P.v_max,
                                          p - P.qa.q_off[d], lane);
      if (lane == 0) {
        sq[p] = q;
        if (P.q_log) P.q_log[((int64_t)step * P.S + r) * P.nq + p] = q;
      }
    }
  }
  __syncthreads();
  if (tid == 0) {
    fh_env_state s = a.state[r];
    if (stepping) {
      int32_t act[FH_MAX_BRANCHES];
      fh_eval_greedy(P.qa, sq, act);
      fh_eval_step_one(a, s, act[0], act[1], act[2]);
      a.state[r] = s;
    }
    float acc[FH_ENV_ACCOUNT];
    fh_env_account(a.m, a.p, s, acc);
    const int32_t n = a.p.window * a.m.n_features;
#pragma unroll
    for (int i = 0; i < FH_ENV_ACCOUNT; ++i) dst[n + i] = __float2bfloat16_rn(acc[i]);
  }
  __syncthreads();
}

/* P.prof (tests): block 0's thread 0 adds the cycles of each phase: 2l = layer l's work, 2l+1 = the
 * barrier after it (waiting for the team's slowest block), 8 = the row step, 9 = its barrier. */
static __global__ void __launch_bounds__(EF_THREADS, 1) eval_fused_kernel(const __grid_constant__ ef_params P) {
  extern __shared__ __align__(16) unsigned char sm[];
  __shared__ long long s_prof[10];
  const int team = blockIdx.x / P.G, b = blockIdx.x % P.G;
  const bool prof = P.prof != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  if (threadIdx.x < 10) s_prof[threadIdx.x] = 0;
  for (int l = 0; l < 4; ++l) ef_load_weights(P, P.L[l], b, sm);
  __syncthreads();
  unsigned* ctr = P.bar + team * 32;
  unsigned target = 0;
  long long tp = clock64();
#define EF_MARK(slot)                  \
  if (prof) {                          \
    const long long now_ = clock64();  \
    s_prof[slot] += now_ - tp;         \
    tp = now_;                         \
  }
  for (int step = 0; step < P.max_steps; ++step) {
    for (int l = 0; l < 4; ++l) {
      for (int m = team; m < P.n_tiles; m += P.teams) ef_gemm_tile(P, P.L[l], m, b, sm);
      EF_MARK(2 * l);
      ef_team_barrier(ctr, target, P.G);
      EF_MARK(2 * l + 1);
    }
    for (int m = team; m < P.n_tiles; m += P.teams)
      for (int j = b; j < EF_MT; j += P.G) {
        const int r = m * EF_MT + j;
        if (r < P.S) ef_row_step(P, r, step, sm);
      }
    EF_MARK(8);
    ef_team_barrier(ctr, target, P.G);
    EF_MARK(9);
  }
#undef EF_MARK
  if (prof)
    for (int i = 0; i < 10; ++i) P.prof[i] = (unsigned long long)s_prof[i];
}

/* ---------------------------------------------------------------- host */

void fh_eval_fused_free(fh_eval_fused* f) {
  if (!f) return;
  if (f->logits) cudaFree(f->logits);
  if (f->bar) cudaFree(f->bar);
  free(f->params);
  memset(f, 0, sizeof *f);
}

static fh_status ef_off(fh_eval_fused* f, const char* fmt, int a = 0, int b = 0) {
  snprintf(f->why, sizeof f->why, fmt, a, b);
  f->on = 0;
  return FH_OK;
}

static const fh_bf16* ef_sh(const fh_net* net, int64_t off) { return static_cast<const fh_bf16*>(net->online_sh) + off; }

static void ef_trunk(ef_layer& Ly, int K, int N, const fh_bf16* W, const fh_bf16* b, const void* in, int ld_in,
                     void* out, int ld_out) {
  memset(&Ly, 0, sizeof Ly);
  Ly.K = K;
  Ly.Kin = K;
  Ly.U = N / 8;
  Ly.nseg = 1;
  Ly.seg[0].c0 = 0;
  Ly.seg[0].c1 = N;
  Ly.seg[0].W = W;
  Ly.seg[0].b16 = b;
  Ly.in = static_cast<const fh_bf16*>(in);
  Ly.ld_in = ld_in;
  Ly.out = out;
  Ly.ld_out = ld_out;
  Ly.relu = 1;
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
  if (L.hh % 16) return ef_off(f, "head_hidden must be a multiple of 16");
  if (L.atoms > FH_MAX_ATOMS_GPU) return ef_off(f, "atoms > %d", FH_MAX_ATOMS_GPU);
  if (net->nq > EF_MAXQ || L.n_branches != FH_MAX_BRANCHES) return ef_off(f, "more than %d actions or not 3 branches", EF_MAXQ);
  int dev = 0, sms = 0, coop = 0, smem_max = 0;
  FH_CUDA_TRY(cudaGetDevice(&dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
  FH_CUDA_TRY(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (!coop) return ef_off(f, "the device has no cooperative launch");
  int major = 0;
  FH_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  if (major < 8) return ef_off(f, "bf16 mma.sync needs compute capability 8.0 or newer (this device: %d)", major);

  ef_params* P = static_cast<ef_params*>(calloc(1, sizeof(ef_params)));
  if (!P) return FH_ERR_OUT_OF_MEMORY;
  f->params = P;
  const int S = ev->n_seg;
  P->S = S;
  P->n_tiles = CEIL_DIV(S, EF_MT);
  P->teams = P->n_tiles < (sms / 16 > 0 ? sms / 16 : 1) ? P->n_tiles : (sms / 16 > 0 ? sms / 16 : 1);
  P->G = sms / P->teams < 16 ? sms / P->teams : 16;
  if (P->G < 1) P->G = 1;
  P->max_steps = ev->max_steps;
  P->ea = fh_eval_make_args(*ev);
  P->qa = fh_eval_make_q(*ev);

  const fh_net_pass& X = net->pass[1];
  const int HH = L.n_heads * L.hh;
  ef_trunk(P->L[0], L.D, L.h1, ef_sh(net, L.W1), ef_sh(net, L.b1), X.x, L.D, X.a1, L.h1);
  ef_trunk(P->L[1], L.h1, L.h2, ef_sh(net, L.W2), ef_sh(net, L.b2), X.a1, L.h1, X.a2, L.h2);
  ef_trunk(P->L[2], L.h2, HH, ef_sh(net, L.WH), ef_sh(net, L.bH), X.a2, L.h2, X.ah, HH);
  int lot = 0;
  for (int k = 0; k < L.n_heads; ++k) lot += L.out_pad[k];
  P->lot = lot;
  FH_CUDA_TRY(cudaMalloc(&f->logits, sizeof(float) * (size_t)S * lot));
  {
    ef_layer& Ly = P->L[3];
    memset(&Ly, 0, sizeof Ly);
    Ly.K = L.hh;
    Ly.Kin = HH;
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
    Ly.in = static_cast<const fh_bf16*>(X.ah);
    Ly.ld_in = HH;
    Ly.out = f->logits;
    Ly.ld_out = lot;
    Ly.relu = 0;
  }
  /* shared memory: per layer this block's weight rows and biases (the widest block), staged input
   * tile, per-warp partial tiles, one logits row, Q, a scratch account row */
  uint32_t off = 0;
  int maxu = 1, max_kin = 8;
  for (int l = 0; l < 4; ++l) {
    ef_layer& Ly = P->L[l];
    Ly.ksteps = ef_pad16(Ly.K) / 16;
    Ly.ws = ef_pad16(Ly.K) + 8;
    const int nu = CEIL_DIV(Ly.U, P->G);
    if (nu > EF_MAXU) return ef_off(f, "layer %d needs %d units of 8 columns per block (max 8)", l, nu);
    if (nu > maxu) maxu = nu;
    if (Ly.Kin > max_kin) max_kin = Ly.Kin;
    Ly.w_off = off;
    off = ef_align16(off + (uint32_t)(nu * 8 * Ly.ws * 2));
    Ly.b_off = off;
    off = ef_align16(off + (uint32_t)(nu * 8 * 4));
  }
  P->as = ef_pad16(max_kin) + 8;
  P->ps = maxu * 8 + 4;
  P->a_off = off;
  off = ef_align16(off + (uint32_t)(EF_MT * P->as * 2));
  P->part_off = off;
  off = ef_align16(off + (uint32_t)(EF_WARPS * EF_MT * P->ps * 4));
  P->row_off = off;
  off = ef_align16(off + (uint32_t)(lot * 4));
  P->q_off = off;
  off = ef_align16(off + EF_MAXQ * 4);
  P->acc_off = off;
  off = ef_align16(off + FH_ENV_ACCOUNT * 4);
  f->smem = off;
  if ((int)off > smem_max) return ef_off(f, "needs %d bytes of shared memory per block (the device has %d)", (int)off, smem_max);
  FH_CUDA_TRY(cudaFuncSetAttribute(eval_fused_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)off));
  cudaFuncAttributes fa;
  FH_CUDA_TRY(cudaFuncGetAttributes(&fa, eval_fused_kernel));
  if (fa.ptxVersion < 80)
    return ef_off(f, "the kernel was built for compute_%d (bf16 mma.sync needs 80 or newer: build with sm_90)", fa.ptxVersion);
  int per_sm = 0;
  FH_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, eval_fused_kernel, EF_THREADS, off));
  if (per_sm * sms < P->teams * P->G)
    return ef_off(f, "%d blocks cannot all be resident (%d per SM)", P->teams * P->G, per_sm);

  P->atoms = L.atoms;
  P->nb = L.n_branches;
  P->nq = net->nq;
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) P->n[d] = d < L.n_branches ? L.branch_sizes[d] : 0;
  P->v_min = net->v_min;
  P->v_max = net->v_max;
  P->logits = f->logits;
  P->obs = static_cast<fh_bf16*>(X.x);
  P->ld_obs = L.D;
  P->vec = fh_gather_vec_ok(ev->view.n_features, ev->p.window, L.D) ? 1 : 0;
  FH_CUDA_TRY(cudaMalloc(&f->bar, sizeof(unsigned) * 32 * (size_t)P->teams));
  P->bar = f->bar;
  f->teams = P->teams;
  f->team_blocks = P->G;
  f->threads = EF_THREADS;
  f->why[0] = 0;
  f->on = 1;
  return FH_OK;
}

fh_status fh_launch_eval_fused(const fh_cuda_eval& ev, cudaStream_t s) {
  const fh_eval_fused& f = ev.fused;
  if (!f.on || !f.params) return FH_ERR_INVALID_ARGUMENT;
  if (ev.max_steps <= 0) return FH_OK;
  ef_params P = *static_cast<const ef_params*>(f.params);
  P.q_log = ev.q_log;
  P.prof = f.prof;
  FH_CUDA_TRY(cudaMemsetAsync(f.bar, 0, sizeof(unsigned) * 32 * (size_t)f.teams, s));
  void* args[] = {&P};
  FH_CUDA_TRY(cudaLaunchCooperativeKernel((const void*)eval_fused_kernel, dim3(f.teams * f.team_blocks),
                                          dim3(EF_THREADS), args, f.smem, s));
  return FH_OK;
}
