/**
 * The koffi binding of `native/include/foxhunt.h`: the ONE file that touches koffi. Every struct and
 * function of the header is declared here with the prototype copied from it; everything above this
 * file (src/native/trainer.ts, tests, tools) uses the typed `NativeLib` it returns.
 *
 * One cached instance per library file (so per backend and directory). Loading is lazy: importing
 * this module never opens a library, and a missing library is a clear FoxhuntError.
 *
 * Conventions of the typed surface:
 *   - pointers (handles) are koffi 3 BigInts, branded per opaque type;
 *   - `_Out_` struct parameters take a plain object that koffi fills on return;
 *   - `_Out_` scalar parameters take a one-element array;
 *   - array parameters take typed arrays / Buffers, passed to C without a copy, so they must not be
 *     touched while an async call runs;
 *   - `async.<fn>(...)` runs the call on a koffi worker thread and resolves with its result.
 */
import koffi from 'koffi';
import type { LibraryHandle } from 'koffi';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { FoxhuntError } from '../errors.js';
import { libraryPath } from './paths.js';
import type { NativeBackend } from './paths.js';

export type { NativeBackend } from './paths.js';

/* ---------------------------------------------------------------------------------------------
 * Constants and enums (mirrors of foxhunt.h)
 * ------------------------------------------------------------------------------------------- */

export const FH_ABI_VERSION = 4;
export const FH_MAX_BRANCHES = 3;
export const FH_ACCOUNT_FEATURES = 8;

export const FhStatus = {
  OK: 0,
  ERR_INVALID_CONFIG: 1,
  ERR_INVALID_DATA: 2,
  ERR_OUT_OF_MEMORY: 3,
  ERR_CHECKPOINT: 4,
  ERR_DIVERGED: 5,
  ERR_DEVICE: 6,
  ERR_UNSUPPORTED: 7,
  ERR_BUFFER_TOO_SMALL: 8,
  ERR_INVALID_ARGUMENT: 9,
  ERR_INTERNAL: 10,
} as const;
export type FhStatusCode = number;

export const FhBackend = { CPU: 0, CUDA: 1 } as const;

/* ---------------------------------------------------------------------------------------------
 * Struct mirrors (field names exactly as in C)
 * ------------------------------------------------------------------------------------------- */

/** fh_config, field for field. */
export interface FhConfig {
  seed: bigint | number;
  backend: number;
  device: number;
  use_graphs: number;
  deterministic: number;
  threads: number;
  n_envs: number;
  episode_len: number;
  window: number;
  n_branches: number;
  branch_sizes: number[];
  point_value: number;
  tick_size: number;
  commission: number;
  slippage_ticks: number;
  max_contracts: number;
  flatten_at_session_break: number;
  stop_atr_mult: number;
  risk_penalty: number;
  reward_scale: number;
  initial_capital: number;
  hidden1: number;
  hidden2: number;
  head_hidden: number;
  atoms: number;
  v_min: number;
  v_max: number;
  gamma: number;
  n_step: number;
  lr: number;
  adam_beta1: number;
  adam_beta2: number;
  adam_eps: number;
  grad_clip: number;
  target_update_every: number;
  tau: number;
  huber_delta: number;
  replay_capacity: bigint | number;
  per_alpha: number;
  per_beta_start: number;
  per_beta_end: number;
  per_beta_steps: bigint | number;
  per_eps: number;
  train_steps: number;
  batch_size: number;
  batch_cap: number;
  learning_starts: bigint | number;
  eps_start: number;
  eps_end: number;
  eps_decay_steps: number;
  qstats_every: number;
  eval_segments: number;
  fault_hook: number;
}

/** fh_market. The arrays stay owned by the caller and must outlive fh_trainer_create. */
export interface FhMarket {
  n_bars: number;
  n_features: number;
  features: Float32Array;
  open: Float64Array;
  high: Float64Array;
  low: Float64Array;
  close: Float64Array;
  atr: Float64Array;
  session_start: Uint8Array;
  train_begin: number;
  train_end: number;
  val_begin: number;
  val_end: number;
}

