/**
 * The fenced epoch commit (src/redis/lua/commit_epoch.lua) on a real Redis: each epoch lands
 * once, only from the lock holder, in order; checkpoints are chunked, verified and retained
 * (last K and the best); a refused commit leaves nothing behind.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CheckpointStore } from '../../src/redis/checkpoints.js';
import { commitEpoch } from '../../src/redis/commit.js';
import type { EpochCommit } from '../../src/redis/commit.js';
import { RunStore } from '../../src/redis/runs.js';
import { fleetEnv } from './helpers.js';
import type { FleetEnv } from './helpers.js';

let env: FleetEnv;
const runId = 'r1';
const jobId = 'r1.e10';
const token = 'tok-A';

beforeEach(async () => {
  env = fleetEnv();
  await new RunStore(env.redis, env.keys).create({ runId, config: { seed: 1 }, configHash: 'h', seed: 1, targetEpochs: 10 });
  await env.redis.set(env.keys.jobLock(env.queueName, jobId), token);
});
afterEach(async () => env.cleanup());

function commit(epoch: number, over: Partial<EpochCommit> = {}): ReturnType<typeof commitEpoch> {
  return commitEpoch(env.redis, env.keys, {
    runId, queueName: env.queueName, jobId, token, epoch,
    scalars: { 'epoch': epoch, 'val/sharpe': over.scalars?.['val/sharpe'] ?? epoch / 10 },
    checkpoint: Buffer.from(`ckpt-${epoch}`), configHash: 'h', workerId: 'w', keepLast: 2,
    statusAfter: 'running', ...over,
  });
}

async function chunkKeys(): Promise<string[]> {
  return env.redis.keys(`${env.keys.run(runId).chunkBase}*`);
}

describe('commit_epoch.lua', () => {
  it('commits epochs in order, once each, with stream IDs from the epoch', async () => {
    expect(await commit(1)).toEqual({ ok: true, reason: 'ok', committedEpoch: 1 });
    expect(await commit(1)).toEqual({ ok: false, reason: 'duplicate', committedEpoch: 1 });
    expect(await commit(3)).toEqual({ ok: false, reason: 'gap', committedEpoch: 1 });
    expect((await commit(2)).ok).toBe(true);
    const ids = (await env.redis.xrange(env.keys.run(runId).epochs, '-', '+')).map(([id]) => id);
    expect(ids).toEqual(['1-1', '2-1']);
    const run = await new RunStore(env.redis, env.keys).require(runId);
    expect(run.committedEpoch).toBe(2);
    expect(run.status).toBe('running');
  });

  it('refuses a worker whose lock token is gone or replaced, and leaves no staged chunk', async () => {
    await env.redis.set(env.keys.jobLock(env.queueName, jobId), 'tok-B');
    expect(await commit(1)).toEqual({ ok: false, reason: 'lost_lock', committedEpoch: 0 });
    await env.redis.del(env.keys.jobLock(env.queueName, jobId));
    expect((await commit(1)).reason).toBe('lost_lock');
    expect(await env.redis.xlen(env.keys.run(runId).epochs)).toBe(0);
    expect(await chunkKeys()).toEqual([]);
    expect((await commit(1, { token: 'tok-B' })).reason).toBe('lost_lock');
  });

  it('two workers racing on the same epoch: exactly one commit wins', async () => {
    const results = await Promise.all([commit(1), commit(1), commit(1)]);
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => r.reason === 'duplicate')).toHaveLength(2);
    expect(await env.redis.xlen(env.keys.run(runId).epochs)).toBe(1);
    expect(await chunkKeys()).toHaveLength(1);
  });

  it('refuses commits to a cancelled run', async () => {
    await commit(1);
    await new RunStore(env.redis, env.keys).setStatus(runId, 'cancelled');
    expect(await commit(2)).toEqual({ ok: false, reason: 'ended', committedEpoch: 1 });
    expect((await new RunStore(env.redis, env.keys).require(runId)).status).toBe('cancelled');
  });

  it('tracks the best epoch by val Sharpe (null never wins) and keeps the last K plus the best checkpoint', async () => {
    const sharpe = [0.5, 2.0, 1.0, null, 0.3, 0.1];
    for (let e = 1; e <= sharpe.length; e++) {
      const s = sharpe[e - 1] ?? null;
      const r = await commit(e, { scalars: { 'epoch': e, 'val/sharpe': s } });
      expect(r.ok).toBe(true);
    }
    const run = await new RunStore(env.redis, env.keys).require(runId);
    expect(run.bestEpoch).toBe(2);
    expect(run.bestSharpe).toBe(2.0);
    const store = new CheckpointStore(env.redis, env.keys);
    expect((await store.list(runId)).map((m) => m.epoch)).toEqual([2, 5, 6]);
    expect(await chunkKeys()).toHaveLength(3);
    for (const key of await chunkKeys()) expect(await env.redis.ttl(key)).toBe(-1);
    const meta = await store.meta(runId, 2);
    expect(meta).not.toBeNull();
    if (meta !== null) expect((await store.read(runId, meta)).toString()).toBe('ckpt-2');
  });

  it('chunks large checkpoints and detects a corrupted chunk', async () => {
    const store = new CheckpointStore(env.redis, env.keys, 1000);
    const buf = randomBytes(4500);
    const staged = await store.stage(runId, 1, buf, 'h');
    expect(staged.meta.chunks).toBe(5);
    for (let i = 0; i < 5; i++) expect(await env.redis.ttl(env.keys.run(runId).chunk(1, staged.meta.nonce, i))).toBeGreaterThan(0);
    expect((await store.read(runId, staged.meta)).equals(buf)).toBe(true);
    await env.redis.setrange(env.keys.run(runId).chunk(1, staged.meta.nonce, 3), 10, 'X');
    await expect(store.read(runId, staged.meta)).rejects.toThrow(/sha256/);
    await env.redis.del(env.keys.run(runId).chunk(1, staged.meta.nonce, 4));
    await expect(store.read(runId, staged.meta)).rejects.toThrow(/chunk 4 of 5 is missing/);
  });

  it('a run id cannot be created twice', async () => {
    await expect(new RunStore(env.redis, env.keys).create({ runId, config: {}, configHash: 'x', seed: 1, targetEpochs: 1 }))
      .rejects.toThrow(/already exists/);
  });
});
