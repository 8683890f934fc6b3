/**
 * Shared pieces of the producer's queue commands (producer/commands/{enqueue,runs,show,cancel,
 * export,precompute}.ts): a Redis connection for one command, argument parsing, and following a
 * run live (progress bar on a terminal + one table row per committed epoch).
 */
import cliProgress from 'cli-progress';
import type { Redis } from 'ioredis';
import { FoxhuntError } from '../errors.js';
import { Keys } from '../redis/keys.js';
import { RunStore } from '../redis/runs.js';
import type { RunRecord } from '../redis/runs.js';
import { formatEpochHeader, formatEpochRow } from '../trainer/scalars.js';
import { cliRedis } from './connection.js';

// `foxhunt show RUN | head` closes stdout early: that is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

export function parseIntArg(value: string, flag: string, min = 0): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    throw new FoxhuntError('JOB_INVALID', `expected an integer >= ${min}, got ${JSON.stringify(value)}`, { where: flag });
  }
  return n;
}

/** Runs `fn` with a fresh CLI connection (clear error when Redis is unreachable), then closes it. */
export async function withRedis<T>(fn: (redis: Redis, keys: Keys) => Promise<T>): Promise<T> {
  const redis = await cliRedis();
  try {
    return await fn(redis, new Keys());
  } finally {
    redis.disconnect();
  }
}

const ENDED = new Set(['completed', 'failed', 'cancelled', 'pruned']);

export interface FollowOptions {
  /** Print the header and rows (default true). */
  table?: boolean;
  pollMs?: number;
  /** Progress bar on stdout when it is a terminal (default: auto). */
  progress?: boolean;
  out?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Give up after this long (ms). */
  timeoutMs?: number;
}

/**
 * Follows a run until it ends (completed, failed, cancelled, pruned): prints each epoch row as it
 * is committed. Returns the final record. Epochs committed before the call are printed first.
 */
export async function followRun(redis: Redis, keys: Keys, runId: string, opts: FollowOptions = {}): Promise<RunRecord> {
  const runs = new RunStore(redis, keys);
  const out = opts.out ?? process.stdout;
  const tty = opts.progress ?? out.isTTY === true;
  const pollMs = opts.pollMs ?? 300;
  const deadline = opts.timeoutMs !== undefined ? Date.now() + opts.timeoutMs : Infinity;
  let run = await runs.require(runId);
  const bars = tty ? new cliProgress.MultiBar({
    format: `${runId} {status} epoch {value}/{total} [{bar}] {percentage}% | val Sharpe {sharpe}`,
    hideCursor: true, clearOnComplete: true, stream: out,
  }, cliProgress.Presets.shades_classic) : null;
  const bar = bars?.create(run.targetEpochs, run.committedEpoch, { status: run.status, sharpe: '-' }) ?? null;
  const print = (line: string): void => {
    if (bars !== null) bars.log(`${line}\n`);
    else out.write(`${line}\n`);
  };
  if (opts.table !== false) print(formatEpochHeader());
  let last = 0;
  let lastError = '';
  try {
    for (;;) {
      const entries = await runs.epochs(runId, last);
      for (const e of entries) {
        if (opts.table !== false) print(formatEpochRow(e.scalars));
        last = e.epoch;
      }
      run = await runs.require(runId);
      if (run.error !== null && run.error !== lastError && run.status !== 'completed') {
        lastError = run.error;
        print(`  (${run.status}) ${run.error}`);
      }
      const sharpe = run.bestSharpe;
      bar?.setTotal(run.targetEpochs);
      bar?.update(last, { status: run.status, sharpe: sharpe === null ? '-' : sharpe.toFixed(2) });
      if (ENDED.has(run.status) && last >= run.committedEpoch) return run;
      if (Date.now() > deadline) throw new FoxhuntError('REDIS_UNAVAILABLE', `gave up following run ${runId} (status ${run.status}, epoch ${last})`);
      await new Promise((r) => setTimeout(r, pollMs));
    }
  } finally {
    bars?.update(); // flush rows logged since the last redraw (stop() drops them)
    bars?.stop();
  }
}
