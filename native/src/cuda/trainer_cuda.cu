/*
 * trainer_cuda.cu — the fh_* C ABI of libfoxhunt_cuda.so (foxhunt.h): trainer create/destroy,
 * run_epoch, checkpoints, info and the narrow test entry points. Every entry point sets its device
 * first (calls arrive on koffi's worker threads) and returns errors as fh_status values with a
 * message; nothing aborts (except the test-only fault_hook, which must crash on purpose).
 *
 * One epoch (SPEC 5), with no host synchronisation until the end:
 *   collect   stream C (net pass 1's stream): one graph of T steps
 *             [online forward (N rows) -> expected Q -> fused epsilon-greedy + env step + replay row +
 *             observe] then collect_end (env-step counter, sum-tree rebuild)
 *   train     stream S (net pass 0's stream) waits on C; S graph replays of one train step k:
 *             [k = 0 only: sample -> gather [s; s'] into batch set 0] ->
 *             [online([s; s']) (2B rows) | target(s')] on forked streams -> fused loss -> fork
 *             (e_fork): the side stream P copies the step counter (e_sampled), takes the batch-loss
 *             mean, runs the priority update (slots + loss signal; sum-tree rebuild), samples step
 *             k+1's batch (the copy + 1) and gathers it into the other batch set, and, unless the
 *             target changes in step k's optimiser (a hard-update step, known to the host), runs step
 *             k+1's target(s') forward into pass 2's buffers (TS_TPF; step k+1 then skips its own,
 *             TS_TREADY; FH_TARGET_PREFETCH=0 off) (e_join),
 *             while S runs the backward (heads forked; ReLU derivative and bias gradients in the GEMM
 *             epilogues where cuBLASLt has them) [-> Q stats every qstats_every] -> S waits e_sampled
 *             -> grad norm/clip -> Adam (bumps the step counter) -> target update -> S waits e_join
 *             (the join, inside the graph) -> loss/grad-norm history on the device.
 *             Step k reads batch set k & 1 (fh_cuda_batch + pass 0's input, double-buffered); the
 *             last step of an epoch prefetches nothing (collection changes the replay), so nothing
 *             crosses an epoch boundary or lives in a checkpoint. Bit for bit the batch sampling at
 *             the start of step k+1 would draw: the sampler reads only the sum tree (after priority
 *             update k, on its own stream) and the counter copied while it still held k (Adam k waits
 *             for e_sampled, the copy, before it bumps it; FH_STEP_SNAPSHOT=0: the sampler reads the
 *             counter itself and e_sampled follows it). Graph variants: one per TS_* flag combination
 *             the epoch uses (Q stats, own sample, prefetch, odd set, target prefetched / ready), captured
 *             at create.
 *             FH_TRAIN_PREFETCH=0 (read at create; for A/B measurement): no side stream, every step
 *             samples and gathers its own batch into set 0 first, the rest in the same order.
 *   eval      stream C waits on S: one graph of the segmented greedy evaluation; async read-back. With the fused
 *             evaluation (one cluster of SMs per 16 segments, the rest idle) it runs on a stream E of its own
 *             and, unless FH_COLLECT_AHEAD=0, the NEXT epoch's collection runs beside it on C (collect-ahead:
 *             what it overwrites backed up first, collect_ahead.h; then its target-cache rows on S), so the
 *             next epoch starts training at once. The same bits as collecting at the next epoch's start: the
 *             collection reads only the weights, env states, replay and counters, which nothing changes in
 *             between (entry points that would, set_params and the env probes, undo it first; checkpoints read
 *             the backed-up state). That epoch reports the collection's own time as its collect ms.
 *   flush     async copies of what is left (epsilon, evaluation records) into pinned memory, one
 *             event, ONE cudaEventSynchronize
 * Loss and grad norm of every step (and the Q statistics every qstats_every steps) are written by the
 * device straight into mapped pinned host memory, followed by the step counter; between graph
 * launches the host reads the steps recorded so far without synchronising (keeping at most kRunAhead
 * steps queued), so a non-finite loss stops the epoch early. The trainer counts its synchronisations
 * (stats.host_syncs).
 * use_graphs = 0 launches exactly the same sequence eagerly (same streams, events and buffer sets).
 */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include "adam.cuh"
#include "collect.h"
#include "collect_ahead.h"
#include "config.h"
#include "eval.h"
#include "net.h"
#include "per.cuh"
#include "replay.h"
#include "checkpoint.h"
#include "env_host.h"

#define FH_CUDA_VERSION "0.1.0 cuda"

/* Train steps the host may queue ahead of the last step whose scalars it has read. */
static constexpr int64_t kRunAhead = 4;
/* FH_RUN_AHEAD=<n> (1..64; A/B measurement) overrides it, read at each epoch */
static int64_t run_ahead() { return fh_env_int("FH_RUN_AHEAD", 1, 64, kRunAhead); }

/* Train steps per graph launch at most (step groups; FH_STEP_GROUP=<1..8> overrides it, read at create). One: in
 * interleaved rounds of the reference bench, groups of 2 and 4 were no faster (bench/RESULTS.md, fourteenth session). */
static constexpr int32_t kStepGroup = 1;
static int32_t step_group_n() { return (int32_t)fh_env_int("FH_STEP_GROUP", 1, 8, kStepGroup); }

struct fh_host_market {
  std::vector<float> features;
  std::vector<double> open, high, low, close, atr;
  std::vector<uint8_t> session_start;
  fh_market m;
};

struct fh_trainer {
  fh_config cfg;
  int32_t device = 0;
  std::string last_error;
  fh_host_market hm;
  double reward_scale = 0.0;
  int32_t obs_dim = 0;
  int32_t batch = 0;
  int32_t cap = 0;
  uint64_t config_hash = 0;
  double flops_per_epoch = 0.0;

  fh_cuda_market dm{};
  fh_cuda_envs envs{};
  fh_cuda_replay replay{};
  /* Two batch sets (batch fields + pass 0's input [s; s']) for the replay prefetch: a train step reads
   * set (k & 1) while the side stream writes step k+1's batch into the other. bb[0] / xs[0] (the net's
   * own pass[0].x, cap rows) are also what the narrow entry points use; bb[1] / xs[1] hold `batch` rows
   * and exist only with prefetch. net.pass[0].x is xs[0] except while a step of set 1 is launched. */
  fh_cuda_batch bb[2]{};
  void* xs[2] = {nullptr, nullptr};
  fh_cuda_eval ev{};
  bool have_dm = false, have_envs = false, have_replay = false, have_ev = false, have_net = false;
  bool have_bb[2] = {false, false};
  fh_net net{};
  fh_target_p1 tp1{};            /* the target's first-layer table (net.h); tp1.why says why it is off */
  fh_target_cache tcache{};      /* target(s') of every replay slot's state (net.h); tcache.why says why it is off */
  /* the paired batch layout (FH_PAIRED=0 off; bf16 mode with the target cache, so that nothing but the online
   * forward reads s'): s and s' of a sample share their market rows in one block (fh_pair_layout, net_kernels.cuh),
   * about half the bytes the replay gather writes and layer 1 reads */
  bool pair = false;             /* its layout: net.pair_l */
  /* the gathering first layer (FH_L1_GATHER=1 blocks, =2 / =3 clusters of two / four; opt-in, with the paired layout
   * on a Hopper GPU) is on where net.l1g.on: the replay gather writes each sample's bars and account features instead
   * of its block, and layer 1 and dW1's market columns read the windows from the feature matrix
   * (kernels/l1_gather.cuh; net.l1g.why says why it is off when asked for) */

  /* replay prefetch (FH_TRAIN_PREFETCH, default on): side stream and its fork / sampled / join events */
  bool prefetch = false;
  bool prefetch_off_by_env = false;
  cudaStream_t s_side = nullptr;
  cudaEvent_t e_fork = nullptr, e_sampled = nullptr, e_join = nullptr;
  int64_t* step_snap = nullptr;  /* (1) device: the counter as the prefetch's sampler reads it (FH_STEP_SNAPSHOT) */
  bool snap_copy = false;        /* FH_SNAP_COPY=1: that copy as a copy node after the loss mean (A/B) */
  /* the batch-loss mean and the counter copy on a branch of their own (opt-in, FH_MEAN_BRANCH=1, until it has run
   * on a GPU; else first on the side stream, ahead of the priority update), so that the replay's chain (priority
   * update, sample, gather: the step's longest after the loss) starts right after the loss; e_rec joins it before
   * the optimiser, which writes the record */
  cudaStream_t s_rec = nullptr;
  cudaEvent_t e_rec = nullptr;
  /* the next batch's IS weights on that branch too (opt-in with it, FH_WEIGHTS_BRANCH=1; else after the sampler on the
   * side stream): the gather needs only the slots, and only the next step's loss reads the weights; e_wfork after
   * the sampler, e_wjoin after the weights (joined at the step's end). Resolved at create: it needs the counter copy
   * (the weights read the counter) and a prefetched sampler (not FH_KO_SAMPLE). */
  bool weights_branch = false;
  cudaEvent_t e_wfork = nullptr, e_wjoin = nullptr;
  /* the early zero (fh_per_zero; opt-in, FH_PER_EARLY_ZERO=1): the sampler's weights kernel zeroes the batch's leaves,
   * and the batch's priority update is then one launch shorter */
  bool early_zero = false;

  /* The collection in groups of cgroup_steps steps (one graph each; a single group of all T steps unless the target
   * cache's fill can follow it chunk by chunk): where a group's slots are exactly the cache's chunks (cgroup_steps x
   * n_envs = a multiple of the chunk, the ring rows a multiple of cgroup_steps, the epoch's first row too), the train
   * stream fills a group's cache rows once the group's event fires, beside the next groups, instead of all rows after
   * the last (FH_COLLECT_GROUPS=0: one group, the fill after it) */
  int32_t cgroup_steps = 0;
  std::vector<cudaGraphExec_t> g_collect;
  std::vector<cudaEvent_t> e_cgroup;
  cudaGraphExec_t g_eval = nullptr;
  /* collect-ahead (FH_COLLECT_AHEAD=0 off; on with the fused evaluation, which runs on a stream and workspace of
   * its own): right after an epoch's training, the next epoch's collection (and its target-cache rows) runs on the
   * collect stream beside this epoch's evaluation, which occupies one cluster of SMs per 16 segments and leaves the
   * rest idle; the next epoch then starts training at once. ahead_bk keeps what that collection overwrote, so
   * checkpoints read the state as of the epoch's end and entry points that change what it used undo it. */
  bool ahead_on = false;
  bool ahead_valid = false;      /* the device holds the next epoch's collection */
  float ahead_ms = 0.0f;         /* its duration (events), reported as that epoch's collect time */
  fh_collect_backup ahead_bk{};
  cudaStream_t s_eval = nullptr; /* the fused evaluation's stream with collect-ahead */
  void* eval_ws = nullptr;       /* its cuBLASLt workspace */
  cudaEvent_t e_a0 = nullptr, e_ac = nullptr, e_a1 = nullptr, e_ev = nullptr;
  /* the evaluation's metrics beside the collection (with collect-ahead; FH_EVAL_METRICS_EARLY=0 off): the host
   * queries e_ev (the records' read-back is through) and computes the metrics while the device still runs the
   * next collection, then takes the epoch's one synchronisation; else it computes them after it */
  bool metrics_early = false;
  bool record_in_optimiser = true;  /* the fused optimiser writes the step record (FH_STEP_RECORD_KERNEL=1: a launch) */
  bool target_prefetch = false;  /* with prefetch: the side stream also runs the next step's target(s') forward
                                    (FH_TARGET_PREFETCH=0 off) */
  cudaGraphExec_t g_step[64] = {};  /* train-step variants, indexed by TS_* flags (only those the epoch uses) */
  /* Consecutive train steps as one graph (step groups): up to group_n steps (FH_STEP_GROUP=<1..8>, read at create;
   * default kStepGroup) where the target changes in none but the last (the host refreshes the target's table after
   * such a step), keyed by group_key(their flags); cap_group holds the flags of the group being captured */
  int32_t group_n = 1;
  std::map<uint64_t, cudaGraphExec_t> g_group;
  std::vector<unsigned> cap_group;

  /* Step scalars written by the device straight into mapped pinned host memory (h_* = host view,
   * the rest = device view of the same bytes): the host reads a step's loss and grad norm as soon as
   * *h_done says the step is through, without synchronising. */
  float* h_loss = nullptr;       /* (S) */
  float* h_gnorm = nullptr;      /* (S) */
  double* h_qstats = nullptr;    /* (5) last Q-stats sample */
  int64_t* h_done = nullptr;     /* (1) train step counter of the last recorded step */
  float* loss_hist = nullptr;
  float* gnorm_hist = nullptr;
  double* qstats = nullptr;
  int64_t* d_done = nullptr;
  float* h_eps = nullptr;        /* (1) pinned flush target */
  cudaEvent_t e_t0 = nullptr, e_t1 = nullptr, e_t2 = nullptr, e_t3 = nullptr;

  int64_t epoch = 0;             /* epochs finished */
  int64_t env_step = 0;          /* collection steps so far (mirror of the device counter) */
  int64_t train_step = 0;        /* optimiser steps so far (mirror of the device counter) */
  int64_t probe_steps = 0;       /* fh_trainer_env_step calls (their Philox counter offset) */
  fh_metrics flat{}, buy_hold{};
};

/* ------------------------------------------------------------------ errors */

static fh_status fail(fh_trainer* t, fh_status st, const char* fmt, ...) {
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (t) t->last_error = buf;
  return st;
}

/* Failure of a CUDA-side step: message = what + the recorded CUDA/cuBLAS text. */
static fh_status fail_dev(fh_trainer* t, fh_status st, const char* what) {
  const char* detail = fh_cuda_last_error_text();
  return fail(t, st, "%s: %s (%s)", what, fh_status_string(st), detail && detail[0] ? detail : "no detail");
}

#define TR_TRY(t, expr, what)                            \
  do {                                                   \
    fh_status s_ = (expr);                               \
    if (s_ != FH_OK) return fail_dev((t), s_, (what));   \
  } while (0)

