/*
 * learn.cpp — the learning step of the CPU trainer (DESIGN §5, §6).
 *
 * Loss per sample i (B samples, nb = 3 branches, A atoms):
 *   a*_d = argmax_a Q_online,d(s', a)                               (double DQN, per branch)
 *   A == 1: y = ret + disc * mean_d Q_target,d(s', a*_d);  loss_i = mean_d Huber(Q_d(s, a_d) - y)
 *           priority signal = sum_d |Q_d(s, a_d) - y|
 *   A > 1:  m = C51(mean_d softmax(logit_target,d(s', a*_d)), ret, disc)
 *           loss_i = mean_d CE(m, softmax(logit_d(s, a_d)));  signal = sum_d CE
 *   batch loss = mean_i w_i * loss_i, so d loss / d logit_d(s, a_d) = w_i / (B * nb) * loss'.
 * Train step: PER sample -> gather obs by index -> loss + grad -> global-norm clip -> Adam ->
 * priorities (signal + eps)^alpha (duplicates take the max) -> target copy / Polyak.
 */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "adam.cuh"
#include "c51.cuh"
#include "loss.cuh"
#include "per.cuh"
#include "trainer.h"

double fh_cpu_loss_grad(fh_trainer* t, const fh_batch& bt, float* grad, float* td) {
  const int32_t B = bt.B;
  const fh_layout& L = t->L;
  const int32_t A = L.atoms;
  const int32_t nb = L.n_branches;
  const fh_net& net = *t->net;
  const int32_t NA = net.NA();
  const float v_min = t->cfg.v_min, v_max = t->cfg.v_max, delta = t->cfg.huber_delta;
  net.forward(*t->pool, t->P.data(), bt.obs.data(), B, t->c_on);
  net.forward(*t->pool, t->P.data(), bt.next_obs.data(), B, t->c_next_on);
  net.forward(*t->pool, t->Pt.data(), bt.next_obs.data(), B, t->c_next_tg);
  t->dlogits.assign((size_t)B * NA, 0.0f);
  std::vector<double> per_loss((size_t)B);
  t->pool->run(B, [&](int64_t b0, int64_t b1) {
    std::vector<float> qn(net.n_actions()), pbar(A), prob(A), m(A);
    for (int64_t b = b0; b < b1; ++b) {
      net.q_values(t->c_next_on, (int32_t)b, qn.data());
      int32_t astar[3];
      int32_t off = 0;
      for (int d = 0; d < nb; ++d) {
        astar[d] = fh_argmax(qn.data() + off, L.branch_sizes[d]);
        off += L.branch_sizes[d];
      }
      const float* lg_tg = t->c_next_tg.logits.data() + b * NA;
      const float* lg_on = t->c_on.logits.data() + b * NA;
      float* dl = t->dlogits.data() + b * NA;
      const float scale = bt.weight[(size_t)b] / (float)((int64_t)B * nb);
      const float ret = bt.ret[(size_t)b], disc = bt.disc[(size_t)b];
      float loss = 0.0f, signal = 0.0f;
      if (A == 1) {
        float sum = 0.0f;
        for (int d = 0; d < nb; ++d) sum += lg_tg[net.logit_off(d) + astar[d]];
        const float y = ret + disc * (sum / (float)nb);
        for (int d = 0; d < nb; ++d) {
          const int32_t k = net.logit_off(d) + bt.act[(size_t)b * 3 + d];
          const float diff = lg_on[k] - y;
          loss += fh_huber(diff, delta);
          signal += diff < 0.0f ? -diff : diff;
          dl[k] = scale * fh_huber_grad(diff, delta);
        }
      } else {
        for (int32_t z = 0; z < A; ++z) pbar[(size_t)z] = 0.0f;
        for (int d = 0; d < nb; ++d) {
          fh_softmax(lg_tg + net.logit_off(d) + (int64_t)astar[d] * A, A, prob.data());
          for (int32_t z = 0; z < A; ++z) pbar[(size_t)z] += prob[(size_t)z];
        }
        for (int32_t z = 0; z < A; ++z) pbar[(size_t)z] /= (float)nb;
        fh_c51_project_one(A, v_min, v_max, pbar.data(), ret, disc, m.data());
        for (int d = 0; d < nb; ++d) {
          const int64_t k = net.logit_off(d) + (int64_t)bt.act[(size_t)b * 3 + d] * A;
          const float ce = fh_ce_grad(lg_on + k, m.data(), A, scale, dl + k);
          loss += ce;
          signal += ce;
        }
      }
      per_loss[(size_t)b] = (double)(loss / (float)nb);
      if (td) td[b] = signal;
    }
  });
  double total = 0.0;
  for (int32_t b = 0; b < B; ++b) total += (double)bt.weight[(size_t)b] * per_loss[(size_t)b];
  total /= (double)B;
  if (grad) net.backward(*t->pool, t->P.data(), bt.obs.data(), t->c_on, t->dlogits.data(), grad);
  return total;
}

/* Q statistics of the online net on the batch states: avg max_a Q (over samples and branches), and
 * min, max, mean, variance (population) over every Q value. */
