// ASHA Lua scripts directly against Redis with synthetic metrics, checked against a reference
// computation of the same rule written here.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cancelSweepState, decideAtRung, decisionLog, releaseTrial } from '../../src/sweep/asha.js';
import { allSweepKeys, sweepKeys } from '../../src/sweep/keys.js';
import { mulberry32 } from '../../src/sweep/sampler.js';

const url = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
let redis: Redis;
const prefix = `fhtest-${randomBytes(4).toString('hex')}`;
const used: string[] = [];

beforeAll(() => { redis = new Redis(url); });
afterAll(async () => {
  if (used.length > 0) await redis.del(...used);
  await redis.quit();
});

async function makeSweep(id: string, runIds: string[], cap: number, rungs: number[]): Promise<ReturnType<typeof sweepKeys>> {
  const k = sweepKeys(id, prefix);
  used.push(...allSweepKeys(id, rungs, prefix));
  await redis.hset(k.record, 'status', 'running');
  for (const [i, r] of runIds.entries()) {
    if (i < cap) { await redis.hset(k.status, r, 'queued'); await redis.sadd(k.active, r); }
    else { await redis.hset(k.status, r, 'pending'); await redis.rpush(k.pending, r); }
  }
  return k;
}

/** Reference ASHA: keep iff fewer than ceil(n/eta) earlier-or-equal arrivals are strictly better. */
function referenceDecision(seen: number[], score: number, eta: number): 'continue' | 'prune' {
  const all = [...seen, score];
  const better = all.filter((s) => s > score).length;
  return better < Math.ceil(all.length / eta) ? 'continue' : 'prune';
}

describe('ASHA rung script', () => {
  it('matches the reference over many trials arriving in random order (maximise)', async () => {
    const eta = 3;
    const rand = mulberry32(42);
    const runs = Array.from({ length: 40 }, (_, i) => `run-${i}`);
    const k = await makeSweep('asha-max', runs, 40, [1, 3, 9]);
    const quality = new Map(runs.map((r) => [r, rand() * 4 - 2]));
    const alive = new Set(runs);
    const seenAt = new Map<number, number[]>();
    for (const rung of [1, 3, 9]) {
      const order = [...alive].sort(() => rand() - 0.5);
      for (const run of order) {
        const metric = (quality.get(run) ?? 0) + rung * 0.01 + (rand() - 0.5) * 0.1;
        const seen = seenAt.get(rung) ?? [];
        const want = referenceDecision(seen, metric, eta);
        seen.push(metric);
        seenAt.set(rung, seen);
        const got = await decideAtRung(redis, k, { runId: run, rung, metric, goal: 'max', eta, concurrency: 40 });
        expect(got.decision, `${run} at rung ${rung}`).toBe(want);
        expect(got.n).toBe(seen.length);
        if (got.decision === 'prune') alive.delete(run);
      }
    }
    // survivors shrink roughly by eta per rung, and the log holds every decision in order
    const log = await decisionLog(redis, k);
    expect(log.length).toBe([...seenAt.values()].reduce((n, s) => n + s.length, 0));
    expect(alive.size).toBeGreaterThan(0);
    expect(alive.size).toBeLessThan(40 / 3);
    expect(await redis.hget(k.status, log.find((d) => d.decision === 'prune')?.run ?? '')).toBe('pruned');
  });

  it('minimises, treats null as worst, and is idempotent per run and rung', async () => {
    const k = await makeSweep('asha-min', ['a', 'b', 'c', 'd'], 4, [2]);
    const base = { rung: 2, goal: 'min' as const, eta: 2, concurrency: 4 };
    expect((await decideAtRung(redis, k, { ...base, runId: 'a', metric: 5 })).decision).toBe('continue');
    // lower is better: 7 is worse than 5, keep = ceil(2/2) = 1, rank 1 -> prune
    expect((await decideAtRung(redis, k, { ...base, runId: 'b', metric: 7 })).decision).toBe('prune');
    // null is the worst possible: rank 2 of 3, keep 2 -> prune
    const c = await decideAtRung(redis, k, { ...base, runId: 'c', metric: null });
    expect(c).toMatchObject({ decision: 'prune', rank: 2, n: 3, keep: 2 });
    // a repeated delivery returns the first decision and records nothing new
    const again = await decideAtRung(redis, k, { ...base, runId: 'b', metric: -100 });
    expect(again.decision).toBe('prune');
    expect(await redis.zcard(k.rung(2))).toBe(3);
    expect(await redis.llen(k.log)).toBe(3);
    // a better newcomer continues
    expect((await decideAtRung(redis, k, { ...base, runId: 'd', metric: 1 })).decision).toBe('continue');
  });

  it('frees slots for pending trials and completes the sweep when nothing is left', async () => {
    const k = await makeSweep('asha-slots', ['t0', 't1', 't2', 't3'], 2, [1]);
    const base = { rung: 1, goal: 'max' as const, eta: 3, concurrency: 2 };
    expect((await decideAtRung(redis, k, { ...base, runId: 't0', metric: 1 })).decision).toBe('continue');
    const p = await decideAtRung(redis, k, { ...base, runId: 't1', metric: 0 });
    expect(p.decision).toBe('prune');
    expect(p.enqueue).toEqual(['t2']);
    expect(await redis.hget(k.status, 't2')).toBe('queued');
    // t0 fails: the slot goes to t3; failing twice changes nothing
    expect(await releaseTrial(redis, k, { runId: 't0', status: 'failed', concurrency: 2 }))
      .toEqual({ enqueue: ['t3'], sweepDone: false, ended: true });
    expect((await releaseTrial(redis, k, { runId: 't0', status: 'failed', concurrency: 2 })).ended).toBe(false);
    await releaseTrial(redis, k, { runId: 't2', status: 'completed', concurrency: 2 });
    expect(await redis.hget(k.record, 'status')).toBe('running');
    const last = await releaseTrial(redis, k, { runId: 't3', status: 'completed', concurrency: 2 });
    expect(last.sweepDone).toBe(true);
    expect(await redis.hget(k.record, 'status')).toBe('completed');
    // the record's finish time, in the field the sweep store reads
    expect(Number(await redis.hget(k.record, 'finished_ms'))).toBeGreaterThan(0);
    // an ended trial's late rung report changes nothing
    expect((await decideAtRung(redis, k, { ...base, runId: 't3', metric: 9 })).decision).toBe('ended');
  });

  it('a pruned trial completes the sweep with its finish time when it was the last one', async () => {
    // v0 continues and completes; v1, worse at the same rung, is pruned: nothing is left
    const k2 = await makeSweep('asha-last2', ['v0', 'v1'], 2, [1]);
    await decideAtRung(redis, k2, { runId: 'v0', rung: 1, metric: 1, goal: 'max', eta: 3, concurrency: 2 });
    await releaseTrial(redis, k2, { runId: 'v0', status: 'completed', concurrency: 2 });
    const q = await decideAtRung(redis, k2, { runId: 'v1', rung: 1, metric: 0, goal: 'max', eta: 3, concurrency: 2, now: 4321 });
    expect(q).toMatchObject({ decision: 'prune', sweepDone: true });
    expect(await redis.hmget(k2.record, 'status', 'finished_ms')).toEqual(['completed', '4321']);
  });
});

