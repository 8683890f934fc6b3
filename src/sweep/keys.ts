/**
 * Redis keys of sweeps, under the same prefix as the fleet's layout (src/redis/keys.ts, `Keys.prefix`).
 * Only sweep state lives here; a trial's run record (with sweep_id), epoch stream and checkpoints
 * are those of an ordinary run.
 *
 *   <p>:sweeps                       ZSET  sweep id, scored by creation time (ms)
 *   <p>:sweep:<id>                   HASH  the sweep record (see SweepRecord in store.ts)
 *   <p>:sweep:<id>:trials            ZSET  run id, scored by trial index
 *   <p>:sweep:<id>:params            HASH  run id → JSON { index, params, configHash }
 *   <p>:sweep:<id>:hashes            HASH  config hash → run id (deduplication)
 *   <p>:sweep:<id>:status            HASH  run id → pending | queued | completed | pruned | failed | cancelled
 *   <p>:sweep:<id>:epochs            HASH  run id → epochs committed
 *   <p>:sweep:<id>:metric            HASH  run id → last value of the sweep metric ('null' if null)
 *   <p>:sweep:<id>:pending           LIST  run ids waiting for a concurrency slot (FIFO)
 *   <p>:sweep:<id>:active            SET   run ids holding a slot (queued or training)
 *   <p>:sweep:<id>:rung:<r>          ZSET  run id → goal-normalised metric at rung r (higher is better)
 *   <p>:sweep:<id>:decisions         HASH  "<run id>:<r>" → JSON decision (idempotent replies)
 *   <p>:sweep:<id>:log               LIST  JSON decisions in the order they were taken
 */
import { DEFAULT_PREFIX } from '../redis/keys.js';

export interface SweepKeys {
  record: string;
  trials: string;
  params: string;
  hashes: string;
  status: string;
  epochs: string;
  metric: string;
  pending: string;
  active: string;
  decisions: string;
  log: string;
  rung(r: number): string;
}

export function sweepIndexKey(prefix = DEFAULT_PREFIX): string {
  return `${prefix}:sweeps`;
}

export function sweepKeys(sweepId: string, prefix = DEFAULT_PREFIX): SweepKeys {
  const b = `${prefix}:sweep:${sweepId}`;
  return {
    record: b,
    trials: `${b}:trials`,
    params: `${b}:params`,
    hashes: `${b}:hashes`,
    status: `${b}:status`,
    epochs: `${b}:epochs`,
    metric: `${b}:metric`,
    pending: `${b}:pending`,
    active: `${b}:active`,
    decisions: `${b}:decisions`,
    log: `${b}:log`,
    rung: (r: number) => `${b}:rung:${r}`,
  };
}

/** Every key of a sweep (for deletion in tests and `sweep delete`). */
export function allSweepKeys(sweepId: string, rungs: readonly number[], prefix = DEFAULT_PREFIX): string[] {
  const k = sweepKeys(sweepId, prefix);
  return [k.record, k.trials, k.params, k.hashes, k.status, k.epochs, k.metric, k.pending, k.active,
    k.decisions, k.log, ...rungs.map((r) => k.rung(r))];
}
