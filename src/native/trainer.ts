/**
 * `NativeTrainer`: the typed wrapper of one fh_trainer handle (DESIGN.md §7).
 *
 * - `toNativeConfig` maps the RunConfig fields of DESIGN §2 onto fh_config 1:1 (one table below);
 * - the market arrays are handed over as typed arrays and stay referenced while the handle lives;
 * - slow calls (create, run_epoch, checkpoint save/load) run through koffi `.async`, so the event
 *   loop never blocks; buffers given to an async call are pinned and not touched until it settles;
 * - calls on one handle are queued and run one at a time (the ABI requires it);
 * - statuses become `TrainerError`s (a FoxhuntError with the catalogue's code and retry policy)
 *   carrying the native last_error message.
 */
import { FoxhuntError } from '../errors.js';
import type { ErrorCode } from '../errors.js';
import type { RunConfig } from '../config/schema.js';
import type { PreparedMarket } from '../data/types.js';
import { finiteOrNull } from '../trainer/scalars.js';
import type { EpochStats, Metrics } from '../trainer/scalars.js';
import { FhBackend, FhStatus, FH_MAX_BRANCHES, cString, loadNative, toBigInt, toNumber } from './binding.js';
import type { FhConfig, FhEpochStats, FhInfo, FhMarket, FhMetrics, NativeBackend, NativeLib, TrainerHandle } from './binding.js';
import { libraryExists } from './paths.js';

export type { NativeBackend } from './paths.js';
export type BackendChoice = 'auto' | NativeBackend;

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

/** A failed native call: `code` from the catalogue, `status` the fh_status it came from. */
export class TrainerError extends FoxhuntError {
  readonly status: number;
  constructor(code: ErrorCode, status: number, message: string, options: { where?: string; cause?: unknown } = {}) {
    super(code, message, options);
    this.name = 'TrainerError';
    this.status = status;
  }
}

/** fh_status → catalogue code. */
export function errorCodeForStatus(status: number): ErrorCode {
  switch (status) {
    case FhStatus.ERR_INVALID_CONFIG: return 'CONFIG_INVALID';
    case FhStatus.ERR_INVALID_DATA: return 'DATA_INVALID';
    case FhStatus.ERR_OUT_OF_MEMORY: return 'OUT_OF_MEMORY';
    case FhStatus.ERR_CHECKPOINT: return 'CHECKPOINT_INVALID';
    case FhStatus.ERR_DIVERGED: return 'DIVERGED';
    case FhStatus.ERR_DEVICE: return 'DEVICE_FAULT';
    case FhStatus.ERR_UNSUPPORTED: return 'UNSUPPORTED';
    default: return 'INTERNAL'; // BUFFER_TOO_SMALL, INVALID_ARGUMENT, INTERNAL, unknown: our bug
  }
}

/* ---------------------------------------------------------------------------------------------
 * RunConfig → fh_config
 * ------------------------------------------------------------------------------------------- */

type ConfigValue = number | bigint | boolean | readonly number[];

interface FieldMapping {
  /** Dotted RunConfig path (DESIGN §2). */
  path: string;
  /** fh_config member. */
  field: keyof FhConfig;
  /** How the value crosses: booleans become 0/1, int64 fields may be BigInt-safe numbers. */
  kind: 'num' | 'bool' | 'array';
}

