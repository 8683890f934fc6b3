/*
 * net_kernels.cuh — launchers of the network's non-GEMM kernels (net.cu, loss.cu, adam.cu,
 * gradnorm.cu, qstats.cu). Every launcher takes a stream, launches, checks cudaGetLastError()
 * and returns an fh_status; none synchronises, so all of them are graph-capturable.
 *
 * Conventions: activations are row-major (rows = samples); `ld` is the row stride in elements.
 * T is float (deterministic mode) or fh_bf16 (fast mode). Gradients are fp32 and written with `=`
 * unless a launcher says `+=`.
 */
#ifndef FH_NET_KERNELS_CUH
#define FH_NET_KERNELS_CUH

#include "cuda_common.cuh"
#include "../native/src/common/layout.h"

/* The head outputs of one forward pass, as the GEMMs left them (padded rows). L is the element type:
 * float (collection, evaluation, the deterministic mode) or fh_bf16 (the training passes in bf16
 * mode: half the bytes written by the head GEMMs and read by the loss). */
template <typename L>
struct fh_heads_view_t {
  const L* v;                       /* (B, ldv) value logits, atoms used */
  int ldv;
  const L* a[FH_MAX_BRANCHES];      /* (B, lda[d]) advantage logits, n[d]*atoms used, action-major */
  int lda[FH_MAX_BRANCHES];
  int n[FH_MAX_BRANCHES];           /* branch sizes */
  int nb;                           /* branches */
  int atoms;                        /* 1 = plain Q; > 1 = C51 */
  float v_min, v_max;
  const int32_t* rows;              /* nullptr: sample i is row i; else row rows[i] (the loss's target(s') read
                                       from the target cache, one row per replay slot: net.h) */
};
typedef fh_heads_view_t<float> fh_heads_view;
typedef fh_heads_view_t<fh_bf16> fh_heads_view_bf16;

#ifdef __CUDACC__
/* The row of sample i in view h. */
template <typename L>
__device__ __forceinline__ int64_t fh_view_row(const fh_heads_view_t<L>& h, int64_t i) {
  return h.rows ? (int64_t)h.rows[i] : i;
}
#endif

/* Gradient outputs of the loss w.r.t. the head logits of online(s) (GEMM operand dtype). */
template <typename T>
struct fh_heads_grad {
  T* v;                             /* (B, ldv) = d loss / d value logits; pad columns zero */
  int ldv;
  T* a[FH_MAX_BRANCHES];            /* (B, lda[d]) = d loss / d advantage logits; pad zero */
  int lda[FH_MAX_BRANCHES];
};

/* ---- net.cu ---- */
/* dst[i] = (T)src[i], n elements. */
template <typename T>
fh_status fh_launch_cast(const float* src, T* dst, int64_t n, cudaStream_t s);
/* Copy a (rows, cols) fp32 matrix with row stride lds into T with row stride ldd. */
template <typename T>
fh_status fh_launch_cast_2d(const float* src, int lds, T* dst, int ldd, int rows, int cols, cudaStream_t s);
/* Column sums of dy (B, n; ld) into bias_grad (n) with `=`; when act != NULL, first dy *= (act > 0)
 * in place (ReLU backward; act has the same shape/ld as dy). Deterministic two-pass reduction;
 * partial needs fh_colsum_partial_floats(B, n) floats. */
int64_t fh_colsum_partial_floats(int B, int n);
template <typename T>
fh_status fh_launch_relu_bwd_colsum(T* dy, const T* act, int ld, int B, int n, float* partial,
                                    float* bias_grad, cudaStream_t s);
/* The same with the second pass (the finish, which only the optimiser waits for) on stream fs, forked
 * from s after the first pass through the event ev (graph-capturable): the caller joins fs back. fs == s:
 * fh_launch_relu_bwd_colsum (ev unused). bits (optional): the forward's ReLU bit mask (cuBLASLt RELU_AUX layout:
 * bit c of row r at bit r * ld_bits + c, low bit first) decides instead of act where the wide bf16 kernel runs
 * (n >= 256 and a multiple of 8, ld_bits a multiple of 8); act everywhere else. chunks_out (optional): the finish
 * is left to the caller (fh_launch_colsum_finish(partial, *chunks_out, n, bias_grad, fs)), after other work it
 * queues on fs first. */
