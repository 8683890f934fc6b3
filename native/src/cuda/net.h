/*
 * net.h — the BDQ network on the GPU (DESIGN §5): parameters, forward passes, the fused loss,
 * backward, global-norm clip, Adam and the target update. Host code only; the GEMMs go through
 * gemm_cublaslt.h, the elementwise work through kernels/net_kernels.cuh.
 *
 * Memory: every flat vector (online, target, grad, Adam m and v) is one allocation of
 * layout.total floats carved by native/src/common/layout.h, so pointers stay fixed for graph capture.
 * In bf16 mode the online and target nets also have a bf16 shadow (same layout) that the GEMMs read;
 * Adam and the target update rewrite it. In deterministic mode (fp32) the shadow is the master.
 *
 * Passes: pass 0 = online([s; s']) over 2B rows (rows 0..B-1 backpropagate; rows B..2B-1 are
 * online(s') for the double-DQN argmax: one forward of twice the rows instead of two), pass 2 =
 * target(s') reading rows B.. of pass 0's input, pass 1 = collection and evaluation. Each pass has its
 * own main stream, one stream per branch head (the value head runs on the main stream) and cuBLASLt
 * workspaces, so the passes and the heads inside each overlap (forked streams joined by events;
 * inside a captured graph they become parallel branches).
 * Backward (bf16 mode, net->mma, opt-in): the input-gradient chain dlog -> dah -> da2 -> da1 -> dW1 runs on the
 * pass's main stream through fh_launch_mma_gemm (ReLU derivative and bias column sums in its epilogue);
 * the other weight gradients and the head-output bias sums run beside it on the head streams.
 * Otherwise the ReLU backward and bias column sums are kernels of their own. With
 * FH_FUSED_EPILOGUE=1 (net->fused, where cuBLASLt supports it) pass 0's forward stores ReLU bit masks,
 * the input-gradient GEMMs apply the ReLU derivative in their epilogue (DRELU) and the weight-gradient
 * GEMMs produce the bias gradients (BGRADB). Measured slower on the H200 (cuBLASLt runs those
 * epilogues as extra kernels for these shapes), so it is opt-in.
 */
#ifndef FH_CUDA_NET_H
#define FH_CUDA_NET_H

#include "../../../kernels/mma_gemm.cuh"
#include "../../../kernels/l1_gather.cuh"
#include "../../../kernels/net_kernels.cuh"
#include "../../../kernels/p1.cuh"
#include "../common/layout.h"
#include "gemm_cublaslt.h"

#define FH_NET_PASSES 3

/* FH_PROFILE_KNOCKOUT bits (read at create; measurement only: the train step leaves these parts out,
 * so the trained net is garbage; fh_info.engine names the mask). Used by `native_check knockout` to
 * see what each part of a graph-replayed step costs in place. */
#define FH_KO_REPLAY 1u     /* PER sample, gather, priority update */
#define FH_KO_TARGET 2u     /* target(s') forward */
#define FH_KO_ONLINE 4u     /* online([s; s']) forward */
#define FH_KO_HEADS 8u      /* the head output GEMMs of both training passes */
#define FH_KO_LOSS 16u      /* the loss kernel */
#define FH_KO_BACKWARD 32u  /* the backward */
#define FH_KO_OPTIM 64u     /* grad norm, Adam, target update */
/* the replay's parts one at a time (the step keeps its side-stream structure, unlike FH_KO_REPLAY) */
#define FH_KO_SAMPLE 128u   /* PER sample + importance weights */
#define FH_KO_GATHER 256u   /* the replay gather of [s; s'] */
#define FH_KO_PRIO 512u     /* the priority update */
#define FH_KO_MEAN 1024u    /* the batch-loss mean */
#define FH_NET_HEADS FH_LAYOUT_MAX_HEADS

struct fh_net_pass {
  int32_t cap;                  /* rows (pass 0: 2 x the net's cap, for [s; s']) */
  void* x;                      /* (cap, D) input, op dtype; pass 2 has none (it reads s' of pass 0) */
  void* a1;                     /* (cap, h1) post-ReLU */
  void* a2;                     /* (cap, h2) post-ReLU */
  void* ah;                     /* (cap, H*hh) post-ReLU, head k in columns k*hh.. */
  void* logits[FH_NET_HEADS];   /* (cap, out_pad[k]) of dtype ldt */
  fh_dtype ldt;                 /* head-output dtype: fp32, or bf16 for the training passes in bf16 mode
                                   (the default; FH_LOGITS_BF16=0 keeps fp32) */
  float* q;                     /* (cap, nq) expected Q, fp32 */
  cudaStream_t s;               /* main stream of the pass */
  cudaStream_t hs[FH_NET_HEADS];/* hs[0] = s; hs[k] head k's stream */
  void* ws[FH_NET_HEADS];       /* cuBLASLt workspace per stream */
  cudaEvent_t fork, join[FH_NET_HEADS];
};

