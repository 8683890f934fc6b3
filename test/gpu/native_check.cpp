/*
 * native_check.cpp — GPU checks of libfoxhunt_cuda.so that need no Node: built and run by
 * bench/gpu/net.sh on the GPU host (also the program compute-sanitizer runs).
 *
 *   native_check compare <build>   forward/backward vs the CPU backend on identical params:
 *                                  fp32 (deterministic) tight, bf16 within bf16 tolerance, C51 and Huber
 *   native_check graphs <build>    graph on == graph off (stats and params bit for bit), 1 host sync/epoch,
 *                                  checkpoint CUDA -> CPU -> CUDA round trip
 *   native_check small <build>     a small config end to end (for compute-sanitizer memcheck/racecheck)
 *   native_check bench <build> [epochs]   the reference config: per-phase ms, throughput, syncs
 *   native_check profile <build>   a short reference-shaped epoch between cuProfilerStart/Stop (for ncu)
 *   native_check evalfused <build> the fused greedy evaluation (kernels/eval_fused.cu) against the
 *                                  cuBLASLt loop on identical weights and market, bf16 (fh_cuda_eval_check):
 *                                  Q of the first step and of every step before a segment's first greedy
 *                                  flip within bf16 tolerance, every flip a near-tie, metrics identical
 *                                  when nothing flipped; the trainer with FH_EVAL_FUSED=0/1 reports
 *                                  exactly the metrics of the matching path
 *
 * Both libraries are dlopen'ed RTLD_LOCAL (same symbol names). Prints PASS/FAIL lines; exit code =
 * number of failures. Inputs are fresh random draws every run (seeded by time unless FH_SEED is set).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "foxhunt.h"

struct Lib {
  void* h = nullptr;
  fh_status (*default_config)(fh_config*);
  fh_status (*create)(const fh_config*, const fh_market*, fh_trainer**, char*, size_t);
  void (*destroy)(fh_trainer*);
  const char* (*last_error)(const fh_trainer*);
  fh_status (*info)(fh_trainer*, fh_info*);
  fh_status (*run_epoch)(fh_trainer*, fh_epoch_stats*);
  fh_status (*get_params)(fh_trainer*, int32_t, float*, int64_t);
  fh_status (*set_params)(fh_trainer*, int32_t, const float*, int64_t);
  fh_status (*loss_grad)(fh_trainer*, int32_t, const float*, const int32_t*, const float*, const float*,
                         const float*, const float*, double*, float*, float*);
  fh_status (*q_values)(fh_trainer*, int32_t, const float*, float*);
  fh_status (*ckpt_size)(fh_trainer*, uint64_t*);
  fh_status (*save)(fh_trainer*, uint8_t*, uint64_t, uint64_t*);
  fh_status (*load)(fh_trainer*, const uint8_t*, uint64_t);
  /* CUDA library only (test entry point of eval_host.cu), NULL elsewhere */
  fh_status (*eval_check)(const fh_config*, const fh_market*, const float*, int64_t, int32_t, fh_metrics*, int32_t*,
                          float*, int64_t, char*, size_t);
};

template <typename F>
static void sym(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  if (!f) {
    fprintf(stderr, "missing symbol %s\n", name);
    exit(100);
  }
}

static bool load_lib(const std::string& path, Lib& L) {
  L.h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!L.h) {
    fprintf(stderr, "dlopen %s: %s\n", path.c_str(), dlerror());
    return false;
  }
  sym(L.h, "fh_default_config", L.default_config);
  sym(L.h, "fh_trainer_create", L.create);
  sym(L.h, "fh_trainer_destroy", L.destroy);
  sym(L.h, "fh_trainer_last_error", L.last_error);
  sym(L.h, "fh_trainer_info", L.info);
  sym(L.h, "fh_trainer_run_epoch", L.run_epoch);
  sym(L.h, "fh_trainer_get_params", L.get_params);
  sym(L.h, "fh_trainer_set_params", L.set_params);
  sym(L.h, "fh_trainer_loss_grad", L.loss_grad);
  sym(L.h, "fh_trainer_q_values", L.q_values);
  sym(L.h, "fh_trainer_checkpoint_size", L.ckpt_size);
  sym(L.h, "fh_trainer_save_checkpoint", L.save);
  sym(L.h, "fh_trainer_load_checkpoint", L.load);
  L.eval_check = reinterpret_cast<decltype(L.eval_check)>(dlsym(L.h, "fh_cuda_eval_check"));
  return true;
}

static int g_fail = 0;
static void check(bool ok, const char* what, const char* fmt = "", double a = 0, double b = 0) {
  printf("%s  %s", ok ? "PASS" : "FAIL", what);
  if (fmt[0]) {
    printf("  ");
    printf(fmt, a, b);
  }
  printf("\n");
  fflush(stdout);
  if (!ok) ++g_fail;
}

/* ---------------------------------------------------------------- synthetic market */

struct Market {
  std::vector<float> features;
  std::vector<double> open, high, low, close, atr;
  std::vector<uint8_t> session;
  fh_market m{};
};

static void make_market(Market& M, int64_t n, int32_t F, int32_t window, uint64_t seed, int64_t bars_per_day = 1380) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  const double tick = 0.25;
  M.features.resize((size_t)(n * F));
  M.open.resize(n);
  M.high.resize(n);
  M.low.resize(n);
  M.close.resize(n);
  M.atr.resize(n);
  M.session.resize(n);
  double prev = 4500.0, atr_sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double o = prev;
    const double c = o + tick * std::round(nd(rng) * 4.0);
    const double h = std::max(o, c) + tick * std::floor(std::fabs(nd(rng)) * 2.0);
    const double l = std::min(o, c) - tick * std::floor(std::fabs(nd(rng)) * 2.0);
    M.open[i] = o;
    M.close[i] = c;
    M.high[i] = h;
    M.low[i] = l;
    const double tr = std::max(h - l, tick);
    atr_sum += tr;
    M.atr[i] = i < 14 ? atr_sum / (double)(i + 1) : (M.atr[i - 1] * 13.0 + tr) / 14.0;
    M.session[i] = (i % bars_per_day) == 0;
    const double ret = (c - o) / tick / 4.0;
    for (int32_t f = 0; f < F; ++f)
      M.features[(size_t)(i * F + f)] = (float)(f == 0 ? ret : 0.5 * nd(rng) + (f % 3 == 1 ? 0.3 * ret : 0.0));
    prev = c;
  }
  M.m.n_bars = n;
  M.m.n_features = F;
  M.m.features = M.features.data();
  M.m.open = M.open.data();
  M.m.high = M.high.data();
  M.m.low = M.low.data();
  M.m.close = M.close.data();
  M.m.atr = M.atr.data();
  M.m.session_start = M.session.data();
  const int64_t train_end = (int64_t)(n * 0.8);
  M.m.train_begin = 0;
  M.m.train_end = train_end;
  M.m.val_begin = std::min(n - 1, train_end + bars_per_day / 4);
  if (M.m.val_begin < window) M.m.val_begin = window;
  M.m.val_end = n;
}