template <typename T>
fh_status fh_launch_relu_bwd_colsum_split(T* dy, const T* act, int ld, int B, int n, float* partial,
                                          float* bias_grad, cudaStream_t s, cudaStream_t fs, cudaEvent_t ev,
                                          const void* bits = nullptr, int64_t ld_bits = 0, int* chunks_out = nullptr);
/* out[c] = sum over chunks of partial[chunk * n + c], c < n (`=`), in a fixed order: the second pass of
 * fh_launch_relu_bwd_colsum, also for the column-sum partials of fh_launch_mma_gemm (ldcs = n). */
fh_status fh_launch_colsum_finish(const float* partial, int chunks, int n, float* out, cudaStream_t s);
/* Column sums of several narrow bf16 gradients (the head outputs' bias gradients) in two launches instead of two
 * each: problem k's out (n_k) = the column sums of dy_k (B, n_k; ld_k), bit for bit what
 * fh_launch_relu_bwd_colsum(dy_k, NULL, ...) gives (the same chunks and orders); partial_k needs
 * fh_colsum_partial_floats(B, n_k) floats. Each problem must pass fh_colsum_multi_ok (8 <= n < 256, n and ld
 * multiples of 8, dy on 16 bytes). */
#define FH_COLSUM_MULTI 4
struct fh_colsum_problem {
  fh_bf16* dy;
  int ld, n;
  float* partial;
  float* out;
};
struct fh_colsum_multi {
  fh_colsum_problem p[FH_COLSUM_MULTI];
  int count;
};
bool fh_colsum_multi_ok(const void* dy, int ld, int n);
fh_status fh_launch_colsum_multi(const fh_colsum_multi& m, int B, cudaStream_t s);
/* Expected Q of every branch action: q (B, sum n) fp32. */
template <typename L>
fh_status fh_launch_expected_q(const fh_heads_view_t<L>& h, int B, float* q, int ldq, cudaStream_t s);

/* ---- loss.cu ---- */
/* Double-DQN / BDQ loss of one batch (DESIGN §5). on_s: online(s); on_sn: online(s');
 * tg_sn: target(s'). act (B, 3) int32; ret, disc, weight (B). Outputs: wloss (B) = w_i * loss_i,
 * signal (B) priority signal (sum over branches of CE or |TD|), grad (= d(mean_i w_i loss_i)/d logits
 * of on_s, written in full including pad columns). */
template <typename T, typename L>
fh_status fh_launch_bdq_loss(const fh_heads_view_t<L>& on_s, const fh_heads_view_t<L>& on_sn, const fh_heads_view_t<L>& tg_sn,
                             const int32_t* act, const float* ret, const float* disc, const float* weight,
                             int B, float huber_delta, float* wloss, float* signal, fh_heads_grad<T> grad,
                             cudaStream_t s);

/* ---- heads_out.cu ---- */
/* The training pass's head outputs as one persistent streaming kernel (bf16 in and out): C[k] (M, N[k]) =
 * A[:, k K : (k + 1) K] W[k]^T + bias[k] for every head k, W[k] (N[k], K) row-major. */
#define FH_HEADS_OUT_MAX 8                /* heads */
#define FH_HEADS_OUT_CONFIGS 6            /* configurations: kShapes in heads_out.cu */
#define FH_HEADS_OUT_SMEM_MAX (227 * 1024) /* the most shared memory a block takes */
struct fh_heads_out_args {
  const fh_bf16* A;                       /* (M, lda): head k's activations at columns k K; 16-byte aligned */
  int lda;
  const fh_bf16* W[FH_HEADS_OUT_MAX];     /* (N[k], K), 16-byte aligned */
  const fh_bf16* bias[FH_HEADS_OUT_MAX];  /* (N[k]) */
  fh_bf16* C[FH_HEADS_OUT_MAX];           /* (M, ldc[k]), 16-byte aligned */
  int ldc[FH_HEADS_OUT_MAX];
  int N[FH_HEADS_OUT_MAX];
  int heads, K, M;
  int config;                             /* 0 .. FH_HEADS_OUT_CONFIGS - 1 */
};
/* Whether configuration `config` runs these shapes (K a multiple of 32 up to 256, every N a multiple of 8 up to
 * 512, at most 8 heads, lda a multiple of 8 >= heads K, the widest head's block within FH_HEADS_OUT_SMEM_MAX and
 * smem_optin). */