#define TR_CUDA(t, expr, what)                                                          \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fh_cuda_set_error(__FILE__, __LINE__, #expr, cudaGetErrorString(e_));             \
      return fail_dev((t), fh_cuda_status(e_), (what));                                 \
    }                                                                                   \
  } while (0)

static void set_err(char* err, size_t len, const char* fmt, ...) {
  if (!err || len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

static fh_status set_device(fh_trainer* t) {
  cudaError_t e = cudaSetDevice(t->device);
  if (e != cudaSuccess) return fail(t, fh_cuda_status(e), "cudaSetDevice(%d): %s", t->device, cudaGetErrorString(e));
  return FH_OK;
}

/* ------------------------------------------------------------------ launch sequences */

static cudaStream_t collect_stream(fh_trainer* t) { return t->net.pass[1].s; }
static cudaStream_t train_stream(fh_trainer* t) { return t->net.pass[0].s; }

/* Collection steps i0 .. i1 - 1 of the T on the collect stream: observe once first (i0 = 0), then per step the online
 * forward (N rows, expected Q) and one fused launch (epsilon-greedy + env step + replay row + observe of the new
 * state), and after step T - 1 the counter and the tree. */
static fh_status launch_collect_steps(fh_trainer* t, int32_t i0, int32_t i1) {
  cudaStream_t s = collect_stream(t);
  const int32_t N = t->cfg.n_envs, D = t->obs_dim, T = t->cfg.episode_len;
  void* obs = t->net.pass[1].x;
  if (i0 == 0) FH_TRY(fh_launch_env_observe(t->envs, t->dm, t->net.op, obs, D, s));
  for (int32_t i = i0; i < i1; ++i) {
    FH_TRY(fh_net_forward(&t->net, 1, 0, N, 1));
    FH_TRY(fh_launch_env_act_step_observe(t->envs, t->dm, &t->replay, t->net.pass[1].q, t->net.nq, i, t->net.op, obs, D,
                                          s));
  }
  return i1 == T ? fh_launch_collect_end(t->envs, &t->replay, T, s) : FH_OK;
}

/* The steps of collection group k (cgroup_steps each, the last maybe fewer). */
static void collect_group_steps(const fh_trainer* t, int32_t k, int32_t* i0, int32_t* i1) {
  const int32_t T = t->cfg.episode_len, cs = t->cgroup_steps > 0 ? t->cgroup_steps : T;
  *i0 = k * cs;
  *i1 = *i0 + cs < T ? *i0 + cs : T;
}
static fh_status launch_collect_group(fh_trainer* t, int32_t k) {
  int32_t i0, i1;
  collect_group_steps(t, k, &i0, &i1);
  return launch_collect_steps(t, i0, i1);
}

/* Train-step variants: one captured graph per combination the epoch loop uses (step_flags). */
enum : unsigned {
  TS_QSTATS = 1u,    /* Q statistics of the batch */
  TS_SAMPLE = 2u,    /* sample + gather its own batch first (the first step of an epoch; every step without prefetch) */
  TS_PREFETCH = 4u,  /* sample + gather step k+1's batch on the side stream, behind this step's backward */
  TS_ODD = 8u,       /* reads batch set 1 (odd steps of an epoch); prefetches into set 0 */
  TS_TPF = 16u,      /* the side stream also runs step k+1's target(s') forward (the target does not change in k) */
  TS_TREADY = 32u,   /* target(s') was computed by step k-1's side stream */
};

/* Flags of step k of an epoch of `steps` steps, given whether the target changes in step k-1's and in step
 * k's optimiser. Step 0 samples for itself into set 0; step k reads set k & 1 and, unless it is the last,
 * prefetches step k+1's batch into the other set (nothing prefetched crosses an epoch boundary: collection
 * changes the replay), and with it step k+1's target forward when the target stays as it is. */
static unsigned step_flags_given(const fh_trainer* t, int32_t k, int32_t steps, bool changes_before, bool changes) {
  int32_t qe = t->cfg.qstats_every > 0 ? t->cfg.qstats_every : t->cfg.train_steps;
  if (qe <= 0) qe = 1;
  unsigned f = (((k + 1) % qe == 0) || k == steps - 1) ? TS_QSTATS : 0u;
  if (!t->prefetch) return f | TS_SAMPLE;
  if (k == 0) f |= TS_SAMPLE;
  if (k + 1 < steps) f |= TS_PREFETCH;
  if (k & 1) f |= TS_ODD;
  if (t->target_prefetch && (f & TS_PREFETCH) && !changes) f |= TS_TPF;
  if (t->target_prefetch && k > 0 && !changes_before) f |= TS_TREADY; /* step k-1 had TS_PREFETCH */
  return f;
}

/* Whether the optimiser of the epoch's step k (Adam t = train_step + k + 1) changes the target. */
static bool target_changes(const fh_trainer* t, int32_t k) {
  return fh_target_mix(t->cfg.tau, t->cfg.target_update_every, t->train_step + k + 1) != 0.0f;
}

static unsigned step_flags(const fh_trainer* t, int32_t k, int32_t steps) {
  return step_flags_given(t, k, steps, k > 0 && target_changes(t, k - 1), target_changes(t, k));
}

/* PER sample (counter *counter + step_offset) + gather [s; s'] of batch set `set` on stream s; the
 * event `sampled` (optional) is recorded once the sampler has read the counter. */
static fh_status launch_sample_gather(fh_trainer* t, int set, cudaStream_t s, const int64_t* counter,
                                      int64_t step_offset, cudaEvent_t sampled, bool branch = false) {
  const int32_t B = t->batch;
  const fh_net* net = &t->net;
  const fh_config& c = t->cfg;
  const fh_cuda_batch& bb = t->bb[set];
  void* x = t->xs[set];
  /* the early zero only where the batch's priority update follows (not with FH_KO_PRIO) */
  const fh_cuda_replay* zero = t->early_zero && !(net->knockout & FH_KO_PRIO) ? &t->replay : nullptr;
  /* FH_KO_SAMPLE leaves out the prefetched samples only: the gathers keep reading the first step's real batch */
  if (!(net->knockout & FH_KO_SAMPLE) || step_offset == 0)
    FH_TRY(fh_launch_per_sample(t->replay.tree, bb, B, c.seed, counter, c.per_beta_start, c.per_beta_end,
                                c.per_beta_steps, s, step_offset, zero, branch ? t->s_rec : nullptr,
                                branch ? t->e_wfork : nullptr));
  if (sampled) FH_CUDA_TRY(cudaEventRecord(sampled, s));
  if (net->knockout & FH_KO_GATHER) return FH_OK;
  if (t->pair && net->l1g.on) return fh_launch_replay_gather_l1g(t->replay, bb, B, fh_l1g_bars(x), fh_l1g_acc(x, B), s);
  if (t->pair) return fh_launch_replay_gather_pair(t->replay, t->dm, c.window, bb, B, x, net->pair_l, s);
  return fh_launch_replay_gather(t->replay, t->dm, c.window, bb, B, net->op, x, fh_net_next_obs(net, B, x), t->obs_dim,
                                 s);
}

static fh_status launch_qstats(fh_trainer* t, cudaStream_t s) {
  fh_net* net = &t->net;
  FH_TRY(fh_net_train_heads(net, t->batch));
  FH_TRY(fh_net_expected_q(net, 0, t->batch, s));
  return fh_launch_qstats(net->pass[0].q, net->nq, t->batch, net->L.branch_sizes, net->L.n_branches, net->qs_part,
                          t->qstats, s);
}

/* One train step on the train stream S (pass 0's input already points at the step's batch set). */
static fh_status launch_train_step_body(fh_trainer* t, unsigned flags) {
  cudaStream_t s = train_stream(t);
  const int32_t B = t->batch;
  fh_net* net = &t->net;
  const fh_config& c = t->cfg;
  const bool replay = !(net->knockout & FH_KO_REPLAY);
  const int set = (flags & TS_ODD) ? 1 : 0;
  const fh_cuda_batch& bb = t->bb[set];
  if (replay && (flags & TS_SAMPLE)) FH_TRY(launch_sample_gather(t, set, s, net->step, 0, nullptr));
  const bool pf = replay && (flags & TS_PREFETCH);
  /* with prefetch the batch-loss mean runs on the side stream (only the step record reads it) */
  FH_TRY(fh_net_forward_loss(net, B, bb.act, bb.ret, bb.disc, bb.weight, !pf, (flags & TS_TREADY) != 0));
  /* the priority update needs only the slots and the loss's signal; the next sample must see it, and
   * nothing else of the step reads the tree */
  const bool prio = !(net->knockout & FH_KO_PRIO);
  /* whether the update still zeroes the batch's leaves: not when the sampler of this set did (early zero), i.e.
   * always but where FH_KO_SAMPLE left the prefetched sampling out */
  const bool zero = !t->early_zero || ((net->knockout & FH_KO_SAMPLE) && !(flags & TS_SAMPLE));
  if (replay && !pf && prio) FH_TRY(fh_launch_priority_update(t->replay, bb.slot, net->signal, B, s, zero));
  if (pf) {
    /* fork: the priority update, then step k+1's sample + gather into the other set, concurrent with this
     * step's backward. The counter still reads k here (Adam of this step bumps it), hence offset 1. Adam
     * waits for e_sampled: by default the side stream's first act is a copy of the counter that the
     * sampler reads (so Adam waits only for that copy, not for the priority update and the sampler);
     * FH_STEP_SNAPSHOT=0 makes the sampler read the counter itself, e_sampled after it */
    FH_CUDA_TRY(cudaEventRecord(t->e_fork, s));
    FH_CUDA_TRY(cudaStreamWaitEvent(t->s_side, t->e_fork, 0));
    /* the loss mean and the counter copy: on their own branch (s_rec), else first on the side stream */
    cudaStream_t sm = t->s_rec ? t->s_rec : t->s_side;
    if (t->s_rec) FH_CUDA_TRY(cudaStreamWaitEvent(t->s_rec, t->e_fork, 0));
    const int64_t* counter = net->step;
    cudaEvent_t sampled = t->e_sampled;
    /* the counter copy by the loss mean's kernel (its last act; no copy node, whose start cost the replay's chain
     * ~20 µs in traces), or a copy after it (FH_SNAP_COPY=1, or no mean) */
    const bool mean = !(net->knockout & FH_KO_MEAN);
    const bool snap_in_mean = mean && t->step_snap && !t->snap_copy;
    if (mean) FH_TRY(fh_net_loss_mean(net, B, sm, snap_in_mean ? net->step : nullptr, snap_in_mean ? t->step_snap
                                                                                                  : nullptr));
    if (t->step_snap) {
      /* after the loss mean: the optimiser, which waits for e_sampled, also writes the step record */
      if (!snap_in_mean)
        FH_CUDA_TRY(cudaMemcpyAsync(t->step_snap, net->step, sizeof(int64_t), cudaMemcpyDeviceToDevice, sm));
      FH_CUDA_TRY(cudaEventRecord(t->e_sampled, sm));
      counter = t->step_snap;
      sampled = nullptr;
    }
    if (t->s_rec) FH_CUDA_TRY(cudaEventRecord(t->e_rec, t->s_rec));
    if (prio) FH_TRY(fh_launch_priority_update(t->replay, bb.slot, net->signal, B, t->s_side, zero));
    /* the sampler reads the copy made on the branch */
    if (t->s_rec && t->step_snap) FH_CUDA_TRY(cudaStreamWaitEvent(t->s_side, t->e_sampled, 0));
    /* the weights on the branch (after the record's copy there) */
    FH_TRY(launch_sample_gather(t, set ^ 1, t->s_side, counter, 1, sampled, t->weights_branch));
    if (t->weights_branch) FH_CUDA_TRY(cudaEventRecord(t->e_wjoin, t->s_rec));
    /* the next step's target(s') (nothing of this step reads pass 2 after the loss) */
    if (flags & TS_TPF)
      FH_TRY(fh_net_target_forward(net, B, t->xs[set ^ 1], t->tp1.on ? t->bb[set ^ 1].nbar : nullptr, t->s_side));
    FH_CUDA_TRY(cudaEventRecord(t->e_join, t->s_side));
  }
  FH_TRY(fh_net_backward(net, B));
  if (flags & TS_QSTATS) FH_TRY(launch_qstats(t, s));
  if (pf) FH_CUDA_TRY(cudaStreamWaitEvent(s, t->e_sampled, 0));
  if (pf && t->s_rec) FH_CUDA_TRY(cudaStreamWaitEvent(s, t->e_rec, 0)); /* the loss mean, for the record */
  /* the loss mean is done here (on S, or on the side stream before e_sampled: after the counter copy, or, with
   * FH_STEP_SNAPSHOT=0, after the sampler, which follows it), so the fused optimiser's last block writes the step
   * record (FH_STEP_RECORD_KERNEL=1, the 5-launch chain or the knockout: a launch of its own at the end) */
  const fh_step_record rec{net->loss, t->loss_hist, t->gnorm_hist, c.train_steps, t->d_done};
  bool recorded = false;
  FH_TRY(fh_net_optimise(net, c, t->record_in_optimiser ? &rec : nullptr, &recorded));
  /* join before the graph ends (and before a record launch: it reads the loss mean of the side stream) */
  if (pf) FH_CUDA_TRY(cudaStreamWaitEvent(s, t->e_join, 0));
  if (pf && t->weights_branch) FH_CUDA_TRY(cudaStreamWaitEvent(s, t->e_wjoin, 0));
  if (recorded) return FH_OK;
  return fh_launch_record_step(net->loss, net->gnorm, net->step, c.train_steps, t->loss_hist, t->gnorm_hist,
                               t->d_done, s);
}

/* One train step: every consumer of pass 0's input (both training forwards, the s' view, the layer-1
 * weight gradient) reads the step's set; pass[0].x goes back to set 0 afterwards. Graphs bake the
 * pointer in, so set 1 has graph variants of its own (TS_ODD). */
static fh_status launch_train_step(fh_trainer* t, unsigned flags) {
  const int set = (flags & TS_ODD) ? 1 : 0;
  t->net.pass[0].x = t->xs[set];
  t->net.tp1_bars = t->tp1.on ? t->bb[set].nbar : nullptr;
  t->net.tc_rows = t->tcache.on ? t->bb[set].nslot : nullptr;
  t->net.pair = t->pair;
  const fh_status st = launch_train_step_body(t, flags);
  t->net.pass[0].x = t->xs[0];
  t->net.tp1_bars = nullptr;
  t->net.tc_rows = nullptr;
  t->net.pair = false;
  return st;
}

/* Target cache rows [slot0, slot0 + count) from the replay's stored states, on the train stream (stream-ordered
 * before the next step). */
static fh_status fill_target_cache(fh_trainer* t, int64_t slot0, int64_t count) {
  return fh_target_cache_fill(t->tcache, &t->net, t->replay.v.bar, t->replay.v.account, slot0, count, train_stream(t));
}

/* The target cache rows of the slots of collection rows row0 .. row0 + nrows - 1 (logical rows: the ring wraps),
 * on the train stream: after every collection, before the epoch's first train step reads them. */
static fh_status fill_target_cache_rows(fh_trainer* t, int64_t row0, int64_t nrows) {
  if (!t->tcache.on || nrows <= 0) return FH_OK;
  const int64_t R = t->replay.rows, N = t->replay.n_envs;
  if (nrows >= R) return fill_target_cache(t, 0, t->replay.capacity);
  const int64_t r0 = row0 % R, first = nrows < R - r0 ? nrows : R - r0;
  FH_TRY(fill_target_cache(t, r0 * N, first * N));
  return nrows > first ? fill_target_cache(t, 0, (nrows - first) * N) : FH_OK;
}

/* This epoch's collection (its first collection row row0: the counter at its start) on the collect stream, group by
 * group (cgroup_steps), each group's end recorded; and the target-cache rows of the slots it writes on the train
 * stream: each group's right after the group, beside the next groups, where row0 lines the groups up with the cache's
 * chunks (each group's slots are then one chunk of the ring), else all of them after the last group. The caller joins
 * the collection's end to the train stream. */
static fh_status collect_and_fill(fh_trainer* t, int64_t row0) {
  cudaStream_t sc = collect_stream(t), st = train_stream(t);
  const int32_t n = (int32_t)t->e_cgroup.size();
  for (int32_t k = 0; k < n; ++k) {
    if (!t->g_collect.empty()) TR_CUDA(t, cudaGraphLaunch(t->g_collect[(size_t)k], sc), "collection graph launch");
    else TR_TRY(t, launch_collect_group(t, k), "collection");
    TR_CUDA(t, cudaEventRecord(t->e_cgroup[(size_t)k], sc), "collection group end");
  }
  if (!t->tcache.on) return FH_OK;
  const bool each = t->cgroup_steps > 0 && row0 % t->cgroup_steps == 0;
  for (int32_t k = each ? 0 : n - 1; k < n; ++k) {
    int32_t i0 = 0, i1 = t->cfg.episode_len;
    if (each) collect_group_steps(t, k, &i0, &i1);
    TR_CUDA(t, cudaStreamWaitEvent(st, t->e_cgroup[(size_t)k], 0), "target cache wait");
    TR_TRY(t, fill_target_cache_rows(t, row0 + i0, i1 - i0), "target cache");
  }
  return FH_OK;
}

/* After a change of the target's weights (hard update, set_params, checkpoint load): the first-layer table
 * again, then every row of the target cache. */
static fh_status refresh_target_p1(fh_trainer* t) {
  FH_TRY(fh_target_p1_refresh(t->tp1, &t->net, t->dm.view, t->cfg.window, train_stream(t)));
  return fill_target_cache(t, 0, t->replay.capacity);
}

/* Greedy evaluation of the online net on the collect stream, or with collect-ahead on the evaluation's own stream and
 * workspace (reset, steps, final flatten; no read-back):
 * fh_eval_run (eval.h): the fused persistent kernel in bf16 mode (not captured: the trainer launches
 * it eagerly), else observe once, then per step the forward (S rows) and one fused greedy step + observe. */
static fh_status launch_eval(fh_trainer* t) { return fh_eval_run(t->ev, &t->net, t->s_eval, t->eval_ws); }

/* Undo a collection run ahead (collect-ahead), before anything changes or reads what it used or wrote: the
 * backed-up env states, replay rows and leaves back, the counter, a full tree rebuild, and the target-cache rows
 * of those slots again; synchronous. The next epoch collects as usual. */
static fh_status settle_ahead(fh_trainer* t) {
  if (!t->ahead_valid) return FH_OK;
  cudaStream_t st = train_stream(t);
  TR_CUDA(t, cudaDeviceSynchronize(), "collect-ahead undo");
  TR_TRY(t, fh_collect_backup_restore(t->ahead_bk, t->envs, t->replay, t->env_step, st), "collect-ahead undo");
  TR_TRY(t, fill_target_cache_rows(t, t->env_step, t->cfg.episode_len), "collect-ahead undo (target cache)");
  TR_CUDA(t, cudaStreamSynchronize(st), "collect-ahead undo");
  t->ahead_valid = false;
  return FH_OK;
}

typedef fh_status (*fh_seq_fn)(fh_trainer*, int);
static fh_status seq_collect(fh_trainer* t, int k) { return launch_collect_group(t, k); }
static fh_status seq_train(fh_trainer* t, int flags) { return launch_train_step(t, (unsigned)flags); }
static fh_status seq_eval(fh_trainer* t, int) { return launch_eval(t); }
/* a step group's key: its length and every step's TS_* flags (6 bits each, at most 8 steps) */
static uint64_t group_key(const std::vector<unsigned>& f) {
  uint64_t key = f.size();
  for (size_t j = 0; j < f.size(); ++j) key |= (uint64_t)(f[j] & 63u) << (4 + 6 * j);
  return key;
}
/* the steps of t->cap_group in order (one capture) */
static fh_status seq_group(fh_trainer* t, int) {
  for (unsigned f : t->cap_group) FH_TRY(launch_train_step(t, f));
  return FH_OK;
}

/* Capture one launch sequence on stream s into an instantiated graph. */
static fh_status capture(fh_trainer* t, cudaStream_t s, fh_seq_fn fn, int arg, cudaGraphExec_t* out, const char* what) {
  cudaGraph_t g = nullptr;
  TR_CUDA(t, cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), what);
  fh_status st = fn(t, arg);
  cudaError_t e = cudaStreamEndCapture(s, &g);
  if (st != FH_OK) {
    if (g) cudaGraphDestroy(g);
    return fail_dev(t, st, what);
  }
  if (e != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "cudaStreamEndCapture", cudaGetErrorString(e));
    return fail_dev(t, fh_cuda_status(e), what);
  }
  e = cudaGraphInstantiate(out, g, cudaGraphInstantiateFlagUseNodePriority);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "cudaGraphInstantiate", cudaGetErrorString(e));
    return fail_dev(t, fh_cuda_status(e), what);
  }
  return FH_OK;
}

