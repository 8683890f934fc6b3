/*
 * net.cu — the elementwise parts of the network's forward and backward (the GEMMs are cuBLASLt,
 * in native/src/cuda/gemm_cublaslt.cpp).
 *
 *   fh_cast / fh_cast_2d      fp32 -> T copies (bf16 shadows of params, input batches)
 *   fh_relu_bwd_colsum         dy *= (act > 0) in place, then bias_grad (n) = column sums of dy.
 *                              Two passes (per-chunk partials, then a fixed-order sum), so the
 *                              result is bit-identical run to run (graph on/off equality).
 *   fh_expected_q              dueling combine + softmax over atoms + sum p z -> Q (B, sum n)
 *
 * Launch constraints: B, n < 2^31; ld >= n.
 */
#include "net_kernels.cuh"
#include "net_device.cuh"

static constexpr int kCastBlock = 256;
static constexpr int kColsumRows = 128;   /* rows per partial chunk */
static constexpr int kColsumRowsNarrow = 32;  /* the narrow kernel's chunk: 4x the blocks of a wide one (one
                                                  16-byte load per row and thread, few row lanes per block) */
static constexpr int kColsumTx = 32, kColsumTy = 8;

template <typename T>
static __global__ void fh_cast_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) dst[i] = fh_from_f32<T>(src[i]);
}

template <typename T>
fh_status fh_launch_cast(const float* src, T* dst, int64_t n, cudaStream_t s) {
  if (n <= 0) return FH_OK;
  int64_t blocks = CEIL_DIV(n, (int64_t)kCastBlock);
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  fh_cast_kernel<T><<<(unsigned)blocks, kCastBlock, 0, s>>>(src, dst, n);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template <typename T>
static __global__ void fh_cast_2d_kernel(const float* __restrict__ src, int lds, T* __restrict__ dst, int ldd,
                                         int rows, int cols) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  int64_t total = (int64_t)rows * ldd;
  if (i >= total) return;
  int r = (int)(i / ldd), c = (int)(i % ldd);
  dst[i] = fh_from_f32<T>(c < cols ? src[(int64_t)r * lds + c] : 0.0f);
}