bool fh_heads_out_supported(int config, int heads, int K, const int* N, int lda, int smem_optin);
/* The kernels' shared-memory attribute (once per process; call it outside any graph capture before the first launch). */
fh_status fh_heads_out_setup();
/* blocks: the device's SM count; the grid is the configuration's blocks an SM times that, shared out over the heads. */
fh_status fh_launch_heads_out(const fh_heads_out_args& a, int blocks, cudaStream_t s);

/* ---- heads_loss.cu ---- */
/* The training step's head outputs and C51 BDQ loss in one kernel (bf16 mode): the logits of online(s) and
 * online(s') are computed from the head layer's activations H (2B rows: s, then s') in registers and never
 * stored. Outputs as fh_launch_bdq_loss (grad rows in full, pads 0). */
#define FH_HEADS_LOSS_K 128              /* the head hidden width it runs */
#define FH_HEADS_LOSS_SMEM_MAX (227 * 1024) /* the most shared memory a block takes */
/* The head activations and head-output weights that the kernels computing head outputs in shared memory read
 * (heads_loss.cu, sn_argmax.cu; kernels/heads_mma.cuh). */
struct fh_heads_mma_in {
  const fh_bf16* H;                      /* head-layer activations, rows of ldh; head k's at columns k * 128 */
  int ldh;
  const fh_bf16* W[1 + FH_MAX_BRANCHES]; /* head k's output weights, (out rows, 128) */
  const fh_bf16* bias[1 + FH_MAX_BRANCHES];
  int n[FH_MAX_BRANCHES];
  int nb, atoms;
  float v_min, v_max;
};
struct fh_heads_loss_args : fh_heads_mma_in { /* H: 2B rows, s then s' */
  fh_heads_view_t<fh_bf16> tg;           /* target(s') logits (the target cache's rows) */
  const int32_t* act;
  const float* ret;
  const float* disc;
  const float* weight;
  int B;
  float* wloss;
  float* signal;
  fh_heads_grad<fh_bf16> grad;
};
/* Whether the fused kernel runs these shapes (head hidden 128, 2..56 atoms, nb <= 3 branches of <= 4 actions, ldh a
 * multiple of 8, the weights and scratch within shared memory: FH_HEADS_LOSS_SMEM_MAX and the device's opt-in limit
 * smem_optin). */
bool fh_heads_loss_supported(int hh, int atoms, int nb, const int* n, int ldh, int smem_optin);
/* The kernel's shared-memory attribute (once per process; the launcher calls it too, but a trainer calls it first,
 * outside any graph capture). */
fh_status fh_heads_loss_setup();
fh_status fh_launch_heads_loss(const fh_heads_loss_args& a, cudaStream_t s);

/* ---- sn_argmax.cu ---- */
/* The double-DQN argmax of online(s') from its head-layer activations (bf16 mode): the head outputs of the B rows of
 * H by mma.sync with the weights in shared memory, the dueling logits (each rounded to bf16, as a stored logit), their
 * softmax and expected Q per action, and of each branch the first argmax; nothing else is stored. */
struct fh_sn_argmax_args : fh_heads_mma_in { /* H: online(s')'s B rows */
  int B;
  uint8_t* astar;                        /* (B): a*_d of sample i in bits 2 d .. 2 d + 1 */
};
/* Whether variant (below) runs these shapes (those of fh_heads_loss_supported; its shared memory within smem_optin). */
bool fh_sn_argmax_supported(int variant, int hh, int atoms, int nb, const int* n, int ldh, int smem_optin);
/* The kernel's shared-memory attribute (once per process; call it outside any graph capture first). */
fh_status fh_sn_argmax_setup();
/* variant 0 .. FH_SN_ARGMAX_VARIANTS - 1 (sn_argmax.cu: 8 or 12 warps a block with two GEMM passes an action, or 8
 * with one and the logits kept); max_blocks > 0 caps the grid (the blocks then loop over the 16-row tiles). */
#define FH_SN_ARGMAX_VARIANTS 3
int fh_sn_argmax_warps(int variant);  /* its warps a block (0 outside the variants) */
fh_status fh_launch_sn_argmax(const fh_sn_argmax_args& a, int variant, int max_blocks, cudaStream_t s);
/* The bf16-mode C51 loss of fh_launch_bdq_loss (its half-warp kernel) with a*_d given (astar, as fh_sn_argmax_args
 * writes it) instead of computed from online(s')'s logits. Branches of <= 4 actions, nb <= 3, 2..64 atoms. */
