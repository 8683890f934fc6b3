/*
 * gemm_cublaslt.cpp — every cuBLAS/cuBLASLt call of the CUDA backend (see gemm_cublaslt.h).
 *
 * Row-major (rows = samples) maps onto cuBLASLt's column-major as transposes:
 *   fwd: C(out, B) = op_T(W as (in, out)) * X as (in, B)          m = out, n = B, k = in
 *   dx:  C(in, B)  = W as (in, out) * dY as (out, B)              m = in,  n = B, k = out
 *   dw:  C(in, out) = X as (in, B) * op_T(dY as (out, B))         m = in,  n = out, k = B
 * Bias (length m) rides in the epilogue. Plans (descriptors + heuristic algorithm) are cached per shape.
 * FH_GEMM_REFERENCE=1 (read at fh_gemm_create): the non-fused GEMMs run our reference kernel
 * (kernels/gemm_ref.cu) and no cuBLASLt matmul, plan or heuristic call happens for them.
 */
#include "gemm_cublaslt.h"

#include "../../../kernels/gemm_ref.cuh"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

static constexpr size_t kWorkspaceBytes = 32u << 20;

static thread_local char g_gemm_err[256];

const char* fh_gemm_last_error(void) { return g_gemm_err; }
size_t fh_gemm_workspace_bytes(void) { return kWorkspaceBytes; }

namespace {

/* op, transposes, m n k, leading dimensions, output dtype, epilogue, aux ld, the alignments of A, B, C, and the SM
 * count target */
using PlanKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int, int, int, int, int, int>;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

}  // namespace

struct fh_gemm {
  cublasLtHandle_t lt = nullptr;
  bool reference = false;  /* FH_GEMM_REFERENCE=1: kernels/gemm_ref.cu instead of cuBLASLt */
  std::mutex mu;
  std::map<PlanKey, Plan> plans;
  int sm_target = 0;       /* fh_gemm_set_sm_target */
};

void fh_gemm_set_sm_target(fh_gemm* g, int sms) {
  if (g) g->sm_target = sms > 0 ? sms : 0;
}
int fh_gemm_sm_target(const fh_gemm* g) { return g ? g->sm_target : 0; }

static fh_status lt_fail(cublasStatus_t st, const char* what) {
  snprintf(g_gemm_err, sizeof g_gemm_err, "cuBLASLt %s failed: status %d", what, (int)st);
  fh_cuda_set_error(__FILE__, __LINE__, what, g_gemm_err);
  return st == CUBLAS_STATUS_ALLOC_FAILED ? FH_ERR_OUT_OF_MEMORY : FH_ERR_DEVICE;
}

#define LT_TRY(expr, what)                                 \
  do {                                                     \
    cublasStatus_t st_ = (expr);                           \
    if (st_ != CUBLAS_STATUS_SUCCESS) return lt_fail(st_, what); \
  } while (0)

fh_status fh_gemm_create(fh_gemm** out) {
  fh_gemm* g = new (std::nothrow) fh_gemm();
  if (!g) return FH_ERR_OUT_OF_MEMORY;
  cublasStatus_t st = cublasLtCreate(&g->lt);
  if (st != CUBLAS_STATUS_SUCCESS) {
    delete g;
    return lt_fail(st, "cublasLtCreate");
  }
  const char* ref = getenv("FH_GEMM_REFERENCE");
  g->reference = ref && ref[0] == '1';
  *out = g;
  return FH_OK;
}

void fh_gemm_destroy(fh_gemm* g) {
  if (!g) return;
  for (auto& kv : g->plans) {
    if (kv.second.op) cublasLtMatmulDescDestroy(kv.second.op);
    if (kv.second.a) cublasLtMatrixLayoutDestroy(kv.second.a);
    if (kv.second.b) cublasLtMatrixLayoutDestroy(kv.second.b);
    if (kv.second.c) cublasLtMatrixLayoutDestroy(kv.second.c);
  }
  if (g->lt) cublasLtDestroy(g->lt);
  delete g;
}