/* ------------------------------------------------------------------ create / destroy */

static void destroy_all(fh_trainer* t) {
  if (!t) return;
  cudaSetDevice(t->device);
  cudaDeviceSynchronize();
  for (auto g : t->g_collect)
    if (g) cudaGraphExecDestroy(g);
  if (t->g_eval) cudaGraphExecDestroy(t->g_eval);
  for (auto e : t->e_cgroup)
    if (e) cudaEventDestroy(e);
  for (auto g : t->g_step)
    if (g) cudaGraphExecDestroy(g);
  for (auto& g : t->g_group)
    if (g.second) cudaGraphExecDestroy(g.second);
  t->g_group.clear();
  if (t->have_ev) fh_cuda_eval_free(&t->ev);
  for (int i = 0; i < 2; ++i)
    if (t->have_bb[i]) fh_cuda_batch_free(&t->bb[i]);
  if (t->xs[1]) cudaFree(t->xs[1]);  /* xs[0] is the net's */
  if (t->have_replay) fh_cuda_replay_free(&t->replay);
  if (t->have_envs) fh_cuda_envs_free(&t->envs);
  if (t->have_dm) fh_cuda_market_free(&t->dm);
  fh_target_cache_free(&t->tcache, &t->net);
  fh_target_p1_free(&t->tp1, &t->net);
  if (t->have_net) fh_net_destroy(&t->net);
  if (t->h_loss) cudaFreeHost(t->h_loss);
  if (t->h_gnorm) cudaFreeHost(t->h_gnorm);
  if (t->h_qstats) cudaFreeHost(t->h_qstats);
  if (t->h_done) cudaFreeHost(t->h_done);
  if (t->h_eps) cudaFreeHost(t->h_eps);
  cudaEvent_t es[] = {t->e_t0,   t->e_t1,   t->e_t2, t->e_t3,     t->e_fork,
                      t->e_sampled, t->e_join, t->e_rec, t->e_wfork, t->e_wjoin};
  for (auto e : es)
    if (e) cudaEventDestroy(e);
  if (t->s_side) cudaStreamDestroy(t->s_side);
  if (t->s_rec) cudaStreamDestroy(t->s_rec);
  if (t->step_snap) cudaFree(t->step_snap);
  cudaEvent_t aes[] = {t->e_a0, t->e_ac, t->e_a1, t->e_ev};
  for (auto e : aes)
    if (e) cudaEventDestroy(e);
  if (t->s_eval) cudaStreamDestroy(t->s_eval);
  if (t->eval_ws) cudaFree(t->eval_ws);
  fh_collect_backup_free(&t->ahead_bk);
  delete t;
}

static void copy_market(fh_trainer* t, const fh_market* m) {
  fh_host_market& h = t->hm;
  const size_t n = (size_t)m->n_bars;
  h.features.assign(m->features, m->features + n * (size_t)m->n_features);
  h.open.assign(m->open, m->open + n);
  h.high.assign(m->high, m->high + n);
  h.low.assign(m->low, m->low + n);
  h.close.assign(m->close, m->close + n);
  h.atr.assign(m->atr, m->atr + n);
  h.session_start.assign(m->session_start, m->session_start + n);
  h.m = *m;
  h.m.features = h.features.data();
  h.m.open = h.open.data();
  h.m.high = h.high.data();
  h.m.low = h.low.data();
  h.m.close = h.close.data();
  h.m.atr = h.atr.data();
  h.m.session_start = h.session_start.data();
}

/* GEMM FLOPs of one forward row. */
static double fwd_flops_per_row(const fh_layout& L) {
  double f = 2.0 * ((double)L.D * L.h1 + (double)L.h1 * L.h2 + (double)L.h2 * L.n_heads * L.hh);
  for (int k = 0; k < L.n_heads; ++k) f += 2.0 * L.hh * L.out_pad[k];
  return f;
}

/* Bytes per batch row of the trainer's second batch set (prefetch): 2 input rows [s; s'] of the op
 * dtype and the fh_cuda_batch fields (slot, prob, weight, act[3], ret, disc). Counted whether or not
 * FH_TRAIN_PREFETCH is on, so the auto batch is the same in both modes. */
static int64_t prefetch_bytes_per_row(const fh_config& c, int32_t obs_dim) {
  const int64_t es = c.deterministic ? 4 : 2;
  return 2 * (int64_t)obs_dim * es + 4 + 8 + 4 + 3 * 4 + 4 + 4;
}

static int32_t auto_batch(const fh_config& c, int32_t obs_dim, size_t free_bytes) {
  const int64_t per_row = fh_net_bytes_per_row(c, obs_dim) + 64 + prefetch_bytes_per_row(c, obs_dim);
  const int32_t cap = c.batch_cap > 0 ? c.batch_cap : 16384;
  int32_t b = 1;
  while ((int64_t)b * 2 <= cap && (double)((int64_t)b * 2 * per_row) <= 0.5 * (double)free_bytes) b *= 2;
  return b < 32 ? (cap < 32 ? cap : 32) : b;
}

static fh_status baselines(fh_trainer* t) {
  cudaStream_t s = collect_stream(t);
  fh_eval_policy pols[2] = {FH_EVAL_FLAT, FH_EVAL_BUY_HOLD};
  fh_metrics* outs[2] = {&t->flat, &t->buy_hold};
  for (int i = 0; i < 2; ++i) {
    TR_TRY(t, fh_launch_eval_fixed(t->ev, pols[i], s), "baseline evaluation");
    TR_TRY(t, fh_launch_eval_readback(t->ev, s), "baseline read-back");
    TR_CUDA(t, cudaStreamSynchronize(s), "baseline evaluation");
    fh_cuda_eval_finalise(t->ev, &t->hm.m, t->cfg.initial_capital, outs[i]);
  }
  return FH_OK;
}

/* Run every GEMM shape once eagerly (plans cached, nothing captured has to pick one), with no
 * effect on the trainer state: forward passes and a loss/backward whose gradient is discarded. */
