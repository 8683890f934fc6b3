/*
 * colsum_probe.cu — the finish of kernels/net.cu's column sums (fh_launch_colsum_finish and the multi-problem
 * launch) on random partials (a GPU host tool, no library and no Node): each result checked bit for bit against the
 * host's replay of its order (lane l of a column sums chunks l, l + 32, ... in order, then fh_warp_sum's xor-tree),
 * and timed against the one-warp-per-column finish it replaced (kept here as the reference kernel).
 *
 *   nvcc -O3 --expt-relaxed-constexpr -std=c++17 -gencode=arch=compute_90,code=sm_90 -Ikernels -Inative/include \
 *     -Inative/src/common bench/gpu/colsum_probe.cu -o colsum_probe && ./colsum_probe
 *
 * Prints a table (shape, µs per launch of each, bit-identical or not); exit status 0 when every result is.
 */
#include "../../kernels/net.cu"
#include "probe_check.cuh"

#include <stdio.h>
#include <string.h>
#include <vector>

extern "C" void fh_cuda_set_error(const char* file, int line, const char* what, const char* detail) {
  fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, detail ? detail : "");
}
extern "C" const char* fh_cuda_last_error_text(void) { return ""; }

#define CK(x) FH_PROBE_CK(x, 2)

/* the finish before this change: one warp per column, lane l on chunks l, l + 32, ... */
static __global__ void warp_finish_kernel(const float* __restrict__ partial, int chunks, int n, float* __restrict__ out) {
  const int col = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  if (col >= n) return;
  const int lane = threadIdx.x & 31;
  float t = 0.0f;
  for (int c = lane; c < chunks; c += 32) t += partial[(int64_t)c * n + col];
  t = fh_warp_sum(t);
  if (lane == 0) out[col] = t;
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* the host's replay of the finish's order for column col */
static float host_finish(const std::vector<float>& part, int chunks, int n, int col) {
  float v[32];
  for (int l = 0; l < 32; ++l) {
    float t = 0.0f;
    for (int c = l; c < chunks; c += 32) t += part[(size_t)c * n + col];
    v[l] = t;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float w[32];
    for (int l = 0; l < 32; ++l) w[l] = v[l] + v[l ^ o];
    memcpy(v, w, sizeof v);
  }
  return v[0];
}

static int count_diff(const std::vector<float>& got, const std::vector<float>& part, int chunks, int n) {
  int bad = 0;
  for (int c = 0; c < n; ++c) {
    const float want = host_finish(part, chunks, n, c);
    if (memcmp(&want, &got[(size_t)c], sizeof want) != 0) {
      if (bad < 3) fprintf(stderr, "  column %d: %.9g, host %.9g\n", c, got[(size_t)c], want);
      ++bad;
    }
  }
  return bad;
}

template <class F>
static float time_us(F launch, cudaStream_t s, int reps) {
  for (int r = 0; r < 5; ++r) launch();
  return (float)fh_probe_best_us(s, launch, reps, 1);
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int fails = 0;
  printf("%-26s %10s %10s %s\n", "finish (n columns x chunks)", "warp us", "block us", "bit-identical");
  const int shapes[][2] = {{512, 512}, {256, 512}, {512, 128}, {256, 128}, {51, 512}, {33, 7}, {1, 1}, {700, 65}};
  for (const auto& sh : shapes) {
    const int n = sh[0], chunks = sh[1];
    std::vector<float> part((size_t)n * chunks), got((size_t)n), ref((size_t)n);
    for (auto& v : part) v = frand() * 8.0f;
    float *dp, *dout, *dref;
    CK(cudaMalloc(&dp, part.size() * sizeof(float)));
    CK(cudaMalloc(&dout, n * sizeof(float)));
    CK(cudaMalloc(&dref, n * sizeof(float)));
    CK(cudaMemcpy(dp, part.data(), part.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (fh_launch_colsum_finish(dp, chunks, n, dout, s) != FH_OK) return 2;
    warp_finish_kernel<<<CEIL_DIV(n * 32, 256), 256, 0, s>>>(dp, chunks, n, dref);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref.data(), dref, n * sizeof(float), cudaMemcpyDeviceToHost));
    const int bad = count_diff(got, part, chunks, n), bad_ref = count_diff(ref, part, chunks, n);
    const float tw = time_us([&] { warp_finish_kernel<<<CEIL_DIV(n * 32, 256), 256, 0, s>>>(dp, chunks, n, dref); }, s, 200);
    const float tb = time_us([&] { fh_launch_colsum_finish(dp, chunks, n, dout, s); }, s, 200);
    char name[64];
    snprintf(name, sizeof name, "%d x %d", n, chunks);
    printf("%-26s %10.2f %10.2f %s%s\n", name, tw, tb, bad ? "NO" : "yes", bad_ref ? " (reference kernel differs!)" : "");
    fails += bad + bad_ref;
    cudaFree(dp);
    cudaFree(dout);
    cudaFree(dref);
  }
  /* several narrow problems in one launch (partials by the narrow ReLU-free pass, then the multi finish); the host
   * replays the finish from the partials read back */
  for (int B : {16384, 1000}) {
    const int ns[] = {24, 32, 24, 8};
    fh_colsum_multi m{};
    m.count = 4;
    const int ld = 96;
    std::vector<fh_bf16> dy((size_t)B * ld);
    for (auto& v : dy) v = __float2bfloat16_rn(frand());
    fh_bf16* ddy;
    CK(cudaMalloc(&ddy, dy.size() * sizeof(fh_bf16)));
    CK(cudaMemcpy(ddy, dy.data(), dy.size() * sizeof(fh_bf16), cudaMemcpyHostToDevice));
    const int64_t pf = fh_colsum_partial_floats(B, 32);
    int off = 0;
    std::vector<float*> parts, outs;
    for (int k = 0; k < 4; ++k) {
      float *p, *o;
      CK(cudaMalloc(&p, pf * sizeof(float)));
      CK(cudaMalloc(&o, ns[k] * sizeof(float)));
      m.p[k] = fh_colsum_problem{ddy + off, ld, ns[k], p, o};
      parts.push_back(p);
      outs.push_back(o);
      off += ns[k];
    }
    if (fh_launch_colsum_multi(m, B, s) != FH_OK) return 2;
    CK(cudaStreamSynchronize(s));
    const int chunks = CEIL_DIV(B, kColsumRowsNarrow);
    int bad = 0;
    for (int k = 0; k < 4; ++k) {
      std::vector<float> part((size_t)chunks * ns[k]), got((size_t)ns[k]);
      CK(cudaMemcpy(part.data(), parts[k], part.size() * sizeof(float), cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(got.data(), outs[k], got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      bad += count_diff(got, part, chunks, ns[k]);
    }
    const float tm = time_us([&] { fh_launch_colsum_multi(m, B, s); }, s, 200);
    char name[64];
    snprintf(name, sizeof name, "multi 24+32+24+8, B %d", B);
    printf("%-26s %10s %10.2f %s (partials and finish)\n", name, "", tm, bad ? "NO" : "yes");
    fails += bad;
    for (int k = 0; k < 4; ++k) {
      cudaFree(parts[k]);
      cudaFree(outs[k]);
    }
    cudaFree(ddy);
  }
  printf("%s\n", fails ? "FAIL" : "all bit-identical");
  return fails ? 1 : 0;
}