fh_status fh_launch_bdq_loss_astar(const fh_heads_view_t<fh_bf16>& on_s, const fh_heads_view_t<fh_bf16>& tg_sn,
                                   const uint8_t* astar, const int32_t* act, const float* ret, const float* disc,
                                   const float* weight, int B, float* wloss, float* signal,
                                   fh_heads_grad<fh_bf16> grad, cudaStream_t s);

/* ---- gradnorm.cu ---- */
/* Deterministic sum of x[0..n) into *out (double), = . partial needs fh_sum_partial_doubles() doubles.
 * When squares != 0 sums x^2. */
int64_t fh_sum_partial_doubles(void);
fh_status fh_launch_sum(const float* x, int64_t n, int squares, double* partial, double* out, cudaStream_t s);
/* Global grad norm of g (n) and the clip factor: norm_out = ||g||, scale_out = min(1, clip / (norm + 1e-6))
 * (1 when clip <= 0), and 0 when the norm is NaN/Inf. */
fh_status fh_launch_grad_norm(const float* g, int64_t n, float clip, double* partial, float* norm_out,
                              float* scale_out, cudaStream_t s);
/* mean = sum(x[0..n)) / n as float into *out; with copy_src and copy_dst (both or neither), *copy_dst = *copy_src
 * after it, stream-ordered (by the mean's kernel where one block sums, n <= 65 536: no copy node of its own). */
fh_status fh_launch_mean(const float* x, int64_t n, double* partial, float* out, cudaStream_t s,
                         const int64_t* copy_src = nullptr, int64_t* copy_dst = nullptr);

/* History of the step scalars: loss_hist[(*step-1) % cap] = *loss, gnorm_hist[...] = *gnorm, then (when
 * done is not null, after a system fence) *done = *step. */
fh_status fh_launch_record_step(const float* loss, const float* gnorm, const int64_t* step, int cap, float* loss_hist,
                                float* gnorm_hist, int64_t* done, cudaStream_t s);
/* The whole optimiser step in 1 or 2 launches, bit for bit fh_launch_grad_norm(g, n, clip, partial, norm_out,
 * scale_out) -> fh_launch_adam<T>(..., grad_scale = scale_out, step, ...) -> fh_launch_target_update<T>(n, p,
 * tgt, tgt_shadow, step, target_every, tau): the squares partials, then one kernel that clips, runs Adam
 * (t = *step + 1; shadow when != NULL), updates the target for step t (hard copy when t % target_every == 0
 * and tau <= 0, Polyak tau every step when tau > 0; tgt_shadow when != NULL), and sets *step = t, *norm_out,
 * *scale_out. launches: 2 = the squares partials, then the kernel; 1 = one kernel whose blocks compute the partials
 * and meet at a grid barrier (its grid capped at what the device holds at once; 2 launches where that is unknown;
 * two such launches that run at once on one GPU, e.g. two trainers stepping together in one process or under MPS,
 * could each wait on blocks the other holds: a worker trains one job a GPU at a time, and FH_OPTIM_ONE=0 suits such
 * setups; the net reads FH_OPTIM_ONE=0 at creation and passes 2); 0 = 1. ticket: two device unsigned ints, 0 before the first launch; a launch leaves ticket[0]
 * at 0 (its blocks count themselves on it; ticket[1] is the barrier's generation); not shared by launches that may
 * run concurrently. p, g, m, v,
 * tgt 16-byte aligned, the shadows 4 * sizeof(T) (separate allocations are); otherwise
 * FH_ERR_INVALID_ARGUMENT and nothing is launched. */
/* rec (optional): the step record of fh_launch_record_step(rec->loss, norm_out, step, ...) written by the
 * launch's last block after *step = t (the loss must be ready when the launch starts), so no record launch follows. */
