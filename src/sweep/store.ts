/**
 * Sweep records and the leaderboard. A sweep is a parent record plus its trials (ordinary runs
 * whose run record carries sweep_id); this module reads and writes only the sweep's own keys.
 */
import type { Redis } from 'ioredis';
import type { Goal } from './asha.js';
import { sweepIndexKey, sweepKeys } from './keys.js';
import type { Params } from './sampler.js';
import type { ResolvedSweepSpec } from './spec.js';

export type SweepStatus = 'running' | 'completed' | 'cancelled';
export type TrialStatus = 'pending' | 'queued' | 'completed' | 'pruned' | 'failed' | 'cancelled';

export interface SweepRecord {
  id: string;
  name: string;
  status: SweepStatus;
  metric: string;
  goal: Goal;
  maxEpochs: number;
  concurrency: number;
  trials: number;
  eta: number;
  rungs: number[];
  spec: ResolvedSweepSpec;
  createdMs: number;
  finishedMs: number | null;
  /** Set when the sweep completes: the leaderboard's first row and its checkpoint pointer. */
  best: BestRun | null;
}

export interface BestRun {
  runId: string;
  params: Params;
  metric: number | null;
  epochs: number;
  configHash: string;
  /** The full validated run config of the best trial. */
  config: unknown;
  /** The run's latest checkpoint: `foxhunt export <runId> --epoch <epoch>` writes it out. */
  checkpoint: { runId: string; epoch: number } | null;
}

export interface TrialInfo {
  runId: string;
  index: number;
  params: Params;
  configHash: string;
}

export interface LeaderboardRow {
  rank: number;
  runId: string;
  index: number;
  params: Params;
  metric: number | null;
  epochs: number;
  status: TrialStatus;
  configHash: string;
}

/*
  KEYS[1] hashes HASH  KEYS[2] trials ZSET  KEYS[3] params HASH  KEYS[4] status HASH  KEYS[5] pending LIST
  KEYS[6] sweep record HASH
  ARGV[1] config hash  ARGV[2] run id  ARGV[3] trial index  ARGV[4] params JSON
  A trial added to a sweep that is no longer running (cancelled while its sweep job was adding the trials) is
  cancelled at once and never pending.
  Returns { run id holding the hash, 1 if this call added the trial }
*/
const ADD_TRIAL_LUA = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return { redis.call('HGET', KEYS[1], ARGV[1]), 0 }
end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
if redis.call('HGET', KEYS[6], 'status') == 'running' then
  redis.call('HSET', KEYS[4], ARGV[2], 'pending')
  redis.call('RPUSH', KEYS[5], ARGV[2])
else
  redis.call('HSET', KEYS[4], ARGV[2], 'cancelled')