export interface FhMetrics {
  sharpe: number;
  sortino: number;
  max_drawdown: number;
  max_drawdown_pct: number;
  profit_factor: number;
  total_pnl: number;
  trades: number;
  win_rate: number;
  turnover: number;
  sessions: number;
}

export interface FhEpochStats {
  epoch: number;
  global_step: number;
  env_steps: number;
  loss_mean: number;
  loss_last: number;
  grad_norm_mean: number;
  grad_norm_max: number;
  q_avg_max: number;
  q_min: number;
  q_max: number;
  q_mean: number;
  q_var: number;
  epsilon: number;
  beta: number;
  batch_size: number;
  replay_size: number;
  val: FhMetrics;
  flat: FhMetrics;
  buy_hold: FhMetrics;
  collect_ms: number;
  train_ms: number;
  eval_ms: number;
  total_ms: number;
  env_steps_per_s: number;
  samples_per_s: number;
  host_syncs: number;
}

export interface FhInfo {
  backend: number;
  device: number;
  batch_size: number;
  obs_dim: number;
  n_params: number | bigint;
  replay_capacity: number | bigint;
  flops_per_epoch: number;
  reward_scale: number;
  config_hash: number | bigint;
  device_name: string;
  device_uuid: string;
  device_mem_total: number | bigint;
  device_mem_free: number | bigint;
  engine: string;
}

/** Opaque handles (koffi 3 pointers are BigInts). */
export type TrainerHandle = bigint & { readonly __brand: 'fh_trainer' };
export type PerHandle = bigint & { readonly __brand: 'fh_per' };

/** An `_Out_` scalar parameter: koffi writes element 0. */
export type OutScalar<T> = [T];

/* ---------------------------------------------------------------------------------------------
 * koffi type declarations (module scope: koffi type names are global and declared once)
 * ------------------------------------------------------------------------------------------- */

let typesDeclared = false;
function declareTypes(): void {
  if (typesDeclared) return;
  typesDeclared = true;
  koffi.alias('fh_status', 'int32_t');
  koffi.struct('fh_config', {
    seed: 'uint64_t',
    backend: 'int32_t',
    device: 'int32_t',
    use_graphs: 'int32_t',
    deterministic: 'int32_t',
    threads: 'int32_t',
    n_envs: 'int32_t',
    episode_len: 'int32_t',
    window: 'int32_t',
    n_branches: 'int32_t',
    branch_sizes: koffi.array('int32_t', FH_MAX_BRANCHES, 'Array'),
    point_value: 'double',
    tick_size: 'double',
    commission: 'double',
    slippage_ticks: 'double',
    max_contracts: 'int32_t',
    flatten_at_session_break: 'int32_t',
    stop_atr_mult: 'double',
    risk_penalty: 'double',
    reward_scale: 'double',
    initial_capital: 'double',
    hidden1: 'int32_t',
    hidden2: 'int32_t',
    head_hidden: 'int32_t',
    atoms: 'int32_t',
    v_min: 'float',
    v_max: 'float',
    gamma: 'float',
    n_step: 'int32_t',
    lr: 'float',
    adam_beta1: 'float',
    adam_beta2: 'float',
    adam_eps: 'float',
    grad_clip: 'float',
    target_update_every: 'int32_t',
    tau: 'float',
    huber_delta: 'float',
    replay_capacity: 'int64_t',
    per_alpha: 'float',
    per_beta_start: 'float',
    per_beta_end: 'float',
    per_beta_steps: 'int64_t',
    per_eps: 'float',
    train_steps: 'int32_t',
    batch_size: 'int32_t',
    batch_cap: 'int32_t',
    learning_starts: 'int64_t',
    eps_start: 'float',
    eps_end: 'float',
    eps_decay_steps: 'double',
    qstats_every: 'int32_t',
    eval_segments: 'int32_t',
    fault_hook: 'int32_t',
  });
  koffi.struct('fh_market', {
    n_bars: 'int64_t',
    n_features: 'int32_t',
    features: 'const float *',
    open: 'const double *',
    high: 'const double *',
    low: 'const double *',
    close: 'const double *',
    atr: 'const double *',
    session_start: 'const uint8_t *',
    train_begin: 'int64_t',
    train_end: 'int64_t',
    val_begin: 'int64_t',
    val_end: 'int64_t',
  });
  koffi.struct('fh_metrics', {
    sharpe: 'double',
    sortino: 'double',
    max_drawdown: 'double',
    max_drawdown_pct: 'double',
    profit_factor: 'double',
    total_pnl: 'double',
    trades: 'double',
    win_rate: 'double',
    turnover: 'double',
    sessions: 'double',
  });
  koffi.struct('fh_epoch_stats', {
    epoch: 'double',
    global_step: 'double',
    env_steps: 'double',
    loss_mean: 'double',
    loss_last: 'double',
    grad_norm_mean: 'double',
    grad_norm_max: 'double',
    q_avg_max: 'double',
    q_min: 'double',
    q_max: 'double',
    q_mean: 'double',
    q_var: 'double',
    epsilon: 'double',
    beta: 'double',
    batch_size: 'double',
    replay_size: 'double',
    val: 'fh_metrics',
    flat: 'fh_metrics',
    buy_hold: 'fh_metrics',
    collect_ms: 'double',
    train_ms: 'double',
    eval_ms: 'double',
    total_ms: 'double',
    env_steps_per_s: 'double',
    samples_per_s: 'double',
    host_syncs: 'double',
  });
  koffi.struct('fh_info', {
    backend: 'int32_t',
    device: 'int32_t',
    batch_size: 'int32_t',
    obs_dim: 'int32_t',
    n_params: 'int64_t',
    replay_capacity: 'int64_t',
    flops_per_epoch: 'double',
    reward_scale: 'double',
    config_hash: 'uint64_t',
    device_name: koffi.array('char', 128, 'String'),
    device_uuid: koffi.array('char', 64, 'String'),
    device_mem_total: 'int64_t',
    device_mem_free: 'int64_t',
    engine: koffi.array('char', 256, 'String'),
  });
  koffi.opaque('fh_trainer');
  koffi.opaque('fh_per');
}