struct fh_target_p1;    /* below */
struct fh_target_cache; /* below */

struct fh_net {
  fh_layout L;
  fh_dtype op;                  /* GEMM operand dtype: FH_BF16 or FH_F32 (deterministic) */
  fh_gemm* gemm;
  int32_t nq;                   /* sum of branch sizes (expected-Q columns) */
  int32_t cap;                  /* largest batch the buffers hold */
  float v_min, v_max, huber_delta;
  /* flat vectors (layout.total floats) */
  float* online;
  float* target;
  float* grad;
  float* adam_m;
  float* adam_v;
  void* online_sh;              /* op-dtype shadow (== online in fp32 mode) */
  void* target_sh;
  /* passes and backward buffers */
  fh_net_pass pass[FH_NET_PASSES];
  int fused;                    /* 1: ReLU masks + fused DRELU / bias-gradient epilogues in the backward */
  int mma;                      /* 1: the project's grouped tensor-core GEMM (kernels/mma_gemm.cuh) runs the
                                   head outputs of every forward and the backward's input gradients with
                                   the ReLU derivative and bias sums fused (bf16 mode, opt-in with FH_MMA=1:
                                   slower than cuBLASLt + elementwise kernels on the H200) */
  int mma_heads;                /* mma: the head outputs too (FH_MMA_HEADS=0 keeps them on cuBLASLt) */
  int32_t out_all;              /* sum of out_pad[k]: the whole of the heads' SM shares */
  int heads_out;                /* opt-in (FH_HEADS_OUT=1..FH_HEADS_OUT_CONFIGS: the configuration + 1; 0 off), bf16
                                   mode with bf16 train logits, shapes that fh_heads_out_supported takes: the training
                                   pass's head outputs as one persistent streaming kernel (kernels/heads_out.cu)
                                   instead of one cuBLASLt GEMM per head */
  int heads_loss;               /* opt-in (FH_HEADS_LOSS=1), bf16 mode with bf16 train logits, C51, shapes that
                                   fh_heads_loss_supported takes: the training passes' head outputs of online(s) and
                                   online(s') run inside the loss kernel (kernels/heads_loss.cu), no logits stored */
  int sn_argmax;                /* opt-in (FH_SN_ARGMAX=1..3: the kernel's variant + 1, sn_argmax.cu; 0 off), bf16 mode with
                                   bf16 train logits, C51, shapes that fh_sn_argmax_supported takes, none of heads_loss,
                                   heads_out, mma_heads: in the train step the head GEMMs run over online(s)'s B rows
                                   alone, kernels/sn_argmax.cu computes online(s')'s a*_d from its head activations on
                                   sn_s beside them, and the loss reads a*_d (astar) instead of online(s')'s logits */
  int sn_blocks;                /* FH_SN_ARGMAX_BLOCKS=<count>: that kernel's grid cap (0: one 16-row tile a warp); the
                                   head GEMMs beside it are then planned for the other SMs (head_sms) */
  int sn_late;                  /* FH_SN_ARGMAX_LATE=1 (A/B): that kernel queued after the head GEMMs instead of before
                                   them (which of them takes the SMs first) */
  uint8_t* astar;               /* (cap) with sn_argmax: a*_d of each sample, 2 bits a branch */
  cudaStream_t sn_s;            /* with sn_argmax: its stream (pass 0's priority), forked and joined in the step */
  cudaEvent_t sn_join;
  float* colsum_lv[3];          /* mma backward: column-sum partials of dah, da2, da1 (bias gradients) */
  cudaEvent_t bev[2];           /* mma backward: dah ready, da2 ready (the side streams' weight gradients) */
  /* target(s')'s first layer from the per-bar table of the target net's market part (kernels/p1.cuh,
   * bf16 mode): the trainer owns the table (fh_target_p1 below; NULL or off: none), keeps it equal to the
   * target's weights, and points tp1_bars at the batch's s' bars only while it launches a train step; with
   * tp1_bars NULL the target's first layer is the GEMM */
  const fh_target_p1* tp1;
  const int32_t* tp1_bars;
  /* the target cache (fh_target_cache below; NULL or off: none): while the trainer launches a train step it
   * points tc_rows at the batch's s' slots, and the loss reads target(s') from the cache rows of those slots
   * instead of running the target forward */
  const fh_target_cache* tcache;
  const int32_t* tc_rows;
  unsigned knockout;            /* FH_PROFILE_KNOCKOUT: parts of the train step left out (measurement only) */
  /* the paired batch layout (fh_pair_layout, net_kernels.cuh): while the trainer launches a train step with it, pair
   * is set (pass 0's x then holds B blocks of pair_l.P elements, not 2B rows; else the usual layout). Layer 1 of the s
   * and s' runs multiplies w1s and w1n (fh_w1_pair), W1 of the online shadow placed to match, kept equal to the shadow
   * by the optimiser and fh_net_sync_shadows; allocated in bf16 mode when the trainer asks (fh_net_pair_setup) */
  bool pair;
  fh_pair_layout pair_l;
  fh_bf16* w1s;
  fh_bf16* w1n;
  /* the gathering first layer (FH_L1_GATHER, kernels/l1_gather.cuh; with the paired layout, Hopper only): the trainer
   * sets the plan up (fh_l1g_setup); where it is on, a train step with pair set reads pass 0's x as the batch's bars
   * and account features (fh_l1g_bars, fh_l1g_acc) instead of its blocks: layer 1 of the s and s' rows is one launch
   * over w1s that reads each row's market window from the feature matrix, and dW1's market columns gather the same
   * way (its account columns: cuBLASLt on the account features) */
  fh_l1g_plan l1g;
  fh_relu_mask mask1, mask2, maskh;  /* pass 0's ReLU masks of a1, a2, ah (2 cap rows) */
  void* dlog[FH_NET_HEADS];     /* (cap, out_pad[k]) d loss / d logits, op dtype */
  void* dah;                    /* (cap, H*hh) */
  void* da2;                    /* (cap, h2) */
  void* da1;                    /* (cap, h1) */
  float* colsum_part[FH_NET_HEADS];  /* partial column sums of the head outputs' gradients (one per head stream) */
  float* colsum_trunk[3];       /* kernel backward: partials of dah, da2, da1, whose finishes run on head stream 1
                                   beside the next GEMMs (joined at the end of the backward) */
  cudaEvent_t fin_ev;           /* kernel backward: fork of those finishes */
  int finish_side;              /* 1 (default): those finishes on head stream 1; FH_FINISH_SIDE=0: on the main stream */
  int heads_late;               /* 1 (default; FH_HEADS_LATE=0 off), kernel path: each head stream runs its input
                                   gradient first and the main stream waits only for those (dx_ev); the heads' bias
                                   and weight gradients are joined at the end of the backward */
  cudaEvent_t dx_ev[FH_NET_HEADS];
  int dw1_split;                /* bf16 kernel path with the finishes on head stream 1: dW1's market columns (a
                                   multiple of 128) on the main stream and its 8 account columns on head stream 1
                                   (FH_DW1_SPLIT=0: one GEMM over all D columns) */
  int dw1_acc_first;            /* FH_DW1_ACC_FIRST=1 (A/B): on head stream 1 the account columns' GEMM runs before the
                                   first layer's bias finish instead of after it, so that it starts beside the market
                                   columns' GEMM; the same bits (the two write disjoint gradients) */
  int heads_sm;                 /* 1 (default; FH_HEADS_SM=0 off): the training passes' head-output GEMMs, which run
                                   on forked streams, each planned for its share of the SMs (fh_gemm_set_sm_target, in
                                   proportion to its columns) so that they run beside each other instead of each
                                   taking every SM in turn (the reference epoch -2.1 ms on an H100, bench/RESULTS.md);
                                   the collection's pass keeps the whole GPU (its shares slowed it beside the
                                   evaluation). FH_HEADS_SM=2 (A/B): also the backward's per-head gradients */
  int n_sm;                     /* the device's SMs */
  int side_sms;                 /* FH_SIDE_SMS=<percent> (default 50; 0: off): the backward's weight-gradient GEMMs on
                                   head stream 1 (head layer, trunk 2, the first layer's account columns), which run
                                   beside the main stream's input-gradient chain, planned for that share of the SMs, so
                                   that they leave the chain room (the reference epoch -0.7 to -1.5 ms on an H100,
                                   bench/RESULTS.md); 0 or 100: the whole GPU */
  int dw1_sms;                  /* the first layer's market-column dW GEMM planned for 100 / 132 of the SMs, leaving
                                   the replay's gather room beside it (FH_DW1_SMS=<count>; 0: the whole GPU) */
  int relu_masks;               /* bf16 kernel path (FH_RELU_MASKS=0: off): pass 0's forward stores the ReLU
                                   bit masks (cuBLASLt RELU_AUX epilogue) and the backward's ReLU passes of layers
                                   >= 256 wide read them instead of the bf16 activations (a sixteenth of those bytes) */
  int colsum_merged;            /* 1 (default; FH_COLSUM_MERGED=0 off), bf16 kernel path: the head outputs' bias
                                   gradients as one column-sum launch + one finish for every head (on the last head's
                                   stream) instead of two launches per head; the same bits */
  int dw_side;                  /* 1 (default with finish_side; FH_DW_SIDE=0 off), kernel path: the head layer's and
                                   trunk 2's weight-gradient GEMMs on head stream 1 after their finishes, beside the
                                   main stream's input gradients */
  float* wloss;                 /* (cap) w_i * loss_i */
  float* signal;                /* (cap) priority signal */
  double* red_part;             /* partials of the flat reductions (grad norm) */
  double* mean_part;            /* partials of the batch-loss mean (its own: it may run beside the grad norm) */
  double* qs_part;              /* partials of the Q statistics */
  /* device scalars */
  float* loss;                  /* (1) batch loss of the last step */
  float* gnorm;                 /* (1) grad norm before clipping */
  float* gscale;                /* (1) clip factor */
  int64_t* step;                /* (1) optimiser steps taken (Adam t; train step counter) */
  unsigned int* opt_ticket;     /* (2) fh_launch_optimise_fused's block ticket (0 between launches), barrier generation */
  int optim_chain;              /* FH_OPTIM_CHAIN=1: the optimiser as its 5-launch chain (grad norm, finish,
                                   Adam, step bump, target update) instead of the fused launches (A/B) */
  int optim_launches;           /* the fused optimiser's launches: 1 (one kernel with a grid barrier), or 2 with
                                   FH_OPTIM_ONE=0 (the squares partials, then the update) */
};

