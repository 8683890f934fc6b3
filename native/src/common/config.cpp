/* config.cpp — fh_config defaults (DESIGN §2 / SPEC 7 reference workload), validation, hashing. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fh_set_error(char* err, size_t err_len, const char* fmt, ...) {
  if (err == NULL || err_len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, err_len, fmt, ap);
  va_end(ap);
}

extern "C" FH_API int32_t fh_abi_version(void) { return FH_ABI_VERSION; }

extern "C" FH_API const char* fh_status_string(fh_status s) {
  switch (s) {
    case FH_OK: return "ok";
    case FH_ERR_INVALID_CONFIG: return "invalid config";
    case FH_ERR_INVALID_DATA: return "invalid market data";
    case FH_ERR_OUT_OF_MEMORY: return "out of memory";
    case FH_ERR_CHECKPOINT: return "invalid checkpoint";
    case FH_ERR_DIVERGED: return "training diverged";
    case FH_ERR_DEVICE: return "device error";
    case FH_ERR_UNSUPPORTED: return "unsupported";
    case FH_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case FH_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FH_ERR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

extern "C" FH_API fh_status fh_default_config(fh_config* c) {
  if (c == NULL) return FH_ERR_INVALID_ARGUMENT;
  memset(c, 0, sizeof *c);
  c->seed = 1;
  c->backend = FH_BACKEND_CPU;
  c->device = 0;
  c->use_graphs = 1;
  c->deterministic = 0;
  c->threads = 0;
  c->n_envs = 4096;
  c->episode_len = 100;
  c->window = 64;
  c->n_branches = 3;
  c->branch_sizes[0] = 3;
  c->branch_sizes[1] = 4;
  c->branch_sizes[2] = 3;
  c->point_value = 50.0;
  c->tick_size = 0.25;
  c->commission = 2.25;
  c->slippage_ticks = 1.0;
  c->max_contracts = 1;
  c->flatten_at_session_break = 1;
  c->stop_atr_mult = 1.0;
  c->risk_penalty = 0.0;
  c->reward_scale = 0.0;
  c->initial_capital = 100000.0;
  c->hidden1 = 512;
  c->hidden2 = 256;
  c->head_hidden = 128;
  c->atoms = 51;
  c->v_min = -10.0f;
  c->v_max = 10.0f;
  c->gamma = 0.99f;
  c->n_step = 3;
  c->lr = 1e-4f;
  c->adam_beta1 = 0.9f;
  c->adam_beta2 = 0.999f;
  c->adam_eps = 1.5e-4f;
  c->grad_clip = 10.0f;
  c->target_update_every = 2000;
  c->tau = 0.0f;
  c->huber_delta = 1.0f;
  c->replay_capacity = (int64_t)1 << 21;
  c->per_alpha = 0.6f;
  c->per_beta_start = 0.4f;
  c->per_beta_end = 1.0f;
  c->per_beta_steps = 100000;
  c->per_eps = 1e-6f;
  c->train_steps = 341;
  c->batch_size = 0;
  c->batch_cap = 16384;
  c->learning_starts = 0;
  c->eps_start = 1.0f;
  c->eps_end = 0.05f;
  c->eps_decay_steps = 2000000.0;
  c->qstats_every = 50;
  c->eval_segments = 64;
  c->fault_hook = 0;
  return FH_OK;
}

int64_t fh_resolved_capacity(const fh_config* c) {
  if (c->n_envs <= 0) return 0;
  return c->replay_capacity / c->n_envs * c->n_envs;
}

/* Range checks written as !(lo <= x && x <= hi) so NaN fails them. */
#define FH_CHECK(cond, ...)                          \
  do {                                               \
    if (!(cond)) {                                   \
      fh_set_error(err, err_len, __VA_ARGS__);       \
      return FH_ERR_INVALID_CONFIG;                  \
    }                                                \
  } while (0)

