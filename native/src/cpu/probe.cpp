/*
 * probe.cpp — narrow entry points for tests and tools (foxhunt.h), with the same semantics the
 * epoch uses: env_step / env_observe on the trainer's N envs, loss_grad and q_values on explicit
 * batches, get/set of the online and target parameters.
 *
 * env_step does not touch replay or the collection counters: its k-th call (0-based) steps as
 * collection step c = env_counter + k would, so an env that finishes its episode resets with
 * Philox counter c + 1. Outputs describe the step's result before that reset (position, cursor and
 * equity at the end of the step); env_observe afterwards shows the reset state.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include "trainer.h"

namespace {

fh_status bad(fh_trainer* t, fh_status s, const char* msg) {
  t->err = msg;
  return s;
}

bool all_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!isfinite(x[i])) return false;
  return true;
}

}  // namespace

extern "C" FH_API fh_status fh_trainer_get_params(fh_trainer* t, int32_t which, float* out, int64_t n) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (which != 0 && which != 1) return bad(t, FH_ERR_INVALID_ARGUMENT, "get_params: which must be 0 (online) or 1 (target)");
  if (out == NULL) return bad(t, FH_ERR_INVALID_ARGUMENT, "get_params: out is NULL");
  if (n != t->L.total) return bad(t, FH_ERR_INVALID_ARGUMENT, "get_params: n must equal fh_info.n_params");
  const std::vector<float>& src = which == 0 ? t->P : t->Pt;
  memcpy(out, src.data(), sizeof(float) * (size_t)n);
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_set_params(fh_trainer* t, int32_t which, const float* in, int64_t n) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (which != 0 && which != 1) return bad(t, FH_ERR_INVALID_ARGUMENT, "set_params: which must be 0 (online) or 1 (target)");
  if (in == NULL) return bad(t, FH_ERR_INVALID_ARGUMENT, "set_params: in is NULL");
  if (n != t->L.total) return bad(t, FH_ERR_INVALID_ARGUMENT, "set_params: n must equal fh_info.n_params");
  if (!all_finite(in, n)) return bad(t, FH_ERR_INVALID_ARGUMENT, "set_params: a parameter is NaN or Inf");
  std::vector<float>& dst = which == 0 ? t->P : t->Pt;
  memcpy(dst.data(), in, sizeof(float) * (size_t)n);
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_env_step(fh_trainer* t, const int32_t* actions, float* reward, uint8_t* done,
                                                int32_t* position, int64_t* cursor, double* equity, double* cost) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (actions == NULL) return bad(t, FH_ERR_INVALID_ARGUMENT, "env_step: actions is NULL");
  for (int32_t e = 0; e < t->N; ++e)
    for (int d = 0; d < 3; ++d) {
      const int32_t a = actions[(int64_t)e * 3 + d];
      if (a < 0 || a >= t->cfg.branch_sizes[d]) {
        char msg[128];
        snprintf(msg, sizeof msg, "env_step: actions[%d][%d] = %d is outside [0, %d)", e, d, a, t->cfg.branch_sizes[d]);
        t->err = msg;
        return FH_ERR_INVALID_ARGUMENT;
      }
    }
  const uint64_t c = t->env_counter + t->probe_steps;
  for (int32_t e = 0; e < t->N; ++e) {
    fh_env_state& s = t->envs[(size_t)e];
    const int32_t* a = actions + (int64_t)e * 3;
    fh_step_result r;
    fh_env_step(t->mv, t->ep, s, a[0], a[1], a[2], r);
    if (reward) reward[e] = r.reward;
    if (done) done[e] = (uint8_t)r.done;
    if (position) position[e] = s.pos;
    if (cursor) cursor[e] = s.t;
    if (equity) equity[e] = s.equity;
    if (cost) cost[e] = r.cost;
    if (r.done) fh_env_reset(t->mv, t->ep, s, t->cfg.seed, (uint32_t)e, c + 1);
  }
  t->probe_steps += 1;
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_env_observe(fh_trainer* t, float* out) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (out == NULL) return bad(t, FH_ERR_INVALID_ARGUMENT, "env_observe: out is NULL");
  for (int32_t e = 0; e < t->N; ++e) fh_env_observe(t->mv, t->ep, t->envs[(size_t)e], out + (int64_t)e * t->D);
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_loss_grad(fh_trainer* t, int32_t n, const float* obs, const int32_t* act,
                                                 const float* ret, const float* disc, const float* next_obs,
                                                 const float* weight, double* loss, float* grad, float* td_out) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (n < 1 || n > (1 << 20)) return bad(t, FH_ERR_INVALID_ARGUMENT, "loss_grad: n must be in [1, 1048576]");
  if (!obs || !act || !ret || !disc || !next_obs || !weight)
    return bad(t, FH_ERR_INVALID_ARGUMENT, "loss_grad: obs, act, ret, disc, next_obs and weight are required");
  const int64_t nd = (int64_t)n * t->D;
  if (!all_finite(obs, nd) || !all_finite(next_obs, nd) || !all_finite(ret, n) || !all_finite(disc, n) ||
      !all_finite(weight, n))
    return bad(t, FH_ERR_INVALID_ARGUMENT, "loss_grad: an input is NaN or Inf");
  for (int64_t i = 0; i < (int64_t)n * 3; ++i)
    if (act[i] < 0 || act[i] >= t->cfg.branch_sizes[i % 3])
      return bad(t, FH_ERR_INVALID_ARGUMENT, "loss_grad: an action is out of range");
  try {
    fh_batch b;
    b.B = n;
    b.obs.assign(obs, obs + nd);
    b.next_obs.assign(next_obs, next_obs + nd);
    b.act.assign(act, act + (int64_t)n * 3);
    b.ret.assign(ret, ret + n);
    b.disc.assign(disc, disc + n);
    b.weight.assign(weight, weight + n);
    std::vector<float> td((size_t)n);
    const double l = fh_cpu_loss_grad(t, b, grad, td.data());
    if (loss) *loss = l;
    if (td_out) memcpy(td_out, td.data(), sizeof(float) * (size_t)n);
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return bad(t, FH_ERR_OUT_OF_MEMORY, "loss_grad: out of host memory");
  }
}

extern "C" FH_API fh_status fh_trainer_q_values(fh_trainer* t, int32_t n, const float* obs, float* q) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (n < 1 || n > (1 << 20)) return bad(t, FH_ERR_INVALID_ARGUMENT, "q_values: n must be in [1, 1048576]");
  if (!obs || !q) return bad(t, FH_ERR_INVALID_ARGUMENT, "q_values: obs and q are required");
  if (!all_finite(obs, (int64_t)n * t->D)) return bad(t, FH_ERR_INVALID_ARGUMENT, "q_values: obs has NaN or Inf");
  try {
    fh_net_cache c;
    t->net->forward(*t->pool, t->P.data(), obs, n, c);
    const int32_t na = t->net->n_actions();
    for (int32_t b = 0; b < n; ++b) t->net->q_values(c, b, q + (int64_t)b * na);
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return bad(t, FH_ERR_OUT_OF_MEMORY, "q_values: out of host memory");
  }
}

extern "C" FH_API fh_status fh_trainer_replay_sample(fh_trainer* t, int32_t n, uint64_t draw, float beta, int64_t* slot,
                                                     int64_t* next_slot, float* obs, int32_t* act, float* ret,
                                                     float* disc, float* next_obs, float* weight) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (n < 1 || n > (1 << 20)) return bad(t, FH_ERR_INVALID_ARGUMENT, "replay_sample: n must be in [1, 1048576]");
  if (slot == NULL) return bad(t, FH_ERR_INVALID_ARGUMENT, "replay_sample: slot is NULL");
  if (!(beta >= 0.0f && beta <= 1.0f)) return bad(t, FH_ERR_INVALID_ARGUMENT, "replay_sample: beta must be in [0, 1]");
  if (!(t->per.total() > 0.0)) return bad(t, FH_ERR_INVALID_ARGUMENT, "replay_sample: no complete transition in replay yet");
  try {
    fh_batch b;
    fh_cpu_sample_batch(t, n, draw, beta, b);
    const size_t D = (size_t)t->D;
    memcpy(slot, b.slot.data(), sizeof(int64_t) * (size_t)n);
    if (next_slot) memcpy(next_slot, b.next_slot.data(), sizeof(int64_t) * (size_t)n);
    if (obs) memcpy(obs, b.obs.data(), sizeof(float) * (size_t)n * D);
    if (act) memcpy(act, b.act.data(), sizeof(int32_t) * (size_t)n * 3);
    if (ret) memcpy(ret, b.ret.data(), sizeof(float) * (size_t)n);
    if (disc) memcpy(disc, b.disc.data(), sizeof(float) * (size_t)n);
    if (next_obs) memcpy(next_obs, b.next_obs.data(), sizeof(float) * (size_t)n * D);
    if (weight) memcpy(weight, b.weight.data(), sizeof(float) * (size_t)n);
    return FH_OK;
  } catch (const std::bad_alloc&) {
    return bad(t, FH_ERR_OUT_OF_MEMORY, "replay_sample: out of host memory");
  }
}
