/**
 * What the dashboard shows, read from Redis through the fleet's stores (src/redis) and the sweep
 * store (src/sweep): the same objects back the HTML pages and the JSON API.
 */
import type { Redis } from 'ioredis';
import { Keys } from '../redis/keys.js';
import { RunStore } from '../redis/runs.js';
import type { EpochEntry, RunRecord } from '../redis/runs.js';
import { decisionLog } from '../sweep/asha.js';
import type { LoggedDecision } from '../sweep/asha.js';
import { SweepStore } from '../sweep/store.js';
import type { LeaderboardRow, SweepRecord } from '../sweep/store.js';

/** A worker is stale when its heartbeat is older than this. */
export const STALE_MS = 30_000;
/** A worker silent for longer than this is gone: no longer listed or counted. */
export const GONE_MS = 3_600_000;

export interface WorkerView {
  id: string;
  host: string;
  pid: number | null;
  gpuIndex: string;
  gpuUuid: string;
  gpuModel: string;
  gpuMemMb: number | null;
  driver: string;
  backend: string;
  /** idle | busy | quarantined | stale (as reported, or stale when the heartbeat is too old) */
  state: string;
  jobId: string;
  runId: string;
  epoch: number | null;
  quarantined: boolean;
  faults: number;
  heartbeatMs: number;
  ageMs: number;
}

export interface RungSurvival {
  rung: number;
  reached: number;
  continued: number;
  pruned: number;
}

export interface SweepView {
  sweep: SweepRecord;
  leaderboard: LeaderboardRow[];
  rungs: RungSurvival[];
  decisions: LoggedDecision[];
}

export class DashboardData {
  readonly runs: RunStore;
  readonly sweeps: SweepStore;

  constructor(readonly redis: Redis, readonly keys: Keys = new Keys()) {
    this.runs = new RunStore(redis, keys);
    this.sweeps = new SweepStore(redis, keys.prefix);
  }

  async workers(now = Date.now()): Promise<WorkerView[]> {
    const entries = await this.redis.zrange(this.keys.workersIndex(), '0', '-1', 'WITHSCORES');
    const ids: [string, number][] = [];
    for (let i = 0; i + 1 < entries.length; i += 2) {
      const beat = Number(entries[i + 1]);
      if (now - beat <= GONE_MS) ids.push([entries[i] as string, beat]);
    }
    const p = this.redis.pipeline();
    for (const [id] of ids) p.hgetall(this.keys.worker(id));
    const res = (await p.exec()) ?? [];
    return ids.map(([id, score], i) => {
      const h = (res[i]?.[1] ?? {}) as Record<string, string>;
      const heartbeatMs = Number(h['updated_ms'] ?? score);
      const ageMs = Math.max(0, now - heartbeatMs);
      const quarantined = h['quarantined'] === '1' || h['quarantined'] === 'true';
      const reported = h['state'] ?? (Object.keys(h).length === 0 ? 'gone' : 'unknown');
      const state = ageMs > STALE_MS || Object.keys(h).length === 0 ? 'stale' : quarantined ? 'quarantined' : reported;
      return {
        id, host: h['host'] ?? '', pid: h['pid'] ? Number(h['pid']) : null,
        gpuIndex: h['gpu_index'] ?? '', gpuUuid: h['gpu_uuid'] ?? '', gpuModel: h['gpu_model'] ?? '',
        gpuMemMb: h['gpu_mem_mb'] ? Number(h['gpu_mem_mb']) : null, driver: h['driver'] ?? '', backend: h['backend'] ?? '',
        state, jobId: h['job_id'] ?? '', runId: h['run_id'] ?? '', epoch: h['epoch'] ? Number(h['epoch']) : null,
        quarantined, faults: Number(h['faults'] ?? 0), heartbeatMs, ageMs,
      };
    });
  }

  async runList(limit = 200): Promise<RunRecord[]> {
    return this.runs.list(limit);
  }

  async run(id: string, after = 0): Promise<{ run: RunRecord; epochs: EpochEntry[] } | null> {
    const run = await this.runs.get(id);
    if (run === null) return null;
    return { run, epochs: await this.runs.epochs(id, after) };
  }

  async sweepList(): Promise<SweepRecord[]> {
    return this.sweeps.list();
  }

  async sweep(id: string): Promise<SweepView | null> {
    const sweep = await this.sweeps.get(id);
    if (sweep === null) return null;
    const k = this.sweeps.keys(id);
    const [leaderboard, decisions] = await Promise.all([this.sweeps.leaderboard(id, sweep.goal), decisionLog(this.redis, k)]);
    const rungs = sweep.rungs.map((rung) => {
      const at = decisions.filter((d) => d.rung === rung);
      const continued = at.filter((d) => d.decision === 'continue').length;
      return { rung, reached: at.length, continued, pruned: at.length - continued };
    });
    return { sweep, leaderboard, rungs, decisions };
  }
}