static fh_status warm_up(fh_trainer* t) {
  fh_net* net = &t->net;
  const int32_t B = t->batch;
  const size_t es = fh_dtype_size(net->op);
  for (int p = 0; p < 2; ++p)
    TR_CUDA(t, cudaMemsetAsync(net->pass[p].x, 0, (size_t)net->pass[p].cap * t->obs_dim * es, net->pass[p].s),
            "warm-up");
  const fh_cuda_batch& bb = t->bb[0];
  TR_CUDA(t, cudaMemsetAsync(bb.act, 0, (size_t)B * 3 * sizeof(int32_t), train_stream(t)), "warm-up");
  TR_CUDA(t, cudaMemsetAsync(bb.ret, 0, (size_t)B * sizeof(float), train_stream(t)), "warm-up");
  TR_CUDA(t, cudaMemsetAsync(bb.disc, 0, (size_t)B * sizeof(float), train_stream(t)), "warm-up");
  TR_CUDA(t, cudaMemsetAsync(bb.weight, 0, (size_t)B * sizeof(float), train_stream(t)), "warm-up");
  TR_CUDA(t, cudaDeviceSynchronize(), "warm-up");
  fh_status st = fh_net_loss_grad(net, B, bb.act, bb.ret, bb.disc, bb.weight);
  if (st == FH_ERR_UNSUPPORTED && (net->fused || net->relu_masks)) {
    /* cuBLASLt has no algorithm for a fused epilogue (the masks' RELU_AUX included) on this GPU/shape:
     * elementwise kernels */
    net->fused = 0;
    net->relu_masks = 0;
    TR_CUDA(t, cudaDeviceSynchronize(), "warm-up");
    st = fh_net_loss_grad(net, B, bb.act, bb.ret, bb.disc, bb.weight);
  }
  TR_TRY(t, st, "warm-up train shapes");
  if (t->pair) { /* the paired layout's layer-1 shapes (B/2 blocks of the zeroed input) */
    net->pair = true; /* (with net.l1g on, its account columns' dW is a cuBLASLt shape of its own) */
    st = fh_net_loss_grad(net, B, bb.act, bb.ret, bb.disc, bb.weight);
    net->pair = false;
    TR_TRY(t, st, "warm-up train shapes (paired layout)");
  }
  TR_TRY(t, fh_net_forward(net, 1, 0, t->cfg.n_envs, 1), "warm-up collect shapes");
  if (t->ev.n_seg > 0) TR_TRY(t, fh_net_forward(net, 1, 0, t->ev.n_seg, 1), "warm-up eval shapes");
  TR_CUDA(t, cudaDeviceSynchronize(), "warm-up");
  return FH_OK;
}