/** Every RunConfig field that reaches the native trainer, and the fh_config member it becomes. */
export const NATIVE_FIELD_MAP: readonly FieldMapping[] = [
  { path: 'seed', field: 'seed', kind: 'num' },
  { path: 'gpu.device', field: 'device', kind: 'num' },
  { path: 'gpu.graphs', field: 'use_graphs', kind: 'bool' },
  { path: 'gpu.deterministic', field: 'deterministic', kind: 'bool' },
  { path: 'gpu.threads', field: 'threads', kind: 'num' },
  { path: 'env.n_envs', field: 'n_envs', kind: 'num' },
  { path: 'env.episode_len', field: 'episode_len', kind: 'num' },
  { path: 'env.window', field: 'window', kind: 'num' },
  { path: 'env.branch_sizes', field: 'branch_sizes', kind: 'array' },
  { path: 'instrument.point_value', field: 'point_value', kind: 'num' },
  { path: 'instrument.tick_size', field: 'tick_size', kind: 'num' },
  { path: 'instrument.commission', field: 'commission', kind: 'num' },
  { path: 'instrument.slippage_ticks', field: 'slippage_ticks', kind: 'num' },
  { path: 'instrument.max_contracts', field: 'max_contracts', kind: 'num' },
  { path: 'env.flatten_at_session_break', field: 'flatten_at_session_break', kind: 'bool' },
  { path: 'env.stop_atr_mult', field: 'stop_atr_mult', kind: 'num' },
  { path: 'env.risk_penalty', field: 'risk_penalty', kind: 'num' },
  { path: 'env.reward_scale', field: 'reward_scale', kind: 'num' },
  { path: 'env.initial_capital', field: 'initial_capital', kind: 'num' },
  { path: 'agent.hidden1', field: 'hidden1', kind: 'num' },
  { path: 'agent.hidden2', field: 'hidden2', kind: 'num' },
  { path: 'agent.head_hidden', field: 'head_hidden', kind: 'num' },
  { path: 'agent.atoms', field: 'atoms', kind: 'num' },
  { path: 'agent.v_min', field: 'v_min', kind: 'num' },
  { path: 'agent.v_max', field: 'v_max', kind: 'num' },
  { path: 'agent.gamma', field: 'gamma', kind: 'num' },
  { path: 'agent.n_step', field: 'n_step', kind: 'num' },
  { path: 'agent.lr', field: 'lr', kind: 'num' },
  { path: 'agent.adam_beta1', field: 'adam_beta1', kind: 'num' },
  { path: 'agent.adam_beta2', field: 'adam_beta2', kind: 'num' },
  { path: 'agent.adam_eps', field: 'adam_eps', kind: 'num' },
  { path: 'agent.grad_clip', field: 'grad_clip', kind: 'num' },
  { path: 'agent.target_update_every', field: 'target_update_every', kind: 'num' },
  { path: 'agent.tau', field: 'tau', kind: 'num' },
  { path: 'agent.huber_delta', field: 'huber_delta', kind: 'num' },
  { path: 'replay.capacity', field: 'replay_capacity', kind: 'num' },
  { path: 'replay.alpha', field: 'per_alpha', kind: 'num' },
  { path: 'replay.beta_start', field: 'per_beta_start', kind: 'num' },
  { path: 'replay.beta_end', field: 'per_beta_end', kind: 'num' },
  { path: 'replay.beta_steps', field: 'per_beta_steps', kind: 'num' },
  { path: 'replay.eps', field: 'per_eps', kind: 'num' },
  { path: 'train.steps_per_epoch', field: 'train_steps', kind: 'num' },
  { path: 'train.batch_size', field: 'batch_size', kind: 'num' },
  { path: 'train.batch_cap', field: 'batch_cap', kind: 'num' },
  { path: 'train.learning_starts', field: 'learning_starts', kind: 'num' },
  { path: 'train.eps_start', field: 'eps_start', kind: 'num' },
  { path: 'train.eps_end', field: 'eps_end', kind: 'num' },
  { path: 'train.eps_decay_steps', field: 'eps_decay_steps', kind: 'num' },
  { path: 'train.qstats_every', field: 'qstats_every', kind: 'num' },
  { path: 'eval.segments', field: 'eval_segments', kind: 'num' },
];

/**
 * RunConfig fields the native trainer never sees: they shape the market arrays (data, features,
 * split), name things, or pick the library (gpu.backend is resolved, then set as fh_config.backend).
 */
export const HOST_ONLY_FIELDS: readonly string[] = [
  'data.source', 'data.path', 'data.paths', 'data.session_gap_minutes',
  'data.synthetic.market', 'data.synthetic.days', 'data.synthetic.bars_per_day', 'data.synthetic.seed', 'data.synthetic.start_price',
  'instrument.symbol',
  'features.set', 'features.norm_window', 'features.leak_canary',
  'split.val_fraction', 'split.test_fraction', 'split.embargo_bars',
  'gpu.profile', 'gpu.backend',
];

