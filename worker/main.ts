/**
 * `foxhunt-worker [--gpu N | --gpus all | --cpu] [--concurrency 1] [--health-port P]`
 *
 * Env: REDIS_URL, FOXHUNT_DATA_ROOT, FOXHUNT_CACHE_DIR, FOXHUNT_PREFIX (Redis key prefix),
 * FOXHUNT_EPOCHS_QUEUE / FOXHUNT_SWEEPS_QUEUE (queue names), FOXHUNT_LOCK_MS (job lock, 30000),
 * FOXHUNT_STALLED_MS (stalled-job check, 30000), FOXHUNT_QUARANTINE_AFTER (consecutive trainer
 * faults before the GPU is quarantined, 3), FOXHUNT_KEEP_CHECKPOINTS (last K kept, 3).
 */
import { Command, InvalidArgumentError } from 'commander';
import { pino } from 'pino';
import { libraryExists, libraryPath } from '../src/native/paths.js';
import { redisUrl } from '../src/queue/connection.js';
import { epochsQueueName, sweepsQueueName } from '../src/queue/names.js';
import { Keys } from '../src/redis/keys.js';
import { FleetWorker } from './fleet-worker.js';
import { listGpus } from './gpu.js';
import type { GpuInfo } from './gpu.js';
import { supervise } from './supervisor.js';

const log = pino({ name: 'foxhunt-worker', level: process.env['FOXHUNT_LOG_LEVEL'] ?? 'info' }, pino.destination(2));

function intArg(name: string, min: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
    return n;
  };
}

function envInt(name: string, dflt: number): number {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name}=${v}: expected a positive integer`);
  return n;
}

const program = new Command('foxhunt-worker')
  .description('foxhunt fleet worker: trains epochs jobs from the queue on one GPU (or the CPU backend)')
  .option('--gpu <n>', 'run on GPU n', intArg('--gpu', 0))
  .option('--gpus <which>', '"all": supervise one worker process per visible GPU')
  .option('--cpu', 'use the CPU backend even when GPUs are present')
  .option('--concurrency <n>', 'jobs at once per GPU (only 1 is supported)', intArg('--concurrency', 1), 1)
  .option('--health-port <p>', 'health server port (/healthz, /readyz); 0 = any free port; -1 = off', (v) => Number(v), 9464)
  .option('--health-host <h>', 'health server bind address', '0.0.0.0')
  .showHelpAfterError();

program.parse(process.argv);
const opts = program.opts<{ gpu?: number; gpus?: string; cpu?: boolean; concurrency: number; healthPort: number; healthHost: string }>();

async function main(): Promise<number> {
  const modes = [opts.gpu !== undefined, opts.gpus !== undefined, opts.cpu === true].filter(Boolean).length;
  if (modes > 1) throw new Error('choose one of --gpu N, --gpus all, --cpu');
  if (opts.concurrency !== 1) throw new Error('--concurrency: one job at a time per GPU (run one worker per GPU to scale)');
  if (!Number.isInteger(opts.healthPort) || opts.healthPort < -1 || opts.healthPort > 65535) throw new Error('--health-port must be a port, 0 or -1');
  const healthPort = opts.healthPort === -1 ? null : opts.healthPort;

  if (opts.gpus !== undefined) {
    if (opts.gpus !== 'all') throw new Error('--gpus: only "all" is supported (use --gpu N for one GPU)');
    const gpus = listGpus();
    if (gpus.length === 0) {
      log.warn('--gpus all: no GPU visible; running one CPU worker');
    } else {
      log.info({ gpus: gpus.map((g) => `${g.index}: ${g.model} ${g.uuid}`) }, 'supervising one worker per GPU');
      const pass = ['--health-host', opts.healthHost];
      return supervise(gpus, pass, healthPort, log);
    }
  }

  let gpu: GpuInfo | null = null;
  if (opts.cpu !== true) {
    const gpus = listGpus();
    if (opts.gpu !== undefined) {
      gpu = gpus.find((g) => g.index === opts.gpu) ?? null;
      if (gpu === null) throw new Error(`--gpu ${opts.gpu}: no such GPU (visible: ${gpus.map((g) => g.index).join(', ') || 'none'})`);
    } else {
      gpu = gpus[0] ?? null;
      if (gpu === null) log.info('no GPU visible: using the CPU backend');
    }
  }

  let backend: 'cpu' | 'cuda' = gpu !== null ? 'cuda' : 'cpu';
  if (gpu !== null && !libraryExists('cuda')) {
    log.warn({ lib: libraryPath('cuda'), gpu: gpu.index }, 'the CUDA library is not built (npm run build:native): this GPU\'s worker uses the CPU backend');
    backend = 'cpu';
  }

  const worker = new FleetWorker({
    url: redisUrl(),
    keys: new Keys(),
    epochsQueue: epochsQueueName(),
    sweepsQueue: sweepsQueueName(),
    gpu,
    backend,
    healthPort,
    healthHost: opts.healthHost,
    lockMs: envInt('FOXHUNT_LOCK_MS', 30_000),
    stalledMs: envInt('FOXHUNT_STALLED_MS', 30_000),
    quarantineAfter: envInt('FOXHUNT_QUARANTINE_AFTER', 3),
    keepLast: envInt('FOXHUNT_KEEP_CHECKPOINTS', 3),
    log,
  });

  let stopped: Promise<void> | null = null;
  let onStopped: () => void = () => undefined;
  const done = new Promise<void>((resolve) => { onStopped = resolve; });
  const stop = (signal: string): void => {
    log.info({ signal }, 'signal received');
    stopped ??= worker.stop().finally(onStopped);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception; closing');
    void worker.stop().finally(() => process.exit(1));
  });

  await worker.start();
  await done;
  return 0;
}

main().then((code) => process.exit(code), (err: unknown) => {
  log.fatal({ err: err instanceof Error ? err.message : String(err) }, 'worker failed to start');
  process.stderr.write(`foxhunt-worker: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
