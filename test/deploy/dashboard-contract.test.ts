/**
 * The dashboard contract the deployment files rely on: the exact arguments of docker-compose.yml's
 * dashboard service (but bound to loopback here), with both tokens set, serve a public /healthz
 * (container healthcheck, k8s probes) and a public /metrics carrying foxhunt_queue_jobs (the
 * scaler's input) with every metric DESIGN section 8 names, keep every page behind the token, and
 * exit 0 on SIGTERM.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, test } from 'vitest';
import { resolveAuth } from '../../src/dashboard/auth.js';
import { ROOT, at, loadCompose } from './load.js';
import { deleteKeys } from '../../src/redis/scan.js';
import { exited, freePort, httpGet as get } from '../fleet/helpers.js';

describe('foxhunt dashboard as deployed', () => {
  const tag = randomUUID().slice(0, 8);
  const adminToken = `admin-${randomUUID()}`;
  const readonlyToken = `viewer-${randomUUID()}`;
  let child: ChildProcess | undefined;

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited(child);
    }
    const redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: true });
    await redis.connect();
    for (const pattern of [`fhdeploy-${tag}:*`, `bull:fh-deploy-epochs-${tag}:*`, `bull:fh-deploy-sweeps-${tag}:*`]) {
      await deleteKeys(redis, pattern);
    }
    await redis.quit();
  });

  test('the deployed bind address is accepted only with auth on', () => {
    const env = { FOXHUNT_DASHBOARD_TOKEN: adminToken, FOXHUNT_DASHBOARD_READONLY_TOKEN: readonlyToken };
    expect(resolveAuth('0.0.0.0', false, env).enabled).toBe(true);
    expect(() => resolveAuth('0.0.0.0', true, env)).toThrow(/--no-auth/);
    expect(() => resolveAuth('0.0.0.0', false, {})).toThrow(/FOXHUNT_DASHBOARD_TOKEN/);
  });

  test('healthz and metrics public, pages behind the token, SIGTERM exits 0', async () => {
    const command = at(loadCompose(), 'services', 'dashboard', 'command');
    if (!Array.isArray(command)) throw new Error('docker-compose.yml: dashboard.command missing');
    const port = await freePort();
    // Same flags as deployed; loopback instead of 0.0.0.0 so the test listens on nothing else.
    const args = (command as string[]).map((a) => (a === '0.0.0.0' ? '127.0.0.1' : a));
    const portIndex = args.indexOf('--port');
    args[portIndex + 1] = String(port);
    let output = '';
    child = spawn(process.execPath, [join(ROOT, 'bin', 'foxhunt.js'), ...args], {
      cwd: ROOT,
      env: {
        ...process.env,
        REDIS_URL: 'redis://127.0.0.1:6379',
        FOXHUNT_PREFIX: `fhdeploy-${tag}`,
        FOXHUNT_EPOCHS_QUEUE: `fh-deploy-epochs-${tag}`,
        FOXHUNT_SWEEPS_QUEUE: `fh-deploy-sweeps-${tag}`,
        FOXHUNT_DASHBOARD_TOKEN: adminToken,
        FOXHUNT_DASHBOARD_READONLY_TOKEN: readonlyToken,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (b: Buffer) => { output += b.toString(); });
    child.stderr?.on('data', (b: Buffer) => { output += b.toString(); });
    const running = child;
    const base = `http://127.0.0.1:${port}`;

    const deadline = Date.now() + 45_000;
    while ((await get(`${base}/healthz`)).status !== 200) {
      if (running.exitCode !== null) throw new Error(`dashboard exited with ${running.exitCode}:\n${output}`);
      if (Date.now() > deadline) throw new Error(`dashboard /healthz not 200 within 45 s:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const metrics = await get(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.body).toMatch(new RegExp(`^foxhunt_queue_jobs\\{[^}]*queue="fh-deploy-epochs-${tag}"`, 'm'));
    // every metric DESIGN section 8 promises (the histogram as its _bucket series)
    const design = readFileSync(join(ROOT, 'docs', 'DESIGN.md'), 'utf8');
    const fleet = design.slice(design.indexOf('## 8.'));
    const names = [...new Set([...fleet.matchAll(/`(foxhunt_[a-z_]+)(?:\{[^`]*\})?`/g)].map((m) => m[1] ?? ''))];
    expect(names).toEqual(expect.arrayContaining(['foxhunt_queue_jobs', 'foxhunt_epochs_committed_total', 'foxhunt_epoch_seconds', 'foxhunt_workers']));
    for (const n of names) expect(metrics.body, `/metrics lacks ${n}`).toMatch(new RegExp(`^# TYPE ${n} `, 'm'));
    expect(metrics.body).toMatch(/^# TYPE foxhunt_epoch_seconds histogram$/m);
    expect((await get(`${base}/`)).status).toBe(401);
    expect((await get(`${base}/`, 'wrong-token')).status).toBe(401);
    expect((await get(`${base}/`, readonlyToken)).status).toBe(200);

    running.kill('SIGTERM');
    const result = await Promise.race([exited(running), new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 15_000))]);
    expect(result, `dashboard did not exit within 15 s of SIGTERM:\n${output}`).toEqual({ code: 0, signal: null });
  }, 90_000);
});
