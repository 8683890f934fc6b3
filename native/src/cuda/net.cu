/*
 * net.cu — the network on the GPU (see net.h): allocation, forward, loss, backward, optimiser.
 * Host orchestration only: GEMMs via gemm_cublaslt.h, elementwise via kernels/net_kernels.cuh.
 */
#include "net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmath>
#include <type_traits>
#include <vector>

static inline char* fh_byte_ptr(void* p, int64_t elems, fh_dtype t) {
  return static_cast<char*>(p) + elems * (int64_t)fh_dtype_size(t);
}
static inline const char* fh_byte_ptr(const void* p, int64_t elems, fh_dtype t) {
  return static_cast<const char*>(p) + elems * (int64_t)fh_dtype_size(t);
}

static fh_status fh_dmalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (bytes == 0) bytes = 16;
  FH_CUDA_TRY(cudaMalloc(p, bytes));
  return FH_OK;
}
template <typename P>
static fh_status fh_dmalloc_t(P** p, size_t bytes) {
  void* v = nullptr;
  fh_status st = fh_dmalloc(&v, bytes);
  *p = static_cast<P*>(v);
  return st;
}

static int fh_make_layout(const fh_config& cfg, int32_t obs_dim, fh_layout* L) {
  return fh_layout_make(L, obs_dim, cfg.hidden1, cfg.hidden2, cfg.head_hidden, cfg.atoms, cfg.n_branches,
                        cfg.branch_sizes);
}

static int64_t fh_mask_ld(int n) { return ((int64_t)n + 127) / 128 * 128; }
/* the mask rows from `row` on (ld bits a row, a multiple of 128) */
static fh_relu_mask fh_mask_rows(const fh_relu_mask& m, int64_t row) {
  return fh_relu_mask{static_cast<char*>(m.bits) + row * m.ld / 8, m.ld};
}

int64_t fh_net_bytes_per_row(const fh_config& cfg, int32_t obs_dim) {
  fh_layout L;
  if (fh_make_layout(cfg, obs_dim, &L) != 0) return 0;
  const int64_t es = cfg.deterministic ? 4 : 2;
  int64_t logits = 0;
  for (int k = 0; k < L.n_heads; ++k) logits += L.out_pad[k];
  const int64_t act = (int64_t)L.D + L.h1 + L.h2 + (int64_t)L.n_heads * L.hh;
  int64_t per_pass = act * es + logits * 4 + 16 * 4;  /* fp32 logits (bf16 ones need half: sized for the larger) */
  int64_t bwd = logits * es + ((int64_t)L.n_heads * L.hh + L.h2 + L.h1) * es + 8;
  int64_t masks = 2 * (fh_mask_ld(L.h1) + fh_mask_ld(L.h2) + fh_mask_ld(L.n_heads * L.hh)) / 8;
  /* pass 0 holds 2 rows per batch row; passes 1 and 2 one each */
  return (FH_NET_PASSES + 1) * per_pass + bwd + masks;
}

/* The mma path's shape conditions (mma_gemm.cuh), checked once: every width is a multiple of 8, so
 * every operand (column blocks of ah included) starts on 16 bytes. */
static bool fh_net_mma_shapes(const fh_layout& L) {
  if (L.h1 % 8 || L.h2 % 8 || L.hh % 8) return false;
  for (int k = 0; k < L.n_heads; ++k)
    if (L.out_pad[k] % 8) return false;
  return true;
}

void fh_net_destroy(fh_net* net) {
  if (!net) return;
  void* ptrs[] = {net->online, net->target, net->grad, net->adam_m, net->adam_v, net->dah, net->da2, net->da1,
                  net->wloss, net->signal, net->red_part, net->mean_part, net->qs_part, net->loss, net->gnorm, net->gscale,
                  net->step, net->opt_ticket, net->w1s, net->w1n};
  for (void* p : ptrs)
    if (p) cudaFree(p);
  fh_l1g_free(&net->l1g);
  if (net->op == FH_BF16) {
    if (net->online_sh) cudaFree(net->online_sh);
    if (net->target_sh) cudaFree(net->target_sh);
  }
  for (int k = 0; k < FH_NET_HEADS; ++k) {
    if (net->dlog[k]) cudaFree(net->dlog[k]);
  }
  for (int k = 0; k < FH_NET_HEADS; ++k)
    if (net->colsum_part[k]) cudaFree(net->colsum_part[k]);
  for (int i = 0; i < 3; ++i) {
    if (net->colsum_lv[i]) cudaFree(net->colsum_lv[i]);
    if (net->colsum_trunk[i]) cudaFree(net->colsum_trunk[i]);
  }
  if (net->fin_ev) cudaEventDestroy(net->fin_ev);
  for (int k = 0; k < FH_NET_HEADS; ++k)
    if (net->dx_ev[k]) cudaEventDestroy(net->dx_ev[k]);
  for (int i = 0; i < 2; ++i)
    if (net->bev[i]) cudaEventDestroy(net->bev[i]);
  void* masks[] = {net->mask1.bits, net->mask2.bits, net->maskh.bits};
  for (void* m : masks)
    if (m) cudaFree(m);
  for (int p = 0; p < FH_NET_PASSES; ++p) {
    fh_net_pass& P = net->pass[p];
    void* bufs[] = {P.x, P.a1, P.a2, P.ah, P.q};
    for (void* b : bufs)
      if (b) cudaFree(b);
    for (int k = 0; k < FH_NET_HEADS; ++k) {
      if (P.logits[k]) cudaFree(P.logits[k]);
      if (P.ws[k]) cudaFree(P.ws[k]);
      if (P.join[k]) cudaEventDestroy(P.join[k]);
      if (k > 0 && P.hs[k]) cudaStreamDestroy(P.hs[k]);
    }
    if (P.fork) cudaEventDestroy(P.fork);
    if (P.s) cudaStreamDestroy(P.s);
  }
  if (net->astar) cudaFree(net->astar);
  if (net->sn_join) cudaEventDestroy(net->sn_join);
  if (net->sn_s) cudaStreamDestroy(net->sn_s);
  if (net->gemm) fh_gemm_destroy(net->gemm);
  memset(net, 0, sizeof *net);
}

/* part / whole of the device's n_sm SMs, rounded, at least 8 (a GEMM planned for fewer runs too long); 0 when the
 * SM count is unknown (the whole GPU) */
static int sm_share(int n_sm, int64_t part, int64_t whole) {
  if (n_sm <= 0 || whole <= 0) return 0;
  const int sms = (int)(((int64_t)n_sm * part + whole / 2) / whole);
  return sms < 8 ? 8 : sms;
}