static fh_status create_inner(fh_trainer* t, const fh_market* market) {
  const fh_config& c = t->cfg;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return fail(t, FH_ERR_DEVICE, "no CUDA device available (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  if (c.device < 0 || c.device >= count)
    return fail(t, FH_ERR_INVALID_CONFIG, "device: %d is not a CUDA device (this host has %d)", c.device, count);
  t->device = c.device;
  FH_TRY(set_device(t));

  copy_market(t, market);
  t->obs_dim = c.window * market->n_features + FH_ACCOUNT_FEATURES;
  t->reward_scale = fh_resolve_reward_scale(c, *market);
  t->config_hash = fh_config_hash(&c, market);

  TR_TRY(t, fh_cuda_market_upload(&t->hm.m, &t->dm), "market upload");
  t->have_dm = true;
  const fh_env_params ep = fh_env_params_from_config(c, t->reward_scale);
  TR_TRY(t, fh_cuda_envs_alloc(c, ep, market->n_features, &t->envs), "env allocation");
  t->have_envs = true;
  TR_TRY(t, fh_cuda_replay_alloc(c, &t->replay), "replay allocation");
  t->have_replay = true;
  TR_TRY(t, fh_cuda_eval_alloc(c, ep, &t->hm.m, t->dm, &t->ev), "evaluation allocation");
  t->have_ev = true;

  size_t free_b = 0, total_b = 0;
  TR_CUDA(t, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  t->batch = c.batch_size > 0 ? c.batch_size : auto_batch(c, t->obs_dim, free_b);
  t->cap = t->batch;
  if (c.n_envs > t->cap) t->cap = c.n_envs;
  if (t->ev.n_seg > t->cap) t->cap = t->ev.n_seg;
  TR_TRY(t, fh_net_create(&t->net, c, t->obs_dim, t->cap), "network allocation");
  t->have_net = true;
  TR_TRY(t, fh_eval_fused_setup(&t->ev, &t->net, -1), "fused evaluation setup");
  TR_TRY(t, fh_target_p1_setup(&t->tp1, &t->net, t->dm.view, c.window, c), "target first-layer table");
  TR_TRY(t, fh_target_cache_setup(&t->tcache, &t->net, t->tp1, t->replay.capacity, t->batch, c), "target cache");
  TR_TRY(t, fill_target_cache(t, 0, t->replay.capacity), "target cache");
  {
    /* the collection's groups: each group's slots one chunk of the cache's fill (the ring's rows a multiple of the
     * group), so that each chunk can be filled as soon as its group is through */
    const int32_t N = c.n_envs, T = c.episode_len;
    int32_t cs = 0;
    if (t->tcache.on && !fh_env_is("FH_COLLECT_GROUPS", "0") && N > 0 && t->tcache.chunk % N == 0) {
      cs = t->tcache.chunk / N;
      if (cs >= T || t->replay.rows % cs != 0) cs = 0;
    }
    t->cgroup_steps = cs;
    t->e_cgroup.assign(cs > 0 ? (size_t)((T + cs - 1) / cs) : 1, nullptr);
    for (auto& e : t->e_cgroup) TR_CUDA(t, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event creation");
  }
  TR_TRY(t, fh_cuda_batch_alloc(t->cap, &t->bb[0]), "batch allocation");
  t->have_bb[0] = true;
  t->xs[0] = t->net.pass[0].x;
  {
    /* replay prefetch: off with FH_TRAIN_PREFETCH=0, without replay (knockout) or with fewer than 2 steps */
    const char* pe = getenv("FH_TRAIN_PREFETCH");
    t->prefetch_off_by_env = pe && pe[0] == '0';
    t->prefetch = !t->prefetch_off_by_env && !(t->net.knockout & FH_KO_REPLAY) && c.train_steps > 1;
    /* the next step's target forward on the side stream too, unless FH_TARGET_PREFETCH=0 or the target
     * changes at every step (Polyak, or a hard copy every step) */
    const char* rk = getenv("FH_STEP_RECORD_KERNEL");
    t->record_in_optimiser = !(rk && rk[0] == '1');
    const char* tpe = getenv("FH_TARGET_PREFETCH");
    t->target_prefetch = t->prefetch && !(tpe && tpe[0] == '0') && !(c.tau > 0.0f) && c.target_update_every != 1 &&
                         !t->tcache.on;  /* with the cache no step runs a target forward */
  }
  {
    const int32_t F = t->hm.m.n_features;
    const fh_pair_layout pl = fh_pair_make(c.window, F, c.n_step);
    /* worth it when a block is shorter than the two rows it replaces */
    t->pair = t->net.op == FH_BF16 && t->dm.features_bf16 && F % 8 == 0 && !t->net.fused && !t->net.mma &&
              t->obs_dim == c.window * F + FH_ENV_ACCOUNT && t->tcache.on && !t->target_prefetch &&
              pl.P < 2 * t->obs_dim && !fh_env_is("FH_PAIRED", "0");
    if (t->pair) TR_TRY(t, fh_net_pair_setup(&t->net, pl), "paired batch layout (W1 copies)");
    const int l1g_variant = (int)fh_env_int("FH_L1_GATHER", 0, 3, 0);
    /* (its batch input fits in the batch sets' buffers of 2B rows of the observation) */
    if (t->pair && l1g_variant > 0 && fh_l1g_input_bytes(t->batch) <= (size_t)2 * t->batch * t->obs_dim * 2) {
      TR_TRY(t, fh_l1g_setup(&t->net.l1g, l1g_variant, t->dm.features_bf16, t->dm.view.n_bars, F, c.window,
                             t->net.w1s, t->net.L.h1, pl.K, static_cast<const fh_bf16*>(t->net.da1), t->batch),
             "gathering first layer");
    } else if (l1g_variant > 0) {
      snprintf(t->net.l1g.why, sizeof t->net.l1g.why, "needs the paired batch layout (bf16, the target cache, no fused "
               "backward, FH_PAIRED not 0)");
    }
  }
  if (t->prefetch) {
    TR_TRY(t, fh_cuda_batch_alloc(t->batch, &t->bb[1]), "batch allocation");
    t->have_bb[1] = true;
    const size_t xb = (size_t)2 * t->batch * t->obs_dim * fh_dtype_size(t->net.op);
    TR_CUDA(t, cudaMalloc(&t->xs[1], xb), "batch input allocation");
    TR_CUDA(t, cudaMemset(t->xs[1], 0, xb), "batch input allocation");
    /* the side stream's kernels get the device's lowest priority, below the train step's streams (net.cu): the
     * block scheduler starts them where the backward leaves room, and the step's own kernels never wait behind the
     * replay's; the graphs keep it per node (cudaGraphInstantiateFlagUseNodePriority). FH_SIDE_PRIORITY=high: the
     * highest instead (as before; A/B) */
    int least = 0, greatest = 0;
    TR_CUDA(t, cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
    TR_CUDA(t, cudaStreamCreateWithPriority(&t->s_side, cudaStreamNonBlocking,
                                            fh_env_is("FH_SIDE_PRIORITY", "high") ? greatest : least),
            "stream creation");
    const char* ss = getenv("FH_STEP_SNAPSHOT");
    if (!(ss && ss[0] == '0')) TR_CUDA(t, cudaMalloc(&t->step_snap, sizeof(int64_t)), "step counter copy allocation");
    t->snap_copy = fh_env_is("FH_SNAP_COPY", "1");
    cudaEvent_t* pevs[] = {&t->e_fork, &t->e_sampled, &t->e_join};
    for (auto ev : pevs) TR_CUDA(t, cudaEventCreateWithFlags(ev, cudaEventDisableTiming), "event creation");
    if (fh_env_is("FH_MEAN_BRANCH", "1")) {
      TR_CUDA(t, cudaStreamCreateWithPriority(&t->s_rec, cudaStreamNonBlocking, greatest), "stream creation");
      TR_CUDA(t, cudaEventCreateWithFlags(&t->e_rec, cudaEventDisableTiming), "event creation");
      t->weights_branch = fh_env_is("FH_WEIGHTS_BRANCH", "1") && t->step_snap && !(t->net.knockout & FH_KO_SAMPLE);
      TR_CUDA(t, cudaEventCreateWithFlags(&t->e_wfork, cudaEventDisableTiming), "event creation");
      TR_CUDA(t, cudaEventCreateWithFlags(&t->e_wjoin, cudaEventDisableTiming), "event creation");
    }
  }
  t->early_zero = fh_env_is("FH_PER_EARLY_ZERO", "1");

  t->ahead_on = t->ev.n_seg > 0 && t->ev.fused.on && !fh_env_is("FH_COLLECT_AHEAD", "0");
  if (t->ahead_on) {
    TR_TRY(t, fh_collect_backup_alloc(t->replay, c.episode_len, &t->ahead_bk), "collect-ahead backup allocation");
    int least = 0, greatest = 0;
    TR_CUDA(t, cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
    /* the evaluation's clusters first: the collection fills the SMs they leave */
    TR_CUDA(t, cudaStreamCreateWithPriority(&t->s_eval, cudaStreamNonBlocking, greatest), "stream creation");
    TR_CUDA(t, cudaMalloc(&t->eval_ws, fh_gemm_workspace_bytes()), "evaluation workspace allocation");
    cudaEvent_t* aevs[] = {&t->e_a0, &t->e_ac, &t->e_a1, &t->e_ev};
    for (auto ev : aevs) TR_CUDA(t, cudaEventCreate(ev), "event creation");
    t->metrics_early = !fh_env_is("FH_EVAL_METRICS_EARLY", "0");
  }

  const int32_t S = c.train_steps > 0 ? c.train_steps : 1;
  TR_CUDA(t, cudaHostAlloc(&t->h_loss, sizeof(float) * S, cudaHostAllocMapped), "mapped history allocation");
  TR_CUDA(t, cudaHostAlloc(&t->h_gnorm, sizeof(float) * S, cudaHostAllocMapped), "mapped history allocation");
  TR_CUDA(t, cudaHostAlloc(&t->h_qstats, sizeof(double) * 5, cudaHostAllocMapped), "mapped history allocation");
  TR_CUDA(t, cudaHostAlloc(&t->h_done, sizeof(int64_t), cudaHostAllocMapped), "mapped history allocation");
  TR_CUDA(t, cudaHostGetDevicePointer(&t->loss_hist, t->h_loss, 0), "mapped history");
  TR_CUDA(t, cudaHostGetDevicePointer(&t->gnorm_hist, t->h_gnorm, 0), "mapped history");
  TR_CUDA(t, cudaHostGetDevicePointer(&t->qstats, t->h_qstats, 0), "mapped history");
  TR_CUDA(t, cudaHostGetDevicePointer(&t->d_done, t->h_done, 0), "mapped history");
  memset(t->h_loss, 0xff, sizeof(float) * S);
  memset(t->h_gnorm, 0xff, sizeof(float) * S);
  memset(t->h_qstats, 0, sizeof(double) * 5);
  *t->h_done = 0;
  TR_CUDA(t, cudaMallocHost(&t->h_eps, sizeof(float)), "pinned allocation");
  cudaEvent_t* evs[] = {&t->e_t0, &t->e_t1, &t->e_t2, &t->e_t3};
  for (auto ev : evs) TR_CUDA(t, cudaEventCreate(ev), "event creation");

  TR_TRY(t, fh_launch_env_reset_all(t->envs, t->dm, collect_stream(t)), "env reset");
  TR_CUDA(t, cudaStreamSynchronize(collect_stream(t)), "env reset");
  FH_TRY(baselines(t));

  const double f = fwd_flops_per_row(t->net.L);
  const double bwd = 2.0 * f - 2.0 * (double)t->net.L.D * t->net.L.h1;  /* dW + dX, no dX of the input */
  t->flops_per_epoch = (double)c.episode_len * c.n_envs * f + (double)c.train_steps * t->batch * (3.0 * f + bwd) +
                       (double)t->ev.max_steps * t->ev.n_seg * f;

  FH_TRY(warm_up(t));
  if (c.use_graphs) {
    t->g_collect.assign(t->e_cgroup.size(), nullptr);
    for (size_t k = 0; k < t->g_collect.size(); ++k)
      FH_TRY(capture(t, collect_stream(t), seq_collect, (int)k, &t->g_collect[k], "collection graph capture"));
    /* the train-step variants an epoch of train_steps steps launches (step_flags) */
    for (int32_t k = 0; k < c.train_steps; ++k)
      for (int ch = 0; ch < 4; ++ch) { /* the target changing in step k-1 (bit 0) and in step k (bit 1) */
        const unsigned f = step_flags_given(t, k, c.train_steps, (ch & 1) != 0, (ch & 2) != 0);
        if (t->g_step[f]) continue;
        char what[96];
        snprintf(what, sizeof what, "train-step graph capture (variant 0x%x)", f);
        FH_TRY(capture(t, train_stream(t), seq_train, (int)f, &t->g_step[f], what));
      }
    /* the step groups the epoch loop can launch: steps k .. k + len - 1 (len >= 2), the target changing in none of
     * them but maybe the last, and maybe in step k - 1 */
    t->group_n = step_group_n();
    for (int32_t k = 0; k < c.train_steps; ++k)
      for (int32_t len = 2; len <= t->group_n && k + len <= c.train_steps; ++len)
        for (int ch = 0; ch < 4; ++ch) {
          std::vector<unsigned> f((size_t)len);
          for (int32_t j = 0; j < len; ++j)
            f[(size_t)j] = step_flags_given(t, k + j, c.train_steps, j == 0 && (ch & 1) != 0, j == len - 1 && (ch & 2) != 0);
          const uint64_t key = group_key(f);
          if (t->g_group.count(key)) continue;
          char what[96];
          snprintf(what, sizeof what, "train-step group graph capture (%d steps from variant 0x%x)", len, f[0]);
          t->cap_group = f;
          cudaGraphExec_t g = nullptr;
          FH_TRY(capture(t, train_stream(t), seq_group, 0, &g, what));
          t->g_group[key] = g;
        }
    if (t->ev.n_seg > 0 && !t->ev.fused.on)
      FH_TRY(capture(t, collect_stream(t), seq_eval, 0, &t->g_eval, "evaluation graph capture"));
    TR_CUDA(t, cudaDeviceSynchronize(), "graph upload");
  }
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_create(const fh_config* cfg, const fh_market* market, fh_trainer** out, char* err,
                                              size_t err_len) {
  if (!cfg || !market || !out) {
    set_err(err, err_len, "fh_trainer_create: cfg, market and out must not be NULL");
    return FH_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  if (cfg->backend != FH_BACKEND_CUDA) {
    set_err(err, err_len, "backend: this is the CUDA library (libfoxhunt_cuda.so); backend must be 1 (cuda)");
    return FH_ERR_UNSUPPORTED;
  }
  fh_status st = fh_validate_config(cfg, err, err_len);
  if (st != FH_OK) return st;
  if (cfg->atoms > 64) {
    set_err(err, err_len, "atoms: %d is more than the CUDA backend supports (64)", cfg->atoms);
    return FH_ERR_INVALID_CONFIG;
  }
  st = fh_validate_market(cfg, market, err, err_len);
  if (st != FH_OK) return st;
  fh_trainer* t = new (std::nothrow) fh_trainer();
  if (!t) {
    set_err(err, err_len, "out of host memory");
    return FH_ERR_OUT_OF_MEMORY;
  }
  t->cfg = *cfg;
  st = create_inner(t, market);
  if (st != FH_OK) {
    set_err(err, err_len, "%s", t->last_error.c_str());
    destroy_all(t);
    return st;
  }
  *out = t;
  return FH_OK;
}

extern "C" FH_API void fh_trainer_destroy(fh_trainer* t) { destroy_all(t); }

extern "C" FH_API const char* fh_trainer_last_error(const fh_trainer* t) {
  return t ? t->last_error.c_str() : "no trainer";
}

/* ------------------------------------------------------------------ info */

extern "C" FH_API const char* fh_version(void) { return FH_CUDA_VERSION; }

extern "C" FH_API fh_status fh_device_count(int32_t* out) {
  if (!out) return FH_ERR_INVALID_ARGUMENT;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  *out = e == cudaSuccess ? n : 0;
  return FH_OK;
}

static fh_status fill_device(int32_t device, fh_info* out) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return fh_cuda_status(e) == FH_OK ? FH_ERR_DEVICE : fh_cuda_status(e);
  snprintf(out->device_name, sizeof out->device_name, "%.127s", prop.name);
  const unsigned char* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  snprintf(out->device_uuid, sizeof out->device_uuid,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
           u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  size_t fr = 0, tot = 0;
  int prev = 0;
  cudaGetDevice(&prev);
  if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
    out->device_mem_free = (int64_t)fr;
    out->device_mem_total = (int64_t)tot;
  } else {
    out->device_mem_total = (int64_t)prop.totalGlobalMem;
  }
  cudaSetDevice(prev);
  out->backend = FH_BACKEND_CUDA;
  out->device = device;
  return FH_OK;
}

extern "C" FH_API fh_status fh_device_info(int32_t device, fh_info* out) {
  if (!out) return FH_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n) return FH_ERR_INVALID_ARGUMENT;
  return fill_device(device, out);
}

/* Appends one more ", ..." part to out->engine at w (its length so far), cut at the buffer's end as snprintf cuts;
 * nothing once the buffer is full. */
static void engine_add(fh_info* out, int& w, const char* fmt, ...) {
  if (w <= 0 || (size_t)w >= sizeof out->engine) return;
  va_list ap;
  va_start(ap, fmt);
  w += vsnprintf(out->engine + w, sizeof out->engine - (size_t)w, fmt, ap);
  va_end(ap);
}

extern "C" FH_API fh_status fh_trainer_info(fh_trainer* t, fh_info* out) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  memset(out, 0, sizeof *out);
  fh_status st = fill_device(t->device, out);
  if (st != FH_OK) return fail(t, st, "device info: %s", cudaGetErrorString(cudaGetLastError()));
  out->batch_size = t->batch;
  out->obs_dim = t->obs_dim;
  out->n_params = t->net.L.total;
  out->replay_capacity = t->replay.capacity;
  out->flops_per_epoch = t->flops_per_epoch;
  out->reward_scale = t->reward_scale;
  out->config_hash = t->config_hash;
  int w = snprintf(out->engine, sizeof out->engine, "cuda %s, %s, %s backward, %s train logits",
                   t->net.op == FH_BF16 ? "bf16" : "fp32", t->cfg.use_graphs ? "graphs" : "eager",
                   t->net.mma ? "mma" : t->net.fused ? "fused-epilogue" : "kernel",
                   t->net.pass[0].ldt == FH_BF16 ? "bf16" : "fp32");
  /* first, so that the string's length limit never cuts it */
  if (t->net.l1g.on)
    engine_add(out, w, ", L1 gathering (%s, dW1 %d splits%s)",
               t->net.l1g.variant == 3 ? "clusters of four" : t->net.l1g.variant == 2 ? "clusters of two" : "blocks",
               t->net.l1g.dw.splits, t->net.l1g.dw_swap ? " transposed" : "");
  else if (t->net.l1g.why[0])
    engine_add(out, w, ", L1 gathering off"); /* (why: at the string's end) */
  if (t->net.mma_heads) engine_add(out, w, ", mma heads");
  if (t->net.heads_loss) engine_add(out, w, ", head outputs in the loss");
  if (t->net.sn_argmax)
    engine_add(out, w, ", s' argmax kernel (%d warps%s)", fh_sn_argmax_warps(t->net.sn_argmax - 1),
               t->net.sn_argmax == 3 ? ", logits kept" : "");
  if (t->net.heads_out) engine_add(out, w, ", heads streamed");
  if (t->tp1.on) engine_add(out, w, ", target P1 table");
  if (t->net.heads_sm) engine_add(out, w, ", heads on SM shares%s", t->net.heads_sm > 1 ? " (backward too)" : "");
  if (t->net.side_sms) engine_add(out, w, ", side dW on %d SMs", t->net.side_sms);
  if (t->net.dw1_sms) engine_add(out, w, ", dW1 on %d", t->net.dw1_sms);
  if (t->net.relu_masks) engine_add(out, w, ", relu masks");
  if (t->tcache.on) engine_add(out, w, ", target cache%s", t->cgroup_steps > 0 ? " (filled by collection groups)" : "");
  if (t->target_prefetch) engine_add(out, w, ", target prefetch");
  if (t->ahead_on) engine_add(out, w, ", collect ahead%s", t->metrics_early ? " (metrics beside)" : "");
  if (t->pair) engine_add(out, w, ", paired s/s'");
  if (fh_net_dw1_acc_first_on(t->net, t->pair)) engine_add(out, w, ", dW1 account first");
  if (!t->g_group.empty()) engine_add(out, w, ", step groups of %d", t->group_n);
  if (t->early_zero || t->s_rec)
    engine_add(out, w, ", replay chain%s%s%s", t->early_zero ? " early-zero" : "", t->s_rec ? " mean-branch" : "",
               t->weights_branch ? " weights-branch" : "");
  if (t->prefetch_off_by_env) engine_add(out, w, ", no prefetch");
  if (t->net.knockout) engine_add(out, w, ", KNOCKOUT 0x%x (measurement only)", t->net.knockout);
  if (!t->net.l1g.on && t->net.l1g.why[0]) engine_add(out, w, "; L1 gathering off: %s", t->net.l1g.why);
  return FH_OK;
}

/* ------------------------------------------------------------------ run_epoch */

static void metrics_nan(fh_metrics* m) {
  double* f = reinterpret_cast<double*>(m);
  for (size_t i = 0; i < sizeof(fh_metrics) / sizeof(double); ++i) f[i] = NAN;
}

extern "C" FH_API fh_status fh_trainer_run_epoch(fh_trainer* t, fh_epoch_stats* out) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  if (t->cfg.fault_hook == 1) raise(SIGSEGV); /* test only: a native crash on purpose */
  const fh_config& c = t->cfg;
  const auto wall0 = std::chrono::steady_clock::now();
  cudaStream_t sc = collect_stream(t), st = train_stream(t);
  const int32_t S = c.train_steps;
  const int32_t N = c.n_envs, T = c.episode_len;

  /* collect (unless the previous epoch's end collected this epoch's transitions ahead, with their target-cache
   * rows: collect-ahead) */
  const bool collected_ahead = t->ahead_valid;
  if (!collected_ahead) {
    TR_CUDA(t, cudaEventRecord(t->e_t0, sc), "epoch start");
    FH_TRY(collect_and_fill(t, t->env_step));  /* with the target cache's rows of its slots on the train stream */
    TR_CUDA(t, cudaEventRecord(t->e_t1, sc), "collection end");
  } else {
    TR_CUDA(t, cudaEventRecord(t->e_t1, st), "train start");
  }
  t->ahead_valid = false;
  const int64_t env_step_after = t->env_step + T;

  /* train (once enough transitions are stored to sample n-step returns) */
  const int64_t stored = env_step_after * (int64_t)N;
  const bool can_train = S > 0 && env_step_after > c.n_step && stored >= c.learning_starts;
  const int32_t steps = can_train ? S : 0;
  if (!collected_ahead) TR_CUDA(t, cudaStreamWaitEvent(st, t->e_t1, 0), "train wait");
  /* Between launches the host reads the steps the device has recorded (mapped memory, no sync): a
   * loss or grad norm that is not finite stops the epoch early instead of after all S steps. */
  *reinterpret_cast<volatile int64_t*>(t->h_done) = t->train_step;  /* nothing of this epoch is queued yet */
  int64_t checked = t->train_step;
  int32_t launched = 0, bad_step = -1;
  const int64_t ahead = run_ahead();
  std::vector<unsigned> group;
  for (int32_t k = 0; k < steps && bad_step < 0;) {
    const unsigned f = step_flags(t, k, steps);
    /* a step group: steps k, k + 1, ... up to group_n of them, ending at the first that changes the target */
    group.assign(1, f);
    while ((int32_t)group.size() < t->group_n && k + (int32_t)group.size() < steps &&
           !target_changes(t, k + (int32_t)group.size() - 1))
      group.push_back(step_flags(t, k + (int32_t)group.size(), steps));
    const auto grp = group.size() > 1 ? t->g_group.find(group_key(group)) : t->g_group.end();
    if (grp != t->g_group.end()) {
      TR_CUDA(t, cudaGraphLaunch(grp->second, st), "train-step group graph launch");
      k += (int32_t)group.size();
      launched += (int32_t)group.size();
    } else {
      if (t->g_step[f]) TR_CUDA(t, cudaGraphLaunch(t->g_step[f], st), "train-step graph launch");
      else TR_TRY(t, launch_train_step(t, f), "train step");
      ++k;
      ++launched;
    }
    /* a hard target update in this step (its Adam t = train_step + launched): the table follows */
    if (t->tp1.on && fh_target_mix(c.tau, c.target_update_every, t->train_step + launched) == 1.0f)
      TR_TRY(t, refresh_target_p1(t), "target first-layer table");
    /* keep at most kRunAhead steps queued: wait (polling mapped memory, no CUDA synchronisation) until
     * step k - kRunAhead + 1 is recorded; the device still has the later steps to run meanwhile */
    int64_t done = *reinterpret_cast<volatile int64_t*>(t->h_done);
    while (t->train_step + launched - done > ahead) {
      const cudaError_t q = cudaStreamQuery(st);
      if (q != cudaErrorNotReady) {
        if (q != cudaSuccess) {
          fh_cuda_set_error(__FILE__, __LINE__, "cudaStreamQuery", cudaGetErrorString(q));
          return fail_dev(t, fh_cuda_status(q), "train step");
        }
        break; /* the stream is idle: everything recorded is visible at the flush */
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
      done = *reinterpret_cast<volatile int64_t*>(t->h_done);
    }
    std::atomic_thread_fence(std::memory_order_acquire);  /* values before the counter (the device fenced) */
    for (; checked < done && bad_step < 0; ++checked) {
      const int64_t slot = checked % S;
      if (!isfinite(t->h_loss[slot]) || !isfinite(t->h_gnorm[slot])) bad_step = (int32_t)(checked - t->train_step);
    }
  }
  TR_CUDA(t, cudaEventRecord(t->e_t2, st), "train end");
  const auto wall_launched = std::chrono::steady_clock::now();

  /* evaluate (not after a diverged step): on the collect stream, or with collect-ahead on a stream of its own */
  cudaStream_t se = t->ahead_on ? t->s_eval : sc;
  TR_CUDA(t, cudaStreamWaitEvent(se, t->e_t2, 0), "eval wait");
  if (t->ev.n_seg > 0 && bad_step < 0) {
    if (t->g_eval) TR_CUDA(t, cudaGraphLaunch(t->g_eval, se), "evaluation graph launch");
    else TR_TRY(t, launch_eval(t), "evaluation");
  }
  TR_TRY(t, fh_launch_eval_readback(t->ev, se), "evaluation read-back");
  if (t->ahead_on) TR_CUDA(t, cudaEventRecord(t->e_ev, se), "evaluation end");

  /* collect-ahead: the next epoch's collection beside the evaluation (after this epoch's training, which samples
   * the rows it overwrites), what it overwrites backed up first, then its target-cache rows on the train stream */
  const bool go_ahead = t->ahead_on && bad_step < 0;
  if (go_ahead) {
    TR_CUDA(t, cudaStreamWaitEvent(sc, t->e_t2, 0), "collect-ahead wait");
    TR_CUDA(t, cudaMemcpyAsync(t->h_eps, t->envs.epsilon, sizeof(float), cudaMemcpyDeviceToHost, sc), "flush");
    TR_CUDA(t, cudaEventRecord(t->e_a0, sc), "collect-ahead start");
    TR_TRY(t, fh_collect_backup_save(&t->ahead_bk, t->envs, t->replay, env_step_after, sc), "collect-ahead backup");
    FH_TRY(collect_and_fill(t, env_step_after));
    TR_CUDA(t, cudaEventRecord(t->e_ac, sc), "collect-ahead end");
    TR_CUDA(t, cudaStreamWaitEvent(st, t->e_ac, 0), "collect-ahead wait");
    TR_CUDA(t, cudaEventRecord(t->e_a1, st), "collect-ahead end");
    TR_CUDA(t, cudaStreamWaitEvent(se, t->e_a1, 0), "collect-ahead join");
  } else {
    TR_CUDA(t, cudaMemcpyAsync(t->h_eps, t->envs.epsilon, sizeof(float), cudaMemcpyDeviceToHost, se), "flush");
  }

  /* flush: everything the epoch reports (the step scalars are already in mapped host memory), then the
   * one synchronisation */
  TR_CUDA(t, cudaEventRecord(t->e_t3, se), "epoch end");
  int64_t host_syncs = 0;
  const auto wall_flush = std::chrono::steady_clock::now();
  /* the metrics while the collection still runs: wait for the evaluation's end by querying its event (no
   * synchronisation; the device's queue does not drain), then compute them from the read-back records. A query
   * that fails leaves them to after the synchronisation, which reports the error */
  fh_metrics val_early{};
  bool have_val = false;
  auto wall_evq = wall_flush;
  if (t->metrics_early && go_ahead && t->ev.n_seg > 0) {
    cudaError_t q;
    while ((q = cudaEventQuery(t->e_ev)) == cudaErrorNotReady) std::this_thread::sleep_for(std::chrono::microseconds(10));
    wall_evq = std::chrono::steady_clock::now();
    if (q == cudaSuccess) {
      fh_cuda_eval_finalise(t->ev, &t->hm.m, c.initial_capital, &val_early);
      have_val = true;
    }
  }
  const auto wall_early = std::chrono::steady_clock::now();
  TR_CUDA(t, cudaEventSynchronize(t->e_t3), "epoch flush");
  ++host_syncs;
  const auto wall_synced = std::chrono::steady_clock::now();
  TR_CUDA(t, cudaGetLastError(), "epoch");
  /* FH_EVAL_FUSED_PROFILE=1 (measurement): the fused evaluation's block-0 phase cycles after every epoch, timed where
   * they run, beside the next collection */
  if (t->ev.fused.prof && bad_step < 0) {
    char prefix[48];
    snprintf(prefix, sizeof prefix, "epoch %lld ", (long long)t->epoch + 1);
    TR_TRY(t, fh_eval_fused_profile_print(t->ev, stderr, prefix), "evaluation profile");
  }
  float ms_c = 0;
  if (collected_ahead) ms_c = t->ahead_ms;
  else cudaEventElapsedTime(&ms_c, t->e_t0, t->e_t1);
  if (go_ahead) {
    cudaEventElapsedTime(&t->ahead_ms, t->e_a0, t->e_a1);
    t->ahead_valid = true;
  }

  t->env_step = env_step_after;
  t->train_step += launched;
  t->epoch += 1;
  if (bad_step >= 0) {
    const float l = t->h_loss[(t->train_step - launched + bad_step) % S];
    return fail(t, FH_ERR_DIVERGED, "epoch %lld, train step %d: %s became %s (stopped after %d of %d steps)",
                (long long)t->epoch, bad_step, !isfinite(l) ? "loss" : "gradient norm",
                isnan(!isfinite(l) ? l : t->h_gnorm[(t->train_step - launched + bad_step) % S]) ? "NaN" : "Inf", launched,
                steps);
  }

  memset(out, 0, sizeof *out);
  out->epoch = (double)t->epoch;
  out->global_step = (double)t->train_step;
  out->env_steps = (double)t->env_step * N;
  out->batch_size = t->batch;
  const int64_t cap = t->replay.capacity;
  out->replay_size = (double)(stored < cap ? stored : cap);
  out->epsilon = *t->h_eps;
  out->beta = fh_per_beta(c.per_beta_start, c.per_beta_end, c.per_beta_steps, t->train_step > 0 ? t->train_step - 1 : 0);
  if (steps > 0) {
    double ls = 0.0, gs = 0.0, gm = 0.0;
    for (int32_t k = 0; k < steps; ++k) {
      const float l = t->h_loss[k], g = t->h_gnorm[k];
      if (!isfinite(l) || !isfinite(g))
        return fail(t, FH_ERR_DIVERGED, "epoch %lld, train step %d: %s became %s", (long long)t->epoch, k,
                    !isfinite(l) ? "loss" : "gradient norm", isnan(!isfinite(l) ? l : g) ? "NaN" : "Inf");
      ls += l;
      gs += g;
      if (g > gm) gm = g;
    }
    out->loss_mean = ls / steps;
    out->loss_last = t->h_loss[steps - 1];
    out->grad_norm_mean = gs / steps;
    out->grad_norm_max = gm;
    out->q_avg_max = t->h_qstats[0];
    out->q_min = t->h_qstats[1];
    out->q_max = t->h_qstats[2];
    out->q_mean = t->h_qstats[3];
    out->q_var = t->h_qstats[4];
  } else {
    out->loss_mean = out->loss_last = out->grad_norm_mean = out->grad_norm_max = NAN;
    out->q_avg_max = out->q_min = out->q_max = out->q_mean = out->q_var = NAN;
  }
  const auto wall_fin0 = std::chrono::steady_clock::now();
  if (have_val) out->val = val_early;
  else if (t->ev.n_seg > 0) fh_cuda_eval_finalise(t->ev, &t->hm.m, c.initial_capital, &out->val);
  else metrics_nan(&out->val);
  const auto wall_fin1 = std::chrono::steady_clock::now();
  out->flat = t->flat;
  out->buy_hold = t->buy_hold;
  float ms_t = 0, ms_e = 0;
  cudaEventElapsedTime(&ms_t, t->e_t1, t->e_t2);
  cudaEventElapsedTime(&ms_e, t->e_t2, t->ahead_on ? t->e_ev : t->e_t3);
  out->collect_ms = ms_c;
  out->train_ms = ms_t;
  out->eval_ms = ms_e;
  out->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall0).count();
  out->env_steps_per_s = ms_c > 0 ? (double)T * N / (ms_c / 1e3) : 0.0;
  out->samples_per_s = ms_t > 0 && steps > 0 ? (double)steps * t->batch / (ms_t / 1e3) : 0.0;
  out->host_syncs = (double)host_syncs;
  if (fh_env_is("FH_EPOCH_TIMING", "1")) { /* where the host's time of the epoch goes (measurement) */
    using ms = std::chrono::duration<double, std::milli>;
    fprintf(stderr,
            "epoch %lld host ms: train launches %.3f, eval/collect launches %.3f, evaluation wait %.3f, metrics beside "
            "the collection %.3f, sync wait %.3f, after %.3f (of which the evaluation's metrics %.3f)\n",
            (long long)t->epoch, ms(wall_launched - wall0).count(), ms(wall_flush - wall_launched).count(),
            ms(wall_evq - wall_flush).count(), ms(wall_early - wall_evq).count(), ms(wall_synced - wall_early).count(),
            ms(std::chrono::steady_clock::now() - wall_synced).count(), ms(wall_fin1 - wall_fin0).count());
  }
  return FH_OK;
}

/* ------------------------------------------------------------------ checkpoints
 *
 * Framing: common/checkpoint.h (magic, version, config hash, length, sha256). Payload: the CPU
 * backend's layout byte for byte (native/src/cpu/state.cpp), so checkpoints move between backends:
 *   u64 epoch, env_counter, train_step, probe_steps
 *   f32 online[P], target[P], adam_m[P], adam_v[P]
 *   per env (N): i64 t, f64 avg_entry, stop, stop_dist, equity, realised, trade_pnl, i32 pos, has_stop, k, bars_held
 *   replay (C): i32 bar[C], u8 act[3C], u8 done[C], f32 reward[C], f32 account[8C]
 *   PER: f32 leaf[C], f32 max_priority
 */

struct fh_ckpt_state {
  uint64_t epoch = 0, env_counter = 0, train_step = 0, probe_steps = 0;
  std::vector<float> P, Pt, M, V;
  std::vector<fh_env_state> envs;
  std::vector<int32_t> bar;
  std::vector<uint8_t> act, done;
  std::vector<float> reward, account, leaves;
  float maxp = 0.0f;
};

template <typename IO>
static void ckpt_payload(IO& io, fh_ckpt_state& c) {
  io.val(c.epoch);
  io.val(c.env_counter);
  io.val(c.train_step);
  io.val(c.probe_steps);
  io.arr(c.P.data(), c.P.size());
  io.arr(c.Pt.data(), c.Pt.size());
  io.arr(c.M.data(), c.M.size());
  io.arr(c.V.data(), c.V.size());
  for (auto& s : c.envs) fh_env_state_io(io, s);
  io.arr(c.bar.data(), c.bar.size());
  io.arr(c.act.data(), c.act.size());
  io.arr(c.done.data(), c.done.size());
  io.arr(c.reward.data(), c.reward.size());
  io.arr(c.account.data(), c.account.size());
  io.arr(c.leaves.data(), c.leaves.size());
  io.val(c.maxp);
}

static void ckpt_shape(const fh_trainer* t, fh_ckpt_state& c) {
  const size_t P = (size_t)t->net.L.total, C = (size_t)t->replay.capacity;
  c.P.resize(P);
  c.Pt.resize(P);
  c.M.resize(P);
  c.V.resize(P);
  c.envs.resize((size_t)t->cfg.n_envs);
  c.bar.resize(C);
  c.act.resize(C * 3);
  c.done.resize(C);
  c.reward.resize(C);
  c.account.resize(C * 8);
  c.leaves.resize(C);
}

static uint64_t payload_bytes(const fh_trainer* t) {
  const uint64_t P = (uint64_t)t->net.L.total, C = (uint64_t)t->replay.capacity, N = (uint64_t)t->cfg.n_envs;
  const uint64_t env = 8 + 6 * 8 + 4 * 4;
  return 4 * 8 + 4 * P * 4 + N * env + C * (4 + 3 + 1 + 4 + 32 + 4) + 4;
}

extern "C" FH_API fh_status fh_trainer_checkpoint_size(fh_trainer* t, uint64_t* out) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  *out = FH_CKPT_HEADER + payload_bytes(t);
  return FH_OK;
}

template <typename T>
static fh_status d2h(fh_trainer* t, std::vector<T>& v, const T* src) {
  TR_CUDA(t, cudaMemcpy(v.data(), src, v.size() * sizeof(T), cudaMemcpyDeviceToHost), "checkpoint read");
  return FH_OK;
}
template <typename T>
static fh_status h2d(fh_trainer* t, T* dst, const std::vector<T>& v) {
  TR_CUDA(t, cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "checkpoint load");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_save_checkpoint(fh_trainer* t, uint8_t* buf, uint64_t cap, uint64_t* written) {
  if (!t || !buf || !written) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  const uint64_t need = FH_CKPT_HEADER + payload_bytes(t);
  if (cap < need)
    return fail(t, FH_ERR_BUFFER_TOO_SMALL, "save_checkpoint: buffer holds %llu bytes, the checkpoint needs %llu",
                (unsigned long long)cap, (unsigned long long)need);
  TR_CUDA(t, cudaDeviceSynchronize(), "checkpoint");
  fh_ckpt_state c;
  ckpt_shape(t, c);
  c.epoch = (uint64_t)t->epoch;
  c.env_counter = (uint64_t)t->env_step;
  c.train_step = (uint64_t)t->train_step;
  c.probe_steps = (uint64_t)t->probe_steps;
  FH_TRY(d2h(t, c.P, t->net.online));
  FH_TRY(d2h(t, c.Pt, t->net.target));
  FH_TRY(d2h(t, c.M, t->net.adam_m));
  FH_TRY(d2h(t, c.V, t->net.adam_v));
  FH_TRY(d2h(t, c.envs, t->envs.state));
  FH_TRY(d2h(t, c.bar, t->replay.v.bar));
  FH_TRY(d2h(t, c.act, t->replay.v.act));
  FH_TRY(d2h(t, c.done, t->replay.v.done));
  FH_TRY(d2h(t, c.reward, t->replay.v.reward));
  FH_TRY(d2h(t, c.account, t->replay.v.account));
  FH_TRY(d2h(t, c.leaves, t->replay.tree.leaf));
  if (t->ahead_valid) {
    /* the next epoch's collection already ran: its backup holds the env states, rows and leaves it overwrote
     * (the counters above are the host's, as of this epoch's end; the max priority is what it read) */
    const fh_collect_host_view h{c.envs.data(), c.bar.data(), c.act.data(), c.done.data(),
                                 c.reward.data(), c.account.data(), c.leaves.data()};
    TR_TRY(t, fh_collect_backup_read(t->ahead_bk, t->replay, h), "checkpoint read (collect-ahead backup)");
  }
  TR_CUDA(t, cudaMemcpy(&c.maxp, t->replay.max_priority, 4, cudaMemcpyDeviceToHost), "checkpoint read");
  fh_ckpt_writer w;
  w.buf = buf + FH_CKPT_HEADER;
  ckpt_payload(w, c);
  if (w.pos != need - FH_CKPT_HEADER) return fail(t, FH_ERR_INTERNAL, "save_checkpoint: payload size mismatch");
  fh_ckpt_write_header(buf, t->config_hash, w.pos);
  *written = need;
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_load_checkpoint(fh_trainer* t, const uint8_t* buf, uint64_t len) {
  if (!t || !buf) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  const uint8_t* pl = nullptr;
  uint64_t plen = 0;
  std::string err;
  fh_status s = fh_ckpt_check(buf, len, t->config_hash, &pl, &plen, &err);
  if (s != FH_OK) return fail(t, s, "%s", err.c_str());
  if (plen != payload_bytes(t))
    return fail(t, FH_ERR_CHECKPOINT, "checkpoint: payload is %llu bytes, this trainer's state is %llu",
                (unsigned long long)plen, (unsigned long long)payload_bytes(t));
  fh_ckpt_state c;
  ckpt_shape(t, c);
  fh_ckpt_reader rd;
  rd.buf = pl;
  rd.len = plen;
  ckpt_payload(rd, c);
  if (!rd.ok || rd.pos != plen) return fail(t, FH_ERR_CHECKPOINT, "checkpoint: payload shorter or longer than the trainer state");
  /* semantic checks before anything on the device changes */
  for (size_t e = 0; e < c.envs.size(); ++e) {
    const fh_env_state& st = c.envs[e];
    if (st.t < t->hm.m.train_begin || st.t + 1 >= t->hm.m.train_end || st.k < 0 || st.k >= t->cfg.episode_len)
      return fail(t, FH_ERR_CHECKPOINT, "checkpoint: env %zu state is out of range for this market", e);
  }
  for (size_t i = 0; i < c.leaves.size(); ++i)
    if (!(c.leaves[i] >= 0.0f) || !isfinite(c.leaves[i]))
      return fail(t, FH_ERR_CHECKPOINT, "checkpoint: priority %zu is negative or not finite", i);
  for (size_t i = 0; i < c.bar.size(); ++i)
    if (c.bar[i] < 0 || c.bar[i] >= t->hm.m.n_bars)
      return fail(t, FH_ERR_CHECKPOINT, "checkpoint: replay bar index out of range at slot %zu", i);
  for (size_t i = 0; i < c.act.size(); ++i)
    if (c.act[i] >= t->cfg.branch_sizes[i % 3])
      return fail(t, FH_ERR_CHECKPOINT, "checkpoint: replay action out of range at slot %zu", i / 3);
  TR_CUDA(t, cudaDeviceSynchronize(), "checkpoint load");
  t->ahead_valid = false; /* everything a collection run ahead wrote is overwritten below */
  FH_TRY(h2d(t, t->net.online, c.P));
  FH_TRY(h2d(t, t->net.target, c.Pt));
  FH_TRY(h2d(t, t->net.adam_m, c.M));
  FH_TRY(h2d(t, t->net.adam_v, c.V));
  FH_TRY(h2d(t, t->envs.state, c.envs));
  FH_TRY(h2d(t, t->replay.v.bar, c.bar));
  FH_TRY(h2d(t, t->replay.v.act, c.act));
  FH_TRY(h2d(t, t->replay.v.done, c.done));
  FH_TRY(h2d(t, t->replay.v.reward, c.reward));
  FH_TRY(h2d(t, t->replay.v.account, c.account));
  FH_TRY(h2d(t, t->replay.tree.leaf, c.leaves));
  TR_CUDA(t, cudaMemcpy(t->replay.max_priority, &c.maxp, 4, cudaMemcpyHostToDevice), "checkpoint load");
  t->epoch = (int64_t)c.epoch;
  t->env_step = (int64_t)c.env_counter;
  t->train_step = (int64_t)c.train_step;
  t->probe_steps = (int64_t)c.probe_steps;
  TR_CUDA(t, cudaMemcpy(t->envs.env_step, &t->env_step, 8, cudaMemcpyHostToDevice), "checkpoint load");
  TR_CUDA(t, cudaMemcpy(t->net.step, &t->train_step, 8, cudaMemcpyHostToDevice), "checkpoint load");
  cudaStream_t st = train_stream(t);
  TR_TRY(t, fh_net_sync_shadows(&t->net, st), "checkpoint load");
  TR_TRY(t, refresh_target_p1(t), "checkpoint load (target first-layer table)");
  TR_TRY(t, fh_launch_tree_rebuild(t->replay.tree, st), "checkpoint load");
  TR_CUDA(t, cudaStreamSynchronize(st), "checkpoint load");
  return FH_OK;
}

/* ------------------------------------------------------------------ narrow entry points */

extern "C" FH_API fh_status fh_trainer_get_params(fh_trainer* t, int32_t which, float* out, int64_t n) {
  if (!t || !out || (which != 0 && which != 1)) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  if (n != t->net.L.total) return fail(t, FH_ERR_INVALID_ARGUMENT, "get_params: n = %lld, expected %lld", (long long)n,
                                       (long long)t->net.L.total);
  TR_CUDA(t, cudaDeviceSynchronize(), "get_params");
  TR_CUDA(t, cudaMemcpy(out, which == 0 ? t->net.online : t->net.target, n * 4, cudaMemcpyDeviceToHost), "get_params");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_set_params(fh_trainer* t, int32_t which, const float* in, int64_t n) {
  if (!t || !in || (which != 0 && which != 1)) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  if (n != t->net.L.total) return fail(t, FH_ERR_INVALID_ARGUMENT, "set_params: n = %lld, expected %lld", (long long)n,
                                       (long long)t->net.L.total);
  FH_TRY(settle_ahead(t)); /* a collection run ahead used the old weights */
  TR_CUDA(t, cudaDeviceSynchronize(), "set_params");
  TR_CUDA(t, cudaMemcpy(which == 0 ? t->net.online : t->net.target, in, n * 4, cudaMemcpyHostToDevice), "set_params");
  TR_TRY(t, fh_net_sync_shadows(&t->net, train_stream(t)), "set_params");
  TR_TRY(t, refresh_target_p1(t), "set_params (target first-layer table)");
  TR_CUDA(t, cudaStreamSynchronize(train_stream(t)), "set_params");
  return FH_OK;
}

/* Upload a host (n, D) fp32 matrix into dst (op dtype) on pass p's stream. */
static fh_status upload_obs(fh_trainer* t, int p, void* dst, int32_t n, const float* obs) {
  float* tmp = nullptr;
  const size_t bytes = (size_t)n * t->obs_dim * 4;
  TR_CUDA(t, cudaMalloc(&tmp, bytes), "input upload");
  cudaError_t e = cudaMemcpy(tmp, obs, bytes, cudaMemcpyHostToDevice);
  fh_status st = FH_OK;
  if (e == cudaSuccess) {
    if (t->net.op == FH_BF16) {
      st = fh_launch_cast<fh_bf16>(tmp, static_cast<fh_bf16*>(dst), (int64_t)n * t->obs_dim, t->net.pass[p].s);
    } else {
      st = fh_launch_cast<float>(tmp, static_cast<float*>(dst), (int64_t)n * t->obs_dim, t->net.pass[p].s);
    }
    if (st == FH_OK) e = cudaStreamSynchronize(t->net.pass[p].s);
  }
  cudaFree(tmp);
  if (e != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "input upload", cudaGetErrorString(e));
    return fail_dev(t, fh_cuda_status(e), "input upload");
  }
  if (st != FH_OK) return fail_dev(t, st, "input upload");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_q_values(fh_trainer* t, int32_t n, const float* obs, float* q) {
  if (!t || !obs || !q || n <= 0) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  if (n > t->cap) return fail(t, FH_ERR_INVALID_ARGUMENT, "q_values: n = %d is more than %d rows", n, t->cap);
  TR_CUDA(t, cudaDeviceSynchronize(), "q_values");
  FH_TRY(upload_obs(t, 1, t->net.pass[1].x, n, obs));
  TR_TRY(t, fh_net_forward(&t->net, 1, 0, n, 1), "q_values forward");
  TR_CUDA(t, cudaStreamSynchronize(t->net.pass[1].s), "q_values");
  TR_CUDA(t, cudaMemcpy(q, t->net.pass[1].q, (size_t)n * t->net.nq * 4, cudaMemcpyDeviceToHost), "q_values");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_loss_grad(fh_trainer* t, int32_t n, const float* obs, const int32_t* act,
                                                 const float* ret, const float* disc, const float* next_obs,
                                                 const float* weight, double* loss, float* grad, float* td_out) {
  if (!t || !obs || !act || !ret || !disc || !next_obs || !weight || n <= 0) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  if (n > t->cap) return fail(t, FH_ERR_INVALID_ARGUMENT, "loss_grad: n = %d is more than %d rows", n, t->cap);
  TR_CUDA(t, cudaDeviceSynchronize(), "loss_grad");
  FH_TRY(upload_obs(t, 0, t->net.pass[0].x, n, obs));
  FH_TRY(upload_obs(t, 0, fh_net_next_obs(&t->net, n), n, next_obs));
  const fh_cuda_batch& bb = t->bb[0]; /* set 0: pass[0].x is xs[0] outside a train step */
  TR_CUDA(t, cudaMemcpy(bb.act, act, (size_t)n * 3 * 4, cudaMemcpyHostToDevice), "loss_grad upload");
  TR_CUDA(t, cudaMemcpy(bb.ret, ret, (size_t)n * 4, cudaMemcpyHostToDevice), "loss_grad upload");
  TR_CUDA(t, cudaMemcpy(bb.disc, disc, (size_t)n * 4, cudaMemcpyHostToDevice), "loss_grad upload");
  TR_CUDA(t, cudaMemcpy(bb.weight, weight, (size_t)n * 4, cudaMemcpyHostToDevice), "loss_grad upload");
  TR_TRY(t, fh_net_loss_grad(&t->net, n, bb.act, bb.ret, bb.disc, bb.weight), "loss_grad");
  TR_CUDA(t, cudaStreamSynchronize(train_stream(t)), "loss_grad");
  if (loss) {
    float l = 0;
    TR_CUDA(t, cudaMemcpy(&l, t->net.loss, 4, cudaMemcpyDeviceToHost), "loss_grad read");
    *loss = l;
  }
  if (grad) TR_CUDA(t, cudaMemcpy(grad, t->net.grad, (size_t)t->net.L.total * 4, cudaMemcpyDeviceToHost), "loss_grad read");
  if (td_out) TR_CUDA(t, cudaMemcpy(td_out, t->net.signal, (size_t)n * 4, cudaMemcpyDeviceToHost), "loss_grad read");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_env_step(fh_trainer* t, const int32_t* actions, float* reward, uint8_t* done,
                                                int32_t* position, int64_t* cursor, double* equity, double* cost) {
  if (!t || !actions) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  const int32_t N = t->cfg.n_envs;
  cudaStream_t s = collect_stream(t);
  FH_TRY(settle_ahead(t)); /* the envs as the last epoch left them */
  TR_CUDA(t, cudaDeviceSynchronize(), "env_step");
  for (int32_t e = 0; e < N; ++e)
    for (int d = 0; d < 3; ++d) {
      const int32_t a = actions[(int64_t)e * 3 + d];
      if (a < 0 || a >= t->cfg.branch_sizes[d])
        return fail(t, FH_ERR_INVALID_ARGUMENT, "env_step: actions[%d][%d] = %d is outside [0, %d)", e, d, a,
                    t->cfg.branch_sizes[d]);
    }
  TR_CUDA(t, cudaMemcpy(t->envs.actions, actions, (size_t)N * 3 * 4, cudaMemcpyHostToDevice), "env_step upload");
  /* the c-th probe call (c = env counter + probe_steps) resets ended episodes with counter c + 1,
   * as the CPU backend does; the kernel resets with *env_step + step_in_epoch + 1 */
  TR_TRY(t, fh_launch_env_step(t->envs, t->dm, nullptr, (int32_t)t->probe_steps, s), "env_step");
  t->probe_steps += 1;
  TR_CUDA(t, cudaStreamSynchronize(s), "env_step");
  if (reward) TR_CUDA(t, cudaMemcpy(reward, t->envs.reward, (size_t)N * 4, cudaMemcpyDeviceToHost), "env_step read");
  if (done) TR_CUDA(t, cudaMemcpy(done, t->envs.done, (size_t)N, cudaMemcpyDeviceToHost), "env_step read");
  if (position) TR_CUDA(t, cudaMemcpy(position, t->envs.position, (size_t)N * 4, cudaMemcpyDeviceToHost), "env_step read");
  if (cost) TR_CUDA(t, cudaMemcpy(cost, t->envs.cost, (size_t)N * 8, cudaMemcpyDeviceToHost), "env_step read");
  /* cursor and equity at the end of the step, before a reset (as the CPU backend reports them) */
  if (cursor) TR_CUDA(t, cudaMemcpy(cursor, t->envs.cursor, (size_t)N * 8, cudaMemcpyDeviceToHost), "env_step read");
  if (equity) TR_CUDA(t, cudaMemcpy(equity, t->envs.equity, (size_t)N * 8, cudaMemcpyDeviceToHost), "env_step read");
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_env_observe(fh_trainer* t, float* out) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  const size_t bytes = (size_t)t->cfg.n_envs * t->obs_dim * 4;
  float* tmp = nullptr;
  FH_TRY(settle_ahead(t)); /* the envs as the last epoch left them */
  TR_CUDA(t, cudaDeviceSynchronize(), "env_observe");
  TR_CUDA(t, cudaMalloc(&tmp, bytes), "env_observe");
  cudaStream_t s = collect_stream(t);
  fh_status st = fh_launch_env_observe(t->envs, t->dm, FH_F32, tmp, t->obs_dim, s);
  cudaError_t e = st == FH_OK ? cudaStreamSynchronize(s) : cudaSuccess;
  if (st == FH_OK && e == cudaSuccess) e = cudaMemcpy(out, tmp, bytes, cudaMemcpyDeviceToHost);
  cudaFree(tmp);
  if (st != FH_OK) return fail_dev(t, st, "env_observe");
  if (e != cudaSuccess) {
    fh_cuda_set_error(__FILE__, __LINE__, "env_observe", cudaGetErrorString(e));
    return fail_dev(t, fh_cuda_status(e), "env_observe");
  }
  return FH_OK;
}

/* ------------------------------------------------------------------ test entry (test/gpu only) */

static double bf16_bits_to_double(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The target's first-layer table checked in place: out[0] = 1 when it is on (else why says why not);
 * out[1] = max |table - a rebuild from the target's current weights| (0 when it follows every change of
 * them); out[2] = max |a1 from the table - a1 from the GEMM| over batch set 0's s' rows (the last even
 * train step's batch), out[3] = max |a1 from the GEMM|, out[4] = the rows compared. Synchronous. */
extern "C" FH_API fh_status fh_test_trainer_target_p1(fh_trainer* t, double* out, char* why, size_t why_len) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  for (int i = 0; i < 5; ++i) out[i] = 0.0;
  if (why && why_len) snprintf(why, why_len, "%s", t->tp1.why);
  if (!t->tp1.on) return FH_OK;
  out[0] = 1.0;
  fh_net* net = &t->net;
  const fh_layout& L = net->L;
  const int32_t B = t->batch;
  cudaStream_t st = train_stream(t);
  float* tmp = nullptr;
  fh_bf16 *ap = nullptr, *ag = nullptr;
  std::vector<float> a((size_t)t->tp1.n * L.h1), b(a.size());
  std::vector<uint16_t> hp((size_t)B * L.h1), hg(hp.size());
  fh_status s = FH_OK;
  const fh_bf16* S = static_cast<const fh_bf16*>(net->target_sh);
  const void* xn = fh_net_next_obs(net, B, t->xs[0]);
  fh_bf16* xstd = nullptr; /* paired layout: the batch's stored s' rows in the usual layout */
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMalloc(&tmp, a.size() * 4);
  if (e == cudaSuccess) e = cudaMalloc((void**)&ap, hp.size() * 2);
  if (e == cudaSuccess) e = cudaMalloc((void**)&ag, hp.size() * 2);
  if (e == cudaSuccess && t->pair) e = cudaMalloc((void**)&xstd, (size_t)B * L.D * 2);
  if (e != cudaSuccess) {
    s = fail_dev(t, fh_cuda_status(e), "target table check");
    goto done;
  }
  if (t->pair) {
    s = fh_launch_replay_gather(t->replay, t->dm, t->cfg.window, t->bb[0], B, FH_BF16, nullptr, xstd, L.D, st);
    xn = xstd;
  }
  if (s == FH_OK) s = fh_target_p1_refresh(t->tp1, net, t->dm.view, t->cfg.window, st, tmp);
  if (s == FH_OK) s = fh_net_layer1_from_table(net, t->tp1, xn, t->bb[0].nbar, B, ap, st);
  if (s == FH_OK)
    s = fh_gemm_fwd(net->gemm, st, net->pass[0].ws[0], FH_BF16, B, L.h1, L.D, xn, L.D, S + L.W1, S + L.b1,
                    FH_EPI_RELU_BIAS, ag, FH_BF16, L.h1);
  if (s != FH_OK) {
    s = fail(t, s, "target table check: %s", fh_cuda_last_error_text());
    goto done;
  }
  e = cudaStreamSynchronize(st);
  if (e == cudaSuccess) e = cudaMemcpy(a.data(), t->tp1.table, a.size() * 4, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(b.data(), tmp, b.size() * 4, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(hp.data(), ap, hp.size() * 2, cudaMemcpyDeviceToHost);
  if (e == cudaSuccess) e = cudaMemcpy(hg.data(), ag, hg.size() * 2, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    s = fail_dev(t, fh_cuda_status(e), "target table check");
    goto done;
  }
  for (size_t i = 0; i < a.size(); ++i) out[1] = fmax(out[1], fabs((double)a[i] - (double)b[i]));
  for (size_t i = 0; i < hp.size(); ++i) {
    const double g = bf16_bits_to_double(hg[i]);
    out[2] = fmax(out[2], fabs(bf16_bits_to_double(hp[i]) - g));
    out[3] = fmax(out[3], fabs(g));
  }
  out[4] = B;
done:
  if (tmp) cudaFree(tmp);
  if (ap) cudaFree(ap);
  if (ag) cudaFree(ag);
  if (xstd) cudaFree(xstd);
  return s;
}

/* The paired batch layout checked in place, on batch set 0's slots (the last even train step's batch): the usual
 * gather and the paired one into buffers of their own, compared bit for bit. out[0] = 1 when the trainer trains with
 * the paired layout; out[1] = samples; out[2] = s runs that differ from the usual s row (account at 0, zeros, market
 * at mkt); out[3] = s' runs that differ (the first nF columns aside, then the usual s' row, then zeros) among the
 * samples with disc != 0; out[4] = samples with disc == 0 (their s' run is not the stored state: the loss reads
 * nothing of it); out[5] = elements of W1's placed copies (w1s, w1n) that differ from the online shadow's W1 or are
 * not zero where W1 does not go (0 with the layout off: none). Needs bf16 mode, the market's bf16 features and
 * F % 8 == 0 (else FH_ERR_UNSUPPORTED). */
extern "C" FH_API fh_status fh_test_trainer_pair_gather(fh_trainer* t, double* out) {
  if (!t || !out) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  for (int i = 0; i < 6; ++i) out[i] = 0.0;
  const int32_t F = t->hm.m.n_features, D = t->obs_dim, B = t->batch, W = t->cfg.window;
  if (!t->dm.features_bf16 || F % 8 != 0 || t->net.op != FH_BF16)
    return fail(t, FH_ERR_UNSUPPORTED, "pair gather check: needs bf16 mode, the bf16 features and F %% 8 == 0");
  FH_TRY(settle_ahead(t)); /* the replay as the last epoch left it */
  out[0] = t->pair ? 1.0 : 0.0;
  const fh_pair_layout pl = fh_pair_make(W, F, t->cfg.n_step);
  const fh_layout& L = t->net.L;
  cudaStream_t st = train_stream(t);
  fh_bf16 *xa = nullptr, *xb = nullptr;
  std::vector<uint16_t> ha((size_t)2 * B * D), hb((size_t)B * pl.P), w((size_t)L.total);
  std::vector<uint16_t> ws((size_t)L.h1 * pl.K), wn(ws.size());
  std::vector<float> disc((size_t)B);
  TR_CUDA(t, cudaDeviceSynchronize(), "pair gather check");
  cudaError_t e = cudaMalloc((void**)&xa, ha.size() * 2);
  if (e == cudaSuccess) e = cudaMalloc((void**)&xb, hb.size() * 2);
  fh_status s = e == cudaSuccess ? FH_OK : fail_dev(t, fh_cuda_status(e), "pair gather check");
  if (s == FH_OK)
    s = fh_launch_replay_gather(t->replay, t->dm, W, t->bb[0], B, FH_BF16, xa, xa + (size_t)B * D, D, st);
  if (s == FH_OK) s = fh_launch_replay_gather_pair(t->replay, t->dm, W, t->bb[0], B, xb, pl, st);
  if (s != FH_OK && e == cudaSuccess) s = fail(t, s, "pair gather check: %s", fh_cuda_last_error_text());
  if (s == FH_OK) {
    e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) e = cudaMemcpy(ha.data(), xa, ha.size() * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(hb.data(), xb, hb.size() * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(disc.data(), t->bb[0].disc, disc.size() * 4, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess) e = cudaMemcpy(w.data(), t->net.online_sh, w.size() * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && t->net.w1s) e = cudaMemcpy(ws.data(), t->net.w1s, ws.size() * 2, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess && t->net.w1n) e = cudaMemcpy(wn.data(), t->net.w1n, wn.size() * 2, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) s = fail_dev(t, fh_cuda_status(e), "pair gather check");
  }
  if (s == FH_OK) {
    const int32_t WF = pl.WF;
    const std::vector<uint16_t> zeros((size_t)pl.P, 0);
    out[1] = B;
    for (int32_t j = 0; j < B; ++j) {
      const uint16_t* xs_ = &ha[(size_t)j * D];
      const uint16_t* xn_ = &ha[((size_t)B + j) * D];
      const uint16_t* blk = &hb[(size_t)j * pl.P];
      const bool s_same = memcmp(blk, xs_ + WF, FH_ENV_ACCOUNT * 2) == 0 &&
                          memcmp(blk + FH_ENV_ACCOUNT, zeros.data(), (size_t)(pl.mkt - FH_ENV_ACCOUNT) * 2) == 0 &&
                          memcmp(blk + pl.mkt, xs_, (size_t)WF * 2) == 0;
      out[2] += s_same ? 0.0 : 1.0;
      const uint16_t* run = blk + pl.mkt + pl.nF; /* the usual s' row, then zeros to the run's end */
      const bool n_same = memcmp(run, xn_, (size_t)D * 2) == 0 &&
                          memcmp(run + D, zeros.data(), (size_t)(pl.K - pl.nF - D) * 2) == 0;
      if (disc[j] == 0.0f)
        out[4] += 1.0;
      else
        out[3] += n_same ? 0.0 : 1.0;
    }
    if (t->net.w1s)
      for (int32_t row = 0; row < L.h1; ++row)
        for (int32_t c = 0; c < pl.K; ++c) {
          /* the canonical column that goes to w1s / w1n column c, or -1 */
          const int32_t cs = c < FH_ENV_ACCOUNT ? WF + c : c >= pl.mkt ? c - pl.mkt : -1;
          const int32_t cn = c >= pl.nF && c < pl.nF + D ? c - pl.nF : -1;
          const uint16_t es = cs >= 0 ? w[(size_t)L.W1 + (size_t)row * D + cs] : 0;
          const uint16_t en = cn >= 0 ? w[(size_t)L.W1 + (size_t)row * D + cn] : 0;
          out[5] += (ws[(size_t)row * pl.K + c] == es ? 0.0 : 1.0) + (wn[(size_t)row * pl.K + c] == en ? 0.0 : 1.0);
        }
  }
  if (xa) cudaFree(xa);
  if (xb) cudaFree(xb);
  return s;
}

/* CUDA-only test entry (not in foxhunt.h): the s' argmax kernel (FH_SN_ARGMAX, kernels/sn_argmax.cu) against the
 * argmax of the expected Q from the head GEMMs' bf16 logits. Call it right after fh_trainer_loss_grad with the same n
 * (pass 0's activation rows n..2n-1 then hold online(s')'s, and astar the kernel's a*_d of them). It runs the head
 * GEMMs over all 2n rows, the expected Q of rows n.. (fh_launch_expected_q, the Q the unfused loss's argmax sees up to
 * the order of its sums) and compares per sample and branch. out[0] = 1 with the kernel on (else 0 and nothing more);
 * out[1] = the (sample, branch) pairs; out[2] = those whose a*_d differs from the expected Q's first argmax; out[3] =
 * those of them whose two Qs differ by more than 1e-3 (1 + |Q|), which neither the order of the sums nor a logit
 * rounded to the neighbouring bf16 value (~4e-4 of Q at most) explains; out[4] = the largest difference among the
 * mismatches. Synchronous. */
extern "C" FH_API fh_status fh_test_trainer_sn_argmax(fh_trainer* t, int32_t n, double* out) {
  if (!t || !out || n <= 0) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(set_device(t));
  for (int i = 0; i < 5; ++i) out[i] = 0.0;
  if (!t->net.sn_argmax) return FH_OK;
  out[0] = 1.0;
  if (n > t->cap) return fail(t, FH_ERR_INVALID_ARGUMENT, "sn argmax check: n = %d is more than %d rows", n, t->cap);
  fh_net& net = t->net;
  const fh_layout& L = net.L;
  cudaStream_t st = net.pass[0].s;
  TR_CUDA(t, cudaDeviceSynchronize(), "sn argmax check");
  TR_TRY(t, fh_net_heads_rows(&net, 2 * n), "sn argmax check heads");
  TR_TRY(t, fh_launch_expected_q(fh_net_view<fh_bf16>(&net, 0, n), n, net.pass[0].q, net.nq, st),
         "sn argmax check expected Q");
  TR_CUDA(t, cudaStreamSynchronize(st), "sn argmax check");
  std::vector<float> q((size_t)n * net.nq);
  std::vector<uint8_t> as((size_t)n);
  TR_CUDA(t, cudaMemcpy(q.data(), net.pass[0].q, q.size() * 4, cudaMemcpyDeviceToHost), "sn argmax check read");
  TR_CUDA(t, cudaMemcpy(as.data(), net.astar, as.size(), cudaMemcpyDeviceToHost), "sn argmax check read");
  for (int32_t i = 0; i < n; ++i)
    for (int d = 0, off = 0; d < L.n_branches; off += L.branch_sizes[d], ++d) {
      const float* qi = &q[(size_t)i * net.nq + off];
      int best = 0;
      for (int a = 1; a < L.branch_sizes[d]; ++a)
        if (qi[a] > qi[best]) best = a;
      const int got = (as[(size_t)i] >> (2 * d)) & 3;
      out[1] += 1.0;
      if (got == best) continue;
      out[2] += 1.0;
      const double gap = got < L.branch_sizes[d] ? fabs((double)qi[best] - (double)qi[got]) : INFINITY;
      if (gap > 1e-3 * (1.0 + fabs((double)qi[best]))) out[3] += 1.0;
      out[4] = gap > out[4] ? gap : out[4];
    }
  return FH_OK;
}
