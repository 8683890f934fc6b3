/*
 * gemm_probe.cu — the train step's cuBLASLt GEMMs alone, through the library's own wrapper
 * (native/src/cuda/gemm_cublaslt.cpp: the same plan cache and per-shape autotune), at the reference shapes
 * (B 16384, the paired layout's first layer, h1 512, h2 256, four heads of 128, 51 atoms, branches 3, 4, 3).
 * Each forward is timed with and without the ReLU bit-mask output, and the 2B-row layers also as two B-row GEMMs,
 * the second without the mask (FH_PAIR_SN_MASK=split). Each row: the best of 3 rounds of 50 back-to-back launches
 * on one stream, timed with events (inputs warm in L2 where they fit, as in a graph replay), µs per launch.
 * A GPU host tool for planning: bench/gpu/gemm_probe.sh builds and runs it; the table goes to stdout.
 *
 *   gemm_probe [B]
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <functional>
#include <vector>

#include "../../native/src/cuda/gemm_cublaslt.h"
#include "net_kernels.cuh"
#include "probe_check.cuh"

#define CK(x) FH_PROBE_CK(x, 1)

namespace {

void* zeros(size_t bytes) {
  void* d = nullptr;
  if (cudaMalloc(&d, bytes) != cudaSuccess) return nullptr;
  cudaMemset(d, 0, bytes);
  return d;
}

/* µs per launch of fn: best of 3 rounds of `reps` launches, after a warm-up (the first call tunes the shape) */
double timed(cudaStream_t s, const std::function<fh_status()>& fn, bool* ok, int reps = 50) {
  for (int i = 0; i < 5; ++i)
    if (fn() != FH_OK) {
      *ok = false;
      return 0.0;
    }
  const double best = fh_probe_best_us(s, fn, reps);
  *ok = cudaGetLastError() == cudaSuccess;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int B = argc > 1 ? atoi(argv[1]) : 16384;
  if (B <= 0 || B % 8) {
    fprintf(stderr, "gemm_probe: B must be a positive multiple of 8 (got %s)\n", argv[1]);
    return 2;
  }
  const int K1 = 1088, P = 1152, MKT = 64, H1 = 512, H2 = 256, HH = 512, HD = 128;
  const int OUT[4] = {56, 160, 208, 160};
  const int64_t B2 = 2 * (int64_t)B;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fh_gemm* g = nullptr;
  if (fh_gemm_create(&g) != FH_OK) {
    fprintf(stderr, "gemm_probe: fh_gemm_create: %s\n", fh_gemm_last_error());
    return 1;
  }
  void* ws = zeros(fh_gemm_workspace_bytes());
  /* activations and gradients (bf16), weights (bf16), fp32 weight gradients, masks */
  void* x = fh_probe_bf16_buffer((size_t)B * P, 1.0f, 1);
  void* w1 = fh_probe_bf16_buffer((size_t)H1 * K1, 0.03f, 2);
  void* w2 = fh_probe_bf16_buffer((size_t)H2 * H1, 0.05f, 3);
  void* wh = fh_probe_bf16_buffer((size_t)HH * H2, 0.05f, 4);
  void* wo = fh_probe_bf16_buffer((size_t)208 * HD, 0.05f, 5);
  void* bias = fh_probe_bf16_buffer(1024, 0.1f, 6);
  void* a1 = fh_probe_bf16_buffer((size_t)B2 * H1, 1.0f, 7);
  void* a2 = fh_probe_bf16_buffer((size_t)B2 * H2, 1.0f, 8);
  void* ah = fh_probe_bf16_buffer((size_t)B2 * HH, 1.0f, 9);
  const int OUT_ALL = OUT[0] + OUT[1] + OUT[2] + OUT[3];   /* the head outputs side by side: 584 */
  void* lg = zeros((size_t)B2 * OUT_ALL * 2);
  void* wblk = fh_probe_bf16_buffer((size_t)OUT_ALL * HH, 0.05f, 14);  /* (as if) block-diagonal: head k's rows, its K block */
  void* dl = fh_probe_bf16_buffer((size_t)B * 208, 0.01f, 10);
  void* dah = fh_probe_bf16_buffer((size_t)B * HH, 0.01f, 11);
  void* da2 = fh_probe_bf16_buffer((size_t)B * H2, 0.01f, 12);
  void* da1 = fh_probe_bf16_buffer((size_t)B * H1, 0.01f, 13);
  float* dw = static_cast<float*>(zeros((size_t)H1 * 1032 * sizeof(float)));
  const int64_t mld = 512; /* mask bits per row (a multiple of 128 >= every width here) */
  void* mbits = zeros((size_t)B2 * mld / 8);
  if (!ws || !x || !w1 || !w2 || !wh || !wo || !bias || !a1 || !a2 || !ah || !lg || !wblk || !dl || !dah || !da2 || !da1 || !dw ||
      !mbits) {
    fprintf(stderr, "gemm_probe: out of device memory\n");
    return 1;
  }
  const fh_relu_mask none{nullptr, 0}, mask{mbits, mld};
  auto bf = [](void* p, int64_t elems) { return static_cast<char*>(p) + elems * 2; };
  struct row {
    const char* name;
    double flops;
    std::function<fh_status()> fn;
  };
  auto fwd = [&](int M, int N, int K, void* X, int ldx, void* W, void* Y, fh_relu_mask m) {
    return [=]() {
      return fh_gemm_fwd(g, s, ws, FH_BF16, M, N, K, X, ldx, W, bias, FH_EPI_RELU_BIAS, Y, FH_BF16, N, m);
    };
  };
  auto two = [&](std::function<fh_status()> a, std::function<fh_status()> b) {
    return [=]() {
      const fh_status st = a();
      return st != FH_OK ? st : b();
    };
  };
  std::vector<row> rows;
  const double f1 = 2.0 * B * K1 * H1, f2 = 2.0 * B * H1 * H2, fh = 2.0 * B * H2 * HH;
  rows.push_back({"L1 s run (B x 512, K 1088), mask", f1, fwd(B, H1, K1, x, P, w1, a1, mask)});
  rows.push_back({"L1 s run, no mask", f1, fwd(B, H1, K1, x, P, w1, a1, none)});
  rows.push_back({"L1 s' run (market offset), mask", f1, fwd(B, H1, K1, bf(x, MKT), P, w1, bf(a1, (int64_t)B * H1), mask)});
  rows.push_back({"L1 s' run, no mask", f1, fwd(B, H1, K1, bf(x, MKT), P, w1, bf(a1, (int64_t)B * H1), none)});
  rows.push_back({"L2 2B rows (N 256, K 512), mask", 2 * f2, fwd((int)B2, H2, H1, a1, H1, w2, a2, mask)});
  rows.push_back({"L2 2B rows, no mask", 2 * f2, fwd((int)B2, H2, H1, a1, H1, w2, a2, none)});
  rows.push_back({"L2 as B rows mask + B rows no mask", 2 * f2,
                  two(fwd(B, H2, H1, a1, H1, w2, a2, mask),
                      fwd(B, H2, H1, bf(a1, (int64_t)B * H1), H1, w2, bf(a2, (int64_t)B * H2), none))});
  rows.push_back({"heads' hidden 2B rows (N 512, K 256), mask", 2 * fh, fwd((int)B2, HH, H2, a2, H2, wh, ah, mask)});
  rows.push_back({"heads' hidden 2B rows, no mask", 2 * fh, fwd((int)B2, HH, H2, a2, H2, wh, ah, none)});
  rows.push_back({"heads' hidden as B mask + B no mask", 2 * fh,
                  two(fwd(B, HH, H2, a2, H2, wh, ah, mask),
                      fwd(B, HH, H2, bf(a2, (int64_t)B * H2), H2, wh, bf(ah, (int64_t)B * HH), none))});
  for (int k = 0; k < 4; ++k) {
    static char names[4][64];
    snprintf(names[k], sizeof names[k], "head output %d, 2B rows (N %d, K 128)", k, OUT[k]);
    rows.push_back({names[k], 2.0 * B2 * HD * OUT[k], [=]() {
                      return fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, OUT[k], HD, bf(ah, k * HD), HH, wo, bias,
                                         FH_EPI_BIAS, lg, FH_BF16, OUT[k]);
                    }});
  }
  /* the four head outputs as one GEMM over all 512 head activations (a block-diagonal weight: 4x the FLOPs, one
   * launch with K 512 instead of four with K 128); the FLOPs column counts the useful ones */
  rows.push_back({"head outputs as one block-diagonal GEMM (N 584, K 512)", 2.0 * B2 * HD * OUT_ALL, [=]() {
                    return fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, OUT_ALL, HH, ah, HH, wblk, bias, FH_EPI_BIAS, lg,
                                       FH_BF16, OUT_ALL);
                  }});
  rows.push_back({"head outputs as two block-diagonal GEMMs of two heads (N 216 + 368, K 256)", 2.0 * B2 * HD * OUT_ALL,
                  [=]() {
                    const int n0 = OUT[0] + OUT[1], n1 = OUT[2] + OUT[3];
                    const fh_status st = fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, n0, 2 * HD, ah, HH, wblk, bias,
                                                     FH_EPI_BIAS, lg, FH_BF16, OUT_ALL);
                    return st != FH_OK ? st
                                       : fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, n1, 2 * HD, bf(ah, 2 * HD), HH,
                                                     bf(wblk, (int64_t)n0 * 2 * HD), bias, FH_EPI_BIAS, bf(lg, n0),
                                                     FH_BF16, OUT_ALL);
                  }});
  rows.push_back({"the four head outputs back to back (one stream)", 2.0 * B2 * HD * OUT_ALL, [=]() {
                    fh_status st = FH_OK;
                    for (int k = 0; k < 4 && st == FH_OK; ++k)
                      st = fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, OUT[k], HD, bf(ah, k * HD), HH, wo, bias,
                                       FH_EPI_BIAS, lg, FH_BF16, OUT[k]);
                    return st;
                  }});
  /* the four head outputs by the streaming kernel (kernels/heads_out.cu, FH_HEADS_OUT=1), side by side in lg2 */
  int dev = 0;
  cudaDeviceProp prop{};
  cudaGetDevice(&dev);
  cudaGetDeviceProperties(&prop, dev);
  void* lg2 = zeros((size_t)B2 * OUT_ALL * 2);
  fh_heads_out_args ho{};
  ho.A = static_cast<const fh_bf16*>(ah);
  ho.lda = HH;
  ho.heads = 4;
  ho.K = HD;
  ho.M = (int)B2;
  for (int k = 0, off = 0; k < 4; off += OUT[k], ++k) {
    ho.W[k] = static_cast<const fh_bf16*>(wo);
    ho.bias[k] = static_cast<const fh_bf16*>(bias);
    ho.C[k] = static_cast<fh_bf16*>(lg2) + off;
    ho.ldc[k] = OUT_ALL;
    ho.N[k] = OUT[k];
  }
  for (int c = 0; c < FH_HEADS_OUT_CONFIGS; ++c) {
    static char hon[FH_HEADS_OUT_CONFIGS][80];
    snprintf(hon[c], sizeof hon[c], "the four head outputs by the streaming kernel (heads_out.cu, FH_HEADS_OUT=%d)",
             c + 1);
    fh_heads_out_args hc = ho;
    hc.config = c;
    rows.push_back(
        {hon[c], 2.0 * B2 * HD * OUT_ALL, [=]() { return fh_launch_heads_out(hc, prop.multiProcessorCount, s); }});
  }
  for (int k = 0; k < 4; ++k) {
    static char dxn[4][64], dwn[4][64];
    snprintf(dxn[k], sizeof dxn[k], "head output %d dX (B x 128, K %d)", k, OUT[k]);
    snprintf(dwn[k], sizeof dwn[k], "head output %d dW (%d x 128, K B)", k, OUT[k]);
    rows.push_back({dxn[k], 2.0 * B * HD * OUT[k], [=]() {
                      return fh_gemm_dx(g, s, ws, FH_BF16, B, OUT[k], HD, dl, OUT[k], wo, bf(dah, k * HD), FH_BF16, HH);
                    }});
    rows.push_back({dwn[k], 2.0 * B * HD * OUT[k], [=]() {
                      return fh_gemm_dw(g, s, ws, FH_BF16, B, OUT[k], HD, dl, OUT[k], bf(ah, k * HD), HH, dw);
                    }});
  }
  rows.push_back({"heads' hidden dW (512 x 256, K B)", fh,
                  [=]() { return fh_gemm_dw(g, s, ws, FH_BF16, B, HH, H2, dah, HH, a2, H2, dw); }});
  rows.push_back({"heads' hidden dX (B x 256, K 512)", fh,
                  [=]() { return fh_gemm_dx(g, s, ws, FH_BF16, B, HH, H2, dah, HH, wh, da2, FH_BF16, H2); }});
  rows.push_back({"L2 dW (256 x 512, K B)", f2,
                  [=]() { return fh_gemm_dw(g, s, ws, FH_BF16, B, H2, H1, da2, H2, a1, H1, dw); }});
  rows.push_back({"L2 dX (B x 512, K 256)", f2,
                  [=]() { return fh_gemm_dx(g, s, ws, FH_BF16, B, H2, H1, da2, H2, w2, da1, FH_BF16, H1); }});
  rows.push_back({"L1 dW market (512 x 1024, K B)", 2.0 * B * 1024 * H1, [=]() {
                    return fh_gemm_dw(g, s, ws, FH_BF16, B, H1, 1024, da1, H1, bf(x, MKT), P, dw, nullptr, 1032);
                  }});
  rows.push_back({"L1 dW account (512 x 8, K B)", 2.0 * B * 8 * H1,
                  [=]() { return fh_gemm_dw(g, s, ws, FH_BF16, B, H1, 8, da1, H1, x, P, dw + 1024, nullptr, 1032); }});
  printf("gemm_probe: %s, B %d, the library's cuBLASLt wrapper (autotuned per shape)\n", prop.name, B);
  int bad = 0;
  /* each configuration of the streaming kernel against cuBLASLt's four GEMMs, both side by side (ld 584): bf16
   * results that differ by more than 2 ulps of the larger (the fp32 sums' order differs) (+ 1e-3: a sum that
   * cancels) count as mismatches */
  for (int c = 0; c < FH_HEADS_OUT_CONFIGS; ++c) {
    fh_heads_out_args hc = ho;
    hc.config = c;
    CK(cudaMemset(lg2, 0xff, (size_t)B2 * OUT_ALL * 2)); /* NaN: a value the kernel leaves unwritten shows */
    fh_status st = fh_launch_heads_out(hc, prop.multiProcessorCount, s);
    for (int k = 0, off = 0; k < 4 && st == FH_OK; off += OUT[k], ++k)
      st = fh_gemm_fwd(g, s, ws, FH_BF16, (int)B2, OUT[k], HD, bf(ah, k * HD), HH, wo, bias, FH_EPI_BIAS, bf(lg, off),
                       FH_BF16, OUT_ALL);
    CK(cudaStreamSynchronize(s));
    std::vector<__nv_bfloat16> y0((size_t)B2 * OUT_ALL), y1((size_t)B2 * OUT_ALL);
    CK(cudaMemcpy(y0.data(), lg, y0.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y1.data(), lg2, y1.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0.0, ymax = 0.0;
    size_t mism = 0;
    for (size_t i = 0; i < y0.size(); ++i) {
      const double a = __bfloat162float(y0[i]), b = __bfloat162float(y1[i]);
      const double d = fabs(a - b), m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
      if (d > worst) worst = d;
      if (m > ymax) ymax = m;
      if (!(d <= 2.0 * m / 128.0 + 1e-3)) ++mism; /* NaN counts */
    }
    printf("heads_out check FH_HEADS_OUT=%d: %s, max |streamed - cuBLASLt| %.3g (max |y| %.3g), %zu of %zu beyond 2 bf16 "
           "ulps + 1e-3\n",
           c + 1, st == FH_OK ? "ran" : "FAILED", worst, ymax, mism, y0.size());
    if (st != FH_OK || mism) ++bad;
  }
  printf("| GEMM | us | TFLOP/s |\n| --- | ---: | ---: |\n");
  for (const row& r : rows) {
    bool ok = true;
    const double us = timed(s, r.fn, &ok);
    if (!ok) {
      printf("| %s | failed: %s | |\n", r.name, fh_gemm_last_error());
      ++bad;
      continue;
    }
    printf("| %s | %.1f | %.0f |\n", r.name, us, r.flops / us / 1e6);
  }
  fh_gemm_destroy(g);
  return bad ? 1 : 0;
}
