// The dashboard server through fastify inject, on a real Redis: auth on every page and API,
// the read-only role, bull-board's two modes, the JSON API, and /metrics as Prometheus text
// whose queue depths equal BullMQ's counts.
import { randomBytes } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FoxhuntError } from '../../src/errors.js';
import { resolveAuth } from '../../src/dashboard/auth.js';
import { buildDashboard } from '../../src/dashboard/server.js';
import { bullConnection } from '../../src/queue/connection.js';
import { Keys } from '../../src/redis/keys.js';
import { writeHeartbeat } from '../../src/redis/workers.js';
import { seedRun, seedSweep, seedWorkers } from './seed.js';
import { deleteKeys } from '../../src/redis/scan.js';

const url = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const keys = new Keys(`fhtest-${tag}`);
const ADMIN = `adm-${tag}`;
const VIEWER = `ro-${tag}`;
let redis: Redis;
let app: FastifyInstance;
let epochsQ: Queue;
let sweepsQ: Queue;
let failer: Worker;
const basic = (token: string): string => `Basic ${Buffer.from(`someone:${token}`).toString('base64')}`;

beforeAll(async () => {
  redis = new Redis(url);
  epochsQ = new Queue(`fhtest-dash-epochs-${tag}`, { connection: bullConnection(url) });
  sweepsQ = new Queue(`fhtest-dash-sweeps-${tag}`, { connection: bullConnection(url) });
  await seedRun(redis, keys, 'dash-run-a', 1, 5);
  await seedRun(redis, keys, 'dash-run-b', 2, 3);
  await seedWorkers(redis, keys);
  await seedSweep(redis, keys, epochsQ, sweepsQ, `dash-sweep-${tag}`);
  // queue states to count: waiting, delayed, prioritized, failed
  await epochsQ.add('x', { n: 1 });
  await epochsQ.add('x', { n: 2 });
  await epochsQ.add('x', { n: 3 }, { delay: 60_000 });
  await epochsQ.add('x', { n: 4 }, { priority: 3 });
  await sweepsQ.add('boom', { n: 5 });
  await sweepsQ.add('boom', { n: 6 });
  failer = new Worker(sweepsQ.name, async (job) => { if (job.name === 'boom') throw new Error('boom'); }, { connection: bullConnection(url) });
  // wait for both failures (not a fixed time: a loaded machine may take longer to start the worker)
  for (const deadline = Date.now() + 45_000; (await sweepsQ.getFailedCount()) < 2;) {
    if (Date.now() > deadline) throw new Error('the two boom jobs did not fail within 45 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  await failer.close();
  app = await buildDashboard({ redis, queues: [epochsQ, sweepsQ], keys, auth: { enabled: true, adminToken: ADMIN, readonlyToken: VIEWER } });
});

afterAll(async () => {
  await app?.close();
  for (const q of [epochsQ, sweepsQ]) { await q.obliterate({ force: true }).catch(() => undefined); await q.close(); }
  await deleteKeys(redis, `${keys.prefix}:*`);
  await redis.quit();
});

const PAGES = ['/', '/runs', '/runs/dash-run-a', '/sweeps', `/sweeps/dash-sweep-${tag}`, '/api/fleet', '/api/runs',
  '/api/runs/dash-run-a', '/api/sweeps', `/api/sweeps/dash-sweep-${tag}`, '/queues', '/queues/api/queues'];

describe('auth', () => {
  it.each(PAGES)('%s is refused without auth or with a wrong token, served with either role', async (path) => {
    const none = await app.inject({ url: path });
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Basic/);
    expect((await app.inject({ url: path, headers: { authorization: 'Bearer nope' } })).statusCode).toBe(401);
    expect((await app.inject({ url: path, headers: { authorization: basic('nope') } })).statusCode).toBe(401);
    expect((await app.inject({ url: path, headers: { authorization: `Bearer ${ADMIN}` } })).statusCode).toBe(200);
    expect((await app.inject({ url: path, headers: { authorization: basic(VIEWER) } })).statusCode).toBe(200);
  });

  it('keeps the read-only role off the admin board and its job actions', async () => {
    expect((await app.inject({ url: '/admin/queues', headers: { authorization: `Bearer ${VIEWER}` } })).statusCode).toBe(403);
    const failed = (await sweepsQ.getFailed())[0];
    expect(failed).toBeDefined();
    const retryPath = `/admin/queues/api/queues/${sweepsQ.name}/${failed!.id}/retry`;
    expect((await app.inject({ method: 'PUT', url: retryPath, headers: { authorization: `Bearer ${VIEWER}` } })).statusCode).toBe(403);
    // the board every role sees is bull-board's read-only mode: it refuses to act
    const ro = await app.inject({ method: 'PUT', url: `/queues/api/queues/${sweepsQ.name}/${failed!.id}/retry`, headers: { authorization: `Bearer ${ADMIN}` } });
    expect(ro.statusCode).toBeGreaterThanOrEqual(400);
    expect(await failed!.getState()).toBe('failed');
    const list = JSON.parse((await app.inject({ url: '/queues/api/queues', headers: { authorization: `Bearer ${VIEWER}` } })).body) as { queues: { name: string; readOnlyMode: boolean }[] };
    expect(list.queues.map((q) => q.name).sort()).toEqual([epochsQ.name, sweepsQ.name].sort());
    expect(list.queues.every((q) => q.readOnlyMode)).toBe(true);
    // the admin can retry from the admin board
    const ok = await app.inject({ method: 'PUT', url: retryPath, headers: { authorization: `Bearer ${ADMIN}` } });
    expect(ok.statusCode).toBe(204);
    expect(await failed!.getState()).not.toBe('failed');
  });

  it('refuses cross-site writes even with valid credentials', async () => {
    const failed = (await sweepsQ.getFailed())[0];
    const path = `/admin/queues/api/queues/${sweepsQ.name}/${failed!.id}/retry`;
    const auth = basic(ADMIN);
    expect((await app.inject({ method: 'PUT', url: path, headers: { authorization: auth, origin: 'https://evil.example' } })).statusCode).toBe(403);
    expect((await app.inject({ method: 'PUT', url: path, headers: { authorization: auth, 'sec-fetch-site': 'cross-site' } })).statusCode).toBe(403);
    expect(await failed!.getState()).toBe('failed');
    // same-origin reads are fine
    expect((await app.inject({ url: '/api/runs', headers: { authorization: auth, origin: 'https://evil.example' } })).statusCode).toBe(200);
  });

  it('allows auth off only on loopback with --no-auth, and needs a token otherwise', () => {
    expect(resolveAuth('127.0.0.1', true, {})).toEqual({ enabled: false });
    expect(() => resolveAuth('0.0.0.0', true, { FOXHUNT_DASHBOARD_TOKEN: 'x' })).toThrow(/only allowed when bound to localhost/);
    expect(() => resolveAuth('127.0.0.1', false, {})).toThrow(FoxhuntError);
    expect(resolveAuth('0.0.0.0', false, { FOXHUNT_DASHBOARD_READONLY_TOKEN: 'r' })).toMatchObject({ enabled: true, readonlyToken: 'r' });
    expect(() => resolveAuth('0.0.0.0', false, { FOXHUNT_DASHBOARD_TOKEN: 'same', FOXHUNT_DASHBOARD_READONLY_TOKEN: 'same' })).toThrow(/differ/);
  });
});

describe('JSON API', () => {
  const get = async (path: string): Promise<unknown> => JSON.parse((await app.inject({ url: path, headers: { authorization: `Bearer ${ADMIN}` } })).body);

  it('serves runs with their epochs (and only newer ones with ?after)', async () => {
    const r = await get('/api/runs/dash-run-a') as { run: { runId: string; committedEpoch: number }; epochs: { epoch: number; scalars: Record<string, number | null> }[] };
    expect(r.run.committedEpoch).toBe(5);
    expect(r.epochs.map((e) => e.epoch)).toEqual([1, 2, 3, 4, 5]);
    expect(r.epochs[2]?.scalars['loss/mean']).toBeCloseTo(1 / 4);
    const after = await get('/api/runs/dash-run-a?after=3') as { epochs: { epoch: number }[] };
    expect(after.epochs.map((e) => e.epoch)).toEqual([4, 5]);
    const list = await get('/api/runs') as { runs: { runId: string }[] };
    expect(list.runs.map((x) => x.runId)).toEqual(expect.arrayContaining(['dash-run-a', 'dash-run-b']));
    expect((await app.inject({ url: '/api/runs/nope', headers: { authorization: `Bearer ${ADMIN}` } })).statusCode).toBe(404);
  });

  it('serves the fleet with states, quarantine and queue counts', async () => {
    const f = await get('/api/fleet') as { workers: { id: string; state: string; quarantined: boolean }[]; queues: { name: string; counts: Record<string, number> }[] };
    expect(f.workers.map((w) => [w.id, w.state]).sort()).toEqual([['gpu-node-1:0', 'busy'], ['gpu-node-1:1', 'idle'], ['gpu-node-1:2', 'quarantined']]);
    expect(f.queues.find((q) => q.name === epochsQ.name)?.counts).toEqual(await epochsQ.getJobCounts());
  });

  it('serves a sweep with its leaderboard and rung survival', async () => {
    const s = await get(`/api/sweeps/dash-sweep-${tag}`) as { sweep: { status: string }; leaderboard: { rank: number; status: string }[]; rungs: { rung: number; reached: number; continued: number }[] };
    expect(s.sweep.status).toBe('completed');
    expect(s.leaderboard.map((r) => r.rank)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(s.rungs.map((r) => r.rung)).toEqual([1, 2]);
    expect(s.rungs[0]?.reached).toBe(6);
    expect(s.rungs[1]?.reached).toBe(s.rungs[0]?.continued);
  });
});

interface Sample { name: string; labels: Record<string, string>; value: number }

/** A strict-enough parser of the Prometheus text format (0.0.4). */
function parsePrometheus(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') {
        expect(['counter', 'gauge', 'histogram', 'summary', 'untyped']).toContain(meta[3]);
        types.set(meta[2] as string, meta[3] as string);
      }
      continue;
    }
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$/.exec(line);
    expect(m, `bad sample line: ${line}`).not.toBeNull();
    const labels: Record<string, string> = {};
    for (const l of (m![3] ?? '').match(/[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"/g) ?? []) {
      const eq = l.indexOf('=');
      labels[l.slice(0, eq)] = l.slice(eq + 2, -1);
    }
    samples.push({ name: m![1] as string, labels, value: Number(m![4]) });
  }
  return { samples, types };
}

describe('/metrics', () => {
  it('is Prometheus text without auth, and its queue depths equal BullMQ getJobCounts', async () => {
    const res = await app.inject({ url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const { samples, types } = parsePrometheus(res.body);
    expect(types.get('foxhunt_queue_jobs')).toBe('gauge');
    expect(types.get('foxhunt_epochs_committed_total')).toBe('counter');
    expect(types.get('foxhunt_epoch_seconds')).toBe('histogram');
    expect(types.get('foxhunt_workers')).toBe('gauge');
    for (const q of [epochsQ, sweepsQ]) {
      const counts = await q.getJobCounts();
      const got = Object.fromEntries(samples.filter((s) => s.name === 'foxhunt_queue_jobs' && s.labels['queue'] === q.name).map((s) => [s.labels['state'], s.value]));
      expect(got).toEqual(counts);
    }
    const epochsQCounts = await epochsQ.getJobCounts();
    expect(epochsQCounts['waiting']).toBeGreaterThanOrEqual(2);
    expect(epochsQCounts['delayed']).toBe(1);
    expect(epochsQCounts['prioritized']).toBe(1);
    expect((await sweepsQ.getJobCounts())['failed']).toBe(1);

    // epochs committed: every stream entry of every run, counted once across scrapes
    const runIds = await redis.zrange(keys.runsIndex(), '0', '-1');
    let entries = 0;
    for (const id of runIds) entries += await redis.xlen(keys.run(id).epochs);
    const committed = (s: Sample[]): number => s.find((x) => x.name === 'foxhunt_epochs_committed_total')?.value ?? -1;
    expect(committed(samples)).toBe(entries);
    const again = parsePrometheus((await app.inject({ url: '/metrics' })).body).samples;
    expect(committed(again)).toBe(entries);
    const count = again.find((x) => x.name === 'foxhunt_epoch_seconds_count')?.value;
    expect(count).toBe(entries);
    const buckets = again.filter((x) => x.name === 'foxhunt_epoch_seconds_bucket');
    for (let i = 1; i < buckets.length; i++) expect(buckets[i]!.value).toBeGreaterThanOrEqual(buckets[i - 1]!.value);
    expect(buckets.find((b) => b.labels['le'] === '0.1')?.value).toBe(0); // seeded epochs take 141..155 ms
    expect(buckets.find((b) => b.labels['le'] === '0.25')?.value).toBe(entries);

    // a worker whose heartbeat stopped 45 s ago is stale
    await writeHeartbeat(redis, keys, { workerId: 'gpu-node-2:0', host: 'gpu-node-2', pid: 1, gpuIndex: 0, gpuUuid: 'GPU-dddd', gpuModel: 'NVIDIA H200',
      gpuMemMb: 1, driver: 'x', backend: 'cuda', state: 'busy', jobId: '', runId: '', epoch: null, quarantined: false, faults: 0,
      startedMs: Date.now() - 90_000, updatedMs: Date.now() - 45_000 });
    const third = parsePrometheus((await app.inject({ url: '/metrics' })).body).samples;
    const workers = Object.fromEntries(third.filter((s) => s.name === 'foxhunt_workers').map((s) => [s.labels['state'], s.value]));
    expect(workers).toEqual({ starting: 0, idle: 1, busy: 1, stopping: 0, quarantined: 1, stale: 1 });
  });

  it('can require auth on /metrics', async () => {
    const locked = await buildDashboard({ redis, queues: [epochsQ], keys, auth: { enabled: true, adminToken: ADMIN }, metricsAuth: true });
    try {
      expect((await locked.inject({ url: '/metrics' })).statusCode).toBe(401);
      expect((await locked.inject({ url: '/metrics', headers: { authorization: `Bearer ${ADMIN}` } })).statusCode).toBe(200);
      expect((await locked.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await locked.close();
    }
  });
});
