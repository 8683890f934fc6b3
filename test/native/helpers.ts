/**
 * Helpers of the native CPU backend tests: the library, tiny configs and markets built from the
 * data and feature modules (no cache, no files), and a trainer handle that is always destroyed.
 */
import { loadRunConfig } from '../../src/config/load.js';
import type { RunConfig } from '../../src/config/schema.js';
import { makeSplit } from '../../src/data/split.js';
import { generateSynthetic } from '../../src/data/synthetic.js';
import type { PreparedMarket } from '../../src/data/types.js';
import { wilderAtr } from '../../src/features/atr.js';
import { applyNormaliser, computeRawV1, featureNamesV1, fitNormaliser, N_FEATURES_V1 } from '../../src/features/v1.js';
import { cString, FhStatus, loadNative } from '../../src/native/binding.js';
import type { FhConfig, FhEpochStats, FhInfo, FhMarket, NativeLib, TrainerHandle } from '../../src/native/binding.js';
import { toNativeConfig, toNativeMarket } from '../../src/native/trainer.js';
import { mulberry32 } from '../../src/sweep/sampler.js';

export const TINY = 'config/runs/tiny.toml';

export function lib(): NativeLib {
  return loadNative('cpu');
}

export function tinyConfig(sets: string[] = []): RunConfig {
  return loadRunConfig(TINY, sets);
}

export function market(cfg: RunConfig): PreparedMarket {
  const { bars } = generateSynthetic(cfg.data.synthetic, cfg.instrument);
  const n = bars.close.length;
  const atr = wilderAtr(bars, cfg.instrument.tick_size);
  const split = makeSplit(n, cfg.split, bars.sessionStart, cfg.env.window + 2);
  const raw = computeRawV1(bars, atr, false);
  const features = applyNormaliser(raw, N_FEATURES_V1, fitNormaliser(raw, N_FEATURES_V1, split.trainBegin, split.trainEnd));
  return { bars, atr, features, nFeatures: N_FEATURES_V1, featureNames: featureNamesV1(false), split, cacheKey: 'test', cacheHit: false };
}

/** fh_config of a RunConfig, CPU backend, with raw field overrides. */
export function nativeConfig(cfg: RunConfig, overrides: Partial<FhConfig> = {}): FhConfig {
  return { ...toNativeConfig(cfg, 'cpu'), ...overrides };
}

export function nativeMarket(m: PreparedMarket): FhMarket {
  return toNativeMarket(m);
}

/** fh_trainer_create; returns the status and the handle or the error text. */
export function tryCreate(l: NativeLib, cfg: FhConfig, m: FhMarket): { status: number; handle: TrainerHandle | null; error: string } {
  const out: [TrainerHandle | null] = [null];
  const err = Buffer.alloc(512);
  const status = l.fh_trainer_create(cfg, m, out, err, err.length);
  return { status, handle: out[0], error: cString(err) };
}

export function create(l: NativeLib, cfg: FhConfig, m: FhMarket): TrainerHandle {
  const r = tryCreate(l, cfg, m);
  if (r.status !== FhStatus.OK || r.handle === null) throw new Error(`fh_trainer_create: ${r.status} ${r.error}`);
  return r.handle;
}

/** fn with the environment variables of vars set (undefined: unset), restored after, also when fn throws.
 *  The native library reads its FH_* switches when a trainer is created. */
export function withEnv<T>(vars: Record<string, string | undefined>, fn: () => T): T {
  const prev = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  const set = (v: Record<string, string | undefined>) => {
    for (const [k, x] of Object.entries(v)) {
      if (x === undefined) delete process.env[k];
      else process.env[k] = x;
    }
  };
  set(vars);
  try {
    return fn();
  } finally {
    set(prev);
  }
}

/** A trainer of cfg on market m (either library) for fn; destroyed after, also when fn throws. */
export function withTrainer<T>(l: NativeLib, cfg: FhConfig, m: FhMarket, fn: (h: TrainerHandle) => T): T {
  const h = create(l, cfg, m);
  try {
    return fn(h);
  } finally {
    l.fh_trainer_destroy(h);
  }
}

/** A CPU trainer of cfg (the tiny market) for fn, with its obs_dim D and parameter count P; destroyed after. */
export function withCpuTrainer<T>(cfg: RunConfig, fn: (t: { l: NativeLib; h: TrainerHandle; D: number; P: number }) => T): T {
  const l = lib();
  const h = create(l, nativeConfig(cfg), nativeMarket(market(cfg)));
  try {
    const inf = info(l, h);
    return fn({ l, h, D: inf.obs_dim, P: Number(inf.n_params) });
  } finally {
    l.fh_trainer_destroy(h);
  }
}