static fh_config small_config(Lib& L, int backend, int det, int graphs, int atoms) {
  fh_config c;
  L.default_config(&c);
  c.backend = backend;
  c.deterministic = det;
  c.use_graphs = graphs;
  c.seed = 7;
  c.n_envs = 64;
  c.episode_len = 20;
  c.window = 8;
  c.hidden1 = 64;
  c.hidden2 = 32;
  c.head_hidden = 16;
  c.atoms = atoms;
  c.batch_size = 128;
  c.batch_cap = 128;
  c.train_steps = 6;
  c.replay_capacity = 64 * 64;
  c.per_beta_steps = 100;
  c.target_update_every = 4;
  c.eps_decay_steps = 2000;
  c.qstats_every = 2;
  c.eval_segments = 4;
  c.threads = 2;
  return c;
}

static fh_trainer* make(Lib& L, const fh_config& c, const Market& M, const char* what) {
  char err[512] = {0};
  fh_trainer* t = nullptr;
  fh_status s = L.create(&c, &M.m, &t, err, sizeof err);
  if (s != FH_OK) {
    printf("FAIL  create %s: status %d: %s\n", what, (int)s, err);
    ++g_fail;
    return nullptr;
  }
  return t;
}

static double rel_l2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    const double d = (double)a[i] - (double)b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* ---------------------------------------------------------------- compare */

static void compare_one(Lib& cpu, Lib& gpu, const Market& M, int det, int atoms, uint64_t seed) {
  fh_config cfg_c = small_config(cpu, 0, 0, 0, atoms);
  fh_config cfg_g = small_config(gpu, 1, det, 0, atoms);
  fh_trainer* t_cpu = make(cpu, cfg_c, M, "cpu");
  fh_trainer* t_gpu = make(gpu, cfg_g, M, "cuda");
  if (!t_cpu || !t_gpu) return;
  fh_info ic, ig;
  cpu.info(t_cpu, &ic);
  gpu.info(t_gpu, &ig);
  char name[160];
  snprintf(name, sizeof name, "[%s atoms=%d] n_params and obs_dim agree", det ? "fp32" : "bf16", atoms);
  check(ic.n_params == ig.n_params && ic.obs_dim == ig.obs_dim, name, "%g vs %g", (double)ic.n_params,
        (double)ig.n_params);
  const int64_t P = ic.n_params;
  const int32_t D = ic.obs_dim;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> on((size_t)P), tgt((size_t)P);
  cpu.get_params(t_cpu, 0, on.data(), P);
  for (int64_t i = 0; i < P; ++i) tgt[(size_t)i] = on[(size_t)i] == 0.0f ? 0.0f : on[(size_t)i] * (1.0f + 0.2f * nd(rng));
  for (auto* lib : {&cpu, &gpu}) {
    fh_trainer* t = lib == &cpu ? t_cpu : t_gpu;
    lib->set_params(t, 0, on.data(), P);
    lib->set_params(t, 1, tgt.data(), P);
  }
  /* the layout pads rows of the head outputs: keep them zero (both sides get the same params anyway) */
  const int32_t B = 128;
  std::vector<float> obs((size_t)B * D), nobs((size_t)B * D), ret(B), disc(B), w(B);
  std::vector<int32_t> act((size_t)B * 3);
  for (auto& x : obs) x = nd(rng);
  for (auto& x : nobs) x = nd(rng);
  std::uniform_int_distribution<int> u3(0, 2), u4(0, 3);
  for (int i = 0; i < B; ++i) {
    act[(size_t)i * 3] = u3(rng);
    act[(size_t)i * 3 + 1] = u4(rng);
    act[(size_t)i * 3 + 2] = u3(rng);
    ret[i] = 2.0f * nd(rng);
    disc[i] = (i % 7 == 0) ? 0.0f : 0.970299f;
    w[i] = 0.5f + 0.5f * std::fabs(nd(rng)) / 3.0f;
  }
  const int NQ = 10;
  std::vector<float> qc((size_t)B * NQ), qg((size_t)B * NQ, NAN);
  fh_status s1 = cpu.q_values(t_cpu, B, obs.data(), qc.data());
  fh_status s2 = gpu.q_values(t_gpu, B, obs.data(), qg.data());
  const double tol_q = det ? 1e-4 : 2e-2, tol_g = det ? 1e-3 : 1.2e-1;
  double eq = rel_l2(qg.data(), qc.data(), qc.size());
  snprintf(name, sizeof name, "[%s atoms=%d] q_values vs CPU (rel L2, tol)", det ? "fp32" : "bf16", atoms);
  check(s1 == FH_OK && s2 == FH_OK && eq < tol_q, name, "%.3g  tol %.1g", eq, tol_q);
  double lc = 0, lg = NAN;
  std::vector<float> grad_c((size_t)P), gg((size_t)P, NAN), tdc(B), tdg(B, NAN);
  s1 = cpu.loss_grad(t_cpu, B, obs.data(), act.data(), ret.data(), disc.data(), nobs.data(), w.data(), &lc, grad_c.data(),
                     tdc.data());
  s2 = gpu.loss_grad(t_gpu, B, obs.data(), act.data(), ret.data(), disc.data(), nobs.data(), w.data(), &lg, gg.data(),
                     tdg.data());
  if (s2 != FH_OK) printf("      cuda loss_grad: %s\n", gpu.last_error(t_gpu));
  const double el = std::fabs(lg - lc) / std::max(1e-12, std::fabs(lc));
  snprintf(name, sizeof name, "[%s atoms=%d] loss vs CPU (rel)", det ? "fp32" : "bf16", atoms);
  check(s1 == FH_OK && s2 == FH_OK && el < tol_q, name, "%.3g  (cpu %.6g)", el, lc);
  const double eg = rel_l2(gg.data(), grad_c.data(), grad_c.size());
  snprintf(name, sizeof name, "[%s atoms=%d] gradient vs CPU (rel L2)", det ? "fp32" : "bf16", atoms);
  check(eg < tol_g, name, "%.3g  tol %.1g", eg, tol_g);
  const double et = rel_l2(tdg.data(), tdc.data(), tdc.size());
  snprintf(name, sizeof name, "[%s atoms=%d] priority signal vs CPU (rel L2)", det ? "fp32" : "bf16", atoms);
  check(et < tol_g, name, "%.3g", et);
  cpu.destroy(t_cpu);
  gpu.destroy(t_gpu);
}