/** fh_config members not read from a RunConfig field: fixed by the ABI or by the resolved backend. */
export const FIXED_NATIVE_FIELDS: readonly (keyof FhConfig)[] = ['backend', 'n_branches', 'fault_hook'];  // fault_hook: 1 only through CreateOptions.nativeFaultHook (tests)

function valueAt(cfg: RunConfig, path: string): unknown {
  let cur: unknown = cfg;
  for (const key of path.split('.')) {
    if (typeof cur !== 'object' || cur === null) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function convert(m: FieldMapping, v: unknown): ConfigValue {
  switch (m.kind) {
    case 'bool':
      if (typeof v !== 'boolean') throw new FoxhuntError('CONFIG_INVALID', `expected a boolean, got ${String(v)}`, { where: m.path });
      return v ? 1 : 0;
    case 'array':
      if (!Array.isArray(v) || v.length !== FH_MAX_BRANCHES || !v.every((x) => typeof x === 'number')) {
        throw new FoxhuntError('CONFIG_INVALID', `expected ${FH_MAX_BRANCHES} integers`, { where: m.path });
      }
      return [...(v as number[])];
    case 'num':
      if (typeof v !== 'number' || !Number.isFinite(v)) {
        throw new FoxhuntError('CONFIG_INVALID', `expected a finite number, got ${String(v)}`, { where: m.path });
      }
      return v;
  }
}

/** fh_config for a validated RunConfig, every member set (see NATIVE_FIELD_MAP). */
export function toNativeConfig(cfg: RunConfig, backend: NativeBackend = cfg.gpu.backend === 'cuda' ? 'cuda' : 'cpu'): FhConfig {
  const out: Record<string, ConfigValue> = {
    backend: backend === 'cuda' ? FhBackend.CUDA : FhBackend.CPU,
    n_branches: FH_MAX_BRANCHES,
    fault_hook: 0,
  };
  for (const m of NATIVE_FIELD_MAP) out[m.field] = convert(m, valueAt(cfg, m.path));
  return out as unknown as FhConfig;
}

/** The RunConfig path of an fh_config member (for error messages), if it has one. */
export function configPathOfField(field: string): string | undefined {
  return NATIVE_FIELD_MAP.find((m) => m.field === field)?.path;
}

/** The fh_market view of a prepared market (no copies: the arrays are the market's own). */
export function toNativeMarket(market: PreparedMarket): FhMarket {
  const { bars, split } = market;
  return {
    n_bars: bars.close.length,
    n_features: market.nFeatures,
    features: market.features,
    open: bars.open,
    high: bars.high,
    low: bars.low,
    close: bars.close,
    atr: market.atr,
    session_start: bars.sessionStart,
    train_begin: split.trainBegin,
    train_end: split.trainEnd,
    val_begin: split.valBegin,
    val_end: split.valEnd,
  };
}

/* ---------------------------------------------------------------------------------------------
 * Backend choice
 * ------------------------------------------------------------------------------------------- */

/** CUDA devices the CUDA library reports (0 when it is missing or cannot load). */
export function cudaDeviceCount(libDir?: string): number {
  if (!libraryExists('cuda', libDir)) return 0;
  try {
    const lib = loadNative('cuda', libDir);
    const n: [number] = [0];
    return lib.fh_device_count(n) === FhStatus.OK ? n[0] : 0;
  } catch {
    return 0;
  }
}

/** 'auto' → CUDA when libfoxhunt_cuda.so exists and reports ≥ 1 device, else CPU. */
export function resolveBackend(choice: BackendChoice, libDir?: string): NativeBackend {
  if (choice !== 'auto') return choice;
  return cudaDeviceCount(libDir) >= 1 ? 'cuda' : 'cpu';
}

/* ---------------------------------------------------------------------------------------------
 * Conversions of results
 * ------------------------------------------------------------------------------------------- */

export interface TrainerInfo {
  backend: NativeBackend;
  device: number;
  batchSize: number;
  obsDim: number;
  nParams: number;
  replayCapacity: number;
  flopsPerEpoch: number;
  rewardScale: number;
  /** fh_info.config_hash as 16 hex digits. */
  configHash: string;
  deviceName: string;
  deviceUuid: string;
  deviceMemTotal: number;
  deviceMemFree: number;
  /** What the trainer runs (dtype, graphs, backward path), from the native library. */
  engine: string;
  libSha256: string;
  libVersion: string;
  libPath: string;
}

export function infoFromNative(info: FhInfo, lib: NativeLib): TrainerInfo {
  return {
    backend: info.backend === FhBackend.CUDA ? 'cuda' : 'cpu',
    device: info.device,
    batchSize: info.batch_size,
    obsDim: info.obs_dim,
    nParams: toNumber(info.n_params),
    replayCapacity: toNumber(info.replay_capacity),
    flopsPerEpoch: info.flops_per_epoch,
    rewardScale: info.reward_scale,
    configHash: BigInt.asUintN(64, toBigInt(info.config_hash)).toString(16).padStart(16, '0'),
    deviceName: info.device_name,
    deviceUuid: info.device_uuid,
    deviceMemTotal: toNumber(info.device_mem_total),
    deviceMemFree: toNumber(info.device_mem_free),
    engine: info.engine,
    libSha256: lib.sha256,
    libVersion: lib.version,
    libPath: lib.path,
  };
}

function metricsFromNative(m: FhMetrics): Metrics {
  return {
    sharpe: finiteOrNull(m.sharpe),
    sortino: finiteOrNull(m.sortino),
    max_dd: finiteOrNull(m.max_drawdown),
    max_dd_pct: finiteOrNull(m.max_drawdown_pct),
    profit_factor: finiteOrNull(m.profit_factor),
    total_pnl: finiteOrNull(m.total_pnl),
    trades: finiteOrNull(m.trades),
    win_rate: finiteOrNull(m.win_rate),
    turnover: finiteOrNull(m.turnover),
    sessions: finiteOrNull(m.sessions),
  };
}

export function statsFromNative(s: FhEpochStats): EpochStats {
  const n = (v: number): number => (Number.isFinite(v) ? v : 0);
  return {
    epoch: n(s.epoch),
    global_step: n(s.global_step),
    env_steps: n(s.env_steps),
    loss_mean: finiteOrNull(s.loss_mean),
    loss_last: finiteOrNull(s.loss_last),
    grad_norm_mean: finiteOrNull(s.grad_norm_mean),
    grad_norm_max: finiteOrNull(s.grad_norm_max),
    q_avg_max: finiteOrNull(s.q_avg_max),
    q_min: finiteOrNull(s.q_min),
    q_max: finiteOrNull(s.q_max),
    q_mean: finiteOrNull(s.q_mean),
    q_var: finiteOrNull(s.q_var),
    epsilon: finiteOrNull(s.epsilon),
    beta: finiteOrNull(s.beta),
    batch_size: n(s.batch_size),
    replay_size: n(s.replay_size),
    val: metricsFromNative(s.val),
    flat: metricsFromNative(s.flat),
    buy_hold: metricsFromNative(s.buy_hold),
    collect_ms: n(s.collect_ms),
    train_ms: n(s.train_ms),
    eval_ms: n(s.eval_ms),
    total_ms: n(s.total_ms),
    env_steps_per_s: finiteOrNull(s.env_steps_per_s),
    samples_per_s: finiteOrNull(s.samples_per_s),
    host_syncs: n(s.host_syncs),
  };
}

const ERR_LEN = 1024;

/** A CONFIG_INVALID message names an fh_config member; point `where` at its RunConfig path. */
function whereOfConfigMessage(message: string): string | undefined {
  const words = message.match(/[a-z][a-z0-9_]*/g) ?? [];
  for (const w of words) {
    const path = configPathOfField(w);
    if (path !== undefined) return path;
  }
  return undefined;
}

function errorFor(lib: NativeLib, status: number, message: string, context: string, cause?: unknown): TrainerError {
  const code = errorCodeForStatus(status);
  const text = message !== '' ? message : lib.fh_status_string(status);
  const where = code === 'CONFIG_INVALID' ? whereOfConfigMessage(text) : undefined;
  const opts: { where?: string; cause?: unknown } = {};
  if (where !== undefined) opts.where = where;
  if (cause !== undefined) opts.cause = cause;
  return new TrainerError(code, status, `${context}: ${text}`, opts);
}

/* ---------------------------------------------------------------------------------------------
 * The wrapper
 * ------------------------------------------------------------------------------------------- */

export interface CreateOptions {
  backend?: BackendChoice;
  libDir?: string;
  /** Test only: the native library crashes the process (SIGSEGV) in the first run_epoch. */
  nativeFaultHook?: boolean;
}

export class NativeTrainer {
  readonly #lib: NativeLib;
  #handle: TrainerHandle | null;
  /** Keeps the market arrays (and the config struct) alive while the handle lives. */
  #market: FhMarket | null;
  readonly #config: FhConfig;
  #queue: Promise<unknown> = Promise.resolve();
  /** Calls accepted and not yet settled. */
  #pending = 0;
  #closed = false;
  #lastEpoch = 0;
  #info: TrainerInfo | null = null;
  /** Buffers handed to the async call in flight: referenced until it settles. */
  #pinned: unknown = null;

  private constructor(lib: NativeLib, handle: TrainerHandle, config: FhConfig, market: FhMarket) {
    this.#lib = lib;
    this.#handle = handle;
    this.#config = config;
    this.#market = market;
  }

  /** Validates the config, copies the market into the native trainer and returns the handle. */
  static async create(cfg: RunConfig, market: PreparedMarket, opts: CreateOptions = {}): Promise<NativeTrainer> {
    const backend = resolveBackend(opts.backend ?? cfg.gpu.backend, opts.libDir);
    const lib = loadNative(backend, opts.libDir);
    const config = toNativeConfig(cfg, backend);
    if (opts.nativeFaultHook === true) config.fault_hook = 1;
    const nativeMarket = toNativeMarket(market);
    const err = Buffer.alloc(ERR_LEN);
    const validated = lib.fh_validate_config(config, err, ERR_LEN);
    if (validated !== FhStatus.OK) throw errorFor(lib, validated, cString(err), 'invalid trainer config');
    const out: [TrainerHandle | null] = [null];
    const status = await lib.async.fh_trainer_create(config, nativeMarket, out, err, ERR_LEN);
    if (status !== FhStatus.OK || out[0] === null) {
      throw errorFor(lib, status === FhStatus.OK ? FhStatus.ERR_INTERNAL : status, cString(err), 'cannot create trainer');
    }
    const trainer = new NativeTrainer(lib, out[0], config, nativeMarket);
    try {
      trainer.info(); // cached now, so info() never calls into a handle that is busy on a worker thread
    } catch (e) {
      trainer.close();
      throw e;
    }
    return trainer;
  }

  /** The library this trainer runs on. */
  get lib(): NativeLib {
    return this.#lib;
  }

  /** The fh_config the trainer was created with. */
  get nativeConfig(): Readonly<FhConfig> {
    return this.#config;
  }

  get closed(): boolean {
    return this.#closed;
  }

  info(): TrainerInfo {
    if (this.#info !== null) return this.#info;
    const handle = this.#requireOpen('info');
    const out: Partial<FhInfo> = {};
    const status = this.#lib.fh_trainer_info(handle, out);
    this.#check(status, 'fh_trainer_info');
    this.#info = infoFromNative(out as FhInfo, this.#lib);
    return this.#info;
  }

  /** One epoch (collect, train, evaluate) on a koffi worker thread. */
  runEpoch(): Promise<EpochStats> {
    return this.#serial('runEpoch', async (handle) => {
      const out: Partial<FhEpochStats> = {};
      const status = await this.#lib.async.fh_trainer_run_epoch(handle, out);
      if (status === FhStatus.ERR_DIVERGED) {
        const msg = this.#lastError(handle);
        const named = /epoch/i.test(msg) ? msg : `epoch ${this.#lastEpoch + 1}: ${msg || 'loss or gradient is not finite'}`;
        throw new TrainerError('DIVERGED', status, `training diverged: ${named}`);
      }
      this.#check(status, 'run epoch');
      const stats = statsFromNative(out as FhEpochStats);
      this.#lastEpoch = stats.epoch;
      return stats;
    });
  }

  /** Everything needed for a bit-exact resume, as one buffer (size query, then save). */
  saveCheckpoint(): Promise<Buffer> {
    return this.#serial('saveCheckpoint', async (handle) => {
      const size: [number | bigint] = [0];
      this.#check(this.#lib.fh_trainer_checkpoint_size(handle, size), 'checkpoint size');
      const cap = toNumber(size[0]);
      const buf = Buffer.alloc(cap);
      const written: [number | bigint] = [0];
      this.#pinned = buf;
      const status = await this.#lib.async.fh_trainer_save_checkpoint(handle, buf, cap, written);
      this.#check(status, 'save checkpoint');
      const n = toNumber(written[0]);
      return n === cap ? buf : buf.subarray(0, n);
    });
  }

  /** Restores a checkpoint. `buf` must not be modified until the promise settles. */
  loadCheckpoint(buf: Uint8Array): Promise<void> {
    return this.#serial('loadCheckpoint', async (handle) => {
      this.#pinned = buf;
      const status = await this.#lib.async.fh_trainer_load_checkpoint(handle, buf, buf.byteLength);
      this.#check(status, 'load checkpoint');
      this.#lastEpoch = 0;
    });
  }

  /**
   * Runs `fn` with the raw handle once every earlier call on this trainer has settled (for the
   * narrow test entry points of foxhunt.h). The handle must not escape `fn`.
   */
  withHandle<T>(what: string, fn: (handle: TrainerHandle, lib: NativeLib) => Promise<T> | T): Promise<T> {
    return this.#serial(what, async (handle) => fn(handle, this.#lib));
  }

  /** Throws a TrainerError for a non-OK status of a call on this handle. */
  check(status: number, context: string): void {
    this.#check(status, context);
  }

  /**
   * Frees the native trainer. Idempotent. Calls made before close() still run to completion (the
   * handle is destroyed once they have settled); calls made after it reject.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const destroy = (): void => {
      const handle = this.#handle;
      this.#handle = null;
      this.#market = null;
      if (handle !== null) this.#lib.fh_trainer_destroy(handle);
    };
    if (this.#pending === 0) destroy();
    else void this.#queue.then(destroy, destroy);
  }

  /* --- internals --- */

  #requireOpen(what: string): TrainerHandle {
    if (this.#closed || this.#handle === null) {
      throw new TrainerError('INTERNAL', FhStatus.ERR_INVALID_ARGUMENT, `${what}: the trainer is closed`);
    }
    return this.#handle;
  }

  #serial<T>(what: string, fn: (handle: TrainerHandle) => Promise<T>): Promise<T> {
    if (this.#closed || this.#handle === null) {
      return Promise.reject(new TrainerError('INTERNAL', FhStatus.ERR_INVALID_ARGUMENT, `${what}: the trainer is closed`));
    }
    this.#pending++;
    const run = async (): Promise<T> => {
      try {
        const handle = this.#handle;
        if (handle === null) throw new TrainerError('INTERNAL', FhStatus.ERR_INVALID_ARGUMENT, `${what}: the trainer is closed`);
        return await fn(handle);
      } finally {
        this.#pending--;
        this.#pinned = null;
      }
    };
    const result = this.#queue.then(run, run);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #lastError(handle: TrainerHandle): string {
    return this.#lib.fh_trainer_last_error(handle) ?? '';
  }

  #check(status: number, context: string): void {
    if (status === FhStatus.OK) return;
    const handle = this.#handle;
    throw errorFor(this.#lib, status, handle !== null ? this.#lastError(handle) : '', context);
  }
}
