/**
 * The worker contract the deployment files rely on (docs/DESIGN.md section 8), on the real
 * `foxhunt-worker` entry point: `--cpu --health-port P` against the local Redis serves /healthz and
 * /readyz with 200 (compose healthchecks, k8s probes), and SIGTERM (what `docker stop` and the
 * kubelet send) makes it exit 0 promptly when it holds no job. Once its trainer has faulted into
 * quarantine, /readyz fails while /healthz still answers: the k8s readiness probe takes the pod out
 * of service and the liveness probe does not restart it.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { loadRunConfig } from '../../src/config/load.js';
import { enqueueEpochs } from '../../src/queue/queues.js';
import { Keys } from '../../src/redis/keys.js';
import { ROOT } from './load.js';
import { deleteKeys } from '../../src/redis/scan.js';
import { exited, freePort, httpGet } from '../fleet/helpers.js';

/** GET with 2 s at most per try (the probes below poll). */
const get = (url: string): Promise<{ status: number; body: string }> => httpGet(url, undefined, 2_000);

async function status(url: string): Promise<number> {
  return (await get(url)).status;
}

async function waitFor(what: string, ok: () => Promise<boolean>, timeoutMs: number, logs: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} within ${timeoutMs} ms; worker output:\n${logs()}`);
}

describe('foxhunt-worker honours the deployment contract', () => {
  const tag = randomUUID().slice(0, 8);
  const prefix = `fhdeploy-${tag}`;
  const epochsQueue = `fh-deploy-epochs-${tag}`;
  const dir = mkdtempSync(join(tmpdir(), 'fh-deploy-'));
  const children: ChildProcess[] = [];

  /** `foxhunt-worker --cpu --health-port P` on this test's key prefix and queues. */
  function startWorker(port: number, extraEnv: Record<string, string> = {}): { child: ChildProcess; output: () => string } {
    let output = '';
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'foxhunt-worker.js'), '--cpu', '--health-port', String(port)], {
      cwd: ROOT,
      env: {
        ...process.env,
        REDIS_URL: 'redis://127.0.0.1:6379',
        FOXHUNT_PREFIX: prefix,
        FOXHUNT_EPOCHS_QUEUE: epochsQueue,
        FOXHUNT_SWEEPS_QUEUE: `fh-deploy-sweeps-${tag}`,
        FOXHUNT_DATA_ROOT: dir,
        FOXHUNT_CACHE_DIR: join(dir, 'cache'),
        ...extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (b: Buffer) => { output += b.toString(); });
    child.stderr?.on('data', (b: Buffer) => { output += b.toString(); });
    children.push(child);
    return { child, output: () => output };
  }

  async function sigtermExitsZero(child: ChildProcess, output: () => string): Promise<number> {
    const t0 = Date.now();
    child.kill('SIGTERM');
    const result = await Promise.race([
      exited(child),
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000)),
    ]);
    expect(result, `worker did not exit within 15 s of SIGTERM:\n${output()}`).not.toBe('timeout');
    expect(result, output()).toEqual({ code: 0, signal: null });
    return Date.now() - t0;
  }

  afterAll(async () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited(child);
      }
    }
    const redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true });
    await redis.connect();
    for (const pattern of [`${prefix}:*`, `bull:${epochsQueue}:*`, `bull:fh-deploy-sweeps-${tag}:*`]) {
      await deleteKeys(redis, pattern);
    }
    await redis.quit();
    rmSync(dir, { recursive: true, force: true });
  });

  test('--cpu --health-port P: /healthz and /readyz answer 200, SIGTERM exits 0 promptly', async () => {
    const port = await freePort();
    const { child, output } = startWorker(port);
    const base = `http://127.0.0.1:${port}`;

    await waitFor('/healthz answers 200', async () => {
      if (child.exitCode !== null) throw new Error(`worker exited with ${child.exitCode}:\n${output()}`);
      return (await status(`${base}/healthz`)) === 200;
    }, 45_000, output);
    await waitFor('/readyz answers 200', async () => (await status(`${base}/readyz`)) === 200, 15_000, output);
    expect(await status(`${base}/healthz`)).toBe(200);
    expect(await status(`${base}/readyz`)).toBe(200);
    expect(await status(`${base}/nope`)).toBe(404);

    expect(await sigtermExitsZero(child, output)).toBeLessThan(15_000);
    // the health server went down with it
    expect(await status(`${base}/healthz`)).toBe(0);
  }, 90_000);

  test('a quarantined worker fails /readyz and stays alive on /healthz', async () => {
    // The worker's own fault hook kills the trainer process at its start; after one fault
    // (FOXHUNT_QUARANTINE_AFTER=1) the worker quarantines its device.
    const faults = join(dir, 'faults');
    writeFileSync(faults, '100');
    const port = await freePort();
    const { child, output } = startWorker(port, { FOXHUNT_TEST_FAULTS_FILE: faults, FOXHUNT_QUARANTINE_AFTER: '1' });
    const base = `http://127.0.0.1:${port}`;
    await waitFor('/readyz answers 200', async () => {
      if (child.exitCode !== null) throw new Error(`worker exited with ${child.exitCode}:\n${output()}`);
      return (await status(`${base}/readyz`)) === 200;
    }, 45_000, output);

    const redis = new Redis({ host: '127.0.0.1', port: 6379, maxRetriesPerRequest: null });
    const queue = new Queue(epochsQueue, { connection: { host: '127.0.0.1', port: 6379, maxRetriesPerRequest: null } });
    try {
      await enqueueEpochs(queue, redis, new Keys(prefix), { runId: `deploy-q-${tag}`, epochs: 2, config: loadRunConfig(join(ROOT, 'config', 'runs', 'tiny.toml')) },
        { attempts: 5, backoffMs: 100 });
      await waitFor('/readyz fails once quarantined', async () => (await status(`${base}/readyz`)) === 503, 60_000, output);
    } finally {
      await queue.close();
      await redis.quit();
    }
    const ready = await get(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.body).toMatch(/quarantined/);
    expect(await status(`${base}/healthz`)).toBe(200);
    expect(child.exitCode).toBeNull();
    await sigtermExitsZero(child, output);
  }, 90_000);
});
