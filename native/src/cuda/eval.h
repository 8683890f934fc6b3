/*
 * eval.h — greedy evaluation on the device, the same semantics as src/env/evaluate.ts (DESIGN §4
 * "Evaluation"): the validation range is cut into S contiguous segments on session boundaries
 * (sessions dealt out evenly, evalSegments), all S simulated in parallel. Each starts flat at its
 * first bar b, steps t -> t+1 until t = e-1 (steps i = 0 .. e-b-2; segments with e-b <= 1 never
 * step), then is flattened at its last close. No episodes: when k reaches T, k, realised and equity
 * restart at 0. A step's PnL and trade counters are booked to bar t+1; the final flatten separately
 * per segment. Records stay on the device until one async read-back into pinned memory; the host
 * then sums them in the reference's order (steps in step-major, segment-minor order, then the
 * flattens) and finalises fh_metrics (fh_cuda_eval_finalise, a port of src/env/metrics.ts).
 *
 * Greedy policy (graph-capturable; the orchestration runs the network in between):
 *   fh_launch_eval_reset(ev)
 *   for i in 0 .. ev.max_steps-1:
 *     fh_launch_eval_observe(ev, dtype, obs, ld)   (S, D) observations of the segment cursors
 *     ... online forward + expected Q (S, sum n_d) ...
 *     fh_launch_eval_step(ev, q, ldq, i)            greedy argmax (lowest index on ties), step, book
 *   (or: observe once, then per step forward -> fh_launch_eval_step_observe(ev, q, ldq, i, dtype, obs, ld))
 *   fh_launch_eval_finish(ev)                       flatten every segment at its last close
 *   fh_launch_eval_readback(ev) + event;  host: fh_cuda_eval_finalise
 * Fixed policies (baselines flat and buy-and-hold) need no network: fh_launch_eval_fixed runs reset,
 * all steps and the finish of every segment in one launch with the same step code.
 *
 * fh_eval_run (eval_host.cu) runs that whole greedy loop for the trainer. In bf16 mode it uses, when
 * the shapes allow, the fused evaluation of kernels/eval_fused.cu instead: one cuBLASLt GEMM computes
 * the market part of the first layer for every validation bar (the cursors of every step are known
 * in advance), then ONE kernel (a thread-block cluster per tile of 16 segments, no cluster waits for
 * another) runs every step: the rest of the online net on bf16 tensor cores (mma.sync, fp32
 * accumulate) with each block's weight slices resident in shared memory for the whole evaluation and
 * the activations exchanged through distributed shared memory, the expected Q and the greedy step,
 * with a hardware cluster barrier between the phases. The cuBLASLt loop above stays the path of the
 * deterministic (fp32) mode, of shapes the kernel does not take (fh_eval_fused.why says which), and of
 * FH_EVAL_FUSED=0 (read when the trainer is created). The fused launch is not captured into a graph
 * (the trainer launches it eagerly: reset, the GEMM, the kernel, finish: four launches per evaluation).
 */
#ifndef FH_CUDA_EVAL_H
#define FH_CUDA_EVAL_H

#include "collect.h"

struct fh_net;

enum fh_eval_policy { FH_EVAL_GREEDY = 0, FH_EVAL_FLAT = 1, FH_EVAL_BUY_HOLD = 2 };

/* One booking: a step (booked to bar t+1) or a segment's final flatten. */
struct fh_eval_rec {
  double pnl;            /* $ */
  double gross_profit;   /* of the trades closed by it (costs included) */
  double gross_loss;     /* >= 0 */
  int32_t traded;        /* contracts */
  int16_t closed;        /* trades closed */
  int16_t won;
};

/* State of the fused evaluation (kernels/eval_fused.cu); zero = off. */
/* counters of the fused evaluation's profile (FH_EVAL_FUSED_PROFILE; kernels/eval_fused.cu's EF_NPROF) */
#define FH_EVAL_NPROF 12

