/*
 * trainer.cpp — CPU trainer lifecycle and the epoch (SPEC 5): collect N x T transitions with
 * epsilon-greedy envs into replay, S train steps, greedy evaluation, report. No device, so the host
 * synchronisation count is 0.
 */
#include "trainer.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <new>
#include <thread>

#include "adam.cuh"
#include "config.h"
#include "env_host.h"
#include "loss.cuh"
#include "per.cuh"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

fh_status fail(fh_trainer* t, fh_status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
fh_status fail(fh_trainer* t, fh_status s, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t->err = buf;
  return s;
}

int resolve_threads(int32_t threads) {
  if (threads > 0) return threads;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : (int)hc;
}

}  // namespace

fh_replay_view fh_trainer::replay_view() {
  fh_replay_view v;
  v.bar = r_bar.data();
  v.act = r_act.data();
  v.done = r_done.data();
  v.reward = r_reward.data();
  v.account = r_account.data();
  v.rows = rows;
  v.n_envs = N;
  return v;
}

double fh_trainer::epsilon_now() const {
  return fh_epsilon(cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps, env_counter, N);
}

void fh_cpu_greedy_actions(fh_trainer* t, const float* obs, int32_t n, int32_t* actions) {
  t->net->forward(*t->pool, t->P.data(), obs, n, t->c_eval);
  t->pool->run(n, [&](int64_t b0, int64_t b1) {
    float q[3 * 255]; /* branch sizes are <= 255 */
    for (int64_t b = b0; b < b1; ++b) {
      t->net->q_values(t->c_eval, (int32_t)b, q);
      int32_t off = 0;
      for (int d = 0; d < 3; ++d) {
        actions[b * 3 + d] = fh_argmax(q + off, t->cfg.branch_sizes[d]);
        off += t->cfg.branch_sizes[d];
      }
    }
  }, 64LL * t->net->NA());
}

/* ---------------------------------------------------------------------------------------------- */

extern "C" FH_API const char* fh_version(void) { return "0.1.0 cpu"; }

extern "C" FH_API fh_status fh_device_count(int32_t* out) {
  if (out == NULL) return FH_ERR_INVALID_ARGUMENT;
  *out = 0;
  return FH_OK;
}

static void host_info(fh_info* out) {
  memset(out, 0, sizeof *out);
  out->backend = FH_BACKEND_CPU;
  out->device = -1;
  snprintf(out->device_name, sizeof out->device_name, "cpu (%u threads)", std::thread::hardware_concurrency());
  snprintf(out->device_uuid, sizeof out->device_uuid, "cpu");
  const long page = sysconf(_SC_PAGESIZE);
  out->device_mem_total = (int64_t)sysconf(_SC_PHYS_PAGES) * page;
  out->device_mem_free = (int64_t)sysconf(_SC_AVPHYS_PAGES) * page;
}