static cudaDataType_t cdt(fh_dtype t) { return t == FH_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

/* Autotuning: the heuristic's top kMaxCandidates algorithms are timed once per shape (eagerly, at the
 * trainer's warm-up) and the fastest kept. The choice is cached process-wide by shape so every
 * trainer of a process uses the same algorithm (graph on/off comparisons stay bit-exact).
 * FH_GEMM_AUTOTUNE=0 keeps the heuristic's first choice. */
static constexpr int kMaxCandidates = 16;
static std::mutex g_tuned_mu;
static std::map<PlanKey, int> g_tuned;  /* shape -> index into the heuristic's list */

/* One tuning candidate's configuration (FH_GEMM_TUNE_LOG=2): the algorithm id, tile, split-K count and reduction
 * scheme, stages and CTA swizzle as cuBLASLt reports them (-1 where it does not), the heuristic's waves estimate, and
 * the candidate's timed µs (-1: it did not run). Diagnostics, so that a pick can be read as a kernel, not an index. */
static void log_candidate(const PlanKey& key, int i, const cublasLtMatmulHeuristicResult_t& r, float us) {
  auto cfg = [&](cublasLtMatmulAlgoConfigAttributes_t a) {
    uint32_t v = 0;
    size_t written = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&r.algo, a, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS
               ? (long)v
               : -1L;
  };
  fprintf(stderr,
          "gemm cand m=%d n=%d k=%d #%d: algo %ld tile %ld splitk %ld reduction %ld stages %ld swizzle %ld waves %.2f, "
          "%.2f us\n",
          std::get<3>(key), std::get<4>(key), std::get<5>(key), i, cfg(CUBLASLT_ALGO_CONFIG_ID),
          cfg(CUBLASLT_ALGO_CONFIG_TILE_ID), cfg(CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
          cfg(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), cfg(CUBLASLT_ALGO_CONFIG_STAGES_ID),
          cfg(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), (double)r.wavesCount, (double)us);
}

/* FH_GEMM_PICK="m,n,k=index[;m,n,k=index...]" (A/B measurement): every shape with those m, n, k takes the heuristic's
 * candidate of that index instead of the tuner's pick (an index past the candidates found is not applied, and the
 * tune log says so). Returns the index, or -1 where the variable names no such shape or any entry does not parse. */
static int forced_pick(const PlanKey& key) {
  const char* e = getenv("FH_GEMM_PICK");
  if (!e) return -1;
  int hit = -1;  /* the whole variable parses or none of it applies */
  for (const char* q = e; *q;) {
    int m = 0, n = 0, k = 0, idx = -1, used = 0;
    if (sscanf(q, " %d , %d , %d = %d%n", &m, &n, &k, &idx, &used) != 4) {
      fprintf(stderr, "FH_GEMM_PICK: \"%s\" is not m,n,k=index[;...]: not applied\n", q);
      return -1;
    }
    if (m == std::get<3>(key) && n == std::get<4>(key) && k == std::get<5>(key) && idx >= 0 && hit < 0) hit = idx;
    q += used;
    while (*q == ';' || *q == ' ') ++q;
  }
  return hit;
}

static fh_status pick_algo(fh_gemm* g, const PlanKey& key, Plan& p, const cublasLtMatmulHeuristicResult_t* res, int found,
                           const void* A, const void* B, void* C, void* ws, cudaStream_t s, double flops, bool fused) {
  {
    std::lock_guard<std::mutex> lock(g_tuned_mu);
    auto it = g_tuned.find(key);
    if (it != g_tuned.end()) {
      if (it->second < found) p.algo = res[it->second].algo;
      return FH_OK;
    }
  }
  int best = 0;
  /* FH_GEMM_TUNE_LOG (diagnostics, stderr): "1" one line per tuned shape, "2" also one line per candidate */
  const int log_level = (int)fh_env_int("FH_GEMM_TUNE_LOG", 1, 2, 0);
  const char* env = getenv("FH_GEMM_AUTOTUNE");
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaStreamIsCapturing(s, &cs);
  if (found > 1 && flops >= 1e8 && cs == cudaStreamCaptureStatusNone && !(env && env[0] == '0')) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    const float alpha = 1.0f, beta = 0.0f;
    auto mm = [&](int i) {
      return cublasLtMatmul(g->lt, p.op, &alpha, A, p.a, B, p.b, &beta, C, p.c, C, p.c, &res[i].algo, ws,
                            kWorkspaceBytes, s) == CUBLAS_STATUS_SUCCESS;
    };
    /* FH_GEMM_TUNE_ROUNDS sweeps over the candidates (default 3), each candidate's time its fastest sweep, after
     * the heuristic's first choice has run long enough to bring the clocks up */
    const char* re = getenv("FH_GEMM_TUNE_ROUNDS");
    int rounds = re ? atoi(re) : 3;
    rounds = rounds < 1 ? 1 : (rounds > 10 ? 10 : rounds);
    for (int r = 0; r < 20; ++r) mm(0);
    std::vector<float> tmin((size_t)found, 1e30f);
    std::vector<char> runs((size_t)found, 0);
    for (int round = 0; round < rounds; ++round)
      for (int i = 0; i < found; ++i) {
        if (round > 0 && !runs[(size_t)i]) continue;
        bool ok = true;
        for (int r = 0; r < 2 && ok; ++r) ok = mm(i);
        if (!ok) continue;
        runs[(size_t)i] = 1;
        cudaEventRecord(e0, s);
        for (int r = 0; r < 5; ++r) mm(i);
        cudaEventRecord(e1, s);
        float ms = 0.0f;
        if (cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess &&
            ms < tmin[(size_t)i])
          tmin[(size_t)i] = ms;
      }
    float best_ms = 1e30f;
    int ran = 0;
    for (int i = 0; i < found; ++i) {
      if (!runs[(size_t)i]) continue;
      ++ran;
      if (tmin[(size_t)i] < best_ms) {
        best_ms = tmin[(size_t)i];
        best = i;
      }
    }
    const float first_ms = runs[0] ? tmin[0] : 0.0f;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGetLastError();
    if (log_level >= 2)
      for (int i = 0; i < found; ++i) log_candidate(key, i, res[i], runs[(size_t)i] ? tmin[(size_t)i] * 200.0f : -1.0f);
    if (log_level >= 1)
      fprintf(stderr,
              "gemm tune m=%d n=%d k=%d lda=%d ldb=%d ldc=%d epi=%d sms=%d: %d candidates, first %.2f us, best #%d %.2f us\n",
              std::get<3>(key), std::get<4>(key), std::get<5>(key), std::get<6>(key), std::get<7>(key), std::get<8>(key),
              std::get<10>(key), std::get<15>(key), ran, first_ms * 200.0f, best, best_ms * 200.0f);
    if (ran == 0 && fused) {
      /* the heuristic offered algorithms for the fused epilogue but none of them runs here */
      snprintf(g_gemm_err, sizeof g_gemm_err, "cuBLASLt: no runnable algorithm for the fused epilogue");
      return FH_ERR_UNSUPPORTED;
    }
    p.algo = res[best].algo;
  }
  const int forced = forced_pick(key);
  if (forced >= 0) {
    if (forced < found) {
      best = forced;
      p.algo = res[best].algo;
    }
    if (log_level >= 1)
      fprintf(stderr, "gemm pick m=%d n=%d k=%d: FH_GEMM_PICK #%d%s\n", std::get<3>(key), std::get<4>(key),
              std::get<5>(key), forced, forced < found ? "" : " is past the candidates found: not applied");
  }
  std::lock_guard<std::mutex> lock(g_tuned_mu);
  g_tuned.emplace(key, best);
  return FH_OK;
}

/* Column-major GEMM: C(m, n) = op(A) op(B), with A stored (ta ? k x m : m x k), B (tb ? n x k : k x n). */
static bool epi_has_bias(fh_epilogue e) {
  return e == FH_EPI_BIAS || e == FH_EPI_RELU_BIAS || e == FH_EPI_RELU_AUX_BIAS || e == FH_EPI_BGRADB;
}
static bool epi_has_aux(fh_epilogue e) { return e == FH_EPI_RELU_AUX_BIAS || e == FH_EPI_DRELU; }
static bool epi_fused(fh_epilogue e) { return e == FH_EPI_RELU_AUX_BIAS || e == FH_EPI_DRELU || e == FH_EPI_BGRADB; }

static cublasLtEpilogue_t lt_epilogue(fh_epilogue e) {
  switch (e) {
    case FH_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case FH_EPI_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case FH_EPI_RELU_AUX_BIAS: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case FH_EPI_DRELU: return CUBLASLT_EPILOGUE_DRELU;
    case FH_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

/* A pointer's alignment in bytes, up to 256 (cuBLASLt's heuristic assumes 256 unless told otherwise: an algorithm
 * picked for aligned pointers may not run, or not run well, on a matrix that starts elsewhere). */
static uint32_t ptr_align(const void* p) {
  const uintptr_t a = (uintptr_t)p;
  uint32_t al = 256;
  while (al > 1 && (a & (al - 1))) al >>= 1;
  return al;
}

/* The per-call pointers of the epilogue (bias / bias gradient, ReLU mask). */
static fh_status set_epilogue_ptrs(cublasLtMatmulDesc_t d, fh_epilogue epi, const void* bias, const void* aux) {
  if (epi_has_bias(epi))
    LT_TRY(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "set BIAS");
  if (epi_has_aux(epi))
    LT_TRY(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux), "set AUX");
  return FH_OK;
}

static fh_status run_gemm(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, bool ta, bool tb, int m, int n, int k,
                          const void* A, int lda, const void* B, int ldb, void* C, fh_dtype cdtype, int ldc,
                          fh_epilogue epi, const void* bias, const void* aux = nullptr, int64_t aux_ld = 0) {
  if (m <= 0 || n <= 0 || k <= 0) return FH_OK;
  if (g->reference) {
    if (epi_fused(epi)) {
      snprintf(g_gemm_err, sizeof g_gemm_err, "reference GEMM (FH_GEMM_REFERENCE=1) has no fused epilogue %d",
               (int)epi);
      return FH_ERR_UNSUPPORTED;
    }
    return fh_launch_gemm_ref(op, ta, tb, m, n, k, A, lda, B, ldb, C, cdtype, ldc, epi_has_bias(epi) ? bias : nullptr,
                              epi == FH_EPI_RELU_BIAS, s);
  }
  if (epi_has_aux(epi) && (!aux || aux_ld < m || aux_ld % 128 != 0)) {
    snprintf(g_gemm_err, sizeof g_gemm_err, "ReLU mask: ld %lld bits must be a multiple of 128 and >= %d",
             (long long)aux_ld, m);
    fh_cuda_set_error(__FILE__, __LINE__, "run_gemm", g_gemm_err);
    return FH_ERR_INVALID_ARGUMENT;
  }
  const uint32_t al_a = ptr_align(A), al_b = ptr_align(B), al_c = ptr_align(C);
  PlanKey key{(int)op, ta, tb, m, n, k, lda, ldb, ldc, (int)cdtype, (int)epi, (int)aux_ld,
              (int)al_a, (int)al_b, (int)al_c, g->sm_target};
  Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    auto it = g->plans.find(key);
    if (it != g->plans.end()) plan = &it->second;
  }
  if (!plan) {
    Plan p;
    const cublasComputeType_t ct = CUBLAS_COMPUTE_32F;  /* fp32 accumulate; no TF32 in either mode */
    LT_TRY(cublasLtMatmulDescCreate(&p.op, ct, CUDA_R_32F), "MatmulDescCreate");
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "set TRANSA");
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "set TRANSB");
    cublasLtEpilogue_t e = lt_epilogue(epi);
    LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e), "set EPILOGUE");
    if (g->sm_target > 0) {
      const int32_t sms = g->sm_target;
      LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms),
             "set SM_COUNT_TARGET");
    }
    if (epi_has_aux(epi))
      LT_TRY(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld),
             "set AUX_LD");
    /* the heuristic looks at the pointers' alignment; they are set again per call */
    {
      fh_status es = set_epilogue_ptrs(p.op, epi, bias, aux);
      if (es != FH_OK) return es;
    }
    LT_TRY(cublasLtMatrixLayoutCreate(&p.a, cdt(op), ta ? k : m, ta ? m : k, lda), "layout A");
    LT_TRY(cublasLtMatrixLayoutCreate(&p.b, cdt(op), tb ? n : k, tb ? k : n, ldb), "layout B");
    LT_TRY(cublasLtMatrixLayoutCreate(&p.c, cdt(cdtype), m, n, ldc), "layout C");
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
    size_t wsb = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
    /* FH_GEMM_REDUCTION=<mask> (A/B measurement): only split-K reduction schemes in the mask (cublasLtReductionScheme_t
     * bits: 1 in place, 2 in the compute type, 4 in the output type; 0: no split-K reduction at all) */
    if (const char* rm = getenv("FH_GEMM_REDUCTION")) {
      const uint32_t mask = (uint32_t)strtoul(rm, nullptr, 0);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
    }
    if (al_a < 256 || al_b < 256 || al_c < 256) { /* (a failure here shows as the matmul's own error) */
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    }
    cublasLtMatmulHeuristicResult_t res[kMaxCandidates];
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(g->lt, p.op, p.a, p.b, p.c, p.c, pref, kMaxCandidates, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if ((st != CUBLAS_STATUS_SUCCESS || found == 0) && epi_fused(epi)) {
      cublasLtMatmulDescDestroy(p.op);
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      snprintf(g_gemm_err, sizeof g_gemm_err, "cuBLASLt has no algorithm for epilogue %d at m=%d n=%d k=%d", (int)epi,
               m, n, k);
      return FH_ERR_UNSUPPORTED;
    }
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      snprintf(g_gemm_err, sizeof g_gemm_err,
               "cuBLASLt found no algorithm for m=%d n=%d k=%d op=%s out=%s epilogue=%d (status %d)", m, n, k,
               op == FH_BF16 ? "bf16" : "f32", cdtype == FH_BF16 ? "bf16" : "f32", (int)epi, (int)st);
      fh_cuda_set_error(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", g_gemm_err);
      return FH_ERR_DEVICE;
    }
    p.algo = res[0].algo;
    fh_status ts = pick_algo(g, key, p, res, found, A, B, C, ws, s, 2.0 * m * n * k, epi_fused(epi));
    if (ts != FH_OK) {
      cublasLtMatmulDescDestroy(p.op);
      cublasLtMatrixLayoutDestroy(p.a);
      cublasLtMatrixLayoutDestroy(p.b);
      cublasLtMatrixLayoutDestroy(p.c);
      return ts;
    }
    std::lock_guard<std::mutex> lock(g->mu);
    plan = &(g->plans[key] = p);
  }
  {
    fh_status es = set_epilogue_ptrs(plan->op, epi, bias, aux);
    if (es != FH_OK) return es;
  }
  const float alpha = 1.0f, beta = 0.0f;
  LT_TRY(cublasLtMatmul(g->lt, plan->op, &alpha, A, plan->a, B, plan->b, &beta, C, plan->c, C, plan->c, &plan->algo,
                        ws, kWorkspaceBytes, s),
         "cublasLtMatmul");
  return FH_OK;
}