struct fh_eval_fused {
  int32_t on;             /* 1: fh_eval_run uses the fused kernel */
  char why[192];          /* why it is off when it was wanted (empty otherwise) */
  int32_t clusters;       /* thread-block clusters launched: one per tile of 16 segments */
  size_t smem;            /* dynamic shared memory per block */
  size_t smem_whole;      /* the most a block may take (>= smem): launched with it, a block leaves no shared
                             memory for other kernels' blocks on its SM (beside the trainer's collect-ahead) */
  void* xval;             /* (n_val, D) bf16 device: the market window of every validation bar, account 0 */
  float* p1;              /* (n_val, h1) fp32 device: Xval W1^T of the current weights (per evaluation) */
  void* params;           /* host copy of the kernel's parameter block */
  unsigned long long* prof; /* FH_EVAL_FUSED_PROFILE only, NULL otherwise: (FH_EVAL_NPROF) device, block 0's cycles
                             * per phase; freed by fh_eval_fused_free */
};

struct fh_cuda_eval {
  int32_t n_seg;          /* S used (<= eval_segments; fewer when there are fewer sessions) */
  int32_t max_steps;      /* steps of a full evaluation = max over segments of (e - b - 1), >= 0 */
  int32_t obs_dim;
  int64_t val_begin, val_end, n_val;
  int32_t n_sessions;     /* sessions in the validation range */
  fh_env_params p;
  fh_market_view view;    /* device market */
  int32_t n_act[FH_MAX_BRANCHES];
  int32_t q_off[FH_MAX_BRANCHES];
  int32_t* seg_begin;     /* (S) device */
  int32_t* seg_end;       /* (S) device */
  int32_t* h_seg_begin;   /* (S) host */
  int32_t* h_seg_end;     /* (S) host */
  int32_t* h_session_of;  /* (n_val) host: session index of bar val_begin + i */
  fh_env_state* state;    /* (S) */
  fh_eval_rec* bar_rec;   /* (n_val) the step booked to bar val_begin + i (zero where none) */
  fh_eval_rec* flat_rec;  /* (S) the final flatten of each segment */
  /* the read-back (fh_launch_eval_readback): bar_rec's columns as the metrics read them, and their pinned mirrors */
  double* pnl;            /* (n_val) device: bar_rec's pnl, bar order */
  double2* gross;         /* (max_steps * S) device: the gross profit (x) and loss (y) of step i of segment k at
                             i * S + k (step-major, the order the reference sums them in), zero past a segment's end */
  unsigned long long* counts; /* (3) device: trades closed, won, contracts traded, summed over every step's record */
  double* h_pnl;
  double2* h_gross;
  unsigned long long* h_counts;
  fh_eval_rec* h_flat_rec;/* (S) pinned mirror */
  fh_eval_fused fused;    /* fused evaluation (fh_eval_fused_setup); freed by fh_cuda_eval_free */
  float* q_log;           /* tests only, NULL otherwise: (max_steps, S, sum n_d) expected Q of every step */
};

/* Slot j of the read-back's step-major gross columns: the record of step j / S of segment j % S (booked to the bar
 * after the step's), or NULL past that segment's last step. The device's split (fh_launch_eval_readback) and the
 * host's (fh_cuda_eval_split_host) both read through it. */
FH_HD const fh_eval_rec* fh_eval_step_record(const fh_eval_rec* bar_rec, const int32_t* seg_begin,
                                            const int32_t* seg_end, int32_t S, int64_t val_begin, int64_t j) {
  const int32_t i = (int32_t)(j / S), k = (int32_t)(j % S);
  return i < seg_end[k] - seg_begin[k] - 1 ? bar_rec + (seg_begin[k] + 1 + i - val_begin) : nullptr;
}

/* Cuts the validation range of the host market into segments (evalSegments) and allocates.
 * Needs val_begin >= window - 1 (features are causal: the window may reach before val_begin). */
fh_status fh_cuda_eval_alloc(const fh_config& cfg, const fh_env_params& p, const fh_market* host,
                             const fh_cuda_market& dm, fh_cuda_eval* out);
void fh_cuda_eval_free(fh_cuda_eval* ev);

/* Segments flat at their first bar; records zeroed. */
fh_status fh_launch_eval_reset(const fh_cuda_eval& ev, cudaStream_t s);
/* (S, D) observations of the segment cursors (row stride ld). */
fh_status fh_launch_eval_observe(const fh_cuda_eval& ev, fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s);
/* Step i with greedy actions from expected Q q (S, >= sum n_d; row stride ldq). */
fh_status fh_launch_eval_step(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step, cudaStream_t s);
/* Fused: fh_launch_eval_step(i) then fh_launch_eval_observe of the new state, one launch. The loop is
 * then: observe once, per step i forward -> expected Q -> fh_launch_eval_step_observe(q, i, obs). */