end
return { ARGV[2], 1 }`;

export function encodeSweep(r: SweepRecord): Record<string, string> {
  return {
    id: r.id, name: r.name, status: r.status, metric: r.metric, goal: r.goal,
    max_epochs: String(r.maxEpochs), concurrency: String(r.concurrency), trials: String(r.trials),
    eta: String(r.eta), rungs: JSON.stringify(r.rungs), spec: JSON.stringify(r.spec),
    created_ms: String(r.createdMs), finished_ms: r.finishedMs === null ? '' : String(r.finishedMs),
    best: r.best === null ? '' : JSON.stringify(r.best),
  };
}

export function decodeSweep(h: Record<string, string>): SweepRecord | null {
  if (h['id'] === undefined || h['spec'] === undefined) return null;
  return {
    id: h['id'],
    name: h['name'] ?? '',
    status: (h['status'] ?? 'running') as SweepStatus,
    metric: h['metric'] ?? 'val/sharpe',
    goal: (h['goal'] ?? 'max') as Goal,
    maxEpochs: Number(h['max_epochs']),
    concurrency: Number(h['concurrency']),
    trials: Number(h['trials']),
    eta: Number(h['eta']),
    rungs: JSON.parse(h['rungs'] ?? '[]') as number[],
    spec: JSON.parse(h['spec']) as ResolvedSweepSpec,
    createdMs: Number(h['created_ms']),
    finishedMs: h['finished_ms'] ? Number(h['finished_ms']) : null,
    best: h['best'] ? JSON.parse(h['best']) as BestRun : null,
  };
}

export class SweepStore {
  constructor(readonly redis: Redis, readonly prefix?: string) {}

  keys(id: string): ReturnType<typeof sweepKeys> {
    return sweepKeys(id, this.prefix);
  }

  /** Creates the record unless it exists (idempotent); returns false when it already existed. */
  async create(r: SweepRecord): Promise<boolean> {
    const k = this.keys(r.id);
    const created = await this.redis.hsetnx(k.record, 'id', r.id);
    if (created === 1) {
      await this.redis.multi().hset(k.record, encodeSweep(r)).zadd(sweepIndexKey(this.prefix), r.createdMs, r.id).exec();
    }
    return created === 1;
  }

  async get(id: string): Promise<SweepRecord | null> {
    return decodeSweep(await this.redis.hgetall(this.keys(id).record));
  }

  async list(limit = 200): Promise<SweepRecord[]> {
    const ids = await this.redis.zrevrange(sweepIndexKey(this.prefix), 0, limit - 1);
    const p = this.redis.pipeline();
    for (const id of ids) p.hgetall(this.keys(id).record);
    const rows = (await p.exec()) ?? [];
    return rows.map(([, h]) => decodeSweep((h ?? {}) as Record<string, string>)).filter((r): r is SweepRecord => r !== null);
  }

  async setBest(id: string, best: BestRun | null): Promise<void> {
    await this.redis.hset(this.keys(id).record, 'best', best === null ? '' : JSON.stringify(best));
  }

  async setStatus(id: string, status: SweepStatus): Promise<void> {
    await this.redis.hset(this.keys(id).record, 'status', status, 'finished_ms', status === 'running' ? '' : String(Date.now()));
  }

  /**
   * Adds a trial as pending, atomically, unless its config hash is taken (dedup): then returns
   * the run id that holds the hash. Re-adding the same trial changes nothing.
   */
  async addTrial(id: string, t: TrialInfo & { config: unknown }): Promise<{ runId: string; added: boolean }> {
    const k = this.keys(id);
    const reply = await this.redis.eval(ADD_TRIAL_LUA, 6, k.hashes, k.trials, k.params, k.status, k.pending, k.record,
      t.configHash, t.runId, String(t.index),
      JSON.stringify({ index: t.index, params: t.params, configHash: t.configHash, config: t.config })) as [string, number];
    return { runId: reply[0], added: reply[1] === 1 };
  }

  /** The validated config a trial was planned with. */
  async trialConfig(id: string, runId: string): Promise<unknown> {
    const raw = await this.redis.hget(this.keys(id).params, runId);
    return raw === null ? null : (JSON.parse(raw) as { config?: unknown }).config ?? null;
  }

  async trials(id: string): Promise<TrialInfo[]> {
    const k = this.keys(id);
    const [ids, params] = await Promise.all([this.redis.zrange(k.trials, '0', '-1'), this.redis.hgetall(k.params)]);
    return ids.map((runId) => {
      const p = JSON.parse(params[runId] ?? '{}') as { index?: number; params?: Params; configHash?: string };
      return { runId, index: p.index ?? 0, params: p.params ?? {}, configHash: p.configHash ?? '' };
    });
  }

  async trialStatus(id: string, runId: string): Promise<TrialStatus | null> {
    return (await this.redis.hget(this.keys(id).status, runId)) as TrialStatus | null;
  }

  /**
   * A trial that the cancel script marked cancelled while its last epoch was being committed: the commit made its run
   * completed, so the trial is completed too (from cancelled only; nothing is enqueued, the sweep is cancelled). True
   * when this call changed it.
   */
  async completeCancelledTrial(id: string, runId: string): Promise<boolean> {
    const changed = await this.redis.eval(
      "if redis.call('HGET', KEYS[1], ARGV[1]) == 'cancelled' then redis.call('HSET', KEYS[1], ARGV[1], 'completed') " +
      'return 1 end return 0', 1, this.keys(id).status, runId);
    return changed === 1;
  }

  /** Records a trial's progress between rungs (a rung's report is recorded by the rung script). */
  async recordEpoch(id: string, runId: string, epoch: number, metric: number | null): Promise<void> {
    const k = this.keys(id);
    const prev = Number((await this.redis.hget(k.epochs, runId)) ?? '0');
    const m = this.redis.multi().hset(k.metric, runId, metric === null || !Number.isFinite(metric) ? 'null' : String(metric));
    if (epoch > prev) m.hset(k.epochs, runId, String(epoch));
    await m.exec();
  }

  /** The leaderboard: furthest epoch first, then the metric towards the goal (null last), then index. */
  async leaderboard(id: string, goal: Goal): Promise<LeaderboardRow[]> {
    const k = this.keys(id);
    const [trials, status, epochs, metric] = await Promise.all([
      this.trials(id), this.redis.hgetall(k.status), this.redis.hgetall(k.epochs), this.redis.hgetall(k.metric),
    ]);
    const rows = trials.map((t) => {
      const m = metric[t.runId];
      return {
        rank: 0, runId: t.runId, index: t.index, params: t.params, configHash: t.configHash,
        metric: m === undefined || m === 'null' ? null : Number(m),
        epochs: Number(epochs[t.runId] ?? '0'),
        status: (status[t.runId] ?? 'pending') as TrialStatus,
      };
    });
    const sign = goal === 'max' ? 1 : -1;
    rows.sort((a, b) => b.epochs - a.epochs
      || (a.metric === null ? 1 : 0) - (b.metric === null ? 1 : 0)
      || (a.metric !== null && b.metric !== null ? sign * (b.metric - a.metric) : 0)
      || a.index - b.index);
    rows.forEach((r, i) => { r.rank = i + 1; });
    return rows;
  }
}
