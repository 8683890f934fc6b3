/*
 * env.cuh — one env of the trading environment (DESIGN §4), shared by both backends and mirrored by
 * the TypeScript reference env (src/env/reference.ts).
 *
 *   fh_env_reset(m, p, s, seed, env, counter)    random episode start from Philox(RESET)
 *   fh_env_target(p, a0, a1)                     action decode: direction x size -> target contracts
 *   fh_env_step(m, p, s, a0, a1, a2, r)          one step: session flatten, fill at open[t+1], stop,
 *                                                mark to close[t+1], reward, advance, done
 *   fh_env_flatten(m, p, s, r)                   exit at close[t] (session break / end of eval segment)
 *   fh_env_account(m, p, s, out[8])              the 8 account features of the observation
 *   fh_env_step_to(mk, p, s, target, a2, r)      fh_env_step with the decoded target; with
 *   fh_env_flatten_at, fh_env_account_at         any market accessor mk (fh_market_arrays: the view's arrays)
 *   fh_env_observe(m, p, s, out[D])              W feature rows t-W+1..t (oldest first) + account
 *   fh_epsilon(...), fh_explore_action(...)      the epsilon schedule and epsilon-greedy per branch
 *
 * Pure functions of (market view, params, state, action): a CUDA kernel calls them once per env.
 * All money and price math is float64 with no FMA contraction; the reward is rounded to float32 last.
 *
 * Money conventions (every backend and the reference follow them to the bit):
 *   s = slippage_ticks * tick_size; every exit or fill of q contracts costs
 *   commission*q + s*q*point_value ("cost", reported per step). PnL of a step is the marks at
 *   unslipped prices minus the cost: flatten/fill leg  pos_old*(open[t+1]-close[t])*pv - cost,
 *   bar leg  pos*(close[t+1]-open[t+1])*pv, or on a stop  pos*(level-open[t+1])*pv - cost_stop.
 *   realised books (exit_fill - avg_entry)*qty*sign*pv at slipped fill prices (no commission).
 *   A trade's PnL (eval metrics) is every mark and cost booked while it is open, from its opening
 *   fill (its share of that fill's cost) to its exit (its share of the exit's cost).
 */
#ifndef FOXHUNT_KERNELS_ENV_CUH
#define FOXHUNT_KERNELS_ENV_CUH

#include "hd.cuh"
#include "philox.cuh"

#if !defined(__CUDACC__)
#include <cmath>
using std::exp;
#endif

#define FH_ENV_ACCOUNT 8

/* Read-only market arrays as one env sees them (device or host pointers). */
struct fh_market_view {
  const float* features;        /* (n_bars, F) */
  const double* open;           /* (n_bars) */
  const double* high;           /* (n_bars) */
  const double* low;            /* (n_bars) */
  const double* close;          /* (n_bars) */
  const double* atr;            /* (n_bars) > 0 */
  const uint8_t* session_start; /* (n_bars) */
  int64_t n_bars;
  int32_t n_features;           /* F */
  int64_t train_begin, train_end; /* [begin, end) of episode starts and dones */
};

/* How the step functions read the market: fh_env_step / fh_env_flatten / fh_env_account read the arrays
 * of a view through this accessor; their templated forms (*_to, *_at) take any type with the same
 * members, e.g. the fused evaluation's bars t and t+1 loaded ahead (kernels/eval_device.cuh), so that
 * every caller runs the one copy of the arithmetic below on the same inputs. */
struct fh_market_arrays {
  const fh_market_view& m;
  FH_HD double close(int64_t i) const { return m.close[i]; }
  FH_HD double open(int64_t i) const { return m.open[i]; }
  FH_HD double high(int64_t i) const { return m.high[i]; }
  FH_HD double low(int64_t i) const { return m.low[i]; }
  FH_HD double atr(int64_t i) const { return m.atr[i]; }
  FH_HD uint8_t session_start(int64_t i) const { return m.session_start[i]; }
  FH_HD int64_t train_end() const { return m.train_end; }
};

/* Env constants, resolved from fh_config (reward_scale already resolved, never 0). */
struct fh_env_params {
  int32_t n_dir, n_size, n_stop; /* branch sizes; n_dir odd */
  int32_t max_contracts;
  int32_t flatten_at_session_break;
  int32_t episode_len;           /* T */
  int32_t window;                /* W */
  double point_value, tick_size, commission, slippage_ticks;
  double stop_atr_mult, risk_penalty, reward_scale;
};

