/**
 * The run store: run records, the runs index and each run's epoch stream (layout in keys.ts).
 * Committing an epoch goes through the fenced script (commitEpoch in commit.ts), never through here.
 */
import type { Redis } from 'ioredis';
import { FoxhuntError } from '../errors.js';
import { Keys } from './keys.js';
import { scanKeys } from './scan.js';

export const RUN_STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled', 'pruned'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export interface RunRecord {
  runId: string;
  /** The validated config as stored (JSON-parsed); re-validate with parseRunConfig before use. */
  config: unknown;
  configHash: string;
  seed: number;
  libSha256: string | null;
  backend: string | null;
  /** What the native trainer ran (fh_info.engine) on the last worker that trained the run. */
  engine: string | null;
  status: RunStatus;
  committedEpoch: number;
  targetEpochs: number;
  bestEpoch: number | null;
  bestSharpe: number | null;
  sweepId: string | null;
  jobId: string | null;
  worker: string | null;
  error: string | null;
  createdMs: number;
  updatedMs: number;
}

export interface EpochEntry {
  epoch: number;
  scalars: Record<string, number | null>;
  worker: string;
  ts: number;
}

function numOrNull(v: string | undefined): number | null {
  if (v === undefined || v === '') return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

function strOrNull(v: string | undefined): string | null {
  return v === undefined || v === '' ? null : v;
}

export function parseRunRecord(runId: string, h: Record<string, string>): RunRecord | null {
  if (h['created_ms'] === undefined) return null;
  let config: unknown = null;
  try {
    config = JSON.parse(h['config'] ?? 'null');
  } catch {
    config = null;
  }
  const status = (RUN_STATUSES as readonly string[]).includes(h['status'] ?? '') ? h['status'] as RunStatus : 'failed';
  return {
    runId,
    config,
    configHash: h['config_hash'] ?? '',
    seed: Number(h['seed'] ?? 0),
    libSha256: strOrNull(h['lib_sha256']),
    backend: strOrNull(h['backend']),
    engine: strOrNull(h['engine']),
    status,
    committedEpoch: Number(h['committed_epoch'] ?? 0),
    targetEpochs: Number(h['target_epochs'] ?? 0),
    bestEpoch: numOrNull(h['best_epoch']),
    bestSharpe: numOrNull(h['best_sharpe']),
    sweepId: strOrNull(h['sweep_id']),
    jobId: strOrNull(h['job_id']),
    worker: strOrNull(h['worker']),
    error: strOrNull(h['error']),
    createdMs: Number(h['created_ms']),
    updatedMs: Number(h['updated_ms'] ?? h['created_ms']),
  };
}

function parseEntry(id: string, fields: string[]): EpochEntry {
  const m: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) m[fields[i] as string] = fields[i + 1] as string;
  return {
    epoch: Keys.epochOfEntryId(id),
    scalars: JSON.parse(m['scalars'] ?? '{}') as Record<string, number | null>,
    worker: m['worker'] ?? '',
    ts: Number(m['ts'] ?? 0),
  };
}

export interface NewRun {
  runId: string;
  config: unknown;
  configHash: string;
  seed: number;
  targetEpochs: number;
  sweepId?: string | undefined;
}

export class RunStore {
  constructor(readonly redis: Redis, readonly keys: Keys = new Keys()) {}

  /** Create a run record (status queued, epoch 0); fails if the run id exists. */
  async create(run: NewRun, nowMs = Date.now()): Promise<void> {
    const k = this.keys.run(run.runId);
    const created = await this.redis.hsetnx(k.record, 'created_ms', String(nowMs));
    if (created === 0) {
      throw new FoxhuntError('JOB_INVALID', `run ${run.runId} already exists (continue it with --run ${run.runId})`, { where: 'run-id' });
    }
    await this.redis.multi()
      .hset(k.record, {
        config: JSON.stringify(run.config),
        config_hash: run.configHash,
        seed: String(run.seed),
        status: 'queued',
        committed_epoch: '0',
        target_epochs: String(run.targetEpochs),
        sweep_id: run.sweepId ?? '',
        updated_ms: String(nowMs),
      })
      .zadd(this.keys.runsIndex(), nowMs, run.runId)
      .exec();
  }

  async get(runId: string): Promise<RunRecord | null> {
    const h = await this.redis.hgetall(this.keys.run(runId).record);
    return parseRunRecord(runId, h);
  }

  async require(runId: string): Promise<RunRecord> {
    const r = await this.get(runId);
    if (r === null) throw new FoxhuntError('NOT_FOUND', `no run ${runId} in Redis (prefix ${this.keys.prefix})`, { where: runId });
    return r;
  }

  /** Newest first. */
  async list(limit = 100): Promise<RunRecord[]> {
    const ids = await this.redis.zrevrange(this.keys.runsIndex(), 0, limit - 1);
    if (ids.length === 0) return [];
    const p = this.redis.pipeline();
    for (const id of ids) p.hgetall(this.keys.run(id).record);
    const res = (await p.exec()) ?? [];
    const out: RunRecord[] = [];
    ids.forEach((id, i) => {
      const h = res[i]?.[1] as Record<string, string> | undefined;
      const r = h ? parseRunRecord(id, h) : null;
      if (r) out.push(r);
    });
    return out;
  }

  /** Set fields of the record (snake_case hash fields) and bump updated_ms. */
  async update(runId: string, fields: Record<string, string | number>, nowMs = Date.now()): Promise<void> {
    const flat: Record<string, string> = { updated_ms: String(nowMs) };
    for (const [k, v] of Object.entries(fields)) flat[k] = String(v);
    await this.redis.hset(this.keys.run(runId).record, flat);
  }

  async setStatus(runId: string, status: RunStatus, extra: Record<string, string | number> = {}): Promise<void> {
    await this.update(runId, { status, ...extra });
  }

  /** Every committed epoch, in order (optionally only after epoch `after`). */
  async epochs(runId: string, after = 0): Promise<EpochEntry[]> {
    const start = after > 0 ? `(${Keys.epochEntryId(after)}` : '-';
    const rows = await this.redis.xrange(this.keys.run(runId).epochs, start, '+');
    return rows.map(([id, fields]) => parseEntry(id, fields));
  }

  /** The committed entry of one epoch (1-based), or undefined. */
  async epoch(runId: string, epoch: number): Promise<EpochEntry | undefined> {
    const id = Keys.epochEntryId(epoch);
    const [row] = await this.redis.xrange(this.keys.run(runId).epochs, id, id);
    return row === undefined ? undefined : parseEntry(row[0], row[1]);
  }

  /** Delete a run and everything under it (tests and cleanup). */
  async delete(runId: string): Promise<void> {
    const k = this.keys.run(runId);
    const chunkKeys = await scanKeys(this.redis, `${k.chunkBase}*`);
    await this.redis.del(k.record, k.epochs, k.ckpts, ...chunkKeys);
    await this.redis.zrem(this.keys.runsIndex(), runId);
  }
}
