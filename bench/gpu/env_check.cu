// env_check.cu — GPU checks and timings of the CUDA env/replay/eval half (built and run by
// bench/gpu/env.sh on the GPU host). The host reference is the same env.cuh / per.cuh code compiled
// for the host, so "identical" means bit for bit. Prints PASS/FAIL lines, then TABLE lines.
#include "collect.h"
#include "env_host.h"
#include "replay.h"
#include "eval.h"
#include "per.cuh"
#include "replay.cuh"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <vector>

fh_status fh_cuda_env_step_host(const fh_cuda_envs&, const fh_cuda_market&, const int32_t*, float*, uint8_t*,
                                int32_t*, int64_t*, double*, double*, int32_t, cudaStream_t);

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(2); } } while (0)
#define FK(x) do { fh_status s_ = (x); if (s_ != FH_OK) { printf("fh_status %d at %s:%d: %s\n", (int)s_, __FILE__, __LINE__, fh_cuda_last_error_text()); exit(2); } } while (0)

static uint64_t rng_state = 88172645463325252ull;
static uint64_t xr() { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }
static double ur() { return (double)(xr() >> 11) * (1.0 / 9007199254740992.0); }

struct HostMarket {
  std::vector<float> f; std::vector<double> o, h, l, c, atr; std::vector<uint8_t> ss; fh_market m;
};
static void make_market(HostMarket& hm, int64_t n, int32_t F, int32_t bars_per_day) {
  hm.f.resize((size_t)n * F); hm.o.resize(n); hm.h.resize(n); hm.l.resize(n); hm.c.resize(n); hm.atr.resize(n); hm.ss.resize(n);
  double px = 4500.0;
  for (int64_t i = 0; i < n; ++i) {
    const bool start = (i % bars_per_day) == 0;
    double o = px + (start ? 0.25 * (double)((int)(xr() % 41) - 20) : 0.0);
    double c = o + 0.25 * (double)((int)(xr() % 17) - 8);
    double h = std::max(o, c) + 0.25 * (double)(xr() % 6);
    double l = std::min(o, c) - 0.25 * (double)(xr() % 6);
    hm.o[i] = o; hm.c[i] = c; hm.h[i] = h; hm.l[i] = l; hm.ss[i] = start ? 1 : 0;
    hm.atr[i] = 0.25 * (1 + (double)(xr() % 12));
    px = c;
    for (int k = 0; k < F; ++k) hm.f[(size_t)i * F + k] = (float)(ur() * 2.0 - 1.0);
  }
  fh_market& m = hm.m;
  memset(&m, 0, sizeof m);
  m.n_bars = n; m.n_features = F; m.features = hm.f.data(); m.open = hm.o.data(); m.high = hm.h.data();
  m.low = hm.l.data(); m.close = hm.c.data(); m.atr = hm.atr.data(); m.session_start = hm.ss.data();
  const int64_t val = n / 5;
  m.train_begin = 0; m.train_end = n - val - bars_per_day; m.val_begin = n - val; m.val_end = n;
}
static fh_market_view host_view(const fh_market& m) {
  fh_market_view v; v.features = m.features; v.open = m.open; v.high = m.high; v.low = m.low; v.close = m.close;
  v.atr = m.atr; v.session_start = m.session_start; v.n_bars = m.n_bars; v.n_features = m.n_features;
  v.train_begin = m.train_begin; v.train_end = m.train_end; return v;
}
static fh_config ref_config() {
  fh_config c; memset(&c, 0, sizeof c);
  c.seed = 12345; c.n_envs = 4096; c.episode_len = 100; c.window = 64; c.n_branches = 3;
  c.branch_sizes[0] = 3; c.branch_sizes[1] = 4; c.branch_sizes[2] = 3; c.point_value = 50; c.tick_size = 0.25;
  c.commission = 2.25; c.slippage_ticks = 1; c.max_contracts = 4; c.flatten_at_session_break = 1; c.stop_atr_mult = 1;
  c.risk_penalty = 0.01; c.initial_capital = 100000; c.gamma = 0.99f; c.n_step = 3; c.replay_capacity = 1 << 21;
  c.per_alpha = 0.6f; c.per_beta_start = 0.4f; c.per_beta_end = 1.0f; c.per_beta_steps = 100000; c.per_eps = 1e-6f;
  c.eps_start = 1.0f; c.eps_end = 0.05f; c.eps_decay_steps = 2000000; c.eval_segments = 64;
  return c;
}
template <typename T> static bool same_bits(const T& a, const T& b) { return memcmp(&a, &b, sizeof(T)) == 0; }