extern "C" FH_API fh_status fh_validate_config(const fh_config* c, char* err, size_t err_len) {
  if (c == NULL) {
    fh_set_error(err, err_len, "config is NULL");
    return FH_ERR_INVALID_ARGUMENT;
  }
  FH_CHECK(c->backend == FH_BACKEND_CPU || c->backend == FH_BACKEND_CUDA, "backend: must be 0 (cpu) or 1 (cuda), got %d", c->backend);
  FH_CHECK(c->device >= 0 && c->device < 1024, "device: must be in [0, 1024), got %d", c->device);
  FH_CHECK(c->threads >= 0 && c->threads <= 1024, "threads: must be in [0, 1024], got %d", c->threads);
  FH_CHECK(c->n_envs >= 1 && c->n_envs <= (1 << 20), "n_envs: must be in [1, 1048576], got %d", c->n_envs);
  FH_CHECK(c->episode_len >= 1 && c->episode_len <= 1000000, "episode_len: must be in [1, 1000000], got %d", c->episode_len);
  FH_CHECK(c->window >= 1 && c->window <= 4096, "window: must be in [1, 4096], got %d", c->window);
  FH_CHECK(c->n_branches == 3, "n_branches: must be 3 (direction, size, stop), got %d", c->n_branches);
  for (int d = 0; d < 3; ++d)
    FH_CHECK(c->branch_sizes[d] >= 1 && c->branch_sizes[d] <= 255, "branch_sizes[%d]: must be in [1, 255], got %d", d, c->branch_sizes[d]);
  FH_CHECK(c->branch_sizes[0] >= 3 && c->branch_sizes[0] % 2 == 1, "branch_sizes[0]: the direction branch must be odd and >= 3, got %d", c->branch_sizes[0]);
  FH_CHECK(isfinite(c->point_value) && c->point_value > 0, "point_value: must be finite and > 0, got %g", c->point_value);
  FH_CHECK(isfinite(c->tick_size) && c->tick_size > 0, "tick_size: must be finite and > 0, got %g", c->tick_size);
  FH_CHECK(isfinite(c->commission) && c->commission >= 0, "commission: must be finite and >= 0, got %g", c->commission);
  FH_CHECK(isfinite(c->slippage_ticks) && c->slippage_ticks >= 0, "slippage_ticks: must be finite and >= 0, got %g", c->slippage_ticks);
  FH_CHECK(c->max_contracts >= 1 && c->max_contracts <= 1000000, "max_contracts: must be in [1, 1000000], got %d", c->max_contracts);
  FH_CHECK(c->flatten_at_session_break == 0 || c->flatten_at_session_break == 1, "flatten_at_session_break: must be 0 or 1, got %d", c->flatten_at_session_break);
  FH_CHECK(isfinite(c->stop_atr_mult) && c->stop_atr_mult >= 0, "stop_atr_mult: must be finite and >= 0, got %g", c->stop_atr_mult);
  FH_CHECK(isfinite(c->risk_penalty) && c->risk_penalty >= 0, "risk_penalty: must be finite and >= 0, got %g", c->risk_penalty);
  FH_CHECK(isfinite(c->reward_scale) && c->reward_scale >= 0, "reward_scale: must be finite and >= 0 (0 = auto), got %g", c->reward_scale);
  FH_CHECK(isfinite(c->initial_capital) && c->initial_capital > 0, "initial_capital: must be finite and > 0, got %g", c->initial_capital);
  FH_CHECK(c->hidden1 >= 1 && c->hidden1 <= 65536, "hidden1: must be in [1, 65536], got %d", c->hidden1);
  FH_CHECK(c->hidden2 >= 1 && c->hidden2 <= 65536, "hidden2: must be in [1, 65536], got %d", c->hidden2);
  FH_CHECK(c->head_hidden >= 1 && c->head_hidden <= 65536, "head_hidden: must be in [1, 65536], got %d", c->head_hidden);
  FH_CHECK(c->atoms >= 1 && c->atoms <= 1024, "atoms: must be in [1, 1024] (1 = plain Q), got %d", c->atoms);
  FH_CHECK(c->atoms == 1 || (isfinite(c->v_min) && isfinite(c->v_max) && c->v_min < c->v_max),
           "v_min/v_max: need finite v_min < v_max, got %g, %g", (double)c->v_min, (double)c->v_max);
  FH_CHECK(c->gamma > 0 && c->gamma <= 1, "gamma: must be in (0, 1], got %g", (double)c->gamma);
  FH_CHECK(c->n_step >= 1 && c->n_step <= 64, "n_step: must be in [1, 64], got %d", c->n_step);
  FH_CHECK(c->lr > 0 && c->lr < 1e3f, "lr: must be in (0, 1000), got %g", (double)c->lr);
  FH_CHECK(c->adam_beta1 >= 0 && c->adam_beta1 < 1, "adam_beta1: must be in [0, 1), got %g", (double)c->adam_beta1);
  FH_CHECK(c->adam_beta2 >= 0 && c->adam_beta2 < 1, "adam_beta2: must be in [0, 1), got %g", (double)c->adam_beta2);
  FH_CHECK(c->adam_eps > 0 && c->adam_eps < 1e3f, "adam_eps: must be in (0, 1000), got %g", (double)c->adam_eps);
  FH_CHECK(c->grad_clip >= 0 && isfinite(c->grad_clip), "grad_clip: must be finite and >= 0 (0 = off), got %g", (double)c->grad_clip);
  FH_CHECK(c->tau >= 0 && c->tau <= 1, "tau: must be in [0, 1], got %g", (double)c->tau);
  FH_CHECK(c->tau > 0 || c->target_update_every >= 1, "target_update_every: must be >= 1 when tau is 0, got %d", c->target_update_every);
  FH_CHECK(c->huber_delta > 0 && isfinite(c->huber_delta), "huber_delta: must be finite and > 0, got %g", (double)c->huber_delta);
  FH_CHECK(c->replay_capacity >= 1 && c->replay_capacity <= ((int64_t)1 << 31), "replay_capacity: must be in [1, 2^31], got %lld", (long long)c->replay_capacity);
  FH_CHECK(fh_resolved_capacity(c) / c->n_envs >= c->n_step + 2,
           "replay_capacity: %lld holds %lld rows of n_envs=%d; need at least n_step + 2 = %d rows",
           (long long)c->replay_capacity, (long long)(fh_resolved_capacity(c) / c->n_envs), c->n_envs, c->n_step + 2);
  FH_CHECK(c->per_alpha >= 0 && c->per_alpha <= 10, "per_alpha: must be in [0, 10], got %g", (double)c->per_alpha);
  FH_CHECK(c->per_beta_start >= 0 && c->per_beta_start <= 1, "per_beta_start: must be in [0, 1], got %g", (double)c->per_beta_start);
  FH_CHECK(c->per_beta_end >= 0 && c->per_beta_end <= 1, "per_beta_end: must be in [0, 1], got %g", (double)c->per_beta_end);
  FH_CHECK(c->per_beta_steps >= 1, "per_beta_steps: must be >= 1, got %lld", (long long)c->per_beta_steps);
  FH_CHECK(c->per_eps > 0 && isfinite(c->per_eps), "per_eps: must be finite and > 0, got %g", (double)c->per_eps);
  FH_CHECK(c->train_steps >= 0 && c->train_steps <= 10000000, "train_steps: must be in [0, 10000000], got %d", c->train_steps);
  FH_CHECK(c->batch_size >= 0 && c->batch_size <= (1 << 20), "batch_size: must be in [0, 1048576] (0 = auto), got %d", c->batch_size);
  FH_CHECK(c->batch_cap >= 1 && c->batch_cap <= (1 << 20), "batch_cap: must be in [1, 1048576], got %d", c->batch_cap);
  FH_CHECK(c->learning_starts >= 0, "learning_starts: must be >= 0, got %lld", (long long)c->learning_starts);
  FH_CHECK(c->eps_start >= 0 && c->eps_start <= 1, "eps_start: must be in [0, 1], got %g", (double)c->eps_start);
  FH_CHECK(c->eps_end >= 0 && c->eps_end <= 1, "eps_end: must be in [0, 1], got %g", (double)c->eps_end);
  FH_CHECK(c->eps_decay_steps > 0 && isfinite(c->eps_decay_steps), "eps_decay_steps: must be finite and > 0, got %g", c->eps_decay_steps);
  FH_CHECK(c->qstats_every >= 1, "qstats_every: must be >= 1, got %d", c->qstats_every);
  FH_CHECK(c->eval_segments >= 1 && c->eval_segments <= 100000, "eval_segments: must be in [1, 100000], got %d", c->eval_segments);
  FH_CHECK(c->fault_hook == 0 || c->fault_hook == 1, "fault_hook: must be 0 or 1, got %d", c->fault_hook);
  return FH_OK;
}