template <typename T>
fh_status fh_launch_cast_2d(const float* src, int lds, T* dst, int ldd, int rows, int cols, cudaStream_t s) {
  int64_t total = (int64_t)rows * ldd;
  if (total <= 0) return FH_OK;
  fh_cast_2d_kernel<T><<<(unsigned)CEIL_DIV(total, (int64_t)kCastBlock), kCastBlock, 0, s>>>(src, lds, dst, ldd,
                                                                                            rows, cols);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

int64_t fh_colsum_partial_floats(int B, int n) { return (int64_t)CEIL_DIV(B, kColsumRowsNarrow) * n; }

/* grid (ceil(n/32), chunks), block (32, 8). */
template <typename T>
static __global__ void fh_relu_bwd_partial_kernel(T* __restrict__ dy, const T* __restrict__ act, int ld, int B,
                                                  int n, float* __restrict__ partial) {
  __shared__ float sm[kColsumTy][kColsumTx + 1];
  int col = blockIdx.x * kColsumTx + threadIdx.x;
  int r0 = blockIdx.y * kColsumRows;
  int r1 = min(B, r0 + kColsumRows);
  float acc = 0.0f;
  if (col < n) {
    for (int r = r0 + threadIdx.y; r < r1; r += kColsumTy) {
      int64_t off = (int64_t)r * ld + col;
      float g = fh_to_f32<T>(dy[off]);
      if (act != nullptr) {
        if (!(fh_to_f32<T>(act[off]) > 0.0f)) {
          g = 0.0f;
          dy[off] = fh_from_f32<T>(0.0f);
        }
      }
      acc += g;
    }
  }
  sm[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float t = 0.0f;
    for (int y = 0; y < kColsumTy; ++y) t += sm[y][threadIdx.x];
    partial[(int64_t)blockIdx.y * n + col] = t;
  }
}

/* The finish of the column sums: 32 consecutive columns per block (32, 32). Thread (x, y) sums the chunks y,
 * y + 32, ... of column x in order (a warp's loads are 32 consecutive floats of one chunk), the block transposes
 * the sums through shared memory, and warp y adds column y's 32 chunk-lane sums with fh_warp_sum's xor-tree; lane 0
 * writes it. Each column's sum is that of one warp whose lane l takes chunks l, l + 32, ... col_of(g, ...) maps the
 * block's column g to its partials (chunk stride n), its column and its output, false past the last one. (One warp
 * per column, the old finish, reads 32 chunks' rows per load; alone on the H200 (bench/gpu/colsum_probe.cu) both
 * take ~4-5 us a launch, so the 42-58 us a CUPTI trace showed for it inside the train step are queueing behind
 * the kernels beside it, not its own time.) */
template <class ColOf>
__device__ __forceinline__ void fh_colsum_finish_block(int chunks, ColOf col_of) {
  __shared__ float sm[32][33];
  const int x = threadIdx.x, y = threadIdx.y;
  const float* part = nullptr;
  float* out = nullptr;
  int n = 0, col = 0;
  float t = 0.0f;
  if (col_of(blockIdx.x * 32 + x, &part, &n, &col, &out)) {
#pragma unroll 4
    for (int c = y; c < chunks; c += 32) t += part[(int64_t)c * n + col];
  }
  sm[x][y] = t;
  __syncthreads();
  t = fh_warp_sum(sm[y][x]);
  if (x == 0 && col_of(blockIdx.x * 32 + y, &part, &n, &col, &out)) out[col] = t;
}

static __global__ void fh_colsum_finish_kernel(const float* __restrict__ partial, int chunks, int n,
                                               float* __restrict__ out) {
  fh_colsum_finish_block(chunks, [=](int g, const float** p, int* pn, int* col, float** o) {
    if (g >= n) return false;
    *p = partial; *pn = n; *col = g; *o = out;
    return true;
  });
}

/* 8 consecutive bf16 gradients dy[off ..] (16 bytes): zeroed where act <= 0, or where the bit of the ReLU
 * mask byte *bits is 0 (bit j: element j, as cuBLASLt's RELU_AUX epilogue stores them) when bits is given
 * (written back only when one changed; act and bits NULL: no ReLU), then added to acc[0..8). */
__device__ __forceinline__ void fh_relu_bwd_chunk8(fh_bf16* __restrict__ dy, const fh_bf16* __restrict__ act,
                                                   int64_t off, float (&acc)[8],
                                                   const uint8_t* __restrict__ bits = nullptr) {
  union { uint4 u; __nv_bfloat162 h[4]; } gv, av;
  gv.u = *reinterpret_cast<const uint4*>(dy + off);
  if (act != nullptr || bits != nullptr) {
    unsigned keep = 0;  /* bit j: element j stays */
    if (bits != nullptr) {
      keep = __ldg(bits);
    } else {
      av.u = __ldg(reinterpret_cast<const uint4*>(act + off));
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 af = __bfloat1622float2(av.h[k]);
        keep |= (af.x > 0.0f ? 1u : 0u) << (2 * k);
        keep |= (af.y > 0.0f ? 1u : 0u) << (2 * k + 1);
      }
    }
    bool changed = false;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 gf = __bfloat1622float2(gv.h[k]);
      if (!((keep >> (2 * k)) & 1u) && gf.x != 0.0f) { gf.x = 0.0f; changed = true; }
      if (!((keep >> (2 * k + 1)) & 1u) && gf.y != 0.0f) { gf.y = 0.0f; changed = true; }
      gv.h[k] = __floats2bfloat162_rn(gf.x, gf.y);
    }
    if (changed) *reinterpret_cast<uint4*>(dy + off) = gv.u;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 gf = __bfloat1622float2(gv.h[k]);
    acc[2 * k] += gf.x;
    acc[2 * k + 1] += gf.y;
  }
}

/* bf16 fast path: each thread owns 8 consecutive columns (one 16-byte load of dy and of act per row),
 * block (32, 8) covers 256 columns x 8 row lanes of one chunk of `rows` rows (fh_relu_vec_rows); partial sums
 * reduced over the row lanes in shared memory in a fixed order. Needs n % 8 == 0, ld % 8 == 0, 16-byte aligned
 * rows. */
