/*
 * loss_probe.cu — the bf16 C51 loss kernels of kernels/loss.cu side by side on one random batch (a GPU
 * host tool, no library and no Node): every FH_LOSS_HALF instance against the warp-per-sample kernel
 * (FH_LOSS_HALF=0), with the mismatches of the gradient rows counted by head, action, atom group,
 * sample parity and disc == 0, the first few printed, and each launch timed. Variants "qexact" and "qgeneric" run
 * the instances that take a*_d as given (fh_launch_bdq_loss_astar, FH_SN_ARGMAX's loss), with a*_d the first argmax
 * of the expected Q that the host computes from the same online(s') logits.
 *
 *   nvcc -O3 -lineinfo --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 -Ikernels -Inative/include \
 *     bench/gpu/loss_probe.cu -o loss_probe && ./loss_probe [B] [atoms] [cache rows 0/1] [variants ...]
 *
 * Exit status 0 when every variant named agrees with the warp kernel (bf16 tolerance), 1 otherwise.
 */
#include "../../kernels/loss.cu"
#include "probe_check.cuh"

#include <math.h>
#include <stdio.h>
#include <string>
#include <vector>

extern "C" void fh_cuda_set_error(const char* file, int line, const char* what, const char* detail) {
  fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, detail ? detail : "");
}
extern "C" const char* fh_cuda_last_error_text(void) { return ""; }

#define CK(x) FH_PROBE_CK(x, 2)

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}
static float nrand() { return (float)(sqrt(-2.0 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand())); }

/* bf16 bits <-> float on the host through cuda_bf16.h's host-callable conversions (round to nearest even) */
static float bf2f(uint16_t b) {
  fh_bf16 h;
  memcpy(&h, &b, 2);
  return __bfloat162float(h);
}
static uint16_t f2bf(float f) {
  const fh_bf16 h = __float2bfloat16_rn(f);
  uint16_t b;
  memcpy(&b, &h, 2);
  return b;
}

struct Out {
  std::vector<float> wloss, signal;
  std::vector<uint16_t> g[1 + FH_MAX_BRANCHES];
  std::vector<float> dbg;  /* FH_LOSS_HALF_DEBUG: the first warp's intermediates (kernels/loss.cu) */
  float us = 0;
};

#ifdef FH_LOSS_HALF_DEBUG
/* the slots of fh_loss_half_dbg, per lane */
static const char* dbg_slot(int c, char* buf) {
  static const struct { int at, n; const char* name; } f[] = {
      {0, 10, "q"},    {10, 3, "tm"},  {13, 3, "ts"},      {16, 4, "mj"},   {20, 4, "st"},   {24, 3, "om"},
      {27, 3, "os"},   {30, 1, "lse"}, {31, 4, "xsum"},    {35, 1, "ce"},   {36, 3, "mo0"},  {39, 3, "osel0"},
      {42, 3, "mt0"},  {45, 3, "ad"},  {48, 1, "b_own"},   {49, 4, "xo0"},  {53, 3, "n"},    {56, 1, "nb"},
      {57, 4, "ov"},   {61, 1, "tv0"}, {62, 1, "inv_n1"},  {63, 1, "coef"}};
  for (const auto& x : f)
    if (c >= x.at && c < x.at + x.n) {
      snprintf(buf, 32, "%s[%d]", x.name, c - x.at);
      return buf;
    }
  return "?";
}
#endif

