/*
 * env_host.h — host-side glue between fh_config/fh_market and the shared env math (kernels/env.cuh),
 * used by both backends so the env constants, the reward scale and the checkpointed env state are
 * defined once.
 *
 *   fh_resolve_reward_scale(cfg, m)        cfg.reward_scale, or mean(atr[train]) * point_value when 0
 *   fh_env_params_from_config(cfg, rs)     the fh_env_params of one env step (rs already resolved)
 *   fh_env_state_io(io, s)                 one env's state through a checkpoint writer or reader
 */
#ifndef FOXHUNT_NATIVE_ENV_HOST_H
#define FOXHUNT_NATIVE_ENV_HOST_H

#include <stdint.h>

#include "env.cuh"
#include "foxhunt.h"

inline double fh_resolve_reward_scale(const fh_config& c, const fh_market& m) {
  if (c.reward_scale > 0.0) return c.reward_scale;
  double sum = 0.0;
  for (int64_t i = m.train_begin; i < m.train_end; ++i) sum += m.atr[i];
  const int64_t n = m.train_end - m.train_begin;
  const double rs = (n > 0 ? sum / (double)n : 1.0) * c.point_value;
  return rs > 0.0 ? rs : 1.0; /* ATR is validated > 0, so this fallback only guards a bug */
}

inline fh_env_params fh_env_params_from_config(const fh_config& c, double reward_scale) {
  fh_env_params p;
  p.n_dir = c.branch_sizes[0];
  p.n_size = c.branch_sizes[1];
  p.n_stop = c.branch_sizes[2];
  p.max_contracts = c.max_contracts;
  p.flatten_at_session_break = c.flatten_at_session_break;
  p.episode_len = c.episode_len;
  p.window = c.window;
  p.point_value = c.point_value;
  p.tick_size = c.tick_size;
  p.commission = c.commission;
  p.slippage_ticks = c.slippage_ticks;
  p.stop_atr_mult = c.stop_atr_mult;
  p.risk_penalty = c.risk_penalty;
  p.reward_scale = reward_scale;
  return p;
}

/* Field by field, in the checkpoint payload order both backends write (no struct padding bytes). */
template <typename IO>
void fh_env_state_io(IO& io, fh_env_state& s) {
  io.val(s.t);
  io.val(s.avg_entry);
  io.val(s.stop);
  io.val(s.stop_dist);
  io.val(s.equity);
  io.val(s.realised);
  io.val(s.trade_pnl);
  io.val(s.pos);
  io.val(s.has_stop);
  io.val(s.k);
  io.val(s.bars_held);
}

#endif /* FOXHUNT_NATIVE_ENV_HOST_H */