/** Sizes as koffi lays the structs out (tests compare them with the C side where useful). */
export function structSizes(): Record<'fh_config' | 'fh_market' | 'fh_metrics' | 'fh_epoch_stats' | 'fh_info', number> {
  declareTypes();
  return {
    fh_config: koffi.sizeof('fh_config'),
    fh_market: koffi.sizeof('fh_market'),
    fh_metrics: koffi.sizeof('fh_metrics'),
    fh_epoch_stats: koffi.sizeof('fh_epoch_stats'),
    fh_info: koffi.sizeof('fh_info'),
  };
}

/* ---------------------------------------------------------------------------------------------
 * Prototypes, copied from foxhunt.h (with koffi's _Out_ / _Inout_ markers on struct and scalar
 * outputs; array outputs are plain pointers that receive typed arrays)
 * ------------------------------------------------------------------------------------------- */

const PROTOTYPES = {
  fh_abi_version: 'int32_t fh_abi_version(void)',
  fh_version: 'const char *fh_version(void)',
  fh_status_string: 'const char *fh_status_string(fh_status s)',
  fh_default_config: 'fh_status fh_default_config(_Out_ fh_config *out)',
  fh_validate_config: 'fh_status fh_validate_config(const fh_config *cfg, char *err, size_t err_len)',
  fh_device_count: 'fh_status fh_device_count(_Out_ int32_t *out)',
  fh_device_info: 'fh_status fh_device_info(int32_t device, _Out_ fh_info *out)',
  fh_trainer_create:
    'fh_status fh_trainer_create(const fh_config *cfg, const fh_market *market, _Out_ fh_trainer **out, char *err, size_t err_len)',
  fh_trainer_destroy: 'void fh_trainer_destroy(fh_trainer *t)',
  fh_trainer_last_error: 'const char *fh_trainer_last_error(const fh_trainer *t)',
  fh_trainer_info: 'fh_status fh_trainer_info(fh_trainer *t, _Out_ fh_info *out)',
  fh_trainer_run_epoch: 'fh_status fh_trainer_run_epoch(fh_trainer *t, _Out_ fh_epoch_stats *out)',
  fh_trainer_checkpoint_size: 'fh_status fh_trainer_checkpoint_size(fh_trainer *t, _Out_ uint64_t *out)',
  fh_trainer_save_checkpoint:
    'fh_status fh_trainer_save_checkpoint(fh_trainer *t, uint8_t *buf, uint64_t cap, _Out_ uint64_t *written)',
  fh_trainer_load_checkpoint: 'fh_status fh_trainer_load_checkpoint(fh_trainer *t, const uint8_t *buf, uint64_t len)',
  fh_trainer_get_params: 'fh_status fh_trainer_get_params(fh_trainer *t, int32_t which, float *out, int64_t n)',
  fh_trainer_set_params: 'fh_status fh_trainer_set_params(fh_trainer *t, int32_t which, const float *in, int64_t n)',
  fh_trainer_env_step:
    'fh_status fh_trainer_env_step(fh_trainer *t, const int32_t *actions, float *reward, uint8_t *done, int32_t *position, int64_t *cursor, double *equity, double *cost)',
  fh_trainer_env_observe: 'fh_status fh_trainer_env_observe(fh_trainer *t, float *out)',
  fh_trainer_loss_grad:
    'fh_status fh_trainer_loss_grad(fh_trainer *t, int32_t n, const float *obs, const int32_t *act, const float *ret, const float *disc, const float *next_obs, const float *weight, _Out_ double *loss, float *grad, float *td_out)',
  fh_trainer_q_values: 'fh_status fh_trainer_q_values(fh_trainer *t, int32_t n, const float *obs, float *q)',
  fh_trainer_replay_sample:
    'fh_status fh_trainer_replay_sample(fh_trainer *t, int32_t n, uint64_t draw, float beta, int64_t *slot, int64_t *next_slot, float *obs, int32_t *act, float *ret, float *disc, float *next_obs, float *weight)',
  fh_per_create: 'fh_status fh_per_create(int64_t capacity, float alpha, uint64_t seed, _Out_ fh_per **out)',
  fh_per_destroy: 'void fh_per_destroy(fh_per *p)',
  fh_per_set: 'fh_status fh_per_set(fh_per *p, int64_t n, const int64_t *idx, const float *priority)',
  fh_per_sample: 'fh_status fh_per_sample(fh_per *p, int32_t n, uint64_t draw, float beta, int64_t *idx, float *weight)',
  fh_per_total: 'fh_status fh_per_total(fh_per *p, _Out_ double *out)',
  fh_philox4x32_10: 'void fh_philox4x32_10(const uint32_t *counter, const uint32_t *key, uint32_t *out)',
  fh_c51_project:
    'fh_status fh_c51_project(int32_t n, int32_t atoms, float v_min, float v_max, const float *probs, const float *ret, const float *disc, float *out)',
  fh_adam_step:
    'fh_status fh_adam_step(int64_t n, float *p, const float *g, float *m, float *v, float lr, float beta1, float beta2, float eps, int64_t step)',
} as const;