fh_status fh_gemm_fwd(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* X,
                      int ldx, const void* W, const void* bias, fh_epilogue epi, void* Y, fh_dtype ydt, int ldy,
                      fh_relu_mask mask) {
  if (mask.bits && epi == FH_EPI_RELU_BIAS)
    return run_gemm(g, s, ws, op, true, false, out, B, in, W, in, X, ldx, Y, ydt, ldy, FH_EPI_RELU_AUX_BIAS, bias,
                    mask.bits, mask.ld);
  return run_gemm(g, s, ws, op, true, false, out, B, in, W, in, X, ldx, Y, ydt, ldy, epi, bias);
}

fh_status fh_gemm_dx(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* W, void* dX, fh_dtype xdt, int lddx, fh_relu_mask mask) {
  if (mask.bits)
    return run_gemm(g, s, ws, op, false, false, in, B, out, W, in, dY, lddy, dX, xdt, lddx, FH_EPI_DRELU, nullptr,
                    mask.bits, mask.ld);
  return run_gemm(g, s, ws, op, false, false, in, B, out, W, in, dY, lddy, dX, xdt, lddx, FH_EPI_NONE, nullptr);
}

fh_status fh_gemm_dw(fh_gemm* g, cudaStream_t s, void* ws, fh_dtype op, int B, int out, int in, const void* dY,
                     int lddy, const void* X, int ldx, float* dW, float* dbias, int ldw) {
  return run_gemm(g, s, ws, op, false, true, in, out, B, X, ldx, dY, lddy, dW, FH_F32, ldw > 0 ? ldw : in,
                  dbias ? FH_EPI_BGRADB : FH_EPI_NONE, dbias);
}