/* Whether the backward runs dw1_acc_first's order: the kernel path (fh_net_backward_t) with the first layer's weight
 * gradient split in two GEMMs and the finishes on head stream 1. pair: the train step's paired layout (the trainer sets
 * n.pair only while it launches a step). */
inline bool fh_net_dw1_acc_first_on(const fh_net& n, bool pair) {
  return n.dw1_acc_first && !n.mma && !n.fused && (pair || n.dw1_split) && n.finish_side && n.L.n_heads > 1;
}

/* Allocate everything for batches up to cap rows and initialise online = target = init(seed)
 * (fh_layout_init_value), Adam moments 0, step 0. Synchronous; not capturable. */
fh_status fh_net_create(fh_net* net, const fh_config& cfg, int32_t obs_dim, int32_t cap);
void fh_net_destroy(fh_net* net);  /* idempotent */

/* Bytes per batch row the buffers take (for the auto batch sizer). */
int64_t fh_net_bytes_per_row(const fh_config& cfg, int32_t obs_dim);

/* The placed copies of W1 for the paired layout l (bf16 mode; zeros but where W1 goes, then filled from the shadow).
 * Synchronous; not capturable. */
fh_status fh_net_pair_setup(fh_net* net, const fh_pair_layout& l);
/* The gathering first layer's batch input inside pass 0's x (B samples): the bars of the s rows then of the s' rows
 * (2B int32), then, from the next 16-byte boundary, their account features (2B x 8 bf16), each row's as layer 1
 * reads it. */