/** Entry points every library must export (the rest are narrow test/tool entry points). */
const CORE_FUNCTIONS: ReadonlySet<string> = new Set([
  'fh_abi_version', 'fh_version', 'fh_status_string', 'fh_default_config', 'fh_validate_config', 'fh_device_count',
  'fh_device_info', 'fh_trainer_create', 'fh_trainer_destroy', 'fh_trainer_last_error', 'fh_trainer_info',
  'fh_trainer_run_epoch', 'fh_trainer_checkpoint_size', 'fh_trainer_save_checkpoint', 'fh_trainer_load_checkpoint',
]);

type Int64 = number | bigint;
type Nullable<T> = T | null;

/** The typed signatures of every entry point (arguments in header order). */
export interface NativeFunctions {
  fh_abi_version(): number;
  fh_version(): string;
  fh_status_string(s: FhStatusCode): string;
  fh_default_config(out: Partial<FhConfig>): FhStatusCode;
  fh_validate_config(cfg: FhConfig, err: Buffer, errLen: number): FhStatusCode;
  fh_device_count(out: OutScalar<number>): FhStatusCode;
  fh_device_info(device: number, out: Partial<FhInfo>): FhStatusCode;
  fh_trainer_create(cfg: FhConfig, market: FhMarket, out: OutScalar<TrainerHandle | null>, err: Buffer, errLen: number): FhStatusCode;
  fh_trainer_destroy(t: TrainerHandle | null): void;
  fh_trainer_last_error(t: TrainerHandle): string | null;
  fh_trainer_info(t: TrainerHandle, out: Partial<FhInfo>): FhStatusCode;
  fh_trainer_run_epoch(t: TrainerHandle, out: Partial<FhEpochStats>): FhStatusCode;
  fh_trainer_checkpoint_size(t: TrainerHandle, out: OutScalar<Int64>): FhStatusCode;
  fh_trainer_save_checkpoint(t: TrainerHandle, buf: Uint8Array, cap: Int64, written: OutScalar<Int64>): FhStatusCode;
  fh_trainer_load_checkpoint(t: TrainerHandle, buf: Uint8Array, len: Int64): FhStatusCode;
  fh_trainer_get_params(t: TrainerHandle, which: number, out: Float32Array, n: Int64): FhStatusCode;
  fh_trainer_set_params(t: TrainerHandle, which: number, input: Float32Array, n: Int64): FhStatusCode;
  fh_trainer_env_step(
    t: TrainerHandle, actions: Int32Array, reward: Nullable<Float32Array>, done: Nullable<Uint8Array>,
    position: Nullable<Int32Array>, cursor: Nullable<BigInt64Array>, equity: Nullable<Float64Array>, cost: Nullable<Float64Array>,
  ): FhStatusCode;
  fh_trainer_env_observe(t: TrainerHandle, out: Float32Array): FhStatusCode;
  fh_trainer_loss_grad(
    t: TrainerHandle, n: number, obs: Float32Array, act: Int32Array, ret: Float32Array, disc: Float32Array,
    nextObs: Float32Array, weight: Float32Array, loss: OutScalar<number>, grad: Nullable<Float32Array>, tdOut: Nullable<Float32Array>,
  ): FhStatusCode;
  fh_trainer_q_values(t: TrainerHandle, n: number, obs: Float32Array, q: Float32Array): FhStatusCode;
  fh_trainer_replay_sample(
    t: TrainerHandle, n: number, draw: Int64, beta: number, slot: BigInt64Array, nextSlot: Nullable<BigInt64Array>,
    obs: Nullable<Float32Array>, act: Nullable<Int32Array>, ret: Nullable<Float32Array>, disc: Nullable<Float32Array>,
    nextObs: Nullable<Float32Array>, weight: Nullable<Float32Array>,
  ): FhStatusCode;
  fh_per_create(capacity: Int64, alpha: number, seed: Int64, out: OutScalar<PerHandle | null>): FhStatusCode;
  fh_per_destroy(p: PerHandle | null): void;
  fh_per_set(p: PerHandle, n: Int64, idx: BigInt64Array, priority: Float32Array): FhStatusCode;
  fh_per_sample(p: PerHandle, n: number, draw: Int64, beta: number, idx: BigInt64Array, weight: Float32Array): FhStatusCode;
  fh_per_total(p: PerHandle, out: OutScalar<number>): FhStatusCode;
  fh_philox4x32_10(counter: Uint32Array, key: Uint32Array, out: Uint32Array): void;
  fh_c51_project(
    n: number, atoms: number, vMin: number, vMax: number, probs: Float32Array, ret: Float32Array, disc: Float32Array, out: Float32Array,
  ): FhStatusCode;
  fh_adam_step(
    n: Int64, p: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, lr: number,
    beta1: number, beta2: number, eps: number, step: Int64,
  ): FhStatusCode;
}