struct fh_step_record {
  const float* loss;
  float* loss_hist;
  float* gnorm_hist;
  int cap;
  int64_t* done;
};
/* The paired batch layout (the trainer's, kernels/collect.cu replay_gather_pair): per sample one block of P elements
 * (bf16), the blocks of a batch at stride P, in which s and s' share their market rows:
 *   [0, 8)              account features of s
 *   [8, mkt)            zeros
 *   [mkt, mkt + WF + nF) the feature rows of bars t-W+1 .. t+n (t = the bar of s; WF = W F, nF = n F)
 *   then 8              account features of s'
 *   then zeros up to mkt + K
 * s is the run [0, K): (account, zeros, market); s' the run [mkt, mkt + K): (market of bars t-W+1+n.. preceded by the
 * nF columns of the first n bars, account, zeros). Layer 1 multiplies them by W1's columns placed to match (w1s, w1n
 * below: zeros at the padding and, for s', at the first nF columns), so both are the usual first layer of s and s'
 * with zero terms added. mkt = 8 + nF rounded up to 64 and K = mkt + WF, P = mkt + K rounded up to 64: every run and
 * the market rows start on a 128-byte line (the GEMMs read them at full speed). */
struct fh_pair_layout {
  int32_t P, K, mkt, WF, nF;
};
inline fh_pair_layout fh_pair_make(int32_t window, int32_t F, int32_t n_step) {
  fh_pair_layout l;
  l.WF = window * F;
  l.nF = n_step * F;
  l.mkt = (int32_t)fh_align64(8 + l.nF);
  l.K = l.mkt + l.WF;
  l.P = (int32_t)fh_align64(l.mkt + l.K);
  return l;
}

/* W1 (rows x cols = D, canonical offset `off` in the flat vector, bf16 shadow) placed for the paired layout: w1s
 * (rows x K) has canonical market column c < WF at mkt + c and account column WF + a at a; w1n (rows x K) has every
 * canonical column c at nF + c; every other column is zero (set once at allocation). s NULL: none. */
struct fh_w1_pair {
  fh_bf16* s;
  fh_bf16* n;
  int64_t off;
  int32_t rows, cols;
  fh_pair_layout l;
};
/* w1s and w1n from the bf16 shadow's W1 (all of it; graph-capturable). */
fh_status fh_launch_w1_pair(const fh_bf16* shadow, const fh_w1_pair& w, cudaStream_t s);

template <typename T>
fh_status fh_launch_optimise_fused(int64_t n, float* p, T* shadow, const float* g, float* m, float* v, float* tgt,
                                   T* tgt_shadow, double* partial, float* norm_out, float* scale_out, int64_t* step,
                                   unsigned int* ticket, float clip, float lr, float beta1, float beta2, float eps,
                                   int target_every, float tau, cudaStream_t s, const fh_step_record* rec = nullptr,
                                   const fh_w1_pair* w1p = nullptr, int launches = 0);

/* ---- adam.cu ---- */
/* One Adam step on the flat parameter vector with bias correction; the gradient is multiplied by
 * *grad_scale (clip factor, device) first; *step (device, int64) is incremented by this launch's
 * kernel (t = old + 1 is used). Writes the T shadow copy of p when shadow != NULL. */
template <typename T>
fh_status fh_launch_adam(int64_t n, float* p, T* shadow, const float* g, float* m, float* v,
                         const float* grad_scale, int64_t* step, float lr, float beta1, float beta2,
                         float eps, cudaStream_t s);
/* *step += 1 (what fh_launch_adam does after its update; alone for measurements that leave Adam out). */
fh_status fh_launch_step_bump(int64_t* step, cudaStream_t s);
/* Host-parameter variant used by fh_adam_step (step given, no scale, no shadow). */
fh_status fh_launch_adam_plain(int64_t n, float* p, const float* g, float* m, float* v, float lr, float beta1,
                               float beta2, float eps, int64_t step, cudaStream_t s);
/* Target update: every `every` train steps (read from *step, device) tgt = online (hard) when tau == 0,
 * else each step tgt = tau*online + (1-tau)*tgt. Writes the T shadow of the target when shadow != NULL. */
template <typename T>
fh_status fh_launch_target_update(int64_t n, const float* online, float* tgt, T* shadow, const int64_t* step,
                                  int every, float tau, cudaStream_t s);

/* ---- qstats.cu ---- */
/* Q statistics of q (B, nq): out[0] mean over samples and branches of max_a Q, out[1] min, out[2] max,
 * out[3] mean, out[4] var (population). partial needs fh_qstats_partial_doubles() doubles. */
int64_t fh_qstats_partial_doubles(void);
fh_status fh_launch_qstats(const float* q, int ldq, int B, const int* n, int nb, double* partial, double* out,
                           cudaStream_t s);

#endif /* FH_NET_KERNELS_CUH */