extern "C" FH_API fh_status fh_device_info(int32_t device, fh_info* out) {
  if (out == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (device != -1) return FH_ERR_UNSUPPORTED; /* the CPU library has no devices; -1 describes the host */
  host_info(out);
  return FH_OK;
}

static fh_status create_impl(const fh_config* cfg, const fh_market* m, fh_trainer* t, char* err, size_t err_len) {
  t->cfg = *cfg;
  const fh_config& c = t->cfg;
  /* market copies */
  t->n_bars = m->n_bars;
  t->F = m->n_features;
  t->train_begin = m->train_begin;
  t->train_end = m->train_end;
  t->val_begin = m->val_begin;
  t->val_end = m->val_end;
  const size_t n = (size_t)m->n_bars;
  t->features.assign(m->features, m->features + n * (size_t)m->n_features);
  t->open.assign(m->open, m->open + n);
  t->high.assign(m->high, m->high + n);
  t->low.assign(m->low, m->low + n);
  t->close.assign(m->close, m->close + n);
  t->atr.assign(m->atr, m->atr + n);
  t->session_start.assign(m->session_start, m->session_start + n);
  fh_market_view& mv = t->mv;
  mv.features = t->features.data();
  mv.open = t->open.data();
  mv.high = t->high.data();
  mv.low = t->low.data();
  mv.close = t->close.data();
  mv.atr = t->atr.data();
  mv.session_start = t->session_start.data();
  mv.n_bars = t->n_bars;
  mv.n_features = t->F;
  mv.train_begin = t->train_begin;
  mv.train_end = t->train_end;

  t->ep = fh_env_params_from_config(c, fh_resolve_reward_scale(c, *m));
  t->config_hash = fh_config_hash(cfg, m);

  /* network and optimiser */
  t->D = c.window * t->F + FH_ACCOUNT_FEATURES;
  if (fh_layout_make(&t->L, t->D, c.hidden1, c.hidden2, c.head_hidden, c.atoms, c.n_branches, c.branch_sizes) != 0) {
    fh_set_error(err, err_len, "network: layout sizes out of range");
    return FH_ERR_INVALID_CONFIG;
  }
  if (t->L.total > ((int64_t)1 << 31)) {
    fh_set_error(err, err_len, "network: %lld parameters is more than 2^31", (long long)t->L.total);
    return FH_ERR_INVALID_CONFIG;
  }
  t->batch = c.batch_size > 0 ? c.batch_size : fh_cpu_auto_batch(cfg, t->L);

  /* refuse sizes the host cannot hold before touching memory (zero-filled vectors commit pages) */
  {
    const int64_t cap = fh_resolved_capacity(cfg);
    int64_t leaves = 1;
    while (leaves < cap) leaves <<= 1;
    const double per_transition = 4.0 + 3.0 + 1.0 + 4.0 + 4.0 * FH_ACCOUNT_FEATURES;
    const double need = (double)cap * per_transition + 16.0 * (double)leaves + 5.0 * 4.0 * (double)t->L.total +
                        (double)c.n_envs * (sizeof(fh_env_state) + 4.0 * t->D) +
                        3.0 * (double)t->batch * 4.0 * (2.0 * t->D + t->L.h1 + t->L.h2 + 4.0 * t->L.n_heads * t->L.hh);
    fh_info host;
    host_info(&host);
    if (need > (double)host.device_mem_total * 0.8) {
      fh_set_error(err, err_len,
                   "sizes need about %.1f GiB of host memory (replay_capacity %lld, %lld parameters, batch %d); "
                   "this host has %.1f GiB",
                   need / (1 << 30), (long long)cap, (long long)t->L.total, t->batch,
                   (double)host.device_mem_total / (1 << 30));
      return FH_ERR_OUT_OF_MEMORY;
    }
  }
  t->net.reset(new fh_net(t->L, c.v_min, c.v_max));
  t->pool.reset(new fh_pool(resolve_threads(c.threads)));
  const size_t np = (size_t)t->L.total;
  t->P.resize(np);
  for (size_t i = 0; i < np; ++i) t->P[i] = fh_layout_init_value(&t->L, c.seed, (int64_t)i);
  t->Pt = t->P;
  t->G.assign(np, 0.0f);
  t->M.assign(np, 0.0f);
  t->V.assign(np, 0.0f);

  /* envs: reset at collection start, counter 0 */
  t->N = c.n_envs;
  t->envs.resize((size_t)t->N);
  for (int32_t e = 0; e < t->N; ++e) fh_env_reset(t->mv, t->ep, t->envs[(size_t)e], c.seed, (uint32_t)e, 0);

  /* replay */
  t->capacity = fh_resolved_capacity(cfg);
  t->rows = t->capacity / t->N;
  const size_t cap = (size_t)t->capacity;
  t->r_bar.assign(cap, 0);
  t->r_act.assign(cap * 3, 0);
  t->r_done.assign(cap, 0);
  t->r_reward.assign(cap, 0.0f);
  t->r_account.assign(cap * FH_ACCOUNT_FEATURES, 0.0f);
  t->per.init(t->capacity);

  fh_cpu_eval_prepare(t);
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_create(const fh_config* cfg, const fh_market* market, fh_trainer** out,
                                              char* err, size_t err_len) {
  if (out == NULL) {
    fh_set_error(err, err_len, "out is NULL");
    return FH_ERR_INVALID_ARGUMENT;
  }
  *out = NULL;
  if (cfg == NULL) {
    fh_set_error(err, err_len, "config is NULL");
    return FH_ERR_INVALID_ARGUMENT;
  }
  fh_status s = fh_validate_config(cfg, err, err_len);
  if (s != FH_OK) return s;
  if (cfg->backend != FH_BACKEND_CPU) {
    fh_set_error(err, err_len, "backend: this is the CPU library (libfoxhunt_cpu.so); backend %d is not available here", cfg->backend);
    return FH_ERR_UNSUPPORTED;
  }
  s = fh_validate_market(cfg, market, err, err_len);
  if (s != FH_OK) return s;
  fh_trainer* t = NULL;
  try {
    t = new fh_trainer();
    s = create_impl(cfg, market, t, err, err_len);
    if (s != FH_OK) {
      delete t;
      return s;
    }
    *out = t;
    return FH_OK;
  } catch (const std::bad_alloc&) {
    delete t;
    fh_set_error(err, err_len, "out of host memory creating the trainer (replay %lld transitions, %d envs)",
                 (long long)cfg->replay_capacity, cfg->n_envs);
    return FH_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    delete t;
    fh_set_error(err, err_len, "internal error creating the trainer: %s", e.what());
    return FH_ERR_INTERNAL;
  }
}

extern "C" FH_API void fh_trainer_destroy(fh_trainer* t) { delete t; }

extern "C" FH_API const char* fh_trainer_last_error(const fh_trainer* t) {
  if (t == NULL) return "trainer is NULL";
  return t->err.c_str();
}

extern "C" FH_API fh_status fh_trainer_info(fh_trainer* t, fh_info* out) {
  if (t == NULL || out == NULL) return FH_ERR_INVALID_ARGUMENT;
  host_info(out);
  out->batch_size = t->batch;
  out->obs_dim = t->D;
  out->n_params = t->L.total;
  out->replay_capacity = t->capacity;
  const fh_layout& L = t->L;
  double fwd = (double)L.D * L.h1 + (double)L.h1 * L.h2 + (double)L.h2 * L.n_heads * L.hh;
  for (int k = 0; k < L.n_heads; ++k) fwd += (double)L.hh * L.out[k];
  fwd *= 2.0;
  const double collect = (double)t->N * t->cfg.episode_len * fwd;
  const double train = (double)t->cfg.train_steps * t->batch * fwd * 5.0; /* 3 forwards + backward ~2x */
  const double eval = (double)(t->val_end - t->val_begin) * fwd;
  out->flops_per_epoch = collect + train + eval;
  out->reward_scale = t->ep.reward_scale;
  out->config_hash = t->config_hash;
  snprintf(out->engine, sizeof out->engine, "cpu fp32, %d thread%s", t->pool->threads(), t->pool->threads() == 1 ? "" : "s");
  return FH_OK;
}

/* ---------------------------------------------------------------------------------------------- */

static fh_status run_epoch_impl(fh_trainer* t, fh_epoch_stats* out) {
  const fh_config& c = t->cfg;
  const uint64_t epoch_no = t->epoch + 1;
  if (c.fault_hook == 1) raise(SIGSEGV); /* test-only: the fleet's crash test */

  memset(out, 0, sizeof *out);
  const double t0 = now_ms();
  fh_cpu_collect(t);
  const double t1 = now_ms();
  out->epsilon = t->epsilon_now();

  /* train */
  double loss_sum = 0.0, loss_last = NAN, gn_sum = 0.0, gn_max = NAN;
  double q[5] = {NAN, NAN, NAN, NAN, NAN};
  int32_t steps_done = 0;
  const int64_t sampleable = t->per.size;
  if (sampleable > 0 && sampleable >= t->cfg.learning_starts) {
    for (int32_t s = 0; s < c.train_steps; ++s) {
      const bool want_q = (t->train_step % (uint64_t)c.qstats_every) == 0;
      double loss = 0.0, gn = 0.0;
      double qs[5];
      const fh_status st = fh_cpu_train_step(t, &loss, &gn, want_q, qs);
      if (st != FH_OK) return st;
      if (!isfinite(loss) || !isfinite(gn))
        return fail(t, FH_ERR_DIVERGED, "epoch %llu: the %s became %s at train step %llu", (unsigned long long)epoch_no,
                    isfinite(loss) ? "gradient norm" : "loss", isnan(isfinite(loss) ? gn : loss) ? "NaN" : "Inf",
                    (unsigned long long)t->train_step);
      loss_sum += loss;
      loss_last = loss;
      gn_sum += gn;
      gn_max = steps_done == 0 || gn > gn_max ? gn : gn_max;
      if (want_q)
        for (int k = 0; k < 5; ++k) q[k] = qs[k];
      ++steps_done;
    }
  }
  const double t2 = now_ms();

  /* evaluate */
  fh_cpu_evaluate(t, 0, &out->val);
  if (!t->baselines_ready) {
    fh_cpu_evaluate(t, 1, &t->flat_m);
    fh_cpu_evaluate(t, 2, &t->bh_m);
    t->baselines_ready = true;
  }
  out->flat = t->flat_m;
  out->buy_hold = t->bh_m;
  const double t3 = now_ms();

  t->epoch = epoch_no;
  out->epoch = (double)epoch_no;
  out->global_step = (double)t->train_step;
  out->env_steps = (double)t->env_counter * t->N;
  out->loss_mean = steps_done > 0 ? loss_sum / steps_done : NAN;
  out->loss_last = loss_last;
  out->grad_norm_mean = steps_done > 0 ? gn_sum / steps_done : NAN;
  out->grad_norm_max = gn_max;
  out->q_avg_max = q[0];
  out->q_min = q[1];
  out->q_max = q[2];
  out->q_mean = q[3];
  out->q_var = q[4];
  out->beta = fh_per_beta(c.per_beta_start, c.per_beta_end, c.per_beta_steps, (int64_t)t->train_step);
  out->batch_size = t->batch;
  const uint64_t filled = t->env_counter < (uint64_t)t->rows ? t->env_counter : (uint64_t)t->rows;
  out->replay_size = (double)filled * t->N;
  out->collect_ms = t1 - t0;
  out->train_ms = t2 - t1;
  out->eval_ms = t3 - t2;
  out->total_ms = t3 - t0;
  out->env_steps_per_s = out->collect_ms > 0 ? (double)t->N * c.episode_len / (out->collect_ms / 1000.0) : 0.0;
  out->samples_per_s = out->train_ms > 0 ? (double)steps_done * t->batch / (out->train_ms / 1000.0) : 0.0;
  out->host_syncs = 0.0;
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_run_epoch(fh_trainer* t, fh_epoch_stats* out) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (out == NULL) return fail(t, FH_ERR_INVALID_ARGUMENT, "run_epoch: out is NULL");
  try {
    return run_epoch_impl(t, out);
  } catch (const std::bad_alloc&) {
    return fail(t, FH_ERR_OUT_OF_MEMORY, "epoch %llu: out of host memory", (unsigned long long)(t->epoch + 1));
  } catch (const std::exception& e) {
    return fail(t, FH_ERR_INTERNAL, "epoch %llu: %s", (unsigned long long)(t->epoch + 1), e.what());
  }
}