type FnName = keyof NativeFunctions;
type AsyncFunctions = { [K in FnName]: (...args: Parameters<NativeFunctions[K]>) => Promise<ReturnType<NativeFunctions[K]>> };

/** One loaded library. */
export interface NativeLib extends NativeFunctions {
  readonly backend: NativeBackend;
  readonly path: string;
  /** sha256 (hex) of the library file, computed once at load. */
  readonly sha256: string;
  /** fh_version(), e.g. "0.1.0 cpu". */
  readonly version: string;
  /** Narrow (test/tool) entry points this build does not export; calling one throws UNSUPPORTED. */
  readonly missing: readonly string[];
  /** The same functions run on a koffi worker thread; the promise resolves with the C result. */
  readonly async: AsyncFunctions;
}

/* ---------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------- */

const cache = new Map<string, NativeLib>();

/** Opens (once per file) and returns the library of `backend` in `libDir` (see paths.ts). */
export function loadNative(backend: NativeBackend, libDir?: string): NativeLib {
  const path = libraryPath(backend, libDir);
  const cached = cache.get(path);
  if (cached !== undefined) return cached;
  if (!existsSync(path)) {
    throw new FoxhuntError(
      'UNSUPPORTED',
      `native library not built: ${path} is missing (run npm run build:native)`,
    );
  }
  const lib = openLibrary(backend, path);
  cache.set(path, lib);
  return lib;
}

