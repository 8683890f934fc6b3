/*
 * state.cpp — checkpoints of the CPU trainer: framing in common/checkpoint.h, payload here.
 *
 * Payload (little endian, in this order):
 *   u64 epoch, env_counter, train_step, probe_steps
 *   f32 online[n_params], target[n_params], adam_m[n_params], adam_v[n_params]
 *   per env (N): i64 t, f64 avg_entry, stop, stop_dist, equity, realised, trade_pnl,
 *                i32 pos, has_stop, k, bars_held
 *   replay (capacity C): i32 bar[C], u8 act[3C], u8 done[C], f32 reward[C], f32 account[8C]
 *   PER: f32 leaf[C] (stored priorities), f32 max_priority
 * Everything a bit-exact resume needs; the sum tree is rebuilt from the leaves on load.
 */
#include <math.h>
#include <stdio.h>

#include <new>

#include "checkpoint.h"
#include "env_host.h"
#include "trainer.h"

namespace {

/* One function walks the payload for counting, writing and reading; `leaves` may be NULL when
 * only counting (a writer with no buffer reads nothing). */
template <typename IO, typename Tr>
void payload(IO& io, Tr* t, float* leaves, uint64_t n_leaves, float& maxp) {
  io.val(t->epoch);
  io.val(t->env_counter);
  io.val(t->train_step);
  io.val(t->probe_steps);
  io.arr(t->P.data(), t->P.size());
  io.arr(t->Pt.data(), t->Pt.size());
  io.arr(t->M.data(), t->M.size());
  io.arr(t->V.data(), t->V.size());
  for (auto& s : t->envs) fh_env_state_io(io, s);
  io.arr(t->r_bar.data(), t->r_bar.size());
  io.arr(t->r_act.data(), t->r_act.size());
  io.arr(t->r_done.data(), t->r_done.size());
  io.arr(t->r_reward.data(), t->r_reward.size());
  io.arr(t->r_account.data(), t->r_account.size());
  io.arr(leaves, n_leaves);
  io.val(maxp);
}

/* The state a checkpoint restores, parsed aside so a bad checkpoint never touches the trainer. */
struct Restored {
  uint64_t epoch = 0, env_counter = 0, train_step = 0, probe_steps = 0;
  std::vector<float> P, Pt, M, V;
  std::vector<fh_env_state> envs;
  std::vector<int32_t> r_bar;
  std::vector<uint8_t> r_act, r_done;
  std::vector<float> r_reward, r_account;
};

uint64_t payload_size(fh_trainer* t) {
  fh_ckpt_writer w; /* counting mode */
  float maxp = 0.0f;
  payload(w, t, (float*)NULL, (uint64_t)t->capacity, maxp);
  return w.pos;
}

}  // namespace

extern "C" FH_API fh_status fh_trainer_checkpoint_size(fh_trainer* t, uint64_t* out) {
  if (t == NULL || out == NULL) return FH_ERR_INVALID_ARGUMENT;
  try {
    *out = FH_CKPT_HEADER + payload_size(t);
    return FH_OK;
  } catch (const std::bad_alloc&) {
    t->err = "checkpoint_size: out of host memory";
    return FH_ERR_OUT_OF_MEMORY;
  }
}

extern "C" FH_API fh_status fh_trainer_save_checkpoint(fh_trainer* t, uint8_t* buf, uint64_t cap, uint64_t* written) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  if (buf == NULL || written == NULL) {
    t->err = "save_checkpoint: buf and written must not be NULL";
    return FH_ERR_INVALID_ARGUMENT;
  }
  try {
    const uint64_t need = FH_CKPT_HEADER + payload_size(t);
    *written = 0;
    if (cap < need) {
      char msg[160];
      snprintf(msg, sizeof msg, "save_checkpoint: buffer holds %llu bytes, the checkpoint needs %llu",
               (unsigned long long)cap, (unsigned long long)need);
      t->err = msg;
      return FH_ERR_BUFFER_TOO_SMALL;
    }
    std::vector<float> leaves((size_t)t->capacity);
    for (int64_t i = 0; i < t->capacity; ++i) leaves[(size_t)i] = t->per.leaf(i);
    float maxp = t->per.max_priority;
    fh_ckpt_writer w;
    w.buf = buf + FH_CKPT_HEADER;
    payload(w, t, leaves.data(), leaves.size(), maxp);
    fh_ckpt_write_header(buf, t->config_hash, w.pos);
    *written = FH_CKPT_HEADER + w.pos;
    return FH_OK;
  } catch (const std::bad_alloc&) {
    t->err = "save_checkpoint: out of host memory";
    return FH_ERR_OUT_OF_MEMORY;
  }
}