static int failures = 0;
static void check(bool ok, const char* what) { printf("  [%s] %s\n", ok ? "PASS" : "FAIL", what); if (!ok) ++failures; }

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main() {
  const bool small = getenv("FH_ENV_CHECK_SMALL") != nullptr; /* compute-sanitizer: a small config */
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  HostMarket hm; make_market(hm, (small ? 40 : 504) * 1380, 16, 1380);
  fh_config cfg = ref_config();
  if (small) { cfg.n_envs = 256; cfg.replay_capacity = 1 << 16; }
  const double reward_scale = 50.0 * 1.5;
  fh_env_params p = fh_env_params_from_config(cfg, reward_scale);
  fh_market_view hv = host_view(hm.m);
  fh_cuda_market dm; FK(fh_cuda_market_upload(&hm.m, &dm));
  const int32_t N = cfg.n_envs, D = cfg.window * 16 + 8;

  /* ---------------- A. env trajectories: GPU vs host, bit for bit ---------------- */
  const int a_steps = small ? 60 : 300;
  printf("A. env trajectories (N=%d, %d steps, random actions), replay rows, epsilon-greedy\n", N, a_steps);
  {
    fh_cuda_envs ev; FK(fh_cuda_envs_alloc(cfg, p, 16, &ev));
    fh_cuda_replay rp; FK(fh_cuda_replay_alloc(cfg, &rp));
    FK(fh_launch_env_reset_all(ev, dm, s));
    std::vector<fh_env_state> hs(N);
    for (int e = 0; e < N; ++e) fh_env_reset(hv, p, hs[e], cfg.seed, (uint32_t)e, 0);
    std::vector<int32_t> act(3 * N); std::vector<float> rw(N), hrw(N); std::vector<uint8_t> dn(N);
    std::vector<int32_t> pos(N); std::vector<int64_t> cur(N); std::vector<double> eq(N), cost(N);
    bool traj_ok = true, obs_ok = true; int64_t dones = 0;
    float* dobs; CK(cudaMalloc(&dobs, sizeof(float) * (size_t)N * D));
    std::vector<float> gobs((size_t)N * D), hob(D);
    for (int step = 0; step < a_steps; ++step) {
      for (int i = 0; i < 3 * N; ++i) act[i] = (int32_t)(xr() % (uint64_t)cfg.branch_sizes[i % 3]);
      if (step % 50 == 0) {
        FK(fh_launch_env_observe(ev, dm, FH_F32, dobs, D, s));
        CK(cudaMemcpyAsync(gobs.data(), dobs, sizeof(float) * gobs.size(), cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        for (int e = 0; e < N; ++e) { fh_env_observe(hv, p, hs[e], hob.data()); if (memcmp(hob.data(), &gobs[(size_t)e * D], sizeof(float) * D)) obs_ok = false; }
      }
      FK(fh_cuda_env_step_host(ev, dm, act.data(), rw.data(), dn.data(), pos.data(), cur.data(), eq.data(), cost.data(), 1, s));
      for (int e = 0; e < N; ++e) {
        fh_step_result r;
        fh_env_step(hv, p, hs[e], act[3 * e], act[3 * e + 1], act[3 * e + 2], r);
        /* outputs are the step's result, before the reset */
        if (!same_bits(r.reward, rw[e]) || r.done != dn[e] || hs[e].pos != pos[e] || hs[e].t != cur[e] ||
            !same_bits(r.cost, cost[e]) || !same_bits(hs[e].equity, eq[e])) traj_ok = false;
        if (r.done) { fh_env_reset(hv, p, hs[e], cfg.seed, (uint32_t)e, (uint64_t)step + 1); ++dones; }
      }
    }
    char msg[256];
    snprintf(msg, sizeof msg, "rewards, dones, positions, cursors, equity, costs identical (%lld resets seen)", (long long)dones);
    check(traj_ok, msg);
    check(obs_ok, "observations (N, D) identical at steps 0, 50, ..., 250");
    /* collection path: select (epsilon-greedy) + step with replay rows, vs host */
    std::vector<float> q((size_t)N * 10); for (auto& x : q) x = (float)ur();
    float* dq; CK(cudaMalloc(&dq, sizeof(float) * q.size()));
    CK(cudaMemcpy(dq, q.data(), sizeof(float) * q.size(), cudaMemcpyHostToDevice));
    int64_t counter0 = 0; CK(cudaMemcpy(&counter0, ev.env_step, sizeof counter0, cudaMemcpyDeviceToHost));
    bool sel_ok = true, row_ok = true;
    std::vector<fh_env_state> hs2 = hs;
    for (int i = 0; i < 5; ++i) {
      FK(fh_launch_select_actions(ev, dq, 10, i, 0, s));
      FK(fh_launch_env_step(ev, dm, &rp, i, s));
      CK(cudaMemcpyAsync(act.data(), ev.actions, sizeof(int32_t) * 3 * N, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      const uint64_t c = (uint64_t)(counter0 + i);
      const double eps = fh_epsilon(cfg.eps_start, cfg.eps_end, cfg.eps_decay_steps, c, N);
      const int64_t row = (int64_t)(c % (uint64_t)rp.rows);
      std::vector<int32_t> bar(N); std::vector<float> acc((size_t)N * 8), rr(N); std::vector<uint8_t> a8((size_t)N * 3), d8(N);
      CK(cudaMemcpy(bar.data(), rp.v.bar + row * N, sizeof(int32_t) * N, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(acc.data(), rp.v.account + row * N * 8, sizeof(float) * N * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(rr.data(), rp.v.reward + row * N, sizeof(float) * N, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(a8.data(), rp.v.act + row * N * 3, N * 3, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(d8.data(), rp.v.done + row * N, N, cudaMemcpyDeviceToHost));
      for (int e = 0; e < N; ++e) {
        int32_t ha[3]; int off = 0;
        for (int d = 0; d < 3; ++d) {
          int best = 0; for (int k = 1; k < cfg.branch_sizes[d]; ++k) if (q[(size_t)e * 10 + off + k] > q[(size_t)e * 10 + off + best]) best = k;
          ha[d] = fh_explore_action(cfg.seed, (uint32_t)e, c, d, cfg.branch_sizes[d], eps, best); off += cfg.branch_sizes[d];
          if (ha[d] != act[3 * e + d]) sel_ok = false;
        }
        float ha8[8]; fh_env_account(hv, p, hs2[e], ha8);
        if (bar[e] != hs2[e].t || memcmp(ha8, &acc[(size_t)e * 8], 32)) row_ok = false;
        fh_step_result r; fh_env_step(hv, p, hs2[e], ha[0], ha[1], ha[2], r);
        if (!same_bits(r.reward, rr[e]) || r.done != d8[e] || a8[e * 3] != ha[0] || a8[e * 3 + 1] != ha[1] || a8[e * 3 + 2] != ha[2]) row_ok = false;
        if (r.done) fh_env_reset(hv, p, hs2[e], cfg.seed, (uint32_t)e, c + 1);
      }
    }
    check(sel_ok, "epsilon-greedy actions identical to fh_explore_action on the host (5 steps)");
    check(row_ok, "replay rows (bar, account, actions, done, reward) identical to the host");
    CK(cudaFree(dobs)); CK(cudaFree(dq));
    fh_cuda_replay_free(&rp); fh_cuda_envs_free(&ev);
  }

  /* ---------------- B. PER at capacity 2^21 ---------------- */
  const int64_t C = cfg.replay_capacity;
  printf("B. PER at capacity %lld: tree sums, chi-square, weights, duplicate-max update\n", (long long)C);
  {
    fh_cuda_replay rp; FK(fh_cuda_replay_alloc(cfg, &rp));
    std::vector<float> leaf(C);
    for (int64_t i = 0; i < C; ++i) leaf[i] = (xr() % 10 == 0) ? 0.0f : (float)pow(ur() * 3.0 + 0.001, 0.6);
    CK(cudaMemcpy(rp.tree.leaf, leaf.data(), sizeof(float) * C, cudaMemcpyHostToDevice));
    FK(fh_launch_tree_rebuild(rp.tree, s));
    double gt; int64_t gc; CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(&gt, rp.tree.total, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&gc, rp.tree.count, 8, cudaMemcpyDeviceToHost));
    long double ht = 0; int64_t hc = 0; for (float x : leaf) { ht += x; hc += x > 0; }
    check(fabs((double)(gt - ht)) <= 1e-12 * (double)ht && gc == hc, "total and count equal the host sum (rel 1e-12)");
    const int32_t B = small ? 1024 : 16384; const int draws = small ? 4 : 256;
    fh_cuda_batch b; FK(fh_cuda_batch_alloc(B, &b));
    int64_t* dstep; CK(cudaMalloc(&dstep, 8));
    const int bins = small ? 64 : 2048; const int64_t per_bin = C / bins;
    std::vector<double> hist(bins, 0.0), expct(bins, 0.0);
    for (int64_t i = 0; i < C; ++i) expct[i / per_bin] += leaf[i];
    std::vector<int32_t> sl(B); std::vector<float> w(B); bool zero_hit = false, w_ok = true, strat_ok = true;
    for (int d = 0; d < draws; ++d) {
      int64_t st = d; CK(cudaMemcpyAsync(dstep, &st, 8, cudaMemcpyHostToDevice, s));
      FK(fh_launch_per_sample(rp.tree, b, B, 777, dstep, 0.4f, 1.0f, 1000, s));
      CK(cudaMemcpyAsync(sl.data(), b.slot, 4 * B, cudaMemcpyDeviceToHost, s));
      CK(cudaMemcpyAsync(w.data(), b.weight, 4 * B, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      float mn = 1e30f; for (int j = 0; j < B; ++j) { if (leaf[sl[j]] <= 0) zero_hit = true; else mn = std::min(mn, leaf[sl[j]]); }
      const double beta = fh_per_beta(0.4f, 1.0f, 1000, d);
      for (int j = 0; j < B; ++j) {
        hist[sl[j] / per_bin] += 1;
        if (j > 0 && sl[j] < sl[j - 1]) strat_ok = false;
        const double ref = fh_per_weight((double)hc, leaf[sl[j]], gt, beta) / fh_per_weight((double)hc, mn, gt, beta);
        if (fabs(ref - w[j]) > 1e-6 * ref + 1e-7) w_ok = false;
      }
    }
    double chi = 0; const double nsamp = (double)B * draws;
    for (int k = 0; k < bins; ++k) { const double ex = expct[k] / (double)ht * nsamp; chi += (hist[k] - ex) * (hist[k] - ex) / ex; }
    /* df = bins-1 = 2047: mean 2047, sd 64; stratification only lowers it */
    char msg[200]; snprintf(msg, sizeof msg, "chi-square %.1f over %d bins (df %d, limit %.0f), %.1fM samples", chi, bins, bins - 1, 2047 + 5 * 64.0, nsamp / 1e6);
    check(small || chi < 2047 + 5 * 64.0, msg);
    check(!zero_hit, "no zero-priority leaf ever sampled");
    check(strat_ok, "stratified: slots non-decreasing in j");
    check(w_ok, "IS weights = (size P)^-beta / batch max (host formula, rel 1e-6)");
    /* duplicate-max priority update */
    std::vector<int32_t> us(B); std::vector<float> sig(B);
    for (int j = 0; j < B; ++j) { us[j] = (int32_t)(xr() % 64); sig[j] = (float)ur() * 5; }
    int32_t* dus; float* dsig; CK(cudaMalloc(&dus, 4 * B)); CK(cudaMalloc(&dsig, 4 * B));
    CK(cudaMemcpy(dus, us.data(), 4 * B, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dsig, sig.data(), 4 * B, cudaMemcpyHostToDevice));
    FK(fh_launch_priority_update(rp, dus, dsig, B, s)); CK(cudaStreamSynchronize(s));
    std::vector<float> lf(64); CK(cudaMemcpy(lf.data(), rp.tree.leaf, 256, cudaMemcpyDeviceToHost));
    std::vector<float> ref(64, -1.0f);
    for (int j = 0; j < B; ++j) ref[us[j]] = std::max(ref[us[j]], fh_per_priority(sig[j], cfg.per_eps, cfg.per_alpha));
    bool up_ok = true; for (int i = 0; i < 64; ++i) { if (ref[i] >= 0 && !same_bits(ref[i], lf[i])) up_ok = false; if (ref[i] >= 0) leaf[i] = ref[i]; }
    CK(cudaMemcpy(&gt, rp.tree.total, 8, cudaMemcpyDeviceToHost)); ht = 0; for (float x : leaf) ht += x;
    check(up_ok && fabs((double)(gt - ht)) <= 1e-12 * (double)ht, "priority update: duplicates keep the max, total re-summed exactly");
    /* n-step assembly + observation gather vs the host (fh_replay_nstep, fh_obs_from) on random rows */
    {
      const int64_t cap = rp.capacity;
      std::vector<int32_t> hb(cap); std::vector<uint8_t> ha(3 * cap), hd(cap); std::vector<float> hr(cap), hacc(8 * cap);
      for (int64_t i = 0; i < cap; ++i) {
        hb[i] = (int32_t)(63 + xr() % (uint64_t)(hm.m.n_bars - 64)); hd[i] = (xr() % 20) == 0; hr[i] = (float)(ur() - 0.5);
        for (int k = 0; k < 3; ++k) ha[3 * i + k] = (uint8_t)(xr() % 3);
        for (int k = 0; k < 8; ++k) hacc[8 * i + k] = (float)ur();
      }
      CK(cudaMemcpy(rp.v.bar, hb.data(), 4 * cap, cudaMemcpyHostToDevice)); CK(cudaMemcpy(rp.v.act, ha.data(), 3 * cap, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(rp.v.done, hd.data(), cap, cudaMemcpyHostToDevice)); CK(cudaMemcpy(rp.v.reward, hr.data(), 4 * cap, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(rp.v.account, hacc.data(), 32 * cap, cudaMemcpyHostToDevice));
      int64_t st = 5; CK(cudaMemcpy(dstep, &st, 8, cudaMemcpyHostToDevice));
      FK(fh_launch_per_sample(rp.tree, b, B, 99, dstep, 0.4f, 1.0f, 1000, s));
      float* o32; CK(cudaMalloc(&o32, (size_t)B * D * 4 * 2));
      FK(fh_launch_replay_gather(rp, dm, 64, b, B, FH_F32, o32, o32 + (size_t)B * D, D, s));
      CK(cudaStreamSynchronize(s));
      std::vector<float> go((size_t)B * D * 2), gret(B), gdisc(B); std::vector<int32_t> gact(3 * B), gsl(B);
      CK(cudaMemcpy(go.data(), o32, go.size() * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(gret.data(), b.ret, 4 * B, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gdisc.data(), b.disc, 4 * B, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(gact.data(), b.act, 12 * B, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(gsl.data(), b.slot, 4 * B, cudaMemcpyDeviceToHost));
      fh_replay_view hvw; hvw.bar = hb.data(); hvw.act = ha.data(); hvw.done = hd.data(); hvw.reward = hr.data(); hvw.account = hacc.data(); hvw.rows = rp.rows; hvw.n_envs = rp.n_envs;
      bool g_ok = true; std::vector<float> ob(D);
      for (int j = 0; j < B; ++j) {
        float r, d; int64_t nx; fh_replay_nstep(hvw, gsl[j], cfg.n_step, cfg.gamma, &r, &d, &nx);
        if (!same_bits(r, gret[j]) || !same_bits(d, gdisc[j])) g_ok = false;
        for (int k = 0; k < 3; ++k) if (gact[3 * j + k] != ha[3 * (int64_t)gsl[j] + k]) g_ok = false;
        fh_obs_from(hv, 64, hb[gsl[j]], &hacc[8 * (int64_t)gsl[j]], ob.data());
        if (memcmp(ob.data(), &go[(size_t)j * D], 4 * D)) g_ok = false;
        fh_obs_from(hv, 64, hb[nx], &hacc[8 * nx], ob.data());
        if (memcmp(ob.data(), &go[(size_t)(B + j) * D], 4 * D)) g_ok = false;
      }
      check(g_ok, "n-step returns, discounts, actions, obs and next obs identical to the host (fh_replay_nstep, fh_obs_from)");
      CK(cudaFree(o32));
    }
    /* timings */
    std::vector<float> tr, ts, tg, tu;
    float* obs16; CK(cudaMalloc(&obs16, (size_t)B * D * 2 * 2));
    for (int rep = 0; rep < (small ? 2 : 30); ++rep) {
      float ms;
      CK(cudaEventRecord(e0, s)); FK(fh_launch_tree_rebuild(rp.tree, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tr.push_back(ms);
      CK(cudaEventRecord(e0, s)); FK(fh_launch_per_sample(rp.tree, b, B, 777, dstep, 0.4f, 1.0f, 1000, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); ts.push_back(ms);
      CK(cudaEventRecord(e0, s)); FK(fh_launch_replay_gather(rp, dm, 64, b, B, FH_BF16, obs16, (char*)obs16 + (size_t)B * D * 2, D, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tg.push_back(ms);
      CK(cudaEventRecord(e0, s)); FK(fh_launch_priority_update(rp, b.slot, dsig, B, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tu.push_back(ms);
    }
    printf("  timing B=%d: rebuild %.1f us, sample %.1f us, gather(s,s' bf16) %.1f us (%.0f GB/s written), update %.1f us\n", B,
           1e3 * median(tr), 1e3 * median(ts), 1e3 * median(tg), (double)B * D * 2 * 2 / (median(tg) * 1e-3) / 1e9, 1e3 * median(tu));
    printf("TABLE per_us rebuild=%.1f sample=%.1f gather=%.1f update=%.1f\n", 1e3 * median(tr), 1e3 * median(ts), 1e3 * median(tg), 1e3 * median(tu));
    CK(cudaFree(obs16)); CK(cudaFree(dus)); CK(cudaFree(dsig)); CK(cudaFree(dstep));
    fh_cuda_batch_free(&b); fh_cuda_replay_free(&rp);
  }

  /* ---------------- C. eval: GPU vs host simulation ---------------- */
  printf("C. segmented evaluation (greedy from per-step Q, flat, buy-and-hold) vs the host\n");
  {
    fh_cuda_eval ev; FK(fh_cuda_eval_alloc(cfg, p, &hm.m, dm, &ev));
    const int S = ev.n_seg;
    printf("  %d segments, %d steps, %d sessions, %lld val bars\n", S, ev.max_steps, ev.n_sessions, (long long)ev.n_val);
    /* host reference simulation into the same record layout */
    auto host_eval = [&](int policy, std::vector<fh_eval_rec>& br, std::vector<fh_eval_rec>& fr, const std::vector<float>* qs) {
      br.assign(ev.n_val, fh_eval_rec{}); fr.assign(S, fh_eval_rec{});
      memset(br.data(), 0, br.size() * sizeof(fh_eval_rec)); memset(fr.data(), 0, fr.size() * sizeof(fh_eval_rec));
      for (int k = 0; k < S; ++k) {
        fh_env_state st; memset(&st, 0, sizeof st); st.t = ev.h_seg_begin[k];
        const int len = ev.h_seg_end[k] - ev.h_seg_begin[k];
        for (int i = 0; i < len - 1; ++i) {
          int a0, a1 = 0, a2 = 0;
          if (policy == 1) { a0 = 1; } else if (policy == 2) { a0 = 2; a1 = 3; }
          else { const float* q = &(*qs)[((size_t)i * S + k) * 10]; int off = 0; int a[3];
            for (int d = 0; d < 3; ++d) { int best = 0; for (int j = 1; j < cfg.branch_sizes[d]; ++j) if (q[off + j] > q[off + best]) best = j; a[d] = best; off += cfg.branch_sizes[d]; }
            a0 = a[0]; a1 = a[1]; a2 = a[2]; }
          fh_step_result r; fh_env_step(hv, p, st, a0, a1, a2, r);
          fh_eval_rec& x = br[st.t - ev.val_begin]; x.pnl = r.pnl; x.gross_profit = r.gross_profit; x.gross_loss = r.gross_loss; x.traded = r.traded; x.closed = (int16_t)r.trades_closed; x.won = (int16_t)r.trades_won;
          if (st.k == p.episode_len) { st.k = 0; st.realised = 0; st.equity = 0; }
        }
        fh_step_result r; fh_step_result_clear(r); fh_env_flatten(hv, p, st, r);
        fh_eval_rec& x = fr[k]; x.pnl = r.pnl; x.gross_profit = r.gross_profit; x.gross_loss = r.gross_loss; x.traded = r.traded; x.closed = (int16_t)r.trades_closed; x.won = (int16_t)r.trades_won;
      }
    };
    auto metrics_equal = [](const fh_metrics& a, const fh_metrics& b) {
      const double* x = &a.sharpe; const double* y = &b.sharpe;
      for (int i = 0; i < 10; ++i) { if (isnan(x[i]) != isnan(y[i])) return false; if (!isnan(x[i]) && !same_bits(x[i], y[i])) return false; }
      return true;
    };
    std::vector<float> qs((size_t)ev.max_steps * S * 10); for (auto& x : qs) x = (float)ur();
    float* dq; CK(cudaMalloc(&dq, sizeof(float) * qs.size()));
    CK(cudaMemcpy(dq, qs.data(), sizeof(float) * qs.size(), cudaMemcpyHostToDevice));
    float* dobs; CK(cudaMalloc(&dobs, sizeof(float) * (size_t)S * D));
    for (int policy = 0; policy < 3; ++policy) {
      if (policy == 0) {
        FK(fh_launch_eval_reset(ev, s));
        for (int i = 0; i < ev.max_steps; ++i) { FK(fh_launch_eval_observe(ev, FH_F32, dobs, D, s)); FK(fh_launch_eval_step(ev, dq + (size_t)i * S * 10, 10, i, s)); }
        FK(fh_launch_eval_finish(ev, s));
      } else {
        FK(fh_launch_eval_fixed(ev, policy == 1 ? FH_EVAL_FLAT : FH_EVAL_BUY_HOLD, s));
      }
      FK(fh_launch_eval_readback(ev, s)); CK(cudaStreamSynchronize(s));
      fh_metrics g, h; fh_cuda_eval_finalise(ev, &hm.m, cfg.initial_capital, &g);
      std::vector<fh_eval_rec> br, fr; host_eval(policy, br, fr, &qs);
      fh_cuda_eval_split_host(ev, br.data(), fr.data());
      fh_cuda_eval_finalise(ev, &hm.m, cfg.initial_capital, &h);
      char msg[300]; const char* nm[3] = {"greedy", "flat", "buy-and-hold"};
      snprintf(msg, sizeof msg, "%s metrics identical to the host (sharpe %.4f, pnl %.2f, trades %.0f, turnover %.4f, max_dd %.2f)", nm[policy], g.sharpe, g.total_pnl, g.trades, g.turnover, g.max_drawdown);
      check(metrics_equal(g, h), msg);
      if (policy == 1) check(g.total_pnl == 0.0 && g.trades == 0, "flat baseline: no PnL, no trades");
    }
    /* fused step+observe path: same metrics as the host greedy simulation */
    {
      FK(fh_launch_eval_reset(ev, s));
      FK(fh_launch_eval_observe(ev, FH_F32, dobs, D, s));
      for (int i = 0; i < ev.max_steps; ++i) FK(fh_launch_eval_step_observe(ev, dq + (size_t)i * S * 10, 10, i, FH_F32, dobs, D, s));
      FK(fh_launch_eval_finish(ev, s));
      FK(fh_launch_eval_readback(ev, s)); CK(cudaStreamSynchronize(s));
      fh_metrics g, h; fh_cuda_eval_finalise(ev, &hm.m, cfg.initial_capital, &g);
      std::vector<fh_eval_rec> br, fr; host_eval(0, br, fr, &qs);
      fh_cuda_eval_split_host(ev, br.data(), fr.data());
      fh_cuda_eval_finalise(ev, &hm.m, cfg.initial_capital, &h);
      check(metrics_equal(g, h), "greedy metrics via the fused step+observe kernel identical to the host");
    }
    {
      cudaGraph_t gph; cudaGraphExec_t gx;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      FK(fh_launch_eval_reset(ev, s)); FK(fh_launch_eval_observe(ev, FH_BF16, dobs, D, s));
      for (int i = 0; i < ev.max_steps; ++i) FK(fh_launch_eval_step_observe(ev, dq + (size_t)i * S * 10, 10, i, FH_BF16, dobs, D, s));
      FK(fh_launch_eval_finish(ev, s)); FK(fh_launch_eval_readback(ev, s));
      CK(cudaStreamEndCapture(s, &gph)); CK(cudaGraphInstantiate(&gx, gph, 0));
      std::vector<float> tf;
      for (int rep = 0; rep < (small ? 1 : 7); ++rep) { float ms; CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(gx, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tf.push_back(ms); }
      printf("  timing: greedy eval env part, fused (graph of %d x step_observe, no network) %.2f ms\n", ev.max_steps, median(tf));
      printf("TABLE eval_ms greedy_env_fused_graph=%.2f\n", median(tf));
      CK(cudaGraphExecDestroy(gx)); CK(cudaGraphDestroy(gph));
    }
    /* timing: greedy eval without the network (observe + step) as one graph; fixed-policy eval */
    cudaGraph_t gph; cudaGraphExec_t gx;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    FK(fh_launch_eval_reset(ev, s));
    for (int i = 0; i < ev.max_steps; ++i) { FK(fh_launch_eval_observe(ev, FH_BF16, dobs, D, s)); FK(fh_launch_eval_step(ev, dq + (size_t)i * S * 10, 10, i, s)); }
    FK(fh_launch_eval_finish(ev, s)); FK(fh_launch_eval_readback(ev, s));
    CK(cudaStreamEndCapture(s, &gph)); CK(cudaGraphInstantiate(&gx, gph, 0));
    std::vector<float> tge, tfx;
    for (int rep = 0; rep < (small ? 1 : 7); ++rep) {
      float ms; CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(gx, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tge.push_back(ms);
      CK(cudaEventRecord(e0, s)); FK(fh_launch_eval_fixed(ev, FH_EVAL_BUY_HOLD, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); tfx.push_back(ms);
    }
    printf("  timing: greedy eval env part (graph of %d x (observe+step), no network) %.2f ms; fixed-policy eval %.2f ms\n", ev.max_steps, median(tge), median(tfx));
    printf("TABLE eval_ms greedy_env_graph=%.2f fixed=%.2f steps=%d segments=%d\n", median(tge), median(tfx), ev.max_steps, S);
    CK(cudaGraphExecDestroy(gx)); CK(cudaGraphDestroy(gph)); CK(cudaFree(dq)); CK(cudaFree(dobs));
    fh_cuda_eval_free(&ev);
  }

  /* ---------------- D. collection throughput (env part, one CUDA graph of T steps) ---------------- */
  printf("D. collection: graph of T=100 x (observe bf16 + select + step + replay row), N=4096, replay 2^21\n");
  {
    fh_cuda_envs ev; FK(fh_cuda_envs_alloc(cfg, p, 16, &ev));
    fh_cuda_replay rp; FK(fh_cuda_replay_alloc(cfg, &rp));
    FK(fh_launch_env_reset_all(ev, dm, s));
    float* dq; CK(cudaMalloc(&dq, sizeof(float) * N * 10)); std::vector<float> q((size_t)N * 10); for (auto& x : q) x = (float)ur();
    CK(cudaMemcpy(dq, q.data(), sizeof(float) * q.size(), cudaMemcpyHostToDevice));
    void* obs; CK(cudaMalloc(&obs, (size_t)N * D * 4));
    /* fused path == separate path, bit for bit (states, replay rows, leaves, observations) */
    {
      fh_cuda_envs ev2; FK(fh_cuda_envs_alloc(cfg, p, 16, &ev2));
      fh_cuda_replay rp2; FK(fh_cuda_replay_alloc(cfg, &rp2));
      fh_cuda_replay rp1; FK(fh_cuda_replay_alloc(cfg, &rp1));
      FK(fh_launch_env_reset_all(ev2, dm, s));
      void* obs2; CK(cudaMalloc(&obs2, (size_t)N * D * 4));
      FK(fh_launch_env_observe(ev2, dm, FH_F32, obs2, D, s));
      for (int i = 0; i < (small ? 20 : 130); ++i) {
        FK(fh_launch_select_actions(ev, dq, 10, i, 0, s));
        FK(fh_launch_env_step(ev, dm, &rp1, i, s));
        FK(fh_launch_env_observe(ev, dm, FH_F32, obs, D, s));
        FK(fh_launch_env_act_step_observe(ev2, dm, &rp2, dq, 10, i, FH_F32, obs2, D, s));
      }
      CK(cudaStreamSynchronize(s));
      auto dev_eq = [&](const void* a, const void* b, size_t n) {
        std::vector<char> x(n), y(n); CK(cudaMemcpy(x.data(), a, n, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(y.data(), b, n, cudaMemcpyDeviceToHost));
        return memcmp(x.data(), y.data(), n) == 0; };
      const bool same = dev_eq(ev.state, ev2.state, sizeof(fh_env_state) * N) && dev_eq(obs, obs2, sizeof(float) * N * D) &&
        dev_eq(rp1.v.bar, rp2.v.bar, 4 * rp1.capacity) && dev_eq(rp1.v.account, rp2.v.account, 32 * rp1.capacity) &&
        dev_eq(rp1.v.reward, rp2.v.reward, 4 * rp1.capacity) && dev_eq(rp1.tree.leaf, rp2.tree.leaf, 4 * rp1.capacity) &&
        dev_eq(rp1.v.act, rp2.v.act, 3 * rp1.capacity) && dev_eq(rp1.v.done, rp2.v.done, rp1.capacity);
      check(same, "fused act+step+observe == select, step, observe (130 steps: states, obs, replay, leaves)");
      CK(cudaFree(obs2)); fh_cuda_replay_free(&rp1); fh_cuda_replay_free(&rp2); fh_cuda_envs_free(&ev2);
      FK(fh_launch_env_reset_all(ev, dm, s));
    }
    const int reps = small ? 3 : 12;
    for (int variant = 0; variant < 4; ++variant) {
      const int T = 100;
      cudaGraph_t gph; cudaGraphExec_t gx;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      if (variant == 3) FK(fh_launch_env_observe(ev, dm, FH_BF16, obs, D, s));
      for (int i = 0; i < T; ++i) {
        if (variant == 3) { FK(fh_launch_env_act_step_observe(ev, dm, &rp, dq, 10, i, FH_BF16, obs, D, s)); continue; }
        if (variant < 2) FK(fh_launch_env_observe(ev, dm, variant == 0 ? FH_BF16 : FH_F32, obs, D, s));
        FK(fh_launch_select_actions(ev, dq, 10, i, 0, s));
        FK(fh_launch_env_step(ev, dm, &rp, i, s));
      }
      FK(fh_launch_collect_end(ev, &rp, T, s));
      CK(cudaStreamEndCapture(s, &gph)); CK(cudaGraphInstantiate(&gx, gph, 0));
      std::vector<float> tc;
      for (int rep = 0; rep < reps; ++rep) { float ms; CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(gx, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); if (rep >= 2 || reps < 3) tc.push_back(ms); }
      const char* nm[4] = {"observe bf16 + select + step", "observe fp32 + select + step", "select + step (no observe)", "fused act+step+observe bf16"};
      const double ms = median(tc);
      printf("  %s: %.3f ms per epoch of collection, %.1f M env-steps/s (network forward not included)\n", nm[variant], ms, (double)N * T / (ms * 1e-3) / 1e6);
      printf("TABLE collect variant=%d ms=%.3f msteps_per_s=%.1f\n", variant, ms, (double)N * T / (ms * 1e-3) / 1e6);
      CK(cudaGraphExecDestroy(gx)); CK(cudaGraphDestroy(gph));
    }
    int64_t cnt; double tot; CK(cudaMemcpy(&cnt, rp.tree.count, 8, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&tot, rp.tree.total, 8, cudaMemcpyDeviceToHost));
    printf("  replay after %d collection epochs: %lld sampleable transitions (total %.1f)\n", 4 * reps, (long long)cnt, tot);
    check(cnt == std::min<int64_t>((int64_t)4 * reps * 100 - 3, rp.rows - 3) * N, "sampleable transitions = (rows written - n) x N");
    CK(cudaFree(dq)); CK(cudaFree(obs)); fh_cuda_replay_free(&rp); fh_cuda_envs_free(&ev);
  }
  fh_cuda_market_free(&dm);
  printf("RESULT %s (%d failures)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