function openLibrary(backend: NativeBackend, path: string): NativeLib {
  declareTypes();
  const sha256 = createHash('sha256').update(readFileSync(path)).digest('hex');
  let handle: LibraryHandle;
  try {
    handle = koffi.load(path);
  } catch (err) {
    throw new FoxhuntError('UNSUPPORTED',
      `cannot load native library ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const sync: Record<string, (...args: any[]) => any> = {};
  const missing: string[] = [];
  const asyncFns: Record<string, (...args: any[]) => Promise<any>> = {};
  for (const [name, proto] of Object.entries(PROTOTYPES)) {
    let fn: ReturnType<LibraryHandle['func']>;
    try {
      fn = handle.func(proto);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err);
      if (CORE_FUNCTIONS.has(name)) {
        throw new FoxhuntError('UNSUPPORTED', `native library ${path} does not match foxhunt.h (${name}): ${why} (rebuild: npm run build:native)`, { cause: err });
      }
      // A narrow test/tool entry point this build lacks: training still works, calling it throws.
      missing.push(name);
      const fail = (): never => {
        throw new FoxhuntError('UNSUPPORTED', `${name} is not exported by ${path} (rebuild: npm run build:native)`);
      };
      sync[name] = fail;
      asyncFns[name] = () => Promise.reject(new FoxhuntError('UNSUPPORTED', `${name} is not exported by ${path} (rebuild: npm run build:native)`));
      continue;
    }
    sync[name] = fn;
    asyncFns[name] = (...args: any[]) => new Promise<any>((resolve, reject) => {
      fn.async(...args, (err: unknown, result: unknown) => {
        if (err !== null && err !== undefined) reject(err instanceof Error ? err : new Error(String(err)));
        else resolve(result);
      });
    });
  }
  const fns = sync as unknown as NativeFunctions;
  const abi = fns.fh_abi_version();
  if (abi !== FH_ABI_VERSION) {
    throw new FoxhuntError('UNSUPPORTED', `native library ${path} has ABI version ${abi}, expected ${FH_ABI_VERSION} (rebuild: npm run build:native)`);
  }
  const lib = Object.assign(Object.create(null) as object, fns, {
    backend,
    path,
    sha256,
    version: fns.fh_version(),
    missing,
    async: asyncFns as unknown as AsyncFunctions,
  });
  return lib as NativeLib;
}

/** Reads a NUL-terminated message out of an err buffer. */
export function cString(buf: Buffer): string {
  const end = buf.indexOf(0);
  return buf.toString('utf8', 0, end < 0 ? buf.length : end);
}

/** Converts a koffi 64-bit value (number or BigInt) to a number (exact below 2^53). */
export function toNumber(v: number | bigint): number {
  return typeof v === 'bigint' ? Number(v) : v;
}

/** Converts a koffi 64-bit value to a BigInt. */
export function toBigInt(v: number | bigint): bigint {
  return typeof v === 'bigint' ? v : BigInt(v);
}

/** Member names of a declared struct, in C order. */
export function structMembers(name: 'fh_config' | 'fh_market' | 'fh_metrics' | 'fh_epoch_stats' | 'fh_info'): string[] {
  declareTypes();
  return Object.keys(koffi.type(name).members ?? {});
}