inline int32_t* fh_l1g_bars(void* x) { return static_cast<int32_t*>(x); }
inline size_t fh_l1g_acc_offset(int32_t B) { return ((size_t)B * 2 * sizeof(int32_t) + 15) & ~(size_t)15; }
inline fh_bf16* fh_l1g_acc(void* x, int32_t B) {
  return reinterpret_cast<fh_bf16*>(static_cast<char*>(x) + fh_l1g_acc_offset(B));
}
inline size_t fh_l1g_input_bytes(int32_t B) { return fh_l1g_acc_offset(B) + (size_t)B * 2 * 8 * sizeof(fh_bf16); }

/* Rewrite the op-dtype shadows from the fp32 masters (after set_params / checkpoint load). */
fh_status fh_net_sync_shadows(fh_net* net, cudaStream_t s);

/* Forward of pass p over B rows of pass[p].x with the online (which = 0) or target (1) net:
 * logits; with want_q also expected Q into pass[p].q. Runs on pass[p].s (+ head streams, joined). */
fh_status fh_net_forward(fh_net* net, int p, int which, int32_t B, int want_q);

/* The heads view of pass p's logits from row `row0` on (for the loss and expected-Q kernels); L must
 * be the pass's dtype (pass[p].ldt: float or fh_bf16). */