/* One env. */
struct fh_env_state {
  int64_t t;          /* last closed bar observed */
  double avg_entry;   /* quantity-weighted mean fill of the open position */
  double stop;        /* stop level of the last step, valid when has_stop */
  double stop_dist;   /* its distance from the fill (price units) */
  double equity;      /* $ since episode start */
  double realised;    /* $ closed this episode (fill prices, no commission) */
  double trade_pnl;   /* $ of the open trade so far, costs included (eval metrics) */
  int32_t pos;        /* signed contracts */
  int32_t has_stop;   /* 1: a stop was set on the last step and not hit */
  int32_t k;          /* step within the episode */
  int32_t bars_held;  /* steps the current trade has been open (0 when flat) */
};

/* What one step produced. Trade fields count trades that closed during the step. */
struct fh_step_result {
  double pnl;          /* $ change of equity */
  double cost;         /* $ commission + slippage paid */
  float reward;
  int32_t done;
  int32_t traded;      /* contracts traded (flatten + fill + stop) */
  int32_t trades_closed, trades_won;
  double gross_profit, gross_loss; /* of the trades closed (gross_loss >= 0) */
};

FH_HD int32_t fh_sign_i(int32_t x) { return (x > 0) - (x < 0); }
FH_HD int32_t fh_abs_i(int32_t x) { return x < 0 ? -x : x; }
FH_HD double fh_clamp_d(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

FH_HD void fh_step_result_clear(fh_step_result& r) {
  r.pnl = 0.0;
  r.cost = 0.0;
  r.reward = 0.0f;
  r.done = 0;
  r.traded = 0;
  r.trades_closed = 0;
  r.trades_won = 0;
  r.gross_profit = 0.0;
  r.gross_loss = 0.0;
}

/* Flat at cursor t: no position, no stop, step 0, nothing booked (episode and eval-segment start). */
FH_HD void fh_env_start_flat(fh_env_state& s, int64_t t) {
  s.t = t;
  s.avg_entry = 0.0;
  s.stop = 0.0;
  s.stop_dist = 0.0;
  s.equity = 0.0;
  s.realised = 0.0;
  s.trade_pnl = 0.0;
  s.pos = 0;
  s.has_stop = 0;
  s.k = 0;
  s.bars_held = 0;
}

/* A new episode: flat, no stop, random cursor in [train_begin+W-1, train_end-2]. */
FH_HD void fh_env_reset(const fh_market_view& m, const fh_env_params& p, fh_env_state& s, uint64_t seed,
                        uint32_t env, uint64_t counter) {
  uint32_t w[4];
  fh_philox(seed, env, counter, FH_PURPOSE_RESET, w);
  const int64_t lo = m.train_begin + p.window - 1;
  const int64_t span = (m.train_end - 1) - lo;
  fh_env_start_flat(s, lo + (int64_t)(((uint64_t)w[0] * (uint64_t)span) >> 32));
}

/* Action decode: j = a0 - m in -m..m, target = sign(j)*ceil(|j|*(a1+1)*max / (m*n_size)). */
FH_HD int32_t fh_env_target(const fh_env_params& p, int32_t a0, int32_t a1) {
  const int32_t mid = (p.n_dir - 1) / 2;
  const int32_t j = a0 - mid;
  if (j == 0 || mid == 0) return 0;
  const int64_t num = (int64_t)fh_abs_i(j) * (a1 + 1) * p.max_contracts;
  const int64_t den = (int64_t)mid * p.n_size;
  return fh_sign_i(j) * (int32_t)((num + den - 1) / den);
}

/* Book a closed trade into the step's trade counters. */
FH_HD void fh_env_close_trade(fh_env_state& s, fh_step_result& r) {
  r.trades_closed += 1;
  if (s.trade_pnl > 0.0) {
    r.trades_won += 1;
    r.gross_profit += s.trade_pnl;
  } else {
    r.gross_loss -= s.trade_pnl;
  }
  s.trade_pnl = 0.0;
}

/* Exit the whole position at close[t] -/+ slippage (no mark: the position is already marked to
 * close[t]). Adds the cost to r and subtracts it from r.pnl. Used at session breaks and at the end of
 * an evaluation segment. */
template <class MK>
FH_HD void fh_env_flatten_at(const MK& m, const fh_env_params& p, fh_env_state& s, fh_step_result& r) {
  if (s.pos == 0) return;
  const double slip = p.slippage_ticks * p.tick_size;
  const double pv = p.point_value;
  const int32_t q = fh_abs_i(s.pos);
  const double c = m.close(s.t);
  const double exit_px = s.pos > 0 ? c - slip : c + slip;
  const double cost = p.commission * q + slip * q * pv;
  s.realised += (exit_px - s.avg_entry) * q * fh_sign_i(s.pos) * pv;
  r.cost += cost;
  r.pnl -= cost;
  r.traded += q;
  s.trade_pnl -= cost;
  fh_env_close_trade(s, r);
  s.pos = 0;
  s.avg_entry = 0.0;
  s.has_stop = 0;
  s.bars_held = 0;
}

FH_HD void fh_env_flatten(const fh_market_view& m, const fh_env_params& p, fh_env_state& s, fh_step_result& r) {
  fh_env_flatten_at(fh_market_arrays{m}, p, s, r);
}

/* One step of one env from cursor t to t+1 with action (a0, a1, a2). Requires t+1 < n_bars.
 * Advances t and k, books equity, sets r.done = (k == T) || (t+1 >= train_end). Does not reset.
 * fh_env_step_to: the same with the decoded target (the action matters only through (target, a2)),
 * reading bars t and t+1 only. */
template <class MK>
FH_HD void fh_env_step_to(const MK& m, const fh_env_params& p, fh_env_state& s, int32_t target, int32_t a2,
                          fh_step_result& r) {
  fh_step_result_clear(r);
  const double slip = p.slippage_ticks * p.tick_size;
  const double pv = p.point_value;
  const int64_t t = s.t;
  const double c = m.close(t);
  const double o = m.open(t + 1);
  const double dist = a2 > 0 ? (double)a2 * p.stop_atr_mult * m.atr(t) : 0.0;
  int32_t opened = 0; /* a new trade started at this fill */

  /* 1. session break: flatten at close[t] before the gap */
  if (m.session_start(t + 1) == 1 && p.flatten_at_session_break && s.pos != 0) fh_env_flatten_at(m, p, s, r);

  /* 2. gap mark of what is still held, then the fill at open[t+1] */
  const double gap = (double)s.pos * (o - c) * pv;
  r.pnl += gap;
  s.trade_pnl += gap;
  const int32_t traded = target - s.pos;
  if (traded != 0) {
    const int32_t q = fh_abs_i(traded);
    const double fill = traded > 0 ? o + slip : o - slip;
    const double cost = p.commission * q + slip * q * pv;
    r.cost += cost;
    r.pnl -= cost;
    r.traded += q;
    if (s.pos == 0) { /* open */
      s.avg_entry = fill;
      s.trade_pnl = -cost;
      opened = 1;
    } else if (fh_sign_i(target) == fh_sign_i(s.pos) && fh_abs_i(target) > fh_abs_i(s.pos)) { /* add */
      s.avg_entry = (s.avg_entry * fh_abs_i(s.pos) + fill * q) / fh_abs_i(target);
      s.trade_pnl -= cost;
    } else if (fh_sign_i(target) == fh_sign_i(s.pos) || target == 0) { /* reduce or close */
      s.realised += (fill - s.avg_entry) * q * fh_sign_i(s.pos) * pv;
      s.trade_pnl -= cost;
      if (target == 0) {
        fh_env_close_trade(s, r);
        s.avg_entry = 0.0;
      }
    } else { /* flip: close |pos| then open |target| at the same fill; the cost is split by quantity */
      const int32_t q_close = fh_abs_i(s.pos);
      const int32_t q_open = fh_abs_i(target);
      const double cost_close = p.commission * q_close + slip * q_close * pv;
      const double cost_open = p.commission * q_open + slip * q_open * pv;
      s.realised += (fill - s.avg_entry) * q_close * fh_sign_i(s.pos) * pv;
      s.trade_pnl -= cost_close;
      fh_env_close_trade(s, r);
      s.avg_entry = fill;
      s.trade_pnl = -cost_open;
      opened = 1;
    }
    s.pos = target;
  }

  /* 3. the bar t+1: stop check after the fill, else mark to close[t+1] */
  s.has_stop = 0;
  if (s.pos != 0 && a2 > 0 && dist > 0.0) {
    const double level = s.pos > 0 ? o - dist : o + dist;
    const int32_t hit = s.pos > 0 ? (m.low(t + 1) <= level) : (m.high(t + 1) >= level);
    if (hit) {
      const int32_t q = fh_abs_i(s.pos);
      const double exit_px = s.pos > 0 ? level - slip : level + slip;
      const double cost = p.commission * q + slip * q * pv;
      const double bar = (double)s.pos * (level - o) * pv - cost;
      s.realised += (exit_px - s.avg_entry) * q * fh_sign_i(s.pos) * pv;
      r.pnl += bar;
      r.cost += cost;
      r.traded += q;
      s.trade_pnl += bar;
      fh_env_close_trade(s, r);
      s.pos = 0;
      s.avg_entry = 0.0;
    } else {
      const double bar = (double)s.pos * (m.close(t + 1) - o) * pv;
      r.pnl += bar;
      s.trade_pnl += bar;
      s.has_stop = 1;
      s.stop = level;
      s.stop_dist = dist;
    }
  } else {
    const double bar = (double)s.pos * (m.close(t + 1) - o) * pv;
    r.pnl += bar;
    s.trade_pnl += bar;
  }
  if (!s.has_stop) {
    s.stop = 0.0;
    s.stop_dist = 0.0;
  }
  s.bars_held = s.pos == 0 ? 0 : (opened ? 1 : s.bars_held + 1);

  /* 4. reward and advance */
  r.reward = (float)(r.pnl / p.reward_scale - p.risk_penalty * fh_abs_i(s.pos) / p.max_contracts);
  s.t = t + 1;
  s.k += 1;
  s.equity += r.pnl;
  r.done = (s.k == p.episode_len) || (s.t + 1 >= m.train_end());
}

FH_HD void fh_env_step(const fh_market_view& m, const fh_env_params& p, fh_env_state& s, int32_t a0, int32_t a1,
                       int32_t a2, fh_step_result& r) {
  fh_env_step_to(fh_market_arrays{m}, p, s, fh_env_target(p, a0, a1), a2, r);
}

/* The 8 account features of state s (DESIGN §4 order). */
template <class MK>
FH_HD void fh_env_account_at(const MK& m, const fh_env_params& p, const fh_env_state& s, float* out) {
  const double unreal = (double)s.pos * (m.close(s.t) - s.avg_entry) * p.point_value;
  out[0] = (float)((double)s.pos / p.max_contracts);
  out[1] = (float)fh_clamp_d(unreal / p.reward_scale, -10.0, 10.0);
  out[2] = (float)((double)s.bars_held / p.episode_len);
  out[3] = s.has_stop ? (float)(s.stop_dist / m.atr(s.t)) : 0.0f;
  out[4] = s.has_stop ? 1.0f : 0.0f;
  out[5] = (float)((double)s.k / p.episode_len);
  out[6] = (float)fh_sign_i(s.pos);
  out[7] = (float)fh_clamp_d(s.realised / p.reward_scale, -10.0, 10.0);
}

FH_HD void fh_env_account(const fh_market_view& m, const fh_env_params& p, const fh_env_state& s, float* out) {
  fh_env_account_at(fh_market_arrays{m}, p, s, out);
}

/* Observation of length W*F + 8 from a bar cursor and stored account features (replay and live). */
FH_HD void fh_obs_from(const fh_market_view& m, int32_t window, int64_t t, const float* account, float* out) {
  const int32_t F = m.n_features;
  const float* rows = m.features + (t - window + 1) * (int64_t)F;
  const int32_t n = window * F;
  for (int32_t i = 0; i < n; ++i) out[i] = rows[i];
  for (int32_t i = 0; i < FH_ENV_ACCOUNT; ++i) out[n + i] = account[i];
}

FH_HD void fh_env_observe(const fh_market_view& m, const fh_env_params& p, const fh_env_state& s, float* out) {
  float account[FH_ENV_ACCOUNT];
  fh_env_account(m, p, s, account);
  fh_obs_from(m, p.window, s.t, account, out);
}

/* Exploration rate after `counter` collection steps of n_envs each (DESIGN §6), float64. */
FH_HD double fh_epsilon(double eps_start, double eps_end, double decay_steps, uint64_t counter, int32_t n_envs) {
  return eps_end + (eps_start - eps_end) * exp(-((double)counter * (double)n_envs) / decay_steps);
}

/* epsilon-greedy choice of branch d for env e at collection step `counter`: explore when
 * u01(word0) < eps, then the action is uniform_index(word1, n_d); else the greedy action. */
FH_HD int32_t fh_explore_action(uint64_t seed, uint32_t env, uint64_t counter, int32_t d, int32_t n_d, double eps,
                                int32_t greedy) {
  uint32_t w[4];
  fh_philox(seed, env, counter, FH_PURPOSE_EXPLORE0 + (uint32_t)d, w);
  if ((double)fh_u01(w[0]) < eps) return (int32_t)fh_uniform_index(w[1], (uint32_t)n_d);
  return greedy;
}

#endif /* FOXHUNT_KERNELS_ENV_CUH */