/* ---------------------------------------------------------------- graphs, syncs, checkpoints */

static bool stats_equal(const fh_epoch_stats& a, const fh_epoch_stats& b) {
  const double xs[] = {a.loss_mean, a.loss_last, a.grad_norm_mean, a.grad_norm_max, a.q_avg_max, a.q_min, a.q_max,
                       a.q_mean, a.q_var, a.epsilon, a.val.total_pnl, a.val.trades, a.val.turnover};
  const double ys[] = {b.loss_mean, b.loss_last, b.grad_norm_mean, b.grad_norm_max, b.q_avg_max, b.q_min, b.q_max,
                       b.q_mean, b.q_var, b.epsilon, b.val.total_pnl, b.val.trades, b.val.turnover};
  for (size_t i = 0; i < sizeof xs / sizeof xs[0]; ++i)
    if (!(xs[i] == ys[i] || (std::isnan(xs[i]) && std::isnan(ys[i])))) return false;
  return true;
}

static void graphs_check(Lib& gpu, Lib* cpu, const Market& M) {
  fh_config c1 = small_config(gpu, 1, 0, 1, 51), c0 = small_config(gpu, 1, 0, 0, 51);
  /* the target cache on although this config's fills cost more than its steps save (its cost test says off) */
  setenv("FH_TARGET_CACHE", "1", 1);
  fh_trainer* a = make(gpu, c1, M, "cuda graphs on");
  fh_trainer* b = make(gpu, c0, M, "cuda graphs off");
  /* the train step without the next batch's sampling on the side stream (the order of old) */
  setenv("FH_TRAIN_PREFETCH", "0", 1);
  fh_trainer* np = make(gpu, c1, M, "cuda graphs on, no prefetch");
  unsetenv("FH_TRAIN_PREFETCH");
  /* without the target cache (hard updates every 4 of the 6 steps of an epoch; the replay ring of 64 rows wraps in
   * epoch 4): the next step's target forward on the side stream, and (nt) every step computing its own */
  setenv("FH_TARGET_CACHE", "0", 1);
  fh_trainer* tp = make(gpu, c1, M, "cuda graphs on, no target cache");
  setenv("FH_TARGET_PREFETCH", "0", 1);
  fh_trainer* nt = make(gpu, c1, M, "cuda graphs on, no target cache, no target prefetch");
  unsetenv("FH_TARGET_PREFETCH");
  unsetenv("FH_TARGET_CACHE");
  /* the optimiser as its 5-launch chain and the step record as a launch of its own (the default has the fused
   * optimiser's last block write it) */
  setenv("FH_OPTIM_CHAIN", "1", 1);
  setenv("FH_STEP_RECORD_KERNEL", "1", 1);
  setenv("FH_TARGET_CACHE", "1", 1);
  fh_trainer* oc = make(gpu, c1, M, "cuda graphs on, optimiser chain, record kernel");
  unsetenv("FH_TARGET_CACHE");
  unsetenv("FH_STEP_RECORD_KERNEL");
  unsetenv("FH_OPTIM_CHAIN");
  /* every epoch collecting at its start instead of the previous epoch's end beside its evaluation */
  setenv("FH_TARGET_CACHE", "1", 1);
  setenv("FH_COLLECT_AHEAD", "0", 1);
  fh_trainer* na = make(gpu, c1, M, "cuda graphs on, no collect-ahead");
  unsetenv("FH_COLLECT_AHEAD");
  unsetenv("FH_TARGET_CACHE");
  if (!a || !b || !np || !tp || !nt || !oc || !na) return;
  {
    fh_info ia, it;
    gpu.info(a, &ia);
    gpu.info(tp, &it);
    printf("      engines: %s | %s\n", ia.engine, it.engine);
    check(strstr(ia.engine, "target cache") && !strstr(it.engine, "target cache") && strstr(it.engine, "target prefetch"),
          "the target cache is on with FH_TARGET_CACHE=1 and off with FH_TARGET_CACHE=0");
    fh_info in;
    gpu.info(na, &in);
    check(strstr(ia.engine, "collect ahead") && !strstr(in.engine, "collect ahead"),
          "collect-ahead is on by default (fused evaluation) and off with FH_COLLECT_AHEAD=0");
  }
  bool same = true, syncs = true, finite = true, same_np = true, same_tp = true, same_nt = true, same_oc = true,
       same_na = true, timed = true;
  fh_epoch_stats sa{}, sb{}, sn{}, sp{}, st{}, so{}, sx{};
  for (int e = 0; e < 4; ++e) {
    fh_status s1 = gpu.run_epoch(a, &sa), s2 = gpu.run_epoch(b, &sb), s3 = gpu.run_epoch(np, &sn),
              s4 = gpu.run_epoch(tp, &sp), s5 = gpu.run_epoch(nt, &st), s6 = gpu.run_epoch(oc, &so),
              s7 = gpu.run_epoch(na, &sx);
    if (s1 != FH_OK || s2 != FH_OK || s3 != FH_OK || s4 != FH_OK || s5 != FH_OK || s6 != FH_OK || s7 != FH_OK) {
      printf("FAIL  run_epoch: %s | %s | %s | %s | %s | %s | %s\n", s1 ? gpu.last_error(a) : "ok",
             s2 ? gpu.last_error(b) : "ok", s3 ? gpu.last_error(np) : "ok", s4 ? gpu.last_error(tp) : "ok",
             s5 ? gpu.last_error(nt) : "ok", s6 ? gpu.last_error(oc) : "ok", s7 ? gpu.last_error(na) : "ok");
      ++g_fail;
      return;
    }
    same_na = same_na && stats_equal(sa, sx) && sa.replay_size == sx.replay_size && sa.env_steps == sx.env_steps;
    timed = timed && sa.collect_ms > 0 && sa.env_steps_per_s > 0 && sa.eval_ms > 0;
    same = same && stats_equal(sa, sb);
    same_np = same_np && stats_equal(sa, sn);
    same_tp = same_tp && stats_equal(sa, sp);
    same_nt = same_nt && stats_equal(sa, st);
    same_oc = same_oc && stats_equal(sa, so);
    syncs = syncs && sa.host_syncs == 1.0 && sb.host_syncs == 1.0;
    finite = finite && std::isfinite(sa.loss_mean) && std::isfinite(sa.grad_norm_max);
    printf("      epoch %d: loss %.5f/%.5f gnorm %.4f/%.4f q_mean %.4f/%.4f val pnl %.1f/%.1f syncs %g/%g\n", e + 1,
           sa.loss_mean, sb.loss_mean, sa.grad_norm_mean, sb.grad_norm_mean, sa.q_mean, sb.q_mean, sa.val.total_pnl,
           sb.val.total_pnl, sa.host_syncs, sb.host_syncs);
  }
  check(finite, "training produces finite loss and grad norm");
  check(same, "graph on == graph off: epoch stats identical over 4 epochs");
  check(syncs, "host syncs per epoch == 1 (graphs on and off)");
  fh_info info;
  gpu.info(a, &info);
  std::vector<float> pa((size_t)info.n_params), pb((size_t)info.n_params);
  gpu.get_params(a, 0, pa.data(), info.n_params);
  gpu.get_params(b, 0, pb.data(), info.n_params);
  check(memcmp(pa.data(), pb.data(), pa.size() * 4) == 0, "graph on == graph off: online params bit for bit");
  {
    std::vector<float> pn((size_t)info.n_params);
    gpu.get_params(np, 0, pn.data(), info.n_params);
    check(same_np && memcmp(pa.data(), pn.data(), pa.size() * 4) == 0,
          "next-batch prefetch on == off (FH_TRAIN_PREFETCH=0): epoch stats and online params bit for bit");
    gpu.destroy(np);
    gpu.get_params(tp, 0, pn.data(), info.n_params);
    check(same_tp && memcmp(pa.data(), pn.data(), pa.size() * 4) == 0,
          "target(s') from the target cache == computed in the steps (FH_TARGET_CACHE=0), with hard target updates "
          "inside the epochs and the replay ring wrapping: epoch stats and online params bit for bit");
    gpu.destroy(tp);
    gpu.get_params(nt, 0, pn.data(), info.n_params);
    check(same_nt && memcmp(pa.data(), pn.data(), pa.size() * 4) == 0,
          "next-step target forward on the side stream == on its own step (FH_TARGET_CACHE=0 FH_TARGET_PREFETCH=0), "
          "with hard target updates inside the epochs: epoch stats and online params bit for bit");
    gpu.destroy(nt);
    gpu.get_params(oc, 0, pn.data(), info.n_params);
    check(same_oc && memcmp(pa.data(), pn.data(), pa.size() * 4) == 0,
          "the step record from the fused optimiser's last block == a record launch after the 5-launch optimiser chain "
          "(FH_OPTIM_CHAIN=1 FH_STEP_RECORD_KERNEL=1): epoch stats (loss and grad-norm histories) and online params bit "
          "for bit");
    gpu.destroy(oc);
    gpu.get_params(na, 0, pn.data(), info.n_params);
    check(same_na && memcmp(pa.data(), pn.data(), pa.size() * 4) == 0,
          "the next epoch collected beside the evaluation == at the epoch's start (FH_COLLECT_AHEAD=0), the replay ring "
          "wrapping: epoch stats and online params bit for bit");
    check(timed, "collect-ahead epochs report their collection's time and env steps/s");
    /* a checkpoint taken with the next epoch's collection already on the device reads the state of the epoch's end */
    uint64_t n1 = 0, n2 = 0, w1 = 0, w2 = 0;
    gpu.ckpt_size(a, &n1);
    gpu.ckpt_size(na, &n2);
    std::vector<uint8_t> c1b(n1), c2b(n2);
    const fh_status q1 = gpu.save(a, c1b.data(), n1, &w1), q2 = gpu.save(na, c2b.data(), n2, &w2);
    check(q1 == FH_OK && q2 == FH_OK && w1 == w2 && memcmp(c1b.data(), c2b.data(), w1) == 0,
          "checkpoint with a collection run ahead == without (FH_COLLECT_AHEAD=0): the same bytes");
    /* set_params between epochs undoes the collection run ahead (it used the old weights); the same weights back
     * on both, so the next epochs must agree */
    const fh_status q3 = gpu.set_params(a, 0, pa.data(), info.n_params), q4 = gpu.set_params(na, 0, pa.data(), info.n_params);
    fh_epoch_stats u1{}, u2{};
    bool same_u = q3 == FH_OK && q4 == FH_OK;
    for (int e = 0; e < 2 && same_u; ++e)
      same_u = gpu.run_epoch(a, &u1) == FH_OK && gpu.run_epoch(na, &u2) == FH_OK && stats_equal(u1, u2);
    gpu.get_params(na, 0, pn.data(), info.n_params);
    std::vector<float> pu((size_t)info.n_params);
    gpu.get_params(a, 0, pu.data(), info.n_params);
    check(same_u && memcmp(pu.data(), pn.data(), pu.size() * 4) == 0,
          "set_params between epochs undoes the collection run ahead: the next 2 epochs == without collect-ahead");
    gpu.destroy(na);
  }
  /* checkpoint round trip on the GPU: save a, load into a fresh trainer, both continue identically */
  uint64_t n = 0, wr = 0;
  gpu.ckpt_size(a, &n);
  std::vector<uint8_t> buf(n);
  fh_status s = gpu.save(a, buf.data(), n, &wr);
  check(s == FH_OK && wr == n, "checkpoint save", "%g bytes", (double)n);
  fh_trainer* r = make(gpu, c1, M, "cuda resume");
  if (r) {
    s = gpu.load(r, buf.data(), wr);
    if (s != FH_OK) printf("      load: %s\n", gpu.last_error(r));
    fh_epoch_stats x{}, y{};
    gpu.run_epoch(a, &x);
    gpu.run_epoch(r, &y);
    check(s == FH_OK && stats_equal(x, y) && x.epoch == y.epoch, "checkpoint resume continues bit for bit",
          "loss %.6f vs %.6f", x.loss_mean, y.loss_mean);
    buf[buf.size() - 5] ^= 1;  /* a payload byte: the sha256 must catch it */
    s = gpu.load(r, buf.data(), wr);
    check(s == FH_ERR_CHECKPOINT, "corrupt checkpoint rejected", "status %g", (double)s);
    gpu.destroy(r);
  }
  if (cpu) {
    /* portability: a CUDA checkpoint loads into the CPU backend with the same config */
    fh_config cc = small_config(*cpu, 0, 0, 0, 51);
    fh_trainer* tc = make(*cpu, cc, M, "cpu for checkpoint");
    uint64_t n2 = 0;
    gpu.ckpt_size(a, &n2);
    std::vector<uint8_t> b2(n2);
    gpu.save(a, b2.data(), n2, &wr);
    if (tc) {
      s = cpu->load(tc, b2.data(), wr);
      printf("%s  CUDA checkpoint loads into the CPU backend (status %d%s%s)\n", s == FH_OK ? "PASS" : "INFO", (int)s,
             s ? ": " : "", s ? cpu->last_error(tc) : "");
      cpu->destroy(tc);
    }
  }
  gpu.destroy(a);
  gpu.destroy(b);
}