template <typename L>
fh_heads_view_t<L> fh_net_view(const fh_net* net, int p, int32_t row0 = 0);

/* Expected Q of pass p's first B rows into pass[p].q (either logits dtype). */
fh_status fh_net_expected_q(fh_net* net, int p, int32_t B, cudaStream_t s);
/* With heads_loss: pass 0's head outputs of its first B rows (online(s)) into its logits, for a reader of them (the
 * Q statistics), on pass 0's streams; without: nothing (the forward wrote them). */
fh_status fh_net_train_heads(fh_net* net, int32_t B);
/* Pass 0's head outputs of its first rows rows (online, from its activations ah) into its logits, on pass 0's
 * streams, whatever the switches (a check's reference: with sn_argmax the train step writes online(s')'s none). */
fh_status fh_net_heads_rows(fh_net* net, int32_t rows);

/* Where a batch's s' rows go: an input of pass 0's layout (x; default pass 0's own) from row B on (s in
 * rows 0..B-1). */
void* fh_net_next_obs(const fh_net* net, int32_t B, void* x = nullptr);

/* Loss + gradient of the online net on a batch whose s and s' are in pass 0's input (rows 0..B-1 and
 * B..2B-1). Runs online([s; s']) and target(s') (forked from pass 0's stream and joined back), the
 * fused loss, backward into net->grad, and the batch loss into *net->loss. Everything on pass[0].s. */
fh_status fh_net_loss_grad(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                           const float* weight);

/* fh_net_loss_grad's two halves (it runs one after the other), for a caller that runs work between the
 * loss and the backward (the trainer's priority update and replay prefetch): fh_net_forward_loss = the
 * forwards, the loss (net->signal, dlog) and the batch loss; fh_net_backward = the backward into
 * net->grad (reads pass 0's input, activations and dlog). On pass[0].s. */
fh_status fh_net_forward_loss(fh_net* net, int32_t B, const int32_t* act, const float* ret, const float* disc,
                              const float* weight, bool mean = true, bool target_ready = false);
/* target(s') of the batch whose [s; s'] input is x (its s' bars: `bars`, for the first-layer table) into pass 2's
 * buffers, on pass 2's streams forked off and joined back into `from`: the trainer's side stream computes the
 * next step's target forward while this step's backward runs (that step's forward_loss then has
 * target_ready = true). Valid only while the target weights stay as they are until that step's loss. */
fh_status fh_net_target_forward(fh_net* net, int32_t B, const void* x, const int32_t* bars, cudaStream_t from);
/* The batch loss *net->loss = mean of the loss's w_i * loss_i on stream s (fh_net_forward_loss runs it on
 * pass 0's stream unless mean = false: the trainer then runs it on its side stream). */
fh_status fh_net_loss_mean(fh_net* net, int32_t B, cudaStream_t s, const int64_t* copy_src = nullptr,
                           int64_t* copy_dst = nullptr);
fh_status fh_net_backward(fh_net* net, int32_t B);

/* Global grad norm + clip, Adam (step counter bumped), target update. On pass[0].s. rec (optional): the step record
 * too, written by the fused optimiser's last block (*recorded says whether it was: not by the 5-launch chain or the
 * knockout's step bump; the caller then launches fh_launch_record_step itself). */
fh_status fh_net_optimise(fh_net* net, const fh_config& cfg, const fh_step_record* rec = nullptr,
                          bool* recorded = nullptr);

