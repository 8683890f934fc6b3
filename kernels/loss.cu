/*
 * loss.cu — the BDQ / double-DQN loss of one batch and its gradient w.r.t. the head logits of
 * online(s) (DESIGN §5), fused in one kernel, one warp per sample.
 *
 * Per sample i (atoms > 1):
 *   a*_d   = argmax_a Q_online,d(s', a)                 (first max on ties)
 *   m      = mean_d softmax(target logits_d(s', a*_d))   (atoms)
 *   tgt    = C51 projection of m onto the support after ret_i + disc_i * z
 *   CE_d   = -sum_j tgt_j log softmax(online logits_d(s, a_d))_j
 *   loss_i = mean_d CE_d,  signal_i = sum_d CE_d,  wloss_i = w_i * loss_i
 * atoms == 1: y = ret + disc * mean_d Q_target,d(s', a*_d); Huber(y - Q_d(s, a_d)); signal = sum_d |TD|.
 *
 * Gradient of L = (1/B) sum_i w_i loss_i w.r.t. the logits (written with `=`, whole rows, pads 0):
 *   g_d,j = (w_i / (B nb)) (p_d,j - tgt_j)          (CE)   or  -(w_i / (B nb)) clip(td, ±delta)  (Huber)
 *   dV_j  = sum_d g_d,j;   dA_d(a, j) = g_d,j [a == a_d] - g_d,j / n_d       (dueling backward)
 *
 * The C51 projection is fh_c51_project_one (c51.cuh), the same code the CPU backend runs.
 * Launch: 128 threads (4 samples) per block; atoms <= 64; actions outside range are clamped.
 */
#include "net_kernels.cuh"
#include "net_device.cuh"
#include "c51.cuh"

static constexpr int kLossMaxWarps = 4;

/* Per warp in dynamic shared memory: the three staged head rows (online(s), online(s'), target(s')),
 * then the mean target distribution m and its projection t (FH_MAX_ATOMS_GPU floats each). */
__host__ __device__ static inline int fh_loss_warp_floats(const fh_heads_view& h) {
  return 3 * fh_row_floats(h) + 2 * FH_MAX_ATOMS_GPU;
}

template <typename T>
static __global__ void fh_bdq_loss_kernel(fh_heads_view on_s, fh_heads_view on_sn, fh_heads_view tg_sn,
                                          const int32_t* __restrict__ act, const float* __restrict__ ret,
                                          const float* __restrict__ disc, const float* __restrict__ weight, int B,
                                          float huber_delta, float* __restrict__ wloss, float* __restrict__ signal,
                                          fh_heads_grad<T> grad) {
  extern __shared__ float s_loss[];
  const int warps = blockDim.x >> 5;
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * warps + w;
  if (i >= B) return;
  const int nb = on_s.nb, atoms = on_s.atoms;
  const float coef = weight[i] / ((float)B * (float)nb);
  const int rf = fh_row_floats(on_s);
  float* r_s = s_loss + (int64_t)w * fh_loss_warp_floats(on_s);
  float* r_sn = r_s + rf;
  float* r_tg = r_sn + rf;
  float* sm = r_tg + rf;
  float* st = sm + FH_MAX_ATOMS_GPU;
  fh_dev_stage_row(on_sn, i, lane, r_sn);
  fh_dev_stage_row(tg_sn, i, lane, r_tg);
  fh_dev_stage_row(on_s, i, lane, r_s);

  /* target distribution (or target value) from the double-DQN actions */
  float y = 0.0f;
  for (int k = lane; k < FH_MAX_ATOMS_GPU; k += 32) sm[k] = 0.0f;
  __syncwarp();
  for (int d = 0; d < nb; ++d) {
    const int n = on_s.n[d];
    const float* a_sn = fh_staged_a(on_sn, r_sn, d);
    int astar = 0;
    float bq = -INFINITY;
    for (int a = 0; a < n; ++a) {
      const float q = fh_dev_expected_q_r(r_sn, a_sn, n, atoms, on_s.v_min, on_s.v_max, a, lane);
      if (q > bq) {  /* first max on ties, as fh_argmax */
        bq = q;
        astar = a;
      }
    }
    const float* a_tg = fh_staged_a(tg_sn, r_tg, d);
    if (atoms <= 1) {
      y += fh_dev_expected_q_r(r_tg, a_tg, n, atoms, on_s.v_min, on_s.v_max, astar, lane);
    } else {
      float x[FH_ATOMS_PER_LANE];
      fh_dev_logits_r(r_tg, a_tg, n, atoms, astar, lane, x);
      fh_dev_softmax(atoms, lane, x);
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
        int j = lane + 32 * k;
        if (j < atoms) sm[j] += x[k];
      }
    }
  }
  __syncwarp();
  if (atoms > 1) {
    for (int j = lane; j < atoms; j += 32) sm[j] /= (float)nb;  /* as the CPU: sum over branches, then / nb */
    __syncwarp();
    if (lane == 0) fh_c51_project_one(atoms, on_s.v_min, on_s.v_max, sm, ret[i], disc[i], st);
  } else {
    y = ret[i] + disc[i] * (y / (float)nb);
  }
  __syncwarp();

  /* online(s): loss and gradient per branch */
  float dv[FH_ATOMS_PER_LANE] = {};
  float loss_sum = 0.0f, sig = 0.0f;
  for (int d = 0; d < nb; ++d) {
    const int n = on_s.n[d];
    int ad = act[(int64_t)i * 3 + d];
    ad = ad < 0 ? 0 : (ad >= n ? n - 1 : ad);
    float x[FH_ATOMS_PER_LANE];
    fh_dev_logits_r(r_s, fh_staged_a(on_s, r_s, d), n, atoms, ad, lane, x);
    float g[FH_ATOMS_PER_LANE];
    if (atoms > 1) {
      float mx = -INFINITY;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) mx = fmaxf(mx, x[k]);
      mx = fh_warp_max(mx);
      float se = 0.0f;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k)
        if (lane + 32 * k < atoms) se += expf(x[k] - mx);
      const float lse = mx + logf(fh_warp_sum(se));
      float ce = 0.0f;