#define FH_DATA_CHECK(cond, ...)                     \
  do {                                               \
    if (!(cond)) {                                   \
      fh_set_error(err, err_len, __VA_ARGS__);       \
      return FH_ERR_INVALID_DATA;                    \
    }                                                \
  } while (0)

fh_status fh_validate_market(const fh_config* c, const fh_market* m, char* err, size_t err_len) {
  if (m == NULL) {
    fh_set_error(err, err_len, "market is NULL");
    return FH_ERR_INVALID_ARGUMENT;
  }
  FH_DATA_CHECK(m->n_bars >= 2 && m->n_bars <= ((int64_t)1 << 31), "market.n_bars: must be in [2, 2^31], got %lld", (long long)m->n_bars);
  FH_DATA_CHECK(m->n_features >= 1 && m->n_features <= 4096, "market.n_features: must be in [1, 4096], got %d", m->n_features);
  FH_DATA_CHECK(m->features && m->open && m->high && m->low && m->close && m->atr && m->session_start,
                "market: an array pointer is NULL (features, open, high, low, close, atr, session_start are required)");
  FH_DATA_CHECK((int64_t)c->window * m->n_features <= (1 << 22), "window*n_features: observation too large (%lld)",
                (long long)c->window * m->n_features);
  const int64_t n = m->n_bars;
  const int64_t nf = n * m->n_features;
  for (int64_t i = 0; i < nf; ++i)
    FH_DATA_CHECK(isfinite(m->features[i]), "market.features: non-finite value at bar %lld feature %lld",
                  (long long)(i / m->n_features), (long long)(i % m->n_features));
  for (int64_t i = 0; i < n; ++i) {
    FH_DATA_CHECK(isfinite(m->open[i]) && isfinite(m->high[i]) && isfinite(m->low[i]) && isfinite(m->close[i]),
                  "market: non-finite price at bar %lld", (long long)i);
    FH_DATA_CHECK(isfinite(m->atr[i]) && m->atr[i] > 0, "market.atr: must be finite and > 0, bar %lld has %g", (long long)i, m->atr[i]);
    FH_DATA_CHECK(m->session_start[i] <= 1, "market.session_start: must be 0 or 1, bar %lld has %d", (long long)i, m->session_start[i]);
  }
  FH_DATA_CHECK(m->train_begin >= 0 && m->train_begin < m->train_end && m->train_end <= n,
                "market.train: need 0 <= train_begin < train_end <= n_bars, got [%lld, %lld) of %lld",
                (long long)m->train_begin, (long long)m->train_end, (long long)n);
  const int64_t lo = m->train_begin + c->window - 1;
  FH_DATA_CHECK((m->train_end - 1) - lo >= 1,
                "window: %d bars is longer than the train range [%lld, %lld) allows (need train_end - train_begin >= window + 2)",
                c->window, (long long)m->train_begin, (long long)m->train_end);
  FH_DATA_CHECK(m->val_begin >= 0 && m->val_begin < m->val_end && m->val_end <= n,
                "market.val: need 0 <= val_begin < val_end <= n_bars, got [%lld, %lld) of %lld",
                (long long)m->val_begin, (long long)m->val_end, (long long)n);
  FH_DATA_CHECK(m->val_end - m->val_begin >= 2, "market.val: the validation range needs at least 2 bars, got %lld",
                (long long)(m->val_end - m->val_begin));
  FH_DATA_CHECK(m->val_begin >= c->window - 1, "window: %d bars reach before bar 0 from val_begin %lld", c->window,
                (long long)m->val_begin);
  return FH_OK;
}

