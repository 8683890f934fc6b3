/**
 * docker/healthcheck.mjs, the images' HEALTHCHECK (no curl in them): exit 0 only on HTTP 200 in time.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { ROOT } from './load.js';

const script = join(ROOT, 'docker', 'healthcheck.mjs');

function run(...args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => { stderr += b.toString(); });
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('docker/healthcheck.mjs', () => {
  const server = createServer((req, res) => {
    if (req.url === '/healthz') { res.writeHead(200); res.end('ok'); return; }
    if (req.url === '/readyz') { res.writeHead(503); res.end('gpu quarantined'); return; }
    if (req.url === '/slow') { setTimeout(() => { res.writeHead(200); res.end('late'); }, 2_000); return; }
    res.writeHead(404); res.end();
  });
  let base = '';
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  test('200 is healthy', async () => {
    expect((await run(`${base}/healthz`)).code).toBe(0);
  });
  test('503 is unhealthy and says so', async () => {
    const r = await run(`${base}/readyz`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('503');
  });
  test('an answer later than the timeout is unhealthy', async () => {
    const r = await run(`${base}/slow`, '300');
    expect(r.code).toBe(1);
  });
  test('nothing listening is unhealthy', async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    expect((await run(`http://127.0.0.1:${port}/healthz`)).code).toBe(1);
  });
  test('no URL is a usage error', async () => {
    expect((await run()).code).toBe(2);
  });
});
