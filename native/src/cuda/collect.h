/*
 * collect.h — the CUDA environment: the market on the device, N envs, observation gather,
 * epsilon-greedy action selection and the env step that writes the replay row (DESIGN §4, §6).
 *
 * Owned structs hold device buffers; *_alloc / *_free / market upload are NOT graph-capturable
 * (they allocate and copy synchronously) and run once at trainer create. Every fh_launch_* below
 * only launches kernels on the given stream: no allocation, no host read, no synchronisation, so
 * the whole T-step collection loop can be captured as one CUDA graph. Each returns an fh_status
 * (FH_ERR_DEVICE with fh_cuda_last_error_text() on a launch error).
 *
 * Counters live on the device:
 *   envs.env_step   int64  global env-step counter (collection steps taken so far, one per N envs),
 *                          saved in checkpoints. Collection step `i` of the epoch uses
 *                          counter = *env_step + i (i is a launch argument, fixed per graph node);
 *                          fh_launch_collect_end() adds T once the loop is done.
 *   envs.epsilon    float  epsilon of the last select (stats).
 * The replay row written by collection step i is the logical row *env_step + i (slot = row % rows * N + e).
 *
 * One collection step (the orchestration calls these in this order, all on one stream):
 *   fh_launch_env_observe(envs, mkt, dtype, obs, ld)      (N, D) observations, fp32 or bf16
 *   ... online forward + expected Q (N, sum n_d) ...
 *   fh_launch_select_actions(envs, q, ldq, i)             epsilon-greedy (N, 3) into envs.actions
 *   fh_launch_env_step(envs, mkt, &replay, i)             step + reset-after-done + replay row + leaves
 * or, fused (one launch per step for the env part; the same results):
 *   fh_launch_env_observe once, then per step: forward -> fh_launch_env_act_step_observe(q, i, obs)
 * after the T steps:
 *   fh_launch_collect_end(envs, &replay, T)               env_step += T; rebuild the sum tree
 */
#ifndef FH_CUDA_COLLECT_H
#define FH_CUDA_COLLECT_H

#include "../../../kernels/cuda_common.cuh"
#include "../../../kernels/env.cuh"

struct fh_cuda_replay; /* replay.h */

/* The market on the device, uploaded once. view points into the owned arrays below; its
 * train_begin/train_end are the train split. */
struct fh_cuda_market {
  fh_market_view view;        /* device pointers + sizes + train range (what kernels take) */
  int64_t val_begin, val_end; /* [begin, end) of greedy evaluation */
  float* features;            /* (n_bars, F) */
  fh_bf16* features_bf16;     /* (n_bars, F) the same, rounded to bf16 (the replay gather of bf16 batches
                                 copies it: half the bytes read, no conversion; same bits as converting) */
  double* open;               /* (n_bars) */
  double* high;               /* (n_bars) */
  double* low;                /* (n_bars) */
  double* close;              /* (n_bars) */
  double* atr;                /* (n_bars) */
  uint8_t* session_start;     /* (n_bars) */
};

/* Copies fh_market to the device (synchronous; once). On failure frees what it took. */
fh_status fh_cuda_market_upload(const fh_market* m, fh_cuda_market* out);
void fh_cuda_market_free(fh_cuda_market* m); /* idempotent; zeroes the struct */

/* N envs on the device. */
struct fh_cuda_envs {
  int32_t n;                  /* N */
  int32_t obs_dim;            /* D = W*F + 8 */
  fh_env_params p;
  uint64_t seed;
  int32_t n_act[FH_MAX_BRANCHES]; /* branch sizes */
  int32_t q_off[FH_MAX_BRANCHES]; /* column of branch d in the expected-Q matrix */
  float eps_start, eps_end;
  double eps_decay_steps;
  fh_env_state* state;        /* (N) */
  int64_t* env_step;          /* (1) global env-step counter */
  float* epsilon;             /* (1) epsilon of the last select */
  int32_t* actions;           /* (N, 3) actions of the next step (select writes, step reads) */
  float* reward;              /* (N) last step */
  uint8_t* done;              /* (N) last step */
  int32_t* position;          /* (N) at the end of the last step (before a reset after done) */
  int64_t* cursor;            /* (N) bar t at the end of the last step (before a reset) */
  double* equity;             /* (N) $ since episode start at the end of the last step (before a reset) */
  double* pnl;                /* (N) $ of the last step */
  double* cost;               /* (N) $ paid in the last step */
};

fh_status fh_cuda_envs_alloc(const fh_config& cfg, const fh_env_params& p, int32_t n_features,
                             fh_cuda_envs* out);
void fh_cuda_envs_free(fh_cuda_envs* e); /* idempotent */

/* Reset every env (episode start from Philox(RESET, env, *env_step)). */
fh_status fh_launch_env_reset_all(const fh_cuda_envs& e, const fh_cuda_market& m, cudaStream_t s);

/* obs (N, D) with row stride ld (elements, >= D): W feature rows t-W+1..t then the 8 account
 * features, as fp32 (dtype FH_F32) or bf16 (FH_BF16). Coalesced 16-byte loads when F % 4 == 0. */
fh_status fh_launch_env_observe(const fh_cuda_envs& e, const fh_cuda_market& m, fh_dtype dtype, void* obs,
                                int32_t ld, cudaStream_t s);

/* Epsilon-greedy per branch (DESIGN §6) from expected Q q (N, >= sum n_d; row stride ldq):
 * counter = *env_step + step_in_epoch; eps = end + (start-end)*exp(-counter*N/decay); per branch d
 * w = philox(seed, env, counter, EXPLORE0+d): fh_u01(w0) < eps -> fh_uniform_index(w1, n_d), else
 * argmax (lowest index on ties). greedy != 0 skips exploration (eps = 0). Writes envs.actions and
 * *envs.epsilon. */
fh_status fh_launch_select_actions(const fh_cuda_envs& e, const float* q, int32_t ldq, int32_t step_in_epoch,
                                   int32_t greedy, cudaStream_t s);

/* Step every env with envs.actions (fh_env_step), then reset the envs that are done with
 * Philox counter c + 1, c = *env_step + step_in_epoch (as the CPU backend's collection). Fills
 * reward/done/position/cursor/equity/pnl/cost (the step's result, before the reset). When r != NULL also
 * writes replay row (*env_step + step_in_epoch) (bar and account of s, actions, done, reward),
 * sets leaf(row*N+e) = 0 and leaf((row-n)*N+e) = *max_priority (DESIGN §6). The sum tree is
 * rebuilt by fh_launch_collect_end (nothing samples during collection). */
fh_status fh_launch_env_step(const fh_cuda_envs& e, const fh_cuda_market& m, const fh_cuda_replay* r,
                             int32_t step_in_epoch, cudaStream_t s);

/* Fused: fh_launch_select_actions + fh_launch_env_step + fh_launch_env_observe of the new state,
 * in one launch (one warp per env). The loop then is: observe once, then per step i
 * forward(obs) -> expected Q -> fh_launch_env_act_step_observe(q, i, obs). Same results. */
fh_status fh_launch_env_act_step_observe(const fh_cuda_envs& e, const fh_cuda_market& m, const fh_cuda_replay* r,
                                         const float* q, int32_t ldq, int32_t step_in_epoch, fh_dtype dtype,
                                         void* obs, int32_t ld, cudaStream_t s);

/* End of the collection loop: *env_step += steps; rebuild r's sum tree (r may be NULL). */
fh_status fh_launch_collect_end(const fh_cuda_envs& e, const fh_cuda_replay* r, int32_t steps, cudaStream_t s);

#endif /* FH_CUDA_COLLECT_H */
