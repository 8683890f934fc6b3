/**
 * The worker against its own private redis-server: a Redis restart mid-run (AOF on, so no key is
 * lost) is survived by reconnecting, and the run completes with each epoch once; a Redis whose
 * maxmemory-policy may evict keys is refused at startup with a clear message.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { enqueueEpochs } from '../../src/queue/queues.js';
import { RunStore } from '../../src/redis/runs.js';
import { deterministic, fleetEnv, hasRedisServer, privateRedis, referenceScalars, startWorker, tinyConfig, waitUntil } from './helpers.js';
import type { FleetEnv, PrivateRedis } from './helpers.js';

let env: FleetEnv | null = null;
let server: PrivateRedis | null = null;

afterEach(async () => {
  if (server !== null) await server.start().catch(() => undefined);
  await env?.cleanup();
  await server?.stop();
  env = null;
  server = null;
});

describe.skipIf(!hasRedisServer())('worker and Redis', () => {
  it('a Redis restart mid-run: the worker reconnects and the run completes, each epoch once', async () => {
    server = await privateRedis();
    const e = fleetEnv(server.url);
    env = e;
    const w = startWorker(e, { FOXHUNT_LOCK_MS: '10000' });
    const cfg = tinyConfig(['train.steps_per_epoch=160']);
    await enqueueEpochs(e.queue, e.redis, e.keys, { runId: 'restart', epochs: 6, config: cfg });
    const runs = new RunStore(e.redis, e.keys);
    await waitUntil('epoch 2', async () => (await runs.require('restart')).committedEpoch >= 2, 90_000, 20);
    await server.stop();
    await new Promise((r) => setTimeout(r, 1500));
    await server.start();
    const run = await waitUntil('completion', async () => {
      const r = await runs.get('restart');
      return r?.status === 'completed' ? r : null;
    }, 120_000);
    expect(run.committedEpoch).toBe(6);
    const entries = await runs.epochs('restart');
    expect(entries.map((x) => x.epoch)).toEqual([1, 2, 3, 4, 5, 6]);
    const reference = await referenceScalars(cfg, 6, e.cacheDir, e.dataRoot);
    expect(entries.map((x) => deterministic(x.scalars))).toEqual(reference);
    expect(w.proc.exitCode).toBeNull();
  });

  it('refuses a Redis with maxmemory-policy other than noeviction', async () => {
    server = await privateRedis(['--maxmemory-policy', 'allkeys-lru']);
    const e = fleetEnv(server.url);
    env = e;
    const w = startWorker(e);
    const exit = await w.exited;
    expect(exit.code).toBe(1);
    const text = w.log.join('\n');
    expect(text).toMatch(/maxmemory-policy is "allkeys-lru"/);
    expect(text).toMatch(/noeviction/);
  });
});