int main(int argc, char** argv) {
  const int B = argc > 1 ? atoi(argv[1]) : 16384;
  const int atoms = argc > 2 ? atoi(argv[2]) : 51;
  const bool cache = argc > 3 ? atoi(argv[3]) != 0 : true;
  std::vector<std::string> variants;
  for (int a = 4; a < argc; ++a) variants.push_back(argv[a]);
  if (variants.empty()) variants = {"packed", "exact4", "exact", "generic", "qexact", "qgeneric"};
  const int nb = 3, n[3] = {3, 4, 3};
  const int ldv = (atoms + 7) / 8 * 8;
  int lda[3];
  for (int d = 0; d < nb; ++d) lda[d] = (n[d] * atoms + 7) / 8 * 8;
  const int heads = 1 + nb, ld[4] = {ldv, lda[0], lda[1], lda[2]};
  const int R = cache ? 2 * B : B;  /* target rows: the cache has more rows than the batch */

  /* inputs: three head views (online(s), online(s'), target(s')), act, ret, disc, weight */
  std::vector<uint16_t> hv[3][4];
  for (int v = 0; v < 3; ++v)
    for (int h = 0; h < heads; ++h) {
      const int rows = v == 2 ? R : B;
      hv[v][h].resize((size_t)rows * ld[h]);
      for (auto& x : hv[v][h]) x = f2bf(1.5f * nrand());
    }
  std::vector<int32_t> act((size_t)B * 3), rows(B);
  std::vector<float> ret(B), disc(B), weight(B);
  int disc0 = 0;
  for (int i = 0; i < B; ++i) {
    for (int d = 0; d < 3; ++d) act[(size_t)i * 3 + d] = (int)(urand() * n[d]);
    ret[i] = 2.0f * nrand();
    disc[i] = urand() < 0.2 ? 0.0f : 0.970299f;
    disc0 += disc[i] == 0.0f;
    weight[i] = 0.2f + 0.8f * (float)urand();
    rows[i] = cache ? (int)(urand() * R) : i;
  }
  const float vmin = -10.0f, vmax = 10.0f;
  /* a*_d of every sample from online(s')'s logits (view 1), in double: V + A_a - mean A, softmax, sum p z, first max */
  std::vector<uint8_t> astar(B);
  for (int i = 0; i < B; ++i) {
    uint32_t packed = 0;
    for (int d = 0; d < nb; ++d) {
      const uint16_t* arow = &hv[1][1 + d][(size_t)i * lda[d]];
      double mean[64];
      for (int j = 0; j < atoms; ++j) {
        mean[j] = 0;
        for (int b = 0; b < n[d]; ++b) mean[j] += bf2f(arow[b * atoms + j]);
        mean[j] /= n[d];
      }
      double best = -INFINITY;
      int bi = 0;
      for (int a = 0; a < n[d]; ++a) {
        double mx = -INFINITY, x[64];
        for (int j = 0; j < atoms; ++j) {
          x[j] = bf2f(hv[1][0][(size_t)i * ldv + j]) + bf2f(arow[a * atoms + j]) - mean[j];
          mx = fmax(mx, x[j]);
        }
        double S = 0, A = 0;
        for (int j = 0; j < atoms; ++j) {
          const double e = exp(x[j] - mx);
          S += e;
          A += e * (vmin + j * (vmax - vmin) / (atoms - 1));
        }
        if (A / S > best) {
          best = A / S;
          bi = a;
        }
      }
      packed |= (uint32_t)bi << (2 * d);
    }
    astar[i] = (uint8_t)packed;
  }

  void* dv[3][4];
  for (int v = 0; v < 3; ++v)
    for (int h = 0; h < heads; ++h) {
      CK(cudaMalloc(&dv[v][h], hv[v][h].size() * 2));
      CK(cudaMemcpy(dv[v][h], hv[v][h].data(), hv[v][h].size() * 2, cudaMemcpyHostToDevice));
    }
  uint8_t* d_astar;
  CK(cudaMalloc(&d_astar, B));
  CK(cudaMemcpy(d_astar, astar.data(), B, cudaMemcpyHostToDevice));
  int32_t *d_act, *d_rows;
  float *d_ret, *d_disc, *d_w, *d_wloss, *d_signal;
  void* d_g[4];
  CK(cudaMalloc(&d_act, act.size() * 4));
  CK(cudaMalloc(&d_rows, rows.size() * 4));
  CK(cudaMalloc(&d_ret, B * 4));
  CK(cudaMalloc(&d_disc, B * 4));
  CK(cudaMalloc(&d_w, B * 4));
  CK(cudaMalloc(&d_wloss, B * 4));
  CK(cudaMalloc(&d_signal, B * 4));
  for (int h = 0; h < heads; ++h) CK(cudaMalloc(&d_g[h], (size_t)B * ld[h] * 2));
  CK(cudaMemcpy(d_act, act.data(), act.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_rows, rows.data(), rows.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_ret, ret.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_disc, disc.data(), B * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_w, weight.data(), B * 4, cudaMemcpyHostToDevice));

  auto view = [&](int v) {
    fh_heads_view_t<fh_bf16> x{};
    x.v = (const fh_bf16*)dv[v][0];
    x.ldv = ldv;
    for (int d = 0; d < nb; ++d) {
      x.a[d] = (const fh_bf16*)dv[v][1 + d];
      x.lda[d] = lda[d];
      x.n[d] = n[d];
    }
    x.nb = nb;
    x.atoms = atoms;
    x.v_min = vmin;
    x.v_max = vmax;
    x.rows = v == 2 && cache ? d_rows : nullptr;
    return x;
  };
  fh_heads_grad<fh_bf16> g{};
  g.v = (fh_bf16*)d_g[0];
  g.ldv = ldv;
  for (int d = 0; d < nb; ++d) {
    g.a[d] = (fh_bf16*)d_g[1 + d];
    g.lda[d] = lda[d];
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  /* "q..." variants: the a*_d-given instances (qexact: the reference sizes compiled in, qgeneric: run-time sizes) */
  auto launch = [&](const std::string& half) -> fh_status {
    if (half[0] == 'q')
      return fh_launch_bdq_loss_astar(view(0), view(2), d_astar, d_act, d_ret, d_disc, d_w, B, d_wloss, d_signal, g, 0);
    return fh_launch_bdq_loss<fh_bf16, fh_bf16>(view(0), view(1), view(2), d_act, d_ret, d_disc, d_w, B, 1.0f, d_wloss,
                                                d_signal, g, 0);
  };
  auto run = [&](const std::string& half, Out& o) -> int {
    setenv("FH_LOSS_HALF", half == "qexact" ? "exact" : half == "qgeneric" ? "generic" : half.c_str(), 1);
    for (int h = 0; h < heads; ++h) CK(cudaMemset(d_g[h], 0xFF, (size_t)B * ld[h] * 2));  /* NaN: unwritten */
    CK(cudaMemset(d_wloss, 0xFF, B * 4));
    CK(cudaMemset(d_signal, 0xFF, B * 4));
    if (launch(half) != FH_OK) return 3;
    CK(cudaDeviceSynchronize());
    o.wloss.resize(B);
    o.signal.resize(B);
    CK(cudaMemcpy(o.wloss.data(), d_wloss, B * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(o.signal.data(), d_signal, B * 4, cudaMemcpyDeviceToHost));
    for (int h = 0; h < heads; ++h) {
      o.g[h].resize((size_t)B * ld[h]);
      CK(cudaMemcpy(o.g[h].data(), d_g[h], o.g[h].size() * 2, cudaMemcpyDeviceToHost));
    }
#ifdef FH_LOSS_HALF_DEBUG
    o.dbg.resize(32 * 64);
    CK(cudaMemcpyFromSymbol(o.dbg.data(), fh_loss_half_dbg, o.dbg.size() * 4));
#endif
    const int reps = 50;
    CK(cudaEventRecord(e0));
    for (int r = 0; r < reps; ++r) launch(half);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    o.us = ms * 1000.0f / reps;
    return 0;
  };

  Out ref;
  if (int rc = run("0", ref)) return rc;
  printf("loss probe: B %d, atoms %d, branches 3,4,3, target rows %s, disc 0 in %d samples\n", B, atoms,
         cache ? "through a row map" : "direct", disc0);
  printf("%-10s %9s %12s %12s %12s %10s %10s\n", "variant", "us", "max|dwloss|", "max|dsig|", "grad relL2", "bad grad",
         "unwritten");
  printf("%-10s %9.2f\n", "warp", ref.us);
  bool all_ok = true;
  Out packed_run;
  for (const auto& v : variants) {
    Out o;
    if (int rc = run(v, o)) return rc;
#ifdef FH_LOSS_HALF_DEBUG
    if (v == "packed") packed_run = o;
    else if (!packed_run.dbg.empty()) {
      /* the intermediates of samples 0 and 1 (lanes 0..15, 16..31) against the packed instance's */
      int shown = 0;
      char buf[32];
      for (int c = 0; c < 64 && shown < 40; ++c)
        for (int l = 0; l < 32 && shown < 40; ++l) {
          const float x = o.dbg[l * 64 + c], y = packed_run.dbg[l * 64 + c];
          if (!(x == y) && !(x != x && y != y)) {
            printf("  dbg %s lane %2d %-9s %.7g vs packed %.7g\n", v.c_str(), l, dbg_slot(c, buf), x, y);
            ++shown;
            break; /* the first lane that differs, per slot */
          }
        }
      if (!shown) printf("  dbg %s: the first warp's intermediates equal the packed instance's\n", v.c_str());
    }
#endif
    double dw = 0, ds = 0, num = 0, den = 0;
    long bad = 0, unwritten = 0;
    /* mismatch counts: by head (v, a0, a1, a2), action (0..3), atom group (col % atoms) / 16, parity, disc 0 */
    long by_head[4] = {}, by_act[4] = {}, by_k[4] = {}, by_par[2] = {}, by_disc0[2] = {}, by_pad = 0;
    long bad_loss = 0;
    int printed = 0;
    for (int i = 0; i < B; ++i) {
      const double a = fabs((double)o.wloss[i] - ref.wloss[i]), b = fabs((double)o.signal[i] - ref.signal[i]);
      dw = fmax(dw, a);
      ds = fmax(ds, b);
      if (!(b <= 1e-3 * fmax(1.0, fabs(ref.signal[i])))) {
        ++bad_loss;
        if (printed < 6) {
          printf("  %s: sample %d signal %.6g vs %.6g (disc %g)\n", v.c_str(), i, o.signal[i], ref.signal[i], disc[i]);
          ++printed;
        }
      }
    }
    printed = 0;
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < B; ++i)
        for (int c = 0; c < ld[h]; ++c) {
          const size_t e = (size_t)i * ld[h] + c;
          const uint16_t xb = o.g[h][e], yb = ref.g[h][e];
          if (xb == 0xFFFFu) ++unwritten;
          const float x = bf2f(xb), y = bf2f(yb);
          num += ((double)x - y) * ((double)x - y);
          den += (double)y * y;
          const double tol = 1e-2 * fabs((double)y) + 1e-6;
          if (!(fabs((double)x - y) <= tol)) {
            ++bad;
            const bool pad = h == 0 ? c >= atoms : c >= n[h - 1] * atoms;
            if (pad) ++by_pad;
            else {
              by_head[h]++;
              if (h > 0) by_act[c / atoms]++;
              by_k[(c % atoms) / 16]++;
            }
            by_par[i & 1]++;
            by_disc0[disc[i] == 0.0f]++;
            if (printed < 8) {
              printf("  %s: head %d sample %d col %d (act %d atom %d) %.6g vs %.6g; act %d,%d,%d disc %g\n", v.c_str(), h,
                     i, c, h ? c / atoms : 0, c % atoms, x, y, act[i * 3], act[i * 3 + 1], act[i * 3 + 2], disc[i]);
              ++printed;
            }
          }
        }
    const double rel = den > 0 ? sqrt(num / den) : 0;
    const bool ok = rel < 1e-2 && unwritten == 0 && bad_loss == 0;
    all_ok = all_ok && ok;
    printf("%-10s %9.2f %12.3g %12.3g %12.3g %10ld %10ld %s\n", v.c_str(), o.us, dw, ds, rel, bad, unwritten,
           ok ? "ok" : "MISMATCH");
    if (bad || bad_loss)
      printf("  bad loss rows %ld; bad grad by head v/a0/a1/a2 %ld/%ld/%ld/%ld, pads %ld; by action %ld/%ld/%ld/%ld; "
             "by atom group %ld/%ld/%ld/%ld; even/odd samples %ld/%ld; disc!=0/disc=0 %ld/%ld\n",
             bad_loss, by_head[0], by_head[1], by_head[2], by_head[3], by_pad, by_act[0], by_act[1], by_act[2],
             by_act[3], by_k[0], by_k[1], by_k[2], by_k[3], by_par[0], by_par[1], by_disc0[0], by_disc0[1]);
  }
  return all_ok ? 0 : 1;
}