fh_status fh_launch_eval_step_observe(const fh_cuda_eval& ev, const float* q, int32_t ldq, int32_t step,
                                      fh_dtype dtype, void* obs, int32_t ld, cudaStream_t s);
/* Flatten every segment at its last close (after the last step). */
fh_status fh_launch_eval_finish(const fh_cuda_eval& ev, cudaStream_t s);
/* A whole evaluation of a fixed policy (FH_EVAL_FLAT or FH_EVAL_BUY_HOLD): reset, steps, finish. */
fh_status fh_launch_eval_fixed(const fh_cuda_eval& ev, fh_eval_policy policy, cudaStream_t s);
/* The records' columns the metrics read (pnl, the step-major grosses, the trade counters: one split kernel) and the
 * flattens, copied async into the pinned mirrors (record an event after it). */
fh_status fh_launch_eval_readback(const fh_cuda_eval& ev, cudaStream_t s);
/* Host: the same columns of host records bar_rec (n_val) and flat_rec (S) into the pinned mirrors, as the split and
 * read-back leave them (checks that feed the metrics with records of their own). */
void fh_cuda_eval_split_host(const fh_cuda_eval& ev, const fh_eval_rec* bar_rec, const fh_eval_rec* flat_rec);

/* Decide and set up the fused evaluation for the online net of `net` (after fh_net_create): want < 0
 * reads FH_EVAL_FUSED (unset or not "0": on), 0 = off, 1 = on. Off in fp32 (deterministic) mode and
 * for shapes the kernel does not take (ev->fused.why says which; not an error). Synchronous. */
fh_status fh_eval_fused_setup(fh_cuda_eval* ev, const fh_net* net, int want);
void fh_eval_fused_free(fh_eval_fused* f);
/* Steps 0 .. max_steps-1 of the greedy evaluation of net's online weights (after reset): the
 * first-layer GEMM over every validation bar (cuBLASLt workspace ws, fh_gemm_workspace_bytes()), then one
 * cluster launch. Not captured. */
fh_status fh_launch_eval_fused(const fh_cuda_eval& ev, fh_net* net, cudaStream_t s, void* ws, bool whole_sm = false);
/* The whole greedy evaluation of the online net (reset, steps, final flatten; no read-back): the fused
 * kernel when ev.fused.on, else the cuBLASLt loop on net pass 1's buffers and stream. s / ws (fused only;
 * NULL: pass 1's stream and workspace): a stream and GEMM workspace of the caller's, so that the fused
 * evaluation can run beside work on pass 1 (the trainer's collect-ahead); its blocks then take their SMs'
 * whole shared memory, so that the other work's blocks do not share those SMs (FH_EVAL_WHOLE_SM=0: only
 * what they use). */
fh_status fh_eval_run(const fh_cuda_eval& ev, fh_net* net, cudaStream_t s = nullptr, void* ws = nullptr);
/* FH_EVAL_FUSED_PROFILE (measurement): the fused kernel's last run, block 0's cycles per step by phase, printed to out
 * (a synchronous read of ev.fused.prof, which fh_eval_fused_setup allocates with FH_EVAL_FUSED_PROFILE=1). No-op
 * without it. */
fh_status fh_eval_fused_profile_print(const fh_cuda_eval& ev, FILE* out, const char* prefix);

/* Test entry point (exported, not in foxhunt.h): one greedy evaluation of the online weights
 * params (fh_layout order, n floats) on the market's validation range, with the fused kernel
 * (fused = 1) or the cuBLASLt loop (0), in cfg's mode, without a trainer. Outputs: metrics; info[4]
 * = {S, max_steps, sum n_d, fused kernel used}; q_log (when not NULL, q_len >= max_steps*S*sum n_d
 * floats) the expected Q of every step. Synchronous. */
extern "C" FH_API fh_status fh_cuda_eval_check(const fh_config* cfg, const fh_market* market, const float* params,
                                               int64_t n, int32_t fused, fh_metrics* metrics, int32_t* info,
                                               float* q_log, int64_t q_len, char* err, size_t err_len);

/* Host, after the read-back completed: metrics of the pinned mirrors (SPEC 6, fh_metrics). */
void fh_cuda_eval_finalise(const fh_cuda_eval& ev, const fh_market* host, double initial_capital,
                           fh_metrics* out);

#endif /* FH_CUDA_EVAL_H */
