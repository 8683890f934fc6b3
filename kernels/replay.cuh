/*
 * replay.cuh — index-compressed replay rows and n-step assembly at sample time (DESIGN §6).
 *
 * A ring of `rows` rows, one per collection step, n_envs transitions per row: slot = row*N + env.
 * A transition stores the bar t of s, the actions, done, the reward and the 8 account features of s;
 * observations are rebuilt from the feature matrix (fh_obs_from in env.cuh).
 *
 *   fh_replay_nstep(view, slot, n, gamma, &ret, &disc, &next_slot)
 *       ret = sum_{k<n} gamma^k r_{slot+kN}, stopping after a done (then disc = 0), else disc = gamma^n;
 *       next_slot = slot + n*N (ring): the stored state n rows later is s'. Float32, sequential.
 */
#ifndef FOXHUNT_KERNELS_REPLAY_CUH
#define FOXHUNT_KERNELS_REPLAY_CUH

#include "hd.cuh"

struct fh_replay_view {
  int32_t* bar;       /* (rows*N) bar t of s */
  uint8_t* act;       /* (rows*N, 3) */
  uint8_t* done;      /* (rows*N) */
  float* reward;      /* (rows*N) */
  float* account;     /* (rows*N, 8) */
  int64_t rows;
  int32_t n_envs;
};

FH_HD void fh_replay_nstep(const fh_replay_view& v, int64_t slot, int32_t n, float gamma, float* ret, float* disc,
                           int64_t* next_slot) {
  const int64_t row = slot / v.n_envs;
  const int64_t env = slot % v.n_envs;
  float acc = 0.0f, g = 1.0f;
  for (int32_t k = 0; k < n; ++k) {
    const int64_t s = ((row + k) % v.rows) * v.n_envs + env;
    acc += g * v.reward[s];
    g *= gamma;
    if (v.done[s]) {
      g = 0.0f;
      break;
    }
  }
  *ret = acc;
  *disc = g;
  *next_slot = ((row + n) % v.rows) * v.n_envs + env;
}

#endif /* FOXHUNT_KERNELS_REPLAY_CUH */