export function info(l: NativeLib, h: TrainerHandle): FhInfo {
  const out: Partial<FhInfo> = {};
  const s = l.fh_trainer_info(h, out);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_info: ${s}`);
  return out as FhInfo;
}

/** A copy of the trainer's parameters: which 0 = online, 1 = target. */
export function params(l: NativeLib, h: TrainerHandle, which: number): Float32Array {
  const n = Number(info(l, h).n_params);
  const out = new Float32Array(n);
  const s = l.fh_trainer_get_params(h, which, out, n);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_get_params: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return out;
}

export function runEpoch(l: NativeLib, h: TrainerHandle): FhEpochStats {
  const out: Partial<FhEpochStats> = {};
  const s = l.fh_trainer_run_epoch(h, out);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_run_epoch: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return out as FhEpochStats;
}

export async function runEpochAsync(l: NativeLib, h: TrainerHandle): Promise<FhEpochStats> {
  const out: Partial<FhEpochStats> = {};
  const s = await l.async.fh_trainer_run_epoch(h, out);
  if (s !== FhStatus.OK) throw new Error(`fh_trainer_run_epoch: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return out as FhEpochStats;
}

export function saveCheckpoint(l: NativeLib, h: TrainerHandle): Buffer {
  const size: [number | bigint] = [0];
  if (l.fh_trainer_checkpoint_size(h, size) !== FhStatus.OK) throw new Error('checkpoint_size failed');
  const buf = Buffer.alloc(Number(size[0]));
  const written: [number | bigint] = [0];
  const s = l.fh_trainer_save_checkpoint(h, buf, buf.length, written);
  if (s !== FhStatus.OK) throw new Error(`save_checkpoint: ${s} ${l.fh_trainer_last_error(h) ?? ''}`);
  return buf.subarray(0, Number(written[0]));
}

/** Deterministic uniform floats in [0, 1) (mulberry32, the sweep sampler's PRNG). */
export function rng(seed: number): () => number {
  return mulberry32(seed);
}

type Typed = Float32Array | Float64Array | Int32Array | Uint8Array | BigInt64Array;

/** Bitwise equality of two typed arrays; on mismatch, names the first differing index. */
export function firstMismatch(a: Typed, b: Typed): string | null {
  if (a.constructor !== b.constructor || a.length !== b.length) return `shape ${a.constructor.name}(${a.length}) vs ${b.constructor.name}(${b.length})`;
  const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (x.equals(y)) return null;
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) return `index ${i}: ${String(a[i])} vs ${String(b[i])}`;
  }
  return 'bytes differ';
}

/** The CPU checkpoint payload (native/src/cpu/state.cpp), read back for white-box tests. */
export interface CheckpointView {
  epoch: number; envCounter: number; trainStep: number; probeSteps: number;
  bar: Int32Array; act: Uint8Array; done: Uint8Array; reward: Float32Array; account: Float32Array; leaf: Float32Array;
  maxPriority: number;
}

export function parseCheckpoint(ck: Buffer, nParams: number, nEnvs: number, capacity: number): CheckpointView {
  const C = capacity;
  let off = 56;
  const take = <T>(bytes: number, make: (ab: ArrayBuffer) => T): T => {
    const copy = new Uint8Array(bytes);
    copy.set(ck.subarray(off, off + bytes));
    off += bytes;
    return make(copy.buffer);
  };
  const counters = take(32, (ab) => new BigUint64Array(ab));
  off += 4 * 4 * nParams + nEnvs * 72;
  const view: CheckpointView = {
    epoch: Number(counters[0]), envCounter: Number(counters[1]), trainStep: Number(counters[2]), probeSteps: Number(counters[3]),
    bar: take(4 * C, (ab) => new Int32Array(ab)),
    act: take(3 * C, (ab) => new Uint8Array(ab)),
    done: take(C, (ab) => new Uint8Array(ab)),
    reward: take(4 * C, (ab) => new Float32Array(ab)),
    account: take(32 * C, (ab) => new Float32Array(ab)),
    leaf: take(4 * C, (ab) => new Float32Array(ab)),
    maxPriority: 0,
  };
  view.maxPriority = take(4, (ab) => new Float32Array(ab))[0] as number;
  if (off !== ck.length) throw new Error(`checkpoint layout: parsed ${off} of ${ck.length} bytes`);
  return view;
}