/* ---------------------------------------------------------------- small + bench */

static void small_run(Lib& gpu, const Market& M) {
  fh_config c = small_config(gpu, 1, 0, 1, 51);
  c.train_steps = 3;
  fh_trainer* t = make(gpu, c, M, "cuda small");
  if (!t) return;
  fh_epoch_stats s{};
  for (int e = 0; e < 2; ++e) {
    fh_status st = gpu.run_epoch(t, &s);
    check(st == FH_OK, "small run_epoch");
    if (st) printf("      %s\n", gpu.last_error(t));
  }
  fh_config c0 = c;
  c0.use_graphs = 0;
  c0.atoms = 1;
  fh_trainer* t0 = make(gpu, c0, M, "cuda small eager huber");
  if (t0) {
    fh_status st = gpu.run_epoch(t0, &s);
    check(st == FH_OK, "small run_epoch eager atoms=1");
    gpu.destroy(t0);
  }
  gpu.destroy(t);
}

static void bench(Lib& gpu, int epochs) {
  fh_config c;
  gpu.default_config(&c);
  c.backend = 1;
  Market M;
  const int64_t days = 504, bpd = 1380;
  make_market(M, days * bpd, 16, c.window, 11, bpd);
  auto t0 = std::chrono::steady_clock::now();
  fh_trainer* t = make(gpu, c, M, "reference");
  if (!t) return;
  const double create_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  fh_info info;
  gpu.info(t, &info);
  printf("device %s, batch %d, obs_dim %d, params %lld, flops/epoch %.3g, create %.0f ms\n", info.device_name,
         info.batch_size, info.obs_dim, (long long)info.n_params, info.flops_per_epoch, create_ms);
  std::vector<fh_epoch_stats> st;
  for (int e = 0; e < epochs + 1; ++e) {
    fh_epoch_stats s{};
    fh_status r = gpu.run_epoch(t, &s);
    if (r != FH_OK) {
      printf("FAIL  reference epoch %d: %s\n", e + 1, gpu.last_error(t));
      ++g_fail;
      break;
    }
    if (e > 0) st.push_back(s);  /* first epoch: no-train warm path excluded */
    printf("epoch %2d  total %7.2f ms  collect %6.2f  train %7.2f  eval %6.2f  env/s %.3g  samples/s %.3g  syncs %g  "
           "loss %.4f  gnorm %.3f  q_mean %.3f  val_pnl %.0f\n",
           e + 1, s.total_ms, s.collect_ms, s.train_ms, s.eval_ms, s.env_steps_per_s, s.samples_per_s, s.host_syncs,
           s.loss_mean, s.grad_norm_mean, s.q_mean, s.val.total_pnl);
  }
  if (st.empty()) return;
  auto med = [&](double fh_epoch_stats::*f) {
    std::vector<double> v;
    for (auto& s : st) v.push_back(s.*f);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double tot = med(&fh_epoch_stats::total_ms);
  printf("\n| metric | median over %zu epochs |\n| --- | --- |\n", st.size());
  printf("| epoch total ms | %.2f |\n| collect ms | %.2f |\n| train ms | %.2f |\n| eval ms | %.2f |\n", tot,
         med(&fh_epoch_stats::collect_ms), med(&fh_epoch_stats::train_ms), med(&fh_epoch_stats::eval_ms));
  printf("| env steps/s | %.3g |\n| train samples/s | %.3g |\n| host syncs | %g |\n| batch | %d |\n",
         med(&fh_epoch_stats::env_steps_per_s), med(&fh_epoch_stats::samples_per_s), med(&fh_epoch_stats::host_syncs),
         info.batch_size);
  printf("| GEMM FLOP/epoch | %.3g |\n| achieved TFLOP/s (epoch) | %.1f |\n", info.flops_per_epoch,
         info.flops_per_epoch / (tot / 1e3) / 1e12);
  gpu.destroy(t);
}

/* ---------------------------------------------------------------- knockout: what each part of a step costs
 * The reference config, one trainer per FH_PROFILE_KNOCKOUT mask (measurement only: the masked parts
 * of the train step are left out of the captured graph), median train ms of `epochs` epochs after one
 * warm-up epoch. The difference to mask 0 is what that part costs in place, overlap included. */
static void knockout(Lib& gpu, int epochs, int batch) {
  const unsigned masks[] = {0, 1, 128, 256, 512, 1024, 2, 4 | 2, 8, 16, 32, 64, 16 | 32, 1 | 16 | 32 | 64, 0x7f};
  const char* names[] = {"none (full step)", "replay (PER sample, gather, priority)", "PER sample + weights only",
                         "gather only", "priority update only", "batch-loss mean only", "target(s') forward",
                         "both forwards", "head output GEMMs", "loss kernel", "backward", "optimiser",
                         "loss + backward", "all but the forwards", "everything (graph + record only)"};
  Market M;
  const int64_t days = 504, bpd = 1380;
  fh_config c;
  gpu.default_config(&c);
  make_market(M, days * bpd, 16, c.window, 11, bpd);
  printf("\n| knocked out | mask | train ms | ms per step | delta vs full (ms/step) |\n| --- | --- | ---: | ---: | ---: |\n");
  double full = 0.0;
  const char* only = getenv("KO_MASKS");  /* e.g. "0,16": just these masks of the table */
  for (size_t i = 0; i < sizeof masks / sizeof masks[0]; ++i) {
    if (only) {
      bool want = false;
      for (const char* p = only; *p;) {
        char* e = nullptr;
        const unsigned long v = strtoul(p, &e, 0);
        if (e == p) break;
        want = want || v == masks[i];
        p = *e == ',' ? e + 1 : e;
      }
      if (!want) continue;
    }
    char buf[32];
    snprintf(buf, sizeof buf, "0x%x", masks[i]);
    setenv("FH_PROFILE_KNOCKOUT", buf, 1);
    gpu.default_config(&c);
    c.backend = 1;
    if (batch > 0) c.batch_size = batch;
    fh_trainer* t = make(gpu, c, M, "knockout");
    if (!t) break;
    std::vector<double> v;
    for (int e = 0; e < epochs + 1; ++e) {
      fh_epoch_stats s{};
      if (gpu.run_epoch(t, &s) != FH_OK) {
        printf("FAIL  knockout %s epoch %d: %s\n", buf, e + 1, gpu.last_error(t));
        ++g_fail;
        break;
      }
      if (e > 0) v.push_back(s.train_ms);
    }
    gpu.destroy(t);
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    const double ms = v[v.size() / 2], per = ms / c.train_steps * 1e3;
    if (i == 0) full = per;
    printf("| %s | %s | %.2f | %.1f us | %.1f us |\n", names[i], buf, ms, per, full - per);
  }
  unsetenv("FH_PROFILE_KNOCKOUT");
}

/* ---------------------------------------------------------------- fused evaluation vs the cuBLASLt loop */

static const char* const kMetricNames[] = {"sharpe", "sortino", "max_drawdown", "max_drawdown_pct", "profit_factor",
                                           "total_pnl", "trades", "win_rate", "turnover", "sessions"};

static bool metrics_same(const fh_metrics& a, const fh_metrics& b, bool print) {
  const double* x = reinterpret_cast<const double*>(&a);
  const double* y = reinterpret_cast<const double*>(&b);
  bool same = true;
  for (int i = 0; i < 10; ++i) {
    const bool eq = x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]));
    if (!eq && print) printf("      %s: %.17g vs %.17g\n", kMetricNames[i], x[i], y[i]);
    same = same && eq;
  }
  return same;
}

