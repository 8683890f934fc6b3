/**
 * `foxhunt bench-fleet` (bench/fleet-scaling.ts) on a small batch: `foxhunt-worker --gpus all`
 * with two faked GPUs binds one worker per GPU, a sweep spreads over both, a SIGKILLed GPU worker
 * loses no trial and is restarted by the supervisor, and everything is cleaned up afterwards,
 * also when the bench is interrupted with Ctrl-C.
 */
import { spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatFleetBench, runFleetBench } from '../../bench/fleet-scaling.js';
import { parseWorkerCounts } from '../../producer/commands/bench-fleet.js';
import { libraryExists } from '../../src/native/paths.js';
import { REDIS_URL, ROOT, TINY } from './helpers.js';
import { scanKeys } from '../../src/redis/scan.js';

const native = libraryExists('cpu');
let redis: Redis;

beforeAll(() => {
  redis = new Redis(REDIS_URL);
});
afterAll(async () => {
  await redis.quit();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function keysMatching(pattern: string): Promise<number> {
  return (await scanKeys(redis, pattern)).length;
}

describe('bench-fleet arguments', () => {
  it('parses worker counts and names --workers in errors', () => {
    expect(parseWorkerCounts('1, 2,3,2')).toEqual([1, 2, 3]);
    for (const bad of ['', '0', '1,x', '1.5', '-2']) {
      expect(() => parseWorkerCounts(bad), bad).toThrow(/--workers|worker count/);
    }
  });
});

describe.skipIf(!native)('bench-fleet with the supervisor and two faked GPUs (CPU backend)', () => {
  it('one worker per GPU, the sweep spreads over both, a SIGKILLed worker loses no trial; nothing is left behind', async () => {
    const lines: string[] = [];
    const r = await runFleetBench({
      workers: [2], trials: 4, epochs: 3, configPath: TINY, sets: ['train.steps_per_epoch=256'],
      launch: 'supervisor', killTest: true, redis, url: REDIS_URL, progress: (l) => lines.push(l),
    });
    const row = r.rows[0];
    expect(row?.workers).toBe(2);
    // one worker process per GPU index
    expect(row?.bound.map((b) => b.gpu)).toEqual([0, 1]);
    expect(new Set(row?.bound.map((b) => b.pid)).size).toBe(2);
    // every trial-epoch trained once, spread over both GPUs' workers
    expect(row?.trialEpochs).toBe(12);
    expect(row?.perWorker.map((w) => w.gpu)).toEqual([0, 1]);
    for (const w of row?.perWorker ?? []) expect(w.runs, w.workerId).toBeGreaterThanOrEqual(1);
    expect(row?.perWorker.reduce((s, w) => s + w.runs, 0)).toBe(4);
    expect(row?.perWorker.reduce((s, w) => s + w.epochs, 0)).toBe(12);
    expect(row?.epochsPerMin).toBeGreaterThan(0);
    // the supervisor passed SIGTERM on and exited 0; no keys of the batch remain
    expect(row?.stopExit).toBe(0);
    expect(row?.leftoverKeys).toBe(0);

    const k = r.kill;
    expect(k).not.toBeNull();
    if (k === null) return;
    expect(k.victim.gpu).toBe(1);
    expect(k.victim.epochAtKill).toBeGreaterThanOrEqual(1);
    expect(k.lost).toEqual([]);
    expect(k.completed).toBe(4);
    expect(k.ok).toBe(true);
    expect(k.restartedPid).not.toBeNull();
    expect(k.restartedPid).not.toBe(k.victim.pid);
    // the killed worker committed nothing after its kill: the victim run was finished by others
    expect(k.finishedBy.length).toBeGreaterThan(0);
    expect(k.finishedBy.every((w) => !w.endsWith(`:${k.victim.pid}`))).toBe(true);
    expect(k.leftoverKeys).toBe(0);
    for (const pid of [...(row?.bound ?? []).map((b) => b.pid), k.victim.pid, k.restartedPid ?? 0]) expect(alive(pid), `pid ${pid}`).toBe(false);
    expect(formatFleetBench(r)).toMatch(/PASS: no trial lost/);
  }, 150_000);

  it('Ctrl-C mid-batch stops every worker and removes the batch\'s keys and queues', async () => {
    const p = spawn(process.execPath, ['bin/foxhunt.js', 'bench-fleet', '--workers', '2', '--trials', '4', '--epochs', '40', '--no-kill-test'],
      { cwd: ROOT, env: { ...process.env, REDIS_URL }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    const exited = new Promise<number | null>((res) => p.on('exit', (code) => res(code)));
    const deadline = Date.now() + 90_000;
    const pause = (): Promise<void> => new Promise((res) => setTimeout(res, 100));
    while (!/workers ready/.test(err) && Date.now() < deadline && p.exitCode === null) await pause();
    const prefix = /prefix (fhbench-([0-9a-f]+))/.exec(err);
    const pids = [...(/workers ready: (.*)/.exec(err)?.[1] ?? '').matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    const supervisor = Number(/pids (\d+)/.exec(err)?.[1] ?? 0);
    expect(prefix, err).not.toBeNull();
    expect(pids).toHaveLength(2);
    expect(supervisor).toBeGreaterThan(0);
    // mid-batch: the first epoch of a trial is committed
    while (await keysMatching(`${prefix?.[1]}:run:*:epochs`) === 0 && Date.now() < deadline && p.exitCode === null) await pause();
    expect(await keysMatching(`${prefix?.[1]}:run:*:epochs`), err).toBeGreaterThan(0);
    expect([...pids, supervisor].every(alive)).toBe(true);

    p.kill('SIGINT');
    expect(await exited, err).toBe(130);
    // gone, not just signalled (a killed grandchild may take a moment to be reaped)
    const gone = Date.now() + 5000;
    while ([...pids, supervisor].some(alive) && Date.now() < gone) await pause();
    for (const pid of [...pids, supervisor]) expect(alive(pid), `pid ${pid}`).toBe(false);
    const tag = prefix?.[2] ?? '';
    expect(await keysMatching(`fhbench-${tag}:*`)).toBe(0);
    expect(await keysMatching(`bull:fhbench-epochs-${tag}:*`)).toBe(0);
    expect(await keysMatching(`bull:fhbench-sweeps-${tag}:*`)).toBe(0);
  }, 120_000);
});