static fh_status load_impl(fh_trainer* t, const uint8_t* buf, uint64_t len) {
  const uint8_t* pl = NULL;
  uint64_t plen = 0;
  fh_status s = fh_ckpt_check(buf, len, t->config_hash, &pl, &plen, &t->err);
  if (s != FH_OK) return s;
  const uint64_t expect = payload_size(t);
  if (plen != expect) {
    char msg[160];
    snprintf(msg, sizeof msg, "checkpoint: payload is %llu bytes, this trainer's state is %llu",
             (unsigned long long)plen, (unsigned long long)expect);
    t->err = msg;
    return FH_ERR_CHECKPOINT;
  }
  /* parse into a shadow trainer-shaped state */
  Restored r;
  r.P.resize(t->P.size());
  r.Pt.resize(t->Pt.size());
  r.M.resize(t->M.size());
  r.V.resize(t->V.size());
  r.envs.resize(t->envs.size());
  r.r_bar.resize(t->r_bar.size());
  r.r_act.resize(t->r_act.size());
  r.r_done.resize(t->r_done.size());
  r.r_reward.resize(t->r_reward.size());
  r.r_account.resize(t->r_account.size());
  std::vector<float> leaves((size_t)t->capacity);
  float maxp = 0.0f;
  fh_ckpt_reader rd;
  rd.buf = pl;
  rd.len = plen;
  payload(rd, &r, leaves.data(), leaves.size(), maxp);
  if (!rd.ok || rd.pos != plen) {
    t->err = "checkpoint: payload shorter or longer than the trainer state";
    return FH_ERR_CHECKPOINT;
  }
  /* semantic checks */
  for (size_t e = 0; e < r.envs.size(); ++e) {
    const fh_env_state& st = r.envs[e];
    if (st.t < t->train_begin || st.t + 1 >= t->train_end || st.k < 0 || st.k >= t->cfg.episode_len) {
      t->err = "checkpoint: env " + std::to_string(e) + " state is out of range for this market";
      return FH_ERR_CHECKPOINT;
    }
  }
  for (size_t i = 0; i < leaves.size(); ++i)
    if (!(leaves[i] >= 0.0f) || !isfinite(leaves[i])) {
      t->err = "checkpoint: priority " + std::to_string(i) + " is negative or not finite";
      return FH_ERR_CHECKPOINT;
    }
  for (size_t i = 0; i < r.r_bar.size(); ++i)
    if (r.r_bar[i] < 0 || r.r_bar[i] >= t->n_bars) {
      t->err = "checkpoint: replay bar index out of range at slot " + std::to_string(i);
      return FH_ERR_CHECKPOINT;
    }
  for (size_t i = 0; i < r.r_act.size(); ++i)
    if (r.r_act[i] >= t->cfg.branch_sizes[i % 3]) {
      t->err = "checkpoint: replay action out of range at slot " + std::to_string(i / 3);
      return FH_ERR_CHECKPOINT;
    }
  /* commit */
  t->epoch = r.epoch;
  t->env_counter = r.env_counter;
  t->train_step = r.train_step;
  t->probe_steps = r.probe_steps;
  t->P.swap(r.P);
  t->Pt.swap(r.Pt);
  t->M.swap(r.M);
  t->V.swap(r.V);
  t->envs.swap(r.envs);
  t->r_bar.swap(r.r_bar);
  t->r_act.swap(r.r_act);
  t->r_done.swap(r.r_done);
  t->r_reward.swap(r.r_reward);
  t->r_account.swap(r.r_account);
  t->per.init(t->capacity);
  for (int64_t i = 0; i < t->capacity; ++i) {
    t->per.tree[(size_t)(t->per.L + i)] = (double)leaves[(size_t)i];
    if (leaves[(size_t)i] > 0.0f) ++t->per.size;
  }
  for (int64_t k = t->per.L - 1; k >= 1; --k) t->per.tree[(size_t)k] = t->per.tree[(size_t)(2 * k)] + t->per.tree[(size_t)(2 * k + 1)];
  t->per.max_priority = maxp;
  return FH_OK;
}

extern "C" FH_API fh_status fh_trainer_load_checkpoint(fh_trainer* t, const uint8_t* buf, uint64_t len) {
  if (t == NULL) return FH_ERR_INVALID_ARGUMENT;
  try {
    return load_impl(t, buf, len);
  } catch (const std::bad_alloc&) {
    t->err = "load_checkpoint: out of host memory";
    return FH_ERR_OUT_OF_MEMORY;
  }
}