/* Random weights (uniform +-0.1 where the initial parameter is non-zero: biases and pad rows stay 0),
 * so the greedy policy trades. */
static std::vector<float> eval_weights(Lib& gpu, const fh_config& base, const Market& M, uint64_t seed) {
  fh_config c = base;
  c.n_envs = 64;
  c.batch_size = 128;
  c.batch_cap = 128;
  c.replay_capacity = 64 * 64;
  c.use_graphs = 0;
  fh_trainer* t = make(gpu, c, M, "weights");
  if (!t) return {};
  fh_info info;
  gpu.info(t, &info);
  std::vector<float> w((size_t)info.n_params);
  gpu.get_params(t, 0, w.data(), info.n_params);
  gpu.destroy(t);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  for (auto& x : w) x = x == 0.0f ? 0.0f : u(rng);
  return w;
}

/* One configuration: both paths through fh_cuda_eval_check, then the comparisons. Returns the
 * metrics of both paths through ref/fus. */
static bool eval_fused_case(Lib& gpu, const fh_config& c, const Market& M, const std::vector<float>& w, const char* tag,
                            fh_metrics* ref_out, fh_metrics* fus_out) {
  char name[200], err[512];
  int32_t ir[4] = {0, 0, 0, 0}, ifu[4] = {0, 0, 0, 0};
  fh_metrics mr{}, mf{};
  /* sizes first (a run without the Q log) */
  err[0] = 0;
  fh_status s0 = gpu.eval_check(&c, &M.m, w.data(), (int64_t)w.size(), 1, &mf, ifu, nullptr, 0, err, sizeof err);
  snprintf(name, sizeof name, "[%s] fused evaluation runs and is used", tag);
  check(s0 == FH_OK && ifu[3] == 1, name, "S %g, steps %g", ifu[0], ifu[1]);
  if (s0 != FH_OK || ifu[3] != 1) {
    printf("      %s\n", err);
    return false;
  }
  const int S = ifu[0], T = ifu[1], NQ = ifu[2];
  const size_t n = (size_t)T * S * NQ;
  std::vector<float> qr(n, NAN), qf(n, NAN);
  err[0] = 0;
  auto t0 = std::chrono::steady_clock::now();
  fh_status s1 = gpu.eval_check(&c, &M.m, w.data(), (int64_t)w.size(), 0, &mr, ir, qr.data(), (int64_t)n, err, sizeof err);
  if (s1 != FH_OK) printf("      cuBLASLt path: %s\n", err);
  auto t1 = std::chrono::steady_clock::now();
  err[0] = 0;
  fh_metrics mf2{};
  fh_status s2 = gpu.eval_check(&c, &M.m, w.data(), (int64_t)w.size(), 1, &mf2, ifu, qf.data(), (int64_t)n, err, sizeof err);
  if (s2 != FH_OK) printf("      fused path: %s\n", err);
  auto t2 = std::chrono::steady_clock::now();
  printf("      [%s] S %d, steps %d, Q columns %d; check calls %.0f ms (cuBLASLt, eager, Q logged) / %.0f ms (fused)\n", tag,
         S, T, NQ, std::chrono::duration<double, std::milli>(t1 - t0).count(),
         std::chrono::duration<double, std::milli>(t2 - t1).count());
  snprintf(name, sizeof name, "[%s] both paths run with the Q log", tag);
  check(s1 == FH_OK && s2 == FH_OK && ir[3] == 0 && ifu[3] == 1, name);
  if (s1 != FH_OK || s2 != FH_OK) return false;
  snprintf(name, sizeof name, "[%s] fused path deterministic (metrics of two runs identical)", tag);
  check(metrics_same(mf, mf2, true), name);
  /* Q of the first step */
  {
    double num = 0, den = 0, mx = 0, qmax = 0;
    bool fin = true;
    for (size_t i = 0; i < (size_t)S * NQ; ++i) {
      fin = fin && std::isfinite(qr[i]) && std::isfinite(qf[i]);
      const double d = (double)qf[i] - qr[i];
      num += d * d;
      den += (double)qr[i] * qr[i];
      mx = std::max(mx, std::fabs(d));
      qmax = std::max(qmax, std::fabs((double)qr[i]));
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    snprintf(name, sizeof name, "[%s] Q of the first step: fused vs cuBLASLt rel L2 < 1e-2 (max |dQ| %.3g, max |Q| %.3g)",
             tag, mx, qmax);
    check(fin && rel < 1e-2, name, "rel %.3g", rel);
  }
  /* greedy flips: per segment the first step where a branch's argmax differs; before it both paths saw
   * the same trajectory, so their Q must agree; at it the reference's two actions must be a near-tie */
  auto argmax = [&](const float* q, int off, int nd) {
    int b = 0;
    for (int j = 1; j < nd; ++j)
      if (q[off + j] > q[off + b]) b = j;
    return b;
  };
  const int nb[3] = {c.branch_sizes[0], c.branch_sizes[1], c.branch_sizes[2]};
  int flipped = 0, bad_flips = 0;
  double num = 0, den = 0, mx = 0, worst_gap = 0, worst_tol = 0;
  for (int k = 0; k < S; ++k) {
    bool flip = false;
    for (int i = 0; i < T && !flip; ++i) {
      const float* a = &qr[((size_t)i * S + k) * NQ];
      const float* b = &qf[((size_t)i * S + k) * NQ];
      for (int j = 0; j < NQ; ++j) {
        const double d = (double)b[j] - a[j];
        num += d * d;
        den += (double)a[j] * a[j];
        mx = std::max(mx, std::fabs(d));
      }
      int off = 0;
      for (int d = 0; d < 3; ++d) {
        const int ar = argmax(a, off, nb[d]), af = argmax(b, off, nb[d]);
        if (ar != af && !flip) {
          flip = true;
          ++flipped;
          double qm = 0;
          for (int j = 0; j < NQ; ++j) qm = std::max(qm, std::fabs((double)a[j]));
          const double gap = std::fabs((double)a[off + ar] - a[off + af]);
          const double tol = 2e-3 * (1.0 + qm);
          if (gap > tol) ++bad_flips;
          if (gap > worst_gap) {
            worst_gap = gap;
            worst_tol = tol;
          }
          if (flipped <= 5)
            printf("      [%s] segment %d: first greedy flip at step %d branch %d (%d vs %d), reference Q gap %.3g\n", tag,
                   k, i, d, ar, af, gap);
        }
        off += nb[d];
      }
    }
  }
  const double rel_all = den > 0 ? sqrt(num / den) : sqrt(num);
  snprintf(name, sizeof name, "[%s] Q of every step up to each segment's first flip: rel L2 < 1e-2 (max |dQ| %.3g)", tag,
           mx);
  check(rel_all < 1e-2, name, "rel %.3g", rel_all);
  snprintf(name, sizeof name, "[%s] every greedy flip is a near-tie (%d of %d segments flipped)", tag, flipped, S);
  check(bad_flips == 0, name, "worst gap %.3g, tol %.3g", worst_gap, worst_tol);
  const bool same = metrics_same(mr, mf, flipped == 0);
  if (flipped == 0) {
    snprintf(name, sizeof name, "[%s] no flip: evaluation metrics identical", tag);
    check(same, name, "pnl %.2f, trades %g", mr.total_pnl, mr.trades);
  } else {
    printf("INFO  [%s] %d segment(s) flipped on near-ties: metrics %s (pnl %.2f vs %.2f, trades %g vs %g)\n", tag, flipped,
           same ? "identical" : "differ", mr.total_pnl, mf.total_pnl, mr.trades, mf.trades);
  }
  printf("      [%s] cuBLASLt: pnl %.2f trades %g sharpe %.4f | fused: pnl %.2f trades %g sharpe %.4f\n", tag, mr.total_pnl,
         mr.trades, mr.sharpe, mf.total_pnl, mf.trades, mf.sharpe);
  if (ref_out) *ref_out = mr;
  if (fus_out) *fus_out = mf;
  return true;
}

/* The fused evaluation with FH_EVAL_PRELOAD=0 (the one-thread env step after the expected Q) against
 * the default speculative step (every action class stepped beside the expected Q on preloaded bars, the
 * greedy one kept): the same trajectory to the bit, so identical metrics (memcmp) and identical expected
 * Q at every step (the account features feed the next step's Q). */
static void eval_preload_case(Lib& gpu, const fh_config& c, const Market& M, const std::vector<float>& w,
                              const char* tag) {
  char name[200], err[512];
  const char* prev_env = getenv("FH_EVAL_PRELOAD");
  const std::string prev = prev_env ? prev_env : "";
  int32_t info[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  fh_metrics mt[2];
  memset(mt, 0, sizeof mt);
  /* sizes (and the first-layer GEMM's tuning, cached per process, so both runs below use one algorithm) */
  err[0] = 0;
  unsetenv("FH_EVAL_PRELOAD");
  fh_status s0 = gpu.eval_check(&c, &M.m, w.data(), (int64_t)w.size(), 1, &mt[1], info[1], nullptr, 0, err, sizeof err);
  if (s0 != FH_OK || info[1][3] != 1) {
    snprintf(name, sizeof name, "[%s] FH_EVAL_PRELOAD: fused evaluation runs", tag);
    check(false, name);
    printf("      %s\n", err);
    if (prev_env) setenv("FH_EVAL_PRELOAD", prev.c_str(), 1);
    return;
  }
  const size_t n = (size_t)info[1][0] * info[1][1] * info[1][2];
  std::vector<float> q[2] = {std::vector<float>(n, NAN), std::vector<float>(n, NAN)};
  fh_status st[2];
  double ms[2];
  for (int on = 0; on <= 1; ++on) {
    if (on)
      unsetenv("FH_EVAL_PRELOAD");
    else
      setenv("FH_EVAL_PRELOAD", "0", 1);
    err[0] = 0;
    memset(&mt[on], 0, sizeof mt[on]);
    const auto t0 = std::chrono::steady_clock::now();
    st[on] = gpu.eval_check(&c, &M.m, w.data(), (int64_t)w.size(), 1, &mt[on], info[on], q[on].data(), (int64_t)n, err,
                            sizeof err);
    ms[on] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (st[on] != FH_OK) printf("      FH_EVAL_PRELOAD=%d: %s\n", on, err);
  }
  if (prev_env)
    setenv("FH_EVAL_PRELOAD", prev.c_str(), 1);
  else
    unsetenv("FH_EVAL_PRELOAD");
  snprintf(name, sizeof name, "[%s] fused evaluation runs with FH_EVAL_PRELOAD=0 and =1", tag);
  check(st[0] == FH_OK && st[1] == FH_OK && info[0][3] == 1 && info[1][3] == 1, name, "%.0f ms / %.0f ms", ms[0], ms[1]);
  if (st[0] != FH_OK || st[1] != FH_OK) return;
  snprintf(name, sizeof name, "[%s] FH_EVAL_PRELOAD=0 vs 1: metrics identical bit for bit", tag);
  const bool msame = memcmp(&mt[0], &mt[1], sizeof(fh_metrics)) == 0;
  if (!msame) metrics_same(mt[0], mt[1], true);
  check(msame, name, "pnl %.2f, trades %g", mt[1].total_pnl, mt[1].trades);
  size_t ndiff = 0, first = n;
  for (size_t i = 0; i < n; ++i)
    if (memcmp(&q[0][i], &q[1][i], sizeof(float)) != 0) {
      if (first == n) first = i;
      ++ndiff;
    }
  snprintf(name, sizeof name, "[%s] FH_EVAL_PRELOAD=0 vs 1: expected Q of every step identical bit for bit (%zu values)",
           tag, n);
  check(ndiff == 0, name, "%g differ, the first at step %g", (double)ndiff,
        first < n ? (double)(first / ((size_t)info[1][0] * info[1][2])) : -1.0);
}

static void eval_fused_check(Lib& gpu, const Market& Msmall, uint64_t seed) {
  if (!gpu.eval_check) {
    printf("FAIL  fh_cuda_eval_check missing from the CUDA library\n");
    ++g_fail;
    return;
  }
  /* small config, C51 and plain Q; then the trainer with FH_EVAL_FUSED=0/1 against the matching path */
  for (int atoms : {51, 1}) {
    fh_config c = small_config(gpu, 1, 0, 1, atoms);
    c.train_steps = 0;
    std::vector<float> w = eval_weights(gpu, c, Msmall, seed + atoms);
    if (w.empty()) return;
    char tag[64];
    snprintf(tag, sizeof tag, "small atoms=%d", atoms);
    fh_metrics mr{}, mf{};
    if (!eval_fused_case(gpu, c, Msmall, w, tag, &mr, &mf)) continue;
    eval_preload_case(gpu, c, Msmall, w, tag);
    for (int fused = 0; fused <= 1; ++fused) {
      setenv("FH_EVAL_FUSED", fused ? "1" : "0", 1);
      fh_trainer* t = make(gpu, c, Msmall, fused ? "trainer FH_EVAL_FUSED=1" : "trainer FH_EVAL_FUSED=0");
      unsetenv("FH_EVAL_FUSED");
      if (!t) continue;
      fh_info info;
      gpu.info(t, &info);
      gpu.set_params(t, 0, w.data(), (int64_t)w.size());
      gpu.set_params(t, 1, w.data(), (int64_t)w.size());
      fh_epoch_stats st{};
      fh_status s = gpu.run_epoch(t, &st);
      if (s != FH_OK) printf("      run_epoch: %s\n", gpu.last_error(t));
      char name[200];
      snprintf(name, sizeof name, "[%s] trainer FH_EVAL_FUSED=%d (graphs on): val metrics == the %s path's", tag, fused,
               fused ? "fused" : "cuBLASLt");
      check(s == FH_OK && metrics_same(st.val, fused ? mf : mr, true), name, "eval %.2f ms, syncs %g", st.eval_ms,
            st.host_syncs);
      gpu.destroy(t);
    }
  }
  /* the reference shapes: D = 1032, 512/256, 4 heads of 128, 51 atoms, 128 segments of ~1380 bars */
  {
    fh_config c;
    gpu.default_config(&c);
    c.backend = 1;
    c.eval_segments = 128;
    Market M;
    make_market(M, 640 * 1380, 16, c.window, seed + 3, 1380);  /* val: 128 whole sessions */
    std::vector<float> w = eval_weights(gpu, c, M, seed + 5);
    if (!w.empty() && eval_fused_case(gpu, c, M, w, "reference", nullptr, nullptr))
      eval_preload_case(gpu, c, M, w, "reference");
    /* 101 segments, as the reference run's validation has: the last tile's 5 rows leave blocks 5-7 of its cluster
     * no owned row (no logits to receive; an mbarrier armed for 0 bytes hung the exchange once) */
    c.eval_segments = 101;
    if (!w.empty()) eval_fused_case(gpu, c, M, w, "reference S=101", nullptr, nullptr);
  }
}

/* A short reference-shaped run for ncu: profiling is switched on (cuProfilerStart) only around the
 * second epoch, which has 2 collection steps, 3 train steps and a short evaluation. */
static void profile_run(Lib& gpu) {
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  int (*prof_start)(void) = cu ? reinterpret_cast<int (*)(void)>(dlsym(cu, "cuProfilerStart")) : nullptr;
  int (*prof_stop)(void) = cu ? reinterpret_cast<int (*)(void)>(dlsym(cu, "cuProfilerStop")) : nullptr;
  fh_config c;
  gpu.default_config(&c);
  c.backend = 1;
  c.use_graphs = getenv("FH_PROFILE_GRAPHS") ? 1 : 0;
  c.episode_len = 2;
  const char* ps = getenv("FH_PROFILE_STEPS"); /* train steps of the profiled epoch (default 3) */
  c.train_steps = ps && atoi(ps) > 0 ? atoi(ps) : 3;
  c.n_step = 1;
  Market M;
  make_market(M, 40000, 16, c.window, 5, 1380);
  fh_trainer* t = make(gpu, c, M, "profile");
  if (!t) return;
  fh_epoch_stats s{};
  gpu.run_epoch(t, &s);
  if (prof_start) prof_start();
  fh_status st = gpu.run_epoch(t, &s);
  if (prof_stop) prof_stop();
  printf("profile epoch: status %d, collect %.2f train %.2f eval %.2f ms\n", (int)st, s.collect_ms, s.train_ms, s.eval_ms);
  gpu.destroy(t);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s compare|graphs|small|bench|profile|evalfused|knockout <build dir> [epochs] [batch]\n", argv[0]);
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);  /* line-buffered: a sanitizer-killed run still shows how far it got */
  const std::string mode = argv[1], dir = argv[2];
  Lib gpu, cpu;
  if (!load_lib(dir + "/libfoxhunt_cuda.so", gpu)) return 100;
  const bool have_cpu = load_lib(dir + "/libfoxhunt_cpu.so", cpu);
  const char* es = getenv("FH_SEED");
  const uint64_t seed = es ? strtoull(es, nullptr, 10) : (uint64_t)time(nullptr);
  printf("seed %llu\n", (unsigned long long)seed);
  Market M;
  make_market(M, 20000, 4, 8, seed, 390);
  if (mode == "compare" || mode == "all") {
    if (!have_cpu) {
      printf("FAIL  CPU library missing: cannot compare\n");
      ++g_fail;
    } else {
      for (int det = 1; det >= 0; --det)
        for (int atoms : {51, 1}) compare_one(cpu, gpu, M, det, atoms, seed + det * 10 + atoms);
    }
  }
  if (mode == "graphs" || mode == "all") graphs_check(gpu, have_cpu ? &cpu : nullptr, M);
  if (mode == "small") small_run(gpu, M);
  if (mode == "profile") profile_run(gpu);
  if (mode == "evalfused") eval_fused_check(gpu, M, seed);
  if (mode == "bench" || mode == "all") bench(gpu, argc > 3 ? atoi(argv[3]) : 7);
  if (mode == "knockout") knockout(gpu, argc > 3 ? atoi(argv[3]) : 3, argc > 4 ? atoi(argv[4]) : 0);
  printf("\n%d failure(s)\n", g_fail);
  return g_fail;
}
