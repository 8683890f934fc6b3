/*
 * foxhunt.h — the C ABI of the foxhunt native trainer.
 *
 * One header, two libraries with the same ABI:
 *   libfoxhunt_cpu.so   CPU backend (g++ only; what tests, CI and laptops use)
 *   libfoxhunt_cuda.so  CUDA backend (nvcc + cuBLASLt; one trainer per GPU)
 *
 * Rules every entry point follows:
 *   - errors cross the ABI as fh_status values; the library never calls exit/abort and never
 *     throws across the boundary. The message of the last failure on a handle is in
 *     fh_trainer_last_error(); failures before a handle exists write into the caller's err buffer.
 *   - every entry point of the CUDA backend sets its device first (calls arrive on koffi's
 *     worker threads).
 *   - a handle is used by one thread at a time (the caller serialises calls per handle).
 *   - arrays are row-major; shapes are given in comments as (rows, cols).
 *   - "null" metrics (e.g. Sharpe with < 2 sessions) are NaN.
 */
#ifndef FOXHUNT_H
#define FOXHUNT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define FH_API __declspec(dllexport)
#else
#define FH_API __attribute__((visibility("default")))
#endif

#define FH_ABI_VERSION 4
#define FH_MAX_BRANCHES 3   /* direction, size, stop */
#define FH_ACCOUNT_FEATURES 8

typedef enum fh_status {
  FH_OK = 0,
  FH_ERR_INVALID_CONFIG = 1,   /* a config field is out of range; message names the field */
  FH_ERR_INVALID_DATA = 2,     /* market data is malformed (NaN feature, bad split, ...) */
  FH_ERR_OUT_OF_MEMORY = 3,    /* host or device allocation failed */
  FH_ERR_CHECKPOINT = 4,       /* checkpoint truncated, corrupt, wrong version or config hash */
  FH_ERR_DIVERGED = 5,         /* loss or gradient became NaN/Inf; message names the epoch */
  FH_ERR_DEVICE = 6,           /* CUDA runtime / cuBLAS error (retryable infrastructure fault) */
  FH_ERR_UNSUPPORTED = 7,      /* e.g. CUDA requested from the CPU library */
  FH_ERR_BUFFER_TOO_SMALL = 8, /* caller buffer too small; query the size first */
  FH_ERR_INVALID_ARGUMENT = 9, /* NULL pointer, bad index, wrong length passed to an entry point */
  FH_ERR_INTERNAL = 10         /* a bug: an invariant did not hold */
} fh_status;

typedef enum fh_backend { FH_BACKEND_CPU = 0, FH_BACKEND_CUDA = 1 } fh_backend;

