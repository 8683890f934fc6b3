/**
 * The Redis key layout of the fleet: the ONE module that names keys. Everything else (stores, the
 * worker, the producer, the dashboard, sweeps) asks this module for a key and never builds one.
 *
 * Prefix: `fh` by default, `$FOXHUNT_PREFIX` or an explicit prefix (tests use a random one).
 *
 *   <p>:runs                          ZSET   run id, scored by creation time (ms)
 *   <p>:run:<id>                      HASH   the run record (RunRecord in runs.ts):
 *        config (validated JSON), config_hash, seed, lib_sha256, backend, engine, status
 *        (queued|running|completed|failed|cancelled|pruned), committed_epoch, target_epochs,
 *        best_epoch, best_sharpe, sweep_id, job_id, error, worker, created_ms, updated_ms
 *   <p>:run:<id>:epochs               STREAM one entry per committed epoch, ID `<epoch>-1`, so a
 *        second XADD of the same epoch fails. Fields: `scalars` (JSON of flattenScalars),
 *        `worker` (worker id), `ts` (commit time, ms)
 *   <p>:run:<id>:ckpts                HASH   epoch → JSON CheckpointMeta { epoch, size, chunks,
 *        sha256, configHash, nonce, createdMs } of every retained checkpoint
 *   <p>:run:<id>:ckpt:<epoch>:<nonce>:<i>  STRING chunk i of a checkpoint (staged with a TTL by
 *        the writer; the commit makes it persistent; trimmed when no longer retained)
 *   <p>:workers                       ZSET   worker id → last heartbeat (ms)
 *   <p>:worker:<id>                   HASH   heartbeat record (with TTL): host, pid, gpu_index,
 *        gpu_uuid, gpu_model, gpu_mem_mb, driver, backend, state, job_id, run_id, epoch,
 *        quarantined, faults, started_ms, updated_ms
 *
 * BullMQ's own keys (`bull:<queue>:...`) are not ours, except that the commit script reads a
 * job's lock `bull:<queue>:<jobId>:lock` to fence the commit (jobLockKey below).
 */
export const DEFAULT_PREFIX = process.env['FOXHUNT_PREFIX'] ?? 'fh';
export const DEFAULT_BULL_PREFIX = 'bull';

export interface RunKeys {
  record: string;
  epochs: string;
  ckpts: string;
  /** `<base>:ckpt:` — the commit script appends `<epoch>:<nonce>:<i>` to trim old chunks. */
  chunkBase: string;
  chunk(epoch: number, nonce: string, index: number): string;
}

export class Keys {
  readonly prefix: string;
  readonly bullPrefix: string;

  constructor(prefix: string = DEFAULT_PREFIX, bullPrefix: string = DEFAULT_BULL_PREFIX) {
    if (prefix === '' || /[\s{}]/.test(prefix)) throw new Error(`bad Redis key prefix ${JSON.stringify(prefix)}`);
    this.prefix = prefix;
    this.bullPrefix = bullPrefix;
  }

  runsIndex(): string {
    return `${this.prefix}:runs`;
  }

  run(runId: string): RunKeys {
    const b = `${this.prefix}:run:${runId}`;
    const chunkBase = `${b}:ckpt:`;
    return {
      record: b,
      epochs: `${b}:epochs`,
      ckpts: `${b}:ckpts`,
      chunkBase,
      chunk: (epoch, nonce, index) => `${chunkBase}${epoch}:${nonce}:${index}`,
    };
  }

  workersIndex(): string {
    return `${this.prefix}:workers`;
  }

  worker(workerId: string): string {
    return `${this.prefix}:worker:${workerId}`;
  }

  /** BullMQ's lock of an active job: holds the token of the worker processing it. */
  jobLock(queueName: string, jobId: string): string {
    return `${this.bullPrefix}:${queueName}:${jobId}:lock`;
  }

  /** Stream entry ID of an epoch. */
  static epochEntryId(epoch: number): string {
    return `${epoch}-1`;
  }

  /** Epoch of a stream entry ID. */
  static epochOfEntryId(id: string): number {
    return Number(id.split('-')[0]);
  }
}

const RUN_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Run ids are used inside keys: letters, digits, `.`, `_`, `-`; up to 128 characters. */
export function isValidRunId(id: string): boolean {
  return RUN_ID_RE.test(id);
}

export const RUN_ID_PATTERN = RUN_ID_RE;