describe('sweep cancel script', () => {
  it('cancels every trial that has not ended, empties the slots, and nothing fills them again', async () => {
    const k = await makeSweep('cancel', ['c0', 'c1', 'c2', 'c3', 'c4'], 2, [1]);
    await releaseTrial(redis, k, { runId: 'c0', status: 'completed', concurrency: 2 }); // c2 takes the slot
    expect(await redis.hget(k.status, 'c2')).toBe('queued');
    const r = await cancelSweepState(redis, k, 777);
    expect(r).toEqual({ before: 'running', held: ['c1', 'c2'], pending: 2 });
    expect(await redis.hmget(k.record, 'status', 'finished_ms')).toEqual(['cancelled', '777']);
    expect(await redis.hgetall(k.status)).toEqual({ c0: 'completed', c1: 'cancelled', c2: 'cancelled', c3: 'cancelled', c4: 'cancelled' });
    expect(await redis.scard(k.active)).toBe(0);
    expect(await redis.llen(k.pending)).toBe(0);
    // a late rung report of a cancelled trial changes nothing; its end does not overwrite cancelled
    expect((await decideAtRung(redis, k, { runId: 'c1', rung: 1, metric: 5, goal: 'max', eta: 3, concurrency: 2 })).decision).toBe('ended');
    expect(await releaseTrial(redis, k, { runId: 'c2', status: 'failed', concurrency: 2 })).toEqual({ enqueue: [], sweepDone: false, ended: false });
    expect(await releaseTrial(redis, k, { runId: null, status: null, concurrency: 2 })).toEqual({ enqueue: [], sweepDone: false, ended: false });
    expect(await redis.hget(k.status, 'c2')).toBe('cancelled');
    expect(await redis.hget(k.record, 'status')).toBe('cancelled');
    // a second cancel changes nothing and says what the sweep was
    expect(await cancelSweepState(redis, k, 999)).toEqual({ before: 'cancelled', held: [], pending: 0 });
    expect(await redis.hget(k.record, 'finished_ms')).toBe('777');
  });

  it('leaves a completed sweep as it is', async () => {
    const k = await makeSweep('cancel-done', ['d0'], 1, []);
    await releaseTrial(redis, k, { runId: 'd0', status: 'completed', concurrency: 1 });
    expect(await redis.hget(k.record, 'status')).toBe('completed');
    expect(await cancelSweepState(redis, k)).toEqual({ before: 'completed', held: [], pending: 0 });
    expect(await redis.hget(k.status, 'd0')).toBe('completed');
  });

  it('a prune in a sweep that is no longer running frees its slot but fills none', async () => {
    const k = await makeSweep('prune-stopped', ['p0', 'p1', 'p2'], 2, [1]);
    await decideAtRung(redis, k, { runId: 'p0', rung: 1, metric: 1, goal: 'max', eta: 3, concurrency: 2 });
    await redis.hset(k.record, 'status', 'completed'); // e.g. marked by hand; p2 still pending
    const d = await decideAtRung(redis, k, { runId: 'p1', rung: 1, metric: 0, goal: 'max', eta: 3, concurrency: 2 });
    expect(d).toMatchObject({ decision: 'prune', enqueue: [], sweepDone: false });
    expect(await redis.hget(k.status, 'p2')).toBe('pending');
    expect(await redis.sismember(k.active, 'p1')).toBe(0);
  });
});
