/**
 * The local train loop: config → backend → market → NativeTrainer → epochs. Used by
 * `foxhunt train`, `npm run bench` and the worker's trainer child. No Redis here.
 */
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { pino } from 'pino';
import { resolveGpuProfile } from '../config/load.js';
import type { RunConfig } from '../config/schema.js';
import type { PreparedMarket } from '../data/types.js';
import { FoxhuntError } from '../errors.js';
import { prepareMarket } from '../features/prepare.js';
import { loadNative } from '../native/binding.js';
import type { FhInfo } from '../native/binding.js';
import { NativeTrainer, resolveBackend } from '../native/trainer.js';
import type { BackendChoice, NativeBackend, TrainerInfo } from '../native/trainer.js';
import { flattenScalars } from './scalars.js';
import type { EpochStats, Scalars } from './scalars.js';

/** pino to stderr (stdout is for tables and JSON rows). */
export function stderrLogger(level: string = process.env['FOXHUNT_LOG_LEVEL'] ?? 'info'): Logger {
  return pino({ name: 'foxhunt', level }, pino.destination(2));
}

export interface RunEnvironment {
  /** Root of data files (FOXHUNT_DATA_ROOT, default ./data). */
  dataRoot: string;
  /** Feature cache directory (FOXHUNT_CACHE_DIR, default ./.fxcache). */
  cacheDir: string;
}

export function runEnvironment(): RunEnvironment {
  return {
    dataRoot: resolve(process.env['FOXHUNT_DATA_ROOT'] ?? 'data'),
    cacheDir: resolve(process.env['FOXHUNT_CACHE_DIR'] ?? '.fxcache'),
  };
}

/**
 * Picks the backend (a `--backend` choice wins over the config's gpu.backend; 'auto' = CUDA when
 * available) and overlays the GPU profile for it. The returned config has gpu.backend resolved.
 */
export function resolveRun(cfg: RunConfig, opts: { backend?: BackendChoice; libDir?: string } = {}): { cfg: RunConfig; backend: NativeBackend } {
  const backend = resolveBackend(opts.backend ?? cfg.gpu.backend, opts.libDir);
  let deviceName: string | undefined;
  if (backend === 'cuda') {
    const lib = loadNative('cuda', opts.libDir);
    const info: Partial<FhInfo> = {};
    if (lib.fh_device_info(cfg.gpu.device, info) === 0 && typeof info.device_name === 'string') deviceName = info.device_name;
  }
  const base = structuredClone(cfg);
  base.gpu.backend = backend;
  // An explicit profile of the other kind (e.g. tiny's profile "cpu" run with --backend cuda) is
  // not applied: the run keeps its own [gpu]/[train] values and only the backend changes.
  if (base.gpu.profile !== 'auto' && (base.gpu.profile === 'cpu') !== (backend === 'cpu')) return { cfg: base, backend };
  const withProfile = resolveGpuProfile(base, deviceName !== undefined ? { deviceName } : {});
  withProfile.gpu.backend = backend;
  return { cfg: withProfile, backend };
}

export type PrepareMarketFn = typeof prepareMarket;

/** prepareMarket of src/features/prepare.ts (kept async for callers written before it landed). */
export async function loadPrepareMarket(): Promise<PrepareMarketFn> {
  return prepareMarket;
}

export interface LocalTrainOptions {
  epochs: number;
  backend?: BackendChoice;
  libDir?: string;
  /** Checkpoint to load before the first epoch. */
  resume?: string;
  /** Where to write the checkpoint after the last epoch. */
  checkpointOut?: string;
  log?: Logger;
  env?: RunEnvironment;
  /** A prepared market (skips prepareMarket). */
  market?: PreparedMarket;
  /** Called once the trainer exists, before the first epoch. */
  onStart?(info: TrainerInfo, cfg: RunConfig, market: PreparedMarket): void;
  /** Called after each epoch. */
  onEpoch?(stats: EpochStats, scalars: Scalars, index: number): void;
  /** Stop early (checked between epochs). */
  signal?: AbortSignal;
}

export interface LocalTrainResult {
  cfg: RunConfig;
  info: TrainerInfo;
  epochs: EpochStats[];
  checkpointBytes?: number;
}

/** Runs `epochs` epochs of `cfg` locally. The trainer is closed on every exit path. */
export async function trainLocal(input: RunConfig, opts: LocalTrainOptions): Promise<LocalTrainResult> {
  if (!Number.isInteger(opts.epochs) || opts.epochs < 0) {
    throw new FoxhuntError('CONFIG_INVALID', `must be a non-negative integer, got ${opts.epochs}`, { where: '--epochs' });
  }
  const log = opts.log ?? stderrLogger();
  const resolveOpts: { backend?: BackendChoice; libDir?: string } = {};
  if (opts.backend !== undefined) resolveOpts.backend = opts.backend;
  if (opts.libDir !== undefined) resolveOpts.libDir = opts.libDir;
  const { cfg, backend } = resolveRun(input, resolveOpts);
  log.info({ config: cfg, backend }, 'run config');

  const env = opts.env ?? runEnvironment();
  const market = opts.market ?? prepareMarket(cfg, { dataRoot: env.dataRoot, cacheDir: env.cacheDir, log });
  log.info({ bars: market.bars.close.length, features: market.nFeatures, split: market.split, cacheHit: market.cacheHit }, 'market ready');

  const createOpts: { backend: NativeBackend; libDir?: string } = { backend };
  if (opts.libDir !== undefined) createOpts.libDir = opts.libDir;
  const trainer = await NativeTrainer.create(cfg, market, createOpts);
  try {
    const info = trainer.info();
    log.info({ trainer: info }, 'trainer ready');
    const resume = opts.resume;
    if (resume !== undefined) {
      const buf = await readFile(resume).catch((err: unknown) => {
        throw new FoxhuntError('NOT_FOUND', `cannot read checkpoint: ${(err as Error).message}`, { where: resume, cause: err });
      });
      await trainer.loadCheckpoint(buf);
      log.info({ checkpoint: resume, bytes: buf.length }, 'resumed');
    }
    opts.onStart?.(info, cfg, market);
    const epochs: EpochStats[] = [];
    for (let i = 0; i < opts.epochs; i++) {
      if (opts.signal?.aborted === true) break;
      const stats = await trainer.runEpoch();
      epochs.push(stats);
      opts.onEpoch?.(stats, flattenScalars(stats), i);
    }
    const result: LocalTrainResult = { cfg, info, epochs };
    if (opts.checkpointOut !== undefined) {
      const buf = await trainer.saveCheckpoint();
      await mkdir(dirname(resolve(opts.checkpointOut)), { recursive: true });
      await writeFile(opts.checkpointOut, buf);
      result.checkpointBytes = buf.length;
      log.info({ checkpoint: opts.checkpointOut, bytes: buf.length }, 'checkpoint written');
    }
    return result;
  } finally {
    trainer.close();
  }
}