static void q_stats(fh_trainer* t, int32_t B, double out[5]) {
  const fh_net& net = *t->net;
  std::vector<float> q(net.n_actions());
  double sum_max = 0.0, mn = INFINITY, mx = -INFINITY, s = 0.0, s2 = 0.0;
  int64_t cnt = 0;
  for (int32_t b = 0; b < B; ++b) {
    net.q_values(t->c_on, b, q.data());
    int32_t off = 0;
    for (int d = 0; d < t->L.n_branches; ++d) {
      const int32_t n = t->L.branch_sizes[d];
      sum_max += q[(size_t)(off + fh_argmax(q.data() + off, n))];
      off += n;
    }
    for (float v : q) {
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
      s += v;
      s2 += (double)v * v;
      ++cnt;
    }
  }
  const double mean = s / (double)cnt;
  out[0] = sum_max / ((double)B * t->L.n_branches);
  out[1] = mn;
  out[2] = mx;
  out[3] = mean;
  out[4] = s2 / (double)cnt - mean * mean;
  if (out[4] < 0.0) out[4] = 0.0;
}

void fh_cpu_sample_batch(fh_trainer* t, int32_t B, uint64_t draw, float beta, fh_batch& bt) {
  const fh_config& c = t->cfg;
  const int32_t D = t->D;
  bt.B = B;
  bt.obs.resize((size_t)B * D);
  bt.next_obs.resize((size_t)B * D);
  bt.act.resize((size_t)B * 3);
  bt.ret.resize((size_t)B);
  bt.disc.resize((size_t)B);
  bt.weight.resize((size_t)B);
  bt.slot.resize((size_t)B);
  bt.next_slot.resize((size_t)B);
  t->per.sample(B, c.seed, draw, beta, bt.slot.data(), bt.weight.data());
  const fh_replay_view v = t->replay_view();
  t->pool->run(B, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t slot = bt.slot[(size_t)j];
      int64_t next = 0;
      fh_replay_nstep(v, slot, c.n_step, c.gamma, &bt.ret[(size_t)j], &bt.disc[(size_t)j], &next);
      bt.next_slot[(size_t)j] = next;
      for (int d = 0; d < 3; ++d) bt.act[(size_t)j * 3 + d] = v.act[slot * 3 + d];
      fh_obs_from(t->mv, c.window, v.bar[slot], v.account + slot * FH_ACCOUNT_FEATURES, bt.obs.data() + j * D);
      fh_obs_from(t->mv, c.window, v.bar[next], v.account + next * FH_ACCOUNT_FEATURES, bt.next_obs.data() + j * D);
    }
  }, 4 * (int64_t)D);
}

fh_status fh_cpu_train_step(fh_trainer* t, double* loss_out, double* gnorm_out, bool want_q, double q_out[5]) {
  const fh_config& c = t->cfg;
  const int32_t B = t->batch;
  const uint64_t g = t->train_step;
  fh_batch& bt = t->bt;
  t->td.resize((size_t)B);

  /* sample and gather */
  const float beta = fh_per_beta(c.per_beta_start, c.per_beta_end, c.per_beta_steps, (int64_t)g);
  fh_cpu_sample_batch(t, B, g, beta, bt);

  /* loss, gradient, clip */
  const double loss = fh_cpu_loss_grad(t, bt, t->G.data(), t->td.data());
  double ss = 0.0;
  for (float x : t->G) ss += (double)x * x;
  const double gnorm = sqrt(ss);
  *loss_out = loss;
  *gnorm_out = gnorm;
  if (!isfinite(loss) || !isfinite(gnorm)) return FH_OK; /* the caller reports the divergence */
  if (want_q) q_stats(t, B, q_out);
  if (c.grad_clip > 0.0f && gnorm > (double)c.grad_clip) {
    const float s = (float)((double)c.grad_clip / gnorm);
    for (float& x : t->G) x *= s;
  }

  /* Adam */
  const int64_t step = (int64_t)g + 1;
  const float bc1 = fh_adam_bias(c.adam_beta1, step);
  const float bc2 = fh_adam_bias(c.adam_beta2, step);
  t->pool->run(t->L.total, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      fh_adam_update(t->P[(size_t)i], t->G[(size_t)i], t->M[(size_t)i], t->V[(size_t)i], c.lr, c.adam_beta1,
                     c.adam_beta2, c.adam_eps, bc1, bc2);
  });

  /* priorities */
  std::vector<float> stored((size_t)B);
  for (int32_t j = 0; j < B; ++j) stored[(size_t)j] = fh_per_priority(t->td[(size_t)j], c.per_eps, c.per_alpha);
  t->per.set_batch(B, bt.slot.data(), stored.data());

  /* target */
  if (c.tau > 0.0f) {
    const float tau = c.tau;
    for (size_t i = 0; i < t->P.size(); ++i) t->Pt[i] = tau * t->P[i] + (1.0f - tau) * t->Pt[i];
  } else if ((g + 1) % (uint64_t)c.target_update_every == 0) {
    t->Pt = t->P;
  }
  t->train_step = g + 1;
  return FH_OK;
}

int32_t fh_cpu_auto_batch(const fh_config* cfg, const fh_layout& L) {
  const int32_t cpu_cap = 256; /* the CPU backend is for tests and laptops: keep steps short */
  int64_t per_sample = 2LL * L.D;
  int64_t acts = (int64_t)L.h1 + L.h2 + (int64_t)L.n_heads * L.hh;
  for (int k = 0; k < L.n_heads; ++k) acts += 2 * L.out_pad[k];
  per_sample = (per_sample + 5 * acts) * 4;
  const long page = sysconf(_SC_PAGESIZE);
  const int64_t free_bytes = (int64_t)sysconf(_SC_AVPHYS_PAGES) * page;
  int64_t b = free_bytes / 4 / (per_sample > 0 ? per_sample : 1);
  if (b > cfg->batch_cap) b = cfg->batch_cap;
  if (b > cpu_cap) b = cpu_cap;
  int32_t p = 1;
  while ((int64_t)p * 2 <= b) p *= 2;
  return p;
}
