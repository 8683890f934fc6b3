/**
 * The benchmark driver behind `npm run bench`: warm-up epochs, then measured epochs of a run
 * config; reports the SPEC §7 table (per-phase ms as medians over the measured epochs, env
 * steps/s, samples/s, host syncs per epoch, achieved TFLOP/s against the floor, device name).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { CONFIG_DIR } from '../src/config/load.js';
import type { RunConfig } from '../src/config/schema.js';
import { FoxhuntError } from '../src/errors.js';
import type { NativeBackend, TrainerInfo } from '../src/native/trainer.js';
import type { BackendChoice } from '../src/native/trainer.js';
import { trainLocal } from '../src/trainer/local.js';
import type { LocalTrainOptions } from '../src/trainer/local.js';
import type { EpochStats } from '../src/trainer/scalars.js';
import type { Logger } from 'pino';

/** Measured dense bf16 GEMM rate of an H200 (SPEC §7); used for H100/H200 unless --peak-tflops. */
export const H200_BF16_TFLOPS = 790;

/** `tiny` → config/runs/tiny.toml; an existing path is used as is. */
export function resolveConfigPath(nameOrPath: string, configDir: string = CONFIG_DIR): string {
  if (existsSync(nameOrPath)) return resolve(nameOrPath);
  const named = join(configDir, 'runs', nameOrPath.endsWith('.toml') ? nameOrPath : `${nameOrPath}.toml`);
  if (existsSync(named)) return named;
  throw new FoxhuntError('NOT_FOUND', `no such config file or config/runs/${basename(named)}`, { where: '--config' });
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The peak rate the floor is computed against, in TFLOP/s (null: unknown, floor n/a). */
export function peakTflopsFor(info: TrainerInfo, override?: number): { tflops: number | null; source: string } {
  if (override !== undefined) return { tflops: override, source: '--peak-tflops' };
  if (info.backend === 'cuda' && /H200|H100/i.test(info.deviceName)) {
    return { tflops: H200_BF16_TFLOPS, source: 'measured H200 bf16 rate (SPEC 7)' };
  }
  return { tflops: null, source: info.backend === 'cpu' ? 'no peak rate for the CPU backend' : `no known peak for ${info.deviceName}` };
}

export interface BenchResult {
  backend: NativeBackend;
  device: string;
  config: string;
  config_path: string;
  batch_size: number;
  n_envs: number;
  episode_len: number;
  train_steps: number;
  obs_dim: number;
  n_params: number;
  warmup: number;
  epochs: number;
  epoch_ms: number;
  collect_ms: number;
  train_ms: number;
  eval_ms: number;
  wall_epoch_ms: number;
  env_steps_per_s: number;
  samples_per_s: number;
  host_syncs_per_epoch: number;
  gflop_per_epoch: number;
  tflops_achieved: number;
  gflops_achieved: number;
  peak_tflops: number | null;
  peak_source: string;
  floor_ms: number | null;
  lib_sha256: string;
  lib_version: string;
  engine: string;
  commit: string | null;
  date: string;
}

export interface BenchOptions {
  configPath: string;
  configName: string;
  cfg: RunConfig;
  backend?: BackendChoice;
  epochs: number;
  warmup: number;
  peakTflops?: number;
  log?: Logger;
  libDir?: string;
}

/** $FOXHUNT_COMMIT when set (a copied tree on a GPU host may carry a stale .git), else the checkout's commit. */
function gitCommit(): string | null {
  const fromEnv = process.env['FOXHUNT_COMMIT'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const r = spawnSync('git', ['rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

export async function runBench(opts: BenchOptions): Promise<BenchResult> {
  if (opts.epochs < 1) throw new FoxhuntError('CONFIG_INVALID', 'at least one measured epoch is needed', { where: '--epochs' });
  const stats: EpochStats[] = [];
  const wall: number[] = [];
  let last = 0;
  const train: LocalTrainOptions = {
    epochs: opts.warmup + opts.epochs,
    onStart: () => { last = performance.now(); },
    onEpoch: (s) => {
      const now = performance.now();
      wall.push(now - last);
      last = now;
      stats.push(s);
    },
  };
  if (opts.backend !== undefined) train.backend = opts.backend;
  if (opts.log !== undefined) train.log = opts.log;
  if (opts.libDir !== undefined) train.libDir = opts.libDir;
  const run = await trainLocal(opts.cfg, train);
  const measured = stats.slice(opts.warmup);
  const wallMeasured = wall.slice(opts.warmup);
  const info = run.info;
  const pick = (f: (s: EpochStats) => number | null): number => median(measured.map((s) => f(s) ?? Number.NaN));
  const epochMs = pick((s) => s.total_ms);
  const flops = info.flopsPerEpoch;
  const achieved = epochMs > 0 ? flops / (epochMs / 1e3) : Number.NaN; // FLOP/s
  const peak = peakTflopsFor(info, opts.peakTflops);
  const batch = measured.length > 0 ? pick((s) => s.batch_size) : info.batchSize;
  return {
    backend: info.backend,
    device: info.deviceName,
    config: opts.configName,
    config_path: opts.configPath,
    batch_size: batch,
    n_envs: run.cfg.env.n_envs,
    episode_len: run.cfg.env.episode_len,
    train_steps: run.cfg.train.steps_per_epoch,
    obs_dim: info.obsDim,
    n_params: info.nParams,
    warmup: opts.warmup,
    epochs: measured.length,
    epoch_ms: epochMs,
    collect_ms: pick((s) => s.collect_ms),
    train_ms: pick((s) => s.train_ms),
    eval_ms: pick((s) => s.eval_ms),
    wall_epoch_ms: median(wallMeasured),
    env_steps_per_s: pick((s) => s.env_steps_per_s),
    samples_per_s: pick((s) => s.samples_per_s),
    host_syncs_per_epoch: pick((s) => s.host_syncs),
    gflop_per_epoch: flops / 1e9,
    tflops_achieved: achieved / 1e12,
    gflops_achieved: achieved / 1e9,
    peak_tflops: peak.tflops,
    peak_source: peak.source,
    floor_ms: peak.tflops !== null && peak.tflops > 0 ? (flops / (peak.tflops * 1e12)) * 1e3 : null,
    lib_sha256: info.libSha256,
    lib_version: info.libVersion,
    engine: info.engine,
    commit: gitCommit(),
    date: new Date().toISOString(),
  };
}

function fmt(v: number | null, digits = 1): string {
  if (v === null || !Number.isFinite(v)) return 'n/a';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Milliseconds with at least 3 significant digits (a tiny floor is microseconds). */
function ms(v: number | null): string {
  if (v === null || !Number.isFinite(v)) return 'n/a';
  if (v === 0 || Math.abs(v) >= 1) return fmt(v, 2);
  return v.toPrecision(3);
}

/** A FLOP rate in the unit that reads best. */
function rate(flopsPerS: number): string {
  if (!Number.isFinite(flopsPerS)) return 'n/a';
  return flopsPerS >= 1e12 ? `${fmt(flopsPerS / 1e12, 2)} TFLOP/s` : `${fmt(flopsPerS / 1e9, 2)} GFLOP/s`;
}

/** The human table (SPEC §7). */
export function formatBench(r: BenchResult): string {
  const rows: [string, string][] = [
    ['collect ms', ms(r.collect_ms)],
    ['train ms', ms(r.train_ms)],
    ['eval ms', ms(r.eval_ms)],
    ['epoch ms', ms(r.epoch_ms)],
    ['epoch ms (wall, JS side)', ms(r.wall_epoch_ms)],
    ['env steps/s', fmt(r.env_steps_per_s, 0)],
    ['samples/s', fmt(r.samples_per_s, 0)],
    ['host syncs/epoch', fmt(r.host_syncs_per_epoch, 0)],
    ['GFLOP/epoch', fmt(r.gflop_per_epoch, 3)],
    ['achieved', rate(r.gflops_achieved * 1e9)],
    ['floor', r.floor_ms === null
      ? `n/a (${r.peak_source})`
      : `${ms(r.floor_ms)} ms at ${String(r.peak_tflops)} TFLOP/s (${r.peak_source}); epoch = ${fmt(r.epoch_ms / r.floor_ms, 1)} x floor`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return [
    `foxhunt bench: config ${r.config} (${r.config_path})`,
    `backend ${r.backend}, device ${r.device}, lib ${r.lib_version} ${r.lib_sha256.slice(0, 12)}, commit ${r.commit ?? 'n/a'}`,
    `engine ${r.engine}`,
    `batch ${r.batch_size}, ${r.n_envs} envs x ${r.episode_len} steps, ${r.train_steps} train steps, D ${r.obs_dim}, params ${r.n_params}`,
    `${r.warmup} warm-up + ${r.epochs} measured epochs (medians)`,
    '',
    ...rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`),
  ].join('\n');
}