/* The target net's first-layer table (kernels/p1.cuh): P1[bar] = window(bar) W1mkt^T of the target's bf16
 * weights for every bar from W-1 on, fp32, built in chunks of `chunk` market windows (scratch) with one GEMM
 * each. On (bf16 mode, hard target updates, FH_TARGET_P1 not "0", the memory found) it replaces target(s')'s
 * first-layer GEMM in the train steps: a gather of one table row per sample. The owner keeps it equal to
 * the target weights: a refresh after every change of them (hard update, set_params, checkpoint load). */
struct fh_target_p1 {
  int on;
  float* table;                 /* (n, h1) */
  fh_bf16* scratch;             /* (chunk, D) market windows of one chunk */
  int64_t bar0, n;
  int32_t chunk;
  char why[128];                /* why it is off ("" when on) */
};

/* Decide, allocate and build (synchronous, on pass 0's stream); off is not an error (why says it). On: also
 * points net->tp1 at tp. */
fh_status fh_target_p1_setup(fh_target_p1* tp, fh_net* net, const fh_market_view& m, int32_t window,
                             const fh_config& cfg);
/* Rebuild the table from the target's current bf16 weights into `table` (default tp->table) on stream s
 * (pass 0's workspace; graph-capturable once its shapes have run). */
fh_status fh_target_p1_refresh(const fh_target_p1& tp, fh_net* net, const fh_market_view& m, int32_t window,
                               cudaStream_t s, float* table = nullptr);
void fh_target_p1_free(fh_target_p1* tp, fh_net* net);  /* idempotent */
/* a1 (B, h1) bf16 = the target's first layer of the B input rows x (bf16, the account features in their last
 * 8 columns) of bars `bars`, from the table (kernels/p1.cuh fh_launch_layer1_p1), on stream s. */
fh_status fh_net_layer1_from_table(const fh_net* net, const fh_target_p1& tp, const void* x, const int32_t* bars,
                                   int32_t B, void* a1, cudaStream_t s);

/* The target cache: the target net's head outputs (pass 2's dtype and row layout) of the state stored in every
 * replay slot. target(s') of a sampled transition is the target forward of the state stored n rows later
 * (kernels/replay.cuh), a function of that slot's stored bar and account features and of the target weights
 * alone, and the target changes only at its hard updates; so the owner fills the rows of the slots that
 * collection writes (every epoch) and all rows after every change of the target (with the first-layer table,
 * which it needs), and a train step's loss reads the rows of its batch's s' slots (batch nslot) instead of
 * running target(s') over the batch. The fill runs the train step's own target forward (pass 2, the table's
 * first layer) over chunks of exactly `chunk` consecutive slots, the batch size, so every row gets the bits
 * the step would have computed. On with the table (bf16 mode, hard updates) when an epoch's fills cost fewer
 * target forwards than half its train steps (FH_TARGET_CACHE=1: whenever it can be on; =0: off), unless the
 * memory (capacity x the head widths) is more than a quarter of what is free. */
struct fh_target_cache {
  int on;
  void* logits[FH_NET_HEADS];   /* (capacity, out_pad[k]) */
  int32_t* bars;                /* (chunk) scratch: the bars of a chunk's states */
  fh_bf16* x;                   /* (chunk, D) scratch input rows: only their account columns are written and read */
  int64_t capacity;
  int32_t chunk;
  cudaEvent_t fork, join;
  char why[128];                /* why it is off ("" when on) */
};

/* Decide and allocate (the rows hold nothing until a fill; the trainer fills every row right after); off is not
 * an error (why says it). On: also points net->tcache at tc. */
fh_status fh_target_cache_setup(fh_target_cache* tc, fh_net* net, const fh_target_p1& tp, int64_t capacity,
                                int32_t chunk, const fh_config& cfg);
/* Rows [slot0, slot0 + count) (within the capacity) from the replay's stored bars (capacity) and account
 * features (capacity, 8) with the target's current weights and table, on pass 2's streams forked off and
 * joined back into `from`. Chunks that would run past the range start earlier (rows recomputed, same bits). */
fh_status fh_target_cache_fill(const fh_target_cache& tc, fh_net* net, const int32_t* bar, const float* account,
                               int64_t slot0, int64_t count, cudaStream_t from);
void fh_target_cache_free(fh_target_cache* tc, fh_net* net);  /* idempotent */

#endif /* FH_CUDA_NET_H */