/* Trainer configuration. fh_default_config() fills the reference workload (SPEC section 7). */
typedef struct fh_config {
  /* --- run --- */
  uint64_t seed;               /* keys every Philox stream: (seed, env|slot, step, purpose) */
  int32_t backend;             /* fh_backend; must match the library */
  int32_t device;              /* CUDA device ordinal (ignored on CPU) */
  int32_t use_graphs;          /* 1: capture collection/train/eval as CUDA graphs; 0: eager (tests) */
  int32_t deterministic;       /* 1: fp32 GEMMs on CUDA (for CPU comparison); 0: bf16 */
  int32_t threads;             /* CPU backend worker threads; 0 = hardware concurrency */
  /* --- environment (SPEC 3) --- */
  int32_t n_envs;              /* N envs collected in parallel (ref 4096) */
  int32_t episode_len;         /* T steps per episode (ref 100); also steps collected per epoch */
  int32_t window;              /* W bars of features in an observation (ref 64) */
  int32_t n_branches;          /* must be 3: direction, size, stop */
  int32_t branch_sizes[FH_MAX_BRANCHES]; /* ref {3,4,3}; direction size must be odd */
  double point_value;          /* $ per point (ES 50) */
  double tick_size;            /* price units per tick (ES 0.25) */
  double commission;           /* $ per contract per side (ES 2.25) */
  double slippage_ticks;       /* ticks per side against the trader (ES 1) */
  int32_t max_contracts;       /* |position| limit */
  int32_t flatten_at_session_break; /* 1: flatten at the last close before a gap; 0: hold through */
  double stop_atr_mult;        /* stop choice k>0 sits k*stop_atr_mult*ATR from the fill */
  double risk_penalty;         /* reward -= risk_penalty * |pos|/max_contracts per step */
  double reward_scale;         /* reward = $ change / reward_scale; 0 = auto (mean train ATR * point value) */
  double initial_capital;      /* $ base for drawdown % */
  /* --- network (SPEC 4) --- */
  int32_t hidden1;             /* trunk layer 1 width (ref 512) */
  int32_t hidden2;             /* trunk layer 2 width (ref 256) */
  int32_t head_hidden;         /* value/advantage head hidden width (ref 128) */
  int32_t atoms;               /* 51: C51 distributional; 1: plain Q with Huber loss */
  float v_min, v_max;          /* C51 support */
  /* --- learning --- */
  float gamma;                 /* discount (ref 0.99) */
  int32_t n_step;              /* n-step returns (ref 3) */
  float lr;                    /* Adam learning rate (ref 1e-4) */
  float adam_beta1, adam_beta2;/* (0.9, 0.999) */
  float adam_eps;              /* (ref 1.5e-4) */
  float grad_clip;             /* global grad-norm clip (ref 10); 0 = off */
  int32_t target_update_every; /* hard target copy every K train steps (ref 2000) when tau == 0 */
  float tau;                   /* Polyak factor per train step; 0 = hard updates */
  float huber_delta;           /* Huber threshold for atoms == 1 (1.0) */
  /* --- replay (SPEC 4) --- */
  int64_t replay_capacity;     /* transitions (ref 2^21); rounded down to a multiple of n_envs */
  float per_alpha;             /* priority exponent (0.6) */
  float per_beta_start;        /* importance-weight exponent at step 0 (0.4) */
  float per_beta_end;          /* ... annealed linearly to this (1.0) */
  int64_t per_beta_steps;      /* ... over this many train steps */
  float per_eps;               /* added to |TD| before ^alpha (1e-6) */
  /* --- training (SPEC 5) --- */
  int32_t train_steps;         /* S train steps per epoch (ref 341) */
  int32_t batch_size;          /* 0 = auto from free memory and the model */
  int32_t batch_cap;           /* auto batch cap (ref 16384; CPU profile caps lower) */
  int64_t learning_starts;     /* no training until this many transitions are sampleable */
  float eps_start, eps_end;    /* epsilon-greedy 1.0 -> 0.05 */
  double eps_decay_steps;      /* eps = end + (start-end)*exp(-env_step/eps_decay_steps) */
  int32_t qstats_every;        /* Q statistics every K train steps (ref 50) */
  /* --- evaluation --- */
  int32_t eval_segments;       /* validation range split into this many contiguous parallel segments */
  int32_t fault_hook;          /* test only: 1 = crash the process in run_epoch (must stay 0) */
} fh_config;

/* Market data. All arrays stay owned by the caller and must outlive fh_trainer_create
 * (the trainer copies what it needs). Bars are 0..n_bars-1, in time order. */
typedef struct fh_market {
  int64_t n_bars;
  int32_t n_features;          /* F */
  const float* features;       /* (n_bars, F) normalised features, causal (bar t uses data <= t) */
  const double* open;          /* (n_bars) */
  const double* high;          /* (n_bars) */
  const double* low;           /* (n_bars) */
  const double* close;         /* (n_bars) */
  const double* atr;           /* (n_bars) ATR in price units known at the close of bar t, > 0 */
  const uint8_t* session_start;/* (n_bars) 1 when bar t opens a session (a gap precedes it) */
  int64_t train_begin, train_end; /* [begin, end) bar indices used for collection */
  int64_t val_begin, val_end;     /* [begin, end) bar indices used for greedy evaluation */
} fh_market;

/* Validation metrics for one policy over the validation range (SPEC 6). */
typedef struct fh_metrics {
  double sharpe;          /* per-session PnL mean/std (ddof 1) * sqrt(252); NaN: < 2 sessions or std 0 */
  double sortino;         /* mean / sqrt(mean(min(x,0)^2)) * sqrt(252); NaN when no losing session */
  double max_drawdown;    /* $ peak-to-trough of cumulative PnL (>= 0) */
  double max_drawdown_pct;/* max over t of (peak - equity) / (initial_capital + peak), in % */
  double profit_factor;   /* gross profit / gross loss over closed trades; NaN with no losing trade */
  double total_pnl;       /* $ after costs */
  double trades;          /* closed trades */
  double win_rate;        /* winning closed trades / trades; NaN with no trade */
  double turnover;        /* contracts traded per bar */
  double sessions;        /* sessions in the validation range */
} fh_metrics;

