/*
 * collect.cpp — experience collection (SPEC 5 phase 1): T steps of all N envs, epsilon-greedy per
 * branch from Philox (DESIGN §6), each step one replay row (slot = row*N + env) holding the state's
 * bar and account features, the actions, the reward and done. After writing row r the leaves of
 * row r become 0 (incomplete) and those of row r-n get the max priority (now complete). Envs reset
 * after a done with Philox step c + 1.
 */
#include <vector>

#include "loss.cuh"
#include "trainer.h"

void fh_cpu_collect(fh_trainer* t) {
  const int32_t N = t->N;
  const int32_t T = t->cfg.episode_len;
  const int32_t n = t->cfg.n_step;
  const int32_t D = t->D;
  std::vector<int32_t> act((size_t)N * 3), greedy_act;
  std::vector<uint8_t> need((size_t)N);
  std::vector<int32_t> who;
  t->obs_buf.resize((size_t)N * D);
  std::vector<int64_t> leaf_idx;
  std::vector<float> leaf_val;
  for (int32_t step = 0; step < T; ++step) {
    const uint64_t c = t->env_counter;
    const double eps = t->epsilon_now();
    /* exploration draws: greedy placeholder -1, explore actions filled now */
    t->pool->run(N, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        need[(size_t)e] = 0;
        for (int d = 0; d < 3; ++d) {
          const int32_t a = fh_explore_action(t->cfg.seed, (uint32_t)e, c, d, t->cfg.branch_sizes[d], eps, -1);
          act[(size_t)e * 3 + d] = a;
          if (a < 0) need[(size_t)e] = 1;
        }
      }
    });
    who.clear();
    for (int32_t e = 0; e < N; ++e)
      if (need[(size_t)e]) who.push_back(e);
    if (!who.empty()) {
      const int32_t m = (int32_t)who.size();
      t->pool->run(m, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          fh_env_observe(t->mv, t->ep, t->envs[(size_t)who[(size_t)i]], t->obs_buf.data() + i * D);
      });
      greedy_act.resize((size_t)m * 3);
      fh_cpu_greedy_actions(t, t->obs_buf.data(), m, greedy_act.data());
      for (int32_t i = 0; i < m; ++i)
        for (int d = 0; d < 3; ++d)
          if (act[(size_t)who[(size_t)i] * 3 + d] < 0) act[(size_t)who[(size_t)i] * 3 + d] = greedy_act[(size_t)i * 3 + d];
    }
    /* store s, step, store reward/done, reset after done */
    const int64_t row = (int64_t)(c % (uint64_t)t->rows);
    t->pool->run(N, [&](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1; ++e) {
        fh_env_state& s = t->envs[(size_t)e];
        const int64_t slot = row * N + e;
        t->r_bar[(size_t)slot] = (int32_t)s.t;
        fh_env_account(t->mv, t->ep, s, t->r_account.data() + slot * FH_ACCOUNT_FEATURES);
        const int32_t* a = act.data() + e * 3;
        for (int d = 0; d < 3; ++d) t->r_act[(size_t)slot * 3 + d] = (uint8_t)a[d];
        fh_step_result r;
        fh_env_step(t->mv, t->ep, s, a[0], a[1], a[2], r);
        t->r_reward[(size_t)slot] = r.reward;
        t->r_done[(size_t)slot] = (uint8_t)r.done;
        if (r.done) fh_env_reset(t->mv, t->ep, s, t->cfg.seed, (uint32_t)e, c + 1);
      }
    });
    /* priorities: this row is incomplete (0); the row n steps back just became complete (max) */
    leaf_idx.clear();
    leaf_val.clear();
    for (int32_t e = 0; e < N; ++e) {
      leaf_idx.push_back(row * N + e);
      leaf_val.push_back(0.0f);
    }
    if (c >= (uint64_t)n) {
      const int64_t back = (int64_t)((c - (uint64_t)n) % (uint64_t)t->rows);
      for (int32_t e = 0; e < N; ++e) {
        leaf_idx.push_back(back * N + e);
        leaf_val.push_back(t->per.max_priority);
      }
    }
    for (size_t j = 0; j < leaf_idx.size(); ++j) t->per.set(leaf_idx[j], leaf_val[j]);
    t->env_counter = c + 1;
  }
}