namespace {
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const uint8_t* b = (const uint8_t*)p;
    for (size_t i = 0; i < n; ++i) {
      h ^= b[i];
      h *= 1099511628211ull;
    }
  }
  void i64(int64_t v) { bytes(&v, sizeof v); }
  void f64(double v) { bytes(&v, sizeof v); }
};
}  // namespace

/* The version of what the hash covers (the fields that shape the trainer's state). It is not the ABI
 * version: ABI 3 only widened fh_info.engine, and checkpoints of ABI 2 still load. */
#define FH_STATE_HASH_VERSION 2

uint64_t fh_config_hash(const fh_config* c, const fh_market* m) {
  Fnv f;
  f.i64(FH_STATE_HASH_VERSION);
  f.i64(c->n_envs);
  f.i64(c->episode_len);
  f.i64(c->window);
  f.i64(c->n_branches);
  for (int d = 0; d < FH_MAX_BRANCHES; ++d) f.i64(c->branch_sizes[d]);
  f.i64(c->max_contracts);
  f.i64(c->hidden1);
  f.i64(c->hidden2);
  f.i64(c->head_hidden);
  f.i64(c->atoms);
  f.f64(c->v_min);
  f.f64(c->v_max);
  f.i64(c->n_step);
  f.i64(fh_resolved_capacity(c));
  f.i64(m->n_bars);
  f.i64(m->n_features);
  f.i64(m->train_begin);
  f.i64(m->train_end);
  f.i64(m->val_begin);
  f.i64(m->val_end);
  return f.h;
}