/* Everything one epoch reports (SPEC 6). Times in ms. */
typedef struct fh_epoch_stats {
  double epoch;           /* 1-based index of the epoch just finished */
  double global_step;     /* train steps so far */
  double env_steps;       /* env transitions collected so far */
  double loss_mean, loss_last;
  double grad_norm_mean, grad_norm_max; /* before clipping */
  double q_avg_max, q_min, q_max, q_mean, q_var; /* from the last Q-stats sample of the epoch */
  double epsilon;         /* at the end of collection */
  double beta;            /* PER beta at the end of training */
  double batch_size;
  double replay_size;     /* transitions stored */
  fh_metrics val;         /* greedy policy */
  fh_metrics flat;        /* flat baseline */
  fh_metrics buy_hold;    /* long max_contracts baseline */
  double collect_ms, train_ms, eval_ms, total_ms;
  double env_steps_per_s; /* collection throughput */
  double samples_per_s;   /* train_steps * batch / train time */
  double host_syncs;      /* host<->device synchronisations this epoch (CUDA target 1; CPU 0) */
} fh_epoch_stats;

typedef struct fh_info {
  int32_t backend;        /* fh_backend */
  int32_t device;
  int32_t batch_size;     /* resolved (after auto) */
  int32_t obs_dim;        /* D = W*F + FH_ACCOUNT_FEATURES */
  int64_t n_params;       /* floats in one parameter copy */
  int64_t replay_capacity;/* resolved */
  double flops_per_epoch; /* GEMM FLOPs of collect + train + eval (for the floor) */
  double reward_scale;    /* resolved */
  uint64_t config_hash;   /* hash of the fields that shape the state (checkpoint compatibility) */
  char device_name[128];
  char device_uuid[64];
  int64_t device_mem_total;
  int64_t device_mem_free;
  char engine[256];       /* what a trainer runs, e.g. "cuda bf16, graphs, fused backward epilogues" (trainer_info) */
} fh_info;

typedef struct fh_trainer fh_trainer;

FH_API int32_t fh_abi_version(void);
FH_API const char* fh_version(void);              /* library version + backend, e.g. "0.1.0 cpu" */
FH_API const char* fh_status_string(fh_status s);
FH_API fh_status fh_default_config(fh_config* out);
FH_API fh_status fh_validate_config(const fh_config* cfg, char* err, size_t err_len);

/* Devices this library can use: 0 on CPU library (fh_device_info(-1) describes the host). */
FH_API fh_status fh_device_count(int32_t* out);
FH_API fh_status fh_device_info(int32_t device, fh_info* out);

FH_API fh_status fh_trainer_create(const fh_config* cfg, const fh_market* market,
                                   fh_trainer** out, char* err, size_t err_len);
FH_API void fh_trainer_destroy(fh_trainer* t);   /* NULL is fine */
FH_API const char* fh_trainer_last_error(const fh_trainer* t);
FH_API fh_status fh_trainer_info(fh_trainer* t, fh_info* out);

/* One epoch: collect (N x T), train (S steps), evaluate, fill stats. */
FH_API fh_status fh_trainer_run_epoch(fh_trainer* t, fh_epoch_stats* out);

/* Checkpoint: magic "FHCK", version, config hash, sha256 of the payload; everything needed
 * for a bit-exact resume (weights, Adam state, counters, env state, replay, priorities). */
FH_API fh_status fh_trainer_checkpoint_size(fh_trainer* t, uint64_t* out);
FH_API fh_status fh_trainer_save_checkpoint(fh_trainer* t, uint8_t* buf, uint64_t cap, uint64_t* written);
FH_API fh_status fh_trainer_load_checkpoint(fh_trainer* t, const uint8_t* buf, uint64_t len);

/* ---- narrow entry points for tests and tools (same semantics as the epoch uses) ---- */