fh_status fh_net_create(fh_net* net, const fh_config& cfg, int32_t obs_dim, int32_t cap) {
  memset(net, 0, sizeof *net);
  if (fh_make_layout(cfg, obs_dim, &net->L) != 0) return FH_ERR_INVALID_CONFIG;
  const fh_layout& L = net->L;
  net->op = cfg.deterministic ? FH_F32 : FH_BF16;
  net->cap = cap;
  net->v_min = cfg.v_min;
  net->v_max = cfg.v_max;
  net->huber_delta = cfg.huber_delta;
  net->nq = 0;
  for (int d = 0; d < L.n_branches; ++d) net->nq += L.branch_sizes[d];
  fh_status st = FH_OK;
#define NET_TRY(expr)            \
  do {                           \
    st = (expr);                 \
    if (st != FH_OK) goto fail;  \
  } while (0)
  {
    const size_t pb = (size_t)L.total * sizeof(float);
    const size_t es = fh_dtype_size(net->op);
    const int64_t HH = (int64_t)L.n_heads * L.hh;
    NET_TRY(fh_gemm_create(&net->gemm));
    NET_TRY(fh_dmalloc_t(&net->online, pb));
    NET_TRY(fh_dmalloc_t(&net->target, pb));
    NET_TRY(fh_dmalloc_t(&net->grad, pb));
    NET_TRY(fh_dmalloc_t(&net->adam_m, pb));
    NET_TRY(fh_dmalloc_t(&net->adam_v, pb));
    if (net->op == FH_BF16) {
      NET_TRY(fh_dmalloc(&net->online_sh, (size_t)L.total * es));
      NET_TRY(fh_dmalloc(&net->target_sh, (size_t)L.total * es));
    } else {
      net->online_sh = net->online;
      net->target_sh = net->target;
    }
    /* Opt-in: on the H200 (CUDA 13) cuBLASLt runs these epilogues as separate kernels for our shapes,
     * and the reference train step was 9% slower with them (bench/RESULTS.md). */
    const char* fe = getenv("FH_FUSED_EPILOGUE");
    net->fused = fe && fe[0] == '1';
    /* Opt-in (FH_MMA=1): on the H200 the reference step was 569 us with it against 519 us without (its
     * short-K tiles are latency bound at ~1.3 instructions per cycle; bench/RESULTS.md) */
    const char* mm = getenv("FH_MMA");
    net->mma = net->op == FH_BF16 && !net->fused && mm && strcmp(mm, "1") == 0 && fh_net_mma_shapes(L) &&
               fh_mma_available();
    const char* fsd = getenv("FH_FINISH_SIDE");
    net->finish_side = !(fsd && strcmp(fsd, "0") == 0);
    const char* dws = getenv("FH_DW_SIDE");
    net->dw_side = net->finish_side && !(dws && strcmp(dws, "0") == 0);
    const char* hl = getenv("FH_HEADS_LATE");
    net->heads_late = !(hl && strcmp(hl, "0") == 0);
    /* bf16 mode: the first layer's weight gradient as its market columns (when they are a multiple of 128 and
     * the whole width is not) + its 8 account columns (FH_DW1_SPLIT=0: one GEMM) */
    const char* dws1 = getenv("FH_DW1_SPLIT");
    net->dw1_split = net->op == FH_BF16 && !(dws1 && strcmp(dws1, "0") == 0) && L.D % 128 != 0 &&
                     L.D > FH_ENV_ACCOUNT && (L.D - FH_ENV_ACCOUNT) % 128 == 0;
    net->dw1_acc_first = fh_env_is("FH_DW1_ACC_FIRST", "1");
    /* bf16 kernel path (FH_RELU_MASKS=0 turns it off): pass 0's forward stores the ReLU bit masks (cuBLASLt's
     * RELU_AUX epilogue) and the backward's ReLU passes of layers >= 256 wide read 1 bit per activation instead of
     * the bf16 activation (the reference step: 449 against 457.5 us, bench/RESULTS.md); narrower layers, and a
     * GEMM whose epilogue cuBLASLt does not run, read the activations */
    const char* rm = getenv("FH_RELU_MASKS");
    net->relu_masks = net->op == FH_BF16 && !net->fused && !net->mma && !(rm && strcmp(rm, "0") == 0);
    int smem_optin = 0;  /* the device's shared memory a block may opt in to */
    {
      net->heads_sm = fh_env_is("FH_HEADS_SM", "0") ? 0 : fh_env_is("FH_HEADS_SM", "2") ? 2 : 1;
      int dev = 0;
      const bool have_dev = cudaGetDevice(&dev) == cudaSuccess;
      if (!have_dev || cudaDeviceGetAttribute(&net->n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        net->n_sm = 0;
      if (!have_dev ||
          cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        smem_optin = 0;
      /* FH_SIDE_SMS=<percent> (default 50; 0 or 100: the whole GPU) */
      const int pct = (int)fh_env_int("FH_SIDE_SMS", 0, 100, 50);
      net->side_sms = pct > 0 && pct < 100 ? sm_share(net->n_sm, pct, 100) : 0;
      /* the first layer's market-column weight gradient (the main stream's last GEMM, persistent: while it runs the
       * replay's gather beside it finds no SM) planned for 100 of 132 SMs, the rest left to the gather: the reference
       * epoch -2.0 ms on an H100 against the whole GPU (88 or 76 SMs: -0.0 and -0.5; bench/RESULTS.md).
       * FH_DW1_SMS=<count> sets the count (0: the whole GPU) */
      net->dw1_sms = (int)fh_env_int("FH_DW1_SMS", 0, net->n_sm, sm_share(net->n_sm, 100, 132));
    }
    const char* cms = getenv("FH_COLSUM_MERGED");
    net->colsum_merged = !(cms && strcmp(cms, "0") == 0);
    const char* oc = getenv("FH_OPTIM_CHAIN");
    net->optim_chain = oc && strcmp(oc, "1") == 0;
    net->optim_launches = fh_env_is("FH_OPTIM_ONE", "0") ? 2 : 1;
    const char* mh = getenv("FH_MMA_HEADS");
    net->mma_heads = net->mma && !(mh && strcmp(mh, "0") == 0);
    const char* lb = getenv("FH_LOGITS_BF16");
    /* bf16 mode: bf16 head outputs for the training passes unless FH_LOGITS_BF16=0. With the
     * approximate-math loss the step is 523 vs 539 us on the H200 (the exact loss, which converts
     * every load, made bf16 logits lose: 600 vs 580 us; bench/RESULTS.md) */
    const fh_dtype train_ldt = net->op == FH_BF16 && !(lb && strcmp(lb, "0") == 0) ? FH_BF16 : FH_F32;
    /* the head outputs of the training passes inside the loss (FH_HEADS_LOSS=1; else the GEMMs and the loss kernel) */
    net->heads_loss = train_ldt == FH_BF16 && L.atoms > 1 && L.n_heads == L.n_branches + 1 &&
                      fh_env_is("FH_HEADS_LOSS", "1") &&
                      fh_heads_loss_supported(L.hh, L.atoms, L.n_branches, L.branch_sizes, L.n_heads * L.hh, smem_optin) &&
                      fh_heads_loss_setup() == FH_OK;
    net->out_all = 0;
    for (int k = 0; k < L.n_heads; ++k) net->out_all += L.out_pad[k];
    /* the training pass's head outputs as one streaming kernel (FH_HEADS_OUT=1 .. FH_HEADS_OUT_CONFIGS: its
     * configuration 0 ..; else the per-head GEMMs); heads_out keeps the configuration + 1 */
    const int ho = (int)fh_env_int("FH_HEADS_OUT", 1, FH_HEADS_OUT_CONFIGS, 0);
    net->heads_out = ho > 0 && train_ldt == FH_BF16 && net->n_sm >= L.n_heads && !net->heads_loss && !net->mma_heads &&
                             fh_heads_out_supported(ho - 1, L.n_heads, L.hh, L.out_pad, L.n_heads * L.hh, smem_optin) &&
                             fh_heads_out_setup() == FH_OK
                         ? ho
                         : 0;
    /* online(s')'s argmax from its head activations, the head GEMMs over online(s) alone (FH_SN_ARGMAX=1..3) */
    const int sa = (int)fh_env_int("FH_SN_ARGMAX", 0, FH_SN_ARGMAX_VARIANTS, 0);
    net->sn_argmax = sa > 0 && train_ldt == FH_BF16 && L.atoms > 1 &&
                             L.n_heads == L.n_branches + 1 && !net->heads_loss && !net->heads_out && !net->mma_heads &&
                             fh_sn_argmax_supported(sa - 1, L.hh, L.atoms, L.n_branches, L.branch_sizes,
                                                    L.n_heads * L.hh, smem_optin) &&
                             fh_sn_argmax_setup() == FH_OK
                         ? sa
                         : 0;
    net->sn_blocks = (int)fh_env_int("FH_SN_ARGMAX_BLOCKS", 0, 1 << 20, 0);
    net->sn_late = fh_env_is("FH_SN_ARGMAX_LATE", "1");
    const char* ko = getenv("FH_PROFILE_KNOCKOUT");
    net->knockout = ko ? (unsigned)strtoul(ko, nullptr, 0) : 0u;
    /* pass 0's streams (the train step) at the device's highest priority, so that the trainer's replay side stream,
     * at the lowest, fills what the step's kernels leave (10 us of a 432 us reference step on the H200 against the
     * side stream first; bench/RESULTS.md); FH_TRAIN_PRIORITY=0: the default priority (A/B) */
    int least = 0, greatest = 0;
    FH_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    const int train_prio = fh_env_is("FH_TRAIN_PRIORITY", "0") ? least : greatest;
    for (int p = 0; p < FH_NET_PASSES; ++p) {
      fh_net_pass& P = net->pass[p];
      P.cap = p == 0 ? 2 * cap : cap;
      P.ldt = p == 1 ? FH_F32 : train_ldt;
      const size_t rows = (size_t)P.cap;
      if (p != 2) NET_TRY(fh_dmalloc(&P.x, rows * L.D * es));  /* pass 2 reads s' of pass 0 */
      NET_TRY(fh_dmalloc(&P.a1, rows * L.h1 * es));
      NET_TRY(fh_dmalloc(&P.a2, rows * L.h2 * es));
      NET_TRY(fh_dmalloc(&P.ah, rows * HH * es));
      NET_TRY(fh_dmalloc_t(&P.q, rows * net->nq * sizeof(float)));
      FH_CUDA_TRY(cudaStreamCreateWithPriority(&P.s, cudaStreamNonBlocking, p == 0 ? train_prio : least));
      FH_CUDA_TRY(cudaEventCreateWithFlags(&P.fork, cudaEventDisableTiming));
      for (int k = 0; k < L.n_heads; ++k) {
        NET_TRY(fh_dmalloc(&P.logits[k], rows * L.out_pad[k] * fh_dtype_size(P.ldt)));
        NET_TRY(fh_dmalloc(&P.ws[k], fh_gemm_workspace_bytes()));
        FH_CUDA_TRY(cudaEventCreateWithFlags(&P.join[k], cudaEventDisableTiming));
        if (k == 0) {
          P.hs[0] = P.s;
        } else {
          FH_CUDA_TRY(cudaStreamCreateWithPriority(&P.hs[k], cudaStreamNonBlocking, p == 0 ? train_prio : least));
        }
      }
    }
    for (int k = 0; k < L.n_heads; ++k) {
      NET_TRY(fh_dmalloc(&net->dlog[k], (size_t)cap * L.out_pad[k] * es));
      NET_TRY(fh_dmalloc_t(&net->colsum_part[k], (size_t)fh_colsum_partial_floats(cap, L.out_pad[k]) * 4));
    }
    {
      const int widths[3] = {(int)HH, L.h2, L.h1};
      for (int i = 0; i < 3; ++i)
        NET_TRY(fh_dmalloc_t(&net->colsum_trunk[i], (size_t)fh_colsum_partial_floats(cap, widths[i]) * 4));
      FH_CUDA_TRY(cudaEventCreateWithFlags(&net->fin_ev, cudaEventDisableTiming));
      for (int k = 0; k < FH_NET_HEADS; ++k)
        FH_CUDA_TRY(cudaEventCreateWithFlags(&net->dx_ev[k], cudaEventDisableTiming));
    }
    {
      fh_relu_mask* ms[3] = {&net->mask1, &net->mask2, &net->maskh};
      const int widths[3] = {L.h1, L.h2, (int)HH};
      for (int i = 0; i < 3; ++i) {
        ms[i]->ld = fh_mask_ld(widths[i]);
        NET_TRY(fh_dmalloc(&ms[i]->bits, (size_t)(2 * (int64_t)cap * ms[i]->ld / 8)));
      }
    }
    if (net->mma) {
      const int widths[3] = {(int)HH, L.h2, L.h1};
      for (int i = 0; i < 3; ++i)
        NET_TRY(fh_dmalloc_t(&net->colsum_lv[i], (size_t)fh_mma_row_tiles(cap) * widths[i] * sizeof(float)));
      for (int i = 0; i < 2; ++i) FH_CUDA_TRY(cudaEventCreateWithFlags(&net->bev[i], cudaEventDisableTiming));
    }
    NET_TRY(fh_dmalloc(&net->dah, (size_t)cap * HH * es));
    NET_TRY(fh_dmalloc(&net->da2, (size_t)cap * L.h2 * es));
    NET_TRY(fh_dmalloc(&net->da1, (size_t)cap * L.h1 * es));
    if (net->sn_argmax) {
      /* one byte a row, inside fh_net_bytes_per_row's margin (it sizes the training logits as fp32) */
      NET_TRY(fh_dmalloc_t(&net->astar, (size_t)cap));
      FH_CUDA_TRY(cudaStreamCreateWithPriority(&net->sn_s, cudaStreamNonBlocking, train_prio));
      FH_CUDA_TRY(cudaEventCreateWithFlags(&net->sn_join, cudaEventDisableTiming));
    }
    NET_TRY(fh_dmalloc_t(&net->wloss, (size_t)cap * 4));
    NET_TRY(fh_dmalloc_t(&net->signal, (size_t)cap * 4));
    NET_TRY(fh_dmalloc_t(&net->red_part, (size_t)fh_sum_partial_doubles() * 8));
    NET_TRY(fh_dmalloc_t(&net->mean_part, (size_t)fh_sum_partial_doubles() * 8));
    NET_TRY(fh_dmalloc_t(&net->qs_part, (size_t)fh_qstats_partial_doubles() * 8));
    NET_TRY(fh_dmalloc_t(&net->loss, 4));
    NET_TRY(fh_dmalloc_t(&net->gnorm, 4));
    NET_TRY(fh_dmalloc_t(&net->gscale, 4));
    NET_TRY(fh_dmalloc_t(&net->step, 8));
    NET_TRY(fh_dmalloc_t(&net->opt_ticket, 8));

    /* initial parameters (host, Philox INIT), target = online, moments 0 */
    std::vector<float> init((size_t)L.total);
    for (int64_t i = 0; i < L.total; ++i) init[(size_t)i] = fh_layout_init_value(&L, cfg.seed, i);
    FH_CUDA_TRY(cudaMemcpy(net->online, init.data(), pb, cudaMemcpyHostToDevice));
    FH_CUDA_TRY(cudaMemcpy(net->target, init.data(), pb, cudaMemcpyHostToDevice));
    FH_CUDA_TRY(cudaMemset(net->grad, 0, pb));
    FH_CUDA_TRY(cudaMemset(net->adam_m, 0, pb));
    FH_CUDA_TRY(cudaMemset(net->adam_v, 0, pb));
    FH_CUDA_TRY(cudaMemset(net->step, 0, 8));
    FH_CUDA_TRY(cudaMemset(net->opt_ticket, 0, 8));
    for (int k = 0; k < L.n_heads; ++k) FH_CUDA_TRY(cudaMemset(net->dlog[k], 0, (size_t)cap * L.out_pad[k] * es));
    NET_TRY(fh_net_sync_shadows(net, net->pass[0].s));
    FH_CUDA_TRY(cudaStreamSynchronize(net->pass[0].s));
  }
  return FH_OK;
fail:
  fh_net_destroy(net);
  return st;
#undef NET_TRY
}

/* W1's placed copies for the paired layout (none before fh_net_pair_setup, and in fp32 mode). */
static fh_w1_pair fh_net_w1_pair(const fh_net* net) {
  const fh_layout& L = net->L;
  return net->w1s ? fh_w1_pair{net->w1s, net->w1n, L.W1, L.h1, L.D, net->pair_l} : fh_w1_pair{};
}

fh_status fh_net_pair_setup(fh_net* net, const fh_pair_layout& l) {
  const fh_layout& L = net->L;
  if (net->op != FH_BF16 || net->w1s || l.WF + FH_ENV_ACCOUNT != L.D) return FH_ERR_INVALID_ARGUMENT;
  const size_t bytes = (size_t)L.h1 * l.K * sizeof(fh_bf16);
  FH_TRY(fh_dmalloc_t(&net->w1s, bytes));
  FH_TRY(fh_dmalloc_t(&net->w1n, bytes));
  FH_CUDA_TRY(cudaMemset(net->w1s, 0, bytes));
  FH_CUDA_TRY(cudaMemset(net->w1n, 0, bytes));
  net->pair_l = l;
  FH_TRY(fh_launch_w1_pair(static_cast<const fh_bf16*>(net->online_sh), fh_net_w1_pair(net), net->pass[0].s));
  FH_CUDA_TRY(cudaStreamSynchronize(net->pass[0].s));
  return FH_OK;
}

fh_status fh_net_sync_shadows(fh_net* net, cudaStream_t s) {
  if (net->op != FH_BF16) return FH_OK;
  FH_TRY(fh_launch_cast<fh_bf16>(net->online, static_cast<fh_bf16*>(net->online_sh), net->L.total, s));
  FH_TRY(fh_launch_cast<fh_bf16>(net->target, static_cast<fh_bf16*>(net->target_sh), net->L.total, s));
  return fh_launch_w1_pair(static_cast<const fh_bf16*>(net->online_sh), fh_net_w1_pair(net), s);
}

void* fh_net_next_obs(const fh_net* net, int32_t B, void* x) {
  return fh_byte_ptr(x ? x : net->pass[0].x, (int64_t)B * net->L.D, net->op);
}

template <typename L_>
fh_heads_view_t<L_> fh_net_view(const fh_net* net, int p, int32_t row0) {
  const fh_layout& L = net->L;
  fh_heads_view_t<L_> h{};
  h.v = static_cast<const L_*>(net->pass[p].logits[0]) + (int64_t)row0 * L.out_pad[0];
  h.ldv = L.out_pad[0];
  h.nb = L.n_branches;
  for (int d = 0; d < L.n_branches; ++d) {
    h.a[d] = static_cast<const L_*>(net->pass[p].logits[d + 1]) + (int64_t)row0 * L.out_pad[d + 1];
    h.lda[d] = L.out_pad[d + 1];
    h.n[d] = L.branch_sizes[d];
  }
  h.atoms = L.atoms;
  h.v_min = net->v_min;
  h.v_max = net->v_max;
  return h;
}

template fh_heads_view_t<float> fh_net_view<float>(const fh_net*, int, int32_t);
template fh_heads_view_t<fh_bf16> fh_net_view<fh_bf16>(const fh_net*, int, int32_t);

fh_status fh_net_expected_q(fh_net* net, int p, int32_t B, cudaStream_t s) {
  float* q = net->pass[p].q;
  return net->pass[p].ldt == FH_BF16 ? fh_launch_expected_q(fh_net_view<fh_bf16>(net, p), B, q, net->nq, s)
                                     : fh_launch_expected_q(fh_net_view<float>(net, p), B, q, net->nq, s);
}

static fh_status net_heads_cublaslt(fh_net* net, int p, const void* S, const float* M, int32_t B);

static fh_status net_heads(fh_net* net, int p, const void* S, const float* M, int32_t B);

/* heads_out: pass P's B rows of head outputs (bf16 logits) by the streaming kernel, on its main stream. */
static fh_status net_heads_streamed(fh_net* net, fh_net_pass& P, const void* S, int32_t B) {
  const fh_layout& L = net->L;
  fh_heads_out_args a{};
  a.A = static_cast<const fh_bf16*>(P.ah);
  a.lda = L.n_heads * L.hh;
  a.heads = L.n_heads;
  a.K = L.hh;
  a.M = B;
  a.config = net->heads_out - 1;
  for (int k = 0; k < L.n_heads; ++k) {
    a.W[k] = static_cast<const fh_bf16*>(S) + L.WO[k];
    a.bias[k] = static_cast<const fh_bf16*>(S) + L.bO[k];
    a.C[k] = static_cast<fh_bf16*>(P.logits[k]);
    a.ldc[k] = L.out_pad[k];
    a.N[k] = L.out_pad[k];
  }
  return fh_launch_heads_out(a, net->n_sm, P.s);
}

/* The online net's head-output weights (bf16 shadow) and shapes for a kernel of kernels/heads_mma.cuh, over the head
 * activations H (rows of all heads' hh columns). */
static fh_heads_mma_in heads_mma_in(const fh_net* net, const fh_bf16* H) {
  const fh_layout& L = net->L;
  fh_heads_mma_in a{};
  a.H = H;
  a.ldh = L.n_heads * L.hh;
  for (int k = 0; k < L.n_heads; ++k) {
    a.W[k] = static_cast<const fh_bf16*>(net->online_sh) + L.WO[k];
    a.bias[k] = static_cast<const fh_bf16*>(net->online_sh) + L.bO[k];
  }
  for (int d = 0; d < L.n_branches; ++d) a.n[d] = L.branch_sizes[d];
  a.nb = L.n_branches;
  a.atoms = L.atoms;
  a.v_min = net->v_min;
  a.v_max = net->v_max;
  return a;
}

/* sn_argmax: online(s')'s a*_d (rows Bs.. of pass P's activations, Bs rows) into net->astar by kernels/sn_argmax.cu
 * on sn_s, forked off the pass's main stream here; the caller joins sn_join back. */
static fh_status net_sn_argmax(fh_net* net, fh_net_pass& P, int32_t Bs) {
  const fh_layout& L = net->L;
  const int HH = L.n_heads * L.hh;
  fh_sn_argmax_args a{};
  static_cast<fh_heads_mma_in&>(a) = heads_mma_in(net, static_cast<const fh_bf16*>(P.ah) + (int64_t)Bs * HH);
  a.B = Bs;
  a.astar = net->astar;
  FH_CUDA_TRY(cudaEventRecord(P.fork, P.s));
  FH_CUDA_TRY(cudaStreamWaitEvent(net->sn_s, P.fork, 0));
  FH_TRY(fh_launch_sn_argmax(a, net->sn_argmax - 1, net->sn_blocks, net->sn_s));
  FH_CUDA_TRY(cudaEventRecord(net->sn_join, net->sn_s));
  return FH_OK;
}

/* Forward of pass p over B rows of x; masks: also store pass 0's ReLU masks (fused backward); heads: the head
 * outputs too (not when the loss computes them, heads_loss); with sn_argmax, the train step's online([s; s']) (pass 0)
 * computes the head outputs of its first B / 2 rows only, and online(s')'s a*_d from the others (net_sn_argmax). */
static fh_status net_forward_x(fh_net* net, int p, int which, const void* x, int32_t B, int want_q, bool masks,
                               bool heads = true) {
  const fh_layout& L = net->L;
  fh_net_pass& P = net->pass[p];
  const fh_dtype op = net->op;
  const void* S = which == 0 ? net->online_sh : net->target_sh;
  const float* M = which == 0 ? net->online : net->target;
  const int HH = L.n_heads * L.hh;
  if (B <= 0) return FH_OK;
  if (B > P.cap || !x) return FH_ERR_INVALID_ARGUMENT;
  const fh_relu_mask none{nullptr, 0};
  const bool m = masks && (net->fused || net->relu_masks);
  const bool train_pass = p != 1;
  if (train_pass && (net->knockout & (p == 0 ? FH_KO_ONLINE : FH_KO_TARGET))) return FH_OK;
  const bool streamed = p == 0 && which == 0 && net->heads_out && heads && !(net->knockout & FH_KO_HEADS);
  const bool sn_split = p == 0 && which == 0 && net->sn_argmax;
  if (p == 2 && which == 1 && op == FH_BF16 && net->tp1 && net->tp1->on && net->tp1_bars) {
    FH_TRY(fh_net_layer1_from_table(net, *net->tp1, x, net->tp1_bars, B, P.a1, P.s));
  } else if (p == 0 && which == 0 && net->pair && net->l1g.on) {
    /* the gathering first layer: the s rows then the s' rows in one launch, the ReLU mask of the s rows */
    if (B % 2) return FH_ERR_INVALID_ARGUMENT;
    void* xin = const_cast<void*>(x);
    FH_TRY(fh_launch_l1g_fwd(net->l1g, fh_l1g_bars(xin), fh_l1g_acc(xin, B / 2),
                             reinterpret_cast<const fh_bf16*>(fh_byte_ptr(S, L.b1, op)), static_cast<fh_bf16*>(P.a1), L.h1,
                             B, m ? static_cast<uint32_t*>(net->mask1.bits) : nullptr, net->mask1.ld, B / 2, P.s));
  } else if (p == 0 && which == 0 && net->pair) {
    /* paired layout: B/2 blocks; the s runs times w1s, the s' runs times w1n (fh_pair_layout) */
    if (B % 2 || !net->w1s) return FH_ERR_INVALID_ARGUMENT;
    const int32_t Bh = B / 2;
    const fh_pair_layout& pl = net->pair_l;
    const fh_relu_mask m0 = m ? net->mask1 : none;
    /* the s' runs need no ReLU mask (the backward runs over the s rows), so their GEMM writes none (bench/RESULTS.md,
     * fourteenth session: 0.9 of its 29.8 µs); FH_PAIR_SN_MASK=1 (A/B switch, read at capture) writes it as before */
    const fh_relu_mask m1 = m && fh_env_is("FH_PAIR_SN_MASK", "1") ? fh_mask_rows(net->mask1, Bh) : none;
    FH_TRY(fh_gemm_fwd(net->gemm, P.s, P.ws[0], op, Bh, L.h1, pl.K, x, pl.P, net->w1s, fh_byte_ptr(S, L.b1, op),
                       FH_EPI_RELU_BIAS, P.a1, op, L.h1, m0));
    FH_TRY(fh_gemm_fwd(net->gemm, P.s, P.ws[0], op, Bh, L.h1, pl.K, fh_byte_ptr(x, pl.mkt, op), pl.P, net->w1n,
                       fh_byte_ptr(S, L.b1, op), FH_EPI_RELU_BIAS, fh_byte_ptr(P.a1, (int64_t)Bh * L.h1, op), op, L.h1,
                       m1));
  } else {
    FH_TRY(fh_gemm_fwd(net->gemm, P.s, P.ws[0], op, B, L.h1, L.D, x, L.D, fh_byte_ptr(S, L.W1, op),
                       fh_byte_ptr(S, L.b1, op), FH_EPI_RELU_BIAS, P.a1, op, L.h1, m ? net->mask1 : none));
  }
  FH_TRY(fh_gemm_fwd(net->gemm, P.s, P.ws[0], op, B, L.h2, L.h1, P.a1, L.h1, fh_byte_ptr(S, L.W2, op),
                     fh_byte_ptr(S, L.b2, op), FH_EPI_RELU_BIAS, P.a2, op, L.h2, m ? net->mask2 : none));
  FH_TRY(fh_gemm_fwd(net->gemm, P.s, P.ws[0], op, B, HH, L.h2, P.a2, L.h2, fh_byte_ptr(S, L.WH, op),
                     fh_byte_ptr(S, L.bH, op), FH_EPI_RELU_BIAS, P.ah, op, HH, m ? net->maskh : none));
  if (!heads || (train_pass && (net->knockout & FH_KO_HEADS))) {
  } else if (sn_split) {
    if (B % 2) return FH_ERR_INVALID_ARGUMENT;
    /* the kernel queued before the head GEMMs (it takes its SMs first) or, with sn_late, after them */
    if (!net->sn_late) FH_TRY(net_sn_argmax(net, P, B / 2));
    FH_TRY(net_heads(net, p, S, M, B / 2));
    if (net->sn_late) FH_TRY(net_sn_argmax(net, P, B / 2));
    FH_CUDA_TRY(cudaStreamWaitEvent(P.s, net->sn_join, 0));
  } else if (streamed) {
    FH_TRY(net_heads_streamed(net, P, S, B));
  } else {
    FH_TRY(net_heads(net, p, S, M, B));
  }
  if (want_q) FH_TRY(fh_net_expected_q(net, p, B, P.s));
  return FH_OK;
}

/* The head outputs of pass p's B rows (its activations ah) into its logits. */
static fh_status net_heads(fh_net* net, int p, const void* S, const float* M, int32_t B) {
  const fh_layout& L = net->L;
  fh_net_pass& P = net->pass[p];
  const int HH = L.n_heads * L.hh;
  if (net->mma_heads) {
    /* all head outputs as one grouped launch on the main stream */
    fh_mma_problem pr[FH_NET_HEADS];
    for (int k = 0; k < L.n_heads; ++k) {
      pr[k] = fh_mma_problem{};
      pr[k].A = static_cast<const fh_bf16*>(P.ah) + (int64_t)k * L.hh;
      pr[k].lda = HH;
      pr[k].W = static_cast<const fh_bf16*>(S) + L.WO[k];
      pr[k].ldw = L.hh;
      pr[k].C = P.logits[k];
      pr[k].ldc = L.out_pad[k];
      pr[k].bias = P.ldt == FH_F32 ? static_cast<const void*>(M + L.bO[k]) : fh_byte_ptr(S, L.bO[k], FH_BF16);
      pr[k].N = L.out_pad[k];
      pr[k].K = L.hh;
    }
    return fh_launch_mma_gemm(pr, L.n_heads, B, FH_MMA_NT, P.ldt, FH_MMA_BIAS, P.s);
  }
  return net_heads_cublaslt(net, p, S, M, B);
}

fh_status fh_net_heads_rows(fh_net* net, int32_t rows) {
  if (rows <= 0 || rows > net->pass[0].cap) return FH_ERR_INVALID_ARGUMENT;
  return net_heads(net, 0, net->online_sh, net->online, rows);
}

fh_status fh_net_train_heads(fh_net* net, int32_t B) { return net->heads_loss ? fh_net_heads_rows(net, B) : FH_OK; }

/* With heads_sm >= level, in a training pass (not the collection's pass 1): head k's share of the SMs for its GEMMs
 * beside the other heads' (in proportion to its columns, at least 8); else 0 (the target already set). The train
 * step's forward (pass 0, level 1) with sn_argmax and its grid capped shares out the SMs that kernel leaves. */
static int head_sms(const fh_net* net, int p, int k, int level) {
  const fh_layout& L = net->L;
  if (net->heads_sm < level || p == 1 || L.n_heads < 2) return 0;
  int sms = net->n_sm;
  if (p == 0 && level == 1 && net->sn_argmax && net->sn_blocks > 0 && net->sn_blocks < sms) sms -= net->sn_blocks;
  return sm_share(sms, L.out_pad[k], net->out_all);
}

/* Queues gemm() with g planned for sms SMs (fh_gemm_set_sm_target; 0: the target already set), then restores the
 * target. */
template <typename F>
static fh_status with_sms(fh_gemm* g, int sms, F&& gemm) {
  const int prev = fh_gemm_sm_target(g);
  if (sms > 0) fh_gemm_set_sm_target(g, sms);
  const fh_status st = gemm();
  fh_gemm_set_sm_target(g, prev);
  return st;
}

/* The head outputs through cuBLASLt: value on the main stream, branches forked and joined back. */
static fh_status net_heads_cublaslt(fh_net* net, int p, const void* S, const float* M, int32_t B) {
  fh_net_pass& P = net->pass[p];
  const fh_layout& L = net->L;
  const fh_dtype op = net->op;
  const int HH = L.n_heads * L.hh;
  FH_CUDA_TRY(cudaEventRecord(P.fork, P.s));
  for (int k = 1; k < L.n_heads; ++k) FH_CUDA_TRY(cudaStreamWaitEvent(P.hs[k], P.fork, 0));
  for (int k = 0; k < L.n_heads; ++k) {
    /* bias of the output's dtype: the fp32 master for fp32 logits, the bf16 shadow for bf16 logits */
    const void* bias = P.ldt == FH_F32 ? static_cast<const void*>(M + L.bO[k]) : fh_byte_ptr(S, L.bO[k], P.ldt);
    FH_TRY(with_sms(net->gemm, head_sms(net, p, k, 1), [&] {
      return fh_gemm_fwd(net->gemm, P.hs[k], P.ws[k], op, B, L.out_pad[k], L.hh,
                         fh_byte_ptr(P.ah, (int64_t)k * L.hh, op), HH, fh_byte_ptr(S, L.WO[k], op), bias, FH_EPI_BIAS,
                         P.logits[k], P.ldt, L.out_pad[k]);
    }));
  }
  for (int k = 1; k < L.n_heads; ++k) {
    FH_CUDA_TRY(cudaEventRecord(P.join[k], P.hs[k]));
    FH_CUDA_TRY(cudaStreamWaitEvent(P.s, P.join[k], 0));
  }
  return FH_OK;
}

fh_status fh_net_forward(fh_net* net, int p, int which, int32_t B, int want_q) {
  return net_forward_x(net, p, which, net->pass[p].x, B, want_q, false);
}

static bool fh_net_target_cached(const fh_net* net) { return net->tcache && net->tcache->on && net->tc_rows; }

/* The fused head outputs + loss (kernels/heads_loss.cu) of pass 0's B samples; heads_loss is set only where the
 * logits and gradients are bf16, so the other dtypes never come here. */
static fh_status net_heads_loss(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                                const float* weight, const fh_heads_view_t<fh_bf16>& tg, const fh_heads_grad<fh_bf16>& g) {
  fh_heads_loss_args a{};
  static_cast<fh_heads_mma_in&>(a) = heads_mma_in(net, static_cast<const fh_bf16*>(net->pass[0].ah));
  a.tg = tg;
  a.act = act;
  a.ret = ret;
  a.disc = disc;
  a.weight = weight;
  a.B = B;
  a.wloss = net->wloss;
  a.signal = net->signal;
  a.grad = g;
  return fh_launch_heads_loss(a, net->pass[0].s);
}
template <typename T, typename L_>
static fh_status net_heads_loss(fh_net*, int32_t, const int32_t*, const float*, const float*, const float*,
                                const fh_heads_view_t<L_>&, const fh_heads_grad<T>&) {
  return FH_ERR_INVALID_ARGUMENT;
}

/* The loss with online(s')'s a*_d given (sn_argmax, set only where the logits and gradients are bf16). */
static fh_status net_loss_astar(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                                const float* weight, const fh_heads_view_t<fh_bf16>& tg, const fh_heads_grad<fh_bf16>& g) {
  return fh_launch_bdq_loss_astar(fh_net_view<fh_bf16>(net, 0), tg, net->astar, act, ret, disc, weight, B, net->wloss,
                                  net->signal, g, net->pass[0].s);
}
template <typename T, typename L_>
static fh_status net_loss_astar(fh_net*, int32_t, const int32_t*, const float*, const float*, const float*,
                                const fh_heads_view_t<L_>&, const fh_heads_grad<T>&) {
  return FH_ERR_INVALID_ARGUMENT;
}

template <typename T>
static fh_status fh_net_loss_t(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                               const float* weight) {
  const fh_layout& L = net->L;
  fh_heads_grad<T> g{};
  g.v = static_cast<T*>(net->dlog[0]);
  g.ldv = L.out_pad[0];
  for (int d = 0; d < L.n_branches; ++d) {
    g.a[d] = static_cast<T*>(net->dlog[d + 1]);
    g.lda[d] = L.out_pad[d + 1];
  }
  /* the three heads views of the training passes, in their logits dtype; target(s') from the cache rows of the
   * batch's s' slots when the trainer set them */
  auto launch = [&](auto tag) {
    using L_ = decltype(tag);
    fh_heads_view_t<L_> tg = fh_net_view<L_>(net, 2);
    if (fh_net_target_cached(net)) {
      tg.v = static_cast<const L_*>(net->tcache->logits[0]);
      for (int d = 0; d < L.n_branches; ++d) tg.a[d] = static_cast<const L_*>(net->tcache->logits[d + 1]);
      tg.rows = net->tc_rows;
    }
    /* bf16 mode: online(s) and online(s') from pass 0's head activations, inside the loss */
    if (net->heads_loss) return net_heads_loss(net, B, act, ret, disc, weight, tg, g);
    /* bf16 mode: online(s')'s a*_d from the forward (net_sn_argmax), its logits never written */
    if (net->sn_argmax) return net_loss_astar(net, B, act, ret, disc, weight, tg, g);
    return fh_launch_bdq_loss<T>(fh_net_view<L_>(net, 0), fh_net_view<L_>(net, 0, B), tg, act, ret, disc, weight, B,
                                 net->huber_delta, net->wloss, net->signal, g, net->pass[0].s);
  };
  return net->pass[0].ldt == FH_BF16 ? launch(fh_bf16{}) : launch(float{});
}

/* Backward of pass 0's first B rows into net->grad. Kernel path (default): the ReLU derivative and
 * the bias gradients (column sums) are elementwise kernels. Fused path (net->fused): the dW GEMMs
 * also produce the bias gradients (BGRADB) and the dX GEMMs apply the ReLU derivative from pass 0's
 * masks (DRELU); when the head width is not a multiple of 128 (the heads' mask blocks would not start
 * on 16-byte words) the head layer's ReLU backward and bias gradient stay a kernel. */
template <typename T>
static fh_status fh_net_backward_t(fh_net* net, int32_t B) {
  const fh_layout& L = net->L;
  fh_net_pass& P = net->pass[0];
  const fh_dtype op = net->op;
  const void* S = net->online_sh;
  const int HH = L.n_heads * L.hh;
  float* G = net->grad;
  const bool fused = net->fused != 0;
  const bool heads_masked = fused && L.hh % 128 == 0;
  const fh_relu_mask none{nullptr, 0};
  /* heads on forked streams: bias grad, weight grad, input grad into dah's column block */
  FH_CUDA_TRY(cudaEventRecord(P.fork, P.s));
  for (int k = 1; k < L.n_heads; ++k) FH_CUDA_TRY(cudaStreamWaitEvent(P.hs[k], P.fork, 0));
  const bool late = net->heads_late && !fused;
  /* the heads' bias gradients as one two-launch column sum on the last head's stream (bf16 kernel path) */
  fh_colsum_multi cm{};
  bool merged = !fused && net->colsum_merged && std::is_same<T, fh_bf16>::value && L.n_heads <= FH_COLSUM_MULTI;
  for (int k = 0; k < L.n_heads && merged; ++k) {
    cm.p[k] = fh_colsum_problem{static_cast<fh_bf16*>(net->dlog[k]), L.out_pad[k], L.out_pad[k], net->colsum_part[k],
                                G + L.bO[k]};
    merged = fh_colsum_multi_ok(net->dlog[k], L.out_pad[k], L.out_pad[k]);
  }
  cm.count = L.n_heads;
  for (int k = 0; k < L.n_heads; ++k) {
    cudaStream_t hs = P.hs[k];
    T* dl = static_cast<T*>(net->dlog[k]);
    const fh_relu_mask mk =
        heads_masked ? fh_relu_mask{static_cast<char*>(net->maskh.bits) + (int64_t)k * L.hh / 8, net->maskh.ld} : none;
    /* each head's GEMMs on its share of the SMs (heads_sm 2) */
    const int share = head_sms(net, 0, k, 2);
    auto dx = [&] {
      return fh_gemm_dx(net->gemm, hs, P.ws[k], op, B, L.out_pad[k], L.hh, dl, L.out_pad[k],
                        fh_byte_ptr(S, L.WO[k], op), fh_byte_ptr(net->dah, (int64_t)k * L.hh, op), op, HH, mk);
    };
    if (late) {
      FH_TRY(with_sms(net->gemm, share, dx));
      if (k > 0) FH_CUDA_TRY(cudaEventRecord(net->dx_ev[k], hs));
    }
    if (merged) {
      if (k == L.n_heads - 1) FH_TRY(fh_launch_colsum_multi(cm, B, hs));
    } else if (!fused) {
      FH_TRY(fh_launch_relu_bwd_colsum<T>(dl, nullptr, L.out_pad[k], B, L.out_pad[k], net->colsum_part[k],
                                          G + L.bO[k], hs));
    }
    FH_TRY(with_sms(net->gemm, share, [&] {
      return fh_gemm_dw(net->gemm, hs, P.ws[k], op, B, L.out_pad[k], L.hh, dl, L.out_pad[k],
                        fh_byte_ptr(P.ah, (int64_t)k * L.hh, op), HH, G + L.WO[k], fused ? G + L.bO[k] : nullptr);
    }));
    if (!late) FH_TRY(with_sms(net->gemm, share, dx));
  }
  for (int k = 1; k < L.n_heads; ++k) {
    cudaEvent_t e = late ? net->dx_ev[k] : P.join[k];
    if (!late) FH_CUDA_TRY(cudaEventRecord(e, P.hs[k]));
    FH_CUDA_TRY(cudaStreamWaitEvent(P.s, e, 0));
  }
  /* the bias-gradient finishes of the three layers below run on head stream 1 (free again), beside the
   * GEMMs; joined at the end */
  cudaStream_t fs = L.n_heads > 1 && net->finish_side ? P.hs[1] : P.s;
  /* head first layer (all heads as one GEMM) */
  const bool rmk = net->relu_masks && !fused;  /* the ReLU passes read the forward's bit masks */
  if (!heads_masked)
    FH_TRY(fh_launch_relu_bwd_colsum_split<T>(static_cast<T*>(net->dah), static_cast<const T*>(P.ah), HH, B, HH,
                                              net->colsum_trunk[0], G + L.bH, P.s, fs, net->fin_ev,
                                              rmk ? net->maskh.bits : nullptr, net->maskh.ld));
  /* with dw_side (kernel path, fs != P.s): fs already follows the ReLU pass that wrote dah / da2, so the weight
   * gradient runs there after the finish, beside the main stream's input gradient and the next ReLU pass (which
   * touch neither the weight gradient's inputs nor its output) */
  const bool dws = net->dw_side && !fused && fs != P.s;
  cudaStream_t dws_s = dws ? fs : P.s;
  void* dws_ws = dws ? P.ws[1] : P.ws[0];
  /* a weight gradient on fs, planned for side_sms SMs when set */
  auto on_side = [&](cudaStream_t st, auto&& gemm) {
    return with_sms(net->gemm, st != P.s ? net->side_sms : 0, gemm);
  };
  FH_TRY(on_side(dws_s, [&] {
    return fh_gemm_dw(net->gemm, dws_s, dws_ws, op, B, HH, L.h2, net->dah, HH, P.a2, L.h2, G + L.WH,
                      heads_masked ? G + L.bH : nullptr);
  }));
  FH_TRY(fh_gemm_dx(net->gemm, P.s, P.ws[0], op, B, HH, L.h2, net->dah, HH, fh_byte_ptr(S, L.WH, op), net->da2, op,
                    L.h2, fused ? net->mask2 : none));
  /* trunk layer 2 */
  if (!fused)
    FH_TRY(fh_launch_relu_bwd_colsum_split<T>(static_cast<T*>(net->da2), static_cast<const T*>(P.a2), L.h2, B, L.h2,
                                              net->colsum_trunk[1], G + L.b2, P.s, fs, net->fin_ev,
                                              rmk ? net->mask2.bits : nullptr, net->mask2.ld));
  FH_TRY(on_side(dws_s, [&] {
    return fh_gemm_dw(net->gemm, dws_s, dws_ws, op, B, L.h2, L.h1, net->da2, L.h2, P.a1, L.h1, G + L.W2,
                      fused ? G + L.b2 : nullptr);
  }));
  FH_TRY(fh_gemm_dx(net->gemm, P.s, P.ws[0], op, B, L.h2, L.h1, net->da2, L.h2, fh_byte_ptr(S, L.W2, op), net->da1, op,
                    L.h1, fused ? net->mask1 : none));
  /* trunk layer 1 (no input gradient); with dw1_acc_first its bias finish waits until the account columns' GEMM
   * below is queued on fs (the GEMM needs only da1, so it starts beside the market columns' GEMM) */
  const bool pair = net->pair;
  const bool split1 = pair || (net->dw1_split && !fused && fs != P.s);
  const bool acc_first = fh_net_dw1_acc_first_on(*net, pair);  /* implies split1 and fs != P.s */
  int chunks1 = 0;
  if (!fused)
    FH_TRY(fh_launch_relu_bwd_colsum_split<T>(static_cast<T*>(net->da1), static_cast<const T*>(P.a1), L.h1, B, L.h1,
                                              net->colsum_trunk[2], G + L.b1, P.s, fs, net->fin_ev,
                                              rmk ? net->mask1.bits : nullptr, net->mask1.ld,
                                              acc_first ? &chunks1 : nullptr));
  if (split1) {
    /* the market columns (a multiple of 128) on the main stream, the 8 account columns on fs after da1's finish
     * (before it with dw1_acc_first; fs follows the ReLU pass that wrote da1): tiles that fit the width instead of one mostly empty tile row.
     * Paired layout: the s runs of the blocks (account at 0, market at mkt; always these two GEMMs) */
    const int mk = L.D - FH_ENV_ACCOUNT;
    const bool gathering = pair && net->l1g.on; /* the account features apart, the market columns gathered */
    const int ldx = gathering ? FH_ENV_ACCOUNT : pair ? net->pair_l.P : L.D;
    const void* xa = gathering ? fh_l1g_acc(P.x, B) : pair ? P.x : fh_byte_ptr(P.x, mk, op);
    const void* xm = pair ? fh_byte_ptr(P.x, net->pair_l.mkt, op) : P.x;
    FH_TRY(on_side(fs, [&] {
      return fh_gemm_dw(net->gemm, fs, fs != P.s ? P.ws[1] : P.ws[0], op, B, L.h1, FH_ENV_ACCOUNT, net->da1, L.h1, xa,
                        ldx, G + L.W1 + mk, nullptr, L.D);
    }));
    if (acc_first) FH_TRY(fh_launch_colsum_finish(net->colsum_trunk[2], chunks1, L.h1, G + L.b1, fs));
    if (gathering)
      FH_TRY(fh_launch_l1g_dw(net->l1g, fh_l1g_bars(P.x), B, G + L.W1, L.D, P.s));
    else
      FH_TRY(with_sms(net->gemm, net->dw1_sms, [&] {
        return fh_gemm_dw(net->gemm, P.s, P.ws[0], op, B, L.h1, mk, net->da1, L.h1, xm, ldx, G + L.W1, nullptr, L.D);
      }));
  } else {
    FH_TRY(fh_gemm_dw(net->gemm, P.s, P.ws[0], op, B, L.h1, L.D, net->da1, L.h1, P.x, L.D, G + L.W1,
                      fused ? G + L.b1 : nullptr));
  }
  if (late) /* the heads' bias and weight gradients (head stream 1 is joined below when it is fs) */
    for (int k = 1; k < L.n_heads; ++k)
      if (P.hs[k] != fs) {
        FH_CUDA_TRY(cudaEventRecord(P.join[k], P.hs[k]));
        FH_CUDA_TRY(cudaStreamWaitEvent(P.s, P.join[k], 0));
      }
  if (fs != P.s) { /* (with nothing forked, as in the fused path, an empty join) */
    FH_CUDA_TRY(cudaEventRecord(P.join[1], fs));
    FH_CUDA_TRY(cudaStreamWaitEvent(P.s, P.join[1], 0));
  }
  return FH_OK;
}

/* dX (B, N; row stride ld) = (dY (B, K; row stride lda) W (K, N)) * (act > 0), act with dX's stride, with the
 * column-sum partials (stride ld): one layer, or one head, of the mma backward. */
static fh_mma_problem fh_mma_dx_problem(const fh_bf16* dY, int K, int lda, const fh_bf16* W, int N, void* dX,
                                        const fh_bf16* act, int ld, float* colsum) {
  fh_mma_problem p{};
  p.A = dY;
  p.lda = lda;
  p.W = W;
  p.ldw = N;
  p.C = dX;
  p.act = act;
  p.colsum = colsum;
  p.ldc = p.ldact = p.ldcs = ld;
  p.N = N;
  p.K = K;
  return p;
}

/* The mma backward (net->mma, bf16): the input-gradient chain on pass 0's main stream, each link one
 * grouped tensor-core GEMM whose epilogue applies the ReLU derivative of the layer below and writes that
 * layer's bias-gradient partials:
 *   dah = (dlog_k WO_k) * (ah > 0) for every head k   (one launch)  -> bH
 *   da2 = (dah WH) * (a2 > 0)                                        -> b2
 *   da1 = (da2 W2) * (a1 > 0)                                        -> b1, then dW1 = da1^T x
 * Beside it on the head streams: the head outputs' bias sums (column sums of dlog_k) and weight
 * gradients (hs[1]: heads 0 and 1, hs[k]: head k), dWH once dah is ready (hs[2]) and dW2 once da2 is
 * ready (hs[3]); all joined back before the optimiser. */
static fh_status fh_net_backward_mma(fh_net* net, int32_t B) {
  const fh_layout& L = net->L;
  fh_net_pass& P = net->pass[0];
  const fh_dtype op = net->op;
  const fh_bf16* S = static_cast<const fh_bf16*>(net->online_sh);
  const int HH = L.n_heads * L.hh;
  float* G = net->grad;
  const int tiles = fh_mma_row_tiles(B);
  const fh_bf16* ah = static_cast<const fh_bf16*>(P.ah);
  const int nside = L.n_heads - 1;  /* side streams hs[1..nside] */
  auto side = [&](int k) { return k < 1 ? 1 : (k > nside ? nside : k); };
  FH_CUDA_TRY(cudaEventRecord(P.fork, P.s));
  for (int k = 1; k <= nside; ++k) FH_CUDA_TRY(cudaStreamWaitEvent(P.hs[k], P.fork, 0));
  for (int k = 0; k < L.n_heads; ++k) {
    const int h = side(k);
    fh_bf16* dl = static_cast<fh_bf16*>(net->dlog[k]);
    FH_TRY(fh_launch_relu_bwd_colsum<fh_bf16>(dl, nullptr, L.out_pad[k], B, L.out_pad[k], net->colsum_part[k],
                                              G + L.bO[k], P.hs[h]));
    FH_TRY(fh_gemm_dw(net->gemm, P.hs[h], P.ws[h], op, B, L.out_pad[k], L.hh, dl, L.out_pad[k], ah + (int64_t)k * L.hh,
                      HH, G + L.WO[k]));
  }
  /* dah */
  fh_mma_problem pr[FH_NET_HEADS];
  for (int k = 0; k < L.n_heads; ++k)
    pr[k] = fh_mma_dx_problem(static_cast<const fh_bf16*>(net->dlog[k]), L.out_pad[k], L.out_pad[k], S + L.WO[k], L.hh,
                              static_cast<fh_bf16*>(net->dah) + (int64_t)k * L.hh, ah + (int64_t)k * L.hh, HH,
                              net->colsum_lv[0] + (int64_t)k * L.hh);
  const unsigned fl = FH_MMA_MASK | FH_MMA_COLSUM;
  FH_TRY(fh_launch_mma_gemm(pr, L.n_heads, B, FH_MMA_NN, FH_BF16, fl, P.s));
  FH_CUDA_TRY(cudaEventRecord(net->bev[0], P.s));
  {
    cudaStream_t hs = P.hs[side(2)];
    FH_CUDA_TRY(cudaStreamWaitEvent(hs, net->bev[0], 0));
    FH_TRY(fh_launch_colsum_finish(net->colsum_lv[0], tiles, HH, G + L.bH, hs));
    FH_TRY(fh_gemm_dw(net->gemm, hs, P.ws[side(2)], op, B, HH, L.h2, net->dah, HH, P.a2, L.h2, G + L.WH));
  }
  /* da2 */
  const fh_mma_problem t2 = fh_mma_dx_problem(static_cast<const fh_bf16*>(net->dah), HH, HH, S + L.WH, L.h2, net->da2,
                                              static_cast<const fh_bf16*>(P.a2), L.h2, net->colsum_lv[1]);
  FH_TRY(fh_launch_mma_gemm(&t2, 1, B, FH_MMA_NN, FH_BF16, fl, P.s));
  FH_CUDA_TRY(cudaEventRecord(net->bev[1], P.s));
  {
    cudaStream_t hs = P.hs[side(3)];
    FH_CUDA_TRY(cudaStreamWaitEvent(hs, net->bev[1], 0));
    FH_TRY(fh_launch_colsum_finish(net->colsum_lv[1], tiles, L.h2, G + L.b2, hs));
    FH_TRY(fh_gemm_dw(net->gemm, hs, P.ws[side(3)], op, B, L.h2, L.h1, net->da2, L.h2, P.a1, L.h1, G + L.W2));
  }
  /* da1, then the first layer's weight gradient on the main stream */
  const fh_mma_problem t1 = fh_mma_dx_problem(static_cast<const fh_bf16*>(net->da2), L.h2, L.h2, S + L.W2, L.h1,
                                              net->da1, static_cast<const fh_bf16*>(P.a1), L.h1, net->colsum_lv[2]);
  FH_TRY(fh_launch_mma_gemm(&t1, 1, B, FH_MMA_NN, FH_BF16, fl, P.s));
  FH_TRY(fh_launch_colsum_finish(net->colsum_lv[2], tiles, L.h1, G + L.b1, P.s));
  FH_TRY(fh_gemm_dw(net->gemm, P.s, P.ws[0], op, B, L.h1, L.D, net->da1, L.h1, P.x, L.D, G + L.W1));
  for (int k = 1; k <= nside; ++k) {
    FH_CUDA_TRY(cudaEventRecord(P.join[k], P.hs[k]));
    FH_CUDA_TRY(cudaStreamWaitEvent(P.s, P.join[k], 0));
  }
  return FH_OK;
}

/* online([s; s']) and, unless the target is ready, target(s') (forked off pass 0's stream, joined back
 * before the loss). */
static fh_status fh_net_train_forwards(fh_net* net, int32_t B, bool target_ready) {
  fh_net_pass& P0 = net->pass[0];
  fh_net_pass& P2 = net->pass[2];
  if (!target_ready) {
    FH_CUDA_TRY(cudaEventRecord(P0.join[0], P0.s));
    FH_CUDA_TRY(cudaStreamWaitEvent(P2.s, P0.join[0], 0));
  }
  FH_TRY(net_forward_x(net, 0, 0, P0.x, 2 * B, 0, true, !net->heads_loss));
  if (!target_ready) {
    FH_TRY(net_forward_x(net, 2, 1, fh_net_next_obs(net, B), B, 0, false));
    FH_CUDA_TRY(cudaEventRecord(P2.join[0], P2.s));
    FH_CUDA_TRY(cudaStreamWaitEvent(P0.s, P2.join[0], 0));
  }
  return FH_OK;
}

fh_status fh_net_target_forward(fh_net* net, int32_t B, const void* x, const int32_t* bars, cudaStream_t from) {
  if (B <= 0 || B > net->cap || !x) return FH_ERR_INVALID_ARGUMENT;
  fh_net_pass& P2 = net->pass[2];
  FH_CUDA_TRY(cudaEventRecord(P2.fork, from));
  FH_CUDA_TRY(cudaStreamWaitEvent(P2.s, P2.fork, 0));
  const int32_t* keep = net->tp1_bars;
  net->tp1_bars = bars;
  const fh_status st = net_forward_x(net, 2, 1, fh_net_next_obs(net, B, const_cast<void*>(x)), B, 0, false);
  net->tp1_bars = keep;
  FH_TRY(st);
  FH_CUDA_TRY(cudaEventRecord(P2.join[0], P2.s));
  FH_CUDA_TRY(cudaStreamWaitEvent(from, P2.join[0], 0));
  return FH_OK;
}

fh_status fh_net_forward_loss(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                              const float* weight, bool mean, bool target_ready) {
  if (B <= 0 || B > net->cap) return FH_ERR_INVALID_ARGUMENT;
  FH_TRY(fh_net_train_forwards(net, B, target_ready || fh_net_target_cached(net)));
  if (!(net->knockout & FH_KO_LOSS))
    FH_TRY(net->op == FH_BF16 ? fh_net_loss_t<fh_bf16>(net, B, act, ret, disc, weight)
                              : fh_net_loss_t<float>(net, B, act, ret, disc, weight));
  return mean ? fh_net_loss_mean(net, B, net->pass[0].s) : FH_OK;
}

fh_status fh_net_loss_mean(fh_net* net, int32_t B, cudaStream_t s, const int64_t* copy_src, int64_t* copy_dst) {
  return fh_launch_mean(net->wloss, B, net->mean_part, net->loss, s, copy_src, copy_dst);
}

fh_status fh_net_backward(fh_net* net, int32_t B) {
  if (B <= 0 || B > net->cap) return FH_ERR_INVALID_ARGUMENT;
  if (net->knockout & FH_KO_BACKWARD) return FH_OK;
  if (net->mma) return fh_net_backward_mma(net, B);
  return net->op == FH_BF16 ? fh_net_backward_t<fh_bf16>(net, B) : fh_net_backward_t<float>(net, B);
}

fh_status fh_net_loss_grad(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                           const float* weight) {
  FH_TRY(fh_net_forward_loss(net, B, act, ret, disc, weight));
  return fh_net_backward(net, B);
}

fh_status fh_net_optimise(fh_net* net, const fh_config& cfg, const fh_step_record* rec, bool* recorded) {
  cudaStream_t s = net->pass[0].s;
  const int64_t n = net->L.total;
  if (recorded) *recorded = false;
  if (net->knockout & FH_KO_OPTIM) return fh_launch_step_bump(net->step, s);  /* the step counter still moves */
  const fh_w1_pair w1p = fh_net_w1_pair(net);
  if (!net->optim_chain) {
    if (recorded) *recorded = rec != nullptr;
    /* grad norm + clip, Adam, step bump and target update in one launch or two (bit for bit the chain below) */
    if (net->op == FH_BF16)
      return fh_launch_optimise_fused<fh_bf16>(n, net->online, static_cast<fh_bf16*>(net->online_sh), net->grad,
                                               net->adam_m, net->adam_v, net->target,
                                               static_cast<fh_bf16*>(net->target_sh), net->red_part, net->gnorm,
                                               net->gscale, net->step, net->opt_ticket, cfg.grad_clip, cfg.lr,
                                               cfg.adam_beta1, cfg.adam_beta2, cfg.adam_eps, cfg.target_update_every,
                                               cfg.tau, s, rec, &w1p, net->optim_launches);
    return fh_launch_optimise_fused<float>(n, net->online, nullptr, net->grad, net->adam_m, net->adam_v, net->target,
                                           nullptr, net->red_part, net->gnorm, net->gscale, net->step, net->opt_ticket,
                                           cfg.grad_clip, cfg.lr, cfg.adam_beta1, cfg.adam_beta2, cfg.adam_eps,
                                           cfg.target_update_every, cfg.tau, s, rec, nullptr, net->optim_launches);
  }
  FH_TRY(fh_launch_grad_norm(net->grad, n, cfg.grad_clip, net->red_part, net->gnorm, net->gscale, s));
  if (net->op == FH_BF16) {
    FH_TRY(fh_launch_adam<fh_bf16>(n, net->online, static_cast<fh_bf16*>(net->online_sh), net->grad, net->adam_m,
                                   net->adam_v, net->gscale, net->step, cfg.lr, cfg.adam_beta1, cfg.adam_beta2,
                                   cfg.adam_eps, s));
    FH_TRY(fh_launch_w1_pair(static_cast<const fh_bf16*>(net->online_sh), w1p, s));
    FH_TRY(fh_launch_target_update<fh_bf16>(n, net->online, net->target, static_cast<fh_bf16*>(net->target_sh),
                                            net->step, cfg.target_update_every, cfg.tau, s));
  } else {
    FH_TRY(fh_launch_adam<float>(n, net->online, nullptr, net->grad, net->adam_m, net->adam_v, net->gscale, net->step,
                                 cfg.lr, cfg.adam_beta1, cfg.adam_beta2, cfg.adam_eps, s));
    FH_TRY(fh_launch_target_update<float>(n, net->online, net->target, nullptr, net->step, cfg.target_update_every,
                                          cfg.tau, s));
  }
  return FH_OK;
}

/* ------------------------------------------------------------------ the target's first-layer table */

#define FH_P1_CHUNK 32768

void fh_target_p1_free(fh_target_p1* tp, fh_net* net) {
  if (!tp) return;
  if (tp->table) cudaFree(tp->table);
  if (tp->scratch) cudaFree(tp->scratch);
  if (net && net->tp1 == tp) {
    net->tp1 = nullptr;
    net->tp1_bars = nullptr;
  }
  memset(tp, 0, sizeof *tp);
}

/* An optional part (the target's table, its cache) left off: not an error, `why` says why. */
template <typename Part>
static fh_status part_off(Part* part, const char* why) {
  snprintf(part->why, sizeof part->why, "%s", why);
  part->on = 0;
  return FH_OK;
}

fh_status fh_target_p1_setup(fh_target_p1* tp, fh_net* net, const fh_market_view& m, int32_t window,
                             const fh_config& cfg) {
  memset(tp, 0, sizeof *tp);
  const fh_layout& L = net->L;
  const char* e = getenv("FH_TARGET_P1");
  if (e && strcmp(e, "0") == 0) return part_off(tp, "FH_TARGET_P1=0");
  if (net->op != FH_BF16) return part_off(tp, "deterministic (fp32) mode keeps the GEMM's bits");
  if (cfg.tau > 0.0f || cfg.target_update_every <= 0) return part_off(tp, "the target changes every step (Polyak tau)");
  if (L.h1 % 8 || L.h1 > 1024) return part_off(tp, "hidden1 is not a multiple of 8 (or > 1024)");
  if (L.D != window * m.n_features + FH_ENV_ACCOUNT || m.n_bars < window) return part_off(tp, "no market windows");
  tp->bar0 = window - 1;
  tp->n = m.n_bars - tp->bar0;
  tp->chunk = (int32_t)(tp->n < FH_P1_CHUNK ? tp->n : FH_P1_CHUNK);
  const size_t tb = (size_t)tp->n * L.h1 * sizeof(float), sb = (size_t)tp->chunk * L.D * sizeof(fh_bf16);
  size_t free_b = 0, total_b = 0;
  FH_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  /* leave the rest of the device to what the batch sizer counted on (it ran before: half of free memory) */
  if ((double)(tb + sb) > 0.25 * (double)free_b) {
    char why[sizeof tp->why];
    snprintf(why, sizeof why, "the table (%zu MiB) is more than a quarter of free device memory", (tb + sb) >> 20);
    return part_off(tp, why);
  }
  if (cudaMalloc(&tp->table, tb) != cudaSuccess || cudaMalloc((void**)&tp->scratch, sb) != cudaSuccess) {
    cudaGetLastError(); /* not sticky: clear it */
    fh_target_p1_free(tp, net);
    return part_off(tp, "no device memory for the table");
  }
  tp->on = 1;
  net->tp1 = tp;
  fh_status st = fh_target_p1_refresh(*tp, net, m, window, net->pass[0].s);
  if (st == FH_OK && cudaStreamSynchronize(net->pass[0].s) != cudaSuccess) st = fh_cuda_status(cudaGetLastError());
  if (st != FH_OK) fh_target_p1_free(tp, net);
  return st;
}

fh_status fh_target_p1_refresh(const fh_target_p1& tp, fh_net* net, const fh_market_view& m, int32_t window,
                               cudaStream_t s, float* table) {
  if (!tp.on) return FH_OK;
  const fh_layout& L = net->L;
  float* out = table ? table : tp.table;
  const fh_bf16* w1 = static_cast<const fh_bf16*>(net->target_sh) + L.W1;
  for (int64_t off = 0; off < tp.n; off += tp.chunk) {
    const int64_t rows = tp.n - off < tp.chunk ? tp.n - off : tp.chunk;
    FH_TRY(fh_launch_market_windows(m, window, tp.bar0 + off, rows, L.D, tp.scratch, s));
    FH_TRY(fh_gemm_fwd(net->gemm, s, net->pass[0].ws[0], FH_BF16, (int)rows, L.h1, L.D, tp.scratch, L.D, w1, nullptr,
                       FH_EPI_NONE, out + off * L.h1, FH_F32, L.h1));
  }
  return FH_OK;
}

fh_status fh_net_layer1_from_table(const fh_net* net, const fh_target_p1& tp, const void* x, const int32_t* bars,
                                   int32_t B, void* a1, cudaStream_t s) {
  const fh_layout& L = net->L;
  const fh_bf16* S = static_cast<const fh_bf16*>(net->target_sh);
  return fh_launch_layer1_p1(tp.table, tp.bar0, tp.n, bars, static_cast<const fh_bf16*>(x), L.D, S + L.W1, S + L.b1,
                             L.h1, B, static_cast<fh_bf16*>(a1), s);
}

/* ------------------------------------------------------------------ the target cache */

void fh_target_cache_free(fh_target_cache* tc, fh_net* net) {
  if (!tc) return;
  for (int k = 0; k < FH_NET_HEADS; ++k)
    if (tc->logits[k]) cudaFree(tc->logits[k]);
  if (tc->bars) cudaFree(tc->bars);
  if (tc->x) cudaFree(tc->x);
  if (tc->fork) cudaEventDestroy(tc->fork);
  if (tc->join) cudaEventDestroy(tc->join);
  if (net && net->tcache == tc) {
    net->tcache = nullptr;
    net->tc_rows = nullptr;
  }
  memset(tc, 0, sizeof *tc);
}

fh_status fh_target_cache_setup(fh_target_cache* tc, fh_net* net, const fh_target_p1& tp, int64_t capacity,
                                int32_t chunk, const fh_config& cfg) {
  memset(tc, 0, sizeof *tc);
  const fh_layout& L = net->L;
  const char* e = getenv("FH_TARGET_CACHE");
  if (e && strcmp(e, "0") == 0) return part_off(tc, "FH_TARGET_CACHE=0");
  if (!tp.on) return part_off(tc, "no target first-layer table");
  if (chunk <= 0 || chunk > net->cap || capacity < chunk) return part_off(tc, "the replay holds fewer slots than a batch");
  if (capacity > ((int64_t)1 << 31) - 1) return part_off(tc, "the replay has more slots than int32 indices");
  /* worth it only when an epoch's fills (the collected rows, and all rows after each hard update) run fewer
   * batch-sized target forwards than half the epoch's train steps would (the reference: 25 + 341/2000 x 128
   * = 47 against 341); FH_TARGET_CACHE=1 skips this test */
  const double per_epoch = std::ceil((double)cfg.episode_len * cfg.n_envs / chunk) +
                           (double)cfg.train_steps / cfg.target_update_every * std::ceil((double)capacity / chunk);
  if (!(e && strcmp(e, "1") == 0) && per_epoch > 0.5 * cfg.train_steps) {
    char why[sizeof tc->why];
    snprintf(why, sizeof why, "its fills would cost %.0f target forwards an epoch against %d train steps", per_epoch,
             cfg.train_steps);
    return part_off(tc, why);
  }
  const size_t es = fh_dtype_size(net->pass[2].ldt);
  size_t bytes = (size_t)chunk * (L.D * sizeof(fh_bf16) + sizeof(int32_t));
  for (int k = 0; k < L.n_heads; ++k) bytes += (size_t)capacity * L.out_pad[k] * es;
  size_t free_b = 0, total_b = 0;
  FH_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  if ((double)bytes > 0.25 * (double)free_b) {
    char why[sizeof tc->why];
    snprintf(why, sizeof why, "the cache (%zu MiB) is more than a quarter of free device memory", bytes >> 20);
    return part_off(tc, why);
  }
  bool ok = true;
  for (int k = 0; k < L.n_heads && ok; ++k)
    ok = cudaMalloc(&tc->logits[k], (size_t)capacity * L.out_pad[k] * es) == cudaSuccess;
  ok = ok && cudaMalloc((void**)&tc->bars, (size_t)chunk * sizeof(int32_t)) == cudaSuccess;
  ok = ok && cudaMalloc((void**)&tc->x, (size_t)chunk * L.D * sizeof(fh_bf16)) == cudaSuccess &&
       cudaMemset(tc->x, 0, (size_t)chunk * L.D * sizeof(fh_bf16)) == cudaSuccess;
  ok = ok && cudaEventCreateWithFlags(&tc->fork, cudaEventDisableTiming) == cudaSuccess &&
       cudaEventCreateWithFlags(&tc->join, cudaEventDisableTiming) == cudaSuccess;
  if (!ok) {
    cudaGetLastError(); /* not sticky: clear it */
    fh_target_cache_free(tc, net);
    return part_off(tc, "no device memory for the cache");
  }
  tc->capacity = capacity;
  tc->chunk = chunk;
  tc->on = 1;
  net->tcache = tc;
  return FH_OK;
}

fh_status fh_target_cache_fill(const fh_target_cache& tc, fh_net* net, const int32_t* bar, const float* account,
                               int64_t slot0, int64_t count, cudaStream_t from) {
  if (!tc.on || count <= 0) return FH_OK;
  if (slot0 < 0 || slot0 + count > tc.capacity || !bar || !account) {
    char why[160];
    snprintf(why, sizeof why, "slots [%lld, %lld) outside the cache's %lld, or no replay arrays", (long long)slot0,
             (long long)(slot0 + count), (long long)tc.capacity);
    fh_cuda_set_error(__FILE__, __LINE__, "fh_target_cache_fill", why);
    return FH_ERR_INVALID_ARGUMENT;
  }
  const fh_layout& L = net->L;
  fh_net_pass& P2 = net->pass[2];
  const size_t es = fh_dtype_size(P2.ldt);
  FH_CUDA_TRY(cudaEventRecord(tc.fork, from));
  FH_CUDA_TRY(cudaStreamWaitEvent(P2.s, tc.fork, 0));
  void* keep_logits[FH_NET_HEADS];
  for (int k = 0; k < L.n_heads; ++k) keep_logits[k] = P2.logits[k];
  const int32_t* keep_bars = net->tp1_bars;
  fh_status st = FH_OK;
  for (int64_t off = 0; off < count && st == FH_OK; off += tc.chunk) {
    int64_t c0 = slot0 + off;
    if (c0 + tc.chunk > tc.capacity) c0 = tc.capacity - tc.chunk;
    st = fh_launch_slot_states(bar, account, c0, tc.chunk, tc.bars, tc.x, L.D, P2.s);
    if (st != FH_OK) break;
    for (int k = 0; k < L.n_heads; ++k) P2.logits[k] = static_cast<char*>(tc.logits[k]) + c0 * L.out_pad[k] * es;
    net->tp1_bars = tc.bars;
    st = net_forward_x(net, 2, 1, tc.x, tc.chunk, 0, false);
  }
  for (int k = 0; k < L.n_heads; ++k) P2.logits[k] = keep_logits[k];
  net->tp1_bars = keep_bars;
  FH_TRY(st);
  FH_CUDA_TRY(cudaEventRecord(tc.join, P2.s));
  FH_CUDA_TRY(cudaStreamWaitEvent(from, tc.join, 0));
  return FH_OK;
}