static __global__ void fh_relu_bwd_partial_vec_kernel(fh_bf16* __restrict__ dy, const fh_bf16* __restrict__ act,
                                                      int ld, int B, int n, int rows, float* __restrict__ partial,
                                                      const uint8_t* __restrict__ bits, int ldbytes) {
  __shared__ float sm[kColsumTy][kColsumTx * 8 + 1];
  const int c0 = (blockIdx.x * kColsumTx + threadIdx.x) * 8;
  const int r0 = blockIdx.y * rows;
  const int r1 = min(B, r0 + rows);
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (c0 < n) {
#pragma unroll 4
    for (int r = r0 + threadIdx.y; r < r1; r += kColsumTy) {
      fh_relu_bwd_chunk8(dy, act, (int64_t)r * ld + c0, acc, bits ? bits + (int64_t)r * ldbytes + (c0 >> 3) : nullptr);
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) sm[threadIdx.y][threadIdx.x * 8 + k] = acc[k];
  __syncthreads();
  /* 256 threads: thread t sums column t of the block over the 8 row lanes */
  const int t = threadIdx.y * kColsumTx + threadIdx.x;
  const int col = blockIdx.x * kColsumTx * 8 + t;
  if (col < n) {
    float sum = 0.0f;
    for (int y = 0; y < kColsumTy; ++y) sum += sm[y][t];
    partial[(int64_t)blockIdx.y * n + col] = sum;
  }
}

/* Rows per chunk of a bf16 column-sum pass from the A/B switch `name` (32, 64 or 128; anything else gives def). The
 * partials hold fh_colsum_partial_floats, enough for any of them. */
static int fh_chunk_rows(const char* name, int def) {
  const long r = fh_env_int(name, kColsumRowsNarrow, kColsumRows, def);
  return r == kColsumRowsNarrow || r == 64 || r == kColsumRows ? (int)r : def;
}

/* Rows per chunk of the narrow bf16 column sums (the head outputs' bias gradients): 64 by default, like the wide
 * pass (on an H100 it measured 1.1 ms of training an epoch under 32 rows in one call's rounds and equal in the next,
 * bench/RESULTS.md); FH_COLSUM_NARROW_ROWS=32|128 (read once; A/B). */
static int fh_narrow_rows() {
  static const int rows = fh_chunk_rows("FH_COLSUM_NARROW_ROWS", 64);
  return rows;
}

/* bf16 path for narrow layers (n < 256: the head outputs): the block's 256 threads are laid out as
 * nlanes = 256 / (n / 8) row lanes x n / 8 column chunks (one 16-byte load per row), so that most
 * threads work where the wide kernel above would leave three quarters of its block idle; the row
 * lanes' sums are reduced in shared memory in a fixed order. */
__device__ __forceinline__ void fh_relu_bwd_partial_narrow(fh_bf16* __restrict__ dy, const fh_bf16* __restrict__ act,
                                                           int ld, int B, int n, int rows, float* __restrict__ partial,
                                                           float* sm) {
  const int tid = threadIdx.y * kColsumTx + threadIdx.x;
  const int nc = n / 8, nlanes = (kColsumTx * kColsumTy) / nc;
  const int lane = tid / nc, c0 = (tid - lane * nc) * 8;
  const int r0 = blockIdx.y * rows;
  const int r1 = min(B, r0 + rows);
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (lane < nlanes) {
#pragma unroll 4
    for (int r = r0 + lane; r < r1; r += nlanes) {
      fh_relu_bwd_chunk8(dy, act, (int64_t)r * ld + c0, acc);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) sm[lane * n + c0 + k] = acc[k];
  }
  __syncthreads();
  if (tid < n) {
    float sum = 0.0f;
    for (int y = 0; y < nlanes; ++y) sum += sm[y * n + tid];
    partial[(int64_t)blockIdx.y * n + tid] = sum;
  }
}

static __global__ void fh_relu_bwd_partial_narrow_kernel(fh_bf16* __restrict__ dy, const fh_bf16* __restrict__ act,
                                                         int ld, int B, int n, int rows, float* __restrict__ partial) {
  __shared__ float sm[kColsumTx * kColsumTy * 8];
  fh_relu_bwd_partial_narrow(dy, act, ld, B, n, rows, partial, sm);
}

/* Several narrow column sums in one launch (blockIdx.z = the problem), each problem's partials exactly those
 * of its own fh_relu_bwd_partial_narrow_kernel launch. */
static __global__ void fh_colsum_partial_multi_kernel(fh_colsum_multi m, int B, int rows) {
  __shared__ float sm[kColsumTx * kColsumTy * 8];
  const fh_colsum_problem& p = m.p[blockIdx.z];
  fh_relu_bwd_partial_narrow(p.dy, nullptr, p.ld, B, p.n, rows, p.partial, sm);
}

/* The finishes of those problems in one launch: their columns one after another, 32 per block, each summed as
 * fh_colsum_finish_kernel sums it. */
static __global__ void fh_colsum_finish_multi_kernel(fh_colsum_multi m, int chunks) {
  fh_colsum_finish_block(chunks, [&](int g, const float** p, int* pn, int* col, float** o) {
    int k = 0;
    while (k < m.count && g >= m.p[k].n) g -= m.p[k++].n;
    if (k >= m.count) return false;
    *p = m.p[k].partial; *pn = m.p[k].n; *col = g; *o = m.p[k].out;
    return true;
  });
}

fh_status fh_launch_colsum_multi(const fh_colsum_multi& m, int B, cudaStream_t s) {
  if (B <= 0 || m.count <= 0) return FH_OK;
  if (m.count > FH_COLSUM_MULTI) return FH_ERR_INVALID_ARGUMENT;
  int cols = 0;
  for (int k = 0; k < m.count; ++k) {
    const fh_colsum_problem& p = m.p[k];
    if (!fh_colsum_multi_ok(p.dy, p.ld, p.n) || !p.partial || !p.out) return FH_ERR_INVALID_ARGUMENT;
    cols += p.n;
  }
  const int rows = fh_narrow_rows();
  const int chunks = CEIL_DIV(B, rows);
  dim3 grid(1, chunks, m.count), block(kColsumTx, kColsumTy);
  fh_colsum_partial_multi_kernel<<<grid, block, 0, s>>>(m, B, rows);
  FH_LAUNCH_CHECK();
  fh_colsum_finish_multi_kernel<<<CEIL_DIV(cols, 32), dim3(32, 32), 0, s>>>(m, chunks);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

bool fh_colsum_multi_ok(const void* dy, int ld, int n) {
  return n > 0 && n % 8 == 0 && n < kColsumTx * 8 && ld % 8 == 0 && (reinterpret_cast<uintptr_t>(dy) % 16) == 0;
}

/* Rows per chunk of the wide bf16 kernel: 64 (8 rows per thread; the reference shape's 16384 x 256 and x 512 passes
 * get 256 and 512 blocks, where 128-row chunks gave 128 and 256, one or two per SM, at ~1-2.4 TB/s). 32-row chunks
 * (twice the blocks, twice the partials for the finish) trained as fast on an H200 and 1.7-3 ms an epoch slower on
 * an H100 (bench/RESULTS.md). FH_RELU_VEC_ROWS=32|128 (read once; A/B). */
static int fh_relu_vec_rows() {
  static const int rows = fh_chunk_rows("FH_RELU_VEC_ROWS", 64);
  return rows;
}

/* The first pass (ReLU backward + per-chunk partial sums); returns the chunks the finish sums. bits: the ReLU
 * bit mask decides instead of act where the wide bf16 kernel runs (n >= 256; ldbytes per row); act elsewhere. */
template <typename T>
static fh_status fh_launch_relu_bwd_partial(T* dy, const T* act, int ld, int B, int n, float* partial,
                                            cudaStream_t s, int* chunks_out, const uint8_t* bits = nullptr,
                                            int ldbytes = 0) {
  int chunks = CEIL_DIV(B, kColsumRows);
  const bool vec = sizeof(T) == 2 && n % 8 == 0 && ld % 8 == 0 && (reinterpret_cast<uintptr_t>(dy) % 16) == 0 &&
                   (act == nullptr || (reinterpret_cast<uintptr_t>(act) % 16) == 0);
  /* the mask only where the wide kernel runs; elsewhere act decides, as without it */
  if (!vec || n < kColsumTx * 8 || ldbytes * 8 < n) bits = nullptr;
  if (vec && n < kColsumTx * 8) {
    const int rows = fh_narrow_rows();
    chunks = CEIL_DIV(B, rows);
    dim3 grid(1, chunks), block(kColsumTx, kColsumTy);
    fh_relu_bwd_partial_narrow_kernel<<<grid, block, 0, s>>>(reinterpret_cast<fh_bf16*>(dy),
                                                             reinterpret_cast<const fh_bf16*>(act), ld, B, n, rows,
                                                             partial);
  } else if (vec) {
    const int rows = fh_relu_vec_rows();
    chunks = CEIL_DIV(B, rows);
    dim3 grid(CEIL_DIV(n, kColsumTx * 8), chunks), block(kColsumTx, kColsumTy);
    fh_relu_bwd_partial_vec_kernel<<<grid, block, 0, s>>>(reinterpret_cast<fh_bf16*>(dy),
                                                          reinterpret_cast<const fh_bf16*>(act), ld, B, n, rows,
                                                          partial, bits, ldbytes);
  } else {
    dim3 grid(CEIL_DIV(n, kColsumTx), chunks), block(kColsumTx, kColsumTy);
    fh_relu_bwd_partial_kernel<T><<<grid, block, 0, s>>>(dy, act, ld, B, n, partial);
  }
  FH_LAUNCH_CHECK();
  *chunks_out = chunks;
  return FH_OK;
}

template <typename T>
fh_status fh_launch_relu_bwd_colsum_split(T* dy, const T* act, int ld, int B, int n, float* partial,
                                          float* bias_grad, cudaStream_t s, cudaStream_t fs, cudaEvent_t ev,
                                          const void* bits, int64_t ld_bits, int* chunks_out) {
  if (chunks_out) *chunks_out = 0;
  if (B <= 0 || n <= 0) return FH_OK;
  if (ld_bits % 8 != 0) bits = nullptr;  /* act decides (as it does wherever the wide bf16 kernel does not run) */
  int chunks = 0;
  FH_TRY(fh_launch_relu_bwd_partial<T>(dy, act, ld, B, n, partial, s, &chunks, static_cast<const uint8_t*>(bits),
                                       (int)(ld_bits / 8)));
  if (fs != s) {
    FH_CUDA_TRY(cudaEventRecord(ev, s));
    FH_CUDA_TRY(cudaStreamWaitEvent(fs, ev, 0));
  }
  if (chunks_out) {
    *chunks_out = chunks;
    return FH_OK;
  }
  return fh_launch_colsum_finish(partial, chunks, n, bias_grad, fs);
}

template <typename T>
fh_status fh_launch_relu_bwd_colsum(T* dy, const T* act, int ld, int B, int n, float* partial, float* bias_grad,
                                    cudaStream_t s) {
  return fh_launch_relu_bwd_colsum_split<T>(dy, act, ld, B, n, partial, bias_grad, s, s, nullptr);
}

fh_status fh_launch_colsum_finish(const float* partial, int chunks, int n, float* out, cudaStream_t s) {
  if (chunks <= 0 || n <= 0) return FH_OK;
  fh_colsum_finish_kernel<<<CEIL_DIV(n, 32), dim3(32, 32), 0, s>>>(partial, chunks, n, out);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

/* One warp per sample; the sample's head outputs are staged in shared memory first (dynamic, one
 * row per warp), so the per-action means and softmaxes read shared memory, not global. */
static constexpr int kQWarps = 4;

template <typename L>
static __global__ void fh_expected_q_kernel(fh_heads_view_t<L> h, int B, float* __restrict__ q, int ldq) {
  extern __shared__ float s_rows[];
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * kQWarps + w;
  if (i >= B) return;
  float* row = s_rows + w * fh_row_floats(h);
  fh_dev_stage_row(h, i, lane, row);
  int col = 0;
  for (int d = 0; d < h.nb; ++d) {
    const float* arow = fh_staged_a(h, row, d);
    float mine = 0.0f;
    for (int a = 0; a < h.n[d]; ++a) {
      float qa = fh_dev_expected_q_r(row, arow, h.n[d], h.atoms, h.v_min, h.v_max, a, lane);
      if (lane == a) mine = qa;
    }
    if (lane < h.n[d]) q[(int64_t)i * ldq + col + lane] = mine;
    col += h.n[d];
  }
}

/* Branches of <= MAXN actions: one warp per sample, everything in registers (fh_dev_q_all). */
template <int MAXN, typename L>
static __global__ void fh_expected_q_fast_kernel(fh_heads_view_t<L> h, int B, float* __restrict__ q, int ldq) {
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * kQWarps + w;
  if (i >= B) return;
  float qa[FH_MAX_BRANCHES * MAXN];
  fh_dev_q_all<MAXN>(h, i, lane, qa);
  int col = 0;
#pragma unroll
  for (int d = 0; d < FH_MAX_BRANCHES; ++d)
    if (d < h.nb) {
      float mine = 0.0f;
#pragma unroll
      for (int a = 0; a < MAXN; ++a)
        if (lane == a) mine = qa[d * MAXN + a];
      if (lane < h.n[d]) q[(int64_t)i * ldq + col + lane] = mine;
      col += h.n[d];
    }
}

template <typename L>
fh_status fh_launch_expected_q(const fh_heads_view_t<L>& h, int B, float* q, int ldq, cudaStream_t s) {
  if (B <= 0) return FH_OK;
  int maxn = 0;
  for (int d = 0; d < h.nb; ++d) maxn = h.n[d] > maxn ? h.n[d] : maxn;
  if (h.atoms <= FH_MAX_ATOMS_GPU && h.nb <= FH_MAX_BRANCHES && maxn <= 8) {
    if (maxn <= 4)
      fh_expected_q_fast_kernel<4, L><<<CEIL_DIV(B, kQWarps), kQWarps * 32, 0, s>>>(h, B, q, ldq);
    else
      fh_expected_q_fast_kernel<8, L><<<CEIL_DIV(B, kQWarps), kQWarps * 32, 0, s>>>(h, B, q, ldq);
    FH_LAUNCH_CHECK();
    return FH_OK;
  }
  const size_t shm = (size_t)kQWarps * fh_row_floats(h) * sizeof(float);
  fh_expected_q_kernel<L><<<CEIL_DIV(B, kQWarps), kQWarps * 32, shm, s>>>(h, B, q, ldq);
  FH_LAUNCH_CHECK();
  return FH_OK;
}

template fh_status fh_launch_expected_q<float>(const fh_heads_view&, int, float*, int, cudaStream_t);
template fh_status fh_launch_expected_q<fh_bf16>(const fh_heads_view_bf16&, int, float*, int, cudaStream_t);
template fh_status fh_launch_cast<float>(const float*, float*, int64_t, cudaStream_t);
template fh_status fh_launch_cast<fh_bf16>(const float*, fh_bf16*, int64_t, cudaStream_t);
template fh_status fh_launch_cast_2d<float>(const float*, int, float*, int, int, int, cudaStream_t);
template fh_status fh_launch_cast_2d<fh_bf16>(const float*, int, fh_bf16*, int, int, int, cudaStream_t);
template fh_status fh_launch_relu_bwd_colsum<float>(float*, const float*, int, int, int, float*, float*,
                                                    cudaStream_t);
template fh_status fh_launch_relu_bwd_colsum<fh_bf16>(fh_bf16*, const fh_bf16*, int, int, int, float*, float*,
                                                      cudaStream_t);
template fh_status fh_launch_relu_bwd_colsum_split<float>(float*, const float*, int, int, int, float*, float*,
                                                          cudaStream_t, cudaStream_t, cudaEvent_t, const void*, int64_t,
                                                          int*);
template fh_status fh_launch_relu_bwd_colsum_split<fh_bf16>(fh_bf16*, const fh_bf16*, int, int, int, float*, float*,
                                                            cudaStream_t, cudaStream_t, cudaEvent_t, const void*,
                                                            int64_t, int*);