/* Parameters: n = fh_info.n_params floats, layout per native/src/common/layout.h. which: 0 online, 1 target. */
FH_API fh_status fh_trainer_get_params(fh_trainer* t, int32_t which, float* out, int64_t n);
FH_API fh_status fh_trainer_set_params(fh_trainer* t, int32_t which, const float* in, int64_t n);

/* Step all N envs once with the given actions (N, 3) as int32, without touching replay or the
 * global counters used by collection. Outputs (any may be NULL), each (N):
 * reward, done, position (after the step), cursor (bar t after the step), equity ($ since episode
 * start), cost ($ paid this step). Episodes end and reset exactly as in collection. */
FH_API fh_status fh_trainer_env_step(fh_trainer* t, const int32_t* actions, float* reward,
                                     uint8_t* done, int32_t* position, int64_t* cursor,
                                     double* equity, double* cost);
/* Observations of all envs now: (N, D) floats. */
FH_API fh_status fh_trainer_env_observe(fh_trainer* t, float* out);

/* Loss and gradient of the online network on an explicit batch (no optimiser step, no priority
 * update). Batch arrays (B = n): obs (B, D), act (B, 3), ret (B) n-step return, disc (B)
 * gamma^n or 0 when the episode ended, next_obs (B, D), weight (B). grad: n_params floats (=).
 * td_out (B): the per-sample priority signal. */
FH_API fh_status fh_trainer_loss_grad(fh_trainer* t, int32_t n, const float* obs, const int32_t* act,
                                      const float* ret, const float* disc, const float* next_obs,
                                      const float* weight, double* loss, float* grad, float* td_out);

/* Replay as train step `draw` sees it (stratified PER sample of n, n-step assembly at sample time,
 * observations gathered by index), without training or touching any state. Outputs (only slot is
 * required): slot (n), next_slot (n) slot of s', obs (n, D), act (n, 3), ret (n), disc (n),
 * next_obs (n, D), weight (n). FH_ERR_INVALID_ARGUMENT when nothing is sampleable yet; a backend
 * without it returns FH_ERR_UNSUPPORTED. (Added for the replay tests.) */
FH_API fh_status fh_trainer_replay_sample(fh_trainer* t, int32_t n, uint64_t draw, float beta, int64_t* slot,
                                          int64_t* next_slot, float* obs, int32_t* act, float* ret, float* disc,
                                          float* next_obs, float* weight);

/* Greedy Q of the online network: obs (n, D) -> q (n, sum(branch_sizes)) expected Q values. */
FH_API fh_status fh_trainer_q_values(fh_trainer* t, int32_t n, const float* obs, float* q);

/* Prioritised replay, standalone (for statistical tests). */
typedef struct fh_per fh_per;
FH_API fh_status fh_per_create(int64_t capacity, float alpha, uint64_t seed, fh_per** out);
FH_API void fh_per_destroy(fh_per* p);
/* leaf priorities p_i (before ^alpha); stored as p_i^alpha */
FH_API fh_status fh_per_set(fh_per* p, int64_t n, const int64_t* idx, const float* priority);
/* stratified proportional sample of n indices for draw number `draw`; weights normalised by the
 * batch max of (size * P(i))^-beta where size = leaves with priority > 0 */
FH_API fh_status fh_per_sample(fh_per* p, int32_t n, uint64_t draw, float beta, int64_t* idx, float* weight);
FH_API fh_status fh_per_total(fh_per* p, double* out);

/* Philox-4x32-10 known-answer access: out[4] = philox(counter[4], key[2]). */
FH_API void fh_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);

/* C51: project target distributions onto the support. probs (n, atoms), ret (n), disc (n)
 * -> out (n, atoms). Same function the loss uses. */
FH_API fh_status fh_c51_project(int32_t n, int32_t atoms, float v_min, float v_max, const float* probs,
                                const float* ret, const float* disc, float* out);

/* Adam on a flat vector (same kernel the trainer uses): p, m, v updated in place; step is 1-based. */
FH_API fh_status fh_adam_step(int64_t n, float* p, const float* g, float* m, float* v, float lr,
                              float beta1, float beta2, float eps, int64_t step);

#ifdef __cplusplus
}
#endif
#endif /* FOXHUNT_H */
