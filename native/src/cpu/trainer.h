/*
 * trainer.h — the CPU trainer behind fh_trainer (foxhunt.h). One struct, phases in separate files:
 *   trainer.cpp     create/destroy/info, run_epoch (collect -> train -> evaluate -> report)
 *   collect.cpp     experience collection into replay
 *   learn.cpp       the batch loss + gradient (double DQN, BDQ, C51/Huber), train step, Q stats
 *   eval.cpp        greedy evaluation over the validation segments, flat and buy&hold baselines
 *   state.cpp       checkpoint save/load
 *   probe.cpp       narrow entry points for tests (env_step, observe, loss_grad, q_values, params)
 */
#ifndef FOXHUNT_CPU_TRAINER_H
#define FOXHUNT_CPU_TRAINER_H

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "env.cuh"
#include "foxhunt.h"
#include "layout.h"
#include "metrics.h"
#include "net.h"
#include "per_tree.h"
#include "pool.h"
#include "replay.cuh"

/* One explicit batch for the loss (obs and next_obs already gathered). */
struct fh_batch {
  int32_t B = 0;
  std::vector<float> obs, next_obs; /* (B, D) */
  std::vector<int32_t> act;         /* (B, 3) */
  std::vector<float> ret, disc, weight;
  std::vector<int64_t> slot;        /* replay slots (train step only) */
  std::vector<int64_t> next_slot;   /* the slot of s' (n rows later) */
};

struct fh_trainer {
  fh_config cfg;
  std::string err;

  /* market (owned copies) */
  std::vector<float> features;      /* (n_bars, F) */
  std::vector<double> open, high, low, close, atr;
  std::vector<uint8_t> session_start;
  int64_t n_bars = 0, train_begin = 0, train_end = 0, val_begin = 0, val_end = 0;
  int32_t F = 0;
  fh_market_view mv;
  fh_env_params ep;
  uint64_t config_hash = 0;

  /* network */
  fh_layout L;
  int32_t D = 0;
  int32_t batch = 0;
  std::unique_ptr<fh_net> net;
  std::unique_ptr<fh_pool> pool;
  std::vector<float> P, Pt, G, M, V; /* online, target, grad, Adam m, Adam v: (n_params) each */

  /* envs */
  int32_t N = 0;
  std::vector<fh_env_state> envs;   /* (N) */

  /* replay: ring of rows, N transitions per row */
  int64_t rows = 0, capacity = 0;
  std::vector<int32_t> r_bar;
  std::vector<uint8_t> r_act, r_done;
  std::vector<float> r_reward, r_account;
  fh_per_tree per;

  /* counters (saved in checkpoints) */
  uint64_t env_counter = 0;   /* collection steps so far (one per N envs) */
  uint64_t train_step = 0;    /* train steps so far */
  uint64_t epoch = 0;         /* epochs finished */
  uint64_t probe_steps = 0;   /* fh_trainer_env_step calls */

  /* scratch */
  fh_batch bt;
  fh_net_cache c_on, c_next_on, c_next_tg, c_eval;
  std::vector<float> dlogits, obs_buf, td;

  /* evaluation (fixed per market) */
  std::vector<int32_t> session_of; /* (val bars) */
  int32_t n_sessions = 0;
  std::vector<int64_t> seg_begin, seg_end; /* segment k covers [seg_begin[k], seg_end[k]) */
  bool baselines_ready = false;
  fh_metrics flat_m, bh_m;

  fh_replay_view replay_view();
  double epsilon_now() const;
};

/* learn.cpp */
/* Loss and gradient of the online net on bt (obs, act, ret, disc, next_obs, weight).
 * grad (may be NULL) gets d(loss)/dP (=); td (B) the priority signal; returns the batch loss. */
double fh_cpu_loss_grad(fh_trainer* t, const fh_batch& bt, float* grad, float* td);
/* Stratified PER sample of B transitions for `draw` (the train step), gathered: obs, act, n-step
 * ret/disc, next_obs, weights, slots. */
void fh_cpu_sample_batch(fh_trainer* t, int32_t B, uint64_t draw, float beta, fh_batch& bt);
/* One train step (sample, loss, clip, Adam, priorities, target). Fills loss and pre-clip norm. */
fh_status fh_cpu_train_step(fh_trainer* t, double* loss, double* gnorm, bool qstats, double q_out[5]);
int32_t fh_cpu_auto_batch(const fh_config* cfg, const fh_layout& L);

/* eval.cpp */
void fh_cpu_eval_prepare(fh_trainer* t);
/* policy: 0 greedy, 1 flat, 2 buy & hold */
void fh_cpu_evaluate(fh_trainer* t, int policy, fh_metrics* out);

/* collect.cpp: one epoch of collection (T steps of N envs) */
void fh_cpu_collect(fh_trainer* t);

/* trainer.cpp */
void fh_cpu_greedy_actions(fh_trainer* t, const float* obs, int32_t n, int32_t* actions /* (n, 3) */);

#endif /* FOXHUNT_CPU_TRAINER_H */