#pragma unroll
      for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
        int j = lane + 32 * k;
        if (j < atoms) {
          float logp = x[k] - lse;
          ce -= st[j] * logp;
          g[k] = coef * (expf(logp) - st[j]);
        } else {
          g[k] = 0.0f;
        }
      }
      ce = fh_warp_sum(ce);
      loss_sum += ce;
      sig += ce;
    } else {
      float q = __shfl_sync(0xffffffffu, x[0], 0);
      float td = y - q;
      float atd = fabsf(td);
      float l = atd <= huber_delta ? 0.5f * td * td : huber_delta * (atd - 0.5f * huber_delta);
      loss_sum += l;
      sig += atd;
      float c = fminf(fmaxf(td, -huber_delta), huber_delta);
      g[0] = lane == 0 ? -coef * c : 0.0f;
      g[1] = 0.0f;
    }
#pragma unroll
    for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) dv[k] += g[k];
    /* dueling backward into this branch's advantage row (all actions), pads zero */
    T* arow = grad.a[d] + (int64_t)i * grad.lda[d];
#pragma unroll
    for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
      int j = lane + 32 * k;
      if (j < atoms) {
        const float mean_g = g[k] / (float)n;  /* as fh_dueling_backward: g(a) - mean_a' g(a') */
        for (int a = 0; a < n; ++a) arow[a * atoms + j] = fh_from_f32<T>((a == ad ? g[k] : 0.0f) - mean_g);
      }
    }
    for (int c = n * atoms + lane; c < grad.lda[d]; c += 32) arow[c] = fh_from_f32<T>(0.0f);
  }
  T* vrow = grad.v + (int64_t)i * grad.ldv;
#pragma unroll
  for (int k = 0; k < FH_ATOMS_PER_LANE; ++k) {
    int j = lane + 32 * k;
    if (j < atoms) vrow[j] = fh_from_f32<T>(dv[k]);
  }
  for (int c = atoms + lane; c < grad.ldv; c += 32) vrow[c] = fh_from_f32<T>(0.0f);
  if (lane == 0) {
    float li = loss_sum / (float)nb;
    wloss[i] = weight[i] * li;
    signal[i] = sig;
  }
}

template <typename T>
fh_status fh_launch_bdq_loss(const fh_heads_view& on_s, const fh_heads_view& on_sn, const fh_heads_view& tg_sn,
                             const int32_t* act, const float* ret, const float* disc, const float* weight, int B,
                             float huber_delta, float* wloss, float* signal, fh_heads_grad<T> grad, cudaStream_t s) {
  if (B <= 0) return FH_OK;
  const size_t per_warp = (size_t)fh_loss_warp_floats(on_s) * sizeof(float);
  int warps = kLossMaxWarps;
  while (warps > 1 && per_warp * warps > 48 * 1024) --warps;
  if (per_warp > 48 * 1024) {
    fh_cuda_set_error(__FILE__, __LINE__, "fh_launch_bdq_loss", "head outputs too wide for shared memory");
    return FH_ERR_INVALID_CONFIG;
  }
  fh_bdq_loss_kernel<T><<<CEIL_DIV(B, warps), warps * 32, per_warp * warps, s>>>(
      on_s, on_sn, tg_sn, act, ret, disc, weight, B, huber_delta, wloss, signal, grad);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template fh_status fh_launch_bdq_loss<float>(const fh_heads_view&, const fh_heads_view&, const fh_heads_view&,
                                             const int32_t*, const float*, const float*, const float*, int, float,
                                             float*, float*, fh_heads_grad<float>, cudaStream_t);
template fh_status fh_launch_bdq_loss<fh_bf16>(const fh_heads_view&, const fh_heads_view&, const fh_heads_view&,
                                               const int32_t*, const float*, const float*, const float*, int, float,
                                               float*, float*, fh_heads_grad<fh_bf16>, cudaStream_t);
